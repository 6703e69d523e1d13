"""RDP of the Poisson-subsampled Gaussian mechanism, and its conversion to (epsilon, delta).

Notation (sensitivity 1): mu0 = N(0, s^2), mu1 = N(1, s^2), mu = (1 - q) mu0 + q mu1,
A_alpha = E_{z ~ mu0}[(mu(z)/mu0(z))^alpha]; one step is (alpha, log(A_alpha)/(alpha - 1))-RDP
(Mironov, Talwar & Zhang 2019, "Renyi differential privacy of the sampled Gaussian
mechanism", arXiv:1908.10530, Theorems 4 and 5).

Three evaluations of log A_alpha live here:

* ``log_a_int`` -- integer alpha: the finite binomial sum (MTZ Sec. 3.3, Case I) written for
  A - 1 with ``expm1`` so log A = log1p(A - 1) keeps full relative precision for tiny q.
* ``log_a_quad`` -- any real alpha > 1: A - 1 as the integral of a non-negative integrand,
  by the trapezoidal rule on the real line (see its docstring). This is the engine for
  fractional orders.
* ``log_a_series`` -- fractional alpha: the two-sided series of MTZ Sec. 3.3, Case II, summed
  with signs in log space. It computes A itself (a sum of O(1) terms), so it cannot resolve
  log A below ~1e-16 absolute; it is kept as an independent cross-check and returns +inf
  when it does not converge.

Status values: kernels return NaN or +inf rather than raising; +inf is the conservative
answer for an upper bound.
"""

import math

import numba
import numpy as np

from ._jit import jit, jit_pair
from .logmath import LOG_SQRT_2PI, NEG_INF, SQRT2, log_add, log_expm1, log_ndtr

# Trapezoidal rule: target log of the relative discretisation error (e^-42 ~ 6e-19).
_TRAP_LOG_ERR = 42.0
# Stop the upper scan once the integrand is this far (nats) below its running maximum.
_TAIL_NATS = 50.0
_MAX_NODES = 20_000_000
#: Most quadrature nodes the order optimisation spends on fractional orders (else: integers only).
QUAD_CHEAP = 200_000
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
    the closed form elsewhere (relative error below 1e-14 for |ell| >= 0.1)."""
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
def _log_a_quad_logspace(q, sigma, alpha):
    log_q = math.log(q)
    log_1mq = math.log1p(-q)
    inv2s2 = 0.5 / (sigma * sigma)
    h = trap_step(sigma)
    z = _quad_lower_end(sigma)
    z_past = max(alpha, 2.0) + sigma
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
    log_q = math.log(q)
    log_1mq = math.log1p(-q)
    inv2s2 = 0.5 / (sigma * sigma)
    h = trap_step(sigma)
    z = _quad_lower_end(sigma)
    z_past = max(alpha, 2.0) + sigma
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


# ---------------------------------------------------------------------------------------
# Schedules and the conversion to (epsilon, delta)
# ---------------------------------------------------------------------------------------

@jit
def schedule_rdp(alpha, qs, sigmas, counts):
    """Total RDP at order alpha of a schedule: sum_i counts_i * log A_alpha(q_i, s_i) / (alpha - 1)."""
    total = 0.0
    for i in range(qs.shape[0]):
        if counts[i] > 0.0:
            total += counts[i] * log_a(qs[i], sigmas[i], alpha)
    return total / (alpha - 1.0)


@jit
def eps_from_rdp(alpha, rdp, log_delta):
    """epsilon from (alpha, rdp)-RDP at delta, clipped at 0.

    eps = rdp + log1p(-1/alpha) - (log delta + log alpha)/(alpha - 1) (Balle et al. 2020,
    Thm 21; Canonne, Kamath & Steinke 2020, Prop. 12); and eps = 0 when
    sqrt(1 - e^-rdp) <= delta, because delta(0) = TV <= sqrt(1 - e^-KL) (Bretagnolle-Huber)
    and KL <= rdp at every order alpha > 1.
    """
    if -math.expm1(-rdp) <= math.exp(2.0 * log_delta):
        return 0.0
    e = rdp + math.log1p(-1.0 / alpha) - (log_delta + math.log(alpha)) / (alpha - 1.0)
    return max(e, 0.0)


@jit
def log_delta_from_rdp(alpha, rdp, eps):
    """log delta from (alpha, rdp)-RDP at epsilon, the inverse of ``eps_from_rdp``:
    delta = exp((alpha - 1)(rdp - eps)) (1 - 1/alpha)^(alpha - 1) / alpha.

    Neither clipped at delta = 1 (log 0) nor by the Bretagnolle-Huber bound sqrt(1 - e^-rdp)
    (``bh_log_delta``): the optimiser over orders needs the slope where the bound exceeds 1
    (a flat 0 there stopped its scan far from the optimum); callers apply both."""
    if not rdp > 0.0:
        return NEG_INF
    return (alpha - 1.0) * (rdp - eps + math.log1p(-1.0 / alpha)) - math.log(alpha)


@jit
def bh_log_delta(rdp):
    """log sqrt(1 - e^-rdp): delta(eps) <= delta(0) = TV <= sqrt(1 - e^-KL) (Bretagnolle-Huber),
    KL <= rdp at every order; -inf for rdp <= 0."""
    if not rdp > 0.0:
        return NEG_INF
    return 0.5 * math.log(-math.expm1(-rdp))


@jit
def _from_rdp(alpha, r, target, mode):
    """The objective at order alpha from its total RDP r: mode 0 epsilon at log delta
    ``target``, mode 1 log delta at epsilon ``target``; +inf for a non-finite r."""
    if not r < math.inf:
        return math.inf
    if mode == 0:
        return eps_from_rdp(alpha, r, target)
    return log_delta_from_rdp(alpha, r, target)


@jit
def _objective(alpha, qs, sigmas, counts, target, mode):
    """mode 0: epsilon at log-delta ``target``; mode 1: log delta at epsilon ``target``."""
    return _from_rdp(alpha, schedule_rdp(alpha, qs, sigmas, counts), target, mode)


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


@jit
def _objective_above(alpha, qs, sigmas, counts, target, mode, bound):
    """``_objective``, or some value >= ``bound`` when the objective is >= ``bound``.

    For one mechanism at an integer order, the binomial sum stops as soon as a single term
    proves the objective (increasing in the RDP in both modes) reaches ``bound``. Used where
    only "better than the best so far?" matters; a value returned below ``bound`` is exact.
    """
    if qs.shape[0] != 1 or not (0.0 < qs[0] < 1.0) or alpha != math.floor(alpha) \
            or alpha > 5000.0 or not counts[0] > 0.0 or not bound < math.inf:
        return _objective(alpha, qs, sigmas, counts, target, mode)
    am1 = alpha - 1.0
    if mode == 0:
        r_cap = bound - math.log1p(-1.0 / alpha) + (target + math.log(alpha)) / am1
    else:
        # log delta is also capped by 0.5 log(1 - e^-r) < 0, so no RDP proves it >= 0.
        if not bound < 0.0:
            return _objective(alpha, qs, sigmas, counts, target, mode)
        r_cap = max((bound + math.log(alpha)) / am1 + target - math.log1p(-1.0 / alpha),
                    -math.log(-math.expm1(2.0 * bound)))
    cap = r_cap * am1 / counts[0]
    la = _log_a_int_lower(qs[0], sigmas[0], alpha, max(cap, 0.0) + 1e-9 * abs(cap) + 1e-300)
    v = _from_rdp(alpha, counts[0] * la / am1, target, mode)
    if la >= cap:
        return max(v, bound)
    return v


# Bracketing grid: integers on a roughly geometric grid (exact, cheap binomial sums), scanned
# upward; fractional orders below 2 are scanned downward only when the best integer is 2.
DEFAULT_GRID = np.array(
    [2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 10.0, 12.0, 14.0, 16.0, 20.0, 24.0, 28.0, 32.0, 40.0,
     48.0, 56.0, 64.0, 80.0, 96.0, 112.0, 128.0, 160.0, 192.0, 224.0, 256.0, 320.0, 384.0,
     448.0, 512.0, 640.0, 768.0, 896.0, 1024.0, 1280.0, 1536.0, 2048.0, 3072.0, 4096.0]
)
LOW_GRID = np.array([1.75, 1.5, 1.25, 1.1, 1.05, 1.02, 1.01, 1.005, 1.002, 1.001])


@jit
def prepare_nodes(q, sigma, alpha_hi, out_w, out_h1, out_e, out_l):
    """Tabulate the alpha-independent parts of the ``log_a_quad`` integrand for every order
    alpha <= alpha_hi: weights phi(z) h / (sigma sqrt(2 pi)), h1(ell), e^ell and ell at the nodes.

    Returns the node count, or -1 if the linear-scale conditions of ``log_a_quad`` fail at
    ``alpha_hi`` (the caller then evaluates each order directly). The node range is the one
    ``log_a_quad`` would use at ``alpha_hi``, which covers smaller orders too: their integrand
    has every mode below max(alpha, 2) as well and decays at least as fast beyond it.
    """
    log_q = math.log(q)
    log_1mq = math.log1p(-q)
    inv2s2 = 0.5 / (sigma * sigma)
    h = trap_step(sigma)
    z = _quad_lower_end(sigma)
    z_past = max(alpha_hi, 2.0) + sigma
    beta = alpha_hi - 1.0
    scale = h / (sigma * math.exp(LOG_SQRT_2PI))
    fmax = 0.0
    cut = math.exp(-_TAIL_NATS)
    cap = out_w.shape[0]
    k = 0
    while True:
        if k >= cap:
            return -1
        ell = _log_ratio(z, log_q, log_1mq, q, inv2s2)
        if alpha_hi * ell > 600.0:
            return -1
        wz = math.exp(-0.5 * (z / sigma) ** 2) * scale
        h1 = _h1(ell)
        el = math.exp(ell)
        f = wz * (beta * h1 + el * _h2(beta * ell))
        out_w[k] = wz
        out_h1[k] = h1
        out_e[k] = el
        out_l[k] = ell
        k += 1
        if f > fmax:
            fmax = f
        if z > z_past and f < cut * fmax:
            break
        z += h
    if not fmax > 1e-250:
        return -1
    return k


@jit
def log_a_from_nodes(alpha, n, w, h1, e, ell):
    """log A_alpha from tabulated nodes (see ``prepare_nodes``): one expm1 per node."""
    beta = alpha - 1.0
    s = 0.0
    for k in range(n):
        s += w[k] * (beta * h1[k] + e[k] * _h2(beta * ell[k]))
    if not s > 0.0:
        return 0.0
    return math.log1p(s)


@jit
def _node_cap(sigma, alpha_hi):
    h = trap_step(sigma)
    return int(min((max(alpha_hi, 2.0) + 16.0 * sigma - _quad_lower_end(sigma)) / h, 4e18)) + 8


@jit
def _quad_cheap(qs, sigmas, counts, alpha_hi):
    """Whether every mechanism's fractional orders up to alpha_hi need at most QUAD_CHEAP nodes."""
    for i in range(qs.shape[0]):
        if qs[i] < 1.0 and counts[i] > 0.0 and _node_cap(sigmas[i], alpha_hi) > QUAD_CHEAP:
            return False
    return True


@jit
def _objective_nodes(alpha, qs, sigmas, counts, ns, W, H1, E, L, target, mode):
    """``_objective`` with fractional orders evaluated from tabulated nodes where available."""
    total = 0.0
    for i in range(qs.shape[0]):
        if counts[i] <= 0.0:
            continue
        if ns[i] >= 0:
            la = log_a_from_nodes(alpha, ns[i], W[i], H1[i], E[i], L[i])
        else:
            la = log_a(qs[i], sigmas[i], alpha)
        total += counts[i] * la
    return _from_rdp(alpha, total / (alpha - 1.0), target, mode)


@jit
def _log_a_derivs(alpha, n, w, h1, e, ell):
    """(log A, d/dalpha log A, d2/dalpha2 log A) from tabulated nodes (see ``prepare_nodes``).

    With beta = alpha - 1, A - 1 = sum w (beta h1 + e h2(beta ell)), so
    A' = sum w (h1 + e ell expm1(beta ell)) and A'' = sum w e ell^2 e^(beta ell): sums of
    non-negative terms, no cancellation."""
    beta = alpha - 1.0
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    for k in range(n):
        bl = beta * ell[k]
        em = math.expm1(bl) if abs(bl) >= _SERIES_MAX else bl + _h2(bl)
        s0 += w[k] * (beta * h1[k] + e[k] * _h2(bl))
        s1 += w[k] * (h1[k] + e[k] * ell[k] * em)
        s2 += w[k] * e[k] * ell[k] * ell[k] * (1.0 + em)
    a = 1.0 + max(s0, 0.0)
    d1 = s1 / a
    return math.log1p(max(s0, 0.0)), d1, s2 / a - d1 * d1


@jit
def _newton_min(lo, hi, x, fx, count, n, w, h1, e, ell, target, mode, xtol):
    """Minimise the objective of one mechanism over real alpha in (lo, hi) by safeguarded
    Newton steps on its derivative (analytic from the nodes), starting from the best integer
    x with value fx. Returns the best (value, alpha) evaluated; any alpha is a valid bound,
    so the iteration only has to find a good one. mode 0: epsilon at log delta ``target``
    (f' = r' + (target + log a)/(a - 1)^2); mode 1: log delta at epsilon ``target``
    (f' = T (log A)' - target + log(1 - 1/a))."""
    best_f = fx
    best_x = x
    a = x
    for _ in range(12):
        la, d1, d2 = _log_a_derivs(a, n, w, h1, e, ell)
        am1 = a - 1.0
        f = _from_rdp(a, count * la / am1, target, mode)
        if mode == 0:
            c = target + math.log(a)
            g = count * (d1 / am1 - la / (am1 * am1)) + c / (am1 * am1)
            h = count * (d2 / am1 - 2.0 * d1 / (am1 * am1) + 2.0 * la / (am1 * am1 * am1)) \
                + 1.0 / (a * am1 * am1) - 2.0 * c / (am1 * am1 * am1)
        else:
            g = count * d1 - target + math.log1p(-1.0 / a)
            h = count * d2 + 1.0 / (a * am1)
        if f < best_f:
            best_f = f
            best_x = a
        if g > 0.0:
            hi = a
        else:
            lo = a
        step = -g / h if h > 0.0 else 0.0
        nxt = a + step
        if not (h > 0.0 and lo < nxt < hi):
            nxt = 0.5 * (lo + hi)  # bisection on the sign of f'
        if abs(nxt - a) <= xtol * am1 or hi - lo <= xtol * am1:
            # evaluate the final point too: it is what the step was heading for
            if nxt != a:
                la = log_a_from_nodes(nxt, n, w, h1, e, ell)
                f = _from_rdp(nxt, count * la / (nxt - 1.0), target, mode)
                if f < best_f:
                    best_f = f
                    best_x = nxt
            break
        a = nxt
    return best_f, best_x


@jit
def _brent_min(lo, hi, x, fx, w, fw, v, fv, e0, qs, sigmas, counts, ns, W, H1, E, L, target, mode,
               xtol):
    """Brent's minimisation (golden section + parabolic steps) on [lo, hi] from a best point x,
    the second best w and the third v (w = v = x and e0 = 0 when only x is known). With a
    bracketing triple and e0 the bracket width, the first step is already parabolic."""
    cgold = 0.3819660112501051
    a = lo
    b = hi
    d = 0.0
    e = e0
    for _ in range(80):
        xm = 0.5 * (a + b)
        tol1 = xtol * (x - 1.0) + 1e-12
        tol2 = 2.0 * tol1
        if abs(x - xm) <= tol2 - 0.5 * (b - a):
            break
        golden = True
        if abs(e) > tol1:
            r = (x - w) * (fx - fv)
            qq = (x - v) * (fx - fw)
            p = (x - v) * qq - (x - w) * r
            qq = 2.0 * (qq - r)
            if qq > 0.0:
                p = -p
            qq = abs(qq)
            etemp = e
            e = d
            if not (abs(p) >= abs(0.5 * qq * etemp) or p <= qq * (a - x) or p >= qq * (b - x)):
                d = p / qq
                u = x + d
                if u - a < tol2 or b - u < tol2:
                    d = tol1 if xm >= x else -tol1
                golden = False
        if golden:
            e = (a - x) if x >= xm else (b - x)
            d = cgold * e
        u = x + d if abs(d) >= tol1 else x + (tol1 if d > 0 else -tol1)
        fu = _objective_nodes(u, qs, sigmas, counts, ns, W, H1, E, L, target, mode)
        if fu <= fx:
            if u >= x:
                a = x
            else:
                b = x
            v = w
            fv = fw
            w = x
            fw = fx
            x = u
            fx = fu
        else:
            if u < x:
                a = u
            else:
                b = u
            if fu <= fw or w == x:
                v = w
                fv = fw
                w = u
                fw = fu
            elif fu <= fv or v == x or v == w:
                v = u
                fv = fu
    return fx, x


@jit
def _scan(grid, start, stop, stride, best, ib, qs, sigmas, counts, target, mode):
    """Walk grid[start:stop:stride] from a best (value, index), stopping after 2 successive
    rises; returns the best (value, index) seen. Orders proved worse than the best so far may
    be evaluated only that far (``_objective_above``)."""
    prev = best
    rises = 0
    for i in range(start, stop, stride):
        v = _objective_above(grid[i], qs, sigmas, counts, target, mode, best)
        if v < best:
            best = v
            ib = i
        if v >= prev:
            rises += 1
            if rises >= 2:
                break
        else:
            rises = 0
        prev = v
    return best, ib


@jit
def optimise_order(qs, sigmas, counts, target, mode, refine, xtol):
    """Minimise the objective over real alpha > 1; returns (value, alpha) (``_optimise_order``).
    Mode 1 then takes the Bretagnolle-Huber bound into account, at the smallest RDP (orders
    near 1), where it is tightest."""
    v, a = _optimise_order(qs, sigmas, counts, target, mode, refine, xtol)
    if mode == 0 and v == 0.0:
        return v, a
    # Bretagnolle-Huber at the smallest RDP: order 2 (an exact integer sum) first; orders near 1
    # (the quadrature, where it is cheap) only when they could change the answer -- their RDP
    # is some fraction of order 2's (a skip costs tightness, never soundness)
    bh2 = bh_log_delta(schedule_rdp(2.0, qs, sigmas, counts))
    goal = v if mode == 1 else target
    if bh2 <= goal:
        return (bh2, 2.0) if mode == 1 else (0.0, 2.0)
    a_bh = LOW_GRID[LOW_GRID.shape[0] - 1]
    if bh2 - 0.5 * math.log(8.0) > goal or not _quad_cheap(qs, sigmas, counts, 2.0):
        return v, a
    bh = bh_log_delta(schedule_rdp(a_bh, qs, sigmas, counts))
    if bh <= goal:
        return (bh, a_bh) if mode == 1 else (0.0, a_bh)  # eps = 0: the same check as delta's
    return v, a


@jit
def _optimise_order(qs, sigmas, counts, target, mode, refine, xtol):
    """Minimise the objective over real alpha > 1; returns (value, alpha).

    1. Scan the integer grid upward, stopping once the objective has risen at 2 successive
       points (it is quasi-convex in practice; stopping early never costs soundness, since
       every order gives a valid bound). If the best is at 2, scan orders in (1, 2) downward.
    2. Between the best point's grid neighbours, golden-section search over integers
       (cheap exact sums) when the bracket is wide.
    3. If ``refine``: Brent's method over real alpha on the remaining bracket, fractional
       orders being exact here. The best value seen is returned, so each stage can only
       improve on the previous one.
    """
    grid = DEFAULT_GRID
    n = grid.shape[0]
    # Start near an estimate of the optimal order: for small q the RDP is about
    # T alpha q^2 (e^{1/s^2} - 1)/2, so eps(alpha) ~ T rho alpha + log(1/delta)/(alpha - 1).
    # Only a starting point: the scan walks both ways, and every order is a valid bound.
    rho = 0.0
    for i in range(qs.shape[0]):
        if counts[i] > 0.0:
            rho += counts[i] * qs[i] * qs[i] * math.expm1(min(1.0 / (sigmas[i] * sigmas[i]), 700.0)) / 2.0
    if mode == 0:
        a_est = 1.0 + math.sqrt(max(-target, 1e-3) / max(rho, 1e-300))
    else:
        a_est = 0.5 * (target / max(rho, 1e-300) + 1.0)
    i0 = 0
    while i0 + 1 < n and grid[i0 + 1] <= a_est:
        i0 += 1
    best = _objective(grid[i0], qs, sigmas, counts, target, mode)
    ib = i0 if best < math.inf else -1
    # Upward, stopping after 2 successive rises; then downward from the start if nothing
    # above it was better, likewise.
    best, ib = _scan(grid, i0 + 1, n, 1, best, ib, qs, sigmas, counts, target, mode)
    if ib == i0 or ib < 0:
        best, ib = _scan(grid, i0 - 1, -1, -1, best, ib, qs, sigmas, counts, target, mode)
    if ib < 0:
        return math.inf, math.nan
    best_a = grid[ib]
    w, fw, v, fv, e0 = best_a, best, best_a, best, 0.0
    # fractional orders by quadrature only where it is cheap: its node count grows like sigma
    # for large sigma and like 1 / sigma^2 for small sigma, where the integer orders alone
    # still give a valid (looser) bound in bounded time
    cheap = _quad_cheap(qs, sigmas, counts, ALPHA_MAX)
    if not cheap:
        return best, best_a
    if ib == 0:
        # Orders below 2, downward.
        hi = 3.0
        lo = LOW_GRID[0]
        for j in range(LOW_GRID.shape[0]):
            a_ = LOW_GRID[j]
            v = _objective(a_, qs, sigmas, counts, target, mode)
            if v < best:
                hi = best_a
                best = v
                best_a = a_
                lo = LOW_GRID[j + 1] if j + 1 < LOW_GRID.shape[0] else 1.0 + 0.5 * (a_ - 1.0)
            else:
                lo = a_
                break
    else:
        lo = grid[ib - 1]
        hi = grid[ib + 1] if ib < n - 1 else min(2.0 * grid[ib], ALPHA_MAX)
        # Integer golden-section search inside a wide bracket.
        while hi - lo > 4.0:
            m1 = math.floor(lo + 0.382 * (hi - lo))
            m2 = math.ceil(hi - 0.382 * (hi - lo))
            if m1 <= lo:
                m1 = lo + 1.0
            if m2 >= hi:
                m2 = hi - 1.0
            f1 = _objective_above(m1, qs, sigmas, counts, target, mode, best) if m1 != best_a else best
            f2 = _objective_above(m2, qs, sigmas, counts, target, mode, best) if m2 != best_a else best
            if f1 < best:
                best = f1
                best_a = m1
            if f2 < best:
                best = f2
                best_a = m2
            if f1 <= f2:
                hi = m2
            else:
                lo = m1
            if best_a <= lo or best_a >= hi:
                break
        # Settle on the best integer: walk to a neighbour while it improves, which leaves
        # a bracketing triple (best_a - 1, best_a, best_a + 1) with known values.
        f_lo = _objective(best_a - 1.0, qs, sigmas, counts, target, mode)
        f_hi = _objective(best_a + 1.0, qs, sigmas, counts, target, mode)
        for _ in range(64):
            if f_lo < best and f_lo <= f_hi and best_a - 1.0 > 1.0:
                f_hi = best
                best = f_lo
                best_a -= 1.0
                f_lo = _objective(best_a - 1.0, qs, sigmas, counts, target, mode)
            elif f_hi < best and best_a + 1.0 <= ALPHA_MAX:
                f_lo = best
                best = f_hi
                best_a += 1.0
                f_hi = _objective(best_a + 1.0, qs, sigmas, counts, target, mode)
            else:
                break
        # Brent starts from the triple (its first step is then parabolic), unless it does
        # not bracket a minimum above alpha = 1.
        lo = best_a - 1.0
        hi = best_a + 1.0
        if f_lo <= f_hi:
            w, fw, v, fv = lo, f_lo, hi, f_hi
        else:
            w, fw, v, fv = hi, f_hi, lo, f_lo
        e0 = 2.0
        if not (lo > 1.0 and fv < math.inf and best <= fw):
            lo = max(best_a - 1.0, 1.0 + 0.5 * (best_a - 1.0))
            w, fw, v, fv, e0 = best_a, best, best_a, best, 0.0
    if not (refine and cheap):
        return best, best_a
    m = qs.shape[0]
    if m == 1 and e0 > 0.0 and qs[0] < 1.0 and counts[0] > 0.0:
        # one mechanism from a bracketing integer triple: Newton on the analytic derivative
        cap = _node_cap(sigmas[0], hi)
        w1 = np.empty(cap)
        h11 = np.empty(cap)
        e1 = np.empty(cap)
        l1 = np.empty(cap)
        n1 = prepare_nodes(qs[0], sigmas[0], hi, w1, h11, e1, l1)
        if n1 >= 0:
            fx, x = _newton_min(lo, hi, best_a, best, counts[0], n1, w1, h11, e1, l1, target, mode, xtol)
            if fx < best:
                return fx, x
            return best, best_a
    ns = np.full(m, -1, dtype=np.int64)
    W = []
    H1 = []
    E = []
    L = []
    for i in range(m):
        cap = 1 if qs[i] == 1.0 else _node_cap(sigmas[i], hi)
        wi = np.empty(cap)
        h1i = np.empty(cap)
        ei = np.empty(cap)
        li = np.empty(cap)
        if qs[i] < 1.0 and counts[i] > 0.0:
            ns[i] = prepare_nodes(qs[i], sigmas[i], hi, wi, h1i, ei, li)
        W.append(wi)
        H1.append(h1i)
        E.append(ei)
        L.append(li)
    fx, x = _brent_min(lo, hi, best_a, best, w, fw, v, fv, e0, qs, sigmas, counts, ns, W, H1, E, L,
                       target, mode, xtol)
    if fx < best:
        return fx, x
    return best, best_a


def _optimise_points(qs, sigmas, counts, targets, mode, refine, xtol, out_val, out_alpha):
    """``optimise_order`` for independent single-mechanism points."""
    for i in numba.prange(qs.shape[0]):
        q1 = qs[i:i + 1]
        s1 = sigmas[i:i + 1]
        c1 = counts[i:i + 1]
        v, a = optimise_order(q1, s1, c1, targets[i], mode, refine, xtol)
        out_val[i] = v
        out_alpha[i] = a


#: Parallel and serial builds of the same loop: a parallel launch costs more than a few points.
optimise_points, optimise_points_serial = jit_pair(_optimise_points)
PARALLEL_MIN_POINTS = 64


@jit
def rdp_curve(qs, sigmas, counts, orders, out):
    """Total RDP of a schedule at each of ``orders``."""
    for j in range(orders.shape[0]):
        out[j] = schedule_rdp(orders[j], qs, sigmas, counts)


@jit
def best_of_orders(rdp, orders, target, mode):
    """Best (value, order) among given orders and their RDP values."""
    best = math.inf
    ba = math.nan
    for j in range(orders.shape[0]):
        if not rdp[j] < math.inf:
            continue
        if mode == 0:
            v = eps_from_rdp(orders[j], rdp[j], target)
        else:
            v = min(log_delta_from_rdp(orders[j], rdp[j], target), bh_log_delta(rdp[j]))
        if v < best:
            best = v
            ba = orders[j]
    return best, ba
