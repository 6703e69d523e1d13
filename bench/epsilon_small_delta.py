"""eps(δ) at small δ and small q, where a few far-tail steps set eps (the tail-event sum's regime):
random Poisson points (σ 0.4-4, q 1e-5-0.05, T 2-1e5, δ 1e-40-1e-5, a quarter replace-one),
bench/README "Stop 68".

    python bench/epsilon_small_delta.py N SEED

Prints a line a point (the eps interval, its relative width, work units) and a summary: how many
are wider than the accuracy (1e-3), the seconds and the units of all of them.  Run it on two trees
(``PYTHONPATH``) to compare them on the same points.
"""
import sys
import time

import numpy as np

from sgmfast import pld
from sgmfast._work import UNITS_PER_SECOND, metered


def points(n, seed):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        yield (float(np.exp(rng.uniform(np.log(0.4), np.log(4)))), float(np.exp(rng.uniform(np.log(1e-5), np.log(0.05)))),
               int(np.exp(rng.uniform(np.log(2), np.log(1e5)))), float(np.exp(rng.uniform(np.log(1e-40), np.log(1e-5)))),
               "replace_one" if rng.uniform() < 0.25 else "add_remove")


def main():
    n, seed = int(sys.argv[1]), int(sys.argv[2])
    widths, seconds, units = [], 0.0, 0.0
    for s, q, t, d, rel in points(n, seed):
        start = time.perf_counter()
        with metered() as m:
            e = pld.epsilon(s, q, t, d, relation=rel)
        seconds += time.perf_counter() - start
        units += m.units / UNITS_PER_SECOND
        widths.append(e.width)
        print(f"σ {s:.4g} q {q:.3g} T {t} {rel:11s} δ {d:.3g}: [{float(e.lower):.8g}, {float(e.upper):.8g}] "
              f"{e.width:.2g}  {m.units / UNITS_PER_SECOND:.2f} u", flush=True)
    w = np.array(widths)
    print(f"\n{n} points: wider than 1e-3 {int((w > 1e-3).sum())}, wider than 1e-2 {int((w > 1e-2).sum())}, "
          f"median width {float(np.median(w)):.2g}; {seconds:.1f} s, {units:.1f} units")


if __name__ == "__main__":
    main()
