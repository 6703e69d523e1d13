"""The groups' sandwich of a schedule (``schedules.Sandwich``): its steps cut into at most G
groups, each group's steps replaced by (its least sigma, its largest q) above and by (its largest
sigma, its least q) below.  Sound for any grouping (``schedules``' notes: more noise is
post-processing, a smaller rate a mixture with the neighbour's own distribution); the grouping
decides only how wide the sandwich is.

Three groupings are tried and the one that costs least is kept (``_cost``: each group's count
times the gap between its two keys' weights, the weight of a step q^2 (e^{1 / sigma^2} - 1) its
share of the composed loss's variance in the Gaussian limit, ``_kernels.pld.groups``):

* runs of about equal step counts in the order of sigma / q (sigma and q moving together);
* the cells of a grid of sigma and q quantiles (sigma and q independent: 10^4 steps each uniform,
  58 % wide as runs, 23 % as cells);
* runs of about equal cost in the order of sigma / q (steps whose weights differ by orders of
  magnitude: a noise decay 1.318 -> 0.3 over 3,419 steps at q 2.5e-4 weighs its last steps 10^5
  times its first; equal counts left its last group a tenth of sigma's range wide).
"""

from __future__ import annotations

import math

import numpy as np

from .._kernels.pld import groups as kg


def _extremes(arr, grp, m):
    """Each group's (least sigma, largest sigma, least q, largest q) of the rows (sigma, q, ...)."""
    s_lo, s_hi = np.full(m, math.inf), np.full(m, -math.inf)
    q_lo, q_hi = np.full(m, math.inf), np.full(m, -math.inf)
    np.minimum.at(s_lo, grp, arr[:, 0])
    np.maximum.at(s_hi, grp, arr[:, 0])
    np.minimum.at(q_lo, grp, arr[:, 1])
    np.maximum.at(q_hi, grp, arr[:, 1])
    return s_lo, s_hi, q_lo, q_hi


def _grouped(arr, grp):
    """(upper schedule, lower schedule) of the noisy rows (sigma, q, count) in groups ``grp``:
    each group's steps at its least sigma and largest q, and at its largest sigma and least q
    (``schedules.cell_parts``), counts summed, equal steps merged."""
    m = int(grp.max()) + 1
    s_lo, s_hi, q_lo, q_hi = _extremes(arr, grp, m)
    n = np.zeros(m, dtype=np.int64)
    np.add.at(n, grp, arr[:, 2].astype(np.int64))
    up: dict = {}
    lo: dict = {}
    for g in np.flatnonzero(n):
        up[(float(s_lo[g]), float(q_hi[g]))] = up.get((float(s_lo[g]), float(q_hi[g])), 0) + int(n[g])
        lo[(float(s_hi[g]), float(q_lo[g]))] = lo.get((float(s_hi[g]), float(q_lo[g])), 0) + int(n[g])
    return [(s, q, c) for (s, q), c in up.items()], [(s, q, c) for (s, q), c in lo.items()]


def brackets(schedule, groups: int, tail_eps: float | None = None):
    """(upper schedule, lower schedule) of at most ``groups`` distinct noisy steps each (module
    notes); other steps are kept in both.  ``tail_eps``: grouped by ``_by_tail`` at that eps."""
    noisy = [(s, q, c) for s, q, c in schedule if c > 0 and q > 0.0 and 0.0 < s < math.inf]
    other = [(s, q, c) for s, q, c in schedule if not (c > 0 and q > 0.0 and 0.0 < s < math.inf)]
    if not noisy:
        return other, other
    arr = np.array(noisy, dtype=np.float64).reshape(-1, 3)
    if tail_eps is not None and math.isfinite(tail_eps) and tail_eps >= 0.0:
        grp = _by_tail(arr, groups, tail_eps)
    else:
        grp = min((_by_ratio(arr, groups), _by_cells(arr, groups), _by_cost(arr, groups)), key=lambda g: _cost(arr, g))
    up, lo = _grouped(arr, grp)
    return up + other, lo + other


def _ratio_order(arr) -> np.ndarray:
    return np.lexsort((arr[:, 0], arr[:, 0] / arr[:, 1]))


def _runs(arr, order, k: int) -> np.ndarray:
    """The run of each row: ``k`` runs of about equal step counts (column 2) in ``order``."""
    acc = np.cumsum(arr[order, 2])
    out = np.empty(arr.shape[0], dtype=np.int64)
    out[order] = np.minimum((acc - 1) * k // acc[-1], k - 1).astype(np.int64)
    return out


def _by_ratio(arr, groups: int) -> np.ndarray:
    """The group of each step: runs of about equal step counts in the order of sigma / q."""
    return _runs(arr, _ratio_order(arr), groups)


def _by_cells(arr, groups: int) -> np.ndarray:
    """The group of each step: its cell of a grid of about sqrt(groups) sigma quantiles by as
    many q quantiles (count-weighted)."""
    nx = max(1, int(math.isqrt(groups)))
    ny = max(1, groups // nx)
    return (_runs(arr, np.argsort(arr[:, 0], kind="stable"), nx) * ny
            + _runs(arr, np.argsort(arr[:, 1], kind="stable"), ny))


def _by_cost(arr, groups: int) -> np.ndarray:
    """The group of each step: runs of about equal cost (``_kernels.pld.groups``) in the order of
    sigma / q."""
    order = _ratio_order(arr)
    a = np.ascontiguousarray(arr[order])
    runs = np.empty(a.shape[0], dtype=np.int64)
    kg.least_cost_runs(a[:, 0].copy(), a[:, 1].copy(), a[:, 2].copy(), int(groups), runs)
    out = np.empty(arr.shape[0], dtype=np.int64)
    out[order] = runs
    return out


def _by_tail(arr, groups: int, eps: float) -> np.ndarray:
    """The group of each step at small δ: runs of about equal cost in the order of sigma / q, a
    step weighing its Gaussian weight (``_kernels.pld.groups.weight``) plus its one-step remove δ
    at eps (``tail_weights``), each scaled to a largest of 1.  At small δ and few sampled steps a
    single step's far tail sets eps, and it falls by orders of magnitude from the least sigma to
    the largest: the Gaussian weight alone puts the groups where the tails do not matter, the tail
    alone lumps the larger sigmas that the bulk feels (a heuristic; seven wide random noise-level
    schedules of ``bench/small_delta_levels.py 60 1``, δ 1e-15..1e-9, q 1e-5..2e-4: 8 groups'
    brackets 9-21 % apart -> 7-14 %, one 9.0 -> 9.6 %; the tail weight alone 5-33 %)."""
    order = _ratio_order(arr)
    a = np.ascontiguousarray(arr[order])
    w = np.empty(a.shape[0])
    kg.tail_weights(a[:, 0].copy(), a[:, 1].copy(), float(eps), w)  # (scalar math: the same on any machine)
    runs = np.empty(a.shape[0], dtype=np.int64)
    kg.weight_runs(w, a[:, 2].copy(), int(groups), runs)
    out = np.empty(arr.shape[0], dtype=np.int64)
    out[order] = runs
    return out


def _cost(arr, grp) -> float:
    """Sum over the groups of their step count times the gap between the weights of their upper
    and lower keys (``_kernels.pld.groups.total_cost``; a heuristic: how far the two brackets lie
    apart)."""
    m = int(grp.max()) + 1
    n = np.zeros(m)
    np.add.at(n, grp, arr[:, 2])
    return float(kg.total_cost(*_extremes(arr, grp, m), n))
