"""Certified trade-off curves (f-DP): the type-II error β that no attack with type-I error α
beats, bounded on both sides from the certified privacy profile δ(eps).

A mechanism with privacy profile δ (over both orders of every neighbouring pair) is f-DP for
(Dong, Roth & Su, JRSS-B 2022, Prop. 2.12)

    f(α) = sup_{eps >= 0} max(0, 1 - δ(eps) - e^eps α, e^-eps (1 - δ(eps) - α)),

the largest symmetric trade-off function the profile certifies (for a symmetric pair, such as
the Gaussian mechanism, the pair's own).  This module bounds that f.

* Lower bound (what protects): every (eps, δ_up(eps)) is a valid guarantee, so the max of its
  two lines over any finite set of eps is below f.
* Upper bound: between grid points eps_i <= eps <= eps_{i+1}, δ(eps) >= δ(eps_{i+1}) >=
  δ_lo(eps_{i+1}) (δ does not increase), e^eps >= e^{eps_i} and e^-eps <= e^{-eps_i}; beyond the
  last point δ >= 0.  So each line is bounded on each cell by its value at the cell's corners.

The grid of eps is uniform on [0, eps_max], eps_max RDP's eps at a δ far below the smallest α
(its lines there are below zero for every α asked about).  The attack's true-positive rate at a
false-positive rate α is 1 - β(α).
"""

from __future__ import annotations

import math

import numpy as np

from .. import rdp as _rdp
from .certifiers import _compose
from .._kernels.pld import tradeoff as kt
from .common import ADD, FIRST_BINS, REMOVE, REPLACE, bins_limit
from .engine import Engine
from .estimates import eps_estimate, initial_step
from .queries import delta_bound

#: eps grid points (the upper bound's cells are this fine: its gap is about e^{eps_max / POINTS});
#: where the engine has to answer point by point, FALLBACK_POINTS of them
POINTS = 20000
FALLBACK_POINTS = 400


def profile_grid(sigma: float, q: float, steps: int, alpha: np.ndarray, relation: str) -> np.ndarray:
    """eps_0 = 0 < ... < eps_max: the grid of the profile."""
    tiny = max(1e-3 * float(np.min(alpha[alpha > 0], initial=1.0)), 1e-300)
    e_max = _rdp.epsilon(sigma, q, steps, min(tiny, 0.5))
    if relation == "replace_one":
        e_max *= 2.0  # (group privacy: the replace-one eps is at most twice the add/remove one)
    e_max = min(max(float(e_max), 1e-3), 700.0) if math.isfinite(e_max) else 700.0
    return np.linspace(0.0, e_max, POINTS)


def profile(sigma: float, q: float, steps: int, eps: np.ndarray, relation: str, accuracy: float, goal: float):
    """(eps, lower, upper): δ bounded at every eps of the grid (or, where the engine answers point
    by point, of every k-th of them, FALLBACK_POINTS in all).  A trade-off curve needs δ to an absolute
    precision (~1e-6), not a relative one: one untilted composition per direction and rounding
    answers every eps at once.  Where that does not apply (closed forms, a grid that does not
    fit), the engine answers."""
    engine = Engine([(sigma, q, steps)], accuracy, None, relation)
    if engine.form is not None and engine.p_hi == 0.0:
        return (eps, *engine.delta(eps))  # closed forms: every eps at once
    if engine.form is None and engine.p_hi == 0.0 and engine.schedule:
        try:
            with bins_limit(FIRST_BINS):
                return (eps, *_untilted(engine, eps, goal))
        except (ArithmeticError, ValueError, MemoryError):
            pass
    few = eps[:: max(1, eps.size // FALLBACK_POINTS)]
    return (few, *engine.delta(few))


def _untilted(engine: Engine, eps: np.ndarray, goal: float):
    sched = engine.schedule
    job = engine.job(goal)
    step = initial_step(sched, engine.accuracy, max(eps_estimate(sched, goal, engine.main), 1e-2), engine.main)
    lo, up = np.zeros(eps.size), np.zeros(eps.size)
    for direction in ((REPLACE,) if engine.replace else (REMOVE, ADD)):
        g_up = _compose(sched, direction, step, 0.0, True, 0.0, job.tau)
        g_lo = _compose(sched, direction, step, 0.0, False, 0.0, job.tau)
        up = np.maximum(up, delta_bound(g_up, eps))  # the pair's δ: the larger direction's
        lo = np.maximum(lo, delta_bound(g_lo, eps))
    return lo, np.minimum(np.maximum(up, lo), 1.0)


def beta_bounds(alpha: np.ndarray, eps: np.ndarray, d_lo: np.ndarray, d_up: np.ndarray):
    """(lower, upper) of f(alpha) from δ bounds on the grid ``eps`` (module notes; kernel
    ``_kernels.pld.tradeoff.beta_lines``)."""
    alpha = np.ascontiguousarray(alpha, dtype=np.float64)
    lo, up = np.empty(alpha.size), np.empty(alpha.size)
    kt.beta_lines(alpha, np.ascontiguousarray(eps, dtype=np.float64), np.ascontiguousarray(d_lo, dtype=np.float64),
                  np.ascontiguousarray(d_up, dtype=np.float64), lo, up)
    # f(alpha) <= 1 - alpha for every trade-off function (the test that ignores the data)
    up = np.minimum(up, 1.0 - alpha)
    return np.minimum(lo, up), up
