"""``MixEngine``: the engine of a schedule of many distinct noise levels, on the lattice mixtures
(module notes of ``schedule_mix``): the lattice, the plan, the grid refinement, the queries."""

from __future__ import annotations

import math
from contextlib import contextmanager
from functools import cached_property

import numpy as np

from .._failures import GridFailure
from .._work import UNITS_PER_SECOND, Meter, metered
from .common import ADD, FIRST_BINS, MAX_BINS, REMOVE, bins_limit, delta_groups, dot, tail_cut, within
from .grid.estimates import eps_estimate, initial_step
from .grid.queries import delta_bound, eps_bound
from .grid.tilting import VAR_GROWTH, VAR_GROWTH_SMALL
from .grid.two_stage import SMALL_TAU

from .grid.onestep import planned_units
from .schedule_compose import TABLE_BYTES, _Lattice, compose_mix, kparts, lattice_in, saddle
from .schedule_mix import H_SHARE, Layout, Plan, U


# --- the engine ------------------------------------------------------------------------------------------
#: past this multiple of the budget the work in progress is abandoned (as ``engine.HARD_LIMIT``);
#: the first round, which alone gives any answer, FIRST_EXTRA seconds of work later (cut at 1.5
#: budgets it wasted its work and left [0, inf]: 10^4 drifting sigmas cost 4 units in one round)
HARD_LIMIT = 1.5
FIRST_EXTRA = 4.0
#: a tilt farther than this from the interval's midpoint is re-centred once more
RECENTRE = 0.25
#: most budgets a schedule of many distinct steps gets (one per 10^4 of them): with ten, 10^5
#: noise levels at q 1.9e-4, δ 2.3e-15 ran 11 s for a 22 % wide answer
MANY_BUDGETS = 5.0
#: a first grid step whose lattice's one-step grids plan more than this many seconds of
#: discretising is coarsened fourfold (``_MixEps._affordable``): those grids stay in memory through
#: the round, and at small q and δ the variance rule's step made them long (σ 1.2 -> 0.7 at q 3e-4
#: over 3 x 10^4 steps, δ 1e-9: 3.4 s planned, 1.9 GB and 9.5 s for [1.154, 1.196]; fourfold
#: coarser, [1.1922, 1.1948] in 3.6 s and 0.8 GB; σ 1.5 -> 0.8 at q 1e-3, δ 1e-10: the fine
#: round ran out of work, the groups' [1.470, 1.561]; coarser, [1.5159, 1.5183])
FIRST_PLAN = 1.0


def families_of(schedule):
    """[(q, sigmas, counts)] of the noisy steps of a (normalised) schedule, one entry per sampling
    rate, sigmas increasing; None where a step has a full batch (q = 1: the brackets assume
    q < 1)."""
    arr = np.array([(s, q, c) for s, q, c in schedule], dtype=np.float64).reshape(-1, 3)
    if arr.size == 0 or (arr[:, 1] >= 1.0).any():
        return None
    order = np.lexsort((arr[:, 0], arr[:, 1]))
    arr = arr[order]
    cuts = np.flatnonzero(np.diff(arr[:, 1])) + 1  # (sorted by q: each rate one run of rows)
    return [(float(a[0, 1]), a[:, 0].copy(), a[:, 2].astype(np.int64)) for a in np.split(arr, cuts)]



@contextmanager
def _upper_kept():
    """A lower bound that fails on the grid's limits (a table too large, a window too wide) is
    skipped: the round keeps its upper bounds, the lower stays where it was (0 at first)."""
    try:
        yield
    except (GridFailure, MemoryError):
        pass


def planned_first(lay, pl, step: float, tau: float) -> float:
    """Work units of discretising the upper parts' lattice points on the first grid step (remove)
    and four times it (add: the least a round does), before any is built (a plan: it only gates the
    first round).  Near the total
    variation eps is tiny and so is the first step: a 1,047-step σ ramp at δ 0.107 discretised ~280
    points on 2.3e-6, 178 million bins in all, before its work limit stopped the round."""
    used = np.unique(kparts(pl.up)[0])
    return float(sum(planned_units(lay.sigmas[g], lay.qs[g], REMOVE, step, tau)
                     + planned_units(lay.sigmas[g], lay.qs[g], ADD, 4 * step, tau) for g in used))


def quantile_groups(x: np.ndarray, groups: int = 16):
    """Boolean selections of ``x`` in up to ``groups`` groups between its quantiles (the proxies'
    groups: a heuristic)."""
    cut = np.unique(np.quantile(x, np.linspace(0, 1, min(groups + 1, x.size + 1))))
    idx = np.clip(np.searchsorted(cut, x, side="right") - 1, 0, max(cut.size - 2, 0))
    return [idx == j for j in np.unique(idx)]


class _MixDelta:
    """``MixEngine``'s δ(eps) queries (a mixin: the engine's lattice, plan and budget)."""

    def delta(self, eps: np.ndarray, below: float = 1e-16):
        """(lower, upper) of δ at each finite eps of the noisy steps; refined until lower(eps) >=
        upper(eps + h), h = accuracy * max(eps, 1e-2), or the work budget is spent.  ``below``: a
        certified upper bound on δ at every eps, if less than 1e-16 (each step's far tail is cut
        below it, ``tail_cut``)."""
        eps = np.asarray(eps, dtype=np.float64)
        lo, up = np.zeros(eps.size), np.ones(eps.size)
        if eps.size == 0:
            return lo, up
        est, _ = self.estimate(1e-6)
        step = self.grid_step or initial_step(self.proxy(), self.accuracy, max(float(eps.max()), est))
        tau = self.tau(min(below, 1e-16))
        # nearby eps (``delta_groups``) share one tilted composition; at most 8 groups
        order = np.argsort(eps)
        keys = delta_groups(eps[order])
        groups = [order[keys == kk] for kk in np.unique(keys)]
        if len(groups) > 8:
            groups = np.array_split(order, 8)
        h = self.accuracy * np.maximum(eps, 1e-2)
        up_shift = np.ones(eps.size)
        limit = self._limit(len(groups))
        last_gap, level, refined_step = None, 0, False
        with metered(Meter(limit + FIRST_EXTRA * UNITS_PER_SECOND)) as meter:
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
                first, meter.limit = False, limit
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
        up, up_shift = np.maximum(up, up_a), np.maximum(up_shift, up_a_shift)
        # the lower bound's failure mass: a small share of the least upper δ of the group
        pl = self.plan(H_SHARE * self.accuracy * max(float(up.min()), 1e-300), level)
        lo = np.zeros(e.size)
        with _upper_kept():  # (a lower bound past the grid's limits leaves 0 and keeps the upper)
            lo = self._lo_delta(lat, pl, th_r, e, e_lo)
            if (up_a > lo).any():  # (the add direction's lower bound can only matter where its upper is larger)
                lat_a = self.lattice(ADD, step, tau, level)
                th_a = saddle(lat_a, base.up, eps_c) if th_a is None else th_a
                lo = np.maximum(lo, self._lo_delta(lat_a, pl, th_a, e, e_lo))
        lo = np.maximum(lo - pl.H * (1 + 4 * U), 0.0)
        return lo, up, up_shift


class _MixEps:
    """``MixEngine``'s eps(δ) queries (a mixin, as ``_MixDelta``: the engine's lattice, plan and
    budget)."""

    def epsilon(self, target: float, step0=None):
        """(lower, upper, None) of eps(target) of the noisy steps."""
        est, _ = self.estimate(target)
        step = self.grid_step or step0 or initial_step(self.proxy(), self.accuracy, est)
        tau = self.tau(target)
        # (the lower bound's failure mass: at δ near the end of the floats, the least float)
        h_target = max(H_SHARE * self.accuracy * target, 5e-324)
        first_limit = self._limit() + FIRST_EXTRA * UNITS_PER_SECOND
        lo, up = 0.0, math.inf
        if self.grid_step is None and step0 is None:
            step = self._affordable(step, h_target, tau)
        if self.grid_step is None and planned_first(self.layout(0), self.plan(h_target, 0), step, tau) > first_limit:
            return lo, up, None  # (the first round could not end: the caller's groups answer instead)
        last_gap, level, refined_step = None, 0, False
        centre = max(est, 1e-6)
        with metered(Meter(first_limit)) as meter:
            first = True
            while True:
                before = meter.units
                pl = self.plan(h_target, level)
                lo_target = math.nextafter(target + pl.H * (1 + 4 * U), math.inf)  # (>= target + H)
                try:
                    with bins_limit(FIRST_BINS if first else MAX_BINS):
                        for _ in range(3):
                            at = meter.units
                            l, u = self._eps_at(pl, step, tau, target, lo_target, centre, level, meter)
                            lo, up = max(lo, l), min(up, u)
                            mid = 0.5 * (l + u)
                            if not (math.isfinite(mid) and mid > 0) or abs(mid - centre) <= RECENTRE * mid:
                                break
                            if 2.0 * meter.units - at > meter.limit:  # (another as costly would not end)
                                break
                            centre = mid
                            if up - lo <= self.accuracy * up:  # (narrow already: a better tilt is not needed)
                                break
                except (GridFailure, ArithmeticError, MemoryError):
                    break
                self.last_step = step
                first, meter.limit = False, self._limit()
                gap = u - l  # (this round's own width decides what to refine next)
                if self.grid_step is not None or within(lo, up, self.accuracy):
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

    def _affordable(self, step: float, h_target: float, tau: float) -> float:
        """The first grid step, or 4, 16, ... (at most 256) times it, until its lattice's one-step
        grids plan at most FIRST_PLAN seconds of discretising (``planned_first``)."""
        for _ in range(4):
            if planned_first(self.layout(0), self.plan(h_target, 0), step, tau) <= FIRST_PLAN * UNITS_PER_SECOND:
                break
            step *= 4.0
        return step

    def _eps_at(self, pl: Plan, step, tau, target, lo_target, est, level, meter):
        """(lower, upper) of eps(target) on one grid step, tilted towards ``est`` (both
        directions; the add direction first on a 4x coarser pessimistic grid, as ``TiltedFFT``'s second);
        while the interval is wide and δ small, also with the engine's extra tilts (a bracket
        search, then a long window: ``engine.Engine._eps_at``), each only where one as costly as
        the last would end within ``meter``'s limit (10^5 steps at q 1.9e-4, δ 2.3e-15 spent 20
        units a tilt, and the third ran into the limit, its work lost)."""
        at = meter.units
        lo, up = self._eps_tilt(pl, step, tau, target, lo_target, est, level, VAR_GROWTH, False)
        if tau * self.total <= SMALL_TAU:
            for growth in (VAR_GROWTH, VAR_GROWTH_SMALL):
                if within(lo, up, self.accuracy) or 2.0 * meter.units - at > meter.limit:
                    break
                at = meter.units
                try:
                    l, u = self._eps_tilt(pl, step, tau, target, lo_target, est, level, growth, True)
                except (GridFailure, ArithmeticError, MemoryError):
                    break  # (the extra tilts only narrow: the first one's bounds stand)
                lo, up = max(lo, l), min(up, u)
        return lo, up

    def _eps_tilt(self, pl: Plan, step, tau, target, lo_target, est, level, growth, bracket):
        eps_lo = 0.5 * est
        lat = self.lattice(REMOVE, step, tau, level)
        theta = saddle(lat, pl.up, est, growth, bracket)
        up_r = eps_bound(compose_mix(lat, pl.up, theta, True, eps_lo), target)
        lo_r = 0.0
        if lo_target < 1.0:
            with _upper_kept():
                lo_r = self._lo_eps(lat, pl, theta, lo_target, eps_lo)
        lat_c = self.lattice(ADD, 4 * step, tau, level)
        up_a = eps_bound(compose_mix(lat_c, pl.up, saddle(lat_c, pl.up, est, growth, bracket), True, eps_lo), target)
        lo_a = 0.0
        if up_a > lo_r:  # (the add direction matters to the upper bound, or may to the lower)
            lat_a = self.lattice(ADD, step, tau, level)
            th_a = saddle(lat_a, pl.up, est, growth, bracket)
            fine = eps_bound(compose_mix(lat_a, pl.up, th_a, True, eps_lo), target)
            if fine > lo_r and lo_target < 1.0:
                with _upper_kept():
                    lo_a = self._lo_eps(lat_a, pl, th_a, lo_target, eps_lo)
            up_a = min(up_a, fine)
        return max(lo_r, lo_a), max(up_r, up_a)


class MixEngine(_MixEps, _MixDelta):
    """eps(δ) and δ(eps) of an add/remove schedule [(sigma, q, count)] of noisy steps with q < 1,
    from the lattice mixtures (module notes); the interface of ``engine.Engine`` that
    ``schedules.Sandwich`` uses.

    The plan, as the engine's: compose on a grid step chosen for the accuracy; while the interval
    is wider than the accuracy, refine the grid step, or -- when that no longer narrows it by
    much (the lattice's share dominates) -- double the lattice's cells.  Work is counted
    (``_work``), never timed; the lattice depends only on the schedule, the accuracy and the
    refinement level, so an answer does not depend on earlier queries."""

    #: past this relative width ``schedules.Sandwich`` runs its groups beside it, the two intersected
    #: (bench/README stop 59: a collapsed lower bound; 3,419 steps of σ 1.32 -> 0.3 at q 2.5e-4, δ
    #: 4.5e-7, read off a coarsened first grid: [9.469, 9.672], the groups [9.594, 9.732]).
    #: ``RateEngine``: 0; the coarse product lattice: ``schedule_product.COARSE_SANDWICH_IF_WIDER``
    sandwich_if_wider = 0.01
    #: most memory for one composition's table of lattice spectra (``schedule_compose``)
    table_bytes = TABLE_BYTES

    def __init__(self, schedule, accuracy: float, budget: float, grid_step: float | None = None):
        self.schedule = tuple(schedule)
        if not self.schedule or any(q >= 1.0 for _, q, _ in self.schedule):
            raise ValueError("MixEngine needs noisy steps with q < 1")
        self.accuracy = accuracy
        self.grid_step = grid_step  # (an expert's fixed grid step: no refinement)
        # (many distinct steps may spend in proportion, up to MANY_BUDGETS budgets)
        self.budget = budget * min(MANY_BUDGETS, max(1.0, len(self.schedule) / 1e4))
        self.total = int(sum(c for _, _, c in self.schedule))
        self._plans, self._est, self._lat, self._layouts = {}, {}, {}, {}
        self.last_step = None

    families = cached_property(lambda self: families_of(self.schedule))  # (made where read: not by the product)

    def release(self) -> None:
        """Let go of the lattices' grids (before the groups' sandwich runs beside a wide answer)."""
        self._lat.clear()

    # --- heuristics: where eps lies, its sensitivity to the noise, the lattice ---------------
    def proxy(self):
        """A short schedule with about the same loss moments (each family's steps in 16 groups of
        noise, each at its mean 1 / sigma^2), for estimates and grid steps only."""
        out = []
        for q, sig, cnt in self.families:
            for sel in quantile_groups(sig):
                w = cnt[sel]
                s_eff = 1.0 / math.sqrt(dot(w, 1.0 / sig[sel] ** 2) / float(w.sum()))
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

    def layout(self, level: int = 0):
        lay = self._layouts.get(level)
        if lay is None:
            est, d_eps = self.estimate(1e-5)  # (a fixed reference: the lattice never depends on a query)
            lay = self._layouts[level] = self._new_layout(level, d_eps, max(est, 1e-3))
        return lay

    def _new_layout(self, level: int, d_eps: float, eps_est: float) -> Layout:
        return Layout(self.families, self.accuracy, self.total, d_eps, eps_est, level)

    def plan(self, h_target: float, level: int = 0):
        key = (float(f"{h_target:.3g}"), level)
        pl = self._plans.get(key)
        if pl is None:
            if len(self._plans) > 8:
                self._plans.clear()
            est, d_eps = self.estimate(1e-5)
            pl = self._plans[key] = self._new_plan(self.layout(level), key[0], d_eps, max(est, 1e-3))
        return pl

    def _new_plan(self, lay, h_target: float, d_eps: float, eps_est: float) -> Plan:
        return Plan(lay, self.accuracy, h_target, self.total, d_eps, eps_est)

    def lattice(self, add, step, tau, level: int = 0) -> _Lattice:
        lat = lattice_in(self._lat, (add, step, tau), lambda: _Lattice(add, step, tau, self.table_bytes))
        return lat.on(self.layout(level))

    def tau(self, delta_goal: float) -> float:
        return tail_cut(delta_goal, self.accuracy, self.total)

    def _limit(self, groups: int = 1) -> float:
        return HARD_LIMIT * self.budget * UNITS_PER_SECOND * groups

    def _next(self, step, level, gap, last_gap, refined_step):
        """The next (step, level): a finer grid step, unless the last one narrowed the interval by
        less than a third (a grid's own width falls about fourfold per halving: the lattice's
        share dominates) -- then twice the lattice's cells."""
        if refined_step and last_gap is not None and gap > 0.67 * last_gap:
            return step, level + 1, False
        return 0.5 * step, level, True

    # --- the lower bounds of one direction (``schedule_rates.RateEngine`` has its own) -----------
    def _lo_eps(self, lat, pl, theta, lo_target, eps_lo) -> float:
        """A lower bound on eps(lo_target) of the lower mixtures on ``lat``'s grid."""
        return eps_bound(compose_mix(lat, pl.lo, theta, False, eps_lo), lo_target)

    def _lo_delta(self, lat, pl, theta, e, e_lo) -> np.ndarray:
        """Lower bounds on δ at ``e`` of the lower mixtures on ``lat``'s grid (before H)."""
        return delta_bound(compose_mix(lat, pl.lo, theta, False, e_lo), e)

    # --- δ(eps) ----------------------------------------------------------------------------------
