"""The order search: the best real order alpha > 1 for a schedule and a target -- a bracketing
scan over integer orders (exact, cheap binomial sums), then safeguarded Newton (Brent as the
fallback) on fractional orders, with A, A', A'' from shared quadrature nodes (``fractional``)."""

import math

import numba
import numpy as np

from .._jit import jit, jit_pair
from .log_a import ALPHA_MAX, _log_a_int_lower, log_a
from .conversion import _from_rdp, _objective, bh_log_delta, schedule_rdp
from .chord import interpolated_min
from .truncated import log_a_int_trunc
from .fractional import _node_cap, _quad_cheap, _refine  # noqa: F401 (_node_cap: read here by pld.curve_bounds)


@jit
def _objective_above(alpha, qs, sigmas, counts, target, mode, bound):
    """``_objective``, or some value >= ``bound`` when the objective is >= ``bound``.

    At an integer order the total sum_i counts_i log A_i is accumulated mechanism by mechanism,
    and each binomial sum stops as soon as one term proves that the total (a sum of non-negative
    parts) puts the objective (increasing in the RDP in both modes) at or above ``bound``. Used
    where only "better than the best so far?" matters: a value returned below ``bound`` is
    exact (the same sums, in the same order, as ``_objective``), and one at or above it is never
    returned as an answer, so the early stop steers the search only.
    """
    if alpha != math.floor(alpha) or alpha > 5000.0 or not bound < math.inf:
        return _objective(alpha, qs, sigmas, counts, target, mode)
    am1 = alpha - 1.0
    if mode == 0:
        r_cap = bound - math.log1p(-1.0 / alpha) + (target + math.log(alpha)) / am1
    else:
        # log delta is also capped by 0.5 log(1 - e^-r) < 0, so no RDP proves it >= 0.
        if not bound < 0.0:
            return _objective(alpha, qs, sigmas, counts, target, mode)
        r_cap = max((bound + math.log(alpha)) / am1 + target - math.log1p(-1.0 / alpha),
                    -math.log(-math.expm1(2.0 * bound)))
    cap = r_cap * am1  # on the total sum_i counts_i log A_i
    if qs.shape[0] == 1:  # (one mechanism: the exact sum, from the top)
        if not (0.0 < qs[0] < 1.0 and counts[0] > 0.0):
            return _objective(alpha, qs, sigmas, counts, target, mode)
        cap = cap / counts[0]
        la = _log_a_int_lower(qs[0], sigmas[0], alpha, max(cap, 0.0) + 1e-9 * abs(cap) + 1e-300)
        v = _from_rdp(alpha, counts[0] * la / am1, target, mode)
        return max(v, bound) if la >= cap else v
    total = 0.0
    for i in range(qs.shape[0]):
        if not counts[i] > 0.0:
            continue
        if not (0.0 < qs[i] < 1.0):
            total += counts[i] * log_a(qs[i], sigmas[i], alpha)
            continue
        rest = (cap - total) / counts[i]
        la, proved = log_a_int_trunc(qs[i], sigmas[i], alpha, max(rest, 0.0) + 1e-9 * abs(rest) + 1e-300)
        total += counts[i] * la
        if proved or la >= rest:
            return max(_from_rdp(alpha, total / am1, target, mode), bound)
    return _from_rdp(alpha, total / am1, target, mode)


# Bracketing grid: integers on a roughly geometric grid (exact, cheap binomial sums), scanned
# upward; fractional orders below 2 are scanned downward only when the best integer is 2.
DEFAULT_GRID = np.array(
    [2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 10.0, 12.0, 14.0, 16.0, 20.0, 24.0, 28.0, 32.0, 40.0,
     48.0, 56.0, 64.0, 80.0, 96.0, 112.0, 128.0, 160.0, 192.0, 224.0, 256.0, 320.0, 384.0,
     448.0, 512.0, 640.0, 768.0, 896.0, 1024.0, 1280.0, 1536.0, 2048.0, 3072.0, 4096.0]
)
LOW_GRID = np.array([1.75, 1.5, 1.25, 1.1, 1.05, 1.02, 1.01, 1.005, 1.002, 1.001])


@jit
def _scan(grid, start, stop, stride, best, ib, qs, sigmas, counts, target, mode):
    """Walk grid[start:stop:stride] from a best (value, index), stopping after 2 successive
    rises; returns the best (value, index) seen. Orders proved worse than the best so far may
    be evaluated only that far (``_objective_above``)."""
    prev = best
    rises = 0
    for i in range(start, stop, stride):
        v = _objective_above(grid[i], qs, sigmas, counts, target, mode, best)
        if v < best:
            best = v
            ib = i
        if v >= prev:
            rises += 1
            if rises >= 2:
                break
        else:
            rises = 0
        prev = v
    return best, ib


@jit
def _objective_capped(alpha, qs, sigmas, counts, target, mode):
    """``_objective`` up to ALPHA_MAX, +inf beyond (past it an integer order is no exact sum but
    a quadrature, whose node count grows like sigma: minutes at sigma = 1e25)."""
    if alpha > ALPHA_MAX:
        return math.inf
    return _objective(alpha, qs, sigmas, counts, target, mode)


@jit
def optimise_order(qs, sigmas, counts, target, mode, refine, xtol):
    """Minimise the objective over real alpha > 1; returns (value, alpha) (``_optimise_order``).
    Mode 1 then takes the Bretagnolle-Huber bound into account, at the smallest RDP (orders
    near 1), where it is tightest."""
    v, a = _optimise_order(qs, sigmas, counts, target, mode, refine, xtol)
    if mode == 0 and v == 0.0:
        return v, a
    # Bretagnolle-Huber at the smallest RDP: order 2 (an exact integer sum) first, then an order
    # near 1 where its quadrature is cheap.  (The order-1 RDP can be a tiny fraction of order 2's:
    # sigma 0.1, q 1e-3, one step, 0.05 against 86.  A skip that assumed a fraction >= 1/8 gave
    # delta(0) = 0.205 but eps(0.205) = 12.6 instead of 0; a skip costs tightness, never soundness.)
    bh2 = bh_log_delta(schedule_rdp(2.0, qs, sigmas, counts))
    goal = v if mode == 1 else target
    if bh2 <= goal:
        return (bh2, 2.0) if mode == 1 else (0.0, 2.0)
    a_bh = LOW_GRID[LOW_GRID.shape[0] - 1]
    if not _quad_cheap(qs, sigmas, counts, 2.0):
        return v, a
    bh = bh_log_delta(schedule_rdp(a_bh, qs, sigmas, counts))
    if bh <= goal:
        return (bh, a_bh) if mode == 1 else (0.0, a_bh)  # eps = 0: the same check as delta's
    return v, a


@jit
def _optimise_order(qs, sigmas, counts, target, mode, refine, xtol):
    """Minimise the objective over real alpha > 1; returns (value, alpha).

    1. Scan the integer grid upward, stopping once the objective has risen at 2 successive
       points (it is quasi-convex in practice; stopping early never costs soundness, since
       every order gives a valid bound). If the best is at 2, scan orders in (1, 2) downward.
    2. Between the best point's grid neighbours, golden-section search over integers
       (cheap exact sums) when the bracket is wide.
    3. If ``refine``: Brent's method over real alpha on the remaining bracket, fractional
       orders being exact here. The best value seen is returned, so each stage can only
       improve on the previous one.
    """
    best, ib = _grid_best(qs, sigmas, counts, target, mode)
    if ib < 0:
        return math.inf, math.nan
    best_a = DEFAULT_GRID[ib]
    w, fw, v, fv, e0 = best_a, best, best_a, best, 0.0
    # fractional orders by quadrature only where it is cheap over the bracket they are taken
    # from: the node count grows like sigma for large sigma and like (the order) / sigma^2 for
    # small sigma, where the chord between the integer orders (``chord.interpolated_min``) still
    # gives a valid (looser) bound in bounded time
    if ib == 0:
        if not _quad_cheap(qs, sigmas, counts, 3.0):
            return interpolated_min(best, best_a, qs, sigmas, counts, target, mode)
        # (v, Brent's third point, is then the scan's last objective value rather than an
        # order -- unchanged from before the split; it only steers Brent's first steps, and
        # every point Brent evaluates is a valid bound)
        best, best_a, lo, hi, v = _below_two(best, best_a, qs, sigmas, counts, target, mode)
    else:
        lo = DEFAULT_GRID[ib - 1]
        hi = DEFAULT_GRID[ib + 1] if ib < DEFAULT_GRID.shape[0] - 1 else min(2.0 * DEFAULT_GRID[ib], ALPHA_MAX)
        best, best_a = _integer_golden(lo, hi, best, best_a, qs, sigmas, counts, target, mode)
        best, best_a, f_lo, f_hi = _settle(best, best_a, qs, sigmas, counts, target, mode)
        lo, hi, w, fw, v, fv, e0 = _brent_start(best, best_a, f_lo, f_hi)
        if not _quad_cheap(qs, sigmas, counts, best_a + 1.0):
            return interpolated_min(best, best_a, qs, sigmas, counts, target, mode)
    if not refine:
        return best, best_a
    fx, x = _refine(lo, hi, best, best_a, w, fw, v, fv, e0, qs, sigmas, counts, target, mode, xtol)
    if fx < best:
        return fx, x
    return best, best_a


# The stages of ``_optimise_order`` below (and ``fractional._refine``) are inlined into it (numba
# IR inlining): one compiled function, as before it was split -- as separate ones they added
# ~25% to its first compile on an empty cache (~4 s).
@jit(inline="always")
def _start_index(qs, sigmas, counts, target, mode):
    """The grid index to start the scan from: the last grid order <= an estimate of the optimal
    order. For small q the RDP is about T alpha q^2 (e^{1/s^2} - 1)/2, so
    eps(alpha) ~ T rho alpha + log(1/delta)/(alpha - 1). Only a starting point: the scan walks
    both ways, and every order is a valid bound.

    For a schedule of several mechanisms the estimate is capped at the smallest order
    1 + 2 s^2 log(1/q) past which one of them has its binomial sum dominated by the top terms
    (q^k e^{k(k-1)/(2 s^2)} grows with k) and its RDP grows like alpha / (2 s^2), not as the
    model says. Erring low is cheap there: a walk up stops 2 orders past the optimum, evaluating
    the orders below it (cheaper sums), while a walk down from too high evaluates every order
    above it in full (each improves on the last, so no early stop applies)."""
    grid = DEFAULT_GRID
    n = grid.shape[0]
    rho = 0.0
    a_break = math.inf
    m = 0
    for i in range(qs.shape[0]):
        if counts[i] > 0.0:
            m += 1
            rho += counts[i] * qs[i] * qs[i] * math.expm1(min(1.0 / (sigmas[i] * sigmas[i]), 700.0)) / 2.0
            if 0.0 < qs[i] < 1.0:
                a_break = min(a_break, 1.0 - 2.0 * sigmas[i] * sigmas[i] * math.log(qs[i]))
    if mode == 0:
        a_est = 1.0 + math.sqrt(max(-target, 1e-3) / max(rho, 1e-300))
    else:
        a_est = 0.5 * (target / max(rho, 1e-300) + 1.0)
    if m > 1:
        a_est = min(a_est, a_break)
    i0 = 0
    while i0 + 1 < n and grid[i0 + 1] <= a_est:
        i0 += 1
    return i0


@jit(inline="always")
def _grid_best(qs, sigmas, counts, target, mode):
    """The best integer order of ``DEFAULT_GRID`` by the scan from ``_start_index``: (value,
    index), the index -1 when no order gives a finite value."""
    grid = DEFAULT_GRID
    n = grid.shape[0]
    i0 = _start_index(qs, sigmas, counts, target, mode)
    best = _objective(grid[i0], qs, sigmas, counts, target, mode)
    ib = i0 if best < math.inf else -1
    # Upward, stopping after 2 successive rises; then downward from the start if nothing
    # above it was better, likewise.
    best, ib = _scan(grid, i0 + 1, n, int(1), best, ib, qs, sigmas, counts, target, mode)
    if ib == i0 or ib < 0:
        best, ib = _scan(grid, i0 - 1, int(-1), int(-1), best, ib, qs, sigmas, counts, target, mode)
    return best, ib


@jit(inline="always")
def _below_two(best, best_a, qs, sigmas, counts, target, mode):
    """Orders below 2 (``LOW_GRID``), downward from the best integer best_a = 2 while they
    improve: (best, best_a, lo, hi, f_last), (lo, hi) the bracket for Brent and f_last the last
    objective value evaluated."""
    hi = 3.0
    lo = LOW_GRID[0]
    for j in range(LOW_GRID.shape[0]):
        a_ = LOW_GRID[j]
        v = _objective(a_, qs, sigmas, counts, target, mode)
        if v < best:
            hi = best_a
            best = v
            best_a = a_
            lo = LOW_GRID[j + 1] if j + 1 < LOW_GRID.shape[0] else 1.0 + 0.5 * (a_ - 1.0)
        else:
            lo = a_
            break
    return best, best_a, lo, hi, v


@jit(inline="always")
def _integer_golden(lo, hi, best, best_a, qs, sigmas, counts, target, mode):
    """Integer golden-section search inside a wide bracket (lo, hi) around the best integer
    best_a: the best (value, order) seen."""
    while hi - lo > 4.0:
        m1 = math.floor(lo + 0.382 * (hi - lo))
        m2 = math.ceil(hi - 0.382 * (hi - lo))
        if m1 <= lo:
            m1 = lo + 1.0
        if m2 >= hi:
            m2 = hi - 1.0
        f1 = _objective_above(m1, qs, sigmas, counts, target, mode, best) if m1 != best_a else best
        f2 = _objective_above(m2, qs, sigmas, counts, target, mode, best) if m2 != best_a else best
        if f1 < best:
            best = f1
            best_a = m1
        if f2 < best:
            best = f2
            best_a = m2
        if f1 <= f2:
            hi = m2
        else:
            lo = m1
        if best_a <= lo or best_a >= hi:
            break
    return best, best_a


@jit(inline="always")
def _settle(best, best_a, qs, sigmas, counts, target, mode):
    """Settle on the best integer: walk to a neighbour while it improves, which leaves a
    bracketing triple (best_a - 1, best_a, best_a + 1) with known values: (best, best_a,
    f_lo, f_hi)."""
    f_lo = _objective(best_a - 1.0, qs, sigmas, counts, target, mode)
    f_hi = _objective_capped(best_a + 1.0, qs, sigmas, counts, target, mode)
    for _ in range(64):
        if f_lo < best and f_lo <= f_hi and best_a - 1.0 > 1.0:
            f_hi = best
            best = f_lo
            best_a -= 1.0
            f_lo = _objective(best_a - 1.0, qs, sigmas, counts, target, mode)
        elif f_hi < best and best_a + 1.0 <= ALPHA_MAX:
            f_lo = best
            best = f_hi
            best_a += 1.0
            f_hi = _objective_capped(best_a + 1.0, qs, sigmas, counts, target, mode)
        else:
            break
    return best, best_a, f_lo, f_hi


@jit(inline="always")
def _brent_start(best, best_a, f_lo, f_hi):
    """Brent's bracket and points from the integer triple (best_a -+ 1, values f_lo, f_hi):
    (lo, hi, w, fw, v, fv, e0). Brent starts from the triple (its first step is then
    parabolic), unless it does not bracket a minimum above alpha = 1."""
    lo = best_a - 1.0
    hi = min(best_a + 1.0, ALPHA_MAX)
    if f_lo <= f_hi:
        w, fw, v, fv = lo, f_lo, hi, f_hi
    else:
        w, fw, v, fv = hi, f_hi, lo, f_lo
    e0 = 2.0
    if not (lo > 1.0 and fv < math.inf and best <= fw):
        lo = max(best_a - 1.0, 1.0 + 0.5 * (best_a - 1.0))
        w, fw, v, fv, e0 = best_a, best, best_a, best, 0.0
    return lo, hi, w, fw, v, fv, e0


def _optimise_points(qs, sigmas, counts, targets, mode, refine, xtol, out_val, out_alpha):
    """``optimise_order`` for independent single-mechanism points."""
    for i in numba.prange(qs.shape[0]):
        q1 = qs[i:i + 1]
        s1 = sigmas[i:i + 1]
        c1 = counts[i:i + 1]
        v, a = optimise_order(q1, s1, c1, targets[i], mode, refine, xtol)
        out_val[i] = v
        out_alpha[i] = a


#: Parallel and serial builds of the same loop: a parallel launch costs more than a few points.
optimise_points, optimise_points_serial = jit_pair(_optimise_points)
PARALLEL_MIN_POINTS = 64
