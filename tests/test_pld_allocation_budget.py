"""Balls-in-bins queries within their work budget (issue #31 item 6: nothing over 10 s): the shared
budget of several δ, the hard stop of a refinement level, the level-0 lattice planned for the budget,
and the lattice laws' cells on the meter.  Work is counted (``sgmfast._work``), never timed."""

import math

import numpy as np
import pytest

from sgmfast._work import UNITS_PER_SECOND, charge, metered
from sgmfast.pld import common
from sgmfast.pld.samplers import balls_in_bins as bb, epoch_power


def _charging(costs):
    """An attempt that charges costs[level] seconds of work and returns a narrowing interval."""
    def attempt(level):
        charge(costs[level] * UNITS_PER_SECOND)
        return 1.0 - 0.5 ** (level + 2), 1.0 + 0.5 ** (level + 2)
    return attempt


def test_shared_budget_scales_every_refinement():
    never = lambda lo, up: False  # noqa: E731
    with metered() as alone:
        common.refine_levels(_charging([1.0] * 6), never, 0.0, 2.0, 6.0, growth=1.0)
    with metered() as shared, common.shared_budget(3):
        assert common.budget_share() == pytest.approx(common.SHARED_TOTAL / 3)
        common.refine_levels(_charging([1.0] * 6), never, 0.0, 2.0, 6.0, growth=1.0)
    assert common.budget_share() == 1.0  # (restored outside the block)
    assert alone.units == 6 * UNITS_PER_SECOND
    assert shared.units == round(6 * common.SHARED_TOTAL / 3) * UNITS_PER_SECOND


def test_a_level_past_the_hard_limit_is_abandoned():
    """A level that would run past HARD_LEVELS budgets stops at its charge; the intervals
    certified before it stand."""
    lo, up = common.refine_levels(_charging([1.0, 100.0]), lambda lo, up: False, 0.0, 2.0, 6.0, growth=0.1)
    assert (lo, up) == (0.75, 1.25)  # (level 0's; level 1 charged past 12 units and was dropped)


def test_level_zero_lattice_is_planned_within_the_budget():
    """sigma 0.78, t 10^4, delta 1e-17 over 6 epochs: the full 2^19 lattice planned 15 units of
    work for its first epoch (a 10-checkpoint curve took 16); the plan fits the budget, a smaller
    budget gets a smaller lattice that fits it, and the plan is within a factor 2 of the work the
    epoch is charged."""
    sigma, t, tail = 0.78, 10000, 1e-25
    var = math.expm1(1 / sigma ** 2)
    strong = tail < bb.TILTED_LOWER_TAIL
    h, w_max, cap = bb._lattice(sigma, t, 1e-3, tail, 0)
    plan = epoch_power.epoch_cost(h, w_max, cap, t, var, strong)
    assert plan <= bb.BUDGET
    h2, w2, c2 = bb._lattice(sigma, t, 1e-3, tail, 0, budget=plan / 3)
    assert c2 / h2 < 0.6 * cap / h and epoch_power.epoch_cost(h2, w2, c2, t, var, strong) <= plan / 3
    with metered() as m:
        bb.Epoch(sigma, t, h, w_max, cap, tail)
    assert 0.5 <= plan / (m.units / UNITS_PER_SECOND) <= 2.0


def test_lattice_laws_cells_are_charged():
    sigma, t, tail = 1.07, 8, 1e-18
    h, w_max, cap = bb._lattice(sigma, t, 1e-3, tail, 0)
    cells = math.ceil(w_max / h)
    with metered() as m:
        bb.Epoch(sigma, t, h, w_max, cap, tail)
    assert m.units >= (epoch_power.CELL_UNITS[0] + 3 * epoch_power.CELL_UNITS[1]) * cells  # (at least 3 CDF pairs a cell)


def test_several_deltas_share_one_and_a_half_budgets():
    """Three δ of one balls-in-bins run (the sweep's 16 s case at sigma 0.917, t 16): each
    refines on a third of a budget (its level 0 planned for that), so the call stays within
    about one budget, and every query is stopped at twice its share."""
    from sgmfast import pld

    deltas = [2.2048015746940344e-26, 7.225570653260772e-11, 1.608015980456882e-05]
    with metered() as m:
        b = pld.epsilon(0.9170670317287265, 0.0625, 40, deltas, sampler="balls_in_bins")
    assert np.all(np.diff(b.upper) < 0) and np.all(b.lower <= b.upper)
    assert m.units <= common.SHARED_TOTAL * bb.BUDGET * common.HARD_LEVELS * UNITS_PER_SECOND + 3 * 0.3 * UNITS_PER_SECOND


@pytest.mark.parametrize("sigma, t, delta", [(0.4, 2, 1e-12), (0.7, 3, 1e-10), (0.5, 3, 1e-5)])
def test_heavy_tails_with_few_steps_meet_the_accuracy_within_two_and_a_half_units(sigma, t, delta):
    """Few steps at small sigma: a loss grid step capped at 0.05 left the interval about a step
    wide, so reaching 1e-3 took three levels (σ 0.4, t 2, δ 1e-12: 4.9 units); the step now
    follows the answer (``_loss_step``, STEP_PER_EPS accuracy of it).  Counted work, the accuracy met."""
    common.STEP_CACHE.clear()
    with metered() as meter:
        b = bb.epsilon(sigma, t, t, delta)
    assert b.upper - b.lower <= 1e-3 * b.upper
    assert meter.units <= 2.5 * UNITS_PER_SECOND


def test_delta_below_the_floor_is_not_refined():
    """δ at eps 4.4 and 9.9 (sigma 3.19, t 886, 24 epochs) lies far below 1e-50, where the lattice's
    lower law reads 0 and the upper end sits at the truncation's charge; beside eps 0.029 it took
    six levels (12 s, 15 s before this stop's kernels) to stay at [0, 7.2e-58].  Now the query ends
    when eps 0.029 is resolved, and the intervals are as they were: the small ones below the floor,
    the first within the accuracy and the Gaussian closed forms."""
    eps = np.array([0.029401192584413243, 4.365949800376425, 9.87340979062707])
    with metered() as m:
        b = bb.delta(3.193675726911237, 886, 21264, eps)
    assert m.units <= 4.0 * UNITS_PER_SECOND
    lo, up = np.asarray(b.lower), np.asarray(b.upper)
    assert np.all(up[1:] <= bb.DELTA_FLOOR) and np.all(lo <= up)
    assert up[0] - lo[0] <= 1e-3 * up[0]
    g_lo, g_up = bb._gauss_delta(3.193675726911237 * math.sqrt(886), 24, eps[:1])[0], \
        bb._gauss_delta(3.193675726911237, 24, eps[:1])[1]
    assert g_lo[0] <= up[0] and lo[0] <= g_up[0]
