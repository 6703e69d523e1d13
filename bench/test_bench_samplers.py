"""Every sampler on the MNIST run (issue #28): one certified ``pld.epsilon(..., sampler=...)`` at
60 epochs of 234 batches (fixed size: 256 of 60000), cold (the one-step cache cleared every round),
side by side.  The peer for balls-in-bins is pld-accounting (its time and interval are committed in
``tests/reference/allocation_pld_accounting.csv``, see test_bench_allocation.py); no installable
peer certifies the permutation shuffle or fixed-size batches by PLD (dp_accounting's RDP for the
latter is in ``bench/samplers_mnist.py``).

Run with ``pytest bench/test_bench_samplers.py --benchmark-only -s``.
"""

from __future__ import annotations

import warnings

import pytest

from sgmfast import pld
from sgmfast.pld import common

CASES = [("poisson", 1 / 234), ("balls_in_bins", 1 / 234), ("shuffle", 1 / 234), ("fixed_size", 256 / 60000)]


@pytest.mark.parametrize("sampler, q", CASES, ids=[c[0] for c in CASES])
def test_sampler_epsilon(benchmark, sampler, q):
    benchmark.group = "epsilon|MNIST sigma=1.1, 60 epochs, delta=1e-5, by sampler"

    def cold():
        common.STEP_CACHE.clear()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", pld.LooseBoundWarning)
            return pld.epsilon(1.1, q, 60 * 234, 1e-5, sampler=sampler)

    b = benchmark.pedantic(cold, rounds=3, iterations=1, warmup_rounds=1)
    print(f"\n{sampler}: [{b.lower:.5f}, {b.upper:.5f}] in {benchmark.stats.stats.mean:.3f} s")
