"""Every sampler answers sigma = +inf (each output is pure noise, whatever the data: the two
neighbouring runs have the same distribution, so eps(delta) = 0 and delta(eps) = 0 for eps >= 0)
through every entry point, instead of refusing it or failing inside."""

import math
import subprocess
import sys

import numpy as np
import pytest

from sgmfast import pld
from sgmfast.pld import allocation, shuffle

SAMPLERS = ["poisson", "balls_in_bins", "shuffle", "fixed_size"]


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_infinite_noise_reveals_nothing(sampler):
    b = pld.epsilon(math.inf, 0.25, 8, 1e-5, sampler=sampler)
    assert (b.lower, b.upper) == (0.0, 0.0)
    d = pld.delta(math.inf, 0.25, 8, np.array([0.0, 0.5, 3.0]), sampler=sampler)
    assert np.all(d.lower == 0.0) and np.all(d.upper == 0.0)
    c = pld.epsilon_curve(math.inf, 0.25, [4, 8], 1e-5, sampler=sampler)
    assert np.all(c.upper == 0.0)


def test_the_samplers_own_calls_take_infinite_noise():
    assert tuple(allocation.epsilon(math.inf, 4, 8, 1e-5)) == (0.0, 0.0)
    assert tuple(allocation.delta(math.inf, 4, 8, 0.0)) == (0.0, 0.0)
    assert tuple(shuffle.epsilon(math.inf, 4, 8, 1e-5)) == (0.0, 0.0)
    assert shuffle.upper_epsilon(math.inf, 4, 8, 1e-5) == 0.0
    with pytest.raises(ValueError, match="sigma"):
        allocation.epsilon(math.nan, 4, 8, 1e-5)


def test_the_cli_prints_zero_for_infinite_noise():
    out = subprocess.run([sys.executable, "-m", "sgmfast", "epsilon", "--sigma", "inf", "--q", "0.25", "--steps", "8",
                          "--delta", "1e-5", "--sampler", "shuffle"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "epsilon: 0" in out.stdout


def test_subnormal_lower_delta_is_not_above_the_exact_value():
    """Domain sweep (bench/domain_sweep_more_failures.jsonl): one shuffled step per epoch is the
    Gaussian mechanism, whose closed-form lower δ was exp(log bound) -- in the subnormal range exp
    rounds to a multiple of 5e-324 and gave 7.4e-323 over the exact 7.2639e-323 (mpmath: δ of
    171 Gaussian mechanisms, mu = sqrt(171) / 4.78..., at eps 108.55).  A lower bound there is 0."""
    import mpmath

    from sgmfast import pld

    sigma, steps, eps = 4.7817323984463735, 171, 108.55269476327683
    with mpmath.workdps(50):
        mu = mpmath.sqrt(steps) / mpmath.mpf(sigma)
        e = mpmath.mpf(eps)
        exact = mpmath.ncdf(mu / 2 - e / mu) - mpmath.exp(e) * mpmath.ncdf(-mu / 2 - e / mu)
    with pytest.warns(pld.LooseBoundWarning):  # (the shuffle's interval is wide by construction)
        b = pld.delta(sigma, 1.0, steps, eps, sampler="shuffle")
    assert b.lower <= float(exact) <= b.upper


def test_allocation_refuses_a_string_sigma():
    from sgmfast.pld import allocation

    with pytest.raises(ValueError, match="sigma"):
        allocation.epsilon("1.0", 4, 16, 1e-5)


@pytest.mark.parametrize("sampler", ["balls_in_bins", "shuffle"])
@pytest.mark.parametrize("sigma, steps", [(1.0, 0), (math.inf, 8)])
def test_epoch_samplers_refuse_a_q_that_is_no_1_over_t_without_steps_or_noise(sampler, sigma, steps):
    """q must be 1/t for the epoch samplers: refused even where the answer would not need t (no
    steps, or pure noise) -- a domain sweep (seed 41) found q = 0.6666677 with T = 0 answered 0."""
    with pytest.raises(ValueError, match="q must be 1/t"):
        pld.delta(sigma, 0.6666676666666667, steps, 0.9, sampler=sampler)
    with pytest.raises(ValueError, match="q must be 1/t"):
        pld.epsilon(sigma, 0.6666676666666667, steps, 1e-5, sampler=sampler)


@pytest.mark.parametrize("sampler", ["balls_in_bins", "shuffle"])
@pytest.mark.parametrize("t, steps", [(22, 1), (3, 1), (7, 5), (10, 3), (22, 2178)])
def test_no_noise_delta_brackets_the_exact_rational(sampler, t, steps):
    """sigma = 0: δ(ε) is the chance the example is used, min(1, T / t), a rational; the lower end
    at or below it, the upper at or above, exactly (a domain sweep, seed 42, found the lower end
    1 ulp above 1/22: the float nearest it is larger)."""
    from fractions import Fraction

    b = pld.delta(0.0, 1.0 / t, steps, np.array([0.0, 0.25, 3.0]), sampler=sampler)
    exact = min(Fraction(1), Fraction(steps, t))
    assert all(Fraction(float(lo)) <= exact <= Fraction(float(up)) for lo, up in zip(b.lower, b.upper))


def test_balls_in_bins_delta_far_below_every_float_is_settled_by_its_start():
    # eps 57.8 at sigma 2.7: the one-epoch Gaussian bound is below 1e-300 already, which the δ
    # rule counts as resolved; the lattices still ran (14.7 units, 13 s) for [0, 1e-322]
    from sgmfast._work import UNITS_PER_SECOND, metered

    with metered() as m:
        b = pld.delta(2.6976415368402904, 0.00021958717610891525, 4554, 57.82519445147265, sampler="balls_in_bins")
    assert b.lower == 0.0 and 0.0 < b.upper <= 1e-300
    assert m.units < 0.1 * UNITS_PER_SECOND


def test_one_calls_answers_are_monotone_when_a_query_is_cut_short(monkeypatch):
    # a domain sweep (seed 45): under memory pressure the larger δ's query fell back to its start
    # bounds, 3551 against 0.60 at the smaller δ in the same call; eps(δ) falls as δ grows, so
    # the smaller δ's upper bound holds there too
    from sgmfast._types import Bounds
    from sgmfast.pld import samplers

    real = samplers._one

    def cut_short(kind, sampler, relation, sigma, q, steps, x, accuracy):
        return Bounds(0.0, 3551.0) if kind == "epsilon" and x > 0.01 else real(kind, sampler, relation, sigma, q,
                                                                                  steps, x, accuracy)

    monkeypatch.setattr(samplers, "_one", cut_short)
    b = pld.epsilon(1.840611478438744, 0.0003263778162649505, 5771, [4.458471690209781e-12, 0.0391],
                    sampler="fixed_size")
    assert b.upper[1] <= b.upper[0] < 1.0 and b.lower[1] == 0.0
