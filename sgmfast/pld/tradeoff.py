"""Certified trade-off curves (f-DP): the least type-II error β of any membership test with
type-I error at most α, bounded on both sides.

For a pair (P, Q) and every eps in R, β >= 1 - H_{e^eps}(Q || P) - e^eps α for every test
(E_Q φ - e^eps E_P φ <= the hockey-stick divergence), with equality at the Neyman-Pearson test
for the right eps, so T(P, Q)(α) = sup_{eps in R} (1 - δ_{Q||P}(eps) - e^eps α).  The mechanism's
tight curve is the smaller over the orders of its dominating pair (Zhu, Dong & Wang 2022:
the pair dominates every hockey-stick divergence, eps in R): f = min(T(P, Q), T(Q, P)), one
line family per direction of the PLD.

* Lower bound (what protects): each line with a certified upper δ lies below its direction's T,
  so the max over any finite set of eps, then the min over the directions, is below f.
* Upper bound: on a cell eps_i <= eps <= eps_{i+1}, δ(eps) >= max(δ_lo(eps_{i+1}), 1 - e^{eps_{i+1}})
  (δ does not increase in eps; H_a(P || Q) >= 1 - a) and e^eps >= e^{eps_i}: each line is below
  its value at the cell's corners.  Below the grid a line is at most e^eps (1 - α) <= e^{-E}, above
  it at most 1 - e^E α (δ >= 0).

δ is needed to an absolute precision (~1e-6), not a relative one: one untilted composition per
direction and rounding, bounded for every eps in [-E, E] at once (``queries.delta_bound``).
Noiseless steps (sigma = 0) reveal a sampled record with probability p: with P = p R + (1 - p) P_n,
R an outcome Q never gives, the remove direction's δ is p + (1 - p) δ_n(eps - log(1 - p)) and the
add direction's δ_n(eps + log(1 - p)), δ_n that of the noisy steps.  q = 1 everywhere is the Gaussian mechanism,
β = Φ(Φ⁻¹(1 - α) - μ), answered in closed form.  The attack's true-positive rate at a
false-positive rate α is 1 - β(α) (``tpr_bounds``).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import ndtr, ndtri

from .._failures import GridFailure
from .. import rdp as _rdp
from .certifiers import _compose
from .._kernels.pld import tradeoff as kt
from .certifiers import exact
from .common import ADD, FIRST_BINS, REMOVE, REPLACE, U, bins_limit
from .engine import Engine
from .grid.estimates import eps_estimate, initial_step
from .grid.queries import delta_bound

#: eps grid points on [-E, E] (the upper bound's cells: its gap is about e^{2E / POINTS})
POINTS = 20001


def grid_end(sigma: float, q: float, steps: int, alpha: np.ndarray, relation: str) -> float:
    """E: RDP's eps at a δ far below the smallest α (lines beyond it are below zero there)."""
    tiny = max(1e-3 * float(np.min(alpha[alpha > 0], initial=1.0)), 1e-300)
    e_max = _rdp.epsilon(sigma, q, steps, min(tiny, 0.5)) if sigma > 0 else math.inf
    if relation == "replace_one":
        e_max *= 2.0  # (group privacy: the replace-one eps is at most twice the add/remove one)
    return min(max(float(e_max), 1.0), 50.0) if math.isfinite(e_max) else 50.0


def bounds(sigma: float, q: float, steps: int, alpha: np.ndarray, relation: str, accuracy: float, goal: float):
    """(lower, upper) of β at each alpha (module notes)."""
    engine = Engine([(sigma, q, steps)], accuracy, None, relation)
    if not engine.schedule and engine.p_hi == 0.0:
        return 1.0 - alpha, 1.0 - alpha  # nothing is revealed: the trivial test is the best
    w = exact.gaussian_w(engine.schedule, relation) if engine.p_hi == 0.0 else None
    if w is not None:
        return _gaussian(alpha, *w)
    if engine.schedule:
        e_end = grid_end(sigma, q, steps, alpha, relation)
    else:  # only noiseless steps: the lines turn at eps = +-log(1 - p)
        e_end = min(10.0 - 2.0 * math.log1p(-min(engine.p_hi, 1.0 - 1e-16)), 50.0)
    eps = np.linspace(-e_end, e_end, POINTS)
    lo, up = np.ones(alpha.size), np.ones(alpha.size)
    try:
        for d_lo, d_up, d_inf in _directions(engine, eps, goal, e_end):
            l, u = np.empty(alpha.size), np.empty(alpha.size)
            kt.beta_lines(alpha, eps, d_lo, d_up, d_inf, l, u)
            lo, up = np.minimum(lo, l), np.minimum(up, u)
    except (ArithmeticError, GridFailure, MemoryError):  # no grid fits: only the trivial bounds
        lo, up = np.zeros(alpha.size), np.ones(alpha.size)
    up = np.minimum(up, 1.0 - alpha)  # (the test that ignores the data)
    return np.minimum(lo, up), up


def tpr_bounds(alpha: np.ndarray, beta_lo: np.ndarray, beta_up: np.ndarray):
    """(lower, upper) of the best attack's true-positive rate 1 - β(α) from bounds on β.

    ``1 - x`` is rounded outward: it is exact when the result r = fl(1 - x) is below 1/2 (then
    x > 1/2, Sterbenz) and otherwise exact iff ``1 - r == x`` (that subtraction is exact, r in
    [1/2, 1]); an inexact r moves one ulp outward.  Then lower >= α (the test that flags at
    random with probability α has TPR = α, so the best has at least that: β(α) <= 1 - α) and
    upper <= 1; neither clip can cut into the true value.
    """
    def one_minus(x, toward):
        r = 1.0 - x
        exact = (r < 0.5) | (1.0 - r == x)
        return np.where(exact, r, np.nextafter(r, toward))

    lo = np.maximum(one_minus(beta_up, -np.inf), alpha)
    up = np.minimum(one_minus(beta_lo, np.inf), 1.0)
    return lo, up


def _gaussian(alpha, mu_lo, mu_hi):
    """Φ(Φ⁻¹(1 - α) - μ) with μ in [mu_lo, mu_hi]; scipy's ndtr/ndtri err by far less than the
    1e-12 padding."""
    with np.errstate(invalid="ignore"):
        z = ndtri(1.0 - alpha)
        lo = ndtr(z - mu_hi) - 1e-12
        up = ndtr(z - mu_lo) + 1e-12
    lo = np.where(alpha >= 1.0, 0.0, np.where(alpha <= 0.0, 1.0, lo))
    up = np.where(alpha >= 1.0, 0.0, np.where(alpha <= 0.0, 1.0, up))
    return np.clip(lo, 0.0, 1.0), np.clip(up, 0.0, 1.0)


def _directions(engine: Engine, eps: np.ndarray, goal: float, e_end: float):
    """(δ_lo, δ_up, a lower bound on δ(+inf)) on the grid for each direction of the pair (module
    notes; only the noiseless steps put mass at +inf)."""
    p_lo, p_hi = engine.p_lo, engine.p_hi
    if engine.schedule:
        sched = engine.schedule
        job = engine.job(goal)
        step = initial_step(sched, engine.accuracy, max(eps_estimate(sched, goal, engine.main), 1e-2), engine.main)
        with bins_limit(FIRST_BINS):
            grids = {d: (_compose(sched, d, step, 0.0, False, -e_end, job.tau),
                         _compose(sched, d, step, 0.0, True, -e_end, job.tau))
                     for d in ((REPLACE,) if engine.replace else (REMOVE, ADD))}

        def noisy(d, e, upper):
            return delta_bound(grids[d][1 if upper else 0], e)
    else:
        grids = {REMOVE: None, ADD: None}

        def noisy(d, e, upper):  # no noisy step: P = Q, δ(eps) = (1 - e^eps)_+
            return np.maximum(-np.expm1(e), 0.0) * ((1 + 4 * U) if upper else (1 - 4 * U))

    for d in grids:
        if p_hi == 0.0:
            yield noisy(d, eps, False), noisy(d, eps, True), 0.0
        elif d == ADD:  # the revealing outcome has no Q-mass: δ_n at eps + log(1 - p)
            shift_lo = math.log1p(-p_lo) * (1 - 4 * U)  # (closer to 0: the smaller δ)
            shift_up = math.log1p(-p_hi) * (1 + 4 * U) if p_hi < 1.0 else -math.inf
            yield noisy(d, eps + shift_lo, False), np.minimum(noisy(d, eps + shift_up, True), 1.0), 0.0
        else:  # P = p R + (1 - p) P_n, R disjoint from Q: δ = p + (1 - p) δ_n(eps - log(1 - p))
            up_shift = -math.log1p(-p_lo) * (1 - 4 * U)  # (the smaller argument: the larger δ_n)
            lo_shift = -math.log1p(-p_hi) * (1 + 4 * U) if p_hi < 1.0 else math.inf
            yield (p_lo + (1 - p_hi) * noisy(d, eps + lo_shift, False)) * (1 - 4 * U), \
                np.minimum((p_hi + (1 - p_lo) * noisy(d, eps + up_shift, True)) * (1 + 4 * U), 1.0), p_lo


def _profile_upper(sigma: float, q: float, steps: int, eps: np.ndarray, relation: str, accuracy: float,
                  goal: float) -> np.ndarray:
    """Certified upper bounds on δ(eps) (the larger of the two directions) at each eps of an
    increasing grid, to about ``goal`` absolute, from one untilted composition per direction: the
    whole privacy profile for the price of one query (for :mod:`sgmfast.tuning`)."""
    engine = Engine([(sigma, q, steps)], accuracy, None, relation)
    if not engine.schedule and engine.p_hi == 0.0:
        return np.maximum(-np.expm1(eps), 0.0)
    e_end = min(max(float(eps[-1]), 1.0), 50.0)
    up = np.zeros(eps.size)
    for _, d_up, _ in _directions(engine, eps, goal, e_end):
        up = np.maximum(up, d_up)
    return np.minimum(up, 1.0)
