"""Schedules whose noise level and sampling rate both change every step (``sgmfast.pld.schedule_product``):
the K-point mixture kernel against a direct product, the product lattice's cells, and the engine against
the exact engine (eps and δ) and through the accountant."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sgmfast._kernels.pld import schedule_parts as ks
from sgmfast.pld import PLDAccountant
from sgmfast.pld.engine import Engine
from sgmfast.pld.schedule_product import PRODUCT_POINTS, ProductEngine, ProductLayout, ProductPlan
from sgmfast.pld.schedules import make_engine

from _engines import meets_exact


def _kernel_case(seed, kk, m, h, points):
    rng = np.random.default_rng(seed)
    lat = np.exp(1j * rng.uniform(-3, 3, (points, h))) * rng.uniform(0.5, 1.0, (points, h))
    idx = rng.integers(0, points, (m, kk))
    w = rng.random((m, kk))
    w /= w.sum(axis=1, keepdims=True)
    k = rng.integers(1, 40, m)
    return lat, idx, w, k


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10 ** 6), kk=st.sampled_from([1, 2, 3, 4]), m=st.integers(1, 12), h=st.integers(1, 70))
def test_mixture_kernel_against_a_direct_product(seed, kk, m, h):
    """prod_j (sum_c w[j, c] F[idx[j, c]])^{T_j}, frequency by frequency in numpy (complex128 powers
    of the same mixtures): within the kernel's own rounding bound."""
    lat, idx, w, k = _kernel_case(seed, kk, m, h, 5)
    nbits = int(k.max()).bit_length()
    members = [np.nonzero((k >> b) & 1)[0] for b in range(nbits)]
    bit_ptr = np.concatenate(([0], np.cumsum([x.size for x in members]))).astype(np.int64)
    bit_idx = np.concatenate(members).astype(np.int64)
    sidx, inv = np.unique(idx, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    ss = np.zeros(sidx.shape[0])
    np.maximum.at(ss, inv, w.sum(axis=1) * (1 + 4 * kk * 2.0 ** -53))
    scnt = np.zeros(sidx.shape[0], dtype=np.int64)
    np.add.at(scnt, inv, k)
    out = np.empty(h, dtype=np.complex128)
    n_ops = float(k.sum()) + 4.0 * (2.0 ** nbits - 1.0) + 4.0
    err, _, _ = ks.mix_power_range(np.ascontiguousarray(lat.real), np.ascontiguousarray(lat.imag), idx, w, bit_ptr,
                                   bit_idx, sidx.astype(np.int64), ss, np.zeros(sidx.shape[0]), scnt, n_ops, out, 0, h,
                                   np.empty(0), np.empty(0))
    direct = np.ones(h, dtype=np.complex128)
    for j in range(m):
        direct *= (w[j][:, None] * lat[idx[j]]).sum(axis=0) ** int(k[j])
    weight = np.where((np.arange(h) == 0) | (np.arange(h) == h - 1), 1.0, 2.0)
    # (the direct product errs too: its own power's rounding, of the order of the kernel's)
    assert float(np.sum(weight * np.abs(out - direct))) <= 2 * err + 1e-300 * h * m


def _mixed(seed, n):
    rr = random.Random(seed)
    s0, q0 = 0.6 * 4 ** rr.random(), 10 ** rr.uniform(-3.5, -1)
    return [(s0 * (1 + rr.random() * rr.uniform(0.05, 1)), q0 * (1 + rr.random() * 1.5), rr.randint(1, 150))
            for _ in range(n)], 10 ** rr.uniform(-10, -3)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10 ** 6), n=st.integers(2, 300), level=st.integers(0, 1))
def test_layout_cells_contain_their_steps(seed, n, level):
    sched, _ = _mixed(seed, n)
    arr = np.array(sched)
    sig, q, cnt = arr[:, 0], arr[:, 1], arr[:, 2].astype(np.int64)
    lay = ProductLayout(sig, q, cnt, 1e-3, 3.0, 1.0, level)
    assert lay.used().size <= PRODUCT_POINTS
    assert lay.slat[0] == sig.min() and lay.slat[-1] == sig.max() and lay.qlat[0] == q.min() and lay.qlat[-1] == q.max()
    c_hi, d_hi = np.minimum(lay.c + 1, lay.slat.size - 1), np.minimum(lay.d + 1, lay.qlat.size - 1)
    assert np.all(lay.slat[lay.c] <= sig) and np.all(sig <= lay.slat[c_hi])
    assert np.all(lay.qlat[lay.d] <= q) and np.all(q <= lay.qlat[d_hi])
    pl = ProductPlan(lay, sig, q, cnt, 1e-3, 1e-12, 3.0, 1.0)
    for parts in (pl.up, pl.plo, pl.qlo):
        idx, w, k = parts
        assert k.sum() == cnt.sum()
        assert np.all(w >= 0) and np.allclose(w.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert pl.up[0].shape[1] == 4 and pl.plo[0].shape[1] == 4 and pl.qlo[0].shape[1] == 2
    assert 0.0 < pl.H <= 1e-12 * (1 + 1e-6)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_product_engine_meets_exact_engine(seed):
    """40-70 steps, each with its own noise level and rate: the product engine's intervals (eps and
    δ) meet the exact engine's."""
    rr = random.Random(200 + seed)
    sched, delta = _mixed(seed, rr.randint(40, 70))
    meets_exact(lambda s: ProductEngine(s, 1e-3, 4.0), sched, delta, 3e-2)


def test_mixed_schedule_through_the_accountant():
    """1000 steps with sigma uniform in [0.9, 1.3] and q in [0.003, 0.006]: the product engine
    answers, within 2 % (the groups' sandwich gave [0.6059, 0.8112]), inside the constant runs'
    bracket, and the δ query at its ends agrees."""
    rng = np.random.default_rng(0)
    sig, q = rng.uniform(0.9, 1.3, 1000), rng.uniform(0.003, 0.006, 1000)
    acc = PLDAccountant()
    for s, x in zip(sig, q):
        acc.step(float(s), float(x))
    assert type(make_engine(acc._schedule(), 1e-3).mix).__name__ == "ProductEngine"
    b = acc.epsilon(1e-5)
    assert b.upper - b.lower <= 2e-2 * b.upper
    low = PLDAccountant().step(1.3, 0.003, 1000).epsilon(1e-5)
    high = PLDAccountant().step(0.9, 0.006, 1000).epsilon(1e-5)
    assert low.lower <= b.lower and b.upper <= high.upper
    d = acc.delta(np.array([b.lower * (1 - 1e-3), b.upper * (1 + 1e-3)]))
    assert d.upper[0] >= 1e-5 * (1 - 1e-9) and d.lower[1] <= 1e-5 * (1 + 1e-9)
    assert math.isfinite(b.upper)


def _sweep_case(seed, case):
    """Case ``case`` of ``bench/schedules_rates_vs_engine.py SEED N --product`` (its generator)."""
    rng = np.random.default_rng(seed)
    for _ in range(case + 1):
        n = int(rng.integers(40, 131))
        s0 = math.exp(rng.uniform(math.log(0.5), math.log(4)))
        sigs = rng.uniform(s0, s0 * rng.uniform(1.05, 2), n)
        qlo = math.exp(rng.uniform(math.log(1e-4), math.log(0.3)))
        qs = rng.uniform(qlo, qlo * rng.uniform(1.05, 3), n)
        sched = [(float(s), float(min(q, 0.95)), int(rng.integers(1, 200))) for s, q in zip(sigs, qs)]
        delta = 10 ** rng.uniform(-12, -2)
    return sched, delta


def test_a_lower_bound_past_the_table_limit_keeps_the_upper():
    """The statistic's chains outgrow ``TABLE_BYTES`` (224 laws of 153,601 frequencies) where the
    upper mixtures do not: the δ query used to lose its upper bound with them and answer [0, 1]."""
    sched, _ = _sweep_case(1, 16)
    eps = np.array([0.5399])
    d_lo, d_up = ProductEngine(sched, 1e-3, 4.0).delta(eps)
    x_lo, x_up = Engine(sched, 1e-3).delta(eps)
    assert d_up[0] < 1e-9 and x_lo[0] <= d_up[0] * (1 + 1e-12) and d_lo[0] <= x_up[0] * (1 + 1e-12)


def test_statistic_chains_past_the_table_limit_go_coarser():
    """The statistic's chains (256 laws of 153,601 frequencies) pass the product engine's table
    limit where its upper mixtures do not: the round used to keep only its upper end ([0.73678,
    0.82578]); the chains now run on a grid step 2 or 4 times coarser, a looser test."""
    sched, delta = _sweep_case(1, 22)
    lo, up, _ = ProductEngine(sched, 1e-3, 4.0).epsilon(delta)
    e_lo, e_up, _ = Engine(sched, 1e-3).epsilon(delta)
    assert lo <= e_up * (1 + 1e-12) and e_lo <= up * (1 + 1e-12)
    assert lo >= 0.8


#: eps(1e-5) of the 10^4 random steps below, every step composed by the exact engine (``engine.Engine``,
#: unbounded budget: 116 s) -- ``python bench/schedules_coarse_product.py 10000 0`` (its .out)
EXACT_10K = (2.270773, 2.271672)


def test_steps_spread_over_both_axes_get_the_product_at_a_coarser_accuracy():
    """10^4 steps of random (sigma, q) need a part each on the product lattice of accuracy 1e-3
    (9,049 > PRODUCT_PARTS): they were the groups' sandwich alone, [1.99377, 2.58118] (23 %).  The
    lattice is now tried at twice the accuracy, four times, ... (``schedules.COARSE_PRODUCT``),
    with up to COARSE_POINTS points and COARSE_PARTS parts: within 0.5 % (1.4 % at most 160 points
    and 4,000 parts), meeting the exact engine's interval, between the constant runs at either
    corner, and δ at the interval's ends consistent with the query."""
    from sgmfast.pld.schedules import COARSE_PRODUCT, Sandwich

    rng = np.random.default_rng(0)
    sig, q = rng.uniform(0.9, 1.3, 10_000), rng.uniform(0.003, 0.006, 10_000)
    acc = PLDAccountant()
    for s, qq in zip(sig, q):
        acc.step(float(s), float(qq))
    b = acc.epsilon(1e-5)
    engine = acc._engine
    assert isinstance(engine, Sandwich) and isinstance(engine.mix, ProductEngine)
    assert 1e-3 < engine.mix.accuracy <= COARSE_PRODUCT
    assert b.upper - b.lower <= 0.005 * b.upper and not b.met
    assert b.lower <= EXACT_10K[1] and EXACT_10K[0] <= b.upper
    low = PLDAccountant().step(1.3, 0.003, 10_000).epsilon(1e-5)
    high = PLDAccountant().step(0.9, 0.006, 10_000).epsilon(1e-5)
    assert low.upper <= b.lower and b.upper <= high.lower
    d = acc.delta(np.array([b.lower, b.upper]))  # (δ falls with eps: 1e-5 lies between)
    assert d.lower[1] <= 1e-5 * (1 + 1e-9) and d.upper[0] >= 1e-5 * (1 - 1e-9)


def test_a_layouts_upper_parts_are_made_once_and_lower_parts_on_first_use(monkeypatch):
    """The upper parts do not depend on the failure mass: a second plan of the same layout takes
    the first one's (building them twice cost 0.3 s of a 2.8 s query of 10^4 steps); a plan asked
    only for its upper parts (``fits``, δ's base plan) never makes its lower ones."""
    calls = {"up": 0, "lo": 0}
    up0, lo0 = ProductPlan._upper, ProductPlan._lower

    def up(*a):
        calls["up"] += 1
        return up0(*a)

    def lo(*a):
        calls["lo"] += 1
        return lo0(*a)

    monkeypatch.setattr(ProductPlan, "_upper", staticmethod(up))
    monkeypatch.setattr(ProductPlan, "_lower", staticmethod(lo))
    n = 2000
    sched = [(1.3 - 0.4 * i / n, 0.003 + 0.003 * i / n, 1) for i in range(n)]
    e = ProductEngine(sched, 1e-3, 1.0)
    first = e.plan(1.0)
    assert calls == {"up": 1, "lo": 0}
    second = e.plan(1e-8)
    assert second.up is first.up and calls == {"up": 1, "lo": 0}
    h_second = second.H
    assert calls["lo"] == 1 and h_second < first.H  # (the failure mass follows h_target)


@settings(max_examples=40, deadline=None)
@given(lam=st.lists(st.floats(1e-6, 1.0 - 1e-6), min_size=1, max_size=30), seed=st.integers(0, 10 ** 6),
       upper=st.booleans(), tol=st.sampled_from([1e-4, 1e-2, 0.25]))
def test_all_groups_merged_at_once_round_the_safe_way(lam, seed, upper, tol):
    """The groups' merged weights in one kernel call (``_merge_all``), against mpmath: each group's
    parts are runs of its steps in order of weight, each part's weight on the safe side of its
    run's geometric mean (upper: 1 - geomean(1 - lam) rounded up; lower: geomean(lam) rounded down)
    and within 1e-12 of it, and the runs move at most ``tol`` of the group's weight."""
    import mpmath

    from sgmfast.pld.schedule_mix import _merge_all

    rng = np.random.default_rng(seed)
    lam = np.array(lam)
    gid = np.unique(rng.integers(0, 3, lam.size), return_inverse=True)[1].reshape(-1)
    tols = np.full(gid.max() + 1, tol)
    grp, p, k = _merge_all(gid, lam, np.ones(lam.size, dtype=np.int64), tols, upper)
    mpmath.mp.dps = 40
    for g in range(tols.size):
        steps = np.sort(lam[gid == g])[:: 1 if upper else -1]
        assert k[grp == g].sum() == steps.size
        moved, at = mpmath.mpf(0), 0
        for pg, kg in zip(p[grp == g], k[grp == g]):
            run = [mpmath.mpf(float(x)) for x in steps[at: at + kg]]
            at += kg
            if upper:
                exact = 1 - mpmath.exp(mpmath.fsum(mpmath.log(1 - x) for x in run) / kg)
                assert pg >= exact and pg - exact <= 1e-12 * max(exact, 1e-300) + 1e-300
                moved += kg * exact - mpmath.fsum(run)
            else:
                exact = mpmath.exp(mpmath.fsum(mpmath.log(x) for x in run) / kg)
                assert pg <= exact and exact - pg <= 1e-12 * exact
                moved += mpmath.fsum(run) - kg * exact
        total = mpmath.fsum(1 - mpmath.mpf(float(x)) for x in steps) if upper else mpmath.fsum(
            mpmath.mpf(float(x)) for x in steps)
        assert moved <= tol * total * (1 + 1e-9) + 1e-15


@settings(max_examples=40, deadline=None)
@given(lam=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=20), k=st.integers(1, 10 ** 6))
def test_single_step_weights_are_rounded_the_safe_way(lam, k):
    """A group of one step keeps its own weight, rounded up for the upper parts and down for the
    lower ones (mpmath, 50 digits), and close to it."""
    import mpmath

    from sgmfast.pld.schedule_product import _merge_all

    lam = np.array(lam)
    cnt = np.full(lam.size, k, dtype=np.int64)
    gid = np.arange(lam.size)
    tols = np.full(lam.size, 0.1)
    up, lo = _merge_all(gid, lam, cnt, tols, True)[1], _merge_all(gid, lam, cnt, tols, False)[1]
    for x, u, v in zip(lam, up, lo):
        with mpmath.workdps(50):
            assert u >= mpmath.mpf(float(x)) and v <= mpmath.mpf(float(x))
        # (close: the margins are ~10u of the log's size)
        r = 16 * 2.0 ** -53 * (abs(math.log(x)) + 1) if x > 0 else 0.0
        assert u <= x + r * max(x, 1 - x) + 1e-300 or u == 1.0
        assert v >= x * (1 - r) or x < 1e-300


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10 ** 6), cols=st.integers(1, 3), n=st.integers(1, 200))
def test_groups_by_one_key_are_the_rows_of_np_unique(seed, cols, n):
    """``_groups`` (one int64 key a row) against ``np.unique(..., axis=0)``: the same rows in the same
    order, the same row of each step."""
    from sgmfast.pld.schedule_product import _groups

    rng = np.random.default_rng(seed)
    data = [rng.integers(0, rng.integers(1, 50), n) for _ in range(cols)]
    uk, inv = _groups(*data)
    want, want_inv = np.unique(np.stack(data, axis=1), axis=0, return_inverse=True)
    assert np.array_equal(uk, want) and np.array_equal(inv, want_inv.reshape(-1))


def test_layout_used_points_are_the_cells_corners():
    """``ProductLayout.used`` (a mask over the points) against the corners of every step's cell."""
    rng = np.random.default_rng(3)
    for n, acc in ((2000, 2e-3), (500, 1e-2)):
        sig, q = rng.uniform(0.7, 2.0, n), np.exp(rng.uniform(np.log(1e-3), np.log(0.1), n))
        lay = ProductLayout(sig, q, np.ones(n, dtype=np.int64), acc, 0.5, 1.0)
        corners = [lay.point(lay.c + a, lay.d + b) for a in (0, 1) for b in (0, 1)]
        assert np.array_equal(lay.used(), np.unique(np.concatenate(corners)))


def test_the_product_engine_never_builds_the_noise_families():
    """A coarse retry builds a ``ProductEngine`` a time; ``MixEngine.families`` (one family a distinct
    rate: 10^5 of them at 10^5 random rates, 0.23 s an engine) is made only where read."""
    n = 3000
    rng = np.random.default_rng(1)
    sched = [(float(s), float(qq), 1) for s, qq in zip(rng.uniform(0.9, 1.3, n), rng.uniform(0.003, 0.006, n))]
    e = ProductEngine(sched, 2e-3, 1.0, coarse=True)
    assert e.fits()
    e.epsilon(1e-5)
    assert "families" not in e.__dict__


def test_many_steps_keep_to_a_few_budgets():
    """A schedule of many distinct steps gets a budget per 10^4 of them, at most
    ``schedule_engine.MANY_BUDGETS`` (6 x 10^4 steps would get six): the coarse product lattice
    narrows little past its first round (10^5 random (sigma, q) in [0.52, 1.84] x [1e-3, 0.1]
    spent 10.8 s for 7.5 % where the first round gives 9.0 % in 3.4 s), and with ten budgets 10^5
    noise levels at q 1.9e-4, δ 2.3e-15 ran 11 s for a 22 % wide answer."""
    from sgmfast.pld.engine import BUDGET
    from sgmfast.pld.schedule_engine import MANY_BUDGETS

    n = 60_000
    rng = np.random.default_rng(5)
    acc = PLDAccountant()
    for s, qq in zip(rng.uniform(0.9, 1.3, n), rng.uniform(0.003, 0.006, n)):
        acc.step(float(s), float(qq))
    mix = acc._get_engine().mix
    assert isinstance(mix, ProductEngine) and mix.accuracy > 1e-3
    assert MANY_BUDGETS < n / 1e4 and mix.budget == MANY_BUDGETS * BUDGET
