"""Edge targets of the dp_accounting adapter (issue #28 item 3), against dp_accounting's own
``pld.PLDAccountant`` and ``rdp.RdpAccountant``.

dp_accounting's conventions (0.6): with nothing composed epsilon is 0 at every delta and delta 0
at every epsilon; after a ``NonPrivateDpEvent`` epsilon is +inf at every delta (1 too) and delta
is 1 at every epsilon; otherwise epsilon is +inf at delta = 0 (Gaussian noise is not pure DP), 0
at delta = 1 and at any delta past the total variation distance, and delta(+inf) is 0 (RDP) or
the PLD's truncated tail mass (~1e-15).  The adapter returns the same value wherever that value is
sound, a sound and sharper one elsewhere (tested one-sided), and raises ``ValueError`` naming the
parameter for targets outside [0, 1] / [0, +inf] (dp_accounting's RDP raises on negative ones,
its PLD answers them).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

dpa = pytest.importorskip("dp_accounting")

from dp_accounting import pld as dpa_pld  # noqa: E402
from dp_accounting import rdp as dpa_rdp  # noqa: E402
from scipy.optimize import brentq  # noqa: E402
from scipy.stats import norm  # noqa: E402

from sgmfast._types import Bounds  # noqa: E402
from sgmfast.integrations.dp_accounting import SGMFastPrivacyAccountant  # noqa: E402

ADD = dpa.NeighboringRelation.ADD_OR_REMOVE_ONE
REPLACE = dpa.NeighboringRelation.REPLACE_ONE
INF = math.inf


def _event(name):
    return {
        "empty": None,
        "poisson": dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(0.01, dpa.GaussianDpEvent(1.0)), 100),
        "non_private": dpa.NonPrivateDpEvent(),
        "gaussian_q1": dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(1.0), 3),
        "fixed_size": dpa.SelfComposedDpEvent(
            dpa.SampledWithoutReplacementDpEvent(1000, 10, dpa.GaussianDpEvent(1.0)), 100),
    }[name]


# (scenario, relation) pairs; each is run on both sgmfast engines
SCENARIOS = [("empty", ADD), ("empty", REPLACE), ("poisson", ADD), ("non_private", ADD),
             ("non_private", REPLACE), ("gaussian_q1", ADD), ("gaussian_q1", REPLACE),
             ("fixed_size", REPLACE)]
CASES = [(name, rel, engine) for name, rel in SCENARIOS for engine in ("pld", "rdp")]
IDS = [f"{name}-{rel.name}-{engine}" for name, rel, engine in CASES]

# dp_accounting's answers at the edges, the same from its PLD and RDP accountants:
# (epsilon at delta = 0, epsilon at delta = 1)
EPSILON_EDGES = {"empty": (0.0, 0.0), "non_private": (INF, INF), "poisson": (INF, 0.0),
                 "gaussian_q1": (INF, 0.0), "fixed_size": (INF, 0.0)}


def _ours(name, rel, engine):
    acc = SGMFastPrivacyAccountant(accountant=engine, neighboring_relation=rel)
    ev = _event(name)
    return acc if ev is None else acc.compose(ev)


@functools.lru_cache(maxsize=None)
def _theirs(name, rel):
    """dp_accounting's own accountants that take the scenario (at least one does); only queried,
    so built once per scenario."""
    out = []
    for acc in (dpa_pld.PLDAccountant(rel), dpa_rdp.RdpAccountant(neighboring_relation=rel)):
        ev = _event(name)
        if ev is None:
            out.append(acc)
        elif acc.supports(ev):
            out.append(acc.compose(ev))
    assert out
    return tuple(out)


def _their_delta(acc, eps):
    """dp_accounting's delta; its RDP computes inf - inf at epsilon = +inf after a non-private
    event (a numpy RuntimeWarning, an error under this suite's settings) and answers 1."""
    with np.errstate(invalid="ignore", over="ignore"):
        return float(acc.get_delta(eps))


def _gaussian_one_minus_delta(eps, mu):
    """1 - delta(eps) of the Gaussian mechanism of sensitivity / noise ``mu`` (exact, no
    cancellation near delta = 1)."""
    return norm.cdf(eps / mu - mu / 2) + math.exp(eps + norm.logcdf(-eps / mu - mu / 2))


def _gaussian_delta(eps, mu):
    return norm.cdf(mu / 2 - eps / mu) - math.exp(eps + norm.logcdf(-eps / mu - mu / 2))


# ------------------------------------------------------------------ epsilon at delta in {0, 1}

@pytest.mark.parametrize("name, rel, engine", CASES, ids=IDS)
def test_epsilon_at_delta_zero_and_one_is_dp_accountings(name, rel, engine):
    ours, theirs = _ours(name, rel, engine), _theirs(name, rel)
    at_zero, at_one = EPSILON_EDGES[name]
    for delta, want in [(0.0, at_zero), (-0.0, at_zero), (0, at_zero), (np.float64(0.0), at_zero),
                        (1.0, at_one), (1, at_one), (np.float64(1.0), at_one)]:
        assert [float(t.get_epsilon(delta)) for t in theirs] == [want] * len(theirs)
        got = ours.get_epsilon(delta)
        assert got == want and type(got) is float
    # just below 1: past every scenario's total variation distance, so 0 (inf if non-private)
    for delta in (1 - 1e-12, 0.999):
        assert ours.get_epsilon(delta) == at_one == float(theirs[-1].get_epsilon(delta))


@pytest.mark.parametrize("engine", ["pld", "rdp"])
def test_epsilon_bounds_at_the_edges_are_certified(engine):
    """Exact edge answers are certified intervals for either engine: (lower, upper) both hold."""
    mech = _ours("poisson", ADD, engine)
    assert mech.get_epsilon_bounds(0.0) == Bounds(INF, INF)
    assert mech.get_epsilon_bounds(1.0) == Bounds(0.0, 0.0)
    assert _ours("empty", ADD, engine).get_epsilon_bounds(0.0) == Bounds(0.0, 0.0)
    non_private = _ours("non_private", REPLACE, engine)
    assert non_private.get_epsilon_bounds(0.5) == Bounds(INF, INF)
    # every mechanism is (0, 1)-DP: dp_accounting's +inf there is kept as the reported upper end,
    # but the certified lower end is the truth, 0
    assert non_private.get_epsilon_bounds(1.0) == Bounds(0.0, INF)


def test_non_private_dominates_a_composition():
    ev = dpa.ComposedDpEvent([_event("poisson"), dpa.NonPrivateDpEvent()])
    theirs = dpa_pld.PLDAccountant().compose(ev)
    for engine in ("pld", "rdp"):
        ours = SGMFastPrivacyAccountant(accountant=engine).compose(ev)
        for delta in (0.0, 1e-5, 1.0):
            assert ours.get_epsilon(delta) == theirs.get_epsilon(delta) == INF
        for eps in (0.0, 1.0, INF):
            assert ours.get_delta(eps) == _their_delta(theirs, eps) == 1.0


# ------------------------------------------------------------------ delta at epsilon in {0, +inf}

@pytest.mark.parametrize("name, rel, engine", CASES, ids=IDS)
def test_delta_at_epsilon_infinity(name, rel, engine):
    """Empty: 0, non-private: 1 (both dp_accounting's); a Gaussian mechanism has no infinite
    privacy loss: 0 exactly, as dp_accounting's RDP, below its PLD's truncated tail mass."""
    ours, theirs = _ours(name, rel, engine), _theirs(name, rel)
    got = ours.get_delta(INF)
    assert type(got) is float
    if name in ("empty", "non_private"):
        assert [_their_delta(t, INF) for t in theirs] == [got] * len(theirs)
        assert got == (1.0 if name == "non_private" else 0.0)
    else:
        assert got == 0.0
        for t in theirs:
            assert 0.0 <= _their_delta(t, INF) <= 1e-14


@pytest.mark.parametrize("name, rel, engine", CASES, ids=IDS)
def test_delta_at_epsilon_zero(name, rel, engine):
    ours, theirs = _ours(name, rel, engine), _theirs(name, rel)
    got = ours.get_delta(0.0)
    assert ours.get_delta(-0.0) == got == ours.get_delta(0)
    if name in ("empty", "non_private"):
        assert [float(t.get_delta(0.0)) for t in theirs] == [got] * len(theirs)
        return
    if name == "gaussian_q1":
        # three unit-sensitivity steps at noise 1 (twice the multiplier over a sensitivity of 2
        # under REPLACE_ONE): mu = sqrt(3), delta(0) = 2 Phi(mu / 2) - 1, exactly
        exact = 2 * norm.cdf(math.sqrt(3) / 2) - 1
        assert got >= exact * (1 - 1e-14)
        if engine == "pld":
            assert got == pytest.approx(exact, rel=1e-9)
        # (dp_accounting's PLD reads a REPLACE_ONE multiplier over sensitivity 1: only add/remove)
        if rel is ADD and engine == "pld":
            assert got == pytest.approx(float(theirs[0].get_delta(0.0)), rel=1e-9)
    elif name == "poisson":
        # dp_accounting's optimistic PLD estimates the truth from below
        lower = dpa.pld.privacy_loss_distribution.from_gaussian_mechanism(
            1.0, sampling_prob=0.01, pessimistic_estimate=False).self_compose(100).get_delta_for_epsilon(0.0)
        assert got >= float(lower) * (1 - 1e-9)
        if engine == "pld":  # dp_accounting's (pessimistic) PLD: the same value
            assert got == pytest.approx(float(theirs[0].get_delta(0.0)), rel=1e-4)
    else:  # fixed_size: dp_accounting's RDP is its only accountant for it; both our engines are sharper
        from sgmfast.pld.samplers import fixed_size

        assert got <= float(theirs[0].get_delta(0.0))
        assert got >= fixed_size.delta_runs([(2.0, 0.01, 100)], 0.0).lower


@pytest.mark.parametrize("engine", ["pld", "rdp"])
@pytest.mark.parametrize("rel", [ADD, REPLACE], ids=["ADD", "REPLACE"])
def test_delta_at_epsilon_zero_of_one_sampled_step_is_sound(engine, rel):
    """One step of sampling rate q: delta(0) is the total variation q (2 Phi(1 / (2 sigma)) - 1)
    (Poisson under add/remove; a fixed-size batch under replace-one, sigma twice the multiplier
    over the two clipping norms of a replacement)."""
    q, mult = 0.05, 0.8
    if rel is ADD:
        ev = dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(mult))
    else:
        ev = dpa.SampledWithoutReplacementDpEvent(1000, 50, dpa.GaussianDpEvent(mult))
    got = SGMFastPrivacyAccountant(accountant=engine, neighboring_relation=rel).compose(ev).get_delta(0.0)
    exact = q * (2 * norm.cdf(1 / (2 * mult)) - 1)
    assert got >= exact * (1 - 1e-12)
    if engine == "pld":
        assert got <= exact * (1 + 1e-3)
    if rel is ADD:
        assert float(dpa_pld.PLDAccountant().compose(ev).get_delta(0.0)) == pytest.approx(exact, rel=1e-3)


@pytest.mark.parametrize("name, rel, engine", CASES, ids=IDS)
def test_delta_at_huge_finite_epsilon(name, rel, engine):
    """Far above any useful epsilon the engines' exp(epsilon) products overflow (PLD answered 1
    at 1e200 with an overflow warning, RDP 0 at 1e305): the adapter answers at 1e30, which bounds
    delta there (delta never increases with epsilon).  No warning (warnings are errors here)."""
    ours = _ours(name, rel, engine)
    at_50, at_inf = ours.get_delta(50.0), ours.get_delta(INF)
    for eps in (1e100, 1e200, 1e308, np.finfo(float).max):
        got = ours.get_delta(eps)
        assert at_inf <= got <= at_50
        if name == "non_private":
            assert got == 1.0
        elif name == "empty":
            assert got == 0.0
        else:
            assert 0.0 < got < 1e-300  # (the engines' floor: never 0 below a positive truth)


# ------------------------------------------------------------------ just below delta = 1

@pytest.mark.parametrize("engine", ["pld", "rdp"])
@pytest.mark.parametrize("gap", [1e-12, 1e-6, 1e-3])
def test_epsilon_just_below_delta_one_is_sound(engine, gap):
    """A Gaussian of mu = 20 has total variation 1 - 1.5e-23, so epsilon at delta = 1 - gap is
    positive: the adapter answers at least the exact value.  (dp_accounting's PLD answers
    103.79132 at gap 1e-6, below the exact 103.79136: its convention there is not followed,
    the engine's certified value is returned.)"""
    mu = 20.0
    exact = brentq(lambda e: math.log(_gaussian_one_minus_delta(e, mu)) - math.log(gap), 0.0, 500.0, xtol=1e-13)
    assert _gaussian_delta(exact, mu) == pytest.approx(1 - gap, rel=1e-12)
    ours = SGMFastPrivacyAccountant(accountant=engine).compose(dpa.GaussianDpEvent(1 / mu))
    got = ours.get_epsilon(1 - gap)
    assert got >= exact * (1 - 1e-12)
    assert got <= float(dpa_rdp.RdpAccountant().compose(dpa.GaussianDpEvent(1 / mu)).get_epsilon(1 - gap))
    assert ours.get_epsilon(1.0) == 0.0 and ours.get_epsilon(0.0) == INF


# ------------------------------------------------------------------ noise 0 and +inf

@pytest.mark.parametrize("engine", ["pld", "rdp"])
def test_noiseless_sampled_steps_are_exact_where_dp_accounting_says_non_private(engine):
    """Poisson steps without noise reveal the record when it is drawn: delta = 1 - (1 - q)^T at
    every epsilon and epsilon is +inf below it, 0 from it on.  dp_accounting makes such a step
    non-private (epsilon +inf and delta 1 everywhere): sound but not sharp; the adapter stays
    exact, so one-sided against it."""
    q, T = 0.1, 3
    ev = dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(0.0)), T)
    ours = SGMFastPrivacyAccountant(accountant=engine).compose(ev)
    theirs = [dpa_pld.PLDAccountant().compose(ev), dpa_rdp.RdpAccountant().compose(ev)]
    exact = -math.expm1(T * math.log1p(-q))
    for eps in (0.0, 1.0, 1e200, INF):
        got = ours.get_delta(eps)
        assert exact <= got <= exact * (1 + 1e-12)
        assert all(got <= _their_delta(t, eps) == 1.0 for t in theirs)
    for delta, want in [(0.0, INF), (0.2, INF), (0.3, 0.0), (1.0, 0.0)]:
        assert ours.get_epsilon(delta) == want
        assert all(want <= float(t.get_epsilon(delta)) == INF for t in theirs)


@pytest.mark.parametrize("engine", ["pld", "rdp"])
def test_infinite_noise_reveals_nothing(engine):
    """A Gaussian of infinite noise: dp_accounting's RDP answers 0 everywhere (its PLD cannot
    compose it); so does the adapter, at delta = 0 too, until a step with finite noise joins."""
    ev = dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(INF), 5)
    theirs = dpa_rdp.RdpAccountant().compose(ev)
    for rel in (ADD, REPLACE):
        ours = SGMFastPrivacyAccountant(accountant=engine, neighboring_relation=rel).compose(ev)
        for delta in (0.0, 1e-5, 1.0):
            assert ours.get_epsilon(delta) == float(theirs.get_epsilon(delta)) == 0.0
        for eps in (0.0, 1.0, INF):
            assert ours.get_delta(eps) == _their_delta(theirs, eps) == 0.0
        ours.compose(dpa.GaussianDpEvent(2.0))
        assert ours.get_epsilon(0.0) == INF and ours.get_epsilon(1.0) == 0.0


# ------------------------------------------------------------------ out-of-range targets

BAD_DELTAS = [-1e-5, -0.5, -INF, 1 + 1e-12, 1.5, INF, math.nan, np.float64(math.nan)]
BAD_EPSILONS = [-1e-12, -1.0, -INF, math.nan, np.float64(-2.0)]


@pytest.mark.parametrize("name, rel, engine", CASES, ids=IDS)
def test_out_of_range_targets_raise_naming_the_parameter(name, rel, engine):
    """Before any shortcut: an empty or non-private accountant used to answer anything."""
    ours = _ours(name, rel, engine)
    for bad in BAD_DELTAS:
        with pytest.raises(ValueError, match="target_delta"):
            ours.get_epsilon(bad)
        with pytest.raises(ValueError, match="target_delta"):
            ours.get_epsilon_bounds(bad)
    for bad in BAD_EPSILONS:
        with pytest.raises(ValueError, match="target_epsilon"):
            ours.get_delta(bad)
    with pytest.raises(TypeError, match="target_delta"):
        ours.get_epsilon(True)
    with pytest.raises(TypeError, match="target_epsilon"):
        ours.get_delta([1.0, 2.0])
    with pytest.raises(TypeError, match="target_delta"):
        ours.get_epsilon("1e-5")


def test_dp_accountings_rdp_also_rejects_negative_targets():
    """The convention followed: dp_accounting's RDP accountant raises ValueError on a negative
    delta or epsilon (its PLD answers +inf / a delta for them, which the adapter does not copy)."""
    theirs = dpa_rdp.RdpAccountant().compose(_event("poisson"))
    with pytest.raises(ValueError):
        theirs.get_epsilon(-1e-5)
    with pytest.raises(ValueError):
        theirs.get_delta(-1.0)
