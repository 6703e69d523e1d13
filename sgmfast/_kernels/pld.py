"""Kernels of the PLD accountant: one-step discretisation, tail truncation, δ/ε scans.

Conventions
-----------
* The loss grid is ``ell_k = k * grid_step`` with integer ``k``; an array
  ``t`` with integer ``offset`` holds the mass at ``ell = (offset + i) * grid_step``.
* Arrays may be *exponentially tilted* (Esscher transform): the untilted mass
  is ``p_i = t_i * exp(log_scale - theta * ell_i)``.  Tilting commutes with
  convolution, so a T-fold composition is computed entirely on tilted arrays.
* Losses are those of a dominating pair (P, Q) of one step of the
  Poisson-subsampled Gaussian mechanism (sensitivity 1, noise N(0, sigma^2),
  sampling rate q), written through the *remove* loss
  ``ell_rem(z) = log(1 - q + q exp((2z - 1) / (2 sigma^2)))``, which is
  increasing in the output z.  The *add* loss is ``-ell_rem(z)`` with P = mu0.
* Kernels never raise; the Python layer (``sgmfast.pld``) checks results.

Rounding directions
-------------------
The PESSIMISTIC discretisation (δ never below the truth) is the
"connect-the-dots" PLD of Doroshenko, Ghazi, Kamath, Kumar & Manurangsi,
"Connect the dots: tighter discrete approximations of privacy loss
distributions", PETS 2022 (Algorithm 1 / Theorem 3.3): the P-mass of each loss
bin [ell_j, ell_{j+1}] is split between the two grid points so that both its
P-mass and its Q-mass (= E_P[e^{-L}] over the bin) are preserved.  Because
(1 - e^{eps} u)_+ is convex in u = e^{-ell}, this is a mean-preserving spread
in u, so by Jensen every δ(eps) can only grow; convex order in u is kept by
products of independent variables, i.e. by composition.

The OPTIMISTIC discretisation (δ never above the truth) uses the converse
order: each bin is first collapsed to its conditional u-mean (a contraction),
and adjacent atoms are then merged onto the grid point between them (merging
is again a contraction); whatever cannot be merged is rounded *down* in loss
(u up), which lowers every δ(eps) since (s - u)_+ is non-increasing in u.
Every function h(u) = E_Y[(1 - e^{eps} u Y)_+] is convex and non-increasing,
so the inequality survives composition with any other PLD.

Floating point: the bins are the z-intervals between shared floating-point edges,
so they partition the line exactly; ``step_bins`` returns with every bin's log-masses
a bound on their rounding error (midpoint expansion: a few u (c^2 + |log 2h| + 1);
log-CDF differences: ~200 u |log mass|).  The pessimistic masses are inflated by that
bound plus ``MASS_SLACK`` and the split moved up by a bound on its rounding error, the
optimistic masses deflated and atoms moved down, so rounding never breaks the
inequalities.
"""

import math

import numpy as np

from ._jit import jit
from .logmath import LOG_SQRT_2PI, log_add, log_expm1, log_ndtr, log_ndtr_diff, log_normal_pdf

NEG_INF = -math.inf
EPS64 = 2.220446049250313e-16
# Relative slack on each bin mass (plus 256 u |log mass|, see mass_slack): covers the errors
# of _normal_logmass and step_bins.
MASS_SLACK = 1e-12
# Entries between exact re-anchorings of the factor recurrences (log_mgf_multi).
MGF_ANCHOR = 256
# Largest h (1 + |c|) (standardised half-width, centre) for the midpoint expansion.
MIDPOINT_MAX = 0.02

__all__ = [
    "remove_loss",
    "step_bins",
    "discretise_direction",
    "optimistic_step",
    "addremove_tails",
    "replace_bins",
    "replace_tails",
    "replace_loss",
    "replace_z",
    "suffix_sums",
    "delta_curve",
    "eps_search",
    "loss_moments",
]


@jit
def remove_loss(z, sigma, q):
    """ell_rem(z) = log(1 - q + q exp((2z - 1)/(2 sigma^2))), without overflow."""
    x = (2.0 * z - 1.0) / (2.0 * sigma * sigma)
    if q >= 1.0:
        return x
    return log_add(math.log1p(-q), math.log(q) + x)


@jit
def _log_d(x, q):
    """log(e^x - (1 - q)): -inf at or below the lower end log(1 - q) of the remove loss."""
    if q >= 1.0:
        return x
    l1q = math.log1p(-q)
    if x <= l1q:
        return NEG_INF
    return l1q + log_expm1(x - l1q)


@jit
def _z_of_loss(x, sigma, q):
    """Inverse of the remove loss: z with ell_rem(z) = x; -inf when x <= log(1 - q)."""
    ld = _log_d(x, q)
    if ld == NEG_INF:
        return NEG_INF
    return sigma * sigma * (ld - math.log(q)) + 0.5


@jit
def _midpoint_corr(c, h):
    """Relative correction of the midpoint rule for the N(0, 1)-mass of [c - h, c + h]:
    mass = 2 h phi(c) (1 + corr), corr = He2(c) h^2/3! + He4(c) h^4/5! + He6(c) h^6/7!
    (He_k: Hermite polynomials).  The omitted terms are below 105 x^8 / 9! < 1e-17 for
    x = h (1 + |c|) < MIDPOINT_MAX (|He_k(c)| <= k!! (1 + |c|)^k)."""
    c2 = c * c
    h2 = h * h
    he2 = c2 - 1.0
    he4 = c2 * c2 - 6.0 * c2 + 3.0
    he6 = c2 * c2 * c2 - 15.0 * c2 * c2 + 45.0 * c2 - 15.0
    return h2 * (he2 / 6.0 + h2 * (he4 / 120.0 + h2 * he6 / 5040.0))


@jit
def _normal_logmass(a, b, w, sigma):
    """log P(a <= Z <= b) for Z ~ N(0, sigma^2), given the width w = b - a computed accurately.

    Narrow intervals (standardised half-width h, centre c, h (1 + |c|) < MIDPOINT_MAX) use
    the midpoint expansion of ``_midpoint_corr``; others the difference of log-CDFs, whose
    relative error is at most ~200 u |log mass| (the relative width of the difference is
    then >= 0.01).  ``mass_slack`` covers both.
    """
    if not a < b:
        return NEG_INF
    if a == NEG_INF:
        return log_ndtr(b / sigma)
    if b == math.inf:
        return log_ndtr(-a / sigma)
    h = 0.5 * w / sigma
    c = a / sigma + h
    if h * (1.0 + abs(c)) < MIDPOINT_MAX:
        return math.log(2.0 * h * (1.0 + _midpoint_corr(c, h))) + log_normal_pdf(c)
    return log_ndtr_diff(a / sigma, b / sigma)


@jit
def _generic_log_err(l0, l1):
    """Error bound of a (log N(0)-mass, log mixture ratio) pair from ``_normal_logmass`` twice
    (each <= ~200 u (|log mass| + 1), see there), counted twice for the ratio."""
    return 256.0 * EPS64 * (2.0 * abs(l0) + abs(l1) + 4.0) + 1e-15


@jit
def mass_slack(lm):
    """Relative error bound of a bin mass with log-mass lm (see ``_normal_logmass``); an empty
    bin (lm = -inf) is exact."""
    if lm == NEG_INF:
        return MASS_SLACK
    return MASS_SLACK + 256.0 * EPS64 * abs(lm)


@jit
def _tail_logmass(x, sigma, q, add):
    """log P-mass of the z-interval whose remove loss is >= x (x = -inf: the whole line)."""
    if x == NEG_INF:
        return 0.0
    a = _z_of_loss(x, sigma, q)
    lm0 = _normal_logmass(a, math.inf, math.inf, sigma)
    if add:
        return lm0
    lm1 = _normal_logmass(a - 1.0, math.inf, math.inf, sigma)
    return lm1 if q >= 1.0 else log_add(math.log1p(-q) + lm0, math.log(q) + lm1)


@jit
def _head_logmass(x, sigma, q, add):
    """log P-mass of the z-interval whose remove loss is <= x (-inf below the support)."""
    b = _z_of_loss(x, sigma, q)
    if b == NEG_INF:
        return NEG_INF
    lm0 = _normal_logmass(NEG_INF, b, math.inf, sigma)
    if add:
        return lm0
    lm1 = _normal_logmass(NEG_INF, b - 1.0, math.inf, sigma)
    return lm1 if q >= 1.0 else log_add(math.log1p(-q) + lm0, math.log(q) + lm1)


@jit
def step_bins(sigma, q, step, k_lo, nb, lm0, ls, le):
    """Log-masses of the remove-loss bins [x_k, x_{k+1}], x_k = k * step, k = k_lo .. k_lo + nb - 1.

    The bin is the z-interval [a_k, a_{k+1}], a_k = z(x_k) (inverse remove loss), and
    lm0[i] = log N(0, s^2)-mass of it, ls[i] = log(mixture mass / N(0, s^2) mass), the
    mixture being (1 - q) N(0, s^2) + q N(1, s^2).  Both directions read these arrays:
    remove (P = mixture, Q = N(0, s^2), loss in [x_k, x_{k+1}]) and add (P = N(0, s^2),
    Q = mixture, loss in [-x_{k+1}, -x_k]).  Adjacent bins share one floating-point edge,
    so the intervals partition the line exactly.

    le[i] bounds the rounding error of lm0[i] plus that of ls[i] (absolute, in log units).

    Narrow bins (standardised half-width h with h (1 + |c|) < MIDPOINT_MAX at both centres c) use
    the midpoint expansion of ``_normal_logmass`` for N(0, s^2) and the exact ratio
    phi(c - 1/s) / phi(c) = exp((a + b - 1) / (2 s^2)) for the mixture: three
    transcendentals per bin, relative errors below 1e-13 (the arguments are bounded by 450;
    each exp/log of an argument x errs by a few u (1 + |x|)).  Other bins use
    ``_normal_logmass`` twice.
    """
    s2 = sigma * sigma
    inv_s = 1.0 / sigma
    half_inv_s2 = 0.5 / s2
    log_q = math.log(q)
    l1q = math.log1p(-q) if q < 1.0 else NEG_INF
    base = 1.0 / s2 + abs(log_q)
    b = _z_of_loss(k_lo * step, sigma, q)
    for i in range(nb):
        a = b
        b = _z_of_loss((k_lo + i + 1) * step, sigma, q)
        if not a < b:
            lm0[i] = NEG_INF
            ls[i] = 0.0
            le[i] = 0.0
            continue
        if a > NEG_INF:
            w = b - a
            h = 0.5 * w * inv_s
            c = a * inv_s + h
            c1 = c - inv_s
            arg = (a + b - 1.0) * half_inv_s2
            c2 = c * c
            if h * (1.0 + max(abs(c), abs(c1))) < MIDPOINT_MAX and c2 + base + abs(arg) < 450.0:
                corr0 = _midpoint_corr(c, h)
                corr1 = _midpoint_corr(c1, h)
                l2h = math.log(2.0 * h * (1.0 + corr0))
                lm0[i] = l2h - 0.5 * c2 - LOG_SQRT_2PI
                ratio = math.exp(arg) * ((1.0 + corr1) / (1.0 + corr0))
                ls[i] = math.log(ratio) if q >= 1.0 else math.log((1.0 - q) + q * ratio)
                # h, c from exact-width edges (2u each), c^2 / 2, the logs and the exp:
                le[i] = 8.0 * EPS64 * (c2 + abs(l2h) + abs(arg) + abs(ls[i]) + 6.0)
                continue
        else:
            w = math.inf
        l0 = _normal_logmass(a, b, w, sigma)
        l1 = _normal_logmass(a - 1.0, b - 1.0, w, sigma)
        if l0 == NEG_INF:
            lm0[i] = NEG_INF
            ls[i] = 0.0
            le[i] = 0.0
            continue
        lm0[i] = l0
        ls[i] = (l1 if q >= 1.0 else log_add(l1q + l0, log_q + l1)) - l0
        le[i] = _generic_log_err(l0, l1)


@jit
def addremove_tails(sigma, q, step, j_lo, j_hi, add):
    """(log P-mass below grid point j_lo, log P-mass above j_hi) of one add/remove direction, in
    remove-loss coordinates (add: loss < lo <=> remove loss > -lo) on the same floating-point
    edges as the bins."""
    if add:
        return _tail_logmass(-(j_lo * step), sigma, q, True), _head_logmass(-(j_hi * step), sigma, q, True)
    return _head_logmass(j_lo * step, sigma, q, False), _tail_logmass(j_hi * step, sigma, q, False)


@jit
def discretise_direction(sigma, q, step, k_lo, lm0, ls, le, j_lo, j_hi, add, lp_low, lp_high, err0, pess, frac, amass):
    """One direction of one SGM step on the grid points j_lo..j_hi (inclusive), from ``step_bins``
    (or, for the replace-one pair, ``replace_bins`` read with add=True).

    Fills ``pess`` (connect-the-dots masses, length n = j_hi - j_lo + 1) and the optimistic
    atoms ``frac``/``amass`` (see ``optimistic_step``); returns (p_inf, top): the
    pessimistic +inf mass (P-mass above the top grid point) and the optimistic mass moved
    down onto the top point.  Pessimistic: mass below the grid moves up to the lowest point,
    mass above goes to +inf.  Optimistic: mass below is dropped, mass above moves down to
    the top point.  Bin i (loss [ell_i, ell_i + step]) is remove-loss bin k = j_lo + i
    (remove) or k = -(j_lo + i) - 1 (add) of the arrays starting at ``k_lo``.

    Per bin: fp = pessimistic fraction of the mass sent up to point i+1 (rounded up);
    frac = loss offset of the optimistic atom above point i (rounded down), -1 if empty;
    amass = the bin's P-mass deflated by the slack (0 for an empty bin).
    """
    n = j_hi - j_lo + 1
    for i in range(n):
        pess[i] = 0.0
        frac[i] = -1.0
        amass[i] = 0.0
    # tails: lp_low / lp_high are the log P-masses below / above the grid
    p_inf = math.exp(lp_high) * (1.0 + mass_slack(lp_high))
    pess[0] += math.exp(lp_low) * (1.0 + mass_slack(lp_low))
    top = math.exp(lp_high) * (1.0 - mass_slack(lp_high))
    em = -math.expm1(-step)  # e^{-ell_j} - e^{-ell_{j+1}}, relative to e^{-ell_j}
    # err0: the edges' rounding in loss units is <= 8u err0 (see the caller)
    for i in range(n - 1):
        ell = (j_lo + i) * step
        k = -(j_lo + i) - 1 if add else j_lo + i
        l0 = lm0[k - k_lo]
        if l0 == NEG_INF:
            continue
        s = ls[k - k_lo]
        # r = log(e^{ell_j} * Q/P), in [-step, 0] in exact arithmetic
        if add:
            lp = l0
            r = ell + s
        else:
            lp = l0 + s
            r = ell - s
        m = math.exp(lp)
        # relative mass error: the bin's log-error bound (it also bounds the error of s), plus
        # the exp; MASS_SLACK on top
        slack = MASS_SLACK + le[k - k_lo] + 4.0 * EPS64 * (abs(lp) + 1.0)
        if r > 0.0:
            r = 0.0
        if r < -step:
            r = -step
        # bound on the error of r = ell +- s: that of s (within the bin's log-error bound), the
        # rounding of the edges (<= 8u err0 in loss) and of ell and r
        err_r = le[k - k_lo] + 8.0 * EPS64 * (abs(ell) + abs(s) + err0 + 1.0)
        fp = min(1.0, -math.expm1(r) / em + err_r / em)
        mp = m * (1.0 + slack)
        pess[i] += mp * (1.0 - fp)
        pess[i + 1] += mp * fp
        # optimistic atom at the conditional u-mean, moved down by the error bound
        pos = -r - err_r
        frac[i] = pos if pos > 0.0 else 0.0
        amass[i] = m * (1.0 - slack)
    return p_inf, top


# --- the replace-one pair --------------------------------------------------------------
# P = (1 - q) N(0, s^2) + q N(-1, s^2), Q = (1 - q) N(0, s^2) + q N(1, s^2): a record whose
# clipped contribution (norm <= 1) is replaced by another shifts the sum by up to 2, split as
# -1 / +1 around the other records' sum.  The loss log(P/Q)(z) is decreasing in z and
# symmetric (z -> -z swaps P and Q), so one direction describes the pair.


@jit
def replace_loss(z, sigma, q):
    """log(P/Q)(z) of the replace-one pair, without overflow."""
    s2 = sigma * sigma
    lq = math.log(q)
    if q >= 1.0:
        return -2.0 * z / s2
    l1q = math.log1p(-q)
    return log_add(l1q, lq - (2.0 * z + 1.0) / (2.0 * s2)) - log_add(l1q, lq + (2.0 * z - 1.0) / (2.0 * s2))


@jit
def replace_z(ell, sigma, q):
    """The z with replace_loss(z) = ell: z = s^2 log u, u the positive root of
    e^ell q c u^2 + (1 - q)(e^ell - 1) u - q c = 0, c = e^{-1/(2 s^2)}, in a form free of
    cancellation and overflow on either side of ell = 0."""
    s2 = sigma * sigma
    a = 1.0 - q
    l2qc = math.log(2.0 * q) - 0.5 / s2  # log(2 q c)
    if ell >= 0.0:
        e = -math.expm1(-ell)  # 1 - e^{-ell}
        rad = math.sqrt(a * a * e * e + math.exp(2.0 * l2qc - ell))
        lu = l2qc - ell - math.log(a * e + rad)
    else:
        e = -math.expm1(ell)  # 1 - e^{ell}
        rad = math.sqrt(a * a * e * e + math.exp(2.0 * l2qc + ell))
        lu = math.log(a * e + rad) - ell - l2qc
    return s2 * lu


@jit
def _replace_logmasses(lo, hi, sigma, q):
    """(log P-mass, log Q-mass) of the z-interval [lo, hi] (either end may be infinite)."""
    w = hi - lo
    l0 = _normal_logmass(lo, hi, w, sigma)
    lm = _normal_logmass(lo + 1.0, hi + 1.0, w, sigma)  # N(-1, s^2)
    lp = _normal_logmass(lo - 1.0, hi - 1.0, w, sigma)  # N(+1, s^2)
    if q >= 1.0:
        return lm, lp
    l1q = math.log1p(-q)
    log_q = math.log(q)
    return log_add(l1q + l0, log_q + lm), log_add(l1q + l0, log_q + lp)


@jit
def replace_bins(sigma, q, step, k_lo, nb, lm0, ls, le):
    """The replace-one bins in the layout ``discretise_direction`` reads with add=True: entry
    i <-> k = k_lo + i <-> loss bin [-(k+1) step, -k step]; lm0 = log P-mass, ls = log(Q/P) mass
    ratio.  The loss is decreasing in z, so the bin is the z-interval between the edges at
    its upper and lower loss; adjacent bins share one floating-point edge."""
    hi_z = replace_z(-(k_lo * step), sigma, q)
    for i in range(nb):
        lo_z = hi_z
        hi_z = replace_z(-((k_lo + i + 1) * step), sigma, q)
        # loss in [-(k+1) step, -k step]  <=>  z in [z(-k step), z(-(k+1) step)]
        lpm, lqm = _replace_logmasses(lo_z, hi_z, sigma, q)
        if lpm == NEG_INF or not lo_z < hi_z:
            lm0[i] = NEG_INF
            ls[i] = 0.0
            le[i] = 0.0
        else:
            lm0[i] = lpm
            ls[i] = lqm - lpm
            le[i] = _generic_log_err(lpm, lqm) * 1.5  # three normal masses per side


@jit
def replace_tails(sigma, q, step, j_lo, j_hi):
    """(log P-mass with loss below grid point j_lo, log P-mass with loss above j_hi)."""
    z_lo = replace_z(j_lo * step, sigma, q)  # loss < lo  <=>  z > z_lo
    z_hi = replace_z(j_hi * step, sigma, q)  # loss > hi  <=>  z < z_hi
    return _replace_logmasses(z_lo, math.inf, sigma, q)[0], _replace_logmasses(-math.inf, z_hi, sigma, q)[0]


@jit
def optimistic_step(step, frac, amass, top, opt):
    """The optimistic one-step masses from the atoms of ``discretise_direction``: the convex-order
    minorant where it applies, else merging by contractions; ``top`` goes onto the top point."""
    n = opt.shape[0]
    for i in range(n):
        opt[i] = 0.0
    opt[n - 1] += top
    if not _minorant_to_grid(step, n, frac, amass, opt):
        _contract_to_grid(step, n, frac, amass, opt)


@jit
def _minorant_to_grid(step, n, frac, amass, opt):
    """Optimistic grid masses as the convex-order minorant of the bin atoms; False if it does not apply.

    In u = e^{-ell} the masses nu_i on the grid are dominated in convex order
    by the distribution mu of the bin atoms (a mean-preserving *contraction* of
    mu) iff the call function C_nu(k) = E_nu[(u - k)_+] lies below C_mu with the
    same mean.  C_nu is piecewise linear with knots at the grid points; start
    from the chord interpolation of C_mu at the knots (the connect-the-dots
    masses, which lie *above* C_mu) and lower each knot value by D_i.  The
    chord of a bin exceeds C_mu by at most G = m f (1 - f) w (bin mass m,
    fraction f of its u-mean towards the next point, u-width w), so a lowering
    of max(G_{i-1}, G_i) at each knot puts every segment below C_mu; the two end
    knots are pinned (D = 0, keeping the mean) and their neighbours lowered by
    the one-sided amount E|x - u| over the end bin.  Knots whose resulting mass
    is negative are removed (lower convex hull: their negative mass is
    interpolated onto the neighbouring knots, preserving mass and mean), which
    only lowers C_nu further.  All quantities are local masses, so tails keep
    their relative precision.  The variance lost is O(m w^2) per bin, versus
    the first-order shift of rounding atoms down.
    """
    if n < 8:
        return False
    ed = math.exp(-step)
    eu = math.exp(step)
    em = -math.expm1(-step)
    f = np.zeros(n)
    m = np.zeros(n)
    for i in range(n - 1):
        w = amass[i]
        if w > 0.0:
            m[i] = w
            f[i] = min(1.0, max(0.0, -math.expm1(-frac[i]) / em))
    # a_i = D_i / w_i (w_i: u-width of the bin between points i and i+1; w_i / w_{i-1} = e^{-step})
    a = np.zeros(n)
    for i in range(1, n - 1):
        gl = m[i - 1] * f[i - 1] * (1.0 - f[i - 1]) * eu
        gr = m[i] * f[i] * (1.0 - f[i])
        a[i] = max(gl, gr)
    # bottom end: point 0 pinned
    end = m[0] * (1.0 - f[0]) * eu
    g1 = m[1] * f[1] * (1.0 - f[1])
    a[1] = end
    if end < g1:
        # bin 1 is covered one-sidedly by point 2: D_2 >= m_1 (1 - f_1) w_1
        a[2] = max(a[2], m[1] * (1.0 - f[1]) * eu)
    # top end: point n-1 pinned
    k = n - 2
    end = m[k] * f[k]
    gk = m[k - 1] * f[k - 1] * (1.0 - f[k - 1]) * eu
    if k - 1 <= 2:
        return False
    a[k] = end
    if end < gk:
        a[k - 1] = max(a[k - 1], m[k - 1] * f[k - 1])
    nu = np.zeros(n)
    for i in range(n - 1):
        nu[i] += m[i] * (1.0 - f[i])
        nu[i + 1] += m[i] * f[i]
    nu[0] -= a[1] * ed
    for i in range(1, n - 1):
        nu[i] += a[i] * (1.0 + ed) - a[i + 1] * ed - a[i - 1]
    # the pinned end knots get exactly zero (a[1] and a[n-2] equal their end terms); avoid rounding residue
    nu[0] = 0.0
    nu[n - 1] = 0.0
    # lower convex hull: remove knots with negative mass
    stack = np.empty(n, dtype=np.int64)
    top = 0
    stack[0] = 0
    for i in range(1, n):
        stack[top + 1] = i
        top += 1
        # resolve a negative knot just below the top (its right neighbour is i)
        while top >= 2 and nu[stack[top - 1]] < 0.0:
            j = stack[top - 1]
            left = stack[top - 2]
            right = stack[top]
            # u-distances: u_left - u_j and u_j - u_right (u_i proportional to e^{-i step})
            da = math.expm1((j - left) * step)
            db = -math.expm1(-(right - j) * step)
            # relative to u_j: u_left - u_j = u_j (e^{(j-left) step} - 1), u_j - u_right = u_j (1 - e^{-(right-j) step})
            v = nu[j]
            nu[left] += v * db / (da + db)
            nu[right] += v * da / (da + db)
            nu[j] = 0.0
            stack[top - 1] = right
            top -= 1
    if nu[0] < 0.0 or nu[n - 1] < 0.0:
        return False
    for i in range(n):
        if nu[i] < 0.0:
            return False
    for i in range(n):
        opt[i] += nu[i] * (1.0 - 1e-12)
    return True


@jit
def _contract_to_grid(step, n, frac, amass, opt):
    """Merge the optimistic atoms onto grid points by contractions (sweep from high loss down).

    Atom i sits at loss offset frac[i] in [0, step] above grid point i.  A carry
    atom above grid point g and an atom below g are merged in the proportions that
    put their u-mean exactly on g; the u-weight ratio is computed with expm1 and
    biased so that any rounding error leaves the merged mass at or below g in loss.
    """
    has_carry = False
    c_idx = 0
    c_pos = 0.0
    c_m = 0.0
    for i in range(n - 2, -1, -1):
        w = amass[i]
        if w <= 0.0:
            continue
        a = frac[i]
        if a <= 0.0:
            opt[i] += w
            continue
        if a >= step:
            opt[i + 1] += w
            continue
        if not has_carry:
            has_carry = True
            c_idx = i
            c_pos = a
            c_m = w
            continue
        # carry at loss (c_idx*step + c_pos), atom at (i*step + a), target grid point g = i+1
        g = i + 1
        d_c = (c_idx - g) * step + c_pos  # carry loss above g (> 0)
        d_a = step - a  # g above atom (> 0)
        # u_g - u_c = e^{-g}(1 - e^{-d_c}); u_a - u_g = e^{-g}(e^{d_a} - 1)
        ratio = -math.expm1(-d_c) / math.expm1(d_a)  # atom mass per unit carry mass
        beta = c_m * ratio * (1.0 - 1e-12)
        if beta <= w:
            opt[g] += c_m + beta
            w -= beta
            has_carry = False
            if w > 0.0:
                has_carry = True
                c_idx = i
                c_pos = a
                c_m = w
        else:
            alpha = min(c_m, w / ratio * (1.0 + 1e-12))
            opt[g] += alpha + w
            c_m -= alpha
            if c_m <= 0.0:
                has_carry = False
    if has_carry:
        opt[c_idx] += c_m


@jit
def suffix_sums(t, theta_step, step, a_out, b_out):
    """a_out[j] = sum_{k>j} t_k e^{-theta(ell_k-ell_j)}, b_out[j] = sum_{k>j} t_k e^{-(theta+1)(ell_k-ell_j)}."""
    n = t.shape[0]
    ea = math.exp(-theta_step)
    eb = math.exp(-theta_step - step)
    a = 0.0
    b = 0.0
    a_out[n - 1] = 0.0
    b_out[n - 1] = 0.0
    for j in range(n - 2, -1, -1):
        a = (a + t[j + 1]) * ea
        b = (b + t[j + 1]) * eb
        a_out[j] = a
        b_out[j] = b


@jit
def _delta_at(eps, offset, step, theta, log_scale, t, a_s, b_s):
    """(delta_finite(eps), rounding slack) for one eps from the suffix sums."""
    n = t.shape[0]
    x = eps / step - offset
    if x < 0.0:
        # below the grid: all entries count; use index 0 with t_0 included
        j = 0
        base = offset * step
        a = a_s[0] + t[0]
        b = b_s[0] + t[0]
        sc = math.exp(log_scale - theta * base)
        val = sc * (a - math.exp(eps - base) * b)
        return max(val, 0.0), 4.0 * (n + 4) * EPS64 * sc * (a + b)
    j = int(math.floor(x))
    if j >= n - 1:
        return 0.0, 0.0
    base = (offset + j) * step
    sc = math.exp(log_scale - theta * base)
    a = a_s[j]
    b = b_s[j]
    val = sc * (a - math.exp(eps - base) * b)
    return max(val, 0.0), 4.0 * (n + 4) * EPS64 * sc * (a + b)


@jit
def delta_curve(eps, offset, step, theta, log_scale, t, a_s, b_s, p_inf, inf_err, err_l1, upper, floor, out):
    """Certified δ(eps) bound for each eps (upper or lower), written to out.

    upper: finite + p_inf + inf_err + e^{log_scale - theta eps} err_l1 + slack;
    lower: max(0, finite - inf_err - e^{log_scale - theta eps} err_l1 - slack)
    (inf_err: an absolute error bound; err_l1: one in tilted units).
    The FFT term uses e^{-theta ell} f_eps(ell) <= e^{-theta eps} for ell >= eps, theta >= 0.
    """
    for i in range(eps.shape[0]):
        e = eps[i]
        val, slack = _delta_at(e, offset, step, theta, log_scale, t, a_s, b_s)
        fe = math.exp(log_scale - theta * e) * err_l1
        if upper:
            # below ``floor`` the grid lacks part of the mass above eps: only the trivial bound holds
            out[i] = 1.0 if e < floor else min(1.0, val + p_inf + inf_err + fe + slack)
        else:
            out[i] = 0.0 if e < floor else max(0.0, val - inf_err - fe - slack)


@jit
def delta_direct(eps, offset, step, theta, log_scale, t, p_inf, inf_err, err_l1, upper, floor, out):
    """``delta_curve`` by summing t_k e^{log_scale - theta ell_k} (1 - e^{eps - ell_k}) over the
    atoms above each eps, term by term: O(n) per eps, but no cancellation between
    P(L > eps) and e^eps Q(L > eps), which the suffix sums subtract (their slack is ~n u times
    the mass above eps, too much when eps lies inside the bulk and δ is far smaller).
    Every term is non-negative and computed within a relative (8 + 2 theta |ell|) u, plus an
    absolute 4 u (|ell| + |eps|) times its mass for the rounding of eps - ell; the recursive
    sum adds at most (terms) u of the total."""
    n = t.shape[0]
    for i in range(eps.shape[0]):
        e = eps[i]
        if e < floor:
            out[i] = 1.0 if upper else 0.0
            continue
        k0 = int(math.floor(e / step)) - offset
        k0 = min(max(k0, 0), n)
        while k0 < n and (offset + k0) * step <= e:
            k0 += 1
        while k0 > 0 and (offset + k0 - 1) * step > e:
            k0 -= 1
        val = 0.0
        slack = 0.0
        for k in range(k0, n):
            if t[k] > 0.0:
                ell = (offset + k) * step
                w = t[k] * math.exp(log_scale - theta * ell)
                term = w * -math.expm1(e - ell)
                val += term
                slack += term * (8.0 + 2.0 * theta * abs(ell)) * EPS64 + w * 4.0 * (abs(ell) + abs(e)) * EPS64
        slack = (slack + (n - k0 + 2) * EPS64 * val) * 1.01
        fe = math.exp(log_scale - theta * e) * err_l1
        if upper:
            out[i] = min(1.0, val + p_inf + inf_err + fe + slack)
        else:
            out[i] = max(0.0, val - inf_err - fe - slack)


@jit
def _bound_at(e, offset, step, theta, log_scale, t, a_s, b_s, p_inf, inf_err, err_l1, upper, floor):
    if e < floor:
        return math.inf if upper else -math.inf
    val, slack = _delta_at(e, offset, step, theta, log_scale, t, a_s, b_s)
    fe = math.exp(log_scale - theta * e) * err_l1
    if upper:
        return val + p_inf + inf_err + fe + slack
    return val - inf_err - fe - slack


@jit
def eps_search(target, offset, step, theta, log_scale, t, a_s, b_s, p_inf, inf_err, err_l1, upper, floor):
    """Certified bound on eps(target) from a δ bound curve.

    upper: returns some eps >= 0 with delta_upper(eps) <= target (inf if none on
    the grid); lower: some eps with delta_lower(eps) > target, or 0.
    Finds a bracketing bin over grid points (upper: by bisection, the upper curve is a sum of
    non-increasing terms; lower: a strided scan from the top, then bisection), then bisects
    inside it, keeping the invariant (bound > target at the low end, <= target at the high
    end). Every answer is checked at the value returned, so it is valid even where a curve
    is not monotone (it would then only be less tight than the best grid point).
    """
    n = t.shape[0]
    j0 = max(0, -offset)  # first index with ell >= 0
    if upper:
        if _bound_at(0.0, offset, step, theta, log_scale, t, a_s, b_s, p_inf, inf_err, err_l1, True, floor) <= target:
            return 0.0
        if j0 >= n or _bound_at((offset + n - 1) * step, offset, step, theta, log_scale, t, a_s, b_s, p_inf,
                                inf_err, err_l1, True, floor) > target:
            return math.inf
        lo_j = j0 - 1  # (eps = 0 stands for it: its bound is > target)
        hi_j = n - 1
        while hi_j - lo_j > 1:
            mid_j = (lo_j + hi_j) // 2
            if _bound_at((offset + mid_j) * step, offset, step, theta, log_scale, t, a_s, b_s, p_inf, inf_err,
                         err_l1, True, floor) <= target:
                hi_j = mid_j
            else:
                lo_j = mid_j
        hi = (offset + hi_j) * step
        lo = max(0.0, hi - step)
        for _ in range(64):
            mid = 0.5 * (lo + hi)
            if mid <= lo or mid >= hi:
                break
            if _bound_at(mid, offset, step, theta, log_scale, t, a_s, b_s, p_inf, inf_err, err_l1, True, floor) <= target:
                hi = mid
            else:
                lo = mid
        return hi
    else:
        lo_j = -1
        jf = j0  # first grid point at or above the floor (below it the lower bound is trivial)
        if floor > -math.inf:
            jf = max(j0, math.ceil(floor / step) - offset)
            while jf < n and (offset + jf) * step < floor:
                jf += 1
        # The lower curve is not monotone (its error term falls like e^{-theta eps}, so it can be
        # negative low down): scan from the top with a stride for the first point above the
        # target, then bisect between it and the point above it (n: past the grid, where the
        # finite part is 0).
        hi_j = n
        if jf < n:
            stride = max(1, (n - jf) // 2048)
            j = n - 1
            while True:
                if _bound_at((offset + j) * step, offset, step, theta, log_scale, t, a_s, b_s, p_inf, inf_err,
                             err_l1, False, floor) > target:
                    lo_j = j
                    break
                if j == jf:
                    break
                hi_j = j
                j = max(jf, j - stride)
        if lo_j >= 0:
            while hi_j - lo_j > 1:
                mid_j = (lo_j + hi_j) // 2
                if _bound_at((offset + mid_j) * step, offset, step, theta, log_scale, t, a_s, b_s, p_inf, inf_err,
                             err_l1, False, floor) > target:
                    lo_j = mid_j
                else:
                    hi_j = mid_j
        if lo_j < 0:
            # below the first grid point at or above the floor: from the floor (or 0) up to it
            start = max(floor, 0.0)
            if _bound_at(start, offset, step, theta, log_scale, t, a_s, b_s, p_inf, inf_err, err_l1, False,
                         floor) > target:
                lo = start
                hi = (offset + min(jf, n)) * step
            else:
                return 0.0
        else:
            lo = (offset + lo_j) * step
            hi = lo + step
        for _ in range(64):
            mid = 0.5 * (lo + hi)
            if mid <= lo or mid >= hi:
                break
            if _bound_at(mid, offset, step, theta, log_scale, t, a_s, b_s, p_inf, inf_err, err_l1, False, floor) > target:
                lo = mid
            else:
                hi = mid
        return max(lo, 0.0)


@jit
def loss_moments(sigma, q, kind, npts):
    """Mean and variance of the one-step loss under P by the trapezoid rule in z, for the
    remove (kind 0), add (1) or replace-one (2) pair.

    Only used to choose the grid step and the FFT window (never for a bound).
    """
    shift = -1.0 if kind == 2 else 0.0  # the replace-one P is centred at 0 and -1
    lo = shift - 14.0 * sigma
    hi = shift + 1.0 + 14.0 * sigma
    h = (hi - lo) / (npts - 1)
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    for i in range(npts):
        z = lo + i * h
        wt = 0.5 if (i == 0 or i == npts - 1) else 1.0
        d0 = math.exp(log_normal_pdf(z / sigma))
        if kind == 1:
            dens = d0
            l = -remove_loss(z, sigma, q)
        else:
            d1 = math.exp(log_normal_pdf((z - 1.0 - 2.0 * shift) / sigma))  # N(1) or N(-1)
            dens = (1.0 - q) * d0 + q * d1
            l = replace_loss(z, sigma, q) if kind == 2 else remove_loss(z, sigma, q)
        s0 += wt * dens
        s1 += wt * dens * l
        s2 += wt * dens * l * l
    m = s1 / s0
    v = s2 / s0 - m * m
    return m, max(v, 0.0)


@jit
def sumsq(a):
    """sum of a_i^2, single-threaded (BLAS dot contends for cores with the FFT threads)."""
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i] * a[i]
    return s


@jit
def _first_above(rate, m, cut):
    """First i in [0, m) with rate * (i - (m - 1)) >= -cut (rate >= 0): the factors
    e^{rate (i - m + 1)} of a recurrence anchored at the top are >= e^{-cut} from there on."""
    if rate <= 0.0:
        return 0
    i0 = m - 1 - math.floor(cut / rate)
    return max(0, min(m - 1, i0))


@jit
def _tilt_normaliser(p, j_lo, base, step, theta, work):
    """log sum_i p_i e^{theta ell_i} (any consistent value will do: see ``tilt``).

    For theta >= 0 the factors e^{theta (ell_i - ell_max)} <= 1 are generated by a
    recurrence re-anchored every MGF_ANCHOR entries; when that sum underflows, or for
    theta < 0, the log-space sum (a log and an exp per entry) is used.
    """
    m = p.shape[0]
    if theta >= 0.0:
        top = base + (j_lo + m - 1) * step
        r = math.exp(theta * step)
        acc = 0.0
        g = 1.0
        # factors below e^{-700} (a prefix) are left out: any normaliser is consistent
        i0 = _first_above(theta * step, m, 700.0)
        for i in range(i0, m):
            if (i - i0) % MGF_ANCHOR == 0:
                g = math.exp(theta * (base + (j_lo + i) * step - top))
            acc += p[i] * g
            g *= r
        if acc > 1e-250:
            return theta * top + math.log(acc)
    mx = -math.inf
    for i in range(m):
        if p[i] > 0.0:
            v = math.log(p[i]) + theta * (base + (j_lo + i) * step)
            work[i] = v
            if v > mx:
                mx = v
        else:
            work[i] = -math.inf
    acc = 0.0
    for i in range(m):
        acc += math.exp(work[i] - mx)
    return mx + math.log(acc)


@jit
def tilt(p, j_lo, base, step, theta, pess, t_out):
    """Tilted, normalised one-step masses t_i = p_i exp(theta ell_i - s), ell_i = base + (j_lo + i) step.

    Returns (s, mean, var, rho, dropped): the log normaliser s (any value is
    consistent, since untilted masses are recovered as t_i e^{s - theta ell_i}),
    the mean and variance of the tilted loss (window heuristics only), a bound
    rho on the relative rounding error of every t_i, and the untilted mass of
    high-loss entries left out because t_i < 1e-290 (pessimistic: the caller
    sends it to +inf).  Low-loss entries below 1e-290 are moved up to the
    first kept entry when ``pess`` (loss only grows) and dropped otherwise.
    """
    m = p.shape[0]
    s = _tilt_normaliser(p, j_lo, base, step, theta, t_out)
    s1 = 0.0
    s2 = 0.0
    tot = 0.0
    dropped = 0.0
    low = 0.0
    first = -1
    big = 0.0
    # the factors e^x, x = theta ell - s, by a re-anchored recurrence when they cannot overflow
    rec = theta >= 0.0 and theta * (base + (j_lo + m - 1) * step) - s < 700.0
    r = math.exp(theta * step)
    g = 1.0
    for i in range(m):
        ell = base + (j_lo + i) * step
        x = theta * ell - s
        if rec:
            if x < -700.0:
                g = 0.0  # (t < 1e-290 below: handled exactly from p)
            elif g == 0.0 or i % MGF_ANCHOR == 0:
                g = math.exp(x)
            else:
                g *= r
        if p[i] > 0.0:
            t = p[i] * (g if rec else math.exp(x))
            if t < 1e-290:
                if first < 0:
                    low += p[i]
                else:
                    dropped += p[i]
                t_out[i] = 0.0
                continue
            if first < 0:
                first = i
            if abs(x) > big:
                big = abs(x)
            t_out[i] = t
            tot += t
            s1 += t * ell
            s2 += t * ell * ell
        else:
            t_out[i] = 0.0
    if pess and low > 0.0 and first >= 0:
        add = low * math.exp(theta * (base + (j_lo + first) * step) - s) * (1.0 + 1e-12)
        t_out[first] += add
        tot += add
    mean = s1 / tot
    var = max(s2 / tot - mean * mean, 0.0)
    # exp of an argument with absolute error <= 2u(|x| + 1), times p: relative <= 2u(|x| + 2);
    # plus (MGF_ANCHOR + 1) u for the products of the recurrence
    rho = 2.0 * EPS64 * (big + 3.0) + (MGF_ANCHOR + 2.0) * EPS64
    return s, mean, var, rho, dropped


@jit
def fold(t, j_lo, n, out):
    """out[(j_lo + i) mod n] += t_i: circular convolution of folded arrays = folded linear convolution."""
    for i in range(t.shape[0]):
        if t[i] != 0.0:
            out[(j_lo + i) % n] += t[i]


@jit
def log_mgf_multi(t, j_lo, step, lams, out):
    """out[k] >= log sum_i t_i e^{lams[k] ell_i}, rounded up (for Chernoff tail bounds only).

    The factors e^{lam (ell_i - ell_ref)} (ell_ref = ell_max for lam > 0, ell_min for lam < 0,
    so they are <= 1) are generated by four interleaved recurrences with ratio e^{4 lam step},
    re-anchored by an exp every MGF_ANCHOR entries; entries whose factor is below e^{-700}
    are left out and charged as 1e-300 in all (the t_i sum to ~1). Rounding: each factor
    errs by <= (MGF_ANCHOR + 8) u plus 2u (|exp argument| + 1), the sum by <= m u relative;
    the log and the shift by 2u (|c| + |log sum|). A sum that is still tiny is recomputed in
    log space.
    """
    m = t.shape[0]
    kk = lams.shape[0]
    jref = np.empty(kk)
    acc = np.empty(kk)
    for k in range(kk):
        lam = lams[k]
        jref[k] = j_lo + m - 1 if lam > 0 else j_lo
        r = math.exp(lam * step)
        r4 = r * r * r * r
        # factors below e^{-700} (a prefix for lam > 0, a suffix for lam < 0) are left out
        if lam > 0:
            i0, i1 = _first_above(lam * step, m, 700.0), m
        else:
            i0, i1 = 0, m - _first_above(-lam * step, m, 700.0)
        # four interleaved recurrences (independent chains), re-anchored every MGF_ANCHOR
        a0 = a1 = a2 = a3 = 0.0
        g0 = g1 = g2 = g3 = 0.0
        i = i0
        while i + 4 <= i1:
            if (i - i0) % MGF_ANCHOR == 0:
                g0 = math.exp(lam * (j_lo + i - jref[k]) * step)
                g1 = g0 * r
                g2 = g1 * r
                g3 = g2 * r
            a0 += t[i] * g0
            a1 += t[i + 1] * g1
            a2 += t[i + 2] * g2
            a3 += t[i + 3] * g3
            g0 *= r4
            g1 *= r4
            g2 *= r4
            g3 *= r4
            i += 4
        while i < i1:
            a0 += t[i] * math.exp(lam * (j_lo + i - jref[k]) * step)
            i += 1
        acc[k] = (a0 + a1) + (a2 + a3) + 1e-300
    for k in range(kk):
        lam = lams[k]
        c = lam * jref[k] * step
        amax = abs(lam) * m * step
        if acc[k] > 1e-280:
            la = math.log(acc[k])
            out[k] = c + la + 2.0 * EPS64 * (m + MGF_ANCHOR + 2.0 * amax + abs(c) + abs(la) + 16.0)
        else:
            mx = -math.inf
            for i in range(m):
                if t[i] > 0.0:
                    v = math.log(t[i]) + lam * (j_lo + i) * step
                    if v > mx:
                        mx = v
            a = 0.0
            for i in range(m):
                if t[i] > 0.0:
                    a += math.exp(math.log(t[i]) + lam * (j_lo + i) * step - mx)
            out[k] = mx + math.log(a) + 2.0 * EPS64 * (m + 4.0 * (abs(mx) + amax + abs(c)) + 8.0)


@jit
def _cpow(b, c):
    """b^c (c >= 0) by exponentiation by squaring (the order of products the error bounds assume)."""
    acc = complex(1.0, 0.0)
    while c > 0:
        if c & 1:
            acc = acc * b
        c >>= 1
        if c > 0:
            b = b * b
    return acc


@jit
def power_product(spectra, counts, e2, out):
    """out_k = prod_i spectra[i, k]^counts[i] by exponentiation by squaring, with error sums.

    ``spectra`` (m x h) holds the computed half spectra (rfft) of the m folded
    one-step arrays, ``e2[i]`` a bound on the l2 norm (over the full spectrum)
    of the error of spectra[i].  With R_ik = |spectra[i, k]| + e2[i] (a bound
    on the exact and the computed modulus):

    * |prod y^T - prod yhat^T| <= sum_i T_i |e_ik| W_ik, W_ik = R_ik^{T_i - 1}
      prod_{j != i} R_jk^{T_j}; summed over the full spectrum with
      Cauchy-Schwarz this is <= sum_i T_i e2[i] sqrt(sum_k W_ik^2);
    * the squarings and products have relative error <= (1 + 3u)^{N} - 1,
      N = sum T_i (each complex product errs by <= 2.83u, Higham 2002, 3.6);
    * frequencies where prod R^T < e^{-740} are set to 0, error <= prod R^T.

    Returns (err_sum, z2): a bound on sum over the full spectrum of
    |out_k - exact_k| and the squared l2 norm of out over the full spectrum.
    Full-spectrum sums weight k = 1..h-2 (and h-1 when n is odd) twice.
    """
    wsum = np.zeros(spectra.shape[0])
    err, z2 = power_range(spectra, counts, e2, out, 0, spectra.shape[1], wsum)
    return err + power_weight_err(counts, e2, wsum), z2


@jit
def power_weight_err(counts, e2, wsum):
    """The input-error term sum_i T_i e2[i] sqrt(sum_k W_ik^2) of ``power_product``."""
    err = 0.0
    for i in range(counts.shape[0]):
        err += counts[i] * e2[i] * math.sqrt(wsum[i]) * (1.0 + 1e-12)
    return err


@jit
def power_range(spectra, counts, e2, out, k0, k1, wsum):
    """``power_product`` on the frequencies k0 <= k < k1: fills out[k0:k1], adds each part's
    sum of W_ik^2 to wsum and returns (the rounding and cut-off part of err_sum, z2)."""
    mcount = spectra.shape[0]
    h = spectra.shape[1]
    ntot = 0.0
    for i in range(mcount):
        ntot += counts[i]
    rel = math.expm1(ntot * math.log1p(3.0 * EPS64))
    err = 0.0
    z2 = 0.0
    logr = np.empty(mcount)
    for k in range(k0, k1):
        wk = 1.0 if (k == 0 or k == h - 1) else 2.0
        lr = 0.0
        for i in range(mcount):
            r = abs(spectra[i, k]) + e2[i]
            logr[i] = math.log(r) if r > 0.0 else -math.inf
            lr += counts[i] * logr[i]
        # bounds rounded up a little: exp/log of these sums err by far less than 1e-12 relative
        for i in range(mcount):
            if logr[i] > -math.inf:
                w = math.exp(lr - logr[i] + 1e-12 * (1.0 + abs(lr - logr[i])))
            else:
                w = 0.0 if counts[i] > 1 else math.exp(lr)
            wsum[i] += wk * w * w
        if lr < -740.0:
            out[k] = 0.0
            err += wk * math.exp(lr) + wk * 1e-300
            continue
        z = complex(1.0, 0.0)
        for i in range(mcount):
            z = z * _cpow(spectra[i, k], counts[i])
        out[k] = z
        mag = math.exp(lr + 1e-12 * (1.0 + abs(lr)))
        err += wk * (rel * mag + 1e-300 * ntot)
        z2 += wk * (z.real * z.real + z.imag * z.imag)
    return err, z2


@jit
def tilted_moments(p, j_lo, step, theta):
    """Mean and variance of the loss under masses p_i e^{theta ell_i} (normalised), ell_i = (j_lo + i) step."""
    _, m, v = tilted_stats(p, j_lo, step, theta)
    return m, v


@jit
def tilted_stats(p, j_lo, step, theta):
    """(log sum_i p_i e^{theta ell_i}, mean, variance) of the loss under those tilted masses,
    ell_i = (j_lo + i) step (heuristics only: saddle points and window sizes)."""
    mx = -math.inf
    for i in range(p.shape[0]):
        if p[i] > 0.0:
            v = theta * (j_lo + i) * step
            if v > mx:
                mx = v
    if mx == -math.inf:
        return -math.inf, 0.0, 0.0
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    # the factor e^{theta ell - mx} by a recurrence re-anchored every 32 points (when its ratio
    # cannot overflow in between)
    rec = abs(theta * step) < 20.0
    r = math.exp(theta * step) if rec else 1.0
    g = 1.0
    for i in range(p.shape[0]):
        if not rec or i % 32 == 0 or g < 1e-280:
            g = math.exp(max(theta * (j_lo + i) * step - mx, -745.0))
        if p[i] > 0.0:
            w = p[i] * g
            ell = (j_lo + i) * step
            s0 += w
            s1 += w * ell
            s2 += w * ell * ell
        g *= r
    if not s0 > 0.0:
        return -math.inf, 0.0, 0.0
    m = s1 / s0
    return mx + math.log(s0), m, max(s2 / s0 - m * m, 0.0)


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
    if theta * nc * big_h > 600.0:
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


@jit
def block_spectrum(spec_d, e2_d, spec_r, e2_r, ks, w, out):
    """out_f = sum_j w_j spec_d[j, f] spec_r[f]^ks[j] over half-spectrum frequencies f.

    ``e2_d[j]`` / ``e2_r`` bound the l2 norms (full spectrum) of the errors of spec_d[j] and
    spec_r.  With rd = |spec_d[j, f]| + e2_d[j] and rr = |spec_r[f]| + e2_r (bounds on the
    exact and computed moduli), the error of a term is at most e_d rr^k + rd k rr^(k-1) e_r;
    summed over the full spectrum with Cauchy-Schwarz that is
    e2_d sqrt(sum rr^2k) + k e2_r sqrt(sum (rd rr^(k-1))^2).  The k + 1 complex products err by
    <= 3u each (Higham 2002, 3.6) and the weighted sum by <= (terms + 2) u, relative to
    w_j rd rr^k.  Returns a bound on the full-spectrum l1 norm of the error of ``out``.
    """
    nt = spec_d.shape[0]
    h = spec_d.shape[1]
    ws_d = np.zeros(nt)
    ws_r = np.zeros(nt)
    rnd = 0.0
    for f in range(h):
        wk = 1.0 if (f == 0 or f == h - 1) else 2.0
        sr = spec_r[f]
        rr = abs(sr) + e2_r
        acc = complex(0.0, 0.0)
        for j in range(nt):
            k = ks[j]
            p = spec_d[j, f]
            rd = abs(p) + e2_d[j]
            rrk1 = 1.0
            for _ in range(k):
                p = p * sr
            for _ in range(k - 1):
                rrk1 *= rr
            rrk = rrk1 * rr if k > 0 else 1.0
            ws_d[j] += wk * rrk * rrk
            if k > 0:
                v = rd * rrk1
                ws_r[j] += wk * v * v
            acc += w[j] * p
            rnd += wk * w[j] * rd * rrk * (3.0 * (k + 2) + nt + 2.0) * EPS64
        out[f] = acc
    err = rnd * (1.0 + 1e-12) + 1e-300 * h
    for j in range(nt):
        e = e2_d[j] * math.sqrt(ws_d[j])
        if ks[j] > 0:
            e += ks[j] * e2_r * math.sqrt(ws_r[j])
        err += w[j] * e * (1.0 + 1e-12)
    return err


@jit
def power_series(spec, e2, c0, out):
    """out[j, f] = spec[f]^(c0 + j) for j = 0 .. out.shape[0] - 1 (c0 >= 1): the first by
    squaring, the others by one more product each; error bounds as ``power_product`` with one
    part (at most c0 + j complex products for power c0 + j).  Returns (err, z2): per power,
    a bound on the full-spectrum l1 norm of its error and its squared full-spectrum l2 norm."""
    nt = out.shape[0]
    h = spec.shape[0]
    err = np.zeros(nt)
    z2 = np.zeros(nt)
    wsum = np.zeros(nt)
    rel = np.empty(nt)
    for j in range(nt):
        rel[j] = math.expm1((c0 + j) * math.log1p(3.0 * EPS64))
    for f in range(h):
        wk = 1.0 if (f == 0 or f == h - 1) else 2.0
        s = spec[f]
        r = abs(s) + e2
        lr = math.log(r) if r > 0.0 else -math.inf
        acc = _cpow(s, c0)
        # r^(c0 - 1) rounded up (the 1e-12 margin covers the few products that follow)
        if lr > -math.inf:
            a1 = (c0 - 1) * lr
            w = math.exp(a1 + 1e-12 * (1.0 + abs(a1)))
        else:
            w = 1.0 if c0 == 1 else 0.0
        for j in range(nt):
            mag = w * r * (1.0 + 4.0 * EPS64)  # >= r^(c0 + j)
            wsum[j] += wk * w * w
            if mag < 1e-300:
                out[j, f] = 0.0
                err[j] += wk * (mag + 1e-300)
            else:
                out[j, f] = acc
                err[j] += wk * (rel[j] * mag + 1e-300 * (c0 + j))
                z2[j] += wk * (acc.real * acc.real + acc.imag * acc.imag)
            acc = acc * s
            w = mag
    for j in range(nt):
        err[j] += (c0 + j) * e2 * math.sqrt(wsum[j]) * (1.0 + 1e-12)
    return err, z2
