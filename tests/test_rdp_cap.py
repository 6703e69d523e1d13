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
