"""A noise schedule's eps(δ) at small q or small δ, in a fresh process (bench/README, "Stop 64").

    PYTHONPATH=<tree> python bench/schedules_small_delta.py SIGMA_FIRST SIGMA_LAST Q N DELTA [--groups | --exact]

N steps of sigma linear from SIGMA_FIRST to SIGMA_LAST at sampling rate Q, add/remove, one
``step`` call each; prints the interval, its width, the query's time, work units and the
process's peak memory.  ``--groups``: the noise-level mixtures turned off (their ``epsilon``
answers [0, inf]), so that the groups' sandwich alone answers.  ``--exact``: ``engine.Engine``
composing every step exactly with an unbounded budget instead (minutes: the reference the
accountant's interval must meet, ``schedules_small_delta.out``).
"""
import resource
import sys
import time

from sgmfast import pld
from sgmfast._work import UNITS_PER_SECOND, metered

args = [a for a in sys.argv[1:] if a not in ("--groups", "--exact")]
if "--groups" in sys.argv:
    import sgmfast.pld.schedule_engine as SE
    SE.MixEngine.epsilon = lambda self, target, step0=None: (0.0, float("inf"), None)
a, b, q, n, d = float(args[0]), float(args[1]), float(args[2]), int(args[3]), float(args[4])
if "--exact" in sys.argv:
    from sgmfast.pld.engine import Engine
    t = time.time()
    lo, up = Engine([(a + (b - a) * i / (n - 1), q, 1) for i in range(n)], 1e-3, budget=1e9).epsilon(d)[:2]
    print(f"σ {a:g} -> {b:g}, q {q:g}, {n} steps, δ {d:g} (exact engine): [{lo:.6f}, {up:.6f}] "
          f"{(up - lo) / up:.1e}; {time.time() - t:.0f} s")
    sys.exit(0)
acc = pld.PLDAccountant()
for i in range(n):
    acc.step(a + (b - a) * i / (n - 1), q)
t = time.time()
with metered() as m:
    r = acc.epsilon(d)
print(f"σ {a:g} -> {b:g}, q {q:g}, {n} steps, δ {d:g}{' (groups)' if '--groups' in sys.argv else ''}: "
      f"[{r.lower:.5f}, {r.upper:.5f}] {(r.upper - r.lower) / r.upper:.1e} met {r.met}; {time.time() - t:.2f} s, "
      f"{m.units / UNITS_PER_SECOND:.2f} units, {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB")
