"""Certified trade-off curves (issue #17 item 2) against exact references: the Gaussian
mechanism's f-DP curve (closed form, Dong, Roth & Su 2022), one subsampled step by the
Neyman-Pearson lemma (scipy root finding on the threshold), the noiseless mechanism's (a
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
def test_noiseless_mechanism_is_bracketed(q, steps):
    """sigma = 0: a member is revealed with probability p = 1 - (1 - q)^T, else nothing is.
    Testing 'member' first: beta = 1 - a / (1 - p) (reject only on silent outcomes); testing
    'non-member' first: beta = (1 - p)(1 - a).  The curve is the smaller."""
    p = 1 - (1 - q) ** steps
    true = np.minimum(np.maximum(1 - ALPHA / (1 - p), 0.0), (1 - p) * (1 - ALPHA))
    b = pld.tradeoff(0.0, q, steps, ALPHA)
    _sane(b)
    assert (b.lower <= true + 1e-12).all() and (true <= b.upper + 1e-12).all()
    assert np.max(b.upper - b.lower) < 2e-3  # (the eps cells: e^{2E / POINTS} - 1 ~ 1e-3)


def _one_step_exact(sigma, q, alpha):
    """min(T(P, Q), T(Q, P)) for P = (1-q)N(0, s^2) + qN(1, s^2), Q = N(0, s^2): the likelihood
    ratio grows with x, so the best tests are thresholds on x (Neyman-Pearson)."""
    from scipy.optimize import brentq

    def p_below(c):
        return (1 - q) * norm.cdf(c / sigma) + q * norm.cdf((c - 1) / sigma)

    out = []
    for a in alpha:
        if a <= 0.0 or a >= 1.0:
            out.append(1.0 - a)
            continue
        c1 = brentq(lambda c: p_below(c) - a, -60, 60, xtol=1e-14)  # H0 = P, reject below c1
        t_pq = 1 - norm.cdf(c1 / sigma)
        c2 = brentq(lambda c: norm.sf(c / sigma) - a, -60, 60, xtol=1e-14)  # H0 = Q, reject above c2
        t_qp = p_below(c2)
        out.append(min(t_pq, t_qp))
    return np.array(out)


@pytest.mark.parametrize("sigma, q", [(0.8, 0.1), (1.5, 0.5), (0.5, 0.01)])
def test_one_step_matches_neyman_pearson(sigma, q):
    alpha = ALPHA[(ALPHA > 0) & (ALPHA < 1)]
    exact = _one_step_exact(sigma, q, alpha)
    b = pld.tradeoff(sigma, q, 1, alpha)
    assert (b.lower <= exact + 1e-9).all() and (exact <= b.upper + 1e-9).all()
    assert np.max(b.upper - b.lower) < 2e-3


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


@pytest.mark.parametrize("tpr, fpr, steps", [(0.05, 0.01, 1), (0.5, 0.1, 10), (0.01, 1e-3, 100)])
def test_risk_calibration_matches_the_gaussian(tpr, fpr, steps):
    """q = 1: TPR(FPR) = 1 - Phi(Phi^-1(1 - fpr) - mu), so sigma = sqrt(T) / (z(1-fpr) - z(1-tpr))."""
    from sgmfast.calibrate import PLD_TOL, calibrate_sigma_to_risk

    exact = math.sqrt(steps) / (norm.ppf(1 - fpr) - norm.ppf(1 - tpr))
    s = calibrate_sigma_to_risk(tpr, fpr, 1.0, steps)
    assert exact * (1 - 1e-9) <= s <= exact * (1 + 2 * PLD_TOL)


def test_risk_calibration_is_certified_on_the_private_side():
    from sgmfast.calibrate import calibrate_sigma_to_risk

    q, steps = 0.01, 500
    s = calibrate_sigma_to_risk(0.1, 0.01, q, steps)
    assert 1 - pld.tradeoff(s, q, steps, 0.01).lower <= 0.1
    assert 1 - pld.tradeoff(s * 0.99, q, steps, 0.01).lower > 0.1  # (and not far from the least)
    assert calibrate_sigma_to_risk(1.0, 0.01, q, steps) == 0.0
    assert calibrate_sigma_to_risk(0.01, 0.01, q, steps) == math.inf
    with pytest.raises(ValueError, match="fpr"):
        calibrate_sigma_to_risk(0.1, 1.5, q, steps)


def test_attack_tpr_and_advantage_gaussian_closed_forms():
    from scipy.stats import norm

    mu = 1.5  # sigma = 2, 9 steps at q = 1
    fpr = np.array([1e-4, 0.01, 0.3])
    t = pld.attack_tpr(2.0, 1.0, 9, fpr)
    exact = 1.0 - norm.cdf(norm.ppf(1 - fpr) - mu)
    assert np.all(t.lower <= exact) and np.all(exact <= t.upper)
    a = pld.advantage(2.0, 1.0, 9)
    assert a.lower <= 2 * norm.cdf(mu / 2) - 1 <= a.upper
    # q < 1: the advantage bounds every attack's TPR - FPR on the curve
    dense = np.linspace(0.0, 1.0, 2001)
    adv = pld.advantage(1.1, 0.01, 300)
    tpr = pld.attack_tpr(1.1, 0.01, 300, dense)
    assert float(np.max(tpr.lower - dense)) <= adv.upper + 1e-9
    with pytest.raises(ValueError, match="fpr"):
        pld.attack_tpr(1.0, 0.1, 10, 1.5)
