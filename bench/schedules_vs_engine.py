"""Lattice mixtures (``sgmfast.pld.schedule_mix``) against the exact engine, on random schedules
the exact engine can still compose (bench/README, "Per-step schedules certified to 1e-3").

    python bench/schedules_vs_engine.py SEED N

Each schedule: 30-110 distinct sigma in [0.3, 15], one or two q in [1e-4, 0.5], 1-200 steps each,
δ in [1e-12, 1e-2]; the mixtures at accuracy 1e-2 (a coarse lattice), the exact engine at 1e-3.
Checks that the two certified eps intervals overlap and that the mixtures' δ is above the target
just below the exact lower bound and at most the target at the exact upper bound.  Prints a line
per schedule and the number of failures.
"""

from __future__ import annotations

import math
import sys
import time

import numpy as np

from sgmfast.pld.engine import Engine
from sgmfast.pld.schedule_engine import MixEngine


def main(seed: int, n: int) -> int:
    rng = np.random.default_rng(seed)
    bad = 0
    for _ in range(n):
        nd = int(rng.integers(30, 110))
        lo_s = float(10 ** rng.uniform(-0.5, 0.7))
        hi_s = lo_s * float(rng.uniform(1.02, 3.0))
        qs = [float(10 ** rng.uniform(-4, -0.3)) for _ in range(int(rng.integers(1, 3)))]
        reps = int(rng.integers(1, 200))
        sched = [(float(s), qs[i % len(qs)], int(rng.integers(1, reps + 1)))
                 for i, s in enumerate(rng.uniform(lo_s, hi_s, nd))]
        delta = float(10 ** rng.uniform(-12, -2))
        t = time.perf_counter()
        m = MixEngine(sched, 1e-2, 4.0)
        m_lo, m_up, _ = m.epsilon(delta)
        t_mix = time.perf_counter() - t
        e_lo, e_up, _ = Engine(sched, 1e-3).epsilon(delta)
        ok = m_lo <= e_up * (1 + 1e-12) and e_lo <= m_up * (1 + 1e-12)
        if e_lo > 0 and math.isfinite(e_up):
            d_lo, d_up = m.delta(np.array([e_lo * (1 - 1e-9), e_up]))
            ok = ok and d_up[0] >= delta and d_lo[1] <= delta
        bad += not ok
        print(f"{'OK ' if ok else 'BAD'} {nd} distinct, T={sum(c for *_, c in sched)}, sigma [{lo_s:.2f}, {hi_s:.2f}], "
              f"q {['%.2g' % q for q in qs]}, δ {delta:.1e}: mixtures [{m_lo:.6g}, {m_up:.6g}] ({t_mix:.1f} s), "
              f"exact [{e_lo:.6g}, {e_up:.6g}]", flush=True)
    print("failures:", bad)
    return bad


if __name__ == "__main__":
    sys.exit(1 if main(int(sys.argv[1]), int(sys.argv[2])) else 0)
