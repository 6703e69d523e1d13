"""Balls-in-bins batches (issue #18 item 1): random allocation, k = 1 (``sampler="balls_in_bins"``).

Run with ``pytest bench/test_bench_allocation.py --benchmark-only -s``.  sgmfast's certified
interval and time (cold: the one-step cache cleared every round) for each case of ``bench/allocation_peers.py``; pld-accounting's interval and
time (minutes for MNIST) are read from that script's committed output
(``tests/reference/allocation_pld_accounting.csv``, measured on the same machine), not re-run.
Also the Poisson answer at q = 1/t for the same run.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from sgmfast import pld
from sgmfast.pld.samplers import balls_in_bins as allocation
from sgmfast.pld import common

REF = Path(__file__).parent.parent / "tests" / "reference" / "allocation_pld_accounting.csv"


def _rows():
    with open(REF) as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


@pytest.mark.parametrize("row", _rows(), ids=lambda r: f"sigma{r['sigma']}-t{r['steps_per_epoch']}-E{r['epochs']}")
def test_allocation_epsilon(benchmark, row):
    sigma, t, e, d = float(row["sigma"]), int(row["steps_per_epoch"]), int(row["epochs"]), float(row["delta"])
    def cold():  # (the epoch is cached per sigma: a repeated query would take milliseconds)
        common.STEP_CACHE.clear()
        return allocation.epsilon(sigma, t, t * e, d)

    b = benchmark.pedantic(cold, rounds=3, iterations=1, warmup_rounds=1)
    lo_r, up_r, sec_r = float(row["eps_lower"]), float(row["eps_upper"]), float(row["seconds"])
    p = pld.epsilon(sigma, 1 / t, t * e, d)
    mean = benchmark.stats.stats.mean
    print(f"\nsigma={sigma} t={t} E={e} delta={d}: sgmfast [{b.lower:.5f}, {b.upper:.5f}] "
          f"(width {(b.upper - b.lower) / b.upper:.2e}) in {mean:.2f} s; pld-accounting [{lo_r:.5f}, {up_r:.5f}] "
          f"(width {(up_r - lo_r) / up_r:.2e}) in {sec_r:.1f} s: {sec_r / mean:.0f}x faster, "
          f"{(up_r - lo_r) / max(b.upper - b.lower, 1e-300):.0f}x narrower; Poisson at 1/t: {p.upper:.5f}")
