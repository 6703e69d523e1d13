#!/usr/bin/env python3
"""Reference table: delta(eps) of T = 2 Poisson-subsampled Gaussian steps at tiny delta.

Writes (next to this script) ``two_step_small_delta.csv``.  Needs only mpmath (it never
imports sgmfast).  Run from the repository root:

    python tests/reference/make_two_step_small_delta.py

Setting (add/remove, sensitivity 1, s = sigma, sampling rate q)
---------------------------------------------------------------
mu0 = N(0, s^2), mu1 = N(1, s^2), mu = (1-q) mu0 + q mu1, and
W(z) = mu1(z)/mu0(z) = exp((2z - 1)/(2 s^2)), r(z) = mu(z)/mu0(z) = 1 - q + q W(z).

* remove: P = mu,  Q = mu0, one-step loss L(z) = log r(z), increasing, L > log(1-q).
* add:    P = mu0, Q = mu,  one-step loss L(z) = -log r(z), decreasing, L < -log(1-q).

One step (any real eps')
------------------------
delta_1(eps') = int max(0, P(z) - e^{eps'} Q(z)) dz = P(L > eps') - e^{eps'} Q(L > eps').

* remove, h = e^{eps'} - 1 + q.  L(z) > eps'  <=>  q W(z) > h.
  - h <= 0 (eps' <= log(1-q)): the set is the whole line, delta_1 = 1 - e^{eps'} = q - h.
  - h > 0: the set is z > z* = s^2 log(h/q) + 1/2 and
    delta_1 = (1-q) Sbar(z*/s) + q Sbar((z*-1)/s) - e^{eps'} Sbar(z*/s)
            = q Sbar((z*-1)/s) - h Sbar(z*/s).
* add, g = e^{-eps'} - 1 + q.  L(z) > eps'  <=>  r(z) < e^{-eps'}  <=>  q W(z) < g.
  - g <= 0 (eps' >= -log(1-q)): the set is empty, delta_1 = 0 exactly.
  - g > 0: the set is z < z' = s^2 log(g/q) + 1/2 and
    delta_1 = Phi(z'/s) - e^{eps'} [(1-q) Phi(z'/s) + q Phi((z'-1)/s)]
            = e^{eps'} [g Phi(z'/s) - q Phi((z'-1)/s)].
    (W takes every value in (0, inf), so the set is never the whole line when q > 0.)

Both closed forms are checked here against a direct quadrature of max(0, P - e^{eps'} Q)
(crossing point by bisection on log P - log Q - eps', no closed-form threshold) at
eps' from -3 to 40, including eps' on both sides of log(1-q) and -log(1-q); they must agree
to 1e-20 relative (exact zeros must be exact), or the script prints CLOSED FORM MISMATCH and
exits with status 1.

Two steps
---------
For product measures P x P against Q x Q, fix z1.  Then
  int max(0, P(z1) P(z2) - e^eps Q(z1) Q(z2)) dz2
      = P(z1) int max(0, P(z2) - e^{eps - L(z1)} Q(z2)) dz2      (Q(z1) = P(z1) e^{-L(z1)})
      = P(z1) delta_1(eps - L(z1)),
so, integrating over z1,
  delta_2(eps) = int P(z) delta_1(eps - L(z)) dz.
The argument eps - L(z) ranges over the whole line, so delta_1 is needed at negative eps'
too.  delta_max = max(delta_remove, delta_add).  For eps >= -2 log(1-q) the two-step add loss
(at most -2 log(1-q)) never exceeds eps and delta_add = 0 exactly; in general the add integrand
vanishes for z >= z_b, where eps - L(z_b) = -log(1-q).  The remove integrand changes form
(h = 0, C-infinity but not analytic) at z_k, where eps - L(z_k) = log(1-q).

Numerics
--------
The integral over z is done in u = z/s, with the integrand divided by its largest value found
by a scan (mpmath's quad stops on an *absolute* error estimate, so an integrand of size 1e-40
must be scaled to O(1)).  The scan (u in [-60, 60 + 1/s]) also fixes the window where the
integrand exceeds 10^-D of its peak; the peak, z_k or z_b are breakpoints.  Two routes:

* route A: Gauss-Legendre, dps 50, pieces of width 0.5 in u, D = 65, plus breakpoints at
  z_k/s +- 2^-k (k = 1..40; the integrand is C-infinity but not analytic there, and GL alone
  lost ~20 digits); the integrand in the "h form" (h = e^eps / r(z) - (1 - q) formed
  directly, delta_1 = q Sbar - h Sbar).
* route B: tanh-sinh, dps 70, pieces of width 1 in u on a shifted grid (scan step 0.2,
  offset 0.1), D = 90; the integrand in the "eps' form" (eps' = eps - L(z) with
  L = log1p(q expm1(...)), delta_1 as the three-term formula written above).

The one-step closed forms raise their own precision when the difference loses more than 10
digits.  Both routes must agree to 1e-15 relative (the row is dropped with a warning
otherwise); the table holds route A, and the worst disagreement is printed.  Extra check: at
q = 1 the two-step remove delta equals the Gaussian mechanism with mu = sqrt(2)/s,
Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu), asserted at a few eps (down to delta ~ 1e-41).
And, since the grid's eps all exceed -2 log(1-q) (delta_add = 0 in every row), the two-step
add side is checked at four smaller eps against delta_add(eps) = 1 - e^eps +
e^eps delta_remove(-eps) (H_eps(Q||P) = 1 - e^eps + e^eps H_{-eps}(P||Q) for any pair).

Grid: sigma in {0.7, 1, 1.6, 3}, q in {0.003, 0.03, 0.2}, target delta in {1e-6, 1e-20,
1e-30, 1e-40}.  For each point eps solves log delta_max(eps) = log target (Illinois on a
bracket, with the same integrand at dps 20, route A's rule), is rounded to 6 significant
digits as a float, and the row holds delta at exactly that float.  Points with eps > 200, or
that fail, or that take more than 2 minutes are dropped with a warning (row_id keeps the
grid index).
"""

from __future__ import annotations

import csv
import math
import os
import sys
import time

import mpmath as mp
from mpmath import mpf

GRID_SIGMA = (0.7, 1.0, 1.6, 3.0)
GRID_Q = (0.003, 0.03, 0.2)
GRID_DELTA = (1e-6, 1e-20, 1e-30, 1e-40)
STEPS = 2
EPS_MAX = 200.0
POINT_SECONDS = 120.0
AGREE = mpf("1e-15")

# route parameters: (quadrature method, dps, piece width in u, scan step, scan offset, D)
ROUTES = {
    "A": ("gauss-legendre", 50, mpf(1) / 2, 0.25, 0.0, 65),
    "B": ("tanh-sinh", 70, mpf(1), 0.2, 0.1, 90),
    "F": ("gauss-legendre", 20, mpf(1), 0.5, 0.0, 30),  # root finding only
}


class PointTimeout(Exception):
    pass


_DEADLINE = [math.inf]


def _tick():
    if time.monotonic() > _DEADLINE[0]:
        raise PointTimeout()


# ---------------------------------------------------------------- normal tails


def sbar(x):
    return mp.erfc(x / mp.sqrt(2)) / 2


def cdf(x):
    return mp.erfc(-x / mp.sqrt(2)) / 2


# ---------------------------------------------------------------- one step, closed forms


def _guarded(terms):
    """Evaluate terms() -> (largest term, value) and redo it at higher precision while the
    difference loses more than 10 digits (or comes out <= 0)."""
    extra = 0
    for _ in range(8):
        with mp.extradps(extra):
            big, val = terms()
        if val > 0:
            lost = float(mp.log10(big / val))
            if lost <= 10 or extra >= lost + 10:
                return +val
            extra = int(lost) + 15
        else:
            extra = 2 * extra + 30
    raise ArithmeticError("cancellation not resolved")


def d1_remove_h(q, s, h):
    """Remove direction, as a function of h = e^{eps'} - 1 + q (route A)."""
    if h <= 0:
        return q - h

    def terms():
        zs = s * s * mp.log(h / q) + mpf(1) / 2
        t1 = q * sbar((zs - 1) / s)
        return t1, t1 - h * sbar(zs / s)

    return _guarded(terms)


def d1_add_g(q, s, g, e1):
    """Add direction, as a function of g = e^{-eps'} - 1 + q and e1 = e^{eps'} (route A)."""
    if g <= 0:
        return mpf(0)

    def terms():
        zp = s * s * mp.log(g / q) + mpf(1) / 2
        t1 = g * cdf(zp / s)
        return t1, t1 - q * cdf((zp - 1) / s)

    return e1 * _guarded(terms)


def delta1_remove(q, s, e):
    """Remove direction at eps' = e, the three-term form (route B, closed-form check)."""
    E = mp.exp(e)
    h = mp.expm1(e) + q
    if h <= 0:
        return -mp.expm1(e)

    def terms():
        zs = s * s * mp.log(h / q) + mpf(1) / 2
        a = (1 - q) * sbar(zs / s) + q * sbar((zs - 1) / s)
        return a, a - E * sbar(zs / s)

    return _guarded(terms)


def delta1_add(q, s, e):
    """Add direction at eps' = e, the form Phi - e^{eps'}[(1-q)Phi + q Phi] (route B, check)."""
    E = mp.exp(e)
    g = mp.expm1(-e) + q
    if g <= 0:
        return mpf(0)

    def terms():
        zp = s * s * mp.log(g / q) + mpf(1) / 2
        a = cdf(zp / s)
        return a, a - E * ((1 - q) * a + q * cdf((zp - 1) / s))

    return _guarded(terms)


# ---------------------------------------------------------------- one step, direct quadrature


def d1_direct(q, s, e, direction, dps=60):
    """int max(0, P - e^{eps'} Q) from the densities; crossing by bisection."""
    with mp.workdps(dps):
        q, s, e = mpf(q), mpf(s), mpf(e)
        c0 = -mp.log(s * mp.sqrt(2 * mp.pi))

        def lmu0(z):
            return c0 - z * z / (2 * s * s)

        def lmu(z):
            return lmu0(z) + mp.log1p(q * mp.expm1((2 * z - 1) / (2 * s * s)))

        lP, lQ = (lmu, lmu0) if direction == "remove" else (lmu0, lmu)
        sign = 1 if direction == "remove" else -1  # log P - log Q increases (remove) in z

        def gap(z):
            return lP(z) - lQ(z) - e

        B = 400 * s + 400 * abs(e) * s * s
        glo, ghi = gap(-B), gap(B)
        if glo > 0 and ghi > 0:
            lo, hi = -mp.inf, mp.inf  # everywhere positive
            c = None
        elif glo <= 0 and ghi <= 0:
            return mpf(0)
        else:
            a, b = -B, B
            for _ in range(400):
                m = (a + b) / 2
                if (gap(m) > 0) == (sign > 0):
                    b = m
                else:
                    a = m
                if b - a < mpf(10) ** (-dps + 5) * (1 + abs(m)):
                    break
            c = (a + b) / 2
            lo, hi = (c, mp.inf) if sign > 0 else (-mp.inf, c)
        Ee = mp.exp(e)

        def f(z):
            return mp.exp(lP(z)) - Ee * mp.exp(lQ(z))

        centre = mpf(1) / 2 if c is None else c
        L0 = max(lo, min(centre, 0) - 60 * s)
        U0 = min(hi, max(centre, 1) + 60 * s)
        pts = [L0]
        step = s
        x = L0 + step
        while x < U0:
            pts.append(x)
            x += step
        pts.append(U0)
        scale = max(abs(f(z)) for z in pts[1:-1])  # the integrand is > 0 inside the set
        val = mp.quad(lambda z: f(z) / scale, pts, method="tanh-sinh")
        return val * scale


def check_closed_forms():
    worst = 0.0
    bad = []
    cases = [(0.2, 0.7), (0.03, 1.0), (0.003, 3.0), (0.2, 1.6)]
    for q, s in cases:
        lq = math.log1p(-q)
        eps_list = [-3.0, -0.5, lq - 1e-3, lq + 1e-3, -0.01, 0.0, -lq - 1e-3, -lq + 1e-3,
                    0.3, 2.0, 10.0, 40.0]
        for e in eps_list:
            with mp.workdps(50):
                qq, ss, ee = mpf(q), mpf(s), mpf(e)
                cf = {"remove": delta1_remove(qq, ss, ee), "add": delta1_add(qq, ss, ee)}
                E1 = mp.exp(ee)
                cfA = {"remove": d1_remove_h(qq, ss, E1 - 1 + qq),
                       "add": d1_add_g(qq, ss, 1 / E1 - 1 + qq, E1)}
            for d in ("remove", "add"):
                dq = d1_direct(q, s, e, d)
                for val in (cf[d], cfA[d]):
                    if dq == 0 or val == 0:
                        ok = dq == 0 and val == 0
                        rel = 0.0 if ok else math.inf
                    else:
                        rel = float(abs(val - dq) / dq)
                        ok = rel < 1e-20
                    worst = max(worst, rel)
                    if not ok:
                        bad.append((q, s, e, d, mp.nstr(val, 25), mp.nstr(dq, 25)))
    if bad:
        for b in bad:
            print("CLOSED FORM MISMATCH", b, file=sys.stderr)
        raise SystemExit(1)
    print(f"closed forms vs direct quadrature: {len(cases) * 12 * 2} cases, worst rel {worst:.2g}",
          flush=True)
    return worst


# ---------------------------------------------------------------- two steps


def _integrand(q, s, eps, direction, route):
    """f(z) = P(z) delta_1(eps - L(z)), in the route's arithmetic (mpf inputs)."""
    c = 1 / (s * mp.sqrt(2 * mp.pi))
    two_s2 = 2 * s * s
    if route in ("A", "F"):
        E = mp.exp(eps)
        if direction == "remove":
            def f(z):
                _tick()
                r = 1 - q + q * mp.exp((2 * z - 1) / two_s2)
                h = E / r - (1 - q)
                return r * c * mp.exp(-z * z / two_s2) * d1_remove_h(q, s, h)
        else:
            def f(z):
                _tick()
                r = 1 - q + q * mp.exp((2 * z - 1) / two_s2)
                e1 = E * r
                return c * mp.exp(-z * z / two_s2) * d1_add_g(q, s, 1 / e1 - (1 - q), e1)
    else:
        def logr(z):  # log(1 - q + q W(z)), both forms free of cancellation
            x = (2 * z - 1) / two_s2
            return mp.log1p(q * mp.expm1(x)) if x >= 0 else mp.log((1 - q) + q * mp.exp(x))

        if direction == "remove":
            def f(z):
                _tick()
                L = logr(z)
                return c * mp.exp(L - z * z / two_s2) * delta1_remove(q, s, eps - L)
        else:
            def f(z):
                _tick()
                L = -logr(z)
                return c * mp.exp(-z * z / two_s2) * delta1_add(q, s, eps - L)
    return f


def _special_point(q, s, eps, direction):
    """z_k (remove: eps - L = log(1-q)) or z_b (add: eps - L = -log(1-q)); None if absent.
    For add, returns ('empty', None) when delta_add = 0 exactly."""
    if q == 1:
        return None
    if direction == "remove":
        w = (mp.exp(eps) / (1 - q) - (1 - q)) / q
    else:
        w = (mp.exp(-eps) / (1 - q) - (1 - q)) / q
        if w <= 0:
            return "empty"
    if w <= 0:
        return None
    return s * s * mp.log(w) + mpf(1) / 2


def delta2(q, s, eps, direction, route):
    """Two-step delta at (q, s, eps) floats; returns (value, quad error estimate)."""
    method, dps, width, sstep, soff, D = ROUTES[route]
    with mp.workdps(dps):
        q, s, eps = mpf(q), mpf(s), mpf(eps)
        sp = _special_point(q, s, eps, direction)
        if sp == "empty":
            return mpf(0), mpf(0)
        f = _integrand(q, s, eps, direction, route)
        u_end = None if (direction == "remove" or sp is None) else sp / s
        # scan for the peak and the window, at low precision
        with mp.workdps(20):
            us = []
            k = 0
            u0 = -60 + soff
            u1 = 60 + 1 / float(s)
            while u0 + k * sstep <= u1:
                u = u0 + k * sstep
                if u_end is not None and u >= u_end:
                    break
                us.append(u)
                k += 1
            if u_end is not None:
                us.append(u_end)
            logs = []
            for u in us:
                v = f(mpf(u) * s)
                logs.append(mp.log(v) if v > 0 else -mp.inf)
        imax = max(range(len(us)), key=lambda i: logs[i])
        lmax = logs[imax]
        if lmax == -mp.inf:
            raise ArithmeticError("integrand vanishes on the scan")
        thr = lmax - D * mp.log(10)
        inside = [i for i in range(len(us)) if logs[i] >= thr]
        if inside[0] == 0 or inside[-1] == len(us) - 1:
            raise ArithmeticError("the integrand is not negligible at the scan's ends")
        ia, ib = inside[0] - 1, inside[-1] + 1
        a, b = mpf(us[ia]), mpf(us[ib])
        scale = mp.exp(lmax)
        # breakpoints in u
        pts = set()
        x = a
        while x < b:
            pts.add(x)
            x += width
        pts.add(b)
        pts.add(mpf(us[imax]))
        if sp is not None and a < sp / s <= b:  # (for add, b is z_b / s itself)
            pts.add(sp / s)
            if route != "B":  # geometric grading towards z_k / z_b, where the integrand is
                for k in range(1, 41):  # C-infinity but not analytic (GL converges slowly)
                    for x in (sp / s - mpf(2) ** -k, sp / s + mpf(2) ** -k):
                        if a < x < b:
                            pts.add(x)
        pts = sorted(pts)
        val, err = mp.quad(lambda u: f(u * s) / scale, pts, method=method, error=True)
        return val * scale * s, err * scale * s


def delta2_max(q, s, eps, route):
    r = delta2(q, s, eps, "remove", route)[0]
    a = delta2(q, s, eps, "add", route)[0]
    return max(r, a)


# ---------------------------------------------------------------- checks: q = 1


def gaussian_delta(mu, eps):
    return cdf(mu / 2 - eps / mu) - mp.exp(eps) * cdf(-mu / 2 - eps / mu)


def check_q1():
    worst = 0.0
    for s, e in ((1.0, 1.0), (1.0, 20.0), (0.7, 5.0), (3.0, 0.5)):
        for route in ("A", "B"):
            v, _ = delta2(1.0, s, e, "remove", route)
            with mp.workdps(90):
                g = gaussian_delta(mp.sqrt(2) / mpf(s), mpf(e))
                rel = float(abs(v - g) / g)
            worst = max(worst, rel)
            if not rel < 1e-25:
                print(f"Q=1 GAUSSIAN MISMATCH s={s} eps={e} route {route}: "
                      f"{mp.nstr(v, 25)} vs {mp.nstr(g, 25)}", file=sys.stderr)
                raise SystemExit(1)
    print(f"q = 1 vs Gaussian mechanism (mu = sqrt(2)/s): worst rel {worst:.2g}", flush=True)
    return worst


# ---------------------------------------------------------------- checks: add via remove


def check_add_identity():
    """For any pair, H_eps(Q||P) = 1 - e^eps + e^eps H_{-eps}(P||Q); for the two-step
    product measures: delta_add(eps) = 1 - e^eps + e^eps delta_remove(-eps).  The right side
    uses the remove integrand at negative eps, so this checks the add integrand, its
    support end z_b, and the remove side below eps = 0.  Also both routes on the add side."""
    worst = 0.0
    for q, s, e in ((0.2, 3.0, 0.2), (0.2, 0.7, 0.1), (0.03, 1.0, 0.03), (0.003, 1.6, 0.004)):
        add = {r: delta2(q, s, e, "add", r)[0] for r in ("A", "B")}
        rem = delta2(q, s, -e, "remove", "B")[0]
        with mp.workdps(70):
            E = mp.exp(mpf(e))
            other = 1 - E + E * rem
            rels = [abs(add["A"] - other) / other, abs(add["B"] - other) / other,
                    abs(add["A"] - add["B"]) / add["B"]]
        rel = float(max(rels))
        worst = max(worst, rel)
        if not (add["A"] > 0 and rel < 1e-30):
            print(f"ADD/REMOVE IDENTITY MISMATCH q={q} s={s} eps={e}: {mp.nstr(add['A'], 25)}, "
                  f"{mp.nstr(add['B'], 25)} vs {mp.nstr(other, 25)}", file=sys.stderr)
            raise SystemExit(1)
    print(f"two-step add vs 1 - e^eps + e^eps remove(-eps), and A vs B on add: worst rel "
          f"{worst:.2g}", flush=True)
    return worst


# ---------------------------------------------------------------- root finding


def solve_eps(q, s, target):
    """eps with log delta_max(eps) = log target (route F), or None with a reason."""
    lt = math.log(target)

    def F(e):
        with mp.workdps(20):
            v = delta2_max(q, s, e, "F")
            return float(mp.log(v)) - lt if v > 0 else -math.inf

    f0 = F(0.0)
    if f0 <= 0:
        return None, "delta(0) <= target"
    lo, flo = 0.0, f0
    hi = 1.0
    fhi = F(hi)
    while fhi > 0:
        lo, flo = hi, fhi
        hi *= 2
        if lo > EPS_MAX:
            return None, "eps > 200"
        fhi = F(hi)
    # Illinois on [lo, hi], flo > 0 >= fhi
    side = 0
    for _ in range(200):
        x = hi - fhi * (hi - lo) / (fhi - flo) if math.isfinite(fhi) else (lo + hi) / 2
        if not (lo < x < hi):
            x = (lo + hi) / 2
        fx = F(x)
        if abs(fx) < 1e-12 or hi - lo < 1e-14 * hi:
            return x, None
        if fx > 0:
            lo, flo = x, fx
            if side == -1:
                fhi /= 2
            side = -1
        else:
            hi, fhi = x, fx
            if side == 1:
                flo /= 2
            side = 1
    return None, "root finding did not converge"


# ---------------------------------------------------------------- main


def main() -> int:
    t_start = time.monotonic()
    check_closed_forms()
    check_q1()
    check_add_identity()
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "two_step_small_delta.csv")
    rows = []
    worst = mpf(0)
    worst_at = None
    row_id = -1
    for s in GRID_SIGMA:
        for q in GRID_Q:
            for target in GRID_DELTA:
                row_id += 1
                t0 = time.monotonic()
                _DEADLINE[0] = t0 + POINT_SECONDS
                tag = f"row {row_id} (sigma={s}, q={q}, target={target})"
                try:
                    e, why = solve_eps(q, s, target)
                    if e is None:
                        print(f"WARNING {tag} skipped: {why}", file=sys.stderr, flush=True)
                        continue
                    eps = float(f"{e:.6g}")
                    if eps > EPS_MAX:
                        print(f"WARNING {tag} skipped: eps > 200", file=sys.stderr, flush=True)
                        continue
                    vals = {}
                    dis = mpf(0)
                    for d in ("remove", "add"):
                        va, _ = delta2(q, s, eps, d, "A")
                        vb, _ = delta2(q, s, eps, d, "B")
                        if va == 0 or vb == 0:
                            if not (va == 0 and vb == 0):
                                raise ArithmeticError(f"{d}: one route gives 0")
                            rel = mpf(0)
                        else:
                            with mp.workdps(70):
                                rel = abs(va - vb) / abs(vb)
                        dis = max(dis, rel)
                        vals[d] = va
                except PointTimeout:
                    print(f"WARNING {tag} dropped: over {POINT_SECONDS:.0f} s", file=sys.stderr,
                          flush=True)
                    continue
                except (ArithmeticError, ValueError, ZeroDivisionError) as exc:
                    print(f"WARNING {tag} dropped: {exc!r}", file=sys.stderr, flush=True)
                    continue
                finally:
                    _DEADLINE[0] = math.inf
                if not dis < AGREE:
                    print(f"WARNING {tag} dropped: routes disagree by {mp.nstr(dis, 3)}",
                          file=sys.stderr, flush=True)
                    continue
                if dis > worst:
                    worst, worst_at = dis, row_id
                vmax = max(vals["remove"], vals["add"])
                rows.append([row_id, repr(s), repr(q), STEPS, repr(eps),
                             mp.nstr(vals["remove"], 30), mp.nstr(vals["add"], 30),
                             mp.nstr(vmax, 30)])
                print(f"{tag}: eps={eps!r} delta_max={mp.nstr(vmax, 12)} "
                      f"routes {mp.nstr(dis, 2)} ({time.monotonic() - t0:.1f} s)", flush=True)
    with open(out, "w", newline="") as fh:
        fh.write("# generated by tests/reference/make_two_step_small_delta.py\n")
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["row_id", "sigma", "q", "steps", "eps", "delta_remove", "delta_add",
                    "delta_max"])
        w.writerows(rows)
    print(f"wrote {len(rows)} rows to {out}; worst route disagreement {mp.nstr(worst, 3)} "
          f"(row {worst_at}); {time.monotonic() - t_start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
