"""Fixed-size ε(δ) at random points where ``fixed_size._events_first`` sends a query to the
far-tail events first although their first grid is longer than TAIL_FIRST_POINTS (no longer
than one step's grid of the compositions): the interval and the work, to compare trees
(bench/README, "Stop 59").

    PYTHONPATH=<tree> python bench/fixed_size_events_first.py SEED N [--delta]

``--delta``: δ at the ε interval's two ends as well (``fixed_size.delta``, one array query), with
the consistency check δ(upper)'s lower end <= δ <= δ(lower)'s upper end (FAIL otherwise).

Draws σ log-uniform in [0.5, 5], q in [1e-5, 0.3], T in [2, 1e5], δ in [1e-14, 1e-2] until N
points pass the filter (the filter reads the same planning figures on either tree).
"""
import math
import random
import sys

from sgmfast._work import metered
from sgmfast.pld.samplers import fixed_size as F
from sgmfast.pld.samplers import fixed_size_tail as FT


def changed(s, q, t, d, acc=1e-3):
    runs = [(s, q, t)]
    coarse, sg = F._start(runs, F.START_ACCURACY, F.START_BUDGET)
    lo0, guess = (float(x) for x in coarse.epsilon(d)[:2])
    up0 = float(F._gauss(sg).epsilon(d)[1])
    plan = getattr(FT, "first_points", None) or F._tail_plan
    points = plan(runs[0], acc, lo0, up0, guess)
    if points <= F.TAIL_FIRST_POINTS or F._beyond_one_step(runs, d) is not None:
        return False
    try:
        return points <= 2 * F._reach(0.5 * s, q, F._step0(runs, acc, max(lo0, 1e-3))) + 1
    except Exception:
        return False


def main(seed, n, with_delta=False):
    rng = random.Random(seed)
    lu = lambda a, b: math.exp(rng.uniform(math.log(a), math.log(b)))  # noqa: E731
    found = tried = 0
    while found < n and tried < 50 * n:
        tried += 1
        s, q, t, d = lu(0.5, 5.0), lu(1e-5, 0.3), max(2, round(lu(2, 1e5))), lu(1e-14, 1e-2)
        if not changed(s, q, t, d):
            continue
        found += 1
        with metered() as meter:
            b = F.epsilon(s, q, t, d)
        w = (b.upper - b.lower) / b.upper if b.upper > 0 else 0.0
        line = (f"{found:3d} σ {s:.4g} q {q:.3g} T {t} δ {d:.3g}: [{b.lower:.7g}, {b.upper:.7g}] {w:.1e} "
                f"{meter.units / 1e9:.2f} Gu")
        if with_delta:
            with metered() as meter:
                db = F.delta(s, q, t, [b.lower, b.upper])
            ok = db.lower[1] <= d <= db.upper[0]
            line += (f" | δ(lo) [{db.lower[0]:.7g}, {db.upper[0]:.7g}] δ(up) [{db.lower[1]:.7g}, {db.upper[1]:.7g}] "
                     f"{meter.units / 1e9:.2f} Gu {'ok' if ok else 'FAIL'}")
        print(line, flush=True)
    print(f"{found} of {tried} points")


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), "--delta" in sys.argv[3:])
