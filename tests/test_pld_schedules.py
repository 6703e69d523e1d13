"""Per-step schedules (issue #16 item 2): many distinct (sigma, q) answered by a sandwich of two
short schedules (``sgmfast.pld.schedules``).  References: the constant schedules at the ends of
the range (post-processing orders them), and the exact engine where it is still affordable."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sgmfast import pld
from sgmfast.pld.engine import Engine
from sgmfast.pld.schedules import MAX_PARTS, MAX_PARTS_MIXED, Sandwich, brackets, make_engine


def _schedule(sigmas, q=0.01, count=1):
    acc = pld.PLDAccountant()
    for s in sigmas:
        acc.step(float(s), q, count)
    return acc


@pytest.mark.parametrize("n", [10, 200, 2000])
def test_schedule_lands_between_the_constant_ones(n):
    rng = np.random.default_rng(n)
    a, b, q = 0.8, 1.4, 0.01
    sig = rng.uniform(a, b, n)
    steps = 2000 // n
    acc = _schedule(sig, q, steps)
    e = acc.epsilon(1e-6)
    at_a = pld.epsilon(a, q, n * steps, 1e-6)  # least noise: the most revealing
    at_b = pld.epsilon(b, q, n * steps, 1e-6)
    assert e.lower <= e.upper
    assert e.lower <= at_a.upper and at_b.lower <= e.upper
    assert e.upper <= at_a.upper * (1 + 1e-9)  # (the upper bracket is never above the constant at a)
    d = acc.delta(1.0)
    assert d.lower <= pld.delta(a, q, n * steps, 1.0).upper and pld.delta(b, q, n * steps, 1.0).lower <= d.upper


def test_sandwich_contains_the_exact_composition():
    rng = np.random.default_rng(1)
    sched = [(float(s), float(q), 25) for s, q in zip(rng.uniform(0.9, 1.2, MAX_PARTS + 8),
                                                       rng.uniform(0.005, 0.02, MAX_PARTS + 8))]
    sw = make_engine(sched, 1e-3)
    assert isinstance(sw, Sandwich)
    lo, up, _ = sw.epsilon(1e-5)
    ex_lo, ex_up, _ = Engine(sched, 1e-3).epsilon(1e-5)
    assert lo <= ex_up and ex_lo <= up
    dl, du = sw.delta(np.array([0.5, 2.0]))
    el, eu = Engine(sched, 1e-3).delta(np.array([0.5, 2.0]))
    assert (dl <= eu).all() and (el <= du).all()


def test_mixed_schedules_are_composed_exactly_up_to_their_own_limit():
    rng = np.random.default_rng(3)

    def sched(n):
        return [(float(s), float(q), 1) for s, q in zip(rng.uniform(0.9, 1.3, n), rng.uniform(0.003, 0.006, n))]

    assert type(make_engine(sched(MAX_PARTS + 8), 1e-3).mix).__name__ == "_ExactMix"
    assert type(make_engine(sched(MAX_PARTS_MIXED + 8), 1e-3).mix).__name__ == "ProductEngine"
    # one rate: the noise-level mixtures
    one_q = [(s, 0.004, c) for s, _, c in sched(MAX_PARTS + 8)]
    assert type(make_engine(one_q, 1e-3).mix).__name__ == "MixEngine"


def test_brackets_dominate_step_by_step():
    rng = np.random.default_rng(2)
    sched = [(float(s), float(q), int(c)) for s, q, c in zip(rng.uniform(0.5, 3, 500), rng.uniform(1e-3, 0.5, 500),
                                                              rng.integers(1, 5, 500))]
    up, lo = brackets(sched, 16)
    assert len(up) <= 16 and len(lo) <= 16
    assert sum(c for *_, c in up) == sum(c for *_, c in lo) == sum(c for *_, c in sched)
    # each group's upper representative is at least as revealing as every step it replaces
    srt = sorted(sched, key=lambda p: (p[0] / p[1], p[0]))
    assert min(s for s, _, _ in up) <= min(s for s, _, _ in srt) and max(q for _, q, _ in up) >= max(q for _, q, _ in srt)
    assert max(s for s, _, _ in lo) >= max(s for s, _, _ in srt) and min(q for _, q, _ in lo) <= min(q for _, q, _ in srt)


def test_many_segments_with_a_noiseless_phase():
    acc = _schedule(np.linspace(1.0, 1.3, 100), 0.01, 5)
    acc.step(0.0, 0.01, 2)
    p = 1 - (1 - 0.01) ** 2
    e = acc.epsilon(p / 2)
    assert e.lower == math.inf
    e = acc.epsilon(min(0.99, 2 * p))
    assert e.upper < math.inf and e.lower <= e.upper
    assert acc.delta(1.0).lower >= p * (1 - 1e-12)


def test_full_batch_schedules_stay_exact():
    sched = [(1.0 + 0.01 * i, 1.0, 1) for i in range(100)]
    assert isinstance(make_engine(sched, 1e-3), Engine)  # q = 1: the composed Gaussian, closed form


def test_rarely_sampled_schedule_gets_its_groups_answer():
    """10^4 steps whose rate ramps from 1e-4 to 2e-4 at sigma 0.8 (1.5 sampled steps expected), δ
    1e-10: the groups' engines at the accuracy itself outran their work limit and the answer was
    [0.12, 2.03]; their first round now asks for a share of the groups' spread (``Sandwich._rounds``).
    The answer lies between the constant runs at the two end rates (one-part engine) and is within
    5 %."""
    acc = pld.PLDAccountant()
    for i in range(10_000):
        acc.step(0.8, 1e-4 + 1e-4 * i / 9999, 1)
    b = acc.epsilon(1e-10)
    lo_run, up_run = pld.epsilon(0.8, 1e-4, 10_000, 1e-10), pld.epsilon(0.8, 2e-4, 10_000, 1e-10)
    assert lo_run.lower <= b.lower <= b.upper <= up_run.upper
    assert b.width <= 0.05 and b.met is False
    # δ(0.58): the groups' [8.7e-11, 2.1e-9] is intersected with the hull (every step at the
    # extreme rates: the two constant runs), so it is never looser than they are
    d = acc.delta(0.58)
    d_lo, d_up = pld.delta(0.8, 1e-4, 10_000, 0.58), pld.delta(0.8, 2e-4, 10_000, 0.58)
    assert d_lo.lower <= d.lower <= d.upper <= d_up.upper


def test_mixtures_coarsen_a_first_round_that_could_not_end():
    """A 1,047-step σ ramp 2.37 -> 0.60 at q 0.00168, ε at δ 0.107 (near the total variation: ε ~ 0,
    so a first grid step of ~2e-6) with accuracy 4.6e-4: the mixtures discretised ~280 lattice
    points, 178 million bins with the default accuracy's engines beside them (38.6 work units, 31 s;
    domain sweep seed 71).  Then the engine returned at once ([0, inf]) and the groups answered;
    now its first grid step is coarsened until the lattice's grids plan at most ``FIRST_PLAN``
    seconds (``_MixEps._affordable``), and it answers itself within its work limit."""
    from sgmfast._work import UNITS_PER_SECOND, Meter, metered
    from sgmfast.pld.schedule_engine import FIRST_EXTRA, HARD_LIMIT, MixEngine

    sched = [(2.3671484978633224 + (0.5978857305442746 - 2.3671484978633224) * i / 1046, 0.0016841311591668955, 1)
             for i in range(1047)]
    eng = MixEngine(sched, 0.0004632002625458768, 4.0)
    meter = Meter()
    with metered(meter):
        lo, up, _ = eng.epsilon(0.10671330255506431)
    assert lo == up == 0.0
    assert meter.units <= (HARD_LIMIT * 4.0 + FIRST_EXTRA) * UNITS_PER_SECOND


def test_noise_decay_at_small_delta_meets_a_few_tenths_of_a_per_cent():
    """3,000 steps of σ 1.5 -> 0.8 at q 1e-3, δ 1e-10: the mixtures' first grid (the variance rule's
    step) ran out of work, and the groups answered [1.25935, 1.34052] (6.1 %); the first grid is now
    coarsened until its lattice plans at most ``FIRST_PLAN`` of discretising.  Between the runs of
    every step at the extreme σ (post-processing orders them)."""
    n = 3000
    acc = pld.PLDAccountant()
    for i in range(n):
        acc.step(1.5 + (0.8 - 1.5) * i / (n - 1), 1e-3)
    b = acc.epsilon(1e-10)
    assert pld.epsilon(1.5, 1e-3, n, 1e-10).lower <= b.lower <= b.upper <= pld.epsilon(0.8, 1e-3, n, 1e-10).upper
    assert b.upper - b.lower <= 3e-3 * b.upper, b


def test_small_delta_sandwich_takes_groups_with_the_tail_event_sum():
    """δ ~ 1e-11 of 247 random noise levels at q 1.6e-4: the mixtures are wide there, and 32 groups'
    engines lack the tail-event sum (> EVENT_ENTRIES entries); the sandwich first takes
    EVENT_ENTRIES groups.  The upper schedule of 8 groups (each group at its least sigma) is more
    revealing than the run, so its exact composition bounds δ from above: the answer must be at
    least that tight (2a8831b: 5.02e-11 against 2.82e-11), and meet the lower schedule's."""
    import random

    from sgmfast.pld.schedule_groups import brackets

    lo, hi, q, x = 0.921843075510453, 1.0364400633413273, 0.00015915092466100352, 0.10819473185381792
    rr = random.Random(854340)
    sched = [(lo * (hi / lo) ** rr.random(), q, 1) for _ in range(247)]
    acc = pld.PLDAccountant()
    for s, qq, c in sched:
        acc.step(s, qq, c)
    d = acc.delta(x)
    up_s, lo_s = brackets(sched, 8)
    above = Engine(up_s, 1e-3).delta(np.array([x]))
    below = Engine(lo_s, 1e-3).delta(np.array([x]))
    assert d.upper <= float(above[1][0]) * (1 + 1e-9)
    assert d.lower <= float(above[1][0]) and float(below[0][0]) <= d.upper
