"""Chernoff bounds on sums of iid lattice variables (balls-in-bins' tails, ``pld.samplers.
epoch_tail``): the lattice law's MGF and its derivative at many lam (``chernoff_sums``), the same
for every prefix of the law at once (``chernoff_prefix``: the law truncated at each of several
points), and the bounds' logs rounded up (``chernoff_logs`` for every lam, ``chernoff_least``
for the least over them).

For S the sum of t iid variables of masses w at x_k = k h (a sub-probability law) and any
lam > 0: Q(S > c) <= e^{-lam c} M(lam)^t and E_Q[S / t; S > c] <= e^{-lam c} M'(lam) M(lam)^(t-1),
M(lam) = sum_k w_k e^{lam x_k}, M'(lam) = sum_k w_k x_k e^{lam x_k}."""

import math

import numpy as np

from .._jit import jit
from ..logmath import EPS64

__all__ = ["CHERNOFF_BLOCK", "spread_coarse", "step_bound", "chernoff_sums", "chernoff_prefix", "chernoff_logs",
           "chernoff_least"]

#: Terms of ``chernoff_sums`` between two exact exponentials (the others by one product each).
CHERNOFF_BLOCK = 32
_U = 0.5 * EPS64  # (the unit round-off)


@jit
def chernoff_sums(w, h, lams, m, dm):
    """M(lam) = sum_k w_k e^{lam x_k} and M'(lam) = sum_k w_k x_k e^{lam x_k} (x_k = k h) for
    each lam of ``lams``: the lattice law's MGF and its derivative, for Chernoff bounds
    (``pld.samplers.epoch_chernoff``).  e^{lam x_k} is exp(lam x_k) at every CHERNOFF_BLOCK-th k
    and the one before times e^{lam h} in between: within (2 lam x_k + 2 + 3 j) u for the j-th
    product after an exact one (each product adds the ratio's (2 lam h + 2) u and its own u).
    Plain recursive sums of non-negative terms: each within (w.size - 1) u of its value; so both
    within (w.size + 2 lam x_max + 3 CHERNOFF_BLOCK + 2) u relative.  +inf where a term overflows."""
    ks = np.full(1, w.size - 1, dtype=np.int64)
    _prefix_sums(w, h, lams, ks, m.reshape((1, m.size)), dm.reshape((1, dm.size)), m.reshape((1, m.size)), bool(False))


@jit
def chernoff_prefix(w, h, lams, ks, m, dm, d2m):
    """``chernoff_sums`` of every prefix w[0 .. ks[j]] (ks increasing, below w.size): m[j, i] and
    dm[j, i] for lam = lams[i], by one pass over w per lam, and d2m[j, i] = M''(lam) (only to
    find the best lam: ``chernoff_least``).  m and dm are the same products and sums in the same
    order as ``chernoff_sums`` on that prefix, so within its (ks[j] + 1 + 2 lam ks[j] h +
    3 CHERNOFF_BLOCK + 2) u relative; +inf where a term overflows."""
    _prefix_sums(w, h, lams, ks, m, dm, d2m, bool(True))


@jit
def _prefix_sums(w, h, lams, ks, m, dm, d2m, second):
    """The pass of ``chernoff_sums`` and ``chernoff_prefix`` (d2m written only with ``second``):
    for each lam the products and sums of one walk over w in the order of k, all lams side by
    side (the inner loops run over the lams, which the compiler vectorises; each lam's own
    operations and their order are those of a walk per lam); fewer than 4 lams (the slopes of
    a search, one lam a call) walk one at a time, with scalars."""
    nl = lams.size
    if nl < 4:
        for i in range(nl):
            _one_lam_sums(w, h, lams[i], ks, m[:, i], dm[:, i], d2m[:, i], second)
        return
    ratio = np.empty(nl)
    for i in range(nl):
        ratio[i] = math.exp(lams[i] * h)
    e = np.ones(nl)
    a = np.zeros(nl)
    b = np.zeros(nl)
    b2 = np.zeros(nl)
    j = 0
    for k in range(ks[ks.size - 1] + 1):
        x = k * h
        if k % CHERNOFF_BLOCK == 0:
            for i in range(nl):
                e[i] = math.exp(lams[i] * x)
        else:
            for i in range(nl):
                e[i] = e[i] * ratio[i]
        wk = w[k]
        if wk > 0.0:
            if second:
                for i in range(nl):
                    a[i] += wk * e[i]
                    b[i] += wk * (x * e[i])
                    b2[i] += wk * (x * (x * e[i]))
            else:
                for i in range(nl):
                    a[i] += wk * e[i]
                    b[i] += wk * (x * e[i])
        while j < ks.size and ks[j] == k:
            for i in range(nl):
                m[j, i] = a[i]
                dm[j, i] = b[i]
                if second:
                    d2m[j, i] = b2[i]
            j += 1


@jit
def _one_lam_sums(w, h, lam, ks, m, dm, d2m, second):
    """``_prefix_sums`` for one lam into the columns m, dm, d2m: the same operations in the same
    order, the running values in scalars."""
    ratio = math.exp(lam * h)
    a = 0.0
    b = 0.0
    b2 = 0.0
    e = 1.0
    j = 0
    for k in range(ks[ks.size - 1] + 1):
        if k % CHERNOFF_BLOCK == 0:
            e = math.exp(lam * (k * h))
        else:
            e = e * ratio
        if w[k] > 0.0:
            a += w[k] * e
            b += w[k] * ((k * h) * e)
            if second:
                b2 += w[k] * ((k * h) * ((k * h) * e))
        while j < ks.size and ks[j] == k:
            m[j] = a
            dm[j] = b
            if second:
                d2m[j] = b2
            j += 1


@jit
def _log_bounds(m, dm, lc, t, r):
    """(log P-bound, log Q-bound) at one lam from M = m, M' = dm (each within r relative), lc =
    lam c: the exact exponents t log M - lam c and (t - 1) log M + log M' - lam c raised by t r and
    by 2u of the sum of their terms' magnitudes (the logs', the products' and the sums' rounding);
    (+inf, +inf) where M or M' overflowed (no bound at that lam); -inf for P where M' = 0 (no
    P-mass)."""
    if not (math.isfinite(m) and math.isfinite(dm) and m > 0.0):
        return math.inf, math.inf
    lm = math.log(m)
    lq = t * lm - lc + t * r + 2.0 * _U * (t * abs(lm) + abs(lc) + 2.0)
    if not dm > 0.0:
        return -math.inf, lq
    ldm = math.log(dm)
    lp = ((t - 1) * lm + ldm - lc + t * r
          + 2.0 * _U * ((t - 1) * abs(lm) + abs(ldm) + math.log(t) + abs(lc) + 3.0))
    return lp, lq


@jit
def chernoff_logs(m, dm, r, lams, caps, t, lp, lq):
    """``_log_bounds`` at every (cap, lam) for M = m[i], M' = dm[i] at lam = lams[i]: lp[c, i],
    lq[c, i]."""
    for c in range(caps.size):
        for i in range(lams.size):
            lp[c, i], lq[c, i] = _log_bounds(m[i], dm[i], caps[c] * lams[i], t, r[i])


@jit
def _first_at_least(g, c):
    """The least index i with g[i] >= c (g.size if none; NaN counts as large), by bisection: g
    is increasing up to its float noise, which only moves the index among near-equal lams."""
    lo, hi = 0, g.size
    while lo < hi:
        mid = (lo + hi) // 2
        if g[mid] < c:
            lo = mid + 1
        else:
            hi = mid
    return lo


#: Lams on either side of the bisection's index that ``chernoff_least`` evaluates.
AROUND = 3


@jit
def chernoff_least(m, dm, d2m, q0, dm0, r, lams, caps, t, out_p, out_q):
    """The least over lams of ``_log_bounds`` at each cap, for M = m[i] + q0 and M' = dm[i] + dm0
    (r: their relative rounding, the additions' included), as bounds: out_p[c], out_q[c] =
    min(1, e^{least log} (1 + 1e-12)) (the exp's rounding).  Both exponents are convex in lam,
    least where their slopes cross 0: t M'/M = c for Q, (t - 1) M'/M + M''/M' = c for P (M'' =
    d2m[i]: the P-law coordinate's M' + dm0 has derivative M''); each slope is found increasing
    along the lams by bisection (``_first_at_least``) and the exponents are evaluated at the
    AROUND lams on either side.  (Any lam gives a bound: a search that lands off the best only
    loosens it.  A walk that stopped at the first rise of the computed exponents stopped on their
    noise where the curve is flat -- t log M near M = 1, steps of 1e-13 in both signs at sigma
    0.42, t 10^4 -- and kept a bound of 1 for one of 1e-30.)"""
    n = lams.size
    gq, gp = np.empty(n), np.empty(n)
    for i in range(n):
        mm, d1 = m[i] + q0, dm[i] + dm0
        ok = math.isfinite(mm) and math.isfinite(d1) and math.isfinite(d2m[i]) and mm > 0.0
        gq[i] = t * dm[i] / mm if ok else math.inf
        gp[i] = ((t - 1) * dm[i] / mm + (d2m[i] / d1 if d1 > 0.0 else 0.0)) if ok else math.inf
    for c in range(caps.size):
        bp = bq = math.inf
        ip, iq = _first_at_least(gp, caps[c]), _first_at_least(gq, caps[c])
        for i in range(max(ip - AROUND, 0), min(ip + AROUND, n)):
            bp = min(bp, _log_bounds(m[i] + q0, dm[i] + dm0, caps[c] * lams[i], t, r[i])[0])
        for i in range(max(iq - AROUND, 0), min(iq + AROUND, n)):
            bq = min(bq, _log_bounds(m[i] + q0, dm[i] + dm0, caps[c] * lams[i], t, r[i])[1])
        out_p[c] = min(1.0, math.exp(min(bp, 0.0)) * (1.0 + 1e-12))
        out_q[c] = min(1.0, math.exp(min(bq, 0.0)) * (1.0 + 1e-12))


@jit
def spread_coarse(w, f, n, out):
    """out[j] = (A_j + B_j) (1 + 1e-12), the law w (masses at k h) spread onto the points j f h,
    j < n: A_j sums w_k (1 - r_k) over k // f = j and B_j sums w_k r_k over k // f + 1 = j,
    r_k = (k mod f) / f, each in the order of k (as two ``np.bincount`` with those weights, bit
    for bit: ``pld.samplers.epoch_chernoff.coarse_majorant``, in one pass)."""
    a = np.zeros(n)
    b = np.zeros(n)
    for k in range(w.shape[0]):
        j = k // f
        r = (k % f) / f
        a[j] += w[k] * (1.0 - r)
        b[j + 1] += w[k] * r
    for j in range(n):
        out[j] = (a[j] + b[j]) * (1.0 + 1e-12)


@jit
def step_bound(rs, tails, cap, x, top, out):
    """out[k] = tails[j] for the largest j with rs[j] <= cap - x[k] (rs increasing), 1.0 where
    there is none, 0.0 where cap - x[k] >= top: the step function ``epoch_tail._given_one`` reads
    at every lattice point (x increasing), by one downward walk -- the values of searchsorted and
    the masks it replaced, bit for bit."""
    j = rs.shape[0] - 1
    for k in range(x.shape[0]):
        y = cap - x[k]
        while j >= 0 and rs[j] > y:
            j -= 1
        if y >= top:
            out[k] = 0.0
        else:
            out[k] = tails[j] if j >= 0 else 1.0
