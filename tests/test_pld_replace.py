"""The replace-one relation of the PLD accountant.

Pair (one clipping norm per record, so a replacement moves the batch sum by up to 2):
P = (1-q) N(0, s^2) + q N(-1, s^2), Q = (1-q) N(0, s^2) + q N(1, s^2). References:
the exact one-step δ(ε) in mpmath (the loss is monotone, so δ = P(Z < z*) - e^ε Q(Z < z*)
at the root z* of loss(z*) = ε, found here independently by mpmath's root finder), the
Gaussian mechanism with sensitivity 2 at q = 1, and dp_accounting's REPLACE_ONE PLD
(``reference/make_dp_accounting_replace.py``).
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

import numpy as np

from sgmfast import pld
from sgmfast._kernels.pld import losses as K

mpmath = pytest.importorskip("mpmath")


def _exact_replace_delta(eps, q, s):
    mpmath.mp.dps = 50
    eps, q, s = mpmath.mpf(eps), mpmath.mpf(q), mpmath.mpf(s)

    def dens(z, m):
        return mpmath.npdf(z, m, s)

    def loss(z):
        return mpmath.log(((1 - q) * dens(z, 0) + q * dens(z, -1)) / ((1 - q) * dens(z, 0) + q * dens(z, 1)))

    # loss decreases from +inf to -inf: bracket the root, then solve
    lo, hi = mpmath.mpf(-1), mpmath.mpf(1)
    while loss(lo) < eps:
        lo *= 2
    while loss(hi) > eps:
        hi *= 2
    zs = mpmath.findroot(lambda z: loss(z) - eps, (lo, hi), solver="anderson")
    pm = (1 - q) * mpmath.ncdf(zs / s) + q * mpmath.ncdf((zs + 1) / s)
    qm = (1 - q) * mpmath.ncdf(zs / s) + q * mpmath.ncdf((zs - 1) / s)
    return float(pm - mpmath.exp(eps) * qm)


POINTS = [(0.01, 1.0, 0.05), (0.01, 1.0, 1.0), (0.3, 0.8, 0.5), (0.9, 2.0, 1.0), (1e-3, 0.5, 2.0), (0.5, 0.6, 3.0)]


@pytest.mark.parametrize("q,sigma,eps", POINTS)
def test_one_step_bounds_bracket_exact(q, sigma, eps):
    exact = _exact_replace_delta(eps, q, sigma)
    b = pld.delta(sigma, q, 1, eps, grid_step=1e-4, relation="replace_one")
    assert b.lower <= exact <= b.upper
    assert b.upper - b.lower <= 1e-5 * exact
    assert b.upper - exact <= 1e-8 * exact


@pytest.mark.parametrize("sigma,q", [(0.7, 0.01), (2.0, 0.5), (0.3, 1e-4)])
def test_replace_z_inverts_the_loss(sigma, q):
    for ell in (-30.0, -3.0, -1e-6, 0.0, 1e-6, 0.5, 4.0, 40.0):
        z = K.replace_z(ell, sigma, q)
        if math.isfinite(z):
            assert K.replace_loss(z, sigma, q) == pytest.approx(ell, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("sigma,steps,eps", [(1.0, 1, 1.0), (3.0, 100, 3.0), (10.0, 1000, 10.0)])
def test_q1_is_the_gaussian_with_sensitivity_2(sigma, steps, eps):
    mpmath.mp.dps = 40
    mu = mpmath.mpf(2) * mpmath.sqrt(steps) / sigma
    e = mpmath.mpf(eps)
    exact = float(mpmath.ncdf(-e / mu + mu / 2) - mpmath.exp(e) * mpmath.ncdf(-e / mu - mu / 2))
    b = pld.delta(sigma, 1.0, steps, eps, relation="replace_one")
    assert b.upper == pytest.approx(exact, rel=1e-9)
    # and q -> 1 through the PLD engine agrees
    near = pld.delta(sigma, 1 - 1e-9, steps, eps, relation="replace_one")
    assert near.lower <= exact * (1 + 1e-6) and near.upper >= exact * (1 - 1e-6)


def test_replace_is_at_least_add_remove():
    for s, q, t in [(1.0, 0.01, 1000), (0.8, 0.1, 100), (2.0, 0.5, 10)]:
        ar = pld.epsilon(s, q, t, 1e-5)
        rep = pld.epsilon(s, q, t, 1e-5, relation="replace_one")
        assert rep.lower >= ar.upper
        assert rep.upper - rep.lower <= 1e-3 * rep.upper


def _dp_accounting_rows():
    path = Path(__file__).parent / "reference" / "dp_accounting_replace.csv"
    with path.open() as f:
        return [r for r in csv.DictReader(line for line in f if not line.startswith("#"))]


@pytest.mark.parametrize("row", _dp_accounting_rows(), ids=lambda r: f"s={r['sigma']},q={r['q']},T={r['steps']}")
def test_agrees_with_dp_accounting_replace_one(row):
    s, q, t, d = float(row["sigma"]), float(row["q"]), int(row["steps"]), float(row["delta"])
    ref = float(row["epsilon"])
    b = pld.epsilon(s, q, t, d, relation="replace_one")
    # dp_accounting's pessimistic estimate at interval 1e-5 sits inside our certified interval
    # up to its own discretisation error
    assert b.lower <= ref * (1 + 1e-4)
    assert ref <= b.upper * (1 + 1e-4)


def test_accountant_and_relation_errors():
    acc = pld.PLDAccountant(relation="replace_one")
    acc.step(1.0, 0.01, steps=500)
    one = pld.epsilon(1.0, 0.01, 500, 1e-5, relation="replace_one")
    b = acc.epsilon(1e-5)
    assert b.lower == pytest.approx(one.lower, rel=1e-12) and b.upper == pytest.approx(one.upper, rel=1e-12)
    other = pld.PLDAccountant()
    other.step(1.0, 0.01)
    with pytest.raises(ValueError, match="relation"):
        acc.compose(other)
    with pytest.raises(ValueError, match="relation"):
        pld.epsilon(1.0, 0.01, 10, 1e-5, relation="replace")


def test_delta_over_an_array_is_monotone_and_finite_far_out():
    # one engine for the whole array (answers consistent with each other), and eps far beyond
    # the grids bounded by RDP through group privacy instead of the trivial 1
    eps = [1e-12, 4.518666229897042, 541.4800036511297]
    b = pld.delta(0.38619401637585216, 1.6406831885065087e-05, 3147, eps, relation="replace_one")
    assert np.all(np.diff(b.upper) <= 0) and np.all(np.diff(b.lower) <= 0)
    assert b.upper[2] < 1e-100
    single = pld.delta(0.38619401637585216, 1.6406831885065087e-05, 3147, eps[1], relation="replace_one")
    assert b.lower[1] <= single.upper and single.lower <= b.upper[1]


def test_replace_one_rdp_cap_is_group_privacy_of_add_remove():
    from sgmfast import rdp
    from sgmfast.pld.certifiers import RDPBound

    cap = RDPBound([(1.0, 0.01, 1000)], replace=True)
    e = cap.epsilon(1e-5)
    # (e/2, d') add/remove with (1 + e^{e/2}) d' <= 1e-5
    d_half = rdp.delta(1.0, 0.01, 1000, e / 2)
    assert (1 + math.exp(e / 2)) * d_half <= 1e-5 * (1 + 1e-9)
    assert cap.delta(np.array([e]))[0] <= 1e-5 * (1 + 1e-9)
    # and it is above the certified replace-one value
    assert e >= pld.epsilon(1.0, 0.01, 1000, 1e-5, relation="replace_one").lower


def test_delta_at_astronomical_eps_answers_at_once():
    """δ(1e30) of a replace-one run: eps / grid step passed the int64 range in the spectral reading
    (``spectral._first_above``: a loop that never ended), and at eps 1e4 RDP's replace-one
    conversion (1 + e^{eps/2}) δ_ar(eps/2) read δ_ar's underflow (1e-322) as its value and gave 1.0.
    Both now answer ~0 (the order table's log bound, ``RDPBound._log_delta_table``)."""
    from sgmfast.pld.certifiers import RDPBound

    assert pld.delta(5.0, 1e-5, 100, 1e30, relation="replace_one").upper <= 1e-300
    assert pld.delta(1.0, 0.01, 1000, 1e4, relation="replace_one").upper <= 1e-300
    rb = RDPBound([(1.0, 0.01, 1000)], True)
    d = rb.delta(np.array([1e4, 1e6, np.inf]))
    assert 0.0 < d[0] <= 1e-300 and 0.0 < d[1] <= 1e-300  # (an upper bound never underflows to 0)
    assert d[2] == 0.0  # (eps = +inf: no mass there)
    # the log bound itself: min over orders of (a - 1)(R(a) - eps), against the plain RDP curve
    assert rb._log_delta_table(5e3) <= -1e4
