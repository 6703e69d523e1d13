"""Stage 4 for curves: the queries of a composed grid read off its spectrum (kernels:
``sgmfast._kernels.pld.spectral``).

A curve composes every checkpoint on the window of ``windows.choose_window`` -- tens of thousands
of grid points, because the loss grid is fine and the tails must fit -- but the composed tilted
loss is smooth, so its spectrum has only a narrow band of frequencies above the cut-off of
``fft_power.power_checkpoints`` (tens at late checkpoints).  ``SpectralGrid`` answers δ(eps) and
eps(δ) from that band: each δ needs the window's exponentially weighted sums above one grid
index, O(band) by geometric series, so a checkpoint costs a few of those instead of an inverse
transform of the whole window and sums over it.

Soundness.  The bounds are those of the ``Grid`` that ``composition.grid_of`` would build from
the same spectrum (the same charges, ``composition.charges``): the sums are those of the exact
inverse transform of the computed spectrum, within the kernel's rounding bound, and every entry
of that inverse lies within err_sum / n of the composed PLD (the spectrum's l1 error through the
1/n-normalised transform).  Every eps returned is checked at its value.  Where the band is wide,
the search does not settle, or that per-entry error -- charged to every atom above eps, where
the grid clips it at each atom -- is not negligible (far-tail answers), the grid itself is built
(``materialise``) and queried as usual.
"""

from __future__ import annotations

import math

import numpy as np

from ..._kernels.pld import spectral as ks
from ..common import Grid, charge_fft, irfft
from .composition import Composite, charges, grid_of
from .queries import delta_bound, eps_bound

#: a spectral grid is used where its band is at most this fraction of the half spectrum
BAND_FRACTION = 1 / 16
#: evaluations of the window sums one eps search may take before the grid is built instead
MAX_EVALS = 40


class SpectralGrid:
    """A composed grid kept as the band of its spectrum ``z`` (window ``win``, length n)."""

    __slots__ = ("c", "win", "theta", "pess", "eps_lo", "z", "err_sum", "z2", "ls", "err", "p_inf", "inf_err",
                 "floor", "qf", "da", "db", "ra", "rb")

    def __init__(self, c: Composite, win, theta, pess, eps_lo, z, err_sum, z2):
        self.c, self.win, self.theta, self.pess, self.eps_lo = c, win, theta, pess, eps_lo
        self.z, self.err_sum, self.z2 = z, err_sum, z2
        self.ls, self.err, self.p_inf, self.inf_err, self.floor = charges(c, win, theta, pess, eps_lo)
        nf = z.size
        self.qf, self.da, self.db = np.empty((3, nf), dtype=np.complex128)  # (entry 0 unused)
        self.ra, self.rb = ks.spectral_prep(z, win.n, win.j0, theta * c.step, c.step, self.qf, self.da, self.db)
        if not (np.isfinite(z).all() and math.isfinite(self.ra) and math.isfinite(self.rb) and math.isfinite(err_sum)):
            raise FloatingPointError("non-finite values in the spectral composition of the PLD")

    @staticmethod
    def usable(band: int, n: int, theta: float) -> bool:
        return theta >= 0.0 and 0 <= band and (band + 1) <= BAND_FRACTION * (n // 2 + 1)

    def _args(self):
        w, c = self.win, self.c
        return (self.z, w.n, w.j0, self.theta, c.step, self.ls, self.qf, self.da, self.db, self.ra, self.rb,
                self.err_sum / w.n * (1 + 1e-12), self.p_inf, self.inf_err, self.err, self.pess, self.floor)

    def materialise(self) -> Grid:
        """The ``Grid`` itself (``unrolled``)."""
        return unrolled(self.c, self.win, self.theta, self.pess, self.eps_lo, self.z, self.err_sum, self.z2)

    def eps_bound(self, target: float, guess: float) -> float:
        """``queries.eps_bound`` of this grid, searched from ``guess``."""
        if target > 0.0 and math.isfinite(guess):
            j = int(min(max(guess / self.c.step, -2.0 ** 60), 2.0 ** 60)) + 1
            z, n, j0, theta, step, ls, qf, da, db, ra, rb, e_entry, p_inf, inf_err, err, pess, floor = self._args()
            eps, ok = ks.spectral_eps(target, j, z, n, j0, theta, step, ls, qf, da, db, ra, rb, e_entry, p_inf,
                                      inf_err, err, pess, floor, MAX_EVALS)
            if ok:
                return eps
        return eps_bound(self.materialise(), target)

    def delta_bound(self, eps: np.ndarray) -> np.ndarray:
        """``queries.delta_bound`` of this grid (where the spectral bound may be loose, the
        grid's own is taken too and the tighter kept: both hold)."""
        eps = np.ascontiguousarray(eps, dtype=np.float64)
        out = np.empty(eps.size)
        flag = np.empty(eps.size, dtype=np.bool_)
        ks.spectral_delta(eps, *self._args(), out, flag)
        if flag.any():
            grid = delta_bound(self.materialise(), eps[flag])
            out[flag] = np.minimum(out[flag], grid) if self.pess else np.maximum(out[flag], grid)
        return out


def unrolled(c: Composite, win, theta, pess, eps_lo, z, err_sum, z2) -> Grid:
    """The ``Grid`` of window ``win`` from the first frequencies ``z`` of its half spectrum (the
    others 0: cut, their error in ``err_sum``), by one inverse transform (``composition.grid_of``)."""
    n = win.n
    full = np.zeros(n // 2 + 1, dtype=np.complex128)
    full[: z.size] = z
    charge_fft(n)
    return grid_of(c, win, theta, pess, eps_lo, irfft(full, n), err_sum, z2)


def read_eps(grid, target: float, guess: float) -> float:
    """eps bound of a ``Grid`` or ``SpectralGrid`` at δ = target."""
    return grid.eps_bound(target, guess) if isinstance(grid, SpectralGrid) else eps_bound(grid, target)


def read_delta(grid, eps: np.ndarray) -> np.ndarray:
    """δ bound of a ``Grid`` or ``SpectralGrid`` at each eps."""
    return grid.delta_bound(eps) if isinstance(grid, SpectralGrid) else delta_bound(grid, eps)
