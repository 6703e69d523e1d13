"""Certified trade-off curves (issue #17 item 2) against exact references: the Gaussian
mechanism's f-DP curve (closed form, Dong, Roth & Su 2022), one subsampled step by the
Neyman-Pearson lemma (scipy root finding on the threshold), the noiseless mechanism's (a
record revealed with probability p), and the certified profile itself; the attack's TPR
(1 - β) and the membership advantage (δ at eps = 0, the total variation) against the same
closed forms and against the curve."""

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


@settings(deadline=None, max_examples=4, suppress_health_check=[HealthCheck.too_slow])
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
    # the certified TPR bound (what the calibration promises) meets the target at s ...
    assert pld.attack_tpr(s, q, steps, 0.01).upper <= 0.1
    # ... and the truth exceeds it 1 % below s: s is within 1 % of the least private sigma
    assert pld.attack_tpr(s * 0.99, q, steps, 0.01).lower > 0.1
    assert calibrate_sigma_to_risk(1.0, 0.01, q, steps) == 0.0
    assert calibrate_sigma_to_risk(0.01, 0.01, q, steps) == math.inf
    with pytest.raises(ValueError, match="fpr"):
        calibrate_sigma_to_risk(0.1, 1.5, q, steps)


FPR = np.concatenate(([0.0, 1e-9], np.geomspace(1e-6, 0.5, 9), [0.9, 1.0]))
#: the attack's advantage read off a curve: max over this grid of TPR - FPR (a sup over [0, 1] less
#: at most ~1e-7 for these runs: TPR - FPR is concave and flat at its top)
DENSE = np.unique(np.concatenate((np.geomspace(1e-12, 1.0, 4000), np.linspace(0.0, 1.0, 2001))))


@pytest.mark.parametrize("sigma, steps", [(1.0, 1), (2.0, 9), (0.5, 3), (20.0, 100)])
def test_attack_tpr_is_the_gaussian_at_q1(sigma, steps):
    """q = 1: TPR = 1 - Phi(Phi^-1(1 - fpr) - mu), mu = sqrt(T) / sigma (G_mu of Dong, Roth & Su)."""
    mu = math.sqrt(steps) / sigma
    exact = norm.sf(norm.ppf(1.0 - FPR) - mu)
    t = pld.attack_tpr(sigma, 1.0, steps, FPR)
    assert (t.lower <= exact + 1e-15).all() and (exact <= t.upper + 1e-15).all()
    assert (FPR <= t.lower).all() and (t.upper <= 1.0).all()
    assert np.max(t.upper - t.lower) < 1e-9


@pytest.mark.parametrize("sigma, steps", [(1.0, 1), (2.0, 9), (0.5, 3), (20.0, 100)])
def test_advantage_is_the_gaussian_at_q1(sigma, steps):
    """q = 1: max_a (TPR - FPR) = TV(N(0, 1), N(mu, 1)) = 2 Phi(mu / 2) - 1."""
    mu = math.sqrt(steps) / sigma
    a = pld.advantage(sigma, 1.0, steps)
    assert a.lower <= 2.0 * norm.cdf(mu / 2.0) - 1.0 <= a.upper
    assert a.upper - a.lower < 1e-9
    # and the curve's largest TPR - FPR is the same number, from the other side
    t = pld.attack_tpr(sigma, 1.0, steps, DENSE)
    assert float(np.max(t.lower - DENSE)) <= a.upper
    assert float(np.max(t.upper - DENSE)) >= a.lower - 1e-7


@pytest.mark.parametrize("relation", ["add_remove", "replace_one"])
@pytest.mark.parametrize("sigma, q, steps", [(1.1, 0.01, 300), (0.8, 0.3, 2), (0.0, 0.01, 10)])
def test_attack_tpr_is_one_minus_tradeoff(sigma, q, steps, relation):
    """q < 1: attack_tpr is 1 - tradeoff, rounded outward (an ulp at most) and clipped to [fpr, 1]."""
    b = pld.tradeoff(sigma, q, steps, FPR, relation=relation)
    t = pld.attack_tpr(sigma, q, steps, FPR, relation=relation)
    assert (FPR <= t.lower).all() and (t.lower <= t.upper).all() and (t.upper <= 1.0).all()
    assert (t.lower <= np.maximum(1.0 - b.upper, FPR)).all()  # never above: rounded down
    assert (t.upper >= 1.0 - b.lower).all()  # never below: rounded up
    assert np.allclose(t.lower, np.maximum(1.0 - b.upper, FPR), rtol=0, atol=2e-16)
    assert np.allclose(t.upper, 1.0 - b.lower, rtol=0, atol=2e-16)
    one = pld.attack_tpr(sigma, q, steps, 0.01, relation=relation)
    assert isinstance(one.lower, float) and isinstance(one.upper, float)


@pytest.mark.parametrize("relation", ["add_remove", "replace_one"])
@pytest.mark.parametrize("sigma, q, steps", [(1.1, 0.01, 300), (0.8, 0.3, 2), (1.1, 256 / 60000, 2000)])
def test_advantage_is_delta_at_zero_and_bounds_the_curve(sigma, q, steps, relation):
    """q < 1: advantage is pld.delta at eps = 0; no attack on the certified curve beats its upper
    bound, and the curve's best attack reaches its lower bound (up to the grid of FPR)."""
    a = pld.advantage(sigma, q, steps, relation=relation)
    d = pld.delta(sigma, q, steps, 0.0, relation=relation)
    assert (a.lower, a.upper) == (d.lower, d.upper)
    assert 0.0 <= a.lower <= a.upper <= 1.0 and a.upper - a.lower <= 1e-3 * a.upper
    t = pld.attack_tpr(sigma, q, steps, DENSE, relation=relation)
    assert float(np.max(t.lower - DENSE)) <= a.upper
    assert float(np.max(t.upper - DENSE)) >= a.lower - 1e-6


def test_advantage_edge_cases():
    # sigma = 0: the record is revealed exactly when it is sampled, at least once in T steps
    q, steps = 0.01, 10
    p = 1.0 - (1.0 - q) ** steps
    a = pld.advantage(0.0, q, steps)
    assert a.lower <= p + 1e-15 and p - 1e-15 <= a.upper and a.upper - a.lower < 1e-12
    # no steps (or q = 0): nothing is revealed, and the best attack guesses
    assert tuple(pld.advantage(1.0, q, 0)) == (0.0, 0.0)
    t = pld.attack_tpr(1.0, 0.0, 100, FPR)
    assert np.allclose(t.lower, FPR, rtol=0, atol=1e-15) and np.allclose(t.upper, FPR, rtol=0, atol=1e-15)
    # arrays broadcast like pld.delta
    b = pld.advantage([1.0, 2.0], 1.0, [1, 4])
    assert np.allclose(b.upper, 2 * norm.cdf(np.array([1.0, 1.0]) / 2) - 1, rtol=1e-12)


@settings(deadline=None, max_examples=8, suppress_health_check=[HealthCheck.too_slow])
@given(sigma=st.floats(0.5, 3.0), log_q=st.floats(-3.0, -0.3), steps=st.integers(1, 2000))
def test_advantage_does_not_grow_with_noise(sigma, log_q, steps):
    q = 10 ** log_q
    more, less = pld.advantage(1.1 * sigma, q, steps), pld.advantage(sigma, q, steps)
    assert more.lower <= less.upper


@pytest.mark.parametrize("fpr", [-0.1, 1.5, float("nan"), [0.1, 2.0]])
def test_fpr_is_checked(fpr):
    with pytest.raises(ValueError, match=r"fpr.*\[0, 1\]|fpr.*NaN"):
        pld.attack_tpr(1.0, 0.1, 10, fpr)
    with pytest.raises(TypeError, match="fpr"):
        pld.attack_tpr(1.0, 0.1, 10, True)
    with pytest.raises(ValueError, match="sigma"):
        pld.advantage(-1.0, 0.1, 10)


def _hellinger_affinity(sigma: float, q: float) -> float:
    """One SGM step's Bhattacharyya coefficient BC = E_Q sqrt(p / q), P = (1 - q) N(0, s^2) +
    q N(1, s^2), Q = N(0, s^2), by mpmath quadrature (composition multiplies it)."""
    import mpmath

    with mpmath.workdps(30):
        s = mpmath.mpf(sigma)
        f = lambda x: mpmath.npdf(x, 0, s) * mpmath.sqrt(1 - q + q * mpmath.exp((2 * x - 1) / (2 * s * s)))  # noqa: E731
        return float(mpmath.quad(f, [-mpmath.inf, -10 * s, 0, 1, 10 * s + 1, mpmath.inf]))


@pytest.mark.parametrize("sigma,q,steps", [(0.5, 0.5, 2000), (0.55, 0.3, 1500), (3.0, 0.5, 2000)])
def test_advantage_near_one_is_resolved_at_once(sigma, q, steps):
    """Where the total variation is within 1e-6 of 1, δ(0) barely moves with eps and the
    eps-shift rule alone refined seven grids (18 s at sigma 0.5, q 0.5, 2000 steps); an interval
    within accuracy / 1000 of δ is resolved.  Checked against the Hellinger sandwich
    1 - BC^T <= TV <= sqrt(1 - BC^2T) (Le Cam), BC one step's affinity by quadrature."""
    from sgmfast._work import UNITS_PER_SECOND, metered

    with metered() as m:
        b = pld.advantage(sigma, q, steps)
    assert m.units <= 0.5 * UNITS_PER_SECOND
    bc = _hellinger_affinity(sigma, q)
    assert b.upper - b.lower <= 1e-6 * b.upper
    assert b.upper >= 1 - bc ** steps and b.lower <= math.sqrt(1 - bc ** (2 * steps)) + 1e-15



@pytest.mark.parametrize("seed", range(4))
def test_plain_beta_lines_is_the_kernel_bit_for_bit(seed):
    """A plain first run takes ``_beta_lines_arrays`` for the kernel's loops (``_jit``'s
    ``plain=``): the same bounds bit for bit, on random lines with ties, zeros, alpha at 0 and 1,
    and with a NaN input (the loops then run)."""
    from sgmfast._kernels.pld import tradeoff as kt

    rng = np.random.default_rng(seed)
    for trial in range(40):
        m, n = int(rng.integers(1, 3000)), int(rng.integers(1, 150))
        eps = np.linspace(-float(rng.uniform(0.5, 50.0)), 50.0, m)
        d_up = np.sort(rng.uniform(0.0, 1.0, m))[::-1].copy()
        d_up[rng.integers(0, m, m // 3)] = 0.0 if trial % 2 else d_up[0]
        d_lo = d_up * rng.uniform(0.9, 1.0, m)
        d_inf = float(rng.uniform(0.0, 1e-3)) * (trial % 2)
        alpha = np.sort(np.concatenate(([0.0, 1.0][: trial % 3], rng.uniform(0.0, 1.0, n))))
        if trial == 39:
            d_lo[m // 2] = np.nan
        kernel, plain = [np.empty(alpha.size), np.empty(alpha.size)], [np.empty(alpha.size), np.empty(alpha.size)]
        kt.beta_lines(alpha, eps, d_lo, d_up, d_inf, *kernel)
        kt._beta_lines_arrays(alpha, eps, d_lo, d_up, d_inf, *plain)
        assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(kernel, plain)), trial
