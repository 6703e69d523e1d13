"""A schedule's total RDP and its conversion to (epsilon, delta): Balle et al. 2020 Thm 21 /
Canonne et al. 2020 Prop. 12, and the Bretagnolle-Huber bound on delta(0)."""

import math

from .._jit import jit
from ..logmath import NEG_INF
from .log_a import log_a
from .truncated import schedule_log_a


@jit
def schedule_rdp(alpha, qs, sigmas, counts):
    """Total RDP at order alpha of a schedule: sum_i counts_i * log A_alpha(q_i, s_i) / (alpha - 1);
    for several mechanisms each by ``truncated.schedule_log_a`` (at an integer order, an upper
    bound within e^-40 relative of A - 1, for a fraction of the exact sum's cost)."""
    m = qs.shape[0]
    total = 0.0
    for i in range(m):
        if counts[i] > 0.0:
            total += counts[i] * (log_a(qs[i], sigmas[i], alpha) if m == 1 else schedule_log_a(qs[i], sigmas[i], alpha))
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
