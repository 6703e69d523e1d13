"""Kernels of ``pld.samplers.selected_lower``: the cell masses of one coordinate and direct
convolutions of non-negative arrays, both with relative error bounds (no additive floor)."""

import math

from .._jit import jit
from ..logmath import EPS64, log_ndtr

__all__ = ["cell_masses", "conv_direct"]


@jit
def _edge(j, s, h, shift):
    """(P(W <= j h), its error, P(W > j h), its error): Phi(z) and Phi(-z), z = (log(j h) + s^2 / 2
    - shift s^2) / s, each within 1e-12 + 256 u (|log| + 1) relative (the package's premise for its
    log-CDFs, ``bins.mass_slack``, exp's rounding included) plus 8 u (z^2 + 1) for z's own
    rounding (a few u |z| moves Phi by at most that, relatively)."""
    z = (math.log(j * h) + 0.5 * s * s - shift * s * s) / s
    zr = 8.0 * EPS64 * (z * z + 1.0)
    lc = log_ndtr(z)
    ls = log_ndtr(-z)
    c = math.exp(lc)
    u = math.exp(ls)
    return c, c * (1e-12 + 256.0 * EPS64 * (abs(lc) + 1.0) + zr), u, u * (1e-12 + 256.0 * EPS64 * (abs(ls) + 1.0) + zr)


@jit
def cell_masses(s, h, K, shift, out):
    """out[j] = P(min(floor(W / h), K) = j), j = 0 .. K, for log W ~ N(shift s^2 - s^2 / 2, s^2),
    each cell from the side of the median where it is accurate: a difference of CDFs below it, of
    survival functions above it, 1 minus one of each across it (``_edge``'s errors).  Returns a
    bound on every entry's relative error (inf where a cell is lost to cancellation)."""
    c0, ec0, s0, es0 = 0.0, 0.0, 1.0, 0.0  # (the edge at 0: exact)
    worst = 0.0
    for j in range(K + 1):
        if j < K:
            c1, ec1, s1, es1 = _edge(j + 1, s, h, shift)
        else:
            c1, ec1, s1, es1 = 1.0, 0.0, 0.0, 0.0  # (the top cell: everything above K h)
        if j < K and c1 <= 0.5:
            v, e = c1 - c0, ec1 + ec0
        elif s0 <= 0.5:
            v, e = s0 - s1, es0 + es1
        else:
            v, e = 1.0 - c0 - s1, ec0 + es1
        out[j] = max(v, 0.0)
        if v > 0.0:
            # |computed - exact| <= e + 2u v; exact >= v - e - 2u v
            low = v * (1.0 - 2.0 * EPS64) - e
            r = (e + 2.0 * EPS64 * v) / low if low > 0.0 else math.inf
            if r > worst:
                worst = r
        elif e > 0.0:
            worst = math.inf
        c0, ec0, s0, es0 = c1, ec1, s1, es1
    return worst


@jit
def conv_direct(a, b, cap, out):
    """out[j] = sum_i a[i] b[j - i] for j < min(cap, len a + len b - 1), a, b >= 0, summed in
    order: each entry within (min(len a, len b) + 1) u of its exact value, relatively (products
    and sums of non-negative floats).  Returns the number of entries written."""
    na, nb = a.shape[0], b.shape[0]
    n = min(cap, na + nb - 1)
    for j in range(n):
        i0 = max(0, j - nb + 1)
        i1 = min(j, na - 1)
        acc = 0.0
        for i in range(i0, i1 + 1):
            acc += a[i] * b[j - i]
        out[j] = acc
    return n
