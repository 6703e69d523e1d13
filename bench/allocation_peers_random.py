"""Balls-in-bins against pld-accounting at random points where no quadrature reaches (t >= 4):
σ log-uniform in [0.6, 3], t log-uniform in [4, 300], 1-5 epochs, δ log-uniform in [1e-12, 1e-4].
Both intervals are certified, so they must meet (MISS where they do not); NARROWER/WIDER compares
the widths.

    python bench/allocation_peers_random.py [seed] [count]

Needs ``pip install pld-accounting`` (2.0); a few seconds a point.  Output (stop 48) in
``allocation_peers_random.out``.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from sgmfast.pld import allocation
from sgmfast.pld.common import STEP_CACHE

if __name__ == "__main__":
    from PLD_accounting import gaussian_allocation_epsilon_range

    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    rng = np.random.default_rng(seed)
    allocation.epsilon(1.0, 10, 10, 1e-5)
    print(f"# seed {seed}; python bench/allocation_peers_random.py {seed} {count}")
    print("| σ | t | epochs | δ | sgmfast ε | width | time | pld-accounting ε | width | time | |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|")
    miss = 0
    for _ in range(count):
        s = float(np.exp(rng.uniform(np.log(0.6), np.log(3.0))))
        t = int(round(np.exp(rng.uniform(np.log(4), np.log(300)))))
        e = int(rng.integers(1, 6))
        d = float(10 ** rng.uniform(-12, -4))
        STEP_CACHE.clear()
        t0 = time.perf_counter()
        b = allocation.epsilon(s, t, t * e, d)
        dt = time.perf_counter() - t0
        t0 = time.perf_counter()
        up, lo = gaussian_allocation_epsilon_range(delta=d, sigma=s, num_steps=t, num_selected=1, num_epochs=e)
        dp = time.perf_counter() - t0
        meet = b.lower <= up * (1 + 1e-9) and lo <= b.upper * (1 + 1e-9)
        miss += not meet
        w, wp = (b.upper - b.lower) / b.upper, (up - lo) / up
        flag = "MISS" if not meet else ("NARROWER" if w <= wp else "WIDER")
        print(f"| {s:.4f} | {t} | {e} | {d:.3g} | [{b.lower:.6g}, {b.upper:.6g}] | {w:.2e} | {dt:.2f} s | "
              f"[{lo:.6g}, {up:.6g}] | {wp:.2e} | {dp:.1f} s | {flag} |", flush=True)
    print(f"# {miss} of {count} do not meet")
