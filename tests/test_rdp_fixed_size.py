"""RDP for fixed-size batches drawn without replacement (replace-one): one step's bound
(``_kernels/rdp/fixed_size.py``) against an mpmath table, dp_accounting's RDP for the same
event, the certified PLD interval, and the known mechanisms at the edges."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sgmfast import pld, rdp
from sgmfast._kernels.rdp.fixed_size import _interpolated_step_rdp, step_rdp

REF = Path(__file__).parent / "reference"


def _rows(name):
    with open(REF / name) as fh:
        return list(csv.DictReader(line for line in fh if not line.startswith("#")))


@pytest.mark.parametrize("row", _rows("fixed_size_rdp.csv"), ids=lambda r: f"{r['sigma']}-{r['g']}-{r['alpha']}")
def test_one_step_matches_the_mpmath_bound_which_bounds_the_symmetrised_pair(row):
    s, g, a = float(row["sigma"]), float(row["g"]), float(row["alpha"])
    bound, exact = float(row["rdp_bound"]), float(row["rdp_sym"])
    assert step_rdp(g, s, a) == pytest.approx(bound, rel=1e-11)
    assert bound >= exact  # the derivation's inequality, checked by independent quadrature
    assert rdp.rdp(s, g, 7, [a], sampler="fixed_size")[0] >= 7 * exact
    if a != math.floor(a):  # the small-sigma path: log-convex interpolation between integers
        assert _interpolated_step_rdp(g, s, a) >= exact


@pytest.mark.parametrize("row", _rows("dp_accounting_wor.csv"), ids=lambda r: r["row_id"])
def test_below_dp_accounting_and_above_the_certified_pld_lower_bound(row):
    s, g, t, d = float(row["sigma"]), float(row["g"]), int(row["steps"]), float(row["delta"])
    ours = rdp.epsilon(s, g, t, d, sampler="fixed_size")
    assert ours < float(row["epsilon_rdp"])  # dp_accounting's RDP (Wang, Balle & Kasiviswanathan)
    assert ours >= pld.epsilon(s, g, t, d, sampler="fixed_size").lower


def test_full_batch_is_the_gaussian_with_sensitivity_two():
    orders = np.array([1.5, 2.0, 10.0, 100.0])
    got = rdp.rdp(1.3, 1.0, 5, orders, sampler="fixed_size")
    assert got == pytest.approx(5 * 2 * orders / 1.3 ** 2, rel=1e-11)


def test_epsilon_and_delta_agree():
    e, a = rdp.epsilon(1.1, 0.01, 1000, 1e-5, sampler="fixed_size", return_order=True)
    assert a in rdp.FIXED_SIZE_ORDERS
    assert rdp.delta(1.1, 0.01, 1000, e, sampler="fixed_size") <= 1e-5 * (1 + 1e-9)
    assert rdp.delta(1.1, 0.01, 1000, e * 0.99, sampler="fixed_size") > 1e-5


def test_edges_and_arrays():
    assert rdp.epsilon(1.0, 0.0, 100, 1e-5, sampler="fixed_size") == 0.0
    assert rdp.epsilon(1.0, 0.1, 0, 1e-5, sampler="fixed_size") == 0.0
    assert rdp.epsilon(0.0, 0.1, 10, 1e-5, sampler="fixed_size") == math.inf
    assert rdp.delta(0.0, 0.1, 10, 1.0, sampler="fixed_size") == pytest.approx(1 - 0.9 ** 10, rel=1e-12)
    both = rdp.epsilon([0.0, 1.0], 0.1, 10, 1e-5, sampler="fixed_size")
    assert both[0] == math.inf and both[1] == rdp.epsilon(1.0, 0.1, 10, 1e-5, sampler="fixed_size")
    with pytest.raises(ValueError, match="sampler"):
        rdp.epsilon(1.0, 0.1, 10, 1e-5, sampler="balls_in_bins")


def test_noiseless_points_beside_noisy_ones():
    """(This crashed: the noisy answers overwrote the targets the noiseless ones are read against.)"""
    got = rdp.epsilon([0.0, 1.0, 1.0], 0.1, 10, [0.9, 1e-5, 1e-5])
    assert got[0] == 0.0 and got[1] == got[2] == rdp.epsilon(1.0, 0.1, 10, 1e-5)
    d = rdp.delta([0.0, 1.0], 0.1, 10, 1.0)
    assert d[0] == pytest.approx(1 - 0.9 ** 10, rel=1e-12) and d[1] == rdp.delta(1.0, 0.1, 10, 1.0)


@settings(max_examples=15, deadline=None, derandomize=True)
@given(sigma=st.floats(0.05, 100.0), g=st.floats(1e-7, 1.0), steps=st.integers(1, 10 ** 6),
       delta=st.floats(1e-12, 0.5))
def test_total_domain_between_the_attained_pair_and_the_gaussian(sigma, g, steps, delta):
    """Every order's bound lies between the Poisson remove pair at sigma / 2 (attained by a
    dataset pair) and the Gaussian with sensitivity 2, so epsilon over the same orders does too."""
    o = rdp.FIXED_SIZE_ORDERS
    ours = rdp.epsilon(sigma, g, steps, delta, sampler="fixed_size")
    # (the Poisson bound is rounded up by its integer sums' rounding too, ``rdp._sum_error``: up
    # to ~1e-12 relative more at q near 1, where log(1 - q) is large)
    slack = 1e-12 + float(rdp._sum_error([g], [sigma / 2], float(o.max())))
    assert rdp.epsilon(sigma / 2, g, steps, delta, orders=o) <= ours * (1 + slack)
    assert ours <= rdp.epsilon(sigma / 2, 1.0, steps, delta, orders=o) * (1 + 1e-12)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(sigma=st.floats(1e-3, 0.05), g=st.floats(1e-9, 0.5), steps=st.integers(1, 10 ** 4),
       log10_delta=st.floats(-300.0, -1.0))
def test_small_sigma_answers_fast_and_stays_under_the_gaussian(sigma, g, steps, log10_delta):
    """(sigma = 0.002 took minutes: each fractional order's quadrature needs ~1/sigma^2 nodes;
    those orders are now interpolated between integers.)  Finite, and never above the Gaussian
    with sensitivity 2 over the same orders, which bounds every order."""
    delta = 10.0 ** log10_delta
    ours = rdp.epsilon(sigma, g, steps, delta, sampler="fixed_size")
    assert 0.0 < ours < math.inf
    assert ours <= rdp.epsilon(sigma / 2, 1.0, steps, delta, orders=rdp.FIXED_SIZE_ORDERS) * (1 + 1e-12)


def test_runs_add_their_curves_and_account_for_noiseless_ones():
    """``fixed_size_runs``: one run is ``rdp.epsilon`` (to the 4-ulp rounding of the sum), runs
    lie between the constant runs at their extremes, a noiseless run reveals a drawn example
    (δ >= 1 - (1 - q)^T, ε = inf below it), bad input is a ValueError naming the parameter."""
    one = rdp.epsilon(1.0, 0.01, 100, 1e-5, sampler="fixed_size")
    assert rdp.fixed_size_runs([(1.0, 0.01, 100)], 1e-5, 0) == pytest.approx(one, rel=1e-13)
    mixed = rdp.fixed_size_runs([(1.0, 0.01, 100), (1.5, 0.005, 100)], 1e-5, 0)
    assert rdp.epsilon(1.5, 0.005, 200, 1e-5, sampler="fixed_size") <= mixed <= rdp.epsilon(1.0, 0.01, 200, 1e-5,
                                                                                              sampler="fixed_size")
    p = 1 - 0.999 ** 10
    runs = [(0.0, 0.001, 10), (2.0, 0.01, 1000)]
    assert rdp.fixed_size_runs(runs, 0.9 * p, 0) == math.inf
    assert math.isfinite(rdp.fixed_size_runs(runs, 0.05, 0))
    at_inf = rdp.fixed_size_runs(runs, math.inf, 1)
    assert at_inf == pytest.approx(p, rel=1e-12) and at_inf >= p
    assert rdp.fixed_size_runs(runs, 1.0, 1) >= p
    with pytest.raises(ValueError, match="sigma"):
        rdp.fixed_size_runs([(-1.0, 0.1, 1)], 1e-5, 0)
    with pytest.raises(ValueError, match="delta"):
        rdp.fixed_size_runs([(1.0, 0.1, 1)], 2.0, 0)
