"""Tuning cost (issue #17 item 1): epsilon of a random search over DP-SGD runs.

Run with ``pytest bench/test_bench_tuning.py --benchmark-only -s``.  MNIST's DP-SGD run
(q = 256/60000, sigma = 1.1, 14,062 steps, delta = 1e-5) tuned with a random number of runs
K of mean 10: sgmfast's two bounds (``method="rdp"``: Papernot & Steinke's theorems on
sgmfast's RDP; ``"profile"``: the privacy-profile bound of ``sgmfast.tuning``) beside
dp_accounting's RDP accountant with ``RepeatAndSelectDpEvent`` (the same theorems).  Printed:
each bound's epsilon, and how much the default (the smaller) saves over RDP.
"""

from __future__ import annotations

import math

import pytest

from sgmfast import pld, tuning
from sgmfast.pld import common as pld_common

Q, SIGMA, STEPS, DELTA, MEAN = 256 / 60000, 1.1, 14062, 1e-5, 10.0
DISTS = {"logarithmic": 0.0, "geometric": 1.0, "tnb-2": 2.0, "poisson": math.inf}


def _runs(shape):
    return tuning.poisson(MEAN) if shape == math.inf else tuning.truncated_negative_binomial(shape, mean=MEAN)


def _dp_accounting(shape):
    pytest.importorskip("dp_accounting")
    from dp_accounting import dp_event
    from dp_accounting.rdp import RdpAccountant

    one = dp_event.SelfComposedDpEvent(dp_event.PoissonSampledDpEvent(Q, dp_event.GaussianDpEvent(SIGMA)), STEPS)

    def run():
        acc = RdpAccountant()
        acc.compose(dp_event.RepeatAndSelectDpEvent(one, MEAN, shape))
        return acc.get_epsilon(DELTA)
    return run


@pytest.mark.parametrize("dist", list(DISTS))
@pytest.mark.parametrize("impl", ["sgmfast", "sgmfast-rdp", "sgmfast-profile", "dp_accounting"])
def test_tuning_epsilon(benchmark, impl, dist):
    benchmark.group = f"tuning|mnist|{dist}|mean={MEAN:g}"
    shape = DISTS[dist]
    if impl == "dp_accounting":
        fn = _dp_accounting(shape)
    else:
        method = {"sgmfast": "best", "sgmfast-rdp": "rdp", "sgmfast-profile": "profile"}[impl]
        runs = _runs(shape)

        def fn():
            pld_common.STEP_CACHE.clear()
            return tuning.epsilon(SIGMA, Q, STEPS, DELTA, runs, method=method)
    eps = fn()
    one = pld.epsilon(SIGMA, Q, STEPS, DELTA).upper
    print(f"\n{impl} {dist}: epsilon {eps:.4f} (one run {one:.4f})")
    benchmark.pedantic(fn, rounds=7, iterations=1, warmup_rounds=1)


@pytest.mark.parametrize("dist", ["geometric", "poisson"])
def test_tuning_calibration(benchmark, dist):
    """The noise for a whole search at (epsilon = 3, delta = 1e-5) vs one run's."""
    benchmark.group = f"tuning-calibrate|mnist|{dist}"
    runs = _runs(DISTS[dist])

    def fn():
        return tuning.calibrate_sigma(3.0, DELTA, Q, STEPS, runs)
    s = fn()
    from sgmfast import calibrate

    print(f"\n{dist}: sigma {s:.4f} for the search vs {calibrate.calibrate_sigma(3.0, DELTA, Q, STEPS):.4f} for one run")
    benchmark.pedantic(fn, rounds=2, iterations=1, warmup_rounds=0)
