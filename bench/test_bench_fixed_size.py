"""Fixed-size batches without replacement (issue #18 item 2), replace-one.

Run with ``pytest bench/test_bench_fixed_size.py --benchmark-only -s``.  For each case of
``tests/reference/dp_accounting_wor.csv``: sgmfast's certified interval (``pld.fixed_size``,
cold: the one-step cache is cleared every round) and time, side by side with dp_accounting's RDP
accountant for ``SampledWithoutReplacementDpEvent`` run in the same process (its only accountant
for this sampler).
"""

from __future__ import annotations

import csv
import time
from pathlib import Path

import pytest

from sgmfast.pld import common
from sgmfast.pld.samplers import fixed_size

REF = Path(__file__).parent.parent / "tests" / "reference" / "dp_accounting_wor.csv"
N = 60000


def _rows():
    with open(REF) as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def _dp_accounting(sigma, g, steps, delta):
    import dp_accounting as dpa
    from dp_accounting import dp_event
    from dp_accounting.rdp import rdp_privacy_accountant

    acc = rdp_privacy_accountant.RdpAccountant(neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE)
    acc.compose(dp_event.SampledWithoutReplacementDpEvent(N, round(g * N), dp_event.GaussianDpEvent(sigma / 2)), steps)
    return acc.get_epsilon(delta)


@pytest.mark.parametrize("row", _rows(), ids=lambda r: f"sigma{r['sigma']}-g{float(r['g']):.4g}-T{r['steps']}")
def test_fixed_size_epsilon(benchmark, row):
    sigma, g, T, d = float(row["sigma"]), float(row["g"]), int(row["steps"]), float(row["delta"])

    def cold():
        common.STEP_CACHE.clear()
        return fixed_size.epsilon(sigma, g, T, d)

    b = benchmark.pedantic(cold, rounds=3, iterations=1, warmup_rounds=1)
    t0 = time.perf_counter()
    ref = _dp_accounting(sigma, g, T, d)
    sec_r = time.perf_counter() - t0
    mean = benchmark.stats.stats.mean
    print(f"\nsigma={sigma} b/n={g:.5g} T={T} delta={d}: sgmfast [{b.lower:.5f}, {b.upper:.5f}] "
          f"(width {(b.upper - b.lower) / b.upper:.1e}) in {mean:.3f} s; dp_accounting RDP {ref:.5f} in {sec_r:.3f} s "
          f"({100 * (1 - b.upper / ref):.0f} % lower)")


@pytest.mark.parametrize("row", _rows(), ids=lambda r: f"rdp-sigma{r['sigma']}-g{float(r['g']):.4g}-T{r['steps']}")
def test_fixed_size_rdp_epsilon(benchmark, row):
    """sgmfast's RDP bound for the same sampler (``rdp.epsilon(..., sampler="fixed_size")``,
    ``_kernels/rdp/fixed_size.py``) beside dp_accounting's RDP, both timed here."""
    from sgmfast import rdp

    sigma, g, T, d = float(row["sigma"]), float(row["g"]), int(row["steps"]), float(row["delta"])
    e = benchmark.pedantic(lambda: rdp.epsilon(sigma, g, T, d, sampler="fixed_size"), rounds=5, iterations=1,
                           warmup_rounds=1)
    t0 = time.perf_counter()
    ref = _dp_accounting(sigma, g, T, d)
    sec_r = time.perf_counter() - t0
    mean = benchmark.stats.stats.mean
    print(f"\nsigma={sigma} b/n={g:.5g} T={T} delta={d}: sgmfast RDP {e:.5f} in {mean:.4f} s; "
          f"dp_accounting RDP {ref:.5f} in {sec_r:.3f} s ({100 * (1 - e / ref):.0f} % lower)")
