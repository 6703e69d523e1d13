#!/usr/bin/env python3
"""Reference table for the one-step hockey-stick divergence of the Poisson-subsampled Gaussian.

Writes ``analysis_one_step.csv`` (next to this script), one row per (q, sigma, epsilon):

  delta_remove = int max(0, mu(z) - e^eps mu0(z)) dz      (P = mu,  Q = mu0)
  delta_add    = int max(0, mu0(z) - e^eps mu(z)) dz      (P = mu0, Q = mu)

with mu0 = N(0, s^2), mu = (1 - q) N(0, s^2) + q N(1, s^2) (sensitivity 1).

Method: QUADRATURE of the definition at mp.dps = 50. The likelihood ratio mu/mu0 is monotone
in z, so the positive part is a half-line; its end is found by bisection on the privacy loss
(no closed-form inverse is used), and the integrand P - e^eps Q is integrated by mpmath.quad
over breakpoints on geometric scales around that end. Every value is cross-checked against
the closed forms (Eq. (45) of Räisä, Jälkö & Honkela, ICML 2024, for remove; the
corresponding formula for add, see sgmfast/_kernels/analysis.py) evaluated in mpmath; the
script stops if they differ by more than 1e-25 relative. Inputs are the exact binary values
of the float64 numbers printed in the CSV.

Run from the repository root:  python tests/reference/make_analysis.py
"""

import multiprocessing
import os
import sys

import mpmath
from mpmath import mp, mpf

DPS = 50
DIGITS = 30
AGREE = mpf("1e-25")
WORKERS = 2

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "analysis_one_step.csv")

Q_GRID = [1e-6, 1e-3, 0.01, 0.1, 0.5, 0.9, 1.0]
SIGMA_GRID = [0.4, 0.8, 1.0, 2.0, 10.0]
EPS_GRID = [0.0, 0.01, 0.1, 1.0, 2.0, 4.0, 8.0]


def _scaled_densities(q, s, z0):
    """(mu0, mu) divided by the constant S = N(z0; 0, s^2), and S itself.

    mpmath.quad loses digits on integrands of magnitude ~1e-10000 (its node sums are not
    scale-free), so the integrand is scaled to O(1) near the end of the half-line; the
    exponent differences are formed as products (z - z0)(z + z0) to keep them exact.
    """
    two_s2 = 2 * s * s
    scale = mp.exp(-z0 * z0 / two_s2) / (s * mp.sqrt(2 * mp.pi))

    def mu0(z):
        return mp.exp(-(z - z0) * (z + z0) / two_s2)

    def mu(z):
        return (1 - q) * mu0(z) + q * mp.exp(-((z - 1) - z0) * ((z - 1) + z0) / two_s2)

    return mu0, mu, scale


def _loss(q, s, z):
    """log(mu(z)/mu0(z)), increasing in z."""
    return mp.log((1 - q) + q * mp.exp((2 * z - 1) / (2 * s * s)))


def _crossing(q, s, level):
    """z with loss(z) = level by bisection, or None if the loss never reaches level."""
    lo, hi = mpf(-1), mpf(1)
    if q < 1 and level <= mp.log(1 - q):
        return None
    while _loss(q, s, lo) > level:
        lo *= 2
    while _loss(q, s, hi) < level:
        hi *= 2
    for _ in range(400):
        mid = (lo + hi) / 2
        if _loss(q, s, mid) < level:
            lo = mid
        else:
            hi = mid
        if hi - lo < mpf(10) ** (-DPS + 5) * (1 + abs(mid)):
            break
    return (lo + hi) / 2


def _half_line(f, z0, s, sign):
    """int of f over [z0, inf) (sign=+1) or (-inf, z0] (sign=-1) on geometric breakpoints."""
    # Natural width: s far from the tails, s^2/|z0| where the Gaussian factor decays fast.
    w = min(s, s * s / max(abs(z0), abs(z0 - 1)))
    scales = [mpf(2) ** k for k in range(-12, 13)]
    pts = [z0] + [z0 + sign * w * c for c in scales]
    if sign > 0:
        pts.append(mp.inf)
    else:
        pts = [-mp.inf] + pts[::-1]
    return mp.quad(f, pts, maxdegree=10)


def _quad_remove(q, s, eps):
    z0 = _crossing(q, s, eps)
    if z0 is None:  # cannot happen for eps >= 0 but kept for completeness
        return mpf(0)
    mu0, mu, scale = _scaled_densities(q, s, z0)
    ee = mp.exp(eps)
    return scale * _half_line(lambda z: mu(z) - ee * mu0(z), z0, s, +1)


def _quad_add(q, s, eps):
    z0 = _crossing(q, s, -eps)  # mu0 > e^eps mu  <=>  loss(z) < -eps
    if z0 is None:
        return mpf(0)
    mu0, mu, scale = _scaled_densities(q, s, z0)
    ee = mp.exp(eps)
    return scale * _half_line(lambda z: mu0(z) - ee * mu(z), z0, s, -1)


def _closed_remove(q, s, eps):
    h = mp.expm1(eps) + q
    L = mp.log(h / q)
    return q * mp.ncdf(-(s * L - 1 / (2 * s))) - h * mp.ncdf(-(s * L + 1 / (2 * s)))


def _closed_add(q, s, eps):
    g = mp.exp(-eps) - 1 + q
    if g <= 0:
        return mpf(0)
    zp = s * s * mp.log(g / q) + mpf(1) / 2
    return mp.ncdf(zp / s) - mp.exp(eps) * ((1 - q) * mp.ncdf(zp / s) + q * mp.ncdf((zp - 1) / s))


def _agree(a, b):
    if a == 0 or b == 0:
        return a == b
    return abs(a - b) <= AGREE * abs(a)


def _row(args):
    i, qf, sf, ef = args
    mp.dps = DPS
    q, s, eps = mpf(qf), mpf(sf), mpf(ef)
    dr = _quad_remove(q, s, eps)
    da = _quad_add(q, s, eps)
    cr = _closed_remove(q, s, eps)
    ca = _closed_add(q, s, eps)
    problems = []
    if not _agree(dr, cr):
        problems.append(f"remove: quad {mpmath.nstr(dr, 20)} vs closed {mpmath.nstr(cr, 20)}")
    if not _agree(da, ca):
        problems.append(f"add: quad {mpmath.nstr(da, 20)} vs closed {mpmath.nstr(ca, 20)}")
    return i, qf, sf, ef, mpmath.nstr(dr, DIGITS), mpmath.nstr(da, DIGITS), problems


def main():
    jobs = []
    i = 0
    for qf in Q_GRID:
        for sf in SIGMA_GRID:
            for ef in EPS_GRID:
                jobs.append((i, qf, sf, ef))
                i += 1
    with multiprocessing.Pool(WORKERS) as pool:
        rows = sorted(pool.map(_row, jobs))
    bad = [(r[0], p) for r in rows for p in r[6]]
    for rid, p in bad:
        print(f"row {rid}: {p}", file=sys.stderr)
    if bad:
        sys.exit("quadrature and closed form disagree; table not written")
    with open(OUT, "w") as fh:
        fh.write(f"# made by tests/reference/make_analysis.py; mpmath {mpmath.__version__}, dps={DPS};"
                 f" quadrature of the hockey-stick divergence, cross-checked against closed forms"
                 f" to {mpmath.nstr(AGREE, 3)} relative\n")
        fh.write("row_id,q,sigma,epsilon,delta_remove,delta_add\n")
        for rid, qf, sf, ef, dr, da, _ in rows:
            fh.write(f"{rid},{qf!r},{sf!r},{ef!r},{dr},{da}\n")
    print(f"wrote {len(rows)} rows to {OUT}")


if __name__ == "__main__":
    main()
