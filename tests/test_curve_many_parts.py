"""Curves of histories with many distinct steps (issue #31 item 3): a ``PLDAccountant`` that
records a new (sigma, q) at every step.

Its run used to be one dense table of checkpoints by distinct parts (10^4 x 10^4 int64: 0.8 GB;
10^5 steps could not be allocated); now at most ``curve_grids.TABLE_MAX`` entries, on an even
spread of the checkpoints, the others bracketed by monotonicity.  And the checkpoints between
were all left at [0, last upper]: each got an engine of many distinct steps at 1/20 s of budget,
whose first round (the only one that answers) was cut short; now a spread few share the
allowance, and a mixture engine's first round may run FIRST_EXTRA seconds of work past its limit.
"""

from __future__ import annotations

import numpy as np
import pytest

from sgmfast.pld import PLDAccountant
from sgmfast.pld import curve_grids
from sgmfast.pld.schedule_engine import MixEngine

Q = 256 / 60000


def _history(n, lo=0.9, hi=1.3):
    acc = PLDAccountant()
    for s in np.linspace(hi, lo, n):
        acc.step(float(s), Q)
    return acc


def test_history_run_spread_and_back():
    """The run's rows are the kept checkpoints' cumulative counts (against a direct sum), and
    ``spread_back`` gives every checkpoint its neighbours' bounds."""
    segs = [(1.0 + 0.01 * (k % 7), Q, k + 1) for k in range(40)]
    run, kept = curve_grids.history_run(segs)
    assert kept.tolist() == list(range(40))  # (7 parts x 40 rows: under the cap)
    for k in (0, 13, 39):
        direct = {}
        for s, q, c in segs[: k + 1]:
            direct[(s, q)] = direct.get((s, q), 0) + c
        assert {p: int(c) for p, c in zip(run.parts, run.counts[k]) if c} == direct
    kept = np.array([0, 10, 39])
    lo, up = curve_grids.spread_back(kept, [1.0, 2.0, 3.0], [1.5, 2.5, 3.5], 40)
    assert lo[0] == 1.0 and lo[9] == 1.0 and lo[10] == 2.0 and lo[38] == 2.0 and lo[39] == 3.0
    assert up[0] == 1.5 and up[1] == 2.5 and up[10] == 2.5 and up[11] == 3.5


def test_history_run_capped(monkeypatch):
    monkeypatch.setattr(curve_grids, "TABLE_MAX", 200)
    segs = [(1.0 + 0.001 * k, Q, 1) for k in range(50)]  # 50 distinct parts: 4 rows fit
    run, kept = curve_grids.history_run(segs)
    assert run.counts.size <= 200 and kept[-1] == 49 and kept[0] == 0
    assert run.counts[-1].sum() == 50 and (run.counts[-1] == 1).all()


def test_capped_curve_brackets_each_prefix(monkeypatch):
    """With the table capped, every checkpoint's interval still meets its own query's (both
    certified), and the curve is monotone."""
    monkeypatch.setattr(curve_grids, "TABLE_MAX", 150)
    acc = PLDAccountant()
    for k in range(30):
        acc.step(1.0 + 0.02 * k, Q, steps=50)
    b = acc.epsilon_curve(1e-5)
    assert np.all(np.diff(b.lower) >= 0) and np.all(np.diff(b.upper) >= 0)
    for k in (0, 7, 18, 29):
        single = PLDAccountant()
        for j in range(k + 1):
            single.step(1.0 + 0.02 * j, Q, steps=50)
        s = single.epsilon(1e-5)
        assert b.lower[k] <= s.upper and s.lower <= b.upper[k]


def test_mix_engine_first_round_completes():
    """A first round that costs more than 1.5 budgets used to be abandoned, leaving [0, inf]."""
    sched = [(float(s), Q, 1) for s in np.linspace(1.3, 0.9, 10000)]
    lo, up, _ = MixEngine(sched, 1e-3, 1.2).epsilon(1e-5)
    assert 0.0 < lo <= up < 2.2 and up - lo <= 2e-3 * up


@pytest.mark.parametrize("kind", ["epsilon", "delta"])
def test_many_distinct_steps_curve_has_interior_points(kind):
    """10^4 distinct sigmas: the curve answers a spread of interior checkpoints (it used to
    answer only the last), each meeting an independent per-prefix query."""
    n = 10000
    acc = _history(n)
    b = acc.epsilon_curve(1e-5) if kind == "epsilon" else acc.delta_curve(2.0)
    answered = np.flatnonzero(np.diff(np.concatenate(([0.0], b.lower))) > 0)
    assert len(answered) >= 2
    k = int(answered[0]) if answered[0] < n - 1 else int(answered[1])
    single = _history(n)
    single.history = single.history[: k + 1]
    s = single.epsilon(1e-5) if kind == "epsilon" else single.delta(2.0)
    assert b.lower[k] <= s.upper * (1 + 1e-12) and s.lower <= b.upper[k] * (1 + 1e-12)
    if kind == "epsilon":
        assert len(answered) >= 4


def test_spread_engines_are_skipped_where_they_would_overrun():
    """385 distinct sigmas in [0.98, 3.97] at δ 1.4e-10 (domain sweep seed 61, case 239: 12 s, over
    the 10 s limit): the spread checkpoints' engines overran their budgets in their first rounds
    (4.2 and 3.4 units on 1.5 and 0.65 s), and the curve cost 2.6 single queries.  Now a checkpoint
    whose engine the ones before predict past what is left is skipped."""
    import random

    from sgmfast._work import metered

    rr = random.Random(594404)
    segs = [0.9844007291527438 * (3.966732047567213 / 0.9844007291527438) ** rr.random() for _ in range(385)]
    curve_acc, single_acc = PLDAccountant(), PLDAccountant()
    for s in segs:
        curve_acc.step(s, 0.004523382941229913)
        single_acc.step(s, 0.004523382941229913)
    delta = 1.4078594934766039e-10
    with metered() as c:
        b = curve_acc.epsilon_curve(delta)
    with metered() as one:
        last = single_acc.epsilon(delta)
    assert c.units <= 2.25 * one.units
    assert b.lower[-1] == last.lower and b.upper[-1] == last.upper
    assert np.all(np.diff(b.upper) >= 0) and np.all(b.lower <= b.upper)


def _levels(accuracy):
    """500 random noise levels in [1.57, 7.1] at q 3.2e-4 (domain sweep 92's δ curve)."""
    rng = np.random.default_rng(520012)
    acc = PLDAccountant(accuracy=accuracy)
    for s in 1.5725 * (7.126 / 1.5725) ** rng.random(500):
        acc.step(float(s), 3.1577e-4)
    return acc


def test_a_finer_accuracy_is_not_asked_where_the_default_one_is_wide():
    # at an accuracy finer than the default the sandwich asks its default-accuracy twin first; that
    # one is far wider than the default accuracy here, and the finer query (finer grids, the same
    # budget) only spent more: the δ curve took 52 units (16.9 s), the last point's query 29 of them
    from sgmfast._work import metered

    eps = 0.06436
    with metered() as m_default:
        b_default = _levels(1e-3).delta(eps)
    assert b_default.width > 0.01  # (``schedules.COARSE_WIDE``)
    with metered() as m_fine:
        b_fine = _levels(3.6e-4).delta(eps)
    assert b_fine.lower >= b_default.lower and b_fine.upper <= b_default.upper  # (never wider)
    assert m_fine.units <= 1.1 * m_default.units
