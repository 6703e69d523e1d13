#!/usr/bin/env python3
"""Grid-free reference for eps(delta) and delta(eps) of schedules of the Poisson-subsampled Gaussian
mechanism -- entries (sigma_i, q_i, T_i), all steps composed -- at tiny delta: three add/remove and two
replace-one schedules of two entries.  The multi-entry companion of make_sgm_rare.py (its point 6) and
make_sgm_rare_replace.py; read those first.  Writes sgm_rare_multi.csv (sgm_rare.csv's columns; sigma, q and
steps hold the entries' values joined by ';').  numpy, scipy, mpmath and, for their one-step helpers, those
two scripts and make_sgm_t128.py; never the package under test; no loss grid, FFT or discretised PLD.

Setting.  Each step's pair as in those scripts: add/remove Q = N(0, s^2), P = (1-q) N(0, s^2) + q N(1, s^2),
loss l(x), x ~ Q (remove) or -l(x), x ~ P (add); replace-one P = (1-q) N(0, s^2) + q N(-1, s^2), Q = (1-q)
N(0, s^2) + q N(1, s^2) (x -> -x swaps P and Q of every step, so of the schedule: one direction is the
relation's delta).  L sums all steps' losses, delta(eps) = E_Q[(e^L - e^eps)_+], its transform is
prod_i M_i(z)^T_i, M_i(z) = E_Qi[e^{z l_i}]; add/remove delta = max(remove, add).

Method: the sum over the total number of tail steps (make_sgm_rare's point 6, generalised)
------
Q_i = Q_iB + Q_it, Q_it = w(l) Q_i, w(l) = Phi((l - l_c)/beta), beta = l_c/9.5, one l_c for all entries.
prod_i (M_iB + M_it)^T_i = sum_j G_j, G_j = sum_{j_1 + .. + j_n = j} prod_i C(T_i, j_i) M_iB^(T_i - j_i) M_it^j_i,
the transform of the part of L's law with j tail steps in all, a non-negative measure: each delta_j is
inverted by Carr-Madan, e^{-alpha k}/pi int_0^U Re[e^{-iuk} G_j(lam + iu) / ((alpha + iu)(lam + iu))] du,
j = 0 at its Chernoff-optimal alpha0, j = 1 .. J at alpha1 (the j = 1 optimum, one set of moments); G_j in
logs, the entries' terms convolved by log-sum-exp.  M_iB - 1, M_it: make_sgm_rare's lt_bulk / lt_tail
(add/remove) and rp_bulk / rp_tail here (replace-one: the same identity M_B - 1 = E_Q[(1-w)(h(zl) -
z h(l))] - z E_Q[w e^l] + (z-1) E_Q[w], h = expm1(v) - v, on make_sgm_rare_replace's loss, density, ranges
and x-rule).  u-rule make_sgm_rare.u_rule up to U = 10/sqrt(sum T_i Var(l_i)) (the bulk's e^-50), at most
10/beta where j = 0 is dropped; |integrand| near U / max is asserted < 1e-13 (observed <= 7e-21 at schedules
1, 2, 4, <= 5.3e-14 at 3, 5).  alpha0, alpha1 are chosen at the one-big-step root (sum_i T_i delta_1,i(eps) =
target), the root found, chosen again there until it moves < 1e-3.  Dropped, bounded rigorously, added to
rel_err_bound:
* j > J: C(T, j) M_B^(T-j) M_t^j is log-concave in j, so is the convolution G_j; the Chernoff bounds C_j on
  delta_j (proportional to G_j(alpha1 + 1)) then give sum_{j>J} <= C_{J+1} / (1 - C_{J+2}/C_{J+1}); J (2 or 3)
  is the least with that < 1e-16 target: <= 2e-23 relative.
* j = 0 where its Chernoff bound is < 1e-16 target (schedules 3, 5: 5000 steps at q ~ 1e-5, whose all-bulk sum
  cannot reach eps ~ 1.19 and whose transform would not decay): <= 1.2e-21 relative.
Add direction: its loss is <= -sum T_i log(1-q_i) = 0.080 < eps at schedule 3, so delta_add = 0 exactly; at
schedules 1 and 2 prod_i M_i(1 - z)^T_i is inverted (one make_sgm_rare.LTAdd per entry, logs summed, five
runs); it is <= 9.4e-5 of remove (asserted beyond both bounds): add/remove = remove.

Checks (kind=check rows; the script exits if one fails)
------
a. Equal entries, against the single-entry scripts: [(1.03, q6, 50000)] x 2 vs sgm_rare.csv point 6 (T = 1e5;
   q6 = 0.00018660007477106172 is that point's q, not schedule 1's 1.866e-4) and [(0.712, 5.53e-5, 74)] x 2 vs
   sgm_rare_replace.csv point 3 (T = 148, there another partition and u-rule).  delta at their eps vs their
   target (tol 1e-9; observed 2.2e-14, 8.6e-15), the eps roots within their eps_err_bound (observed 8e-16).
b. q = 1: [(4000, 1, 50000), (5000, 1, 50000)] is the Gaussian mechanism with mu = sqrt(sum T_i/s_i^2) = 0.0716:
   remove (l_c = 1.2e-3, J = 15, the term j = 0 carries 0.59 of delta) and add, the same code, against the
   closed form at schedule 1's eps; tol 1e-10, observed <= 5.1e-15.
c. No Fourier: [(0.7, 2e-5, 1), (0.6, 1e-5, 2)] (schedules 3 and 5 with T 1, 2), both relations, at their eps
   and -+ 0.05 (delta 7e-17 .. 1.3e-16): j-sum (l_c 0.18, all-bulk term dropped, <= 4e-21) against a nested
   quadrature delta = delta_1(a) + I, put = put_1(a) + I, I = E_P[put'(a - l); l > a] + E_P[delta'(a - l); l < a]
   (recursive over the steps, all terms >= 0; make_sgm_rare_replace's recursion for mixed steps and both
   relations), composite GL in x with breakpoints at the rounded kinks, two rules (agree to 3e-15); tol 1e-9,
   observed <= 4.6e-14.
d. Schedules 1, 2, 4: the unpartitioned Carr-Madan of prod_i M_i^T_i (long double on make_sgm_t128's exact-weight
   u-rule; M - 1 by its m_minus_1, or rp_bulk with w = 0) at its alpha and alpha - 1 (2e8 .. 2e9-fold
   cancellation); tol 1e-6, observed <= 1.4e-8.  Both runs join the spread below.
e. M_i = 1 + (M_B - 1) + M_t near lam = alpha1 + 1 vs the binomial sum (add/remove, integer lam; <= 2e-16) or
   mpmath quadrature of the densities at lam and lam + 10i (replace-one; <= 6e-15).

Error bounds (make_sgm_rare.error_bounds).  Seven runs, as at point 6: base (l_c 0.2); x-rule twice as fine;
u-rule twice as fine and U x 1.5; alpha0 x 0.7 and alpha1 - 1.5; alpha0 x 1.15 and alpha1 + 0.5; l_c 0.1; l_c 0.3;
and check d.  rel_err_bound = max(1e-11, 10 * spread of delta) + dropped / delta, eps_err_bound = max(10 * spread
of the roots, rel_err_bound / |d log delta / d eps|).  The seven runs agree to <= 1.7e-11 on delta, 3.7e-13 on
eps; check d, less accurate, sets the bounds at schedules 1, 2 and 4.

Result (eps at the target delta; epsilon rows)
  schedule (sigma, q, T) entries                                    delta     eps                  +-
  1 add/remove  (1.03, 1.866e-4, 50000), (1.38, 1.866e-4, 50000)  2.3e-15   0.5224651699304952   3.0e-09
  2 add/remove  (0.9, 1e-4, 20000), (1.2, 3e-4, 30000)            1e-14     0.5879371760877988   5.4e-09
  3 add/remove  (0.7, 2e-5, 3000), (0.6, 1e-5, 2000)              1e-13     1.1877310326253234   1.7e-12
  4 replace-one (0.9, 1e-4, 20000), (1.2, 3e-4, 30000)            1e-14     0.697178149786015    4.0e-09
  5 replace-one (0.7, 2e-5, 3000), (0.6, 1e-5, 2000)              1e-13     1.187789717444151    1.7e-12

Run from the repository root (one process, one core, about 6.5 minutes; numpy 2.4, scipy 1.17, mpmath 1.3):
    taskset -c 1 python tests/reference/make_sgm_rare_multi.py
"""

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")      # one BLAS thread (as make_sgm_rare_replace.py)

import csv  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
from types import SimpleNamespace  # noqa: E402

import mpmath  # noqa: E402
import numpy as np  # noqa: E402
from scipy.optimize import brentq, minimize_scalar  # noqa: E402
from scipy.special import log_ndtr, ndtr  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_sgm_t128 import (Spectrum as FullSpectrum, h_complex, h_real, log1p_c, m_minus_1,  # noqa: E402
                           loss as ar_loss, u_rule as t128_u_rule, x_of_loss as ar_xol)
from make_sgm_rare import (EPS_OFFSETS, LTAdd, _panels, check_moment, d1_np, error_bounds, fmt,  # noqa: E402
                           lt_add_log_size, lt_best_alpha, lt_bulk, lt_chernoff, lt_log_binom, lt_partition,
                           lt_tail, lt_tail_consts, mp_gauss_composed, p_density, u_rule, write_table)
import make_sgm_rare_replace as rr  # noqa: E402

OUT = os.path.join(HERE, "sgm_rare_multi.csv")

# (relation, [(sigma, q, T), ...], target delta), exact float64 values
SCHEDULES = [
    ("add_remove", [(1.03, 1.866e-4, 50000), (1.38, 1.866e-4, 50000)], 2.3e-15),
    ("add_remove", [(0.9, 1e-4, 20000), (1.2, 3e-4, 30000)], 1e-14),
    ("add_remove", [(0.7, 2e-5, 3000), (0.6, 1e-5, 2000)], 1e-13),
    ("replace_one", [(0.9, 1e-4, 20000), (1.2, 3e-4, 30000)], 1e-14),
    ("replace_one", [(0.7, 2e-5, 3000), (0.6, 1e-5, 2000)], 1e-13),
]
WHOLE = (1, 2, 4)               # schedules also inverted as a whole product (check d)
LC = (0.2, 0.1, 0.3)            # partition centres l_c (beta = l_c / 9.5): base, then the two "partition" runs
TINY = 1e-16                    # dropped pieces (all-bulk term, j > J) must be below TINY * target
Q1_SCHEDULE = [(4000.0, 1.0, 50000), (5000.0, 1.0, 50000)]     # check b: q = 1, mu = sqrt(sum T / sigma^2)
Q1_LC = 1.2e-3                  # its partition centre (the terms j = 0 and j >= 1 both carry a share)
SHORT_T = (1, 2)                # check c: the entries of schedules 3 and 5 with these T


# ----------------------------------------------------------------------------- one-step moments

_RANGES = {}


def rp_weights(s, q, lam, umax, part, tail, hx, dphi, dlw, cut=90.0):
    """Replace-one: (l(x), (w or 1 - w) q(x) times the GL weight) on make_sgm_rare_replace's x-rule over
    its scanned range (the part's tilted weight within e^-cut of its maximum)."""
    key = (s, q, lam, part.l_c, tail, cut)
    if key not in _RANGES:
        _RANGES[key] = rr.scan_range(s, q, lam, part, tail, cut)
    x, wq = rr.x_rule(s, q, *_RANGES[key], umax, part, hx, dphi, dlw)
    l, z = rr.loss(x, s, q), (rr.loss(x, s, q) - part.l_c) / part.beta
    return l, np.exp(rr.log_qdens(x, s, q) + (log_ndtr(z) if tail else log_ndtr(-z))) * wq


def rp_tail(s, q, lam, us, part, hx=0.5, dphi=12.0, dlw=0.5):
    """M_t(lam + iu) = E_Q[w e^{zl}] (replace-one) for every u in us."""
    us = np.asarray(us, float)
    l, f = rp_weights(s, q, lam, float(us.max()), part, True, hx, dphi, dlw)
    e, ph = f * np.exp(lam * l), np.outer(us, l)
    return np.cos(ph) @ e + 1j * (np.sin(ph) @ e)


def rp_tail_consts(s, q, part):
    """(E_Q[w], E_Q[w e^l]) (replace-one), on a rule four times finer than the moments'."""
    return tuple(float(np.sum(f * np.exp(lam * l))) for lam in (0.0, 1.0)
                 for l, f in [rp_weights(s, q, lam, 0.0, part, True, 0.125, 12.0, 0.125, 120.0)])


def rp_bulk(s, q, lam, us, part, ew, ewl, hx=0.5, dphi=12.0, dlw=0.5):
    """M_B(z) - 1 = E_Q[(1 - w)(h(zl) - z h(l))] - z E_Q[w e^l] + (z - 1) E_Q[w] (replace-one; lt_bulk's
    identity, from E_Q[e^l] = 1: no first-order cancellation)."""
    us = np.asarray(us, float)
    l, f = rp_weights(s, q, lam, float(us.max()), part, False, hx, dphi, dlw)
    z = lam + 1j * us
    hz = h_complex(np.outer(z, l).ravel()).reshape(len(us), len(l))
    return hz @ f - z * np.sum(h_real(l) * f) - z * ewl + (z - 1) * ew


MOM = {"add_remove": (lt_tail_consts, lt_tail, lt_bulk), "replace_one": (rp_tail_consts, rp_tail, rp_bulk)}


def whole_m1(rel, s, q, lam, us):
    """M(lam + iu) - 1 of a whole step: make_sgm_t128.m_minus_1, or rp_bulk with w = 0 (l_c = inf)."""
    nopart = SimpleNamespace(l_c=math.inf, beta=1.0)
    return m_minus_1(s, q, lam, us) if rel == "add_remove" else rp_bulk(s, q, lam, us, nopart, 0.0, 0.0)


# ----------------------------------------------------------------------------- the sum over tail steps

def group_logs(sched, lbs, lts, J):
    """log G_j, j = 0 .. J, G_j = sum_{j_1 + .. + j_n = j} prod_i C(T_i, j_i) M_Bi^(T_i - j_i) M_ti^j_i, from
    per-entry arrays log M_Bi, log M_ti (log-sum-exp over j_1); None where j > sum T_i."""
    def lse(t):
        m = np.maximum.reduce([v.real for v in t]) if t else None
        return m + np.log(sum(np.exp(v - m) for v in t)) if t else None
    acc = None
    for (s, q, T), lb, lt in zip(sched, lbs, lts):
        lc = lt_log_binom(T, np.arange(min(J, T) + 1))
        a = [T * lb] + [lc[j] + (T - j) * lb + j * lt for j in range(1, min(J, T) + 1)] + [None] * (J - min(J, T))
        acc = a if acc is None else [lse([acc[i] + a[j - i] for i in range(j + 1) if acc[i] is not None
                                          and a[j - i] is not None]) for j in range(J + 1)]
    return acc


def log_sizes(rel, sched, part, cs, lam, J):
    """log G_j(lam) at real lam, j = 0 .. J (None where impossible)."""
    _, tail, bulk = MOM[rel]
    lbs = [np.array([math.log1p(bulk(s, q, lam, [0.0], part, *cs[s, q])[0].real)]) for s, q, _ in sched]
    lts = [np.array([math.log(tail(s, q, lam, [0.0], part)[0].real)]) if J else None for s, q, _ in sched]
    return [None if g is None else float(g[0]) for g in group_logs(sched, lbs, lts, J)]


def remainders(rel, sched, st, k, jmax=400):
    """Chernoff bounds at alpha1 on sum_{j > J} delta_j, J = 0 .. min(jmax, n), n = sum T_i.  Each entry's
    C(T, j) M_B^(T-j) M_t^j is log-concave in j, hence so is their convolution G_j: its ratios decrease,
    and sum_{j > J} <= C_{J+1} / (1 - G_{J+2}/G_{J+1}), C_j the Chernoff bound on delta_j."""
    a1, n = st["alpha1"], sum(T for _, _, T in sched)
    c, out, m = log_sizes(rel, sched, st["part"], st["cs"], a1 + 1, min(jmax, n)), [], min(jmax, n)
    for J in range(m + 1):
        lr = (c[J + 2] - c[J + 1] if J + 2 <= m else -math.inf if m == n else 0.0) if J < m else 0.0
        out.append(0.0 if J >= n else math.exp(lt_chernoff(a1, k, c[J + 1]) - math.log1p(-math.exp(lr)))
                   if lr < 0 else math.inf)
    return out


def setup(rel, sched, k, l_c, scale):
    """Partition, Chernoff-optimal alpha0 (j = 0) and alpha1 (j = 1) at k; j = 0 dropped if its bound at
    k - 0.02 is below TINY * scale; J the least with the j > J bound there below TINY * scale."""
    part = lt_partition(l_c)
    cs = {(s, q): MOM[rel][0](s, q, part) for s, q, _ in sched}
    st = dict(part=part, cs=cs, alpha0=lt_best_alpha(k, lambda lam: log_sizes(rel, sched, part, cs, lam, 0)[0])[0],
              alpha1=lt_best_alpha(k, lambda lam: log_sizes(rel, sched, part, cs, lam, 1)[1])[0])
    st["drop0"] = drop0_bound(rel, sched, st, k - 0.02) < TINY * scale
    rem = remainders(rel, sched, st, k - 0.02)
    st["J"] = next(J for J in range(1, len(rem)) if rem[J] < TINY * scale)
    return st


def drop0_bound(rel, sched, st, k):
    a0 = st["alpha0"]
    return math.exp(lt_chernoff(a0, k, log_sizes(rel, sched, st["part"], st["cs"], a0 + 1, 0)[0]))


def u_max(rel, sched, st):
    """U = 10 / sqrt(sum T_i Var_Q(l_i)), Var_Q(l) ~ q^2 expm1(1/s^2), resp. 2 A^2 expm1(2/s^2) (the bulk's
    Gaussian decay: e^-50); if j = 0 is dropped at most 10 / beta (each kept term has a tail factor, which
    decays like exp(-(u beta)^2 / 2)).  It only sets U: the decay is measured."""
    v = sum(T * (q * q * math.expm1(1 / s**2) if rel == "add_remove" else
                 2 * math.exp(2 * rr.log_a(s, q)) * math.expm1(2 / s**2)) for s, q, T in sched)
    return min(10 / math.sqrt(v), 10 / st["part"].beta) if st["drop0"] else 10 / math.sqrt(v)


class Remove:
    """delta (remove direction, or replace-one) = sum_j delta_j, delta_j <-> G_j, each by Carr-Madan on
    make_sgm_rare's u-rule: j = 0 at alpha0 (unless dropped), j = 1 .. J at alpha1 (one set of moments)."""

    def __init__(self, rel, sched, st, U, a0, a1, ufine=1.0, **kw):
        _, tail, bulk = MOM[rel]
        part, drop0 = st["part"], st["drop0"]
        u, w = u_rule(U, ufine)
        self.u, self.w = u.ravel(), w.ravel()
        lb0, lbs, lts = 0.0, [], []
        for s, q, T in sched:
            cs = st["cs"][s, q]
            if not drop0:
                lb0 = lb0 + T * log1p_c(np.concatenate([bulk(s, q, a0 + 1, up, part, *cs, **kw) for up in u]))
            lbs.append(log1p_c(np.concatenate([bulk(s, q, a1 + 1, up, part, *cs, **kw) for up in u])))
            lts.append(np.log(np.concatenate([tail(s, q, a1 + 1, up, part, **kw) for up in u])))
        den = lambda a: np.log((a + 1j * self.u) * (a + 1 + 1j * self.u))
        g = group_logs(sched, lbs, lts, st["J"])
        self.lg = ([] if drop0 else [(a0, lb0 - den(a0))]) + [(a1, v - den(a1)) for v in g[1:] if v is not None]

    def delta(self, k):
        """(delta(k), max_j int |integrand_j| du / delta, max_j |integrand_j| near U / its maximum, [delta_j])."""
        t = []
        for a, lg in self.lg:
            v, m = self.w * np.exp(lg.real - a * k) * np.cos(lg.imag - self.u * k), np.exp(lg.real)
            t.append((float(np.sum(v) / np.pi), float(np.sum(np.abs(v)) / np.pi),
                      float(m[self.u > 0.95 * self.u.max()].max() / m.max())))
        d = sum(x[0] for x in t)
        return d, max(x[1] for x in t) / d, max(x[2] for x in t), [x[0] for x in t]


def multi_add(sched, alpha, U, **kw):
    """Add direction, transform prod_i M_i(1 - z)^T_i: one make_sgm_rare.LTAdd per entry (each holds
    T_i log M_i(1 - z) - log((alpha + iu)(lam + iu))), their sum (one denominator) in the first."""
    out, *rest = [LTAdd(s, q, T, alpha, U, **kw) for s, q, T in sched]
    out.lg = out.lg + sum(p.lg + np.log((alpha + 1j * p.u) * (alpha + 1 + 1j * p.u)) for p in rest)
    return out


def whole_product(rel, sched, alpha, U):
    """Check d: unpartitioned Carr-Madan of prod_i M_i^T_i, assembled in long double on make_sgm_t128's
    u-rule (weights exact for the rounded nodes), in a make_sgm_t128.Spectrum (its delta() is used)."""
    sp, (u, w), ld = FullSpectrum.__new__(FullSpectrum), t128_u_rule(U), np.longdouble
    sp.alpha, sp.u, sp.w = alpha, u.ravel().astype(ld), w.ravel()
    al, la, ul = ld(alpha), ld(alpha + 1), sp.u
    sp.lr, sp.li = -np.log((al * al + ul * ul) * (la * la + ul * ul)) / 2, -np.arctan2(ul, al) - np.arctan2(ul, la)
    for s, q, T in sched:
        d = np.concatenate([whole_m1(rel, s, q, alpha + 1, up) for up in u])
        dr, di = d.real.astype(ld), d.imag.astype(ld)
        sp.lr, sp.li = sp.lr + T * np.log1p(2 * dr + dr * dr + di * di) / 2, sp.li + T * np.arctan2(di, 1 + dr)
    assert np.all(np.isfinite(sp.lr))
    return sp


# ----------------------------------------------------------------------------- direct nested quadrature (check c)

def step(rel, s, q):
    """One step for the direct quadrature: loss, inverse, log p, delta_1 and put_1(e) = E_Q[(e^e - e^l)_+]
    (closed forms, any real e), the loss's lower bound, the width of its bulk (q, resp. A), the x-range."""
    if rel == "replace_one":
        return SimpleNamespace(ar=False, s=s, lmin=-math.inf, scale=math.exp(rr.log_a(s, q)),
                               xr=(-1 - 16 * s, 1 + 14 * s), loss=lambda x: rr.loss(x, s, q),
                               xol=lambda l: rr.x_of_loss(l, s, q),
                               logp=lambda x: rr.log_qdens(x, s, q) + rr.loss(x, s, q),
                               d1=lambda e: rr.d1_vec(s, q, e), put1=lambda e: rr.put1_vec(s, q, e))

    def put1(e):                    # e^e Q(X < x_e) - P(X < x_e); 0 for e <= log(1-q)
        m = e > math.log1p(-q)
        h = np.where(m, np.expm1(e) + q, q)
        xe = s * s * np.log(h / q) + 0.5
        return np.where(m, h * ndtr(xe / s) - q * ndtr((xe - 1) / s), 0.0)
    return SimpleNamespace(ar=True, s=s, lmin=math.log1p(-q), scale=q, xr=(-16 * s, 1 + 16 * s),
                           loss=lambda x: ar_loss(x, s, q), xol=lambda l: ar_xol(l, s, q),
                           logp=lambda x: np.log(p_density(s, q, x)), d1=lambda e: d1_np(s, q, e), put1=put1)


def nested(steps, a, hx, gr):
    """(delta(a), put(a)) of the composition of steps (step() objects) without Fourier:
        delta(a) = delta_1(a) + I(a),  put(a) = put_1(a) + I(a),
        I(a) = E_P[put'(a - l); l > a] + E_P[delta'(a - l); l < a]   (every term >= 0),
    l, P the first step's, (delta', put') the other steps' (recursively; one step: closed form).
    Composite 20-point GL in x, panels <= hx s, breakpoints at l = a and at l = a - c0 -+ scale gr^j
    (j >= -12), where the inner functions have their rounded kinks: c0 = 0 and the inner lower bound."""
    st, rest = steps[0], steps[1:]
    aa = np.atleast_1d(np.asarray(a, float))
    if not rest:
        return st.d1(aa), st.put1(aa)
    off = min(r.scale for r in rest) * gr ** np.arange(-12.0, 200.0)
    off = np.concatenate([off[off < 3], -off[off < 3]])
    c0s = [0.0] + ([sum(r.lmin for r in rest)] if st.ar else [])
    lo, hi = st.xr
    dd, pp = [], []
    for ai in aa:
        ls = np.concatenate([ai - c0 - off for c0 in c0s] + [[ai]])
        with np.errstate(all="ignore"):
            xb = st.xol(ls[ls > st.lmin])
        bb = np.concatenate([np.linspace(lo, hi, int(math.ceil((hi - lo) / (hx * st.s))) + 1), xb[np.isfinite(xb)]])
        x, w = _panels(np.unique(bb[(bb >= lo) & (bb <= hi)]))
        l = st.loss(x)
        d_in, p_in = nested(rest, ai - l, hx, gr)
        I = float(np.sum(w * np.exp(st.logp(x)) * np.where(l > ai, p_in, d_in)))
        dd.append(float(st.d1(np.array([ai]))[0]) + I)
        pp.append(float(st.put1(np.array([ai]))[0]) + I)
    return np.array(dd), np.array(pp)


# ----------------------------------------------------------------------------- one schedule

def find_root(f, k):
    """brentq on f, from a bracket grown around k."""
    d = 0.05
    while not f(max(k - d, 1e-3)) > 0 > f(k + d):
        d *= 2
        assert d < 2, "no bracket"
    return brentq(f, max(k - d, 1e-3), k + d, xtol=1e-15, rtol=1e-15)


def one_big_step_root(rel, sched, target):
    steps = [(step(rel, s, q), T) for s, q, T in sched]
    return brentq(lambda e: math.log(sum(T * float(st.d1(np.array([e]))[0]) for st, T in steps) / target),
                  0.01, 20.0, xtol=1e-12)


def remove_runs(rel, sched, target, eps_c, pr, light=False):
    """The seven variation runs (one if light): (table of eps, {run: deltas}, {run: root}, base setup, base
    Remove).  First the alphas are chosen at eps_c (the one-big-step root), the root found, the alphas chosen
    again there, until the root moves < 1e-3."""
    for _ in range(4):
        st0 = setup(rel, sched, eps_c, LC[0], target)
        sp = Remove(rel, sched, st0, u_max(rel, sched, st0), st0["alpha0"], st0["alpha1"])
        root = find_root(lambda e: math.log(sp.delta(e)[0] / target), eps_c)
        pr(f"  alphas at k = {eps_c:.6f}: alpha0 {st0['alpha0']:.3f}{' (j = 0 dropped)' if st0['drop0'] else ''}, "
           f"alpha1 {st0['alpha1']:.3f}, J {st0['J']} -> eps(target) {root:.10f}")
        if abs(root - eps_c) < 1e-3:
            break
        eps_c = root
    setups = {LC[0]: st0}
    runs = [("base", dict(l_c=LC[0])), ("x fine", dict(l_c=LC[0], hx=0.25, dphi=6.0, dlw=0.25)),
            ("u fine", dict(l_c=LC[0], uf=1.5, ufine=0.5)), ("alpha low", dict(l_c=LC[0], da=(0.7, -1.5))),
            ("alpha high", dict(l_c=LC[0], da=(1.15, 0.5))), (f"partition l_c {LC[1]}", dict(l_c=LC[1])),
            (f"partition l_c {LC[2]}", dict(l_c=LC[2]))]
    deltas, roots, table, base_sp = {}, {}, None, None
    for name, kw in runs[:1 if light else len(runs)]:
        kw = dict(kw)
        l_c, (f0, f1), uf = kw.pop("l_c"), kw.pop("da", (1.0, 0.0)), kw.pop("uf", 1.0)
        st = setups[l_c] = setups.get(l_c) or setup(rel, sched, eps_c, l_c, target)
        a0, a1 = st["alpha0"] * f0, st["alpha1"] + f1 if st["alpha1"] + f1 > 1 else 0.6 * st["alpha1"]
        U = uf * u_max(rel, sched, st)
        sp = sp if name == "base" else Remove(rel, sched, st, U, a0, a1, **kw)     # base: the last tuning run
        roots[name] = find_root(lambda e: math.log(sp.delta(e)[0] / target), eps_c)
        if table is None:
            table, base_sp = sorted(set([round(round(roots[name], 6) + o, 6) for o in EPS_OFFSETS] + [roots[name]])), sp
            assert min(table) > eps_c - 0.02 and abs(roots[name] - eps_c) < 1e-3
        res = [sp.delta(e) for e in table]
        deltas[name] = [r[0] for r in res]
        pr(f"  run {name:16s} l_c {st['part'].l_c:.2f} alpha0 {a0:.3f}{' (dropped)' if st['drop0'] else ''} "
           f"alpha1 {a1:.3f} J {st['J']} U {U:.0f} ({len(sp.u)} u-nodes): eps(target) = {roots[name]!r}; "
           f"cancellation {max(r[1] for r in res):.1f}, |integrand| near U / max {max(r[2] for r in res):.1e}")
        assert max(r[2] for r in res) < 1e-13
    return table, deltas, roots, st0, base_sp


def side_bounds(rel, sched, st, table, base):
    """Per eps, (dropped all-bulk term + j > J remainder) / delta, both Chernoff bounds."""
    return [(remainders(rel, sched, st, e)[st["J"]] + (drop0_bound(rel, sched, st, e) if st["drop0"] else 0)) / d
            for e, d in zip(table, base)]


def add_direction(sched, table, i_r, U, pr):
    """Add direction: (deltas, rel bound, -sum T log(1-q)); five runs as make_sgm_rare's point 6, or exact
    zeros if every eps is beyond -sum T_i log(1-q_i), the add loss's bound."""
    add_max = -sum(T * math.log1p(-q) for _, q, T in sched)
    if min(table) >= add_max:
        pr(f"  add direction: loss <= -sum T log(1-q) = {add_max:.4f} < every tabulated eps: delta_add = 0 exactly")
        return [0.0] * len(table), 0.0, add_max
    aa = lt_best_alpha(table[i_r], lambda lam: sum(lt_add_log_size(s, q, T)(lam) for s, q, T in sched))[0]
    add_d = {}
    for name, kw in [("base", dict(alpha=aa, U=U)), ("x fine", dict(alpha=aa, U=U, hx=0.25, dphi=6.0)),
                     ("u fine", dict(alpha=aa, U=1.5 * U, ufine=0.5)), ("alpha low", dict(alpha=0.7 * aa, U=U)),
                     ("alpha high", dict(alpha=1.3 * aa, U=U))]:
        sp = multi_add(sched, **kw)
        res = [sp.delta(e) for e in table]
        add_d[name] = [r[0] for r in res]
        pr(f"  add run {name:10s} alpha {kw['alpha']:.2f}: delta_add(eps_r) = {add_d[name][i_r]!r}, "
           f"cancellation {max(r[1] for r in res):.1f}")
    base = add_d["base"]
    spread = max(abs(add_d[n][i] - base[i]) / base[i] for n in add_d for i in range(len(table)))
    return base, max(1e-11, 10 * spread), add_max


def moment_checks(rel, sched, st, rows, check):
    """M = 1 + (M_B - 1) + M_t per entry near lam = alpha1 + 1: add/remove against the binomial sum at an
    integer lam (make_sgm_rare.check_moment), replace-one against mpmath quadrature of the densities
    (make_sgm_rare_replace.mp_moment_m1) at z = lam and lam + 10i."""
    _, tail, bulk = MOM[rel]
    for s, q, T in sched:
        m = lambda lam, u: bulk(s, q, lam, [u], st["part"], *st["cs"][s, q])[0] + tail(s, q, lam, [u], st["part"])[0]
        if rel == "add_remove":
            lam = max(2, round(st["alpha1"] + 1))
            check_moment(rows, s, q, lam, 1 + m(float(lam), 0.0).real, f" (l_c {st['part'].l_c:.2f})")
        for u in (0.0, 10.0) if rel == "replace_one" else ():
            check([(s, q, 1)], "replace", f"|M(z) - 1| at z = {st['alpha1'] + 1!r} + {u:g}i: (M_B - 1) + M_t vs mpmath "
                  "quadrature of q expm1(z log(p/q))", None, complex(m(st["alpha1"] + 1, u)),
                  rr.mp_moment_m1(s, q, st["alpha1"] + 1, u), 1e-10)


def whole_check(rel, sched, target, base, table, i_r, U, check, pr):
    """Check d (large T): the unpartitioned formulation at its Chernoff alpha and alpha - 1; returns their
    deltas and roots (they join the error estimate, as in make_sgm_rare's point 6)."""
    def F(a):
        v = sum(T * math.log1p(whole_m1(rel, s, q, a + 1, [0.0])[0].real) for s, q, T in sched)
        return v - a * table[i_r] - math.log(a * (a + 1)) if math.isfinite(v) else 1e300
    with np.errstate(over="ignore", invalid="ignore"):
        af = float(minimize_scalar(F, bounds=(0.05, 40.0), method="bounded", options={"xatol": 1e-4}).x)
    ds, rts = {}, {}
    for a in (af, af - 1.0):
        ws = whole_product(rel, sched, a, U)
        ds[a] = [ws.delta(e)[0] for e in table]
        rts[a] = brentq(lambda e: math.log(ws.delta(e)[0] / target), table[0], table[-1], xtol=1e-15, rtol=1e-15)
        c = ws.delta(table[i_r])
        pr(f"  unpartitioned prod M_i^T_i, alpha {a:.3f}: eps(target) = {rts[a]!r}, cancellation {c[1] / c[0]:.1e}")
    own = max(abs(ds[af][i] - ds[af - 1][i]) / ds[af][i] for i in range(len(table)))
    for i in (0, i_r, len(table) - 1):
        check(sched, "remove" if rel == "add_remove" else "replace", "j-sum vs the unpartitioned Carr-Madan of "
              f"prod M_i^T_i (long double, alpha {af:.2f}; its runs at alpha, alpha - 1 differ {own:.1e})", table[i],
              base[i], mpmath.mpf(ds[af][i]), 1e-6)
    return list(ds.values()), list(rts.values())


def run_schedule(ip, rel, sched, target, rows, check, pr):
    """One schedule: its rows; returns (eps, eps_err_bound, table, index of the root)."""
    eps0 = one_big_step_root(rel, sched, target)
    pr(f"schedule {ip}: {rel} {sched} target {target!r}; one-big-step eps {eps0:.6f}")
    table, deltas, roots, st, _ = remove_runs(rel, sched, target, eps0, pr)
    eps_r, base = roots["base"], deltas["base"]
    i_r = table.index(eps_r)
    side = side_bounds(rel, sched, st, table, base)
    pr(f"  dropped pieces ({'all-bulk term, ' if st['drop0'] else ''}j > J) <= {max(side):.1e} relative (Chernoff)")
    moment_checks(rel, sched, st, rows, check)
    cands, croots, Uv = list(deltas.values()), list(roots.values()), u_max(rel, sched, dict(st, drop0=False))
    if ip in WHOLE:
        wd, wr = whole_check(rel, sched, target, base, table, i_r, Uv, check, pr)
        cands, croots = cands + wd, croots + wr
    spread, rel_b, slope, eps_spread, eps_b = error_bounds(cands, base, table, side, croots, eps_r, i_r)
    pr(f"  spread of delta {spread:.1e}, of the eps roots {eps_spread:.1e} -> rel_err_bound {rel_b[i_r]:.1e}; "
       f"d log delta/d eps {slope:.3f}; eps = {eps_r!r} +- {eps_b:.1e}")
    sig, qs, Ts = labels(sched)
    row = lambda kind, d, e, v, rb, note, ex="": rows.append(dict(
        kind=kind, sigma=sig, q=qs, steps=Ts, direction=d, eps=fmt(e), delta_ref=fmt(v), rel_err_bound=rb,
        eps_err_bound=f"{eps_b:.1e}" if kind == "epsilon" else "", exact=ex, note=note))
    how = f"Carr-Madan, sum over the total number of tail steps j = {int(st['drop0'])} .. {st['J']}"
    if rel == "replace_one":
        for i, e in enumerate(table):
            row("delta", "replace", e, base[i], f"{rel_b[i]:.1e}", how + " (replace-one: one direction)")
        row("epsilon", "replace", eps_r, target, "", "eps at the target delta (brentq)")
        return eps_r, eps_b, table, i_r
    add_d, add_b, add_max = add_direction(sched, table, i_r, Uv, pr)
    pr(f"  delta_add / delta_remove <= {max(a / d for a, d in zip(add_d, base)):.1e}")
    for i, e in enumerate(table):
        assert add_d[i] * (1 + add_b) < base[i] * (1 - rel_b[i])
        row("delta", "remove", e, base[i], f"{rel_b[i]:.1e}", how)
        if add_d[i]:
            row("delta", "add", e, add_d[i], f"{add_b:.1e}", "Carr-Madan of prod M_i(1 - z)^T_i")
        else:
            row("delta", "add", e, 0.0, "0", f"exact: add loss <= -sum T log(1-q) = {add_max:.4f} < eps", "0")
        row("delta", "max", e, base[i], f"{rel_b[i]:.1e}", "add/remove = max(remove, add) = remove")
    row("epsilon", "max", eps_r, target, "", "eps at the target delta (brentq on remove; add is "
        + (f"{add_d[i_r] / base[i_r]:.1e} of it there)" if add_d[i_r] else "0 there)"))
    return eps_r, eps_b, table, i_r


# ----------------------------------------------------------------------------- checks a - c

def check_split(rel, name, steps, check, pr):
    """Check a: a single-entry reference point (the epsilon row with this T in that CSV), its entry split
    into two equal ones: delta at its eps and the eps root must agree."""
    with open(os.path.join(HERE, name)) as fh:
        r = next(r for r in csv.DictReader(ln for ln in fh if not ln.startswith("#"))
                 if r["kind"] == "epsilon" and r["steps"] == str(steps))
    s, q, eps_ref, target, bound = (float(r[c]) for c in ("sigma", "q", "eps", "delta_ref", "eps_err_bound"))
    sched = [(s, q, steps // 2), (s, q, steps - steps // 2)]
    pr(f"check a: {rel} {sched} vs {name} (T = {steps}: eps {eps_ref!r} +- {bound:.1e} at delta {target!r})")
    _, _, roots, _, sp = remove_runs(rel, sched, target, one_big_step_root(rel, sched, target), pr, light=True)
    d = "remove" if rel == "add_remove" else "replace"
    check(sched, d, f"two equal entries vs {name} T = {steps} (delta at its eps vs its target)", eps_ref,
          sp.delta(eps_ref)[0], mpmath.mpf(target), 1e-9)
    check(sched, d, f"two equal entries vs {name} T = {steps}: eps root (delta_ref column) vs its eps (exact "
          f"column; its eps_err_bound {bound:.1e})", roots["base"], roots["base"], mpmath.mpf(eps_ref), bound / eps_ref)


def check_q1(table, i_r, check, pr):
    """Check b: q = 1, the composition is the Gaussian mechanism with mu = sqrt(sum T_i / sigma_i^2)."""
    sched, mu = Q1_SCHEDULE, mpmath.sqrt(mpmath.fsum(mpmath.mpf(T) / mpmath.mpf(s) ** 2 for s, _, T in Q1_SCHEDULE))
    st = setup("add_remove", sched, table[i_r], Q1_LC, float(mp_gauss_composed(mu, table[i_r])))
    sp = Remove("add_remove", sched, st, u_max("add_remove", sched, st), st["alpha0"], st["alpha1"])
    aa = lt_best_alpha(table[i_r], lambda lam: sum(lt_add_log_size(s, q, T)(lam) for s, q, T in sched))[0]
    ad = multi_add(sched, aa, u_max("add_remove", sched, dict(st, drop0=False)))
    pr(f"check b: q = 1 {sched}, mu {mpmath.nstr(mu, 10)}; l_c {Q1_LC}, alpha0 {st['alpha0']:.2f}, "
       f"alpha1 {st['alpha1']:.2f}, J {st['J']}, add alpha {aa:.2f}")
    for i in (0, i_r, len(table) - 1):
        ex = mp_gauss_composed(mu, table[i])
        d, _, _, dj = sp.delta(table[i])
        check(sched, "remove", f"q=1 closed form (mu {mpmath.nstr(mu, 6)}), remove: j-sum (l_c {Q1_LC}, J {st['J']}; "
              f"the term j = 0 carries {dj[0] / d:.2f} of delta)", table[i], d, ex, 1e-10)
        check(sched, "add", f"q=1 closed form, add (alpha {aa:.1f})", table[i], ad.delta(table[i])[0], ex, 1e-10)


def check_short(rel, base_sched, k, check, pr):
    """Check c: base_sched's entries with T = SHORT_T, at k (that schedule's eps) and k -+ 0.05: the
    j-sum (all-bulk term dropped with its bound) against the direct nested quadrature (two rules)."""
    sched = [(s, q, T) for (s, q, _), T in zip(base_sched, SHORT_T)]
    l_c = min(LC[0], 0.9 * (k - 0.07) / sum(SHORT_T) * 9.5 / 17.5)       # T l_m <= 0.9 min eps
    st = setup(rel, sched, k, l_c, 1e-20)
    assert st["drop0"]
    sp = Remove(rel, sched, st, u_max(rel, sched, st), st["alpha0"], st["alpha1"])
    pr(f"check c: {rel} {sched} at eps {k:.4f} -+ 0.05; l_c {l_c:.4f}, alpha1 {st['alpha1']:.2f}, J {st['J']}")
    steps = [step(rel, s, q) for s, q, T in sched for _ in range(T)]
    for e in (k - 0.05, k, k + 0.05):
        d_a, d_b = (float(nested(steps, e, hx, gr)[0][0]) for hx, gr in ((0.25, 2.0), (0.18, 1.5)))
        side = side_bounds(rel, sched, st, [e], [d_b])[0]
        check(sched, "remove" if rel == "add_remove" else "replace", f"T = {SHORT_T} j-sum (all-bulk term "
              f"dropped, <= {side:.0e} relative) vs direct nested quadrature (no Fourier; its two rules differ "
              f"{abs(d_a - d_b) / d_b:.1e})", e, sp.delta(e)[0], mpmath.mpf(d_b), 1e-9)


# ----------------------------------------------------------------------------- main

def labels(sched):
    """The sigma, q and steps columns: the entries' values joined by ';'."""
    return tuple(";".join(str(v) if i == 2 else fmt(v) for v in col) for i, col in enumerate(zip(*sched)))


def main():
    mpmath.mp.dps = 30
    rows, summary, res = [], [], []
    pr = lambda m: print(m, flush=True)

    def check(sched, direction, name, eps, got, exact, tol):
        rel = abs(got - complex(exact)) / abs(complex(exact))
        pr(f"  check {name}: got {got!r} ref {mpmath.nstr(exact, 17)} rel {rel:.2e} (tol {tol:g})")
        rows.append(dict(kind="check", **dict(zip(("sigma", "q", "steps"), labels(sched))), direction=direction,
                         eps="" if eps is None else fmt(eps), delta_ref=fmt(abs(got)), rel_err_bound=f"{rel:.3e}",
                         eps_err_bound="", exact=mpmath.nstr(abs(exact), 20), note=name))
        if not rel <= tol:
            sys.exit(f"check {name} failed: rel {rel:.3e} > {tol:g}")

    for ip, (rel, sched, target) in enumerate(SCHEDULES, 1):
        res.append(run_schedule(ip, rel, sched, target, rows, check, pr))
        summary.append((ip, *labels(sched), target, *res[-1][:2]))
    check_q1(*res[0][2:], check, pr)
    check_split("add_remove", "sgm_rare.csv", 100000, check, pr)
    check_split("replace_one", "sgm_rare_replace.csv", 148, check, pr)
    check_short("add_remove", SCHEDULES[2][1], res[2][0], check, pr)
    check_short("replace_one", SCHEDULES[4][1], res[4][0], check, pr)
    write_table(OUT, "# generated by tests/reference/make_sgm_rare_multi.py (schedules of several entries: Carr-Madan "
                "inversion of every term of the sum over the total number of tail steps, per-entry bulk/tail "
                "transforms; checked against sgm_rare.csv point 6 and sgm_rare_replace.csv point 3 split into two "
                "entries, q = 1, a direct nested quadrature without Fourier and the unpartitioned inversion), "
                f"numpy {np.__version__}, scipy {__import__('scipy').__version__}, mpmath {mpmath.__version__}\n",
                rows, summary)


if __name__ == "__main__":
    main()
