"""Balls-in-bins (random allocation, k = 1) across issue #31's range: certified eps(delta) and
delta(eps) intervals, their relative widths, the work each query counted and the time of a cold
query (the one-step cache cleared); with ``--peers``, pld-accounting's eps range beside them.

    python bench/allocation_range.py [--peers] [--only 0,2,5]

Widths and work depend on no clock (the refinement budget counts work); the times do, so say
what else ran.  pld-accounting (``pip install pld-accounting``) takes tens of seconds a point.
"""

import sys
import time

from sgmfast._work import UNITS_PER_SECOND, metered
from sgmfast.pld import allocation
from sgmfast.pld.common import STEP_CACHE

# (sigma, steps per epoch t, epochs, delta)
POINTS = [(1.1, 234, 60, 1e-5), (0.8, 100, 10, 1e-5), (2.0, 1000, 5, 1e-5), (0.7, 20, 1, 1e-5), (0.5, 3, 1, 1e-5),
          (0.7, 3, 1, 1e-10), (0.4, 2, 1, 1e-12), (0.4, 10000, 1, 1e-5), (0.4, 100, 200, 1e-2),
          (10.0, 10000, 200, 1e-12), (10.0, 2, 1, 1e-12), (0.6, 5, 50, 1e-8), (3.0, 10000, 100, 1e-6),
          (1.0, 1000, 200, 1e-12), (0.5, 50, 20, 1e-3), (2.0, 1000, 1, 1e-12), (19.63, 1446, 42, 2.54e-9),
          (0.45, 1065, 10, 5.9e-9), (0.631, 140, 41, 4.9e-11),
          # the far corner (least sigma, most epochs, least delta) at every scale of t, and its opposite in sigma
          (0.4, 2, 200, 1e-12), (0.4, 3, 200, 1e-12), (0.4, 10, 200, 1e-12), (0.4, 100, 200, 1e-12),
          (0.4, 1000, 200, 1e-12), (0.4, 10000, 200, 1e-12), (0.42, 10000, 200, 1e-12), (10.0, 2, 200, 1e-12),
          # the far corner's t and δ with few epochs (stop 53: 2.7e-2, 6.7e-3 and 1.2e-3 wide, as before it)
          (0.4, 10000, 1, 1e-12), (0.4, 10000, 5, 1e-12), (0.4, 10000, 30, 1e-12),
          # found by stop 54's sweeps (before it: 1.8e-2, 1.06e-3, 1.01e-3 wide; 1.9 s, 0.37 s after)
          (1.0, 554, 12, 1e-10), (0.9909, 5319, 4, 4e-12), (0.8573, 554, 15, 6.18e-10), (9.5017, 24, 11, 1.09e-9)]


def _cold(fn):
    STEP_CACHE.clear()
    t0, c0 = time.perf_counter(), time.process_time()
    with metered() as meter:
        out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0, meter.units / UNITS_PER_SECOND


def _peer(s, t, e, d):
    from PLD_accounting import gaussian_allocation_epsilon_range

    t0 = time.perf_counter()
    up, lo = gaussian_allocation_epsilon_range(delta=d, sigma=s, num_steps=t, num_selected=1, num_epochs=e)
    return f" [{lo:.6g}, {up:.6g}] ({(up - lo) / up:.2e}) {time.perf_counter() - t0:.1f} s |"


if __name__ == "__main__":
    peers = "--peers" in sys.argv
    allocation.epsilon(1.0, 10, 10, 1e-5)  # (compile)
    allocation.delta(1.0, 10, 10, 1.0)
    print("| σ | t | epochs | δ | ε(δ) [lower, upper] (relative width) | time, CPU, work | δ(ε) at that upper ε "
          "(relative width) | time |" + (" pld-accounting ε (width) time |" if peers else ""))
    print("|---|---|---|---|---|---|---|---|" + ("---|" if peers else ""))
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    chosen = [POINTS[int(i)] for i in only.split(",")] if only else POINTS
    for s, t, e, d in chosen:
        b, dt, cpu, work = _cold(lambda: allocation.epsilon(s, t, t * e, d))
        w = (b.upper - b.lower) / b.upper if b.upper > 0 else 0.0
        row = f"| {s:g} | {t} | {e} | {d:g} | [{b.lower:.6g}, {b.upper:.6g}] ({w:.2e}) | {dt:.2f} s, {cpu:.2f} s, {work:.2f} |"
        if 0 < b.upper < float("inf"):
            db, dt2, _, _ = _cold(lambda: allocation.delta(s, t, t * e, float(b.upper)))
            wd = (db.upper - db.lower) / db.upper if db.upper > 0 else 0.0
            row += f" [{db.lower:.4g}, {db.upper:.4g}] ({wd:.2e}) | {dt2:.2f} s |"
        else:
            row += " - | - |"
        if peers:
            row += _peer(s, t, e, d)
        print(row, flush=True)
