"""The trade-off bounds of ``sgmfast.pld.tradeoff``: the lines 1 - δ(eps) - e^eps α of one
direction of a pair, maximised at every alpha without temporaries (n_alpha x n_eps work)."""

import math

import numpy as np

from .._jit import jit
from ..logmath import EPS64

__all__ = ["beta_lines"]


@jit
def beta_lines(alpha, eps, d_lo, d_up, d_inf, lo, up):
    """On the increasing grid eps (its ends -E and E):

    lo[j] = max(0, max_i 1 - d_up[i] - e^eps_i alpha_j);
    up[j] = the max over the cells [eps_i, eps_{i+1}] of 1 - max(d_lo[i + 1], 1 - e^eps_{i+1}) -
    e^eps_i alpha_j, of 1 - d_inf - e^E alpha_j (above the grid, δ >= d_inf, a lower bound on
    the mass at +inf) and of e^-E (1 - alpha_j)
    (below it, δ >= 1 - e^eps).  Each rounded out by 8 u of the terms (a few operations on numbers
    at most ~1; exp within a few u)."""
    pad = 8.0 * EPS64
    m = eps.shape[0]
    ex = np.empty(m)
    for i in range(m):
        ex[i] = math.exp(eps[i])
    for j in range(alpha.shape[0]):
        a = alpha[j]
        best_lo = 0.0
        best_up = max(1.0 - d_inf - ex[m - 1] * (1.0 - pad) * a, ex[0] * (1.0 + pad) * (1.0 - a))
        for i in range(m):
            v = 1.0 - d_up[i] - ex[i] * (1.0 + pad) * a
            if v > best_lo:
                best_lo = v
            if i + 1 < m:
                dn = max(d_lo[i + 1], 1.0 - ex[i + 1] * (1.0 + pad))
                w = 1.0 - dn - ex[i] * (1.0 - pad) * a
                if w > best_up:
                    best_up = w
        lo[j] = max(best_lo * (1.0 - pad) - pad, 0.0)
        up[j] = min(max(best_up, 0.0) * (1.0 + pad) + pad, 1.0)
