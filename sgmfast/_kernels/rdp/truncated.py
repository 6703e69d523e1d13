"""log A_alpha at an integer order for the mechanisms of a schedule: the binomial sum of
``log_a.log_a_int`` taken from the bottom and stopped, with a proven bound on what is left, as
soon as that bound is below e^-40 of the sum (then added, so the value stays an upper bound).

With many distinct mechanisms each order the search evaluates costs one sum per mechanism, and
the exact sum has alpha - 1 terms; where sigma is large next to the order (the RDP about
linear in it) the terms fall off like (alpha q e^{k/sigma^2} / k)^k and a dozen of them carry
the sum. Where the top terms carry it instead (small sigma) no bound applies and the whole sum
is taken, as before (a schedule of 10^5 steps with sigma in [8, 12], q = 0.001, took ~9 s per
query of the order search: ~190 terms per mechanism and order).

The bound (terms t_k = C(n, k) (1-q)^(n-k) q^k expm1(x_k), x_k = k (k-1) / (2 sigma^2), n = alpha):
t_k <= v_k = C(n, k) (1-q)^(n-k) q^k e^(x_k), and
v_(j+1) / v_j = (n - j)/(j + 1) * q/(1 - q) * e^(j / sigma^2).  For j >= k the first factor is
at most its value at k, so log v_j <= g(j) = log v_k + (j - k) c + (x_j - x_k) with
c = log((n - k)/(k + 1)) + log(q/(1 - q)); g is convex in j, so on k + 1..n it is at most its
larger end value, and sum_(j>k) t_j <= (n - k) max(e^g(k+1), e^g(n)).
"""

import math

from .._jit import jit
from ..logmath import NEG_INF, log_expm1
from .log_a import _LOG_FACT, _LOG_FACT_MAX, log_a

#: the sum stops once the bound on its remaining terms is below e^-TAIL_NATS of it
TAIL_NATS = 40.0


@jit
def _tail_bound(n, k, lv, lam, inv2s2):
    """log of a bound on sum_(j=k+1..n) t_j from log v_k = ``lv`` (module notes); +inf when
    the bound does not fall off (c >= 0)."""
    c = math.log((n - k) / (k + 1.0)) + lam
    if c >= 0.0:
        return math.inf
    g_next = lv + c + 2.0 * k * inv2s2
    g_end = lv + (n - k) * c + ((n * n - n) - (k * k - k)) * inv2s2
    return math.log(n - k) + max(g_next, g_end) + math.log(2.0)  # (x 2: slack for the rounding of g)


@jit
def log_a_int_trunc(q, sigma, alpha, cap):
    """(v, proved): v an upper bound on log A_alpha exceeding it by at most a relative e^-40 of
    A - 1 (plus rounding), proved = False; or, once one term of the sum (a lower bound on
    log A_alpha) reaches ``cap``, (that term, True) (``cap = inf``: never). Integer alpha in
    [2, ``_LOG_FACT_MAX``] and 0 < q < 1 (``schedule_log_a`` sends the rest to ``log_a``).

    The top term k = alpha is tried against ``cap`` first: where the sum's top dominates (small
    sigma), it alone proves most orders worse than the best so far."""
    n = int(alpha)
    log_q = math.log(q)
    log_1mq = math.log1p(-q)
    inv2s2 = 0.5 / (sigma * sigma)
    if cap < math.inf:
        x = (n * n - n) * inv2s2
        t_top = n * log_q + (x if x > 40.0 else log_expm1(x))
        if t_top >= cap:
            return t_top, True
    m = NEG_INF
    s = 0.0
    check = 4
    for k in range(2, n + 1):
        x = (k * k - k) * inv2s2
        lv = _LOG_FACT[n] - _LOG_FACT[k] - _LOG_FACT[n - k] + (n - k) * log_1mq + k * log_q + x
        t = lv if x > 40.0 else lv - x + log_expm1(x)
        if t >= cap:
            return t, True
        if t > m:
            s = s * math.exp(m - t) + 1.0
            m = t
        else:
            s += math.exp(t - m)
        if k < n and k >= check and t < m - TAIL_NATS:
            check = k + max(1, k // 4)  # (the next try, geometrically later: each costs a few logs)
            tail = _tail_bound(n, k, lv, log_q - log_1mq, inv2s2)
            if tail < m - TAIL_NATS:
                s += math.exp(tail - m)
                break
    acc = m + math.log(s)
    if acc > 0.0:
        return acc + math.log1p(math.exp(-acc)), False
    return math.log1p(math.exp(acc)), False


@jit
def schedule_log_a(q, sigma, alpha):
    """log A_alpha of one mechanism of a schedule: ``log_a_int_trunc`` where it applies (an upper
    bound within e^-40 relative of A - 1), else ``log_a``."""
    if 0.0 < q < 1.0 and alpha == math.floor(alpha) and 2.0 <= alpha <= _LOG_FACT_MAX:
        return log_a_int_trunc(q, sigma, alpha, math.inf)[0]
    return log_a(q, sigma, alpha)
