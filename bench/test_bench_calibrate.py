"""Calibration benchmarks (issue #4): sgmfast beside Opacus, dp_accounting and prv_accountant.

Run with ``pytest bench/test_bench_calibrate.py --benchmark-only -s``. One group per
scenario; each implementation finds the noise multiplier for the target (epsilon, delta =
1e-5). sgmfast is timed warm over several rounds; the slow peers (up to minutes per call) run
one round. The sigma each returns is printed and kept in ``extra_info``. Set
``SGMFAST_BENCH_SKIP_SLOW=1`` to skip the peer calls that take more than ~30 s.
"""

from __future__ import annotations

import os

import pytest
from peers import CAL_IMPLS

from sgmfast import pld
from sgmfast.pld import common as pld_common
from sgmfast.calibrate import calibrate_sigma

# Peers warn about their own order grids and numerics; that is not a failure here.
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::RuntimeWarning")

DELTA = 1e-5
SCENARIOS = [(8.0, 256 / 60000, 14062), (3.0, 0.001, 100_000), (1.0, 0.01, 1000)]
IMPLS = list(CAL_IMPLS)
SLOW = {("opacus PRV", 100_000), ("prv_accountant", 100_000), ("dp_accounting PLD", 100_000),
        ("prv_accountant", 14062), ("opacus PRV", 14062)}


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: f"eps={s[0]:g},q={s[1]:.4g},T={s[2]}")
def test_calibrate_sigma(benchmark, impl, scenario):
    eps, q, steps = scenario
    module, fn = CAL_IMPLS[impl]
    if module is not None:
        pytest.importorskip(module)
    if os.environ.get("SGMFAST_BENCH_SKIP_SLOW") and (impl, steps) in SLOW:
        pytest.skip("slow peer call skipped (SGMFAST_BENCH_SKIP_SLOW)")
    benchmark.group = f"calibrate-sigma|eps={eps:g},q={q:.4g},T={steps}"
    sgm = impl.startswith("sgmfast")
    if sgm:
        calibrate_sigma(1.0, DELTA, 0.01, 100, accountant="pld")  # JIT warm-up
        fn(eps, DELTA, q, steps)
    # sgmfast: each round starts without the one-step PLD cache (a search never repeats sigma)
    setup = (lambda: pld_common.STEP_CACHE.clear()) if sgm else None
    sigma = benchmark.pedantic(fn, args=(eps, DELTA, q, steps), setup=setup, rounds=5 if sgm else 1,
                               iterations=1)
    benchmark.extra_info["sigma"] = float(sigma)
    print(f"\n{impl:>18} eps={eps:g} q={q:.4g} T={steps}: sigma = {float(sigma):.5f}")


def test_rdp_calibration_sweep_1000(benchmark):
    """1,000 RDP calibrations in one vectorised call (epsilon in [0.5, 8], q in [1e-3, 0.05],
    T in [1e3, 1e5], log-uniform)."""
    import numpy as np

    rng = np.random.default_rng(1)
    e = 10 ** rng.uniform(np.log10(0.5), np.log10(8), 1000)
    q = 10 ** rng.uniform(-3, np.log10(0.05), 1000)
    t = np.floor(10 ** rng.uniform(3, 5, 1000))
    calibrate_sigma(e[:50], DELTA, q[:50], t[:50], accountant="rdp")  # JIT warm-up
    benchmark.group = "calibrate-sigma|1000 RDP points"
    benchmark.pedantic(calibrate_sigma, args=(e, DELTA, q, t), kwargs={"accountant": "rdp"},
                       rounds=5, iterations=1)
