"""eps(δ) at random points where few steps are sampled and δ is small (bench/README, "Stop 64").

    PYTHONPATH=<tree> python bench/rare_sampling_sweep.py N SEED [DLO DHI] [--domain | --replace] [--delta]
    PYTHONPATH=<tree> python bench/rare_sampling_sweep.py --at EPS_OUTPUT

Draws q log-uniform in [1e-5, 10^-0.5], sigma in [0.4, 5], T in [1, 1e6] (integer) and δ in
[10^DLO, 10^DHI] (default -15, -11); ``--domain`` draws instead over the whole of issue #3's
range (q in [1e-5, 1], sigma in [0.3, 50], δ in [10^DLO, 10^DHI], default -12, -3) with one
point in five replace-one; ``--replace``: every point replace-one.  ``--delta``: δ(eps) at the
same draws, eps = 10^x with x uniform in [DLO, DHI] instead (default -2, 1; ``met`` there: the
engine's resolution, lower(eps) >= upper(eps + accuracy * max(eps, 0.01)), read off the
interval).  ``--at``: δ at the upper ends of an eps(δ) run's output (its points' δ where that is
small: the lower δ must not pass it).  One JSON line a point (the interval, work units,
seconds), then a summary: points wider than the accuracy, units and seconds in all.  Run it on
two trees and compare the lines point by point: intervals must meet, and the same seed gives
the same points.
"""
import json
import math
import sys
import time

import numpy as np

from sgmfast import pld
from sgmfast._types import Bounds
from sgmfast._work import UNITS_PER_SECOND, metered


def points(n, seed, dlo, dhi, domain, replace=False):
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
        yield i, q, s, t, d, "replace_one" if replace else rel


def at_upper_ends(path):
    """The points of an eps(δ) output, each at its upper end: (i, q, sigma, T, eps, relation, δ)."""
    with open(path) as fh:
        for line in fh:
            if line.startswith("{"):
                p = json.loads(line)
                if 0.0 < p["up"] < math.inf:
                    yield p["i"], p["q"], p["s"], p["t"], p["up"], p["rel"], p["d"]


def main(argv):
    if argv[0] == "--at":  # δ at the upper ends of an eps(δ) output: at most that δ, consistently
        return sweep(list(at_upper_ends(argv[1])), True, f"{argv[1]}'s upper ends")
    domain, delta, replace = "--domain" in argv, "--delta" in argv, "--replace" in argv
    args = [a for a in argv if a not in ("--domain", "--delta", "--replace")]
    n, seed = int(args[0]), int(args[1])
    default = (-2.0, 1.0) if delta else ((-12.0, -3.0) if domain else (-15.0, -11.0))
    dlo, dhi = (float(args[2]), float(args[3])) if len(args) > 3 else default
    sweep([(*p, None) for p in points(n, seed, dlo, dhi, domain, replace)], delta,
          f"seed {seed}{' (replace-one)' if replace else ''}")


def sweep(pts, delta, what):
    wide, units, secs, above = 0, 0.0, 0.0, 0
    for i, q, s, t, d, rel, target in pts:
        t0 = time.perf_counter()
        with metered() as m:
            if delta:  # (eps and eps + h in one call, h = accuracy * max(eps, 0.01): the engine's own resolution)
                two = pld.delta(s, q, t, np.array([d, d + 1e-3 * max(d, 1e-2)]), relation=rel)
                b, met = Bounds(float(two.lower[0]), float(two.upper[0])), bool(two.lower[0] >= two.upper[1])
            else:
                b = pld.epsilon(s, q, t, d, relation=rel)
                met = bool(b.met)
        sec = time.perf_counter() - t0
        u = m.units / UNITS_PER_SECOND
        wide += not met
        units += u
        secs += sec
        above += target is not None and b.lower > target
        print(json.dumps(dict(i=i, q=q, s=s, t=t, d=d, rel=rel, lo=float(b.lower), up=float(b.upper), met=met,
                              units=round(u, 4), sec=round(sec, 3))), flush=True)
    tail = "" if pts[0][-1] is None else f"; {above} lower δ above the eps query's δ"
    print(f"# {len(pts)} points, {what}{' (delta)' if delta else ''}: {wide} wider than the accuracy; "
          f"{units:.1f} units, {secs:.1f} s{tail}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
