"""Certified closed forms: the hockey-stick divergence of the pairs at their optimal threshold.

Every pair here is a pair of Gaussian mixtures whose likelihood ratio is monotone, so
δ(eps) = P(S) - e^eps Q(S) for the set S on one side of the threshold where the loss equals
eps.  In standardised units x (z / sigma; w = 1 / sigma the shift between components, or mu for
the composed Gaussian) and with x_top the upper end of the set's defining interval:

    remove, Gaussian:  δ = W N(x_top - w, x_top) - em1 Φ̄(x_top), W = q          (k_a = 1, c_b = 0)
    add:               the same, mirrored (x_top = -z'/sigma + w), W = 1 - (1 - q) e^eps
    replace-one:       δ = W N(x_top - 2w, x_top) - em1 [Φ̄(x_top) + (1-q) N(x_top - w, x_top)]
                                                                                 (k_a = 2, c_b = 1-q)

(N(a, b) = P(a < Z < b), Φ̄ the normal survival function, em1 = e^eps - 1, W the weight of
the shifted component.)  Both terms can be far larger than their difference (large sigma: the
likelihood ratio is nearly constant across the interval), so a narrow interval is written
relative to φ(x_top): N(x_top - v, x_top) = φ(x_top) v S(x_top v, v^2/2) with
S(a, b) = int_0^1 e^{a s - b s^2} ds (Gauss-Legendre, error below 1e-20 for |a| + b <= 1) and
Φ̄(x_top) = φ(x_top) R(x_top) (R the Mills ratio); the difference of the two brackets then
errs by a few u of the brackets, not of φ-scaled masses.  A wide interval is evaluated as
log-masses (``bins._normal_logmass``, whose bound ``mass_slack`` the discretisation uses too).

Soundness.  Any threshold gives a lower bound P(S) - e^eps Q(S) <= δ; the computed x_top is a
float near the optimal one, and each term is bounded for rounding (relative bounds per term,
listed in ``hockey_log_bounds``; the libm functions exp, log, erfc err by a few ulp, charged
as 64 u).  The upper bound adds the threshold's suboptimality: val(x*) - val(x) <=
int |q(s) (e^eps - e^{L(s)})| ds <= 2 q(x) e^eps L' dx^2 (density q, loss slope L' <= k_a w,
dx = |x - x*|), doubled for the density's variation over dx.  Kernels return log-bounds
(-inf: 0) and never raise.
"""

import math

import numpy as np

from .._jit import jit
from ..logmath import EPS64, LOG_SQRT_2PI, NEG_INF, log1mexp, log_add, log_ndtr
from .bins import _normal_logmass, mass_slack

__all__ = ["log_mills", "hockey_log_bounds", "interval_factor"]

_x, _w = np.polynomial.legendre.leggauss(10)
GL_X = 0.5 * (_x + 1.0)  # nodes on [0, 1]
GL_W = 0.5 * _w
LIBM = 64.0 * EPS64  # relative error charged per libm call chain (exp, log, erfc: a few ulp each)


@jit
def interval_factor(a, b):
    """S(a, b) = int_0^1 e^{a s - b s^2} ds for |a| + b <= 1 (10-point Gauss-Legendre: the rule's
    error is below 1e-20 there; the sum of 10 positive terms, each within 4u, errs by < 16u)."""
    s = 0.0
    for i in range(GL_X.shape[0]):
        t = GL_X[i]
        s += GL_W[i] * math.exp(a * t - b * t * t)
    return s


@jit
def log_mills(x):
    """(log R(x), bound on its absolute error), R = Φ̄/φ the Mills ratio.

    x >= 5: the continued fraction R = 1/(x + 1/(x + 2/(x + ...))) evaluated backwards from 80
    and from 81 terms: consecutive convergents bracket R, so their gap bounds the truncation;
    the backward recurrence contracts errors (k / t^2 < 1/4 here), charged as LIBM.  x < 5:
    erfc, whose argument x / sqrt 2 and the exponent x^2 / 2 err by u x^2 in all."""
    if x >= 5.0:
        t80 = x
        for k in range(80, 0, -1):
            t80 = x + k / t80
        t81 = x
        for k in range(81, 0, -1):
            t81 = x + k / t81
        la, lb = -math.log(t80), -math.log(t81)
        return 0.5 * (la + lb), 0.5 * abs(la - lb) + LIBM
    return math.log(0.5 * math.erfc(x / math.sqrt(2.0))) + 0.5 * x * x + LOG_SQRT_2PI, LIBM + 2.0 * EPS64 * x * x


@jit
def _log_rel(e):
    """A relative error bound e as a bound on the log error: -log(1 - e) (e < 1)."""
    return -math.log1p(-e) if e < 1.0 else math.inf


@jit
def _log_mass_ratio(x, v):
    """(log of N(x - v, x) / φ(x), bound on its absolute error).  Narrow (|x| v + v^2/2 <= 1): v S,
    S by Gauss-Legendre (16u); else the Mills ratios R(x - v) e^{v x - v^2/2} - R(x), whose
    first term is at least e^{1/2} times the second there (no cancellation)."""
    if abs(x) * v + 0.5 * v * v <= 1.0:
        return math.log(v * interval_factor(x * v, 0.5 * v * v)), 24.0 * EPS64
    l1, e1 = log_mills(x - v)
    l2, e2 = log_mills(x)
    arg = v * x - 0.5 * v * v
    lt1 = l1 + arg
    e_t1 = e1 + 2.0 * EPS64 * (abs(v * x) + v * v + abs(lt1) + 1.0)
    d = l2 - lt1
    e = e_t1 + e2
    if not d + e < 0.0:
        return NEG_INF, math.inf
    # log(t1 - t2) within [lt1 - e_t1 + log1mexp(d + e), lt1 + e_t1 + log1mexp(d - e)]
    lo = lt1 - e_t1 + log1mexp(d + e)
    hi = lt1 + e_t1 + log1mexp(d - e)
    return 0.5 * (lo + hi), 0.5 * (hi - lo) + 2.0 * EPS64 * (abs(lt1) + 1.0)


@jit
def _log_difference(la, e_a, lb, e_b):
    """(log lower, log upper) of e^la - e^lb given log errors e_a, e_b (-inf: no positive lower)."""
    if lb == NEG_INF:
        return la - e_a, la + e_a
    d = lb - la
    e = e_a + e_b
    lo = la - e_a + log1mexp(d + e) if d + e < 0.0 else NEG_INF
    hi = la + e_a + (log1mexp(d - e) if d - e < 0.0 else 0.0)
    return lo, hi


@jit
def _relative(x_top, w, k_a, log_w_a, e_w_a, c_b, log_em1, e_em1):
    """(log lower, log upper) of val / φ(x_top): the masses as ratios to φ(x_top)
    (``_log_mass_ratio``), Φ̄(x_top) = φ(x_top) R(x_top); every term within a few ulp of
    itself, so a near-cancellation costs only that many ulp of the terms."""
    lm_a, e_ma = _log_mass_ratio(x_top, k_a * w)
    la = log_w_a + lm_a
    e_a = e_w_a + e_ma + 2.0 * EPS64 * (abs(la) + 1.0)
    lr, e_r = log_mills(x_top)
    l_in, e_in = lr, e_r
    if c_b > 0.0:
        lm_b, e_mb = _log_mass_ratio(x_top, w)
        l_in = log_add(lr, math.log(c_b) + lm_b)
        e_in = max(e_r, e_mb + 2.0 * EPS64) + 2.0 * EPS64 * (abs(l_in) + 1.0)
    lb = log_em1 + l_in
    e_b = e_em1 + e_in + 2.0 * EPS64 * (abs(lb) + 1.0) if lb > NEG_INF else 0.0
    return _log_difference(la, e_a, lb, e_b)


@jit
def _wide(x_top, w, k_a, log_w_a, e_w_a, c_b, log_em1, e_em1):
    """(log lower, log upper) of val for a wide interval: log-masses, each with ``mass_slack``,
    plus the rounding of the shifted endpoints x_top - k w (their effect phi(x) dx / mass)."""
    x_lo = x_top - k_a * w
    dx = 2.0 * EPS64 * (abs(x_lo) + k_a * w)
    ln = _normal_logmass(x_lo, x_top, x_top - x_lo, 1.0)
    if ln == NEG_INF:
        return NEG_INF, NEG_INF
    lphi = -0.5 * x_lo * x_lo - LOG_SQRT_2PI
    e_a = e_w_a + _log_rel(mass_slack(ln) + dx * math.exp(lphi - ln) * 1.01)
    la = log_w_a + ln
    lb_in = log_ndtr(-x_top)
    e_in = _log_rel(mass_slack(lb_in))
    if c_b > 0.0:
        # Φ̄(x_top) + c_b N(x_top - w, x_top) = (1 - c_b) Φ̄(x_top) + c_b Φ̄(x_top - w)
        xm = x_top - w
        dm = 2.0 * EPS64 * (abs(xm) + w)
        lm = log_ndtr(-xm)
        e_m = _log_rel(mass_slack(lm) + dm * math.exp(-0.5 * xm * xm - LOG_SQRT_2PI - lm) * 1.01)
        lb_in = log_add(math.log1p(-c_b) + lb_in, math.log(c_b) + lm)
        e_in = max(e_in, e_m) + 4.0 * EPS64
    lb = log_em1 + lb_in
    b_hi = lb + e_em1 + e_in
    x_b = x_top - w if c_b > 0.0 else x_top  # B <= em1 Φ̄(x_b), and Φ̄(x) <= φ(x) / x (Mills)
    if x_b > 1.0:
        b_hi = min(b_hi, log_em1 + e_em1 - 0.5 * x_b * x_b - LOG_SQRT_2PI - math.log(x_b)
                   + 4.0 * EPS64 * (x_b * x_b + abs(math.log(x_b)) + 2.0))
    a_lo = la - e_a
    lo = a_lo + log1mexp(b_hi - a_lo) if b_hi < a_lo else NEG_INF
    hi = _log_difference(la, e_a, lb, e_em1 + e_in)[1]
    if x_lo > 0.0:
        # far in the tail the masses' log error bound (256 u |log mass|) outgrows 1; but
        # δ <= W Φ̄(x_lo) <= W φ(x_lo) / x_lo (the Mills bound), whose exponent errs by ~u x^2
        cap = log_w_a + e_w_a + lphi - math.log(x_lo) + 4.0 * EPS64 * (x_lo * x_lo + abs(math.log(x_lo)) + 2.0)
        if not hi <= cap:
            hi = cap
    return lo, hi


@jit
def hockey_log_bounds(x_top, w, k_a, log_w_a, e_w_a, c_b, log_em1, e_em1, eps, dens_ratio, dx):
    """(log lower, log upper) of δ = val at the optimal threshold, given the computed threshold
    x_top (a float within dx of the optimal one): the two terms of the module notes at x_top,
    with weight e^{log_w_a} (log error e_w_a) on the shifted component and em1 = e^{log_em1}
    (log error e_em1); the upper bound adds the threshold term 4 q(x) e^eps (k_a w) dx^2,
    q(x) = dens_ratio φ(x_top) the Q-density there (valid while dx (|x_top| + 2 w + 1) <= 1/4,
    which keeps the density within a factor 2 over dx; beyond, only the tail bound
    δ <= Φ̄(x_top - dx - k_a w) is used, and NaN where even that is out of reach)."""
    v = k_a * w
    if not (dx * (abs(x_top) + 2.0 * w + 1.0) <= 0.25):
        # the threshold is too uncertain for the second-order term; still δ <= P(S) <= Φ̄(z) for
        # every component, z = x_top - dx - v below the set's lowest end, and Φ̄(z) <= φ(z) / z
        z = x_top - dx - v
        if z > 1.0:
            return NEG_INF, -0.5 * z * z - LOG_SQRT_2PI - math.log(z) + 4.0 * EPS64 * (z * z + 2.0)
        return NEG_INF, math.nan
    # relative to φ(x_top) wherever the Mills ratios hold their precision (|x| up to 1e4, the
    # shifted end not in the far left tail); else as log-masses
    relative = abs(x_top) <= 1e4 and x_top - v >= -30.0
    lphi = -0.5 * x_top * x_top - LOG_SQRT_2PI
    e_phi = 2.0 * EPS64 * (x_top * x_top + 2.0)
    # threshold term, relative to φ(x_top)
    l_thr = math.log(4.0 * dens_ratio * v) + eps + 2.0 * math.log(max(dx, 1e-300))
    if relative:
        lo, hi = _relative(x_top, w, k_a, log_w_a, e_w_a, c_b, log_em1, e_em1)
        lo = lo + lphi - e_phi
        hi = log_add(hi, l_thr) + lphi + e_phi
    else:
        lo, hi = _wide(x_top, w, k_a, log_w_a, e_w_a, c_b, log_em1, e_em1)
        hi = log_add(hi, l_thr + lphi + e_phi)
    return lo, hi


KIND_REMOVE = 0
KIND_ADD = 1
KIND_REPLACE = 2
KIND_GAUSS = 3  # the Gaussian mechanism: remove with q = 1, w = mu


@jit
def _log_em1(eps):
    """(log(e^eps - 1), bound on its absolute error); -inf at eps = 0."""
    if eps <= 0.0:
        return NEG_INF, 0.0
    if eps > 40.0:
        return eps + math.log1p(-math.exp(-eps)), 2.0 * EPS64 * (eps + 1.0)
    v = math.log(math.expm1(eps))
    return v, 4.0 * EPS64 * (1.0 + abs(v))


@jit
def log_delta_bounds(kind, eps, q, w):
    """(log lower, log upper) of δ(eps) of one step of the pair ``kind`` with component shift w
    (standardised: w = 1 / sigma; for KIND_GAUSS w = mu) at exactly this w.  NaN: no bound."""
    if eps == math.inf:
        return NEG_INF, NEG_INF
    log_em1, e_em1 = _log_em1(eps)
    lq = math.log(q)
    if kind == KIND_GAUSS:
        x_top = eps / w + 0.5 * w
        dx = 4.0 * EPS64 * (abs(x_top) + w)
        return hockey_log_bounds(x_top, w, 1.0, 0.0, 0.0, 0.0, log_em1, e_em1, eps, 1.0, dx)
    if kind == KIND_REMOVE:
        if eps > 40.0:
            big_l = eps - lq + math.log1p(-(1.0 - q) * math.exp(-eps))
            e_l = 2.0 * EPS64 * (eps + abs(lq) + 1.0)
        else:
            big_l = math.log1p(math.expm1(eps) / q)
            e_l = 4.0 * EPS64 * big_l
        x_top = big_l / w + 0.5 * w
        dx = e_l / w + 4.0 * EPS64 * (abs(x_top) + w)
        return hockey_log_bounds(x_top, w, 1.0, lq, 2.0 * EPS64, 0.0, log_em1, e_em1, eps, 1.0, dx)
    if kind == KIND_ADD:
        em1n = math.expm1(-eps)
        g = q + em1n
        if not g > 0.0 or eps >= -math.log1p(-q):
            return NEG_INF, NEG_INF  # beyond the largest add loss -log(1 - q): δ = 0
        # lg = log(g / q) = log1p(y), y = expm1(-eps) / q in (-1, 0]: y errs by LIBM relative
        # (expm1 and the division), which moves log1p by at most |y| LIBM / (1 + y_min) =
        # LIBM |em1n| / g_min, g_min a lower bound on the true g (the float g = q + em1n errs by
        # up to LIBM (q + |em1n|)); log1p adds LIBM |lg|.  Relative, so exact at eps = 0 (the old
        # absolute 2u bound, divided by w = 1/sigma, made the threshold useless at sigma ~ 1e24).
        lg = math.log1p(em1n / q)
        g_min = g - LIBM * (q + abs(em1n))
        e_g = LIBM * (abs(em1n) / g_min + abs(lg)) + 1e-300 if g_min > 0.0 else math.inf
        x_top = -lg / w + 0.5 * w
        dx = e_g / w + 4.0 * EPS64 * (abs(x_top) + w)
        dens = (1.0 - q) * math.exp(min(w * x_top - 0.5 * w * w, 700.0)) + q
        # W = 1 - (1 - q) e^eps > 0: the set's P-mass N(0) minus e^eps times Q's N(0) part
        a = eps + math.log1p(-q)
        log_w = math.log(-math.expm1(a))
        e_w = 4.0 * EPS64 * (1.0 + (eps + abs(math.log1p(-q))) / abs(a))
        return hockey_log_bounds(x_top, w, 1.0, log_w, e_w, 0.0, log_em1, e_em1, eps, dens, dx)
    # replace-one: the threshold z' with loss(z') = eps (losses.replace_z), x_top = -z' / sigma + w
    x_top, dx = _replace_threshold(eps, q, w)
    dens = (1.0 - q) * math.exp(min(w * x_top - 0.5 * w * w, 700.0)) + q
    return hockey_log_bounds(x_top, w, 2.0, lq, 2.0 * EPS64, 1.0 - q, log_em1, e_em1, eps, dens, dx)


@jit
def _replace_threshold(eps, q, w):
    """(x_top, bound on its error) of the replace-one pair: x_top = -z'/sigma + w with z' the
    threshold of ``losses.replace_z`` (z' = sigma^2 log u), written in w = 1/sigma and in log
    space so that neither a large w (c = e^{-w^2/2} underflows) nor q = 1 (a = 0) breaks it."""
    a = 1.0 - q
    l2qc = math.log(2.0 * q) - 0.5 * w * w  # log(2 q c)
    e = -math.expm1(-eps)  # 1 - e^{-eps}
    ae = a * e
    half_le = l2qc - 0.5 * eps  # log sqrt(E), E = e^{2 l2qc - eps}
    # log(a e + sqrt(a^2 e^2 + E)), on the side where nothing overflows
    if ae > 0.0 and math.log(ae) > half_le:
        log_root = math.log(ae) + math.log1p(math.sqrt(1.0 + math.exp(2.0 * (half_le - math.log(ae)))))
    elif ae > 0.0:
        log_root = half_le + math.asinh(math.exp(math.log(ae) - half_le))
    else:
        log_root = half_le
    lu = l2qc - eps - log_root
    e_lu = 8.0 * EPS64 * (abs(l2qc) + eps + abs(log_root) + 1.0)
    x_top = -lu / w + w
    return x_top, e_lu / w + 4.0 * EPS64 * (abs(x_top) + w)


@jit
def _bound(kind, eps, q, w, upper):
    lo, hi = log_delta_bounds(kind, eps, q, w)
    return hi if upper else lo


@jit
def eps_bound(kind, log_target, q, w, upper):
    """One side of eps(target) for one pair: upper -- the smallest eps found whose upper δ is
    <= target (+inf if none below 1e300); lower -- the largest eps found whose lower δ exceeds
    it (0 if none).  Doubling, then bisection to the last float; every returned value was
    checked at itself, so it holds whatever the bounds' shape between the points tried.  A NaN
    (no bound) counts as 'above the target' for the upper side and 'not above' for the lower."""
    if upper:
        if _bound(kind, 0.0, q, w, bool(True)) <= log_target:
            return 0.0
        a, b = 0.0, 1.0
        while not (_bound(kind, b, q, w, bool(True)) <= log_target):
            a = b
            b *= 2.0
            if b > 1e300:
                return math.inf
    else:
        if not (_bound(kind, 0.0, q, w, bool(False)) > log_target):
            return 0.0
        a, b = 0.0, 1.0
        while _bound(kind, b, q, w, bool(False)) > log_target:
            a = b
            b *= 2.0
            if b > 1e300:
                return a
    for _ in range(2100):
        m = 0.5 * (a + b)
        if m <= a or m >= b:
            break
        v = _bound(kind, m, q, w, upper)
        if upper:
            if v <= log_target:
                b = m
            else:
                a = m
        elif v > log_target:
            a = m
        else:
            b = m
    return b if upper else a
