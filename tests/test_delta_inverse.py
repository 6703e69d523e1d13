"""δ(eps) bracketed by eps(δ) queries (``pld.delta_inverse``), and δ queries where the δ grids cannot
reach (δ below ~1e-20): the two entry points agree -- for fixed-size batches too, whose grids now
cut each step's far tail below δ.

The bracket is checked against a model profile whose inverse is known exactly (a Gaussian-like
tail δ(eps) = exp(-((eps - m) / c)^2), eps(δ) = m + c sqrt(-log δ)), with eps answers of random
width and offset around the exact inverse; the engine against the mpmath two-step table
(tests/reference/make_two_step_small_delta.py) and against eps(δ) at the same point."""

import csv
import math
import os

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from sgmfast import pld
from sgmfast.pld import delta_inverse as DI


def _model(m, c):
    def eps_of(d):
        return m + c * math.sqrt(-math.log(d))

    def delta_of(e):
        return math.exp(-(((e - m) / c) ** 2)) if e > m else 1.0

    return eps_of, delta_of


def _asker(eps_of, below, above, calls):
    """Certified eps(d) answers: the exact inverse widened by ``below`` and ``above`` (relative)
    plus a margin for float rounding."""

    def ask(d):
        calls.append(d)
        e = eps_of(d)
        return e * (1 - below) - 1e-12 * (1 + e), e * (1 + above) + 1e-12 * (1 + e)

    return ask


@settings(max_examples=200, deadline=None)
@given(m=st.floats(0.0, 5.0), c=st.floats(0.05, 3.0), target=st.floats(1e-60, 1e-3),
       below=st.floats(0.0, 3e-3), above=st.floats(0.0, 3e-3), start=st.floats(0.0, 40.0))
def test_bracket_holds_and_settles(m, c, target, below, above, start):
    eps_of, delta_of = _model(m, c)
    eps = eps_of(target)
    up0 = min(1.0, target * math.exp(start))  # (a certified start: any upper bound)
    calls = []
    lo, up, ok = DI.bracket_delta(_asker(eps_of, below, above, calls), eps, 0.0, up0, 1e-3)
    truth = delta_of(eps)
    assert lo <= truth * (1 + 1e-9) and truth <= up * (1 + 1e-9)
    assert len(calls) <= DI.MAX_QUERIES
    if ok:  # settled: the ends read eps within 1e-3 x eps, or SETTLED_SPAN x their answers' widths
        width = (below + above) * eps_of(lo)
        assert eps_of(lo) - eps_of(up) <= max(1e-3 * max(eps, 1e-2), 2 * DI.SETTLED_SPAN * width) * (1 + 1e-6) + 1e-9


def test_bracket_settles_quickly_on_a_gaussian_tail():
    eps_of, delta_of = _model(1.0, 0.8)
    for target in (1e-20, 1e-30, 1e-45):
        calls = []
        eps = eps_of(target)
        lo, up, ok = DI.bracket_delta(_asker(eps_of, 4e-4, 4e-4, calls), eps, 0.0, 1e-16, 1e-3)
        assert ok and len(calls) <= 8
        assert lo <= target <= up and up / lo < 1.5


def test_an_answer_of_zero_is_no_lower_bound_at_zero():
    """eps(d) = 0 for every d >= δ(0): an answer [0, 0] at eps = 0 bounds δ(0) from above only (it
    raised the lower end to d, past δ(0), before)."""
    def ask(d):  # (δ(0) = 0.4: eps(d) = 0 from there up, positive below, certified loosely)
        return (0.0, 0.0) if d >= 0.4 else (0.0, 1.0)

    lo, up, _ = DI.bracket_delta(ask, 0.0, 0.0, 0.5, 1e-3)
    assert lo <= 0.4 <= up


def test_bracket_keeps_the_start_when_no_answer_helps():
    """Answers that say nothing ((0, inf)) or no work left (None) leave the certified start."""
    assert DI.bracket_delta(lambda d: (0.0, math.inf), 2.0, 1e-30, 1e-20, 1e-3)[:2] == (1e-30, 1e-20)
    assert DI.bracket_delta(lambda d: None, 2.0, 1e-30, 1e-20, 1e-3) == (1e-30, 1e-20, False)


def test_shared_probes_serve_every_eps():
    """Over an array, each answer bounds every eps: later eps need few new queries."""
    eps_of, delta_of = _model(0.5, 1.2)
    targets = np.geomspace(1e-20, 1e-40, 12)
    eps = np.array([eps_of(t) for t in targets])
    calls = []
    lo, up, ok, met = DI.bracket_deltas(_asker(eps_of, 3e-4, 3e-4, calls), eps, np.zeros(12), np.full(12, 1e-16),
                                        1e-3)
    truth = np.array([delta_of(e) for e in eps])
    assert np.all(lo <= truth * (1 + 1e-9)) and np.all(truth <= up * (1 + 1e-9))
    assert ok.all() and len(calls) <= 5 * 12


def _two_step_rows():
    path = os.path.join(os.path.dirname(__file__), "reference", "two_step_small_delta.csv")
    with open(path) as f:
        rows = [r for r in csv.DictReader(line for line in f if not line.startswith("#"))]
    return [(float(r["sigma"]), float(r["q"]), float(r["eps"]), float(r["delta_max"])) for r in rows]


@pytest.mark.parametrize("sigma,q,eps,ref", _two_step_rows())
def test_two_steps_against_mpmath(sigma, q, eps, ref):
    """Two steps at δ 1e-6 .. 1e-40 (mpmath quadrature of the one-step profile over the other step):
    certified, and within 10 % (the δ grids alone read ~1e-24 or more below 1e-20); eps(δ) there
    met, and around the row's eps (σ 3, q 0.2, δ 1e-40 read [3.28593, 3.37261] while the add
    direction, whose loss is at most -2 log(1 - q) = 0.45, had no upper bound: ``engine.add_loss_max``)."""
    b = pld.delta(sigma, q, 2, eps)
    assert b.lower <= ref * (1 + 1e-12) and ref <= b.upper * (1 + 1e-12)
    assert b.upper <= 1.1 * ref and b.lower >= ref / 1.1
    e = pld.epsilon(sigma, q, 2, ref)
    assert e.met and e.lower <= eps * (1 + 1e-9) and eps * (1 - 1e-9) <= e.upper  # (ref: a float near δ(eps))


@pytest.mark.parametrize("sigma,q,steps,delta", [
    (1.0, 0.01, 1000, 1e-25), (1.0, 0.01, 1000, 1e-40), (0.8, 0.004, 10000, 1e-30),
    (1.9, 3e-4, 8, 1e-30), (1.1, 256 / 60000, 14062, 1e-30),
])
def test_delta_agrees_with_epsilon_at_small_delta(sigma, q, steps, delta):
    """eps(δ)'s interval, read back by δ(eps): δ(eps upper) <= δ <= δ(eps lower) holds for the truth,
    and the certified δ ends come within 15 % of δ (the grids alone: σ 1, q 0.01, T 1000 read
    [2.3e-36, 3.7e-24] at eps(1e-25))."""
    e = pld.epsilon(sigma, q, steps, delta)
    at_up, at_lo = pld.delta(sigma, q, steps, float(e.upper)), pld.delta(sigma, q, steps, float(e.lower))
    assert at_up.lower <= delta <= at_lo.upper
    assert at_up.upper <= 1.15 * delta and at_lo.lower >= delta / 1.15


@pytest.mark.parametrize("sigma,q,steps,delta", [
    (1.0, 0.01, 2, 1e-40), (1.1, 256 / 60000, 14062, 1e-30), (1.0, 0.01, 1000, 1e-35), (2.0, 0.05, 2, 1e-35),
])
def test_fixed_size_agrees_at_small_delta(sigma, q, steps, delta):
    """Fixed-size batches: each step's far tail is cut below δ (``common.tail_cut``), in eps(δ) and
    in δ(eps).  With it cut at TAU_STEP = 1e-30 a step, MNIST's run read eps(1e-30) in [55.65,
    25713.7] and two steps δ(eps(1e-40)) in [1e-40, 2e-32]."""
    e = pld.epsilon(sigma, q, steps, delta, sampler="fixed_size")
    assert e.met
    at_up = pld.delta(sigma, q, steps, float(e.upper), sampler="fixed_size")
    at_lo = pld.delta(sigma, q, steps, float(e.lower), sampler="fixed_size")
    assert at_up.lower <= delta <= at_lo.upper
    assert at_up.upper <= 1.15 * delta and at_lo.lower >= delta / 1.15


def test_noise_levels_agree_at_small_delta():
    """300 noise levels (the lattice mixtures): each step's far tail cut below RDP's bound on δ where
    that is small (``MixEngine.delta``'s ``below``); cut at 1e-16's share they read δ(eps(1e-25)) in
    [5.6e-26, 1.53e-25]."""
    acc = pld.PLDAccountant()
    for i in range(300):
        acc.step(1.3 - 0.4 * i / 299, 0.01, 1)
    e = acc.epsilon(1e-25)
    b = acc.delta(float(e.upper))
    assert b.lower <= 1e-25 and b.upper <= 1.2e-25


@settings(max_examples=200, deadline=None)
@given(m=st.floats(0.0, 5.0), c=st.floats(0.05, 3.0), target=st.floats(1e-60, 1e-3),
       below=st.floats(0.0, 3e-3), above=st.floats(0.0, 3e-3), accuracy=st.sampled_from([1e-2, 1e-3]))
def test_met_brackets_lie_within_delta_over_an_eps_window(m, c, target, below, above, accuracy):
    """met (``bracket_deltas``' fourth value) promises the δ grids' rule: the bracket lies inside
    [δ(eps_+), δ(eps_-)] for some eps_- <= eps <= eps_+ with eps_+ - eps_- <= accuracy x max(eps,
    1e-2) -- checked on the model profile's exact δ."""
    eps_of, delta_of = _model(m, c)
    eps = np.array([eps_of(target)])
    lo, up, ok, met = DI.bracket_deltas(_asker(eps_of, below, above, []), eps, np.zeros(1), np.ones(1), accuracy)
    if met[0]:
        assert ok[0]
        tol = accuracy * max(float(eps[0]), 1e-2) * (1 + 1e-9) + 1e-12
        # the smallest window holding the bracket: eps_- = eps_of(up), eps_+ = eps_of(lo)
        e_minus = eps_of(up[0]) if up[0] < 1.0 else m
        assert eps_of(lo[0]) - e_minus <= tol if lo[0] > 0.0 else False


def test_delta_reports_whether_its_accuracy_was_met():
    # MNIST at eps 2.38: 1 % wide in δ (the README), no wider than δ's change over a relative change
    # 1e-3 of eps
    b = pld.delta(1.1, 256 / 60000, 14062, 2.38)
    assert b.met is True and 0.005 < b.width < 0.015
    # the truth at eps +- 1e-3 x eps brackets the interval: eps(δ) read there by the other entry point
    e_lo = pld.epsilon(1.1, 256 / 60000, 14062, float(b.upper))
    e_up = pld.epsilon(1.1, 256 / 60000, 14062, float(b.lower))
    assert e_up.lower - e_lo.upper <= 2.1e-3 * 2.38
    # at δ ~1e-25 the eps(δ) answers are each 5e-4 x eps wide: the bracket cannot show 1e-3
    wide = pld.delta(1.0, 0.01, 1000, 7.851)
    assert wide.met is False and wide.lower <= wide.upper
    # arrays, the accountant and an executor report it too
    assert pld.delta(1.1, 256 / 60000, 14062, [0.5, 2.38]).met is True
    acc = pld.PLDAccountant()
    acc.step(1.1, 256 / 60000, 14062)
    assert acc.delta(2.38).met is True and acc.delta(7.851 * 2.0).met is not None
