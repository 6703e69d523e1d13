"""The trade-off bounds of ``sgmfast.pld.tradeoff``: the lines 1 - δ(eps) - e^eps α of one
direction of a pair, maximised at every alpha without temporaries (n_alpha x n_eps work; a plain
run takes ``_beta_lines_arrays``, the same operations on blocks of alpha)."""

import math

import numpy as np

from .._jit import jit
from ..logmath import EPS64

__all__ = ["beta_lines"]


#: alpha values per block of ``_beta_lines_arrays`` (blocks of ~1e6 terms for 20001 eps)
BLOCK = 48


def _beta_lines_arrays(alpha, eps, d_lo, d_up, d_inf, lo, up):
    """``beta_lines`` for plain runs: each term is the kernel's, the same float64 operations in
    the same order (numpy's elementwise arithmetic rounds as the scalar one), the exponentials
    by ``math.exp`` as there, the maxima exact; comparisons keep the kernel's ``max``/``>`` (a
    NaN term is skipped, as there; with a NaN input the kernel's loops run instead)."""
    if np.isnan(d_lo).any() or np.isnan(d_up).any() or math.isnan(d_inf) or np.isnan(alpha).any():
        return beta_lines.py_func(alpha, eps, d_lo, d_up, d_inf, lo, up)
    pad = 8.0 * EPS64
    m = eps.shape[0]
    ex = np.array([math.exp(e) for e in eps.tolist()])
    slope_lo, slope_up = ex * (1.0 + pad), ex[:-1] * (1.0 - pad)
    c_lo = 1.0 - d_up
    nxt = 1.0 - ex[1:] * (1.0 + pad)
    c_up = 1.0 - np.where(nxt > d_lo[1:], nxt, d_lo[1:])  # (max(d_lo[i + 1], ...): the first unless the second is larger)
    for b in range(0, alpha.shape[0], BLOCK):
        a = alpha[b:b + BLOCK, None]
        v = np.max(c_lo[None, :] - slope_lo[None, :] * a, axis=1, initial=0.0)
        first = 1.0 - d_inf - ex[m - 1] * (1.0 - pad) * a[:, 0]
        second = ex[0] * (1.0 + pad) * (1.0 - a[:, 0])
        w = np.where(second > first, second, first)
        if m > 1:
            w = np.maximum(w, np.max(c_up[None, :] - slope_up[None, :] * a, axis=1))
        lo_b = v * (1.0 - pad) - pad
        lo[b:b + BLOCK] = np.where(0.0 > lo_b, 0.0, lo_b)
        w = np.where(0.0 > w, 0.0, w) * (1.0 + pad) + pad
        up[b:b + BLOCK] = np.where(1.0 < w, 1.0, w)


@jit(plain=_beta_lines_arrays)
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
