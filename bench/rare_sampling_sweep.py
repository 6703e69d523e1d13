"""eps(δ) at random points where few steps are sampled and δ is small (bench/README, "Stop 64").

    PYTHONPATH=<tree> python bench/rare_sampling_sweep.py N SEED [DLO DHI] [--domain]

Draws q log-uniform in [1e-5, 10^-0.5], sigma in [0.4, 5], T in [1, 1e6] (integer) and δ in
[10^DLO, 10^DHI] (default -15, -11); ``--domain`` draws instead over the whole of issue #3's
range (q in [1e-5, 1], sigma in [0.3, 50], δ in [10^DLO, 10^DHI], default -12, -3) with one
point in five replace-one.  One JSON line a point (the interval, work units, seconds), then a
summary: points wider than the accuracy, units and seconds in all.  Run it on two trees and
compare the lines point by point: intervals must meet, and the same seed gives the same points.
"""
import json
import math
import sys
import time

import numpy as np

from sgmfast import pld
from sgmfast._work import UNITS_PER_SECOND, metered


def points(n, seed, dlo, dhi, domain):
    rng = np.random.default_rng(seed)
    for i in range(n):
        if domain:
            q = float(10 ** rng.uniform(-5, 0))
            s = float(10 ** rng.uniform(math.log10(0.3), math.log10(50)))
        else:
            q = float(10 ** rng.uniform(-5, -0.5))
            s = float(10 ** rng.uniform(math.log10(0.4), math.log10(5)))
        t = int(round(10 ** rng.uniform(0, 6)))
        d = float(10 ** rng.uniform(dlo, dhi))
        rel = ("replace_one" if rng.random() < 0.2 else "add_remove") if domain else "add_remove"
        yield i, q, s, t, d, rel


def main(argv):
    domain = "--domain" in argv
    args = [a for a in argv if a != "--domain"]
    n, seed = int(args[0]), int(args[1])
    dlo, dhi = (float(args[2]), float(args[3])) if len(args) > 3 else ((-12.0, -3.0) if domain else (-15.0, -11.0))
    wide, units, secs = 0, 0.0, 0.0
    for i, q, s, t, d, rel in points(n, seed, dlo, dhi, domain):
        t0 = time.perf_counter()
        with metered() as m:
            b = pld.epsilon(s, q, t, d, relation=rel)
        sec = time.perf_counter() - t0
        u = m.units / UNITS_PER_SECOND
        wide += not b.met
        units += u
        secs += sec
        print(json.dumps(dict(i=i, q=q, s=s, t=t, d=d, rel=rel, lo=float(b.lower), up=float(b.upper), met=bool(b.met),
                              units=round(u, 4), sec=round(sec, 3))), flush=True)
    print(f"# {n} points, seed {seed}: {wide} wider than the accuracy; {units:.1f} units, {secs:.1f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
