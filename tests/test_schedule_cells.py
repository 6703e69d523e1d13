"""Schedules whose steps nearly repeat, and curves past the total variation.

References: the total variation in mpmath (50 digits); schedules of one repeated step, whose
exact value brackets a schedule of steps between them (more noise, or a smaller sampling
rate, is post-processing: ``schedules`` module notes).  Work is counted in units
(``sgmfast._work``), never timed.
"""

from __future__ import annotations

import math
import random

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sgmfast import pld
from sgmfast._work import UNITS_PER_SECOND, metered
from sgmfast.pld.certifiers import exact
from sgmfast.pld.schedules import Sandwich, cell_parts, cells, make_engine

mpmath.mp.dps = 50


def _tv_reference(parts, counts, relation):
    c = mpmath.mpf(2 if relation == "replace_one" else 1)
    keep = mpmath.mpf(1)
    for (s, q), k in zip(parts, counts):
        g = mpmath.mpf(1) if s == 0.0 else mpmath.erf(c / (2 * mpmath.sqrt(2) * mpmath.mpf(s)))
        keep *= (1 - mpmath.mpf(q) * g) ** int(k)
    return 1 - keep


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0.05, 50.0), st.floats(1e-6, 0.999), st.integers(0, 10 ** 6)),
                min_size=1, max_size=40),
       st.sampled_from(["add_remove", "replace_one"]))
def test_tv_uppers_bound_the_total_variation(steps, relation):
    parts = [(s, q) for s, q, _ in steps]
    counts = np.array([[k for _, _, k in steps]])
    got = exact.tv_uppers(parts, counts, relation)[0]
    ref = _tv_reference(parts, counts[0], relation)
    assert got >= ref
    assert got <= ref * (1 + 1e-12) + 1e-290


def test_tv_uppers_edges():
    # a noiseless step reveals its batch: tv q; a noiseless full batch: 1; no noise at all: 0
    assert exact.tv_uppers([(0.0, 0.25)], [[1]], "add_remove")[0] >= 0.25
    assert exact.tv_uppers([(0.0, 1.0), (1.0, 0.1)], [[0, 3], [1, 3]], "add_remove").tolist()[1] == 1.0
    assert exact.tv_uppers([(math.inf, 0.5)], [[10]], "add_remove")[0] <= 1e-290
    assert exact.tv_upper([], "add_remove") == 0.0


def _random_run(seed, n, lo, hi, rates):
    rr = random.Random(seed)
    return [(lo * (hi / lo) ** rr.random(), rr.choice(rates)) for _ in range(n)]


def test_epsilon_curve_is_zero_where_the_total_variation_is_below_target():
    # 119 distinct steps; at δ = 0.999 every prefix's total variation is below it: eps = 0
    # exactly, with no grid (this curve took 42 s and 2.2 GB composing grids for it)
    steps = _random_run(573871, 119, 1.109, 1.334, (0.012542, 0.01905, 0.067557))
    acc = pld.PLDAccountant()
    for s, q in steps:
        acc.step(s, q, 1)
    with metered() as m:
        b = acc.epsilon_curve(0.999)
    assert np.all(b.lower == 0.0) and np.all(b.upper == 0.0)
    assert m.units < 0.05 * UNITS_PER_SECOND


def test_epsilon_curve_zero_prefix_agrees_with_single_queries():
    # the bound on the total variation passes the target part way: eps = 0 at the checkpoints
    # before (with no grid), and every checkpoint agrees with its prefix's own query
    acc = pld.PLDAccountant()
    for k in range(12):
        acc.step(0.5 + 0.05 * k, 0.02, 1)
    parts = [(st_.sigma, st_.q) for st_ in acc.history]
    tv = exact.tv_uppers(parts, np.tril(np.ones((12, 12), dtype=np.int64)), "add_remove")
    target = float(tv[1] * (1 + 1e-9))
    b = acc.epsilon_curve(target)
    assert np.all(b.upper[:2] == 0.0) and b.lower[11] > 0.0
    for k in (1, 2, 11):
        one = pld.PLDAccountant()
        for s, q in parts[: k + 1]:
            one.step(s, q, 1)
        e = one.epsilon(target)
        assert e.lower <= b.upper[k] and b.lower[k] <= e.upper


def _drifting(n, s0, s1, q, relation="add_remove"):
    acc = pld.PLDAccountant(relation=relation)
    for i in range(n):
        acc.step(s0 + (s1 - s0) * i / (n - 1), q, 1)
    return acc


def test_near_equal_steps_are_sandwiched_by_cells():
    # 50 steps drifting by 1e-4 relative: the exact engine spent its budget on 50 grids and
    # answered [3e-12, 1.7e-5]; merged into cells, a few grids answer it tightly
    s_hi, s_lo, q, n, eps = 0.6560243390797117, 0.6559587432053912, 0.0002489996067122948, 50, 1.267171718615177
    acc = _drifting(n, s_hi, s_lo, q)
    assert isinstance(acc._get_engine(), Sandwich) and acc._get_engine().pair is not None
    with metered() as m:
        b = acc.delta(eps)
    noisiest = pld.delta(s_hi, q, n, eps)  # every step at the most noise: at most as revealing
    least = pld.delta(s_lo, q, n, eps)  # every step at the least: at least as revealing
    assert b.lower <= least.upper and noisiest.lower <= b.upper
    assert b.upper <= 1.01 * b.lower
    assert m.units < 1.5 * UNITS_PER_SECOND


def test_cells_keep_distinct_steps_and_take_extremes():
    r = math.log1p(1e-3 / 16)  # (a cell's middle: the lattice's own spacing)
    s, q = math.exp(40000.5 * r), math.exp(-70000.5 * r)
    parts = [(s, q), (s * (1 + 1e-6), q), (s * (1 - 1e-6), q * (1 + 1e-6)), (2 * s, q), (0.0, 0.5), (math.inf, 0.5)]
    cell = cells(parts, 1e-3)
    assert cell[0] == cell[1] == cell[2] and len(set(cell.tolist())) == 4
    up, lo = cell_parts(parts, cell)
    assert up[cell[0]] == parts[2] and lo[cell[0]] == parts[1]
    assert up[cell[4]] == lo[cell[4]] == (0.0, 0.5)
    # few distinct steps, or steps that do not merge, keep the exact engine
    assert not isinstance(make_engine([(1.0 + 0.1 * k, 0.01, 1) for k in range(20)], 1e-3), Sandwich)


@pytest.mark.parametrize("kind", ["epsilon", "delta"])
def test_curve_of_near_equal_steps_within_a_few_queries(kind):
    # replace-one, 74 steps drifting by 1e-4: every checkpoint within the accuracy, each agreeing
    # with its prefix's own query (this curve took 8-12 s, its last point [0, 0.211])
    s0, s1, q = 1.5719613640410188, 1.5718041836226566, 0.009677860679989877
    acc = _drifting(74, s0, s1, q, "replace_one")
    x = 0.01 if kind == "epsilon" else 0.3
    with metered() as m:
        b = getattr(acc, kind + "_curve")(x)
    assert m.units < 3.0 * UNITS_PER_SECOND
    if kind == "epsilon":
        assert b.met
    for k in (0, 36, 73):
        one = pld.PLDAccountant(relation="replace_one")
        for st_ in acc.history[: k + 1]:
            one.step(st_.sigma, st_.q, st_.count)
        e = getattr(one, kind)(x)
        assert e.lower <= b.upper[k] and b.lower[k] <= e.upper


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(0.3, 20.0), st.sampled_from([1e-4, 0.003, 0.02, 0.5, 0.99]), st.integers(1, 9)),
                min_size=1, max_size=60))
def test_families_split_the_schedule_by_rate(steps):
    # one family per distinct rate, sigmas increasing, each step once (the split is one sort: a
    # 10^5-step schedule of distinct rates took minutes when each rate scanned every step)
    from sgmfast.pld.schedule_engine import families_of

    fams = families_of(steps)
    assert [f[0] for f in fams] == sorted({q for _, q, _ in steps})
    for q, sig, cnt in fams:
        mine = sorted((s, c) for s, qq, c in steps if qq == q)
        assert np.all(np.diff(sig) >= 0) and sorted(zip(sig.tolist(), cnt.tolist())) == mine


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cells_agree_with_the_exact_engine(seed):
    # steps jittered by 1e-5 relative merge into cells; the exact engine (a budget large enough for
    # a dozen grids) is an independent composition of the same steps: the intervals must meet
    from sgmfast.pld.engine import Engine

    rng = np.random.default_rng(seed)
    s0, q0 = float(np.exp(rng.uniform(np.log(0.6), np.log(4)))), float(np.exp(rng.uniform(np.log(1e-3), np.log(0.05))))
    t, d = int(rng.integers(2, 40)), float(np.exp(rng.uniform(np.log(1e-9), np.log(1e-4))))
    relation = ("add_remove", "replace_one")[seed % 2]
    sched = [(s0 * (1 + 1e-5 * rng.standard_normal()), q0 * (1 + 1e-5 * rng.standard_normal()), t) for _ in range(12)]
    merged = make_engine(sched, 1e-3, None, relation)
    assert isinstance(merged, Sandwich) and merged.pair is not None
    lo, up = merged.epsilon(d)[:2]
    e_lo, e_up = Engine(sched, 1e-3, None, relation, budget=20.0).epsilon(d)[:2]
    assert lo <= e_up and e_lo <= up
    assert up - lo <= 2e-3 * up


def test_brackets_take_the_grouping_that_spreads_less():
    """The groups' sandwich: runs in sigma / q where sigma and q move together, cells of a grid of
    their quantiles where they do not (10^4 steps with sigma and q each uniform were 58 % wide)."""
    from sgmfast.pld.engine import Engine
    from sgmfast.pld.schedule_groups import _by_cells, _by_ratio, _cost as _spread, brackets

    rr = random.Random(5)
    indep = np.array([(0.9 + 0.4 * rr.random(), 0.003 + 0.003 * rr.random(), 1) for _ in range(2000)])
    together = np.array([(1.3 - 0.4 * i / 1999, 0.003 + 0.003 * i / 1999, 1) for i in range(2000)])
    assert _spread(indep, _by_cells(indep, 32)) < _spread(indep, _by_ratio(indep, 32))
    assert _spread(together, _by_ratio(together, 32)) < _spread(together, _by_cells(together, 32))
    # every step is in a group whose upper key is at least as revealing and lower key at most
    up, lo = brackets([tuple(r) for r in indep], 32)
    assert sum(c for *_, c in up) == sum(c for *_, c in lo) == 2000 and len(up) <= 32
    # certified either way: the sandwich of a schedule the exact engine can compose meets it
    small = [(0.9 + 0.4 * rr.random(), 0.003 + 0.003 * rr.random(), rr.randint(1, 100)) for _ in range(100)]
    s_lo, s_up, _ = Sandwich(small, 1e-3).epsilon(1e-5)
    e_lo, e_up, _ = Engine(small, 1e-3).epsilon(1e-5)
    assert s_lo <= e_up * (1 + 1e-12) and e_lo <= s_up * (1 + 1e-12)
    many = [(0.9 + 0.4 * rr.random(), 0.003 + 0.003 * rr.random()) for _ in range(10000)]
    acc = pld.PLDAccountant()
    for s, q in many:
        acc.step(s, q)
    b = acc.epsilon(1e-5)
    assert b.upper - b.lower <= 0.3 * b.upper
    low = pld.PLDAccountant().step(1.3, 0.003, 10000).epsilon(1e-5)
    high = pld.PLDAccountant().step(0.9, 0.006, 10000).epsilon(1e-5)
    assert low.lower <= b.upper and b.lower <= high.upper
