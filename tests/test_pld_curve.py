"""Privacy curves (issue #16): every checkpoint of one run in one call.

The references are independent of the curve code: the closed form of the composed Gaussian
mechanism (q = 1, mpmath table), and per-checkpoint calls of the single-query API, whose
intervals must intersect the curve's (both certified) -- a curve point that contradicts a
certified point is a bug in one of them.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sgmfast import pld, rdp
from sgmfast.pld import common as pld_common
from sgmfast.pld import curve as pld_curve

REF = Path(__file__).parent / "reference"


def _consistent(curve, points, accuracy=1e-3, width=True):
    lo = np.array([p.lower for p in points])
    up = np.array([p.upper for p in points])
    assert (curve.lower <= up * (1 + 1e-12) + 1e-300).all(), (curve.lower, up)
    assert (lo <= curve.upper * (1 + 1e-12) + 1e-300).all(), (lo, curve.upper)
    assert (curve.lower <= curve.upper).all()
    assert (np.diff(curve.upper) >= 0).all() and (np.diff(curve.lower) >= 0).all()  # grows with the steps
    if width:
        finite = np.isfinite(curve.upper) & (curve.upper > 0)
        assert (curve.upper[finite] - curve.lower[finite] <= accuracy * curve.upper[finite] * 1.0001).all()


@pytest.mark.parametrize("sigma, q, steps, delta", [
    (1.1, 256 / 60000, np.arange(1, 21) * 234, 1e-5),  # MNIST epochs (the fast path)
    (0.8, 0.01, [1, 2, 5, 10, 50, 100, 500], 1e-6),  # few steps, heavy one-step tails
    (2.0, 0.05, [10, 100, 1000, 3000], 1e-8),
    (1.0, 1.0, [1, 4, 16], 1e-5),  # q = 1: closed forms
    (0.6, 0.3, [3, 30, 300], 1e-3),
])
def test_epsilon_curve_matches_single_queries(sigma, q, steps, delta):
    curve = pld.epsilon_curve(sigma, q, steps, delta)
    points = [pld.epsilon(sigma, q, int(t), delta) for t in steps]
    _consistent(curve, points)


def test_epsilon_curve_replace_one():
    steps = [50, 200, 800]
    curve = pld.epsilon_curve(1.0, 0.02, steps, 1e-5, relation="replace_one")
    _consistent(curve, [pld.epsilon(1.0, 0.02, t, 1e-5, relation="replace_one") for t in steps])


@pytest.mark.parametrize("sigma, q, steps, eps", [
    (1.1, 256 / 60000, np.arange(1, 11) * 1000, 1.0),
    (0.9, 0.02, [1, 10, 100, 1000], 2.0),
    (1.0, 0.01, [10, 100], 0.0),
])
def test_delta_curve_matches_single_queries(sigma, q, steps, eps):
    curve = pld.delta_curve(sigma, q, steps, eps)
    points = [pld.delta(sigma, q, int(t), eps) for t in steps]
    _consistent(curve, points, width=False)


def _gaussian_rows():
    with open(REF / "exact_gaussian_composed_eps.csv") as f:
        rows = [r for r in csv.DictReader(line for line in f if not line.startswith("#"))]
    return [r for r in rows if float(r["sensitivity"]) == 1.0 and 1e-12 <= float(r["delta"]) <= 0.5][:40]


def test_epsilon_curve_contains_the_exact_gaussian():
    """q = 1: the T-fold Gaussian mechanism, exact to mpmath precision (tests/reference)."""
    rows = _gaussian_rows()
    assert rows
    groups: dict = {}
    for r in rows:
        groups.setdefault((float(r["sigma"]), float(r["delta"])), []).append((int(float(r["steps"])), float(r["epsilon"])))
    for (sigma, delta), pts in groups.items():
        pts = sorted(set(pts))
        steps = [t for t, _ in pts]
        if len(steps) != len(set(steps)) or steps[0] < 0:
            continue
        curve = pld.epsilon_curve(sigma, 1.0, [max(t, 0) for t in steps], delta)
        for (t, e), lo, up in zip(pts, curve.lower, curve.upper):
            assert lo <= e * (1 + 1e-9) + 1e-12 and e <= up * (1 + 1e-9) + 1e-12, (sigma, delta, t, e, lo, up)


def test_accountant_curve_after_each_segment():
    acc = pld.PLDAccountant().step(1.0, 0.01, 300).step(0.8, 0.02, 100).step(1.0, 0.01, 200).step(0.0, 0.0, 5)
    curve = acc.epsilon_curve(1e-5)
    assert curve.lower.shape == (4,)  # one point per recorded segment (q = 0 does nothing)
    prefixes = [pld.PLDAccountant().step(1.0, 0.01, 300),
                pld.PLDAccountant().step(1.0, 0.01, 300).step(0.8, 0.02, 100),
                pld.PLDAccountant().step(1.0, 0.01, 300).step(0.8, 0.02, 100).step(1.0, 0.01, 200),
                acc]
    _consistent(curve, [p.epsilon(1e-5) for p in prefixes])
    dc = acc.delta_curve(1.5)
    _consistent(dc, [p.delta(1.5) for p in prefixes], width=False)


def test_curve_with_a_noiseless_phase():
    acc = pld.PLDAccountant().step(1.0, 0.01, 100).step(0.0, 0.01, 3).step(1.0, 0.01, 100)
    curve = acc.epsilon_curve(1e-5)
    assert math.isfinite(curve.upper[0]) and curve.lower[1] == math.inf and curve.lower[2] == math.inf
    p = 1 - (1 - 0.01) ** 3
    d = acc.delta_curve(1.0)
    assert d.lower[1] >= p * (1 - 1e-12) and d.lower[2] >= p * (1 - 1e-12)


def test_empty_accountant_curve():
    b = pld.PLDAccountant().epsilon_curve(1e-5)
    assert b.lower.shape == (0,) and b.upper.shape == (0,)


def test_zero_checkpoint():
    b = pld.epsilon_curve(1.0, 0.01, [0, 10], 1e-5)
    assert b.lower[0] == 0.0 and b.upper[0] == 0.0 and b.upper[1] > 0


@pytest.mark.parametrize("bad, match", [
    (dict(steps=[10, 5]), "strictly increasing"),
    (dict(steps=[[1, 2]]), "one-dimensional"),
    (dict(steps=[1.5]), "non-negative integer"),
    (dict(sigma=[1.0, 2.0]), "single number"),
    (dict(delta=0.0), "delta"),
])
def test_curve_arguments_are_checked(bad, match):
    args = dict(sigma=1.0, q=0.01, steps=[1, 2], delta=1e-5) | bad
    with pytest.raises(ValueError, match=match):
        pld.epsilon_curve(args["sigma"], 0.01, args["steps"], args["delta"])


@settings(deadline=None, max_examples=12, suppress_health_check=[HealthCheck.too_slow])
@given(sigma=st.floats(0.5, 4.0), log_q=st.floats(-4.0, -0.5), log_t=st.floats(1.0, 3.5),
       k=st.integers(2, 6), log_delta=st.floats(-10.0, -3.0))
def test_curve_never_contradicts_a_point(sigma, log_q, log_t, k, log_delta):
    t_max = int(10 ** log_t)
    steps = np.unique(np.linspace(1, t_max, k).astype(int))
    q, delta = 10 ** log_q, 10 ** log_delta
    curve = pld.epsilon_curve(sigma, q, steps, delta)
    i = len(steps) // 2
    point = pld.epsilon(sigma, q, int(steps[i]), delta)
    assert curve.lower[i] <= point.upper * (1 + 1e-12) and point.lower <= curve.upper[i] * (1 + 1e-12)
    assert (curve.upper <= rdp.epsilon_curve(sigma, q, steps, delta) * (1 + 1e-9)).all()  # never above RDP


def test_rdp_curves_are_the_single_answers():
    steps = [10, 100, 1000]
    c = rdp.epsilon_curve(1.0, 0.01, steps, 1e-5)
    assert np.allclose(c, [rdp.epsilon(1.0, 0.01, t, 1e-5) for t in steps], rtol=1e-12)
    acc = rdp.RDPAccountant().step(1.0, 0.01, 100).step(0.7, 0.02, 50)
    assert np.allclose(acc.epsilon_curve(1e-5), [rdp.RDPAccountant().step(1.0, 0.01, 100).epsilon(1e-5),
                                                 acc.epsilon(1e-5)], rtol=1e-12)


def test_long_rdp_history_curve_is_an_upper_bound():
    acc = rdp.RDPAccountant()
    for i in range(300):
        acc.step(1.0 + 0.001 * i, 0.01, 5)
    c = acc.epsilon_curve(1e-5)
    assert c.shape == (300,) and c[-1] == acc.epsilon(1e-5)
    prefix = rdp.RDPAccountant()
    for i in range(120):
        prefix.step(1.0 + 0.001 * i, 0.01, 5)
    assert prefix.epsilon(1e-5) <= c[119] <= prefix.epsilon(1e-5) * 1.05


def test_curve_in_several_batches(monkeypatch):
    """Many checkpoints: the spectra go in batches (BATCH_BYTES), the products carried over."""
    from sgmfast.pld import curve_grids

    monkeypatch.setattr(curve_grids, "BATCH_BYTES", 1 << 20)
    steps = np.arange(1, 31) * 234
    b = pld.epsilon_curve(1.1, 256 / 60000, steps, 1e-5)
    _consistent(b, [pld.epsilon(1.1, 256 / 60000, int(t), 1e-5) for t in steps])


@pytest.mark.parametrize("fast,rest", [(0.0, 0.0), (0.0, 60.0), (60.0, 0.0)])
def test_curve_out_of_time_is_still_certified(monkeypatch, fast, rest):
    """Past the curve's deadlines (forced here) the checkpoints left keep trivial bounds, narrowed
    by monotonicity from their neighbours: wider, never contradicting the full answers."""
    steps = np.arange(1, 13) * 300
    full_e = pld.epsilon_curve(1.1, 0.01, steps, 1e-5)
    full_d = pld.delta_curve(1.1, 0.01, steps, 1.0)
    monkeypatch.setattr(pld_curve, "FAST_BUDGET", fast)
    monkeypatch.setattr(pld_curve, "FAST_PER_POINT", 0.0)
    monkeypatch.setattr(pld_curve, "REST_BUDGET", rest)
    pld_common.STEP_CACHE.clear()
    for got, full in ((pld.epsilon_curve(1.1, 0.01, steps, 1e-5), full_e), (pld.delta_curve(1.1, 0.01, steps, 1.0), full_d)):
        assert np.all(got.lower <= full.upper * (1 + 1e-9)) and np.all(full.lower <= got.upper * (1 + 1e-9))
        assert np.all(np.diff(got.lower) >= 0) and np.all(np.diff(got.upper) >= 0)
        assert got.upper[-1] == pytest.approx(full.upper[-1], rel=1e-9)  # the last point is its own query


def test_spread_visits_every_checkpoint_once():
    for m in range(0, 40):
        order = pld_curve._spread(m)
        assert sorted(order) == list(range(m))
        if m > 1:
            assert order[:2] == [m - 1, 0]
