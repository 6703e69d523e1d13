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


def _least_minimax_w(w, c, groups):
    """The least, over cuts into at most ``groups`` runs, of the largest count x weight spread."""
    n = len(w)
    best = math.inf
    for k in range(0, min(groups, n)):
        for cut in itertools.combinations(range(1, n), k):
            edges = (0, *cut, n)
            best = min(best, max(sum(c[a:b]) * (max(w[a:b]) - min(w[a:b])) for a, b in zip(edges, edges[1:])))
    return best


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.floats(0.0, 1.0), st.integers(1, 50)), min_size=1, max_size=9), st.integers(1, 4))
def test_weight_runs_reach_the_least_largest_cost(rs, groups):
    w, c = (np.array(col, dtype=np.float64) for col in zip(*rs))
    out = np.empty(len(rs), dtype=np.int64)
    k = kg.weight_runs(w, c, groups, out)
    assert k in range(1, groups + 1) and out[0] == 0 and out[-1] == k - 1
    assert np.all(np.diff(out) >= 0) and np.all(np.diff(out) <= 1)
    worst = max(c[out == r].sum() * (w[out == r].max() - w[out == r].min()) for r in range(k))
    assert worst <= _least_minimax_w(list(w), list(c), groups) * (1 + 1e-9) + 1e-300


@pytest.mark.parametrize("eps", [0.0, 0.05, 0.3, 1.0, 4.0, 30.0])
def test_tail_weights_against_mpmath(eps):
    """``tail_weights`` against its definition from independent references: each step's one-step
    remove δ at eps in mpmath (tests/reference/mp_exact.py) and its Gaussian weight q^2 (e^{1 /
    sigma^2} - 1), each scaled to a largest of 1, summed."""
    import pathlib
    import sys

    import mpmath

    sys.path.insert(0, str(pathlib.Path(__file__).parent / "reference"))
    import mp_exact

    s = np.array([0.6, 0.8, 1.3, 2.5, 0.9, 1.1])
    q = np.array([1e-5, 1e-4, 3e-3, 0.05, 2e-4, 2e-4])
    out = np.empty(s.size)
    kg.tail_weights(s, q, eps, out)
    d = [mp_exact.one_step_delta(qq, ss, eps, "remove") for ss, qq in zip(s, q)]
    g = [qq * qq * mpmath.expm1(1 / mpmath.mpf(ss) ** 2) for ss, qq in zip(s, q)]
    ref = [float(a / max(d) + b / max(g)) for a, b in zip(d, g)]
    assert np.allclose(out, ref, rtol=1e-6, atol=1e-300)


def test_tail_groups_split_the_small_noise_finer():
    """At small δ the tail grouping gives the steps of least sigma, whose tails set eps, groups of
    their own: its groups' sigma spans grow with sigma, unlike equal-cost runs of the Gaussian
    weight; both are valid groupings (each group bracketed by its own extremes)."""
    rng = np.random.default_rng(5)
    sched = [(float(s), 9.2e-5, 10) for s in 0.855 * (1.214 / 0.855) ** rng.random(1030)]
    up_t, lo_t = brackets(sched, 8, tail_eps=0.36)
    up_g, lo_g = brackets(sched, 8)
    assert len(up_t) <= 8 and len(lo_t) <= 8
    spans = np.diff(sorted(s for s, _, _ in up_t) + [max(s for s, _, _ in sched)])
    assert spans[0] < spans[-1]
    assert sorted(s for s, _, _ in up_t)[1] < sorted(s for s, _, _ in up_g)[1]
    assert sum(c for _, _, c in up_t) == sum(c for _, _, c in lo_t) == 10300
    for eps in (0.0, 800.0, 1e300):  # (tails of 1 and tails that underflow: still a grouping)
        up_e, lo_e = brackets(sched, 8, tail_eps=eps)
        assert len(up_e) <= 8 and sum(c for _, _, c in up_e) == 10300
