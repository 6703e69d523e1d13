"""eps(δ) of schedules in a few segments at small δ (bench/README, "Stop 65").

    PYTHONPATH=<tree> python bench/segments_sweep.py N SEED

Draws N schedules of 2-5 entries (σ log-uniform in [0.5, 3], q log-uniform in [1e-5, 0.1], T
log-uniform in [10, 10^5.5] steps each), δ log-uniform in [1e-15, 1e-8], one in five replace-one;
one ``PLDAccountant`` per schedule (its entries in ``step`` calls), default accuracy.  One JSON
line a point: the schedule, the interval, ``met``, its relative width, counted work units and CPU
seconds.  Run it on two trees and compare the lines point by point (``/tmp``-style comparisons in
bench/README): intervals must meet, and the same seed gives the same points.
"""
import json
import math
import sys
import time

import numpy as np

from sgmfast import pld
from sgmfast._work import UNITS_PER_SECOND, metered


def points(n, seed):
    rng = np.random.default_rng(seed)
    for i in range(n):
        segs = []
        for _ in range(int(rng.integers(2, 6))):
            s = float(10 ** rng.uniform(math.log10(0.5), math.log10(3)))
            q = float(10 ** rng.uniform(-5, -1))
            t = int(round(10 ** rng.uniform(1, 5.5)))
            segs.append((s, q, t))
        d = float(10 ** rng.uniform(-15, -8))
        rel = "replace_one" if rng.uniform() < 0.2 else "add_remove"
        yield i, segs, d, rel


def main():
    n, seed = int(sys.argv[1]), int(sys.argv[2])
    for i, segs, d, rel in points(n, seed):
        acc = pld.PLDAccountant(relation=rel)
        for s, q, t in segs:
            acc.step(s, q, t)
        t0 = time.process_time()
        with metered() as m:
            r = acc.epsilon(d)
        print(json.dumps({"i": i, "segs": segs, "d": d, "rel": rel, "lo": r.lower, "up": r.upper, "met": bool(r.met),
                          "w": (r.upper - r.lower) / r.upper if r.upper > 0 else 0.0,
                          "units": round(m.units / UNITS_PER_SECOND, 3), "sec": round(time.process_time() - t0, 2)}),
              flush=True)


if __name__ == "__main__":
    main()
