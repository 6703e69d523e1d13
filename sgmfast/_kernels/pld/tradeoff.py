"""The trade-off bounds of ``sgmfast.pld.tradeoff``: maxima of the lines a privacy profile
gives, at every alpha, without temporaries (n_alpha x n_eps work)."""

import math

import numpy as np

from .._jit import jit
from ..logmath import EPS64

__all__ = ["beta_lines"]


@jit
def beta_lines(alpha, eps, d_lo, d_up, lo, up):
    """lo[j] = max_i max(0, 1 - d_up[i] - e^eps_i alpha_j, e^-eps_i (1 - d_up[i] - alpha_j)) and
    up[j] = max over the cells [eps_i, eps_{i+1}] (the last one unbounded) of the same lines with
    δ >= d_lo[i + 1] (0 past the end) and the exponentials at the cell's corners; each rounded
    out by 8 u of the terms (a few operations on numbers at most ~1, exp within a few u)."""
    pad = 8.0 * EPS64
    m = eps.shape[0]
    eps_up = np.empty(m)
    eps_dn = np.empty(m)
    for i in range(m):
        eps_up[i] = math.exp(eps[i])
        eps_dn[i] = math.exp(-eps[i])
    for j in range(alpha.shape[0]):
        a = alpha[j]
        best_lo = 0.0
        best_up = 0.0
        for i in range(m):
            ee = eps_up[i]
            em = eps_dn[i]
            d = d_up[i]
            v = max(1.0 - d - ee * (1.0 + pad) * a, em * (1.0 - pad) * (1.0 - d - a))
            if v > best_lo:
                best_lo = v
            dn = d_lo[i + 1] if i + 1 < m else 0.0
            w = max(1.0 - dn - ee * (1.0 - pad) * a, em * (1.0 + pad) * max(1.0 - dn - a, 0.0))
            if w > best_up:
                best_up = w
        lo[j] = max(best_lo * (1.0 - pad) - pad, 0.0)
        up[j] = min(best_up * (1.0 + pad) + pad, 1.0)
