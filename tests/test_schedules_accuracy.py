"""Per-step schedules certified to the accuracy (issue #31 item 2): the lattice mixtures of
``sgmfast.pld.schedule_mix``.

Independent references: the Gaussian hockey-stick curve and the subsampled pair's divergence in
mpmath (the mixture weights), exact rational arithmetic (Poisson-binomial against
binomial counts), and the exact multi-part ``Engine`` (schedules of at most 128 distinct steps,
composed step by step on one grid; no lattice, no mixtures) -- directly, or on the first-order
brackets of ``schedules.brackets`` whose exact compositions bound the schedule from both sides.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest

from sgmfast import pld
from sgmfast.pld.engine import Engine
from sgmfast.pld.schedule_engine import MixEngine
from sgmfast._kernels.pld.schedule_parts import group_weight
from sgmfast.pld.schedule_mix import lower_weights, upper_weights
from sgmfast.pld.schedules import Sandwich, brackets, make_engine

mp.mp.dps = 30


def _gauss_delta(mu, x):
    """δ of the Gaussian pair N(mu, 1) vs N(0, 1) at eps = x (any real x), in mpmath."""
    mu, x = mp.mpf(mu), mp.mpf(x)
    return mp.ncdf(mu / 2 - x / mu) - mp.e ** x * mp.ncdf(-mu / 2 - x / mu)


def _cells(rng, n):
    for _ in range(n):
        mb = float(rng.uniform(0.3, 3.0))
        ma = mb * (1 + float(rng.choice([1e-3, 1e-2, 0.1, 0.5])) * float(rng.uniform(0.2, 1.0)))
        yield mb, ma, np.sort(rng.uniform(mb, ma, 5))


def test_upper_weights_dominate_the_gaussian_everywhere():
    """The chord weight: the step's δ_G is below the mixture's at every eps (mpmath)."""
    rng = np.random.default_rng(7)
    for mb, ma, mus in _cells(rng, 25):
        lam = upper_weights(mus, mb, ma)
        da = [_gauss_delta(ma, x) for x in (-30, -4, -1, 0, 0.3, 1, 3, 8, 30)]
        db = [_gauss_delta(mb, x) for x in (-30, -4, -1, 0, 0.3, 1, 3, 8, 30)]
        for mu, lm in zip(mus, lam):
            lm = mp.mpf(lm)  # (the weights are exact: the mixture is lm a + (1 - lm) b)
            for j, x in enumerate((-30, -4, -1, 0, 0.3, 1, 3, 8, 30)):
                assert _gauss_delta(mu, x) <= lm * da[j] + (1 - lm) * db[j] + mp.mpf(10) ** -28


def test_lower_weights_excess_is_bounded():
    """The lower weight: the mixture exceeds the step's δ_G by at most e at any eps (mpmath, at
    points across the bulk and the far tails, both signs)."""
    rng = np.random.default_rng(8)
    xs = [0.0, 0.5, 2.0, 5.0, 7.0, 9.0, 12.0, 20.0]
    for mb, ma, mus in _cells(rng, 10):
        log_e = float(rng.uniform(-40, -8))
        lam = lower_weights(mus, mb, ma, log_e)
        assert np.all((0 <= lam) & (lam <= 1))
        for mu, lm in zip(mus, lam):
            lm = mp.mpf(lm)
            for x in xs + [-x for x in xs]:
                excess = lm * _gauss_delta(ma, x) + (1 - lm) * _gauss_delta(mb, x) - _gauss_delta(mu, x)
                # at x < 0 the excess is e^x times that at -x (module notes): bounded by e as well
                assert excess <= mp.e ** log_e * (1 + mp.mpf(10) ** -6)


def _subsampled_delta(mu, q, eps, add):
    """δ of one subsampled Gaussian step (remove: P = (1-q) N(0) + q N(mu) vs Q = N(0); add:
    swapped), integrating each Gaussian past the threshold where the likelihood ratio
    P/Q = 1 - q + q e^{mu y - mu^2/2} (increasing in y) crosses e^eps (remove) or e^-eps (add)."""
    mu, q, g = mp.mpf(mu), mp.mpf(q), mp.e ** mp.mpf(eps)
    r = 1 / g if add else g
    if r <= 1 - q:  # the ratio is above r everywhere
        return mp.mpf(0) if add else 1 - g
    y = (mp.log((r - 1 + q) / q) + mu * mu / 2) / mu
    if add:  # (Q - e^eps P)_+ on y < threshold
        return mp.ncdf(y) - g * ((1 - q) * mp.ncdf(y) + q * mp.ncdf(y - mu))
    return (1 - q) * mp.ncdf(-y) + q * mp.ncdf(mu - y) - g * mp.ncdf(-y)


def test_chord_holds_for_the_subsampled_step_both_directions():
    """The Gaussian ordering carries to the subsampled pair in both directions (closed forms)."""
    rng = np.random.default_rng(9)
    for _ in range(12):
        mb = float(rng.uniform(0.5, 2.0))
        ma = mb * float(rng.uniform(1.01, 1.3))
        mu = float(rng.uniform(mb, ma))
        lam = float(upper_weights(np.array([mu]), mb, ma)[0])
        q = float(rng.choice([0.01, 0.2]))
        for add in (False, True):
            for eps in (-3.0, -1.0, -0.01, 0.0, 0.4, 2.5, 6.0):
                d = [_subsampled_delta(m, q, eps, add) for m in (mu, ma, mb)]
                assert d[0] <= mp.mpf(lam) * d[1] + (1 - mp.mpf(lam)) * d[2] + mp.mpf(10) ** -20


def _pb(lams):
    pmf = [Fraction(1)]
    for lm in lams:
        lm = Fraction(lm)
        new = [Fraction(0)] * (len(pmf) + 1)
        for j, p in enumerate(pmf):
            new[j] += p * (1 - lm)
            new[j + 1] += p * lm
        pmf = new
    return pmf


def _tail(pmf):
    return [sum(pmf[j:]) for j in range(len(pmf))]


def test_poisson_binomial_between_the_binomials():
    """Groups of mixtures: the Poisson-binomial count of lattice draws is stochastically below
    Binomial(k, p_up) and above Binomial(k, p_lo) (exact rationals)."""
    rng = np.random.default_rng(10)
    for _ in range(40):
        k = int(rng.integers(2, 9))
        lams = rng.uniform(0, 1, k) ** float(rng.choice([0.3, 1.0, 3.0]))
        with np.errstate(divide="ignore"):
            up, lo = np.log1p(-lams), np.log(lams)
        # (the summed logs in any order: fsum, exactly rounded)
        p_up = group_weight(math.fsum(up) if np.isfinite(up).all() else -math.inf, float(k), k, True)
        p_lo = group_weight(math.fsum(lo) if np.isfinite(lo).all() else -math.inf, float(k), k, False)
        t_pb = _tail(_pb(lams))
        t_up = _tail(_pb([p_up] * k))
        t_lo = _tail(_pb([p_lo] * k))
        assert all(a <= b for a, b in zip(t_pb, t_up))
        assert all(a >= b for a, b in zip(t_pb, t_lo))


def _contains(lo, up, ref_lo, ref_up):
    """Two certified intervals of the same number overlap."""
    return lo <= ref_up * (1 + 1e-12) and ref_lo <= up * (1 + 1e-12)


@pytest.mark.parametrize("seed", [1, 2])
def test_mixtures_agree_with_the_exact_engine(seed):
    """Schedules the exact engine can still compose (120 distinct steps, two sampling rates,
    repeated steps), answered by mixtures on a coarser lattice (accuracy 1e-2): eps overlaps the
    exact engine's, and δ on either side of the exact eps interval is on the right side of the
    target."""
    rng = np.random.default_rng(seed)
    n = 120
    sig = rng.uniform(0.8, 1.6, n)
    qs = np.where(np.arange(n) % 3 == 0, 0.02, 0.005)
    sched = [(float(s), float(q), int(c)) for s, q, c in zip(sig, qs, rng.integers(1, 20, n))]
    mix = MixEngine(sched, 1e-2, 4.0)
    plan = mix.plan(1e-12)
    assert len(mix.layout(0).sigmas) < n and (plan.up[2] < 1).any() and (plan.lo[2] < 1).any()  # (mixtures)
    target = 1e-6
    lo, up, _ = mix.epsilon(target)
    e_lo, e_up, _ = Engine(sched, 1e-3).epsilon(target)
    assert _contains(lo, up, e_lo, e_up)
    assert up - lo <= 1e-2 * up
    # δ(eps) > target below the exact lower bound, <= target at the exact upper bound
    d_lo, d_up = mix.delta(np.array([e_lo * (1 - 1e-9), e_up]))
    assert d_up[0] >= target and d_lo[1] <= target


def test_ten_thousand_distinct_steps_to_the_accuracy():
    """10^4 distinct sigma in [0.9, 1.3] at q = 256/60000: certified to 1e-3, and between the exact
    compositions of its first-order brackets (64 groups at their least / largest sigma)."""
    sig = np.linspace(0.9, 1.3, 10_000)
    acc = pld.PLDAccountant()
    for s in sig:
        acc.step(float(s), 256 / 60000, 1)
    assert isinstance(acc._get_engine(), Sandwich) and acc._get_engine().mix is not None
    b = acc.epsilon(1e-5)
    assert b.upper - b.lower <= 1e-3 * b.upper
    up_s, lo_s = brackets([(float(s), 256 / 60000, 1) for s in sig], 64)
    ref_up = Engine(up_s, 1e-3).epsilon(1e-5)  # (at least as revealing: its upper bounds eps from above)
    ref_lo = Engine(lo_s, 1e-3).epsilon(1e-5)  # (at most as revealing: its lower bounds eps from below)
    assert b.lower <= ref_up[1] and ref_lo[0] <= b.upper
    assert ref_lo[0] < b.lower and b.upper < ref_up[1]  # (and far inside them: second order)


def test_finer_accuracy_never_wider_and_no_history():
    """A finer accuracy returns a sub-interval of the default one's; an answer does not depend on
    earlier queries (the lattice depends on the schedule and the accuracy only)."""
    sched = [(float(s), 0.01, 3) for s in np.linspace(1.0, 1.6, 160)]
    fine = make_engine(sched, 5e-4)
    f_lo, f_up, _ = fine.epsilon(1e-6)
    c_lo, c_up, _ = fine.coarse.epsilon(1e-6)  # (the default accuracy's answer, kept by the engine)
    assert c_lo <= f_lo <= f_up <= c_up
    a, b = make_engine(sched, 1e-3), make_engine(sched, 1e-3)
    b.epsilon(1e-3)
    assert a.epsilon(1e-6)[:2] == b.epsilon(1e-6)[:2] == (c_lo, c_up)


def test_noiseless_and_replace_one_schedules_keep_their_paths():
    """A noiseless phase (an atom at +inf) and replace-one (the sandwich) still bracket the constant
    schedules at the ends of the range."""
    sig = np.linspace(1.0, 1.3, 200)
    acc = pld.PLDAccountant()
    for s in sig:
        acc.step(float(s), 0.01, 5)
    acc.step(0.0, 0.01, 2)
    p = 1 - (1 - 0.01) ** 2
    assert acc.epsilon(p / 2).lower == math.inf
    d = acc.delta(1.0)
    assert d.lower >= p * (1 - 1e-12) and d.upper <= 1.0
    rep = make_engine([(float(s), 0.01, 5) for s in sig], 1e-3, relation="replace_one")
    assert isinstance(rep, Sandwich) and rep.mix is None
    lo, up, _ = rep.epsilon(1e-5)
    assert pld.epsilon(1.3, 0.01, 1000, 1e-5, relation="replace_one").lower <= up
    assert lo <= pld.epsilon(1.0, 0.01, 1000, 1e-5, relation="replace_one").upper
