#!/usr/bin/env python3
"""Grid-free reference for delta(eps) and eps(delta) of the Poisson-subsampled Gaussian mechanism
composed T times at five "rare-event" points: tiny sampling rate q ~ 1e-5, small sigma ~ 0.5,
few steps (T = 2 .. 20) and delta ~ 1e-13, add/remove relation; and at one large-T point (point 6:
sigma 1.03, q 1.87e-4, T = 1e5, delta 2.3e-15), which has its own method (section "Point 6" below).

Writes sgm_rare.csv next to this script.  Imports numpy, scipy and mpmath only (never the package
under test); no loss grid, no FFT and no discretised PLD is involved anywhere.  The generic one-step
helpers loss(), x_of_loss(), h_complex(), h_real() and log1p_c() are imported from make_sgm_t128.py
(and, for point 6's independent cross-check, its unpartitioned Spectrum and best_alpha).

Setting
-------
As make_sgm_t128.py's ("Setting"): the one-step loss l(x) of x ~ Q = N(0, s^2) against
P = (1-q) N(0, s^2) + q N(1, s^2), L its T-fold sum, delta(eps) = E_Q[(e^L - e^eps)_+].

add:  -l <= -log(1-q), so L_add <= -T log(1-q) (< 5e-4 at every point here), far below every
      tabulated eps, hence delta_add(eps) = 0 exactly there (asserted per row).  The add/remove
      delta is therefore the remove direction's, and only that is computed.  (Not at point 6, where
      -T log(1-q) = 18.7: there the add direction is computed too, see below.)

Why make_sgm_t128.py's Carr-Madan integral cannot be used as it is
-----------------------------------------------------------------
Its u-integrand is M(lam + iu)^T / ((alpha + iu)(lam + iu)), M the one-step moment function.
With q ~ 2e-5 one step's loss is, with probability ~1, l ~ q (W - 1), W = e^y lognormal with log-sd
1/s ~ 2: a near point mass whose characteristic function only starts to decay at u ~ 1/(q W), i.e.
over u ~ 1e3 .. 1e7.  At T = 128 the power M^128 made that decay fast enough; at T = 2 .. 20 it
does not, and the integrand decays only like 1/u^2 while delta is ~1e-13 of its size.  Measured at
point 1 (T = 2), that script's Spectrum gives -1.2e-9, -1.8e-10, -3.9e-11 for U = 1000, 3000,
6000 against the true 3.10e-13 (cancellation factor 5e6 and growing).  Hence the method below.

Method (remove direction): Carr-Madan with a smooth bulk/tail partition of each step
-------------------------------------------------------------------------------------
For any finite measure nu on the loss axis and any alpha > 0 (lam = alpha + 1),

    int (e^L - e^k)_+ dnu = e^{-alpha k}/pi * int_0^inf Re[ e^{-iuk} nu^(lam + iu) / ((alpha + iu)(lam + iu)) ] du,

nu^(z) = int e^{zL} dnu.  Split each step's law Q = Q_B + Q_t with Q_t = w(l) Q, Q_B = (1 - w(l)) Q,
w(l) = Phi((l - l_c)/beta) (smooth, a function of the loss).  The T-fold law is sum_j C(T, j)
Q_B^{*(T-j)} * Q_t^{*j}; its transform is (M_B + M_t)^T, with M_B(z) = E_Q[(1-w) e^{zl}],
M_t(z) = E_Q[w e^{zl}].  The j = 0 term (every step "bulk") carries all of the non-decaying
point-mass structure and is dropped; the rest, transform

    G(z) = M(z)^T - M_B(z)^T = M_B^T expm1(T log1p(M_t / M_B)),

decays like exp(-(u beta)^2 / 2) (the tilted tail of the loss is Gaussian in l, variance 1/s^2;
the only fine structure left is the transition of w, width beta), so u in [0, U], U = 8.5/beta,
suffices (|integrand| near U is < 3e-16 of its maximum; a run with 1.5 U confirms).  The u-integral
cancels only 2 .. 180-fold in the base runs (up to 1.2e3 with alpha + 1; printed per run), not
1e7-fold as at T = 128.

The dropped j = 0 term, bounded rigorously (l_m = l_c + 8 beta, rho = 1 - w(l_m) = Sbar(8) = 6e-16):
  L > k needs the largest step loss l_max > k/T.  Configurations with l_max >= l_m have weight
  prod(1 - w(l_i)) <= rho: together <= rho * delta(k).  Configurations with l_max < l_m: none if
  l_m <= k/T (used for T <= 3); otherwise (l_m = k/3) at most the Chernoff bound
  min_theta e^{-theta k} E_Q[e^{(1+theta) l}; l < l_m]^T, computed by quadrature and printed.  The
  sum is added to rel_err_bound (it is <= 1e-15 relative everywhere).

Numerics: l_c = 9.5 beta, beta = l_m / 17.5, l_m = k_lo / min(T, 3), k_lo = 0.9 eps_0 (eps_0 a
rough root from T * delta_1(eps) = target, below every tabulated eps).  M_B - 1 and M_t are
integrated over x in [-14 s, lam + 13 s] (beyond both ends the tilted weight is < e^-84) by
composite 20-point Gauss-Legendre on panels no wider than hx = 0.5 in x, no wider than
dphi = 12 rad in the phase u l(x) at the largest u of the block, and no wider than beta/2 in l
across the transition of w; M_B - 1 = E[(1-w)(e^{zl} - 1)] - E[w] is formed from
e^{zl} - 1 = expm1(a) cos b - 2 sin^2(b/2) + i e^a sin b (no cancellation against the 1).  The
u-integral: composite 20-point Gauss-Legendre, panels 0.25 on [0, 8], 1 on [8, 40], 3 on [40, U].
alpha minimises log G(lam) - alpha k - log(alpha lam) (the modulus of the integrand at u = 0).

Checks (rows kind=check in the CSV; the script exits if one fails its tolerance)
------
Checks 1-3 use the base run's alpha, partition and quadrature; only the power T changes.
1. T = 1: against the closed form delta_1 (below), mpmath.
2. T = 2, direct quadrature, mpmath dps 30, no Fourier:  delta_2(k) = E_P[delta_1(k - l(X))]
   (E_Q[e^l g(l)] = E_P[g(l)]), with delta_1(e') = E_Q[(e^l - e^e')_+]:  with
   c = (e^e' - 1 + q)/q, e^l - e^e' = q (e^y - c), y ~ N(-1/(2s^2), 1/s^2) under Q, so
       c <= 0:  delta_1 = 1 - e^e'  (always in the money; E_Q[e^l] = 1)
       c > 0:   delta_1 = q E[(e^y - c)_+] = q Phi(1/(2s) - s log c) - q c Phi(-1/(2s) - s log c)
   (Black-Scholes with E[e^y] = 1; the same as Raisa et al.'s remove formula, checked against
   mp_exact.one_step_delta to 1e-25).  For x beyond x0 = x(k - log(1-q)) delta_1(k - l) = 1 - e^{k-l}
   and that part is in closed form, q Sbar((x0-1)/s) - (e^k - 1 + q) Sbar(x0/s); the rest by
   mpmath.quad on [-16 s, x0], breakpoints every 0.05 (GL) / 0.04 (tanh-sinh) in x plus a geometric
   cluster at l = k - log(1-q) - q r^j where delta_1 has its rounded kink (width ~ q).  The
   Gauss-Legendre and tanh-sinh values must agree to 1e-18 and the Carr-Madan value to 1e-11.
3. T = 3, direct nested quadrature in float64: delta_3(k) = E_P[delta_2(k - l(X))], delta_2 by the
   same construction (composite 20-point GL, breakpoints every hx in x plus the kink cluster), two
   rules (hx 0.1, r = 2 and hx 0.07, r = 1.5); tolerance 1e-11.
4. Every point at its own T and at three tabulated eps (and its own eps root), without Fourier:
   T = 2 by check 2's mpmath quadrature, T = 3 by check 3's nested quadrature, T > 3 by a direct
   recursion (float64): delta_n(a) =
   E_P[delta_{n-1}(a - l(X))], n = 2 .. T, each delta_n tabulated as piecewise Chebyshev (degree 24)
   in a: the put part delta_n + expm1(a) on panels geometric in a - n log(1-q) (delta_n = 1 - e^a
   exactly below n log(1-q)), log delta_n on [0, q], [q 2^j, q 2^(j+1)], ...  Two panel ratios (2,
   1.5).  Tolerance 1e-10 on delta, and its own eps root is compared.
5. M(lam) = M_B + M_t at an integer lam against the binomial sum
   sum_j C(lam, j) (1-q)^(lam-j) q^j e^{j(j-1)/(2 s^2)} (mpmath); tolerance 1e-13.

Error estimate
--------------
Per point, six Carr-Madan runs change what could be wrong: base; x-quadrature twice as fine
(hx 0.25, dphi 6, beta/4 in l); u-quadrature twice as fine and U x 1.5; alpha - 1 (or x 0.6 when
alpha < 2); alpha + 1; another partition (l_m x 0.75, hence beta, l_c and U change).  With spread =
the largest relative difference of delta from the base run over those runs and over the direct
recursion (check 4), at every tabulated eps:
    rel_err_bound = max(1e-11, 10 * spread) + (j = 0 bound) / delta,
    eps_err_bound = max(10 * largest difference of the eps roots (runs and check 4),
                        rel_err_bound / |d log delta / d eps|).
The 1e-11 floor is a margin for float64 rounding (the methods agree to <= 5e-13).

Point 6: T = 1e5 (sigma 1.03, q = 1.866e-4, target delta 2.3025e-15)
-------
The method above does not apply: it drops the all-bulk term j = 0, which here is ~8 % of delta
(the sum of 1e5 bulk steps, near-Gaussian with mu ~ 0.074, reaches eps ~ 0.576 by itself), and the
all-bulk bound needs T l_m <= k.  Nor does make_sgm_t128's plain Carr-Madan of M^T converge well:
92 % of delta is "one step far out" (lognormal-like, e^{lam l} cannot tilt it), the best damping
(alpha 16.5, beyond ~17.5 M(lam) is dominated by the lognormal peak and explodes) leaves the
integrand ~e^-14 at u = 0 against delta ~ e^-33.7: a 6e8-fold cancellation.  What does converge
is the same partition Q = Q_B + Q_t (w(l) = Phi((l - l_c)/beta), beta = l_c/9.5), but expanded
completely, every term kept and each inverted at its own damping:

    delta = sum_{j=0..J} delta_j,   delta_j <-> transform C(T, j) M_B(z)^(T-j) M_t(z)^j,

(delta_j = int (e^L - e^k)_+ over the configurations weighted by j tail factors w and T - j bulk
factors 1 - w; all are non-negative measures, so Carr-Madan holds for each at any alpha > 0).  With
T - j ~ 1e5 bulk factors every term's characteristic function decays like exp(-u^2 T Var(l)/2), so
u <= U = 10/sqrt(T Var_Q(l)) = 135 suffices (Var_Q(l) ~ q^2 expm1(1/s^2); |integrand| near U is
< 1e-22 of its maximum).  j = 0 (bounded loss, near-Gaussian) is damped at its Chernoff-optimal
alpha0 ~ 95 and cancels ~1-fold; j >= 1 share alpha1 ~ 13.5 (the j = 1 optimum) and one set of
moments, and cancel <= 52-fold at l_c = 0.2: delta_1 is a single tail step (l > ~0.2) convolved
with the bulk, whose tilt then fits.  Terms j > J: at alpha1 the Chernoff bounds C_j =
e^{-alpha k} (alpha^alpha / lam^lam) C(T, j) M_B(lam)^(T-j) M_t(lam)^j have ratios
r_j = (T-j)/(j+1) M_t/M_B decreasing in j, so sum_{j>J} <= C_{J+1} / (1 - r_{J+1}); J is the
smallest with that < 1e-22 of the leading bounds (J = 3; the remainder is < 1e-22 of delta,
added to rel_err_bound).  Numerics: M_B - 1 = E_Q[(1-w)(h(zl) - z h(l))] - z E_Q[w e^l] +
(z-1) E_Q[w], h(v) = expm1(v) - v (first order cancelled analytically; M_B - 1 ~ 3e-4 at lam ~ 96
keeps its relative accuracy, which T = 1e5 needs), M_t = E_Q[w e^{zl}]; composite 20-point GL in
x on the range where the integrand's size bound is within e^-90 of its maximum (scanned), panels
<= 0.5 s in x, <= 12 rad in u l(x) and <= beta/2 in l across w's transition; log C(T, j) as a sum
of logs (gammaln(T+1) - gammaln(j+1) - gammaln(T-j+1) is off by 8e-11 at T = 1e5 -- the q = 1
check below caught that); the u-rule is the one above.  alpha0 and alpha1 are chosen at the
one-big-step root of T delta_1(eps) = target (0.504), then again at the resulting root.
Add direction: loss -l(X), X ~ P, bounded above by -log(1-q), so no partition: its transform is
E_P[e^{-zl}]^T = M(1-z)^T, M(z') - 1 = E_Q[h(z'l) - z' h(l)] (the same routine without w), at its
Chernoff alpha (~114), cancellation 1.0.  delta_add is 3.7e-3 of delta_remove at the root (<= 8.6e-3
at every tabulated eps, asserted beyond both error bounds), so add/remove = remove again.
Variation runs (remove): base (l_c 0.2); x-quadrature twice as fine (hx 0.25 s, dphi 6, beta/4);
u-rule twice as fine and U x 1.5; alpha0 x 0.7 and alpha1 - 1.5; alpha0 x 1.15 and alpha1 + 0.5
(alpha0 x 1.3 over-tilts the bulk onto the partition edge and fails); partitions l_c = 0.1 (J = 5,
j = 1 cancels 2.2e3-fold) and l_c = 0.3 (delta_0 changes from 1.78e-16 to 1.74e-16 and 2.21e-16:
a different split of the same sum).  Add direction: base, x fine, u fine, alpha x 0.7, alpha x 1.3.
Checks for point 6 (kind=check rows; the script exits if one fails):
  a. an independent formulation: make_sgm_t128's unpartitioned Carr-Madan of M^T (long-double
     assembly, exact weights for the rounded nodes) at its best alpha and alpha - 1 (6e8- and
     1.1e9-fold cancellation) at three tabulated eps; tolerance 1e-7.
  b. q = 1, the same T = 1e5, sigma = 4000 (mu = sqrt(T)/sigma = 0.079, delta 9e-16 .. 6e-15 at
     the tabulated eps): closed form Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2), mpmath, for
     the remove code (partition l_c = 4.5/sigma: T E_Q[w] = 2.4, J = 33, the tail-step terms carry
     93 % of delta, so the whole j-sum is exercised) and the add code; tolerance 1e-12.
  c. M(lam) = 1 + (M_B - 1) + M_t at lam = 11 and 16 (lam of the j >= 1 terms) against the
     binomial sum; tolerance 1e-13.
Error bounds as above, the unpartitioned formulation (check a, both alphas) taking check 4's place
in the spread.  This is conservative: it sets the bound (its own two runs differ by 6.5e-9), while the
seven partitioned runs agree to 4.5e-13 on delta and 6.9e-15 on the root, and check b to 5.3e-14.

Result (eps at the target delta, add/remove = remove direction; the epsilon rows of the CSV)
------
  point  sigma                q                       T   target delta             eps                  +-
  1      0.5853385134967038   2.489417780472604e-05    2  3.1018807297782766e-13   0.7690075779883783   1.6e-12
  2      0.4762617849309354   2.1625865807047026e-05   3  2.1682889471571237e-12   2.401560593634817    3.5e-12
  3      0.5913215893973333   2.1889939705460882e-05   7  6.668349155612543e-14    1.0689565275868533   1.8e-12
  4      0.6220694069306377   1.610431708637165e-05   14  1.4056859961495707e-13   0.5158671530501124   1.1e-12
  5      0.49187058097550346  1.228156340351405e-05   20  4.5561776001078845e-14   3.089326728039122    3.1e-12
  6      1.03                 0.00018660007477106172 1e5  2.3025182920057886e-15   0.5756219304442252   2.3e-09
Points 1-5: every check agreed to <= 5e-13 relative on delta (the direct recursion's eps roots to <= 1.4e-13);
the spread of delta over the six runs and check 4 is <= 9.4e-13.  Sanity: at these q the one-big-step approximation
T * delta_1(eps) is already within 2.3e-6 of delta_T(eps) at the roots (it gives eps to ~3e-7).

Point 6: the seven partitioned runs give eps roots within 6.9e-15 and delta within 4.5e-13; the
unpartitioned formulation (check a) agrees to 1.5e-9 on delta at the root (2.1e-10 on eps), check b
to 5.3e-14 (remove) and 1.2e-14 (add), check c exactly; d log delta / d eps = -29.5 there.

Run from the repository root (one process, about 4 min on a shared 2-core machine -- 3.3 min for
points 1-5, 45 s for point 6 -- numpy 2.4, scipy 1.17, mpmath 1.3):
    python tests/reference/make_sgm_rare.py
"""

import csv
import math
import os
import sys

import mpmath
import numpy as np
from numpy.polynomial.legendre import leggauss
from scipy.optimize import brentq, minimize_scalar
from scipy.special import log_ndtr, ndtr

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_sgm_t128 import h_complex, h_real, log1p_c, loss, x_of_loss  # noqa: E402  (generic one-step helpers)
from make_sgm_t128 import Spectrum as FullSpectrum, best_alpha as full_best_alpha  # noqa: E402  (point 6 check)
import mp_exact  # noqa: E402

OUT = os.path.join(HERE, "sgm_rare.csv")

# (sigma, q, T, target delta), exact float64 values
POINTS = [
    (0.5853385134967038, 2.489417780472604e-05, 2, 3.1018807297782766e-13),
    (0.4762617849309354, 2.1625865807047026e-05, 3, 2.1682889471571237e-12),
    (0.5913215893973333, 2.1889939705460882e-05, 7, 6.668349155612543e-14),
    (0.6220694069306377, 1.610431708637165e-05, 14, 1.4056859961495707e-13),
    (0.49187058097550346, 1.228156340351405e-05, 20, 4.5561776001078845e-14),
]
# large T (point 6; its own method, see the docstring), exact float64 values
LARGE_T_POINTS = [
    (1.03, 0.00018660007477106172, 100000, 2.3025182920057886e-15),
]
LT_LC = (0.2, 0.1, 0.3)          # partition centres l_c: base, then the two "partition" runs
LT_Q1_SIGMA, LT_Q1_C = 4000.0, 4.5   # q = 1 check: composed Gaussian, mu = sqrt(T)/4000; l_c = 4.5/sigma
EPS_OFFSETS = (-1e-2, -1e-3, -1e-4, 0.0, 1e-4, 1e-3, 1e-2)   # tabulated eps = round(root, 6) + these

NG = 20
GN, GW = leggauss(NG)


def _panels(bps):
    a, b = bps[:-1], bps[1:]
    x = ((a + b) / 2)[:, None] + ((b - a) / 2)[:, None] * GN[None, :]
    w = ((b - a) / 2)[:, None] * GW[None, :]
    return x.ravel(), w.ravel()


# ----------------------------------------------------------------------------- one step, closed form

def d1_mp(s, q, e):
    """delta_1(e) = E_Q[(e^l - e^e)_+] for any real e (current mp precision)."""
    s, q, e = mpmath.mpf(s), mpmath.mpf(q), mpmath.mpf(e)
    h = mpmath.expm1(e) + q                     # = q c
    if h <= 0:
        return -mpmath.expm1(e)
    t = s * mpmath.log(h / q)
    return q * mpmath.ncdf(1 / (2 * s) - t) - h * mpmath.ncdf(-1 / (2 * s) - t)


def d1_np(s, q, e):
    e = np.atleast_1d(np.asarray(e, float))
    h = np.expm1(e) + q
    out = -np.expm1(e)
    m = h > 0
    t = s * np.log(h[m] / q)
    out[m] = q * ndtr(0.5 / s - t) - h[m] * ndtr(-0.5 / s - t)
    return out


def p_density(s, q, x):
    c = 1 / (s * math.sqrt(2 * math.pi))
    return c * ((1 - q) * np.exp(-x * x / (2 * s * s)) + q * np.exp(-(x - 1) ** 2 / (2 * s * s)))


# ----------------------------------------------------------------------------- Carr-Madan, partitioned

class Partition:
    """w(l) = Phi((l - l_c)/beta), l_c = 9.5 beta, beta = l_m / 17.5 (so 1 - w(l_m) = Sbar(8))."""

    def __init__(self, l_m):
        self.l_m = l_m
        self.beta = l_m / 17.5
        self.l_c = 9.5 * self.beta
        self.rho = float(ndtr(-(l_m - self.l_c) / self.beta))

    def w(self, l):
        return ndtr((l - self.l_c) / self.beta)

    def wb(self, l):
        return ndtr(-(l - self.l_c) / self.beta)


def x_rule(s, q, lam, umax, part, hx, dphi, dlw):
    xlo, xhi = -14 * s, lam + 13 * s
    b1 = np.linspace(xlo, xhi, int(math.ceil((xhi - xlo) / hx)) + 1)
    llo, lhi = loss(np.array([xlo, xhi]), s, q)
    n = int(math.ceil((lhi - llo) * umax / dphi))
    b2 = x_of_loss(np.linspace(llo, lhi, n + 1)[1:-1], s, q) if n > 1 else np.empty(0)
    lt = part.l_c + part.beta * np.arange(-14.0, 14.0 + 1e-9, dlw)
    b3 = x_of_loss(lt[lt > llo], s, q)
    b = np.unique(np.concatenate([b1, b2, b3]))
    return _panels(b[(b >= xlo) & (b <= xhi)])


def moments(s, q, lam, us, part, hx=0.5, dphi=12.0, dlw=0.5):
    """(M_B - 1, M_t) at z = lam + i u for every u in us (one x-rule for the block)."""
    us = np.asarray(us, float)
    x, wq = x_rule(s, q, lam, float(us.max()), part, hx, dphi, dlw)
    l = loss(x, s, q)
    lf = -x * x / (2 * s * s) - math.log(s * math.sqrt(2 * math.pi)) + np.log(wq)
    w, wb = part.w(l), part.wb(l)
    e_w = np.sum(w * np.exp(lf))
    ph = np.outer(us, l)
    mt = w > 0
    et = w[mt] * np.exp(lam * l[mt] + lf[mt])
    m_t = (np.cos(ph[:, mt]) * et).sum(1) + 1j * (np.sin(ph[:, mt]) * et).sum(1)
    mb = wb > 1e-300
    lb, fb, b = l[mb], wb[mb] * np.exp(lf[mb]), ph[:, mb]
    re = np.expm1(lam * lb) * np.cos(b) - 2 * np.sin(b / 2) ** 2
    im = np.exp(lam * lb) * np.sin(b)
    d_b = (re * fb).sum(1) + 1j * (im * fb).sum(1) - e_w
    return d_b, m_t


def log_g(T, d_b, m_t):
    """log(M^T - M_B^T), M_B = 1 + d_b, M = M_B + m_t."""
    wv = T * log1p_c(m_t / (1 + d_b))
    return T * log1p_c(d_b) + np.log(h_complex(wv) + wv)


def u_rule(U, fine=1.0):
    segs = ((0.0, 8.0, 0.25), (8.0, 40.0, 1.0), (40.0, U, 3.0))
    bps = np.unique(np.concatenate([np.linspace(a, b, int(math.ceil((b - a) / (h * fine))) + 1)
                                    for a, b, h in segs if b > a]))
    a, b = bps[:-1], bps[1:]
    u = ((a + b) / 2)[:, None] + ((b - a) / 2)[:, None] * GN[None, :]
    w = ((b - a) / 2)[:, None] * GW[None, :]
    return u, w


def best_alpha(s, q, T, k, part):
    def F(a):
        with np.errstate(all="ignore"):
            d_b, m_t = moments(s, q, a + 1, [0.0], part)
            v = float(log_g(T, d_b, m_t)[0].real)
        return v - a * k - math.log(a * (a + 1)) if math.isfinite(v) else 1e300
    return scan_alpha(F, 30.0)


def scan_alpha(F, top):
    """(alpha, F(alpha)): the least of F on a grid of step 0.25 up to ``top``, scanned up to its first
    rise (G(lam) overflows for large lam), refined by a bounded search around it."""
    grid = np.arange(0.25, top, 0.25)
    vals = []
    for a in grid:
        vals.append(F(a))
        if vals[-1] >= 1e300 or (len(vals) > 3 and vals[-1] > vals[-2] > vals[-3]):
            break
    j = int(np.argmin(vals))
    r = minimize_scalar(F, bounds=(max(0.05, grid[j] - 0.25), grid[j] + 0.25), method="bounded",
                        options={"xatol": 1e-4})
    return float(r.x), float(r.fun)


class Spectrum:
    """M_B - 1 and M_t on a u-rule; delta(k, T) by the Carr-Madan integral of M^T - M_B^T."""

    def __init__(self, s, q, alpha, part, U, ufine=1.0, hx=0.5, dphi=12.0, dlw=0.5):
        self.alpha, self.lam = alpha, alpha + 1
        u, w = u_rule(U, ufine)
        d_b = np.empty(u.shape, complex)
        m_t = np.empty(u.shape, complex)
        for p in range(u.shape[0]):
            d_b[p], m_t[p] = moments(s, q, self.lam, u[p], part, hx, dphi, dlw)
        self.u, self.w, self.d_b, self.m_t = u.ravel(), w.ravel(), d_b.ravel(), m_t.ravel()
        self.den = np.log((alpha + 1j * self.u) * (self.lam + 1j * self.u))
        self._lg = {}

    def lg(self, T):
        if T not in self._lg:
            self._lg[T] = log_g(T, self.d_b, self.m_t) - self.den
        return self._lg[T]

    def delta(self, k, T):
        """(delta(k), int |integrand| du / delta, |integrand| near U / its maximum)."""
        lg = self.lg(T)
        v = self.w * np.exp(lg.real - self.alpha * k) * np.cos(lg.imag - self.u * k)
        d = float(np.sum(v) / np.pi)
        a = np.exp(lg.real)
        return d, float(np.sum(np.abs(v)) / np.pi) / d, float(a[self.u > 0.95 * self.u.max()].max() / a.max())


def j0_bound(s, q, T, k, part):
    """Upper bound on the dropped all-bulk term relative to delta: rho + Chernoff/delta (the caller
    divides the Chernoff part by delta)."""
    if part.l_m * T <= k * (1 + 1e-12):
        return 0.0                          # l_max < l_m => L < T l_m <= k: no contribution
    xm = float(x_of_loss(np.array([part.l_m]), s, q)[0])
    x, w = _panels(np.linspace(-16 * s, xm, int(math.ceil((xm + 16 * s) / 0.02)) + 1))
    l = loss(x, s, q)
    lf = -x * x / (2 * s * s) - math.log(s * math.sqrt(2 * math.pi)) + np.log(w)

    def logb(th):
        v = (1 + th) * l + lf
        m = v.max()
        return -th * k + T * (m + math.log(np.sum(np.exp(v - m))))
    ths = np.exp(np.linspace(0, math.log(5000), 400))
    vals = [logb(t) for t in ths]
    j = int(np.argmin(vals))
    r = minimize_scalar(logb, bounds=(ths[max(j - 1, 0)], ths[min(j + 1, len(ths) - 1)]), method="bounded")
    return math.exp(min(r.fun, vals[j]))


# ----------------------------------------------------------------------------- direct quadratures

def delta2_mp(s, q, eps, method, step, gr):
    """delta_2(eps) by mpmath.quad of E_P[delta_1(eps - l(X))] (current mp precision)."""
    s, q, eps, step, gr = (mpmath.mpf(v) for v in (s, q, eps, step, gr))
    lq = mpmath.log1p(-q)
    lk = eps - lq

    def xl(l):
        return s * s * mpmath.log((mpmath.expm1(l) + q) / q) + mpmath.mpf(1) / 2
    x0 = xl(lk)
    h = mpmath.expm1(eps) + q
    closed = q * mpmath.ncdf(-(x0 - 1) / s) - h * mpmath.ncdf(-x0 / s)
    lo = -16 * s
    n = int(mpmath.ceil((x0 - lo) / step))
    pts = [lo + (x0 - lo) * j / n for j in range(n + 1)]
    j = -12
    while j < 400:
        l = lk - q * gr ** j
        if l <= lq or xl(l) <= lo:
            break
        pts.append(xl(l))
        j += 1
    pts = sorted(set(pts))
    c = 1 / (s * mpmath.sqrt(2 * mpmath.pi))

    def f(x):
        l = mpmath.log1p(q * mpmath.expm1((2 * x - 1) / (2 * s * s)))
        dens = c * ((1 - q) * mpmath.exp(-x * x / (2 * s * s)) + q * mpmath.exp(-(x - 1) ** 2 / (2 * s * s)))
        return dens * d1_mp(s, q, eps - l)
    return mpmath.quad(f, pts, method=method) + closed


def direct_rule(s, q, x0, lk, hx, gr):
    """Composite GL on [-16 s, x0], breakpoints every hx and at l = lk - q gr^j (kink cluster)."""
    lo = -16 * s
    if not x0 > lo:
        return np.empty(0), np.empty(0)
    b = [np.linspace(lo, x0, int(math.ceil((x0 - lo) / hx)) + 1)]
    d = q * gr ** np.arange(-12.0, 400.0)
    ll = lk - d[d < 50]
    ll = ll[ll > math.log1p(-q)]
    if len(ll):
        with np.errstate(all="ignore"):
            xb = x_of_loss(ll, s, q)
        b.append(xb[np.isfinite(xb) & (xb > lo) & (xb < x0)])
    return _panels(np.unique(np.concatenate(b)))


def delta_step(s, q, n, a, prev, hx, gr):
    """delta_n(a) = E_P[delta_{n-1}(a - l(X))]; prev = delta_{n-1} on arrays.  Beyond
    x0 = x(a - (n-1) log(1-q)) the inner value is 1 - e^{a-l} exactly: that part in closed form."""
    lq = math.log1p(-q)
    if a <= n * lq:
        return -math.expm1(a)
    lk = a - (n - 1) * lq
    x0 = float(x_of_loss(np.array([lk]), s, q)[0]) if lk > lq else -math.inf
    closed = q * ndtr(-(x0 - 1) / s) - (math.expm1(a) + q) * ndtr(-x0 / s)
    x, w = direct_rule(s, q, x0, lk, hx, gr)
    if len(x) == 0:
        return float(closed)
    return float(closed + np.sum(w * p_density(s, q, x) * prev(a - loss(x, s, q))))


def delta3_np(s, q, a, hx, gr):
    prev = lambda b: np.array([delta_step(s, q, 2, bb, lambda c: d1_np(s, q, c), hx, gr) for bb in b])
    return delta_step(s, q, 3, a, prev, hx, gr)


PCH = 24
_TH = np.pi * (np.arange(PCH + 1) + 0.5) / (PCH + 1)
CNODES = np.cos(_TH)[::-1]                       # Chebyshev points (1st kind), increasing
_TMAT = np.cos(np.outer(np.arange(PCH + 1), _TH))


def _cheb_coeffs(vals):
    c = 2.0 / (PCH + 1) * vals[:, ::-1] @ _TMAT.T
    c[:, 0] /= 2
    return c


def _clenshaw(c, t):
    b1, b2 = np.zeros_like(t), np.zeros_like(t)
    for j in range(c.shape[1] - 1, 0, -1):
        b1, b2 = 2 * t * b1 - b2 + c[:, j], b1
    return t * b1 - b2 + c[:, 0]


class Table:
    """delta_n(a) as piecewise Chebyshev: 1 - e^a (exact) for a <= n log(1-q); the put part
    delta_n + expm1(a) on [n log(1-q), 0] (panels geometric in a - n log(1-q), below
    q 2^-24 above the start the put is < 1e-100 and taken as 0); log delta_n on [0, A]."""

    #: how far past the top panel's end (a multiple of it) the table may be evaluated
    REACH = 1.0

    def __init__(self, s, q, n, A, ratio, func):
        lo = n * math.log1p(-q)
        e = -lo / ratio ** np.arange(0, 400)
        e = e[e > q * 2.0 ** -24][::-1]
        self.pb = lo + np.concatenate([e, [-lo]])
        pos = [0.0, q]
        while pos[-1] < A:
            pos.append(pos[-1] * ratio)
        self.qb, self.A = np.array(pos), pos[-1]
        pa = self.pb[:-1, None] + np.diff(self.pb)[:, None] * (CNODES[None, :] + 1) / 2
        qa = self.qb[:-1, None] + np.diff(self.qb)[:, None] * (CNODES[None, :] + 1) / 2
        vp = np.array([[func(a) for a in row] for row in pa])
        vq = np.array([[func(a) for a in row] for row in qa])
        self.cp, self.cq = _cheb_coeffs(vp + np.expm1(pa)), _cheb_coeffs(np.log(vq))

    @staticmethod
    def _eval(bps, c, a):
        j = np.clip(np.searchsorted(bps, a) - 1, 0, len(bps) - 2)
        return _clenshaw(c[j], 2 * (a - bps[j]) / (bps[j + 1] - bps[j]) - 1)

    def __call__(self, a):
        a = np.asarray(a, float)
        out = -np.expm1(a)
        m = (a > self.pb[0]) & (a < 0)
        if m.any():
            out[m] += self._eval(self.pb, self.cp, a[m])
        m = a >= 0
        if m.any():
            if a[m].max() > self.A * self.REACH:
                raise ValueError("argument beyond the table")
            out[m] = np.exp(self._eval(self.qb, self.cq, a[m]))
        return out


class Recursion:
    """delta_T(k) by the tabulated direct recursion (check 4)."""

    def __init__(self, s, q, T, k_max, ratio, hx=0.1, gr=2.0):
        self.s, self.q, self.T, self.hx, self.gr = s, q, T, hx, gr
        prev = lambda a: d1_np(s, q, a)
        for n in range(2, T):
            prev = Table(s, q, n, k_max + 0.01, ratio,
                         lambda a, n=n, prev=prev: delta_step(s, q, n, a, prev, hx, gr))
        self.prev = prev

    def delta(self, k):
        return delta_step(self.s, self.q, self.T, k, self.prev, self.hx, self.gr)


def mp_moment_int(s, q, lam):
    s, q = mpmath.mpf(s), mpmath.mpf(q)
    return mpmath.fsum(mpmath.binomial(lam, j) * (1 - q) ** (lam - j) * q ** j * mpmath.exp(j * (j - 1) / (2 * s * s))
                       for j in range(lam + 1))


# ----------------------------------------------------------------------------- large T (point 6)

def lt_partition(l_c):
    return Partition(l_c * 17.5 / 9.5)          # l_c as given, beta = l_c / 9.5


def lt_log_w(part, l, tail):
    """log w(l) (tail) or log(1 - w(l)) (bulk); part None: bulk weight 1."""
    if part is None:
        return np.zeros_like(l) if not tail else np.full_like(l, -np.inf)
    z = (l - part.l_c) / part.beta
    return log_ndtr(z) if tail else log_ndtr(-z)


_LT_XR = {}


def lt_xrange(s, q, lam, part, tail, cut=90.0):
    """[lo, hi] in x beyond which w e^{lam l} phi (tail) or (1 - w) e^{max(lam l, 0)} phi (bulk: it
    bounds |h(zl) - z h(l)| up to polynomial factors) is < e^-cut of its maximum (scan, 200001 points)."""
    key = (s, q, lam, None if part is None else part.l_m, tail, cut)
    if key not in _LT_XR:
        x = np.linspace(min(lam, 0.0) - 14 * s, max(lam, 1.0) + 14 * s, 200001)
        l = loss(x, s, q)
        with np.errstate(all="ignore"):
            v = (lam * l if tail else np.maximum(lam * l, 0.0)) + lt_log_w(part, l, tail) - x * x / (2 * s * s)
        idx = np.nonzero(v > v.max() - cut)[0]
        _LT_XR[key] = (x[max(idx[0] - 1, 0)], x[min(idx[-1] + 1, len(x) - 1)])
    return _LT_XR[key]


def lt_x_rule(s, q, lo, hi, umax, part, hx, dphi, dlw):
    """Composite GL on [lo, hi]: panels no wider than hx s in x, dphi in u l(x) at u = umax, and
    dlw beta in l across the transition of w (l_c +- 14 beta)."""
    b = [np.linspace(lo, hi, int(math.ceil((hi - lo) / (hx * s))) + 1)]
    llo, lhi = loss(np.array([lo, hi]), s, q)
    n = int(math.ceil((lhi - llo) * umax / dphi))
    if n > 1:
        b.append(x_of_loss(np.linspace(llo, lhi, n + 1)[1:-1], s, q))
    if part is not None:
        lt = part.l_c + part.beta * np.arange(-14.0, 14.0 + 1e-9, dlw)
        b.append(x_of_loss(lt[(lt > llo) & (lt < lhi)], s, q))
    b = np.unique(np.concatenate(b))
    return _panels(b[(b >= lo) & (b <= hi)])


def lt_logphi(s, x, wq):
    return -x * x / (2 * s * s) - math.log(s * math.sqrt(2 * math.pi)) + np.log(wq)


def lt_tail_consts(s, q, part):
    """(E_Q[w], E_Q[w e^l])."""
    r0, r1 = lt_xrange(s, q, 0.0, part, True, 120.0), lt_xrange(s, q, 1.0, part, True, 120.0)
    x, wq = lt_x_rule(s, q, min(r0[0], r1[0]), max(r0[1], r1[1]), 0.0, part, 0.1, 12.0, 0.25)
    l = loss(x, s, q)
    f = np.exp(lt_logphi(s, x, wq) + lt_log_w(part, l, True))
    return float(np.sum(f)), float(np.sum(np.exp(l) * f))


def lt_tail(s, q, lam, us, part, hx=0.5, dphi=12.0, dlw=0.5):
    """M_t(lam + iu) = E_Q[w e^{zl}] for every u in us."""
    us = np.asarray(us, float)
    lo, hi = lt_xrange(s, q, lam, part, True)
    x, wq = lt_x_rule(s, q, lo, hi, float(us.max()), part, hx, dphi, dlw)
    l = loss(x, s, q)
    e = np.exp(lam * l + lt_logphi(s, x, wq) + lt_log_w(part, l, True))
    ph = np.outer(us, l)
    return (np.cos(ph) * e).sum(1) + 1j * (np.sin(ph) * e).sum(1)


def lt_bulk(s, q, lam, us, part, ew, ewl, hx=0.5, dphi=12.0, dlw=0.5):
    """M_B(z) - 1 = E_Q[(1 - w)(h(zl) - z h(l))] - z E_Q[w e^l] + (z - 1) E_Q[w], z = lam + iu, h(v) =
    expm1(v) - v (E_Q[e^l - 1] = 0 removes the first-order terms analytically: the result, O(z^2 q^2),
    keeps its relative accuracy).  part None (ew = ewl = 0): M(z) - 1 of the whole step."""
    us = np.asarray(us, float)
    lo, hi = lt_xrange(s, q, lam, part, False)
    x, wq = lt_x_rule(s, q, lo, hi, float(us.max()), part, hx, dphi, dlw)
    l = loss(x, s, q)
    f = np.exp(lt_logphi(s, x, wq) + lt_log_w(part, l, False))
    z = lam + 1j * us
    hz = h_complex(np.outer(z, l).ravel()).reshape(len(us), len(l))
    return hz @ f - z * np.sum(h_real(l) * f) - z * ewl + (z - 1) * ew


def lt_log_binom(T, j):
    """log C(T, j) as a sum of logs (gammaln(T+1) - gammaln(j+1) - gammaln(T-j+1) is off by ~1e-10
    at T = 1e5: the difference of two numbers ~1e6)."""
    j = np.atleast_1d(np.asarray(j, int))
    m = int(j.max())
    c = np.concatenate([[0.0], np.cumsum(np.log((T - np.arange(m)) / np.arange(1.0, m + 1)))])
    return c[j]


def lt_log_terms(s, q, T, lam, part, ew, ewl, jmax):
    """log(C(T, j) M_B(lam)^(T-j) M_t(lam)^j) for j = 0 .. jmax, log M_B(lam), log M_t(lam)."""
    lb = math.log1p(lt_bulk(s, q, lam, [0.0], part, ew, ewl)[0].real)
    lt_ = math.log(lt_tail(s, q, lam, [0.0], part)[0].real) if jmax else 0.0   # (M_t overflows at lam ~ 60)
    j = np.arange(jmax + 1)
    return lt_log_binom(T, j) + (T - j) * lb + j * lt_, lb, lt_


def lt_chernoff(alpha, k, log_size):
    """log of the Chernoff bound e^{-alpha k} nu^(lam) alpha^alpha / lam^lam >= int (e^L - e^k)_+ dnu."""
    return log_size - alpha * k + alpha * math.log(alpha) - (alpha + 1) * math.log(alpha + 1)


def lt_best_alpha(k, log_size):
    """alpha minimising the Chernoff bound; log_size(lam) = log nu^(lam)."""
    def F(a):
        with np.errstate(all="ignore"):
            try:
                v = float(log_size(a + 1))
            except (ValueError, OverflowError):
                return 1e300
        return lt_chernoff(a, k, v) if math.isfinite(v) else 1e300
    grid = np.exp(np.arange(math.log(0.5), math.log(1000.0), 0.05))
    vals = []
    for a in grid:                  # scan up to the first rise
        vals.append(F(a))
        if vals[-1] >= 1e300 or (len(vals) > 3 and vals[-1] > vals[-2] > vals[-3]):
            break
    i = int(np.argmin(vals))
    r = minimize_scalar(F, bounds=(grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]), method="bounded",
                        options={"xatol": 1e-4})
    return float(r.x), float(r.fun)


def lt_remainder(s, q, T, k, part, ew, ewl, alpha1, J):
    """Chernoff bound at alpha1 on sum_{j > J} delta_j: C_{J+1} / (1 - r_{J+1}), C_j the bound on
    delta_j, r_j = C_{j+1}/C_j = (T - j)/(j + 1) M_t/M_B (decreasing in j)."""
    terms, lb, lt_ = lt_log_terms(s, q, T, alpha1 + 1, part, ew, ewl, J + 1)
    r = (T - J - 1) / (J + 2) * math.exp(lt_ - lb)
    if not r < 1:
        return math.inf
    return math.exp(lt_chernoff(alpha1, k, terms[J + 1]) - math.log1p(-r))


class LTRemove:
    """Remove direction at large T: delta = sum_{j=0..J} delta_j, delta_j the contribution of the
    configurations with j tail steps (transform C(T, j) M_B^(T-j) M_t^j), each by Carr-Madan; j = 0
    at damping alpha0, j >= 1 at alpha1 (one set of moments for all j >= 1)."""

    def __init__(self, s, q, T, part, alpha0, alpha1, J, U, ufine=1.0, hx=0.5, dphi=12.0, dlw=0.5):
        self.alpha0, self.alpha1, self.J = alpha0, alpha1, J
        ew, ewl = lt_tail_consts(s, q, part)
        u, w = u_rule(U, ufine)
        l0, l1 = alpha0 + 1, alpha1 + 1
        b0, b1, mt = (np.empty(u.shape, complex) for _ in range(3))
        for p in range(u.shape[0]):
            b0[p] = lt_bulk(s, q, l0, u[p], part, ew, ewl, hx, dphi, dlw)
            b1[p] = lt_bulk(s, q, l1, u[p], part, ew, ewl, hx, dphi, dlw)
            mt[p] = lt_tail(s, q, l1, u[p], part, hx, dphi, dlw)
        self.u, self.w = u.ravel(), w.ravel()
        lb1, lt1 = log1p_c(b1.ravel()), np.log(mt.ravel())
        den1 = np.log((alpha1 + 1j * self.u) * (l1 + 1j * self.u))
        self.lg = [T * log1p_c(b0.ravel()) - np.log((alpha0 + 1j * self.u) * (l0 + 1j * self.u))]
        self.lg += [lt_log_binom(T, j)[0] + (T - j) * lb1 + j * lt1 - den1 for j in range(1, J + 1)]

    def terms(self, k):
        """[(delta_j, int |integrand_j| du, |integrand_j| near U / its maximum)] for j = 0 .. J."""
        out = []
        for j, lg in enumerate(self.lg):
            a = self.alpha0 if j == 0 else self.alpha1
            v = self.w * np.exp(lg.real - a * k) * np.cos(lg.imag - self.u * k)
            m = np.exp(lg.real)
            out.append((float(np.sum(v) / np.pi), float(np.sum(np.abs(v)) / np.pi),
                        float(m[self.u > 0.95 * self.u.max()].max() / m.max())))
        return out

    def delta(self, k):
        """(delta(k), max_j int |integrand_j| du / delta, max_j |integrand_j| near U / its maximum)."""
        t = self.terms(k)
        d = sum(x[0] for x in t)
        return d, max(x[1] for x in t) / d, max(x[2] for x in t)


class LTAdd:
    """Add direction: loss -l(X), X ~ P; its transform E_P[e^{-z l}]^T = M(1 - z)^T, M(z') - 1 =
    E_Q[h(z'l) - z' h(l)] (lt_bulk without partition, at lam' = 1 - lam < 0 and conjugated)."""

    def __init__(self, s, q, T, alpha, U, ufine=1.0, hx=0.5, dphi=12.0):
        self.alpha, lam = alpha, alpha + 1
        u, w = u_rule(U, ufine)
        d = np.empty(u.shape, complex)
        for p in range(u.shape[0]):
            d[p] = np.conj(lt_bulk(s, q, 1 - lam, u[p], None, 0.0, 0.0, hx, dphi))
        self.u, self.w = u.ravel(), w.ravel()
        self.lg = T * log1p_c(d.ravel()) - np.log((alpha + 1j * self.u) * (lam + 1j * self.u))

    def delta(self, k):
        v = self.w * np.exp(self.lg.real - self.alpha * k) * np.cos(self.lg.imag - self.u * k)
        d = float(np.sum(v) / np.pi)
        return d, float(np.sum(np.abs(v)) / np.pi) / d


def lt_add_log_size(s, q, T):
    return lambda lam: T * math.log1p(np.conj(lt_bulk(s, q, 1 - lam, [0.0], None, 0.0, 0.0))[0].real)


def lt_setup(s, q, T, k, l_c, k_lo):
    """Partition, Chernoff-optimal alpha0 (j = 0) and alpha1 (j = 1) at k, and the number of terms J:
    the smallest with the remainder bound at k_lo below 1e-22 of the j = 0 .. 1 Chernoff bounds."""
    part = lt_partition(l_c)
    ew, ewl = lt_tail_consts(s, q, part)
    a0, f0 = lt_best_alpha(k, lambda lam: lt_log_terms(s, q, T, lam, part, ew, ewl, 0)[0][0])
    a1, f1 = lt_best_alpha(k, lambda lam: lt_log_terms(s, q, T, lam, part, ew, ewl, 1)[0][1])
    J, lim = 1, 1e-22 * math.exp(min(f0, f1))
    while lt_remainder(s, q, T, k_lo, part, ew, ewl, a1, J) > lim:
        J += 1
        if J > 200:
            raise RuntimeError("j-sum does not converge")
    return dict(part=part, ew=ew, ewl=ewl, alpha0=a0, alpha1=a1, J=J, f0=f0, f1=f1)


def mp_gauss_composed(mu, eps):
    mu, eps = mpmath.mpf(mu), mpmath.mpf(eps)
    return mpmath.ncdf(-eps / mu + mu / 2) - mpmath.exp(eps) * mpmath.ncdf(-eps / mu - mu / 2)


def large_t_point(ip, s, q, T, target, rows, check):
    """Point 6 (T = 1e5): rows and (eps, eps_err_bound)."""
    print(f"point {ip}: sigma {s!r} q {q!r} T {T} target {target!r}", flush=True)
    v = T * q * q * math.expm1(1 / (s * s))           # T Var_Q(l): |M^T(iu)| ~ exp(-u^2 v / 2)
    U0 = 10 / math.sqrt(v)
    eps0 = brentq(lambda e: math.log(T * d1_np(s, q, e)[0] / target), 0.05, 20.0, xtol=1e-10)
    # alphas chosen at the rough root, the base root found, the alphas re-chosen there
    k = eps0
    for _ in range(3):
        st = lt_setup(s, q, T, k, LT_LC[0], k - 0.05)
        sp = LTRemove(s, q, T, st["part"], st["alpha0"], st["alpha1"], st["J"], U0)
        root = brentq(lambda e: math.log(sp.delta(e)[0] / target), k - 0.2, k + 0.2, xtol=1e-15, rtol=1e-15)
        print(f"  alphas at k = {k:.6f}: alpha0 {st['alpha0']:.3f}, alpha1 {st['alpha1']:.3f}, J {st['J']} "
              f"-> eps(target) {root:.10f}", flush=True)
        if abs(root - k) < 1e-3:
            break
        k = root
    eps_c = k                                          # where every run's alphas are chosen
    print(f"  one-big-step rough eps {eps0:.6f}; U = {U0:.1f} (exp(-U^2 v/2) = e^-50, v = T Var_Q(l) = {v:.3e})",
          flush=True)
    runs = [("base", dict(l_c=LT_LC[0], U=U0)),
            ("x fine", dict(l_c=LT_LC[0], U=U0, hx=0.25, dphi=6.0, dlw=0.25)),
            ("u fine", dict(l_c=LT_LC[0], U=1.5 * U0, ufine=0.5)),
            ("alpha low", dict(l_c=LT_LC[0], U=U0, da=(0.7, -1.5))),
            ("alpha high", dict(l_c=LT_LC[0], U=U0, da=(1.15, 0.5))),
            (f"partition l_c {LT_LC[1]}", dict(l_c=LT_LC[1], U=U0)),
            (f"partition l_c {LT_LC[2]}", dict(l_c=LT_LC[2], U=U0))]
    deltas, roots = {}, {}
    table = None
    for name, kw in runs:
        kw = dict(kw)
        st = lt_setup(s, q, T, eps_c, kw.pop("l_c"), eps_c - 0.05)
        f0, f1 = kw.pop("da", (1.0, 0.0))
        a0, a1 = st["alpha0"] * f0, st["alpha1"] + f1
        sp = LTRemove(s, q, T, st["part"], a0, a1, st["J"], **kw)
        roots[name] = brentq(lambda e: math.log(sp.delta(e)[0] / target), eps_c - 0.05, eps_c + 0.05,
                             xtol=1e-15, rtol=1e-15)
        if table is None:
            r6 = round(roots[name], 6)
            table = sorted(set([round(r6 + o, 6) for o in EPS_OFFSETS] + [roots[name]]))
            base_st, base_a1 = st, a1
        res = [sp.delta(e) for e in table]
        deltas[name] = [r[0] for r in res]
        tr = sp.terms(roots[name])
        print(f"  run {name:16s} l_c {st['part'].l_c:.2f} alpha0 {a0:.3f} alpha1 {a1:.3f} J {st['J']} U {kw['U']:.0f} "
              f"({len(sp.u)} u-nodes): eps(target) = {roots[name]!r}; at it delta_0 {tr[0][0]:.4e}, delta_1 "
              f"{tr[1][0]:.4e}, delta_2 {tr[2][0] if len(tr) > 2 else 0:.1e}; cancellation "
              f"{max(r[1] for r in res):.1f}, |integrand| near U / max {max(r[2] for r in res):.1e}", flush=True)
    eps_r = roots["base"]
    base = deltas["base"]
    i_r = table.index(eps_r)
    trunc = [lt_remainder(s, q, T, e, base_st["part"], base_st["ew"], base_st["ewl"], base_a1, base_st["J"]) / d
             for e, d in zip(table, base)]
    print(f"  j > J = {base_st['J']} remainder <= {max(trunc):.1e} relative (Chernoff)", flush=True)

    # an independent formulation: the whole M^T, no partition (make_sgm_t128's Spectrum, long double)
    af, ff = full_best_alpha(s, q, T, eps_r)
    full_d, full_root = {}, {}
    for a in (af, af - 1.0):
        fsp = FullSpectrum(s, q, T, a, U=U0)
        full_d[a] = [fsp.delta(e)[0] for e in table]
        full_root[a] = brentq(lambda e: math.log(fsp.delta(e)[0] / target), eps_r - 0.01, eps_r + 0.01,
                              xtol=1e-15, rtol=1e-15)
        c = fsp.delta(eps_r)
        print(f"  unpartitioned M^T, alpha {a:.3f}: eps(target) = {full_root[a]!r}, cancellation {c[1] / c[0]:.1e}",
              flush=True)
    full_self = max(abs(full_d[af][i] - full_d[af - 1.0][i]) / full_d[af][i] for i in range(len(table)))
    for i in (0, i_r, len(table) - 1):
        check(f"T={T} partitioned j-sum vs unpartitioned M^T Carr-Madan (make_sgm_t128 Spectrum, alpha "
              f"{af:.2f}, no partition; its runs at alpha, alpha-1 differ {full_self:.1e})",
              s, q, T, table[i], base[i], mpmath.mpf(full_d[af][i]), 1e-7)

    # q = 1 check: T-fold Gaussian with mu = sqrt(T)/sigma1, closed form; both directions, same code
    s1 = LT_Q1_SIGMA
    v1 = T * math.expm1(1 / (s1 * s1))
    st1 = lt_setup(s1, 1.0, T, eps_r, LT_Q1_C / s1, eps_r - 0.05)
    sp1 = LTRemove(s1, 1.0, T, st1["part"], st1["alpha0"], st1["alpha1"], st1["J"], 10 / math.sqrt(v1))
    aa1, _ = lt_best_alpha(eps_r, lt_add_log_size(s1, 1.0, T))
    ad1 = LTAdd(s1, 1.0, T, aa1, 10 / math.sqrt(v1))
    for i in (0, i_r, len(table) - 1):
        ex = mp_gauss_composed(math.sqrt(T) / s1, table[i])
        tr = sp1.terms(table[i])
        check(f"q=1 T={T} sigma {s1:g} (mu {math.sqrt(T) / s1:.4f}) closed form, remove: partitioned j-sum "
              f"(l_c = {LT_Q1_C}/sigma, J {st1['J']}, tail-step terms {sum(x[0] for x in tr[1:]) / float(ex):.2f} "
              f"of delta)", s1, 1.0, T, table[i], sp1.delta(table[i])[0], ex, 1e-12)
        check(f"q=1 T={T} sigma {s1:g} closed form, add direction (alpha {aa1:.1f})", s1, 1.0, T, table[i],
              ad1.delta(table[i])[0], ex, 1e-12)
    # the one-step moment function at integer lam: M_B + M_t vs the binomial sum
    for lam_i in (11, 16):
        bp = base_st["part"]
        mine = 1 + lt_bulk(s, q, float(lam_i), [0.0], bp, base_st["ew"], base_st["ewl"])[0].real \
            + lt_tail(s, q, float(lam_i), [0.0], bp)[0].real
        check_moment(rows, s, q, lam_i, mine, f" (l_c {bp.l_c:.2f})")

    # add direction: not 0 here (-T log(1-q) = 18.7 > eps), computed and shown to be below remove
    aa, fa = lt_best_alpha(eps_r, lt_add_log_size(s, q, T))
    add_runs = [("base", dict(alpha=aa, U=U0)), ("x fine", dict(alpha=aa, U=U0, hx=0.25, dphi=6.0)),
                ("u fine", dict(alpha=aa, U=1.5 * U0, ufine=0.5)), ("alpha low", dict(alpha=0.7 * aa, U=U0)),
                ("alpha high", dict(alpha=1.3 * aa, U=U0))]
    add_d = {}
    for name, kw in add_runs:
        asp = LTAdd(s, q, T, **kw)
        res = [asp.delta(e) for e in table]
        add_d[name] = [r[0] for r in res]
        print(f"  add run {name:10s} alpha {kw['alpha']:.2f}: delta_add(eps_r) = {add_d[name][i_r]!r}, "
              f"cancellation {max(r[1] for r in res):.1f}", flush=True)
    add_base = add_d["base"]
    add_spread = max(abs(add_d[n][i] - add_base[i]) / add_base[i] for n in add_d for i in range(len(table)))
    add_bound = max(1e-11, 10 * add_spread)

    # error bounds (as for the other points; the unpartitioned formulation counts like check 4)
    spread, rel_bound, slope, eps_spread, eps_bound = error_bounds(
        [deltas[n] for n in deltas] + [full_d[a] for a in full_d], base, table, trunc,
        [roots[n] for n in roots] + [full_root[a] for a in full_root], eps_r, i_r)
    spread_part = max(abs(deltas[n][i] - base[i]) / base[i] for n in deltas for i in range(len(table)))
    eps_spread_part = max(abs(roots[n] - eps_r) for n in roots)
    print(f"  spread of delta over the partitioned runs {spread_part:.1e} (eps roots {eps_spread_part:.1e}), "
          f"with the unpartitioned formulation {spread:.1e} (eps roots {eps_spread:.1e}) -> rel_err_bound "
          f"{rel_bound[i_r]:.1e}; d log delta/d eps {slope:.3f}; eps = {eps_r!r} +- {eps_bound:.1e}; add direction: "
          f"delta_add/delta <= {max(a / d for a, d in zip(add_base, base)):.1e}, its runs' spread {add_spread:.1e}",
          flush=True)
    for i, e in enumerate(table):
        assert add_base[i] * (1 + add_bound) < base[i] * (1 - rel_bound[i])
        rows.append(dict(kind="delta", sigma=fmt(s), q=fmt(q), steps=T, direction="remove", eps=fmt(e),
                         delta_ref=fmt(base[i]), rel_err_bound=f"{rel_bound[i]:.1e}", eps_err_bound="", exact="",
                         note=f"Carr-Madan, sum over the number of tail steps j = 0 .. {base_st['J']}"))
        rows.append(dict(kind="delta", sigma=fmt(s), q=fmt(q), steps=T, direction="add", eps=fmt(e),
                         delta_ref=fmt(add_base[i]), rel_err_bound=f"{add_bound:.1e}", eps_err_bound="", exact="",
                         note="Carr-Madan of the add loss -l(X), X ~ P (-T log(1-q) = "
                              f"{-T * math.log1p(-q):.2f} > eps: not 0 here)"))
        rows.append(dict(kind="delta", sigma=fmt(s), q=fmt(q), steps=T, direction="max", eps=fmt(e),
                         delta_ref=fmt(base[i]), rel_err_bound=f"{rel_bound[i]:.1e}", eps_err_bound="", exact="",
                         note="add/remove = max(remove, add) = remove (add < remove beyond both bounds)"))
    rows.append(dict(kind="epsilon", sigma=fmt(s), q=fmt(q), steps=T, direction="max", eps=fmt(eps_r),
                     delta_ref=fmt(target), rel_err_bound="", eps_err_bound=f"{eps_bound:.1e}", exact="",
                     note="eps at the target delta (brentq on the remove direction; "
                          f"add is {add_base[i_r] / base[i_r]:.1e} of it there)"))
    return eps_r, eps_bound


# ----------------------------------------------------------------------------- main

def check_moment(rows, s, q, lam_i, mine, note=""):
    """Check 5: M(lam) = 1 + (M_B - 1) + M_t at an integer lam against the binomial sum (a row; exit
    past 1e-13)."""
    ref = mp_moment_int(s, q, lam_i)
    relm = abs(mine - float(ref)) / float(ref)
    print(f"  check M({lam_i}) = 1 + (M_B - 1) + M_t {mine!r} vs binomial sum {mpmath.nstr(ref, 17)}: "
          f"rel {relm:.1e}", flush=True)
    rows.append(dict(kind="check", sigma=fmt(s), q=fmt(q), steps=1, direction="remove", eps="",
                     delta_ref=fmt(mine), rel_err_bound=f"{relm:.3e}", eps_err_bound="",
                     exact=mpmath.nstr(ref, 20), note=f"M({lam_i}) = M_B + M_t vs binomial sum{note}"))
    if not relm <= 1e-13:
        sys.exit("M check failed")


def error_bounds(cands, base, table, j0, roots, eps_r, i_r):
    """(spread, rel_err_bound per eps, d log delta/d eps, eps spread, eps_err_bound): ten times the
    largest relative difference of delta from the base run over the other runs and checks
    (``cands``), plus each eps's rigorous add-ons ``j0``; and for the root, ten times the roots'
    spread or the delta bound over the slope at the root, whichever is larger."""
    spread = max(abs(c[i] - base[i]) / base[i] for c in cands for i in range(len(table)))
    rel_bound = [max(1e-11, 10 * spread) + j for j in j0]
    i0, i1 = table.index(min(table, key=lambda e: abs(e - (eps_r - 1e-4)))), \
        table.index(min(table, key=lambda e: abs(e - (eps_r + 1e-4))))
    slope = math.log(base[i1] / base[i0]) / (table[i1] - table[i0])
    eps_spread = max(abs(r - eps_r) for r in roots)
    return spread, rel_bound, slope, eps_spread, max(10 * eps_spread, rel_bound[i_r] / abs(slope))


def write_table(out, generated, rows, summary):
    """The CSV: a ``# generated by`` line, the columns' meaning, the rows; then the eps summary."""
    with open(out, "w", newline="") as fh:
        fh.write(generated)
        fh.write("# kind=delta: delta_ref at eps, |error| <= rel_err_bound * delta_ref; kind=epsilon: eps at "
                 "delta_ref, |error| <= eps_err_bound; kind=check: method vs independent answer (exact), "
                 "rel_err_bound = measured relative difference\n")
        wr = csv.DictWriter(fh, fieldnames=list(rows[0]))
        wr.writeheader()
        wr.writerows(rows)
    print(f"wrote {out} ({len(rows)} rows)")
    for ip, s, q, T, target, e, b in summary:
        print(f"  {ip}. sigma {s!r} q {q!r} T {T} delta {target!r}: eps {e!r} +- {b:.1e}")


def fmt(v):
    return repr(float(v))


def checker(rows, direction):
    """check(name, s, q, T, eps, got, exact, tol): a method's value against an independent one,
    printed and written as a kind=check row of ``direction`` (eps None: none); exits past tol."""
    def check(name, s, q, T_, eps, got, exact, tol):
        rel = abs(got - float(exact)) / float(exact)
        print(f"  check {name}: got {got!r} ref {mpmath.nstr(exact, 17)} rel {rel:.2e} (tol {tol:g})", flush=True)
        rows.append(dict(kind="check", sigma=fmt(s), q=fmt(q), steps=T_, direction=direction,
                         eps="" if eps is None else fmt(eps), delta_ref=fmt(got), rel_err_bound=f"{rel:.3e}",
                         eps_err_bound="", exact=mpmath.nstr(exact, 20), note=name))
        if not rel <= tol:
            sys.exit(f"check {name} failed: rel {rel:.3e} > {tol:g}")
        return rel
    return check


def main():
    mpmath.mp.dps = 30
    rows = []
    summary = []

    check = checker(rows, "remove")

    for ip, (s, q, T, target) in enumerate(POINTS, 1):
        print(f"point {ip}: sigma {s!r} q {q!r} T {T} target {target!r}", flush=True)
        # closed form delta_1 against mp_exact
        for e in (0.25, 1.0, 3.0):
            mine, ref = d1_mp(s, q, e), mp_exact.one_step_delta(q, s, e, "remove")
            rel = abs(mine - ref) / ref
            if not rel < 1e-25:
                sys.exit(f"delta_1 closed form disagrees with mp_exact: {rel}")
        # rough root from T * delta_1(eps) = target: places the partition and the damping
        eps0 = brentq(lambda e: math.log(T * d1_np(s, q, e)[0] / target), 0.05, 20.0, xtol=1e-10)
        k_lo = 0.9 * eps0
        part = Partition(k_lo / min(T, 3))
        alpha0, f0 = best_alpha(s, q, T, eps0, part)
        print(f"  rough eps {eps0:.6f}; partition l_m {part.l_m:.5f} beta {part.beta:.5f} l_c {part.l_c:.5f}; "
              f"alpha {alpha0:.4f} (log integrand at u=0 {f0:.2f}, log target {math.log(target):.2f})", flush=True)
        U0 = 8.5 / part.beta
        part2 = Partition(0.75 * part.l_m)
        a_lo = alpha0 - 1 if alpha0 > 2 else 0.6 * alpha0
        runs = [("base", dict(alpha=alpha0, part=part, U=U0)),
                ("x fine", dict(alpha=alpha0, part=part, U=U0, hx=0.25, dphi=6.0, dlw=0.25)),
                ("u fine", dict(alpha=alpha0, part=part, U=1.5 * U0, ufine=0.5)),
                ("alpha low", dict(alpha=a_lo, part=part, U=U0)),
                ("alpha+1", dict(alpha=alpha0 + 1, part=part, U=U0)),
                ("partition", dict(alpha=alpha0, part=part2, U=8.5 / part2.beta))]
        deltas, roots = {}, {}
        table = None
        for name, kw in runs:
            sp = Spectrum(s, q, **kw)
            f = lambda e: math.log(sp.delta(e, T)[0] / target)
            roots[name] = brentq(f, eps0 - 0.05, eps0 + 0.05, xtol=1e-15, rtol=1e-15)
            if table is None:
                r6 = round(roots[name], 6)
                table = sorted(set([round(r6 + o, 6) for o in EPS_OFFSETS] + [roots[name]]))
                assert min(table) > k_lo and min(table) >= part.l_m * min(T, 3)
                base_sp = sp
            res = [sp.delta(e, T) for e in table]
            deltas[name] = [r[0] for r in res]
            canc = max(r[1] for r in res)
            tail = max(r[2] for r in res)
            print(f"  run {name:9s} alpha {kw['alpha']:.4f} U {kw['U']:.0f} ({len(sp.u)} u-nodes): "
                  f"eps(target) = {roots[name]!r}, cancellation {canc:.1f}, |integrand| near U / max {tail:.1e}",
                  flush=True)
        eps_r = roots["base"]
        base = deltas["base"]
        i_r = table.index(eps_r)
        j0 = [part.rho + j0_bound(s, q, T, e, part) / d for e, d in zip(table, base)]
        print(f"  dropped all-bulk term <= {max(j0):.1e} relative (rho {part.rho:.1e})", flush=True)

        # checks with the base spectrum at lower T
        check("T=1 Carr-Madan (partitioned) vs closed form delta_1", s, q, 1, eps_r,
              base_sp.delta(eps_r, 1)[0], d1_mp(s, q, eps_r), 1e-11)
        d2g = delta2_mp(s, q, eps_r, "gauss-legendre", "0.05", 2)
        d2t = delta2_mp(s, q, eps_r, "tanh-sinh", "0.04", "1.5")
        if not abs(d2g - d2t) <= 1e-18 * d2t:
            sys.exit(f"T=2 mpmath quadratures disagree: {d2g} {d2t}")
        check(f"T=2 Carr-Madan vs direct mpmath quadrature E_P[delta_1(eps - l)] (GL vs tanh-sinh "
              f"{float(abs(d2g - d2t) / d2t):.1e})", s, q, 2, eps_r, base_sp.delta(eps_r, 2)[0], d2t, 1e-11)
        d3a = delta3_np(s, q, eps_r, 0.1, 2.0)
        d3b = delta3_np(s, q, eps_r, 0.07, 1.5)
        check(f"T=3 Carr-Madan vs direct nested quadrature float64 (two rules differ "
              f"{abs(d3a - d3b) / d3b:.1e})", s, q, 3, eps_r, base_sp.delta(eps_r, 3)[0], mpmath.mpf(d3b), 1e-11)
        lam_i = max(2, int(round(alpha0 + 1)))
        d_b, m_t = moments(s, q, float(lam_i), [0.0], part)
        mine = 1 + d_b[0].real + m_t[0].real
        check_moment(rows, s, q, lam_i, mine)
        # check 4: the direct recursion at the point's own T
        rec_d, rec_root = {}, {}
        for ratio in (2.0, 1.5):
            if T <= 3:
                fn = (lambda e: delta2_mp(s, q, e, "gauss-legendre", "0.05", 2)) if T == 2 else \
                    (lambda e: delta3_np(s, q, e, 0.1 if ratio == 2.0 else 0.07, ratio))
                label = "mpmath quadrature (Gauss-Legendre)" if T == 2 else "nested quadrature"
                vals = [float(fn(e)) for e in table]
                root = brentq(lambda e: math.log(float(fn(e)) / target), table[0], table[-1], xtol=1e-14, rtol=1e-15)
                rec_d[ratio], rec_root[ratio] = vals, root
                if T == 2:
                    break
            else:
                label = "recursion"
                rec = Recursion(s, q, T, max(table), ratio)
                rec_d[ratio] = [rec.delta(e) for e in table]
                rec_root[ratio] = brentq(lambda e: math.log(rec.delta(e) / target), table[0], table[-1],
                                         xtol=1e-14, rtol=1e-15)
        keys = sorted(rec_d)
        rec_self = max(abs(rec_d[keys[0]][i] - rec_d[keys[-1]][i]) / rec_d[keys[-1]][i] for i in range(len(table)))
        how = "GL vs tanh-sinh in the T=2 check" if T == 2 else f"its two rules differ {rec_self:.1e}"
        for i in (0, i_r, len(table) - 1):
            check(f"T={T} Carr-Madan vs direct {label} (no Fourier; {how})",
                  s, q, T, table[i], base[i], mpmath.mpf(rec_d[keys[-1]][i]), 1e-10)
        print(f"  direct {label} eps(target) = {rec_root[keys[-1]]!r} (Carr-Madan {eps_r!r})", flush=True)

        # error bounds
        spread, rel_bound, slope, eps_spread, eps_bound = error_bounds(
            [deltas[n] for n in deltas] + [rec_d[kk] for kk in keys], base, table, j0,
            [roots[n] for n in roots] + [rec_root[kk] for kk in keys], eps_r, i_r)
        print(f"  spread of delta {spread:.1e} -> rel_err_bound {rel_bound[i_r]:.1e}; d log delta/d eps {slope:.3f}; "
              f"eps spread {eps_spread:.1e} -> eps = {eps_r!r} +- {eps_bound:.1e}", flush=True)
        add_max = -T * math.log1p(-q)
        for i, e in enumerate(table):
            assert e > add_max
            rows.append(dict(kind="delta", sigma=fmt(s), q=fmt(q), steps=T, direction="remove", eps=fmt(e),
                             delta_ref=fmt(base[i]), rel_err_bound=f"{rel_bound[i]:.1e}", eps_err_bound="", exact="",
                             note="Carr-Madan, partitioned"))
            rows.append(dict(kind="delta", sigma=fmt(s), q=fmt(q), steps=T, direction="add", eps=fmt(e),
                             delta_ref="0.0", rel_err_bound="0", eps_err_bound="", exact="0",
                             note=f"exact: add loss <= -T log(1-q) = {add_max:.3e} < eps"))
            rows.append(dict(kind="delta", sigma=fmt(s), q=fmt(q), steps=T, direction="max", eps=fmt(e),
                             delta_ref=fmt(base[i]), rel_err_bound=f"{rel_bound[i]:.1e}", eps_err_bound="", exact="",
                             note="add/remove = max(remove, add) = remove"))
        rows.append(dict(kind="epsilon", sigma=fmt(s), q=fmt(q), steps=T, direction="max", eps=fmt(eps_r),
                         delta_ref=fmt(target), rel_err_bound="", eps_err_bound=f"{eps_bound:.1e}", exact="",
                         note="eps at the target delta (brentq on the remove direction; add is 0 there)"))
        summary.append((ip, s, q, T, target, eps_r, eps_bound))

    for ip, (s, q, T, target) in enumerate(LARGE_T_POINTS, len(POINTS) + 1):
        eps_r, eps_bound = large_t_point(ip, s, q, T, target, rows, check)
        summary.append((ip, s, q, T, target, eps_r, eps_bound))

    write_table(OUT, "# generated by tests/reference/make_sgm_rare.py (Carr-Madan Fourier inversion with a smooth "
                 "bulk/tail partition of each step, checked against direct quadrature without Fourier; point 6, "
                 "T = 1e5: every term of the sum over the number of tail steps inverted, checked against the "
                 "unpartitioned inversion and q = 1), "
                 f"numpy {np.__version__}, scipy {__import__('scipy').__version__}, mpmath {mpmath.__version__}\n",
                rows, summary)


if __name__ == "__main__":
    main()
