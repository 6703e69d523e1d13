"""Sanity checks of the mpmath reference tests/reference/mp_exact.py itself.

Only the reference is tested here (it must stay independent of sgmfast, which
is not imported): against the older tables of make_one_step_delta.py, against
a direct quadrature of the hockey-stick integral, and against identities.
"""

import csv
import sys
from pathlib import Path

import pytest

mpmath = pytest.importorskip("mpmath")
from mpmath import mp, mpf  # noqa: E402

REF = Path(__file__).parent / "reference"
sys.path.insert(0, str(REF))
import mp_exact  # noqa: E402


def _rows(name):
    with (REF / name).open() as fh:
        return list(csv.DictReader(ln for ln in fh if not ln.startswith("#")))


def _rel(a, b):
    a, b = mpf(a), mpf(b)
    if a == b:
        return mpf(0)
    return abs(a - b) / max(abs(a), abs(b))


def test_importable_as_namespace_package():
    from reference import mp_exact as m2
    with mp.workdps(50):
        assert m2.gaussian_delta(1.0, 1.0) == mp_exact.gaussian_delta(1.0, 1.0)


def test_no_sgmfast_import():
    src = (REF / "mp_exact.py").read_text()
    assert "sgmfast" not in src.replace("never sgmfast", "")


def test_matches_one_step_delta_table():
    rows = _rows("one_step_delta.csv")
    for r in rows[::7]:
        q, s, e = float(r["q"]), float(r["sigma"]), float(r["epsilon"])
        for d in ("remove", "add"):
            ref = mpf(r["delta_" + d])
            got = mp_exact.one_step_delta(q, s, e, d)
            if ref == 0:
                assert got == 0, (r["row_id"], d)
            else:
                assert _rel(got, ref) < 1e-28, (r["row_id"], d)


def test_matches_gaussian_eps_table():
    for r in _rows("gaussian_eps.csv"):
        with mp.workdps(60):       # mu = 1/sigma must be exact to well beyond 30 digits
            mu = 1 / mpf(float(r["sigma"]))
        got = mp_exact.gaussian_epsilon(mu, float(r["delta"]))
        assert _rel(got, r["epsilon"]) < 1e-28, r["row_id"]


def _quad_delta(P, loss, side, zc, pts, eps):
    """int over {side*(z - zc) > 0} of P(z) (1 - e^(eps - L(z))) dz."""
    def f(z):
        return P(z) * -mpmath.expm1(eps - loss(z))
    pts = sorted(p for p in pts if side * (p - zc) > 0) + [zc]
    pts = sorted(set(pts))
    pts = pts + [mpmath.inf] if side > 0 else [mpmath.ninf] + pts
    return mpmath.quad(f, pts)


@pytest.mark.parametrize("q,s,eps,direction", [
    (0.3, 0.8, 0.5, "remove"),
    (0.3, 0.8, 0.1, "add"),
    (0.01, 2.0, 0.05, "replace"),
    (1e-8, 1e3, 1e-12, "remove"),     # the closed form cancels: terms 5e-9, delta 3.5e-12
])
def test_matches_direct_quadrature(q, s, eps, direction):
    with mp.workdps(40):
        qm, sm, em = mpf(q), mpf(s), mpf(eps)
        n = lambda z, c: mpmath.npdf(z, c, sm)  # noqa: E731
        up = lambda z: mpmath.log1p(qm * mpmath.expm1((2 * z - 1) / (2 * sm * sm)))  # noqa: E731
        if direction == "remove":
            P, loss, side = (lambda z: (1 - qm) * n(z, 0) + qm * n(z, 1)), up, 1
        elif direction == "add":
            P, loss, side = (lambda z: n(z, 0)), (lambda z: -up(z)), -1
        else:
            P = lambda z: (1 - qm) * n(z, 0) + qm * n(z, -1)  # noqa: E731
            loss = lambda z: (mpmath.log1p(qm * mpmath.expm1((-2 * z - 1) / (2 * sm * sm)))  # noqa: E731
                              - up(z))
            side = -1
        lo, hi = -10 * sm - 2, 10 * sm + 2      # bisection on the monotone loss
        for _ in range(140):
            mid = (lo + hi) / 2
            if side * (loss(mid) - em) > 0:
                hi = mid
            else:
                lo = mid
        zc = (lo + hi) / 2
        pts = [c + k * sm for c in (-1, 0, 1) for k in (-20, -8, -3, -1, 0, 1, 3, 8, 20)]
        quad = _quad_delta(P, loss, side, zc, pts, em)
        got = mp_exact.one_step_delta(q, s, eps, direction)
        assert _rel(got, quad) < 1e-20


def test_q1_is_the_gaussian_and_replace_is_sensitivity_two():
    for s in (1e-3, 0.3, 2.0, 1e6):
        for e in (0.0, 1e-3, 1.0):
            g1 = mp_exact.composed_gaussian_delta(s, 1, e, 1)
            g2 = mp_exact.composed_gaussian_delta(s, 1, e, 2)
            for d in ("remove", "add", "max"):
                assert _rel(mp_exact.one_step_delta(1.0, s, e, d), g1) < 1e-30
            assert _rel(mp_exact.one_step_delta(1.0, s, e, "replace"), g2) < 1e-30
            with mp.workdps(60):
                mu = 1 / mpf(s)
            assert _rel(g1, mp_exact.gaussian_delta(mu, e)) < 1e-30


def test_delta0_is_tv_and_epsilon_inverts_delta():
    for q, s in ((1e-12, 1e8), (0.3, 1e-3), (0.9, 0.05)):
        for d in ("remove", "add", "replace"):
            assert _rel(mp_exact.one_step_delta(q, s, 0.0, d), mp_exact.tv_distance(q, s, d)) < 1e-30
            target = float(mp_exact.tv_distance(q, s, d)) * 1e-20
            e = mp_exact.one_step_epsilon(q, s, target, d)
            with mp.workdps(60):
                assert mp_exact.one_step_delta(q, s, e * (1 - mpf("1e-33")), d) > target
                assert mp_exact.one_step_delta(q, s, e * (1 + mpf("1e-33")), d) <= target


def test_no_noise_and_edges():
    assert mp_exact.one_step_delta(0.3, 0.0, 5.0, "remove") == mpf(0.3)
    assert mp_exact.one_step_delta(0.3, 1.0, float("inf"), "max") == 0
    assert mp_exact.one_step_delta(0.0, 1.0, 0.0, "max") == 0
    with mp.workdps(50):
        # T-fold sigma = 0: max over directions is 1 - (1-q)^T; add never exceeds it
        assert _rel(mp_exact.sgm_delta_no_noise(0.1, 3, 0.0), 1 - (1 - mpf(0.1)) ** 3) < 1e-40
        assert mp_exact.sgm_delta_no_noise(0.1, 3, 0.0, "add") <= mp_exact.sgm_delta_no_noise(0.1, 3, 0.0)
    # tiny values survive (no underflow)
    v = mp_exact.one_step_delta(0.5, 1.0, 1e4, "remove")
    assert 0 < v < mpf("1e-1000000")
