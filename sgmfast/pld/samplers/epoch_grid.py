"""One balls-in-bins epoch's grids (``balls_in_bins``' module notes): the lattice of S -- its
spacing h from W's variance, its top W_max where the closed-form tail takes over, its cap above
t + W_max -- and the loss grid's spacing, for each refinement level and the work budget."""

from __future__ import annotations

import math

from scipy.special import ndtri

from ..common import budget_share
from . import epoch_tail
from .epoch_power import epoch_cost, window_low

#: Largest lattice (entries of S) and loss grid one epoch may use.  A coarser lattice is certified
#: too; 2^19 was measured against 2^17 .. 2^21 on small-sigma runs (sigma 0.55-0.85, t 4-659): at
#: 2^21 one epoch took 14 s and left no budget to refine, at 2^19 1-2 s and as tight or tighter.
MAX_LATTICE = 1 << 19
MAX_LATTICE_FINE = 1 << 21  # (... doubling with every refinement level, up to this)
MAX_GRID = 1 << 21
#: Most entries of the whole lattice 0 .. cap (the windowed powers are put back on it; 64 MB).
MAX_FULL = 1 << 23
#: Work (seconds of ``_work`` units, counted, not timed) a query may spend refining before it returns
#: what it has (certified); lattice products count a transform each (``epoch_power._conv``).  6 units run
#: the levels the former budget's 4 s did on a quiet machine (σ 19.63, t 1446 needs its second level).
BUDGET = 6.0
#: Truncation budgets below this (δ below ~1e-8 at the default accuracy) take the four tilts of
#: ``epoch_power`` for both bounds; above, the lower bound takes two, and only where the untilted
#: power's flat round-off floor could hold more than the budget (``_lower_power``).
TILTED_LOWER_TAIL = 1e-15


def _lattice(sigma: float, t: int, accuracy: float, tail: float, refine: int, budget: float = BUDGET,
             top: float = 1000.0):
    """(h, W_max, cap): lattice spacing from the variance of W (the spread adds <= h^2/4 of
    Var W = e^{1/sigma^2} - 1), top where the shifted coordinate's tail is ``tail``, cap above
    t + W_max; h made coarser if the lattice would exceed MAX_LATTICE (still certified), and at
    level 0 while its epoch would cost more than ``budget`` (``epoch_cost``; scaled by
    ``common.budget_share``): a later level only runs where the budget has room for it.  W_max is
    at most ``top`` t (or what four coordinates above it need; ``second_top``)."""
    s = 1.0 / sigma
    var = math.expm1(s * s)
    h = math.sqrt(0.2 * accuracy * var) * 0.5 ** (refine / 2)
    z = float(-ndtri(max(tail, 1e-300)))
    w_max = math.exp(min(0.5 * s * s + s * z, 700.0))
    # (above 1000 t the example's coordinate is in closed form to ~1e-3 of its loss, ``epoch_tail``;
    # the lattice's far tail only loses its lower bound to round-off: sigma 0.6, t 3, delta 1e-6
    # gave [7.16, 7.76] with the lattice to 1.4e4); the cap then leaves room for a second large
    # coordinate (with cap = t + W_max + ..., S > cap took 1.6e-6 of P-mass to +inf there)
    cut = w_max > top * t
    w_max = min(w_max, max(top * t, epoch_tail.least_top(s, t, tail)))
    room = 2.0 if cut else epoch_tail.cap_room(s, t, w_max, var, tail)  # (room above W_max: see there)
    cap = t + room * w_max + 12.0 * math.sqrt(t * var) + 1.0
    w_max = min(w_max, cap)
    # (a short lattice refines twice as fast: its work is small beside the loss grid's, and where
    # W's mass sits far below h its width is first order in h -- ``CHEAP_LATTICE``)
    h = min(h, max(h * 0.5 ** (refine / 2), cap / CHEAP_LATTICE))
    most = min(MAX_LATTICE << refine, MAX_LATTICE_FINE)
    afford = budget * budget_share()
    while True:
        got = _fit(s, t, var, tail, cut, h, w_max, cap, most)
        if refine or most <= MIN_LATTICE or epoch_cost(*got, t, var, tail < TILTED_LOWER_TAIL) <= afford:
            return got
        most >>= 1


def _fit(s, t, var, tail, cut, h, w_max, cap, most):
    """``_lattice``'s (h, W_max, cap) with at most ``most`` lattice points in the windows."""
    # (the transforms only cover the partial sums' windows, ``epoch_power``: S from about
    # t - 17 sd(S) up, where a light-tailed S at large t has all its mass -- sigma 19.6, t 1446:
    # 1419 .. 1470 of a lattice from 0)
    low = window_low(t, var)
    if max(cap - low, w_max) / h > most:
        # keep the lattice: coarser spacing, and a lower top (its tail is charged exactly)
        # (never below what four coordinates above it need, ``epoch_tail.least_top``; cut, with few steps the
        # cap keeps room for a second large coordinate: at cap = t + W_max + ..., sigma 0.4, t 2
        # took 2.2e-5 of P-mass to +inf by Chernoff on S > cap; else as ``epoch_tail.cap_room`` says)
        w_max = min(w_max, max(0.5 * most * h, epoch_tail.least_top(s, t, tail)))
        few = cut and t <= 16
        room = 2.0 if few else epoch_tail.cap_room(s, t, w_max, var, tail)
        if not few and (t + room * w_max - low) / most > ROOM_H_MAX:
            room = 1.0  # (ROOM_H_MAX)
        cap = min(cap, t + room * w_max + 12.0 * math.sqrt(t * var) + 1.0)
        h = max(h, max(cap - low, w_max) / most)
    return max(h, cap / MAX_FULL), w_max, cap


#: Coarsest spacing (E[W] = 1) at which the cap takes room above W_max (``epoch_tail.cap_room``):
#: at sigma 0.45, t 1065 the room made h 3, where the lower law was 0 everywhere.
ROOM_H_MAX = 0.25
#: Fewest lattice points ``_lattice`` goes down to for the budget.
MIN_LATTICE = 1 << 16
#: Lattices up to this many points (0 .. cap) halve h at every level instead of taking sqrt(1/2):
#: sigma 0.4, t 2, 200 epochs, δ 1e-12 (cap 789) read [744.280, 745.457] at h 0.057 (level 5),
#: [744.650, 745.311] at h 0.014, a width proportional to h, while the loss step of level 1 was as
#: good as level 5's for 1/16 of the work.
CHEAP_LATTICE = 1 << 16


def _loss_step(sigma: float, t: int, accuracy: float, refine: int, eps: float = math.inf, share: float = 1.0) -> float:
    """The loss grid's spacing: the certified gap of connect-the-dots grows like
    step^2 / (one epoch's loss variance), as for the SGM (``estimates.initial_step``; STEP_VAR).
    Where that passes STEP_CAP (a large variance) the step is STEP_CAP or STEP_PER_EPS accuracy of
    the answer ``eps`` (a guess), the smaller: there an interval is about a step wide (sigma 0.4,
    t 2, δ 1e-12: 0.05, 0.025, 0.0125 wide at those steps for eps 19.5 -- three levels, 4.9 units).
    ``share``: the run's loss variance over that of as many whole epochs as it composes (a partial
    last epoch of r steps has r/t of an epoch's: sigma 1.6, t 2508, r 74, δ 9.4e-9 read 1.5e-3 wide
    on a whole epoch's step)."""
    s = 1.0 / sigma
    var = share * math.expm1(s * s) / t  # one epoch's loss variance near 0 (delta method)
    step = STEP_VAR * math.sqrt(3.0 * accuracy * var)
    if step >= STEP_CAP:  # (capped: a heavy tail, whose loss is far from Gaussian)
        step = min(STEP_CAP, max(STEP_PER_EPS * accuracy * eps, 1e-3))
    return max(1e-7, step * 0.5 ** refine)


#: The loss step (``_loss_step``): its cap as a fraction of the accuracy of the answer, its cap, and
#: the factor of its variance rule.  Once the lower lattice law no longer set the width (stop 48,
#: ``w_lower``'s offset) the step did, at the same work: sigma 0.434, t 201, 145 epochs, δ 6.5e-9
#: read 1.51e-3 at level 0 with (0.8, 0.05, 0.8), 5.7e-4 with the step halved, 1.50 units both; over
#: bench/allocation_random.py's 80 points (0.4, 0.025, 0.65) left none over 1e-3 for 3 % more time.
STEP_PER_EPS = 0.4
STEP_CAP = 0.025
STEP_VAR = 0.65
#: On lattices (0 .. cap) of at least this many points a level whose interval is not narrow is
#: evaluated once more with the loss step a level finer (``balls_in_bins._levels``): their
#: transforms cost far more than the loss grid's -- sigma 0.4, t 1000, 200 epochs, δ 1e-12 (2.9e5
#: points) read [85.1262, 85.2226] at level 0, [85.1392, 85.2098] with the step halved for 2 % more
#: work, and the next lattice level would have cost three times as much.  (Every such lattice's
#: level 0 with the finer step took 10-20 % more time where it was narrow already.)
FINE_STEP_LATTICE = 1 << 17


# --- the lattice tops level 0 tries ------------------------------------------------------------
#: The second lattice top (x t) of ``balls_in_bins._levels`` where the first is cut at 1000 t: TOP_PER_EXP times
#: e^{eps / sqrt E} - 1 + 1/t for the answer eps of E epochs as the first top's evaluation left it
#: -- for one epoch the W of one coordinate that alone makes the loss eps (the others at their mean);
#: over E epochs one epoch's share of a heavy-tailed eps is taken as eps / sqrt E --, at most LOW_TOP
#: and at least TOP_MIN.  Above the top, one coordinate's tail is in closed form (``epoch_tail``;
#: the others' sum from the lattice, ``epoch_sums``); below it the lattice's FFT floors can hide the
#: masses that set a tiny δ (σ 1.2, t 100, 1 epoch, δ 1e-12: [1.466, 1.710] topped at 26 t,
#: [1.5715, 1.5717] at 3.8 t; σ 1.2, t 3: [4.288, 5.676] at 1000 t; σ 1, t 100, 8 epochs: [3.5249,
#: 3.5345] at 32 t (eps undivided), [3.5304, 3.5311] at 2.5 t).  Much lower, two coordinates above
#: the top (``epoch_tail._two_above``, loose) start to count.  Some points are narrower on the first
#: top (σ 0.422, t 2, 55 epochs), so level 0 evaluates both and keeps the narrower ends, and later
#: levels refine the lattice of the narrower interval.  (bench/allocation_corners.py; 0.6 and 0.8
#: times that W, eps / E, and the guess before the first evaluation were each wider at some of 20
#: points: σ 1.5, t 300, δ 1e-12 read 1.5e-3 at 0.6, 4.7e-4 at 1; σ 1, t 30, 5 epochs 1.05e-3 with
#: eps undivided, 2.4e-4 over sqrt E.)
LOW_TOP, TOP_PER_EXP, TOP_MIN = 100.0, 1.0, 0.01
#: ... where at most this many epochs compose; over more, level 0 tries MANY_TOP and then the second top
#: (with 1000 t first, the second evaluation's work took the next level's place: sigma 0.447, t 16,
#: 68 epochs 9.7e-4 -> 2.5e-3).  With MANY_TOP alone, sigma 1, δ 1e-10 over 12-30 epochs read 1.3e-3
#: to 1.8e-2 wide at t 100-3000 (t 554, 12 epochs: 1.83e-2; with the second top 2.5e-4): W_max 16 t
#: left the one-jump region S ~ 3-8 t to the lattice's tilted powers, whose round-off floors reach
#: 1-7 % there; over 100 points (sigma 0.45-1.3, t 16-3000, 12-100 epochs) no other interval moved.
LOW_TOP_EPOCHS = 8


#: The lattice top (x t) over more than LOW_TOP_EPOCHS epochs (else 1000), before ``second_top``: where
#: W's tail budget sets a higher W_max (sigma < ~0.6) it costs less and loses nothing -- sigma 0.4,
#: t 100, 200 epochs, δ 0.01: [126.448, 126.652] in 0.29 work units, [126.449, 126.662] in 1.32 at 1000 t
MANY_TOP = 100.0


def first_tops(epochs: int) -> list:
    """The lattice tops (x t) level 0 tries, None for ``second_top`` (``balls_in_bins.on_tops``)."""
    return [1000.0 if epochs <= LOW_TOP_EPOCHS else MANY_TOP, None]


#: A second top whose W_max is above this share of the first's builds about the same lattice again
#: (``balls_in_bins.on_tops``)
#: (sigma 0.569, t 409, 6 epochs, δ 5e-12: 1.63e4 against 1.70e4, 2 s of a 4.3 s query, no narrower).
SAME_TOP = 0.8


def second_top(eps: float, t: int, epochs: int) -> float:
    """The second lattice top (x t) for the answer ``eps`` of ``epochs`` epochs (LOW_TOP,
    TOP_PER_EXP, TOP_MIN)."""
    return min(LOW_TOP, max(TOP_MIN, TOP_PER_EXP * (math.expm1(min(eps / math.sqrt(epochs), 700.0)) + 1.0 / t)))
