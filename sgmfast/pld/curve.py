"""Privacy curves: eps(δ) or δ(eps) at every checkpoint of one run, for about the cost of the last.

A run's checkpoints T_1 < ... < T_K share its one-step arrays.  The composed spectrum at T_k is
the one at T_{k-1} times the steps in between (kernel ``fft_power.power_checkpoints``), so the
one-step arrays are discretised, tilted and transformed once -- on the grid step and the tilt
that the last checkpoint needed -- and each checkpoint reads its own window off them: every
d-th frequency of a length-n spectrum is the spectrum of the arrays folded modulo n / d, so an
early checkpoint, whose composed loss is narrower, reads a shorter window off the same spectrum.
The composed loss is smooth, so only a narrow band of each checkpoint's spectrum survives the
kernel's cut-off (tens of frequencies of ~20,000 at late MNIST checkpoints); where it is narrow,
the checkpoint is answered from that band (``spectral.SpectralGrid``: no inverse transform),
elsewhere by one inverse transform of its window.  The add direction, rarely the larger, is
composed at every ``ADD_STRIDE``-th checkpoint and wherever the bound borrowed from a later one
could matter (``_sparse_add``).  On two cores the last checkpoint's own engine runs beside the
others, which start on the grid step that engine starts from, and again on the one it ends on
if that differs (the two answers intersected).  Checkpoints left wide get RDP's bound
(``_rdp_bounds``), closed forms where they apply (a single step) and, within ``REST_BUDGET``,
engines of their own; any left then keep the bounds monotonicity gives them.

Before any grid (``curve_bounds``): an eps curve is 0 exactly where the run's bound on the
total variation is at most δ (``exact.tv_uppers``); a δ curve whose whole run RDP puts below
1e-300 is [0, that bound] everywhere (resolved by the δ rule); and a run whose many parts
merge into a few cells (``schedules.merged_cells``) is answered by the curves of its two cell
runs, upper bounds from the more revealing, lower from the less.

Work.  Everything but the final checkpoint's engine is charged to one meter, in units of work
(``sgmfast._work``), never wall-clock time: the answers do not depend on the machine, its load or
numba compiling.  The shared spectra get ``_fast_budget`` (5 ms of work more a checkpoint), the
rest what ``_allowance`` leaves: a few times the final engine's own work.  Every pass is charged
before it runs, and each tilt group plans its grids against its share of the predicted work
(``_shared_groups``, ``_plan``): where not all checkpoints fit, those that do are composed in
``_spread`` order (the last, the first, the middles of the widest gaps): monotonicity brackets the rest.
Memory: a shared grid has at most SHARED_BINS bins (windows past it are cut and charged, or
skipped), and those longer than PAIR_BINS are built one at a time, beside the final engine's.

Soundness.  Each checkpoint's grid is the one ``composition.compose_parts`` builds for its
schedule on that step, tilt and window (``composition.grid_of``, with the error sums of the
shared kernel, which are ``power_product``'s for the cumulative counts): the same certified
bounds.  A tilt away from a checkpoint's saddle point only widens its interval.  A checkpoint
whose interval is wider than the accuracy (or whose add direction may set the answer) is
answered by its own ``Engine``, started on the same grid step, while the budget lasts.  Both
eps(δ) and δ(eps) grow with the number of steps (a run's prefix is a post-processing of the
run), so every upper bound also holds at the earlier checkpoints and every lower bound at the
later ones: the curve is made monotone that way, never looser than its points.  What a budget
stops leaves a checkpoint its trivial bounds (0, and +inf or 1), narrowed only by certified
ones: RDP's, the single steps' closed forms, its neighbours'.
"""

from __future__ import annotations

import contextlib
import contextvars
import math

import numpy as np

from .._failures import GridFailure
from .._work import UNITS_PER_SECOND, Meter, WorkLimit, charge, metered
from .certifiers import Caches, Job, exact
from .common import ADD, REMOVE, REPLACE, bins_limit, both_roundings, final_pool, two_cores, within
from .engine import BUDGET, TILT, Engine
from .schedules import MAX_PARTS, make_engine
from .grid.onestep import coarse_tail
from .grid.two_stage import MIN_STEPS
from .grid.spectral import read_delta, read_eps

# the shared spectra and the fallback bounds live in their own modules
from .curve_grids import (LOG_CUT, PAIR_BINS, POWER_PER_FREQ, POWER_PER_ROW, READ_PER_BIN, SHARED_BINS,  # noqa: F401
                          _BIG, Run, _compose, _estimates, _fft_units, _Layout, _monotone_in_steps, _plan, _power,
                          _prepare, _spread, history_run, one_step_units, spread_back)
from .curve_bounds import (RDP_SHARE, _below_floats, _cell_runs, _closed_forms, _rdp_bounds, _rdp_caps,  # noqa: F401
                           _rdp_units, _sandwiched)

# --- the curves --------------------------------------------------------------------------------

def _engine(run, k, accuracy, relation, budget):
    return make_engine(run.schedule(k), accuracy, None, relation, budget=budget)


def epsilon_curve(run: Run, target: float, accuracy: float, relation: str):
    """(lower, upper) of eps(target) at every checkpoint of ``run``."""
    pair = _cell_runs(run, accuracy)
    if pair is not None:
        return _sandwiched(pair, lambda r: epsilon_curve(r, target, accuracy, relation))

    def single(engine, step):
        lo, up = engine.epsilon(target, step)[:2]
        wide = not within(lo, up, accuracy)
        short = sum(c for _, _, c in engine.schedule) < MIN_STEPS if isinstance(engine, Engine) else True
        return lo, up, int(wide) + int(short)  # (the engine's RDP calls: its cap where wide, a floor when short)

    # (eps = 0 exactly where δ(0), the total variation, is at most the target: no grid needed)
    zero = exact.tv_uppers(run.parts, run.counts, relation) <= target
    return _curve(run, accuracy, relation, math.inf, run.plain,
                  lambda final: final.epsilon(target), lambda final: final.first_step(target),
                  lambda final, sub, step, budget, memo: _fast_epsilon(final, sub, target, step, budget, memo), single,
                  lambda form: exact.eps_bounds(form, target), zero)


def delta_curve(run: Run, eps: float, accuracy: float, relation: str):
    """(lower, upper) of δ(eps) at every checkpoint of ``run``."""
    settled = _below_floats(run, eps, relation)
    if settled is not None:
        return settled
    pair = _cell_runs(run, accuracy)
    if pair is not None:
        return _sandwiched(pair, lambda r: delta_curve(r, eps, accuracy, relation))
    e = np.array([eps])

    def answer(final):
        l, u = final.delta(e)
        return l[0], u[0], final.last_step

    def single(engine, step):
        l, u = engine.delta(e)
        return l[0], u[0], 2  # (the engine's RDP caps at eps and eps + h)

    return _curve(run, accuracy, relation, 1.0, run.plain and math.isfinite(eps), answer,
                  lambda final: final.first_delta_step(eps),
                  lambda final, sub, step, budget, memo: _fast_delta(final, sub, eps, step, budget, memo), single,
                  lambda form: tuple(float(b[0]) for b in exact.delta_bounds(form, e)))


#: seconds (of work, ``sgmfast._work``) for the shared spectra (``_fast_budget``: FAST_BUDGET plus
#: FAST_PER_POINT a checkpoint, over both steps they may be read on) and for the checkpoints that
#: need an engine of their own (REST_BUDGET; REST_MIN the least one of them is given)
FAST_BUDGET = 2.0
FAST_PER_POINT = 0.005
REST_BUDGET = 2.0
REST_MIN = 0.05
#: at most this many checkpoints left wide are given all of REST_BUDGET; REST_MIXED (``_rest_plan``)
REST_FEW, REST_MIXED = 8, 4
#: all of a curve's work but its final engine's is at most CURVE_FACTOR times that engine's, or
#: the shared spectra's budget where that is more (a cheap last checkpoint), and never more
#: than the two budgets above together: a curve costs a few single queries
CURVE_FACTOR = 3.0
#: units charged for an engine of its own beyond its transforms (its setup, its tilt searches),
#: and for an RDP optimisation (``sgmfast.rdp``: a few dozen passes over each mechanism's
#: quadrature nodes for its fractional orders, ``orders._node_cap``; measured 1-4 us a node
#: here, the more for small sigma: 0.06-0.12 s at sigma = 0.015, 0.3 ms at 0.2)
ENGINE_UNITS = 2e6


#: a hard budget stops its work at this multiple of its limit, plus this many units (plans are
#: made against the limit; the slack absorbs their small misses: a band wider than predicted)
HARD_SLACK = 1.25
HARD_EXTRA = 2.5e5


class _Budget:
    """Work charged to ``meter`` (open it with ``metered``) against a limit in units.  A ``hard``
    one raises ``WorkLimit`` at the charge that would pass it (HARD_SLACK; charges come before
    their work: a one-step grid, a transform, a kernel pass), so a prediction that falls short
    cannot overrun it by much; only a budget charged from one thread may be hard (which of two
    threads' charges passes a shared limit depends on their timing, and the answers must not)."""

    def __init__(self, units: float, hard: bool = False):
        self.limit = max(float(units), 0.0)
        self.meter = Meter(HARD_SLACK * self.limit + HARD_EXTRA if hard else None)
        self.cut = False  # (set where its grids stopped short: a window too long, no work left)

    def left(self) -> float:
        return max(self.limit - self.meter.units, 0.0)

    def spent(self) -> bool:
        return self.meter.units >= self.limit


def _fast_budget(points: int) -> float:
    """Units for a curve's shared spectra (both steps they may be read on)."""
    return (FAST_BUDGET + FAST_PER_POINT * points) * UNITS_PER_SECOND


def _allowance(points: int, final_units: float) -> float:
    """Units for all of a curve's work but its final engine's (CURVE_FACTOR notes)."""
    fast = _fast_budget(points)
    return min(fast + REST_BUDGET * UNITS_PER_SECOND, max(fast, CURVE_FACTOR * final_units))


def _measured(answer):
    """(answer(), the work it charged)."""
    with metered() as meter:
        res = answer()
    return res, meter.units


def _merge(a, b):
    """Two (lower, upper, narrow, complete) of the same checkpoints (both certified): their
    intersection, narrow where the second (on the final's step) is -- as if it were the only one."""
    if a is None or b is None:
        return b if a is None else a
    return np.maximum(a[0], b[0]), np.minimum(a[1], b[1]), b[2], b[3]


def _curve(run: Run, accuracy, relation, trivial, shareable, answer, first_step, shared, single, closed, zero=None):
    """The plan of both curves: the last checkpoint by its own engine (``answer(final)`` ->
    (lower, upper, grid step)), the others read off shared spectra on that step
    (``shared(final, sub, step, budget, memo)`` -> (lower, upper, narrow, complete); ``shareable``: the run
    allows it), closed forms where they apply (``closed(form)`` -> (lower, upper),
    ``_closed_forms``), those left wide by engines of their own (``single(engine, step)`` ->
    (lower, upper, its RDP calls)) within REST_BUDGET; then monotone in the steps.  ``trivial``
    is the trivial upper bound; ``zero`` marks the checkpoints whose answer is 0 exactly (a
    prefix of them: the answers grow with the steps).  All but the final engine is charged to
    one meter and kept within ``_allowance``."""
    kk = run.counts.shape[0]
    lo, up = np.zeros(kk), np.full(kk, trivial)
    live = run.counts.sum(axis=1) > 0
    if zero is not None:
        live &= ~zero
    if not live.any():
        return np.zeros(kk), np.zeros(kk)
    last = kk - 1
    final = _engine(run, last, accuracy, relation, BUDGET)
    todo = [k for k in range(last) if live[k]]
    sub = Run(run.parts, run.counts[:last] if len(todo) == last else run.counts[todo])  # (a view: 10^4 x 10^4)
    work = Meter()  # everything but the final engine
    fast_units = _fast_budget(len(todo))
    share = shareable and bool(todo)
    memo = {}  # (RDP's bounds, for a second pass on the final's step)

    def fast(step, units):
        if units <= 0.0:
            return None
        with metered(work), bins_limit(SHARED_BINS):
            try:
                return shared(final, sub, step, _Budget(units), memo)
            except (ArithmeticError, GridFailure, MemoryError):
                return None

    guess = got = None
    if share and isinstance(final, Engine):
        # the final engine (on a thread of its own where there are two cores); the others on the step
        # it starts from, within what any allowance grants (the final's work is not known yet) --
        # the same plan on one core, the final first: the same answers on any machine
        guess = first_step(final)
        fut = final_pool().submit(contextvars.copy_context().run, _measured, lambda: answer(final)) if two_cores() else None
        done = None if fut is not None else _measured(lambda: answer(final))
        try:
            got = fast(guess, fast_units)
        finally:
            (lo[last], up[last], step), final_units = fut.result() if fut is not None else done
    else:
        (lo[last], up[last], step), final_units = _measured(lambda: answer(final))
    allowance = _allowance(len(todo), final_units)
    if share and step is not None and step != guess:  # (on the final's step too; both certified)
        # where every grid on the first step was composed, those on the final's get the shared
        # spectra's whole budget again (as they always did); where the first pass was cut short
        # -- a hard corner -- the second gets what the allowance leaves
        units = fast_units if got is not None and got[3] else min(fast_units, allowance) - work.units
        got = _merge(got, fast(step, units))
    if got is not None:
        f_lo, f_up, ok, _ = got
        lo[todo], up[todo] = f_lo, f_up
        rest = [k for k, good in zip(todo, ok) if not good]
    else:
        rest = todo
    if run.plain:  # (closed forms: a single step exactly, a floor for the others)
        c_lo, c_up = _closed_forms(run, relation, closed)
        lo, up = np.maximum(lo, c_lo), np.minimum(up, c_up)
        rest = [k for k in rest if not c_up[k] < math.inf]
    rest, limit = _rest_plan(run, rest, allowance - work.units)
    with metered(work):  # (each on its own engine: the exact paths, or a tilt of its own)
        for k, budget in _within_budget(rest, work, limit, lambda k: int(np.count_nonzero(run.counts[k]))):
            engine = _engine(run, k, accuracy, relation, budget)
            e_lo, e_up, rdp_calls = single(engine, step)
            charge(ENGINE_UNITS + rdp_calls * _rdp_units(run.schedule(k)))
            lo[k], up[k] = max(lo[k], e_lo), min(up[k], e_up)
    lo[~live], up[~live] = 0.0, 0.0
    return _monotone_in_steps(lo, up)


def _rest_plan(run: Run, rest: list, left: float):
    """(checkpoints, units) for engines of their own: a few wide get all of REST_BUDGET; many (a hard
    corner) share ``left``; with many distinct steps (engines as costly as the final) a spread few do."""
    if len(run.parts) > MAX_PARTS:
        return sorted(rest[i] for i in _spread(len(rest))[1:][:REST_MIXED]), max(left, 0.0)
    limit = REST_BUDGET * UNITS_PER_SECOND
    return rest, (min(limit, left) if len(rest) > REST_FEW else limit)


def _within_budget(rest: list, meter, limit: float, size):
    """(checkpoint, engine budget) for the checkpoints ``rest``, in ``_spread`` order, sharing
    ``limit`` units charged to ``meter`` (at least REST_MIN seconds each) until it is spent; the ones
    left keep their bounds, narrowed by monotonicity.  A checkpoint is skipped where the largest
    engine so far, scaled by ``size(k)`` (distinct steps), predicts more than is left: a first round
    may overrun its budget (``schedule_engine.FIRST_EXTRA``; 385 distinct sigmas at δ 1.4e-10)."""
    order = [rest[i] for i in _spread(len(rest))]
    start, big = meter.units, (0, 0.0)  # (distinct steps, work) of the largest engine so far
    for i, k in enumerate(order):
        left = (limit - (meter.units - start)) / UNITS_PER_SECOND
        if left <= 0.0:
            return
        if big[0] and big[1] * size(k) / big[0] > left * UNITS_PER_SECOND:
            continue
        before = meter.units
        yield k, max(left / (len(order) - i), REST_MIN)
        if size(k) > big[0]:
            big = (size(k), meter.units - before)


#: checkpoints within this ratio of steps share one tilt, the saddle point of the largest of them
#: (a tilt far from a checkpoint's own widens its interval, or sends it to its own engine).  At a
#: fixed δ the saddle point moves slowly with the steps (eps grows like their square root): one
#: tilt serves a factor 64 (MNIST's 60 epochs: one group instead of three, the curve ~30 %
#: faster, no interval wider); at a fixed eps δ spans orders of magnitude, and so does the tilt.
TILT_GROUP_EPS = 64.0
TILT_GROUP_DELTA = 4.0


def _tilt_groups(sub: Run, ratio: float):
    """Index ranges of ``sub``'s checkpoints, from the first, each within ``ratio`` in steps."""
    tot = sub.counts.sum(axis=1)
    groups, hi = [], len(tot)
    while hi > 0:
        lo = hi - 1
        while lo > 0 and tot[lo - 1] * ratio > tot[hi - 1]:
            lo -= 1
        groups.append(np.arange(lo, hi))
        hi = lo
    return groups[::-1]


def _tilts(final: Engine, sub: Run, g, step, eps_c, goal):
    """(tilt of the main direction, tilt of the add direction on the 4x grid) for a group, at the
    saddle points of its largest checkpoint (a ``Job`` of its own: the tilt caches are per schedule)."""
    job = final.job(goal)
    own = Job(tuple(sub.schedule(int(g[-1]))), final.replace, final.accuracy, job.tau, Caches(), job.coarse)
    main = REPLACE if final.replace else REMOVE
    theta_a = None if final.replace else TILT.theta(own, ADD, 4 * step, eps_c)
    return TILT.theta(own, main, step, eps_c), theta_a, job.tau


def _both(run):
    """(run(True), run(False)): ``common.both_roundings``, as ``TiltedFFT.grid_pair``
    (windows longer than PAIR_BINS are composed one at a time, ``_BIG``)."""
    return both_roundings(run)


#: the add direction is composed at every ADD_STRIDE-th checkpoint of a tilt group (and its last)
ADD_STRIDE = 4


def _add_sel(kk: int) -> np.ndarray:
    """Every ADD_STRIDE-th of kk checkpoints, counted from the last."""
    return np.arange(kk - 1, -1, -ADD_STRIDE)[::-1]


def _sparse_add(main_up: np.ndarray, bound_at, first) -> np.ndarray:
    """Upper bounds of the add direction at a tilt group's checkpoints, where they can matter.

    ``bound_at(sel)`` gives the add direction's upper bounds (eps, or δ at some eps) at the
    positions ``sel``; ``first`` are those at ``_add_sel`` (every ADD_STRIDE-th checkpoint
    counted from the last, composed beside the main direction's grids).  Each bound also holds at the checkpoints before it (one direction's eps(δ) and δ(eps)
    grow with the steps too: the earlier composition is a marginal of the later one).  Where that
    borrowed bound is already <= the main direction's upper bound, the pair's bound (the larger
    of the two) is the main one's and the add direction needs no grid of its own; only the other
    checkpoints are composed in a second pass."""
    kk = main_up.shape[0]
    sel = _add_sel(kk)
    out = np.full(main_up.shape, math.inf)
    out[sel] = first
    later = np.minimum.accumulate(out[::-1])[::-1]  # the least bound composed at or after each
    bad = ~(later <= main_up)
    need = np.flatnonzero((bad.reshape(kk, -1).any(axis=1)) & ~np.isin(np.arange(kk), sel))
    if need.size:
        out[need] = bound_at(need)
    return np.minimum.accumulate(out[::-1])[::-1]


def _group(final: Engine, sub: Run, g, step, theta_a, tau, lo_e, read, trivial, lays, share: float, held: dict):
    """(upper, lower, units left, cut) at the checkpoints g of one tilt group, within ``share``.

    ``read(items, out, pess, ks)`` writes the bounds of the grids ``items`` ((position, grid)
    pairs; position i is the checkpoint ks[i] of the curve's run) into ``out`` (upper if pess;
    ``trivial`` = (upper, lower) where no grid is read).  ``lays`` are the ``_Layout`` of the
    main direction (pessimistic, optimistic) and of the add direction's first pass (None where
    they failed).  Their spectra and predicted work come first (``_prepare``); the rest of the
    share goes to each direction in proportion to its predicted work where not all fit (a
    checkpoint is narrow only where both main directions composed it: each then covers the same
    part of them).  The pair's bound is the larger direction's: the add direction's upper bound
    (on a 4x coarser grid, the engine's second check) joins the main one's where it can
    matter (``_sparse_add``), its first pass beside the pessimistic grids, a second one from
    what the three left.  Each budget sees only planned work: the answers do not depend on the
    threads' timing, or on which one-step grids are cached.  A grid that fails (too large, too
    much work) leaves the trivial bounds from where it stopped, the ones read before it stand;
    ``cut`` says whether any grid was left out."""
    kk = len(g)
    idx = [np.arange(kk), np.arange(kk), _add_sel(kk)]
    group = _Budget(share)
    preps = []
    with metered(group.meter):
        for lay in lays:
            try:
                preps.append(None if lay is None else _prepare(lay, group.left()))
            except (ArithmeticError, GridFailure, MemoryError):
                preps.append(None)
    needs = [0.0 if p is None else p.need for p in preps]
    avail, total, used = group.left(), sum(needs), 2 if theta_a is None else 3
    if total <= avail:
        split = [d + (avail - total) / used if i < used else 0.0 for i, d in enumerate(needs)]
    else:
        split = [avail * d / total for d in needs]
    own = [_Budget(u, hard=True) for u in split]

    def composed(prep, i, pess, budget):
        t = trivial[0] if pess else trivial[1]
        out = np.full((len(idx[i]),) + np.shape(t), t, dtype=np.float64)
        big = prep is not None and prep.n > PAIR_BINS
        try:
            with (_BIG if big else contextlib.nullcontext()), metered(budget.meter):
                read(_compose(prep, budget), out, pess, g[idx[i]])
        except (ArithmeticError, GridFailure, MemoryError):
            budget.cut = True  # (what was read stands)
        return out

    def run(pess):
        if not pess:
            return composed(preps[1], 1, False, own[1]), None
        first = None if theta_a is None else composed(preps[2], 2, True, own[2])
        return composed(preps[0], 0, True, own[0]), first

    (up, first), (lo, _) = _both(run)
    preps = None
    left = sum(b.left() for b in own)
    cut = any(b.cut for b in own[:2 if theta_a is None else 3])
    if theta_a is not None:
        second = _Budget(left, hard=True)

        def add_at(sel):
            t = trivial[0]
            out = np.full((len(sel),) + np.shape(t), t, dtype=np.float64)
            try:
                lay = _layout(Run(sub.parts, sub.counts[g[sel]]), ADD, True, 4 * step, theta_a, lo_e[sel], tau,
                              coarse_tail(final.schedule), held)
                with metered(second.meter):
                    prep = None if lay is None else _prepare(lay, second.left())
                    read(_compose(prep, second), out, True, g[sel])
            except (ArithmeticError, GridFailure, MemoryError):
                second.cut = True
            return out

        up = np.maximum(up, _sparse_add(up, add_at, first))
        left, cut = second.left(), cut or second.cut
    return up, lo, left, cut


def _layout(run, add, pess, step, theta, eps_lo, tau, coarse, held):
    """``_Layout``, or None where it fails (a grid too large); past a hard budget, WorkLimit."""
    try:
        return _Layout(run, add, pess, step, theta, eps_lo, tau, coarse, held)
    except WorkLimit:
        raise
    except (ArithmeticError, GridFailure, MemoryError):
        return None


def _need(lay) -> float:
    """The work of composing all of ``lay``'s checkpoints, each taken as unrolled (an upper
    estimate where bands are narrow: it weighs the groups against each other, and what one does
    not use goes on to the next)."""
    wins = [] if lay is None else [w for w in lay.wins if w is not None]
    if not wins:
        return 0.0
    n = max(w.n for w in wins)
    h = n // 2 + 1
    return (len(lay.steps) * _fft_units(n) + POWER_PER_FREQ * h
            + sum(_fft_units(w.n) + READ_PER_BIN * w.n + 2.0 * POWER_PER_ROW * h for w in wins))


def _eps_reader(target, est):
    """``_group``'s reader of eps bounds at δ = target, each searched from its Gaussian estimate
    ``est`` scaled as the last answer was (a search start only)."""

    def read(items, out, pess, ks):
        ratio = 1.0
        for i, x in items:
            e = est[ks[i]]
            v = read_eps(x, target, e * ratio)
            if math.isfinite(v) and v > 0.0 and e > 0.0:
                ratio = v / e
            out[i] = v

    return read


def _shared_groups(final: Engine, sub: Run, step, units: float, ratio, tilt_at, eps_lo, read, trivial, ups, lo):
    """Every tilt group's bounds into ``ups`` / ``lo`` (``_group``); returns (the units of the
    ``units`` given that no group used, whether every grid was composed in full).

    The tilts and layouts of all groups come first (their work is charged, not planned: whether a
    one-step grid is already cached -- by the final engine, running meanwhile -- must not change
    the plan); then each group in turn gets its share of what is left among the groups left, by
    their predicted work (``_need``: every grid taken as unrolled, an upper estimate;
    ``_water_fill``: the cheaper ones all they need, the others one level), and gives back what
    its grids did not use (most, where their bands are narrow): cheap groups are answered in
    full, the costly ones share the rest, each composing the checkpoints that fit (``_group``,
    ``_plan``).  A group whose tilts fail keeps the trivial bounds."""
    plans = []
    main = REPLACE if final.replace else REMOVE
    held: dict = {}  # (every group's layouts share the parts' one-step grids)
    layouts = None
    for g in _tilt_groups(sub, ratio):
        try:
            if layouts is None:  # (the first tilt gives tau: the layouts are stopped past the
                # shared budget and the one-step grids' charge together)
                with metered() as first:
                    theta, theta_a, tau = tilt_at(g)
                layouts = _Budget(units + one_step_units(sub.parts, main, step, tau, theta_a is not None), hard=True)
                layouts.meter.add(first.units)
            else:
                with metered(layouts.meter):
                    theta, theta_a, tau = tilt_at(g)
            with metered(layouts.meter):
                coarse = coarse_tail(final.schedule)  # (the final engine's one-step grids, shared with it)
                lays = [_layout(Run(sub.parts, sub.counts[g]), main, pess, step, theta, eps_lo[g], tau, coarse, held)
                        for pess in (True, False)]
                sel = g[_add_sel(len(g))]
                lays.append(None if theta_a is None else
                            _layout(Run(sub.parts, sub.counts[sel]), ADD, True, 4 * step, theta_a, eps_lo[sel], tau,
                                    coarse, held))
        except WorkLimit:
            break
        except (ArithmeticError, GridFailure, MemoryError):
            continue
        plans.append((g, theta_a, tau, lays))
    complete = len(plans) == len(_tilt_groups(sub, ratio))
    if not plans:
        return units, complete
    needs = [[_need(x) for x in p[3]] for p in plans]
    for i in range(len(plans)):
        (g, theta_a, tau, lays), plans[i] = plans[i], None  # (each group's arrays dropped once read)
        share = _water_fill([sum(d) for d in needs[i:]], units)[0]
        ups[g], lo[g], left, cut = _group(final, sub, g, step, theta_a, tau, eps_lo[g], read, trivial, lays, share, held)
        units -= share - left
        complete = complete and not cut
    return units, complete


def _water_fill(needs, total: float) -> list:
    """Shares of ``total`` for the ``needs``: each its need and an equal part of the slack where
    they all fit, else the cheaper ones all they need and the others one equal level (max-min
    fair)."""
    s = float(sum(needs))
    if s <= total:
        return [d + (total - s) / len(needs) for d in needs]
    rem, cnt, level = total, len(needs), 0.0
    for d in sorted(needs):
        if d * cnt <= rem:
            rem -= d
            cnt -= 1
        else:
            level = rem / cnt
            break
    return [min(d, level) for d in needs]


def _fast_epsilon(final: Engine, sub: Run, target, step, budget: _Budget, memo: dict):
    """(lower, upper, narrow, complete) of eps(target) at the checkpoints of ``sub`` on shared spectra
    (complete: every grid composed in full, none cut by the budget or the bins cap)."""
    est = _estimates(sub, target, final.main)
    eps_lo = 0.5 * np.maximum(est, 1e-9)
    kk = len(est)
    lo, up = np.zeros(kk), np.full(kk, math.inf)
    with metered(budget.meter):
        avail = budget.left()
        unused, complete = _shared_groups(final, sub, step, (1.0 - RDP_SHARE) * avail, TILT_GROUP_EPS,
                                          lambda g: _tilts(final, sub, g, step, max(est[g[-1]], 1e-9), target),
                                          eps_lo, _eps_reader(target, est), (math.inf, 0.0), up, lo)
        wide = ~within(lo, up, final.accuracy)
        if not final.replace and wide.any():  # RDP's bound where the grids left them wide
            up[wide] = np.minimum(up[wide], _rdp_bounds(Run(sub.parts, sub.counts[wide]), [math.log(target)], 0,
                                                        _Budget(RDP_SHARE * avail + unused), memo)[:, 0])
    return lo, up, within(lo, up, final.accuracy), complete


def _fast_delta(final: Engine, sub: Run, eps, step, budget: _Budget, memo: dict):
    """(lower, upper, resolved, complete) of δ at eps at the checkpoints, resolved where lower(eps)
    >= upper(eps + h) (h = accuracy * max(eps, 1e-2)), the engine's criterion (complete as
    ``_fast_epsilon``)."""
    h = final.accuracy * max(eps, 1e-2)
    e = np.array([eps, eps + h])
    kk = sub.counts.shape[0]
    ups, lo = np.ones((kk, 2)), np.zeros(kk)

    def read(items, out, pess, ks):  # upper: at eps and eps + h; lower: at eps
        for i, x in items:
            out[i] = read_delta(x, e) if pess else read_delta(x, e[:1])[0]

    with metered(budget.meter):
        avail = budget.left()
        unused, complete = _shared_groups(final, sub, step, (1.0 - RDP_SHARE) * avail, TILT_GROUP_DELTA,
                                          lambda g: _tilts(final, sub, g, step, eps, 1e-16), np.full(kk, eps), read,
                                          (np.ones(2), 0.0), ups, lo)
        wide = ~(lo >= ups[:, 1])
        if not final.replace and wide.any():
            ups[wide] = np.minimum(ups[wide], _rdp_bounds(Run(sub.parts, sub.counts[wide]), e, 1,
                                                          _Budget(RDP_SHARE * avail + unused), memo))
    up = np.minimum(ups[:, 0], 1.0)
    ok = (lo >= ups[:, 1]) | (up - lo <= 1e-300)
    return lo, up, ok, complete
