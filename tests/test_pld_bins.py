"""The shared one-step bin masses (``step_bins``) against mpmath on the same floating-point edges.

The kernel's bins are the z-intervals between consecutive floating-point edges
``_z_of_loss(k * step)``; the exact N(0, s^2) and mixture masses of those intervals are
computed here with mpmath at 60 digits (upper tails where that avoids cancellation). The
bound checked is the kernel's own per-bin error bound ``le``, which the discretisation turns
into each bin's mass slack (and which must itself be small).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from sgmfast._kernels.pld import bins as K
from sgmfast._kernels.pld import losses

U = np.finfo(float).eps
CASES = [(0.75, 1e-3, 7.6e-5), (0.75, 1e-3, 3e-4), (0.4, 0.5, 0.01), (2.0, 0.01, 1e-4), (0.1, 1e-5, 1e-3),
         (5.0, 0.3, 1e-5), (1.0, 1.0, 1e-3)]
# bins around the bottom of the support, in the bulk, and far out in the tail
OFFSETS = [-1, 0, 1, 2, 5, 30, 1000, 20_000, 200_000, 2_000_000]


def _upper(x):
    return mpmath.erfc(x / mpmath.sqrt(2)) / 2


def _mass(a, b, sigma, shift):
    """N(shift, sigma^2)-mass of [a, b] (a may be -inf)."""
    s = mpmath.mpf(sigma)
    a = mpmath.mpf(a) - shift
    b = mpmath.mpf(b) - shift
    if a == -mpmath.inf:
        return 1 - _upper(b / s) if b > 0 else _upper(-b / s)
    if b <= 0:
        return _upper(-b / s) - _upper(-a / s)
    return _upper(a / s) - _upper(b / s)


@pytest.mark.parametrize("sigma,q,step", CASES)
def test_step_bins_match_mpmath(sigma, q, step):
    mpmath.mp.dps = 60
    k0 = math.floor(math.log1p(-q) / step) if q < 1 else -3000
    for off in OFFSETS:
        k = k0 + off
        lm0, ls, le = np.empty(1), np.empty(1), np.empty(1)
        K.step_bins(sigma, q, step, k, 1, lm0, ls, le)
        a, b = losses._z_of_loss(k * step, sigma, q), losses._z_of_loss((k + 1) * step, sigma, q)
        if not a < b:
            assert lm0[0] == -math.inf
            continue
        m0, m1 = _mass(a, b, sigma, 0), _mass(a, b, sigma, 1)
        e0 = float(mpmath.log(m0))
        ep = float(mpmath.log((1 - mpmath.mpf(q)) * m0 + q * m1))
        # the kernel's own error bound le covers the error of lm0 and of ls together
        assert abs(lm0[0] - e0) <= le[0], (k, lm0[0], e0, le[0])
        assert abs(lm0[0] + ls[0] - ep) <= le[0], (k, lm0[0] + ls[0], ep, le[0])
        assert le[0] <= 2e-12 + 1e3 * U * (abs(e0) + abs(ep)), le[0]  # and the bound is small


def test_step_bins_range_is_consistent():
    """Computing a range in two pieces gives the same arrays as in one (shared edges)."""
    sigma, q, step = 0.9, 0.01, 1e-3
    lm0, ls, le = np.empty(300), np.empty(300), np.empty(300)
    K.step_bins(sigma, q, step, -20, 300, lm0, ls, le)
    a0, as_, ae = np.empty(300), np.empty(300), np.empty(300)
    K.step_bins(sigma, q, step, -20, 120, a0, as_, ae)
    K.step_bins(sigma, q, step, 100, 180, a0[120:], as_[120:], ae[120:])
    np.testing.assert_array_equal(lm0, a0)
    np.testing.assert_array_equal(ls, as_)
    np.testing.assert_array_equal(le, ae)


def test_tilt_max_is_the_full_scan():
    # ``tilt._tilt_max`` stops at the first or last occupied bin where theta ell is monotone in
    # the index: the same max as scanning every bin (NaN products skipped, as the scan does)
    from sgmfast._kernels.pld import tilt

    def scan(p, j_lo, step, theta):
        mx = -math.inf
        for i in range(p.size):
            if p[i] > 0.0:
                v = theta * float(j_lo + i) * step
                if v > mx:
                    mx = v
        return mx

    rng = np.random.default_rng(5)
    for t in range(3000):
        m = int(rng.integers(1, 60))
        p = rng.random(m) * (rng.random(m) < rng.uniform(0.0, 1.0))
        j_lo = int(rng.integers(-10**6, 10**6)) if t % 3 else int(rng.integers(-30, 30))
        step = float(10.0 ** rng.uniform(-8, 0)) * (1.0 if t % 13 else -1.0)
        theta = [0.0, float(rng.uniform(-1e4, 1e4)), float(10.0 ** rng.uniform(-5, 5)), math.inf, -math.inf][t % 5]
        got, want = tilt._tilt_max(p, j_lo, step, theta), scan(p, j_lo, step, theta)
        assert got == want or (got != got and want != want)
