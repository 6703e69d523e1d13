"""Accuracy at random interior points of issue #3's grid (the corner sweep only sees the corners).

Run: ``python bench/pld_random_sweep.py [n] [seed]`` (default 60 points, seed 0; a few minutes;
``pld_random_sweep.out``: seeds 0 and 1 with 60 points, 2 to 7 with 100).
Draws log-uniform q in [1e-5, 1], sigma in [0.4, 50], T in [1, 1e6] (integer), delta in
[1e-12, 1e-3]; prints [lower, upper], the relative width and OK/WIDE against the 1e-3 target.
"""
import math
import sys
import time

import numpy as np

from sgmfast import pld

n = int(sys.argv[1]) if len(sys.argv) > 1 else 60
rng = np.random.default_rng(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
wide = 0
for _ in range(n):
    q = float(10 ** rng.uniform(-5, 0))
    s = float(10 ** rng.uniform(math.log10(0.4), math.log10(50)))
    t = int(round(10 ** rng.uniform(0, 6)))
    d = float(10 ** rng.uniform(-12, -3))
    t0 = time.perf_counter()
    try:
        b = pld.epsilon(s, q, t, d)
        gap = (b.upper - b.lower) / b.upper if b.upper > 0 else 0.0
        ok = gap <= 1e-3
        wide += not ok
        print(f"q={q:.4g} s={s:.4g} T={t} d={d:.3g} [{b.lower:.7g}, {b.upper:.7g}] gap={gap:.2e} "
              f"{'OK' if ok else 'WIDE'} {time.perf_counter() - t0:.2f}s", flush=True)
    except Exception as e:  # noqa: BLE001 - report every failure and go on
        wide += 1
        print(f"q={q:.4g} s={s:.4g} T={t} d={d:.3g} ERROR {type(e).__name__}: {e}", flush=True)
print(f"{n - wide} of {n} within 1e-3")
