"""log A_alpha of one step of the Poisson-subsampled Gaussian mechanism: integer orders by the
binomial sum (and a cheap lower bound for the order search), real orders by the trapezoidal
rule, and the two-sided series kept as a cross-check (``sgmfast._kernels.rdp`` says which is
used where)."""

import math

import numpy as np

from .._jit import jit
from ..logmath import LOG_SQRT_2PI, NEG_INF, SQRT2, log_add, log_expm1, log_ndtr


# Trapezoidal rule: target log of the relative discretisation error (e^-42 ~ 6e-19).
_TRAP_LOG_ERR = 42.0
# Stop the upper scan once the integrand is this far (nats) below its running maximum.
_TAIL_NATS = 50.0
_MAX_NODES = 20_000_000
#: Most quadrature nodes the order optimisation spends on fractional orders (else: the chord
#: between the integer orders around them, ``chord.interpolated_min``).
QUAD_CHEAP = 50_000
#: Largest order searched (exact integer sums reach it; beyond, only looser bounds would be found).
ALPHA_MAX = 5000.0
_INV_FACT = np.array([1.0 / math.factorial(n) for n in range(20)])
# log k! for k <= _LOG_FACT_MAX (lgamma is accurate to a few ulps): binomial coefficients of the
# integer-order sums by three lookups instead of one log per term.
_LOG_FACT_MAX = 5000
_LOG_FACT = np.array([math.lgamma(k + 1.0) for k in range(_LOG_FACT_MAX + 1)])


@jit
def log_a_int(q, sigma, alpha):
    """log A_alpha for integer alpha >= 1 (exact finite sum).

    A - 1 = sum_{k=2}^{alpha} C(alpha, k) (1-q)^(alpha-k) q^k expm1((k^2 - k)/(2 sigma^2)),
    which follows from the binomial expansion of E_mu0[(1 - q + q mu1/mu0)^alpha] with
    E_mu0[(mu1/mu0)^k] = exp((k^2 - k)/(2 sigma^2)) and sum_k C(alpha,k)(1-q)^(alpha-k) q^k = 1.
    All terms are positive, so the log-sum-exp has no cancellation.
    """
    n = int(alpha)
    if n < 2:
        return 0.0
    if q == 1.0:
        return alpha * (alpha - 1.0) / (2.0 * sigma * sigma)
    return _log_a_int_lower(q, sigma, alpha, math.inf)


# Below this |argument| the cancelling closed forms of _h1/_h2 lose more than a few ulps, and
# the Taylor series converges fast: 13 terms leave a relative remainder below 1e-19 at 0.1.
_SERIES_MAX = 0.1
_SERIES_TERMS = 13


@jit
def _h1(ell):
    """ell e^ell - e^ell + 1 >= 0: ell^2 sum_k (k + 1) ell^k / (k + 2)! near 0 (Horner),
    the closed form elsewhere (relative error below 1e-13 for |ell| >= 0.1: 4.1e-14 measured at
    ell = -0.105, where 1 - e^ell (1 - ell) cancels to ~ell^2 / 2; tests/test_rounding_constants.py)."""
    if abs(ell) < _SERIES_MAX:
        s = 0.0
        for k in range(_SERIES_TERMS - 1, -1, -1):
            s = s * ell + (k + 1.0) * _INV_FACT[k + 2]
        return ell * ell * s
    return 1.0 - math.exp(ell) * (1.0 - ell)


@jit
def _h2(u):
    """e^u - 1 - u >= 0: u^2 sum_k u^k / (k + 2)! near 0 (Horner), expm1(u) - u elsewhere."""
    if abs(u) < _SERIES_MAX:
        s = 0.0
        for k in range(_SERIES_TERMS - 1, -1, -1):
            s = s * u + _INV_FACT[k + 2]
        return u * u * s
    return math.expm1(u) - u


@jit
def _log_h1(ell):
    """log(ell e^ell - e^ell + 1): log of ``_h1``, with its large-ell form where e^ell overflows."""
    if ell > 700.0:
        return ell + math.log(ell - 1.0 + math.exp(-ell))
    return math.log(_h1(ell))


@jit
def _log_h2(u):
    """log(e^u - 1 - u): log of ``_h2``, with its large-u form where e^u overflows."""
    if u > 700.0:
        return u + math.log1p(-(1.0 + u) * math.exp(-u))
    return math.log(_h2(u))


@jit
def _log_g(ell, alpha):
    """log g where g = e^(alpha ell) - 1 - alpha (e^ell - 1) >= 0.

    With beta = alpha - 1 we use the identity
        g = beta * h1(ell) + e^ell * h2(beta ell),
    h1(ell) = ell e^ell - e^ell + 1 >= 0 and h2(u) = e^u - 1 - u >= 0, so g is a sum of two
    non-negative terms and keeps full relative precision for alpha -> 1 and ell -> 0.
    """
    if ell == 0.0:
        return NEG_INF
    beta = alpha - 1.0
    return log_add(math.log(beta) + _log_h1(ell), ell + _log_h2(beta * ell))


@jit
def _log_ratio(z, log_q, log_1mq, q, inv2s2):
    """ell(z) = log(mu(z)/mu0(z)) = log(1 - q + q exp((2z - 1)/(2 s^2)))."""
    w = (2.0 * z - 1.0) * inv2s2
    if w < 700.0:
        return math.log1p(q * math.expm1(w))
    return log_q + w + math.log1p(math.exp(log_1mq - log_q - w))


@jit
def trap_step(sigma):
    """Node spacing h of the trapezoidal rule for log_a_quad.

    On the real line the trapezoidal rule's error for an integrand analytic in the strip
    |Im z| < d and bounded by M there is about 2 M exp(-2 pi d / h). Here d = pi sigma^2
    (the branch points of (1 - q + q e^w)^alpha sit at Im z = pi sigma^2), and the Gaussian
    factor grows like exp(y^2/(2 sigma^2)) inside the strip. Balancing both gives the two
    conditions below, each for an error below exp(-42).
    """
    s2 = sigma * sigma
    pi2 = math.pi * math.pi
    h_gauss = sigma * math.pi * math.sqrt(2.0 / _TRAP_LOG_ERR)
    h_strip = 2.0 * pi2 * s2 / (_TRAP_LOG_ERR + 0.5 * pi2 * s2)
    return min(h_gauss, h_strip)


@jit
def _quad_lower_end(sigma):
    """Lower end of the quadrature: the integrand there is phi(z) times at most g(log(1 - q)),
    and A - 1 >= alpha (alpha - 1) q^2 expm1(1/sigma^2) / 2-ish, so the neglected tail relative
    to the total is below exp(-40) once Phi(z/sigma) < exp(-40) / max(1, sigma^2)."""
    return -sigma * math.sqrt(2.0 * (40.0 + 2.0 * math.log(max(sigma, 1.0))))


@jit
def quad_setup(q, sigma, alpha):
    """What every trapezoidal pass over z needs at order alpha: log q, log(1 - q), 1 / (2 sigma^2),
    the spacing, the first node and the point past which the scan may stop."""
    return (math.log(q), math.log1p(-q), 0.5 / (sigma * sigma), trap_step(sigma), _quad_lower_end(sigma),
            max(alpha, 2.0) + sigma)


@jit
def _log_a_quad_logspace(q, sigma, alpha):
    log_q, log_1mq, inv2s2, h, z, z_past = quad_setup(q, sigma, alpha)
    m = NEG_INF
    s = 0.0
    nodes = 0
    while True:
        ell = _log_ratio(z, log_q, log_1mq, q, inv2s2)
        lf = -0.5 * (z / sigma) ** 2 + _log_g(ell, alpha)
        if lf > m:
            s = s * math.exp(m - lf) + 1.0
            m = lf
        elif lf > NEG_INF:
            s += math.exp(lf - m)
        if z > z_past and lf < m - _TAIL_NATS:
            break
        nodes += 1
        if nodes > _MAX_NODES:
            return math.inf
        z += h
    if m == NEG_INF:
        return NEG_INF
    return m + math.log(s) + math.log(h) - LOG_SQRT_2PI - math.log(sigma)


@jit
def log_a_quad(q, sigma, alpha):
    """log A_alpha for real alpha > 1 by quadrature of a cancellation-free integrand.

    A - 1 = E_{z ~ mu0}[g(ell(z))], g as in ``_log_g``: subtracting alpha (e^ell - 1) changes
    nothing in expectation (E_mu0[mu/mu0 - 1] = 0) but makes the integrand non-negative and
    second order in q, so A - 1 comes out with full relative precision even at q = 1e-8 where
    A - 1 ~ 1e-20 (summing A itself, as the MTZ series does, cannot resolve that).

    The integral over z is taken by the trapezoidal rule with spacing ``trap_step(sigma)``,
    which converges geometrically for analytic integrands; nodes run from
    ``_quad_lower_end(sigma)`` upward until past max(alpha, 2) (every mode of the integrand
    lies below it) and the integrand is 50 nats below its maximum. The sum runs in linear
    scale when it can (a few transcendental calls per node) and falls back to log scale when
    values leave the safe float range. Returns +inf if the node budget is exhausted.
    """
    if q == 1.0:
        return alpha * (alpha - 1.0) / (2.0 * sigma * sigma)
    log_q, log_1mq, inv2s2, h, z, z_past = quad_setup(q, sigma, alpha)
    beta = alpha - 1.0
    fmax = 0.0
    s = 0.0
    nodes = 0
    cut = math.exp(-_TAIL_NATS)
    ok = True
    while True:
        ell = _log_ratio(z, log_q, log_1mq, q, inv2s2)
        if alpha * ell > 600.0:
            ok = False
            break
        f = math.exp(-0.5 * (z / sigma) ** 2) * (beta * _h1(ell) + math.exp(ell) * _h2(beta * ell))
        s += f
        if f > fmax:
            fmax = f
        if z > z_past and f < cut * fmax:
            break
        nodes += 1
        if nodes > _MAX_NODES:
            return math.inf
        z += h
    if ok and 1e-250 < fmax and s < 1e300:
        log_am1 = math.log(s) + math.log(h) - LOG_SQRT_2PI - math.log(sigma)
    else:
        log_am1 = _log_a_quad_logspace(q, sigma, alpha)
    if log_am1 == NEG_INF:
        return 0.0
    if log_am1 > 0.0:
        return log_am1 + math.log1p(math.exp(-log_am1))
    return math.log1p(math.exp(log_am1))


@jit
def log_a_jensen(q, sigma, alpha):
    """An upper bound on log A_alpha in closed form, for any real alpha > 1:
    (1 - q + q r)^alpha <= 1 - q + q r^alpha (x^alpha is convex) and E_mu0[r^alpha] =
    e^{alpha (alpha - 1) / (2 sigma^2)} (the Gaussian's moment), so
    log A_alpha <= log(1 + q expm1(alpha (alpha - 1) / (2 sigma^2))).  Loose by at most
    (alpha - 1) log(1/q) where e^x dominates (small sigma), where the quadrature is costly."""
    x = alpha * (alpha - 1.0) / (2.0 * sigma * sigma)
    if x < 700.0:
        return math.log1p(q * math.expm1(x))
    return x + math.log(q) + math.log1p((1.0 - q) / q * math.exp(-x))


@jit
def log_a(q, sigma, alpha):
    """log A_alpha: closed form at q = 1, binomial sum at integer alpha, quadrature otherwise."""
    if q == 1.0:
        return alpha * (alpha - 1.0) / (2.0 * sigma * sigma)
    if alpha == math.floor(alpha) and alpha <= 5000.0:
        return log_a_int(q, sigma, alpha)
    return log_a_quad(q, sigma, alpha)


@jit
def _log_erfc_half(x):
    """log(erfc(x)/2) = log Phi(-sqrt(2) x)."""
    return log_ndtr(-SQRT2 * x)


@jit
def log_a_series(q, sigma, alpha, max_terms):
    """log A_alpha by the two-sided series of MTZ Sec. 3.3 (Case II), signs handled.

    Split the integral at z0 = sigma^2 log(1/q - 1) + 1/2 (where q mu1 = (1 - q) mu0) and expand
    mu^alpha by the generalised binomial series on each side:
      A = sum_k C(alpha,k) (1-q)^(alpha-k) q^k e^{(k^2-k)/(2 s^2)} Phi((z0 - k)/s)
        + sum_k C(alpha,k) q^(alpha-k) (1-q)^k e^{(j^2-j)/(2 s^2)} Phi((j - z0)/s),  j = alpha - k.
    C(alpha, k) changes sign once k > alpha, so positive and negative parts are accumulated
    separately in log space and subtracted at the end. Stops when the current terms of both
    series fall below 1e-17 of the running total for 4 successive k past alpha + |z0|/... ;
    returns +inf if that does not happen within ``max_terms`` terms (never a silent truncation).
    For q = 1 returns the closed form. Requires 0 < q < 1 otherwise.
    """
    if q == 1.0:
        return alpha * (alpha - 1.0) / (2.0 * sigma * sigma)
    log_q = math.log(q)
    log_1mq = math.log1p(-q)
    s2 = sigma * sigma
    z0 = s2 * (log_1mq - log_q) + 0.5
    pos = NEG_INF
    neg = NEG_INF
    log_binom = 0.0  # log |C(alpha, 0)|
    sign = 1.0
    quiet = 0
    for k in range(max_terms):
        if k > 0:
            r = (alpha - k + 1.0) / k
            if r < 0.0:
                sign = -sign
            log_binom += math.log(abs(r))
        j = alpha - k
        t0 = (log_binom + (alpha - k) * log_1mq + k * log_q + (k * k - k) / (2.0 * s2)
              + _log_erfc_half((k - z0) / (SQRT2 * sigma)))
        t1 = (log_binom + (alpha - k) * log_q + k * log_1mq + (j * j - j) / (2.0 * s2)
              + _log_erfc_half((z0 - j) / (SQRT2 * sigma)))
        t = log_add(t0, t1)
        if sign > 0.0:
            pos = log_add(pos, t)
        else:
            neg = log_add(neg, t)
        total = pos
        if k > alpha and t < total + math.log(1e-17):
            quiet += 1
            if quiet >= 4:
                if neg >= pos:
                    return math.nan
                res = pos + math.log1p(-math.exp(neg - pos))
                return res
        else:
            quiet = 0
    return math.inf


@jit
def log_a_closed_form_bound(q, sigma, alpha):
    """log of the closed-form bound of MTZ Theorem 11, or +inf where its conditions fail.

    Theorem 11: if q <= 1/5, sigma >= 4 and
        1 < alpha <= sigma^2 L / 2 - 2 log sigma   and
        alpha <= (sigma^2 L^2 / 2 - log 5 - 2 log sigma) / (L + log(q alpha) + 1/(2 sigma^2)),
    with L = log(1 + 1/(q (alpha - 1))), then the RDP at order alpha is at most
    2 q^2 alpha / sigma^2, i.e. log A_alpha <= 2 q^2 alpha (alpha - 1) / sigma^2.
    A cheap check, never used by the accountant.
    """
    if not (q <= 0.2 and sigma >= 4.0 and alpha > 1.0):
        return math.inf
    L = math.log1p(1.0 / (q * (alpha - 1.0)))
    s2 = sigma * sigma
    if alpha > 0.5 * s2 * L - 2.0 * math.log(sigma):
        return math.inf
    den = L + math.log(q * alpha) + 1.0 / (2.0 * s2)
    num = 0.5 * s2 * L * L - math.log(5.0) - 2.0 * math.log(sigma)
    if den > 0.0 and alpha > num / den:
        return math.inf
    return 2.0 * q * q * alpha * (alpha - 1.0) / s2



@jit
def _log_a_int_lower(q, sigma, alpha, cap):
    """A lower bound on log A_alpha (integer alpha >= 2, 0 < q < 1) that is exact unless it
    is at least ``cap`` (``cap = inf``: the exact sum of ``log_a_int``).

    The binomial sum is taken from k = alpha downward (the largest terms come first where A
    is large) and stops once one term's log reaches ``cap``, since log A >= log(A - 1) >= the
    log of any term. log C(n, k) comes from the log-factorial table (an incremental log per
    term above it); the sum is kept as m + log s with a running maximum m, one exp per term;
    log(e^x - 1) = x to within e^-40 relative once x > 40.
    """
    n = int(alpha)
    log_q = math.log(q)
    log_1mq = math.log1p(-q)
    inv2s2 = 0.5 / (sigma * sigma)
    table = n <= _LOG_FACT_MAX
    log_binom = 0.0  # C(alpha, alpha)
    m = NEG_INF
    s = 0.0
    for k in range(n, 1, -1):
        if table:
            log_binom = _LOG_FACT[n] - _LOG_FACT[k] - _LOG_FACT[n - k]
        x = (k * k - k) * inv2s2
        t = log_binom + (alpha - k) * log_1mq + k * log_q + (x if x > 40.0 else log_expm1(x))
        if t >= cap:
            return t
        if t > m:
            s = s * math.exp(m - t) + 1.0
            m = t
        else:
            s += math.exp(t - m)
        if not table:
            log_binom += math.log(k / (alpha - k + 1.0))
    acc = m + math.log(s)
    if acc > 0.0:
        return acc + math.log1p(math.exp(-acc))
    return math.log1p(math.exp(acc))
