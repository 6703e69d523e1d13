"""Closed forms that need no grid.

* q = 1: T steps of the Gaussian mechanism with noise multiplier sigma and sensitivity c
  (1 for add/remove, 2 for replace-one) are one Gaussian mechanism with mu = c sqrt(T) / sigma,
  δ(eps) = Φ(mu/2 - eps/mu) - e^eps Φ(-mu/2 - eps/mu) (Balle & Wang, ICML 2018, Thm 8).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import log_ndtr


def sensitivity(relation: str) -> float:
    """Largest change of the batch sum: 1 clipping norm for add/remove, 2 for replace-one."""
    return 2.0 if relation == "replace_one" else 1.0


def gaussian_delta(mu: float, eps: np.ndarray) -> np.ndarray:
    """Balle & Wang (ICML 2018) Thm 8: δ(eps) = Φ(mu/2 - eps/mu) - e^eps Φ(-mu/2 - eps/mu)."""
    a = mu / 2 - eps / mu
    b = -mu / 2 - eps / mu
    la, lb = log_ndtr(a), log_ndtr(b)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.where(np.isneginf(la), 0.0, np.exp(la) * -np.expm1(eps + lb - la))


def gaussian_eps(mu: float, target: float) -> tuple[float, float]:
    """eps(target) of the Gaussian mechanism by bisection on ``gaussian_delta``: (lo, hi)."""
    f = lambda e: float(gaussian_delta(mu, np.array([e]))[0]) - target  # noqa: E731
    if f(0.0) <= 0:
        return 0.0, 0.0
    hi = 1.0
    while f(hi) > 0:
        hi *= 2
    lo = 0.0 if hi == 1.0 else hi / 2
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if f(mid) > 0:
            lo = mid
        else:
            hi = mid
    return lo, hi


def gaussian_mu(schedule, relation: str) -> float | None:
    """mu of the composed Gaussian when the schedule is a single entry with q = 1, else None."""
    if len(schedule) == 1 and schedule[0][1] == 1.0:
        sigma, _, count = schedule[0]
        return sensitivity(relation) * math.sqrt(count) / sigma
    return None
