"""The fixed-size calibration's search (``calibrate.noise._coarse_start``, the fixed-size memo
of ``fixed_size.upper_epsilon``): fewer certified queries, each cheaper after the first, never a
value below the public accountant's -- so a calibrated sigma still meets its target there."""

from __future__ import annotations

import math

import pytest

from sgmfast import calibrate as cal
from sgmfast._work import metered
from sgmfast.calibrate.roots import _root_log, _slope
from sgmfast.pld.samplers import fixed_size


@pytest.mark.parametrize("x0", [-0.3, 0.0, 0.2])
def test_slope_of_a_finished_search(x0):
    """``_slope`` reads d g / d x off a search's points: -2 on value = 0.3 e^{-2 (x - x*)}, and
    None without a point on both sides."""
    seen: list = []
    _root_log(lambda x: 0.3 * math.exp(-2.0 * (x - 0.37)), x0, 0.3, 1e-4, -50.0, 50.0, seen=seen)
    assert _slope(seen) == pytest.approx(-2.0, rel=1e-6)
    assert _slope([p for p in seen if p[1] <= 0]) is None


@pytest.mark.parametrize("curvature", [50.0, 200.0, -100.0])
@pytest.mark.parametrize("offset", [0.003, 0.001, -0.002])
def test_root_log_steps_with_a_given_slope(curvature, offset):
    """Started near the root (where a coarse search left it) with the slope that search measured,
    the search needs fewer evaluations than with its default first step -- on value = 0.3 e^{g},
    g = -7 u + c u^2, u = x - x* (steep, as fixed-size batches at small δ: elasticity 6.8 at
    q 1e-4, T 6503, δ 1e-12; curved both ways)."""
    root = 0.37

    def count(slope):
        calls = []

        def value(x):
            calls.append(x)
            u = x - root
            return 0.3 * math.exp(-7.0 * u + curvature * u * u)

        x = _root_log(value, root + offset, 0.3, 1e-4, -50.0, 50.0, rel=1e-3, slope=slope)
        n = len(calls)
        assert 0.3 * (1 - 1e-3) <= value(x) <= 0.3 or 0.0 <= x - root <= 1e-4
        return n

    assert count(-7.0) <= min(count(None), 4)
    assert count(-7.0) <= 3 or curvature < 0


@pytest.mark.parametrize("sigma, q, steps, delta, kind, share", [
    # the far-tail events settle at a level (since the joint minorant of stop 60 later points settle
    # there too, so the memo saves nothing here: it must not cost more)
    (1.3, 1e-4, 6503, 1e-14, "tail_level", 1.0),
    # the compositions after the events narrowed nothing here (0.59 and 0.30 of the work) until
    # stop 68; since the tail-event sum runs on a coarser step first and optimistic windows cover
    # small supports, the events settle a level here too (and the compositions lift the lower end,
    # 0.053076 -> 0.053175), and the memo saves nothing: no point sampled near it leaves the
    # compositions idle any more
    (2.6348, 3.8635e-5, 31679, 1.36e-15, "tail_level", 1.0),
])
def test_memo_values_are_never_below_the_public_upper_bound(sigma, q, steps, delta, kind, share):
    """A search's memo cuts later queries short; their upper end is at least ``epsilon``'s (a
    prefix of its refinement), at no more work than the query without it -- each measured from an
    empty one-step cache (the charges are for cache misses)."""
    from sgmfast.pld.common import STEP_CACHE

    memo: dict = {}
    first = fixed_size.upper_epsilon(sigma, q, steps, delta, memo=memo)
    assert memo.get(kind) is not None and first >= fixed_size.epsilon(sigma, q, steps, delta).upper
    for factor in (1.001, 0.998):
        s = sigma * factor
        STEP_CACHE.clear()
        with metered() as with_memo:
            up = fixed_size.upper_epsilon(s, q, steps, delta, memo=memo)
        STEP_CACHE.clear()
        with metered() as public:
            b = fixed_size.epsilon(s, q, steps, delta)
        assert b.upper <= up <= b.upper * (1 + 2e-3)
        assert with_memo.units <= share * public.units


@pytest.mark.parametrize("eps, q, steps, delta, units", [
    # a domain sweep's slow corner: 18 s, 5.1e9 work units, seven queries of 2.5 s
    (1.0, 1e-4, 6503, 1e-12, 2.5e9),
    # a calibration fuzz's (bench/fixed_size_calibrate_fuzz.py 1 30, point 28): 36 s, 11.8e9 units,
    # and sigma 1.2557 where 1.2277 meets the target (the compositions' upper end jumped to 0.16-0.19
    # at some sigmas; ``fixed_size._events_first``)
    (0.1137, 0.000107, 14, 1.03e-07, 2.5e9),
])
def test_fixed_size_calibration_at_small_q_and_delta(eps, q, steps, delta, units):
    """The answer meets the target in the public accountant, is within 0.3 % of the least sigma
    (the certified lower bound already exceeds the target there), and the search costs a fraction
    of its former work."""
    with metered() as meter:
        s = cal.calibrate_sigma(eps, delta, q, steps, sampler="fixed_size")
    assert fixed_size.epsilon(s, q, steps, delta).upper <= eps
    assert fixed_size.epsilon(s * 0.997, q, steps, delta).lower > eps
    assert meter.units < units
