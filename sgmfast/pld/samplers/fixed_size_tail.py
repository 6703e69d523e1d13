"""Fixed-size batches at small δ: the symmetrised pair's far-tail events (stage 5 on the pair of
``fixed_size``).

Why.  With a small batch fraction the one-step loss is ~0 unless the example is drawn, and at
small δ the answer is set by one or two drawn steps far out in the tail (q = 1e-4, T = 100,
δ = 1e-12: about 1 % of runs draw the example at all).  One exponential tilt cannot centre the
T-fold FFT power there: the tail's own tilted mass runs off the grid, and the tilted
transform's round-off floor decides both bounds (the single-transform composition of
``fixed_size`` stopped at [0.3397, 0.3958] after 3.7 s and 0.7 GB there; its upper bound
ranged 0.36-0.86 as the tilt moved by 2 %).

How.  ``grid.tail_events`` (module notes there) cuts the one-step PLD at a loss c > 0 into a core
C (fine grid) and a tail R = [c, +inf) (coarse grid) and sums

    P^{*T} = sum_k binom(T, k) C^{*(T-k)} * R^{*k}

term by term, each composed by itself (its round-off relative to its own mass), the terms with
more than K tail steps charged by the union bound (upper) or dropped (lower).  Here the
one-step measure is the symmetrised pair's (``fixed_size`` module notes): for c > 0 its part
above c is the remove direction's (P, Q) at noise sigma / 2 on x > 1/2 above c, so R is that
direction's coarse discretisation from c up (mass above the grid to +inf, pessimistic); C is
the rest of the pair on the fine grid -- the remove direction's losses in [0, c], the add
direction's on x > 1/2 (negative losses; mass below the grid moved up / dropped) and the atom
at 0 (exact up to erf's rounding, charged).  The pieces are disjoint parts of one measure,
each discretised with the rounding of its bound, so the sum bounds δ both ways exactly as in
``tail_events``.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import erf

from ..._failures import GridFailure
from ..._types import Bounds
from ..._work import UNITS_PER_SECOND, metered
from ..common import ADD, REMOVE, STEP_CACHE, TAU_STEP, NotApplicable, cache_put, refine_levels, within
from ..grid.onestep import Hybrid, OneStep, discretise, grid_range, joint_opt
from ..grid.queries import scan
from ..grid.tail_events import EventSum, both_roundings

_LIBM = 64.0 * np.finfo(np.float64).eps  # relative rounding charged to erf (as in ``fixed_size``)

#: The far-tail cut lies half way to this multiple of the likely ε (at most the upper bound).
CUT_REACH = 1.25
#: A search's far-tail events settle at the first level whose upper end is within this share of
#: the accuracy of a narrow answer's (``events_epsilon``'s memo)
SETTLED_SHARE = 0.1
#: A δ query's far-tail events are centred at no more than this many of its eps (``events_delta``)
EVENT_CENTRES = 8


def sym_hybrid(sigma: float, q: float, step: float, m: int, hi_cut: int, tau: float = TAU_STEP) -> Hybrid:
    """The symmetrised pair of one step (noise multiplier sigma, batch fraction q) as a core on
    the grid of spacing ``step`` and a tail from coarse point ``hi_cut`` >= 1 up on the grid of
    spacing m * step (module notes); cached."""
    key = ("fixed_size_hybrid", sigma, q, step, m, hi_cut, tau)
    hit = STEP_CACHE.get(key)
    if hit is not None:
        return hit
    s, big = 0.5 * sigma, m * step
    if big / m != step:
        raise FloatingPointError("coarse grid step is not an exact multiple of the fine one")
    b_lo, b_hi = grid_range(s, q, REMOVE, big, tau)
    a_lo, _ = grid_range(s, q, ADD, step, tau)
    c_hi = min(max(hi_cut, 1), b_hi)
    if c_hi >= b_hi:
        raise NotApplicable("the cut lies above the one-step grid: no tail")
    h = Hybrid()
    h.m, h.low, h.big_lo, h.big_hi = m, None, c_hi, b_hi
    h.high = discretise(s, q, REMOVE, big, tau, c_hi, b_hi, False, True)
    top = c_hi * m
    pos = discretise(s, q, REMOVE, step, tau, 0, top, keep_low=False, keep_high=False)
    neg = discretise(s, q, ADD, step, tau, min(a_lo, -1), 0, keep_low=True, keep_high=False)
    c = (1.0 - q) * float(erf(1.0 / (sigma * math.sqrt(2.0))))
    j_lo = neg.j_lo
    pess = np.zeros(top - j_lo + 1)
    for piece, at in ((pos.pess, -j_lo), (neg.pess, 0)):
        pess[at : at + piece.size] += piece
    pess[-j_lo] += c * (1.0 + _LIBM)
    core = OneStep(j_lo, pess, pos.p_inf + neg.p_inf, step, None, None, None)
    core._opt = joint_opt([(pos, -j_lo), (neg, 0)], pess.size, [(-j_lo, c * (1.0 - _LIBM))])
    h.core = core
    h.p_inf = h.high.p_inf + core.p_inf
    cache_put(key, h)
    return h


def coarse_factor(accuracy: float, eps_c: float, step: float) -> int:
    """m: the tail's coarse grid spacing over the fine one (as ``tail_events.event_sum``)."""
    return 2 ** max(0, min(12, round(math.log2(0.25 * accuracy * max(eps_c, 1e-3) / step))))


def planned_points(sigma: float, q: float, step: float, accuracy: float, eps_c: float, cut: float,
                   tau: float = TAU_STEP) -> float:
    """The points of ``sym_hybrid``'s core and tail for ``event_sum`` at these arguments (its
    grids span the one-step loss range at a step set by eps: a tiny eps makes them long), +inf
    where a grid could not be built; a planning figure, from ``grid_range`` alone."""
    m = coarse_factor(accuracy, eps_c, step)
    s, big = 0.5 * sigma, m * step
    try:
        _, b_hi = grid_range(s, q, REMOVE, big, tau)
        a_lo, _ = grid_range(s, q, ADD, step, tau)
    except (GridFailure, ArithmeticError):
        return math.inf
    c_hi = min(max(math.ceil(cut / big), 1), b_hi)
    return float(c_hi * m - min(a_lo, -1) + 1 + (b_hi - c_hi + 1))


def event_sum(sigma: float, q: float, count: int, step: float, accuracy: float, eps_c: float, cut: float,
              eps_lo: float, rem_goal: float, tau: float = TAU_STEP) -> EventSum | None:
    """The symmetrised pair's ``EventSum`` over ``count`` steps, the tail cut near ``cut`` > 0;
    None where the decomposition does not apply (too many tail events, no tail, windows too
    long)."""
    if count < 2 or not cut > 0:
        return None
    m = coarse_factor(accuracy, eps_c, step)
    try:
        hyb = sym_hybrid(sigma, q, step, m, max(math.ceil(cut / (m * step)), 1), tau)
    except NotApplicable:
        return None
    return both_roundings(0.5 * sigma, q, count, step, m, cut, eps_c, eps_lo, tau, rem_goal, hyb=hyb)


def epsilon_bounds(ev: EventSum, delta: float, lo: float, up: float) -> tuple[float, float]:
    """(lower, upper) of eps(delta) read off ``ev`` inside [lo, up] (lo a certified lower bound,
    up a certified upper one): any eps whose upper δ is <= delta bounds eps(delta) from above,
    any whose lower δ exceeds it from below, whatever the curves do between the points tried.
    The upper end is searched twice, the second time inside the first's bracket (a bracket
    starting at a loose bound, 100 times the answer, leaves the first search 1e-6 of it)."""
    hit_up = None
    for _ in range(2):
        hit = scan(lambda e: ev.delta_upper(e) <= delta, lo, up if hit_up is None else hit_up, first=True)
        if hit is None:
            break
        hit_up = hit
    hit_lo = scan(lambda e: ev.delta_lower(e) > delta, lo, up if hit_up is None else hit_up, first=False)
    return (lo if hit_lo is None else max(lo, hit_lo)), (up if hit_up is None else min(up, hit_up))


def first_points(run, accuracy: float, lo0: float, up0: float, guess: float, step: float | None = None) -> float:
    """The points of ``events_epsilon``'s first grid (``planned_points``), at its
    first step unless ``step`` is given."""
    eps_c = max(guess, lo0, 1e-3)
    step = tail_step0(accuracy, eps_c) if step is None else step
    return planned_points(run[0], run[1], step, accuracy, eps_c, tail_cut(eps_c, up0))


def tail_cut(eps_c: float, up: float) -> float:
    """The far-tail cut a little above the likely eps (``certifiers.tail``): the term without tail
    steps then has a bounded core reaching past eps, which its tilt centres."""
    return 0.5 * (eps_c + min(up, CUT_REACH * eps_c))


def events_epsilon(run, delta: float, accuracy: float, lo0: float, up0: float, guess: float, budget: float,
                   most: float = math.inf, memo: dict | None = None) -> Bounds | None:
    """``fixed_size._epsilon`` of one run by the far-tail events (``event_sum``), refined level by level
    (the grid step halved) from the certified start [lo0, up0] around the Poisson pair's ε
    ``guess``; None where the decomposition does not apply on the first grid.  The first step is
    doubled until that grid has at most ``most`` points (``first_points``); the levels after it
    take at most ``budget`` of work.  ``memo`` (a search's, ``_one_run``): the first level whose
    upper end was within ``SETTLED_SHARE`` of the accuracy of a narrow answer is kept there, and
    later points stop at that level.  Their refinement is then a prefix of the one without the
    memo (in the same cache state: ``fixed_size.upper_epsilon``), so their upper end is at least
    its -- the same certified bound, or a looser one."""
    sigma, q, T = run
    state = {"lo": lo0, "up": up0, "centre": max(guess, lo0, 1e-3)}
    step0 = tail_step0(accuracy, state["centre"])
    if most < math.inf:
        for _ in range(40):
            if first_points(run, accuracy, lo0, up0, guess, step0) <= most:
                break
            step0 *= 2.0
        else:
            return None

    def attempt(level):
        eps_c, lo, up = state["centre"], state["lo"], state["up"]
        cut = tail_cut(eps_c, up)
        ev = event_sum(sigma, q, T, step0 * 0.5 ** level, accuracy, eps_c, cut, 0.5 * lo, 1e-3 * accuracy * delta)
        if ev is None:
            raise GridFailure("no far-tail decomposition on this grid")
        lo, up = epsilon_bounds(ev, delta, lo, up)
        state.update(lo=lo, up=up, centre=0.5 * (lo + up) if up < math.inf else eps_c)
        return lo, up

    settled = None if memo is None else memo.get("tail_level")
    ups: list = []

    def level_up(level):
        lo, up = attempt(level)
        ups.append(up)
        return lo, up

    try:
        with metered() as first:
            lo, up = level_up(0)
    except (GridFailure, ArithmeticError):
        return None
    if not within(lo, up, accuracy):  # (settled: the same levels, cut short -- never a lower upper end)
        # (the first level's work plans the next: ``budget`` bounds the levels after it)
        lo, up = refine_levels(lambda level: level_up(level + 1), lambda lo, up: within(lo, up, accuracy),
                               state["lo"], state["up"], budget, before=first.units,
                               **({} if settled is None else {"levels": settled}))
    if memo is not None and settled is None and within(lo, up, accuracy):
        memo["tail_level"] = next(i for i, u in enumerate(ups) if u <= up * (1.0 + SETTLED_SHARE * accuracy))
    return Bounds(float(min(lo, up)), float(up))


def tail_step0(accuracy: float, eps_c: float) -> float:
    """The far-tail decomposition's first grid step: a quarter of the accuracy's share of eps (on
    quarter octaves of 1e-6, so that nearby queries share their one-step arrays)."""
    d = 0.25 * accuracy * max(eps_c, 1e-3)
    return 2.0 ** (math.floor(4 * math.log2(d / 1e-6)) / 4) * 1e-6 if d > 1e-12 else 1e-12


def events_delta(run, eps: np.ndarray, lo0: np.ndarray, up0: np.ndarray, accuracy: float, resolved_at,
                 budget: float, centres):
    """(lower, upper) δ at the 1-D ``eps`` (all >= 0) of one run by the far-tail events, intersected
    with the certified [lo0, up0].  ``resolved_at(lo, up)`` says which of the first m eps are resolved
    (the rest are their shifted copies).  The decomposition bounds δ at every eps, tightly near
    the eps it is centred at: it is centred at the least unresolved eps not tried yet among
    ``centres`` (indices; at most EVENT_CENTRES of them) and refined level by level (the grid
    step halved) until that eps is resolved or ``budget`` of work is spent in all."""
    sigma, q, T = run
    lo, up = np.array(lo0, dtype=np.float64), np.array(up0, dtype=np.float64)
    tried: set = set()
    with metered() as meter:
        for _ in range(EVENT_CENTRES):
            open_ = ~resolved_at(lo, up)
            left = budget - meter.units / UNITS_PER_SECOND
            todo = [i for i in centres if open_[i] and float(eps[i]) not in tried]
            if not todo or left <= 0.0:
                break
            i_c = min(todo, key=lambda i: eps[i])
            tried.add(float(eps[i_c]))
            lo, up = _centred_delta(sigma, q, T, eps, lo, up, accuracy, i_c, resolved_at, left)
    return lo, up


def _centred_delta(sigma, q, T, eps, lo, up, accuracy, i_c, resolved_at, budget):
    """``events_delta``'s refinement centred at eps[i_c]; (lo, up) where no decomposition applies.
    The grids' bounds hold for every eps >= half the least one (``composition.compose_parts``)."""
    eps_c = max(float(eps[i_c]), 1e-3)
    step0 = tail_step0(accuracy, eps_c)
    cut = tail_cut(eps_c, math.inf)
    # (terms beyond K tail steps are charged up to a thousandth of the accuracy's share of δ)
    scale = max(float(lo[i_c]), 1e-6 * float(up[i_c]), 1e-300)

    def attempt(level):
        ev = event_sum(sigma, q, T, step0 * 0.5 ** level, accuracy, eps_c, cut, 0.5 * float(np.min(eps)),
                       1e-3 * accuracy * scale)
        if ev is None:
            raise GridFailure("no far-tail decomposition on this grid")
        return ev.delta_lower(eps), ev.delta_upper(eps)

    return refine_levels(attempt, lambda a, b: bool(resolved_at(a, b)[i_c]), lo, up, budget)
