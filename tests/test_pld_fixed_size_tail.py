"""Fixed-size batches at small batch fractions and small δ: the far-tail events
(``sgmfast.pld.samplers.fixed_size_tail``) and what a calibration reports there.

References independent of the code under test:
* ε(δ) of the symmetrised pair over two steps from its definition, in mpmath
  (``tests/reference/fixed_size_small_delta.csv``, made by ``make_fixed_size_small_delta.py``);
* the Poisson add/remove pair at noise sigma / 2, which a dataset pair attains under fixed-size
  batches: its certified lower bound is a lower bound of the fixed-size ε.
"""

import csv
from pathlib import Path

import numpy as np
import pytest

from sgmfast import pld
from sgmfast._work import UNITS_PER_SECOND, metered
from sgmfast.pld.samplers import fixed_size, fixed_size_tail

REF = Path(__file__).parent / "reference"
#: bench/domain_sweep_more_failures.jsonl: the small-q, small-δ point that ended 15 % wide after
#: 7.8e8 work units (3.1 s of the reference machine) and 0.7 GB
SWEEP_POINT = (1.61265, 1e-4, 100, 1e-12)


def _rows(name):
    with open(REF / name) as fh:
        return list(csv.DictReader(line for line in fh if not line.startswith("#")))


@pytest.mark.parametrize("row", _rows("fixed_size_small_delta.csv"), ids=lambda r: r["row_id"])
def test_two_steps_at_small_delta_bracket_the_mpmath_reference(row):
    sigma, g, delta, ref = float(row["sigma"]), float(row["g"]), float(row["delta"]), float(row["epsilon_2"])
    tol = float(row["epsilon_tol"])  # (the quadrature rules' difference, carried to epsilon)
    b = fixed_size.epsilon(sigma, g, 2, delta)
    assert b.lower <= ref + tol and ref - tol <= b.upper, (b, ref)
    assert b.upper - b.lower <= 1e-3 * b.upper


#: Tiny eps (0.003-0.01) at small q (a domain sweep, seed 41, and a /tmp sweep): the far-tail
#: events' grids, a step set by eps over the whole one-step loss range, had 2.7-5.1 million points
#: there, and going first they took 3.5-16 s (5.5-12 work units, up to 1.4 GB); the compositions
#: alone were narrow.  Now those go first (``fixed_size.TAIL_FIRST_POINTS``).
TINY_EPS = [(1.7783405792636873, 0.00032382760994807783, 2, 1.2367526844639842e-06),
            (1.7994085506007627, 9.13148296387722e-05, 200, 5.544943801161079e-06),
            (2.061469925144661, 9.828989253005428e-05, 62, 5.2950270626945215e-06)]


#: Small eps at small q where the far-tail events' first grid passes TAIL_FIRST_POINTS but is no
#: longer than one step's grid of the compositions (``fixed_size._events_first``, stop 59): the
#: compositions first ended at [0.11362, 0.15846] and [0.04025, 0.38133] after 4.2 and 4.7
#: seconds of counted work (a fixed-size calibration fuzz: 36 s for one sigma, 2 % too large).
EVENTS_FIRST = [(1.22776, 0.000107, 14, 1.03e-7), (1.755, 5.11e-5, 31, 1.5e-11)]

#: The far-tail events' lower end stalled: the term without tail steps, tilted by 26 with a window
#: 25 long, was too long for the optimistic coarsening to untilt (theta x window > 600); at 0.6 of
#: the tilt its window ended at loss 0.73, below eps ~ 1, and the term's lower δ was 0 -- 1.3 % of δ.
#: [0.99769, 0.99935] after 4.3 s of counted work, met False; now that term keeps the cells from
#: eps / 2 up (``two_stage._untiltable``).
STALLED = [(1.5128412, 1e-4, 6503, 1e-12)]

#: The compositions went first (the events' first grid, 2.1 million points, passed both limits of
#: ``_events_first``), spent the budget on [0.0780, 0.158], and the events did not run at all
#: (``bench/fixed_size_widths.py 5 30``, point 11); their first grid, cut to TAIL_FIRST_POINTS,
#: now runs whatever is left: [0.0786445, 0.0786467] for 0.5 units more.
COMPOSED_FIRST = [(0.7489, 2.35e-6, 32, 1.73e-7)]


@pytest.mark.parametrize("point, seconds", [(SWEEP_POINT, 1.0)] + [(p, 2.1) for p in TINY_EPS]
                         + [(p, 1.5) for p in EVENTS_FIRST] + [(p, 0.6) for p in STALLED]
                         + [(p, 6.0) for p in COMPOSED_FIRST])
def test_hard_points_are_tight_within_little_work(point, seconds):
    """The sweep point within a second of counted work, the tiny-eps points within 2.1 (2.0 before
    the joint minorant of stop 60: its optimistic windows a little longer), the
    events-first points within 1.5, the stalled one within 0.6, the composed-first one within 6;
    each at least the Poisson pair's certified lower bound at sigma / 2."""
    sigma, q, steps, delta = point
    with metered() as meter:
        b = pld.epsilon(sigma, q, steps, delta, sampler="fixed_size")
    assert b.met and b.upper - b.lower <= 1e-3 * b.upper
    attained = pld.epsilon(sigma / 2, q, steps, delta)  # (Poisson at sigma / 2: a lower bound here)
    assert attained.lower <= b.upper
    assert meter.units <= seconds * UNITS_PER_SECOND  # (counted work, not the clock)


def test_tail_events_and_compositions_agree_where_both_apply():
    # a point the compositions resolve alone (larger q, moderate δ): the far-tail answer and the
    # compositions' overlap (both certified)
    sigma, q, steps, delta = 1.0, 0.01, 100, 1e-5
    tail = fixed_size_tail.events_epsilon((sigma, q, steps), delta, 1e-3, 0.0, 1e3, 6.6, fixed_size.BUDGET)
    lo, up = fixed_size._composed_epsilon([(sigma, q, steps)], delta, 1e-3, 0.0, 1e3)
    assert tail is not None
    assert max(tail.lower, lo) <= min(tail.upper, up)


def _loosened_after_calibration(monkeypatch):
    """Make every fixed-size query after the calibration returns 40 times looser above (what a
    MemoryError at the first grid leaves: the start bounds; still certified)."""
    from sgmfast.calibrate import noise
    from sgmfast.pld import samplers

    real, real_cal = samplers.call, noise.calibrate_sigma

    def loose(kind, sampler, *a, **k):
        b = real(kind, sampler, *a, **k)
        return type(b)(b.lower, 40.0 * b.upper)

    def calibrate_then_loosen(*a, **k):
        s = real_cal(*a, **k)
        monkeypatch.setattr(samplers, "call", loose)
        return s

    monkeypatch.setattr("sgmfast.calibrate.calibrate_sigma", calibrate_then_loosen)


CAL_ARGV = ["calibrate", "--epsilon", "2", "--delta", "1e-5", "--q", "0.01", "--steps", "100", "--sampler", "fixed-size"]


def test_cli_calibrate_prints_the_verified_epsilon_when_a_second_evaluation_is_looser(capsys, monkeypatch):
    # under memory pressure a re-evaluation ends its refinement early and returns a looser (still
    # certified) interval: the command prints the value the calibration verified, <= the target
    from sgmfast.cli import main

    _loosened_after_calibration(monkeypatch)
    code = main(CAL_ARGV)
    out, err = capsys.readouterr()
    assert code == 0, err
    assert float(out.split("epsilon:")[1].split()[0]) <= 2.0


def test_cli_calibrate_refuses_to_print_an_unverified_epsilon(capsys, monkeypatch):
    from sgmfast.calibrate import public
    from sgmfast.cli import main

    # the calibration's record forgotten (evicted), the re-evaluation loose
    monkeypatch.setattr(public, "verified_epsilon", lambda *a, **k: None)
    _loosened_after_calibration(monkeypatch)
    code = main(CAL_ARGV)
    out, err = capsys.readouterr()
    assert code == 1 and "could not be verified" in err and "epsilon:" not in out


@pytest.mark.parametrize("point", EVENTS_FIRST)
def test_delta_at_the_events_first_points_agrees_with_epsilon(point):
    """δ queries take the far-tail events too (``fixed_size_tail.events_delta``): δ at the ends of
    the ε interval brackets the δ asked for, and each is resolved to 1e-3 of itself (before: the
    compositions alone, [1.03e-7, 2.41e-7] and [1.5e-11, 2.9e-9] at the upper ends)."""
    sigma, q, steps, delta = point
    b = fixed_size.epsilon(sigma, q, steps, delta)
    with metered() as meter:
        d = fixed_size.delta(sigma, q, steps, [b.lower, b.upper])
    assert d.lower[1] <= delta <= d.upper[0]
    assert np.all(d.upper - d.lower <= 1e-3 * d.upper)
    assert meter.units <= 2.0 * UNITS_PER_SECOND


def test_delta_array_over_a_wide_eps_range_is_resolved_at_each_eps():
    """Six eps from 0.05 to 1 at q 1.07e-4, T 14: the events are centred at each eps in turn
    (before, the compositions refined none of them: upper ends 0.996-0.998), and the values fall
    with eps."""
    eps = [0.05, 0.1136318, 0.2, 0.3, 0.5, 1.0]
    with metered() as meter:
        d = fixed_size.delta(1.22776, 0.000107, 14, eps)
    # (resolved: within the change of δ a relative change 1e-3 of eps makes -- 1.5e-3 of δ at eps 1)
    assert np.all(d.upper - d.lower <= 2e-3 * d.upper)
    assert np.all(np.diff(d.upper) < 0)
    assert meter.units <= 4.0 * UNITS_PER_SECOND


def test_delta_with_infinite_eps_beside_events_first_ones():
    """eps = +inf (δ = 0) is never a centre of the events (it crashed the first step's plan)."""
    d = fixed_size.delta(1.22776, 0.000107, 14, [0.1136318, np.inf])
    assert d.upper[1] == 0.0 and 1.02e-7 <= d.lower[0] <= d.upper[0] <= 1.04e-7


def _last_and_curve(steps):
    """(the last checkpoint's query, its work, the fixed-size curve, its work), each from an empty
    one-step cache (sigma 1, q 0.01, delta 1e-6)."""
    from sgmfast import pld
    from sgmfast._work import metered
    from sgmfast.pld.common import STEP_CACHE

    STEP_CACHE.clear()
    with metered() as one_m:
        one = pld.epsilon(1.0, 0.01, steps[-1], 1e-6, sampler="fixed_size")
    STEP_CACHE.clear()
    with metered() as m:
        b = pld.epsilon_curve(1.0, 0.01, steps, 1e-6, sampler="fixed_size")
    return one, one_m.units, b, m.units


def test_fixed_size_curve_costs_a_few_of_its_last_point():
    """A sampler curve answers the last checkpoint, then the others in spread order while 1.5
    times that query's work lasts (``samplers.curve``; one full query per checkpoint took 60 s
    for 30 checkpoints); the rest are bracketed by monotonicity, and every point overlaps its
    own single query."""
    import numpy as np

    from sgmfast import pld
    from sgmfast._work import UNITS_PER_SECOND

    steps = list(range(100, 1001, 100))
    one, one_units, b, units = _last_and_curve(steps)
    assert units <= 2.6 * one_units + 1.05 * UNITS_PER_SECOND
    assert np.all(np.diff(b.lower) >= 0) and np.all(np.diff(b.upper) >= 0)
    assert b.lower[-1] <= one.upper and one.lower <= b.upper[-1]
    for i in (0, 4):
        s = pld.epsilon(1.0, 0.01, steps[i], 1e-6, sampler="fixed_size")
        assert b.lower[i] <= s.upper * (1 + 1e-12) and s.lower <= b.upper[i] * (1 + 1e-12)


def test_sampler_curve_stops_inside_its_allowance(monkeypatch):
    """After the last checkpoint, each query runs within what is left of the allowance and is
    abandoned where it would pass it (it overran by a whole query: a fixed-size δ curve at accuracy
    1.5e-4 counted 11.9 units for 8.8); what it skipped is bracketed by monotonicity."""
    import numpy as np

    from sgmfast._work import UNITS_PER_SECOND
    from sgmfast.pld import samplers

    monkeypatch.setattr(samplers, "CURVE_FACTOR", 0.2)
    monkeypatch.setattr(samplers, "CURVE_FLOOR", 0.0)
    one, one_units, b, units = _last_and_curve(list(range(100, 1001, 100)))
    assert units <= 1.2 * one_units + 0.05 * UNITS_PER_SECOND  # (one charge past the allowance at most)
    assert np.all(np.diff(b.lower) >= 0) and np.all(np.diff(b.upper) >= 0) and np.all(b.lower <= b.upper)
    assert b.lower[-1] <= one.upper and one.lower <= b.upper[-1]


def test_a_query_shares_one_budget_between_its_paths():
    # the far-tail events left this point 5e-3 wide; the compositions then took a budget of their
    # own and the Poisson pair's lower bound a third (6.9 units in all, 29 s for a calibration of
    # seven such queries).  One budget: the same upper bound, the lower one from what is left.
    with metered() as m:
        b = fixed_size.epsilon(1.71499, 1e-4, 6503, 1e-12)
    assert m.units <= 1.25 * fixed_size.BUDGET * UNITS_PER_SECOND
    assert 0.3950 <= b.lower <= b.upper <= 0.3996  # (Poisson at sigma / 2 attains 0.39800 from below)


@pytest.mark.parametrize("point", [(1.1, 256 / 60000, 400, 1e-5), (1.5, 2e-3, 40, 1e-8), (2.0, 0.05, 10, 1e-5),
                                   (0.9, 1e-4, 3000, 1e-10)])
def test_upper_epsilon_is_the_queries_upper_bound(point):
    # what calibration searches on is the public query's own upper end, bit for bit
    assert fixed_size.upper_epsilon(*point) == fixed_size.epsilon(*point).upper


def test_delta_at_several_eps_shares_one_budget():
    # three eps at T = 52,656: the Poisson pair's engine paid each of its eps groups a budget of
    # its own (20 units, 11-12 s); now they share one, with the same bounds here
    eps = [0.0, 0.6865281420093406, 1.7783614114736128]
    with metered() as m:
        b = pld.delta(0.8707751473205988, 0.0001340487809625122, 52656, eps, sampler="fixed_size", accuracy=0.021)
    assert m.units <= 3.0 * fixed_size.BUDGET * UNITS_PER_SECOND
    one = pld.delta(0.8707751473205988, 0.0001340487809625122, 52656, eps[1], sampler="fixed_size", accuracy=0.021)
    assert one.lower <= b.upper[1] and b.lower[1] <= one.upper
    assert b.upper[1] <= 1.01 * b.lower[1]


def test_delta_far_in_the_tail_spends_one_budget():
    # eps 10.3, T 9548: δ ~ 1e-70; the Poisson pair's lower-bound engine took 5.1 of the query's
    # 6.7 units (and an 8-checkpoint curve there 17 units, 10 s); it now has ATTAINED_DELTA
    with metered() as m:
        b = pld.delta(1.8273057217145652, 5.9371149146380336e-05, 9548, 10.287481467619806, sampler="fixed_size")
    assert 0.0 < b.lower <= b.upper
    assert m.units <= 1.25 * (fixed_size.BUDGET + fixed_size.ATTAINED_DELTA) * UNITS_PER_SECOND


def test_a_hard_query_stays_within_its_budget():
    # sigma 0.6, q 1e-6, T 712, δ 1e-4 (a domain sweep's curve, seed 44: 15.7 s and an OOM of its
    # worker): the start engine, the compositions, the Poisson lower bound (over its engine's own
    # overrun) and a tail fallback with no budget left took 6.7 units for its last checkpoint
    with metered() as m:
        b = fixed_size.epsilon(0.6049624138733815, 1.0750944684402567e-06, 712, 0.00010398848032154291)
    assert 0.0 <= b.lower <= b.upper <= 0.0042
    assert m.units <= 1.25 * (fixed_size.BUDGET + fixed_size.START_BUDGET) * UNITS_PER_SECOND


def test_an_optimistic_window_too_long_to_untilt_keeps_the_cells_from_its_floor():
    """``two_stage._untiltable``: the kept cells start just below the floor, span at most
    UNTILT_SPAN / theta, and only the masses outside them are set to 0; without a floor (or where
    nothing would be left) the window is kept for ``coarsen_opt`` to refuse."""
    from sgmfast._kernels.pld import coarsen as kc
    from sgmfast.pld.grid.two_stage import _untiltable

    rng = np.random.default_rng(7)
    m, step, theta, j0 = 4, 2e-4, 26.0, -9000
    x = rng.random(140_000)
    big_h = m * step
    big_lo, nc = j0 // m, (j0 + x.size - 1) // m - j0 // m + 2
    assert theta * nc * big_h > kc.UNTILT_SPAN
    y = x.copy()
    first, cells = _untiltable(y, j0, m, big_h, theta, big_lo, nc, 0.5)
    assert first * big_h <= 0.5 < (first + 2) * big_h and theta * cells * big_h <= kc.UNTILT_SPAN
    cell = np.floor_divide(j0 + np.arange(x.size), m)
    kept = (cell >= first) & (cell <= first + cells - 2)
    assert np.array_equal(y[kept], x[kept]) and not y[~kept].any() and kept.any()
    d = np.empty(cells)
    assert kc.coarsen_opt(y, j0, m, step, theta, first, d)
    for floor in (-np.inf, 1e6):
        z = x.copy()
        assert _untiltable(z, j0, m, big_h, theta, big_lo, nc, floor) == (big_lo, nc) and np.array_equal(z, x)
