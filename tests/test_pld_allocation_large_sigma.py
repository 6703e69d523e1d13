"""Balls-in-bins far above its accuracy range (sigma 10^3 - 10^9): W's light tail sits within
1e-2 of 1, and the pieces sized for sigma <= 10 -- the Chernoff tables' truncation points, W's
lattice law, the windows' MGFs -- must stay sound and total there.  References: the Gaussian
mechanism's closed form (each epoch lies between the epoch sum's and sigma's Gaussian mechanism)."""

import math

import numpy as np
import pytest
from scipy.special import ndtr

from sgmfast.pld import allocation


def _gauss_eps(mu: float, delta: float) -> float:
    """ε(δ) of the Gaussian mechanism of sensitivity mu (noise 1), by bisection of its closed form."""
    def d(e):
        return float(ndtr(-e / mu + mu / 2) - math.exp(e) * ndtr(-e / mu - mu / 2))
    if d(0.0) <= delta:
        return 0.0
    lo, hi = 0.0, 1.0
    while d(hi) > delta:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if d(mid) > delta else (lo, mid)
    return hi


@pytest.mark.parametrize("sigma", [1e3, 1e5, 1e6])
def test_large_sigma_light_tail_stays_on_its_lattice(sigma):
    """A light tail (sigma 10^3-10^6: W_max within 1e-2 of 1) put the Chernoff tables' truncation
    points, geometric from 8 E[W], past the lattice's top, and the kernel read past its end (a
    segmentation fault at sigma 10^5, t 6).  The points stay on the lattice, and the interval lies
    between the closed forms: each epoch is dominated by the Gaussian mechanism at sigma and
    dominates the epoch sum's, N(1, t sigma^2) against N(0, t sigma^2)."""
    from sgmfast.pld.samplers.epoch_chernoff import GIVEN_TRUNCATIONS, _truncation_points

    wc = np.full(2051, 1.0 / 2051)
    ks = _truncation_points(wc, 4.88e-4, 1.0, GIVEN_TRUNCATIONS)
    assert ks.min() >= 0 and ks.max() <= wc.size - 1
    t, epochs, delta = 6, 2, 3.67e-6
    b = allocation.epsilon(sigma, t, t * epochs, delta)
    assert b.lower <= _gauss_eps(math.sqrt(epochs) / sigma, delta) * (1 + 1e-9)
    assert b.upper >= _gauss_eps(math.sqrt(epochs / t) / sigma, delta) * (1 - 1e-9)


@pytest.mark.parametrize("sigma", [1e3, 3e4, 1e5, 1e9])
def test_upper_law_is_a_sub_probability_at_large_sigma(sigma):
    """W's upper lattice law (``epoch_tail.upper_law``) where the cells' CDF differences are not
    resolved (far below the bulk at large sigma) puts on a cell at most the smaller of W's tails
    beyond it: with the tail above alone every such cell took ~1, and the law summed to 2e5 at
    sigma 10^5.  Its mass is then 1 up to its rounding, and its mean E[W] = 1 likewise."""
    from sgmfast.pld.samplers import epoch_tail
    from sgmfast.pld.samplers.epoch_grid import _lattice

    h, w_max, cap = _lattice(sigma, 100, 1e-3, 1e-12, 0)
    K = max(2, int(math.ceil(w_max / h)))
    w = epoch_tail.upper_law(1.0 / sigma, h, K)
    assert abs(w.sum() - 1.0) <= 1e-7 and abs(np.dot(w, np.arange(w.size) * h) - 1.0) <= 1e-7


def test_delta_far_beyond_the_bulk_with_a_lower_law_of_zeros():
    """sigma 0.5, t 347, eps 288 (a domain sweep, seed 41): the epoch's lower law was all zeros
    there and ``_tilted_power`` took the max of an empty array (ValueError).  δ is then tiny."""
    b = allocation.delta(0.50215053369378, 347, 2429, 288.31576378539967)
    assert 0.0 <= b.lower <= b.upper <= 1e-300

@pytest.mark.parametrize("s, shift, t, r, step", [(0.001, 1.0, 6.0, 5.0, 1.45e-5), (0.001, 0.0, 6.0, 5.0, 1.45e-5),
                                                   (0.1, 1.0, 24.0, 23.0, 1e-4), (2.5, 1.0, 1e4, 1.2e4, 0.01),
                                                   (2.5, 0.0, 3.0, 2.0, 0.01)])
def test_lower_sweeps_stopped_at_z_zero_change_no_bit(s, shift, t, r, step):
    """``epoch_tail.Z_ZERO``: every lower bin past a boundary z >= Z_ZERO holds exactly 0 (its mass
    is the exp of a log normal difference below -745.2), so a lower sweep stopped there writes the
    same bits as one run to the grid's top -- at sigma 1000 (s = 0.001) as at sigma 0.4."""
    from sgmfast._kernels.pld import allocation_tail as kt
    from sgmfast.pld.samplers.epoch_tail import Z_ZERO

    w_max = math.exp(-0.5 * s * s + 3.0 * s)
    j_lo = math.floor(math.log((w_max + r) / t) / step) - 3
    n = int(min(max(60.0 * s, 0.05), 8.0) / step)
    lo0, lu0, lo1, lu1 = (np.zeros(n) for _ in range(4))
    kt.tail_bins(s, shift, w_max, t, r, 1.0, step, j_lo, n, False, lo0, lu0, math.inf)
    kt.tail_bins(s, shift, w_max, t, r, 1.0, step, j_lo, n, False, lo1, lu1, Z_ZERO)
    assert np.array_equal(lo0, lo1) and np.array_equal(lu0, lu1)
    assert lo0.sum() > 0.0

_ZERO_STOP = r"""
import math, numpy as np
from sgmfast._kernels.pld import allocation_tail as kt
for s, shift, t, r, step, f in ((0.1, 1.0, 24.0, 22.0, 1e-3, kt.two_tail_bins),
                                (0.1, 0.0, 24.0, 22.0, 1e-3, kt.three_tail_bins),
                                (0.001, 1.0, 6.0, 4.0, 1e-5, kt.two_tail_bins)):
    w_max = math.exp(-0.5 * s * s + 3.0 * s)
    j_lo = math.floor(math.log((2 * w_max + r) / t) / step) - 3
    got = []
    for z in (kt.Z_ZERO, math.inf):
        kt.Z_ZERO = z  # (a module global the plain-Python kernels read at each call)
        out = np.zeros(3000)
        got.append((out, f(s, shift, w_max, t, r, 1.0, step, j_lo, 3000, out)))
    assert np.array_equal(got[0][0], got[1][0]) and got[0][1] == got[1][1] and got[0][0].sum() > 0.0
print("same")
"""


def test_two_and_three_tail_sweeps_stopped_at_z_zero_change_no_bit():
    """``_many_tail_bins`` returns once both boundaries pass ``Z_ZERO`` (every mass on is exactly
    0): the same bits as a sweep to the grid's top, checked on the plain-Python kernels (the
    stop is a module global there; compiled, numba freezes it)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = dict(os.environ, SGMFAST_PURE_PYTHON="1", SGMFAST_PREWARM="0", PYTHONPATH=str(Path(__file__).parents[1]))
    out = subprocess.run([sys.executable, "-c", _ZERO_STOP], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "same", out.stderr[-2000:]
