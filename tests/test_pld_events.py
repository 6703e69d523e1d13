"""The tail-event decomposition of the PLD composition (``sgmfast.pld.grid.tail_events``).

P^{*T} = sum_k binom(T, k) C^{*(T-k)} * R^{*k} for a one-step PLD split into a core C and a far
tail R.  Each term is composed by itself, so the checks are: the sum of the terms equals the
direct T-fold composition of the same one-step arrays (numpy FFT, no tilt), the pessimistic sum
never falls below it and the optimistic one never rises above it, and at the points where a
single tilt could not resolve δ the interval is tight and agrees with dp_accounting.
"""

import functools

import numpy as np
import pytest

from sgmfast import pld
from sgmfast.pld.grid import queries, tail_events
from sgmfast.pld.common import Grid

from _hybrid import check_terms


CASES = [
    # sigma, q, T, step, m, cut, eps values: tails that matter at a few steps
    (0.8, 0.02, 5, 2e-4, 1, 0.5, [0.3, 0.6, 1.0, 1.6]),
    (0.8, 0.02, 5, 2e-4, 4, 0.5, [0.3, 0.6, 1.0, 1.6]),
    (1.0, 0.05, 6, 1e-4, 1, 0.8, [0.5, 1.0, 1.5]),
    # most of the mass in the tail: the term with every step in it weighs ~1e-2
    (1.0, 0.5, 2, 1e-4, 1, 0.1, [0.1, 0.5, 1.0]),
    (0.6, 0.3, 3, 1e-4, 1, 0.2, [0.2, 1.0, 2.0]),
]


@pytest.mark.parametrize("sigma,q,steps,step,m,cut,eps", CASES)
@pytest.mark.parametrize("rem_goal", [1e-300, 1e-9])
@pytest.mark.parametrize("fine0", [False, True])
def test_event_terms_sum_to_the_direct_composition(sigma, q, steps, step, m, cut, eps, rem_goal, fine0):
    eps = np.array(eps)
    for pess in (True, False):
        out = tail_events.event_grids(sigma, q, steps, False, step, m, cut, pess, float(eps.min()), 0.0, 1e-30,
                                      rem_goal, fine0)
        assert out is not None
        grids, rem = out
        if rem_goal > 1e-100 and q <= 0.05:
            assert len(grids) <= steps  # the union bound on the remaining terms is in use
        if rem_goal < 1e-100:
            assert len(grids) == steps + 1  # all terms kept: rem is the +inf mass only
            assert rem < 1e-12
        check_terms(grids, rem, [(sigma, q, steps)], step, m, cut, pess, eps, rem_goal < 1e-100)


def test_event_terms_are_tilted_towards_eps():
    # the k = 0 term (no tail step) has a bounded support, so its saddle point exists and is taken
    grids, _ = tail_events.event_grids(0.9595, 7.226e-5, 4196, False, 4e-6, 4, 0.0803, True, 0.0803, 0.04, 1e-30,
                                       1e-17)
    assert len(grids) == 2 and grids[0].theta > 100 and grids[1].theta == 0.0


HARD = [
    # sigma, q, T, delta: δ set by a fraction of one sampled step far in its log-normal-like tail
    # (bench/pld_random_sweep.py seeds 2 and 3); before the decomposition the certified intervals
    # were 2.7e-2 and 2.5e-3 wide
    (0.9594752439287916, 7.225745346018616e-05, 4196, 1.0328316089473846e-11),
    (0.564292425386069, 2.6520198399425788e-05, 35913, 2.8917658108233206e-08),
]


@functools.lru_cache(maxsize=None)
def _epsilon(sigma, q, steps, delta):
    """``pld.epsilon`` at a HARD or SWEEP point, computed once in a worker for the three tests
    below that check its interval (against dp_accounting, against δ queries, for its width)."""
    return pld.epsilon(sigma, q, steps, delta)


@pytest.mark.parametrize("sigma,q,steps,delta", HARD)
def test_few_tail_events_against_dp_accounting(sigma, q, steps, delta):
    # dp_accounting's connect-the-dots PLD at a 2e-5 grid is a pessimistic estimate: the certified
    # lower bound may not exceed it (its optimistic estimate is far too loose here to test the upper)
    pytest.importorskip("dp_accounting")
    from dp_accounting.pld import privacy_loss_distribution as pl

    one = pl.from_gaussian_mechanism(sigma, pessimistic_estimate=True, value_discretization_interval=2e-5,
                                     sampling_prob=q, use_connect_dots=True)
    theirs = one.self_compose(steps).get_epsilon_for_delta(delta)
    b = _epsilon(sigma, q, steps, delta)
    assert b.lower <= theirs <= b.upper * 1.01


@pytest.mark.parametrize("sigma,q,steps,delta", HARD)
def test_few_tail_events_delta_queries(sigma, q, steps, delta):
    # δ(eps) uses the same decomposition; its interval must agree with eps(δ)'s: at the upper eps
    # the true δ is <= delta, at the lower eps it is > delta
    b = _epsilon(sigma, q, steps, delta)
    at_up = pld.delta(sigma, q, steps, b.upper)
    at_lo = pld.delta(sigma, q, steps, b.lower)
    assert at_up.lower <= delta * (1 + 1e-12) and at_lo.upper >= delta * (1 - 1e-12)
    mid = pld.delta(sigma, q, steps, 0.5 * (b.lower + b.upper))
    assert 0 < mid.lower <= mid.upper <= 1.01 * mid.lower  # was [2.0e-12, 4.2e-11] at the first point


SWEEP = [
    # sigma, q, T, delta from bench/pld_random_sweep.py seeds 4-7 (full precision as drawn)
    # T < 7: the tail-event test took log binom(T, 7) and crashed (math domain error)
    (1.186, 2.074e-05, 3, 2.82e-09),
    (1.067, 0.000117, 2, 9.01e-11),  # gap 3.6e-2 before the decomposition (T = 2: every term)
    (2.413, 1.337e-05, 2, 1.28e-11),
    # eps ~ 5e5: the tilt cap 300 / eps had fallen to 6e-4 (gap 1.9e-3, the RDP value as upper)
    (0.4397, 0.4625, 617796, 3.28e-11),
    # eps ~ 1.3e-7 inside the bulk (dδ/deps ~ 0.4): the cut goes above the bulk, the tail grid
    # at cut / 64 and δ is summed term by term (gap 2.7e-3 -> 8.5e-4)
    (1.3268902994825977, 2.7157490017806233e-05, 7, 2.3905748905039178e-05),
    # one far-tail step with the core's own top slice above eps: the k = 0 term's saddle point
    # needs the tilted variance to grow without the heavy-tail limit (gap 1.2e-3, 12 s)
    (0.5355, 1e-05, 19, 5.74e-09),
]


@pytest.mark.parametrize("sigma,q,steps,delta", HARD + SWEEP)
def test_few_tail_events_and_sweep_regressions(sigma, q, steps, delta):
    b = _epsilon(sigma, q, steps, delta)
    assert 0 < b.lower <= b.upper
    assert b.upper - b.lower <= 1e-3 * b.upper


def test_lower_bound_between_the_floor_and_the_first_grid_point():
    # eps ~ 1.44e-7 is below the first grid point above the optimistic grid's floor; the lower
    # bound was 0 (the search only tried grid points).  (Its width: the sweep regression above.)
    b = pld.epsilon(1.327, 2.716e-05, 7, 2.39e-05)
    assert b.lower > 1.4e-7 and b.upper < 1.5e-7 and b.lower <= b.upper
    assert pld.delta(1.327, 2.716e-05, 7, b.lower).upper >= 2.39e-05


@pytest.mark.parametrize("theta", [0.0, 1.0, 40.0])
def test_direct_delta_brackets_the_exact_sum(theta):
    # δ of a grid term by term (used when eps lies inside the bulk) against a 50-digit sum of the
    # same atoms: both bounds hold, and in the bulk it is far tighter than the suffix sums
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 50
    rng = np.random.default_rng(3)
    step, offset = 1e-4, -300
    t = rng.random(2000) * np.exp(-np.linspace(0, 8, 2000))
    t *= 0.5 / float(np.sum(t * np.exp(0.3 - theta * (offset + np.arange(t.size)) * step)))  # mass 0.5
    G = Grid(step, theta, True, offset, t, 0.3, 0.0, 0.0, 0.0, 0.0)
    H = Grid(step, theta, False, offset, t, 0.3, 0.0, 0.0, 0.0, 0.0)
    eps = np.array([-0.01, 0.0, 1e-9, 0.00123, 0.05, 0.1])
    up, lo = queries.delta_precise(G, eps), queries.delta_precise(H, eps)
    up_s, lo_s = queries.delta_bound(G, eps), queries.delta_bound(H, eps)
    # each atom's tilted-back mass, the same 50-digit product for every eps (computed once)
    mass = [mpmath.mpf(float(x)) * mpmath.exp(mpmath.mpf(0.3) - theta * mpmath.mpf((offset + k) * step))
            for k, x in enumerate(t)]
    for i, e in enumerate(eps):
        exact = mpmath.fsum(mass[k] * -mpmath.expm1(mpmath.mpf(float(e)) - mpmath.mpf((offset + k) * step))
                            for k in range(t.size) if (offset + k) * step > e)
        assert lo[i] <= exact <= up[i] and lo_s[i] <= exact <= up_s[i]
        assert up[i] - lo[i] <= 1e-10 * float(exact) + 1e-300
    # eps inside the bulk: the suffix sums' slack is ~n u of the mass above eps, the direct one
    # ~n u of δ itself
    assert (up - lo)[2] < 1e-2 * (up_s - lo_s)[2]


WIDE_CUT = [
    # replace-one, sigma, q, T, δ (bench/rare_sampling_sweep.py seeds 21 and 11): eps set by single
    # steps far in the tail, inside an interval the tilts left wide; the sum cut a little above its
    # midpoint put those steps in the term without tail steps, whose lower bound fails there --
    # [0.0547, 0.1414] and [0.0544, 0.1332] on fec2300
    (0.8404057732758148, 1.9372759417412754e-05, 289, 1.5483886780878376e-15),
    (0.908807756752532, 2.7055111680580966e-05, 1971, 1.5881931035475137e-15),
]


@pytest.mark.parametrize("sigma,q,steps,delta", WIDE_CUT)
def test_a_wide_interval_is_cut_again_in_its_lower_quarter(sigma, q, steps, delta):
    b = pld.epsilon(sigma, q, steps, delta, relation="replace_one")
    assert b.met and b.upper - b.lower <= 1e-3 * b.upper
    d = pld.delta(sigma, q, steps, np.array([b.lower, b.upper]), relation="replace_one")
    assert d.upper[0] >= delta * (1 - 1e-12) and d.lower[1] <= delta * (1 + 1e-12)
