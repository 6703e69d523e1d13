"""Fixed-size ε(δ) at random points of the whole domain: each interval's width and its work, to
compare two trees (bench/README, "Stop 60": the joint minorant of the lower bound).

    PYTHONPATH=<tree> python bench/fixed_size_widths.py SEED N

Draws σ log-uniform in [0.5, 8], q log-uniform in [1e-6, 0.5], T log-uniform in [1, 1e5] and δ
log-uniform in [1e-14, 1e-2]; prints each point's interval, relative width, work units
(``sgmfast._work``) and time, then the median width, the count over 1e-3 and the summed work.
"""
import math
import random
import sys
import time

import numpy as np

from sgmfast import pld
from sgmfast._work import UNITS_PER_SECOND, metered


def main(seed, n):
    rng = random.Random(seed)
    lu = lambda a, b: math.exp(rng.uniform(math.log(a), math.log(b)))  # noqa: E731
    widths, work = [], 0.0
    for i in range(n):
        s, q, t, d = lu(0.5, 8.0), lu(1e-6, 0.5), max(1, int(lu(1, 1e5))), lu(1e-14, 1e-2)
        t0 = time.time()
        with metered() as m:
            b = pld.epsilon(s, q, t, d, sampler="fixed_size")
        w = (b.upper - b.lower) / b.upper if b.upper > 0 else 0.0
        widths.append(w)
        work += m.units / UNITS_PER_SECOND
        print(f"{i:3d} σ {s:.4g} q {q:.3g} T {t} δ {d:.3g}: [{b.lower:.7g}, {b.upper:.7g}] {w:.1e} "
              f"{m.units / UNITS_PER_SECOND:.2f} Gu {time.time() - t0:.1f} s", flush=True)
    print(f"median width {np.median(widths):.2e}, over 1e-3: {sum(w > 1e-3 for w in widths)} of {n}, "
          f"work {work:.1f} Gu")


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
