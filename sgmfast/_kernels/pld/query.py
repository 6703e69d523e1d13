"""δ(eps) and eps(δ) read off a composed (tilted) grid, with their rounding slack, upper or lower.
"""

import math

from .._jit import jit
from ..logmath import EPS64

__all__ = ["suffix_sums", "delta_curve", "delta_direct", "eps_search"]


@jit
def suffix_sums(t, theta_step, step, a_out, b_out):
    """a_out[j] = sum_{k>j} t_k e^{-theta(ell_k-ell_j)}, b_out[j] = sum_{k>j} t_k e^{-(theta+1)(ell_k-ell_j)}."""
    n = t.shape[0]
    ea = math.exp(-theta_step)
    eb = math.exp(-theta_step - step)
    a = 0.0
    b = 0.0
    a_out[n - 1] = 0.0
    b_out[n - 1] = 0.0
    for j in range(n - 2, -1, -1):
        a = (a + t[j + 1]) * ea
        b = (b + t[j + 1]) * eb
        a_out[j] = a
        b_out[j] = b


@jit
def _delta_at(eps, offset, step, theta, log_scale, t, a_s, b_s):
    """(delta_finite(eps), rounding slack) for one eps from the suffix sums."""
    n = t.shape[0]
    x = eps / step - offset
    if x < 0.0:
        # below the grid: all entries count; use index 0 with t_0 included
        j = 0
        base = offset * step
        a = a_s[0] + t[0]
        b = b_s[0] + t[0]
        sc = math.exp(log_scale - theta * base)
        val = sc * (a - math.exp(eps - base) * b)
        rnd = 4.0 * (n + 4) + 2.0 * (abs(log_scale) + abs(theta * base) + abs(eps) + abs(base) + 2.0)
        return max(val, 0.0), rnd * EPS64 * sc * (a + b)
    if x >= n - 1:  # (also keeps a huge eps from overflowing the index)
        return 0.0, 0.0
    j = int(math.floor(x))
    base = (offset + j) * step
    sc = math.exp(log_scale - theta * base)
    a = a_s[j]
    b = b_s[j]
    val = sc * (a - math.exp(eps - base) * b)
    # the suffix sums' ~n u, the exp arguments' rounding (a few u of their terms: not covered by
    # ~n u on a short grid far out, 1.85x measured at n = 12, theta ell = 900), and atom j, left
    # out although its exact loss may lie above eps by the rounding of x (its term <= t_j sc
    # (ell_j - eps)); tests/test_rounding_constants.py
    rnd = 4.0 * (n + 4) + 2.0 * (abs(log_scale) + abs(theta * base) + abs(eps) + abs(base) + 2.0)
    edge = t[j] * sc * 4.0 * (abs(eps) + abs(base) + abs(offset * step))
    return max(val, 0.0), (rnd * sc * (a + b) + edge) * EPS64


@jit
def delta_curve(eps, offset, step, theta, log_scale, t, a_s, b_s, p_inf, inf_err, err_l1, upper, floor, out):
    """Certified δ(eps) bound for each eps (upper or lower), written to out.

    upper: finite + p_inf + inf_err + e^{log_scale - theta eps} err_l1 + slack;
    lower: max(0, finite - inf_err - e^{log_scale - theta eps} err_l1 - slack)
    (inf_err: an absolute error bound; err_l1: one in tilted units).
    The FFT term uses e^{-theta ell} f_eps(ell) <= e^{-theta eps} for ell >= eps, theta >= 0.
    """
    for i in range(eps.shape[0]):
        e = eps[i]
        val, slack = _delta_at(e, offset, step, theta, log_scale, t, a_s, b_s)
        fe = math.exp(log_scale - theta * e) * err_l1
        if upper:
            # below ``floor`` the grid lacks part of the mass above eps: only the trivial bound holds
            out[i] = 1.0 if e < floor else min(1.0, val + p_inf + inf_err + fe + slack)
        else:
            out[i] = 0.0 if e < floor else max(0.0, val - inf_err - fe - slack)


@jit
def delta_direct(eps, offset, step, theta, log_scale, t, p_inf, inf_err, err_l1, upper, floor, out):
    """``delta_curve`` by summing t_k e^{log_scale - theta ell_k} (1 - e^{eps - ell_k}) over the
    atoms above each eps, term by term: O(n) per eps, but no cancellation between
    P(L > eps) and e^eps Q(L > eps), which the suffix sums subtract (their slack is ~n u times
    the mass above eps, too much when eps lies inside the bulk and δ is far smaller).
    Every term is non-negative and computed within a relative (8 + 2 theta |ell|) u, plus an
    absolute 4 u (|ell| + |eps|) times its mass for the rounding of eps - ell; the recursive
    sum adds at most (terms) u of the total."""
    n = t.shape[0]
    for i in range(eps.shape[0]):
        e = eps[i]
        if e < floor:
            out[i] = 1.0 if upper else 0.0
            continue
        k0 = int(min(max(math.floor(e / step) - offset, 0.0), float(n)))
        while k0 < n and (offset + k0) * step <= e:
            k0 += 1
        while k0 > 0 and (offset + k0 - 1) * step > e:
            k0 -= 1
        val = 0.0
        slack = 0.0
        for k in range(k0, n):
            if t[k] > 0.0:
                ell = (offset + k) * step
                w = t[k] * math.exp(log_scale - theta * ell)
                term = w * -math.expm1(e - ell)
                val += term
                slack += term * (8.0 + 2.0 * theta * abs(ell)) * EPS64 + w * 4.0 * (abs(ell) + abs(e)) * EPS64
        if k0 > 0 and t[k0 - 1] > 0.0:
            # the atom just below: its exact loss may lie above eps by the rounding of ell
            ell = (offset + k0 - 1) * step
            slack += t[k0 - 1] * math.exp(log_scale - theta * ell) * 4.0 * (abs(ell) + abs(e)) * EPS64
        slack = (slack + (n - k0 + 2) * EPS64 * val) * 1.01
        fe = math.exp(log_scale - theta * e) * err_l1
        if upper:
            out[i] = min(1.0, val + p_inf + inf_err + fe + slack)
        else:
            out[i] = max(0.0, val - inf_err - fe - slack)


@jit
def _bound_at(e, offset, step, theta, log_scale, t, a_s, b_s, p_inf, inf_err, err_l1, upper, floor):
    if e < floor:
        return math.inf if upper else -math.inf
    val, slack = _delta_at(e, offset, step, theta, log_scale, t, a_s, b_s)
    fe = math.exp(log_scale - theta * e) * err_l1
    if upper:
        return val + p_inf + inf_err + fe + slack
    return val - inf_err - fe - slack


@jit
def eps_search(target, offset, step, theta, log_scale, t, a_s, b_s, p_inf, inf_err, err_l1, upper, floor):
    """Certified bound on eps(target) from a δ bound curve.

    upper: returns some eps >= 0 with delta_upper(eps) <= target (inf if none on
    the grid); lower: some eps with delta_lower(eps) > target, or 0.
    Finds a bracketing bin over grid points (upper: by bisection, the upper curve is a sum of
    non-increasing terms; lower: a strided scan from the top, then bisection), then bisects
    inside it, keeping the invariant (bound > target at the low end, <= target at the high
    end). Every answer is checked at the value returned, so it is valid even where a curve
    is not monotone (it would then only be less tight than the best grid point).
    """
    if upper:
        return _eps_upper(target, offset, step, theta, log_scale, t, a_s, b_s, p_inf, inf_err, err_l1, floor)
    return _eps_lower(target, offset, step, theta, log_scale, t, a_s, b_s, p_inf, inf_err, err_l1, floor)


@jit
def _bisect(lo, hi, target, offset, step, theta, log_scale, t, a_s, b_s, p_inf, inf_err, err_l1, upper, floor):
    """Bisection of [lo, hi] keeping the bound > target at lo and (upper) <= target at hi."""
    for _ in range(64):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        b = _bound_at(mid, offset, step, theta, log_scale, t, a_s, b_s, p_inf, inf_err, err_l1, upper, floor)
        if upper:
            if b <= target:
                hi = mid
            else:
                lo = mid
        elif b > target:
            lo = mid
        else:
            hi = mid
    return lo, hi


@jit
def _eps_upper(target, offset, step, theta, log_scale, t, a_s, b_s, p_inf, inf_err, err_l1, floor):
    n = t.shape[0]
    j0 = max(0, -offset)  # first index with ell >= 0
    if _bound_at(0.0, offset, step, theta, log_scale, t, a_s, b_s, p_inf, inf_err, err_l1, bool(True),
                 floor) <= target:
        return 0.0
    if j0 >= n or _bound_at((offset + n - 1) * step, offset, step, theta, log_scale, t, a_s, b_s, p_inf,
                            inf_err, err_l1, bool(True), floor) > target:
        return math.inf
    lo_j = j0 - 1  # (eps = 0 stands for it: its bound is > target)
    hi_j = n - 1
    while hi_j - lo_j > 1:
        mid_j = (lo_j + hi_j) // 2
        if _bound_at((offset + mid_j) * step, offset, step, theta, log_scale, t, a_s, b_s, p_inf, inf_err,
                     err_l1, bool(True), floor) <= target:
            hi_j = mid_j
        else:
            lo_j = mid_j
    hi = (offset + hi_j) * step
    lo = max(0.0, hi - step)
    return _bisect(lo, hi, target, offset, step, theta, log_scale, t, a_s, b_s, p_inf, inf_err, err_l1, bool(True),
                   floor)[1]


@jit
def _eps_lower(target, offset, step, theta, log_scale, t, a_s, b_s, p_inf, inf_err, err_l1, floor):
    n = t.shape[0]
    j0 = max(0, -offset)  # first index with ell >= 0
    lo_j = -1
    jf = j0  # first grid point at or above the floor (below it the lower bound is trivial)
    if floor > -math.inf:
        jf = max(j0, math.ceil(floor / step) - offset)
        while jf < n and (offset + jf) * step < floor:
            jf += 1
    # The lower curve is not monotone (its error term falls like e^{-theta eps}, so it can be
    # negative low down): scan from the top with a stride for the first point above the
    # target, then bisect between it and the point above it (n: past the grid, where the
    # finite part is 0).
    hi_j = n
    if jf < n:
        stride = max(1, (n - jf) // 2048)
        j = n - 1
        while True:
            if _bound_at((offset + j) * step, offset, step, theta, log_scale, t, a_s, b_s, p_inf, inf_err,
                         err_l1, bool(False), floor) > target:
                lo_j = j
                break
            if j == jf:
                break
            hi_j = j
            j = max(jf, j - stride)
    if lo_j >= 0:
        while hi_j - lo_j > 1:
            mid_j = (lo_j + hi_j) // 2
            if _bound_at((offset + mid_j) * step, offset, step, theta, log_scale, t, a_s, b_s, p_inf, inf_err,
                         err_l1, bool(False), floor) > target:
                lo_j = mid_j
            else:
                hi_j = mid_j
    if lo_j < 0:
        # below the first grid point at or above the floor: from the floor (or 0) up to it
        start = max(floor, 0.0)
        if not _bound_at(start, offset, step, theta, log_scale, t, a_s, b_s, p_inf, inf_err, err_l1, bool(False),
                         floor) > target:
            return 0.0
        lo, hi = start, (offset + min(jf, n)) * step
    else:
        lo = (offset + lo_j) * step
        hi = lo + step
    lo = _bisect(lo, hi, target, offset, step, theta, log_scale, t, a_s, b_s, p_inf, inf_err, err_l1, bool(False),
                 floor)[0]
    return max(lo, 0.0)
