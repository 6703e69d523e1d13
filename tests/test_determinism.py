"""Answers count work, never read a clock: the same call gives the same interval, bit for bit,
on a quiet machine and beside processes that keep every core busy (issue #30 item 2)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from sgmfast import pld
from sgmfast.pld import common


def _answers():
    common.STEP_CACHE.clear()  # (cold: every refinement level is recomputed)
    acc = pld.PLDAccountant()
    for s in np.linspace(0.9, 1.3, 300):  # more distinct steps than MAX_PARTS: the sandwich
        acc.step(float(s), 0.01, 2)
    return [tuple(pld.epsilon(1.0, 0.01, 300, 1e-5, sampler="balls_in_bins")),
            tuple(pld.delta(1.5, 1 / 2, 2, 3.3, sampler="balls_in_bins")),
            tuple(pld.epsilon(1.1, 256 / 60000, 3000, 1e-5, sampler="fixed_size")),
            tuple(acc.epsilon(1e-5))]


def test_same_interval_beside_cpu_hogs():
    quiet = _answers()
    hogs = [subprocess.Popen([sys.executable, "-c", "for _ in range(10 ** 12): pass"])
            for _ in range(3)]
    try:
        busy = _answers()
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    assert busy == quiet


def test_helper_work_is_charged_in_one_sum_where_it_is_taken(monkeypatch):
    """``common.Beside``: the helper's charges reach this thread's meter as one sum at ``result()``,
    after this thread's own, on two cores and on one (the same order of additions either way)."""
    from sgmfast import _work

    def job(units):
        for u in units:
            _work.charge(u)
        return "done"

    for cores in (4, 1):
        monkeypatch.setattr(common, "_CORES", [cores])
        with _work.metered() as m:
            b = common.Beside("test", job, [0.1, 2.5, 3.0])
            assert b.alongside(lambda: _work.charge(10.2)) is None
            assert m.units == 11  # (the helper's work not yet; whole units, rounded up)
            assert b.result() == "done"
        assert m.units == 11 + 1 + 3 + 3


def test_meters_sum_whole_units_exactly():
    """Charges are rounded up to whole units and summed exactly: any order, the same total."""
    from sgmfast import _work

    charges = [1e8 * 1.1 ** k + 0.3 for k in range(50)]
    totals = set()
    for order in (charges, charges[::-1], sorted(charges, key=lambda c: (c * 7919) % 1)):
        m = _work.Meter()
        for c in order:
            m.add(c)
        totals.add(m.units)
    assert len(totals) == 1 and totals.pop() == sum(int(np.ceil(c)) for c in charges)


def test_helper_failure_is_raised_where_it_is_taken(monkeypatch):
    import pytest

    def boom():
        raise FloatingPointError("helper")

    for cores in (4, 1):
        monkeypatch.setattr(common, "_CORES", [cores])
        b = common.Beside("test", boom)
        with pytest.raises(FloatingPointError, match="helper"):
            b.result()
        b = common.Beside("test", boom)
        with pytest.raises(ZeroDivisionError):
            b.alongside(lambda: 1 / 0)


def test_split_lattice_cells_are_the_same_floats():
    """W's lattice cells computed in two halves (two threads) equal the one pass bit for bit."""
    from sgmfast._kernels.pld import allocation as ka

    s, h, K = 1 / 0.6, 0.01, 40001
    whole = [np.empty(K) for _ in range(3)]
    ka.lognormal_cells(s, h, K, *whole)
    halves = [np.empty(K) for _ in range(3)]
    ka.lognormal_cells_from(s, h, K // 2, K, *halves)
    ka.lognormal_cells_from(s, h, 0, K // 2, *halves)
    for a, b in zip(whole, halves):
        assert np.array_equal(a, b)


def test_ladder_rungs_on_two_cores_charge_what_one_core_does(monkeypatch):
    """``epoch_tail.over_ladder`` evaluates its rungs two at a time on two cores: the same atoms and
    the same counted work (to the bit) as one at a time on one core."""
    from sgmfast import _work
    from sgmfast.pld.samplers import epoch_tail

    s, h, K, t = 1 / 0.45, 0.05, 4000, 16
    w = epoch_tail.upper_law(s, h, K)
    cap = 0.5 * t * K * h / 8
    runs = []
    for cores in (4, 1):
        monkeypatch.setattr(common, "_CORES", [cores])
        with _work.metered() as m:
            xs, ms, qs = epoch_tail.over_ladder(w, h, t, cap, K * h, s, 1e-3, 1e-300, 1e-4)
        runs.append((xs.tolist(), ms.tolist(), qs.tolist(), m.units))
    assert runs[0] == runs[1] and len(runs[0][0]) >= 3 and runs[0][3] > 0


def test_same_interval_on_one_core_and_on_two(monkeypatch):
    """Where two cores split a sum in halves (a transform's spectral power, a mixture's) or run a
    curve's final engine beside its other checkpoints, one core takes the same halves and the same
    plan: the answers do not depend on the machine's cores (sigma 0.5, t 50, 20 epochs, δ 1e-3 read
    [16.286777, ...] on one core and [16.286660, ...] on two before; a curve's second checkpoint
    0.0990720 and 0.0990721)."""
    from sgmfast import tuning

    def answers():
        common.STEP_CACHE.clear()
        return _answers() + [tuple(np.concatenate(tuple(pld.epsilon_curve(
                                 0.9085, 0.000736, np.unique(np.geomspace(1, 96068, 20).astype(int)), 1.7e-8)))),
                             tuning.epsilon(1.1, 256 / 60000, 2000, 1e-5, tuning.geometric(mean=10))]

    runs = []
    for cores in (1, 2):
        monkeypatch.setattr(common, "_CORES", [cores])
        runs.append(answers())
    assert runs[0] == runs[1]


def test_fixed_size_work_is_the_same_on_one_core_and_on_two(monkeypatch):
    """Fixed-size batches start RDP's bound beside the refinement (``fixed_size._poisson_rdp``): its
    work is charged where it is asked for (``common.Beside``), so the counted work -- what budgets
    read -- is the same on one core and on two (on two it was charged even when never asked:
    70,937,352 units on one core, 71,187,352 on two, at sigma 1.61, q 1e-4, T 100, δ 1e-12)."""
    from sgmfast import _work

    runs = []
    for cores in (1, 2):
        monkeypatch.setattr(common, "_CORES", [cores])
        common.STEP_CACHE.clear()
        with _work.metered() as m:
            b = pld.epsilon(1.61, 1e-4, 100, 1e-12, sampler="fixed_size")
        runs.append((tuple(b), m.units))
    assert runs[0] == runs[1]
