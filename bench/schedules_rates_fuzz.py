"""Batch-size schedules through the public accountant (``PLDAccountant``): the rate engine's
(``--mixed``: the product engine's) answers against references independent of it (bench/README,
"Stop 57" and "Stop 58").

    python bench/schedules_rates_fuzz.py SEED N [--mixed]

Each case: 130-5,000 steps with a rate of their own (a linear ramp, random, or a ramp that
saturates), among 1-2 (70 %) or 3-4 noise levels log-uniform in [0.5, 5] (``--mixed``: a noise
level of their own, a linear ramp or random between s0 log-uniform in [0.5, 5] and s0 x
U(1.05, 2), either way round); rates from q0 log-uniform in
[1e-4, 0.3] up to q0 x U(1.05, 10) (at most 0.95); an eps(δ) query, δ log-uniform in
[1e-12, 1e-2], or a δ(eps) query at eps log-uniform in [0.05, 20].  Checks:

* the interval is ordered, finite where the references are, and the query took at most 10 s of
  wall time (one core);
* it meets the bracket of the constant runs (all steps at the largest sigma and the least q: at
  most as revealing; at the least sigma and the largest q: at least as revealing -- more noise is
  post-processing, a smaller rate a mixture), each answered by ``pld.epsilon`` / ``pld.delta``;
* the answer is consistent with the other query: δ at the eps interval's upper end has a lower
  bound at most the target.

Prints a line per case (with the engine that answered: ``RateEngine``, ``ProductEngine``, the exact
``Engine``, or ``NoneType`` for the groups' sandwich where no lattice engine takes it), then the
number of failures (and of answers wider than 1e-3).
"""

from __future__ import annotations

import math
import sys
import time

import numpy as np

from sgmfast import pld
from sgmfast.pld import PLDAccountant


def case(rng, mixed=False):
    n = int(np.exp(rng.uniform(math.log(130), math.log(5000))))
    ns = int(rng.integers(1, 3)) if rng.random() < 0.7 else int(rng.integers(3, 5))
    sigmas = np.exp(rng.uniform(math.log(0.5), math.log(5), ns))
    q0 = math.exp(rng.uniform(math.log(1e-4), math.log(0.3)))
    q1 = min(q0 * rng.uniform(1.05, 10), 0.95)
    shape = rng.choice(["ramp", "random", "saturate"])
    if shape == "ramp":
        qs = np.linspace(q0, q1, n)
    elif shape == "random":
        qs = rng.uniform(q0, q1, n)
    else:
        qs = np.minimum(np.linspace(q0, 2 * q1 - q0, n), q1)
    sig = sigmas[rng.integers(0, ns, n)]
    if mixed:
        s0 = float(sigmas[0])
        s_end = s0 * rng.uniform(1.05, 2)
        sig = np.linspace(s0, s_end, n) if rng.random() < 0.5 else rng.uniform(s0, s_end, n)
        sig = sig[::-1] if rng.random() < 0.5 else sig
    query = ("epsilon", 10 ** rng.uniform(-12, -2)) if rng.random() < 0.7 else ("delta", math.exp(rng.uniform(math.log(0.05), math.log(20))))
    return [(float(s), float(q)) for s, q in zip(sig, qs)], query


def _engine_name(acc) -> str:
    """The engine that answered: the exact ``Engine``, or the sandwich's mixture engine (``NoneType``:
    the groups' sandwich alone)."""
    eng = acc._engine
    return type(eng).__name__ if not hasattr(eng, "mix") else type(eng.mix).__name__


def main(seed: int, n: int, mixed: bool = False) -> int:
    rng = np.random.default_rng(seed)
    bad = wide = 0
    for k in range(n):
        steps, (kind, x) = case(rng, mixed)
        acc = PLDAccountant()
        for s, q in steps:
            acc.step(s, q)
        t = time.perf_counter()
        b = acc.epsilon(x) if kind == "epsilon" else acc.delta(x)
        dt = time.perf_counter() - t
        lo, up = float(b.lower), float(b.upper)
        T = len(steps)
        s_hi, s_lo = max(s for s, _ in steps), min(s for s, _ in steps)
        q_lo, q_hi = min(q for _, q in steps), max(q for _, q in steps)
        f = pld.epsilon if kind == "epsilon" else pld.delta
        low_ref, high_ref = f(s_hi, q_lo, T, x), f(s_lo, q_hi, T, x)
        ok = lo <= up and dt <= 10.0 and lo <= float(high_ref.upper) * (1 + 1e-9) + 1e-300 \
            and float(low_ref.lower) <= up * (1 + 1e-9) + 1e-300
        if kind == "epsilon" and math.isfinite(up) and up > 0:
            d = acc.delta(up)
            ok = ok and float(d.lower) <= x * (1 + 1e-6)
        w = (up - lo) / up if up > 0 and math.isfinite(up) else 0.0
        wide += w > 1e-3
        bad += not ok
        print(f"{k} T {T} sigmas {len(set(s for s, _ in steps))} q [{q_lo:.2e}, {q_hi:.2e}] {kind} {x:.2e}: "
              f"[{lo:.6g}, {up:.6g}] ({w:.1e}) in {dt:.2f} s, engine {_engine_name(acc)}; "
              f"bracket [{float(low_ref.lower):.6g}, {float(high_ref.upper):.6g}] {'ok' if ok else 'FAIL'}", flush=True)
    print(f"failures: {bad}; wider than 1e-3: {wide} of {n}")
    return bad


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--mixed"]
    sys.exit(1 if main(int(args[0]), int(args[1]), "--mixed" in sys.argv) else 0)
