"""Schedules whose noise level *and* sampling rate change every step: the product of the noise-level
mixtures (``schedule_mix``) and the rate chords (``schedule_rates``).

The lattice is a product: noise levels s_0 < ... < s_m (``schedule_mix._cells`` over all the steps'
1/sigma) times rates q_0 < ... < q_r (geometric, as ``schedule_rates``).  A step (sigma, q) lies in
the cell [s_c, s_{c+1}] x [q_d, q_{d+1}]; only the lattice points are discretised and transformed,
and each step is composed as a combination of its cell's four corners' spectra (the mixture kernel
with K = 4).

Upper bound.  At its own sigma, the step is below the rate chord lam_q (sigma, q_{d+1}) + (1 -
lam_q) (sigma, q_d) (``schedule_rates``: joint convexity); at each of those two rates, the step
(sigma, q') is below the noise chord lam_s (s_c, q') + (1 - lam_s) (s_{c+1}, q') (``schedule_mix``:
δ = A + B δ_G(1/sigma, x) with A, B, x free of sigma, δ_G convex in t = Phi(1/(2 sigma))), and lam_s
does not depend on q'.  Mixtures act linearly on δ, so the step is below the four-point mixture with
product weights, in the order composition keeps.  Groups: the steps of a cell whose lam_s lie in one
bin of width ``tol`` take the bin's largest lam_s (a mixture with more weight on the less noisy point
is more revealing); with lam_s common the steps' noise choices are exchangeable, so for any pair of
steps the composition averaged over their noise choices is symmetric in their rate choices, and the
Poisson-binomial argument of ``schedule_mix`` (moving two weights towards each other at a fixed
product of 1 - lam) takes the rate weights to 1 - geomean(1 - lam_q), rounded up.  Each group is k
copies of one four-point mixture.

Lower bound.  Each step with a failure event of probability eta is above the noise mixture lam'
(s_c, q) + (1 - lam') (s_{c+1}, q) at its own rate (``schedule_mix``'s lower weights; the failure
masses sum to H, subtracted); lam' may be lowered to its bin's least value (less revealing).  On
these mixtures -- whose noise choice is revealed -- the test of ``schedule_rates`` is applied: A =
{S >= s}, S the sum of f(choice, z), f the remove loss of the lattice point (s_choice, q_g) rounded
to the grid, q_g the lattice rate nearest the step's.  Under Q each term has the law lam' N0_a +
(1 - lam') N0_b of f (two points); under P, lam' ((1 - q) N0_a + q N1_a) + (1 - lam') ((1 - q) N0_b
+ q N1_b) (four points).  Steps sharing (cell, g, bin of lam') are exchangeable given their
choices, f grows with the output, and lam' is common: their rates go to geomean(q) rounded down,
as in ``schedule_rates`` (the add direction swaps the chains).

Soundness rests on the same pieces as the two engines it combines; the lattice, the bins and the
groups decide only tightness and cost.  Tests: tests/test_schedule_product.py (schedules of
distinct (sigma, q) against the exact engine, eps and δ).
"""

from __future__ import annotations

import math

import numpy as np

from .common import dot
from .schedule_engine import MixEngine, quantile_groups
from .schedule_mix import MERGE_SHARE, _cells, _merge_all, lower_weights, sigma_lattice, upper_weights
from .schedule_rates import RateEngine, chord_weights, rate_cells, rate_lattice

#: most lattice points (sigma x q) the engine uses, seconds of planned discretisation at δ = 1e-5
#: (``RateEngine.planned``) and upper parts it takes: beyond, ``schedules.Sandwich``'s groups.
#: Steps spread over both axes rarely share a part (a part's steps need one noise weight), so a
#: part per step is the rule there: 10^4 of them took 38 units (14 s) for [2.2643, 2.2768]
PRODUCT_POINTS = 160
PRODUCT_PLAN = 0.5
PRODUCT_PARTS = 4000
#: the same caps at a coarser accuracy than the one asked for (``schedules._product``): there the
#: parts' product costs less than the points' grids, and more points narrow the answer most (10^4
#: random (sigma, q) at twice the accuracy: 9,190 parts on 315 points, 0.30 % in 2.9 s, where at
#: most 160 points and 4,000 parts took sixteen times the accuracy and left 1.4 % in 2.3 s; 10^5
#: of them: 30,000 parts at four times the accuracy, 0.59 % in 9.9 s, where 12,000 left 1.5 %)
COARSE_POINTS = 320
COARSE_PARTS = 30000
#: a coarse lattice's answer gets the groups' sandwich beside it only past this relative width (a
#: collapsed lower bound: 10^4 random (σ, q) are 0.3 % wide on it, the groups alone 23 %)
COARSE_SANDWICH_IF_WIDER = 0.25
#: most memory for one composition's table of lattice spectra (the statistic's chains have two laws
#: a point: 190 laws of 118,099 frequencies, 359 MB, took a 10^5-step run to 1.1 GB)
PRODUCT_TABLE = 192 << 20
#: most cells of the lattice's noise axis and of its rate axis
SIGMA_CELLS = 64
RATE_CELLS = 64
#: share of the accuracy each bound's noise-weight bins may use (a bin's steps all take its largest
#: upper weight, or its least lower weight: first order in the bin's width).  A noise decay with a
#: batch-size ramp over 10^4 steps: 0.3 left 1.3e-3, 0.15 meets 1e-3, 0.1 overran its first round
BIN_SHARE = 0.15


class ProductLayout:
    """The product lattice of one schedule: noise levels ``slat`` (``_cells``, 2^level times the
    cells its error model asks for) times rates ``qlat`` (geometric, spacing as ``schedule_rates``),
    both axes thinned by a common factor (steps of 0.9: 0.8 left 240 of 320 points to 10^4 random
    (sigma, q), 0.37 % wide where 315 give 0.30 %) until at most ``points`` are used; point
    (i, j) is i * nq + j, ``sigmas``/``qs`` list the points.  Heuristics: tightness and cost only."""

    def __init__(self, sig, q, cnt, accuracy, d_eps, eps_est, level: int = 0, points: int = PRODUCT_POINTS):
        mu = 1.0 / sig
        n_total = int(cnt.sum())
        nd = np.unique(mu).size
        edges = _cells(mu, cnt, accuracy, n_total, d_eps, eps_est, 2 ** level, SIGMA_CELLS, nd)
        s_cells = np.unique(sig).size - 1 if edges is None else edges.size - 1
        uq = np.unique(q)
        q_cells = rate_cells(uq, accuracy, level, RATE_CELLS)
        for f in 0.9 ** np.arange(80):
            cs, cq = max(1, round(f * s_cells)), max(1, round(f * q_cells))
            e = _cells(mu, cnt, accuracy, n_total, d_eps, eps_est, 2 ** level, cs, nd) \
                if edges is not None or cs < s_cells else None
            self._axes(sig, q, sigma_lattice(sig, e), rate_lattice(uq, cq))
            if self.used().size <= points or (cs == 1 and cq == 1):
                break

    def _axes(self, sig, q, slat, qlat):
        self.slat, self.qlat = slat, qlat
        self.sigmas = [float(x) for x in slat for _ in qlat]
        self.qs = [float(x) for _ in slat for x in qlat]
        # cells by exact comparison: slat[c] <= sigma < slat[c + 1] (the top one closed)
        self.c = np.clip(np.searchsorted(slat, sig, side="right") - 1, 0, max(slat.size - 2, 0))
        self.d = np.clip(np.searchsorted(qlat, q, side="right") - 1, 0, max(qlat.size - 2, 0))

    def point(self, i, j):
        """Index of lattice point (i, j), each clipped to its axis (a one-point axis: its point)."""
        return np.minimum(i, self.slat.size - 1) * self.qlat.size + np.minimum(j, self.qlat.size - 1)

    def used(self):
        """Indices of the points some cell's corners use, increasing (a mask over the points: the
        layout's thinning asks at every trial)."""
        cells = np.zeros((max(self.slat.size - 1, 1), max(self.qlat.size - 1, 1)), dtype=bool)
        cells[self.c, self.d] = True
        ci, di = np.nonzero(cells)
        mask = np.zeros(self.slat.size * self.qlat.size, dtype=bool)
        for a in (0, 1):
            for b in (0, 1):
                mask[self.point(ci + a, di + b)] = True
        return np.flatnonzero(mask)


def _bins(lam, tol):
    """Bin of each weight in bins of width ``tol`` (a heuristic)."""
    return np.floor(np.asarray(lam) / tol).astype(np.int64)


def _groups(*cols):
    """(distinct rows of the non-negative integer columns, in lexicographic order, the row of each
    step): one int64 key a row (``np.unique`` of rows sorts a structured view, 0.1 s at 10^5)."""
    cols = [np.asarray(x, dtype=np.int64) for x in cols]
    dims = tuple(int(x.max()) + 1 for x in cols)
    key = np.ravel_multi_index(cols, dims)
    uk, inv = np.unique(key, return_inverse=True)
    return np.stack(np.unravel_index(uk, dims), axis=1), inv.reshape(-1)


def noise_bins(lay, sig, cnt, accuracy, d_eps, eps_est):
    """(the steps' upper noise weights, the width of their bins): a weight moved by x costs about x
    times its cell's first-order width, the bins' half width on average, BIN_SHARE of the
    accuracy in all (a heuristic)."""
    mu, m_lat = 1.0 / sig, 1.0 / lay.slat
    c = lay.c
    width = float(np.sum(cnt * (m_lat[c] - m_lat[np.minimum(c + 1, lay.slat.size - 1)]) / mu)) / float(cnt.sum())
    tol_s = min(max(2 * BIN_SHARE * accuracy * eps_est / max(d_eps * width, 1e-300), 1e-3), 0.5)
    lam_s = np.ones(sig.size)
    if lay.slat.size > 1:
        for cc in np.unique(c):
            sel = c == cc
            lam_s[sel] = upper_weights(mu[sel], m_lat[cc + 1], m_lat[cc])
    return lam_s, tol_s


def _merged_parts(idx, w, k):
    """(idx, w, k) with equal rows of points and weights merged (their k summed), in the order of
    the rows (points, then weights)."""
    width = idx.shape[1]
    rows, inv = np.unique(np.concatenate((idx.astype(np.float64), w), axis=1), axis=0, return_inverse=True)
    kk = np.zeros(rows.shape[0], dtype=np.int64)
    np.add.at(kk, inv.reshape(-1), k)
    return rows[:, :width].astype(np.int64), np.ascontiguousarray(rows[:, width:]), kk


def _four(big, p):
    """The four product weights of noise weight ``big`` and rate weight ``p`` (arrays)."""
    return np.stack((big * p, big * (1 - p), (1 - big) * p, (1 - big) * (1 - p)), axis=1)


class ProductPlan:
    """The parts of one layout (module notes), as (idx, w, k): ``up`` the four-point product
    mixtures over lattice points; ``plo`` the P-chain of the statistics (point g's N0-law is 2g,
    its N1-law 2g + 1), ``qlo`` their Q-chain; ``H`` >= the lower bound's failure mass.  The upper
    parts do not depend on ``h_target`` (``up``: a plan of the same layout may pass its own); the
    lower ones are made on first use (a plan asked only for its upper parts never makes them)."""

    def __init__(self, lay: ProductLayout, sig, q, cnt, accuracy, h_target, d_eps, eps_est, up=None, bins=None):
        self._args = (lay, sig, q, cnt, accuracy, h_target)
        self._lam_s, self._tol_s = bins if bins is not None else noise_bins(lay, sig, cnt, accuracy, d_eps, eps_est)
        self.up = up if up is not None else self._upper(lay, q, cnt, lay.c, lay.d, self._lam_s, self._tol_s, accuracy)
        self._lo = None

    @property
    def H(self) -> float:
        return self._lower_parts()[0]

    @property
    def plo(self):
        return self._lower_parts()[1]

    @property
    def qlo(self):
        return self._lower_parts()[2]

    def _lower_parts(self):
        if self._lo is None:
            lay, sig, q, cnt, accuracy, h_target = self._args
            n_total = float(cnt.sum())
            mu, m_lat, c = 1.0 / sig, 1.0 / lay.slat, lay.c
            low_s = np.ones(sig.size)
            big_h = 0.0
            for cc in np.unique(c):
                sel = c == cc
                q_max = float(q[sel].max())
                # base excess: h_target over all steps at the cell's largest rate (the least excess)
                log_e = math.log(h_target) + 2 * math.log1p(-q_max) - math.log(n_total * q_max) - 1e-9
                big_h += math.exp(log_e) * dot(cnt[sel].astype(np.float64), q[sel] / (1 - q[sel]) ** 2)
                if lay.slat.size > 1:
                    low_s[sel] = lower_weights(mu[sel], m_lat[cc + 1], m_lat[cc], log_e)
            self._lo = (big_h * (1 + 1e-9), *self._lower(lay, q, cnt, c, low_s, self._tol_s, accuracy))
        return self._lo

    @staticmethod
    def _upper(lay, q, cnt, c, d, lam_s, tol_s, accuracy, cap=None):
        """The upper parts (idx, w, k); None where more than ``cap`` parts are made (before merging
        equal ones)."""
        two_q = lay.qlat.size > 1
        lam_q = chord_weights(q, lay.qlat[d], lay.qlat[d + 1]) if two_q else np.ones(q.size)
        uk, gid = _groups(c, d, _bins(lam_s, tol_s))
        big = np.full(uk.shape[0], -math.inf)
        np.maximum.at(big, gid, lam_s)  # (a group's steps take its largest noise weight)
        cc, dd = uk[:, 0], uk[:, 1]
        tols = np.full(uk.shape[0], 0.25)
        if two_q:
            gap = np.log(lay.qlat[np.minimum(dd + 1, lay.qlat.size - 1)] / lay.qlat[dd])
            with np.errstate(divide="ignore"):
                tols = np.minimum(np.maximum(MERGE_SHARE * accuracy / gap, 1e-3), 0.25)
        grp, p, k = _merge_all(gid, lam_q, cnt, tols, True)
        if cap is not None and grp.size > cap:
            return None
        corners = lay.point(np.stack((cc, cc, cc + 1, cc + 1), axis=1), np.stack((dd + 1, dd, dd + 1, dd), axis=1))
        return _merged_parts(corners[grp], _four(big[grp], p), k)

    @staticmethod
    def _lower(lay, q, cnt, c, low_s, tol_s, accuracy):
        lq = np.log(lay.qlat)
        g = np.searchsorted(0.5 * (lq[:-1] + lq[1:]), np.log(q)) if lay.qlat.size > 1 else np.zeros(q.size, np.int64)
        uk, gid = _groups(c, g, _bins(low_s, tol_s))
        small = np.full(uk.shape[0], math.inf)
        np.minimum.at(small, gid, low_s)  # (a group's steps take its least lower noise weight)
        k_grp = np.zeros(uk.shape[0], dtype=np.int64)
        np.add.at(k_grp, gid, cnt)
        ab = lay.point(np.stack((uk[:, 0], uk[:, 0] + 1), axis=1), np.stack((uk[:, 1], uk[:, 1]), axis=1))
        qlo = _merged_parts(2 * ab, np.stack((small, 1 - small), axis=1), k_grp)
        pts = np.stack((2 * ab[:, 0] + 1, 2 * ab[:, 0], 2 * ab[:, 1] + 1, 2 * ab[:, 1]), axis=1)
        grp, p, k = _merge_all(gid, q, cnt, np.full(uk.shape[0], MERGE_SHARE * accuracy), False)
        return _merged_parts(pts[grp], _four(small[grp], p), k), qlo


class ProductEngine(RateEngine):
    """eps(δ) and δ(eps) of an add/remove schedule of noisy steps with q < 1 whose noise levels and
    rates are both many (module notes); ``MixEngine``'s plan of refinement on the product lattice,
    with ``RateEngine``'s statistic below."""

    table_bytes = PRODUCT_TABLE

    def __init__(self, schedule, accuracy: float, budget: float, grid_step: float | None = None, coarse: bool = False):
        super().__init__(schedule, accuracy, budget, grid_step)
        # (at an accuracy coarser than the one asked for: more lattice points and upper parts, and the
        # groups' sandwich beside it only past COARSE_SANDWICH_IF_WIDER)
        self.points_cap, self.parts_cap = (COARSE_POINTS, COARSE_PARTS) if coarse else (PRODUCT_POINTS, PRODUCT_PARTS)
        if coarse:
            self.sandwich_if_wider = COARSE_SANDWICH_IF_WIDER
        self._ups: dict = {}  # (each layout's upper parts: they do not depend on the failure mass)
        self._bins: dict = {}  # (each layout's upper noise weights and bin width, ``noise_bins``)
        arr = np.array(self.schedule, dtype=np.float64).reshape(-1, 3)
        self.sig, self.q, self.cnt = arr[:, 0].copy(), arr[:, 1].copy(), arr[:, 2].astype(np.int64)

    def proxy(self):
        """A short schedule of about the same loss moments: the steps in up to 8 x 8 groups of
        noise and rate quantiles, each at its mean 1 / sigma^2 and root-mean-square rate
        (heuristic: estimates and grid steps)."""
        out = []
        w_all = self.cnt.astype(np.float64)
        for sel_s in quantile_groups(self.sig, 8):
            for sel_q in quantile_groups(self.q[sel_s], 8):
                sel = np.flatnonzero(sel_s)[sel_q]
                w = w_all[sel]
                s_eff = 1.0 / math.sqrt(dot(w, 1.0 / self.sig[sel] ** 2) / float(w.sum()))
                out.append((s_eff, math.sqrt(dot(w, self.q[sel] ** 2) / float(w.sum())), int(w.sum())))
        return out

    plan = MixEngine.plan  # (its plans depend on the failure mass, as the noise mixtures' do)

    def _new_layout(self, level: int, d_eps: float, eps_est: float) -> ProductLayout:
        return ProductLayout(self.sig, self.q, self.cnt, self.accuracy, d_eps, eps_est, level, self.points_cap)

    def _new_plan(self, lay, h_target: float, d_eps: float, eps_est: float) -> ProductPlan:
        # (the upper parts are the layout's whatever the failure mass: made once a layout)
        pl = ProductPlan(lay, self.sig, self.q, self.cnt, self.accuracy, h_target, d_eps, eps_est, self._ups.get(lay),
                         self.noise_bins(lay))
        self._ups[lay] = pl.up
        return pl

    def noise_bins(self, lay):
        """``noise_bins`` of a layout, made once (``fits`` and every plan of the layout read them)."""
        if lay not in self._bins:
            est, d_eps = self.estimate(1e-5)
            self._bins[lay] = noise_bins(lay, self.sig, self.cnt, self.accuracy, d_eps, max(est, 1e-3))
        return self._bins[lay]

    def fits(self) -> bool:
        """Whether the engine takes the schedule: RATE_SAMPLED expected sampled steps in a long
        run (``sampled_enough``), at most ``parts_cap`` upper parts and PRODUCT_PLAN seconds of
        planned discretisation (``RateEngine.planned``, on the points the cells use)."""
        if not self.sampled_enough():
            return False
        lay = self.layout(0)
        if self.planned() > PRODUCT_PLAN:
            return False
        if lay not in self._ups:  # (made here, kept for the plans; None past the cap)
            lam_s, tol_s = self.noise_bins(lay)
            up = ProductPlan._upper(lay, self.q, self.cnt, lay.c, lay.d, lam_s, tol_s, self.accuracy, self.parts_cap)
            if up is None:
                return False
            self._ups[lay] = up
        return self._ups[lay][0].shape[0] <= self.parts_cap

