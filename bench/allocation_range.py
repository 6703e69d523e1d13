"""Balls-in-bins (random allocation, k = 1) across issue #31's range: certified eps(delta)
intervals, their relative width and the time of a cold query (the one-step cache cleared).

    python bench/allocation_range.py

Widths depend on no clock (the refinement budget counts work); the times do, so say what else ran.
"""

import time

from sgmfast.pld import allocation
from sgmfast.pld.common import STEP_CACHE

# (sigma, steps per epoch t, epochs, delta)
POINTS = [(1.1, 234, 60, 1e-5), (0.8, 100, 10, 1e-5), (2.0, 1000, 5, 1e-5), (0.7, 20, 1, 1e-5), (0.5, 3, 1, 1e-5),
          (0.7, 3, 1, 1e-10), (0.4, 2, 1, 1e-12), (0.4, 10000, 1, 1e-5), (0.4, 100, 200, 1e-2),
          (10.0, 10000, 200, 1e-12), (10.0, 2, 1, 1e-12), (0.6, 5, 50, 1e-8), (3.0, 10000, 100, 1e-6),
          (1.0, 1000, 200, 1e-12), (0.5, 50, 20, 1e-3)]

if __name__ == "__main__":
    allocation.epsilon(1.0, 10, 10, 1e-5)  # (compile)
    print("| σ | t | epochs | δ | [lower, upper] | relative width | time |")
    print("|---|---|---|---|---|---|---|")
    for s, t, e, d in POINTS:
        STEP_CACHE.clear()
        t0 = time.perf_counter()
        b = allocation.epsilon(s, t, t * e, d)
        dt = time.perf_counter() - t0
        w = (b.upper - b.lower) / b.upper if b.upper > 0 else 0.0
        print(f"| {s:g} | {t} | {e} | {d:g} | [{b.lower:.6g}, {b.upper:.6g}] | {w:.2e} | {dt:.2f} s |", flush=True)
