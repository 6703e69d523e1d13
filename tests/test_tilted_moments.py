"""Tilted moments under strong tilts (the saddle-point searches of the far-tail events and of
the compositions): against a high-precision sum over the whole array, and charged as work.

At q 1e-4, T 14 the far-tail events' saddle search reads a 408,336-entry core at tilts of
85-280, where almost every factor e^{theta ell - max} is below e^{-640}; those entries took an exp
each (0.1 us) and went uncharged, so a query's work under-stated its time by half.  They are now
left out (``tilt.FACTOR_FLOOR``: they weigh nothing beside the top entry), and every pass is
charged ``PER_BIN_MOMENTS`` units an entry (``grid.estimates.tilted_moments``/``tilted_stats``,
which every heuristic reads them through).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from sgmfast._kernels.pld import tilt as kt
from sgmfast._work import PER_BIN_MOMENTS, metered
from sgmfast.pld.grid import composition, estimates, tail_events, tilting, two_stage


def _reference(p, j_lo, step, theta):
    """(log sum p_i e^{theta ell_i}, mean, variance) at 50 digits over every entry."""
    with mpmath.workdps(50):
        w = [mpmath.mpf(float(x)) * mpmath.exp(mpmath.mpf(theta) * (j_lo + i) * mpmath.mpf(step))
             for i, x in enumerate(p) if x > 0]
        ell = [(j_lo + i) * mpmath.mpf(step) for i, x in enumerate(p) if x > 0]
        s0 = mpmath.fsum(w)
        m = mpmath.fsum(a * b for a, b in zip(w, ell)) / s0
        v = mpmath.fsum(a * (b - m) ** 2 for a, b in zip(w, ell)) / s0
        return float(mpmath.log(s0)), float(m), float(v)


def _core(n, seed):
    """A one-step-like array: a Gaussian bulk and a light upper tail, with a few zeros."""
    rng = np.random.default_rng(seed)
    x = np.linspace(-6, 12, n)
    p = np.exp(-0.5 * x * x) * (1 + 0.1 * rng.random(n)) + 1e-30 * np.exp(-x)
    p[rng.integers(0, n, n // 50)] = 0.0
    return p / p.sum()


@pytest.mark.parametrize("theta", [-300.0, -40.0, -1.0, 0.0, 1.0, 40.0, 113.3, 300.0])
@pytest.mark.parametrize("seed", [1, 2])
def test_tilted_stats_against_a_high_precision_sum(theta, seed):
    n, step = 3001, 2e-3
    j_lo = -1500
    p = _core(n, seed)
    k, m, v = kt.tilted_stats(p, j_lo, step, theta)
    k_ref, m_ref, v_ref = _reference(p, j_lo, step, theta)
    assert k == pytest.approx(k_ref, rel=1e-12, abs=1e-9)
    assert m == pytest.approx(m_ref, rel=1e-9, abs=1e-12)
    assert v == pytest.approx(v_ref, rel=1e-7, abs=1e-15)
    assert kt.tilted_moments(p, j_lo, step, theta) == pytest.approx((m, v), rel=1e-15)


def test_the_far_tail_saddle_passes_are_charged():
    """Each tilted-moment pass costs ``PER_BIN_MOMENTS`` units an entry (uncharged before: 8.2
    million entries of a fixed-size query at q 1.07e-4, T 14), and the heuristics read them
    through the charged functions."""
    p = _core(100_000, 3)
    for theta in (0.0, 1.0, 250.0):
        for fn, kernel in ((estimates.tilted_moments, kt.tilted_moments), (estimates.tilted_stats, kt.tilted_stats)):
            with metered() as meter:
                got = fn(p, -50_000, 1e-3, theta)
            assert meter.units == math.ceil(PER_BIN_MOMENTS * p.size)
            assert got == kernel(p, -50_000, 1e-3, theta)
    for module in (tail_events, composition, two_stage, tilting):
        assert module.tilted_moments is estimates.tilted_moments
