"""The optimistic one-step masses on a shifted lattice (``sgmfast.pld.grid.lattice_shift``).

Where q is below the grid step, the plain optimistic masses lose ~q / 5 of mean loss per step
(their bulk atom cannot be contracted onto a knot), a bias a composition accumulates T-fold.  The
shifted masses represent L + d: checked against the one-step δ in closed form (scipy's log-space
normal tails, independent of the package), for their mean loss against the pessimistic masses',
and through compositions: the moved-down grid against the direct composition, and the engine's
intervals at few-sampled-step points against the old code's and each other.
"""

import math

import numpy as np
import pytest
from scipy.special import log_ndtr

from sgmfast import pld
from sgmfast.pld.common import ADD, REMOVE, Grid
from sgmfast.pld.grid import lattice_shift, onestep
from sgmfast.pld.grid.queries import delta_bound


def _exact_delta(sigma, q, add, eps):
    """One step's δ(eps) in closed form: remove (P = (1 - q) N(0, s^2) + q N(1, s^2) against
    Q = N(0, s^2)) or add (Q against P)."""
    out = []
    for e in eps:
        if not add:
            if math.exp(e) <= 1 - q:
                out.append(-math.expm1(e))
                continue
            x = sigma * sigma * math.log((math.exp(e) - 1 + q) / q) + 0.5
            up0, up1 = math.exp(log_ndtr(-x / sigma)), math.exp(log_ndtr(-(x - 1) / sigma))
            out.append((1 - q) * up0 + q * up1 - math.exp(e) * up0)
        else:
            if math.exp(-e) <= 1 - q:
                out.append(0.0)
                continue
            x = sigma * sigma * math.log((math.exp(-e) - 1 + q) / q) + 0.5
            lo0, lo1 = math.exp(log_ndtr(x / sigma)), math.exp(log_ndtr((x - 1) / sigma))
            out.append(lo0 - math.exp(e) * ((1 - q) * lo0 + q * lo1))
    return np.array(out)


def _grid_delta(p, j_lo, step, eps):
    ell = (j_lo + np.arange(p.size)) * step
    return np.array([float(np.sum(p[ell > e] * -np.expm1(e - ell[ell > e]))) for e in eps])


POINTS = [(0.6, 1e-5, 1.28e-4), (0.6, 1e-5, 3.2e-5), (0.9, 1e-4, 1.28e-4), (0.5, 3e-6, 2e-5), (1.3, 2e-5, 5e-5),
          (2.0, 1e-4, 1e-4), (0.4, 1e-5, 1e-3)]


@pytest.mark.parametrize("sigma,q,step", POINTS)
@pytest.mark.parametrize("add", [REMOVE, ADD])
def test_shifted_masses_are_optimistic_for_the_shifted_step(sigma, q, step, add):
    one = onestep.one_step(sigma, q, add, step, 1e-25)
    # every candidate shift, and the one chosen
    cands = [lattice_shift.bulk_shift(one._frac, one._amass, step, reach) for reach in (1, 2, 4)]
    assert all(0.0 < d < step and bins for d, bins, _ in cands)
    d_chosen = one.bulk_d()
    eps = np.concatenate((np.linspace(-3 * step, 3 * step, 25), np.geomspace(1e-4, 3.0, 60)))
    exact = _exact_delta(sigma, q, add, eps)
    for d, bins, knot in cands + [(d_chosen, None, None)]:
        p = one.opt_by(d) if bins is None else lattice_shift.shifted_opt(one._frac, one._amass, one._top, step, d,
                                                                          bins, knot)
        assert p.sum() <= 1.0
        got = _grid_delta(p, one.j_lo, step, eps + d)  # (the masses are of L + d)
        assert (got <= exact * (1 + 1e-9) + 1e-300).all()
    # the chosen masses keep the mean loss (the plain ones lost up to ~5 q a step)
    ell = (one.j_lo + np.arange(one.pess.size)) * step
    p = one.opt_by(d_chosen)
    mean_pess, mean_plain = float(np.dot(one.pess, ell)), float(np.dot(one.opt, ell))
    mean_chosen = float(np.dot(p, ell)) - d_chosen * float(p.sum())
    assert mean_plain <= mean_chosen <= mean_pess + 1e-15
    assert mean_pess - mean_chosen < 0.05 * q


@pytest.mark.parametrize("sigma,q,step", [(0.6, 1e-5, 1.28e-4), (0.9, 1e-4, 1.28e-4), (0.4, 1e-5, 1e-3)])
def test_bulk_d_removes_the_bias_of_the_plain_masses(sigma, q, step):
    one = onestep.one_step(sigma, q, REMOVE, step, 1e-25)
    d = one.bulk_d()
    ell = (one.j_lo + np.arange(one.pess.size)) * step
    plain = float(np.dot(one.opt, ell)) - float(np.dot(one.pess, ell))
    chosen = float(np.dot(one.opt_by(d), ell)) - d * float(one.opt_by(d).sum()) - float(np.dot(one.pess, ell))
    assert d > 0 and plain < -0.01 * q and chosen > -1e-3 * q


def test_no_shift_where_the_bulk_spans_many_bins():
    one = onestep.one_step(1.0, 0.01, REMOVE, 3.2e-5, 1e-25)
    assert one.bulk_d() == 0.0 and one.opt_by(0.0) is one.opt


def test_moved_down_keeps_the_masses_on_a_lower_lattice():
    rng = np.random.default_rng(3)
    t = rng.uniform(0.0, 1.0, 400)
    g = Grid(1e-3, 2.5, False, -37, t, -4.0, 1e-9, 0.0, 0.0, 0.0)
    total = 0.01234  # 12.34 steps: moved down by 13
    h = lattice_shift.moved_down(g, total)
    assert h.offset == g.offset - 13
    eps = np.linspace(-0.05, 0.4, 50)
    # δ of the moved grid at eps is δ of the original at eps + 13 steps (same untilted masses)
    assert delta_bound(h, eps) == pytest.approx(delta_bound(g, eps + 13e-3), rel=1e-9, abs=1e-300)
    assert (delta_bound(h, eps) <= delta_bound(g, eps + total) * (1 + 1e-12)).all()
    assert lattice_shift.moved_down(g, 0.0) is g


FEW_SAMPLED = [
    # sigma, q, T, δ: eps set by one step far in the tail (qT ~ 0.02 .. 2); lower ends 0.25-4 % low on
    # fec2300 (the plain optimistic masses' bias, composed T-fold)
    (0.6, 1e-5, 2000, 9.95e-14),
    (0.6040178446777197, 1.0297862352191837e-05, 120443, 1.8161854021584663e-12),
    (0.7399493761242767, 1.553344397619905e-05, 1003, 3.98969100384137e-14),
]


@pytest.mark.parametrize("sigma,q,steps,delta", FEW_SAMPLED)
def test_few_sampled_steps_meet_the_accuracy(sigma, q, steps, delta):
    b = pld.epsilon(sigma, q, steps, delta)
    assert b.met and b.upper - b.lower <= 1e-3 * b.upper
    d = pld.delta(sigma, q, steps, np.array([b.lower, b.upper]))
    assert d.upper[0] >= delta * (1 - 1e-12) and d.lower[1] <= delta * (1 + 1e-12)
