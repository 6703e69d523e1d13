"""The spectral kernel's rounding constants (``sgmfast._kernels.pld.spectral``, issue #29 item 1).

``spectral_sums`` carries omega^(J f) by products with the computed omega^J, re-anchored from the
exact residue every ``ANCHOR`` frequencies.  The base's error is the same at every step, so it
compounds coherently over a run; ``U_RUN`` is the proved bound on that (the notes above the
constants).  These tests drive the recurrence to its worst case -- large n, the residues whose
base is worst (angles near pi, where the angle's relative rounding is largest in absolute
terms), full runs of ANCHOR - 1 products after each anchor -- and measure every phasor against
mpmath; then they align a spectrum with the phasors' errors so that they add up in the window
sums and check the sums against their exact values and the kernel's own charge.
"""

from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np
import pytest

from sgmfast._kernels.pld import spectral as ks

U = 2.0 ** -53  # the unit round-off, the constants' unit
RUN = 3 * ks.ANCHOR + 1  # three full runs after f = 0, ANCHOR, 2 ANCHOR and the next anchor
NS = [2**20 + 7, 1_000_003, 2**30 + 3, 40_000, 6144]
DPS = 30  # mpmath's working precision (set locally: ``mpmath.workdps``)
with mpmath.workdps(DPS):
    TWO_PI_TAIL = float((mpmath.mpf(ks.TWO_PI) - 2 * mpmath.pi) * 2**53)  # TWO_PI - 2 pi, in u


def _exact(x, f, n):
    """omega^(x f) in mpmath (from the exact residue)."""
    return mpmath.expjpi(mpmath.mpf(2 * ((x * f) % n)) / n)


def _err_u(ph, x, f, n):
    return float(abs(mpmath.mpc(ph.real, ph.imag) - _exact(x, f, n))) / U


def _angle_err_u(x, n):
    """|computed angle of ``_phasor(x, 1, n)`` - 2 pi r / n| in u, exactly in rationals but for
    2 pi's tail beyond TWO_PI (the kernel's operations in Python floats: the same IEEE ones)."""
    r = x % n
    if 2 * r > n:
        r -= n
    a_hat = ks.TWO_PI * (r / n)
    return abs(float((Fraction(a_hat) - Fraction(ks.TWO_PI) * Fraction(r, n)) * 2**53) + TWO_PI_TAIL * r / n)


def _worst_residues(n, rng, count=8000, keep=8):
    """x whose base omega^x (as ``_phasor`` computes it) is furthest from the exact one: among
    random residues, many near +-n/2 (angles near pi) and large or negative x (the residue is
    reduced first), the 64 with the largest angle error, ranked by their base's whole error."""
    near = np.concatenate([rng.integers(int(0.4 * n), n // 2 + 1, 3 * count // 8),
                           rng.integers(n // 2 + 1, int(0.6 * n), 3 * count // 8)])
    far = rng.integers(-(2**20), 2**20, count // 8) * n + rng.integers(0, n, count // 8)  # (|x| < 2^51)
    cand = np.unique(np.concatenate([rng.integers(0, n, count // 8), near, far]))
    by_angle = sorted(cand.tolist(), key=lambda x: -_angle_err_u(x, n))[:64]
    errs = sorted(((_err_u(ks._phasor(x, 1, n), x, 1, n), x) for x in by_angle), reverse=True)
    return [x for _, x in errs[:keep]], errs[0][0]


@pytest.fixture(autouse=True)
def _precision():
    with mpmath.workdps(DPS):
        yield


@pytest.fixture(scope="module")
def worst():
    """{n: (the worst residues, their base's error in u)}."""
    rng = np.random.default_rng(20290001)
    with mpmath.workdps(DPS):
        return {n: _worst_residues(n, rng) for n in NS}


def test_single_phasors_within_u_phasor(worst):
    """Every phasor from the exact residue, the worst bases among them, is within U_PHASOR u."""
    rng = np.random.default_rng(7)
    top = max(e for _, e in worst.values())
    assert top <= ks.U_PHASOR, top
    for n in NS:
        for x, f in zip(rng.integers(-(2**45), 2**45, 200), rng.integers(1, n, 200)):
            assert _err_u(ks._phasor(int(x), int(f), n), int(x), int(f), n) <= ks.U_PHASOR


def test_phasor_runs_within_u_run(worst):
    """Every phasor of ``spectral_sums``' recurrence (``phasor_run``: the same step), over three
    full runs between anchors at the worst residues and at random ones, is within U_RUN u; the
    drive reaches the compounding regime (the worst is far beyond a single phasor's error: ~300u
    on x86-64 glibc, above the 16u + 3u ANCHOR = 208u the module once claimed)."""
    rng = np.random.default_rng(11)
    out = np.empty(RUN, dtype=np.complex128)
    worst_err = 0.0
    for n, (xs, _) in worst.items():
        for x in xs + [int(v) for v in rng.integers(-(2**40), 2**40, 4)]:
            ks.phasor_run(x, n, out)
            assert out[0] == 1.0
            errs = [_err_u(out[f], x, f, n) for f in range(1, RUN)]
            # at the anchors: one phasor
            assert max(errs[f - 1] for f in range(ks.ANCHOR, RUN, ks.ANCHOR)) <= ks.U_PHASOR
            worst_err = max(worst_err, max(errs))
    print(f"worst phasor of the recurrence: {worst_err:.1f}u (bound U_RUN = {ks.U_RUN:.1f}u)")
    assert worst_err <= ks.U_RUN
    assert worst_err > 0.25 * ks.U_RUN


def _h_exact(n, j0, big_j, top, ts, f):
    """H_f = (omega^(J f) - alpha^M omega^(j0 f)) / (1 - alpha omega^f), alpha = e^-ts, in mpmath."""
    a = mpmath.exp(-mpmath.mpf(ts))
    m = top - big_j + 1
    return (_exact(big_j, f, n) - a ** m * _exact(j0, f, n)) / (1 - a * _exact(1, f, n))


@pytest.mark.parametrize("theta_step,step", [(0.0, 2.0 ** -10), (3 * 2.0 ** -12, 2.0 ** -12), (0.5, 0.25)])
def test_window_sums_with_aligned_errors_within_charge(worst, theta_step, step):
    """A spectrum aligned with the recurrence's errors (z_f = conj(phasor error x D_f), scaled to
    equal |z_f D_f|), so that every term's phasor error adds to A_J with the same sign: the
    sums lie within the kernel's charge of their exact values, and the error per unit of
    sum_f w_f |z_f| |D_f| / n is below U_TERM plus the summation's share.  (theta_step + step is
    exact, so the kernel's two decay rates are the exact ones.)"""
    nf = RUN
    for n in (2**20 + 7, 2**30 + 3):
        big_j = worst[n][0][0]
        j0 = big_j - n // 3
        top = j0 + n - 1
        out = np.empty(nf, dtype=np.complex128)
        ks.phasor_run(big_j, n, out)
        z = np.zeros(nf, dtype=np.complex128)
        h_a, h_b = [None] * nf, [None] * nf
        for f in range(1, nf):
            d = 1 / (1 - mpmath.exp(-mpmath.mpf(theta_step)) * _exact(1, f, n))
            e = (mpmath.mpc(out[f].real, out[f].imag) - _exact(big_j, f, n)) * d
            z[f] = complex(mpmath.conj(e) / abs(e) / abs(d))
            h_a[f] = _h_exact(n, j0, big_j, top, theta_step, f)
            h_b[f] = _h_exact(n, j0, big_j, top, theta_step + step, f)
        qf, da, db = (np.zeros(nf, dtype=np.complex128) for _ in range(3))
        ra, rb = ks.spectral_prep(z, n, j0, theta_step, step, qf, da, db)
        sa, sb, ra_j, rb_j, _, _, _ = ks._sums_at(z, n, j0, big_j, top, theta_step, step, qf, da, db, ra, rb, 0.0)
        for s, h, r, d_arr, aligned in ((sa, h_a, ra_j, da, True), (sb, h_b, rb_j, db, False)):
            exact = sum(2 * (mpmath.mpc(z[f].real, z[f].imag) * h[f]).real for f in range(1, nf)) / n
            err = abs(mpmath.mpf(s) - exact)
            assert err <= r, (n, float(err), r)
            scale = float(sum(2 * abs(z[f]) * abs(d_arr[f]) for f in range(1, nf))) / n
            per_term = float(err) / (U * scale)
            print(f"n={n} ts={theta_step}: error {per_term:.1f}u of sum w|z||D|/n "
                  f"(charge {r / (U * scale):.0f}u, U_TERM {ks.U_TERM:.0f}u)")
            assert per_term <= ks.U_TERM + 2 * (nf + 4)
            if aligned:  # (z is aligned with alpha's D_f; beta's differ in phase)
                assert per_term > 0.05 * ks.U_RUN  # the phasor errors did add up
