"""Fractional orders by quadrature: the integrand's alpha-independent parts tabulated once at
shared nodes (``prepare_nodes``), A, A' and A'' from them, and the refinement that
``orders._optimise_order`` ends with -- safeguarded Newton for one mechanism, Brent's method for
a schedule (``_refine``)."""

import math

import numpy as np

from .._jit import jit
from ..logmath import LOG_SQRT_2PI
from .log_a import (
    QUAD_CHEAP,
    _SERIES_MAX,
    _TAIL_NATS,
    _h1,
    _h2,
    _log_ratio,
    _quad_lower_end,
    log_a,
    quad_setup,
    trap_step,
)
from .conversion import _from_rdp


@jit
def prepare_nodes(q, sigma, alpha_hi, out_w, out_h1, out_e, out_l):
    """Tabulate the alpha-independent parts of the ``log_a_quad`` integrand for every order
    alpha <= alpha_hi: weights phi(z) h / (sigma sqrt(2 pi)), h1(ell), e^ell and ell at the nodes.

    Returns the node count, or -1 if the linear-scale conditions of ``log_a_quad`` fail at
    ``alpha_hi`` (the caller then evaluates each order directly). The node range is the one
    ``log_a_quad`` would use at ``alpha_hi``, which covers smaller orders too: their integrand
    has every mode below max(alpha, 2) as well and decays at least as fast beyond it.
    """
    log_q, log_1mq, inv2s2, h, z, z_past = quad_setup(q, sigma, alpha_hi)
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


#: Most quadrature nodes, summed over a schedule's mechanisms, for its fractional orders (each
#: evaluation of the objective costs one pass over them; a search takes a few dozen).
QUAD_TOTAL = 1_000_000


@jit
def _quad_cheap(qs, sigmas, counts, alpha_hi):
    """Whether every mechanism's fractional orders up to alpha_hi need at most QUAD_CHEAP nodes,
    and all of them together at most QUAD_TOTAL."""
    total = 0
    for i in range(qs.shape[0]):
        if qs[i] < 1.0 and counts[i] > 0.0:
            cap = _node_cap(sigmas[i], alpha_hi)
            if cap > QUAD_CHEAP:
                return False
            total += cap
            if total > QUAD_TOTAL:
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


# (inlined into ``orders._optimise_order``, as its other stages)
@jit(inline="always")
def _refine(lo, hi, best, best_a, w, fw, v, fv, e0, qs, sigmas, counts, target, mode, xtol):
    """Fractional orders in (lo, hi) from the best integer (best, best_a): Newton on the
    analytic derivative for one mechanism from a bracketing integer triple, Brent otherwise.
    Returns the best (value, alpha) it evaluated (which may be worse than ``best``)."""
    if qs.shape[0] == 1 and e0 > 0.0 and qs[0] < 1.0 and counts[0] > 0.0:
        cap = _node_cap(sigmas[0], hi)
        w1 = np.empty(cap)
        h11 = np.empty(cap)
        e1 = np.empty(cap)
        l1 = np.empty(cap)
        n1 = prepare_nodes(qs[0], sigmas[0], hi, w1, h11, e1, l1)
        if n1 >= 0:
            return _newton_min(lo, hi, best_a, best, counts[0], n1, w1, h11, e1, l1, target, mode, xtol)
    return _brent_refine(lo, hi, best, best_a, w, fw, v, fv, e0, qs, sigmas, counts, target, mode, xtol)


@jit(inline="always")
def _brent_refine(lo, hi, best, best_a, w, fw, v, fv, e0, qs, sigmas, counts, target, mode, xtol):
    """``_brent_min`` over the schedule, each mechanism's fractional orders from nodes tabulated
    up to hi where it has them (``prepare_nodes``)."""
    m = qs.shape[0]
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
    return _brent_min(lo, hi, best_a, best, w, fw, v, fv, e0, qs, sigmas, counts, ns, W, H1, E, L,
                      target, mode, xtol)
