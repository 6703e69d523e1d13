"""Balls-in-bins privacy curves: ε(δ) or δ(ε) at every checkpoint of one run, on one lattice.

A checkpoint after T steps of t-step epochs is bounded here by whole epochs on either side
(dropping outputs is post-processing: ceil(T/t) above, floor(T/t) below; ``samplers.curve`` then
composes checkpoints inside an epoch as they ran, a query each, while its allowance lasts), so a
curve needs the bounds of a few epoch counts E, and every count composes the same epoch.  Each refinement level builds that
epoch once -- its lattice, the expensive part -- on the truncation budget of the largest count
(a smaller budget only charges less: every count's bound stays certified), and composes it E
times for each count still wider than the accuracy.  A checkpoint-by-checkpoint loop built a
lattice per checkpoint (the budget depends on E), 8-10 times the work of its last point.

Each count's bounds are those of ``balls_in_bins.epsilon`` / ``delta`` at E whole epochs (the
same epoch, loss grid and compositions), so they are certified for the same reasons; the tilt
of a count starts at the answer of the count above it (scaled by sqrt of the ratio), and is
re-centred like a single query's.  Both ε(δ) and δ(ε) grow with the steps (a prefix of the run
is a post-processing of it), so the curve is made monotone: an upper bound holds at every
earlier checkpoint and a lower bound at every later one.
"""

from __future__ import annotations

import math

import numpy as np

from ..._types import Bounds
from ..common import refine_levels, resolved, within
from ..grid.composition import eps_groups, recentred
from . import balls_in_bins as bb, epoch_add, epoch_gauss as eg, epoch_runs as runs
from .epoch_grid import first_tops, second_top

#: work (seconds of ``_work`` units) a curve may spend refining: a few single queries' worth
CURVE_BUDGET = 1.5 * bb.BUDGET


def _counts(t: int, checkpoints: np.ndarray):
    """(counts, hi, lo): the distinct whole-epoch counts > 0 the checkpoints need, and for each
    checkpoint the index in ``counts`` of ceil(T/t) and of floor(T/t) (-1 for no whole epoch)."""
    e_hi, e_lo = -(-checkpoints // t), checkpoints // t
    counts = np.unique(np.concatenate((e_hi[e_hi > 0], e_lo[e_lo > 0])))
    hi = np.where(e_hi > 0, np.searchsorted(counts, e_hi), -1)
    lo = np.where(e_lo > 0, np.searchsorted(counts, e_lo), -1)
    return counts, hi, lo


def _monotone(lo: np.ndarray, up: np.ndarray) -> Bounds:
    up = np.minimum.accumulate(up[::-1])[::-1]
    lo = np.minimum(np.maximum.accumulate(lo), up)
    return Bounds(lo, up)


def _at_checkpoints(c_lo, c_up, hi, lo):
    """Each checkpoint's bounds from its counts' (no whole epoch below: 0; no step: 0 above too)."""
    return _monotone(np.where(lo >= 0, c_lo[np.maximum(lo, 0)], 0.0), np.where(hi >= 0, c_up[np.maximum(hi, 0)], 0.0))


def _settled(lo, up, hi_i, lo_i):
    """Counts whose own interval is at most a tenth of every checkpoint interval they bound (a
    checkpoint between whole epochs spans the step from one count to the next; refining its
    counts further changes it by less than that)."""
    cp = np.where(hi_i >= 0, up[np.maximum(hi_i, 0)], 0.0) - np.where(lo_i >= 0, lo[np.maximum(lo_i, 0)], 0.0)
    least = np.full(lo.size, np.inf)
    for idx in (hi_i, lo_i):
        ok = idx >= 0
        np.minimum.at(least, idx[ok], cp[ok])
    return up - lo <= 0.1 * least


def _with_capped(c_up: np.ndarray, capped: dict) -> np.ndarray:
    """Each count's upper end intersected with its capped ones (``epoch_runs.eps_bounds``)."""
    out = np.array(c_up, dtype=np.float64)
    for i, ups in capped.items():
        for u in ups:
            out[i] = min(out[i], float(np.ravel(u)[0]))
    return out


def _levels(sigma, t, accuracy, tail, per_count, hi_i, lo_i, eps, epochs):
    """refine_levels' attempts over the counts: level r's epoch (one lattice), then
    ``per_count(epoch, step, i)`` for each count still wide (the others keep their bounds).  As a
    single query's (``balls_in_bins._levels``), level 0 also evaluates a second lattice top, from
    the answer ``eps()`` after the first (``first_tops``); each
    count keeps the narrower ends, and the levels after refine the top of the narrower total."""
    state = {"tops": first_tops(epochs)}

    def on_lattice(grid, step, todo, lo, up):
        epoch = bb.epoch(sigma, t, *grid, tail())
        lo, up = lo.copy(), up.copy()
        for i in np.flatnonzero(todo)[::-1]:  # (largest count first)
            lo[i], up[i] = per_count(epoch, step, int(i))
        return lo, up

    def attempt(level):
        lo, up = state["lo"].copy(), state["up"].copy()  # (the counts done keep theirs)
        width = state.setdefault("width", np.full(lo.size, np.inf))
        todo = ~(state["narrow"](lo, up, each=True) | state.setdefault("stalled", np.zeros(lo.size, bool))
                 | _settled(lo, up, hi_i, lo_i))
        if not todo.any():  # (nothing to refine: no lattice built, and no progress ends the levels)
            return lo, up
        step = bb._loss_step(sigma, t, accuracy, level)
        lo, up = bb.on_tops(state["tops"],
                            lambda top: bb._lattice(sigma, t, accuracy, tail(), level, CURVE_BUDGET, top=top),
                            lambda grid: on_lattice(grid, step, todo, lo, up),
                            lambda l, u: float(np.sum((u - l)[todo])), lambda: second_top(eps(), t, epochs))
        for i in np.flatnonzero(todo):
            # a count that a level narrowed by less than a quarter is done, as a single query
            # is (``refine_levels``: finer grids no longer pay there)
            if level and up[i] - lo[i] > 0.75 * width[i]:
                state["stalled"][i] = True
            width[i] = up[i] - lo[i]
        # the level's own interval goes back (``refine_levels`` judges progress on it), the
        # intersection is kept for choosing the counts still wide
        state["lo"], state["up"] = np.maximum(lo, state["lo"]), np.minimum(up, state["up"])
        return lo, up

    return attempt, state


def epsilon_curve(sigma: float, t: int, checkpoints, delta: float, accuracy: float) -> Bounds:
    """Certified (lower, upper) ε(δ) at each checkpoint (steps) of a balls-in-bins run with t
    steps per epoch (k = 1, 0 < sigma < inf, t >= 2)."""
    cps = np.asarray(checkpoints, dtype=np.int64)
    counts, hi, lo_i = _counts(t, cps)
    big = int(counts[-1])
    tail = bb._tail_decade(accuracy * delta / big)
    gauss = np.array([eg._gauss_eps(sigma, int(c), delta) for c in counts])
    lo0 = np.array([eg._sum_statistic_eps(sigma, t, int(c), delta) for c in counts])
    centres = {len(counts) - 1: [eg.poisson_guess(sigma, t, big * t, delta)]}
    add_caps = [epoch_add.eps_upper(sigma, t, int(c), delta) for c in counts]  # (one table of moments)
    capped: dict = {}  # (per count, the upper ends with the add direction capped: ``epoch_runs.eps_bounds``)

    def narrow(lo, up, each=False):
        ok = within(lo, up, accuracy)
        return ok if each else bool(np.all(ok))

    def per_count(epoch, step, i):
        c = int(counts[i])
        if i not in centres:  # (from the count above: eps grows about like sqrt(E))
            above = centres.get(i + 1, centres[len(counts) - 1])[0]
            centres[i] = [max(above * math.sqrt(c / counts[i + 1]), 1e-3)]

        return recentred(lambda eps_c: runs.eps_bounds(epoch, step, c, c, eps_c, tail, delta, add_caps[i],
                                                     capped.setdefault(i, [])),
                         centres[i], lambda a, b: b - a <= accuracy * b)

    attempt, state = _levels(sigma, t, accuracy, lambda: tail, per_count, hi, lo_i,
                             lambda: centres[len(counts) - 1][0], big)
    state.update(lo=lo0.copy(), up=gauss.copy(), narrow=narrow)
    c_lo, c_up = refine_levels(attempt, narrow, lo0, gauss, CURVE_BUDGET, growth=bb.LEVEL_GROWTH)
    c_up = _with_capped(c_up, capped)
    return _at_checkpoints(np.minimum(c_lo, c_up), c_up, hi, lo_i)


def delta_curve(sigma: float, t: int, checkpoints, epsilon: float, accuracy: float) -> Bounds:
    """Certified (lower, upper) δ(ε) at each checkpoint (as :func:`epsilon_curve`)."""
    cps = np.asarray(checkpoints, dtype=np.int64)
    counts, hi, lo_i = _counts(t, cps)
    big = int(counts[-1])
    # (ε and ε (1 + accuracy): resolved as a single query, ``common.resolved``)
    eps = np.array([float(epsilon), float(epsilon) * (1.0 + accuracy)])
    groups = eps_groups(eps)
    # (then from the least upper δ found, as a single query does)
    tail = [bb._tail_decade(accuracy * eg.poisson_delta_guess(sigma, t, int(counts[0]) * t, eps[:1]) / big)]
    gauss = np.array([eg._gauss_delta(sigma, int(c), eps)[1] for c in counts])
    shifted = gauss[:, 1].copy()  # (each count's upper δ at the shifted ε)
    gauss = gauss[:, 0].copy()
    add_caps = [epoch_add.delta_upper(sigma, t, int(c), eps) for c in counts]
    capped: dict = {}  # (per count, the upper ends with the add direction capped)
    lo0 = np.array([float(eg._gauss_delta(sigma * math.sqrt(t), int(c), eps[:1])[0][0]) for c in counts])

    def narrow(lo, up, each=False):
        ok = resolved(lo, up, shifted, accuracy)
        return ok if each else bool(np.all(ok))

    def per_count(epoch, step, i):
        c = int(counts[i])
        up, lo = runs.delta_bounds(epoch, step, c, c, eps, groups, tail[0], add_caps[i], capped.setdefault(i, []))
        shifted[i] = min(shifted[i], float(up[1]))  # (any certified upper end bounds it)
        return float(lo[0]), float(up[0])

    def tail_now():
        pos = state["up"][state["up"] > 0]
        if pos.size:
            tail[0] = max(1e-300, min(tail[0], 1e-4 * accuracy * float(pos.min()) / big))
        return tail[0]

    attempt, state = _levels(sigma, t, accuracy, tail_now, per_count, hi, lo_i, lambda: float(epsilon), big)
    state.update(lo=lo0.copy(), up=gauss.copy(), narrow=narrow)
    c_lo, c_up = refine_levels(attempt, narrow, lo0, gauss, CURVE_BUDGET, growth=bb.LEVEL_GROWTH)
    c_up = _with_capped(c_up, capped)
    return _at_checkpoints(np.minimum(c_lo, c_up), c_up, hi, lo_i)
