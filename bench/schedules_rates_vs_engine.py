"""Rate chords and the statistic's lower bound (``sgmfast.pld.schedule_rates``) against the exact
engine, on random schedules the exact engine can still compose (bench/README, "Stop 57").

    python bench/schedules_rates_vs_engine.py SEED N [ACCURACY]

Each schedule: 20-110 distinct rates in [q0, q0 x U(1.05, 3)], q0 log-uniform in [1e-4, 0.3],
among 1-3 noise levels log-uniform in [0.5, 4], 1-200 steps each; δ log-uniform in [1e-12, 1e-2].
The rate engine at ACCURACY (default 1e-3), the exact engine at 1e-3.  Checks that the two
certified eps intervals meet, and that the two δ intervals at the middle of the exact eps
interval meet.  Prints a line per schedule, then the widths' median and how many passed 1e-3,
and the number of failures (intervals that do not meet).
"""

from __future__ import annotations

import math
import sys
import time

import numpy as np

from sgmfast.pld.engine import Engine
from sgmfast.pld.schedule_rates import RateEngine


def schedule(rng):
    nq, ns = int(rng.integers(20, 110)), int(rng.integers(1, 4))
    sigs = np.exp(rng.uniform(np.log(0.5), np.log(4), ns))
    qlo = math.exp(rng.uniform(math.log(1e-4), math.log(0.3)))
    qs = rng.uniform(qlo, qlo * rng.uniform(1.05, 3), nq)
    sched = [(float(sigs[i % ns]), float(min(q, 0.95)), int(rng.integers(1, 200))) for i, q in enumerate(qs)]
    return sched, 10 ** rng.uniform(-12, -2)


def main(seed: int, n: int, accuracy: float) -> int:
    rng = np.random.default_rng(seed)
    bad, widths = 0, []
    for case in range(n):
        sched, delta = schedule(rng)
        t = time.perf_counter()
        r_lo, r_up, _ = RateEngine(sched, accuracy, 4.0).epsilon(delta)
        t_rate = time.perf_counter() - t
        e_lo, e_up, _ = Engine(sched, 1e-3).epsilon(delta)
        ok = r_lo <= e_up * (1 + 1e-9) + 1e-12 and e_lo <= r_up * (1 + 1e-9) + 1e-12
        eps = np.array([max(0.5 * (e_lo + e_up), 1e-3)])
        d_lo, d_up = RateEngine(sched, accuracy, 4.0).delta(eps)
        x_lo, x_up = Engine(sched, 1e-3).delta(eps)
        ok_d = d_lo[0] <= x_up[0] * (1 + 1e-9) + 1e-300 and x_lo[0] <= d_up[0] * (1 + 1e-9) + 1e-300
        bad += not (ok and ok_d)
        w = (r_up - r_lo) / r_up if r_up > 0 and math.isfinite(r_up) else math.inf
        widths.append(w)
        print(f"{case} sigmas {len({s for s, _, _ in sched})} rates {len(sched)} q0 {min(q for _, q, _ in sched):.2e} "
              f"δ {delta:.1e}: rates [{r_lo:.6g}, {r_up:.6g}] ({w:.1e}, {t_rate:.2f} s), exact [{e_lo:.6g}, {e_up:.6g}]; "
              f"δ at {eps[0]:.4g}: [{d_lo[0]:.4g}, {d_up[0]:.4g}] vs [{x_lo[0]:.4g}, {x_up[0]:.4g}] "
              f"{'ok' if ok and ok_d else 'FAIL'}", flush=True)
    w = np.array(widths)
    print(f"widths: median {np.median(w):.1e}, over 1e-3: {int(np.sum(w > 1e-3))} of {n}")
    print(f"failures: {bad}")
    return bad


if __name__ == "__main__":
    sys.exit(1 if main(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]) if len(sys.argv) > 3 else 1e-3) else 0)
