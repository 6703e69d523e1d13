"""Log-masses of the loss bins of one step, each with a bound on its rounding error.

The bins are the z-intervals between shared floating-point edges, so they partition the line
exactly; ``step_bins`` returns with every bin's log-masses a bound on their rounding error
(midpoint expansion: a few u (c^2 + |log 2h| + 1); log-CDF differences: ~200 u |log mass|).
``discretise`` inflates (pessimistic) or deflates (optimistic) the masses by that bound plus
``MASS_SLACK``, so rounding never breaks the inequalities of the discretisation.
"""

import math

from .._jit import jit
from ..logmath import EPS64, LOG_SQRT_2PI, NEG_INF, log_add, log_ndtr, log_ndtr_diff, log_normal_pdf
from .losses import _z_of_loss, replace_z, z_of_loss_with

# Relative slack on each bin mass (plus 256 u |log mass|, see mass_slack): covers the errors
# of _normal_logmass and step_bins.
MASS_SLACK = 1e-12
# Largest h (1 + |c|) (standardised half-width, centre) for the midpoint expansion.
MIDPOINT_MAX = 0.02

__all__ = ["MASS_SLACK", "mass_slack", "step_bins", "addremove_tails", "replace_bins", "replace_tails"]


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
    b = z_of_loss_with(k_lo * step, s2, q, l1q, log_q)
    for i in range(nb):
        a = b
        b = z_of_loss_with((k_lo + i + 1) * step, s2, q, l1q, log_q)
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
        return (_tail_logmass(-(j_lo * step), sigma, q, bool(True)),
                _head_logmass(-(j_hi * step), sigma, q, bool(True)))
    return _head_logmass(j_lo * step, sigma, q, bool(False)), _tail_logmass(j_hi * step, sigma, q, bool(False))


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
