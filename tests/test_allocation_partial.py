"""Balls-in-bins runs that end in a partial epoch (``pld.samplers.epoch_runs``), issue #31.

A run of E t + r steps was bracketed by E and E + 1 whole epochs -- [0, ε(1 epoch)] for a run
shorter than an epoch, ~20 % wide at 1.5 epochs.  The partial epoch is now the r-step epoch
subsampled at rate r/t (``_kernels.pld.subsample``).  Independent references:

* the subsample kernels against the exact subsampled pair of small discrete pairs (mpmath, every
  atom moved by the module's formulas in high precision): the upper masses' δ above it at every
  eps, the lower atoms' below it;
* whole runs against tests/reference/allocation_partial.csv (mpmath quadrature of the runs' pairs:
  a partial epoch alone, a whole epoch and one step), made by make_allocation_partial.py.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import mpmath as mp
import numpy as np
import pytest

from sgmfast._kernels.pld import subsample as ksub
from sgmfast.pld import allocation

REF = Path(__file__).parent / "reference" / "allocation_partial.csv"
STEP, J_LO, N = 0.05, -30, 90


def _pair(seed):
    """A discrete pair on the grid: first-measure masses at the grid points, its second measure's
    mass on the grid below 1 (the rest off the grid), some mass at +inf."""
    rng = np.random.default_rng(seed)
    m = rng.random(N) * (rng.random(N) < 0.7)
    ell = (J_LO + np.arange(N)) * STEP
    m *= 0.97 / float(np.sum(m * np.exp(-ell)))
    return m, 1e-3 * rng.random()


def _delta(atoms, inf, eps):
    """δ(eps) = sum m (1 - e^{eps - ell})_+ + inf, in mpmath."""
    e = mp.exp(eps)
    return inf + mp.fsum(m * (1 - e * mp.exp(-ell)) for ell, m in atoms if ell > eps)


def _exact(atoms, inf, p, add):
    """The subsampled pair's atoms and +inf mass (the module notes' map, in mpmath)."""
    p = mp.mpf(p)
    out = []
    for ell, m in atoms:
        if add:
            out.append((-mp.log(1 - p + p * mp.exp(-ell)), m))
        else:
            out.append((mp.log(1 - p + p * mp.exp(ell)), m * ((1 - p) * mp.exp(-ell) + p)))
    if add:
        return out + ([(-mp.log(1 - p), inf)] if p < 1 else []), (inf if p == 1 else 0)
    rest = 1 - mp.fsum(m * mp.exp(-ell) for ell, m in atoms)
    return out + [(mp.log(1 - p), (1 - p) * rest)], p * inf


EPS = [-2.0, -0.7, -0.2, -0.01, 0.0, 0.013, 0.1, 0.37, 0.8, 1.2, 1.49]
#: output grids (j_lo, step, n): the input's, and a finer one of its own
GRIDS = [(J_LO, STEP, N), (-130, STEP / 4, 4 * N + 40)]


def _at(j, step):
    return mp.mpf(int(j)) * mp.mpf(step)


def _cases(seeds, rates):
    """Both output grids, the ``seeds``' pairs, the ``rates``, both directions."""
    def mark(test):
        for name, values in (("add", [False, True]), ("p", rates), ("seed", seeds)):
            test = pytest.mark.parametrize(name, values)(test)
        return pytest.mark.parametrize("grid", GRIDS, ids=["same", "finer"])(test)
    return mark


@_cases([1, 2], [0.01, 0.3, 0.9])
def test_upper_masses_are_above_the_subsampled_pair(grid, seed, p, add):
    mp.mp.dps = 30
    j_out, step, n = grid
    m, inf = _pair(seed)
    out = np.empty(n)
    out_inf = ksub.subsample_upper(m, inf, J_LO, STEP, p, add, j_out, step, out)
    atoms = [(_at(J_LO + i, STEP), mp.mpf(float(m[i]))) for i in range(N) if m[i] > 0]
    ex_atoms, ex_inf = _exact(atoms, mp.mpf(inf), p, add)
    got = [(_at(j_out + i, step), mp.mpf(float(out[i]))) for i in range(n) if out[i] > 0]
    for eps in EPS:
        want = _delta(ex_atoms, ex_inf, eps)
        have = _delta(got, mp.mpf(out_inf), eps)
        assert have >= want, (eps, have, want)
        assert have <= want + step, (eps, have, want)  # (connect-the-dots: exact at the grid points)


@_cases([3, 4], [0.02, 0.5, 0.95])
def test_lower_atoms_are_below_the_subsampled_pair(grid, seed, p, add):
    mp.mp.dps = 30
    j_out, step, n = grid
    rng = np.random.default_rng(seed)
    m, _ = _pair(seed)
    frac = np.where(m > 0, rng.random(N) * STEP, -1.0)
    frac[-1] = -1.0
    top = 1e-3
    out_f, out_m = np.empty(n), np.empty(n)
    out_top = ksub.subsample_lower(frac, m, top, J_LO, STEP, p, add, j_out, step, out_f, out_m)
    atoms = [(_at(J_LO + i, STEP) + mp.mpf(float(frac[i])), mp.mpf(float(m[i])))
             for i in range(N - 1) if frac[i] >= 0 and m[i] > 0] + [(_at(J_LO + N - 1, STEP), top)]
    ex_atoms, _ = _exact(atoms, mp.mpf(0), p, add)  # (the off-grid second measure's atom included)
    got = [(_at(j_out + i, step) + mp.mpf(float(out_f[i])), mp.mpf(float(out_m[i])))
           for i in range(n - 1) if out_f[i] >= 0 and out_m[i] > 0]
    got.append((_at(j_out + n - 1, step), mp.mpf(float(out_top))))
    assert all(0 <= float(out_f[i]) < step for i in range(n - 1) if out_f[i] >= 0)
    for eps in EPS:
        want = _delta(ex_atoms, 0, eps)
        have = _delta(got, 0, eps)
        assert have <= want, (eps, have, want)
        assert have >= want - step, (eps, have, want)  # (the merges within a bin)


def test_the_moved_loss_is_within_its_rounding_constant():
    """``moved_loss`` against mpmath: within 8 u (|ell| + |ell'| + 2) (the module's premise; the
    kernels move each loss by 1e-13 times that sum, ~110 times more)."""
    mp.mp.dps = 40
    rng = np.random.default_rng(11)
    u = 2.0 ** -53
    worst = 0.0
    for _ in range(4000):
        ell = float(rng.choice([-1.0, 1.0]) * 10 ** rng.uniform(-8, 2.5))
        p = float(10 ** rng.uniform(-7, -1e-4))
        add = bool(rng.random() < 0.5)
        got = ksub.moved_loss(ell, p, add)
        x = -mp.mpf(ell) if add else mp.mpf(ell)
        exact = mp.log(1 - mp.mpf(p) + mp.mpf(p) * mp.exp(x))
        exact = -exact if add else exact
        worst = max(worst, float(abs(mp.mpf(got) - exact)) / (u * (abs(ell) + abs(got) + 2.0)))
    assert worst <= 8.0, worst


def _rows():
    with open(REF) as f:
        return [r for r in csv.DictReader(line for line in f if not line.startswith("#"))]


def _steps(shape, t):
    return 2 if shape == "partial" else 3  # (the first 2 of t; a whole epoch of 2, then one step)


@pytest.mark.parametrize("row", _rows(), ids=lambda r: f"{r['shape']}-{r['sigma']}-{r['t']}-{r['kind']}")
def test_runs_ending_in_a_partial_epoch_against_quadrature(row):
    """Certified, and within the accuracy: bracketing gave [0, ε(1 epoch)] for ``partial``."""
    sigma, t, kind = float(row["sigma"]), int(row["t"]), row["kind"]
    T = _steps(row["shape"], t)
    if kind == "delta":
        ref, eps = float(row["delta"]), float(row["epsilon"])
        b = allocation.delta(sigma, t, T, eps)
        rel = 1e-9 * ref
        assert b.lower - rel <= ref <= b.upper + rel, (b, ref)
        assert b.upper - b.lower <= 2e-3 * ref, (b, ref)
    else:
        ref, delta = float(row["epsilon"]), float(row["delta"])
        b = allocation.epsilon(sigma, t, T, delta)
        assert b.lower * (1 - 1e-9) <= ref <= b.upper * (1 + 1e-9), (b, ref)
        assert b.met and b.upper - b.lower <= 1e-3 * b.upper


@pytest.mark.parametrize("sigma,t,epochs", [(1.1, 100, 3), (0.8, 20, 2), (2.0, 1000, 1)])
def test_partial_epochs_grow_between_whole_ones(sigma, t, epochs):
    """ε grows with the steps (a prefix is a post-processing): at E whole epochs, a quarter,
    a half and all but one step more, and E + 1 -- each certified interval within the accuracy
    and above the one before (the interval of the first ends below that of the next)."""
    steps = [epochs * t, epochs * t + t // 4, epochs * t + t // 2, (epochs + 1) * t - 1, (epochs + 1) * t]
    got = [allocation.epsilon(sigma, t, T, 1e-6) for T in steps]
    for a, b in zip(got, got[1:]):
        assert a.lower <= b.upper * (1 + 1e-9)
        assert a.lower <= b.lower * (1 + 1e-3)
    assert all(g.met for g in got)
    assert got[0].upper < got[2].lower and got[2].upper < got[-1].lower


def test_one_step_of_an_epoch_is_the_poisson_step():
    """The first step of an epoch alone is a Poisson-subsampled Gaussian step at rate 1/t."""
    from sgmfast import pld

    b = allocation.epsilon(1.0, 50, 1, 1e-6)
    p = pld.epsilon(1.0, 1 / 50, 1, 1e-6)
    assert b.lower <= p.upper * (1 + 1e-9) and p.lower <= b.upper * (1 + 1e-9) and b.met
    assert math.isfinite(b.upper) and b.upper > 0


def test_a_curve_ending_inside_an_epoch_ends_as_tight_as_the_single_query():
    """A curve's checkpoints inside an epoch were bracketed by whole epochs (the last of [234, 351,
    500] at t 234: 2 and 3 epochs, ~20 % wide); the last is now the single query's answer, the
    others as the work allows, every one overlapping its single query."""
    from sgmfast import pld

    cps = [234, 351, 500]
    b = pld.epsilon_curve(1.1, 1 / 234, cps, 1e-5, sampler="balls_in_bins")
    for i, T in enumerate(cps):
        s = allocation.epsilon(1.1, 234, T, 1e-5)
        assert b.lower[i] <= s.upper * (1 + 1e-9) and s.lower <= b.upper[i] * (1 + 1e-9)
    assert b.upper[-1] - b.lower[-1] <= 1e-3 * b.upper[-1]
    d = pld.delta_curve(1.1, 1 / 234, cps, 0.4, sampler="balls_in_bins")
    s = allocation.delta(1.1, 234, 500, 0.4)
    assert d.lower[-1] <= s.upper * (1 + 1e-9) and s.lower <= d.upper[-1] * (1 + 1e-9)
    assert d.upper[-1] - d.lower[-1] <= 0.05 * d.upper[-1]


def test_a_curve_spends_on_checkpoints_inside_epochs_what_its_epochs_cost():
    """Domain sweep seed 74: a δ(0) curve of 8 checkpoints inside epochs of 213 took 11.5 s -- its
    last checkpoint's query cost 6.6 units and the others were allowed 1.5 times that.  The
    others now get CURVE_FACTOR times the whole-epoch curve's work (at least CURVE_FLOOR); the
    last stays as tight as its single query."""
    from sgmfast import pld
    from sgmfast._work import UNITS_PER_SECOND, metered
    from sgmfast.pld import samplers

    cps = list(range(70, 519, 64))
    with metered() as m:
        b = pld.delta_curve(2.771551828672543, 1 / 213, cps, 0.0, sampler="balls_in_bins")
    single = allocation.delta(2.771551828672543, 213, cps[-1], 0.0)
    assert b.lower[-1] <= single.upper * (1 + 1e-9) and single.lower <= b.upper[-1] * (1 + 1e-9)
    assert b.upper[-1] - b.lower[-1] <= 1e-4 * b.upper[-1]
    assert m.units <= 10 * UNITS_PER_SECOND + samplers.CURVE_FLOOR * UNITS_PER_SECOND


def test_a_work_limit_is_no_failed_tilt(monkeypatch):
    """``compose_copies`` halves a tilt whose transform fails, twice, then drops it; a work limit
    (the meter past its allowance: a curve's, the shuffle's lower bound's) went through the same
    retries, three times the transforms for nothing.  It now goes on at once, and so it does out
    of ``epoch_runs._lower`` (the level is abandoned, not finished without its lower end)."""
    from sgmfast._failures import WorkLimit
    from sgmfast.pld.grid import composition
    from sgmfast.pld.grid.onestep import one_step
    from sgmfast.pld.samplers import epoch_runs

    calls = []

    def over(*args, **kwargs):
        calls.append(1)
        raise WorkLimit("spent")

    monkeypatch.setattr(composition, "compose_steps", over)
    with pytest.raises(WorkLimit):
        composition.compose_copies([(one_step(1.0, 0.01, False, 0.01), 2)], 0.01, 1.0, 1e-12, True, theta=0.5)
    assert len(calls) == 1
    with pytest.raises(WorkLimit):
        epoch_runs._lower(lambda: over(), 0.0)
