"""RDPAccountant over long schedules of distinct steps: the total RDP, epsilon and the curve
against slow, obviously correct twins (mpmath binomial sums, plain float sums of the one-step
kernel, an order search per prefix), and the pieces that make them fast -- the truncated
binomial sums, the early stop of the order search, the chord-and-Jensen bound -- against the
plain versions they stand in for."""

from __future__ import annotations

import importlib
import math
import random

import mpmath
import numpy as np
import pytest

from sgmfast import rdp
from sgmfast._kernels import rdp as k

trunc = importlib.import_module("sgmfast._kernels.rdp.truncated")
chord = importlib.import_module("sgmfast._kernels.rdp.chord")
orders_mod = importlib.import_module("sgmfast._kernels.rdp.orders")
prefix = importlib.import_module("sgmfast._kernels.rdp.prefix")

#: random schedules: (name, sigma range, q (None: a distinct q in [0.001, 0.1] each step), delta)
REGIMES = [
    ("wall", (1.2, 4.2), 1.16e-4, 1.9e-24),  # the sweep's case 1320: top terms take over near 27
    ("flat", (8.0, 12.0), 1e-3, 1e-10),  # large orders, a few terms carry each sum
    ("mixed_q", (0.8, 3.0), None, 1e-5),
    ("small_sigma", (0.6, 1.0), 0.01, 1e-8),
]


def _schedule(regime, n, seed=0):
    _, (lo, hi), q, _ = regime
    r = random.Random(seed)
    return [(lo * (hi / lo) ** r.random(), q if q is not None else 0.001 * 100 ** r.random(), r.randint(1, 3))
            for _ in range(n)]


def _accountant(steps, orders=None):
    acc = rdp.RDPAccountant(orders)
    for s, q, t in steps:
        acc.step(s, q, t)
    return acc


def _mp_log_a(q, sigma, alpha):
    """log A_alpha at an integer order by the binomial sum ([MTZ19] Sec. 3.3), 40 digits (the
    binomial coefficients exact integers, 1 - q and 1 / (2 sigma^2) formed once a call)."""
    with mpmath.workdps(40):
        q, s = mpmath.mpf(q), mpmath.mpf(sigma)
        a = int(alpha)
        p, inv2s2 = 1 - q, 1 / (2 * s * s)
        am1 = mpmath.fsum(math.comb(a, j) * p ** (a - j) * q ** j * mpmath.expm1((j * j - j) * inv2s2)
                          for j in range(2, a + 1))
        return mpmath.log1p(am1)


def _eps(alpha, r, log_delta):
    """eps from (alpha, r)-RDP: [BBGHS20] Thm 21 / [CKS20] Prop. 12 and Bretagnolle-Huber, as
    the module docstring of ``_kernels/rdp/conversion.py`` states them."""
    if -math.expm1(-r) <= math.exp(2.0 * log_delta):
        return 0.0
    return max(r + math.log1p(-1.0 / alpha) - (log_delta + math.log(alpha)) / (alpha - 1.0), 0.0)


# --------------------------------------------------------------------------------------
# the truncated binomial sum
# --------------------------------------------------------------------------------------

TAIL_CASES = [(q, s, n, kk) for q, s in [(1e-3, 10.0), (0.05, 50.0), (0.02, 3.0), (1e-4, 1.5), (0.3, 20.0)]
              for n, kk in [(40, 6), (183, 12), (600, 30)] if kk < n]


@pytest.mark.parametrize("q, sigma, n, kk", TAIL_CASES)
def test_tail_bound_covers_the_rest_of_the_sum(q, sigma, n, kk):
    """``_tail_bound`` at k bounds sum_(j>k) t_j, summed in mpmath (where it claims a bound)."""
    lam = math.log(q) - math.log1p(-q)
    inv2s2 = 0.5 / sigma ** 2
    lv = math.lgamma(n + 1) - math.lgamma(kk + 1) - math.lgamma(n - kk + 1) + (n - kk) * math.log1p(-q) \
        + kk * math.log(q) + (kk * kk - kk) * inv2s2
    bound = trunc._tail_bound(float(n), kk, lv, lam, inv2s2)
    with mpmath.workdps(40):
        qq, s = mpmath.mpf(q), mpmath.mpf(sigma)
        tail = sum(mpmath.binomial(n, j) * (1 - qq) ** (n - j) * qq ** j * mpmath.expm1(mpmath.mpf(j * j - j) / (2 * s * s))
                   for j in range(kk + 1, n + 1))
        if bound < math.inf:
            assert mpmath.log(tail) <= bound


LOG_A_CASES = [(1e-3, 10.0, 183.0), (1e-3, 8.0, 96.0), (0.05, 60.0, 31.0), (1.16e-4, 1.22, 27.0),
               (1.16e-4, 4.2, 300.0), (0.5, 3.0, 12.0), (1e-6, 30.0, 1000.0), (0.9, 40.0, 64.0)]


@pytest.mark.parametrize("q, sigma, alpha", LOG_A_CASES)
def test_truncated_log_a_is_the_exact_sum(q, sigma, alpha):
    """Against the whole sum of ``log_a_int`` (the same terms, all of them, from the top) to a
    few units of rounding, and against mpmath to the precision of the terms themselves: both
    take log C(n, k) from the table of lgamma(k + 1), whose rounding (~ulp(lgamma(n + 1))) puts
    a term's log off by up to ~1e-12 at n = 1000 (measured: log_a_int is 1.5e-12 below mpmath
    at q = 1e-6, sigma = 30, alpha = 1000)."""
    got, proved = trunc.log_a_int_trunc(q, sigma, alpha, math.inf)
    assert not proved
    assert got == pytest.approx(k.log_a_int(q, sigma, alpha), rel=1e-13)
    assert got == pytest.approx(float(_mp_log_a(q, sigma, alpha)), rel=1e-13 + 8 * 2.0 ** -53 * math.lgamma(alpha + 1))
    assert trunc.schedule_log_a(q, sigma, alpha) == got


@pytest.mark.parametrize("q, sigma, alpha", LOG_A_CASES)
def test_truncated_log_a_proves_a_cap_only_below_the_sum(q, sigma, alpha):
    ref = float(_mp_log_a(q, sigma, alpha))
    for cap in (0.5 * ref, 0.9 * ref, 1.1 * ref):
        got, proved = trunc.log_a_int_trunc(q, sigma, alpha, cap)
        if proved:
            assert cap <= got <= ref * (1 + 1e-11)
        else:
            assert got == trunc.log_a_int_trunc(q, sigma, alpha, math.inf)[0]


# --------------------------------------------------------------------------------------
# the total RDP and epsilon of 300 distinct steps against plain sums
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("regime", REGIMES[:3], ids=lambda r: r[0])
def test_total_rdp_of_300_distinct_steps_is_the_mpmath_sum_from_above(regime):
    steps = _schedule(regime, 300)
    acc = _accountant(steps)
    orders = np.array([2.0, 5.0, 27.0, 64.0])
    got = acc.rdp(orders)
    for a, g in zip(orders, got):
        with mpmath.workdps(40):
            ref = sum(t * _mp_log_a(q, s, a) for s, q, t in steps) / (a - 1)
        assert ref <= g <= ref * (1 + 1e-10), a


def _plain_rdp(steps, alpha):
    """Total RDP at alpha from the one-step kernel (``log_a``: exact sums at integer orders,
    quadrature else), summed by ``math.fsum``."""
    return math.fsum(t * k.log_a(q, s, alpha) for s, q, t in steps) / (alpha - 1.0)


@pytest.mark.parametrize("regime", REGIMES, ids=lambda r: r[0])
def test_epsilon_of_300_distinct_steps_is_sound_at_its_order_and_no_worse_than_any_integer(regime):
    steps = _schedule(regime, 300)
    log_delta = math.log(regime[3])
    eps, alpha = _accountant(steps).epsilon(regime[3], return_order=True)
    assert eps >= _eps(alpha, _plain_rdp(steps, alpha), log_delta)
    best_int = min(_eps(a, _plain_rdp(steps, a), log_delta) for a in np.arange(2.0, 257.0))
    assert eps <= best_int * (1 + 1e-9)


@pytest.mark.parametrize("regime", REGIMES[:2], ids=lambda r: r[0])
def test_delta_of_300_distinct_steps_is_sound_at_its_order(regime):
    steps = _schedule(regime, 300)
    acc = _accountant(steps)
    eps = acc.epsilon(regime[3])
    d, alpha = acc.delta(eps, return_order=True)
    r = _plain_rdp(steps, alpha)
    ref = min((alpha - 1.0) * (r - eps + math.log1p(-1.0 / alpha)) - math.log(alpha), 0.5 * math.log(-math.expm1(-r)))
    assert math.log(d) >= ref
    assert d <= regime[3] * (1 + 1e-6)  # delta(eps(delta)) comes back to delta


def test_epsilon_of_100000_distinct_steps_is_sound_at_its_order():
    """The sweep's case 1320 (10^5 steps, each its own sigma): eps at the returned order is at
    least the conversion of the plain float sum of 10^5 exact one-step values (the accountant's
    margin must cover its own sum's rounding, ~10^5 units of it)."""
    r = random.Random(358943)
    steps = [(1.2192442829129966 * (4.196029418466512 / 1.2192442829129966) ** r.random(), 0.00011598630853008063, 1)
             for _ in range(100_000)]
    delta = 1.9175468191985406e-24
    eps, alpha = _accountant(steps).epsilon(delta, return_order=True)
    assert eps >= _eps(alpha, _plain_rdp(steps, alpha), math.log(delta))
    # the best integer order of the plain sums (27: the first sigma's top terms take over after it)
    assert eps <= min(_eps(a, _plain_rdp(steps, a), math.log(delta)) for a in (26.0, 27.0, 28.0)) * (1 + 1e-9)


def test_repeated_pairs_are_merged_into_one_sum():
    a, b = (1.1, 0.01), (0.9, 0.02)
    alternating = _accountant([(*(a if i % 2 == 0 else b), 3) for i in range(300)])
    merged = _accountant([(*a, 450), (*b, 450)])
    assert alternating.epsilon(1e-5) == merged.epsilon(1e-5)
    assert alternating.delta(2.0) == merged.delta(2.0)


# --------------------------------------------------------------------------------------
# the order search's shortcuts against the plain computations
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("regime", REGIMES, ids=lambda r: r[0])
def test_early_stop_is_exact_below_the_bound_and_above_it_only_when_the_objective_is(regime):
    steps = _schedule(regime, 200, seed=1)
    ss, qs, cs = (np.array(x, dtype=np.float64) for x in zip(*steps))
    target = math.log(regime[3])
    for a in (2.0, 7.0, 27.0, 96.0, 400.0):
        full = k._objective(a, qs, ss, cs, target, 0)
        for bound in (0.5 * full, 0.999 * full, 1.001 * full, 2.0 * full):
            got = orders_mod._objective_above(a, qs, ss, cs, target, 0, bound)
            if got < bound:
                assert got == full
            else:
                assert full >= bound * (1 - 1e-12)


@pytest.mark.parametrize("regime", REGIMES, ids=lambda r: r[0])
def test_chord_split_is_the_plain_min_of_chord_and_jensen(regime):
    steps = _schedule(regime, 200, seed=2)
    ss, qs, cs = (np.array(x, dtype=np.float64) for x in zip(*steps))
    for n in (1.0, 2.0, 6.0, 26.0):
        lo, hi = np.empty(len(steps)), np.empty(len(steps))
        chord.cheap_log_a(qs, ss, cs, n, lo)
        chord.cheap_log_a(qs, ss, cs, n + 1.0, hi)
        idx = np.empty(len(steps), dtype=np.int64)
        s_lo, s_hi, kk = chord.chord_split(qs, ss, cs, n, lo, hi, idx)
        for t in (0.1, 0.5, 0.9):
            a = n + t
            plain = math.fsum(c * min((1 - t) * l_ + t * h_, k.log_a_jensen(q, s, a))
                              for q, s, c, l_, h_ in zip(qs, ss, cs, lo, hi)) / (a - 1)
            got = chord.cheap_rdp(a, t, s_lo, s_hi, idx, kk, qs, ss, cs, lo, hi)
            assert got == pytest.approx(plain, rel=1e-12)


# --------------------------------------------------------------------------------------
# the curve
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("regime", REGIMES, ids=lambda r: r[0])
def test_curve_points_bound_each_prefix_from_above_and_grow(regime):
    steps = _schedule(regime, 60, seed=3)
    steps[10:20] = steps[0:10]  # repeated pairs, not next to each other
    acc = _accountant(steps)
    delta = regime[3]
    curve = acc.epsilon_curve(delta)
    assert curve.shape == (len(acc.history),) and (np.diff(curve) >= 0).all()
    assert curve[-1] == acc.epsilon(delta)
    hist = acc.history
    for i in (0, 1, 5, 15, 30, 59):
        exact = rdp.RDPAccountant().compose(hist[: i + 1]).epsilon(delta)
        assert exact * (1 - 1e-9) <= curve[i] <= exact * 1.05, i


def test_curve_at_fixed_orders_is_each_prefix_at_those_orders():
    orders = [2.0, 4.0, 8.0, 16.0, 32.0]
    steps = _schedule(REGIMES[2], 30, seed=4)
    delta = 1e-6
    curve = _accountant(steps, orders).epsilon_curve(delta)
    rdps = np.zeros(len(orders))
    for i, (s, q, t) in enumerate(steps):
        rdps += [t * float(_mp_log_a(q, s, a)) / (a - 1) for a in orders]
        ref = min(_eps(a, r, math.log(delta)) for a, r in zip(orders, rdps))
        assert ref <= curve[i] <= ref * (1 + 1e-9), i


def test_curve_early_stops_leave_the_curve_unchanged():
    steps = _schedule(REGIMES[1], 80, seed=5)
    ss, qs, cs = (np.array(x, dtype=np.float64) for x in zip(*steps))
    ids = np.arange(len(steps), dtype=np.int64)
    o = np.ascontiguousarray(rdp.CURVE_ORDERS)
    log_deltas = np.full(len(steps), math.log(1e-10))
    last = _accountant(steps).epsilon(1e-10)
    runs = []
    for same, stop in ((False, math.inf), (True, last)):
        out = np.full(len(steps), math.inf)
        prefix.prefix_epsilons(qs, ss, cs, ids, len(steps), o, log_deltas, same, stop, out)
        out[-1] = min(out[-1], last)
        runs.append(np.minimum.accumulate(out[::-1])[::-1])
    np.testing.assert_allclose(runs[1], runs[0], rtol=1e-13)


def test_curve_with_noiseless_steps_follows_each_prefix():
    """sigma = 0 steps reveal a sampled record: eps = +inf once their chance reaches delta."""
    steps = [(1.0, 0.01, 100), (0.0, 1e-4, 1), (1.2, 0.01, 50), (float("inf"), 0.1, 5), (0.9, 0.02, 20),
             (0.0, 0.01, 3), (1.1, 0.01, 10)]
    acc = _accountant(steps)
    for delta in (1e-5, 1e-3, 0.1):
        curve = acc.epsilon_curve(delta)
        for i in range(len(steps)):
            exact = rdp.RDPAccountant().compose(acc.history[: i + 1]).epsilon(delta)
            if exact == math.inf:
                assert curve[i] == math.inf
            else:
                assert exact * (1 - 1e-9) <= curve[i] <= exact * 1.05, (delta, i)


def test_short_histories_get_each_prefix_exactly():
    steps = _schedule(REGIMES[2], rdp.CURVE_EXACT_SEGMENTS, seed=6)
    acc = _accountant(steps)
    curve = acc.epsilon_curve(1e-5)
    exact = [rdp.RDPAccountant().compose(acc.history[: i + 1]).epsilon(1e-5) for i in range(len(steps))]
    assert list(curve) == list(np.minimum.accumulate(np.array(exact)[::-1])[::-1])


def test_long_curves_start_with_exact_points():
    steps = _schedule(REGIMES[0], 30, seed=7)
    acc = _accountant(steps)
    curve = acc.epsilon_curve(1e-8)
    for i in range(rdp.CURVE_EXACT_SEGMENTS):
        assert curve[i] == min(rdp.RDPAccountant().compose(acc.history[: j + 1]).epsilon(1e-8)
                               for j in range(i, rdp.CURVE_EXACT_SEGMENTS))


def test_curve_of_sweep_case_1535_bounds_every_prefix_within_a_percent():
    """bench/domain_sweep_more_failures.jsonl, id 1535 (over 10 s before): 256 segments, each its
    own sigma; every point against an order search over its own prefix."""
    r = random.Random(627176)
    acc = _accountant([(1.584080846984159 * (2.2200287594405452 / 1.584080846984159) ** r.random(), 0.00010183758467463478, 1)
                       for _ in range(256)])
    delta = 2.420431161224661e-06
    curve = acc.epsilon_curve(delta)
    exact = np.array([rdp.RDPAccountant().compose(acc.history[: i + 1]).epsilon(delta) for i in range(256)])
    assert (curve >= exact * (1 - 1e-9)).all() and (curve <= exact * 1.01).all()
    assert (np.diff(curve) >= 0).all() and curve[-1] == exact[-1]


@pytest.mark.parametrize("q, sigma, alpha", LOG_A_CASES + [(1e-6, 30.0, 3000.0), (1e-9, 100.0, 5000.0),
                                                        (0.999, 2.0, 400.0)])
def test_public_rdp_is_above_the_exact_sum(q, sigma, alpha):
    """``rdp.rdp`` (log A / (alpha - 1), rounded up by ``REL_MARGIN`` and the integer sums'
    rounding bound ``_sum_error``) is above the 40-digit binomial sum at every case -- the table
    of lgamma put ``log_a_int`` 1.5e-12 below it at q = 1e-6, sigma 30, alpha 1000, which
    ``REL_MARGIN`` = 1e-12 alone did not cover."""
    ours = float(rdp.rdp(sigma, q, 1, [alpha])[0])
    ref = float(_mp_log_a(q, sigma, alpha)) / (alpha - 1.0)
    assert ours >= ref
    assert ours <= ref * (1 + 1e-9)  # (and not by much)
