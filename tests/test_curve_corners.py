"""Privacy curves in hard corners (issue #31 item 3): tiny sigma or q, tiny δ, hundreds of
log-spaced checkpoints.  Each curve used to cost 24-100 s of CPU and up to 1.6 GB (the power
kernel formed every checkpoint's increment power at every batch, RDP was optimised at every
checkpoint, the first grid of every tilt group was built past the budget, and the shared grids
had no size cap); now a curve costs a few single queries and stays certified.

The full three corners (and MNIST), with CPU time and peak memory, are in bench/curve_corners.py
(its output bench/curve_corners.out); here: corner c whole, a and b on fewer and smaller
checkpoints, each against single queries where those are cheap (both certified: their
intervals must meet) and against RDP's bound, plus the budget's invariants.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sgmfast import pld, rdp
from sgmfast._kernels.pld import fft_power as kf
from sgmfast._kernels.rdp import orders as rdp_orders
from sgmfast._work import UNITS_PER_SECOND, metered
from sgmfast.pld.grid import composition
from sgmfast.pld import curve as pld_curve
from sgmfast.pld import curve_grids
from sgmfast.pld.engine import BUDGET, HARD_LIMIT

CORNERS = {
    # sigma, q, checkpoints, delta: the three; a and b thinned (their single queries alone
    # take seconds at any number of steps), c whole
    "a": (0.015395817801565431, 2.6299085047269766e-07, np.unique(np.geomspace(1, 500, 40).astype(int)),
          1.4768483261678107e-27),
    "b": (0.198, 4e-7, np.unique(np.geomspace(1, 2e4, 60).astype(int)), 3e-17),
    "c": (0.0173, 0.409, np.unique(np.geomspace(1, 5e4, 225).astype(int)), 1.9e-19),
}
#: checkpoints (indices) checked against single queries (those cheap enough here), and against
#: RDP's bound (an independent certified upper bound: no curve's lower bound may pass it)
SINGLE = {"a": [0, 16], "b": [0], "c": [0, 60, -1]}
RDP = {"a": [5, -1], "b": [10, 30, -1], "c": [100, -1]}


def _shape(curve):
    lo, up = np.asarray(curve.lower), np.asarray(curve.upper)
    assert (lo <= up).all(), (lo, up)
    assert (np.diff(lo) >= 0).all() and (np.diff(up) >= 0).all()  # grows with the steps
    assert (lo >= 0).all()
    return lo, up


def _meets(lo, up, point):
    assert lo <= point.upper * (1 + 1e-12) and point.lower <= up * (1 + 1e-12), (lo, up, point)


@pytest.fixture
def watched(monkeypatch):
    """Every shared transform length, and the increment rows the power kernel is given."""
    seen = {"n": [], "rows": []}
    part_spectra, power = curve_grids.part_spectra, kf.power_checkpoints

    def spectra(parts, n):
        seen["n"].append(n)
        return part_spectra(parts, n)

    def kernel(spectra_, e2, rows, row_of, *args):
        if spectra_.shape[0] == 1:
            seen["rows"].append((rows.shape[0], row_of.shape[0]))
        return power(spectra_, e2, rows, row_of, *args)

    monkeypatch.setattr(curve_grids, "part_spectra", spectra)  # (the shared spectra are built there)
    monkeypatch.setattr(kf, "power_checkpoints", kernel)
    return seen


@pytest.mark.parametrize("name", ["a", "b", "c"])
def test_corner_curve_is_total_and_certified(name, watched):
    sigma, q, steps, delta = CORNERS[name]
    with metered() as meter:
        curve = pld.epsilon_curve(sigma, q, steps, delta)
    lo, up = _shape(curve)
    assert np.isfinite(up).all()
    # the final engine's work (at most HARD_LIMIT x BUDGET) and the curve's own, within its budgets
    k = len(steps) - 1
    own = pld_curve.FAST_BUDGET + pld_curve.FAST_PER_POINT * k + pld_curve.REST_BUDGET
    assert meter.units <= (HARD_LIMIT * BUDGET + own) * UNITS_PER_SECOND * 1.25, meter.units / UNITS_PER_SECOND
    # no shared grid beyond the memory cap; the power kernel never carries rows it does not use
    assert watched["n"] and all(n <= pld_curve.SHARED_BINS for n in watched["n"])
    assert all(rows <= used for rows, used in watched["rows"])
    for i in SINGLE[name]:
        _meets(lo[i], up[i], pld.epsilon(sigma, q, int(steps[i]), delta))
    for i in RDP[name]:
        assert lo[i] <= rdp.epsilon(sigma, q, int(steps[i]), delta) * (1 + 1e-12)


def test_delta_curve_in_a_corner():
    sigma, q, steps, eps = 0.03, 0.2, np.unique(np.geomspace(1, 300, 60).astype(int)), 5e4
    curve = pld.delta_curve(sigma, q, steps, eps)
    lo, up = _shape(curve)
    assert (up <= 1.0).all()
    for i in (0, 22, -1):
        _meets(lo[i], up[i], pld.delta(sigma, q, int(steps[i]), eps))
        assert lo[i] <= rdp.delta(sigma, q, int(steps[i]), eps) * (1 + 1e-12)


def test_budget_cut_curves_are_sound_and_deterministic(monkeypatch):
    """A shared-spectra budget too small for every checkpoint: the grids that fit are composed
    in spread order (the last, the first, the middles), the rest keep monotone bounds -- certified,
    and the same on every run (each direction plans against its own share, not the other
    thread's progress)."""
    steps = np.unique(np.geomspace(1, 1e5, 100).astype(int))
    full = pld.epsilon_curve(0.7, 0.001, steps, 1e-6)
    monkeypatch.setattr(pld_curve, "FAST_BUDGET", 0.02)
    monkeypatch.setattr(pld_curve, "FAST_PER_POINT", 0.0)
    monkeypatch.setattr(pld_curve, "REST_BUDGET", 0.0)
    first = pld.epsilon_curve(0.7, 0.001, steps, 1e-6)
    again = pld.epsilon_curve(0.7, 0.001, steps, 1e-6)
    assert np.array_equal(first.lower, again.lower) and np.array_equal(first.upper, again.upper)
    lo, up = _shape(first)
    assert (lo <= full.upper * (1 + 1e-12)).all() and (full.lower <= up * (1 + 1e-12)).all()
    assert up[-1] == pytest.approx(full.upper[-1], rel=1e-12)  # the last point is its own query
    assert np.isfinite(up).all()  # (RDP's caps where no grid was read)


def test_plan_brackets_the_checkpoints():
    assert pld_curve._plan([1.0] * 10, 0.0, 100.0) == list(range(10))
    got = pld_curve._plan([1.0] * 10, 0.5, 3.6)
    assert got == sorted(pld_curve._spread(10)[:3]) == [0, 4, 9]
    assert pld_curve._plan([5.0, 1.0, 1.0], 0.0, 2.5) == [1, 2]  # the last, then what still fits
    assert pld_curve._plan([1.0, 1.0], 0.0, 0.5) == []


def test_water_fill():
    assert pld_curve._water_fill([1.0, 2.0, 3.0], 12.0) == [3.0, 4.0, 5.0]  # all fit: the slack shared
    got = pld_curve._water_fill([1.0, 10.0, 10.0], 9.0)
    assert got == [1.0, 4.0, 4.0] and sum(got) == pytest.approx(9.0)
    assert pld_curve._water_fill([0.0, 0.0], 1.0) == [0.5, 0.5]


@pytest.mark.parametrize("sigma, q, delta", [(0.0154, 2.63e-7, 1e-27), (0.198, 4e-7, 3e-17), (1.1, 0.01, 1e-5),
                                             (0.005, 0.3, 1e-10)])
def test_rdp_caps_are_rdp_at_their_orders(sigma, q, delta):
    """The curves' RDP caps: RDP at fixed orders (one-step values scaled by the counts), the
    same bound as ``rdp.epsilon`` over those orders, rounded up."""
    steps = np.array([1, 100, 78070])
    run = pld_curve.Run([(sigma, q)], steps.reshape(-1, 1))
    memo = {}
    caps = pld_curve._rdp_caps(run, math.log(delta), 0, memo)
    orders = next(v[0] for k, v in memo.items() if k[0] == "per-step")
    if sigma > 0.01:
        assert orders.size > rdp_orders.DEFAULT_GRID.size  # fractional orders where their quadrature is cheap
    ref = rdp.epsilon(sigma, q, steps, delta, orders=orders)
    assert (caps >= ref).all() and np.allclose(caps, ref, rtol=1e-9)
    d = pld_curve._rdp_caps(run, 3.0, 1, memo)
    ref_d = rdp.delta(sigma, q, steps, 3.0, orders=orders)
    assert (d >= ref_d).all() and np.allclose(d, ref_d, rtol=1e-9)


def test_power_rows_per_batch_change_nothing(monkeypatch):
    """With one part the power kernel gets only its batch's increment rows: the same spectra,
    errors and bands as with all of them (every row is a positive multiple of one log modulus, so
    the kernel's early exits agree)."""
    part = composition.ArrayPart(-3, np.array([0.2, 0.5, 0.25, 0.05]), 1)
    n = 64
    spectra, e2 = composition.part_spectra([part], n)
    counts = np.array([1, 2, 5, 9, 20, 33, 80, 200])
    rows, row_of = np.unique(np.diff(counts, prepend=0).reshape(-1, 1), axis=0, return_inverse=True)
    row_of = row_of.reshape(-1).astype(np.int64)
    ntot = counts.astype(np.float64)
    dec = np.ones(counts.size, dtype=np.int64)
    h = n // 2 + 1

    def batches(restrict):
        monkeypatch.setattr(pld_curve, "two_cores", lambda: False)
        state = (np.ones(h, dtype=np.complex128), np.zeros(h), np.zeros(h))
        out = []
        for k0 in range(0, counts.size, 3):
            sl = slice(k0, k0 + 3)
            if restrict:
                res = pld_curve._power(spectra, e2, rows.astype(np.int64), row_of[sl], ntot[sl], dec[sl], n, k0, state,
                                       counts.size)
            else:  # (the kernel itself, with every row)
                nk = row_of[sl].size
                hh = kf.live_extent(spectra, e2, ntot[sl], pld_curve.LOG_CUT)
                z = np.zeros((nk, hh), dtype=np.complex128)
                err, z2, wsum, band = np.zeros(nk), np.zeros(nk), np.zeros((nk, 1)), np.full(nk, -1, dtype=np.int64)
                kf.power_checkpoints(spectra, e2, rows.astype(np.int64), row_of[sl], ntot[sl], dec[sl], n, k0, 0, hh,
                                     *state, z, err, z2, wsum, pld_curve.LOG_CUT, counts.size, band)
                kf.charge_cut(dec[sl], hh, spectra.shape[1], pld_curve.LOG_CUT, err)
                res = (z, err, z2, wsum, band)
            out.append(res)
        return out

    for a, b in zip(batches(True), batches(False)):
        for x, y in zip(a, b):
            assert np.array_equal(x, y)
