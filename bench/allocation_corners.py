"""Balls-in-bins in the corner of few steps per epoch and tiny δ (issue #31 item 1's range: σ in
[0.4, 10], t in [2, 10^4], 1-200 epochs, δ in [1e-12, 1e-2]), which the random points of
``allocation_random.py`` rarely reach: σ 0.8-3, t 2-300, δ 1e-12 and 1e-9, 1 and 5 epochs.  Each
row: the certified ε(δ) interval, its relative width and its cold time (one process, kernels
cached).

    python bench/allocation_corners.py

Output in ``allocation_corners.out`` (stop 48, on one core with a neighbour busy: all 168 rows
within 1e-3, the widest 9.8e-4, the slowest 1.59 s; stop 47, after ``epoch_sums``, the second
lattice top from the answer and a third tilt, quiet: the widest 9.6e-4, the slowest 1.25 s).  Before, stop 46: 34 rows over
1e-3, up to 22 % wide at σ 1-1.2, t 30-300, δ 1e-12 (σ 1.2, t 100, 5 epochs: [1.88, 2.26]), where
the lattice's FFT floors hid the masses that set δ and the others' sum in the closed-form tail was
bounded by Chernoff rungs, loose by a few sd; at stop 45, 25 % at t <= 10 (σ 1.2, t 3, δ 1e-12:
[4.288, 5.676]).
"""

from __future__ import annotations

import itertools
import time

from sgmfast.pld import allocation
from sgmfast.pld.common import STEP_CACHE

if __name__ == "__main__":
    allocation.epsilon(1.0, 10, 10, 1e-5)  # (load the kernels)
    print("| σ | t | δ | epochs | ε(δ) | width | time |\n|---|---|---|---|---|---|---|")
    for s, t, d, e in itertools.product([0.8, 1.0, 1.2, 1.5, 2.0, 3.0], [2, 3, 5, 10, 30, 100, 300],
                                     [1e-12, 1e-9], [1, 5]):
        STEP_CACHE.clear()
        t0 = time.perf_counter()
        b = allocation.epsilon(s, t, t * e, d)
        dt = time.perf_counter() - t0
        w = (b.upper - b.lower) / b.upper
        print(f"| {s} | {t} | {d:g} | {e} | [{b.lower:.6g}, {b.upper:.6g}] | {w:.2e}{' WIDE' if w > 1e-3 else ''} | {dt:.2f} s |",
              flush=True)
