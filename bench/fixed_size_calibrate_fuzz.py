"""Fixed-size calibrations at random points: the answer, whether the public accountant confirms
it, and the search's work -- run once on each tree to compare (bench/README, "Stop 59").

    PYTHONPATH=<tree> python bench/fixed_size_calibrate_fuzz.py SEED N [balls_in_bins]

Points: eps log-uniform in [0.1, 10], q log-uniform in [1e-5, 0.3], T log-uniform in [2, 1e5],
δ log-uniform in [1e-14, 1e-2]; with ``balls_in_bins``, q = 1/t for t log-uniform in [2, 1e4]
batches an epoch and T = t times 1-200 epochs (log-uniform), the public check
``pld.epsilon(..., sampler="balls_in_bins").upper``.  One line per point: the target, σ, the public
``fixed_size.epsilon(σ).upper`` (must be <= eps; prints FAIL otherwise), the work units of the
calibration (``sgmfast._work``: counted, not timed) and its wall time.
"""
import math
import random
import sys
import time

from sgmfast._work import metered
from sgmfast.calibrate import calibrate_sigma
from sgmfast import pld


def points(seed, n, sampler):
    rng = random.Random(seed)
    lu = lambda a, b: math.exp(rng.uniform(math.log(a), math.log(b)))  # noqa: E731
    for _ in range(n):
        if sampler == "balls_in_bins":
            t = round(lu(2, 1e4))
            yield lu(0.1, 10.0), 1.0 / t, t * round(lu(1, 200)), lu(1e-14, 1e-2)
        else:
            yield lu(0.1, 10.0), lu(1e-5, 0.3), max(2, round(lu(2, 1e5))), lu(1e-14, 1e-2)


def main(seed, n, sampler="fixed_size"):
    total_units = total_time = 0.0
    for k, (eps, q, steps, delta) in enumerate(points(seed, n, sampler)):
        t0 = time.perf_counter()
        with metered() as meter:
            s = calibrate_sigma(eps, delta, q, steps, sampler=sampler)
        wall = time.perf_counter() - t0
        up = pld.epsilon(s, q, steps, delta, sampler=sampler).upper if 0.0 < s < math.inf else 0.0
        ok = up <= eps
        total_units += meter.units
        total_time += wall
        print(f"{k:3d} eps {eps:.4g} q {q:.3g} T {steps} δ {delta:.3g}: σ {s:.6g} public {up:.6g} "
              f"{'ok' if ok else 'FAIL'}  {meter.units / 1e9:.2f} Gu {wall:.1f} s", flush=True)
    print(f"total {total_units / 1e9:.1f} Gu, {total_time:.0f} s")


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), *sys.argv[3:4])
