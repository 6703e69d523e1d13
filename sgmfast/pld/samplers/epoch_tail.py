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


def coarse_majorant(w: np.ndarray, h: float, most: int = COARSE):
    """(masses, spacing H): w (masses at k h) spread onto a lattice of at most ``most`` + 2 points
    of spacing H, each mass split between its two neighbouring points keeping its mean -- larger
    in convex order; rounded up by 1e-12 (the splits' rounding is ~3u of each mass)."""
    f = max(1, -(-w.size // most))
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
    p_b, q_b = _chernoff_over_many(wc, H, t1, r[:-1]) if len(r) > 1 else (np.zeros(0), np.zeros(0))
    tails = np.minimum(1.0, t1 * p_b * (1.0 + 1e-12)) if shifted else q_b
    tails = np.minimum.accumulate(np.concatenate((tails, [0.0])))
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
#: Points of the majorant the cap's bound is computed on (``_chernoff_over``): its spacing is at
#: most 8 h on the longest lattices, which adds <= 16 h^2 to Var W (a 1e-5 fraction at the
#: default spacing), while the sums cost 8 times less than on the lattice itself.
COARSE_CAP = 1 << 16
#: Points of the coarse log-lam grid (then three finer grids around each least value, STAGE
#: points each over the two neighbouring cells: the search's spacing ends ~ 0.01 in log lam, where
#: a lam off the best loosens a bound of e^-40 by ~ 0.1 %; any lam > 0 gives a valid bound).
GRID, STAGE, STAGES = 25, 17, 3
#: The rungs' lam grid (many caps, one table): spacing ~ 0.03 in log lam.
RUNG_LAMS = 801


def _lam_range(w, x, t, cap_lo, cap_hi):
    """(lo, hi) of log lam: on the scale of 1/cap, and of 1/sd(S) (a light-tailed S, large
    sigma: the best lam is about (cap - E S) / Var S, far above 1/cap)."""
    h = x[1] - x[0] if x.size > 1 else 1.0
    sd = math.sqrt(max(t * (float(w @ (x * x)) - float(w @ x) ** 2), 1e-300))
    return (math.log(min(1e-6 / max(cap_hi, 1e-12), 1e-2 / max(sd, h))),
            math.log(max(1e3 / max(cap_lo, 1e-12), 1e3 / max(sd, h))))


def _chernoff_over(w, h, t, cap):
    """Upper bounds on the P-mass E_Q[S/t; S > cap] and the Q-mass Q(S > cap) of the sum of t
    iid lattice variables with masses w (sub-probability): for every lam > 0,
    Q(S > cap) <= e^{-lam cap} M(lam)^t and E_Q[S/t; S > cap] <= e^{-lam cap} M'(lam) M(lam)^(t-1),
    M the lattice MGF; the least over a grid of lam (``_chernoff_logs``: each rounded up by its
    rounding).  Lattices longer than COARSE_CAP are first spread onto a coarser one
    (``coarse_majorant``: larger in convex order, and e^{lam x}, x e^{lam x} are convex for
    x, lam >= 0, so both bounds only grow).  Both logs are convex in lam, so a coarse grid finds
    each one's basin and finer grids around its least point narrow it."""
    if w.size > COARSE_CAP:
        w, h = coarse_majorant(w, h, COARSE_CAP)
    x = np.arange(w.size) * h
    lo_l, hi_l = _lam_range(w, x, t, cap, cap)
    caps = np.array([float(cap)])
    best = [1.0, 1.0]  # (P-mass, Q-mass)
    grid = np.linspace(lo_l, hi_l, GRID)
    first = _chernoff_logs(w, h, t, caps, np.exp(grid))
    for which in (0, 1):
        ll, vals = grid, first[which][0]
        v = float(vals.min())
        for _ in range(STAGES):
            i = int(np.argmin(vals))
            ll = np.linspace(ll[max(i - 1, 0)], ll[min(i + 1, ll.size - 1)], STAGE)
            vals = _chernoff_logs(w, h, t, caps, np.exp(ll))[which][0]
            v = min(v, float(vals.min()))
        best[which] = min(1.0, math.exp(min(v, 0.0)) * (1 + 1e-12))
    return best[0], best[1]


def _chernoff_over_many(w, h, t, caps):
    """``_chernoff_over`` at each cap of ``caps`` (arrays (P-bounds, Q-bounds)), on one table of
    RUNG_LAMS values of lam spanning all of them (w is short here: ``coarse_majorant``)."""
    caps = np.asarray(caps, dtype=np.float64)
    x = np.arange(w.size) * h
    lo_l, hi_l = _lam_range(w, x, t, float(caps.min()), float(caps.max()))
    lp, lq = _chernoff_logs(w, h, t, caps, np.exp(np.linspace(lo_l, hi_l, RUNG_LAMS)))
    out = []
    for lg in (lp, lq):
        out.append(np.minimum(1.0, np.exp(np.minimum(lg.min(axis=1), 0.0)) * (1 + 1e-12)))
    return out[0], out[1]


def _chernoff_logs(w, h, t, caps, lams):
    """(log P-bounds, log Q-bounds) of ``_chernoff_over``, arrays (caps x lams), rounded up:
    M and M' within r = (w.size + 2 lam x_max + 3 CHERNOFF_BLOCK + 4) u relative
    (``chernoff_sums``: its exponentials and sums), raised to
    the power t; the logs and the sum 2u of their magnitudes; plus 1e-12 by the caller (+inf
    where the MGF overflows: no bound at that lam).  (A flat 1e-12 relative was exceeded: 2.0e-12
    at sigma 2, t 1000, 6894 lattice points, tests/test_rounding_constants_more.py.)"""
    m, dm = np.empty(lams.size), np.empty(lams.size)
    charge(w.size * lams.size)  # (on the one meter: a product and two multiply-adds a term, ~ a unit)
    ka.chernoff_sums(np.ascontiguousarray(w, dtype=np.float64), float(h), lams, m, dm)
    ok = np.isfinite(m) & np.isfinite(dm) & (m > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        lm = np.where(ok, np.log(np.where(ok, m, 1.0)), 0.0)
        pos = ok & (dm > 0)
        ldm = np.where(pos, np.log(np.where(pos, dm, 1.0)), 0.0)
    r = (w.size + 2.0 * lams * ((w.size - 1) * h) + 3.0 * ka.CHERNOFF_BLOCK + 4.0) * U
    lc = caps[:, None] * lams[None, :]
    lq = t * lm - lc + t * r + 2 * U * (t * np.abs(lm) + np.abs(lc) + 2.0)
    lp = ((t - 1) * lm + ldm - math.log(t) - lc + t * r
          + 2 * U * ((t - 1) * np.abs(lm) + np.abs(ldm) + math.log(t) + np.abs(lc) + 3.0))
    lp = np.where(pos, lp, -np.inf)
    bad = ~ok
    return np.where(bad, np.inf, lp), np.where(bad, np.inf, lq)
