"""Balls-in-bins with k > 1 (each example in k of the t steps of an epoch): the certified eps(delta)
interval, and its lower end's two candidates -- the epoch-sum statistic (N(k, t sigma^2) against
N(0, t sigma^2): the only lower bound before stop 42) and the larger of ``samplers.selected_lower``'s
two statistics (the lattice sum N, the largest coordinate M) -- with the time of each (cold: the
one-step cache cleared).

    python bench/allocation_selected.py
"""

import math
import time

from sgmfast.pld import allocation
from sgmfast.pld.common import STEP_CACHE
from sgmfast.pld.samplers import selected_lower

# (sigma, t, k, epochs, delta)
POINTS = [(1.1, 234, 2, 60, 1e-5), (0.5, 20, 2, 10, 1e-5), (0.7, 100, 4, 50, 1e-8), (0.4, 8, 2, 1, 1e-10),
          (2.0, 100, 5, 10, 1e-6), (1.1, 10000, 2, 3, 1e-5), (3.0, 1000, 10, 200, 1e-12),
          (10.0, 100, 2, 100, 1e-3), (1.1, 234, 117, 60, 1e-5)]


def _timed(fn):
    STEP_CACHE.clear()
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def main():
    print("| σ | t | k | epochs | δ | ε(δ) | width | time | epoch sum | the larger of N and M (time) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for sigma, t, k, e, d in POINTS:
        b, dt = _timed(lambda: allocation.epsilon(sigma, t, t * e, d, selected=k))
        s = allocation.accountant_eps_lower(sigma * math.sqrt(t) / k, e, d)  # (the epoch sum: N(k, t sigma^2))
        low, dl = _timed(lambda: selected_lower.epsilon_lower(sigma, t, k, e, d, float(b.upper)))
        print(f"| {sigma} | {t} | {k} | {e} | {d:g} | [{b.lower:.6g}, {b.upper:.6g}] | "
              f"{(b.upper - b.lower) / b.upper:.2e} | {dt:.2f} s | {s:.6g} | {low:.6g} ({dl:.2f} s) |", flush=True)


if __name__ == "__main__":
    main()
