"""Kernels of ``pld.samplers.selected_lower``: the cell masses of one coordinate and direct
convolutions of non-negative arrays, both with relative error bounds (no additive floor)."""

import math

from .._jit import jit
from ..logmath import EPS64, log_ndtr

__all__ = ["cell_masses", "conv_direct", "max_cells"]


@jit
def _tail_rel(l, z, s):
    """Relative error bound of exp(l), l = log_ndtr(+-z) for z computed from a log-W edge: the
    package's premise for its log-CDFs (1e-12 + 256 u (|l| + 1), ``bins.mass_slack``, exp's
    rounding included), and z's own rounding -- a few u (|log edge| + 2) / s + u |z| from the
    edge's product and log, the sums and the division, where |log edge| <= s |z| + s^2, so a few
    u (|z| + s + 2 / s) -- which moves the tail mass by |z| + 1 times that, relatively."""
    return 1e-12 + 256.0 * EPS64 * (abs(l) + 1.0) + 8.0 * EPS64 * (abs(z) + 1.0) * (abs(z) + s + 2.0 / s + 2.0)


@jit
def _edge(j, s, h, shift):
    """(P(W <= j h), its error, P(W > j h), its error): Phi(z) and Phi(-z), z = (log(j h) + s^2 / 2
    - shift s^2) / s, each within ``_tail_rel``.  (The statistic's edges are the exact j h, the
    same under both measures: the rounding of z is charged, not taken as the edge.)"""
    z = (math.log(j * h) + 0.5 * s * s - shift * s * s) / s
    lc = log_ndtr(z)
    ls = log_ndtr(-z)
    c = math.exp(lc)
    u = math.exp(ls)
    return c, c * _tail_rel(lc, z, s), u, u * _tail_rel(ls, z, s)


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


@jit
def _log_cdf(z, s):
    """(log Phi(z), a bound on its absolute error): from the lower tail's log-CDF where z <= 0,
    else as log1p(-Phi(-z)) from the upper tail's (accurate where Phi(z) is near 1); the tails'
    masses within ``_tail_rel``, log1p's 8 ulps."""
    if z <= 0.0:
        lc = log_ndtr(z)
        return lc, _tail_rel(lc, z, s)
    ls = log_ndtr(-z)
    x = math.exp(ls)  # (<= 1/2)
    lc = math.log1p(-x)
    return lc, 2.0 * x * _tail_rel(ls, z, s) + 16.0 * EPS64 * (abs(lc) + 1e-300)


@jit
def max_cells(s, t, k, lo, hi, n, p, ep, q, eq):
    """The laws of M = max_i log W_i on the cells (-inf, e_0], (e_j, e_j+1], (e_n, inf) of
    e_j = lo + j (hi - lo) / n (n + 2 cells): P(M <= e) = F(e)^(t - k) G(e)^k with the example
    (k coordinates shifted), F(e)^t without, F and G the CDFs of log W ~ N(-+s^2 / 2, s^2).  Each
    cell is a difference of two values of the CDF of M, taken as exp(L) below 1/2 and as
    -expm1(L) above (L its log), and ep, eq bound every cell's absolute error (with 1e-300 for
    values below the normal range)."""
    for side in range(2):
        out, err = (p, ep) if side == 0 else (q, eq)
        prev_a = prev_ea = prev_c = prev_ec = 0.0
        for j in range(n + 2):
            if j <= n:
                e = lo + j * (hi - lo) / n
                lf, df = _log_cdf((e + 0.5 * s * s) / s, s)
                if side == 0:
                    lg, dg = _log_cdf((e - 0.5 * s * s) / s, s)
                    L = (t - k) * lf + k * lg
                    dL = (t - k) * df + k * dg + 4.0 * EPS64 * (abs(L) + 1.0)
                else:
                    L = t * lf
                    dL = t * df + 4.0 * EPS64 * (abs(L) + 1.0)
                a = math.exp(L)
                ea = a * (math.expm1(dL) + 32.0 * EPS64 * (abs(L) + 1.0))
                c = -math.expm1(L)
                ec = a * math.expm1(dL) + 32.0 * EPS64 * c
            else:
                a, ea, c, ec = 1.0, 0.0, 0.0, 0.0  # (the CDF at +inf)
            if j == 0:
                v, ev = a, ea
            elif a <= 0.5:
                v, ev = a - prev_a, ea + prev_ea
            else:
                v, ev = prev_c - c, ec + prev_ec
            out[j] = max(v, 0.0)
            err[j] = ev + 4.0 * EPS64 * abs(v) + 1e-300  # (subnormal values: no relative accuracy)
            prev_a, prev_ea, prev_c, prev_ec = a, ea, c, ec
