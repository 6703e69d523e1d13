"""RDP accountant benchmarks: sgmfast beside dp_accounting and Opacus, one group per scenario.

Run with ``pytest bench --benchmark-only``. The JIT is warmed before timing; cold start is
measured separately (``test_cli_cold_start``).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys

import numpy as np
import pytest
from scenarios import DELTA, EPSILON_SCENARIOS, scenario_id

from sgmfast import rdp

IMPLS = ["sgmfast", "dp_accounting", "opacus"]


def _epsilon_fn(impl, q, sigma, steps):
    if impl == "sgmfast":
        rdp.epsilon(sigma, q, steps, DELTA)  # warm the JIT
        return lambda: rdp.epsilon(sigma, q, steps, DELTA)
    if impl == "dp_accounting":
        dpa = pytest.importorskip("dp_accounting")

        def run():
            acc = dpa.rdp.RdpAccountant()
            acc.compose(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(sigma)), steps)
            return acc.get_epsilon(DELTA)

        return run
    if impl == "opacus":
        pytest.importorskip("opacus")
        from opacus.accountants import RDPAccountant

        def run():
            acc = RDPAccountant()
            acc.history = [(sigma, q, steps)]
            return acc.get_epsilon(DELTA)

        return run
    raise ValueError(impl)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("q,sigma,steps", EPSILON_SCENARIOS, ids=[scenario_id(*s) for s in EPSILON_SCENARIOS])
def test_rdp_epsilon(benchmark, impl, q, sigma, steps):
    fn = _epsilon_fn(impl, q, sigma, steps)
    benchmark.group = f"rdp-epsilon|{scenario_id(q, sigma, steps)}"
    eps = benchmark(fn)
    benchmark.extra_info["epsilon"] = float(eps)


def _sweep(n, seed=0):
    rng = np.random.default_rng(seed)
    q = 10 ** rng.uniform(-4, -1, n)
    sigma = rng.uniform(0.5, 2.0, n)
    steps = np.floor(10 ** rng.uniform(3, 6, n))
    return sigma, q, steps


def test_rdp_vectorised_10000(benchmark):
    """10,000 (sigma, q, T) points, q in [1e-4, 0.1], sigma in [0.5, 2], T in [1e3, 1e6], one call."""
    sigma, q, steps = _sweep(10_000)
    rdp.epsilon(sigma[:200], q[:200], steps[:200], DELTA)  # compiles the parallel kernel
    benchmark.group = "rdp-vectorised|10000 points"
    eps = benchmark.pedantic(rdp.epsilon, args=(sigma, q, steps, DELTA), rounds=10, iterations=1)
    benchmark.extra_info["mean_epsilon"] = float(np.mean(eps))


def _case_1320():
    """bench/domain_sweep_more_failures.jsonl, id 1320 (over 10 s before): 10^5 steps, each its
    own sigma in [1.22, 4.2], q = 1.16e-4."""
    r = random.Random(358943)
    acc = rdp.RDPAccountant()
    for _ in range(100_000):
        acc.step(1.2192442829129966 * (4.196029418466512 / 1.2192442829129966) ** r.random(), 0.00011598630853008063, 1)
    return acc


@pytest.mark.parametrize("query", ["epsilon", "epsilon_curve"])
def test_rdp_schedule_100000_distinct_sigmas(benchmark, query):
    acc = _case_1320()
    fn = getattr(acc, query)
    fn(1.9175468191985406e-24)  # warm the JIT
    benchmark.group = f"rdp-schedule|100000 distinct sigmas, {query}"
    benchmark.pedantic(fn, args=(1.9175468191985406e-24,), rounds=3, iterations=1)


def test_cli_cold_start(benchmark):
    """A fresh process running the CLI once numba's cache is built (first run excluded)."""
    cmd = [sys.executable, "-m", "sgmfast.cli", "epsilon", "--sigma", "1.1", "--q", "0.00427",
           "--steps", "14062", "--delta", "1e-5", "--accountant", "rdp"]
    env = dict(os.environ)
    subprocess.run(cmd, check=True, capture_output=True, env=env)  # builds the cache if needed
    benchmark.group = "cli-cold-start"
    benchmark.pedantic(lambda: subprocess.run(cmd, check=True, capture_output=True, env=env), rounds=5, iterations=1)
