"""Certified trade-off curves (issue #17 item 2) against exact references: the Gaussian
mechanism's f-DP curve (closed form, Dong, Roth & Su 2022), the noiseless mechanism's (a
record revealed with probability p), and the certified profile itself."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from sgmfast import pld

ALPHA = np.concatenate(([0.0, 1e-8, 1e-6], np.geomspace(1e-4, 0.5, 12), np.linspace(0.55, 1.0, 10)))


def _sane(b):
    assert (0.0 <= b.lower).all() and (b.lower <= b.upper).all() and (b.upper <= 1.0 - ALPHA + 1e-15).all()
    assert (np.diff(b.lower) <= 1e-12).all()  # non-increasing in alpha


@pytest.mark.parametrize("sigma, steps", [(1.0, 1), (0.5, 3), (2.0, 100), (0.3, 1)])
def test_gaussian_curve_is_bracketed(sigma, steps):
    mu = math.sqrt(steps) / sigma
    exact = norm.cdf(norm.ppf(1.0 - ALPHA) - mu)
    b = pld.tradeoff(sigma, 1.0, steps, ALPHA)
    _sane(b)
    assert (b.lower <= exact + 1e-12).all() and (exact <= b.upper + 1e-12).all()
    assert np.max(b.upper - b.lower) < 5e-3


@pytest.mark.parametrize("q, steps", [(0.01, 10), (0.3, 2)])
def test_lower_bound_holds_for_the_noiseless_mechanism(q, steps):
    """sigma = 0: a member is revealed with probability p = 1 - (1 - q)^T, else nothing is; the
    best test of either order has beta = max(1 - a / (1 - p), (1 - p)(1 - a))."""
    p = 1 - (1 - q) ** steps
    true = np.maximum(np.maximum(1 - ALPHA / (1 - p), 0.0), (1 - p) * (1 - ALPHA))
    b = pld.tradeoff(0.0, q, steps, ALPHA)
    _sane(b)
    assert (b.lower <= true + 1e-12).all()


def test_no_steps_reveal_nothing():
    b = pld.tradeoff(1.0, 0.01, 0, ALPHA)
    assert np.allclose(b.lower, 1 - ALPHA) and np.allclose(b.upper, 1 - ALPHA)


@settings(deadline=None, max_examples=10, suppress_health_check=[HealthCheck.too_slow])
@given(sigma=st.floats(0.5, 3.0), log_q=st.floats(-3.0, -0.3), steps=st.integers(1, 3000),
       eps=st.floats(0.0, 4.0))
def test_lower_curve_certifies_at_least_the_profile(sigma, log_q, steps, eps):
    """The lower curve is an f-DP guarantee, so the δ it implies at eps, sup_a (1 - f(a) - e^eps a),
    is at least the certified lower δ(eps) (up to the grid of alpha)."""
    q = 10 ** log_q
    a = np.unique(np.concatenate((np.geomspace(1e-12, 1.0, 4000), np.linspace(0.0, 1.0, 2001))))
    b = pld.tradeoff(sigma, q, steps, a)
    d = pld.delta(sigma, q, steps, eps)
    implied_lo = float(np.max(1 - b.lower - math.exp(eps) * a))
    assert implied_lo >= d.lower - 1e-6  # (the sup over a grid of alpha: ~1e-7 below the sup)
    assert (np.diff(b.lower) <= 1e-12).all() and (b.lower <= b.upper).all()


def test_replace_one_is_below_add_remove():
    a = np.array([1e-3, 0.01, 0.1])
    ar = pld.tradeoff(1.0, 0.01, 500, a)
    ro = pld.tradeoff(1.0, 0.01, 500, a, relation="replace_one")
    assert (ro.lower <= ar.upper).all()


@pytest.mark.parametrize("alpha", [-0.1, 1.5, float("nan")])
def test_alpha_is_checked(alpha):
    with pytest.raises(ValueError, match="alpha"):
        pld.tradeoff(1.0, 0.01, 10, alpha)
