"""The whole domain: certified bounds against exact references that share no code with sgmfast.

References (``tests/reference/mp_exact.py``, mpmath at 40+ verified digits): the composed
Gaussian mechanism (q = 1, T steps) and the exact one-step privacy profile (T = 1), both
relations, both directions of the question.  The upper bound must never be below the exact
value and the lower bound never above it -- no tolerance.  Then the invariants that hold for any
certified interval: bounds ordered, δ in [0, 1], eps(δ) and δ(eps) consistent, monotone in
sigma, q and T, and the edges of the domain (sigma = 0 and +inf, q = 0 and 1, T = 0, eps = +inf,
δ near 1) answered without a grid.  A larger sweep is ``bench/domain_sweep.py``.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from sgmfast import pld, rdp

sys.path.insert(0, str(Path(__file__).parent / "reference"))
mpmath = pytest.importorskip("mpmath")
import mp_exact  # noqa: E402  (the reference module, after the path)

SETTINGS = settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
RELATION = {"add_remove": ("max", 1), "replace_one": ("replace", 2)}


def log_uniform(lo, hi):
    return st.floats(math.log10(lo), math.log10(hi)).map(lambda x: float(10.0**x))


def _le(a, b) -> bool:
    """a <= b for floats and mpf alike, compared at full precision."""
    with mpmath.workdps(60):
        return mpmath.mpf(a) <= mpmath.mpf(b)


# --- exact references: the upper bound never below, the lower never above ---------------------


@SETTINGS
@given(sigma=log_uniform(1e-2, 1e4), steps=st.sampled_from([1, 3, 100, 10**4, 10**7]),
       eps=st.one_of(st.just(0.0), log_uniform(1e-8, 1e3)), relation=st.sampled_from(list(RELATION)))
def test_composed_gaussian_delta_is_bracketed(sigma, steps, eps, relation):
    exact = mp_exact.composed_gaussian_delta(sigma, steps, eps, sensitivity=RELATION[relation][1])
    b = pld.delta(sigma, 1.0, steps, eps, relation=relation)
    assert _le(b.lower, exact) and _le(exact, b.upper)
    assert b.upper <= max(float(exact) * (1 + 1e-6), 5e-324 if exact > 0 else 0.0) or exact < 1e-300


@settings(deadline=None, max_examples=8, suppress_health_check=[HealthCheck.too_slow])  # (grids at T = 1e7: s each)
@given(sigma=log_uniform(1e-1, 1e2), steps=st.sampled_from([10, 1000, 555508, 10**7]),
       gap=log_uniform(1e-15, 1e-9), eps=log_uniform(1e-8, 10.0), relation=st.sampled_from(list(RELATION)))
def test_nearly_full_batches_are_bracketed_by_the_gaussian(sigma, steps, gap, eps, relation):
    # q = 1 - gap: subsampling is post-processing of the Gaussian (δ <= δ_G(eps)) and P^T >=
    # q^T P_G^T (δ >= q^T δ_G(eps - T log q)); answered without a grid, within the accuracy
    q = 1.0 - gap
    c = RELATION[relation][1]
    g = mp_exact.composed_gaussian_delta(sigma, steps, eps, sensitivity=c)
    log_all = steps * mpmath.log(mpmath.mpf(q))
    g_shift = mp_exact.composed_gaussian_delta(sigma, steps, float(eps - log_all), sensitivity=c)
    b = pld.delta(sigma, q, steps, eps, relation=relation)
    assert _le(b.lower, g) and _le(mpmath.exp(log_all) * g_shift, b.upper)


def test_gaussian_floor_is_for_add_remove_only():
    # P^T >= q^T P_G^T bounds δ from below only where Q is the Gaussian's own N(0)^T (remove);
    # replace-one's Q is a mixture, so no floor is taken from it
    from sgmfast.pld.certifiers import exact

    lo, _ = exact.near_gaussian_delta(exact.near_gaussian([(1.0, 0.99, 3)], "replace_one"), np.array([0.2]))
    assert lo[0] == 0.0
    lo, _ = exact.near_gaussian_delta(exact.near_gaussian([(1.0, 0.99, 3)], "add_remove"), np.array([0.2]))
    assert lo[0] > 0.0


@SETTINGS
@given(sigma=log_uniform(1e-2, 1e4), steps=st.sampled_from([1, 3, 100, 10**4, 10**7]),
       delta=log_uniform(1e-30, 0.5), relation=st.sampled_from(list(RELATION)))
def test_composed_gaussian_epsilon_is_bracketed(sigma, steps, delta, relation):
    exact = mp_exact.composed_gaussian_epsilon(sigma, steps, delta, sensitivity=RELATION[relation][1])
    b = pld.epsilon(sigma, 1.0, steps, delta, relation=relation)
    assert _le(b.lower, exact) and _le(exact, b.upper)
    assert b.upper - b.lower <= 1e-9 * b.upper + 1e-10


@SETTINGS
@given(sigma=log_uniform(0.05, 1e4), q=log_uniform(1e-9, 0.999), eps=st.one_of(st.just(0.0), log_uniform(1e-6, 50.0)),
       relation=st.sampled_from(list(RELATION)))
def test_one_step_delta_is_bracketed(sigma, q, eps, relation):
    exact = mp_exact.one_step_delta(q, sigma, eps, RELATION[relation][0])
    b = pld.delta(sigma, q, 1, eps, relation=relation)
    assert _le(b.lower, exact) and _le(exact, b.upper)
    if exact > 1e-300:
        assert b.upper - b.lower <= 1e-6 * float(exact)


@SETTINGS
@given(sigma=log_uniform(0.05, 1e4), q=log_uniform(1e-9, 0.999), delta=log_uniform(1e-30, 0.9),
       relation=st.sampled_from(list(RELATION)))
def test_one_step_epsilon_is_bracketed_and_tight(sigma, q, delta, relation):
    direction = RELATION[relation][0]
    exact = mp_exact.one_step_epsilon(q, sigma, delta, direction)
    b = pld.epsilon(sigma, q, 1, delta, relation=relation)
    assert _le(b.lower, exact) and _le(exact, b.upper)
    if b.upper - b.lower > 1e-6 * b.upper + 1e-10:  # (absolute near eps = 0)
        # only where the problem itself is ill-conditioned: δ stays within 1e-9 of the target
        # over the whole interval (small sigma: δ ~ q for eps up to ~1 / (2 sigma^2)), beyond the
        # closed forms' certified ~1e-11
        ends = [mp_exact.one_step_delta(q, sigma, e, direction) for e in (b.lower, b.upper)]
        assert all(abs(x / delta - 1) <= 1e-9 for x in ends)


# --- reproducers of the total-domain issue (#14) ------------------------------------------------


def test_gaussian_cancellation_at_large_sigma():
    # ±1e-12 did not cover the cancellation: upper 9.393578935e-36 < exact 9.393578965e-36
    eps = 0.0011456435007629177
    exact = mp_exact.composed_gaussian_delta(1e4, 1, eps)
    b = pld.delta(1e4, 1.0, 1, eps)
    assert _le(b.lower, exact) and _le(exact, b.upper)
    exact_eps = mp_exact.composed_gaussian_epsilon(1e4, 1, 1e-25)
    e = pld.epsilon(1e4, 1.0, 1, 1e-25)
    assert _le(e.lower, exact_eps) and _le(exact_eps, e.upper)


def test_one_step_is_exact_at_tiny_delta():
    # was [0.0197, 0.870]
    b = pld.epsilon(2.0, 1e-4, 1, 1e-30)
    exact = mp_exact.one_step_epsilon(1e-4, 2.0, 1e-30, "max")
    assert _le(b.lower, exact) and _le(exact, b.upper) and b.upper - b.lower <= 1e-6 * b.upper


def test_answers_that_need_no_grid():
    assert tuple(pld.epsilon(0.1, 0.01, 1, 0.99)) == (0.0, 0.0)  # δ above the total variation
    b = pld.delta(1.0, 0.01, 1000, 1e30)  # beyond any loss a grid holds (was OverflowError)
    assert b.lower == 0.0 and 0.0 < b.upper <= 1e-300
    assert tuple(pld.delta(1.0, 0.01, 1000, math.inf)) == (0.0, 0.0)


# --- the edges: answered exactly, without a grid ------------------------------------------------


@pytest.mark.parametrize("relation", list(RELATION))
def test_no_noise(relation):
    q, steps = 0.01, 100
    p = -math.expm1(steps * math.log1p(-q))
    assert pld.epsilon(0.0, q, steps, 0.5 * p, relation=relation).lower == math.inf
    assert tuple(pld.epsilon(0.0, q, steps, min(2 * p, 0.99), relation=relation)) == (0.0, 0.0)
    b = pld.delta(0.0, q, steps, 3.0, relation=relation)
    assert b.lower <= p <= b.upper and b.upper - b.lower <= 1e-14
    assert rdp.epsilon(0.0, q, steps, 1e-5) == math.inf
    assert rdp.delta(0.0, q, steps, 3.0) >= p


@pytest.mark.parametrize("sigma,q,steps", [(math.inf, 0.1, 10), (1.0, 0.0, 10), (1.0, 0.1, 0)])
def test_steps_that_reveal_nothing(sigma, q, steps):
    assert tuple(pld.epsilon(sigma, q, steps, 1e-5)) == (0.0, 0.0)
    assert tuple(pld.delta(sigma, q, steps, 0.0)) == (0.0, 0.0)
    assert rdp.epsilon(sigma, q, steps, 1e-5) == 0.0 and rdp.delta(sigma, q, steps, 0.0) == 0.0


def test_accountant_with_an_unnoised_phase():
    acc = pld.PLDAccountant()
    acc.step(0.0, 0.001, steps=5)  # a non-private warm-up
    acc.step(1.0, 0.01, steps=100)
    p = -math.expm1(5 * math.log1p(-0.001))
    assert acc.epsilon(0.5 * p).lower == math.inf
    b = acc.epsilon(1e-2)
    noisy = pld.epsilon(1.0, 0.01, 100, 1e-2)
    assert b.lower <= noisy.upper and noisy.lower <= b.upper  # bounds of the noisy part and beyond
    d = acc.delta(1.0)
    assert d.lower >= p * (1 - 1e-12)


# --- invariants of certified intervals -----------------------------------------------------------


POINT = dict(sigma=log_uniform(0.3, 50.0), q=log_uniform(1e-5, 1.0), steps=st.integers(1, 2000),
             delta=log_uniform(1e-12, 1e-2))


@settings(deadline=None, max_examples=25, suppress_health_check=[HealthCheck.too_slow])
@given(**POINT)
def test_epsilon_and_delta_agree(sigma, q, steps, delta):
    b = pld.epsilon(sigma, q, steps, delta)
    assert 0.0 <= b.lower <= b.upper
    assume(0.0 < b.upper < math.inf)
    # δ(upper eps) <= delta and δ(lower eps) >= delta for the truth: the δ bounds must allow it
    assert pld.delta(sigma, q, steps, b.upper).lower <= delta * (1 + 1e-9)
    if b.lower > 0:
        assert pld.delta(sigma, q, steps, b.lower).upper >= delta * (1 - 1e-9)


@settings(deadline=None, max_examples=25, suppress_health_check=[HealthCheck.too_slow])
@given(**POINT, factor=st.floats(1.05, 4.0))
def test_monotone_in_sigma_q_and_steps(sigma, q, steps, delta, factor):
    base = pld.epsilon(sigma, q, steps, delta)
    more_noise = pld.epsilon(sigma * factor, q, steps, delta)
    assert more_noise.lower <= base.upper
    smaller_q = pld.epsilon(sigma, q / factor, steps, delta)
    assert smaller_q.lower <= base.upper
    fewer = pld.epsilon(sigma, q, max(1, int(steps / factor)), delta)
    assert fewer.lower <= base.upper


@settings(deadline=None, max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(sigma=st.one_of(st.just(0.0), log_uniform(1e-3, 1e9), st.just(math.inf)),
       q=st.one_of(st.just(0.0), log_uniform(1e-9, 1.0), st.just(1.0)),
       steps=st.one_of(st.just(0), st.integers(1, 10**7)),
       eps=st.one_of(st.just(0.0), log_uniform(1e-8, 1e4), st.just(math.inf)))
def test_rdp_delta_is_a_probability_and_inverts(sigma, q, steps, eps):
    d = rdp.delta(sigma, q, steps, eps)
    assert 0.0 <= d <= 1.0
    if 1e-300 < d < 1.0 and eps < math.inf:
        assert rdp.epsilon(sigma, q, steps, d) <= eps * (1 + 1e-9) + 1e-9


def test_rdp_delta_optimises_over_orders():
    # the scan stopped on the flat delta = 1 region: [5.0e-4, 2.0e-5, 1.0, 1.0], non-monotone
    d = rdp.delta(1.0, 0.01, 1000, [1.5, 2, 2.5, 3])
    assert np.all(np.diff(d) < 0) and d[-1] < 1e-6
    for e, di in zip([1.5, 2, 2.5, 3], d):
        assert rdp.epsilon(1.0, 0.01, 1000, di) == pytest.approx(e, rel=1e-9)


# --- the other reproducers (#14), each at its cause ---------------------------------------


@pytest.mark.parametrize("sigma", [1e6, 2e8, 7e8, 1e12])
def test_extreme_noise_answers_without_huge_grids_or_order_ranges(sigma):
    # 30-90 s at 1e6; the RDP order search allocated until killed at 2e8; MemoryError at 7e8
    b = pld.epsilon(sigma, 0.01, 1000, 1e-10)
    r = rdp.epsilon(sigma, 0.01, 1000, 1e-10)
    assert 0.0 <= b.lower <= b.upper <= r + 1e-300 and math.isfinite(r)
    assert 0.0 <= rdp.delta(sigma, 0.01, 1000, 1e-3) <= 1.0


@pytest.mark.parametrize("sigma,steps", [(1e-3, 10), (1e-3, 1000)])
def test_tiny_noise_answers(sigma, steps):
    # FloatingPointError after 23 s: the optimistic minorant overflowed across ~5e5-nat gaps
    b = pld.epsilon(sigma, 0.01, steps, 1e-5)
    assert 0.0 < b.lower <= b.upper < math.inf
    assert b.lower >= pld.epsilon(sigma, 0.01, 1, 1e-5).lower  # never below one step's


def test_long_runs_at_tiny_delta():
    # OverflowError; and the tail charges (1e-15 floor) hid delta = 1e-30 behind the RDP bound
    b = pld.epsilon(0.1, 0.5, 10**7, 1e-30)
    assert 0.0 < b.lower <= b.upper < math.inf
    b = pld.epsilon(5.0, 0.01, 10**7, 1e-30)
    assert b.upper - b.lower <= 1e-3 * b.upper


def test_calibration_crashes_and_refusals():
    from sgmfast import calibrate as cal

    # ZeroDivisionError in the saddle search (a tilted variance of 0)
    s = cal.calibrate_sigma(2.571412090508635, 2.952815819429878e-09, 0.004983855383988709, 3)
    assert pld.epsilon(s, 0.004983855383988709, 3, 2.952815819429878e-09).upper <= 2.571412090508635
    # "no sigma exists" (there is one)
    s = cal.calibrate_sigma(0.001, 1e-30, 1.0, 1)
    assert _le(mp_exact.composed_gaussian_delta(s, 1, 0.001), 1e-30)
    s = cal.calibrate_sigma(1e-4, 1e-5, 0.01, 1000, accountant="pld")
    assert pld.epsilon(s, 0.01, 1000, 1e-5).upper <= 1e-4
    # 54 s, then a refusal (it started from RDP's q = 1.5e-10; PLD's is ~6e-4)
    q = cal.calibrate_q(0.2783235023388343, 3.464333950028901e-08, 0.8848486282073339, 1244)
    assert 1e-4 < q < 1e-3
    assert pld.epsilon(0.8848486282073339, q, 1244, 3.464333950028901e-08).upper <= 0.2783235023388343


def test_gaussian_sigma_is_never_capped():
    # a capped sigma = 162754.79 was returned, where the exact delta is 4.9e-29 > 1e-30
    from sgmfast import calibrate as cal

    s = cal.gaussian_sigma(6e-5, 1e-30)
    assert _le(mp_exact.composed_gaussian_delta(s, 1, 6e-5), 1e-30)
    assert not _le(mp_exact.composed_gaussian_delta(s * (1 - 1e-9), 1, 6e-5), 1e-30)


def test_calibrated_values_pass_the_public_accountant():
    # sigma = 0.78790356 came back where pld.epsilon reported 1.0000132 > 1.0
    from sgmfast import calibrate as cal

    s = cal.calibrate_sigma(1.0, 1e-4, 0.002, 5000)
    assert pld.epsilon(s, 0.002, 5000, 1e-4).upper <= 1.0
    q = cal.calibrate_q(1.0, 1e-4, s, 5000)
    assert pld.epsilon(s, q, 5000, 1e-4).upper <= 1.0
    t = cal.calibrate_steps(1.0, 1e-4, 0.9, 0.002)
    assert pld.epsilon(0.9, 0.002, t, 1e-4).upper <= 1.0 < pld.epsilon(0.9, 0.002, t + 1, 1e-4).upper
    b = cal.calibrate_batch_size(1.0, 1e-4, 0.9, 50_000, epochs=2)
    assert pld.epsilon(0.9, b / 50_000, math.ceil(2 * 50_000 / b - 1e-9), 1e-4).upper <= 1.0


ACCURACY_CALLS = [
    lambda a: pld.epsilon(1.0, 0.01, 10, 1e-5, accuracy=a),
    lambda a: pld.delta(1.0, 0.01, 10, 1.0, accuracy=a),
    lambda a: pld.PLDAccountant(accuracy=a),
    lambda a: __import__("sgmfast.calibrate").calibrate.calibrate_sigma(1.0, 1e-5, 0.01, 10, accountant="rdp",
                                                                         accuracy=a),
    lambda a: __import__("sgmfast.calibrate").calibrate.calibrate_q(1.0, 1e-5, 1.0, 10, accountant="rdp", accuracy=a),
    lambda a: __import__("sgmfast.calibrate").calibrate.calibrate_steps(1.0, 1e-5, 1.0, 0.01, accountant="rdp",
                                                                         accuracy=a),
]


@pytest.mark.parametrize("call", ACCURACY_CALLS)
@pytest.mark.parametrize("bad,error", [("1e-3", TypeError), (True, TypeError), (-1.0, ValueError),
                                       (float("nan"), ValueError), (5.0, ValueError), (0.0, ValueError)])
def test_accuracy_is_a_real_number_in_0_1_everywhere(call, bad, error):
    # a string was accepted, -1 gave "math domain error", NaN a misleading message, 5.0 was used
    with pytest.raises(error, match="accuracy"):
        call(bad)


@pytest.mark.parametrize("sampler,relation", [("poisson", "add_remove"), ("poisson", "replace_one"),
                                              ("fixed_size", "replace_one"), ("balls_in_bins", "add_remove"),
                                              ("shuffle", "replace_one")])
def test_delta_at_the_end_of_the_floats(sampler, relation, recwarn):
    """δ in (0, 1) down to the least subnormal is valid input: an answer, never a crash.  (A goal of
    accuracy x δ underflowed to 0 and math.log raised 'math domain error' -- the tail-event sum,
    the shuffle's windows -- and RDP's replace-one search asked for δ / (1 + e^eps) = 0.)"""
    for d in (1e-300, 1e-320, 5e-324):
        b = pld.epsilon(0.8, 0.01, 300, d, relation=relation, sampler=sampler)
        assert 0.0 < b.lower <= b.upper
        # eps falls as δ grows: the upper end here bounds eps at 1e-200 from above too
        assert b.upper >= pld.epsilon(0.8, 0.01, 300, 1e-200, relation=relation, sampler=sampler).lower


def test_schedules_at_the_end_of_the_floats():
    """The noise-level mixtures' failure mass (a share of δ) underflowed to 0 at δ 5e-324, and its log
    raised 'math domain error'."""
    acc = pld.PLDAccountant()
    for i in range(300):
        acc.step(1.3 - 0.4 * i / 299, 0.01, 1)
    for d in (1e-310, 5e-324):
        b = acc.epsilon(d)
        assert 0.0 < b.lower <= b.upper
