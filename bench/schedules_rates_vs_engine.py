"""Rate chords and the statistic's lower bound (``sgmfast.pld.schedule_rates``), or their product with
the noise-level mixtures (``schedule_product``, ``--product``), against the exact engine, on random
schedules the exact engine can still compose (bench/README, "Stop 57" and "Stop 58").

    python bench/schedules_rates_vs_engine.py SEED N [ACCURACY] [--product]

Each schedule: 20-110 distinct rates in [q0, q0 x U(1.05, 3)], q0 log-uniform in [1e-4, 0.3],
among 1-3 noise levels log-uniform in [0.5, 4] (``--product``: 40-130 steps, each with its own
noise level in [s0, s0 x U(1.05, 2)], s0 log-uniform in [0.5, 4]), 1-200 steps each; δ
log-uniform in [1e-12, 1e-2].  The rate (product) engine at ACCURACY (default 1e-3), the exact
engine at 1e-3.  Checks that the two
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
from sgmfast.pld.schedule_product import ProductEngine
from sgmfast.pld.schedule_rates import RateEngine


def schedule(rng, product=False):
    if product:
        n = int(rng.integers(40, 131))
        s0 = math.exp(rng.uniform(math.log(0.5), math.log(4)))
        sigs = rng.uniform(s0, s0 * rng.uniform(1.05, 2), n)
    else:
        n, ns = int(rng.integers(20, 110)), int(rng.integers(1, 4))
        levels = np.exp(rng.uniform(np.log(0.5), np.log(4), ns))
        sigs = levels[np.arange(n) % ns]
    qlo = math.exp(rng.uniform(math.log(1e-4), math.log(0.3)))
    qs = rng.uniform(qlo, qlo * rng.uniform(1.05, 3), n)
    sched = [(float(s), float(min(q, 0.95)), int(rng.integers(1, 200))) for s, q in zip(sigs, qs)]
    return sched, 10 ** rng.uniform(-12, -2)


def main(seed: int, n: int, accuracy: float, product: bool = False) -> int:
    rng = np.random.default_rng(seed)
    bad, widths = 0, []
    kind = ProductEngine if product else RateEngine
    for case in range(n):
        sched, delta = schedule(rng, product)
        t = time.perf_counter()
        r_lo, r_up, _ = kind(sched, accuracy, 4.0).epsilon(delta)
        t_rate = time.perf_counter() - t
        e_lo, e_up, _ = Engine(sched, 1e-3).epsilon(delta)
        ok = r_lo <= e_up * (1 + 1e-9) + 1e-12 and e_lo <= r_up * (1 + 1e-9) + 1e-12
        eps = np.array([max(0.5 * (e_lo + e_up), 1e-3)])
        d_lo, d_up = kind(sched, accuracy, 4.0).delta(eps)
        x_lo, x_up = Engine(sched, 1e-3).delta(eps)
        ok_d = d_lo[0] <= x_up[0] * (1 + 1e-9) + 1e-300 and x_lo[0] <= d_up[0] * (1 + 1e-9) + 1e-300
        bad += not (ok and ok_d)
        w = (r_up - r_lo) / r_up if r_up > 0 and math.isfinite(r_up) else math.inf
        widths.append(w)
        print(f"{case} sigmas {len({s for s, _, _ in sched})} rates {len({q for _, q, _ in sched})} q0 {min(q for _, q, _ in sched):.2e} "
              f"δ {delta:.1e}: rates [{r_lo:.6g}, {r_up:.6g}] ({w:.1e}, {t_rate:.2f} s), exact [{e_lo:.6g}, {e_up:.6g}]; "
              f"δ at {eps[0]:.4g}: [{d_lo[0]:.4g}, {d_up[0]:.4g}] vs [{x_lo[0]:.4g}, {x_up[0]:.4g}] "
              f"{'ok' if ok and ok_d else 'FAIL'}", flush=True)
    w = np.array(widths)
    print(f"widths: median {np.median(w):.1e}, over 1e-3: {int(np.sum(w > 1e-3))} of {n}")
    print(f"failures: {bad}")
    return bad


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--product"]
    sys.exit(1 if main(int(args[0]), int(args[1]), float(args[2]) if len(args) > 2 else 1e-3,
                       "--product" in sys.argv) else 0)
