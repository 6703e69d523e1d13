"""Random balls-in-bins runs that stop inside an epoch (``pld/samplers/epoch_runs.py``), checked
against what must hold whatever the code: the interval lies within the whole epochs on either side
(floor(T/t) below, ceil(T/t) above: dropping outputs is post-processing), grows with the steps
inside the epoch, and δ at the ε upper end is at most δ (ε mode); δ at three ε within the whole
epochs' δ, and consistent with ε(δ) (δ mode).  Flags intervals wider than 1e-3 and calls over 5 s.

    python bench/allocation_partial_fuzz.py eps SEED N [wide]   # sigma 0.4-10, t 2-3000, 0-40 epochs
    python bench/allocation_partial_fuzz.py delta SEED N [wide]  # wide: t 2-10^4, 0-199 epochs

Output of the last runs: bench/allocation_partial_fuzz.out (one line a case, BAD / NOTE / ok; a
last line with the BAD count).
"""

import math
import random
import resource
import sys
import time
import warnings

import numpy as np

from sgmfast.pld import allocation as A

#: the ranges of t (its largest) and of the whole epochs (``wide``: issue #31's)
T_MAX, EPOCHS = 3000, [0, 0, 1, 2, 5, 10, 40]


def eps_cases(seed: int, n: int) -> None:
    rng = random.Random(seed)
    bad = 0
    for i in range(n):
        sigma = math.exp(rng.uniform(math.log(0.4), math.log(10)))
        t = int(math.exp(rng.uniform(math.log(2), math.log(T_MAX))))
        E = rng.choice(EPOCHS)
        r = rng.randint(1, t - 1) if t > 1 else 0
        if t < 2: continue
        d = 10 ** rng.uniform(-12, -2)
        T = E * t + r
        try:
            t0 = time.perf_counter(); b = A.epsilon(sigma, t, T, d); dt = time.perf_counter() - t0
            lo_b = A.epsilon(sigma, t, E * t, d) if E else None
            hi_b = A.epsilon(sigma, t, (E + 1) * t, d)
            # a second r in the same epoch
            r2 = rng.randint(1, t - 1); b2 = A.epsilon(sigma, t, E * t + r2, d)
            # delta at the upper end: must be <= d (lower bound of delta)
            dd = A.delta(sigma, t, T, b.upper)
        except Exception as ex:
            print("ERR", sigma, t, T, d, repr(ex)[:200], flush=True); bad += 1; continue
        msgs = []
        if lo_b is not None and b.upper < lo_b.lower * (1 - 1e-9): msgs.append(f"below E epochs {lo_b}")
        if b.lower > hi_b.upper * (1 + 1e-9): msgs.append(f"above E+1 epochs {hi_b}")
        if (r2 > r and b.lower > b2.upper * (1 + 1e-9)) or (r2 < r and b2.lower > b.upper * (1 + 1e-9)):
            msgs.append(f"not monotone in r: r2={r2} {b2}")
        if dd.lower > d * (1 + 1e-9): msgs.append(f"delta(eps.upper).lower {dd.lower} > {d}")
        if dt > 5: msgs.append(f"slow {dt:.1f}s")
        if not b.met: msgs.append("not met")
        tag = "BAD" if any(not m.startswith(("slow", "not met")) for m in msgs) else ("NOTE" if msgs else "ok")
        if tag == "BAD": bad += 1
        print(tag, f"sigma={sigma:.4g} t={t} E={E} r={r} T={T} d={d:.3g} [{b.lower:.6g}, {b.upper:.6g}] {dt:.2f}s", "; ".join(msgs), flush=True)
    print("bad", bad, "maxrss MB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def delta_cases(seed: int, n: int) -> None:
    rng = random.Random(seed); bad = 0
    for i in range(n):
        sigma = math.exp(rng.uniform(math.log(0.4), math.log(10)))
        t = int(math.exp(rng.uniform(math.log(2), math.log(T_MAX))))
        if t < 2: continue
        E = rng.choice(EPOCHS); r = rng.randint(1, t - 1); T = E * t + r
        d = 10 ** rng.uniform(-10, -2)
        try:
            e = A.epsilon(sigma, t, T, d)
            eps = np.array([0.5 * e.upper, e.upper, 2 * e.upper]) if e.upper > 0 else np.array([0.1])
            t0 = time.perf_counter(); b = A.delta(sigma, t, T, eps); dt = time.perf_counter() - t0
            lo_b = A.delta(sigma, t, E * t, eps) if E else None
            hi_b = A.delta(sigma, t, (E + 1) * t, eps)
        except Exception as ex:
            print("ERR", sigma, t, T, d, repr(ex)[:200], flush=True); bad += 1; continue
        lo, up = np.atleast_1d(b.lower), np.atleast_1d(b.upper)
        msgs = []
        if lo_b is not None and np.any(up < np.atleast_1d(lo_b.lower) * (1 - 1e-9)): msgs.append(f"below E epochs {lo_b}")
        if np.any(lo > np.atleast_1d(hi_b.upper) * (1 + 1e-9)): msgs.append(f"above E+1 {hi_b}")
        if e.upper > 0 and lo[1] > d * (1 + 1e-9): msgs.append(f"δ(eps.upper).lower {lo[1]} > {d}")
        if e.lower > 0 and up[0] < d and 0.5 * e.upper < e.lower: msgs.append("δ(eps/2) below d though eps/2 < eps.lower")
        if np.any(lo > up * (1 + 1e-12)): msgs.append("lower > upper")
        if dt > 5: msgs.append(f"slow {dt:.1f}s")
        tag = "BAD" if any(not m.startswith("slow") for m in msgs) else ("NOTE" if msgs else "ok")
        bad += tag == "BAD"
        print(tag, f"sigma={sigma:.4g} t={t} E={E} r={r} T={T} d={d:.3g} eps={eps} lo={lo} up={up} {dt:.2f}s", "; ".join(msgs), flush=True)
    print("bad", bad, "maxrss MB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    A.epsilon(1.1, 100, 1050, 1e-5)
    if sys.argv[4:] == ["wide"]:
        T_MAX, EPOCHS = 10000, [0, 1, 3, 20, 100, 199]
    (eps_cases if sys.argv[1] == "eps" else delta_cases)(int(sys.argv[2]), int(sys.argv[3]))
