"""``epoch_sums``: the others' sum R on the tail event, in increasing convex order against the
exact law of R (numpy convolutions of the coordinate's lattice law, independent of the epoch's
FFT powers), on random lattice laws: every stop-loss transform E[(X - k)_+] of the upper points is
at least R's, and of the lower points at most the reported sum's."""

from __future__ import annotations

import numpy as np
import pytest

from sgmfast.pld.samplers import epoch_sums


def _power(w: np.ndarray, n: int) -> np.ndarray:
    out = np.array([1.0])
    for _ in range(n):
        out = np.convolve(out, w)
    return out


def _stop_loss(x: np.ndarray, m: np.ndarray, ks: np.ndarray) -> np.ndarray:
    return np.array([float(np.sum(m * np.maximum(x - k, 0.0))) for k in ks])


def _law(rng, size: int, heavy: bool) -> np.ndarray:
    """A sub-probability law on 0 .. size-1 (mass 1 - 1e-3), lognormal-like or random."""
    k = np.arange(size, dtype=np.float64)
    if heavy:
        w = np.exp(-0.5 * ((np.log1p(k) - rng.uniform(0.5, 2.0)) / rng.uniform(0.4, 1.2)) ** 2) / (1.0 + k)
    else:
        w = rng.random(size) ** 3
    return w / w.sum() * (1.0 - 1e-3)


CASES = [(seed, t, heavy) for seed in range(6) for t in (2, 3, 5, 12) for heavy in (True, False)]


@pytest.mark.parametrize("seed,t,heavy", CASES)
def test_upper_points_are_above_the_sum_in_convex_order(seed, t, heavy):
    rng = np.random.default_rng(seed)
    h = float(rng.uniform(0.05, 0.5))
    wu = _law(rng, int(rng.integers(8, 60)), heavy)
    w_max = (wu.size - 1) * h
    exact = _power(wu, t - 1)  # R's sub-law on k h
    x_exact = np.arange(exact.size) * h
    r, m, scale = epoch_sums.upper_sums(_power(wu, t), 0, wu, h, t, w_max, float(rng.uniform(0.005, 0.2)))
    assert scale >= 1.0 / wu.sum()
    assert np.all(np.diff(r) > 0) and np.all(m > 0)
    assert r[-1] <= t * w_max * (1 + 1e-12)
    assert m.sum() >= exact.sum() * (1 - 1e-12)
    ks = np.linspace(-1.0, x_exact[-1] * 1.1, 400)
    ours, truth = _stop_loss(r, m, ks), _stop_loss(x_exact, exact, ks)
    assert np.all(ours >= truth * (1 - 1e-12) - 1e-300)
    # (no lattice mass is split with the top, t W_max, far above every sum: ``FAR_RATIO``'s points
    # reach the largest one)
    assert r[-1] <= 2.0 * (w_max + (_power(wu, t).size - 1) * h)


@pytest.mark.parametrize("seed,t,heavy", CASES)
def test_lower_points_are_below_the_reported_sum_in_convex_order(seed, t, heavy):
    rng = np.random.default_rng(100 + seed)
    h = float(rng.uniform(0.05, 0.5))
    wl = _law(rng, int(rng.integers(8, 60)), heavy)
    eta, rho = float(rng.choice([0.0, 1e-3 * h])), float(rng.choice([0.0, 1e-4]))
    w_max = (wl.size - 1) * h
    lat = _power(wl, t - 1)
    reported = np.arange(lat.size) * h * (1.0 - rho) - (t - 1) * eta  # (the least the reported sum can be)
    r, m = epoch_sums.lower_sums(_power(wl, t), 0, h, t, eta, rho, w_max, float(rng.uniform(0.005, 0.2)))
    assert np.all(r > 0) and np.all(m > 0)
    assert m.sum() <= lat.sum() * (1 + 1e-12)
    ks = np.linspace(-1.0, reported[-1] * 1.1, 400)
    ours, truth = _stop_loss(r, m, ks), _stop_loss(reported, lat, ks)
    assert np.all(ours <= truth * (1 + 1e-12) + 1e-300)


@pytest.mark.parametrize("seed", range(4))
def test_sums_of_the_kept_entries_are_the_whole_lattices(seed):
    """An epoch keeps its lattices as their non-zero entries from the first (``Epoch.up``,
    ``up_o``): the points and masses from those, with their first index, are the whole lattice's,
    bit for bit."""
    rng = np.random.default_rng(300 + seed)
    h, t = float(rng.uniform(0.05, 0.5)), int(rng.integers(2, 12))
    wu = _law(rng, int(rng.integers(8, 60)), bool(seed % 2))
    w_max, rel = (wu.size - 1) * h, float(rng.uniform(0.005, 0.2))
    whole = np.concatenate((np.zeros(int(rng.integers(1, 40))), _power(wu, t), np.zeros(5)))
    nz = np.flatnonzero(whole)
    kept, first = whole[nz[0]:nz[-1] + 1].copy(), int(nz[0])
    for a, b in zip(epoch_sums.upper_sums(whole, 0, wu, h, t, w_max, rel),
                    epoch_sums.upper_sums(kept, first, wu, h, t, w_max, rel)):
        assert np.array_equal(a, b)
    eta, rho = 1e-3 * h, 1e-4
    for a, b in zip(epoch_sums.lower_sums(whole, 0, h, t, eta, rho, w_max, rel),
                    epoch_sums.lower_sums(kept, first, h, t, eta, rho, w_max, rel)):
        assert np.array_equal(a, b)
