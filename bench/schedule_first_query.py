"""A fresh process records n per-step sigmas (linear in [0.9, 1.3], q = 256/60000) one step() at a
time, then asks eps(1e-5) once: ``python bench/schedule_first_query.py 10000`` prints the time of
import + recording, of the query, and the certified interval (issue #31 item 2)."""
import time, sys
t0 = time.perf_counter()
import numpy as np
from sgmfast.pld import PLDAccountant
n = int(sys.argv[1])
acc = PLDAccountant()
for s in np.linspace(0.9, 1.3, n):
    acc.step(float(s), 256 / 60000, 1)
t1 = time.perf_counter()
b = acc.epsilon(1e-5)
t2 = time.perf_counter()
print(f"n={n} import+record {t1-t0:.2f} s, query {t2-t1:.2f} s, total {t2-t0:.2f} s, {b.lower:.6f} {b.upper:.6f} width {(b.upper-b.lower)/b.upper:.2e}")
