"""The fixed-size points of bench/README "Stop 60": ε(δ) at six hard points, then three
calibrations, in one process (each line: interval or σ, relative width, work units of
``sgmfast._work`` / 2.5e8, seconds).

    PYTHONPATH=<tree> python bench/fixed_size_points.py [--calibrate]
"""
import sys
import time

from sgmfast import pld
from sgmfast._work import UNITS_PER_SECOND, metered
from sgmfast.calibrate import calibrate_sigma

POINTS = [(0.9088, 1.119e-5, 2180, 2.155e-13), (1.5128412, 1e-4, 6503, 1e-12),
          (0.6049624138733815, 1.0750944684402567e-06, 712, 0.00010398848032154291),
          (0.6395, 1.0496e-5, 82824, 2.314e-14), (0.7489, 2.35e-6, 32, 1.73e-7), (1.554, 3.09e-6, 5402, 1.55e-11)]
#: (eps, q, T, δ)
CALIBRATIONS = [(0.1137, 1.07e-4, 14, 1.03e-7), (1.0, 1e-4, 6503, 1e-12), (1.25657, 1.29e-5, 10328, 6.97e-8)]


def main(calibrate):
    for a in POINTS:
        t = time.time()
        with metered() as m:
            b = pld.epsilon(*a, sampler="fixed_size")
        print(a, f"[{b.lower:.7g}, {b.upper:.7g}] {(b.upper - b.lower) / b.upper:.2e} met {b.met} "
              f"{m.units / UNITS_PER_SECOND:.2f} units {time.time() - t:.2f} s", flush=True)
    for eps, q, steps, delta in CALIBRATIONS if calibrate else []:
        t = time.time()
        with metered() as m:
            s = calibrate_sigma(eps, delta, q, steps, sampler="fixed_size")
        print(f"calibrate {eps} {q} {steps} {delta}: σ {s:.8g} {m.units / UNITS_PER_SECOND:.2f} units "
              f"{time.time() - t:.2f} s", flush=True)


if __name__ == "__main__":
    main("--calibrate" in sys.argv)
