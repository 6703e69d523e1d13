"""The lattice compositions in chunks of points against the same compositions in one table
(``schedule_compose.CHUNK_BYTES``): random noise-level schedules, each answered twice in one
process -- chunks of at most six points (``_chunks`` given 6 whatever the table's size) and one
table -- with the caches cleared between.  Both are certified, so their intervals must meet; chunking only re-orders products and
telescopes the error bound, so they should agree closely.

    python bench/schedule_chunks_fuzz.py N SEED [--rates] > bench/schedule_chunks_fuzz.out

``--rates``: batch-size schedules instead (one noise level, a rate of its own at every step: the
rate chords' lattices, ``schedule_rates``, whose statistics' laws are composed the same way).
"""

from __future__ import annotations

import sys

import numpy as np

from sgmfast import pld
from sgmfast.pld import common
from sgmfast.pld import schedule_compose as sc


_CHUNKS = sc._chunks
PER = 6


def answer(sched, query, x, chunked):
    sc._chunks = (lambda jdx, per: _CHUNKS(jdx, max(PER, jdx.shape[1]))) if chunked else _CHUNKS
    common.STEP_CACHE.clear()
    acc = pld.PLDAccountant()
    for s, q, c in sched:
        acc.step(s, q, c)
    return acc.delta(x) if query == "delta" else acc.epsilon(x)


def main() -> None:
    n, seed = int(sys.argv[1]), int(sys.argv[2])
    rates = "--rates" in sys.argv
    rng = np.random.default_rng(seed)
    print(f"# bench/schedule_chunks_fuzz.py {n} {seed}{' --rates' if rates else ''}: chunks of {PER} points "
          "against one table")
    print("# case  sigma range     q        steps/level levels query x          chunked [lower, upper]       "
          "one table [lower, upper]      rel diff lower/upper")
    worst, bad = 0.0, 0
    for i in range(n):
        lo = 10 ** rng.uniform(-0.3, 0.4)
        hi = lo * 10 ** rng.uniform(0.02, 0.3)
        q = 10 ** rng.uniform(-4, -1)
        levels = int(rng.integers(140, 400))
        count = int(rng.integers(1, 20))
        if rates:
            sched = [(lo, float(r), count) for r in q * 10 ** rng.uniform(0, 0.5, levels)]
        else:
            sched = [(float(s), q, count) for s in lo * (hi / lo) ** rng.random(levels)]
        query = "delta" if rng.random() < 0.5 else "epsilon"
        x = float(10 ** rng.uniform(-1.5, 0.5)) if query == "delta" else float(10 ** rng.uniform(-12, -4))
        a = answer(sched, query, x, True)
        b = answer(sched, query, x, False)
        meet = a.lower <= b.upper * (1 + 1e-12) and b.lower <= a.upper * (1 + 1e-12)
        bad += not meet
        rel = [abs(u - v) / max(abs(v), 1e-300) for u, v in ((a.lower, b.lower), (a.upper, b.upper))]
        worst = max(worst, *rel)
        print(f"{i:4d}  [{lo:.3f}, {hi:.3f}] {q:9.2e} {count:5d} {levels:6d}  {query:7s} {x:9.3e}  "
              f"[{a.lower:.8g}, {a.upper:.8g}]".ljust(96) + f" [{b.lower:.8g}, {b.upper:.8g}]".ljust(32)
              + f" {rel[0]:.1e}/{rel[1]:.1e}" + ("" if meet else "  DISJOINT"), flush=True)
    print(f"# {n} cases: {bad} disjoint, largest relative difference {worst:.2e}")


if __name__ == "__main__":
    main()
