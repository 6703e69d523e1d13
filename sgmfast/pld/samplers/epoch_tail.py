"""One balls-in-bins epoch's heavy tail in closed form: the coordinate that holds the example.

Under P (remove direction) the example's step is the coordinate i whose W_i = e^{(2 y_i - 1) /
(2 sigma^2)} has the shifted law, log W_i ~ N(s^2/2, s^2) (s = 1/sigma), and S = W_i + R with R
the sum of the t - 1 others (unshifted, independent of W_i).  The lattice of ``balls_in_bins``
carries the event "every W_j <= W_max"; what it cuts is

* B = {W_i > W_max}: the loss is log((W_i + R) / t) with W_i's law known in closed form.  This
  module puts it on the loss grid instead of charging its whole P-mass P'(W > W_max) at +inf
  (which, for sigma below ~0.6, was above delta and left the upper bound +inf);
* "some other W_j > W_max, the example's W_i not": the same with W_j's unshifted law, R'
  the example's coordinate (cut) and t - 2 others, t - 1 choices of j (a union bound).

Two coordinates above W_max (the example's and another: P'(W > W_max) (t - 1) P(W > W_max); two
others: (t - 1)(t - 2) P(W > W_max)^2) are charged at +inf by the caller: the rungs bound sums
of cut coordinates only.

Upper bound: on B the loss is increasing in R, and R is cut at W_max too (the event's other
half is the second bullet), so any R* >= R in the usual stochastic order bounds it: R* takes
the rungs r_0 < r_1 < ... < r_K = (t - 1) W_max (the largest a cut R can be) with
P(R* >= r_k) = T(r_{k-1}), T an upper bound on P(R > r) (Chernoff on a convex-order majorant of
the cut lattice law, whose MGF is at least the true one: e^{lam x} is convex).  Each rung places
the P'-mass of W_i > W_max at log((W_i + r_k) / t), rounded up on the grid
(``_kernels.pld.allocation.tail_bins``).  The loss being pointwise larger (a coupling), the
composed delta only grows: delta = E_P[(1 - e^{eps - sum L})_+] is increasing in each loss.

Lower bound: R >= 0, so the loss on B is at least log(W_i / t), rounded down on the grid; only
the part above the lattice's top loss or W_i >= 1000 (t - 1) is kept (a sub-measure of the truth: the rest of the
event is dropped).
"""

from __future__ import annotations

import math

import numpy as np

from ..._kernels.pld import allocation as ka
from ..._work import PER_BIN_DISCRETISE, charge
from ..common import U

#: Points of the coarse majorant the rungs' Chernoff bounds are computed on.
COARSE = 4096


def coarse_majorant(w: np.ndarray, h: float):
    """(masses, spacing H): w (masses at k h) spread onto a lattice of at most COARSE + 2 points
    of spacing H, each mass split between its two neighbouring points keeping its mean -- larger
    in convex order; rounded up by 1e-12 (the splits' rounding is ~3u of each mass)."""
    f = max(1, -(-w.size // COARSE))
    k = np.arange(w.size)
    lo, frac = k // f, (k % f) / f
    n = w.size // f + 2
    out = np.bincount(lo, w * (1.0 - frac), n) + np.bincount(lo + 1, w * frac, n)
    return out * (1.0 + 1e-12), f * h


def rungs(w: np.ndarray, h: float, t1: int, w_max: float, shifted: bool = False):
    """(r, weight): the stochastic upper bound R* of the sum of t1 cut lattice variables (masses
    w at k h, each <= W_max; with ``shifted`` one of them has the P-law x w(x) instead): rungs r
    and P(R* = r) (module notes).  ``_chernoff_over(w, h, t, cap)`` bounds (E[S / t; S > cap],
    P(S > cap)) for a sum S of t; the first, times t, bounds P(S' > cap) for S' = one P-law
    variable + t - 1 others."""
    wc, H = coarse_majorant(w, h)
    x = np.arange(wc.size) * H
    m1, m2, m3 = float(wc @ x), float(wc @ (x * x)), float(wc @ (x * x * x))
    if shifted:
        mu = (t1 - 1) * m1 + m2
        sd = math.sqrt(max((t1 - 1) * (m2 - m1 * m1) + m3 - m2 * m2, 0.0))
    else:
        mu, sd = t1 * m1, math.sqrt(max(t1 * (m2 - m1 * m1), 0.0))
    top = t1 * w_max
    r = [mu + 0.5 * k * sd for k in range(1, 13)]
    g = 8.0 * sd
    while mu + g < top and len(r) < 40:
        r.append(mu + g)
        g *= 2.0
    r = sorted(v for v in r if v < top) + [top]
    if shifted:
        tails = [min(1.0, t1 * _chernoff_over(wc, H, t1, v)[0] * (1.0 + 1e-12)) for v in r[:-1]] + [0.0]
    else:
        tails = [min(1.0, _chernoff_over(wc, H, t1, v)[1]) for v in r[:-1]] + [0.0]
    tails = np.minimum.accumulate(np.asarray(tails))
    prev = np.concatenate(([1.0], tails[:-1]))
    weight = (prev - tails) * (1.0 + 1e-12)
    keep = weight > 0
    return np.asarray(r)[keep], weight[keep]


def add_tail(epoch, step: float, j_lo: int, n: int, pess: np.ndarray, frac: np.ndarray, amass: np.ndarray) -> float:
    """Adds B's P'-mass to the remove direction's upper masses ``pess`` (per rung) and lower
    atoms (frac, amass: an atom at a grid point has offset 0; a bin holding lattice mass too
    has it moved down to its point, which a lower bound may do); returns the upper mass above
    the grid (the caller's +inf mass)."""
    s, w_max, t = epoch.s, epoch.w_max, epoch.t
    # (its work on the one meter: a pass over the grid per rung, the lower one, the rungs' MGFs)
    charge(PER_BIN_DISCRETISE * n * (epoch.tail_rungs(False)[0].size + epoch.tail_rungs(True)[0].size + 1))
    beyond = 0.0
    for r, wgt in zip(*epoch.tail_rungs(False)):  # (B: the example's coordinate above W_max)
        beyond += ka.tail_bins(s, 1.0, w_max, float(t), float(r), float(wgt), step, j_lo, n, True, pess)
    if t > 1:  # (another coordinate above W_max, the example's not: t - 1 choices, union bound)
        for r, wgt in zip(*epoch.tail_rungs(True)):
            beyond += ka.tail_bins(s, 0.0, w_max, float(t), float(r), float(wgt) * (t - 1) * (1.0 + 1e-12), step,
                                   j_lo, n, True, pess)
    low = np.zeros(n)
    ka.tail_bins(s, 1.0, w_max, float(t), 0.0, 1.0, step, j_lo, n, False, low)
    # (kept only where it beats the lattice's atoms, which lose the far tail to round-off: above
    # the lattice's top, or where W_i >= 1000 (t - 1), when log(W_i / t) is within ~1e-3 of the
    # loss log((W_i + R) / t); below, for large t it is far under the true loss -- a lower bound
    # may drop mass)
    w_cut = min((epoch.up.size - 1) * epoch.h, 1000.0 * (t - 1))
    low[:max(0, min(n, math.ceil(math.log(w_cut / t) / step) - j_lo + 1))] = 0.0
    hit = low > 0
    frac[hit] = 0.0
    amass[hit] += low[hit]
    return beyond


def top_loss(s: float, t: int, tail: float, r: float) -> float:
    """A loss above which B's P'-mass is below ``tail``: the grid's top for the tail."""
    from scipy.special import ndtri

    z = float(-ndtri(max(tail, 1e-300)))
    return min(0.5 * s * s + s * z, 700.0) + math.log1p(r / math.exp(min(0.5 * s * s + s * z, 700.0))) - math.log(t)


# --- Chernoff above the lattice cap (``balls_in_bins.Epoch``) and for the rungs ---------------------
def _chernoff_over(w, h, t, cap):
    """Upper bounds on the P-mass E_Q[S/t; S > cap] and the Q-mass Q(S > cap) of the sum of t
    iid lattice variables with masses w (sub-probability): for every lam > 0,
    Q(S > cap) <= e^{-lam cap} M(lam)^t and E_Q[S/t; S > cap] <= e^{-lam cap} M'(lam) M(lam)^(t-1),
    M the lattice MGF; the least over a grid of lam, each rounded up by its rounding: e^{lam x_k}
    within (2 lam x_k + 2) u (x_k = k h, lam x_k and exp), the dot products of non-negative terms
    within w.size u more, so M and M' within r = (w.size + 2 lam x_max + 4) u relative, raised to
    the power t; the logs and the sum 2u of their magnitudes; plus 1e-12.  (A flat 1e-12 relative
    was exceeded: 2.0e-12 at sigma 2, t 1000, 6894 lattice points, tests/test_rounding_constants_more.py.)"""
    x = np.arange(w.size) * h
    # lam on the scale of 1/cap, and of 1/sd(S) (a light-tailed S, large sigma: the best lam is
    # about (cap - E S) / Var S, far above 1/cap); any lam > 0 gives a valid bound.  Both logs
    # are convex in lam (log M and log M' are logs of positive sums of exponentials), so a coarse
    # grid finds each one's basin and a golden-section search in log lam narrows it (a lam that
    # is not the best only loosens the bound, never unsounds it)
    sd = math.sqrt(max(t * (float(w @ (x * x)) - float(w @ x) ** 2), 1e-300))
    lo_l, hi_l = math.log(min(1e-6 / max(cap, 1e-12), 1e-2 / max(sd, h))), math.log(max(1e3 / max(cap, 1e-12), 1e3 / max(sd, h)))
    seen: dict = {}

    def logs(ll):
        if ll not in seen:
            seen[ll] = _chernoff_logs(w, x, t, cap, math.exp(ll))
        return seen[ll]

    grid = np.linspace(lo_l, hi_l, 25)
    best = [1.0, 1.0]  # (P-mass, Q-mass)
    for which in (0, 1):
        vals = [logs(float(ll))[which] for ll in grid]
        i = int(np.argmin(vals))
        a, b = float(grid[max(i - 1, 0)]), float(grid[min(i + 1, grid.size - 1)])
        g = 0.5 * (math.sqrt(5.0) - 1.0)
        c, d = b - g * (b - a), a + g * (b - a)
        for _ in range(12):
            if logs(c)[which] <= logs(d)[which]:
                b, d = d, c
                c = b - g * (b - a)
            else:
                a, c = c, d
                d = a + g * (b - a)
        v = min(vals[i], logs(c)[which], logs(d)[which])
        best[which] = min(1.0, math.exp(min(v, 0.0)) * (1 + 1e-12))
    return best[0], best[1]


def _chernoff_logs(w, x, t, cap, lam):
    """(log P-bound, log Q-bound) of ``_chernoff_over`` at one lam, rounded up (+inf where the
    MGF overflows: no bound at that lam)."""
    with np.errstate(over="ignore", invalid="ignore"):  # (inf * 0 = NaN: that lam is skipped)
        e = np.exp(lam * x)
        m = float(w @ e)
        dm = float(w @ (x * e))
    if not (math.isfinite(m) and math.isfinite(dm) and m > 0):
        return math.inf, math.inf
    lm, lc = math.log(m), lam * cap
    r = (w.size + 2.0 * lam * x[-1] + 4.0) * U
    lq = t * lm - lc + t * r + 2 * U * (t * abs(lm) + abs(lc) + 2.0)
    lp = ((t - 1) * lm + math.log(dm) - math.log(t) - lc + t * r
          + 2 * U * ((t - 1) * abs(lm) + abs(math.log(dm)) + math.log(t) + abs(lc) + 3.0)) if dm > 0 else -math.inf
    return lp, lq
