"""Accuracy sweep of the PLD accountant over the corners of issue #3's grid: certified width per point.

Run: ``python bench/pld_accuracy_sweep.py`` (a few minutes). Prints [lower, upper], the RDP value,
the relative width (upper - lower) / upper and OK/WIDE against the 1e-3 target, and the time.
"""
import time, itertools, math
from sgmfast import pld, rdp
for q, s, T, d in itertools.product([1e-5, 1e-3, 0.1, 1.0], [0.4, 2.0, 50.0], [1, 1000, 10**6], [1e-12, 1e-3]):
    t = time.perf_counter()
    try:
        b = pld.epsilon(s, q, T, d)
        r = rdp.epsilon(s, q, T, d)
        gap = (b.upper - b.lower) / b.upper if b.upper > 0 else 0.0
        print(f"q={q:g} s={s:g} T={T} d={d:g} [{b.lower:.6g}, {b.upper:.6g}] rdp={r:.6g} gap={gap:.2e} {'OK' if gap <= 1e-3 else 'WIDE'} {time.perf_counter()-t:.2f}s", flush=True)
    except Exception as e:
        print(f"q={q:g} s={s:g} T={T} d={d:g} ERROR {type(e).__name__}: {e} {time.perf_counter()-t:.2f}s", flush=True)
