"""Balls-in-bins (random allocation, k = 1) at random points of issue #31's range: sigma
log-uniform in [0.4, 10], t log-uniform in [2, 10^4], epochs log-uniform in [1, 200], δ
log-uniform in [1e-12, 1e-2].  Each point: the certified eps(δ) interval, its relative width,
the work it counted (seconds of ``sgmfast._work`` units: what decides how far it refines, no
clock) and its cold time; then δ(ε) at both ends, which must not contradict it (δ's lower end at
the upper ε above δ, or its upper end at the lower ε below it) and should confirm it (its upper
end at the upper ε within 1e-3 of δ).  Flags: WIDE (width > 1e-3), SLOW (> 2 s), CONTRADICT,
LOOSE_D.

    python bench/allocation_random.py [seed] [points]     (defaults 1 and 40)

The output of seeds 1-6 is in ``allocation_random.out``.
"""

import math
import random
import sys
import time

from sgmfast._work import UNITS_PER_SECOND, metered
from sgmfast.pld import allocation
from sgmfast.pld.common import STEP_CACHE


def point(rng):
    s = math.exp(rng.uniform(math.log(0.4), math.log(10)))
    t = int(round(math.exp(rng.uniform(math.log(2), math.log(1e4)))))
    e = int(round(math.exp(rng.uniform(0, math.log(200)))))
    return s, t, e, 10 ** rng.uniform(-12, -2)


def row(s, t, e, d):
    STEP_CACHE.clear()
    t0 = time.perf_counter()
    with metered() as meter:
        b = allocation.epsilon(s, t, t * e, d)
    dt = time.perf_counter() - t0
    w = (b.upper - b.lower) / b.upper if b.upper > 0 else 0.0
    flags = ("WIDE " if w > 1e-3 else "") + ("SLOW " if dt > 2 else "")
    if 0 < b.upper < math.inf:
        STEP_CACHE.clear()
        du = allocation.delta(s, t, t * e, b.upper)
        dl = allocation.delta(s, t, t * e, b.lower) if b.lower > 0 else None
        if du.lower > d * (1 + 1e-9) or (dl is not None and dl.upper < d * (1 - 1e-9)):
            flags += "CONTRADICT "
        if du.upper > d * (1 + 1e-3):
            flags += f"LOOSE_D({du.upper / d:.4f}) "
    return (f"| {s:.4g} | {t} | {e} | {d:.3g} | [{b.lower:.6g}, {b.upper:.6g}] | {w:.2e} | "
            f"{meter.units / UNITS_PER_SECOND:.2f} | {dt:.2f} s | {flags.strip()} |")


if __name__ == "__main__":
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    rng = random.Random(seed)
    allocation.epsilon(1.0, 10, 10, 1e-5)  # (compile)
    allocation.delta(1.0, 10, 10, 1.0)
    print(f"seed {seed}\n\n| σ | t | epochs | δ | ε(δ) | width | work | time | flags |\n|---|---|---|---|---|---|---|---|---|")
    for _ in range(count):
        print(row(*point(rng)), flush=True)
