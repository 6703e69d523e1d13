"""Schedules whose sampling rate changes every step (issue #31 item 2): ``pld.schedule_rates``.

References: the statistic's masses in mpmath (50 digits) at the kernel's own edges (the
statistic is whatever function those edges define; its masses are what must be right); the
chord weights in exact rationals; the exact engine on schedules of a few dozen rates (both
certified: their intervals must meet); schedules of one repeated rate, which bracket a schedule
of rates between them (a smaller rate is a post-processing: ``schedules`` module notes).
"""

from __future__ import annotations

import math
import random
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sgmfast.pld import PLDAccountant
from sgmfast._kernels.pld import statistic as kst
from sgmfast._kernels.pld.losses import z_of_loss_with
from sgmfast.pld.engine import Engine
from sgmfast.pld.schedule_rates import RateEngine, chord_weights, sigma_families
from sgmfast.pld.schedules import make_engine

from _engines import meets_exact

mpmath.mp.dps = 50


@settings(max_examples=25, deadline=None)
@given(st.floats(0.3, 20.0), st.floats(1e-5, 0.9), st.sampled_from([1e-3, 1e-2, 0.1]), st.integers(-40, 5),
       st.integers(2, 60))
def test_statistic_masses_bracket_mpmath(sigma, q, step, j_lo, n):
    j_lo = max(j_lo, math.floor(math.log1p(-q) / step) - 2)
    up1, lo0, lo1, up0 = (np.empty(n) for _ in range(4))
    kst.statistic_masses(sigma, q, step, j_lo, n, up1, lo0, lo1, up0)
    s2, l1q, lq = sigma * sigma, math.log1p(-q), math.log(q)
    edges = [-math.inf] + [z_of_loss_with((j_lo + i - 0.5) * step, s2, q, l1q, lq) for i in range(1, n)] + [math.inf]
    for i in range(1, len(edges)):  # (as the kernel: a float inversion is an empty bin)
        edges[i] = max(edges[i], edges[i - 1])

    def mass(a, b, m):  # (N(m, sigma^2)-mass of [a, b], on the side of m where it does not cancel)
        za = -mpmath.inf if a == -math.inf else (mpmath.mpf(a) - m) / mpmath.mpf(sigma)
        zb = mpmath.inf if b == math.inf else (mpmath.mpf(b) - m) / mpmath.mpf(sigma)
        return mpmath.ncdf(-za) - mpmath.ncdf(-zb) if za > 0 else mpmath.ncdf(zb) - mpmath.ncdf(za)

    for i in range(n):
        m0, m1 = mass(edges[i], edges[i + 1], 0), mass(edges[i], edges[i + 1], 1)
        assert lo0[i] <= m0 <= up0[i] and lo1[i] <= m1 <= up1[i]
        assert up0[i] <= m0 * (1 + 1e-9) + 1e-299 and lo1[i] >= m1 * (1 - 1e-9) - 1e-289
    assert abs(float(np.sum(lo0)) - 1.0) < 1e-9 and abs(float(np.sum(lo1)) - 1.0) < 1e-9


@settings(max_examples=50, deadline=None)
@given(st.floats(1e-6, 0.5), st.floats(1.0001, 3.0), st.floats(0.0, 1.0))
def test_chord_weights_round_up(qa, ratio, x):
    qb = qa * ratio
    q = min(max(qa + x * (qb - qa), qa), qb)
    lam = chord_weights(np.array([q]), qa, qb)[0]
    exact = (Fraction(q) - Fraction(qa)) / (Fraction(qb) - Fraction(qa))
    assert Fraction(float(lam)) >= exact and lam <= 1.0


def _schedule(seed, n_rates, n_sigma):
    rr = random.Random(seed)
    sigmas = [0.6 * 5 ** rr.random() for _ in range(n_sigma)]
    q0 = 10 ** rr.uniform(-4, -0.7)
    return [(sigmas[i % n_sigma], q0 * (1 + rr.random() * 1.5), rr.randint(1, 150)) for i in range(n_rates)]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_rate_engine_meets_exact_engine(seed):
    """Schedules of 30-60 distinct rates among 1-3 noise levels: the rate engine's intervals
    (eps and δ) meet the exact engine's."""
    rr = random.Random(100 + seed)
    sched = _schedule(seed, rr.randint(30, 60), rr.randint(1, 3))
    delta = 10 ** rr.uniform(-10, -3)
    meets_exact(lambda s: RateEngine(s, 1e-3, 4.0), sched, delta, 5e-3)


def test_sigma_families():
    fam = sigma_families([(1.0, 0.2, 3), (0.5, 0.1, 1), (1.0, 0.1, 2)])
    assert [f[0] for f in fam] == [0.5, 1.0]
    assert fam[1][1].tolist() == [0.1, 0.2] and fam[1][2].tolist() == [2, 3]


@pytest.mark.parametrize("kind", ["ramp", "random"])
def test_many_rates_certified(kind):
    """10^4 steps, each with its own rate (a batch-size ramp; random rates) at one noise level:
    certified to 1e-3 (the sandwich of 32 groups used to give a few per cent), inside the
    bracket of the constant schedules at the least and the largest rate."""
    n = 10000
    rr = random.Random(7)
    qs = np.linspace(0.002, 0.006, n) if kind == "ramp" else np.array([rr.uniform(0.003, 0.006) for _ in range(n)])
    acc = PLDAccountant()
    for q in qs:
        acc.step(1.1, float(q))
    b = acc.epsilon(1e-6)
    assert b.met and b.upper - b.lower <= 1e-3 * b.upper
    assert type(make_engine(acc._schedule(), 1e-3).mix).__name__ == "RateEngine"
    low = PLDAccountant().step(1.1, float(qs.min()), n).epsilon(1e-6)
    high = PLDAccountant().step(1.1, float(qs.max()), n).epsilon(1e-6)
    assert low.lower <= b.upper and b.lower <= high.upper


def _sweep_case(seed, case):
    """Case ``case`` of the comparison sweep that found it (random noise levels and rates)."""
    rng = np.random.default_rng(seed)
    for _ in range(case + 1):
        nq, ns = int(rng.integers(20, 110)), int(rng.integers(1, 4))
        sigs = np.exp(rng.uniform(np.log(0.5), np.log(4), ns))
        qlo = math.exp(rng.uniform(math.log(1e-4), math.log(0.3)))
        qs = rng.uniform(qlo, qlo * rng.uniform(1.05, 3), nq)
        sched = [(float(sigs[i % ns]), float(min(q, 0.95)), int(rng.integers(1, 200))) for i, q in enumerate(qs)]
        delta = 10 ** rng.uniform(-12, -2)
    return sched, delta


def test_q_chain_tail_does_not_underflow():
    """Large rates, small noise, eps ~ 740: the Q-chain's tail e^{log_scale - theta s} underflows
    where e^eps times it does not (it used to be read as 0, and δ's lower bound passed the exact
    engine's upper bound: 1.21e-4 against 1.14e-4)."""
    sched, delta = _sweep_case(4, 1)
    e_lo, e_up, _ = Engine(sched, 1e-3).epsilon(delta)
    eps = np.array([0.5 * (e_lo + e_up)])
    x_lo, x_up = Engine(sched, 1e-3).delta(eps)
    d_lo, d_up = RateEngine(sched, 1e-3, 4.0).delta(eps)
    assert d_lo[0] <= x_up[0] * (1 + 1e-12) and x_lo[0] <= d_up[0] * (1 + 1e-12)
    assert d_lo[0] <= d_up[0]


def test_wide_rate_engine_gets_the_groups_sandwich(monkeypatch):
    """Where the rate engine ends wider than the accuracy, the groups' sandwich runs beside it and
    the two certified intervals are intersected (here the rate engine is made to answer nothing)."""
    from sgmfast.pld import schedules
    from sgmfast.pld.schedule_rates import RateEngine as RE

    monkeypatch.setattr(RE, "epsilon", lambda self, target, step0=None: (0.0, math.inf, None))
    monkeypatch.setattr(RE, "delta", lambda self, eps, below=1e-16: (np.zeros(len(eps)), np.ones(len(eps))))
    sched = [(1.1, float(q), 1) for q in np.linspace(0.003, 0.006, 300)]
    eng = schedules.Sandwich(sched, 1e-3)
    assert isinstance(eng.mix, RE)
    lo, up, _ = eng.epsilon(1e-5)
    d_lo, d_up = eng.delta(np.array([1.0]))
    low = PLDAccountant().step(1.1, 0.003, 300).epsilon(1e-5)
    high = PLDAccountant().step(1.1, 0.006, 300).epsilon(1e-5)
    assert low.lower <= up <= high.upper * (1 + 1e-9) and low.lower * (1 - 1e-9) <= lo <= high.upper
    assert 0.0 < d_lo[0] <= d_up[0] < 1.0
