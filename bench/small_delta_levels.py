"""Random noise-level schedules at small δ (the groups' sandwich beside the mixtures, ``schedules``):
each answer against the exact composition of its 4-group brackets (``schedule_groups.brackets``:
the upper schedule at each group's least sigma is more revealing than the run, the lower at its
largest sigma less), which hold the true eps between them: the answer must meet
[lower of the lower bracket, upper of the upper bracket].

    python bench/small_delta_levels.py N SEED > out

Prints per case the answer, its width, the brackets' interval, the query's time and work units.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from sgmfast import pld
from sgmfast._work import UNITS_PER_SECOND, metered
from sgmfast.pld.engine import Engine
from sgmfast.pld.schedule_groups import brackets


def main() -> None:
    n, seed = int(sys.argv[1]), int(sys.argv[2])
    rng = np.random.default_rng(seed)
    print(f"# bench/small_delta_levels.py {n} {seed}")
    print("# case  sigma range      q        levels count  δ          answer [lower, upper]        width    "
          "brackets [lower, upper]      s     units")
    bad = wide = 0
    for i in range(n):
        lo = 10 ** rng.uniform(-0.25, 0.3)
        hi = lo * 10 ** rng.uniform(0.02, 0.25)
        q = 10 ** rng.uniform(-5, -2)
        levels = int(rng.integers(50, 1500))
        count = int(rng.integers(1, 30))
        delta = 10 ** rng.uniform(-15, -8)
        sched = [(float(s), q, count) for s in lo * (hi / lo) ** rng.random(levels)]
        acc = pld.PLDAccountant()
        for s, qq, c in sched:
            acc.step(s, qq, c)
        t = time.process_time()
        with metered() as m:
            b = acc.epsilon(delta)
        t = time.process_time() - t
        up_s, lo_s = brackets(sched, 4)
        ref_up = Engine(up_s, 1e-3).epsilon(delta)[1]
        ref_lo = Engine(lo_s, 1e-3).epsilon(delta)[0]
        ok = b.lower <= ref_up * (1 + 1e-12) and ref_lo <= b.upper * (1 + 1e-12)
        bad += not ok
        wide += not b.width <= 1e-3
        print(f"{i:4d}  [{lo:.3f}, {hi:.3f}] {q:9.2e} {levels:5d} {count:4d}  {delta:9.2e}  "
              f"[{b.lower:.6g}, {b.upper:.6g}]".ljust(80) + f" {b.width:8.1e}  [{ref_lo:.6g}, {ref_up:.6g}]".ljust(34)
              + f" {t:5.2f} {m.units / UNITS_PER_SECOND:5.2f}" + ("" if ok else "  OUTSIDE"), flush=True)
    print(f"# {n} cases: {bad} outside their brackets, {wide} wider than 1e-3")


if __name__ == "__main__":
    main()
