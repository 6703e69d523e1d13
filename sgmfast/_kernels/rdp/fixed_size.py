"""RDP of one step of DP-SGD with fixed-size batches drawn without replacement (replace-one).

One step is dominated, for every order, by the symmetrised pair of ``sgmfast.pld.fixed_size``
(its notes; docs/fixed_size_batches.md): with s = sigma / 2, gamma = b / n, Q = N(0, s^2),
P = (1 - gamma) Q + gamma N(1, s^2) and r = P / Q, the pair is (P, Q) and (Q, P) on x > 1/2 plus
an atom c = 1 - P(x > 1/2) - Q(x > 1/2) under both.  A pair that dominates in every hockey-stick
divergence dominates in every Rényi divergence (both are f-divergences of the trade-off curve),
so its RDP bounds the mechanism's, for adaptive composition too.

Its moment.  With f(r) = r^a - r + r^(1-a) - 1 = r^(1-a) (r^a - 1)(r^(a-1) - 1) >= 0 for every r > 0,

    M_sym(a) - 1 = int_{x > 1/2} Q f(r)                                  (the pieces and the atom)
                 = M_rem(a) + M_add(a) - 2 - int_{x < 1/2} Q f(r)        (f over the whole line)
                <= M_rem(a) + M_add(a) - 2 <= 2 (M_rem(a) - 1),

where M_rem(a) = E_Q[r^a] = A_a(gamma, s) is the Poisson remove direction's moment (Mironov,
Talwar & Zhang 2019) and M_add(a) = E_Q[r^(1-a)] <= M_rem(a) is their Corollary 7 (the add
direction of the SGM never exceeds the remove one, a >= 1).  So one step is
(a, log(1 + 2 (A_a - 1)) / (a - 1))-RDP; it is also the Gaussian mechanism's a * 2 / sigma^2
(sensitivity 2) at most (the batch sum moves by at most 2): the smaller is taken.  Compared with
Wang, Balle & Kasiviswanathan's general bound (dp_accounting's accountant for this sampler),
whose leading term is 4 (e^{4/sigma^2} - 1) C(a, 2) gamma^2, this one's is 2 (e^{4/sigma^2} - 1) C(a, 2) gamma^2.
"""

import math

from .._jit import jit
from .log_a import QUAD_CHEAP, log_a, log_a_jensen
from .fractional import _node_cap


@jit
def _sym(la):
    """log(1 + 2 (A - 1)) from la = log A (or a bound on it: the map is increasing); +inf stays."""
    if not la < math.inf:
        return math.inf
    if la > 1.0:  # log(2 A - 1) = log A + log(2 - 1/A)
        return la + math.log(2.0 - math.exp(-la))
    return math.log1p(2.0 * math.expm1(la))


@jit
def _log_moment(q, sigma, alpha):
    """log(1 + 2 (A_alpha - 1)) >= log M_sym(alpha) (module notes); +inf when it overflows."""
    return _sym(log_a(q, 0.5 * sigma, alpha))


@jit
def step_rdp(q, sigma, alpha):
    """One step's RDP at order alpha (module notes): the smaller of the two bounds."""
    return min(_log_moment(q, sigma, alpha) / (alpha - 1.0), 2.0 * alpha / (sigma * sigma))


@jit
def _interpolated_step_rdp(q, sigma, alpha):
    """A fractional order's RDP from the two integer orders around it, without quadrature.

    M_sym(a) = E[(P'/Q')^a] of one pair of distributions is log-convex in a (Hoelder), and
    log M_sym(1) = 0; so with n = floor(a), t = a - n,
    log M_sym(a) <= (1 - t) log M_sym(n) + t log M_sym(n + 1), each bounded by _log_moment
    (an exact finite sum at an integer order).  The closed-form ``log_a_jensen`` in place of
    log A_a, and the Gaussian bound, are taken as well."""
    n = math.floor(alpha)
    t = alpha - n
    lo = 0.0 if n <= 1.0 else _log_moment(q, sigma, n)
    hi = _log_moment(q, sigma, n + 1.0)
    m = min((1.0 - t) * lo + t * hi, _sym(log_a_jensen(q, 0.5 * sigma, alpha)))
    return min(m / (alpha - 1.0), 2.0 * alpha / (sigma * sigma))


@jit
def rdp_curve(q, sigma, steps, orders, out):
    """``steps`` times one step's RDP at each of ``orders``.

    A fractional order whose quadrature would need more than QUAD_CHEAP nodes (small sigma: the
    node count grows like 1/sigma^2; sigma = 0.002 took minutes over the default orders) is
    bounded without it (``_interpolated_step_rdp``: the chord between the integer orders around
    it, exact sums, and a closed form), which is sound and costs two integer-order evaluations."""
    for j in range(orders.shape[0]):
        a = orders[j]
        if q < 1.0 and a != math.floor(a) and _node_cap(0.5 * sigma, a) > QUAD_CHEAP:
            out[j] = steps * _interpolated_step_rdp(q, sigma, a)
        else:
            out[j] = steps * step_rdp(q, sigma, a)
