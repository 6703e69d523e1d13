"""Balls-in-bins' closed forms: the Gaussian-mechanism bounds that start its refinement (above:
every epoch is a mixture of Gaussian mechanisms; below: the sum of an epoch's outputs), the
noiseless run (sigma = 0), which needs no lattice, and the Poisson-sampled run's rough eps and δ
that first centre the refinement (heuristics only)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..._failures import GridFailure
from ..engine import Engine


def noiseless(kind: str, t: int, k: int, steps: int, x):
    """Exact bounds at sigma = 0: the output shows whether the example was used, which it is in
    every whole epoch and, in a run of T < t steps, with probability 1 - C(t - T, k) / C(t, k) (its
    k steps uniform among the epoch's t).  δ(ε) is that probability for every ε; ε(δ) is +inf
    below it, else 0.  ``kind`` "epsilon" at one δ: that eps; "delta" at an array of ε: (lower,
    upper) arrays, the probability rounded down and up (it is a rational, computed exactly: the
    float nearest 1/22 lies above it, and a lower end there was 1 ulp above the truth)."""
    used = Fraction(1)
    if steps < t:
        used = 1 - math.prod(Fraction(t - steps - i, t - i) for i in range(k)) if steps else Fraction(0)
    if kind == "epsilon":
        return 0.0 if Fraction(x) >= used else math.inf
    near = float(used)
    lo = near if Fraction(near) <= used else math.nextafter(near, 0.0)
    up = near if Fraction(near) >= used else math.nextafter(near, 1.0)
    return np.full(np.size(x), lo), np.full(np.size(x), up)


def accountant_eps_lower(noise: float, epochs: int, delta: float) -> float:
    """The certified lower eps of ``epochs`` Gaussian mechanisms with noise ``noise`` (0 for none)."""
    if not epochs:
        return 0.0
    return float(Engine([(noise, 1.0, epochs)], 1e-3).epsilon(delta)[0])


def _sum_statistic_eps(sigma: float, t: int, epochs: int, delta: float) -> float:
    """A certified lower bound on the mechanism's eps, where the lattice cannot give one (very
    small sigma): a dataset pair whose extra example has the same unit gradient at every step
    (the others' known) makes the sum of an epoch's outputs along it N(1, t sigma^2) against
    N(0, t sigma^2) -- a post-processing of the epoch -- so E whole epochs are at least the
    Gaussian mechanism with mu = sqrt(E) / (sigma sqrt t)."""
    return accountant_eps_lower(sigma * math.sqrt(t), epochs, delta)


def _gauss_eps(sigma: float, epochs: int, delta: float, lower: bool = False) -> float:
    """eps of the Gaussian mechanism composed ``epochs`` times (mu = sqrt(E)/sigma): every epoch
    of random allocation is a mixture of Gaussian mechanisms, so this bounds it above (joint
    convexity); for t = 1 it is exact."""
    lo, up = Engine([(sigma, 1.0, epochs)], 1e-3).epsilon(delta)[:2]
    return float(lo if lower else up)


def _gauss_delta(sigma: float, epochs: int, eps: np.ndarray):
    """(lower, upper) δ at ``eps`` of the Gaussian mechanism composed ``epochs`` times (the
    closed form, through the engine's exact path; no public-API round trip)."""
    lo, up = Engine([(sigma, 1.0, epochs)], 1e-3).delta(np.asarray(eps, dtype=np.float64).reshape(-1))
    return np.asarray(lo, dtype=np.float64), np.asarray(up, dtype=np.float64)


#: Accuracy of the Poisson-sampled run's guesses, read on the first grid of that accuracy and not
#: refined (``_first_grid``): where one grid met it the answer is the one a refined query gives;
#: elsewhere (a heavy tail) the refinements cost 0.2 s of a 1.2 s query at sigma 0.4, t 10^4,
#: 200 epochs, δ 1e-12, to move the guess from 33.28 to 33.09 for an answer of 32.61 (the 27 rows
#: of bench/allocation_range.py: no width moved beyond 1e-13 relative).
GUESS_ACCURACY = 0.05


def _first_grid(sigma: float, t: int, steps: int, first) -> Engine:
    """The Poisson-sampled run's engine at rate 1/t and GUESS_ACCURACY, held to the grid step
    ``first(engine)`` (``first_step`` or ``first_delta_step``: a query's first) -- the same engine,
    so what the first step needed (a short run's RDP bound) is not computed twice."""
    engine = Engine([(sigma, 1.0 / t, steps)], GUESS_ACCURACY)
    engine.grid_step = first(engine)
    return engine


def poisson_delta_guess(sigma: float, t: int, steps: int, eps: np.ndarray) -> float:
    """A rough least δ over ``eps`` of the Poisson-sampled run at rate 1/t -- at the largest
    finite eps, on the first grid (``_first_grid``) -- (only where the first lattice is cut; 1e-10
    where no guess is found)."""
    finite = np.asarray(eps, dtype=np.float64)[np.isfinite(eps)]
    if not finite.size:
        return 1e-300
    top = float(finite.max())
    try:
        up = float(_first_grid(sigma, t, steps, lambda e: e.first_delta_step(top)).delta(np.array([top]))[1][0])
        return up if up > 0 else 1e-300
    except (GridFailure, ArithmeticError):  # (only a heuristic)
        return 1e-10


def poisson_guess(sigma: float, t: int, steps: int, delta: float) -> float:
    """A rough eps of the Poisson-sampled run at rate 1/t, on the first grid (``_first_grid``;
    only where the tilt centres)."""
    try:
        return max(float(_first_grid(sigma, t, steps, lambda e: e.first_step(delta)).epsilon(delta)[1]), 1e-3)
    except (GridFailure, ArithmeticError):  # only a heuristic
        return 1.0
