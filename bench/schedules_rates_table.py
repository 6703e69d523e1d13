"""One batch-size schedule's eps(δ) query in a fresh process: bench/README, "Stop 57"'s and "Stop 58"'s
tables.

    python bench/schedules_rates_table.py {off,on} KIND N DELTA

KIND: ramp (σ 1.0, q linear 0.002 -> 0.006), rand (σ 1.1, q uniform in [0.003, 0.006]), two (σ 0.9
then 1.3), four (4 noise levels in [0.9, 1.3]), tiny (σ 1.0, q linear 1e-4 -> 2e-4), both (σ
uniform in [0.9, 1.3] and q uniform in [0.003, 0.006]), path (σ linear 1.3 -> 0.9 and q linear
0.003 -> 0.006), smooth (σ linear 1.3 -> 0.9, q uniform in [0.003, 0.006]), decay (σ linear 1.5 ->
0.8 and q linear 0.002 -> 0.006); N steps, one ``step``
call each.  ``off`` sets ``schedule_rates.MAX_SIGMAS = 0`` and turns the product engine and the
exact engine of mixed schedules off (the groups' sandwich, as before the rate engine).  Prints
the interval, its width, the query's time, work units and the process's peak memory.
"""
import sys, time, resource, numpy as np
off = sys.argv[1] == 'off'
if off:
    import sgmfast.pld.schedule_rates as SR; SR.MAX_SIGMAS = 0
    import sgmfast.pld.schedules as SS; SS.MAX_PARTS_MIXED = 0
    import sgmfast.pld.schedule_product as SP; SP.ProductEngine.fits = lambda self: False
from sgmfast.pld import PLDAccountant
from sgmfast._work import metered, UNITS_PER_SECOND
kind, n, d = sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
rng = np.random.default_rng(0)
if kind == 'ramp':
    sig = np.full(n, 1.0); q = np.linspace(0.002, 0.006, n)
elif kind == 'rand':
    sig = np.full(n, 1.1); q = rng.uniform(0.003, 0.006, n)
elif kind == 'two':
    sig = np.where(np.arange(n) < n // 2, 0.9, 1.3); q = rng.uniform(0.003, 0.006, n)
elif kind == 'four':
    sig = np.geomspace(0.9, 1.3, 4)[rng.integers(0, 4, n)]; q = rng.uniform(0.003, 0.006, n)
elif kind == 'tiny':
    sig = np.full(n, 1.0); q = np.linspace(1e-4, 2e-4, n)
elif kind == 'both':
    sig = rng.uniform(0.9, 1.3, n); q = rng.uniform(0.003, 0.006, n)
elif kind == 'path':
    sig = np.linspace(1.3, 0.9, n); q = np.linspace(0.003, 0.006, n)
elif kind == 'smooth':
    sig = np.linspace(1.3, 0.9, n); q = rng.uniform(0.003, 0.006, n)
elif kind == 'decay':
    sig = np.linspace(1.5, 0.8, n); q = np.linspace(0.002, 0.006, n)
acc = PLDAccountant()
for s, qq in zip(sig, q): acc.step(float(s), float(qq))
t = time.time()
with metered() as m:
    b = acc.epsilon(d)
eng = acc._engine
print(f"{sys.argv[1]:3s} {kind:5s} {n:6d} δ {d:.0e}: [{float(b.lower):.5f}, {float(b.upper):.5f}] {(b.upper-b.lower)/b.upper:.1e} met {b.met}; "
      f"{time.time()-t:.2f} s, {m.units/UNITS_PER_SECOND:.2f} units, {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1e6:.2f} GB, {type(getattr(eng, 'mix', None)).__name__}")
