"""Warm time and number of PLD evaluations of one PLD sigma calibration (issue #4 scenarios).

Run: ``python bench/pld_calibration_times.py``.
"""
import time

from sgmfast import calibrate as cal
from sgmfast.pld import api as accountant

for (e, d, q, T) in [(8, 1e-5, 256 / 60000, 14062), (3, 1e-5, 0.001, 100000), (1.0, 1e-5, 0.01, 1000)]:
    cal.calibrate_sigma(e, d, q, T, accountant="pld")
    n = [0]
    orig = accountant._epsilon_hinted

    def counted(*a, **k):
        n[0] += 1
        return orig(*a, **k)

    accountant._epsilon_hinted = counted
    times = []
    for _ in range(3):
        t = time.perf_counter()
        s = cal.calibrate_sigma(e, d, q, T, accountant="pld")
        times.append(time.perf_counter() - t)
    accountant._epsilon_hinted = orig
    print(f"eps={e} delta={d} q={q:.6g} T={T}: sigma={s:.6f}, {n[0] // 3} PLD evaluations, "
          f"{min(times) * 1e3:.0f} / {sorted(times)[1] * 1e3:.0f} ms (min / median of 3)", flush=True)
