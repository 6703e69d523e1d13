"""One balls-in-bins coordinate's heavy tail on the loss grid, in closed form (``pld.samplers.
epoch_tail``): the lognormal mass of W above the lattice top, binned by the loss log((W + r) / t)
for a rung r of the other coordinates' sum (``tail_bins``: connect-the-dots for the upper bound,
each bin's mean of e^{-loss} for the lower), and two or three coordinates above it
(``two_tail_bins``, ``three_tail_bins``)."""

import math

from .._jit import jit
from ..logmath import EPS64, NEG_INF, log_ndtr_diff, log_ndtr_diff_pairs, log_ndtr_pair
from .allocation import _diff_err, _diff_err_pairs

__all__ = ["tail_bins", "two_tail_bins", "three_tail_bins"]


#: Past a standardised boundary z >= Z_ZERO every bin's mass is the exp of a log below -745.2
#: (a normal tail beyond z is below e^{-z^2/2} / (z sqrt(2 pi))): it rounds to exactly 0, so a
#: sweep may stop there without changing a bit (``_many_tail_bins``; ``epoch_tail.Z_ZERO``).
Z_ZERO = 38.6


@jit
def _bin_mean_w(lw, e_w, lm, e_m, c, s, toward):
    """E[W | bin] for log W ~ N(-c, s^2) between z1 and z2 standardised: e^{-c + s^2/2} (Phi(z2 -
    s) - Phi(z1 - s)) / e^{lm}, from lw = log(Phi(z2 - s) - Phi(z1 - s)) and lm = log(Phi(z2) -
    Phi(z1)) with their relative errors e_w and e_m (``_diff_err``), moved ``toward`` (+1 up, -1
    down) by those and the exp's and products' (16 u (|args| + 4)); NaN where lw underflows."""
    if lw == NEG_INF:
        return math.nan
    rel = e_w + e_m + 16.0 * EPS64 * (abs(c) + s * s + abs(lw) + abs(lm) + 4.0)
    return math.exp(-c + 0.5 * s * s + lw - lm) * (1.0 + toward * rel)


@jit
def _tail_split(w_bar, r, lt, ell_a, step, b, den):
    """The share of a ``tail_bins`` bin's mass (W <= b, E[W | bin] <= w_bar) put on the bin's
    upper point ell_a + step, the rest on ell_a: the connect-the-dots split that keeps the bin's
    mean of u = e^{-loss} = t / (W + r), rounded up.  (Splitting an atom into two that keep the
    mean of u is a spread in u, and δ = E_P[(1 - e^{eps} u_1 ... u_k)_+] is convex in each u: δ
    only grows; more on the upper point, only more.)  The mean of u is at least t / (E[W | bin] +
    r) (Jensen: 1 / (W + r) is convex) >= t / (min(b, w_bar) + r); the loss offset of that mean
    above ell_a is taken up by 16 u of its terms, within [0, step].  ``den`` = -expm1(-step)
    (the caller's, once for all bins)."""
    if not 0.0 < w_bar < math.inf:  # (no usable mean: the whole mass on the upper point)
        return 1.0
    lu = math.log(min(b, w_bar) + r)
    off = lu - lt - ell_a + 16.0 * EPS64 * (abs(lu) + abs(lt) + abs(ell_a) + 8.0) + 1e-12 * step
    off = min(step, max(0.0, off))
    return min(1.0, -math.expm1(-off) / den * (1.0 + 8.0 * EPS64) + 8.0 * EPS64)


@jit
def _tail_u(w_bar, r, lt, ell, a, b):
    """An upper bound, at most 1, on a lower ``tail_bins`` bin's mean of e^{-(loss - ell)} =
    t e^{ell} / (W + r) (W in [a, b], every loss >= ell; E[W | bin] >= w_bar): 1 / (W + r) is
    convex, so below its chord between a and b, whose value at min(b, w_bar) bounds the mean
    (where w_bar <= a, the chord's value at a: 1); rounded up by 32 u of its terms."""
    if not w_bar > a:
        return 1.0
    w_bar = min(w_bar, b)
    chord = (a + b + r - w_bar) / ((a + r) * (b + r))
    return min(1.0, math.exp(lt + ell) * chord * (1.0 + 32.0 * EPS64 * (abs(lt) + abs(ell) + 4.0)))


@jit
def _first_bin(b_min, r, lt, step, j_lo):
    """The first bin a tail loop needs to visit: a few below the one where t e^{ell} - r passes
    b_min (below it every bin is skipped: its W-boundary is at most w_max, within the loops'
    margins of ~1e-12 relative); -1 where that is not a finite index."""
    x = (math.log(b_min + r) - lt) / step - j_lo
    if not -1e18 < x < 1e18:
        return -1
    return int(math.floor(x)) - 4


@jit
def _rest(z, weight):
    """``tail_bins``' mass above the boundary z, times ``weight``, rounded up (its +inf mass)."""
    lm = log_ndtr_diff(z, math.inf)
    if lm == NEG_INF:
        return 0.0
    e = _diff_err(z, math.inf) + 4.0 * EPS64 + 1e-12
    return math.exp(lm) * weight * (1.0 + e)


@jit
def tail_bins(s, shift, w_max, t, r, weight, step, j_lo, n, upper, out, out_u, z_stop):
    """One coordinate's tail on the loss grid ell_j = (j_lo + j) step (j = 0..n-1): the mass of
    W > w_max under log W ~ N(-s^2/2 + shift s^2, s^2) (shift 1: the P-law of the coordinate that
    holds the example; 0: any other), times ``weight``, binned by the loss log((W + r) / t).

    ``upper``: the mass with loss in (ell_{j-1}, ell_j] is split between out[j - 1] and out[j]
    (``_tail_split``: connect-the-dots; the bin's loss in closed form -- each epoch's δ near eps
    is this mass where W is heavy-tailed, and a whole step up had cost ~1 step of eps: sigma 0.4,
    t 10^4, δ 1e-5 at step 0.01) and the mass below the grid goes to out[0], rounded up; the mass
    above the top point is returned (the caller's +inf mass).
    Otherwise the mass with loss in [ell_j, ell_{j+1}) is added to out[j] rounded down, and to
    out_u[j] that mass times an upper bound on its mean of e^{-(loss - ell_j)} (``_tail_u``: the
    caller puts it at the loss of that mean, a convex-order minorant); below the grid dropped,
    above the top onto it (mean 1); returns 0.  (``out_u`` is not read for ``upper``.)  The sweep
    stops after the first boundary z >= ``z_stop`` (standardised log W; +inf: never), the mass above
    to +inf for ``upper``, else dropped (``epoch_tail._sweeps``: where it is negligible).

    Each bin's mass and its mean of W difference the normal CDF at its two boundaries z and
    z - s (standardised log W): ``log_ndtr_pair`` at each boundary, carried to the next bin.

    Rounding.  A bin's W-boundary b = t e^{ell} - r is computed with a relative error of at most
    ~4u (1 + |ell|) (b + r) / b, and its standardised log z = (log b - s^2/2) / s adds ~4u
    (|log b| + s^2) absolute in log b; both are covered by moving b by rel = 16 EPS64 (4 + |ell|
    + s^2 + |log b| + (r + 1) / b) + 1e-12 against the bound (down for ``upper``: the mass put at
    ell_j then has loss <= ell_j exactly; up otherwise).  The boundaries telescope, so no mass is
    lost or counted twice; each bin's mass exp(log_ndtr_diff) is within ``_diff_err`` relative
    (plus 4u for the exp and the products), rounded out by that and 1e-12."""
    lt = math.log(t)
    s2 = s * s
    c = (0.5 - shift) * s2
    z_prev = (math.log(w_max) + c) / s
    b_prev = w_max
    p_prev, q_prev = log_ndtr_pair(z_prev), log_ndtr_pair(z_prev - s)
    sign = -1.0 if upper else 1.0
    den = -math.expm1(-step)  # (``_tail_split``'s denominator)
    for j in range(max(-1, _first_bin(w_max, r, lt, step, j_lo)), n):
        ell = (j_lo + j + (0 if upper else 1)) * step  # (lower: bin j's upper boundary)
        b = math.exp(ell + lt) - r
        if b <= 0.0:
            continue
        b *= 1.0 + sign * (16.0 * EPS64 * (4.0 + abs(ell) + s2 + abs(math.log(b)) + (r + 1.0) / b) + 1e-12)
        z = (math.log(b) + c) / s
        if not z > z_prev:
            continue
        if j < 0 and upper:  # (j = -1: the mass below the grid, onto its first point)
            continue
        p_z, q_z = log_ndtr_pair(z), log_ndtr_pair(z - s)
        if j >= 0:
            lm = log_ndtr_diff_pairs(z_prev, z, p_prev, p_z)
            if lm != NEG_INF:
                m = math.exp(lm) * weight
                e_m = _diff_err_pairs(z_prev, z, p_prev, p_z)
                e = e_m + 4.0 * EPS64 + 1e-12
                if j >= 1 or not upper:
                    lw = log_ndtr_diff_pairs(z_prev - s, z - s, q_prev, q_z)
                    e_w = _diff_err_pairs(z_prev - s, z - s, q_prev, q_z)
                if upper and j >= 1:  # (connect-the-dots between ell_{j-1} and ell_j)
                    fp = _tail_split(_bin_mean_w(lw, e_w, lm, e_m, c, s, 1.0), r, lt, ell - step, step, b, den)
                    out[j - 1] += m * (1.0 + e) * (1.0 - fp)
                    out[j] += m * (1.0 + e) * fp
                elif upper:
                    out[j] += m * (1.0 + e)
                else:
                    m_lo = m * max(0.0, 1.0 - e)
                    out[j] += m_lo
                    out_u[j] += m_lo * _tail_u(_bin_mean_w(lw, e_w, lm, e_m, c, s, -1.0), r, lt, ell - step, b_prev, b)
        z_prev, b_prev, p_prev, q_prev = z, b, p_z, q_z  # (lower, j = -1: the mass below ell_0 is dropped)
        if z_prev >= z_stop:  # (lower: dropped, the lower bound only loses mass)
            return _rest(z_prev, weight) if upper else 0.0
    if upper:
        return _rest(z_prev, weight)
    lm = log_ndtr_diff(z_prev, math.inf)
    if lm == NEG_INF:
        return 0.0
    m = math.exp(lm) * weight
    e = _diff_err(z_prev, math.inf) + 4.0 * EPS64 + 1e-12
    out[n - 1] += m * max(0.0, 1.0 - e)
    out_u[n - 1] += m * max(0.0, 1.0 - e)
    return 0.0


@jit
def _product(a0, a1, b0, b1, pa0, pa1, pb0, pb1):
    """(mass, relative error) of P(a0 < Z <= a1) P(b0 < Z <= b1), Z standard normal, as the exp
    of the two ``log_ndtr_diff`` summed (from the boundaries' ``log_ndtr_pair`` pa0 .. pb1: the
    same values): each within ``_diff_err`` relative, the sum's rounding u (|la| + |lb|) absolute
    in log, 4u for the exp."""
    if not (a1 > a0 and b1 > b0):
        return 0.0, 0.0
    la, lb = log_ndtr_diff_pairs(a0, a1, pa0, pa1), log_ndtr_diff_pairs(b0, b1, pb0, pb1)
    if la == NEG_INF or lb == NEG_INF:
        return 0.0, 0.0
    return (math.exp(la + lb), _diff_err_pairs(a0, a1, pa0, pa1) + _diff_err_pairs(b0, b1, pb0, pb1)
            + EPS64 * (abs(la) + abs(lb) + 4.0))


@jit
def _two_terms(za0, za1, zb0, zb1, zaw, zbw, pa0, pa1, pb0, pb1, paw, pbw):
    """(mass, relative error) of F(1) - F(0) for F = A B, A(z) = P(zaw < Z <= z) and B the same
    with zbw (Z standard normal), as A(1) (B(1) - B(0)) + B(0) (A(1) - A(0)): non-negative
    terms (``_product``), their sum's rounding 2u more.  (pa0 .. pbw: each boundary's
    ``log_ndtr_pair``.)"""
    m1, e1 = _product(zaw, za1, zb0, zb1, paw, pa1, pb0, pb1)
    m2, e2 = _product(zbw, zb0, za0, za1, pbw, pb0, pa0, pa1)
    return m1 + m2, max(e1, e2) + 2.0 * EPS64


@jit
def two_tail_bins(s, shift, w_max, t, r, weight, step, j_lo, n, out):
    """Two coordinates' tails on the loss grid ell_j = (j_lo + j) step, upper bound: the mass of
    {X > w_max, Y > w_max} for independent log X ~ N(-s^2/2 + shift s^2, s^2) and log Y ~
    N(-s^2/2, s^2), times ``weight``, binned by log((2 M + r) / t), M = max(X, Y) -- at least
    the loss log((X + Y + r) / t).  The mass with that loss in (ell_{j-1}, ell_j] is added to
    out[j] (below the grid to out[0]), rounded up; the mass above the top point is returned.

    P(M <= b, both above) = A(b) B(b), A, B the two coordinates' masses in (w_max, b]; a bin's
    mass is the difference at its M-boundaries b = (t e^{ell} - r) / 2, moved down by
    ``tail_bins``' relative margin (so the mass put at ell_j has 2M + r <= t e^{ell_j} exactly)
    (``_two_terms``: each term within its error, rounded out by it and 1e-12)."""
    return _many_tail_bins(s, shift, w_max, t, r, weight, step, j_lo, n, out, int(2))


@jit
def _terms(k, za0, za1, zb0, zb1, zaw, zbw, pa0, pa1, pb0, pb1, paw, pbw):
    """``_two_terms`` (k = 2) or ``_three_terms`` (k = 3)."""
    if k == 2:
        return _two_terms(za0, za1, zb0, zb1, zaw, zbw, pa0, pa1, pb0, pb1, paw, pbw)
    return _three_terms(za0, za1, zb0, zb1, zaw, zbw, pa0, pa1, pb0, pb1, paw, pbw)


@jit
def _many_tail_bins(s, shift, w_max, t, r, weight, step, j_lo, n, out, k):
    """``two_tail_bins`` (k = 2) and ``three_tail_bins`` (k = 3): the k coordinates' mass binned by
    log((k M + r) / t), the M-boundaries b = (t e^{ell} - r) / k (k = 2: a multiplication by 0.5,
    exact; k = 3: a division, within u, inside the margin)."""
    lt = math.log(t)
    s2 = s * s
    ca, cb = (0.5 - shift) * s2, 0.5 * s2
    lw = math.log(w_max)
    zaw, zbw = (lw + ca) / s, (lw + cb) / s
    za0, zb0 = zaw, zbw
    # (each boundary's log-CDF pair once, carried to the next bin: the same values as
    # ``log_ndtr_diff`` of each difference, a third of its normal CDFs)
    paw, pbw = log_ndtr_pair(zaw), log_ndtr_pair(zbw)
    pa0, pb0 = paw, pbw
    for j in range(max(0, _first_bin(k * w_max, r, lt, step, j_lo)), n):
        if za0 >= Z_ZERO and zb0 >= Z_ZERO:  # (each mass on from here, the top's too, is exactly 0)
            return 0.0
        ell = (j_lo + j) * step
        bb = math.exp(ell + lt) - r
        if bb <= 0.0:
            continue
        bb *= 1.0 - (16.0 * EPS64 * (4.0 + abs(ell) + s2 + abs(math.log(bb)) + (r + 1.0) / bb) + 1e-12)
        lb = math.log(0.5 * bb) if k == 2 else math.log(bb / k)
        za1, zb1 = (lb + ca) / s, (lb + cb) / s
        if not za1 > za0:
            continue
        pa1, pb1 = log_ndtr_pair(za1), log_ndtr_pair(zb1)
        m, e = _terms(k, za0, za1, zb0, zb1, zaw, zbw, pa0, pa1, pb0, pb1, paw, pbw)
        out[j] += m * weight * (1.0 + e + 1e-12)
        za0, zb0, pa0, pb0 = za1, zb1, pa1, pb1
    top = log_ndtr_pair(math.inf)
    m, e = _terms(k, za0, math.inf, zb0, math.inf, zaw, zbw, pa0, top, pb0, top, paw, pbw)
    return m * weight * (1.0 + e + 1e-12)


@jit
def _three_terms(za0, za1, zb0, zb1, zaw, zbw, pa0, pa1, pb0, pb1, paw, pbw):
    """(mass, relative error) of F(1) - F(0) for F = A B^2 (``_two_terms``' A and B), as
    (A(1) - A(0)) B(1)^2 + A(0) (B(1) - B(0)) (B(1) + B(0)): non-negative terms, each the exp of
    sums of ``log_ndtr_diff`` (from the boundaries' ``log_ndtr_pair``, the same values; each
    within ``_diff_err`` relative; B(1)^2 twice its), the sums' and the exps' rounding u (sum of
    magnitudes) + 4u each, the additions 4u more."""
    m = 0.0
    e = 0.0
    if zb1 > zbw:
        lb1 = log_ndtr_diff_pairs(zbw, zb1, pbw, pb1)
        eb1 = _diff_err_pairs(zbw, zb1, pbw, pb1)
        if za1 > za0 and lb1 != NEG_INF:
            la = log_ndtr_diff_pairs(za0, za1, pa0, pa1)
            if la != NEG_INF:
                m += math.exp(la + 2.0 * lb1)
                e = max(e, _diff_err_pairs(za0, za1, pa0, pa1) + 2.0 * eb1 + EPS64 * (abs(la) + 2.0 * abs(lb1) + 4.0))
        if za0 > zaw and zb1 > zb0 and lb1 != NEG_INF:
            la0, ld = log_ndtr_diff_pairs(zaw, za0, paw, pa0), log_ndtr_diff_pairs(zb0, zb1, pb0, pb1)
            if la0 != NEG_INF and ld != NEG_INF:
                lb0 = log_ndtr_diff_pairs(zbw, zb0, pbw, pb0) if zb0 > zbw else NEG_INF
                both = math.exp(lb1) + (math.exp(lb0) if lb0 != NEG_INF else 0.0)
                eb0 = _diff_err_pairs(zbw, zb0, pbw, pb0) if lb0 != NEG_INF else 0.0
                m += math.exp(la0 + ld) * both
                e = max(e, _diff_err_pairs(zaw, za0, paw, pa0) + _diff_err_pairs(zb0, zb1, pb0, pb1) + max(eb1, eb0)
                        + EPS64 * (abs(la0) + abs(ld) + abs(lb1) + abs(lb0 if lb0 != NEG_INF else 0.0) + 12.0))
    return m, e + 4.0 * EPS64


@jit
def three_tail_bins(s, shift, w_max, t, r, weight, step, j_lo, n, out):
    """``two_tail_bins`` for three coordinates above w_max: log X ~ N(-s^2/2 + shift s^2, s^2) and
    two of log Y ~ N(-s^2/2, s^2), independent, the mass of all three above w_max times ``weight``,
    binned by log((3 M + r) / t), M the largest (at least the loss log((X + Y + Y' + r) / t)):
    P(M <= b, all above) = A(b) B(b)^2 (``_three_terms``), the bins' M-boundaries b = (t e^{ell}
    - r) / 3 moved down by ``tail_bins``' margin; rounded up by each term's error and 1e-12.
    Returns the mass above the top point."""
    return _many_tail_bins(s, shift, w_max, t, r, weight, step, j_lo, n, out, int(3))
