"""Log-space arithmetic: log-add, log-sub, log(1 - e^x) and normal log-CDFs.

Probabilities in this package can be as small as 1e-300 (tail masses of a
privacy-loss distribution, terms of an RDP series); they are carried as
logarithms and combined with the helpers here so that nothing underflows to 0
and no difference of nearly equal numbers loses its digits.
"""

import math

from ._jit import jit

NEG_INF = -math.inf
EPS64 = 2.220446049250313e-16  # machine epsilon of float64 (2u, u the unit round-off)
LOG_HALF = -math.log(2.0)
LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
LN2 = math.log(2.0)
SQRT2 = math.sqrt(2.0)


@jit
def log_add(a, b):
    """log(e^a + e^b), exact for -inf arguments."""
    if a < b:
        a, b = b, a
    if b == NEG_INF:
        return a
    return a + math.log1p(math.exp(b - a))


@jit
def log1mexp(x):
    """log(1 - e^x) for x <= 0 (Mächler 2012: switch at -log 2); NaN for x > 0."""
    if x > 0.0:
        return math.nan
    if x > -LN2:
        return math.log(-math.expm1(x))
    return math.log1p(-math.exp(x))


@jit
def log_sub(a, b):
    """log(e^a - e^b) for a >= b; -inf when equal, NaN when b > a."""
    if b == NEG_INF:
        return a
    if b > a:
        return math.nan
    if b == a:
        return NEG_INF
    return a + log1mexp(b - a)


@jit
def log_expm1(x):
    """log(e^x - 1) for x > 0 without overflow or cancellation."""
    if x > 36.0:
        return x + math.log1p(-math.exp(-x))
    return math.log(math.expm1(x))


@jit
def log_ndtr(x):
    """log Phi(x), the standard normal log-CDF, accurate in both tails.

    For x > -30, ``erfc`` has full relative precision (it only underflows near
    x = -37.5). Below, the asymptotic Mills-ratio series
    Phi(x) = phi(x)/|x| * (1 - 1/x^2 + 3/x^4 - ...) is used; ten terms leave a
    relative error under 1e-20 at |x| >= 30.
    """
    if x > 0.0:
        return math.log1p(-0.5 * math.erfc(x / SQRT2))
    if x > -30.0:
        return math.log(0.5 * math.erfc(-x / SQRT2))
    if x == NEG_INF:
        return NEG_INF
    x2 = x * x
    inv = 1.0 / x2
    term = 1.0
    s = 1.0
    for k in range(1, 11):
        term *= -(2.0 * k - 1.0) * inv
        s += term
    return -0.5 * x2 - math.log(-x) - LOG_SQRT_2PI + math.log(s)


@jit
def log_ndtr_diff(a, b):
    """log(Phi(b) - Phi(a)) for a <= b, computed on the side of zero where it is accurate."""
    if not a < b:
        return NEG_INF
    if b <= 0.0:
        return log_sub(log_ndtr(b), log_ndtr(a))
    if a >= 0.0:
        return log_sub(log_ndtr(-a), log_ndtr(-b))
    # a < 0 < b: 1 - Phi(a) - Phi(-b), both tails below 1/2.
    return math.log1p(-(math.exp(log_ndtr(a)) + math.exp(log_ndtr(-b))))


@jit
def log_ndtr_pair(x):
    """(log Phi(x), log Phi(-x)), each exactly ``log_ndtr``'s, from one erfc where both take the
    same one (|x| < 30): a sweep over boundaries carries them from one cell to the next."""
    if 0.0 < x < 30.0:
        c = 0.5 * math.erfc(x / SQRT2)
        return math.log1p(-c), math.log(c)
    if -30.0 < x < 0.0:
        c = 0.5 * math.erfc(-x / SQRT2)
        return math.log(c), math.log1p(-c)
    return log_ndtr(x), log_ndtr(-x)


@jit
def log_ndtr_diff_pairs(a, b, pa, pb):
    """``log_ndtr_diff(a, b)`` from ``log_ndtr_pair``'s pa of a and pb of b: the same value."""
    if not a < b:
        return NEG_INF
    if b <= 0.0:
        return log_sub(pb[0], pa[0])
    if a >= 0.0:
        return log_sub(pa[1], pb[1])
    return math.log1p(-(math.exp(pa[0]) + math.exp(pb[1])))


@jit
def log_normal_pdf(x):
    """log phi(x) for the standard normal density."""
    return -0.5 * x * x - LOG_SQRT_2PI
