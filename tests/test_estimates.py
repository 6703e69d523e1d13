"""``pld.grid.estimates``: ``brent_root``, the root ``scipy.optimize.brentq`` finds, to the bit
(it replaces brentq so that the command line need not import scipy.optimize); ``saddle_eps``
against the Gaussian mechanism's closed form (exact for a Gaussian loss)."""

import math
import random

import numpy as np
import pytest
from scipy.optimize import brentq

from sgmfast.pld.grid.estimates import _gauss_delta, brent_root, eps_estimate, saddle_eps


def _functions(rng):
    for _ in range(400):
        c, k, s = rng.uniform(-5, 5), rng.choice([1, 3, 5]), rng.uniform(0.1, 10)
        yield (lambda x, c=c, k=k, s=s: s * (x - c) ** k), c
        yield (lambda x, c=c, s=s: s * math.tanh(x - c) + 1e-3 * (x - c)), c
    for _ in range(400):  # what eps_estimate solves: the Gaussian delta(eps) minus the target
        mean, var, target = rng.uniform(0.01, 5), rng.uniform(0.01, 20), 10.0 ** rng.uniform(-12, -3)
        yield (lambda e, m=mean, v=var, t=target: _gauss_delta(e, m, v) - t), None


def test_brent_root_is_brentq_to_the_bit():
    rng = random.Random(7)
    n = 0
    for f, c in _functions(rng):
        if c is None:
            a, b = 0.0, 200.0
        else:
            a, b = c - rng.uniform(0.01, 20), c + rng.uniform(0.01, 20)
            if rng.random() < 0.5:
                a, b = b, a
        if not f(a) * f(b) < 0:
            continue
        for xtol in (1e-6, 1e-3):
            assert brent_root(f, a, b, xtol) == brentq(f, a, b, xtol=xtol)
            n += 1
    assert n > 1500
    tiny = lambda x: 1e-200 * (x - 0.3)  # noqa: E731  (f(a) f(b) underflows: signs, not products)
    assert brent_root(tiny, 0.0, 1.0, 1e-12) == brentq(tiny, 0.0, 1.0, xtol=1e-12)


def test_brent_root_bad_brackets():
    with pytest.raises(ValueError):
        brent_root(lambda x: x + 1.0, 0.0, 1.0, 1e-6)
    with pytest.raises(ValueError):
        brent_root(lambda x: math.nan, 0.0, 1.0, 1e-6)
    assert brent_root(lambda x: x, 0.0, 1.0, 1e-6) == 0.0
    assert brent_root(lambda x: x - 1.0, 0.0, 1.0, 1e-6) == 1.0


def test_eps_estimate_unchanged(monkeypatch):
    from sgmfast.pld.grid import estimates

    runs = [[(1.1, 0.00427, 14062)], [(0.8, 0.01, 1000)], [(2.0, 0.1, 50), (1.0, 0.02, 300)], [(5.0, 1.0, 10)]]
    ours = [eps_estimate(r, d) for r in runs for d in (1e-5, 1e-9)]
    monkeypatch.setattr(estimates, "brent_root", lambda f, a, b, xtol: brentq(f, a, b, xtol=xtol))
    assert ours == [eps_estimate(r, d) for r in runs for d in (1e-5, 1e-9)]


# --- saddle_eps: the saddle-point estimate of a composed eps(δ) ------------------------------
def _gaussian_step(mu, step, sds=12.0):
    """One Gaussian mechanism step's PLD on the grid (loss ~ N(mu, 2 mu) under P), masses at the
    grid points (a heuristic's input: no rounding direction needed)."""
    from scipy.stats import norm

    from sgmfast.pld.grid.onestep import OneStep

    sd = math.sqrt(2.0 * mu)
    j_lo, j_hi = math.floor((mu - sds * sd) / step), math.ceil((mu + sds * sd) / step)
    edges = (np.arange(j_lo, j_hi + 2) - 0.5) * step
    p = np.diff(norm.cdf(edges, loc=mu, scale=sd))
    return OneStep(j_lo, p, 0.0, step, None, None, None)


@pytest.mark.parametrize("sigma,steps,delta", [(1.0, 100, 1e-5), (4.0, 1000, 1e-8), (0.8, 10, 1e-3)])
def test_saddle_eps_of_the_gaussian_mechanism(sigma, steps, delta):
    """A Gaussian loss stays Gaussian under every tilt, so the saddle-point formula is exact there:
    the estimate is the closed-form eps(δ) of T Gaussian steps (mu = T / sigma^2 composed, Balle
    & Wang 2018, Thm 8: δ = Phi(-eps/m + m/2) - e^eps Phi(-eps/m - m/2), m = sqrt(T) / sigma),
    solved here by scipy's brentq, up to the grid's rounding of the loss."""
    from scipy.stats import norm

    m = math.sqrt(steps) / sigma
    ref = brentq(lambda e: norm.cdf(-e / m + m / 2) - math.exp(e) * norm.cdf(-e / m - m / 2) - delta, 0.0, 300.0)
    step = 1e-3 / sigma ** 2
    one = _gaussian_step(0.5 / sigma ** 2, step)
    eps, theta = saddle_eps([(one, steps)], step, delta, tol=1e-4)
    assert eps == pytest.approx(ref, rel=2e-3)
    # theta is the tilt whose composed tilted mean is eps: for a Gaussian, mu + theta * 2 mu
    mu = steps * 0.5 / sigma ** 2
    assert mu + theta * 2 * mu == pytest.approx(eps, rel=1e-3)


def test_saddle_eps_gives_up_below_the_mean():
    one = _gaussian_step(0.5, 1e-3)
    assert saddle_eps([(one, 100)], 1e-3, 0.9) is None  # δ(mean) is far below 0.9: eps < mean
