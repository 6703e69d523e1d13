"""ε(δ) read back by δ(ε) at small δ: bench/README "Stop 67"'s first table.

    python bench/delta_readback.py

For each point: e = ε(δ), then δ at e's upper end (its truth is at most δ) and at its lower end (at
least δ), with the seconds and work units of the first δ query.  Poisson points, MNIST with
fixed-size batches, and 300 noise levels (the lattice mixtures).
"""
import time

from sgmfast import pld
from sgmfast._work import UNITS_PER_SECOND, metered

POINTS = [(1.0, 0.01, 1000, 1e-25), (1.0, 0.01, 1000, 1e-40), (1.9, 3e-4, 8, 1e-30), (0.8, 0.004, 10000, 1e-30),
          (1.1, 256 / 60000, 14062, 1e-30), (1.1, 256 / 60000, 14062, 1e-5)]


def row(label, eps_of, delta_of, d):
    e = eps_of(d)
    t = time.perf_counter()
    with metered() as m:
        b = delta_of(float(e.upper))
    sec = time.perf_counter() - t
    b2 = delta_of(float(e.lower))
    ok = b.lower <= d <= b2.upper
    print(f"{label}, δ {d:g}: ε [{e.lower:.6g}, {e.upper:.6g}]  δ(ε upper) [{b.lower:.4g}, {b.upper:.4g}] {sec:.2f} s "
          f"{m.units / UNITS_PER_SECOND:.2f} u  δ(ε lower) [{b2.lower:.4g}, {b2.upper:.4g}]{'' if ok else '  INCONSISTENT'}",
          flush=True)


def main():
    for s, q, t, d in POINTS:
        row(f"σ {s:g}, q {q:.4g}, T {t}", lambda x: pld.epsilon(s, q, t, x), lambda x: pld.delta(s, q, t, x), d)
    s, q, t = 1.1, 256 / 60000, 14062
    row("MNIST, fixed-size", lambda x: pld.epsilon(s, q, t, x, sampler="fixed_size"),
        lambda x: pld.delta(s, q, t, x, sampler="fixed_size"), 1e-30)

    def levels():
        acc = pld.PLDAccountant()
        for i in range(300):
            acc.step(1.3 - 0.4 * i / 299, 0.01, 1)
        return acc

    row("300 noise levels 1.3 -> 0.9, q 0.01", lambda x: levels().epsilon(x), lambda x: levels().delta(x), 1e-25)


if __name__ == "__main__":
    main()
