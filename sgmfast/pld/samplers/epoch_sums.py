"""The other coordinates' sum R on ``epoch_tail``'s event "exactly one coordinate above W_max",
from the epoch's own lattice of S: convex-order bounds that resolve R near its mean, where the
rungs' Chernoff tails (``epoch_tail.rungs``) are loose by a few sd.

The event, in the Q-picture.  Take coordinate j above W_max and the t - 1 others cut (each at most
W_max), R their sum.  Its P-measure is (S / t) dQ with S = W_j + R; over the t choices of j, the
measure t (W_j + R) / t q(W_j) q_R(R) = p'(W_j) q_R(R) + R q(W_j) q_R(R): the example's own
coordinate above (P'-law of W, weight 1 per unit of R's Q-mass) and another's (Q-law of W, weight
R).  Every epoch's composed δ is E_Q[(prod_e S_e / t - e^eps)_+] (remove direction): increasing
and convex in this epoch's S, so in R for any fixed W_j.  Hence R's sub-law q_R may be replaced

* for the upper bound by any measure above it in increasing convex order (mass may be added);
* for the lower bound by any measure below it in that order (mass may be dropped).

Upper (``upper_sums``).  The epoch's upper lattice law is wu^{*t} (wu the spread of W's cut law,
of mass M and mean m per unit mass): wu^{*t} / M = wu^{*(t-1)} * (wu / M), and Jensen on the last
factor gives wu^{*(t-1)} <=cx (wu^{*t} / M) shifted by -m; wu^{*(t-1)} bounds R's sub-law as
wu^{*t} bounds S's (``balls_in_bins`` step 1).  The lattice's entries carry their round-off
(only more mass); what the windows and the cap cut goes to the largest value, t W_max (moving mass
up only raises an increasing functional).

Lower (``lower_sums``).  The reported mechanism of ``epoch_tail``'s lower bound sees each other
coordinate's cell mean, at least (1 - rho) x - eta for its lattice point x (law wl).  The lattice
``lo`` is an entry-wise lower bound on wl^{*t}; by exchangeability E[X_1 + .. + X_{t-1} | X_1 +
.. + X_t] = (t - 1) / t times the sum, so the law of (t - 1) / t S is below that of R_lat in convex
order (Jensen), and R' >= (1 - rho) R_lat - (t - 1) eta pointwise.

Both are put on a few hundred points: the upper by splitting each lattice mass between its two
neighbouring points keeping its mean (a spread: larger in convex order), the lower by each
interval's mass at its mean (smaller).
"""

from __future__ import annotations

import math

import numpy as np

from ..common import U

#: The points' relative spacing in W_max + r (``spacing``): KAPPA of the scale on which the density
#: of W above W_max falls by e (about W s / z at the standardised z of W_max), over W_max + E[R]
#: (E[R] ~ t), at most PER_STEP loss steps.  A spread of R by Delta costs ~(Delta / that scale)^2 of
#: the tail's δ (the kink of (x - e^eps t)_+, smoothed by W): sigma 1.2, t 100, δ 1e-12 was 2.3e-4
#: wide at 4 loss steps (1.75 %, 0.6 sd of R), 1.7e-4 at KAPPA 0.1 (1.2 %), 4.3e-4 at 0.2.  Below a
#: top W_max < t the spacing in W_max + r, relative to W_max + r, made Delta ~ KAPPA t s / z, far above
#: that scale: sigma 0.9909, t 5319, 4 epochs, δ 4e-12 (W_max 0.14 t) read 1.06e-3 wide, 1.5e-4 with
#: the factor W_max / (W_max + t); sigma 1.0987, t 1992, 2 epochs, δ 4.7e-11: 8.5e-4 -> 2.4e-4.  The
#: points cost one pass of the tail's binning each, so with PER_STEP binding the cost grows as
#: 1 / step^2: PER_STEP 64 (was 16) took sigma 0.3323, t 7, δ(eps = 1) from 7.1 s to 3.2 s and sigma
#: 0.4, t 2, 200 epochs, δ 1e-12 from 1.5 s to 0.9 s (width 9.32e-4 -> 9.35e-4).
KAPPA, PER_STEP = 0.1, 64.0
#: ... the factor W_max / (W_max + t) at least this: a light tail's W_max is a few E[W] (sigma 10,
#: t 10^4: W_max ~ 2), where the factor took 10^5 points and 16 s for a query of 0.8 s, though the tail
#: holds nothing of δ.
LOW_TOP_SHARE = 0.25
#: The share of the mass left above the last point of the fine spacing (above it, points in ratios
#: FAR_RATIO up to the largest value).
ABOVE = 1e-9


def spacing(s: float, w_max: float, step: float, t: int) -> float:
    """The points' relative spacing (KAPPA, PER_STEP) for log W's sd ``s``, the loss step and t
    steps an epoch."""
    z = max((math.log(w_max) - 0.5 * s * s) / s, 1.0)  # (W_max standardised under the shifted law)
    return min(KAPPA * s / z * max(w_max / (w_max + t), LOW_TOP_SHARE), PER_STEP * step)


def _points(x: np.ndarray, m: np.ndarray, w_max: float, rel: float, top: float) -> np.ndarray:
    """Points geometric in W_max + r (ratio 1 + rel) from the least x to where the mass above is
    ABOVE of the whole, then in ratios FAR_RATIO to the largest x, then ``top``."""
    above = np.cumsum(m[::-1])[::-1]
    i_hi = min(int(np.searchsorted(-above, -ABOVE * above[0])), x.size - 1)  # (mass from it on <= ABOVE)
    x_lo, x_hi = float(x[0]), float(x[i_hi])
    k = int(math.ceil(math.log((w_max + x_hi) / (w_max + x_lo)) / math.log1p(rel))) if x_hi > x_lo else 0
    pts = (w_max + x_lo) * np.exp(np.arange(k + 1) * math.log1p(rel)) - w_max
    # (on to the largest x in ratios FAR_RATIO: what lies above the last point is split with its
    # neighbours, not with the top)
    x_end = float(x[-1])
    k2 = int(math.ceil(math.log((w_max + x_end) / (w_max + pts[-1])) / math.log(FAR_RATIO))) if x_end > pts[-1] else 0
    pts = np.concatenate((pts, (w_max + pts[-1]) * FAR_RATIO ** np.arange(1, k2 + 1) - w_max))
    return np.unique(np.concatenate((np.clip(pts, x_lo, top), [top])))


#: The ratio (in W_max + r) of the points above the mass's last ABOVE share (``_points``).  Split
#: with the top, t W_max, that mass put the upper's tail at loss log W_max: sigma 0.5, t 10^4, 200
#: epochs, δ 1e-12 read [11.07482, 11.08336] (one epoch's δ(9) 4.3e-16 for a lower 5.1e-17), and
#: finer points came out wider by chance -- [11.07484, 11.08647] -- as the split moved; with the ratio
#: 2 points, [11.07484, 11.07719].
FAR_RATIO = 2.0


def upper_sums(up: np.ndarray, first: int, wu: np.ndarray, h: float, t: int, w_max: float, rel: float):
    """(r, m, scale): Q-masses m at points r, with what the lattice of S does not hold (the
    windows' cuts, above the cap) above R's sub-law in increasing convex order (module notes);
    ``up`` the epoch's upper lattice of S from its entry ``first`` on (entries at k h; zero
    outside: those add nothing), ``wu`` W's spread law (at k h), ``rel`` the points' spacing
    (``spacing``).  ``scale`` (>= 1 / wu's mass) is what the masses outside
    the lattice are to be multiplied by: the caller charges them (at +inf)."""
    k = np.arange(wu.size, dtype=np.float64)
    n = wu.size + 4
    mass_w = float(np.sum(wu)) * (1.0 - n * U)  # (rounded down: the masses divided by it grow)
    mean_w = float(np.dot(wu, k)) * h * (1.0 - (n + 4) * U) / (float(np.sum(wu)) * (1.0 + n * U))
    top = t * w_max * (1.0 + 4 * U)
    x = np.clip(np.arange(first, first + up.size) * h * (1.0 + 4 * U) - mean_w * (1.0 - 1e-12), 0.0, top)
    m = up / mass_w * (1.0 + 4 * U)
    keep = m > 0.0
    x, m = x[keep], m[keep]
    if not x.size:
        return np.zeros(0), np.zeros(0), 1.0 / mass_w
    pts = _points(x, m, w_max, rel, top)
    if pts.size < 2:
        pts = np.array([pts[0], top + 1.0])
    i = np.clip(np.searchsorted(pts, x, side="right") - 1, 0, pts.size - 2)
    a, b = pts[i], pts[i + 1]
    frac = np.clip((x - a) / (b - a) * (1.0 + 4 * U) + U, 0.0, 1.0)  # (the upper point's share, rounded up)
    w = np.bincount(i, m * (1.0 - frac), pts.size) + np.bincount(i + 1, m * frac, pts.size)
    w = w * (1.0 + (m.size + 4) * U)
    keep = w > 0.0
    return pts[keep], w[keep], 1.0 / mass_w * (1.0 + 4 * U)


def lower_sums(lo: np.ndarray, first: int, h: float, t: int, eta: float, rho: float, w_max: float, rel: float):
    """(r, m): Q-masses m at points r > 0, below the reported others' sum R' in increasing convex
    order (module notes); ``lo`` the epoch's lower lattice of S from its entry ``first`` on
    (entries at k h; zero outside)."""
    scale = h * (1.0 - rho - 4 * U) * (t - 1) / t * (1.0 - 4 * U)
    x = np.arange(first, first + lo.size) * scale - (t - 1) * eta * (1.0 + 1e-9)
    keep = (lo > 0.0) & (x > 0.0)  # (dropped: only less mass)
    x, m = x[keep], lo[keep]
    if not x.size:
        return np.zeros(0), np.zeros(0)
    pts = _points(x, m, w_max, rel, math.inf)[:-1]  # (the last interval open above)
    i = np.clip(np.searchsorted(pts, x, side="right") - 1, 0, pts.size - 1)
    tot = np.bincount(i, m, pts.size)
    first = np.bincount(i, m * x, pts.size)
    ok = tot > 0.0
    n = m.size + 4
    mean = first[ok] / tot[ok]
    r = mean * (1.0 - 4 * n * U) - 1e-300  # (each mean rounded down: a lower point, a lower δ)
    return r, tot[ok] * (1.0 - n * U)
