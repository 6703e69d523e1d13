"""The engine: a short plan over certifiers for one schedule.

eps(δ) and δ(eps) are answered the same way: on a grid step chosen for the accuracy, try the
certifiers in order -- the tilted FFT composition first, then, while the interval is wider than
the accuracy, the extra tilts (small δ) and the tail-event sum -- intersect their intervals (all
are certified, so any intersection is), cap by the RDP bound, and refine the grid step until the
accuracy is met or refining stops helping.  Every interval returned is certified.
"""

from __future__ import annotations

import math

import numpy as np

from .._failures import GridFailure, GridTooLarge, StepUnderflow, WorkLimit
from .certifiers import exact
from .certifiers import Caches, Certified, Job, RDPBound, TailEvents, TiltedFFT
from .delta_inverse import bracket_deltas
from .common import (ADD, FIRST_BINS, MAX_BINS, REMOVE, REPLACE, U, UNITS_PER_SECOND, Meter, bins_limit, delta_groups,
                     metered, resolved, tail_cut, within)
from .grid.estimates import eps_estimate, initial_step, refine
from .grid.onestep import affordable_step, coarse_tail
from .grid.tilting import VAR_GROWTH, VAR_GROWTH_SMALL
from .grid.two_stage import MAX_ENTRIES, MIN_STEPS, SMALL_TAU

TILT = TiltedFFT()
TILT_BRACKET = TiltedFFT(VAR_GROWTH, bracket=True)
TILT_LONG_WINDOW = TiltedFFT(VAR_GROWTH_SMALL, bracket=True)
#: the extra tilts of a schedule of several entries, in two stages (``two_stage.plan``'s ``multi``):
#: where one stage left a small δ's answer wide (one entry takes two stages by itself there).  Two
#: noise levels at q 1.87e-4, δ 2.3e-15 were 19 % wide; where the tilt reaches eps one stage is the
#: tighter, so it stays first
TILTS_TWO = [TiltedFFT(VAR_GROWTH, multi=True), TiltedFFT(VAR_GROWTH, bracket=True, multi=True),
             TiltedFFT(VAR_GROWTH_SMALL, bracket=True, multi=True)]
EVENTS = TailEvents()
#: what a query may spend refining before it returns what it has certified: seconds on the
#: reference machine, kept as transform work (``common.metered``), so that the answer does not
#: depend on the machine, its load or numba's compilation
BUDGET = 4.0
#: a single grid iteration can outgrow the prediction the budget checks use (two-stage blocks
#: with many tail terms at sigma ~ 1e-3): past this multiple of the budget the work in progress
#: is abandoned (``WorkLimit``) and the query keeps what it had certified
HARD_LIMIT = 1.5
#: a δ query over many eps gets the budget of up to this many single queries (groups of nearby
#: eps; the far ones, δ below ~1e-16, cannot be narrowed and would only spend it)
DELTA_GROUPS_PAID = 8
#: δ below which a δ query's grids cannot resolve it (their far tails are cut at ``job(1e-16)``'s
#: mass and charged): where RDP already bounds δ below it, eps(δ) queries bracket δ before any grid
#: (``delta_inverse``); elsewhere they bracket what the grids leave unresolved
GRID_DELTA_FLOOR = 1e-22
#: a δ query's grids stop refining an eps whose upper bound they already put below this (a finer grid
#: there only spends the budget the eps(δ) queries then lack: two steps at δ 1e-20 read up to 9x δ)
GRID_DELTA_REACH = 1e-19
#: each eps(δ) query of a δ query gets this share of the engine's budget; all of them share one
#: budget (``_delta_grid``)
INVERSE_SHARE = 0.25
#: a coarsened first eps(δ) grid (``onestep.affordable_step``) whose interval comes within this many
#: times the accuracy is followed by the variance rule's own step, not a refinement of it: there it
#: served to centre the tilt (σ 0.4, q 1e-5, 1,000 steps, δ 1e-12: halving from the coarse step
#: spent the budget at [7.0093, 7.0205]; the fine step, tilted at 7.007, meets 1e-3)
SCOUTED = 10.0
#: the accuracy the public functions default to.  A query asking for a finer one first answers at
#: this one and refines from there, keeping the intersection: a finer accuracy never returns a
#: wider interval (a finer first grid can outgrow memory or the budget before it certifies much)
DEFAULT_ACCURACY = 1e-3


def _over_budget(meter, before: float, budget: float) -> bool:
    """Would a finer grid (about twice this iteration's work) end past the hard limit?  (A grid
    that does overrun it is abandoned there, and the query keeps what it had certified.)"""
    return meter.units + 2.0 * (meter.units - before) > HARD_LIMIT * budget * UNITS_PER_SECOND


#: (``Engine._eps_loop``) a round narrowing the interval by less than a fifth is weak; two in a row
#: stop the refinement, not one (one can be the grid's alignment with the loss: σ 0.30, q 0.034,
#: T 1048 read [233.9, 234.7] at steps 0.028 and 0.014, [234.608, 234.616] at 0.0069).  A lower
#: bound below half the upper is a grid too coarse for the optimistic side (7 x 10^5 steps leave
#: it at 0), never a floor of the method: no round is weak then.
_STALLS = 2


def _next_step(step: float, fine: float, gap: float, goal: float) -> float:
    """The eps(δ) loop's next grid step: a refinement (``refine``), or -- after a coarsened first
    grid whose interval came within SCOUTED goals -- the variance rule's own step ``fine`` (a round
    there that runs past the work limit is abandoned, and the first round's interval stands)."""
    return fine if fine < step and gap <= SCOUTED * goal else refine(step, gap, goal)


class _DeltaPlan:
    """The δ(eps) half of the ``Engine``'s plan (the same certifiers and budget as eps(δ), over an
    array of eps: nearby eps share a grid; each group refines its own grid step), and the single
    steps' floors of both."""

    # --- the single steps' floors, for answers the grids leave wide (extreme parameters) -------
    def _one_step_forms(self):
        return [exact.closed_form([(sigma, q, 1)], self.relation) for sigma, q, _ in self.schedule]

    def _eps_floor(self, target: float) -> float:
        """eps of the most revealing single step: a composition is at least as revealing as any
        one of its steps (post-processing)."""
        return max(exact.eps_bounds(f, target)[0] for f in self._one_step_forms())

    def _delta_floor(self, eps: np.ndarray) -> np.ndarray:
        lo = np.zeros(eps.size)
        for f in self._one_step_forms():
            lo = np.maximum(lo, exact.delta_bounds(f, eps)[0])
        return lo

    def delta(self, eps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) of δ at each eps."""
        return self.delta_met(eps)[:2]

    def delta_met(self, eps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(lower, upper, met) of δ at each eps; met: the interval is no wider than δ's change over
        a relative change ``accuracy`` of eps, as the δ grids or the eps(δ) bracket showed it
        (``_delta_grid``), or than ``accuracy`` x its upper end."""
        lo, up, met = self._delta_noisy(eps)
        if self.p_hi > 0.0:
            lo = np.maximum(lo, self.p_lo)
            up = np.minimum(1.0, (self.p_hi + (1.0 - self.p_hi) * up) * (1 + 4 * U))
        # below 2.2e-308 floats are subnormal and carry only a few bits: pad by a few of their
        # ulps (nothing changes for normal values)
        lo = np.maximum(lo - 1e-322, 0.0)
        up = np.where(up > 0.0, np.minimum(up + 1e-322, 1.0), up)
        lo, up = monotone(eps, lo, up)
        return lo, up, met | (up - lo <= self.accuracy * up)

    def _delta_noisy(self, eps: np.ndarray):
        lo, up, met = np.zeros(eps.size), np.zeros(eps.size), np.ones(eps.size, dtype=bool)
        finite = np.isfinite(eps)  # (noisy steps put no mass at +inf: δ(+inf) = 0)
        if not self.schedule or not finite.any():
            return lo, up, met
        e = eps[finite]
        if self.form is not None:
            lo[finite], up[finite] = exact.delta_bounds(self.form, e)
            met[finite] = False  # (closed forms: by their width, ``delta_met``)
        else:
            g_lo, g_up = exact.near_gaussian_delta(self.near, e)
            m = np.zeros(e.size, dtype=bool)  # (by the width, ``delta_met``)
            if np.all(g_up - g_lo <= self.accuracy * g_up):  # nearly full batches
                l, u = g_lo, g_up
            else:
                c_l, c_u = (0.0, 1.0) if self.coarse is None else self.coarse._delta_noisy(e)[:2]
                try:
                    l, u, m = self._delta_grid(e)
                except (ArithmeticError, GridFailure, MemoryError):  # no grid at all: RDP
                    l, u = np.zeros(e.size), self.rdp.delta(e)
                l, u = np.maximum(l, np.maximum(g_lo, c_l)), np.minimum(u, np.minimum(g_up, c_u))
                wide = ~(u - l <= self.accuracy * u)
                if wide.any():  # a wide answer: the single steps' bound may help
                    l[wide] = np.maximum(l[wide], self._delta_floor(e[wide]))
                blank = wide & (u >= 0.5)  # (no grid reached eps -- e.g. eps 1e4, replace-one: 1.0)
                if blank.any():
                    u[blank] = np.minimum(u[blank], self.rdp.delta(e[blank]))
            lo[finite], up[finite], met[finite] = l, u, m
        # with noise, every finite eps has δ > 0 (the remove loss is unbounded): never report 0
        up[finite] = np.maximum(up[finite], exact.TINY)
        return lo, up, met

    # --- δ(eps) ----------------------------------------------------------------------------
    def _delta_grid(self, eps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(lower, upper, met) of δ at each eps by the grid certifiers and, where they leave it
        unresolved, by eps(δ) queries (``delta_inverse``; met: resolved by the grids' rule, or the
        bracket's ``_Bracket.met``).  The grids are refined until lower(eps) >=
        upper(eps + h), h = accuracy * max(eps, 1e-2): no wider than the change of δ over a relative
        change ``accuracy`` of eps.  Nearby eps share one tilted composition (``delta_groups``).
        Where RDP already bounds δ below ``GRID_DELTA_FLOOR`` only the eps(δ) queries are asked (the
        grids' truncated mass is charged at about that level: σ 1, q 0.01, T 1000, eps 7.851 read
        [2.3e-36, 3.7e-24] after 2 s, where eps(1e-25) is 7.851)."""
        h = self.accuracy * np.maximum(eps, 1e-2)
        cap, cap_shift = np.split(self.rdp.delta(np.concatenate((eps, eps + h))), 2)  # (one request: shared anchors)
        lo, up = np.zeros(eps.size), np.minimum(cap, 1.0)
        met = cap <= 1e-300  # (RDP leaves nothing to resolve)
        tiny = (cap < GRID_DELTA_FLOOR) & ~met
        if tiny.any():
            lo[tiny], up[tiny], _, met[tiny] = _Inverse(self, self._paid(eps[tiny])).bracket(eps[tiny], lo[tiny],
                                                                                             up[tiny])
        grid = ~tiny & ~met
        if grid.any():
            budget = self._paid(eps[grid])
            with metered(Meter(HARD_LIMIT * budget * UNITS_PER_SECOND)) as meter:
                l, u, ok = self._delta_loop(eps[grid], h[grid], cap[grid], cap_shift[grid], meter, budget)
            lo[grid], up[grid], met[grid] = l, u, ok
            again = np.flatnonzero(grid)[~ok]
            if again.size:  # (what the grids left of the budget, at least INVERSE_SHARE of it)
                left = max(budget - meter.units / UNITS_PER_SECOND, INVERSE_SHARE * self.budget)
                lo[again], up[again], _, met[again] = _Inverse(self, left).bracket(eps[again], lo[again], up[again])
        return lo, up, met

    def _paid(self, eps) -> float:
        """A δ query's budget: it grows with the number of groups of nearby eps (a group costs about
        one single query), up to DELTA_GROUPS_PAID of them."""
        return self.budget * min(np.unique(delta_groups(eps)).size, DELTA_GROUPS_PAID)

    def first_delta_step(self, eps: float, est: float | None = None) -> float:
        """The grid step a δ query's group of nearby eps (largest ``eps``) starts from."""
        est = eps_estimate(self.schedule, 1e-6, self.main) if est is None else est
        return self.grid_step or initial_step(self.schedule, self.accuracy, max(eps, est), self.main)

    def _delta_loop(self, eps, h, cap, cap_shift, meter, budget):
        """(lower, upper, resolved) of δ at each eps by the grids (``_delta_grid``)."""
        job = self.job(1e-16)
        est = eps_estimate(self.schedule, 1e-6, self.main)
        keys = delta_groups(eps)
        # each group of nearby eps refines its own grid step from the step a single query at its
        # largest eps would start with (one step for all made the eps = 0 group's fine grid the
        # start of every group, and the budget ran out before the far ones were reached)
        # (coarsened where its one-step grids would be long, as an eps query's first step; an
        # unresolved group's second round then takes the variance rule's own step)
        fines = {key: self.first_delta_step(float(eps[keys == key].max()), est) for key in np.unique(keys)}
        steps = {key: step if self.grid_step else affordable_step(self.schedule, step, job.tau, self.main)
                 for key, step in fines.items()}
        found = Certified(job.directions, np.zeros(eps.size), np.ones(eps.size)).cap(cap)
        done = cap <= 1e-300  # RDP leaves nothing to resolve (eps far beyond the bulk)
        settled = done.copy()
        first = True
        while True:
            before = meter.units
            at = Certified(job.directions, np.zeros(eps.size), np.ones(eps.size))
            ok = done.copy()
            fits = False
            with bins_limit(FIRST_BINS if first else MAX_BINS):
                for key in np.unique(keys[~done]):
                    sel = (keys == key) & ~done
                    self.last_step = steps[key]
                    try:
                        ok[sel] = self._delta_group(job, steps[key], eps[sel], eps[sel] + h[sel], at, sel, cap[sel],
                                                    cap_shift[sel], meter)
                        fits = True
                    except GridTooLarge:  # this group's grid would not fit in memory: its caps stand
                        done |= sel
                    except WorkLimit:  # past the hard limit: what the rounds certified stands
                        found.narrow(at.found_dict())
                        return found.lower, found.upper, settled
            found.narrow(at.found_dict())
            if not fits:
                return found.lower, found.upper, settled  # no group fits: what is certified
            settled |= ok & ~done
            done |= ok  # groups already narrow enough are not composed again on a finer grid
            done |= found.upper < GRID_DELTA_REACH  # (below the grids' reach: ``_delta_grid``'s eps(δ) queries)
            if self.grid_step is not None or done.all() or _over_budget(meter, before, budget):
                return found.lower, found.upper, settled  # (a finer grid costs about twice this one)
            for key in np.unique(keys[~done]):
                try:
                    steps[key] = fines[key] if first and fines[key] < steps[key] else refine(steps[key], 1.0, 0.25)
                except StepUnderflow:
                    done |= keys == key
            first = False

    def _delta_group(self, job: Job, step: float, e: np.ndarray, e_shift: np.ndarray, into: Certified, sel, cap,
                     cap_shift, meter=None):
        """The plan for a group of nearby eps on one grid step, tilted towards its smallest eps:
        the tilted composition, then the tail-event sum where the interval is still wide, all
        capped by RDP.  Writes the intervals into ``into[sel]``; returns whether each is
        resolved (lower(e) >= upper(e + h), or the interval is below 1e-300 wide)."""
        eps_c = float(e.min())
        at = Certified(job.directions, np.zeros(e.size), np.ones(e.size)).narrow(TILT.delta(job, step, e, eps_c))
        shifted = Certified(job.directions, np.zeros(e.size), np.ones(e.size))
        shifted.narrow(TILT.delta(job, step, e_shift, eps_c))
        at.cap(cap)
        shifted.cap(cap_shift)
        lo, up, up_shift = at.lower, at.upper, shifted.upper
        if not resolved(lo, up, up_shift, self.accuracy).all() and not self._spent(meter):
            # δ set by a few far-tail steps: sum over their number
            goal = 1e-3 * self.accuracy * max(float(lo.min()), 1e-6 * float(up.min()), 1e-300)
            ev = EVENTS.delta(job, step, e, e_shift, eps_c, goal)
            if ev is not None:
                at.narrow(ev[0])
                shifted.narrow({d: (0.0, ev[1]) for d in ev[0]})  # (its one direction)
        into.put(sel, at)
        lo, up = at.lower, at.upper
        return resolved(lo, up, shifted.upper, self.accuracy)



class _Inverse:
    """The eps(δ) queries of one δ query for ``delta_inverse``: on a copy of the engine that shares
    its caches and has INVERSE_SHARE of its budget a query, all of them within ``budget`` seconds
    (work units, never the clock)."""

    def __init__(self, engine: Engine, budget: float):
        self.engine = engine
        self.budget = budget
        self.meter = Meter()
        self._sub = None

    def ask(self, d: float):
        eng = self.engine
        if self.meter.units > self.budget * UNITS_PER_SECOND:
            return None
        if self._sub is None:
            self._sub = Engine(eng.schedule, eng.accuracy, eng.grid_step, eng.relation, INVERSE_SHARE * eng.budget)
            # (the same schedule: its caches, RDP bound and total variation are the engine's)
            self._sub.caches, self._sub._rdp, self._sub._tv = eng.caches, eng._rdp, eng._tv
        with metered(self.meter):
            try:
                lo, up, _ = self._sub._eps_noisy(d)
            except (ArithmeticError, GridFailure, MemoryError):  # (no answer: the bracket stands)
                return None
        return lo, up

    def bracket(self, eps, lo, up):
        """``delta_inverse.bracket_deltas``: (lower, upper, settled, met) at each eps."""
        return bracket_deltas(self.ask, eps, lo, up, self.engine.accuracy)


class Engine(_DeltaPlan):
    """Certified eps(δ) and δ(eps) for one schedule [(sigma, q, count)]; the composed grids and
    saddle points are cached across queries.

    The plan: the exact paths first (``exact``: steps that do nothing dropped, noiseless steps
    as an atom at +inf, δ above the total variation, the closed forms for q = 1 and one step),
    then the grid certifiers.  Time is bounded: past ``budget`` (seconds on the reference
    machine, counted as transform work) the loops return the certified interval they have, even
    if it is wider than the accuracy."""

    def __init__(self, schedule, accuracy: float, grid_step: float | None = None, relation: str = "add_remove",
                 budget: float = BUDGET):
        self.relation = relation
        self.replace = relation == "replace_one"
        self.main = REPLACE if self.replace else REMOVE  # the direction that sets the estimates
        noisy, (self.p_lo, self.p_hi) = exact.normalise(schedule)
        self.schedule = tuple(noisy)  # what the grid certifiers compose
        self.form = exact.closed_form(self.schedule, relation) if self.schedule else None
        self.near = exact.near_gaussian(self.schedule, relation)  # the Gaussian bracket (q near 1)
        self.accuracy = accuracy
        self.grid_step = grid_step
        self.budget = budget
        self.caches = Caches()
        self._rdp = None
        self._tv = None
        self._coarse = None
        self.last_step = None  # the grid step of the last grid query (curves start there)

    @property
    def rdp(self) -> RDPBound:
        if self._rdp is None:
            self._rdp = RDPBound(self.schedule, self.replace)
        return self._rdp

    @property
    def tv_upper(self) -> float:
        if self._tv is None:
            self._tv = exact.tv_upper(self.schedule, self.relation)
        return self._tv

    @property
    def coarse(self) -> "Engine | None":
        """The same schedule at the default accuracy, when this engine asks for a finer one (and
        chooses its own grid steps); a query here starts from its answer and never ends wider."""
        if self.accuracy >= DEFAULT_ACCURACY or self.grid_step is not None:
            return None
        if self._coarse is None:
            self._coarse = Engine(self.schedule, DEFAULT_ACCURACY, None, self.relation, self.budget)
        return self._coarse

    def job(self, delta_goal: float) -> Job:
        """A query's context: each step's far tail is cut at P-mass ~1e-4 * accuracy * delta_goal
        / T (it is still accounted), rounded down to a power of ten to keep the caches useful."""
        tau = tail_cut(delta_goal, self.accuracy, sum(c for _, _, c in self.schedule))
        return Job(self.schedule, self.replace, self.accuracy, tau, self.caches, coarse_tail(self.schedule))

    def _spent(self, meter) -> bool:
        return meter is not None and meter.units > self.budget * UNITS_PER_SECOND

    def _narrow(self, found: Certified) -> bool:
        return within(found.lower, found.upper, self.accuracy)

    # --- the plan ------------------------------------------------------------------------------
    def epsilon(self, target: float, step0: float | None = None) -> tuple[float, float, float | None]:
        """(lower, upper, last grid step or None) of eps(target); ``step0`` overrides the first
        grid step (the loop still refines until the accuracy is met)."""
        if self.p_hi > 0.0:
            # noiseless steps: δ >= p for every finite eps, and δ <= p + (1 - p) δ_noisy
            lo = math.inf if target < self.p_lo else self._eps_noisy(target)[0]
            if target <= self.p_hi:
                return lo, math.inf, None
            return lo, self._eps_noisy((target - self.p_hi) / (1.0 - self.p_hi) * (1 - 4 * U))[1], None
        return self._eps_noisy(target, step0)

    def _eps_noisy(self, target: float, step0: float | None = None):
        if not self.schedule or target >= self.tv_upper:
            return 0.0, 0.0, None
        if self.form is not None:
            return (*exact.eps_bounds(self.form, target), None)
        g_lo, g_up = exact.near_gaussian_eps(self.near, target)
        if g_up < math.inf and g_up - g_lo <= self.accuracy * g_up:  # nearly full batches: the Gaussian brackets it
            return g_lo, g_up, None
        c_lo, c_up, c_step = (0.0, math.inf, None) if self.coarse is None else self.coarse._eps_noisy(target, step0)
        try:
            lo, up, step = self._eps_grid(target, c_step or step0)
        except (ArithmeticError, GridFailure, MemoryError):  # no grid at all: RDP
            lo, up, step = 0.0, self.rdp.epsilon(target), None
        lo, up = max(lo, g_lo, c_lo), min(up, g_up, c_up)
        # a wide answer -- or wider than the default accuracy, asked for a coarser one: never looser
        # than RDP (σ 7.24, q 0.0083, 2.3e6 steps at accuracy 0.3 read 15.31 where RDP gives 14.56)
        # -- RDP and the single steps' bound may help
        if not within(lo, up, min(self.accuracy, DEFAULT_ACCURACY)):
            up = min(up, self.rdp.epsilon(target))
            lo = max(lo, self._eps_floor(target))
        return lo, up, step

    # --- eps(δ) ----------------------------------------------------------------------------
    def _eps_grid(self, target: float, step0: float | None = None) -> tuple[float, float, float]:
        """(lower, upper, last grid step) of eps(target) by the grid certifiers, refining the grid
        step until the accuracy is met, refining stops helping, or the time budget is spent."""
        with metered(Meter(HARD_LIMIT * self.budget * UNITS_PER_SECOND)) as meter:
            return self._eps_loop(target, step0, meter)

    def _start(self, target):
        """(Gaussian estimate, RDP cap, first grid step, the variance rule's step) of an eps(target)
        query: the first step is the variance rule's (``initial_step``), coarsened where its one-step
        grids would be long (``onestep.affordable_step``)."""
        est = eps_estimate(self.schedule, target, self.main)
        # with few steps the Gaussian estimate misses heavy one-step tails (small q, T = 10: 0.02
        # where eps is 0.125, and a first grid 30x finer than the accuracy needs): half RDP's
        # bound is a floor there (not for long runs, whose sums are near Gaussian: a coarser
        # first grid there only costs a refinement).  Long runs cap by RDP only when the grids
        # leave the answer wide (``_eps_noisy``): a first query then does not compile the RDP
        # kernels too (half of a cold first run's compilation)
        short = sum(c for _, _, c in self.schedule) < MIN_STEPS
        cap = self.rdp.epsilon(target) if short else math.inf
        est_step = max(est, 0.5 * cap) if short and math.isfinite(cap) else est
        fine = initial_step(self.schedule, self.accuracy, est_step, self.main)
        return est, cap, affordable_step(self.schedule, fine, self.job(target).tau, self.main), fine

    def first_step(self, target: float) -> float:
        """The grid step an eps(target) query starts from (where the first grid meets the
        accuracy, its last step too: curves start their other checkpoints on it meanwhile)."""
        return self.grid_step or self._start(target)[2]

    def _eps_loop(self, target, step0, meter):
        job = self.job(target)
        est, cap, first, fine = self._start(target)
        step = self.grid_step or step0 or first
        fine = fine if step == first else math.inf
        found = Certified(job.directions, 0.0, math.inf)
        last_gap, weak_runs, summed = None, 0, False
        coarser, good_step = 0, step
        add_max = add_loss_max(self.schedule) if ADD in found.up else math.inf
        while True:
            before = meter.units
            self.last_step = step
            try:
                with bins_limit(FIRST_BINS if last_gap is None else MAX_BINS):
                    # (the sum first in later rounds where it narrowed the last: several entries, short
                    # runs, replace-one)
                    first_sum = summed and (len(job.schedule) > 1 or job.total < MIN_STEPS or job.replace)
                    got, summed = _round(self, job, step, target, est, cap, meter, found if first_sum else None)
                    found.narrow(got.found_dict())
            except GridTooLarge:  # the grid would not fit in memory
                if last_gap is not None:
                    return found.lower, found.upper, good_step  # what is certified so far
                if self.grid_step is not None or coarser >= 6:
                    return 0.0, self.rdp.epsilon(target), step  # no grid fits: RDP (the caller adds the floor)
                step, coarser, fine = 4.0 * step, coarser + 1, math.inf  # an accuracy that fits: wider, still certified
                continue
            except WorkLimit:  # past the hard limit: what the earlier rounds certified stands
                return found.lower, found.upper, good_step
            if not math.isfinite(found.upper) and not math.isfinite(cap):
                cap = self.rdp.epsilon(target)  # (a long run's grids found no upper bound: RDP's)
            found.cap(cap)
            if ADD in found.up:  # (the add direction's loss is at most -log(1 - q) a step: no eps above)
                found.up[ADD] = min(found.up[ADD], add_max)
            lo, up = found.lower, found.upper
            gap = up - lo
            if self.grid_step is not None or self._narrow(found) or gap <= 1e-12:
                return lo, up, step
            # a finer grid costs 2-4 times this one: stop where it would not end within the budget,
            # or where two rounds in a row narrowed little (``_STALLS``) while the lower bound is
            # above half the upper
            weak = last_gap is not None and gap > 0.8 * last_gap and lo >= 0.5 * up
            weak_runs = weak_runs + 1 if weak else 0
            if weak_runs >= _STALLS or _over_budget(meter, before, self.budget):
                return lo, up, step  # refining no longer helps (or no time left); still sound
            last_gap, good_step = gap, step
            est = 0.5 * (lo + up) if math.isfinite(up) else max(2.0 * lo, est)
            try:
                step, fine = _next_step(step, fine, gap, self.accuracy * up), math.inf
            except StepUnderflow:
                return lo, up, step  # the grid step would underflow: keep the certified interval

    def epsilon_upper_at(self, target: float, step: float) -> float:
        """Only the upper bound of eps(target) on a given grid step (no accuracy loop): for
        calibration searches once a full evaluation has shown that this step meets the accuracy
        nearby.  Still a certified upper bound."""
        if self.p_hi > 0.0 or self.form is not None or not self.schedule or target >= self.tv_upper:
            return self.epsilon(target)[1]  # an exact path
        job = self.job(target)
        est = eps_estimate(self.schedule, target)
        try:
            up = TILT.epsilon_upper(job, step, target, est)
        except GridFailure:
            up = math.inf
        return min(up, self.rdp.epsilon(target))

def _round(engine, job: Job, step: float, target: float, est: float, cap: float, meter, prior=None):
    """``engine``'s plan at one grid step: the tilted composition, then -- while the interval is
    wide -- the extra tilts (small δ) and the tail-event sum.  The tail-event sum is cheap for
    short runs (the core's T-th power has a short window) and the extra tilts for long ones (two
    stages): the cheaper goes first.  The sum cuts at the likely eps, so it also needs a fairly
    narrow first interval (measured on the random-sweep points, bench/README).  Past the budget
    (``meter``) no further certifier is tried.  Returns (``Certified``, whether the tail-event sum
    narrowed it).

    ``prior``: the earlier rounds' interval (the loop passes it for schedules of several entries,
    short runs and replace-one: σ 0.96, q 2.3e-5, 9,685 steps, δ 8.8e-14 went from 8.6e-3 to
    8.4e-4).  Where it is within 10 %, the tail-event sum goes first, inside it, and a
    round it settles composes nothing else (σ 0.74, q 1.55e-5, 1,003 steps, δ 4e-14: the sum set
    [0.26567, 0.26674] on the first grid; the variance rule's step, 16 times finer, then spent the
    budget on the tilted composition before reaching it).  (Not for long runs of one entry: there
    the sum's lower end loosens when it cuts inside a narrow interval, and the extra tilts narrow
    it first -- σ 1.03, q 1.87e-4, 10^5 steps, δ 2.3e-15: 0.37 % that way, 0.52 % sum first.)"""
    found = Certified(job.directions, 0.0, math.inf)
    summed = prior is not None and 0.0 < prior.upper < math.inf and prior.upper - prior.lower <= 0.1 * prior.upper
    helped = False
    if summed:
        ev = EVENTS.epsilon(job, step, target, prior.lower, prior.upper)
        helped = _narrows(prior, ev)
        found.narrow(ev)
        trial = Certified(job.directions, 0.0, math.inf).narrow(prior.found_dict()).narrow(found.found_dict())
        if engine._narrow(trial.cap(cap)):
            return trial, helped
    found.narrow(TILT.epsilon(job, step, target, est)).cap(cap)
    extra = []
    if job.tau * job.total <= SMALL_TAU:
        two = job.total >= MIN_STEPS and 1 < len(job.schedule) <= MAX_ENTRIES  # (``two_stage.plan``'s ``multi``)
        extra = TILTS_TWO if two else [TILT_BRACKET, TILT_LONG_WINDOW]
    events_first = job.total < MIN_STEPS and found.upper - found.lower <= 0.1 * found.upper
    for certifier in ([EVENTS] + extra if events_first else extra + [EVENTS]):
        if engine._narrow(found) or engine._spent(meter):
            break
        if certifier is EVENTS:
            if not summed:
                ev = EVENTS.epsilon(job, step, target, found.lower, found.upper)
                helped = _narrows(found, ev)
                found.narrow(ev)
        else:
            found.narrow(certifier.epsilon(job, step, target, est))
    return found, helped


def add_loss_max(schedule) -> float:
    """The add direction's largest privacy loss over the noisy ``schedule``: each step's, log P / Q =
    -log(1 - q + q e^((2x - 1) / (2 sigma^2))), is below -log(1 - q), so δ is 0 beyond their sum and
    eps(δ) at most it for every δ > 0 (two steps at q 0.2, δ 1e-40: the grids' add direction found
    no upper bound and RDP's 3.3726 stood over the remove direction's 3.28593).  fsum of terms each
    within 2 ulps: padded by 1e-12 relative.  +inf where some q is 1."""
    total = math.fsum(c * -math.log1p(-q) if q < 1.0 else math.inf for _, q, c in schedule)
    return total * (1.0 + 1e-12)


def _narrows(found: Certified, ev) -> bool:
    """Whether the tail-event sum's interval ``ev`` ({direction: (lower, upper)} or None) lies
    strictly inside ``found`` at either end, in some direction."""
    return any(lo > found.lo[d] or up < found.up[d] for d, (lo, up) in (ev or {}).items())


def monotone(x: np.ndarray, lo: np.ndarray, up: np.ndarray):
    """Bounds on a non-increasing function at the points x -- δ(eps), or eps(δ) -- made
    consistent: an upper bound also bounds the function at every larger x, a lower bound at every
    smaller x.  Never looser than the input."""
    if x.size < 2:
        return lo, up
    order = np.argsort(x, kind="stable")
    up, lo = up.copy(), lo.copy()
    up[order] = np.minimum.accumulate(up[order])
    lo[order] = np.maximum.accumulate(lo[order][::-1])[::-1]
    return lo, up
