#!/usr/bin/env python3
"""Grid-free reference for delta(eps) and eps(delta) of 128 composed Poisson-subsampled
Gaussian steps (issue #31 item 5): sigma = 0.8236963278920236, q = 0.00022309339773680164,
T = 128, target delta = 1.115890072541247e-10, add/remove relation.

Writes sgm_t128.csv next to this script.  Imports numpy, scipy and mpmath only (never the
package under test), and no loss grid, no FFT and no discretised PLD is involved anywhere.

Setting
-------
Q = N(0, s^2), P = (1-q) N(0, s^2) + q N(1, s^2), s = sigma.  One step's privacy loss, as a
function of x ~ Q:  remove  l(x) = log(1 - q + q e^y),  y = (2x - 1)/(2 s^2);  add  -l(x)
(with x ~ P).  L = l(X_1) + ... + l(X_T), X_i iid Q, and for either direction

    delta(eps) = E_Q[(e^L - e^eps)_+]         (hockey stick, E_Q[e^L] = 1).

add:  -l <= -log(1-q), so L_add <= -T log(1-q) = 0.028560... < eps for every eps tabulated,
      hence delta_add(eps) = 0 exactly there (the tabulated eps are all >= 0.30).  The
      add/remove delta is therefore the remove direction's, and only that is computed.

Method (remove direction): Carr-Madan Fourier inversion of the "call price"
-------------------------------------------------------------------------
For any damping alpha > 0 (lam = alpha + 1),

    delta(k) = e^{-alpha k}/pi * int_0^inf Re[ e^{-iuk} M(lam + iu)^T / ((alpha + iu)(lam + iu)) ] du,

M(z) = E_Q[e^{z l(X)}] the one-step moment function (entire in z here: e^{lam l} grows like
e^{lam x/s^2} against the Gaussian).  Nothing is discretised except two quadratures:

* M(z) - 1 = E_Q[ h(z l) - z h(l) ],  h(w) = expm1(w) - w.  (E_Q[e^l - 1] = 0 exactly, so the
  first-order terms cancel analytically: near x ~ 0 the integrand is O(z^2 q^2), not O(zq), and
  M - 1 ~ 1e-5..1e-3 keeps ~15 significant digits.)  h uses its Taylor series for |w| < 0.5.
  Integrated over x in [-14 s, lam + 13 s] (beyond both ends the tilted weight is < e^-90) by
  composite 20-point Gauss-Legendre on panels no wider than hx = 0.5 in x and no wider than
  dphi = 12 rad in the phase u*l(x) (panel ends placed at x(l) for l on an even grid of step
  dphi/u_max; x(l) = s^2 log((e^l - 1 + q)/q) + 1/2 in closed form), so the oscillation of
  e^{iul} is resolved at every u of a block.
* log M^T = T log1p(M - 1) (complex log1p written via log1p and atan2); the u-integral by
  composite 20-point Gauss-Legendre on [0, 12] (panels 0.25), [12, 60] (1.0), [60, U] (30),
  U = 6000, its weights recomputed in mpmath for the float64-rounded nodes (an exact
  interpolatory rule at the points where the integrand is evaluated).  Beyond U the integrand
  is < e^-50 of its size at u = 0 (the 127-step bulk's characteristic function has decayed:
  T Re log M(lam+iu)/M(lam) = -24 at u = 3000, -42 at 5000).  Only M - 1 is float64; log1p,
  the phase u k (up to ~2000 rad), exp and the sum are long double.
* alpha minimises  T log M(alpha + 1) - alpha k - log(alpha (alpha + 1))  (the modulus of the
  damped integrand at u = 0; a Chernoff bound on delta), at k = 0.30529.

Why this needs care: delta here is a "one large step" event -- one of the 128 steps lands
> 6 s out (l in the lognormal-like part of its tail, l ~ q e^y) -- and no exponential tilt
fits such a tail: the best damping (alpha = 10.51) still leaves the integrand ~e^-7.9 at u = 0
while delta ~ e^-22.9, and int |integrand| du / delta = 1.0e7: the u-integral cancels
ten-million-fold.  An integrand relative error e therefore costs ~1e7 e / sqrt(#nodes) on delta.
Hence M - 1 rather than M (absolute error ~1e-19, check 4, so ~1e-17 on log M^T), the long
double assembly, and the exact rule for rounded nodes: with Gauss weights at rounded nodes, or
the phase u k in float64, check 3 was off by 4e-8; now by 3e-9.  The error estimate below
measures what is left rather than assuming it.

Checks (rows kind=check in the CSV; the script aborts if one fails its tolerance)
------
1. q = 1, T = 128 (composed Gaussian, mu = sqrt(T)/s): closed form
   delta = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) in mpmath (dps 40); two cases.
2. q = 0.3, T = 1 (one subsampled step, same s), eps = 0.5 and 1: closed form (Sbar = normal survival)
   delta = q Sbar(t - 1/(2s)) - h Sbar(t + 1/(2s)),  h = e^eps - 1 + q,  t = s log(h/q).
3. The hard case at T = 1: the actual s and q, eps = 0.30529040 (delta ~ 1e-12, the same
   lognormal-like tail, and a 1e9-fold cancellation, 100 times the main computation's), with an
   independent Gaussian N(0, 0.005^2) added to the loss (a one-step loss alone has a point-like
   bulk whose characteristic function does not decay before u ~ 1/q; the Gaussian stands in
   for the other 127 steps' bulk, whose spread is about that).  Reference: mpmath (dps 40)
   quadrature of the Black-Scholes form
       E[(e^{l(x)+G} - e^k)_+] = int phi_s(x) [ e^{l(x) + v/2} Phi(d + sqrt v) - e^k Phi(d) ] dx,
       d = (l(x) - k)/sqrt v,
   split around the crossing l(x) = k.
4. M(lam) at integer lam = 11 against the exact binomial sum
   sum_j C(lam, j) (1-q)^(lam-j) q^j e^{j(j-1)/(2 s^2)} (mpmath), and M(lam + iu) at a few u
   against mpmath.quad of the same integrand (dps 30).

Error estimate
--------------
The remove-direction delta at every tabulated eps is computed by five runs that change what
could be wrong: base; x-quadrature twice as fine (hx 0.25, dphi 6); u-quadrature twice as fine
and U = 8000; damping alpha - 1.5; damping alpha + 0.5 (changing alpha changes the integrand
and its cancellation completely).  rel_err_bound = max(1e-12, 10 * the largest relative
difference from the base run); the eps root is found in each run (brentq on delta(eps) =
target) and eps_err_bound = max(10 * largest difference, rel_err_bound / |d log delta/d eps|).

Result
------
eps(1.115890072541247e-10) = 0.30529060063675 +- 1.4e-9 (add/remove; the remove direction), and
delta(eps) to 2.5e-8 relative at every tabulated eps (the five runs agree to 2.5e-9; the
cancellation factor, int |integrand| / delta, is 1.0e7).  d log delta / d eps = -18.10 there, so
dp_accounting's eps = 0.30528576 has delta 1.1159879e-10, 8.8e-5 above the target: it is below
the true eps.  sgmfast's certified [0.30529040, 0.30529122] contains the reference.

Run from the repository root (one process; 7 min on a shared 2-core machine, numpy 2.4, scipy
1.17, mpmath 1.3):
    python tests/reference/make_sgm_t128.py
"""

import csv
import math
import os
import sys

import mpmath
import numpy as np
from numpy.polynomial.legendre import leggauss
from scipy.optimize import brentq, minimize_scalar

SIGMA = 0.8236963278920236
Q = 0.00022309339773680164
T = 128
TARGET = 1.115890072541247e-10
EPS_TABLE = [0.30, 0.305, 0.3052, 0.30528, 0.30528576, 0.305288, 0.30529, 0.3052902, 0.3052904,
             0.3052906, 0.305291, 0.305295, 0.3053, 0.3055, 0.306, 0.31]
K_TILT = 0.30529          # where alpha is chosen
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "sgm_t128.csv")

NG = 20
GN, GW = leggauss(NG)


# ----------------------------------------------------------------------------- one step

def loss(x, s, q):
    """Remove-direction one-step loss l(x) = log(1 - q + q e^y), y = (2x - 1)/(2 s^2)."""
    y = (2 * x - 1) / (2 * s * s)
    if q == 1:
        return y
    out = np.empty_like(y)
    m = y < 30         # log1p(q expm1(y)) keeps full relative accuracy, also where l changes sign
    out[m] = np.log1p(q * np.expm1(y[m]))
    yy = y[~m]
    out[~m] = yy + math.log(q) + np.log1p((1 - q) / q * np.exp(-yy))
    return out


def x_of_loss(l, s, q):
    """Inverse of loss()."""
    if q == 1:
        return s * s * l + 0.5
    return s * s * np.log((np.expm1(l) + q) / q) + 0.5


def _taylor_h(w):
    acc = np.zeros_like(w)
    term = w * w / 2
    for n in range(3, 30):        # |w| < 0.5: 0.5^29/29! < 1e-38
        acc += term
        term = term * w / n
    return acc + term


def h_real(w):
    """expm1(w) - w, relative accuracy ~1e-16 also for small |w|."""
    w = np.asarray(w, float)
    out = np.expm1(w) - w
    sm = np.abs(w) < 0.5
    out[sm] = _taylor_h(w[sm])
    return out


def h_complex(w):
    w = np.asarray(w, complex)
    out = np.empty_like(w)
    sm = np.abs(w) < 0.5
    out[sm] = _taylor_h(w[sm])
    a, b = w[~sm].real, w[~sm].imag
    out[~sm] = (np.expm1(a) * np.cos(b) - 2 * np.sin(b / 2) ** 2 - a) + 1j * (np.exp(a) * np.sin(b) - b)
    return out


def panels(bps):
    a, b = bps[:-1], bps[1:]
    x = ((a + b) / 2)[:, None] + ((b - a) / 2)[:, None] * GN[None, :]
    w = ((b - a) / 2)[:, None] * GW[None, :]
    return x.ravel(), w.ravel()


def x_nodes(s, q, lam, umax, hx, dphi):
    xlo, xhi = -14 * s, max(lam, 1.0) + 13 * s
    b1 = np.linspace(xlo, xhi, int(math.ceil((xhi - xlo) / hx)) + 1)
    llo, lhi = loss(np.array([xlo, xhi]), s, q)
    n = int(math.ceil((lhi - llo) * umax / dphi))
    b2 = x_of_loss(np.linspace(llo, lhi, n + 1)[1:-1], s, q) if n > 1 else np.empty(0)
    return panels(np.unique(np.concatenate([b1, b2])))


def m_minus_1(s, q, lam, us, hx=0.5, dphi=12.0, chunk=50000):
    """M(lam + iu) - 1 = E_Q[h(z l) - z h(l)] for each u in us (one x-rule for the block)."""
    us = np.asarray(us, float)
    x, w = x_nodes(s, q, lam, float(us.max()), hx, dphi)
    c_norm = 1 / (s * math.sqrt(2 * math.pi))
    out = np.zeros(len(us), complex)
    for i in range(0, len(x), chunk):
        xx, ww = x[i:i + chunk], w[i:i + chunk]
        l = loss(xx, s, q)
        lf = -xx * xx / (2 * s * s)
        f = np.exp(lf) * c_norm
        hlf = h_real(l) * f * ww
        far = np.abs(lam * l) > 0.5
        if far.any():      # here h(zl) = e^{zl} - 1 - zl directly (|zl| >= 0.5: no cancellation)
            lb = l[far]
            e = np.exp(lam * lb + lf[far]) * c_norm * ww[far]
            fb = f[far] * ww[far]
            sf, slf, shf = fb.sum(), (lb * fb).sum(), hlf[far].sum()
            ph = np.outer(us, lb)
            out += ((np.cos(ph) * e).sum(axis=1) - sf - lam * slf - lam * shf) \
                + 1j * ((np.sin(ph) * e).sum(axis=1) - us * slf - us * shf)
        near = ~far
        if near.any():
            ln, fn, shn = l[near], f[near] * ww[near], hlf[near].sum()
            for j, u in enumerate(us):
                z = lam + 1j * u
                out[j] += np.sum(h_complex(z * ln) * fn) - z * shn
    return out


def log1p_c(d):
    return 0.5 * np.log1p(2 * d.real + np.abs(d) ** 2) + 1j * np.arctan2(d.imag, 1 + d.real)


# ----------------------------------------------------------------------------- inversion

def log_m_T(s, q, T, lam):
    return T * math.log1p(m_minus_1(s, q, lam, [0.0])[0].real)


def best_alpha(s, q, T, k, gauss_var=0.0):
    def F(a):
        v = log_m_T(s, q, T, a + 1) + (a + 1) ** 2 * gauss_var / 2
        return v - a * k - math.log(a * (a + 1)) if math.isfinite(v) else 1e300
    with np.errstate(over="ignore", invalid="ignore"):
        r = minimize_scalar(F, bounds=(0.05, 40.0), method="bounded", options={"xatol": 1e-4})
    return float(r.x), float(r.fun)


def _exact_weights(a, b, nodes):
    """Weights of the interpolatory rule on [a, b] at exactly these float64 nodes, in mpmath: the
    rounded Gauss nodes with Gauss weights would be a rule perturbed by ~1e-16 per node, and the
    integrand turns ~10 rad per unit u near u = 0, so that perturbation alone shows at the ~1e-8
    level after a 1e9-fold cancellation (check 3)."""
    a, b = mpmath.mpf(a), mpmath.mpf(b)
    tau = [(2 * mpmath.mpf(x) - a - b) / (b - a) for x in nodes]
    n = len(tau)
    A = mpmath.matrix(n, n)
    for j, t in enumerate(tau):           # Legendre P_i(t) by the three-term recurrence
        p0, p1 = mpmath.mpf(1), t
        A[0, j], A[1, j] = p0, p1
        for i in range(1, n - 1):
            p0, p1 = p1, ((2 * i + 1) * t * p1 - i * p0) / (i + 1)
            A[i + 1, j] = p1
    rhs = mpmath.matrix([2] + [0] * (n - 1))
    w = mpmath.lu_solve(A, rhs)
    return [(b - a) / 2 * w[j] for j in range(n)]


_RULES = {}


def u_rule(U, fine=1.0):
    if (U, fine) not in _RULES:
        _RULES[U, fine] = _u_rule(U, fine)
    return _RULES[U, fine]


def _u_rule(U, fine):
    """Composite 20-point Gauss-Legendre on [0, 12] (panels 0.25), [12, 60] (1) and [60, U] (30),
    the panel widths times `fine`; nodes float64, weights (long double) exact for them."""
    bps = np.unique(np.concatenate([np.linspace(a, b, int(math.ceil((b - a) / (h * fine)) + 1))
                                    for a, b, h in ((0, 12, 0.25), (12, 60, 1.0), (60, U, 30.0))]))
    a, b = bps[:-1], bps[1:]
    u = ((a + b) / 2)[:, None] + ((b - a) / 2)[:, None] * GN[None, :]
    with mpmath.workdps(30):
        w = np.array([[np.longdouble(mpmath.nstr(x, 25)) for x in _exact_weights(a[p], b[p], u[p])]
                      for p in range(len(a))])
    return u, w


class Spectrum:
    """log of M(lam + iu)^T E[e^{(lam+iu) G}] / ((alpha + iu)(lam + iu)) on a u-rule (long double), and
    delta(k) by the Carr-Madan integral.  Only M - 1 is float64 (absolute error ~1e-19); the rest is
    assembled in long double (64-bit mantissa): the integral cancels ~1e6-fold, so float64 rounding
    of the log, the phase u k (up to ~2000 rad) or the exponential would show at ~1e-10."""

    def __init__(self, s, q, T, alpha, U=6000.0, ufine=1.0, hx=0.5, dphi=12.0, gauss_var=0.0):
        self.alpha, lam = alpha, alpha + 1
        u, w = u_rule(U, ufine)
        d = np.empty(u.shape, complex)
        for p in range(u.shape[0]):
            d[p] = m_minus_1(s, q, lam, u[p], hx, dphi)
        u, w, d = u.ravel(), w.ravel(), d.ravel()
        ld = np.longdouble
        ul, dr, di = u.astype(ld), d.real.astype(ld), d.imag.astype(ld)
        al, la, v = ld(alpha), ld(lam), ld(gauss_var)
        with np.errstate(divide="ignore", invalid="ignore"):
            lr = T * (np.log1p(2 * dr + dr * dr + di * di) / 2) + (la * la - ul * ul) * v / 2 \
                - np.log((al * al + ul * ul) * (la * la + ul * ul)) / 2
            li = T * np.arctan2(di, 1 + dr) + la * ul * v - np.arctan2(ul, al) - np.arctan2(ul, la)
        ok = np.isfinite(lr) & np.isfinite(li)        # M^T underflowed to 0: the integrand is 0 there
        self.u, self.w, self.lr, self.li = ul[ok], w[ok], lr[ok], li[ok]

    def delta(self, k):
        """(delta(k), int |integrand| du): the second over the first is the cancellation factor."""
        kl = np.longdouble(k)
        v = self.w * np.exp(self.lr - self.alpha * kl) * np.cos(self.li - self.u * kl)
        v = v[np.argsort(np.abs(v))]
        return float(np.sum(v) / np.pi), float(np.sum(np.abs(v)) / np.pi)


# ----------------------------------------------------------------------------- exact answers

mpmath.mp.dps = 40


def mp_gauss(mu, eps):
    mu, eps = mpmath.mpf(mu), mpmath.mpf(eps)
    return mpmath.ncdf(-eps / mu + mu / 2) - mpmath.exp(eps) * mpmath.ncdf(-eps / mu - mu / 2)


def mp_one_step(s, q, eps):
    s, q, eps = mpmath.mpf(s), mpmath.mpf(q), mpmath.mpf(eps)
    h = mpmath.expm1(eps) + q
    t = s * mpmath.log(h / q)
    return q * mpmath.ncdf(-(t - 1 / (2 * s))) - h * mpmath.ncdf(-(t + 1 / (2 * s)))


def mp_loss(x, s, q):
    return mpmath.log1p(q * mpmath.expm1((2 * x - 1) / (2 * s * s)))


def mp_one_step_plus_gauss(s, q, k, sd):
    s, q, k, sd = (mpmath.mpf(v) for v in (s, q, k, sd))
    v = sd * sd
    ek = mpmath.exp(k)

    def g(x):
        l = mp_loss(x, s, q)
        d = (l - k) / sd
        return mpmath.npdf(x, 0, s) * (mpmath.exp(l + v / 2) * mpmath.ncdf(d + sd) - ek * mpmath.ncdf(d))
    xs = s * s * mpmath.log((mpmath.expm1(k) + q) / q) + mpmath.mpf(1) / 2       # l(xs) = k
    pts = [xs - 1, xs - 0.3, xs - 0.1] + [xs + j * mpmath.mpf("0.01") for j in range(-6, 7)] \
        + [xs + 0.1, xs + 0.3, xs + 1, xs + 2, xs + 4, 14 * s]
    lo = mpmath.quad(g, [xs - 3, xs - 1])
    main = mpmath.quad(g, sorted(pts))
    return lo + main


def mp_moment_int(s, q, lam):
    s, q = mpmath.mpf(s), mpmath.mpf(q)
    return mpmath.fsum(mpmath.binomial(lam, j) * (1 - q) ** (lam - j) * q ** j * mpmath.exp(j * (j - 1) / (2 * s * s))
                       for j in range(lam + 1))


def mp_m_minus_1(s, q, lam, u):
    mpmath.mp.dps = 30
    s, q, z = mpmath.mpf(s), mpmath.mpf(q), mpmath.mpf(lam) + 1j * mpmath.mpf(u)

    def g(x):
        l = mp_loss(x, s, q)
        e1 = mpmath.expm1(z * l) - z * mpmath.expm1(l)
        return mpmath.npdf(x, 0, s) * e1
    xlo, xhi = -14 * s, lam + 13 * s
    n = int(max(40, (xhi - xlo) * (1 + u * 1.6)))
    pts = [xlo + (xhi - xlo) * j / n for j in range(n + 1)]
    r = mpmath.quad(g, pts)
    mpmath.mp.dps = 40
    return complex(r)


# ----------------------------------------------------------------------------- main

def main():
    rows = []

    def fmt(v):
        return repr(float(v))

    def check(name, s, q, T_, eps, got, exact, tol):
        rel = abs(got - float(exact)) / float(exact)
        print(f"check {name}: got {got!r} exact {mpmath.nstr(exact, 17)} rel {rel:.2e} (tol {tol:g})",
              flush=True)
        rows.append(dict(kind="check", sigma=fmt(s), q=fmt(q), steps=T_, direction="remove", eps=fmt(eps),
                         delta_ref=fmt(got), rel_err_bound=f"{rel:.3e}", eps_err_bound="", exact=mpmath.nstr(exact, 20),
                         note=name))
        if not rel <= tol:
            sys.exit(f"check {name} failed: rel {rel:.3e} > {tol:g}")

    # 1. q = 1
    for s, T_, k in ((30.0, 128, 2.0), (5.0, 128, 20.0)):
        a, _ = best_alpha(s, 1.0, T_, k)
        got, _ = Spectrum(s, 1.0, T_, a, U=400.0).delta(k)
        check(f"q=1 composed Gaussian closed form (alpha {a:.3f})", s, 1.0, T_, k, got,
              mp_gauss(math.sqrt(T_) / s, k), 1e-12)
    # 2. T = 1, q = 0.3
    for k in (0.5, 1.0):
        a, _ = best_alpha(SIGMA, 0.3, 1, k)
        got, _ = Spectrum(SIGMA, 0.3, 1, a, U=2000.0).delta(k)
        check(f"T=1 q=0.3 closed form (alpha {a:.3f})", SIGMA, 0.3, 1, k, got,
              mp_one_step(SIGMA, 0.3, k), 1e-10)
    # 3. T = 1 at the actual s, q, plus a Gaussian N(0, 0.005^2)
    sd, k = 0.005, 0.3052904
    a, F = best_alpha(SIGMA, Q, 1, k, sd * sd)
    sp = Spectrum(SIGMA, Q, 1, a, U=3000.0, gauss_var=sd * sd)      # exp(-u^2 v/2) < e^-110 beyond
    got, absint = sp.delta(k)
    ref = mp_one_step_plus_gauss(SIGMA, Q, k, sd)
    check(f"T=1 actual s,q + N(0,0.005^2) loss, mpmath quadrature (alpha {a:.3f}, cancellation "
          f"{absint / got:.1e})", SIGMA, Q, 1, k, got, ref, 2e-8)
    # 4. the one-step moment function
    for lam, u in ((11, 0.0), (11.3, 0.0), (11.3, 2.0), (11.3, 20.0)):
        mine = complex(m_minus_1(SIGMA, Q, lam, [u])[0])
        ref = mp_moment_int(SIGMA, Q, lam) - 1 if lam == 11 else mp_m_minus_1(SIGMA, Q, lam, u)
        ref = complex(ref)
        err = abs(mine - ref)
        how = "binomial sum" if lam == 11 else "mpmath.quad dps 30"
        print(f"check M({lam}+{u}i)-1: {mine!r} {how} {ref!r} |diff| {err:.2e} (x T = {T * err:.1e} on log M^T)",
              flush=True)
        rows.append(dict(kind="check", sigma=fmt(SIGMA), q=fmt(Q), steps=1, direction="remove", eps="",
                         delta_ref=fmt(abs(mine)), rel_err_bound=f"{err / abs(ref):.3e}", eps_err_bound="",
                         exact=repr(abs(ref)), note=f"|M({lam}+{u:g}i)-1| vs {how} (abs diff {err:.2e})"))
        if not T * err < 1e-15:
            sys.exit("M check failed")
    print("moment checks done", flush=True)

    # main computation
    a0, F0 = best_alpha(SIGMA, Q, T, K_TILT)
    print(f"alpha = {a0:.5f}, log Chernoff size {F0:.3f}, log target {math.log(TARGET):.3f}", flush=True)
    runs = {"base": dict(alpha=a0), "x fine": dict(alpha=a0, hx=0.25, dphi=6.0),
            "u fine": dict(alpha=a0, ufine=0.5, U=8000.0), "alpha-1.5": dict(alpha=a0 - 1.5),
            "alpha+0.5": dict(alpha=a0 + 0.5)}
    deltas, roots, conds = {}, {}, {}
    for name, kw in runs.items():
        sp = Spectrum(SIGMA, Q, T, **kw)
        deltas[name] = [sp.delta(e)[0] for e in EPS_TABLE]
        conds[name] = [sp.delta(e)[1] / sp.delta(e)[0] for e in EPS_TABLE]
        roots[name] = brentq(lambda e: math.log(sp.delta(e)[0] / TARGET), 0.3050, 0.3056, xtol=1e-15, rtol=1e-15)
        print(f"run {name:10s} alpha {kw['alpha']:.4f}: delta(0.3052904) = {deltas[name][EPS_TABLE.index(0.3052904)]!r}"
              f"  eps(target) = {roots[name]!r}  cancellation {conds[name][EPS_TABLE.index(0.3052904)]:.1e}"
              f"", flush=True)
    base = deltas["base"]
    spread = max(abs(deltas[n][i] - base[i]) / base[i] for n in runs for i in range(len(EPS_TABLE)))
    rel_bound = max(1e-12, 10 * spread)
    i0, i1 = EPS_TABLE.index(0.30528), EPS_TABLE.index(0.305291)
    slope = math.log(base[i1] / base[i0]) / (EPS_TABLE[i1] - EPS_TABLE[i0])
    eps_spread = max(abs(roots[n] - roots["base"]) for n in runs)
    eps_bound = max(10 * eps_spread, rel_bound / abs(slope))
    print(f"largest relative spread of delta over the runs {spread:.2e} -> rel_err_bound {rel_bound:.1e}; "
          f"d log delta/d eps = {slope:.3f}; eps spread {eps_spread:.2e} -> eps_err_bound {eps_bound:.1e}", flush=True)
    add_max = -T * math.log1p(-Q)
    for i, e in enumerate(EPS_TABLE):
        rows.append(dict(kind="delta", sigma=fmt(SIGMA), q=fmt(Q), steps=T, direction="remove", eps=fmt(e),
                         delta_ref=fmt(base[i]), rel_err_bound=f"{rel_bound:.1e}", eps_err_bound="", exact="",
                         note=f"Carr-Madan, cancellation {conds['base'][i]:.1e}"))
        assert e > add_max
        rows.append(dict(kind="delta", sigma=fmt(SIGMA), q=fmt(Q), steps=T, direction="add", eps=fmt(e),
                         delta_ref="0.0", rel_err_bound="0", eps_err_bound="", exact="0",
                         note=f"exact: add loss <= -T log(1-q) = {add_max:.6f} < eps"))
        rows.append(dict(kind="delta", sigma=fmt(SIGMA), q=fmt(Q), steps=T, direction="max", eps=fmt(e),
                         delta_ref=fmt(base[i]), rel_err_bound=f"{rel_bound:.1e}", eps_err_bound="", exact="",
                         note="add/remove = max(remove, add) = remove"))
    rows.append(dict(kind="epsilon", sigma=fmt(SIGMA), q=fmt(Q), steps=T, direction="max", eps=fmt(roots["base"]),
                     delta_ref=fmt(TARGET), rel_err_bound="", eps_err_bound=f"{eps_bound:.1e}", exact="",
                     note="eps at the target delta (brentq on the remove direction; add is 0 there)"))
    with open(OUT, "w", newline="") as fh:
        fh.write("# generated by tests/reference/make_sgm_t128.py (Carr-Madan Fourier inversion, no loss grid), "
                 f"numpy {np.__version__}, mpmath {mpmath.__version__}\n")
        fh.write("# kind=delta: delta_ref at eps, |error| <= rel_err_bound * delta_ref; kind=epsilon: eps at "
                 "delta_ref, |error| <= eps_err_bound; kind=check: method vs known answer (exact), rel_err_bound = "
                 "measured relative difference\n")
        wr = csv.DictWriter(fh, fieldnames=list(rows[0]))
        wr.writeheader()
        wr.writerows(rows)
    print(f"wrote {OUT} ({len(rows)} rows)")


if __name__ == "__main__":
    main()
