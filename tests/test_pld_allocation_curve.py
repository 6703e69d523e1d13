"""Balls-in-bins privacy curves (``pld.samplers.allocation_curve``): one epoch lattice for all
checkpoints.

References independent of the code: the exact one-epoch δ for t = 2 (quadrature, as in
``test_pld_allocation``), the Gaussian mechanism per epoch above (closed form: mu = sqrt(E) /
sigma) and the sum statistic below (mu = sqrt(E) / (sigma sqrt t)); and the single queries,
a different code path, which each checkpoint must overlap.  Regression cases: the curves the
domain sweep found over 10 s (bench/domain_sweep_more_failures.jsonl); their work is counted
(``sgmfast._work``), never timed.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from sgmfast import pld
from sgmfast._work import UNITS_PER_SECOND, metered
from sgmfast.pld.common import STEP_CACHE

from test_pld_allocation import _t2_delta


def _gauss_delta(mu, eps):
    return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)


def _gauss_eps(mu, delta):
    if _gauss_delta(mu, 0.0) <= delta:
        return 0.0
    return brentq(lambda e: _gauss_delta(mu, e) - delta, 0.0, 500.0, xtol=1e-13)


def _whole(t, steps):
    return -(-np.asarray(steps) // t), np.asarray(steps) // t


def _poisson_step_delta(sigma, q, eps):
    """One Poisson-subsampled Gaussian step, both directions (closed form: W = e^{(2y - 1)/(2 sigma^2)}
    is lognormal under the null, log W ~ N(-s^2/2, s^2), s = 1/sigma, and each direction is a
    lognormal call or put)."""
    s, e = 1.0 / sigma, math.exp(eps)

    def call(k):
        return 1.0 - k if k <= 0 else norm.cdf(0.5 * s - math.log(k) / s) - k * norm.cdf(-0.5 * s - math.log(k) / s)

    remove = q * call((e - 1 + q) / q)
    k = (1 - e * (1 - q)) / (e * q)
    add = e * q * (call(k) + k - 1) if k > 0 else 0.0
    return max(remove, add)


def test_t2_delta_curve_brackets_the_exact_epoch():
    """t = 2, checkpoints 1 and 2 steps: the first is the first step of an epoch -- a Poisson step
    at q = 1/2, composed as it ran (closed form) --, the second one whole epoch (quadrature)."""
    for sigma in (0.8, 1.5):
        b = pld.delta_curve(sigma, 0.5, [1, 2], 0.5, sampler="balls_in_bins")
        ref = _t2_delta(sigma, 0.5)
        first = _poisson_step_delta(sigma, 0.5, 0.5)
        assert b.lower[0] <= first * (1 + 1e-9) <= b.upper[0] * (1 + 2e-9) and first <= ref
        assert b.upper[0] - b.lower[0] <= 0.02 * first
        assert b.lower[1] <= ref * (1 + 1e-9) <= b.upper[1] * (1 + 2e-9)
        assert b.upper[1] - b.lower[1] <= 0.02 * ref


@pytest.mark.parametrize("sigma,t,steps,delta", [
    (1.1, 234, [234, 2340, 7020, 14040], 1e-5),          # MNIST, every 10 epochs
    (0.8, 20, [7, 20, 33], 1e-8),                        # partial epochs between whole ones
    (2.0, 1000, [1000, 3000, 5000], 1e-12),
])
def test_epsilon_curve_between_closed_forms_and_over_single_queries(sigma, t, steps, delta):
    b = pld.epsilon_curve(sigma, 1.0 / t, steps, delta, sampler="balls_in_bins")
    e_hi, e_lo = _whole(t, steps)
    assert np.all(np.diff(b.lower) >= 0) and np.all(np.diff(b.upper) >= 0)
    assert np.all(b.lower <= b.upper)
    for i, T in enumerate(steps):
        above = _gauss_eps(math.sqrt(e_hi[i]) / sigma, delta)  # (every epoch: a mixture of Gaussians)
        below = _gauss_eps(math.sqrt(e_lo[i]) / (sigma * math.sqrt(t)), delta) if e_lo[i] else 0.0
        assert b.lower[i] <= above * (1 + 1e-9)
        assert below <= b.upper[i] * (1 + 1e-9)
        one = pld.epsilon(sigma, 1.0 / t, T, delta, sampler="balls_in_bins")
        assert b.lower[i] <= one.upper * (1 + 1e-12) and one.lower <= b.upper[i] * (1 + 1e-12)
        if T % t == 0:  # (a whole number of epochs: as tight as the single query, to its accuracy)
            assert b.upper[i] - b.lower[i] <= max(1e-3 * b.upper[i], 1.01 * (one.upper - one.lower))


def test_delta_curve_agrees_with_the_epsilon_curve():
    """δ at the upper ε is at most the target, δ at the lower ε at least it (checkpoint 150)."""
    sigma, t, steps = 1.0, 50, [50, 150]
    e = pld.epsilon_curve(sigma, 1.0 / t, steps, 1e-6, sampler="balls_in_bins")
    d = pld.delta_curve(sigma, 1.0 / t, steps, float(e.upper[1]), sampler="balls_in_bins")
    assert d.lower[1] <= 1e-6 * (1 + 1e-9)
    d = pld.delta_curve(sigma, 1.0 / t, steps, float(e.lower[1]), sampler="balls_in_bins")
    assert d.upper[1] >= 1e-6 * (1 - 1e-9)


# the domain sweep's balls-in-bins curves over 10 s (each was one full query per checkpoint)
SWEEP_CURVES = [
    ("epsilon", 0.5407723293258665, 0.5, list(range(1, 5)), 0.01),
    ("epsilon", 1.6837589808209206, 1 / 39, [328, 1791, 2641, 4241, 10464, 10855, 12348, 17210, 18447], 1e-12),
    ("delta", 1.7312050933496501, 1 / 19, list(range(31, 194, 27)), 2.4246812933339126e-05),
]


@pytest.mark.parametrize("kind,sigma,q,steps,x", SWEEP_CURVES)
def test_sweep_curves_cost_a_few_single_queries(kind, sigma, q, steps, x):
    """The curve's work (counted) is at most a few times its last point's single query, and
    each of its points overlaps that query where they share the checkpoint."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        STEP_CACHE.clear()
        with metered() as one_meter:
            one = getattr(pld, kind)(sigma, q, steps[-1], x, sampler="balls_in_bins")
        STEP_CACHE.clear()
        with metered() as curve_meter:
            b = getattr(pld, kind + "_curve")(sigma, q, steps, x, sampler="balls_in_bins")
    assert b.lower[-1] <= one.upper * (1 + 1e-12) and one.lower <= b.upper[-1] * (1 + 1e-12)
    assert curve_meter.units <= max(8.0 * one_meter.units, 0.5 * UNITS_PER_SECOND)
    assert curve_meter.units <= 10.0 * UNITS_PER_SECOND
