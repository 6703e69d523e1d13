"""Balls-in-bins at t = 2 and 3 steps, one epoch, against an independent quadrature: random σ in
[0.4, 3] and δ in [1e-12, 1e-2] (log-uniform); each row the certified ε(δ) interval, the
quadrature's ε, and WRONG where the interval misses it (by more than 1e-7 relative).

    python bench/allocation_quadrature.py [seed] [count]

The quadrature: under Q each W_i = e^{(2 y_i - 1) / (2 σ^2)} is lognormal (log W ~ N(-s^2/2, s^2),
s = 1/σ); remove δ = E_Q[(S/t - e^ε)_+], add δ = E_Q[(1 - e^ε S/t)_+], S = W_1 + .. + W_t; the
last coordinate in closed form (a call or a put on a lognormal), the others by scipy's adaptive
quad split at the kink; ε by a root of the larger δ on ε.  Output (seeds 1 and 2, 40 points each, stop
48) in ``allocation_quadrature.out``: none outside.
"""

from __future__ import annotations

import math
import sys
import time

import numpy as np
from scipy import integrate, optimize
from scipy.special import ndtr

from sgmfast.pld import allocation
from sgmfast.pld.common import STEP_CACHE


def _call(k: float, s: float) -> float:
    """E[(W - k)_+] for log W ~ N(-s^2/2, s^2)."""
    if k <= 0.0:
        return 1.0 - k
    d2 = (-0.5 * s * s - math.log(k)) / s
    return float(ndtr(d2 + s) - k * ndtr(d2))


def _put(k: float, s: float) -> float:
    """E[(k - W)_+] for the same W."""
    if k <= 0.0:
        return 0.0
    d2 = (-0.5 * s * s - math.log(k)) / s
    return float(k * ndtr(-d2) - ndtr(-d2 - s))


def _outer(f, s: float, kink: float):
    """E[f(W)] over log W ~ N(-s^2/2, s^2), by quad over the standard normal z, split at W = kink."""
    dens = lambda z: math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)  # noqa: E731
    g = lambda z: f(math.exp(-0.5 * s * s + s * z)) * dens(z)  # noqa: E731
    zk = (math.log(kink) + 0.5 * s * s) / s if kink > 0 else -40.0
    zk = min(max(zk, -40.0), 40.0)
    a = integrate.quad(g, -40.0, zk, epsabs=0.0, epsrel=1e-11, limit=400)[0]
    b = integrate.quad(g, zk, 40.0, epsabs=0.0, epsrel=1e-11, limit=400)[0]
    return a + b


def delta_exact(sigma: float, t: int, eps: float) -> float:
    s, c = 1.0 / sigma, math.exp(eps)
    if t == 2:
        rem = _outer(lambda w: 0.5 * _call(2 * c - w, s), s, 2 * c)
        add = _outer(lambda w: 0.5 * c * _put(2 / c - w, s), s, 2 / c)
    else:
        rem = _outer(lambda w1: _outer(lambda w2: _call(3 * c - w1 - w2, s) / 3.0, s, max(3 * c - w1, 1e-300)), s, 3 * c)
        add = _outer(lambda w1: _outer(lambda w2: c / 3.0 * _put(3 / c - w1 - w2, s), s, max(3 / c - w1, 1e-300)), s,
                     3 / c)
    return max(rem, add)


def eps_exact(sigma: float, t: int, delta: float, lo: float, hi: float) -> float:
    f = lambda e: math.log(delta_exact(sigma, t, e)) - math.log(delta)  # noqa: E731
    a, b = max(lo * 0.9 - 1e-3, 0.0), hi * 1.1 + 1e-3
    return optimize.brentq(f, a, b, xtol=1e-12, rtol=1e-11)


if __name__ == "__main__":
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    rng = np.random.default_rng(seed)
    allocation.epsilon(1.0, 3, 3, 1e-5)
    print(f"# seed {seed}: t = 2, 3, one epoch; python bench/allocation_quadrature.py {seed} {count}")
    print("| σ | t | δ | ε(δ) [lower, upper] | width | quadrature ε | time |\n|---|---|---|---|---|---|---|")
    wrong = 0
    for _ in range(count):
        sigma, t = float(rng.uniform(0.4, 3.0)), int(rng.choice([2, 3]))
        delta = float(10 ** rng.uniform(-12, -2))
        STEP_CACHE.clear()
        t0 = time.perf_counter()
        b = allocation.epsilon(sigma, t, t, delta)
        dt = time.perf_counter() - t0
        try:
            e = eps_exact(sigma, t, delta, b.lower, b.upper)
        except ValueError:
            e = float("nan")
        bad = not (b.lower <= e * (1 + 1e-7) and e <= b.upper * (1 + 1e-7))
        wrong += bad
        w = (b.upper - b.lower) / b.upper
        print(f"| {sigma:.4f} | {t} | {delta:.3g} | [{b.lower:.6g}, {b.upper:.6g}] | {w:.2e} | {e:.7g}"
              f"{' WRONG' if bad else ''} | {dt:.2f} s |", flush=True)
    print(f"# {wrong} of {count} outside")
