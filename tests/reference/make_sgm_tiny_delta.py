#!/usr/bin/env python3
"""Grid-free reference for eps(delta) of the Poisson-subsampled Gaussian mechanism composed T times
at tiny delta (1e-42 .. 1e-28), add/remove relation, to ~1e-6 relative or better.

Writes sgm_tiny_delta.csv next to this script.  Imports numpy, scipy and mpmath only (never the
package under test) plus the helper scripts make_sgm_rare.py (its large-T machinery: the partitioned
moments lt_bulk / lt_tail, lt_log_terms, lt_best_alpha, lt_remainder, the u-rule, the closed form
delta_1, the binomial moment mp_moment_int, delta2_mp and the direct no-Fourier recursion pieces
delta_step / Table) and make_sgm_t128.py (loss, log1p_c).  No loss grid, no FFT and no discretised PLD
is involved anywhere.

Usage (from the repository root, one process, one core):
    python tests/reference/make_sgm_tiny_delta.py [A B C D E T8]      (default: all six points)
After every point the CSV is rewritten with the rows of every point computed in this invocation plus
the previous file's rows of the points not re-run (rows are tagged "point X:" in the note column;
untagged rows of older versions are dropped), so a partial or interrupted run never loses finished
rows.  Header line 1 gives the total runtime of the points held (and "INCOMPLETE: missing ..." if
not all six are there), line 2 the points held with their runtimes.

Setting (as make_sgm_rare.py's)
-------
One step's loss l(x) = log(1 - q + q e^{(2x-1)/(2 s^2)}), x ~ Q = N(0, s^2), against
P = (1-q) N(0, s^2) + q N(1, s^2); L the T-fold sum; remove: delta(eps) = E_Q[(e^L - e^eps)_+].
add: its loss is <= -T log(1-q) (0.136 at T = 454, the largest here), below every tabulated eps,
so delta_add = 0 exactly there (asserted per point; add rows with delta 0): add/remove = remove.
eps(delta) is the root of delta(eps) = target (delta is strictly decreasing where positive).
Per target point delta is tabulated at the root and at round(root, 6) + (-1e-3, -1e-4, 0, 1e-4, 1e-3).

Points and routes
------
  A  sigma 1.9,       q 3e-4,    T 454,  delta 1e-40            Carr-Madan j-sum (below)
  B  sigma 1.9,       q 3e-4,    T 454,  delta 1e-38            Carr-Madan j-sum
  C  sigma 0.5329219, q 1.2e-5,  T 2429, delta 2.17e-28         Carr-Madan j-sum
  D  sigma 0.4045,    q 1.73e-5, T 40,   delta 1.22e-37         direct recursion (Carr-Madan not used)
  E  sigma 1.9,       q 3e-4,    T 60,   delta 1e-42, and delta at eps 0.2886   direct recursion
                                                                (Carr-Madan base run as a check)
  T8 sigma 1.9,       q 3e-4,    T 8,    delta at eps 0.2886    direct recursion (Carr-Madan check)
T <= 60 (RECURSION_T_MAX): the direct recursion is the route; at T = 454 / 2429 it is too slow (one
Chebyshev table per step) and Carr-Madan is the route.

Route 1, T <= 60: the direct no-Fourier recursion
-------
delta_n(a) = E_P[delta_{n-1}(a - l(X))], starting from the closed-form delta_1 (make_sgm_rare's
delta_step: composite 20-point Gauss-Legendre in x on [-16 s, x0] with panels <= hx s plus a kink
cluster at l = a - (n-1) log(1-q) - q gr^j; beyond x0 the inner value is 1 - e^{a-l} exactly and that
part is in closed form).  delta_2 .. delta_{T-1} are stored as piecewise Chebyshev tables (24th
degree) of the put part on [n log(1-q), 0] and of log delta_n on [0, A], panels geometric with the
given ratio (class Rec; XTable allows evaluation up to 1 % beyond the top panel, which the next step
needs by <= -log(1-q) = 3e-4: Chebyshev extrapolation of a smooth log delta).  No Fourier transform
and no partition.  A = (upper bound on the root) + 0.06: the upper bound is the Chernoff bound
delta(k) <= M(lam)^T e^{-(lam-1)k} (1/lam)(1-1/lam)^{lam-1}, M the binomial moment (mpmath),
minimised over integer lam (27.59 at D, 1.59 at E; the roots are 24.018 and 0.2939); the root is
bracketed below by stepping down from 0.9 x that bound and found by brentq to 1e-14.
Two rules: (Table panel ratio, hx, kink cluster ratio) = (1.5, 0.07, 1.5) gives the value,
(2, 0.1, 2) the comparison.
    rel_err_bound = max(1e-10, 10 * max over the tabulated eps of |rule 2 - rule 1.5| / rule 1.5),
    eps_err_bound = max(10 * |root difference of the two rules|, rel_err_bound / |d log delta / d eps|)
(slope from the tabulated root +- 1e-4).
Checks (kind=check rows): the two rules against each other at the root (informational row); the
recursion's first step (delta_step on the closed-form delta_1, main rule) against mpmath quad of
E_P[delta_1(eps - l)] at 30 digits (make_sgm_rare.delta2_mp), tolerance 1e-9; and, only where
Carr-Madan is reliable -- its estimated u-truncation (see below) at most CM_TRUNC_MAX = 1e-6 of delta
-- the recursion against a Carr-Madan base run at the lowest, central and highest tabulated eps,
tolerance max(1e-7, 10 x u-truncation).  That holds at E (estimate 3.6e-9) and T8 (6.5e-7), not at
D (5.1e-3: at sigma 0.4045, T = 40 the bulk's near-point mass at l ~ 0 carries delta_0 ~ 99.9 % of
delta, alpha0 is only ~3.4, its characteristic function decays slowly in u and U = 3000 truncates
~5e-3 of delta; the earlier Carr-Madan base run gave eps 24.01778 against the recursion's 24.01800).

Route 2, T = 454 / 2429: Carr-Madan with a sum over the number of "tail" steps (make_sgm_rare.py
point 6's method)
-------
Each step's law is split Q = Q_B + Q_t by a smooth weight of the loss, w(l) = Phi((l - l_c)/beta)
(tail) and 1 - w (bulk).  The T-fold law is sum_j C(T, j) Q_B^{*(T-j)} * Q_t^{*j}; every term is a
non-negative measure, and delta = sum_j delta_j, delta_j inverted by Carr-Madan at its own damping:

    delta_j(k) = e^{-alpha k}/pi int_0^U Re[e^{-iuk} C(T,j) M_B(z)^{T-j} M_t(z)^j / ((alpha+iu)(lam+iu))] du,

z = lam + iu, lam = alpha + 1, M_B(z) - 1 and M_t(z) by make_sgm_rare.lt_bulk / lt_tail (composite
20-point Gauss-Legendre in x, panels <= hx s, <= dphi rad in u l(x), <= dlw beta across w's
transition; first-order terms of M_B - 1 cancelled analytically).  j = 0 at alpha0, j >= 1 at alpha1.
The root is found from the one-big-step eps (T delta_1 = target), re-choosing the dampings at the
root until it moves by < 0.2 %.

What differs from point 6 (why it is needed here):
* Sharper partition: l_c = 0.8 eps (0.7 eps in the "partition" run), beta = l_c / 16 (l_c / 20).
  With point 6's beta = l_c / 9.5 the tail weight of the bulk near l = 0 is Phi(-9.5) = 1e-21; at
  delta ~ 1e-40 that spurious "tail" mass, damped only by e^{-alpha k}, made the j = 1 integral cancel
  2e13-fold (measured at point A).  With l_c / beta = 16 it is Phi(-16) = e^-130 and the j = 1 integral
  cancels <= ~60-fold (printed per run: "cancellation" = max_j int |integrand_j| / delta).
* alpha0 and alpha1 are the Chernoff-optimal dampings of the j = 0 and j = 1 terms (alpha1 stays
  below the value where the lognormal-like far tail of one step, e^{lam l} phi(x), explodes: ~47 at
  sigma 1.9; alpha0 ~ 360 .. 400 at sigma 1.9 -- larger alpha0 overflows M_B^T: the tilted bulk's
  mass at the partition edge, raised to the power T).  alpha0 is raised to (-log target + 30)/eps
  when the j = 0 Chernoff bound there is at most e^16 above its optimum (then the bulk's near-point
  mass at l ~ 0, whose characteristic function decays slowly at small T, enters with <= e^-30
  target); that happened at point D only, which is no longer on this route.
* U is chosen per point, not 10/sqrt(T Var l): the smallest u (scanned by factors 1.25 from 20) at
  which u |integrand_j(u)| / pi < 1e-10 target (j = 0, itself <= 1e-5 of delta at sigma 1.9) and
  < 1e-13 target (j >= 1), twice in a row, times 1.2 (capped at U_CAP = 3000); the j >= 1 moments
  are computed only up to their own U1 (zero beyond).  Beyond U each
  integrand decays like 1/u^2 once its structure has decayed (|(alpha+iu)(lam+iu)| >= u^2), so the
  truncated tail is ~ U |integrand(U)| / pi; that estimate ("u-truncation", relative to the target)
  is printed and added to rel_err_bound.  The bulk's near-point mass at l ~ 0 enters the j = 0
  integrand only through e^{-alpha0 k} and its characteristic function decays like
  exp(-u^2 T Var_Q(l) / 2); at small T this sets U (or the cap).
* J (terms j > J dropped): the smallest with make_sgm_rare.lt_remainder (Chernoff bound on
  sum_{j>J} delta_j at alpha1) < 1e-13 target at the lowest tabulated eps; the bound is added to
  rel_err_bound per eps.

Error bars (route 2).  Per point five Carr-Madan runs change what could be wrong: base; x-quadrature
twice as fine ("x fine": hx 0.25, dphi 6, dlw 0.25); u-rule with half the panel widths ("u fine");
alpha0 x 0.9 and alpha1 x 0.85 ("alpha": other integrands, other cancellation, U re-chosen); a
different partition ("partition": l_c = 0.7 eps, beta = l_c / 20: a different split of the same sum
into j-terms, other U).  (SKIP_XFINE lists points whose "x fine" run is left out for runtime; it is
empty: all five runs are made at A, B and C.)  spread = the largest relative difference of delta from
the base run over those runs at every tabulated eps:
    rel_err_bound = max(1e-10, 10 * spread) + (j > J remainder) / delta + (u-truncation) target / delta,
    eps_err_bound = max(10 * largest difference of the eps roots, rel_err_bound / |d log delta / d eps|).
(The 1e-10 floor covers float64 assembly of integrals that cancel up to ~60-fold.)
Checks (kind=check rows; the script exits if one fails its tolerance), besides one row per variation
run (that run vs base at the root):
1. T = 1, the base spectrum's tail term j = 1 (same alpha1, partition, quadrature; only the power
   changes) against direct quadrature of E_Q[w(l)(e^l - e^eps)_+] = E_P[w(l)(1 - e^{eps-l})_+]
   (composite GL in x, two rules).  (The whole delta_1 cannot be checked this way at these tiny
   deltas: at T = 1 the bulk's near-point mass does not decay in u, and its e^{-alpha0 k} is not small
   against delta_1 = delta / T.)  Tolerance 1e-8.
2. T = 2, the base spectrum's tail terms: (delta_{j=1} + 2 delta_{j=2}) / 2 = E_Q[w(l_1)(e^{l_1+l_2} -
   e^eps)_+] = E_P[w(l) delta_1(eps - l)] against direct quadrature with the closed-form delta_1
   inside (kink cluster of make_sgm_rare.direct_rule; no Fourier; two rules).  This exercises the
   bulk moment M_B (one bulk factor) and the tail moment together.  Tolerance 1e-8.
3. M(lam) = 1 + (M_B - 1) + M_t at integer lam near alpha1 + 1 against the binomial sum
   sum_j C(lam, j) (1-q)^(lam-j) q^j e^{j(j-1)/(2 s^2)} (mpmath).  Tolerance 1e-12.

Result of the final run (this version; values as in the CSV)
------
  A  T 454:  eps(1e-40)  = 0.26919061029469127 +- 9.5e-13  (5 Carr-Madan runs agree to 1.4e-13 on delta;
             rel_err_bound 1e-10 floor)                                                    67 s
  B  T 454:  eps(1e-38)  = 0.22803332123924824 +- 8.4e-13  (runs agree to 1.6e-13)               69 s
  C  T 2429: eps(2.17e-28) = 10.107709636690684 +- 2.3e-10 (runs agree to 2.0e-12; rel_err_bound
             1.3e-9, mostly the u-truncation estimate 1.2e-9 of the base run at U = U_CAP = 3000;
             an earlier run at U_CAP 4000 gave 10.107709636690686)                         372 s
  D  T 40:   eps(1.22e-37) = 24.018001720154523 +- 2.3e-6  (recursion rules differ 7.6e-7 on delta,
             2.3e-7 on eps; rel_err_bound 7.6e-6; T=2 step vs mpmath 1.5e-14; Carr-Madan not used)  56 s
  E  T 60:   eps(1e-42)  = 0.2938705325171247 +- 1.0e-12, delta(0.2886) = 1.689504191624962e-42
             (rel +- 1e-10) (rules differ 8.5e-12; Carr-Madan agrees to 7e-12 / 1.2e-12 / 1.3e-12
             at the lowest / central / highest eps; T=2 step vs mpmath 2.0e-13)               134 s
  T8 T 8:    delta(0.2886) = 2.235106069949542e-43 (rel +- 1e-10) (rules differ 1.0e-12; Carr-Madan
             agrees to 5.7e-10, its u-truncation estimate 6.5e-7; T=2 step vs mpmath 5.6e-13)   24 s
Total 723 s on one core (numpy 2.4.6, scipy 1.17.1, mpmath 1.3.0).
"""

import csv
import math
import os
import re
import sys
import time

import mpmath
import numpy as np
from scipy.optimize import brentq
from scipy.special import ndtr

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_sgm_rare as R  # noqa: E402  (partitioned moments, u-rule, delta_1, direct recursion pieces)
from make_sgm_t128 import log1p_c  # noqa: E402

OUT = os.path.join(HERE, "sgm_tiny_delta.csv")

# (name, sigma, q, T, target delta or None, extra eps at which delta is tabulated, eps for a delta-only point)
POINTS = [
    ("A", 1.9, 3e-4, 454, 1e-40, (), None),
    ("B", 1.9, 3e-4, 454, 1e-38, (), None),
    ("C", 0.5329219, 1.2e-5, 2429, 2.17e-28, (), None),
    ("D", 0.4045, 1.73e-5, 40, 1.22e-37, (), None),
    ("E", 1.9, 3e-4, 60, 1e-42, (0.2886,), None),
    ("T8", 1.9, 3e-4, 8, None, (), 0.2886),
]
NAMES = [p[0] for p in POINTS]
U_CAP = 3000.0
RECURSION_T_MAX = 60          # T <= this: the direct recursion is the route (Carr-Madan a check)
REC_RULES = ((2.0, 0.1, 2.0), (1.5, 0.07, 1.5))   # (Table panel ratio, hx, kink cluster); the second is the value
CM_TRUNC_MAX = 1e-6           # Carr-Madan check at T <= 60 only if its estimated u-truncation is below this
CM_RUNS = [("base", dict()),
           ("x fine", dict(hx=0.25, dphi=6.0, dlw=0.25)),
           ("u fine", dict(ufine=0.5)),
           ("alpha", dict(fa=(0.9, 0.85))),
           ("partition", dict(lcf=0.7, ratio=20.0))]
SKIP_XFINE = set()            # points whose 'x fine' Carr-Madan run is left out (runtime)
FIELDS = ["kind", "sigma", "q", "steps", "direction", "eps", "delta_ref", "rel_err_bound", "eps_err_bound", "exact",
          "note"]
EPS_OFFSETS = (-1e-3, -1e-4, 0.0, 1e-4, 1e-3)


class Part(R.Partition):
    """w(l) = Phi((l - l_c)/beta), beta = l_c / ratio; l_m = l_c + 8 beta (only a cache key here)."""

    def __init__(self, l_c, ratio):
        self.l_c, self.beta = l_c, l_c / ratio
        self.l_m = l_c + 8 * self.beta
        self.rho = float(ndtr(-8.0))


def setup(s, q, T, k, target, lcf=0.8, ratio=16.0, k_lo=None):
    part = Part(lcf * k, ratio)
    ew, ewl = R.lt_tail_consts(s, q, part)
    a0, f0 = R.lt_best_alpha(k, lambda lam: R.lt_log_terms(s, q, T, lam, part, ew, ewl, 0)[0][0])
    # a larger alpha0 if the j = 0 Chernoff bound allows it (<= e^16 worse): then the bulk's near-point
    # mass at l ~ 0 (weight ~1, slow decay in u at small T) enters with e^{-alpha0 k} <= e^-30 target
    af = (-math.log(target) + 30) / k
    if af > a0:
        with np.errstate(all="ignore"):
            try:
                ff = R.lt_chernoff(af, k, R.lt_log_terms(s, q, T, af + 1, part, ew, ewl, 0)[0][0])
            except (ValueError, OverflowError):
                ff = math.inf
        if math.isfinite(ff) and ff <= f0 + 16:
            a0 = af
    a1, f1 = R.lt_best_alpha(k, lambda lam: R.lt_log_terms(s, q, T, lam, part, ew, ewl, 1)[0][1])
    k_lo = k - 0.01 * k if k_lo is None else k_lo
    J = 1
    while R.lt_remainder(s, q, T, k_lo, part, ew, ewl, a1, J) > 1e-13 * target:
        J += 1
        if J > 60:
            raise RuntimeError("j-sum does not converge")
    return dict(part=part, ew=ew, ewl=ewl, alpha0=a0, alpha1=a1, J=J, f1=f1)


def log_integrands(s, q, T, st, a0, a1, J, u):
    """log |integrand_j(u)| (j = 0 .. J) at one u (for the choice of U)."""
    part, ew, ewl = st["part"], st["ew"], st["ew" + "l"]
    with np.errstate(all="ignore"):
        b0 = R.lt_bulk(s, q, a0 + 1, [u], part, ew, ewl)[0]
        b1 = R.lt_bulk(s, q, a1 + 1, [u], part, ew, ewl)[0]
        mt = R.lt_tail(s, q, a1 + 1, [u], part)[0]
        out = [T * log1p_c(np.array([b0]))[0].real - math.log(abs((a0 + 1j * u) * (a0 + 1 + 1j * u)))]
        for j in range(1, J + 1):
            out.append(float(R.lt_log_binom(T, j)[0]) + (T - j) * log1p_c(np.array([b1]))[0].real
                       + j * math.log(abs(mt)) - math.log(abs((a1 + 1j * u) * (a1 + 1 + 1j * u))))
    return out


def choose_U(s, q, T, st, a0, a1, J, k, target, cap=U_CAP):
    """(U, U1, estimated truncation / target): the smallest scanned u with u |integrand_j(u)| / pi
    below 1e-10 target (j = 0) and 1e-13 target (j >= 1; that one is U1) twice in a row, times 1.2;
    at most ``cap``.  The j >= 1 moments are computed on u <= U1 only (zero beyond)."""
    ok0 = ok1 = 0
    U0 = U1 = None
    u = 20.0
    while U0 is None or U1 is None:
        lg = log_integrands(s, q, T, st, a0, a1, J, u)
        lt = math.log(u / math.pi) - math.log(target)
        v0 = math.exp(min(lg[0] - a0 * k + lt, 700.0))
        v1 = max(math.exp(min(v - a1 * k + lt, 700.0)) for v in lg[1:])
        ok0, ok1 = (ok0 + 1 if v0 < 1e-10 else 0), (ok1 + 1 if v1 < 1e-13 else 0)
        if U0 is None and (ok0 == 2 or 1.2 * u >= cap):
            U0, t0 = min(1.2 * u, cap), v0
        if U1 is None and (ok1 == 2 or 1.2 * u >= cap):
            U1, t1 = min(1.2 * u, cap), v1
        u *= 1.25
    return max(U0, U1), U1, t0 + t1


class Spec:
    """The moments on a u-rule; delta_j(k) for any T (the power is applied at evaluation)."""

    def __init__(self, s, q, st, a0, a1, U, U1, ufine=1.0, hx=0.5, dphi=12.0, dlw=0.5):
        part, ew, ewl = st["part"], st["ew"], st["ewl"]
        self.a0, self.a1 = a0, a1
        u, w = R.u_rule(U, ufine)
        b0, b1, mt = (np.empty(u.shape, complex) for _ in range(3))
        with np.errstate(all="ignore"):
            for p in range(u.shape[0]):
                b0[p] = R.lt_bulk(s, q, a0 + 1, u[p], part, ew, ewl, hx, dphi, dlw)
                if u[p].min() <= U1:
                    b1[p] = R.lt_bulk(s, q, a1 + 1, u[p], part, ew, ewl, hx, dphi, dlw)
                    mt[p] = R.lt_tail(s, q, a1 + 1, u[p], part, hx, dphi, dlw)
                else:                  # j >= 1 integrands < 1e-13 target / u here: taken as 0
                    b1[p], mt[p] = 0.0, 0.0
            self.u, self.w = u.ravel(), w.ravel()
            self.lb0, self.lb1, self.lmt = log1p_c(b0.ravel()), log1p_c(b1.ravel()), np.log(mt.ravel())
        self.den0 = np.log((a0 + 1j * self.u) * (a0 + 1 + 1j * self.u))
        self.den1 = np.log((a1 + 1j * self.u) * (a1 + 1 + 1j * self.u))
        self.U = U

    def terms(self, k, T, J):
        out = []
        for j in range(min(J, T) + 1):
            np.seterr(invalid="ignore")        # 0 * inf in the phase where M_t was set to 0: masked below
            if j == 0:
                lg, a = T * self.lb0 - self.den0, self.a0
            else:
                lg, a = float(R.lt_log_binom(T, j)[0]) + (T - j) * self.lb1 + j * self.lmt - self.den1, self.a1
            with np.errstate(all="ignore"):
                v = self.w * np.exp(lg.real - a * k) * np.cos(lg.imag - self.u * k)
                v = np.where(np.isfinite(v), v, 0.0)
            out.append((float(np.sum(v) / np.pi), float(np.sum(np.abs(v)) / np.pi)))
        return out

    def delta(self, k, T, J):
        t = self.terms(k, T, J)
        d = sum(x[0] for x in t)
        return d, max(x[1] for x in t) / d


def tail_weighted_direct(s, q, k, part, T, hx):
    """Direct quadrature (no Fourier) of E_Q[w(l_1) (e^{l_1 + ... + l_T} - e^k)_+] for T = 1, 2:
    = E_P[w(l) g(k - l)], g(m) = (1 - e^m)_+ (T = 1) or delta_1(m) in closed form (T = 2; delta_1(m) =
    1 - e^m exactly for m <= log(1-q)).  Composite 20-point GL in x, panels hx s, plus T = 2's kink
    cluster (make_sgm_rare.direct_rule), from x(l_c - 16 beta) (w < e^-128 below) to x(k) + 40 s."""
    lq = math.log1p(-q)
    lk = k if T == 1 else k - lq                 # beyond x(lk) g = 1 - e^{k-l} exactly
    x0 = float(R.x_of_loss(np.array([lk]), s, q)[0])
    xlo = float(R.x_of_loss(np.array([max(part.l_c - 16 * part.beta, 0.5 * lq)]), s, q)[0])
    xhi = x0 + 40 * s
    xb, wb = R._panels(np.linspace(x0, xhi, int(math.ceil((xhi - x0) / (hx * s))) + 1))
    lb = R.loss(xb, s, q)
    tot = np.sum(wb * R.p_density(s, q, xb) * part.w(lb) * -np.expm1(k - lb))
    if T == 2:
        xa, wa = R.direct_rule(s, q, x0, lk, hx * s, 2.0 if hx >= 0.05 else 1.5)
        m = xa > xlo
        xa, wa = xa[m], wa[m]
        la = R.loss(xa, s, q)
        tot += np.sum(wa * R.p_density(s, q, xa) * part.w(la) * R.d1_np(s, q, k - la))
    return float(tot)


class XTable(R.Table):
    """make_sgm_rare.Table, but the top panel may be evaluated up to 1 % beyond its end (the next step
    evaluates it at a - l(x) <= A - log(1-q), i.e. up to 3e-4 beyond A: Chebyshev extrapolation of a
    smooth log delta by ~0.3 % of the panel width)."""

    REACH = 1.01


class Rec:
    def __init__(self, s, q, T, k_max, ratio, hx, gr):
        self.s, self.q, self.T, self.hx, self.gr = s, q, T, hx, gr
        prev = lambda a: R.d1_np(s, q, a)
        for n in range(2, T):
            prev = XTable(s, q, n, k_max + 0.01, ratio,
                          lambda a, n=n, prev=prev: R.delta_step(s, q, n, a, prev, hx, gr))
        self.prev = prev

    def delta(self, k):
        return R.delta_step(self.s, self.q, self.T, k, self.prev, self.hx, self.gr)


def fmt(v):
    return repr(float(v))


def chernoff_eps(s, q, T, target):
    """An upper bound on eps(target): delta(k) <= M(lam)^T e^{-(lam-1) k} (1/lam)(1 - 1/lam)^{lam-1}
    for every lam > 1 ((e^y - 1)_+ <= c e^{lam y}, c = max_y (e^y - 1) e^{-lam y}), M(lam) = E_Q[e^{lam l}]
    the binomial sum (mpmath), minimised over integer lam on a geometric grid up to 3000."""
    lams = sorted(set(int(round(1.08 ** i)) for i in range(0, 105)) - {0, 1})
    best = math.inf
    for lam in lams:
        lm = mpmath.log(R.mp_moment_int(s, q, lam))
        lc = -mpmath.log(lam) + (lam - 1) * mpmath.log1p(-mpmath.mpf(1) / lam)
        best = min(best, float((T * lm + lc - mpmath.log(target)) / (lam - 1)))
    return best


def make_check(rows, name):
    def check(what, s, q, T_, eps, got, exact, tol):
        got = float(got)
        rel = abs(got - float(exact)) / abs(float(exact))
        print(f"  check {what}: got {got!r} ref {mpmath.nstr(mpmath.mpf(exact), 17)} rel {rel:.2e} (tol {tol:g})",
              flush=True)
        rows.append(dict(kind="check", sigma=fmt(s), q=fmt(q), steps=T_, direction="remove",
                         eps="" if eps is None else fmt(eps), delta_ref=fmt(got), rel_err_bound=f"{rel:.3e}",
                         eps_err_bound="", exact=mpmath.nstr(mpmath.mpf(exact), 20), note=f"point {name}: {what}"))
        if not rel <= tol:
            sys.exit(f"check {what} failed: rel {rel:.3e} > {tol:g}")
        return rel
    return check


def table_rows(rows, name, s, q, T, table, base, rel_bound, route):
    add_max = -T * math.log1p(-q)
    assert add_max < min(table)
    for i, e in enumerate(table):
        rows.append(dict(kind="delta", sigma=fmt(s), q=fmt(q), steps=T, direction="remove", eps=fmt(e),
                         delta_ref=fmt(base[i]), rel_err_bound=f"{rel_bound[i]:.1e}", eps_err_bound="", exact="",
                         note=f"point {name}: {route}"))
        rows.append(dict(kind="delta", sigma=fmt(s), q=fmt(q), steps=T, direction="add", eps=fmt(e),
                         delta_ref="0.0", rel_err_bound="0", eps_err_bound="", exact="0",
                         note=f"point {name}: exact: add loss <= -T log(1-q) = {add_max:.4e} < eps"))


def eps_row(rows, name, s, q, T, root, target, eps_bound, route):
    rows.append(dict(kind="epsilon", sigma=fmt(s), q=fmt(q), steps=T, direction="max", eps=fmt(root),
                     delta_ref=fmt(target), rel_err_bound="", eps_err_bound=f"{eps_bound:.1e}", exact="",
                     note=f"point {name}: eps at the target delta (brentq on the remove direction; add is 0 "
                          f"there); {route}"))


def point_cm(name, s, q, T, target, extra, rows, summary):
    """Carr-Madan j-sum (points A, B, C): base run + variation runs; checks 1, 2, 4."""
    t0 = time.time()
    check = make_check(rows, name)
    print(f"point {name}: sigma {s!r} q {q!r} T {T} target {target!r} (Carr-Madan j-sum)", flush=True)
    k = brentq(lambda e: math.log(max(T * R.d1_np(s, q, e)[0], 1e-320) / target), 0.01, 30.0, xtol=1e-10)
    tg = target
    print(f"  one-big-step eps (T delta_1 = target) {k:.8f}", flush=True)
    # alphas chosen at the rough root, root found, alphas re-chosen there
    for it in range(5):
        st = setup(s, q, T, k, tg)
        U, U1, _ = choose_U(s, q, T, st, st["alpha0"], st["alpha1"], st["J"], k, tg)
        sp = Spec(s, q, st, st["alpha0"], st["alpha1"], U, U1)

        def f(e):
            d = sp.delta(e, T, st["J"])[0]
            return math.log(d / target) if d > 0 else (-800.0 if e > k else 800.0)
        root = brentq(f, 0.8 * k, 1.2 * k, xtol=1e-14, rtol=1e-15)
        print(f"  at k {k:.6f}: alpha0 {st['alpha0']:.2f} alpha1 {st['alpha1']:.3f} J {st['J']} U {U:.0f} "
              f"-> eps(target) {root:.10f}  ({time.time() - t0:.0f} s)", flush=True)
        if abs(root - k) < 2e-3 * k:
            break
        k = root
    k_c = k
    base_built = (st, sp, U)
    r6 = round(root, 6)
    table = sorted(set([round(r6 + o, 6) for o in EPS_OFFSETS] + [root] + list(extra)))
    k_lo = min(table)
    runs = [(n, kw) for n, kw in CM_RUNS if not (n == "x fine" and name in SKIP_XFINE)]
    deltas, roots, info = {}, {}, {}
    for rname, kw in runs:
        kw = dict(kw)
        st_r = setup(s, q, T, k_c, tg, kw.pop("lcf", 0.8), kw.pop("ratio", 16.0), k_lo=k_lo)
        fa = kw.pop("fa", (1.0, 1.0))
        a0, a1 = st_r["alpha0"] * fa[0], st_r["alpha1"] * fa[1]
        Ur, U1r, trunc = choose_U(s, q, T, st_r, a0, a1, st_r["J"], k_c, tg)
        if rname == "base" and st_r["J"] == base_built[0]["J"] and Ur == base_built[2]:
            spr = base_built[1]        # the same spectrum as the last iteration's
        else:
            spr = Spec(s, q, st_r, a0, a1, Ur, U1r, **kw)
        J = st_r["J"]
        res = [spr.delta(e, T, J) for e in table]
        deltas[rname] = [r[0] for r in res]

        def fr(e):
            d = spr.delta(e, T, J)[0]
            return math.log(d / target) if d > 0 else (-800.0 if e > k_c else 800.0)
        roots[rname] = brentq(fr, 0.9 * k_c, 1.1 * k_c, xtol=1e-14, rtol=1e-15)
        rem = [R.lt_remainder(s, q, T, e, st_r["part"], st_r["ew"], st_r["ewl"], a1, J) for e in table]
        tr = spr.terms(table[len(table) // 2], T, J)
        info[rname] = (st_r, a0, a1, spr, rem, trunc)
        print(f"  run {rname:9s} l_c {st_r['part'].l_c:.4f} beta {st_r['part'].beta:.5f} alpha0 {a0:.2f} "
              f"alpha1 {a1:.3f} J {J} U {Ur:.0f} (j>=1: {U1r:.0f}; {len(spr.u)} u-nodes): "
              f"eps(target) {roots[rname]!r}; "
              f"delta_0/delta {tr[0][0] / sum(x[0] for x in tr):.2e}, delta_2/delta "
              f"{(tr[2][0] if len(tr) > 2 else 0) / sum(x[0] for x in tr):.1e}; cancellation "
              f"{max(r[1] for r in res):.1f}; u-truncation ~{trunc:.1e}; remainder j>J <= "
              f"{max(r / d for r, d in zip(rem, deltas[rname])):.1e}  ({time.time() - t0:.0f} s)", flush=True)
    base = deltas["base"]
    st_b, a0b, a1b, spb, rem_b, trunc_b = info["base"]
    e_c = root
    # checks 1, 2: the base spectrum's tail terms at T = 1, 2 against direct quadrature
    part_b = st_b["part"]
    t1 = spb.terms(e_c, 1, 1)
    q1a, q1b = tail_weighted_direct(s, q, e_c, part_b, 1, 0.05), tail_weighted_direct(s, q, e_c, part_b, 1, 0.03)
    check(f"T=1 tail term (j=1) of {name}'s base spectrum (alpha1 {a1b:.2f}, l_c {part_b.l_c:.4f}) vs direct "
          f"quadrature E_P[w(l)(1 - e^(eps-l))_+] (two rules differ {abs(q1a - q1b) / q1b:.1e})",
          s, q, 1, e_c, t1[1][0], mpmath.mpf(q1b), 1e-8)
    t2 = spb.terms(e_c, 2, 2)
    q2a, q2b = tail_weighted_direct(s, q, e_c, part_b, 2, 0.05), tail_weighted_direct(s, q, e_c, part_b, 2, 0.03)
    check(f"T=2 tail terms (j=1 + 2 j=2)/2 of {name}'s base spectrum vs direct quadrature E_P[w(l) delta_1(eps-l)] "
          f"with closed-form delta_1 (no Fourier; two rules differ {abs(q2a - q2b) / q2b:.1e})",
          s, q, 2, e_c, (t2[1][0] + 2 * t2[2][0]) / 2, mpmath.mpf(q2b), 1e-8)
    # check 4: moments
    lam_i = max(2, int(round(a1b + 1)))
    with np.errstate(all="ignore"):
        mb = R.lt_bulk(s, q, float(lam_i), [0.0], st_b["part"], st_b["ew"], st_b["ewl"])[0].real
        mtv = R.lt_tail(s, q, float(lam_i), [0.0], st_b["part"])[0].real
    check(f"M({lam_i}) = 1 + (M_B - 1) + M_t vs binomial sum (mpmath)", s, q, 1, None, 1 + mb + mtv,
          R.mp_moment_int(s, q, lam_i), 1e-12)
    # variation-run rows: each run vs base at e_c
    ic = table.index(e_c)
    for rname in [n for n in ("partition", "alpha", "x fine", "u fine") if n in deltas]:
        rel = abs(deltas[rname][ic] - base[ic]) / base[ic]
        rows.append(dict(kind="check", sigma=fmt(s), q=fmt(q), steps=T, direction="remove", eps=fmt(e_c),
                         delta_ref=fmt(base[ic]), rel_err_bound=f"{rel:.3e}", eps_err_bound="",
                         exact=fmt(deltas[rname][ic]),
                         note=f"point {name}: base Carr-Madan j-sum vs run '{rname}' (exact column = that run)"))
    spread = max(abs(c[i] - base[i]) / base[i] for c in deltas.values() for i in range(len(table)))
    rel_bound = [max(1e-10, 10 * spread) + r / d + trunc_b * tg / d for r, d in zip(rem_b, base)]
    route = (f"Carr-Madan, sum over the number of tail steps j = 0 .. {st_b['J']}; error bar from the variation "
             f"runs {', '.join(deltas)}")
    table_rows(rows, name, s, q, T, table, base, rel_bound, route)
    eps_spread = max(abs(r - root) for r in roots.values())
    slope, eps_bound = eps_bar(table, base, root, eps_spread, rel_bound[ic])
    eps_row(rows, name, s, q, T, root, target, eps_bound, "Carr-Madan j-sum")
    dt = time.time() - t0  # (the run's cost, printed and kept in the CSV header: no value depends on it)
    print(f"  spread {spread:.1e} -> rel_err_bound {rel_bound[ic]:.1e}; d log delta/d eps {slope:.3f}; eps "
          f"spread {eps_spread:.1e} -> eps = {root!r} +- {eps_bound:.1e}  ({dt:.0f} s)", flush=True)
    summary.append((name, s, q, T, f"delta {target!r}", f"eps {root!r} +- {eps_bound:.1e}",
                    f"(Carr-Madan; runs {', '.join(deltas)}; {dt:.0f} s)"))
    for e in extra:
        i = table.index(e)
        summary.append((name, s, q, T, f"eps {e!r}", f"delta {base[i]!r} (rel +- {rel_bound[i]:.1e})", ""))


def eps_bar(table, base, root, eps_spread, rel_c):
    """(d log delta / d eps near the root, the eps error bar): the larger of 10 x the routes' root
    spread and the delta error bar at the root carried through the slope."""
    i0 = table.index(min(table, key=lambda e: abs(e - (root - 1e-4))))
    i1 = table.index(min(table, key=lambda e: abs(e - (root + 1e-4))))
    slope = math.log(base[i1] / base[i0]) / (table[i1] - table[i0])
    return slope, max(10 * eps_spread, rel_c / abs(slope))


def point_rec(name, s, q, T, target, extra, eps_fixed, rows, summary):
    """Direct no-Fourier recursion (points D, E, T8): two rules; error bar 10 x their difference (>= 1e-10
    relative); check of the first step against mpmath quad; Carr-Madan base run as a check where its
    estimated u-truncation is small (CM_TRUNC_MAX)."""
    t0 = time.time()
    check = make_check(rows, name)
    print(f"point {name}: sigma {s!r} q {q!r} T {T} " +
          (f"target {target!r}" if target else f"delta at eps {eps_fixed!r}") + " (direct recursion)", flush=True)
    if target is not None:
        k_up = chernoff_eps(s, q, T, target)
        print(f"  Chernoff upper bound on eps(target): {k_up:.6f}  ({time.time() - t0:.0f} s)", flush=True)
        k_max = k_up + 0.05
    else:
        k_max = eps_fixed + 0.05
    recs, roots = {}, {}
    for rule in REC_RULES:
        t1 = time.time()
        rec = Rec(s, q, T, k_max, *rule)
        recs[rule] = rec
        msg = ""
        if target is not None:
            lo = 0.9 * k_up
            while not rec.delta(lo) > target:
                lo *= 0.8
            roots[rule] = brentq(lambda e: math.log(rec.delta(e) / target), lo, k_up, xtol=1e-14, rtol=1e-15)
            msg = f": eps(target) {roots[rule]!r}"
        print(f"  recursion rule (panel ratio {rule[0]}, hx {rule[1]}, kink cluster {rule[2]}) "
              f"{time.time() - t1:.0f} s{msg}", flush=True)
    main_rule, other_rule = REC_RULES[1], REC_RULES[0]
    if target is not None:
        root = roots[main_rule]
        r6 = round(root, 6)
        table = sorted(set([round(r6 + o, 6) for o in EPS_OFFSETS] + [root] + list(extra)))
        e_c = root
    else:
        table = [eps_fixed]
        e_c = eps_fixed
    d = {rule: [recs[rule].delta(e) for e in table] for rule in REC_RULES}
    base = d[main_rule]
    rdiff = max(abs(d[other_rule][i] - base[i]) / base[i] for i in range(len(table)))
    rel_bound = [max(1e-10, 10 * rdiff)] * len(table)
    ic = table.index(e_c)
    rows.append(dict(kind="check", sigma=fmt(s), q=fmt(q), steps=T, direction="remove", eps=fmt(e_c),
                     delta_ref=fmt(base[ic]), rel_err_bound=f"{abs(d[other_rule][ic] - base[ic]) / base[ic]:.3e}",
                     eps_err_bound="", exact=fmt(d[other_rule][ic]),
                     note=f"point {name}: direct recursion rule {main_rule} vs rule {other_rule} (panel ratio, hx, "
                          f"kink cluster; exact column = the second rule)"))
    # check: the recursion's first step (delta_step on closed-form delta_1) vs mpmath quad of E_P[delta_1(eps - l)]
    d2 = R.delta_step(s, q, 2, e_c, lambda a: R.d1_np(s, q, a), main_rule[1], main_rule[2])
    check(f"T=2 recursion step (delta_step, hx {main_rule[1]}, cluster {main_rule[2]}) vs mpmath quad of "
          f"E_P[delta_1(eps - l)] (closed-form delta_1, 30 digits)", s, q, 2, e_c, d2,
          R.delta2_mp(s, q, e_c, "gauss-legendre", 0.1, 2.0), 1e-9)
    # optional check: Carr-Madan base run, where its u-truncation estimate is small
    st = setup(s, q, T, e_c, base[ic], k_lo=min(table))
    U, U1, trunc = choose_U(s, q, T, st, st["alpha0"], st["alpha1"], st["J"], e_c, base[ic])
    cm_note = ""
    if trunc <= CM_TRUNC_MAX:
        sp = Spec(s, q, st, st["alpha0"], st["alpha1"], U, U1)
        tol = max(1e-7, 10 * trunc)
        for i in sorted(set([0, ic, len(table) - 1])):
            cm = sp.delta(table[i], T, st["J"])[0]
            rem = R.lt_remainder(s, q, T, table[i], st["part"], st["ew"], st["ewl"], st["alpha1"], st["J"])
            check(f"T={T} direct recursion vs Carr-Madan j-sum (alpha0 {st['alpha0']:.2f}, alpha1 "
                  f"{st['alpha1']:.2f}, J {st['J']}, U {U:.0f}, estimated u-truncation {trunc:.1e}, remainder "
                  f"j>J {rem / base[i]:.1e}; tolerance max(1e-7, 10 x u-truncation))",
                  s, q, T, table[i], base[i], mpmath.mpf(cm), tol)
        cm_note = f"Carr-Madan agrees (u-truncation ~{trunc:.0e})"
    else:
        print(f"  Carr-Madan check skipped: estimated u-truncation {trunc:.1e} of delta at U {U:.0f} "
              f"(alpha0 {st['alpha0']:.2f}) > {CM_TRUNC_MAX:g}", flush=True)
        cm_note = f"Carr-Madan not used (u-truncation ~{trunc:.0e})"
    route = (f"direct no-Fourier recursion, rule {main_rule} (panel ratio, hx, kink cluster); error bar "
             f"max(1e-10, 10 x difference to rule {other_rule})")
    table_rows(rows, name, s, q, T, table, base, rel_bound, route)
    dt = time.time() - t0
    if target is not None:
        eps_spread = abs(roots[other_rule] - root)
        slope, eps_bound = eps_bar(table, base, root, eps_spread, rel_bound[ic])
        eps_row(rows, name, s, q, T, root, target, eps_bound, "direct recursion")
        print(f"  rules differ {rdiff:.1e} -> rel_err_bound {rel_bound[ic]:.1e}; d log delta/d eps {slope:.3f}; "
              f"roots differ {eps_spread:.1e} -> eps = {root!r} +- {eps_bound:.1e}  ({dt:.0f} s)", flush=True)
        summary.append((name, s, q, T, f"delta {target!r}", f"eps {root!r} +- {eps_bound:.1e}",
                        f"(recursion; {cm_note}; {dt:.0f} s)"))
    for e in list(extra) + ([eps_fixed] if eps_fixed is not None else []):
        i = table.index(e)
        print(f"  delta({e}) = {base[i]!r} +- {rel_bound[i]:.1e} rel", flush=True)
        summary.append((name, s, q, T, f"eps {e!r}", f"delta {base[i]!r} (rel +- {rel_bound[i]:.1e})",
                        f"(recursion; {cm_note}; {dt:.0f} s)"))


def read_previous():
    """Rows and per-point runtimes of the existing CSV, by point (rows without a 'point X:' note are dropped)."""
    by_point, times = {}, {}
    if not os.path.exists(OUT):
        return by_point, times
    with open(OUT) as fh:
        lines = fh.readlines()
    for ln in lines:
        if ln.startswith("# points held"):
            times = {m.group(1): float(m.group(2)) for m in re.finditer(r"\b([A-Z][A-Z0-9]*) \((\d+) s\)", ln)}
    dropped = 0
    for r in csv.DictReader(ln for ln in lines if not ln.startswith("#")):
        m = re.match(r"point ([A-Z][A-Z0-9]*): ", r["note"])
        if m and m.group(1) in NAMES:
            by_point.setdefault(m.group(1), []).append(r)
        else:
            dropped += 1
    for n in list(by_point):
        if n not in times:
            times[n] = float("nan")
    if dropped:
        print(f"previous {OUT}: {dropped} rows without a point tag (older version) dropped", flush=True)
    return by_point, times


def write_csv(by_point, times, ran, runtime):
    held = [n for n in NAMES if n in by_point]
    missing = [n for n in NAMES if n not in by_point]
    total = sum(times[n] for n in held)
    with open(OUT, "w", newline="") as fh:
        fh.write("# generated by tests/reference/make_sgm_tiny_delta.py (A, B, C: Carr-Madan Fourier inversion, sum "
                 "over the number of tail steps of a smooth bulk/tail partition, checked by variation runs, "
                 "closed-form delta_1 and direct T=1,2 quadrature; D, E, T8: direct no-Fourier recursion, two rules, "
                 "Carr-Madan as a check where reliable), numpy "
                 f"{np.__version__}, scipy {__import__('scipy').__version__}, mpmath {mpmath.__version__}; total "
                 f"runtime {total:.0f} s on one core" + (f" (INCOMPLETE: missing {' '.join(missing)})" if missing else "")
                 + "\n")
        fh.write("# points held (runtime on one core): " + ", ".join(f"{n} ({times[n]:.0f} s)" for n in held)
                 + f"; the last invocation ran {' '.join(ran)} in {runtime:.0f} s\n")
        fh.write("# kind=delta: delta_ref at eps, |error| <= rel_err_bound * delta_ref; kind=epsilon: eps at "
                 "delta_ref, |error| <= eps_err_bound; kind=check: method vs independent answer (exact), "
                 "rel_err_bound = measured relative difference\n")
        wr = csv.DictWriter(fh, fieldnames=FIELDS)
        wr.writeheader()
        for n in held:
            wr.writerows(by_point[n])
    print(f"wrote {OUT} ({sum(len(by_point[n]) for n in held)} rows; points {' '.join(held)}) after "
          f"{runtime:.0f} s", flush=True)


def main(argv):
    t_start = time.time()
    mpmath.mp.dps = 30
    alias = {"E8": "T8", "E60": "E"}
    sel = [alias.get(a.upper(), a.upper()) for a in argv] or list(NAMES)
    bad = [a for a in sel if a not in NAMES]
    if bad:
        sys.exit(f"unknown point(s) {' '.join(bad)}; choose from {' '.join(NAMES)}")
    # in table order, the slow large-T point C last
    order = sorted([p for p in POINTS if p[0] in sel], key=lambda p: p[3] > 1000)
    by_point, times = read_previous()
    summary, ran = [], []
    for name, s, q, T, target, extra, eps_fixed in order:
        t0 = time.time()
        rows = []
        if T <= RECURSION_T_MAX:
            point_rec(name, s, q, T, target, extra, eps_fixed, rows, summary)
        else:
            point_cm(name, s, q, T, target, extra, rows, summary)
        by_point[name] = rows
        times[name] = time.time() - t0
        ran.append(name)
        write_csv(by_point, times, ran, time.time() - t_start)
    for r in summary:
        print("  ", *r)


if __name__ == "__main__":
    main(sys.argv[1:])
