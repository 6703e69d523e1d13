"""Tuning cost A/B, interleaved in one process: an old tree's ``sgmfast.tuning.epsilon`` (imported
as ``sgmfast_old``), this tree's, and dp_accounting's RDP accountant with
``RepeatAndSelectDpEvent``, one call of each per round, MNIST's run (q = 256/60000, sigma 1.1,
14,062 steps, delta 1e-5), E[K] = 10, the four K of ``bench/test_bench_tuning.py``; sgmfast cold
(one-step cache cleared before every call).  Prints each bound's epsilon, the medians, the median
of the per-round ratios dp_accounting / new, and the load average before and after; with a third
argument, ``tuning.calibrate_sigma`` at epsilon 3 too.

    git archive <old commit> sgmfast | tar -x -C /tmp/old && mv /tmp/old/sgmfast /tmp/old/sgmfast_old
    PYTHONPATH=. python bench/tuning_ab.py /tmp/old 31 [calibrate]

(``sgmfast_old`` imports itself relatively only; its kernels compile into its own cache.)"""
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, sys.argv[1])
import sgmfast_old.pld.common as pc_old  # noqa: E402
import sgmfast_old.tuning as t_old  # noqa: E402
from dp_accounting import dp_event  # noqa: E402
from dp_accounting.rdp import RdpAccountant  # noqa: E402

from sgmfast import tuning as t_new  # noqa: E402
from sgmfast.pld import common as pc_new  # noqa: E402

Q, SIGMA, STEPS, DELTA, MEAN = 256 / 60000, 1.1, 14062, 1e-5, 10.0
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 15
ONE = dp_event.SelfComposedDpEvent(dp_event.PoissonSampledDpEvent(Q, dp_event.GaussianDpEvent(SIGMA)), STEPS)


def runs(mod, shape):
    return mod.poisson(MEAN) if shape == math.inf else mod.truncated_negative_binomial(shape, mean=MEAN)


def timed(fns, rounds, clear):
    ts = {k: [] for k in fns}
    for _ in range(rounds):
        for k, f in fns.items():
            clear()
            t = time.perf_counter()
            f()
            ts[k].append(time.perf_counter() - t)
    return ts


def clear():
    pc_old.STEP_CACHE.clear()
    pc_new.STEP_CACHE.clear()


print("load before", os.getloadavg())
for name, shape in [("logarithmic", 0.0), ("geometric", 1.0), ("tnb-2", 2.0), ("poisson", math.inf)]:
    ro, rn = runs(t_old, shape), runs(t_new, shape)

    def dpa(shape=shape):
        acc = RdpAccountant()
        acc.compose(dp_event.RepeatAndSelectDpEvent(ONE, MEAN, shape))
        return acc.get_epsilon(DELTA)

    fns = {"old": lambda: t_old.epsilon(SIGMA, Q, STEPS, DELTA, ro),
           "new": lambda: t_new.epsilon(SIGMA, Q, STEPS, DELTA, rn), "dp_accounting": dpa}
    vals = {k: float(f()) for k, f in fns.items()}
    ts = timed(fns, ROUNDS, clear)
    med = {k: np.median(v) * 1e3 for k, v in ts.items()}
    ratio = np.median(np.array(ts["dp_accounting"]) / np.array(ts["new"]))
    print(f"{name:12s} eps old {vals['old']:.10f} new {vals['new']:.10f} dp_accounting {vals['dp_accounting']:.10f}"
          f" | median ms old {med['old']:.1f} new {med['new']:.1f} dp_accounting {med['dp_accounting']:.1f}"
          f" | dp_accounting/new {ratio:.2f}x (per round), old/new {med['old'] / med['new']:.2f}x", flush=True)
if len(sys.argv) > 3:
    for name, shape in [("geometric", 1.0), ("poisson", math.inf)]:
        ro, rn = runs(t_old, shape), runs(t_new, shape)
        fns = {"old": lambda: t_old.calibrate_sigma(3.0, DELTA, Q, STEPS, ro),
               "new": lambda: t_new.calibrate_sigma(3.0, DELTA, Q, STEPS, rn)}
        vals = {k: f() for k, f in fns.items()}
        ts = timed(fns, max(ROUNDS // 3, 3), clear)
        print(f"calibrate {name}: sigma old {vals['old']:.6f} new {vals['new']:.6f}; median ms old "
              f"{np.median(ts['old']) * 1e3:.0f} new {np.median(ts['new']) * 1e3:.0f}", flush=True)
print("load after", os.getloadavg())
