"""Trade-off curves (issue #17 item 2): sgmfast's certified β(α) beside riskcal's estimate.

Run with ``pytest bench/test_bench_tradeoff.py --benchmark-only -s``.  Each round computes β at
the same 200 false-positive rates (log-spaced 1e-6 .. 1) for MNIST's DP-SGD (q = 256/60000,
sigma = 1.1, 14,062 steps).  Printed: β at a few α from each, and the δ(eps) that each curve
implies (sup over α of 1 - β(α) - e^eps α), beside sgmfast's certified δ(eps) from
``pld.delta``: a curve that implies less than the certified lower δ claims more privacy than
the mechanism has.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from sgmfast import pld
from sgmfast.pld import common as pld_common

Q, SIGMA, STEPS = 256 / 60000, 1.1, 14062
ALPHA = np.geomspace(1e-6, 1.0, 200)
SHOW = [1e-4, 1e-3, 1e-2, 1e-1]


def _fn(impl):
    if impl == "sgmfast":
        def run():
            pld_common.STEP_CACHE.clear()
            return pld.tradeoff(SIGMA, Q, STEPS, ALPHA).lower
        return run
    calibration = pytest.importorskip("riskcal.calibration")

    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return np.asarray(calibration.get_beta_for_dpsgd(SIGMA, Q, STEPS, ALPHA))
    return run


@pytest.mark.parametrize("impl", ["sgmfast", "riskcal"])
def test_tradeoff(benchmark, impl):
    benchmark.group = "tradeoff|mnist-200-alphas"
    fn = _fn(impl)
    beta = fn()
    shown = ", ".join(f"{a:g}: {np.interp(math.log(a), np.log(ALPHA), beta):.6f}" for a in SHOW)
    print(f"\n{impl}: beta at {shown}")
    dense = np.unique(np.concatenate((np.geomspace(1e-14, 1.0, 4000), np.linspace(0.0, 1.0, 2001))))
    if impl == "sgmfast":
        dense_beta = pld.tradeoff(SIGMA, Q, STEPS, dense).lower
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dense_beta = np.asarray(pytest.importorskip("riskcal.calibration").get_beta_for_dpsgd(SIGMA, Q, STEPS, dense))
    for eps in (1.0, 2.0, 3.0):
        implied = float(np.max(1.0 - dense_beta - math.exp(eps) * dense))
        cert = pld.delta(SIGMA, Q, STEPS, eps)
        print(f"  eps={eps}: implied delta {implied:.3e}, certified delta in [{cert.lower:.3e}, {cert.upper:.3e}]")
    benchmark.pedantic(fn, rounds=3, iterations=1, warmup_rounds=1)
