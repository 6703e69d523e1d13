"""One-step SGM in closed form, its exact noise multiplier sigma(q), and the batch-size analysis.

Setting (sensitivity 1): mu0 = N(0, s^2), mu = (1 - q) N(0, s^2) + q N(1, s^2).

remove (P = mu, Q = mu0), Eq. (45) of Räisä, Jälkö & Honkela (ICML 2024):
    h = e^eps - 1 + q,  L = log(h / q),  x1 = s L - 1/(2 s),  x2 = s L + 1/(2 s),
    delta = q Phibar(x1) - h Phibar(x2).
add (P = mu0, Q = mu), our derivation from the same hockey-stick integral:
    g = e^-eps - 1 + q (> 0 iff eps < -log(1 - q), otherwise delta = 0),
    y1 = s log(g / q) + 1/(2 s),  y2 = y1 - 1/s,
    delta = e^eps [g Phi(y1) - q Phi(y2)],
which equals MATH.md's Phi(z'/s) - e^eps[(1 - q) Phi(z'/s) + q Phi((z' - 1)/s)] with z' = s y1.

Both are evaluated as logarithms: the two terms of each difference are log-CDFs, and the
identity q phi(x1) = h phi(x2) (Kalinin 2024, Eq. (9)) makes their ratio a ratio of Mills
ratios, so no term underflows and delta down to 1e-300 (and far below, as a logarithm) keeps
its relative precision. Kernels never raise: NaN marks an unusable input or a failed solve.
"""

import math

import numba

from ._jit import jit, jit_parallel
from .calibrate import gaussian_sigma
from .logmath import LOG_SQRT_2PI, NEG_INF, log1mexp, log_expm1, log_ndtr, log_sub
from .roots import zeroin_step

DIR_REMOVE = 0
DIR_ADD = 1
DIR_BOTH = 2

SQRT2 = math.sqrt(2.0)
#: Search range of log sigma for the one-step solve.
LOG_SIGMA_MIN = -40.0
LOG_SIGMA_MAX = 700.0


@jit
def _log_phi_diff(a, b):
    """log(Phi(b) - Phi(a)) for a <= b, using erf across zero (no cancellation near 0)."""
    if not a < b:
        return NEG_INF
    if a < 0.0 < b:
        return math.log(0.5 * (math.erf(b / SQRT2) - math.erf(a / SQRT2)))
    if b <= 0.0:
        return log_sub(log_ndtr(b), log_ndtr(a))
    return log_sub(log_ndtr(-a), log_ndtr(-b))


@jit
def log_mills(x):
    """log R(x), R(x) = Phibar(x)/phi(x) the Mills ratio, for x >= 0.

    Below 5 from erfc (error ~ x^2 ulp); above, the continued fraction
    R(x) = 1/(x + 1/(x + 2/(x + 3/(x + ...)))) summed backwards from 80 terms, which keeps full
    relative precision where Phibar and phi themselves would cost ulp(x^2/2) each.
    """
    if x < 5.0:
        return math.log(0.5 * math.erfc(x / SQRT2)) + 0.5 * x * x + LOG_SQRT_2PI
    t = x
    for k in range(80, 0, -1):
        t = x + k / t
    return -math.log(t)


@jit
def _log_tail_pair(log_k, u, v, width):
    """log(K (R(u) - R(v))) for 0 <= u < v = u + width: the difference of two normal tails
    sharing the factor K = c1 phi(u) = c2 phi(v), i.e. c1 Phibar(u) - c2 Phibar(v).

    Once the width is below the resolution of u (sigma ~ 1e8: u and v round to the same float),
    R(u) - R(v) = width (1 - m R(m)) (1 + O(width^2)) at the midpoint m, with
    1 - t R(t) = 1/t^2 - 3/t^4 + 15/t^6 - ... for large t (the Mills series)."""
    lu = log_mills(u)
    d = log_mills(v) - lu
    if d < -1e-7 * (1.0 + abs(lu)) or width >= 1e-6 * (1.0 + u):
        return log_k + lu + log1mexp(d)
    m = u + 0.5 * width
    if m > 1e3:
        inv = 1.0 / (m * m)
        g = inv * (1.0 - 3.0 * inv * (1.0 - 5.0 * inv))
    else:
        g = 1.0 - m * math.exp(log_mills(m))
    return log_k + math.log(width) + math.log(g)


@jit
def log_delta_remove(eps, q, sigma):
    """log delta(eps) of one SGM step, remove direction (Eq. (45) of Räisä et al. 2024)."""
    em1 = math.expm1(eps)
    if em1 / q < 1e300:
        L = math.log1p(em1 / q)
        log_em1 = math.log(em1) if em1 > 0.0 else NEG_INF
    else:
        # e^eps / q beyond the float range (eps ~ 700, or eps > 36 with a tiny q): in logs,
        # L = log(1 + (e^eps - 1)/q) = a + log1p(e^-a) with a = log(e^eps - 1) - log q > 690.
        log_em1 = log_expm1(eps)
        a = log_em1 - math.log(q)
        L = a + math.log1p(math.exp(-a))
    x1 = sigma * L - 0.5 / sigma
    x2 = sigma * L + 0.5 / sigma
    if x1 < 0.0:
        # delta = q [Phi(x2) - Phi(x1)] - (e^eps - 1) Phibar(x2); the bracket straddles 0 or
        # lies left of it, where the erf difference is exact and the subtrahend small.
        first = math.log(q) + _log_phi_diff(x1, x2)
        if em1 == 0.0:
            return first
        return log_sub(first, log_em1 + log_ndtr(-x2))
    # q Phibar(x1) - h Phibar(x2) = q phi(x1) (R(x1) - R(x2)) since q phi(x1) = h phi(x2).
    return _log_tail_pair(math.log(q) - 0.5 * x1 * x1 - LOG_SQRT_2PI, x1, x2, 1.0 / sigma)


@jit
def log_delta_add(eps, q, sigma):
    """log delta(eps) of one SGM step, add direction; -inf when eps >= -log(1 - q)."""
    p = 1.0 - q  # exact for q >= 1/2 (Sterbenz), the only case the second branch takes
    lq = math.log(q)
    if p == 0.0:
        lgq = -eps  # log(g / q)
    elif q >= 0.5 and p * math.exp(eps) < 1.0:
        # g = e^-eps (1 - (1 - q) e^eps): no cancellation between e^-eps and 1 - q (at q = 1,
        # q + expm1(-eps) would keep only ~eps/37 of its digits once e^-eps << 1).
        lgq = -eps + math.log1p(-p * math.exp(eps)) - lq
    else:
        # log(g / q) = log1p(expm1(-eps) / q): relative to itself (log(g) - log(q) erred by u
        # absolute, 5e-8 of it at eps = 1e-12, sigma = 7e8)
        y = math.expm1(-eps) / q
        if not y > -1.0:
            return NEG_INF
        lgq = math.log1p(y)
    log_g = lgq + lq
    y1 = sigma * lgq + 0.5 / sigma
    y2 = y1 - 1.0 / sigma
    if y1 > 0.0:
        # e^eps [g Phi(y1) - q Phi(y2)]: directly when the second term is below e^-1 of the first
        # (a large eps, where the form below would cancel at the scale of e^eps)
        a = eps + log_g + log_ndtr(y1)
        b = eps + lq + log_ndtr(y2)
        if b < a - 1.0:
            return log_sub(a, b)
        # g Phi(y1) - q Phi(y2) = q [Phi(y1) - Phi(y2)] - (q - g) Phi(y1), q - g = 1 - e^-eps.
        first = lq + _log_phi_diff(y2, y1)
        qmg = -math.expm1(-eps)
        if qmg == 0.0:
            return eps + first
        return eps + log_sub(first, math.log(qmg) + log_ndtr(y1))
    # g Phi(y1) - q Phi(y2) = g phi(y1) (R(-y1) - R(-y2)) since g phi(y1) = q phi(y2).
    return eps + _log_tail_pair(log_g - 0.5 * y1 * y1 - LOG_SQRT_2PI, -y1, -y2, 1.0 / sigma)


@jit
def log_delta_dir(direction, eps, q, sigma):
    if direction == DIR_REMOVE:
        return log_delta_remove(eps, q, sigma)
    if direction == DIR_ADD:
        return log_delta_add(eps, q, sigma)
    return max(log_delta_remove(eps, q, sigma), log_delta_add(eps, q, sigma))


@jit
def log_delta_points(direction, eps, q, sigma, out):
    """log delta over flattened, broadcast inputs."""
    for i in range(eps.shape[0]):
        # delta <= q in both directions: the clamp only removes rounding above it (log delta
        # ~ +1e-15 at q = 1 and a tiny sigma)
        out[i] = min(log_delta_dir(direction, eps[i], q[i], sigma[i]), math.log(q[i]))


@jit
def _f(direction, x, eps, q, target):
    v = log_delta_dir(direction, eps, q, math.exp(x))
    return v - target


@jit
def _brent(direction, a, fa, b, fb, eps, q, target, tol):
    """Brent's zeroin on f(x) = log delta(e^x) - target, f(a) f(b) < 0; returns the end of
    the final bracket on the private side (f <= 0, the larger x: f decreases)."""
    c = a
    fc = fa
    d = b - a
    e = d
    for _ in range(200):
        a, fa, b, fb, c, fc, d, e, done = zeroin_step(a, fa, b, fb, c, fc, d, e, tol, 4.4e-16)
        if done:
            break
        fb = _f(direction, b, eps, q, target)
    if fb <= 0.0 and fc <= 0.0:
        return min(b, c)
    if fb <= 0.0:
        return b
    return c


@jit
def solve_sigma(direction, eps, log_delta, q, guess, tol):
    """Smallest sigma with delta(eps; q, sigma) <= delta (delta strictly decreasing in sigma,
    Lemma 1 of Kalinin 2024). Returns 0 when delta >= q (no noise needed: the supremum of
    delta over sigma is q) and NaN when no bracket is found. ``guess`` <= 0 means none:
    the Gaussian mechanism's sigma (q = 1), an upper bound, is used."""
    if log_delta >= math.log(q):
        return 0.0
    if not guess > 0.0:
        guess = gaussian_sigma(eps, log_delta)
    x0 = min(max(math.log(guess), LOG_SIGMA_MIN), LOG_SIGMA_MAX)
    f0 = _f(direction, x0, eps, q, log_delta)
    if f0 == 0.0:
        return math.exp(x0)
    step = 0.02
    xa = x0
    fa = f0
    found = False
    xb = x0
    fb = f0
    for _ in range(100):
        # f decreases in x: go up while f > 0, down while f < 0.
        xn = min(max(xa + step if fa > 0.0 else xa - step, LOG_SIGMA_MIN), LOG_SIGMA_MAX)
        if xn == xa:
            break
        fn = _f(direction, xn, eps, q, log_delta)
        if (fn > 0.0) != (fa > 0.0):
            xb = xn
            fb = fn
            found = True
            break
        xa = xn
        fa = fn
        step *= 2.0
    if not found:
        return math.nan
    if xa < xb:
        x = _brent(direction, xa, fa, xb, fb, eps, q, log_delta, tol)
    else:
        x = _brent(direction, xb, fb, xa, fa, eps, q, log_delta, tol)
    return math.exp(x)


@jit
def solve_sigma_points(direction, eps, log_delta, q, tol, out):
    for i in range(eps.shape[0]):
        out[i] = solve_sigma(direction, eps[i], log_delta[i], q[i], -1.0, tol)


@jit
def derivatives(eps, q, sigma):
    """(dsigma/dq, d(sigma/q)/dq, a, b) at a root sigma = sigma(q) of Eq. (45).

    Implicit differentiation of Psi(q, sigma) = delta: with K = q phi(x1) = h phi(x2),
    dPsi/dsigma = -K / sigma^2 and dPsi/dq = Phi(x2) - Phi(x1), so
    sigma'(q) = sigma^2 (Phi(x2) - Phi(x1)) / (q phi(x1)), which is Lemma 6.1 / Eq. (136) of
    Räisä et al. (2024) since x1 = sqrt(2)(b - a), x2 = sqrt(2)(a + b).
    a = 1/(2 sqrt(2) sigma) (Eq. (46)), b = sigma log(h/q)/sqrt(2) (Eq. (47)).
    """
    L = math.log1p(math.expm1(eps) / q)
    x1 = sigma * L - 0.5 / sigma
    x2 = sigma * L + 0.5 / sigma
    log_phi_x1 = -0.5 * x1 * x1 - LOG_SQRT_2PI
    # q sigma'/sigma = sigma (Phi(x2) - Phi(x1)) / phi(x1): the ratio Theorem 6.2 compares with 1.
    ratio = math.exp(math.log(sigma) + _log_phi_diff(x1, x2) - log_phi_x1)
    dsigma = sigma / q * ratio
    d_over_q = sigma / (q * q) * (ratio - 1.0)
    a = 0.5 / (SQRT2 * sigma)
    b = sigma * L / SQRT2
    return dsigma, d_over_q, a, b


@jit
def a_minus_b(eps, q, sigma):
    """a - b = -x1 / sqrt(2) = (1/(2 sigma) - sigma log(h/q)) / sqrt(2)."""
    L = math.log1p(math.expm1(eps) / q)
    return (0.5 / sigma - sigma * L) / SQRT2


@jit
def derivatives_points(eps, log_delta, q, tol, out_sigma, out_ds, out_dsq, out_a, out_b):
    for i in range(eps.shape[0]):
        s = solve_sigma(DIR_REMOVE, eps[i], log_delta[i], q[i], -1.0, tol)
        out_sigma[i] = s
        if s > 0.0:
            ds, dsq, a, b = derivatives(eps[i], q[i], s)
        else:
            ds = math.nan
            dsq = math.nan
            a = math.nan
            b = math.nan
        out_ds[i] = ds
        out_dsq[i] = dsq
        out_a[i] = a
        out_b[i] = b


@jit_parallel
def figure2(eps_grid, q_grid_desc, log_delta, tol, out_max, out_q, out_sigma):
    """Largest a - b over the q grid for each eps, at the exact sigma(q) (remove direction).

    ``q_grid_desc`` must be decreasing: each solve starts from the previous q's sigma
    (sigma(q) decreases with q smaller, so the bracket is found in a step or two), the first
    from the Gaussian mechanism's exact sigma at q = 1.
    """
    n_q = q_grid_desc.shape[0]
    for i in numba.prange(eps_grid.shape[0]):
        eps = eps_grid[i]
        guess = -1.0
        best = -math.inf
        best_q = math.nan
        best_s = math.nan
        for j in range(n_q):
            q = q_grid_desc[j]
            s = solve_sigma(DIR_REMOVE, eps, log_delta, q, guess, tol)
            if s > 0.0:
                guess = s
                v = a_minus_b(eps, q, s)
                if v > best:
                    best = v
                    best_q = q
                    best_s = s
        out_max[i] = best
        out_q[i] = best_q
        out_sigma[i] = best_s
