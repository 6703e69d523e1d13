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
import scipy.fft
from scipy.special import ndtr

from .._failures import GridFailure
from .._kernels.pld import exact as kx
from .._kernels.pld import fft_power as kf
from .._kernels.pld import schedule_parts as ks
from .._kernels.pld import tilt as kt
from .._work import PER_BIN_MOMENTS, UNITS_PER_SECOND, Meter, charge, charge_fft, metered
from .common import ADD, FIRST_BINS, MAX_BINS, REMOVE, SPLIT_MIN, TAU_MIN, WORKERS, Grid, bins_limit, split_pool, two_cores
from .composition import Composite, TiltedStep, fft_const, grid_of
from .estimates import eps_estimate, initial_step
from .onestep import one_step
from .queries import delta_bound, eps_bound
from .tilting import VAR_GROWTH, VAR_GROWTH_SMALL, saddle_bracket, theta_cap
from .two_stage import SMALL_TAU
from .windows import CHERNOFF_K, choose_window

U = 2.0 ** -53  # unit round-off
#: work units charged per (part, frequency) of the mixture product (measured against the FFT)
PER_PART_FREQ = 1.0
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
    small in absolute terms, so the groups there are wide)."""
    order = np.argsort(lam, kind="stable")
    lam, cnt = lam[order], cnt[order].astype(np.float64)
    if not upper:
        lam, cnt = lam[::-1], cnt[::-1]
    with np.errstate(divide="ignore"):
        logs = np.log1p(-lam) if upper else np.log(lam)
    c_log = np.concatenate(([0.0], np.cumsum(cnt * logs)))
    c_k = np.concatenate(([0.0], np.cumsum(cnt)))
    c_lam = np.concatenate(([0.0], np.cumsum(cnt * lam)))
    budget = tol * float(c_k[-1] - c_lam[-1] if upper else c_lam[-1])
    cuts = np.empty(lam.size + 1, dtype=np.int64)
    cap = budget
    for _ in range(40):
        m, total = ks.merge_cuts(c_k, c_lam, c_log, cap, upper, cuts)
        if total <= budget or cap < 1e-12 * budget:
            break
        cap *= 0.5
    cuts = cuts[: m + 1]
    return [_group_weight(logs[a:b], cnt[a:b], upper) for a, b in zip(cuts[:-1], cuts[1:])]


def _group_weight(logs, cnt, upper):
    """(p, k) of one group, p rounded the safe way: the sum of same-signed logs errs by at most
    (k + 2) u relative (each log1p / log within u)."""
    k = float(cnt.sum())
    lg = float(np.dot(cnt, logs))
    if not lg > -math.inf:
        return (1.0 if upper else 0.0), int(round(k))
    r = (2.0 * len(logs) + 8.0) * U
    if upper:
        p = min(1.0, -math.expm1(lg / k * (1 + r)) * (1 + 4 * U))
    else:
        p = max(0.0, math.exp(lg / k * (1 + r)) * (1 - 4 * U))
    return p, int(round(k))


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
            mu_edges = _cells(1.0 / sig, cnt, accuracy, n_total, d_eps, eps_est, 2 ** level, cap)
            if mu_edges is None:  # as many cells as distinct sigmas: every one a lattice point
                lat = np.unique(sig)
            else:
                lat = np.unique(np.concatenate(([sig.min(), sig.max()], 1.0 / mu_edges[1:-1])))
                lat = lat[(lat >= sig.min()) & (lat <= sig.max())]
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


def _cells(mu, cnt, accuracy, n_total, d_eps, eps_est, scale=1, cap=MAX_CELLS):
    """Lattice edges in mu (increasing) for one family: cells narrow where steps are dense and the
    lower weights' slope S is large, their number chosen so that the predicted lower-bound loss
    is about LATTICE_SHARE * accuracy * eps, times ``scale``, at most ``cap``; None where that is
    about as many as distinct sigmas (all become lattice points).  A heuristic: it decides
    tightness and cost only."""
    lo_m, hi_m = float(mu.min()), float(mu.max())
    if not hi_m > lo_m * (1 + 1e-12):
        return np.array([lo_m, hi_m])
    # (a smooth density: about 8 distinct steps a bin; a sparse histogram would understate it)
    bins = int(min(2048, max(8, np.unique(mu).size // 8)))
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
    distinct = np.unique(mu).size
    if 2 * g >= distinct - 1 and distinct <= cap:
        return None  # (about one cell per distinct sigma: they all become lattice points)
    g = max(1, min(g, cap))
    cuts = np.interp(np.linspace(0.0, big_z, g + 1), z, edges)
    cuts[0], cuts[-1] = lo_m, hi_m
    return np.unique(cuts)


# --- composition of the parts on one grid ----------------------------------------------------------------
class _Lattice:
    """One-step grids of one direction, grid step and tail cut, for lattice points (sigma, q),
    tilted and transformed on demand (cached per tilt, rounding and FFT length); ``layout``
    maps a part's point index to its (sigma, q)."""

    def __init__(self, add, step, tau):
        self.add, self.step, self.tau = add, step, tau
        self.layout = None
        self._one: dict = {}
        self._tilted: dict = {}

    def on(self, layout) -> _Lattice:
        self.layout = layout
        return self

    def _key(self, g):
        return self.layout.sigmas[g], self.layout.qs[g]

    def one(self, g):
        key = self._key(g)
        o = self._one.get(key)
        if o is None:
            o = self._one[key] = one_step(key[0], key[1], self.add, self.step, self.tau)
        return o

    def tilted(self, g, theta, pess) -> TiltedStep:
        key = (self._key(g), theta, pess)
        ts = self._tilted.get(key)
        if ts is None:
            if len(self._tilted) > 4 * len(self._one) + 64:  # (bounded: older tilts leave)
                self._tilted.clear()
            ts = self._tilted[key] = TiltedStep(self.one(g), self.step, theta, pess)
        return ts

    def spectrum(self, g, theta, pess, n):
        """(half spectrum, bound on its full-spectrum l2 error, full-spectrum l2 norm)."""
        part = self.tilted(g, theta, pess).part
        f = np.zeros(n)
        kf.fold(part.t, part.j_lo, n, f)
        charge_fft(n)
        norm = math.sqrt(n * kf.sumsq(f)) * 1.01
        return scipy.fft.rfft(f, workers=WORKERS), fft_const(n) * norm, norm

    def moments(self, parts, theta):
        """(mean, variance) of the tilted composed loss of the parts (heuristic: tilts)."""
        ia, ib, p, k = parts
        used = np.unique(np.concatenate((ia, ib)))
        st = {}
        for g in used:
            one = self.one(int(g))
            charge(PER_BIN_MOMENTS * one.pess.size)
            st[int(g)] = kt.tilted_stats(one.pess, one.j_lo, self.step, theta)
        ls_a = np.array([st[int(g)][0] for g in ia])
        ls_b = np.array([st[int(g)][0] for g in ib])
        m_a, v_a = (np.array([st[int(g)][j] for g in ia]) for j in (1, 2))
        m_b, v_b = (np.array([st[int(g)][j] for g in ib]) for j in (1, 2))
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            la = np.log(p) + ls_a
            lb = np.where(p < 1.0, np.log1p(-p) + ls_b, -np.inf)
            mx = np.maximum(la, lb)
            wa = np.exp(la - mx)
            wb = np.exp(lb - mx)
            tot = wa + wb
            wa, wb = wa / tot, wb / tot
        wa, wb = np.nan_to_num(wa), np.nan_to_num(wb)
        mean = wa * m_a + wb * m_b
        var = wa * (v_a + m_a ** 2) + wb * (v_b + m_b ** 2) - mean ** 2
        return float(np.dot(k, mean)), float(np.dot(k, np.maximum(var, 0.0)))


def compose_mix(lat: _Lattice, parts, theta: float, pess: bool, eps_lo: float) -> Grid:
    """The composition of the mixture parts (ia, ib, p, k) on the lattice's grid, tilted by theta,
    pessimistic or optimistic, with every bound of ``composition`` charged; its bounds hold for
    every eps >= eps_lo."""
    ia, ib, p, k = parts
    step = lat.step
    used = np.unique(np.concatenate((ia, ib)))
    ts = {int(g): lat.tilted(int(g), theta, pess) for g in used}

    def field(name, idx):
        return np.array([getattr(ts[int(g)], name) for g in idx], dtype=np.float64)

    s_a, s_b = field("s", ia), field("s", ib)
    # the mixture's normaliser and the tilted weights of its two arrays, rounded the safe way: the
    # represented measure is e^{s} (wa t_a + wb t_b) e^{-theta ell} = (wa e^{s - s_a}) A + (wb e^{s - s_b}) B
    with np.errstate(divide="ignore", invalid="ignore"):
        log_p = np.log(p)
        log_q = np.where(p < 1.0, np.log1p(-p), -np.inf)
        s_mix = np.where(p < 1.0, np.logaddexp(log_p + s_a, log_q + s_b), s_a)
        ea = log_p + s_a - s_mix
        eb = log_q + s_b - s_mix
        marg = 4 * U * (np.abs(log_p) + np.abs(s_a) + np.abs(s_b) + np.abs(s_mix) + np.abs(log_q) + 4.0)
        marg = np.where(p < 1.0, marg, 0.0)
        sign = 1.0 if pess else -1.0
        wa = np.where(p < 1.0, np.exp(ea + sign * marg), 1.0)
        wb = np.where(p < 1.0, np.exp(eb + sign * marg), 0.0)
    wb = np.nan_to_num(wb)
    rho = np.maximum(field("rho", ia), np.where(p < 1.0, field("rho", ib), 0.0))
    mu = wa * field("mu", ia) + wb * field("mu", ib)
    var = wa * (field("v", ia) + field("mu", ia) ** 2) + wb * (field("v", ib) + field("mu", ib) ** 2) - mu ** 2
    if pess:
        p_inf = (p * field("p_inf", ia) + np.where(p < 1.0, (1.0 - p) * field("p_inf", ib), 0.0)) * (1 + 8 * U)
        with np.errstate(divide="ignore"):
            log_keep = float(np.dot(k, np.log1p(-np.minimum(p_inf, 1.0))))
        p_inf_all = -math.expm1(log_keep) * (1 + 1e-12)
    else:
        p_inf_all = 0.0
    lo = np.minimum(field("lo", ia), field("lo", ib))
    hi = np.maximum(field("hi", ia), field("hi", ib))
    kf64 = k.astype(np.float64)

    def mgf(sd, lower=True):
        base = 2.0 ** (CHERNOFF_K / 2.0) / (sd if sd > 0.0 else step)
        lams = np.concatenate((base, -base)) if lower else base
        tab = {}
        for g in used:
            part = ts[int(g)].part
            out = np.empty(lams.size)
            kt.log_mgf_multi(part.t, part.j_lo, step, lams, out)
            tab[int(g)] = out
        total = np.zeros(lams.size)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            for i in range(ia.size):
                a = np.log(wa[i]) + tab[int(ia[i])]
                v = np.logaddexp(a, np.log(wb[i]) + tab[int(ib[i])]) if wb[i] > 0.0 else a
                total += kf64[i] * (v + 1e-12 * (1.0 + np.abs(v)))
        return lams, total

    c = Composite(parts=[], step=step, n_steps=int(k.sum()), mean=float(np.dot(kf64, mu)),
                  var=float(np.dot(kf64, np.maximum(var, 0.0))), log_scale=float(np.dot(kf64, s_mix)),
                  rho_n=float(np.dot(kf64, rho)), p_inf=p_inf_all, sup_lo=int(np.dot(k, lo.astype(np.int64))),
                  sup_hi=int(np.dot(k, hi.astype(np.int64))), mgf=mgf)
    eps_lo = min(eps_lo, c.sup_hi * step)
    win = choose_window(c, theta, pess, eps_lo, lat.tau)
    n = win.n
    index = {int(g): j for j, g in enumerate(used)}
    specs = [lat.spectrum(int(g), theta, pess, n) for g in used]
    table = np.empty((n // 2 + 1, len(used)), dtype=np.complex128)  # (frequency-major)
    for j, sp in enumerate(specs):
        table[:, j] = sp[0]
    e2 = np.array([sp[1] for sp in specs])
    nrm = np.array([sp[2] for sp in specs])
    ja = np.array([index[int(g)] for g in ia], dtype=np.int64)
    jb = np.array([index[int(g)] for g in ib], dtype=np.int64)
    # each part's spectrum error: the lattice spectra's, weighted, plus the combination's
    # rounding (4u of the l2 norm) and 4u absolute
    pe2 = (wa * e2[ja] + wb * e2[jb] + 4 * U * (wa * nrm[ja] + wb * nrm[jb]) + 4 * U) * (1 + 1e-9)
    pa, pb, ps, pair_e2, pcnt = _pairs(ja, jb, wa, wb, pe2, k)
    nbits = int(k.max()).bit_length()
    members = [np.nonzero((k >> b) & 1)[0] for b in range(nbits)]
    bit_ptr = np.concatenate(([0], np.cumsum([mm.size for mm in members]))).astype(np.int64)
    bit_idx = np.concatenate(members).astype(np.int64)
    n_ops = float(k.sum()) + 4.0 * (2.0 ** nbits - 1.0) + 4.0
    z = np.empty(n // 2 + 1, dtype=np.complex128)
    charge(PER_PART_FREQ * (bit_idx.size + ia.size + 4 * pa.size) * z.size)
    args = (table, ja, jb, wa, wb, bit_ptr, bit_idx, pa, pb, ps, pair_e2, pcnt, n_ops)
    h = z.size
    if h < SPLIT_MIN or not two_cores():
        err, z2, vsum = ks.mix_power_range(*args, np.empty(ia.size, dtype=np.complex128), z, 0, h)
    else:  # (the upper half of the frequencies on the helper thread)
        fut = split_pool().submit(ks.mix_power_range, *args, np.empty(ia.size, dtype=np.complex128), z, h // 2, h)
        err, z2, vsum = ks.mix_power_range(*args, np.empty(ia.size, dtype=np.complex128), z, 0, h // 2)
        e_hi, z2_hi, v_hi = fut.result()
        err, z2, vsum = err + e_hi, z2 + z2_hi, vsum + v_hi
    err += float(np.dot(kf64, pe2)) * math.sqrt(vsum) * (1 + 1e-12)
    charge_fft(n)
    x = scipy.fft.irfft(z, n, workers=WORKERS)
    return grid_of(c, win, theta, pess, eps_lo, x, err, z2)


def _pairs(ja, jb, wa, wb, pe2, k):
    """The parts grouped by their two lattice points: (pa, pb, s, e2, count) with s >= (wa + wb)
    (1 + 4u) and e2 >= pe2 over the pair's parts, count their summed copies."""
    keys = ja * (int(max(ja.max(), jb.max())) + 1) + jb
    uniq, inv = np.unique(keys, return_inverse=True)
    npair = uniq.size
    pa = np.zeros(npair, dtype=np.int64)
    pb = np.zeros(npair, dtype=np.int64)
    pa[inv], pb[inv] = ja, jb
    ps = np.zeros(npair)
    np.maximum.at(ps, inv, (wa + wb) * (1 + 8 * U))
    e2 = np.zeros(npair)
    np.maximum.at(e2, inv, pe2)
    cnt = np.zeros(npair, dtype=np.int64)
    np.add.at(cnt, inv, k)
    return pa, pb, ps, e2, cnt


def saddle(lat: _Lattice, parts, eps_c: float, growth: float = VAR_GROWTH, bracket: bool = False) -> float:
    """theta >= 0 with the composed tilted mean near eps_c, the tilted variance (the FFT window)
    grown at most ``growth``-fold: ``tilting.saddle_theta``'s search on the parts' moments
    (heuristic: any tilt is sound)."""
    def moments(theta):
        return lat.moments(parts, theta)

    m, v = moments(0.0)
    if m >= eps_c or not v > 0:
        return 0.0
    cap = theta_cap(eps_c)
    if bracket:
        return saddle_bracket(moments, m, v, eps_c, cap, growth * v)
    v_max = growth * v
    theta = 0.0
    for _ in range(16):
        if not v > 0:
            break
        new = min(max(theta + (eps_c - m) / v, 0.5 * theta), 2 * theta + 1.0, cap)
        if abs(new - theta) < 1e-3 * max(1.0, theta):
            break
        m_new, v_new = moments(new)
        halvings = 0
        while not (math.isfinite(m_new) and v_new <= v_max) and halvings < 8:
            new = 0.5 * (theta + new)
            m_new, v_new = moments(new)
            halvings += 1
        if not (math.isfinite(m_new) and v_new <= v_max):
            break
        if m_new > eps_c + 3.0 * math.sqrt(v_new):
            new = 0.5 * (theta + new)
            m_new, v_new = moments(new)
            if not (math.isfinite(m_new) and v_new <= v_max) or m_new > eps_c + 3.0 * math.sqrt(v_new):
                break
        theta, m, v = new, m_new, v_new
        if halvings or abs(m - eps_c) < 0.05 * math.sqrt(v):
            break
    return max(theta, 0.0)


# --- the engine ------------------------------------------------------------------------------------------
#: past this multiple of the budget the work in progress is abandoned (as ``engine.HARD_LIMIT``)
HARD_LIMIT = 1.5
#: a tilt farther than this from the interval's midpoint is re-centred once more
RECENTRE = 0.05


def families_of(schedule):
    """[(q, sigmas, counts)] of the noisy steps of a (normalised) schedule, one entry per sampling
    rate, sigmas increasing; None where a step has a full batch (q = 1: the brackets assume
    q < 1)."""
    arr = np.array([(s, q, c) for s, q, c in schedule], dtype=np.float64).reshape(-1, 3)
    if arr.size == 0 or (arr[:, 1] >= 1.0).any():
        return None
    order = np.lexsort((arr[:, 0], arr[:, 1]))
    arr = arr[order]
    out = []
    for q in np.unique(arr[:, 1]):
        sel = arr[:, 1] == q
        out.append((float(q), arr[sel, 0].copy(), arr[sel, 2].astype(np.int64)))
    return out


class MixEngine:
    """eps(δ) and δ(eps) of an add/remove schedule [(sigma, q, count)] of noisy steps with q < 1,
    from the lattice mixtures (module notes); the interface of ``engine.Engine`` that
    ``schedules.Sandwich`` uses.

    The plan, as the engine's: compose on a grid step chosen for the accuracy; while the interval
    is wider than the accuracy, refine the grid step, or -- when that no longer narrows it by
    much (the lattice's share dominates) -- double the lattice's cells.  Work is counted
    (``_work``), never timed; the lattice depends only on the schedule, the accuracy and the
    refinement level, so an answer does not depend on earlier queries."""

    def __init__(self, schedule, accuracy: float, budget: float, grid_step: float | None = None):
        self.schedule = tuple(schedule)
        self.families = families_of(self.schedule)
        if not self.families:
            raise ValueError("MixEngine needs noisy steps with q < 1")
        self.accuracy = accuracy
        self.grid_step = grid_step  # (an expert's fixed grid step: no refinement)
        # (a schedule of many distinct steps may spend in proportion: 10^5 of them ten times the
        # budget of 10^4 or fewer)
        self.budget = budget * min(10.0, max(1.0, len(self.schedule) / 1e4))
        self.total = int(sum(c for _, _, c in self.schedule))
        self._plans: dict = {}
        self._est: dict = {}
        self._lat: dict = {}
        self._layouts: dict = {}
        self.last_step = None

    # --- heuristics: where eps lies, its sensitivity to the noise, the lattice ---------------
    def proxy(self):
        """A short schedule with about the same loss moments (each family's steps in 16 groups of
        noise, each at its mean 1 / sigma^2), for estimates and grid steps only."""
        out = []
        for q, sig, cnt in self.families:
            cut = np.unique(np.quantile(sig, np.linspace(0, 1, min(17, sig.size + 1))))
            idx = np.clip(np.searchsorted(cut, sig, side="right") - 1, 0, max(cut.size - 2, 0))
            for j in np.unique(idx):
                sel = idx == j
                w = cnt[sel]
                s_eff = 1.0 / math.sqrt(float(np.dot(w, 1.0 / sig[sel] ** 2)) / float(w.sum()))
                out.append((s_eff, q, int(w.sum())))
        return out

    def estimate(self, target: float):
        """(eps estimate, d eps / d log mu of all steps) from the Gaussian approximation."""
        hit = self._est.get(target)
        if hit is None:
            px = self.proxy()
            est = eps_estimate(px, target)
            h = 0.02
            shifted = eps_estimate([(s / (1 + h), q, c) for s, q, c in px], target)
            hit = self._est[target] = (est, max((shifted - est) / h, 1e-3 * max(est, 1e-3)))
        return hit

    def layout(self, level: int = 0) -> Layout:
        lay = self._layouts.get(level)
        if lay is None:
            est, d_eps = self.estimate(1e-5)  # (a fixed reference: the lattice never depends on a query)
            lay = self._layouts[level] = Layout(self.families, self.accuracy, self.total, d_eps, max(est, 1e-3), level)
        return lay

    def plan(self, h_target: float, level: int = 0) -> Plan:
        key = (float(f"{h_target:.3g}"), level)
        pl = self._plans.get(key)
        if pl is None:
            if len(self._plans) > 8:
                self._plans.clear()
            est, d_eps = self.estimate(1e-5)
            pl = self._plans[key] = Plan(self.layout(level), self.accuracy, key[0], self.total, d_eps, max(est, 1e-3))
        return pl

    def lattice(self, add, step, tau, level: int = 0) -> _Lattice:
        key = (add, step, tau)
        lat = self._lat.get(key)
        if lat is None:
            if len(self._lat) > 4:
                self._lat.pop(next(iter(self._lat)))
            lat = self._lat[key] = _Lattice(add, step, tau)
        return lat.on(self.layout(level))

    def tau(self, delta_goal: float) -> float:
        t = max(TAU_MIN, 1e-4 * self.accuracy * delta_goal / max(self.total, 1))
        return 10.0 ** math.floor(math.log10(t))

    def _limit(self, groups: int = 1) -> float:
        return HARD_LIMIT * self.budget * UNITS_PER_SECOND * groups

    def _next(self, step, level, gap, last_gap, refined_step):
        """The next (step, level): a finer grid step, unless the last one narrowed the interval by
        less than a third (a grid's own width falls about fourfold per halving: the lattice's
        share dominates) -- then twice the lattice's cells."""
        if refined_step and last_gap is not None and gap > 0.67 * last_gap:
            return step, level + 1, False
        return 0.5 * step, level, True

    # --- eps(δ) ----------------------------------------------------------------------------------
    def epsilon(self, target: float, step0=None):
        """(lower, upper, None) of eps(target) of the noisy steps."""
        est, _ = self.estimate(target)
        step = self.grid_step or step0 or initial_step(self.proxy(), self.accuracy, est)
        tau = self.tau(target)
        h_target = H_SHARE * self.accuracy * target
        lo, up = 0.0, math.inf
        last_gap, level, refined_step = None, 0, False
        centre = max(est, 1e-6)
        with metered(Meter(self._limit())) as meter:
            first = True
            while True:
                before = meter.units
                pl = self.plan(h_target, level)
                lo_target = math.nextafter(target + pl.H * (1 + 4 * U), math.inf)  # (>= target + H)
                try:
                    with bins_limit(FIRST_BINS if first else MAX_BINS):
                        for _ in range(3):
                            l, u = self._eps_at(pl, step, tau, target, lo_target, centre, level)
                            lo, up = max(lo, l), min(up, u)
                            mid = 0.5 * (l + u)
                            if not (math.isfinite(mid) and mid > 0) or abs(mid - centre) <= RECENTRE * mid:
                                break
                            centre = mid
                            if up - lo <= self.accuracy * up:  # (narrow already: a better tilt is not needed)
                                break
                except (GridFailure, ArithmeticError, MemoryError):
                    break
                self.last_step = step
                first = False
                gap = u - l  # (this round's own width decides what to refine next)
                if self.grid_step is not None or (up < math.inf and up - lo <= self.accuracy * up):
                    break
                if meter.units + 2.0 * (meter.units - before) > self._limit():
                    break
                if level >= 6 and refined_step and last_gap is not None and gap > 0.8 * last_gap:
                    break  # (neither refinement helps any more)
                new_step, level, refined_step = self._next(step, level, gap, last_gap, refined_step)
                last_gap = gap
                if new_step < 1e-12:
                    break
                step = new_step
        return lo, up, None

    def _eps_at(self, pl: Plan, step, tau, target, lo_target, est, level):
        """(lower, upper) of eps(target) on one grid step, tilted towards ``est`` (both
        directions; the add direction first on a 4x coarser pessimistic grid, as ``TiltedFFT``);
        while the interval is wide and δ small, also with the engine's extra tilts (a bracket
        search, then a long window: ``engine.Engine._eps_at``)."""
        lo, up = self._eps_tilt(pl, step, tau, target, lo_target, est, level, VAR_GROWTH, False)
        if tau * self.total <= SMALL_TAU:
            for growth in (VAR_GROWTH, VAR_GROWTH_SMALL):
                if up < math.inf and up - lo <= self.accuracy * up:
                    break
                l, u = self._eps_tilt(pl, step, tau, target, lo_target, est, level, growth, True)
                lo, up = max(lo, l), min(up, u)
        return lo, up

    def _eps_tilt(self, pl: Plan, step, tau, target, lo_target, est, level, growth, bracket):
        eps_lo = 0.5 * est
        lat = self.lattice(REMOVE, step, tau, level)
        theta = saddle(lat, pl.up, est, growth, bracket)
        up_r = eps_bound(compose_mix(lat, pl.up, theta, True, eps_lo), target)
        lo_r = eps_bound(compose_mix(lat, pl.lo, theta, False, eps_lo), lo_target) if lo_target < 1.0 else 0.0
        lat_c = self.lattice(ADD, 4 * step, tau, level)
        up_a = eps_bound(compose_mix(lat_c, pl.up, saddle(lat_c, pl.up, est, growth, bracket), True, eps_lo), target)
        lo_a = 0.0
        if up_a > up_r:
            lat_a = self.lattice(ADD, step, tau, level)
            th_a = saddle(lat_a, pl.up, est, growth, bracket)
            fine = eps_bound(compose_mix(lat_a, pl.up, th_a, True, eps_lo), target)
            if fine > up_r and lo_target < 1.0:
                lo_a = eps_bound(compose_mix(lat_a, pl.lo, th_a, False, eps_lo), lo_target)
            up_a = min(up_a, fine)
        return max(lo_r, lo_a), max(up_r, up_a)

    # --- δ(eps) ----------------------------------------------------------------------------------
    def delta(self, eps: np.ndarray):
        """(lower, upper) of δ at each finite eps of the noisy steps; refined until lower(eps) >=
        upper(eps + h), h = accuracy * max(eps, 1e-2), or the work budget is spent."""
        eps = np.asarray(eps, dtype=np.float64)
        lo, up = np.zeros(eps.size), np.ones(eps.size)
        if eps.size == 0:
            return lo, up
        est, _ = self.estimate(1e-6)
        step = self.grid_step or initial_step(self.proxy(), self.accuracy, max(float(eps.max()), est))
        tau = self.tau(1e-16)
        # nearby eps (within 0.1) share one tilted composition; at most 8 groups
        order = np.argsort(eps)
        keys = np.round(eps[order], 1)
        groups = [order[keys == kk] for kk in np.unique(keys)]
        if len(groups) > 8:
            groups = np.array_split(order, 8)
        h = self.accuracy * np.maximum(eps, 1e-2)
        up_shift = np.ones(eps.size)
        limit = self._limit(len(groups))
        last_gap, level, refined_step = None, 0, False
        with metered(Meter(limit)) as meter:
            first = True
            while True:
                before = meter.units
                gap = 0.0
                try:
                    with bins_limit(FIRST_BINS if first else MAX_BINS):
                        for g in groups:
                            l, u, us = self._delta_at(step, tau, eps[g], eps[g] + h[g], level)
                            gap = max(gap, float(np.max((u - l) / np.maximum(u, 1e-300))))
                            lo[g], up[g] = np.maximum(lo[g], l), np.minimum(up[g], u)
                            up_shift[g] = np.minimum(up_shift[g], us)
                except (GridFailure, ArithmeticError, MemoryError):
                    break
                self.last_step = step
                first = False
                if self.grid_step is not None or ((lo >= up_shift) | (up - lo <= 1e-300)).all():
                    break
                if meter.units + 2.0 * (meter.units - before) > limit:
                    break
                if level >= 6 and refined_step and last_gap is not None and gap > 0.8 * last_gap:
                    break
                new_step, level, refined_step = self._next(step, level, gap, last_gap, refined_step)
                last_gap = gap
                if new_step < 1e-12:
                    break
                step = new_step
        return lo, up

    def _delta_at(self, step, tau, e, e_shift, level):
        """(lower, upper, upper at e_shift) of δ at the eps ``e`` (one group) on one grid step.
        The add direction, which usually lies well below the remove one, first on a 4x coarser
        pessimistic grid (as ``TiltedFFT``): only where that does not settle it, finely."""
        eps_c = max(float(e.min()), 1e-6)
        e_lo = float(e.min())
        base = self.plan(1.0, level)  # (the upper parts do not depend on the failure mass)
        lat = self.lattice(REMOVE, step, tau, level)
        th_r = saddle(lat, base.up, eps_c)
        g = compose_mix(lat, base.up, th_r, True, e_lo)
        up, up_shift = delta_bound(g, e), delta_bound(g, e_shift)
        lat_c = self.lattice(ADD, 4 * step, tau, level)
        g = compose_mix(lat_c, base.up, saddle(lat_c, base.up, eps_c), True, e_lo)
        up_a, up_a_shift = delta_bound(g, e), delta_bound(g, e_shift)
        th_a = None
        if (up_a > up).any() or (up_a_shift > up_shift).any():
            lat_a = self.lattice(ADD, step, tau, level)
            th_a = saddle(lat_a, base.up, eps_c)
            g = compose_mix(lat_a, base.up, th_a, True, e_lo)
            up_a, up_a_shift = np.minimum(up_a, delta_bound(g, e)), np.minimum(up_a_shift, delta_bound(g, e_shift))
        add_matters = (up_a > up).any()
        up, up_shift = np.maximum(up, up_a), np.maximum(up_shift, up_a_shift)
        # the lower bound's failure mass: a small share of the least upper δ of the group
        pl = self.plan(H_SHARE * self.accuracy * max(float(up.min()), 1e-300), level)
        lo = delta_bound(compose_mix(lat, pl.lo, th_r, False, e_lo), e)
        if add_matters and th_a is not None:  # (its lower bound can only matter where its upper is larger)
            lat_a = self.lattice(ADD, step, tau, level)
            lo = np.maximum(lo, delta_bound(compose_mix(lat_a, pl.lo, th_a, False, e_lo), e))
        lo = np.maximum(lo - pl.H * (1 + 4 * U), 0.0)
        return lo, up, up_shift
