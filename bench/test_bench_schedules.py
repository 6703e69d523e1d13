"""Per-step schedules certified to 1e-3 (issue #31 item 2): noise that changes every step.

Run with ``pytest bench/test_bench_schedules.py --benchmark-only -s`` (one core:
``taskset -c 1``); ``SGMFAST_BENCH_SKIP_SLOW=1`` skips dp_accounting's composition (~4 min).
Every round starts from empty one-step caches and a fresh accountant, and includes recording the
steps (``PLDAccountant.step`` once per step), as a training loop does.

* ``schedule|10^4`` and ``schedule|10^5``: sigma linear in [0.9, 1.3] over 10^4 / 10^5 steps, every
  step distinct, q = 256/60000, eps(1e-5).
* ``schedule|opacus-decay``: noise decaying linearly 1.5 -> 0.8 over 500 steps at q = 0.01
  (issue #31's Opacus run), eps(1e-5); beside dp_accounting's PLD accountant composing the 500
  distinct steps exactly (connect-the-dots, pessimistic, discretisation 1e-4) -- an upper
  estimate, which sgmfast's certified interval must contain or lie below.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from sgmfast import pld
from sgmfast.pld import common as pld_common

DELTA = 1e-5
CASES = {
    "10^4": (np.linspace(0.9, 1.3, 10_000), 256 / 60000),
    "10^5": (np.linspace(0.9, 1.3, 100_000), 256 / 60000),
    "opacus-decay": (np.linspace(1.5, 0.8, 500), 0.01),
}


def _sgmfast(sig, q):
    def run():
        pld_common.STEP_CACHE.clear()
        acc = pld.PLDAccountant()
        for s in sig:
            acc.step(float(s), q, 1)
        b = acc.epsilon(DELTA)
        return f"[{b.lower:.5f}, {b.upper:.5f}] ({(b.upper - b.lower) / b.upper:.1e} wide, met={b.met})"
    return run


def _dp_accounting(sig, q):
    pldm = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")

    def run():
        acc = None
        for s in sig:
            p = pldm.from_gaussian_mechanism(float(s), sampling_prob=q, value_discretization_interval=1e-4,
                                             pessimistic_estimate=True, use_connect_dots=True)
            acc = p if acc is None else acc.compose(p)
        return f"{acc.get_epsilon_for_delta(DELTA):.5f} (pessimistic estimate)"
    return run


@pytest.mark.parametrize("case", list(CASES))
def test_schedule_sgmfast(benchmark, case):
    benchmark.group = f"schedule|{case}"
    fn = _sgmfast(*CASES[case])
    print(f"\nsgmfast {case}: eps = {fn()}")
    benchmark.pedantic(fn, rounds=1 if case == "10^5" else 3, iterations=1, warmup_rounds=0)


def test_schedule_dp_accounting_opacus(benchmark):
    if os.environ.get("SGMFAST_BENCH_SKIP_SLOW"):
        pytest.skip("slow peer call skipped (SGMFAST_BENCH_SKIP_SLOW)")
    benchmark.group = "schedule|opacus-decay"
    fn = _dp_accounting(*CASES["opacus-decay"])
    print(f"\ndp_accounting opacus-decay: eps = {fn()}")
    benchmark.pedantic(fn, rounds=1, iterations=1, warmup_rounds=0)
