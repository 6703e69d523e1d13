"""A step's remove loss at a reference rate, as a statistic: its law under N(0, s^2) and N(1, s^2).

For ``sgmfast.pld.schedule_rates``: the statistic f(z) = the grid point nearest the remove loss
ell(z) of (sigma, q_ref), clamped to the grid points j_lo..j_hi (nearest, not below: a sum of
many steps would carry their rounding's mean, up to half a grid step each, and its best
threshold would move by that much).  Its values partition the line into z-intervals between
floating-point edges e_i = z((j_lo + i - 1/2) step) (i = 1 .. n - 1; e_0 = -inf, e_n = +inf),
so whatever the edges' rounding, f is a fixed function of z and the masses
below are the exact probabilities of those intervals, within their error bounds.  A step of any
rate q with the same sigma gives f the law (1 - q) N0-law + q N1-law under P, the N0-law under
Q -- linear in q, which is what lets many rates share two arrays.

Masses from ``bins._normal_logmass`` (midpoint expansion for narrow intervals, log-CDF
differences otherwise), each within ``bins.mass_slack`` of its log-mass relative.
"""

import math

from .._jit import jit
from ..logmath import NEG_INF
from .bins import _normal_logmass, mass_slack
from .losses import z_of_loss_with

__all__ = ["statistic_masses"]


@jit
def statistic_masses(sigma, q, step, j_lo, n, up, lo0, lo1, hi0):
    """Fills the n masses of f on grid points j_lo .. j_lo + n - 1: ``lo0``/``lo1`` the N0- and
    N1-masses rounded down by their error bounds, ``hi0``/``up`` the same rounded up (the lower
    bound's P-chain reads the first two, its Q-chain the others)."""
    s2 = sigma * sigma
    log_q = math.log(q)
    l1q = math.log1p(-q) if q < 1.0 else NEG_INF
    b = NEG_INF
    for i in range(n):
        a = b
        b = z_of_loss_with((j_lo + i + 0.5) * step, s2, q, l1q, log_q) if i < n - 1 else math.inf
        if b < a:  # (edges are non-decreasing in exact arithmetic; a float inversion is an empty bin)
            b = a
        w = b - a if (a > NEG_INF and b < math.inf) else math.inf
        l0 = _normal_logmass(a, b, w, sigma)
        l1 = _normal_logmass(a - 1.0, b - 1.0, w, sigma)
        m0 = math.exp(l0) if l0 > NEG_INF else 0.0
        m1 = math.exp(l1) if l1 > NEG_INF else 0.0
        r0 = mass_slack(l0) + 4e-16
        r1 = mass_slack(l1) + 4e-16
        # (below 1e-290 the exp is near or in the subnormals: a lower bound of 0, an upper of 1e-300)
        lo0[i] = m0 * (1.0 - r0) if m0 > 1e-290 else 0.0
        hi0[i] = m0 * (1.0 + r0) + 1e-300
        lo1[i] = m1 * (1.0 - r1) if m1 > 1e-290 else 0.0
        up[i] = m1 * (1.0 + r1) + 1e-300

