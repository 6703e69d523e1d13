"""Schedules whose sampling rate changes every step (a batch-size schedule): rate chords above, a
test statistic below.

A schedule of many distinct rates q among a few noise levels sigma is, for each sigma, a family
of steps whose q spans a lattice q_0 < ... < q_m (geometric, spacing ``RATE_SPACING`` sqrt(accuracy)).
Only lattice points are discretised and transformed; every step is composed as a combination of
its neighbours' spectra, inside the product (``schedule_compose.compose_mix``, the kernel of the
noise-level mixtures).

Upper bound.  For a step of rate q in [q_a, q_b] and lambda = (q - q_a) / (q_b - q_a), the
pair (P_q, Q) has P_q = (1 - lambda) P_{q_a} + lambda P_{q_b} and the same Q, in both directions
(remove: P_q = (1 - q) N0 + q N1, Q = N0; add: the two swapped).  By joint convexity of the
hockey-stick divergence its δ(eps) is at most (1 - lambda) δ_a(eps) + lambda δ_b(eps) at every
eps: the step is below the revealed mixture of its two lattice points, in the order that
composition keeps (``schedule_mix``'s notes); lambda is rounded up.  Groups of mixtures with the
same points become k copies of one (``schedule_mix._merge``: a Poisson-binomial count of q_b
draws is stochastically below a binomial at 1 - geomean(1 - lambda)).  Second order in the
spacing: the chord of a convex function.

Lower bound.  A mixture below the step cannot be had: a lattice point above q moves loss mass
beyond the step's support (the add loss is at most -log(1 - q)).  Instead, for every event A of
the composed output, δ(eps) >= P(A) - e^eps Q(A).  Take A = {S >= s} for the statistic S =
sum_i f_g(z_i), f_g the remove loss of a lattice point g = (sigma, q_g) near the step's rate,
rounded down to the grid and clamped to its range (``_kernels.pld.statistic``): a fixed function
of each output, whatever the floating-point rounding of its edges.  Under Q each term has f_g's
N0-law; under P the law (1 - q_i) N0-law + q_i N1-law -- linear in the step's own rate.  The
two laws are composed on the grid as P- and Q-chains (optimistic: every rounding and the
window's alias subtracted; pessimistic: added, the mass above the window kept at +inf) and every
s on the grid is tried.  Near-optimal: f_g is the likelihood ratio of a step of rate q_g, and a
test off the optimal one by h loses O(h^2).  Steps that share g are grouped, each group at the
geometric mean of its rates rounded down: given which steps drew N1 the statistic's law depends
only on how many did (the steps are exchangeable) and grows stochastically with it, so P(A) is
at least its value under a binomial count at geomean(q) (the same Poisson-binomial order), and
Q(A) does not depend on the rates.  Only the remove direction is bounded below (δ of add/remove
is the larger of the two directions).

Soundness therefore rests on: the lattice points' grids (``onestep``), the statistic's masses
within their error bounds, the weights rounded the safe way, and the compositions' own bounds
(``composition``); the lattice, the groups and the statistic's points decide only tightness and
cost.  Tests: tests/test_schedule_rates.py (the statistic's masses against mpmath, the chords
against the exact engine, schedules of a few rates against it).
"""

from __future__ import annotations

import math
from functools import cached_property

import numpy as np

from .._kernels.pld import statistic as kst
from .._work import UNITS_PER_SECOND, charge
from .common import REMOVE, STEP_CACHE, GridTooLarge, cache_put, dot
from .grid.queries import suffix_sums
from .grid.estimates import initial_step
from .grid.onestep import discretise_units, grid_range, planned_units
from .schedule_compose import _Lattice, compose_mix, lattice_in
from .schedule_engine import MixEngine, quantile_groups
from .schedule_mix import MAX_CELLS, MAX_POINTS, MERGE_SHARE, U, _arrays, _merge

#: most distinct noise levels whose steps' rates get lattices of their own (each a family), and
#: most lattice points in all (about 0.1 s of work each at 10^4 steps: 127 points passed the
#: first round's work limit, 96 took 6.4 units; beyond, ``schedules.Sandwich``'s groups)
MAX_SIGMAS = 32
RATE_POINTS = 96
#: nor where discretising them for a query at δ = 1e-5 plans more than RATE_PLAN seconds of work
#: (``RateEngine.planned``): tiny rates on fine grids, where the statistic's tails are loose and a
#: first round took 10-17 units to no avail (0.29-1.9 s planned; 1.23 GB at 0.29)
RATE_PLAN = 0.2
#: nor where a run of more than RATE_LONG steps samples fewer than RATE_SAMPLED of them in
#: expectation (sum of q): its loss is a sum of rare large draws, whose tilted tails the two
#: chains bound too loosely for the test (σ 1, q 1e-4 to 2e-4 over 10^4 steps, δ 1e-10: 15 units,
#: 8.6 s on one core, wide; two fuzz cases alike)
RATE_SAMPLED = 3.0
RATE_LONG = 1000
#: the rate lattice's ratio q_{k+1} / q_k is at most 1 + RATE_SPACING sqrt(accuracy) / 2^level
#: (the chord's width is about (ratio - 1)^2 / 12 of eps: a quarter of the accuracy at level 0)
RATE_SPACING = 1.6


def sigma_families(schedule):
    """[(sigma, rates, counts)] of the noisy steps of a normalised schedule [(sigma, q, count)],
    one entry per noise level, rates increasing."""
    arr = np.array([(s, q, c) for s, q, c in schedule], dtype=np.float64).reshape(-1, 3)
    if arr.size == 0:
        return []
    arr = arr[np.lexsort((arr[:, 1], arr[:, 0]))]
    cuts = np.flatnonzero(np.diff(arr[:, 0])) + 1
    return [(float(a[0, 0]), a[:, 1].copy(), a[:, 2].astype(np.int64)) for a in np.split(arr, cuts)]


# --- the statistic's laws as one-step arrays --------------------------------------------------------
class _Stat:
    """One law of a lattice point's statistic on the grid, as ``composition.TiltedStep`` reads a
    one-step (``masses(pess)``: rounded up or down; no mass at +inf)."""

    __slots__ = ("j_lo", "lo", "hi")
    p_inf = 0.0

    def __init__(self, j_lo, lo, hi):
        self.j_lo, self.lo, self.hi = j_lo, lo, hi

    @property
    def pess(self):  # (``_Lattice.moments``: a tilt heuristic)
        return self.hi

    def masses(self, pess: bool) -> np.ndarray:
        return self.hi if pess else self.lo


def stat_steps(sigma: float, q: float, add, step: float, tau: float):
    """(N0-law, N1-law) of the statistic of (sigma, q) on the grid (module notes), cached; ``add``:
    of its negative (the add loss), the arrays reversed."""
    key = ("stat", sigma, q, add, step, tau)
    hit = STEP_CACHE.get(key)
    if hit is None:
        j_lo, j_hi = grid_range(sigma, q, REMOVE, step, tau)
        n = j_hi - j_lo + 1
        charge(2 * discretise_units(n, REMOVE))
        up1, lo0, lo1, up0 = (np.empty(n) for _ in range(4))
        kst.statistic_masses(sigma, q, step, j_lo, n, up1, lo0, lo1, up0)
        if not all(np.isfinite(a).all() for a in (up1, lo0, lo1, up0)):
            raise FloatingPointError(f"non-finite statistic masses at sigma={sigma}, q={q}")
        if add:
            hit = (_Stat(-j_hi, lo0[::-1].copy(), up0[::-1].copy()), _Stat(-j_hi, lo1[::-1].copy(), up1[::-1].copy()))
        else:
            hit = (_Stat(j_lo, lo0, up0), _Stat(j_lo, lo1, up1))
        cache_put(key, hit)
    return hit


class _StatLattice(_Lattice):
    """The statistics' laws of a layout's points: 2g is point g's N0-law, 2g + 1 its N1-law."""

    def _key(self, g):
        return self.layout.sigmas[g // 2], self.layout.qs[g // 2], g % 2

    def one(self, g):
        key = self._key(g)
        o = self._one.get(key)
        if o is None:
            o = self._one[key] = stat_steps(key[0], key[1], self.add, self.step, self.tau)[key[2]]
        return o


# --- lattice and plan ---------------------------------------------------------------------------------
class RateLayout:
    """Each family's rate lattice (geometric between its least and largest rate; its distinct
    rates themselves where they are about as many): ``sigmas``/``qs`` list the points,
    ``families`` [(sigma, rates, counts, point indices, cell of each step, lattice rates)]."""

    def __init__(self, families, accuracy: float, level: int = 0):
        self.sigmas, self.qs, self.families = [], [], []
        cap = max(1, min(MAX_CELLS, MAX_POINTS // max(len(families), 1)))
        for sigma, qs, cnt in families:
            uq = np.unique(qs)
            lat = rate_lattice(uq, rate_cells(uq, accuracy, level, cap))
            first = len(self.sigmas)
            self.sigmas.extend([float(sigma)] * lat.size)
            self.qs.extend(float(x) for x in lat)
            cell = np.clip(np.searchsorted(lat, qs, side="right") - 1, 0, max(lat.size - 2, 0))
            self.families.append((sigma, qs, cnt, first + np.arange(lat.size), cell, lat))

    def used(self) -> np.ndarray:
        """Indices of the points the steps use: all of them."""
        return np.arange(len(self.sigmas))


def rate_cells(uq, accuracy: float, level: int, cap: int) -> int:
    """Cells of a geometric rate lattice over the distinct rates ``uq`` (ratio at most 1 +
    RATE_SPACING sqrt(accuracy) / 2^level), at most ``cap``."""
    ratio = 1.0 + RATE_SPACING * math.sqrt(accuracy) / 2 ** level
    return min(cap, math.ceil(math.log(uq[-1] / uq[0]) / math.log(ratio))) if uq.size > 1 else 0


def rate_lattice(uq, cells: int) -> np.ndarray:
    """The rates themselves where they are about as many as ``cells`` + 1, else a geometric lattice
    of ``cells`` cells from the least to the largest."""
    if uq.size <= cells + 1:
        return uq
    return np.unique(np.concatenate(([uq[0], uq[-1]], np.geomspace(uq[0], uq[-1], cells + 1)[1:-1])))


def chord_weights(q, qa: float, qb: float) -> np.ndarray:
    """lambda >= (q - qa) / (qb - qa) for rates q in [qa, qb] (three roundings, 8u covers them)."""
    return np.minimum((np.asarray(q, dtype=np.float64) - qa) / (qb - qa) * (1 + 8 * U), 1.0)


class RatePlan:
    """The parts of one layout, as arrays (ia, ib, p, k) (``schedule_mix.Plan``'s): ``up`` the
    rate chords over lattice points; ``plo`` the P-chain of the statistics (points 2g + 1 with
    weight p, 2g with 1 - p: k steps at the rate p), ``qlo`` their Q-chain; no failure mass."""

    H = 0.0

    def __init__(self, layout: RateLayout, accuracy: float):
        up, plo, qlo = [], [], {}
        tol = MERGE_SHARE * accuracy
        for _sigma, qs, cnt, pts, cell, lat in layout.families:
            # the statistic of the lattice point nearest in log q
            near = np.searchsorted(0.5 * (np.log(lat[:-1]) + np.log(lat[1:])), np.log(qs)) if lat.size > 1 else \
                np.zeros(qs.size, dtype=np.int64)
            for g in np.unique(near):
                sel = near == g
                for p, k in _merge(qs[sel], cnt[sel], tol, False):
                    plo.append((2 * int(pts[g]) + 1, 2 * int(pts[g]), p, k))
                qlo[2 * int(pts[g])] = qlo.get(2 * int(pts[g]), 0) + int(cnt[sel].sum())
            for c in np.unique(cell):
                sel = cell == c
                ia, ib = int(pts[min(c + 1, lat.size - 1)]), int(pts[c])
                at_a = qs[sel] == lat[c]
                at_b = qs[sel] == lat[min(c + 1, lat.size - 1)]
                for flag, g in ((at_a, ib), (at_b & ~at_a, ia)):
                    if flag.any():
                        up.append((g, g, 1.0, int(cnt[sel][flag].sum())))
                inner = ~(at_a | at_b)
                if inner.any():
                    lam = chord_weights(qs[sel][inner], lat[c], lat[c + 1])
                    # (a weight moved towards q_b costs about that share of the cell's first-order
                    # width, log(q_b / q_a) of eps: MERGE_SHARE of the accuracy in all)
                    tol_up = min(max(tol / math.log(lat[c + 1] / lat[c]), 1e-3), 0.25)
                    for p, k in _merge(lam, cnt[sel][inner], tol_up, True):
                        up.append((ia, ib, p, k))
        self.up = _arrays(up)
        self.plo = _arrays(plo)
        self.qlo = _arrays([(g, g, 1.0, k) for g, k in qlo.items()])


# --- the engine ---------------------------------------------------------------------------------------
def _tails(grid, lower: bool):
    """(grid indices, log of a bound on the untilted mass at losses >= each index's): below
    (``lower``: the optimistic grid's excess and rounding subtracted) or above (its +inf mass
    added).  The tilted tail sums are the grid's own (``queries.suffix_sums``, non-negative terms:
    each within (2n + 2) u)."""
    _, a, _ = suffix_sums(grid)
    n = grid.t.size
    j = grid.offset + np.arange(n)
    kappa = 2.0 * (n + 4) * U + 1e-12  # (the suffix sums, the exp and the log)
    # the mass at points >= j is a[j - offset] at the scale of the point below j
    log_base = grid.log_scale - grid.theta * (j - 1) * grid.step
    with np.errstate(divide="ignore", invalid="ignore", under="ignore"):
        if lower:  # (a mass that underflows is 0 here: a lower bound still)
            core = np.maximum(a[:n] * (1 - kappa) - grid.err, 0.0)  # (err at j's own scale is smaller)
            mass = np.exp(np.log(core) + log_base) * (1 - kappa) - grid.inf_err
            return j, np.log(np.maximum(mass, 0.0))
        # in logs throughout: e^{log_scale - theta s} may underflow where e^eps times it does not
        log_mass = np.log(a[:n]) + log_base + math.log1p(kappa)
        extra = grid.p_inf + grid.inf_err
        if extra > 0.0:
            log_mass = np.logaddexp(log_mass, math.log(extra) + 1e-12)
        return j, np.minimum(log_mass * (1 - 1e-15) + 1e-15, 0.0)


class RateEngine(MixEngine):
    """eps(δ) and δ(eps) of an add/remove schedule of noisy steps with q < 1 whose rates are many
    and whose noise levels few (module notes); ``MixEngine``'s plan of refinement, with its
    lattice over the rates and its lower bound from the statistic."""

    sandwich_if_wider = 0.0  # (tiny rates: the statistic's tails, module notes)

    def __init__(self, schedule, accuracy: float, budget: float, grid_step: float | None = None):
        super().__init__(schedule, accuracy, budget, grid_step)
        self._stat: dict = {}

    def planned(self) -> float:
        """Seconds of work to discretise the lattice's points on the first grid step of a query at
        δ = 1e-5 (a reference: it gates the engine, and bounds nothing)."""
        est, _ = self.estimate(1e-5)
        step = initial_step(self.proxy(), self.accuracy, est)
        lay = self.layout(0)
        return sum(planned_units(lay.sigmas[g], lay.qs[g], REMOVE, step, self.tau(1e-5))
                   for g in lay.used()) / UNITS_PER_SECOND

    def sampled_enough(self) -> bool:
        """At least RATE_SAMPLED sampled steps in expectation, where the run has more than RATE_LONG."""
        return self.total <= RATE_LONG or sum(c * q for _, q, c in self.schedule) >= RATE_SAMPLED

    def fits(self) -> bool:
        """Whether the engine takes the schedule: at most RATE_POINTS lattice points, RATE_PLAN
        seconds of planned discretisation, and ``sampled_enough``."""
        return self.sampled_enough() and len(self.layout(0).qs) <= RATE_POINTS and self.planned() <= RATE_PLAN

    @cached_property
    def rates(self):
        """``sigma_families`` of the schedule (derived once, where the engine's lattice needs it)."""
        return sigma_families(self.schedule)

    def release(self) -> None:
        super().release()
        self._stat.clear()

    def proxy(self):
        """A short schedule of about the same loss moments: each family's steps in 16 groups of
        rates, each at its root-mean-square rate (heuristic: estimates and grid steps)."""
        out = []
        for sigma, qs, cnt in self.rates:
            for sel in quantile_groups(qs):
                w = cnt[sel]
                out.append((sigma, math.sqrt(dot(w.astype(np.float64), qs[sel] ** 2) / float(w.sum())), int(w.sum())))
        return out

    def _new_layout(self, level: int, d_eps: float, eps_est: float) -> RateLayout:
        return RateLayout(self.rates, self.accuracy, level)

    def plan(self, h_target: float, level: int = 0) -> RatePlan:
        pl = self._plans.get(level)
        if pl is None:
            pl = self._plans[level] = RatePlan(self.layout(level), self.accuracy)
        return pl

    def _chains(self, lat, pl: RatePlan, theta: float, eps_lo: float):
        """(indices, log P(S >= s) below, log Q(S >= s) above) at the grid points s where both
        bounds hold: the two chains composed on ``lat``'s grid step, or on one 2 or 4 times
        coarser where their tables would pass the engine's limit (``GridTooLarge``: the statistic
        has two laws a point; a coarser step rounds the statistic more, a looser test, still a
        bound)."""
        for scale in (1, 2, 4):
            try:
                return self._chains_on(self._stat_lattice(lat, scale), pl, theta, eps_lo)
            except GridTooLarge:
                if scale == 4:
                    raise
        raise AssertionError("unreachable")

    def _stat_lattice(self, lat, scale: int) -> _StatLattice:
        step = lat.step * scale
        sl = lattice_in(self._stat, (lat.add, step, lat.tau), lambda: _StatLattice(lat.add, step, lat.tau, self.table_bytes))
        return sl.on(lat.layout)

    def _chains_on(self, sl: _StatLattice, pl: RatePlan, theta: float, eps_lo: float):
        # (add: P = N0 and Q the step, so the two chains trade places)
        p_parts, q_parts = (pl.qlo, pl.plo) if sl.add else (pl.plo, pl.qlo)
        gp = compose_mix(sl, p_parts, theta, False, eps_lo)
        gq = compose_mix(sl, q_parts, theta + 1.0, True, eps_lo)
        jp, lp = _tails(gp, True)
        jq, lq = _tails(gq, False)
        # Q's bound at P's indices: its window's, +inf mass alone above it, 1 below it
        at = jp - jq[0]
        top = math.log(min(gq.p_inf + gq.inf_err, 1.0)) if gq.p_inf + gq.inf_err > 0 else -math.inf
        lq_p = np.where(at < 0, 0.0, np.where(at >= jq.size, top, lq[np.clip(at, 0, jq.size - 1)]))
        ok = (jp * sl.step >= max(gp.floor, gq.floor)) & (lp > -math.inf)
        return jp[ok], lp[ok], lq_p[ok]

    def _lo_eps(self, lat, pl, theta, lo_target, eps_lo) -> float:
        """max over s of log((P(S >= s) - target) / Q(S >= s)): below it δ > target (module notes)."""
        _, lp, lq = self._chains(lat, pl, theta, eps_lo)
        ok = lp > math.log(lo_target)
        if not ok.any():
            return 0.0
        with np.errstate(divide="ignore"):
            v = np.log(-np.expm1(math.log(lo_target) - lp[ok])) + lp[ok] - lq[ok]
        best = float(np.max(v))
        return max(0.0, best - 1e-12 * abs(best) - 1e-15) if math.isfinite(best) else 0.0

    def _lo_delta(self, lat, pl, theta, e, e_lo) -> np.ndarray:
        """max over s of P(S >= s) - e^eps Q(S >= s) at each eps of ``e``."""
        e = np.asarray(e, dtype=np.float64)
        _, lp, lq = self._chains(lat, pl, theta, e_lo)
        out = np.zeros(e.size)
        if lp.size:
            p = np.exp(lp)
            for i, x in enumerate(e):
                d = p * (1 - 1e-12) - np.exp(x + lq) * (1 + 1e-12)
                out[i] = max(0.0, float(d.max()))
        return out
