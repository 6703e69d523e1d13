#!/usr/bin/env python3
"""Reference table: hockey-stick divergence of one shuffled epoch with t = 2 batches (Chua et al.'s pair).

Writes (next to this script) shuffle_pair_exact.csv. Uses mpmath (and scipy for one brute-force
check) only; it does not import sgmfast, so the table is independent of the code it checks.

Mechanism (Chua, Ghazi, Kamath, Kumar, Manurangsi, Sinha, Zhang, "How private are DP-SGD
implementations?", ICML 2024): one epoch of DP-SGD, permutation shuffle into t = 2 batches, unit
clipping, noise std sigma per step. Every other example's gradient is -1, the target's is +1 and
the neighbour replaces it by a record with gradient c_Q. After removing the known constant the
two outputs on R^2 are mixtures over the target's batch j (uniform in {1, 2}):
    P = (1/2) sum_j N(a e_j, sigma^2 I),   Q = (1/2) sum_j N(b e_j, sigma^2 I)
    zero_out:    (a, b) = (2, 1)   (target -> zero-gradient record)
    replace_one: (a, b) = (2, 0)   (target -> a copy of a -1 record; Q = N(0, sigma^2 I))
delta(eps) = max(H_eps(P||Q), H_eps(Q||P)),  H_eps(P||Q) = int (p - e^eps q)_+,
eps(delta) = smallest eps >= 0 with delta(eps) <= delta.

Reduction to one integral. Work in units of sigma: A = a/sigma, B = b/sigma, y ~ N(A e_j, I).
Rotate: u = y1 + y2, v = y1 - y2. Under component j = 1, u ~ N(A, 2) and v ~ N(A, 2),
independent; under j = 2, u ~ N(A, 2), v ~ N(-A, 2). So u is independent of j and
    p(u, v) = phi2(u - A) m_A(v),   m_c(v) = (phi2(v - c) + phi2(v + c)) / 2,
with phi2 the N(0, 2) density (equivalently p dy = (1/2)(1/2pi) e^{-(u^2+v^2)/4}
e^{-A^2/2 + A u/2} cosh(A v/2) du dv, which the script integrates to 1 numerically).
Because log p/q = (A - B) u/2 - (A^2 - B^2)/2 + lc(A v/2) - lc(B v/2), lc = log cosh, for fixed v
and A > B the set {p > e^eps q} is the half-line u > u1(v) and {q > e^eps p} is u < u2(v):
    u1(v) = ( 2 eps + A^2 - B^2 + 2 lc(B v/2) - 2 lc(A v/2)) / (A - B)
    u2(v) = (-2 eps + A^2 - B^2 + 2 lc(B v/2) - 2 lc(A v/2)) / (A - B)
so, with Sbar/Phi the standard normal survival function/CDF (via erfc),
    H_eps(P||Q) = int dv [ m_A(v) Sbar((u1 - A)/sqrt2) - e^eps m_B(v) Sbar((u1 - B)/sqrt2) ]
    H_eps(Q||P) = int dv [ m_B(v) Phi ((u2 - B)/sqrt2) - e^eps m_A(v) Phi ((u2 - A)/sqrt2) ]
The integrands are smooth (analytic) and even in v: 2 * int_0^inf. For small delta their mass
sits far out in v (v ~ 16 at sigma = 4, eps = 4), so the v-range is found per call: the integrand
is scanned on a 0.5 grid until it has dropped by e^-110 past its maximum, and the pieces
[3k, 3k + 3] where it is not negligible are each integrated by Gauss-Legendre with 48 nodes at
mp.dps = 40. Every table value (both directions of each delta row, the dominant direction at
each eps root) is recomputed by mpmath's adaptive tanh-sinh at dps = 50 on the same pieces, with
the integrand scaled to O(1); the delta rows must agree to 1e-25 relative (worst seen 4.6e-35).

Checks (printed, and asserted):
  * masses: the (u, v) density equals (1/2) p_y pointwise, equals phi2(u - c) m_c(v), and
    integrates to 1 (product of two 1-D mpmath quadratures) for P and Q at every sigma;
  * regions: on a 20 x 20 grid of y, sign(p - e^eps q) agrees with u > u1(v) and
    sign(q - e^eps p) with u < u2(v) (points exactly on the boundary are skipped);
  * flip: H_eps(P||Q) = 1 - e^eps + e^eps H_{-eps}(Q||P) and P <-> Q (a bookkeeping check of the
    two formulas; it holds for any complementary sets, so it does not test the choice of set);
  * brute force: scipy nquad of (p - e^eps q)_+ and (q - e^eps p)_+ straight from the y-space
    densities at two points (zero_out sigma = 1 eps = 1, replace_one sigma = 0.5 eps = 2),
    |difference| < 1e-8 (seen: 1e-12);
  * bounds: delta_G(eps; (A-B)/sqrt2) <= delta(eps) <= delta_G(eps; A-B) on every row, with
    delta_G(eps; mu) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2): the upper bound is
    joint convexity (each component pair N(A e_j), N(B e_j) is a Gaussian mechanism of
    mu = A - B), the lower bound is data processing (u = y1 + y2 has N(A,2) vs N(B,2)).
eps(delta): safeguarded Newton on log H(eps) = log delta for the dominant direction (the
derivative -e^eps Q(region) comes from the same quadrature), started at eps_G(delta; A - B) >= the
root, with bisection fallback; at the root the other direction must be smaller, and the
tanh-sinh value gives an error bound |log H - log delta| / |d log H / d eps| (asserted < 1e-12;
worst seen 5e-40). In every row the dominant direction turned out to be H(P||Q).

Runtime: about 4.6 min wall (2 worker processes, on a 2-core machine with load ~3.5).

Run from the repository root:  python tests/reference/make_shuffle_pair.py
"""

from __future__ import annotations

import multiprocessing
import os
import sys

import mpmath as mp
from mpmath import mpf

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "shuffle_pair_exact.csv")

DPS = 40
WORKERS = 2
T = 2
RELATIONS = {"zero_out": (2, 1), "replace_one": (2, 0)}
SIGMAS = [0.5, 0.8, 1.0, 1.5, 2.0, 4.0]
EPSILONS = [0.5, 1.0, 2.0, 4.0]
DELTAS = [1e-3, 1e-5, 1e-8]

mp.mp.dps = DPS


# ---------------------------------------------------------------- formulas
def sbar(x):
    return mp.erfc(x / mp.sqrt(2)) / 2


def phi_cdf(x):
    return mp.erfc(-x / mp.sqrt(2)) / 2


def logcosh_shift(x):
    """log cosh(x) + log 2 (the log 2 cancels in the differences used below)."""
    x = abs(x)
    return x + mp.log1p(mp.exp(-2 * x))


def phi2(x):
    """N(0, 2) density."""
    return mp.exp(-x * x / 4) / mp.sqrt(4 * mp.pi)


def m(c, v):
    return (phi2(v - c) + phi2(v + c)) / 2


_GL_CACHE = {}


def _gl_nodes(degree):
    """Gauss-Legendre nodes/weights on [-1, 1] (3 * 2^(degree-1) nodes) at the working precision."""
    key = (degree, mp.mp.prec)
    if key not in _GL_CACHE:
        gl = mp.calculus.quadrature.GaussLegendre(mp.mp)
        _GL_CACHE[key] = gl.calc_nodes(degree, mp.mp.prec)
    return _GL_CACHE[key]


def _integrand(A, B, eps, direction):
    """v -> (t1, t2) with H = int_0^inf 2 (t1 - t2) dv and dH/deps = -int_0^inf 2 t2 dv."""
    eps = mpf(eps)
    ee = mp.exp(eps)
    c0 = A * A - B * B
    r2 = 1 / mp.sqrt(2)
    if direction == "PQ":
        def f(v):
            u1 = (2 * eps + c0 + 2 * logcosh_shift(B * v / 2) - 2 * logcosh_shift(A * v / 2)) / (A - B)
            return m(A, v) * sbar((u1 - A) * r2), ee * m(B, v) * sbar((u1 - B) * r2)
    else:
        def f(v):
            u2 = (-2 * eps + c0 + 2 * logcosh_shift(B * v / 2) - 2 * logcosh_shift(A * v / 2)) / (A - B)
            return m(B, v) * phi_cdf((u2 - B) * r2), ee * m(A, v) * phi_cdf((u2 - A) * r2)
    return f


PIECE = 3  # length of the Gauss-Legendre pieces in v
SCAN = mpf("0.5")  # step of the scan that finds where the integrand lives
DROP = 110  # pieces whose scanned integrand stays below e^-DROP times its maximum are left out


def _pieces(f, A):
    """Runs of consecutive [k PIECE, (k+1) PIECE] on which the integrand is not negligible.

    The integrand (>= 0, smooth, Gaussian-like tails in v) is scanned on a 0.5 grid until it has
    dropped by e^-DROP past its maximum; for small delta its mass sits far out in v (e.g. v ~ 16 at
    sigma = 4, eps = 4), so fixed breakpoints are not enough."""
    logs = []
    v = mpf(0)
    best = -mp.inf
    while True:
        t1, t2 = f(v)
        d = t1 - t2
        lg = mp.log(d) if d > 0 else -mp.inf
        logs.append((v, lg))
        best = max(best, lg)
        if v >= A + 3 and lg < best - DROP and logs[-2][1] > lg:
            break
        assert v < 400, "integrand does not decay"
        v += SCAN
    nk = int(mp.ceil(v / PIECE))
    keep = [False] * nk
    for vv, lg in logs:
        k = min(int(vv / PIECE), nk - 1)
        if lg >= best - DROP:
            keep[k] = True
            if vv == k * PIECE and k > 0:
                keep[k - 1] = True
    runs, cur = [], None
    for k in range(nk):
        if keep[k]:
            if cur is None:
                cur = [mpf(k * PIECE)]
            cur.append(mpf((k + 1) * PIECE))
        elif cur is not None:
            runs.append(cur)
            cur = None
    if cur is not None:
        runs.append(cur)
    return runs, best


def h_terms(A, B, eps, direction, method="gl", degree=5):
    """(H, dH/deps) for H = H_eps(P||Q) (direction 'PQ') or H_eps(Q||P) ('QP'), A > B >= 0 in
    units of sigma. method 'gl': fixed Gauss-Legendre, 3*2^(degree-1) = 48 nodes per piece of length 3;
    'tanh-sinh': mpmath's adaptive quad on the same pieces (the independent check; H only)."""
    f = _integrand(A, B, eps, direction)
    runs, best = _pieces(f, A)
    if method != "gl":
        # mpmath's quad stops at an absolute error ~ 10^-dps: scale the integrand to O(1)
        scale = mp.exp(best)
        h = mp.fsum(mp.quad(lambda v: (lambda t: (t[0] - t[1]) / scale)(f(v)), run, method=method)
                    for run in runs)
        return 2 * h * scale, None
    nodes = _gl_nodes(degree)
    sd, s2 = [], []
    for run in runs:
        for lo, hi in zip(run[:-1], run[1:]):
            half, mid = (hi - lo) / 2, (hi + lo) / 2
            for x, w in nodes:
                t1, t2 = f(mid + half * x)
                sd.append(half * w * (t1 - t2))
                s2.append(half * w * t2)
    return 2 * mp.fsum(sd), -2 * mp.fsum(s2)


def h_pq(A, B, eps, method="gl"):
    return h_terms(A, B, eps, "PQ", method)[0]


def h_qp(A, B, eps, method="gl"):
    return h_terms(A, B, eps, "QP", method)[0]


def delta_pair(A, B, eps, method="gl"):
    return max(h_pq(A, B, eps, method), h_qp(A, B, eps, method))


def delta_gauss(eps, mu):
    eps = mpf(eps)
    return phi_cdf(-eps / mu + mu / 2) - mp.exp(eps) * phi_cdf(-eps / mu - mu / 2)


def eps_gauss(delta, mu):
    lo, hi = mpf(0), mpf(1)
    while delta_gauss(hi, mu) > delta:
        lo, hi = hi, 2 * hi
    return mp.findroot(lambda e: mp.log(delta_gauss(e, mu)) - mp.log(delta), (lo, hi), solver="anderson")


def units(rel, sigma):
    a, b = RELATIONS[rel]
    s = mpf(sigma)
    return mpf(a) / s, mpf(b) / s


# ---------------------------------------------------------------- checks
def check_masses():
    """The (u, v) density as derived from y-space must (1) equal (1/2) p_y(y1, y2) pointwise
    (Jacobian of u = y1 + y2, v = y1 - y2 is 2), (2) equal the factorised form phi2(u - c) m_c(v)
    used by the formulas, and (3) integrate to 1. The raw (u, v) form is a product of a u-part and
    a v-part, so (3) is a product of two 1-D quadratures; m_c is also checked to integrate to 1."""
    worst_pt, worst_mass = mpf(0), mpf(0)
    for rel in RELATIONS:
        for sigma in SIGMAS:
            A, B = units(rel, sigma)
            for c in (A, B):
                def raw(u, v):
                    return (mp.exp(-(u * u + v * v) / 4 - c * c / 2 + c * u / 2) * mp.cosh(c * v / 2)
                            / (4 * mp.pi))

                def py(y1, y2):
                    return (mp.exp(-((y1 - c) ** 2 + y2 ** 2) / 2) + mp.exp(-(y1 ** 2 + (y2 - c) ** 2) / 2)) / (4 * mp.pi)

                for y1, y2 in ((mpf("0.3"), mpf("-1.7")), (mpf(2), mpf("2.5")), (mpf(-3), mpf("0.25"))):
                    u, v = y1 + y2, y1 - y2
                    ref = py(y1, y2) / 2
                    worst_pt = max(worst_pt, abs(raw(u, v) - ref) / ref, abs(phi2(u - c) * m(c, v) - ref) / ref)
                iu = mp.quad(lambda u: mp.exp(-u * u / 4 + c * u / 2), [-mp.inf, c, mp.inf])
                iv = mp.quad(lambda v: mp.exp(-v * v / 4) * mp.cosh(c * v / 2), [-mp.inf, -c, 0, c, mp.inf])
                tot = iu * iv * mp.exp(-c * c / 2) / (4 * mp.pi)
                tm = mp.quad(lambda v: m(c, v), [-mp.inf, -c, 0, c, mp.inf])
                worst_mass = max(worst_mass, abs(tot - 1), abs(tm - 1))
    print(f"[mass] change of variables, worst pointwise relative error: {mp.nstr(worst_pt, 3)}; "
          f"worst |total mass - 1| of P and Q (all relations, sigmas): {mp.nstr(worst_mass, 3)}")
    assert worst_pt < mpf("1e-35") and worst_mass < mpf("1e-30"), (worst_pt, worst_mass)


def check_regions():
    """(1) The half-lines: at 400 points (y1, y2) of a grid, for several eps and both relations,
    sign(p - e^eps q) from the y-space densities equals [u > u1(v)] and sign(q - e^eps p) equals
    [u < u2(v)]. (2) The two formulas' bookkeeping: H_eps(P||Q) = 1 - e^eps + e^eps H_-eps(Q||P)
    and the same with P, Q swapped (this holds for any pair of complementary sets, so it checks
    the normal-CDF algebra, not the choice of set; (1) and the brute force check that)."""
    bad, ties = 0, 0
    grid = [mpf(k) / 4 for k in range(-20, 60, 4)]
    for rel in RELATIONS:
        for sigma in (0.5, 1.0, 4.0):
            A, B = units(rel, sigma)
            for eps in (mpf("0.1"), mpf(1), mpf(4)):
                ee = mp.exp(eps)
                c0 = A * A - B * B
                for y1 in grid:
                    for y2 in grid:
                        def py(c):
                            return mp.exp(-((y1 - c) ** 2 + y2 ** 2) / 2) + mp.exp(-(y1 ** 2 + (y2 - c) ** 2) / 2)
                        p, q = py(A), py(B)
                        u, v = y1 + y2, y1 - y2
                        lcd = 2 * logcosh_shift(B * v / 2) - 2 * logcosh_shift(A * v / 2)
                        u1 = (2 * eps + c0 + lcd) / (A - B)
                        u2 = (-2 * eps + c0 + lcd) / (A - B)
                        # a grid point can lie exactly on the boundary (then p - e^eps q is
                        # rounding noise): count those as ties, not as tests
                        tiny = mpf(10) ** (-DPS + 10)
                        for diff, inside, edge in ((p - ee * q, u > u1, u - u1), (q - ee * p, u < u2, u - u2)):
                            if abs(edge) < tiny:
                                ties += 1
                            else:
                                bad += (diff > 0) != inside
    print(f"[regions] sign(p - e^eps q) vs u > u1(v) and sign(q - e^eps p) vs u < u2(v): "
          f"{bad} mismatches in {2 * 2 * 3 * 3 * len(grid) ** 2 - ties} comparisons ({ties} points exactly "
          f"on a boundary skipped)")
    assert bad == 0
    worst = mpf(0)
    for rel in RELATIONS:
        A, B = units(rel, 1.0)
        for eps in (mpf("0.3"), mpf(3)):
            ee = mp.exp(eps)
            hp, hq = h_pq(A, B, eps), h_qp(A, B, eps)
            worst = max(worst, abs(hp - (1 - ee + ee * h_qp(A, B, -eps))) / hp,
                        abs(hq - (1 - ee + ee * h_pq(A, B, -eps))) / hq)
    print(f"[flip] worst relative |H_e(P||Q) - (1 - e^e + e^e H_-e(Q||P))| (and Q<->P): {mp.nstr(worst, 3)}")
    assert worst < mpf("1e-20"), worst  # the cancellation 1 - e^eps + ... costs digits


def check_brute_force_quiet():
    """scipy nquad of (p - e^eps q)_+ and (q - e^eps p)_+ straight from the y-space densities on
    [-9, A + 9]^2 (the rest is below 1e-17). It knows nothing of the half-lines, but it needs
    breakpoints (every 0.25 inside, 0.5 outside): for fixed y1 the set {q > e^eps p} is a bounded
    y2-interval that an unaided inner quad can miss (it then returns 0 and the total was 7.5e-6 low)."""
    import warnings

    import numpy as np
    from scipy import integrate

    worst, out = 0.0, []
    for rel, sigma, eps in (("zero_out", 1.0, 1.0), ("replace_one", 0.5, 2.0)):
        a, b = RELATIONS[rel]
        A, B = a / sigma, b / sigma
        ee = np.exp(eps)

        def g(y2, y1, c):
            return 0.5 * (np.exp(-((y1 - c) ** 2 + y2 ** 2) / 2) + np.exp(-(y1 ** 2 + (y2 - c) ** 2) / 2)) / (2 * np.pi)

        def f_pq(y2, y1):
            return max(g(y2, y1, A) - ee * g(y2, y1, B), 0.0)

        def f_qp(y2, y1):
            return max(g(y2, y1, B) - ee * g(y2, y1, A), 0.0)

        lo, hi = -9.0, A + 9.0
        o_in = {"limit": 400, "epsabs": 1e-14, "epsrel": 1e-13, "points": np.arange(lo + 0.25, hi, 0.25)}
        o_out = {"limit": 400, "epsabs": 1e-13, "epsrel": 1e-12, "points": np.arange(lo + 0.5, hi, 0.5)}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", integrate.IntegrationWarning)
            bf_pq = integrate.nquad(f_pq, [[lo, hi], [lo, hi]], opts=[o_in, o_out])[0]
            bf_qp = integrate.nquad(f_qp, [[lo, hi], [lo, hi]], opts=[o_in, o_out])[0]
        Am, Bm = units(rel, sigma)
        mp_pq, mp_qp = h_pq(Am, Bm, eps), h_qp(Am, Bm, eps)
        d1, d2 = abs(bf_pq - float(mp_pq)), abs(bf_qp - float(mp_qp))
        worst = max(worst, d1, d2)
        out.append(f"[brute] {rel} sigma={sigma} eps={eps}: H(P||Q) mp={mp.nstr(mp_pq, 17)} scipy={bf_pq!r} "
                   f"|diff|={d1:.1e};  H(Q||P) mp={mp.nstr(mp_qp, 17)} scipy={bf_qp!r} |diff|={d2:.1e}")
    out.append(f"[brute] worst absolute difference: {worst:.2e}")
    assert worst < 1e-8, "\n".join(out)
    return "\n".join(out)


# ---------------------------------------------------------------- values
def checked_delta(A, B, eps):
    """delta(eps) = max of the two directions (Gauss-Legendre, 48 nodes a piece, DPS digits), each
    direction re-done by tanh-sinh at DPS + 10 digits; returns (delta, dominant direction,
    worst relative disagreement)."""
    hp, hq = h_pq(A, B, eps), h_qp(A, B, eps)
    with mp.workdps(DPS + 10):
        hp2, hq2 = h_pq(A, B, eps, "tanh-sinh"), h_qp(A, B, eps, "tanh-sinh")
    rel = max(abs(hp - hp2) / hp, abs(hq - hq2) / hq)
    assert rel < mpf("1e-25"), (A, B, eps, hp, hp2, hq, hq2)
    return (hp, "PQ", rel) if hp >= hq else (hq, "QP", rel)


def solve_eps(A, B, delta):
    """Smallest eps >= 0 with delta(eps) <= delta, and a bound on its error.

    Safeguarded Newton on log H(eps) = log delta for the dominant direction (dH/deps = -e^eps times
    the other distribution's mass of the region, from the same quadrature), started at the
    Gaussian-mechanism eps_G(delta; A - B), an upper bound of the root; bisection fallback in
    [lo, hi]. At the root the dominant direction is recomputed by tanh-sinh (DPS + 10 digits) and
    |log H(root) - log delta| / |d log H / d eps| bounds the root's error; the other direction
    must be smaller there."""
    target = mpf(delta)
    # at eps = 0 both directions equal the total variation distance
    if h_pq(A, B, 0) <= target:
        return mpf(0), mpf(0), None
    hi = eps_gauss(target, A - B)
    lo = mpf(0)
    hp, hq = h_pq(A, B, hi), h_qp(A, B, hi)
    assert max(hp, hq) <= target * (1 + mpf("1e-30"))
    direction = "PQ" if hp >= hq else "QP"
    e = hi
    for _ in range(60):
        h, dh = h_terms(A, B, e, direction)
        g = mp.log(h) - mp.log(target)
        if g > 0:
            lo = max(lo, e)
        else:
            hi = min(hi, e)
        step = g / (dh / h)
        if abs(step) < mpf("1e-28"):
            e -= step
            break
        e_new = e - step
        if not (lo < e_new < hi):
            e_new = (lo + hi) / 2
        e = e_new
    else:
        raise RuntimeError("no convergence")
    with mp.workdps(DPS + 10):
        dom = h_terms(A, B, e, direction, "tanh-sinh")[0]
    other = h_terms(A, B, e, "QP" if direction == "PQ" else "PQ")[0]
    assert other < dom, (A, B, delta, dom, other)
    _, dh = h_terms(A, B, e, direction)
    err = abs(mp.log(dom) - mp.log(target)) / abs(dh / dom)
    assert err < mpf("1e-12"), (A, B, delta, e, err)
    return e, err, direction


def table_block(task):
    """All rows of one (relation, sigma): (rows, log lines, worst quad disagreement, worst root
    error bound, bound violations)."""
    rel, sigma = task
    A, B = units(rel, sigma)
    mu = A - B
    rows, log = [], []
    worst_quad, worst_root, violations = mpf(0), mpf(0), 0
    for eps in EPSILONS:
        d, dom, rq = checked_delta(A, B, eps)
        worst_quad = max(worst_quad, rq)
        glo, ghi = delta_gauss(eps, mu / mp.sqrt(2)), delta_gauss(eps, mu)
        if not (glo <= d <= ghi):
            violations += 1
            log.append(f"BOUND VIOLATED {rel} sigma={sigma} eps={eps}: {glo} {d} {ghi}")
        rows.append((rel, sigma, "delta", repr(eps), mp.nstr(d, 17)))
        log.append(f"{rel:12s} sigma={sigma:<4} eps={eps:<4} delta={mp.nstr(d, 17):24s} ({dom}) "
                   f"[G(mu/sqrt2) {mp.nstr(glo, 8)}, G(mu={mp.nstr(mu, 4)}) {mp.nstr(ghi, 8)}]")
    for delta in DELTAS:
        e, err, dom = solve_eps(A, B, delta)
        worst_root = max(worst_root, err)
        elo, ehi = eps_gauss(mpf(delta), mu / mp.sqrt(2)), eps_gauss(mpf(delta), mu)
        if e > 0 and not (elo <= e <= ehi):
            violations += 1
            log.append(f"BOUND VIOLATED {rel} sigma={sigma} delta={delta}: {elo} {e} {ehi}")
        estr = "0.0" if e == 0 else mp.nstr(e, 17)
        rows.append((rel, sigma, "epsilon", estr, repr(delta)))
        log.append(f"{rel:12s} sigma={sigma:<4} delta={delta:<6} eps={estr:24s} ({dom}) "
                   f"[G(mu/sqrt2) {mp.nstr(elo, 10)}, G(mu={mp.nstr(mu, 4)}) {mp.nstr(ehi, 10)}]")
    return rows, log, worst_quad, worst_root, violations


def main():
    tasks = [(rel, sigma) for rel in RELATIONS for sigma in SIGMAS]
    # two worker processes: the brute-force check runs beside the table, the rest after it
    with multiprocessing.Pool(WORKERS) as pool:
        brute = pool.apply_async(check_brute_force_quiet)
        blocks = pool.map_async(table_block, tasks, chunksize=1)
        check_masses()
        check_regions()
        print(brute.get())
        print("checks done", flush=True)
        blocks = blocks.get()

    rows = []
    worst_quad, worst_root, violations = mpf(0), mpf(0), 0
    for r, log, wq, wr, nv in blocks:
        rows += r
        print("\n".join(log))
        worst_quad, worst_root, violations = max(worst_quad, wq), max(worst_root, wr), violations + nv
    print(f"[bounds] delta_G(mu/sqrt2) <= delta_pair <= delta_G(mu) (and the eps versions): "
          f"{violations} violations in {len(rows)} rows")
    assert violations == 0
    print(f"[quad] worst Gauss-Legendre vs tanh-sinh relative disagreement (delta rows): {mp.nstr(worst_quad, 3)}")
    print(f"[root] worst error bound on epsilon (epsilon rows): {mp.nstr(worst_root, 3)}")

    zero_rows = [r for r in rows if r[2] == "epsilon" and r[3] == "0.0"]
    with open(OUT, "w") as fh:
        fh.write(f"# generated by tests/reference/make_shuffle_pair.py (mpmath {mp.__version__}, dps {DPS}); "
                 "shuffled epoch, t = 2 batches, Chua et al. pair: P = mean_j N(a e_j, sigma^2 I), "
                 "Q = mean_j N(b e_j, sigma^2 I), (a,b) = (2,1) zero_out, (2,0) replace_one; "
                 "delta = max(H_eps(P||Q), H_eps(Q||P)); kind=delta: delta at the given epsilon, "
                 "kind=epsilon: smallest epsilon with delta(epsilon) <= delta; 17 significant digits"
                 + (f"; epsilon 0.0 marks delta >= delta(0) ({len(zero_rows)} rows)" if zero_rows else "")
                 + "\n")
        fh.write("relation,t,sigma,kind,epsilon,delta\n")
        for rel, sigma, kind, e, d in rows:
            fh.write(f"{rel},{T},{sigma!r},{kind},{e},{d}\n")
    print(f"wrote {len(rows)} rows to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
