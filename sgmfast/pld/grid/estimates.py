"""Heuristics: where eps probably lies and which grid step will do.

Nothing here enters a bound.  The one-step loss moments (trapezoid rule) and the Gaussian
approximation of the composed loss only choose the grid step, the tilt and the FFT windows;
a poor choice costs tightness or time, never soundness.
"""

from __future__ import annotations

import math

from scipy.special import log_ndtr, ndtr

from ..._kernels.pld import losses as kl
from ..common import REPLACE, StepUnderflow

_MOM_CACHE: dict = {}
STEP_FACTOR = 0.8  # first grid step relative to the accuracy's (measured, bench/README)


def loss_moments(sigma: float, q: float, add):
    """(mean, variance) of the one-step loss under P for a direction (cached)."""
    key = (sigma, q, add)
    hit = _MOM_CACHE.get(key)
    if hit is None:
        hit = kl.loss_moments(sigma, q, 2 if add == REPLACE else int(add), 20001)
        if len(_MOM_CACHE) > 4096:  # bounded: calibration sweeps visit many sigmas
            _MOM_CACHE.clear()
        _MOM_CACHE[key] = hit
    return hit


def _gauss_delta(eps, mean, var):
    s = math.sqrt(var)
    x = (mean - eps) / s
    return float(ndtr(x) - math.exp(eps - mean + var / 2 + log_ndtr(x - s)))


def eps_estimate(schedule, target_delta: float, add=False) -> float:
    """Gaussian approximation of the composed PLD of one direction (mean and variance add over
    steps): its eps at ``target_delta``."""
    mean = sum(c * loss_moments(s, q, add)[0] for s, q, c in schedule)
    var = sum(c * loss_moments(s, q, add)[1] for s, q, c in schedule)
    if var <= 0 or _gauss_delta(0.0, mean, var) <= target_delta:
        return 0.0
    hi = mean + 50 * math.sqrt(var) + 50
    if _gauss_delta(hi, mean, var) > target_delta:
        return hi
    from scipy.optimize import brentq  # (here: importing scipy.optimize costs ~0.15 s of every cold start)

    return brentq(lambda e: _gauss_delta(e, mean, var) - target_delta, 0.0, hi, xtol=1e-6)


def initial_step(schedule, accuracy: float, eps_est: float, add=False) -> float:
    """The first grid step: the certified gap grows like step^2 / (per-step loss variance);
    STEP_FACTOR is set so that the first grid usually meets the accuracy without a second round."""
    total = sum(c for _, _, c in schedule)
    var = sum(c * loss_moments(s, q, add)[1] for s, q, c in schedule)
    d = STEP_FACTOR * math.sqrt(3.0 * accuracy * var / total)
    # (0.05 keeps small losses resolved; a huge eps -- tiny sigma, losses ~ 1 / (2 sigma^2) --
    # needs only accuracy * eps, and 0.05 there would ask for a grid of ~1e7 bins per step)
    d = min(d, 0.5 * accuracy * max(eps_est, 1e-2), max(0.05, 1e-4 * eps_est))
    # quarter octaves times 1e-6: a handful of distinct steps keeps the one-step cache useful
    return 2.0 ** (math.floor(4 * math.log2(d / 1e-6)) / 4) * 1e-6 if d > 1e-12 else 1e-12


def refine(step: float, gap: float, goal: float) -> float:
    """The next, finer grid step: a quarter when the gap is far from the goal, else a half."""
    factor = max(0.25, min(0.5, 0.9 * math.sqrt(goal / gap))) if gap > 0 else 0.5
    new = step * (0.25 if factor < 0.375 else 0.5)
    if new < 1e-12:
        raise StepUnderflow("cannot reach the requested accuracy: the grid step would drop below 1e-12")
    return new
