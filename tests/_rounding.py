"""What the rounding-constant tests share: the unit round-off, the mpmath precision they measure
at (an autouse fixture each test module imports), and ``check``, which prints the measured worst
against the stated constant and asserts it is within it."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

U = 2.0 ** -53  # unit round-off (the kernels' EPS64 is 2 u)
DPS = 50


@pytest.fixture(autouse=True)
def _precision():
    with mpmath.workdps(DPS):
        yield


def check(name, worst, bound):
    """Print the measured worst / the stated constant (``pytest -s``) and assert it is <= 1."""
    worst, bound = float(worst), float(bound)
    ratio = worst / bound
    print(f"\n{name}: measured worst {worst:.3g}, stated {bound:.3g}, ratio {ratio:.3g}")
    assert worst <= bound, f"{name}: measured worst {worst!r} exceeds the stated {bound!r} (ratio {ratio:.3g})"


def checkpoints(spectra, rows, row_of, log_cut=math.log(1e-30), e2=None):
    """``fft_power.power_checkpoints`` on the spectra (rows: the distinct count vectors, row_of:
    each checkpoint's row, e2: each spectrum's error, zero by default): (out, err, wsum, ntot)."""
    from sgmfast._kernels.pld import fft_power as kf

    m, h = spectra.shape
    nk = row_of.size
    ntot = np.cumsum(rows[row_of].sum(axis=1)).astype(float)
    dec = np.ones(nk, dtype=np.int64)
    acc, lsum, labs = np.ones(h, dtype=np.complex128), np.zeros(h), np.zeros(h)
    out = np.zeros((nk, h), dtype=np.complex128)
    err, z2, wsum = np.zeros(nk), np.zeros(nk), np.zeros((nk, m))
    band = np.full(nk, -1, dtype=np.int64)
    kf.power_checkpoints(spectra, np.zeros(m) if e2 is None else e2, rows, row_of, ntot, dec, 2 * (h - 1) if h > 1 else 1, 0, 0, h,
                         acc, lsum, labs, out, err, z2, wsum, log_cut, nk, band)
    return out, err, wsum, ntot
