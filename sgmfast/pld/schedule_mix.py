"""Schedules with many distinct noise levels: two-point mixtures on a lattice of sigmas.

A schedule whose noise changes every step has as many distinct one-step PLDs as steps.  Here
each step is bracketed by the two neighbouring points a < sigma < b of a lattice of noise
levels (per sampling rate q), and replaced -- for the upper bound -- by a mixture that is at
least as revealing and -- for the lower bound -- by one that is at most as revealing.  Only the
lattice points are discretised and transformed; a mixture's spectrum is the same combination of
theirs, formed frequency by frequency inside the product (kernel:
``sgmfast._kernels.pld.schedule_parts``).  The interval's width is second order in the lattice
spacing, where rounding every step to a lattice point (``schedules.brackets``) is first order.

The order used throughout.  For a step (or any non-negative measure of privacy losses L under
P) let δ(eps) = E_P[(1 - e^{eps - L})_+], for every real eps.  If one measure's δ is at least
another's at every eps, the same holds after composing each with any third measure: in
u = e^{-L}, δ is E[h(u)] with h(u) = E_rest[(1 - e^{eps} u W)_+] convex and non-increasing,
and every such bounded h is a constant plus a positive combination of (k - u)_+, whose
expectation is k δ(-log k) (constants: the total mass, δ at eps -> -inf).  Mixtures act
linearly on δ.  The pessimistic and optimistic one-step grids (``onestep``) are above and below
the exact step in this order, at every eps.

Write mu = 1/sigma.  Both directions of a subsampled step have δ(eps) = A + B δ_G(mu, x) with
A, B >= 0 and x increasing in eps, none of them depending on sigma (remove: B = q,
x = log((e^eps - 1 + q)/q), or δ = 1 - e^eps where that is undefined; add: B =
1 - e^eps (1 - q), x = eps + log q - log B, or δ = 0), where δ_G(mu, x) = Phi(mu/2 - x/mu) -
e^x Phi(-mu/2 - x/mu) is the Gaussian mechanism's.  So it suffices to compare Gaussians:

* d δ_G / d mu = phi(mu/2 - x/mu).  In t = Phi(mu/2), d δ_G / dt = exp(x/2 - x^2/(2 mu^2)),
  which grows with mu for every x: δ_G is convex in t.  Upper: with lambda = (t(mu) -
  t(mu_b)) / (t(mu_a) - t(mu_b)) (rounded up), δ_G(mu) <= lambda δ_G(mu_a) + (1 - lambda)
  δ_G(mu_b) at every x, so the step is below the mixture lambda a + (1 - lambda) b.
* Lower: u(x) = (δ_G(mu) - δ_G(mu_b)) / (δ_G(mu_a) - δ_G(mu_b)) is the distribution function at
  mu of the density phi(m/2 - x/m) on [mu_b, mu_a], whose log-slope -m/4 + x^2/m^3 is at most
  S(x) = -mu_b/4 + x^2/mu_b^3; so u(x) >= F_S(mu - mu_b), the distribution function of the
  density e^{S y} on [0, mu_a - mu_b] (likelihood-ratio order).  u(-x) = u(x) (δ_G(-x) =
  1 - e^{-x} + e^{-x} δ_G(x)).  Far tails make u -> 0, so the lower weight lambda' is
  min over breakpoints x_k of F_{S(x_{k+1})} + e / δ_G(mu_a, x_k): the mixture exceeds the
  step by at most e (base scale) anywhere, which at the step's scale is at most
  eta = q e / (1 - q)^2 times (1 - δ(eps)).  The step with a failure event of probability eta
  (reveals everything) is then above the mixture at every eps; composed, the lower bound loses
  at most H = sum eta, subtracted (eps(target) is read at target + H).
* Many mixtures with the same endpoints compose as sum_J P(J) a^J b^{k - J}, J the number of
  a-draws, Poisson-binomial; a^J b^{k - J} grows with J (a is less noisy than b, post-processing).
  A Poisson-binomial is stochastically below Binomial(k, 1 - geomean(1 - lambda)) and above
  Binomial(k, geomean(lambda)): with r_i = -log(1 - lambda_i) the count is sum 1{E_i <= r_i}
  (E_i exponential), and moving two r's towards each other (their sum kept) raises
  P(both) because log(1 - e^{-r}) is concave, leaving P(neither) as it was -- every vector of
  r's reaches its mean by such moves; the other direction is the same for 1 - lambda.  So a
  group of steps becomes k copies of one mixture, rounded up (upper) or down (lower).

Soundness therefore rests on: the exact lattice steps' grids (``onestep``), mixture weights
rounded the safe way, spectra combined with their error bounds carried (kernel notes), and the
composition's own bounds (``composition``, ``windows``); the lattice, the groups and the grid
step only decide tightness and cost.  Every sampling rate has a lattice of its own (full
batches, q = 1, are left to ``schedules.Sandwich``).  Tests: tests/test_schedules_accuracy.py
(the weights against mpmath, the binomial counts in exact rationals, the compositions against
the exact engine).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import ndtr

from .._kernels.pld import exact as kx
from .._kernels.pld import schedule_parts as ks

U = 2.0 ** -53  # unit round-off
#: work units charged per product and frequency of the mixture kernel (a part's mixture formed and
#: multiplied in: 3.0-3.7 ns fitted, ``bench/mixture_kernel.py``, where the FFT runs 1.7 ns a unit),
#: and per set of K lattice points and frequency, K + 2 times this (its bound R^T: 8-11 ns fitted
#: for K = 2 and 4): margins of 1.4-1.7 and 2.6-2.8
PER_PRODUCT_FREQ = 3.0
PER_SET_POINT_FREQ = 3.0
#: share of the accuracy the lattice may use (the rest is the grid's), split as below
LATTICE_SHARE = 0.25
MERGE_SHARE = 0.1
#: the lower bound's failure mass H, relative to accuracy * target δ
H_SHARE = 1e-3
#: most lattice cells per sampling rate, and lattice points in all; breakpoints of the lower
#: weights per unit of x
MAX_CELLS = 1024
MAX_POINTS = 4096
X_STEP = 0.125
#: the far tail (in Gaussian sds) that sets the lower weights' slope, for the lattice layout only
X_FAR = 7.0


# --- mixture weights (soundness: module notes) -----------------------------------------------------
def _bounds(mu):
    """Floats below and above the exact 1/sigma of which ``mu`` is the rounded value."""
    return mu * (1 - 2 * U), mu * (1 + 2 * U)


def upper_weights(mu, mb, ma):
    """lambda >= the chord weight of each step mu in [mb, ma] (t = Phi(mu / 2)); 1 where the cell
    is too narrow to resolve."""
    mu_lo, mu_hi = _bounds(np.asarray(mu, dtype=np.float64))
    mb_lo, mb_hi = _bounds(mb)
    ma_lo, _ = _bounds(ma)
    # ndtr errs by a few ulps of values <= 1: 1e-15 absolute covers it
    num = ndtr(0.5 * mu_hi) - ndtr(0.5 * mb_lo) + 1e-15
    den = ndtr(0.5 * ma_lo) - ndtr(0.5 * mb_hi) - 1e-15
    if not den > 0.0:
        return np.ones(mu_hi.size)
    lam = np.maximum(num, 0.0) / den * (1 + 1e-12)
    return np.minimum(lam, 1.0)


def _log_gauss_upper(w: float, x: float) -> float:
    """log of an upper bound on δ_G(w, x), x >= 0 (``kx.log_delta_bounds``; 0 where none)."""
    v = kx.log_delta_bounds(kx.KIND_GAUSS, float(x), 1.0, float(w))[1]
    return min(v + 1e-9, 0.0) if not math.isnan(v) else 0.0


def lower_weights(mu, mb, ma, log_e):
    """lambda' <= the lower weight of each step mu in [mb, ma] for the base excess e = exp(log_e)
    (module notes): the min over breakpoints x_k = k X_STEP of F_{S(x_{k+1})}(mu - mb) +
    e / δ_G(ma, x_k), up to the x where δ_G(ma, x) <= e (beyond it: no constraint)."""
    mu_lo, _ = _bounds(np.asarray(mu, dtype=np.float64))
    mb_lo, mb_hi = _bounds(mb)
    _, ma_hi = _bounds(ma)
    y = np.maximum(mu_lo - mb_hi, 0.0)
    span = (ma_hi - mb_lo) * (1 + 2 * U)
    if not span > 0.0:
        return np.zeros(y.size)
    slopes, allow = [], []
    x = 0.0
    last = math.inf  # (the weight's cap from the last interval [x, inf), where F = 0)
    while True:
        log_d = _log_gauss_upper(ma_hi, x)  # δ_G(ma, x') <= this for every x' >= x
        if log_d <= log_e:
            break  # beyond: e / δ_G >= 1, no constraint
        if x > 1e4:  # (unreachable for e > 0: δ_G(ma, x) -> 0)
            last = math.exp(log_e - log_d)
            break
        xn = x + X_STEP
        s = -mb_lo / 4 + xn * xn / mb_lo ** 3
        slopes.append(s + 1e-9 * (abs(s) + 1.0))
        allow.append(math.exp(min(log_e - log_d, 700.0)))
        x = xn
    out = np.full(y.size, last)
    if slopes:
        ks.lower_weights_min(y, span, np.array(slopes), np.array(allow), out)
        out = np.minimum(out, last)
    return np.clip(out * (1 - 1e-12), 0.0, 1.0)


# --- groups of mixtures: k copies of one (module notes) ---------------------------------------------
def _merge(lam, cnt, tol, upper: bool):
    """[(p, k)]: the steps (weights ``lam``, multiplicities ``cnt``) in groups of nearby weights,
    each replaced by k copies of the weight p (upper: 1 - geomean(1 - lam), rounded up; lower:
    geomean(lam), rounded down).  The groups together move at most ``tol`` of the cell's weight
    (upper: of sum cnt (1 - lam); lower: of sum cnt lam): each group grows while its own move
    stays below a cap, halved until the total fits (moves near lam = 1 (upper) or 0 (lower) are
    small in absolute terms, so the groups there are wide).  One group of ``_merge_all``."""
    _, p, k = _merge_all(np.zeros(np.size(lam), dtype=np.int64), np.asarray(lam, dtype=np.float64), cnt,
                         np.array([tol], dtype=np.float64), upper)
    return [(float(x), int(y)) for x, y in zip(p, k)]


def _merge_all(gid, lam, cnt, tols, upper: bool):
    """(group, p, k) of every part: ``_merge`` of each group's steps (``gid``: the group of each
    step, groups 0..G-1 all present; ``tols[g]``: group g's share), in one kernel call
    (``_kernels.pld.schedule_parts.merge_groups``)."""
    order = np.lexsort((lam if upper else -lam, gid))  # (by group; weights increasing, or decreasing)
    starts = np.concatenate(([0], np.cumsum(np.bincount(gid, minlength=tols.size)))).astype(np.int64)
    out_g, out_p, out_k = np.empty(lam.size, dtype=np.int64), np.empty(lam.size), np.empty(lam.size, dtype=np.int64)
    m = ks.merge_groups(np.ascontiguousarray(lam[order]), np.asarray(cnt)[order].astype(np.float64), starts,
                        np.ascontiguousarray(tols, dtype=np.float64), upper, out_g, out_p, out_k)
    return out_g[:m], out_p[:m], out_k[:m]


# --- the plan: lattice, cells, groups --------------------------------------------------------------------
class Layout:
    """The lattice of one schedule: for each sampling rate q, noise levels from the least to the
    largest sigma of its steps, closer where steps are dense and the lower weights steep
    (``_cells``), with 2^level times the cells the error model asks for (all distinct sigmas once
    that is about as many); ``sigmas``/``qs`` list the points, ``families`` [(q, sigmas, counts,
    point indices, cell of each step, lattice sigmas)].  Heuristics: they decide tightness and
    cost only."""

    def __init__(self, families, accuracy, n_total, d_eps, eps_est, level: int = 0):
        self.sigmas, self.qs, self.families = [], [], []
        # (at most MAX_POINTS lattice points in all: more rates share them)
        cap = max(1, min(MAX_CELLS, MAX_POINTS // max(len(families), 1)))
        for q, sig, cnt in families:
            lat = sigma_lattice(sig, _cells(1.0 / sig, cnt, accuracy, n_total, d_eps, eps_est, 2 ** level, cap))
            first = len(self.sigmas)
            self.sigmas.extend(float(x) for x in lat)
            self.qs.extend([float(q)] * lat.size)
            # cell j = [lat[j], lat[j + 1]]: lat[j] <= sigma, and sigma < lat[j + 1] but at the top
            cell = np.clip(np.searchsorted(lat, sig, side="right") - 1, 0, max(lat.size - 2, 0))
            self.families.append((q, sig, cnt, first + np.arange(lat.size), cell, lat))


class Plan:
    """The groups of one schedule on its ``Layout`` for a lower-bound failure mass: ``up``/``lo``
    parts as arrays (ia, ib, p, k) over lattice points (k copies of the mixture p * [ia] +
    (1 - p) * [ib], ia the less noisy point), and ``H`` (>= the lower bound's failure mass).
    Exactness: a step's cell is found by comparing sigmas exactly (lat[j] <= sigma < lat[j + 1]),
    and only steps strictly inside a cell get mixture weights."""

    def __init__(self, layout: Layout, accuracy, h_target, n_total, d_eps, eps_est):
        up, lo = [], []
        self.H = 0.0
        for q, sig, cnt, pts, cell, lat in layout.families:
            # base excess e: this family's share n_f / n_total of h_target (module notes)
            log_e = math.log(h_target) + 2 * math.log1p(-q) - math.log(n_total * q) - 1e-9
            self.H += float(cnt.sum()) * q * math.exp(log_e) / (1 - q) ** 2
            if lat.size == 1:
                up.append((pts[0], pts[0], 1.0, int(cnt.sum())))
                lo.append((pts[0], pts[0], 1.0, int(cnt.sum())))
                continue
            mu = 1.0 / sig
            m_lat = 1.0 / lat
            # the merge tolerance: moves cost about tol of each cell's first-order width
            width = float(np.sum(cnt * (m_lat[cell] - m_lat[cell + 1]) / mu)) / n_total
            tol = MERGE_SHARE * accuracy * eps_est / max(d_eps * width, 1e-300)
            tol = min(max(tol, 1e-3), 0.25)
            for c in np.unique(cell):
                sel = cell == c
                s_c, m_c, k_c = sig[sel], mu[sel], cnt[sel]
                ia, ib = pts[c], pts[c + 1]
                at_a, at_b = s_c == lat[c], s_c == lat[c + 1]
                for flag, g in ((at_a, ia), (at_b, ib)):
                    if flag.any():
                        k = int(k_c[flag].sum())
                        up.append((g, g, 1.0, k))
                        lo.append((g, g, 1.0, k))
                inner = ~(at_a | at_b)
                if not inner.any():
                    continue
                mb, ma = m_lat[c + 1], m_lat[c]
                lam = upper_weights(m_c[inner], mb, ma)
                for p, k in _merge(lam, k_c[inner], tol, True):
                    up.append((ia, ib, p, k))
                lam = lower_weights(m_c[inner], mb, ma, log_e)
                for p, k in _merge(lam, k_c[inner], tol, False):
                    lo.append((ia, ib, p, k))
        self.up = _arrays(up)
        self.lo = _arrays(lo)
        self.H *= 1 + 1e-9


def sigma_lattice(sig, mu_edges):
    """The lattice's noise levels for steps ``sig`` and cell edges ``mu_edges`` in 1/sigma (``_cells``):
    the least and largest sigma and the edges' interior, or every distinct sigma where ``_cells``
    gives None (as many cells as distinct sigmas)."""
    if mu_edges is None:
        return np.unique(sig)
    lat = np.unique(np.concatenate(([sig.min(), sig.max()], 1.0 / mu_edges[1:-1])))
    return lat[(lat >= sig.min()) & (lat <= sig.max())]


def _arrays(parts):
    """Parts [(ia, ib, p, k)] with equal (ia, ib, p) merged, as arrays."""
    merged: dict = {}
    for ia, ib, p, k in parts:
        if p >= 1.0:
            ib, p = ia, 1.0
        elif p <= 0.0:
            ia, p = ib, 1.0
        key = (ia, ib, p)
        merged[key] = merged.get(key, 0) + k
    keys = sorted(merged)
    return (np.array([k[0] for k in keys], dtype=np.int64), np.array([k[1] for k in keys], dtype=np.int64),
            np.array([k[2] for k in keys], dtype=np.float64), np.array([merged[k] for k in keys], dtype=np.int64))


def _cells(mu, cnt, accuracy, n_total, d_eps, eps_est, scale=1, cap=MAX_CELLS, distinct=None):
    """Lattice edges in mu (increasing) for one family: cells narrow where steps are dense and the
    lower weights' slope S is large, their number chosen so that the predicted lower-bound loss
    is about LATTICE_SHARE * accuracy * eps, times ``scale``, at most ``cap``; None where that is
    about as many as distinct sigmas (all become lattice points).  A heuristic: it decides
    tightness and cost only.  ``distinct``: how many distinct mu, where the caller knows."""
    lo_m, hi_m = float(mu.min()), float(mu.max())
    if not hi_m > lo_m * (1 + 1e-12):
        return np.array([lo_m, hi_m])
    # (a smooth density: about 8 distinct steps a bin; a sparse histogram would understate it)
    distinct = np.unique(mu).size if distinct is None else distinct
    bins = int(min(2048, max(8, distinct // 8)))
    edges = np.linspace(lo_m, hi_m, bins + 1)
    rho, _ = np.histogram(mu, bins=edges, weights=cnt)
    rho = rho / (edges[1] - edges[0])
    mid = 0.5 * (edges[:-1] + edges[1:])
    x_far = X_FAR
    big_x = mid * x_far + 0.5 * mid * mid
    s = np.maximum(big_x ** 2 / mid ** 3, 1e-3)
    dens = np.cbrt(rho * s / mid)
    z = np.concatenate(([0.0], np.cumsum(dens) * (edges[1] - edges[0])))
    big_z = z[-1]
    # lower loss ~ (d_eps / (12 N)) * sum_cells rho S Delta^3 / mu = K Z^3 / G^2
    k_coef = d_eps / (12.0 * n_total)
    target = LATTICE_SHARE * accuracy * max(eps_est, 1e-12)
    g = scale * int(math.ceil(math.sqrt(max(k_coef * big_z ** 3 / target, 1.0))))
    if 2 * g >= distinct - 1 and distinct <= cap:
        return None  # (about one cell per distinct sigma: they all become lattice points)
    g = max(1, min(g, cap))
    cuts = np.interp(np.linspace(0.0, big_z, g + 1), z, edges)
    cuts[0], cuts[-1] = lo_m, hi_m
    return np.unique(cuts)


# --- composition of the parts on one grid ----------------------------------------------------------------
