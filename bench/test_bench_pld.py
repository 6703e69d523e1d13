"""PLD accountant benchmarks: sgmfast beside dp_accounting's PLD and prv_accountant, one group per scenario.

Run with ``pytest bench --benchmark-only``. The JIT is warmed (and, for sgmfast, the
single-step cache cleared) before timing, so each round is one warm eps(δ) query with
both bounds at default accuracy. The ε values and peak memory are printed.
"""

from __future__ import annotations

import tracemalloc

import pytest
from scenarios import DELTA, scenario_id

from sgmfast import pld
from sgmfast.pld import common as pld_common

SCENARIOS = [(256 / 60000, 1.1, 14062), (1e-4, 0.6, 1_000_000)]
IMPLS = ["sgmfast", "dp_accounting", "prv_accountant"]


def _epsilon_fn(impl, q, sigma, steps):
    if impl == "sgmfast":
        pld.epsilon(1.0, 0.01, 10, DELTA)  # warm the JIT

        def run():
            pld_common.STEP_CACHE.clear()  # time the whole pipeline, not a cache hit
            b = pld.epsilon(sigma, q, steps, DELTA)
            return (b.lower, b.upper)

        return run
    if impl == "dp_accounting":
        dpa = pytest.importorskip("dp_accounting")

        def run():
            acc = dpa.pld.PLDAccountant()  # value_discretization_interval 1e-4, pessimistic
            acc.compose(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(sigma)), steps)
            return acc.get_epsilon(DELTA)

        return run
    prv = pytest.importorskip("prv_accountant")

    def run():
        acc = prv.PRVAccountant(
            prvs=prv.PoissonSubsampledGaussianMechanism(noise_multiplier=sigma, sampling_probability=q),
            max_self_compositions=steps,
            eps_error=0.01,
            delta_error=DELTA / 1000,
        )
        return acc.compute_epsilon(delta=DELTA, num_self_compositions=steps)

    return run


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("q,sigma,steps", SCENARIOS, ids=[scenario_id(*s) for s in SCENARIOS])
def test_epsilon(benchmark, impl, q, sigma, steps):
    benchmark.group = f"pld-epsilon|{scenario_id(q, sigma, steps)}"
    fn = _epsilon_fn(impl, q, sigma, steps)
    tracemalloc.start()
    value = fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(f"\n{impl} {scenario_id(q, sigma, steps)}: eps={value} peak_mem={peak / 2**20:.1f} MiB")
    benchmark.pedantic(fn, rounds=3, iterations=1, warmup_rounds=0)
