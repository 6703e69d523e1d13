"""Balls-in-bins runs that stop inside an epoch: composed as they ran (``pld/samplers/epoch_runs.py``)
against the bracket of the whole epochs on either side (what ``allocation.epsilon`` answered before).

    python bench/allocation_partial.py          # output: bench/allocation_partial.out

Each row: the run's certified interval now, its relative width, the seconds and work units (of
``sgmfast._work``, 2.5e8 a second) of a first query (the one-step cache cleared), and the bracket
[lower of floor(T/t) epochs, upper of ceil(T/t) epochs] with its width; last, the work units of a
first query of ceil(T/t) whole epochs, for scale.  One process, one core.
"""

import platform
import time
import warnings

from sgmfast import _work
from sgmfast.pld import allocation
from sgmfast.pld.common import STEP_CACHE

POINTS = [  # (sigma, t, T, delta)
    (1.1, 234, 351, 1e-5), (1.1, 234, 60 * 234 - 117, 1e-5), (1.1, 234, 100, 1e-5),
    (0.8, 100, 1050, 1e-5), (2.0, 1000, 2500, 1e-5), (0.6, 1000, 3700, 1e-8),
    (0.7, 20, 30, 1e-5), (0.5, 3, 4, 1e-6), (5.0, 10000, 15000, 1e-10), (1.0, 50, 1, 1e-6),
]


def _first(fn, *args):
    STEP_CACHE.clear()
    t0 = time.perf_counter()
    with _work.metered() as m:
        b = fn(*args)
    return b, time.perf_counter() - t0, m.units / _work.UNITS_PER_SECOND


def main():
    warnings.simplefilter("ignore")
    allocation.epsilon(1.1, 100, 1050, 1e-5)  # (compiled before the timings)
    print(f"# bench/allocation_partial.py; {platform.machine()}, Python {platform.python_version()}")
    print("| sigma, t, T, δ | now | width | s | units | whole epochs on either side | width | units, ceil(T/t) epochs |")
    print("|---|---|---|---|---|---|---|---|")
    for sigma, t, T, delta in POINTS:
        b, sec, units = _first(allocation.epsilon, sigma, t, T, delta)
        e_lo, e_hi = T // t, -(-T // t)
        whole, _, whole_units = _first(allocation.epsilon, sigma, t, e_hi * t, delta)
        lo = allocation.epsilon(sigma, t, e_lo * t, delta).lower if e_lo else 0.0
        up = whole.upper
        w = (b.upper - b.lower) / b.upper
        print(f"| {sigma}, {t}, {T}, {delta:g} | [{b.lower:.6g}, {b.upper:.6g}] | {w:.2e} | {sec:.2f} | {units:.2f} "
              f"| [{lo:.6g}, {up:.6g}] | {(up - lo) / up:.2e} | {whole_units:.2f} |", flush=True)


if __name__ == "__main__":
    main()
