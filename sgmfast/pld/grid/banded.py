"""Stage 3 for single queries: one composition kept as the band of its spectrum.

``composition.compose_parts`` raises every frequency of the window's half spectrum to the
power T and inverts the whole window.  A composed tilted loss is smooth, so most of those
frequencies fall below any useful level after the power (W1, q 0.01, sigma 1, T 1000: ~40 of
~9,000 survive a cut at 1e-30).  ``compose_banded`` forms the power with the curve's kernel
(``fft_power.power_checkpoints``, one checkpoint) -- a frequency whose modulus bound R has
R^T <= e^LOG_CUT costs one comparison, is left at 0 and charged -- and returns a
``spectral.SpectralGrid`` where the surviving band is narrow (the queries read off the band,
no inverse transform), else the ``Grid`` unrolled from the same spectrum.

Soundness.  This is the curve's path (``curve_grids``) at one checkpoint, on the window and
charges ``compose_parts`` uses for the same ``Composite``:

* ``power_checkpoints`` bounds the l1 error of the computed spectrum over the full spectrum --
  the products' rounding, (1 + 3u)^N - 1 relative, and every cut frequency's modulus bound
  e^LOG_CUT, charged up front for all of them, with the frequencies past ``live_extent``
  charged by ``charge_cut`` -- and returns the Cauchy-Schwarz weight sums W^2 for the input
  spectra's l2 errors, which are added here as in ``power_weight_err``;
* ``SpectralGrid`` and ``spectral.unrolled`` then charge exactly what ``composition.grid_of``
  charges (per-entry error err_sum / n plus the inverse's round-off; the window's mass outside,
  ``composition.charges``), and every eps a ``SpectralGrid`` returns is checked at its value;
  where its search does not settle it builds the grid.

A cut of 1e-30 per frequency adds at most ~1e-30 to each tilted entry: far below the FFT's own
round-off bound (~1e-16 relative), so the bounds move only in their last digits.
"""

from __future__ import annotations

import math

import numpy as np

from ..._kernels.pld import fft_power as kf
from ..._work import charge
from ..common import SPLIT_MIN, scratch, split_pool, two_cores
from .composition import Composite, part_spectra
from .spectral import SpectralGrid, unrolled
from .windows import choose_window

#: spectra below this are cut (``kf.power_checkpoints``): an error of at most this per
#: frequency, charged; what is left is the composed loss's band
LOG_CUT = math.log(1e-30)
#: work units of the power kernel per live frequency (and per increment row), and of reading an
#: eps or δ off a band (fixed, per frequency of the band); see ``curve_grids``
POWER_PER_FREQ = 20.0
POWER_PER_ROW = 8.0
SPECTRAL_PER_FREQ = 100.0
SPECTRAL_FIXED = 1e4


def power_band(spectra, e2, rows, row_of, ntot, dec, n, k0, state, k_all):
    """``kf.power_checkpoints`` over all frequencies, the upper half on a second thread:
    (spectra, err, z2, wsum, band) of the checkpoints.  The spectra are stored up to the last
    frequency that can survive the cut (``kf.live_extent``: columns beyond are 0, charged).

    With one part the kernel is given only this batch's increment rows: it forms each row's
    power at every live frequency, and a run of log-spaced checkpoints has as many distinct rows
    as checkpoints (all of them at every batch made the kernel's work quadratic in the
    checkpoints).  Its early exit -- a frequency cut for good when no row can raise its bound --
    is the same for any set of rows then: with one part every row is a positive multiple of the
    same log modulus."""
    nk = row_of.size
    if spectra.shape[0] == 1 and nk == 1:  # (np.unique's answer for one checkpoint)
        rows, row_of = np.ascontiguousarray(rows[row_of]), np.zeros(1, dtype=np.int64)
    elif spectra.shape[0] == 1:
        used, row_of = np.unique(row_of, return_inverse=True)
        rows, row_of = np.ascontiguousarray(rows[used]), row_of.reshape(-1).astype(np.int64)
    h = kf.live_extent(spectra, e2, ntot, LOG_CUT)
    charge(h * (POWER_PER_FREQ + POWER_PER_ROW * (nk + rows.shape[0])))
    z = np.zeros((nk, h), dtype=np.complex128)
    parts = [(np.zeros(nk), np.zeros(nk), np.zeros((nk, spectra.shape[0])), np.full(nk, -1, dtype=np.int64))]
    # (state None: a first batch, every live frequency's power from 1; the kernel reads f < h only)
    acc, lsum, labs = state if state is not None else (np.ones(h, dtype=np.complex128), np.zeros(h), np.zeros(h))
    args = (spectra, e2, rows, row_of, ntot, dec, n, k0)
    if h < SPLIT_MIN:
        kf.power_checkpoints(*args, 0, h, acc, lsum, labs, z, *parts[0][:3], LOG_CUT, k_all, parts[0][3])
    else:  # (two halves, the upper on the helper thread where there are two cores: the same sums on one core)
        parts.append((np.zeros(nk), np.zeros(nk), np.zeros((nk, spectra.shape[0])), np.full(nk, -1, dtype=np.int64)))
        m = h // 2
        upper = (*args, m, h, acc, lsum, labs, z, *parts[1][:3], LOG_CUT, k_all, parts[1][3])
        fut = split_pool().submit(kf.power_checkpoints, *upper) if two_cores() else None
        kf.power_checkpoints(*args, 0, m, acc, lsum, labs, z, *parts[0][:3], LOG_CUT, k_all, parts[0][3])
        fut.result() if fut is not None else kf.power_checkpoints(*upper)
    if len(parts) == 1:  # (one call: its sums as they are)
        err, z2, wsum, band = parts[0]
    else:
        err = parts[0][0] + parts[1][0]
        z2 = parts[0][1] + parts[1][1]
        wsum = parts[0][2] + parts[1][2]
        band = np.maximum(parts[0][3], parts[1][3])
    kf.charge_cut(dec, h, spectra.shape[1], LOG_CUT, err)  # (the frequencies not stored)
    return z, err, z2, wsum, band


def compose_banded(c: Composite, theta: float, pess: bool, eps_lo: float, tau: float):
    """``composition.compose_parts`` of ``c``, kept as its spectrum's band where that is narrow
    (a ``SpectralGrid``), else the ``Grid`` (module notes); bounds valid for every eps >= eps_lo."""
    eps_lo = min(eps_lo, c.sup_hi * c.step)
    win = choose_window(c, theta, pess, eps_lo, tau)
    n = win.n
    h = n // 2 + 1
    # (the spectra die with this call: a scratch array, ``common.scratch``)
    spectra, e2 = part_spectra(c.parts, n, scratch("spectra", len(c.parts) * h, np.complex128).reshape(-1, h))
    counts = np.array([p.count for p in c.parts], dtype=np.int64)
    one = np.zeros(1, dtype=np.int64)
    z, err, z2, wsum, band = power_band(spectra, e2, counts.reshape(1, -1), one, np.array([float(counts.sum())]),
                                        np.ones(1, dtype=np.int64), n, 0, None, 1)
    werr = float(np.where(counts > 0, counts * e2 * np.sqrt(wsum[0]), 0.0).sum()) * (1 + 1e-12)
    err_sum = float(err[0]) + werr
    b = int(band[0])
    if SpectralGrid.usable(b, n, theta):
        charge(SPECTRAL_FIXED + SPECTRAL_PER_FREQ * b)
        return SpectralGrid(c, win, theta, pess, eps_lo, np.ascontiguousarray(z[0, : b + 1]), err_sum, float(z2[0]))
    return unrolled(c, win, theta, pess, eps_lo, z[0], err_sum, float(z2[0]))
