"""An epoch's t-fold lattice power by one transform (``epoch_power._spectral_power``) against exact
rational arithmetic: the binomial law's powers are binomial, C(t m, k) p^k (1 - p)^(t m - k) with
p = 3/4 exactly (every mass of w = Bin(m, 3/4) is an integer over 4^m: exact in float64), so each
certified entry-wise bound is checked against the correctly rounded true value.  The upper path's
cyclic power wraps the mass above its length onto the entries (it only adds); the lower path's
covers S's support where that is at most twice the lattice, else it takes the wrapped mass off by
Chernoff (the binomials of p = 1/4 below: S's mean 320, its support to 1280, lattices of 500 and
400 entries)."""

from fractions import Fraction
from math import comb

import numpy as np
import pytest

from sgmfast.pld.samplers.epoch_power import _power, _spectral_power


def _binomial(m: int, p: Fraction):
    return [comb(m, k) * p ** k * (1 - p) ** (m - k) for k in range(m + 1)]


@pytest.mark.parametrize("m,t,C,p", [(20, 7, 200, Fraction(3, 4)), (20, 64, 1100, Fraction(3, 4)),
                                     (12, 64, 700, Fraction(3, 4)), (3, 400, 1300, Fraction(3, 4)),
                                     (20, 64, 500, Fraction(1, 4)), (20, 64, 400, Fraction(1, 4))])
def test_spectral_power_brackets_the_exact_binomial(m, t, C, p):
    w = np.array([float(x) for x in _binomial(m, p)])
    assert sum(Fraction(x) for x in w) == 1  # (exact in float64)
    exact = np.array([float(x) for x in _binomial(t * m, p)[:C]] + [0.0] * max(0, C - t * m - 1))
    _, up, e_up = _spectral_power(w, t, C, 1.0, True)
    _, lo, e_lo = _spectral_power(w, t, C, 1.0, False)
    assert up.size == lo.size == C
    assert np.all(up + e_up >= exact)
    assert np.all(np.maximum(lo - e_lo, 0.0) <= exact)
    # and no looser than the exponentiation by squaring it replaces (its bounds were 5-10x wider)
    assert max(e_up, e_lo) <= _power(w, t, C)[2]


def test_spectral_and_windowless_squarings_overlap_on_a_heavy_tail():
    """Two independent certified computations of one lognormal-like lattice power (one transform;
    exponentiation by squaring with a product bound each) must overlap entry by entry."""
    h, t, C = 0.02, 16, 12000
    x = np.arange(4000) * h
    with np.errstate(divide="ignore"):
        w = np.exp(-0.5 * np.log(np.maximum(x, h / 2)) ** 2 / 0.8) * h / np.maximum(x, h / 2)
    w /= w.sum() * (1 + 1e-9)
    _, a, ea = _spectral_power(w, t, C, h, True)
    _, b, eb = _spectral_power(w, t, C, h, False)
    o, y, e = _power(w, t, C)
    assert o == 0
    sq_up = np.zeros(C)
    sq_up[:y.size] = y + e
    sq_lo = np.zeros(C)
    sq_lo[:y.size] = np.maximum(y - e, 0.0)
    assert np.all(np.maximum(b - eb, 0.0) <= sq_up)
    assert np.all(sq_lo <= a + ea)
