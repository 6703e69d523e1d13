"""Cross-check of the certified PLD interval against dp_accounting's PLD at random points.

Run: ``python bench/pld_vs_dp_accounting.py [n] [seed]`` (needs the ``peers`` extra; minutes).
dp_accounting's connect-the-dots PLD with ``pessimistic_estimate=True`` gives an ε that is never
below the truth, with ``False`` (privacy buckets, often 0) one that is never above it (up to its own truncation and FFT
error), so sgmfast's lower bound must not exceed the first and its upper bound must not be below
the second. Points are drawn log-uniformly with T >= 4096 (where the two-stage composition runs).
"""
import math
import sys
import time

import numpy as np
from dp_accounting.pld import privacy_loss_distribution as pl

from sgmfast import pld

n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
rng = np.random.default_rng(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
bad = 0
for _ in range(n):
    q = float(10 ** rng.uniform(-5, -1))
    s = float(10 ** rng.uniform(math.log10(0.4), math.log10(5)))
    t = int(round(10 ** rng.uniform(math.log10(4096), 6)))
    d = float(10 ** rng.uniform(-12, -4))
    ref = []
    for pessimistic in (True, False):
        one = pl.from_gaussian_mechanism(s, pessimistic_estimate=pessimistic, value_discretization_interval=1e-4,
                                         sampling_prob=q, use_connect_dots=pessimistic)
        ref.append(one.self_compose(t).get_epsilon_for_delta(d))
    t0 = time.perf_counter()
    b = pld.epsilon(s, q, t, d)
    ok = b.lower <= ref[0] * (1 + 1e-9) and b.upper >= ref[1] * (1 - 1e-9)
    note = ""
    if not ok:
        # dp_accounting's estimate is pessimistic only up to its own discretisation and truncation
        # (dp_accounting 0.6.0 at 1e-4 and delta ~ 1e-12 fell below a finer run of itself):
        # ask it again on a 3e-5 grid before calling the point inconsistent
        fine = pl.from_gaussian_mechanism(s, pessimistic_estimate=True, value_discretization_interval=3e-5,
                                          sampling_prob=q, use_connect_dots=True)
        coarse, ref[0] = ref[0], fine.self_compose(t).get_epsilon_for_delta(d)
        ok = b.lower <= ref[0] * (1 + 1e-9)
        note = f" (on a 3e-5 grid; {coarse:.7g} on 1e-4)"
    bad += not ok
    print(f"q={q!r} s={s!r} T={t} d={d!r} sgmfast [{b.lower:.7g}, {b.upper:.7g}] "
          f"dp_accounting opt {ref[1]:.7g} pess {ref[0]:.7g}{note} {'OK' if ok else 'INCONSISTENT'} "
          f"{time.perf_counter() - t0:.2f}s", flush=True)
print(f"{n - bad} of {n} consistent")
