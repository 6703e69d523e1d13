"""Wide answers say so (issue #31 item 4): ``Bounds.met`` and ``Bounds.width`` on every ε(δ) of the
PLD accountant, and one warning line on stderr from the CLI when the accuracy was not met."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sgmfast import cli, pld
from sgmfast._types import Bounds


@pytest.fixture(autouse=True)
def _no_compile_notice(monkeypatch):
    """The compile notices are tested in test_cli_first_run.py; here a command whose kernels are
    not cached yet (the suite on a fresh clone) must not change the stderr these tests read."""
    import sgmfast._kernels as kernels
    from sgmfast import _prewarm

    monkeypatch.setattr(kernels, "cache_is_cold", lambda: False)
    monkeypatch.setattr(_prewarm, "uncached", lambda key: 0)


def test_met_and_width():
    b = pld.epsilon(1.1, 256 / 60000, 14062, 1e-5)
    assert b.met is True and b.width <= 1e-3 and b.width == (b.upper - b.lower) / b.upper
    wide = pld.epsilon(1.1, 0.00427, 10 ** 12, 1e-5)  # past the work budget: certified, wide
    assert wide.met is False and wide.width > 1e-3 and wide.lower <= wide.upper
    arr = pld.epsilon(1.1, 256 / 60000, [100, 14062], 1e-5)
    assert arr.met is True and np.all(arr.width <= 1e-3)
    assert pld.PLDAccountant().step(1.1, 0.01, 100).epsilon(1e-5).met is True
    assert pld.epsilon_curve(1.1, 0.01, [50, 100], 1e-5).met is True
    assert pld.delta(1.1, 0.01, 100, 1.0).met is True  # (δ's rule: an ε shift, ``Engine.delta_met``)
    # met is not part of equality or the repr: a Bounds is its two ends
    assert Bounds(1.0, 2.0, met=True) == Bounds(1.0, 2.0) and repr(Bounds(1.0, 2.0, met=False)) == "Bounds(lower=1.0, upper=2.0)"
    assert Bounds(math.inf, math.inf).width == 0.0


def test_cli_warns_on_stderr_when_wide(capsys):
    assert cli.main(["epsilon", "--sigma", "1.1", "--q", "0.00427", "--steps", "1000000000000", "--delta", "1e-5"]) == 0
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sgmfast: warning:") and "--accuracy" in lines[0]
    assert "epsilon:" in out
    assert cli.main(["epsilon", "--sigma", "1.1", "--q", "0.00427", "--steps", "14062", "--delta", "1e-5"]) == 0
    assert capsys.readouterr().err == ""


def test_an_unbounded_interval_is_not_narrow():
    """inf - lo <= accuracy * inf is true in floats: ``common.within`` and ``Bounds.met`` must not
    read an interval with an infinite upper end over a finite lower one as narrow (a 10^4-step
    schedule answered [0, inf] with met True, and the RDP fallback after its failed grid was
    skipped); an exact +inf (both ends) is met."""
    from sgmfast.pld.api import _with_met
    from sgmfast.pld.common import within

    assert not within(0.0, math.inf, 1e-3) and within(math.inf, math.inf, 1e-3) and within(1.0, 1.0005, 1e-3)
    ok = within(np.array([0.0, 2.0, math.inf]), np.array([math.inf, 2.001, math.inf]), 1e-3)
    assert list(ok) == [False, True, True]
    assert _with_met(Bounds(0.0, math.inf), 1e-3).met is False
    assert _with_met(Bounds(np.array([0.0, 1.0]), np.array([math.inf, 1.0])), 1e-3).met is False


def test_a_failed_schedule_grid_falls_back_to_rdp(monkeypatch):
    """Where the many-step schedule's grids certify nothing ([0, inf]), the groups' sandwich runs
    beside them (``MixEngine.sandwich_if_wider``), RDP's bound caps it where still wide, and
    ``met`` is False.  The answer lies between the constant runs at the schedule's least and
    largest sigma (the former check, against the least sigma's lower end alone, held only while
    the answer was RDP's loose bound)."""
    from sgmfast.pld import schedule_engine

    monkeypatch.setattr(schedule_engine.MixEngine, "epsilon",
                        lambda self, target, step0=None: (0.0, math.inf, None))
    acc = pld.PLDAccountant()
    for i in range(300):
        acc.step(1.0 + i / 300, 0.01, 1)
    b = acc.epsilon(1e-5)
    assert 0.0 < b.upper < math.inf and b.met is False
    assert pld.epsilon(1.0 + 299 / 300, 0.01, 300, 1e-5).lower <= b.upper
    assert b.lower <= pld.epsilon(1.0, 0.01, 300, 1e-5).upper
