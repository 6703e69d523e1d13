"""Fine grid -> coarse grid (spacing m * step, m a power of two) for the two-stage
composition: pessimistically by connect-the-dots on atoms, optimistically by the convex-order
minorant of the collapsed cells.
"""

import math

import numpy as np

from .._jit import jit
from ..logmath import EPS64
from .discretise import optimistic_step

__all__ = ["coarsen_pess", "coarsen_opt"]


#: most theta times an optimistic window that ``coarsen_opt`` untilts (e^{-600} stays in range)
UNTILT_SPAN = 600.0

@jit
def _cell(j, m):
    """(coarse point J, fine offset r) with fine point j = J m + r, 0 <= r < m (floor division)."""
    big = j // m
    return big, j - big * m


@jit
def coarsen_pess(x, j0, m, step, theta, big_lo, out):
    """Pessimistic coarsening of tilted masses x_i at fine grid points j0 + i (spacing ``step``)
    onto the coarse grid of spacing H = m step (m a power of two): out[J - big_lo] for coarse
    point J (loss J H).

    An atom at loss ell = J H + r step (0 < r < m) is split between J H and (J + 1) H so that
    its untilted mass and its u-mass (u = e^{-ell}) are kept: the upper share is
    g_r = (1 - e^{-r step}) / (1 - e^{-H}) (connect-the-dots on atoms, a mean-preserving spread
    in u, so every δ(eps), also after composition, can only grow).  Tilted, the shares pick up
    e^{-theta r step} and e^{theta (H - r step)}.  Both shares are rounded up, and the sums by
    (m + 8) u, so the output bounds that exact split entry by entry.
    """
    big_h = m * step
    emh = -math.expm1(-big_h)
    lo_f = np.empty(m)
    hi_f = np.empty(m)
    up = 1.0 + 16.0 * EPS64 * (1.0 + theta * big_h)
    for r in range(m):
        if r == 0:
            lo_f[0] = 1.0
            hi_f[0] = 0.0
            continue
        g = -math.expm1(-r * step) / emh
        g1 = -math.exp(-r * step) * math.expm1(-(m - r) * step) / emh
        lo_f[r] = g1 * math.exp(-theta * r * step) * up
        hi_f[r] = g * math.exp(theta * (big_h - r * step)) * up
    for i in range(out.shape[0]):
        out[i] = 0.0
    for i in range(x.shape[0]):
        v = x[i]
        if v == 0.0:
            continue
        big, r = _cell(j0 + i, m)
        if r == 0:
            out[big - big_lo] += v
        else:
            out[big - big_lo] += v * lo_f[r]
            out[big + 1 - big_lo] += v * hi_f[r]
    fin = 1.0 + (m + 8.0) * EPS64
    for i in range(out.shape[0]):
        out[i] *= fin


@jit
def coarsen_opt(x, j0, m, step, theta, big_lo, out):
    """Optimistic coarsening (the converse of ``coarsen_pess``): tilted masses x_i at fine points
    j0 + i onto coarse points big_lo .. big_lo + len(out) - 1 (spacing H = m step), so that the
    result is dominated in convex order in u by the input (every δ(eps) can only shrink).

    The atoms of each coarse cell [J H, (J + 1) H) are collapsed to their u-mean (a contraction)
    and the cell atoms are put on the grid by ``optimistic_step`` (convex-order minorant, else
    merging by contractions).  That works on untilted masses: they are carried relative to
    the bottom point, e^{-theta (ell - big_lo H)} x, which the caller keeps in range
    (theta * window < 600), and retilted after.  Masses are deflated and atoms moved down by
    bounds on their rounding.  Returns False when the window is too long to untilt.
    """
    nc = out.shape[0]
    big_h = m * step
    if theta * nc * big_h > UNTILT_SPAN:
        return False
    frac = np.full(nc, -1.0)
    amass = np.zeros(nc)
    u_sum = np.zeros(nc)
    top = 0.0
    wt = np.empty(m)
    wu = np.empty(m)
    for r in range(m):
        wt[r] = math.exp(-theta * r * step)
        wu[r] = math.exp(-(theta + 1.0) * r * step)
    for i in range(x.shape[0]):
        v = x[i]
        if v == 0.0:
            continue
        big, r = _cell(j0 + i, m)
        b = big - big_lo
        if b == nc - 1:
            top += v  # r == 0: the top point itself
            continue
        amass[b] += v * wt[r]
        u_sum[b] += v * wu[r]
    # per-cell factor e^{-theta (J H - big_lo H)}; sums of <= m terms err by <= (m + 4) u relative
    defl = 1.0 - (m + 16.0 + 4.0 * theta * big_h) * EPS64
    for b in range(nc - 1):
        if amass[b] > 0.0:
            e = math.exp(-theta * b * big_h)
            pos = -math.log(u_sum[b] / amass[b]) - 4.0 * (m + 8.0) * EPS64 * (1.0 + big_h)
            frac[b] = min(max(pos, 0.0), big_h)
            amass[b] *= e * defl * (1.0 - 4.0 * EPS64 * (theta * b * big_h + 2.0))
    top *= math.exp(-theta * (nc - 1) * big_h) * defl
    # the grid from the first to one past the last occupied cell (the minorant pins its end knots)
    b0 = 0
    while b0 < nc - 1 and amass[b0] == 0.0:
        b0 += 1
    b1 = nc - 1
    if top == 0.0:
        while b1 > b0 + 1 and amass[b1 - 1] == 0.0:
            b1 -= 1
    for b in range(nc):
        out[b] = 0.0
    optimistic_step(big_h, frac[b0:b1 + 1], amass[b0:b1 + 1], top, out[b0:b1 + 1])
    for b in range(nc):
        if out[b] > 0.0:
            arg = theta * b * big_h
            out[b] *= math.exp(arg) * (1.0 - 4.0 * EPS64 * (arg + 2.0))
    return True
