"""The groups' sandwich (``pld.schedule_groups``): runs of equal cost against a brute-force
partition, the grouping chosen by cost, and the noise decay whose groups of equal counts left it
23 % wide."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sgmfast import pld, rdp
from sgmfast._kernels.pld import groups as kg
from sgmfast.pld.schedule_groups import _by_cost, _by_ratio, _cost, brackets


def _run_cost(s, q, c):
    """A run's cost from its definition: count * (w(least sigma, largest q) - w(largest sigma, least q))."""
    def w(a, b):
        return b * b * math.expm1(min(1.0 / (a * a), kg.WEIGHT_CAP))
    return sum(c) * (w(min(s), max(q)) - w(max(s), min(q)))


def _least_minimax(s, q, c, groups):
    """The least, over cuts of the rows into at most ``groups`` runs, of the largest run cost
    (every cut tried)."""
    n = len(s)
    best = math.inf
    for k in range(0, min(groups, n) - 1 + 1):
        for cut in itertools.combinations(range(1, n), k):
            edges = (0, *cut, n)
            worst = max(_run_cost(s[a:b], q[a:b], c[a:b]) for a, b in zip(edges, edges[1:]))
            best = min(best, worst)
    return best


rows = st.lists(st.tuples(st.floats(0.3, 3.0), st.floats(1e-4, 0.5), st.integers(1, 50)), min_size=1, max_size=9)


@settings(max_examples=150, deadline=None)
@given(rows, st.integers(1, 4))
def test_least_cost_runs_reach_the_least_largest_cost(rs, groups):
    s, q, c = (np.array(col, dtype=np.float64) for col in zip(*rs))
    out = np.empty(len(rs), dtype=np.int64)
    k = kg.least_cost_runs(s, q, c, groups, out)
    assert k in range(1, groups + 1)  # (at most ``groups`` runs)
    assert out[0] == 0 and out[-1] == k - 1
    assert np.all(np.diff(out) >= 0) and np.all(np.diff(out) <= 1)  # (contiguous runs in order)
    worst = max(_run_cost(s[out == r], q[out == r], c[out == r]) for r in range(k))
    assert worst <= _least_minimax(list(s), list(q), list(c), groups) * (1 + 1e-9) + 1e-300


def test_a_grouping_costs_its_groups_summed():
    """``_cost`` (``groups.total_cost``) is the sum of each group's cost from its definition, and
    capped weights stay finite at any count (sigma 0.05: e^{400})."""
    rng = np.random.default_rng(3)
    arr = np.column_stack((rng.uniform(0.05, 3.0, 40), rng.uniform(1e-4, 0.5, 40), rng.integers(1, 9, 40)))
    grp = rng.integers(0, 6, 40)
    want = sum(_run_cost(arr[grp == g, 0], arr[grp == g, 1], arr[grp == g, 2]) for g in np.unique(grp))
    assert _cost(arr, grp) == pytest.approx(want, rel=1e-12)
    assert math.isfinite(1e12 * kg.weight(0.01, 0.5))


def _decay(n=3419):
    """Domain sweep seed 65's schedule: sigma falling linearly 1.318 -> 0.3 at q 2.5e-4."""
    return [(1.3181070902385346 + (0.3 - 1.3181070902385346) * i / (n - 1), 0.00025200018585223833, 1)
            for i in range(n)]


def test_a_noise_decay_is_grouped_by_cost():
    """Its last steps weigh 10^5 times its first: equal counts cost far more than equal costs, and
    ``brackets`` keeps the runs of equal cost (the upper key of the last group within 2 % of 0.3)."""
    arr = np.array(_decay(), dtype=np.float64)
    assert _cost(arr, _by_cost(arr, 32)) < 0.2 * _cost(arr, _by_ratio(arr, 32))
    up, lo = brackets(_decay(), 32)
    assert len(up) <= 32 and sum(c for *_, c in up) == sum(c for *_, c in lo) == 3419
    last = sorted(s for s, _, _ in lo)[0]  # (the lower key of the least-noise group)
    assert 0.3 <= last <= 0.306


def test_the_noise_decay_is_bracketed_within_two_per_cent():
    """3,419 steps, δ 4.5e-7 (domain sweep seed 65): [8.2456, 10.6942] with groups of equal counts
    (the noise-level mixtures' table too large for their first round), now within 2 %: above the
    last step's own ε, below RDP's bound."""
    steps = _decay()
    delta = 4.4717777718924425e-07
    acc, ra = pld.PLDAccountant(accuracy=0.0018545890858846802), rdp.RDPAccountant()
    for s, q, t in steps:
        acc.step(s, q, t)
        ra.step(s, q, t)
    b = acc.epsilon(delta)
    assert pld.epsilon(steps[-1][0], steps[-1][1], 1, delta).upper <= b.lower <= b.upper <= ra.epsilon(delta)
    assert b.upper - b.lower <= 0.02 * b.upper
