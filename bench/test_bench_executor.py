"""Sweeps on an Executor (issue #17 item 3): a 64-point PLD calibration grid serially and on a
process pool of this machine's two cores.

Run with ``pytest bench/test_bench_executor.py --benchmark-only -s`` on a quiet machine.  The
pool is started (and its workers have loaded sgmfast's kernels) before timing, as a long-lived
pool or cluster would be.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

from sgmfast import calibrate

EPS = np.array([0.5, 1.0, 2.0, 4.0])
QS = np.geomspace(1e-3, 0.1, 16)[:, None]
STEPS = 2000


@pytest.fixture(scope="module")
def pool():
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as ex:
        calibrate.calibrate_sigma(EPS[:2], 1e-5, QS[:9], STEPS, executor=ex)  # warm the workers
        yield ex


@pytest.mark.parametrize("where", ["serial", "process-pool-2"])
def test_calibration_grid(benchmark, where, request):
    benchmark.group = "executor|64 PLD calibrations"
    ex = request.getfixturevalue("pool") if where != "serial" else None
    out = benchmark.pedantic(lambda: calibrate.calibrate_sigma(EPS, 1e-5, QS, STEPS, executor=ex),
                             rounds=2, iterations=1, warmup_rounds=0)
    print(f"\n{where}: sigma range {out.min():.4f} .. {out.max():.4f}")
