"""The PLD engine's RDP cap (``pld.certifiers.rdp_cap``) on long schedules: coarsened to a grid
of noise levels (down) and rates (up) it stays above the exact schedule's RDP bound, within
0.5 %; and the domain sweep's replace-one delta curve of 200 near-equal noise levels (13 s: an
order optimisation over 200 mechanisms for each of 64 caps) costs little counted work."""

from __future__ import annotations

import random

import numpy as np
import pytest

from sgmfast import pld, rdp
from sgmfast._work import UNITS_PER_SECOND, metered
from sgmfast.pld.certifiers.rdp_cap import RDPBound


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_coarsened_cap_is_above_the_exact_schedule(seed):
    rr = random.Random(seed)
    steps = [(0.8 * 3.0 ** rr.random(), 10 ** rr.uniform(-4, -1), rr.randint(1, 50)) for _ in range(300)]
    exact = rdp.RDPAccountant()
    for s, q, c in steps:
        exact.step(s, q, c)
    cap = RDPBound(steps, replace=False)
    for delta in (1e-5, 1e-10):
        e = exact.epsilon(delta)
        assert e <= cap.epsilon(delta) <= e * 1.005
    for eps in (0.5, 2.0):
        d = exact.delta(eps)
        assert d <= float(cap.delta(np.array([eps]))[0]) <= d * 1.05 + 1e-300


def test_sweep_replace_one_delta_curve_is_cheap():
    acc = pld.PLDAccountant(relation="replace_one")
    for i in range(200):
        acc.step(16.58491970725894 + (16.586578199229667 - 16.58491970725894) * i / 199, 0.000942161779499946, 1)
    with metered() as m:
        b = acc.delta_curve(1.5198045642940932)
    assert np.all(b.lower <= b.upper) and b.upper[-1] < 1e-300
    assert m.units <= 3.0 * UNITS_PER_SECOND


def _counting(monkeypatch, cap):
    calls = []
    real = cap._acc.delta

    def counted(e, **kw):
        calls.append(e)
        return real(e, **kw)

    monkeypatch.setattr(cap._acc, "delta", counted)
    return calls


def test_expensive_searches_are_shared_by_nearby_eps(monkeypatch):
    # sigma 0.0134: the fractional orders below 2 are quadratures of ~4e4 nodes (~0.1-0.2 s a
    # search); a tuning profile asked for δ at 21 eps within 0.1 % of 1000 (and each eps + h),
    # one search each: 5 s of a 10 s tuning.delta, counted as 1 ms each
    from sgmfast.pld.certifiers import rdp_cap

    steps = [(0.0134, 4.9e-6, 778)]
    cap = RDPBound(steps, replace=False)
    assert cap._units > 100 * rdp_cap.UNITS_PER_MECHANISM  # (the nodes are counted)
    eps = np.concatenate([np.linspace(999.1, 1000.0, 21), np.linspace(2.0, 40.0, 30)])
    calls = _counting(monkeypatch, cap)
    with metered() as m:
        got = cap.delta(eps)
    assert len(calls) <= rdp_cap.MAX_ANCHORS + 1 and m.units >= len(calls) * cap._units
    some = slice(3, None, 8)  # (a search each: 0.2 s)
    own = np.array([rdp.RDPAccountant().step(*steps[0]).delta(float(e)) for e in eps[some]])
    lower = pld.delta(0.0134, 4.9e-6, 778, eps[some]).lower
    assert np.all(got[some] >= lower)  # (every order gives a bound: above the exact δ)
    assert np.all(got[some] <= own * 1.01)  # and within 1 % of each eps's own search


def test_cheap_searches_stay_one_per_eps(monkeypatch):
    cap = RDPBound([(1.1, 0.00427, 14062)], replace=False)
    eps = np.array([0.5, 0.52, 0.9, 3.0, 3.05, 12.0, 12.05, 50.0, 0.5])
    calls = _counting(monkeypatch, cap)
    got = cap.delta(eps)
    assert sorted(set(calls)) == sorted(set(eps.tolist()))
    exact = rdp.RDPAccountant().step(1.1, 0.00427, 14062)
    assert got.tolist() == [exact.delta(float(e)) for e in eps]


def test_delta_groups():
    from sgmfast.pld.common import delta_groups

    eps = np.array([0.0, 0.04, 0.06, 0.5, 9.96, 999.1, 999.9, 1000.0, 1015.0, 2000.0])
    k = delta_groups(eps)
    assert k[0] == k[1] != k[2] and k[3] == 0.5
    assert k[5] == k[6] == k[7] != k[8] != k[9]  # within 1 % beyond eps = 10
    wide = np.geomspace(10.0, 1e4, 2000)
    kw = delta_groups(wide)
    for key in np.unique(kw):
        members = wide[kw == key]
        assert members.max() <= members.min() * 1.0101


@pytest.mark.parametrize("sigma,q,steps,delta,accuracy", [
    (7.239202259955983, 0.008335618206381137, 2273375, 5.725568540342588e-14, 0.2973480036284564),
    (2.0, 0.01, 10 ** 6, 1e-10, 0.2),
])
def test_pld_is_never_looser_than_rdp_at_a_coarse_accuracy(sigma, q, steps, delta, accuracy):
    """README: "the upper bound is also capped by the RDP bound, so PLD is never looser than RDP" --
    also where a coarse accuracy was met before the cap was asked (a domain sweep: 15.31 against RDP's
    14.56 at accuracy 0.3)."""
    b = pld.epsilon(sigma, q, steps, delta, accuracy=accuracy)
    assert b.upper <= rdp.epsilon(sigma, q, steps, delta)
