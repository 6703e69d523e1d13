"""Random allocation (balls-in-bins batches): one epoch's likelihood ratio on a linear lattice.

One epoch of k = 1 random allocation with t steps: the example joins one step drawn uniformly,
every step adds N(0, sigma^2) noise to a sensitivity-1 sum.  With Q = N(0, sigma^2 I_t) and P the
uniform mixture of the t shifts N(e_i, sigma^2 I_t), the likelihood ratio is

    P/Q (y) = S / t,   S = sum_i W_i,   W_i = exp((2 y_i - 1) / (2 sigma^2)),

and under Q the W_i are iid lognormal: log W ~ N(-s^2/2, s^2), s = 1/sigma, E W = 1.  Both
directions of the pair are functions of the Q-law of S: the remove direction's δ(eps) after E
epochs is E_Q[(prod_e S_e/t - e^eps)_+], the add direction's E_Q[(1 - e^eps prod_e S_e/t)_+],
each convex in every S_e separately.

So the Q-law of W may be replaced by any law that is larger in convex order (an upper bound for
both directions, after any composition) or smaller (a lower bound).  On the lattice
x_k = k h (k = 0..K):

* ``w_upper``: the mean-preserving spread -- the mass of W in each cell [x_k, x_k + h] split
  between the two ends keeping its mean.  Larger in convex order; variance added <= h^2/4.
* ``w_lower``: a convex-order minorant on the offset lattice c0 + k h (c0 = m h / t, so that a sum
  of t of its points is on the lattice of S): W's range cut into cells whose conditional means
  are the lattice points, each cell's mass at its mean (reporting the cell is post-processing).
  The first cell's mean c0 (``lower_offset``) is where much of W's mass lies far below h
  (sigma < ~0.7): with the first mean at h that cell held most of the mass and lost its variance,
  and the lower ends were set by it (sigma 0.4, t 100, 200 epochs, δ 0.01: [126.18, 126.64]
  at the second refinement level, [126.51, 126.61] on the offset lattice).  Cells widen up the
  tail, but narrow again towards the top, whose last cell is dropped.

Mass above x_K is left out of both (the callers charge it); the lattice sums are then
sub-probability measures, which only the callers' overflow terms need to know.
"""

import math

import numpy as np

from .._jit import jit
from ..logmath import EPS64, LOG_SQRT_2PI, NEG_INF, log_ndtr, log_ndtr_diff

__all__ = ["lognormal_cells", "w_upper", "w_lower", "lower_offset", "lattice_bins", "log_sf"]

#: Relative slack on every lattice mass and split fraction, on top of each cell's own rounding
#: bound err_k (``lognormal_cells``, from ``_diff_err``: a flat constant cannot cover it -- a cell
#: is ~1/(s^2 k) wide in the standardised log, so its log-CDF difference loses ~k digits' worth at
#: the top of a long lattice, and the split fraction another factor k; measured in
#: tests/test_rounding_constants_more.py).  What is left for it is the rounding of ``w_upper``'s
#: and ``w_lower``'s own few operations: m (1 + e) and 1 - f + e (f, e <= 1: 2u absolute on a share
#: of at least e), their product and one sum into the lattice point -- under 8u relative, covered
#: by 16u.  (It was 1e-9: raised to the t-th power, a (1 + 3e-9)^t excess of mass, 3e-5 at t 8686,
#: which at sigma 2.05, 141 epochs, δ 8.8e-3 held the upper end 0.4 % above the truth at every
#: level of refinement.)
SLACK = 8.0 * EPS64
#: Largest distance (in lattice spacings) of a lower-bound cell's computed mean from its lattice
#: point, and largest relative error of that mean (the CDF differences'); a cell beyond either is
#: dropped (a sub-measure is still a lower bound).  The relative part was a flat 1e-10 x inside
#: the absolute one, which dropped every cell above W ~ 200 at sigma 0.7 (its error is ~3e-10
#: relative there): the lower bound lost the whole tail that sets a small delta.
ETA_MAX = 1e-7
#: Widest a lower cell grows, as a share of the room left below the lattice top (``w_lower``).
TOP_SHARE = 0.25
RHO_MAX = 1e-6


@jit
def _beta(x, s):
    """Standardised log of x under log W ~ N(-s^2/2, s^2)."""
    if x <= 0.0:
        return NEG_INF
    return (math.log(x) + 0.5 * s * s) / s


@jit
def _diff_err(a, b):
    """A bound on the relative rounding error of ``log_ndtr_diff(a, b)`` (as a mass): the
    difference is formed on the side of zero where both log-CDFs are small, Phi(b) - Phi(a) =
    e^{lb} (1 - e^{-d}) with d = lb - la; each log-CDF is within 8u (|l| + 1) (measured 3u,
    tests/test_rounding_constants.py), and 1 - e^{-d} turns an absolute error of d into a
    relative one at most that over min(d, 1) (over 1 - e^{-d} >= min(d, 1) / 2, so twice that);
    the straddling case has no cancellation.  16u more for the exp and the final log."""
    if not a < b:
        return 0.0
    if b <= 0.0:
        la, lb = log_ndtr(a), log_ndtr(b)
    elif a >= 0.0:
        la, lb = log_ndtr(-b), log_ndtr(-a)
    else:
        return 32.0 * EPS64
    return _diff_err_logs(la, lb)


@jit
def _diff_err_pairs(a, b, pa, pb):
    """``_diff_err(a, b)`` from ``logmath.log_ndtr_pair``'s pa of a and pb of b: the same value."""
    if not a < b:
        return 0.0
    if b <= 0.0:
        return _diff_err_logs(pa[0], pb[0])
    if a >= 0.0:
        return _diff_err_logs(pb[1], pa[1])
    return 32.0 * EPS64


@jit
def _diff_err_logs(la, lb):
    """``_diff_err`` from the two log-CDFs it differences (la <= lb)."""
    if la == NEG_INF:
        return 8.0 * EPS64 * (abs(lb) + 1.0) + 32.0 * EPS64
    d = lb - la
    if not d > 0.0:
        return 1.0
    ea, eb = 4.0 * EPS64 * (abs(la) + 1.0), 4.0 * EPS64 * (abs(lb) + 1.0)
    return eb + 2.0 * (ea + eb) / min(d, 1.0) + 32.0 * EPS64


@jit
def lognormal_cells(s, h, K, mass, mean_off, err):
    """``lognormal_cells_from`` over every cell 0..K-1."""
    lognormal_cells_from(s, h, int(0), K, mass, mean_off, err)


@jit
def lognormal_cells_from(s, h, k0, k1, mass, mean_off, err):
    """Per cell k (0..K-1, [x_k, x_k + h]): its Q-mass m_k, E[W - x_k; cell] (in [0, h m_k]) and
    err_k, a bound on both the relative error of m_k and the absolute error of the split fraction
    f_k = E[W - x_k; cell] / (h m_k): with m, E[W; cell] within em, ew relatively
    (``_diff_err``), E[W; cell] <= (k + 1) h m and the subtraction's rounding u (2k + 1) h m,
    |f - f_exact| <= (k + 1) ew + k em + em + (2k + 1) u <= (k + 2) (ew + em + 2u).
    Where the cell is narrow against its position (far up the lattice: the CDF differences then
    lose digits, and the (k + 2) factor more) ``_mid_cell``'s expansion is taken instead, when its
    bound is below 1e-9 or the CDF differences' (the two bounds are exact in their own terms).
    Cells k0..k1-1 only (each cell is computed on its own: the split halves are the same floats)."""
    for k in range(k0, k1):
        m_mid, off_mid, err_mid = _mid_cell(s, k * h, h) if k > 0 else (0.0, 0.0, math.inf)
        if err_mid <= MID_ERR:
            mass[k], mean_off[k], err[k] = m_mid, off_mid, err_mid
            continue
        a = _beta(k * h, s)
        b = _beta((k + 1) * h, s)
        lm = log_ndtr_diff(a, b)
        m = math.exp(lm) if lm != NEG_INF else 0.0
        # E[W; cell] = Phi(b - s) - Phi(a - s)
        lw = log_ndtr_diff(a - s, b - s)
        mw = math.exp(lw) if lw != NEG_INF else 0.0
        off = mw - k * h * m
        if off < 0.0:
            off = 0.0
        if off > h * m:
            off = h * m
        mass[k] = m
        mean_off[k] = off
        em = _diff_err(a, b)
        ew = _diff_err(a - s, b - s)
        err[k] = min(1.0, (k + 2.0) * (ew + em + EPS64) * (1.0 + 1e-9))
        if err[k] > 0.5:
            # (the difference is not resolved: the cell's mass is at most W's tail above x_k and at
            # most its tail below x_k + h, the smaller taken, and err 1 makes ``w_upper`` put it
            # whole on both ends -- pointwise more than the spread.  The tail above alone was ~1
            # for every cell far below the bulk: at sigma 10^5 the law summed to 2e5)
            lt = log_ndtr_diff(a, math.inf)
            m_hi = math.exp(lt) * (1.0 + _diff_err(a, math.inf) + 4.0 * EPS64) if lt != NEG_INF else 0.0
            lb = log_ndtr_diff(-b, math.inf)  # (Phi(b) = Phi(-b) from above)
            m_lo = math.exp(lb) * (1.0 + _diff_err(-b, math.inf) + 4.0 * EPS64) if lb != NEG_INF else 0.0
            mass[k] = min(m_hi, m_lo)
            err[k] = 1.0
        if GL_ERR < err[k] <= 0.5 and m > 0.0:  # (the split fraction without the cancellation: ``_gl_off``;
            # not where the mass above became a tail bound: w_upper reads f against that mass)
            d, e_d = _gl_off(s, k, h, a)
            e_g = (e_d + em + 8.0 * EPS64) * (1.0 + 1e-9)
            if e_g < err[k]:
                mean_off[k], err[k] = min(max(d, 0.0), h * m), e_g
        if err_mid < err[k]:
            mass[k], mean_off[k], err[k] = m_mid, off_mid, err_mid


#: ``_mid_cell``'s bound below which ``lognormal_cells`` takes it without the CDF differences
MID_ERR = 1e-9
#: The CDF differences' error above which ``lognormal_cells`` tries ``_gl_off`` for the fraction.
GL_ERR = 1e-12
#: Six-point Gauss-Legendre on [-1, 1]: nodes (the positive half) and weights, and the constant of
#: its error bound, (b - a)^13 (6!)^4 / (13 (12!)^3) max |F^(12)| (Abramowitz & Stegun 25.4.30).
GL_NODES = np.array([0.2386191860831969, 0.6612093864662645, 0.9324695142031521])
GL_WEIGHTS = np.array([0.4679139345726910, 0.3607615730481386, 0.1713244923791704])
GL_CONST = float(math.factorial(6)) ** 4 / (13.0 * float(math.factorial(12)) ** 3)


@jit
def _gl_off(s, k, h, a):
    """(D, e): D = E[W - x; cell] for the cell [x, x + h], x = k h (k >= 1), with a relative
    error at most e -- without the cancellation of E[W; cell] - x m, which costs the CDF
    differences a factor k + 2.  In the standardised log z (a that of x, dz = log(1 + 1/k) / s the
    cell's width), W - x = x expm1(s (z - a)), so D = x int_0^dz expm1(s y) phi(a + y) dy, an
    integral of a positive function over a short interval: six-point Gauss-Legendre.  Its error is
    at most dz^13 GL_CONST max|F^(12)| with, by Leibniz, |F^(12)| <= sum_j C(12, j) G_j P_{12-j}:
    G_0 = expm1(s dz), G_j = s^j e^{s dz} bound the derivatives of expm1(s y), and P_i = B_i(X)
    max phi those of phi(a + y), |He_i(z)| <= B_i(|z|) (B_{i+1} = X B_i + i B_{i-1}, the Hermite
    recurrence with absolute values), X the largest |z| on the cell.  Rounding: each term within
    8 u (z^2 + 4) (the exp of -z^2/2, the expm1, the products), a's own rounding moves phi by
    4 u (|log x| + s^2) / s (X + 1) relative, dz's moves D by 8u; the sum of positive terms 8u
    more.  e is inf where dz > 0.25 (the bound is then loose) or D is near the subnormals."""
    dz = math.log1p(1.0 / k) / s
    if not dz <= 0.25:
        return 0.0, math.inf
    x = k * h
    X = max(abs(a), abs(a + dz))
    zmin = 0.0 if a < 0.0 < a + dz else min(abs(a), abs(a + dz))
    total = 0.0
    for i in range(3):
        for sign in (-1.0, 1.0):
            y = 0.5 * dz * (1.0 + sign * GL_NODES[i])
            z = a + y
            total += GL_WEIGHTS[i] * math.expm1(s * y) * math.exp(-0.5 * z * z)
    lead = 0.5 * dz / math.sqrt(2.0 * math.pi)
    d = x * lead * total
    if not d > 1e-290:  # (near the subnormals there is no relative precision: the CDF differences decide)
        return 0.0, math.inf
    # the bound on F^(12) over phi's largest value on the cell: sum_i C(12, i) G_{12-i} B_i(X)
    g_e = math.exp(s * dz)
    b_prev, b = 0.0, 1.0  # (B_{i-1}, B_i)
    binom, s_pow = 1.0, s ** 12
    m12 = 0.0
    for i in range(13):
        m12 += binom * (s_pow * g_e if i < 12 else math.expm1(s * dz)) * b
        b_prev, b = b, X * b + i * b_prev
        binom = binom * (12 - i) / (i + 1)
        s_pow /= s
    phi_max = math.exp(-0.5 * zmin * zmin) / math.sqrt(2.0 * math.pi)
    quad = dz ** 13 * GL_CONST * m12 * phi_max * x * 1.0000001
    if not quad < 0.5 * d:
        return 0.0, math.inf
    e = quad / (d - quad) + 8.0 * EPS64 * (X * X + 8.0) + 4.0 * EPS64 * (abs(math.log(x)) + s * s) / s * (X + 1.0)
    return d, e + 16.0 * EPS64


@jit
def _mid_cell(s, x, h):
    """(mass, E[W - x; cell], err) of the cell [x, x + h] (x > 0) as ``lognormal_cells_from``
    defines them, from the log-density's expansion about the midpoint: with g(u) = h p(x + u h)
    (p W's density, u in [0, 1]), l = log g has l'' = h^2 (1 + z/s - 1/s^2) / w^2 (z the
    standardised log w), so |l''| <= c = h^2 (1 + max|z| / s + 1/s^2) / x^2 on the cell and
    l(u) = l(1/2) + kappa (u - 1/2) + r(u), |r| <= c / 8.  With r = 0: mass g(1/2) sinh(kappa/2) /
    (kappa/2) and split fraction f0 = 1 / (1 - e^-kappa) - 1/kappa; e^r in [e^-c/8, e^c/8] moves
    the mass by a factor within e^{+-c/8} and f (a ratio of integrals of positive functions) by
    a factor within e^{+-c/4}, so by at most e^{c/4} - 1 (f <= 1).  Rounding: log g(1/2) within
    16 u of its terms, the series (|kappa| < 1e-3) within kappa^4 / 1000, f0's cancellation
    within 8 u / |kappa|.  err = the larger of the mass's and the fraction's bounds (inf where c
    > 1e-3, not narrow, or where the mass would be subnormal)."""
    wm = x + 0.5 * h
    lw = math.log(wm)
    zm = (lw + 0.5 * s * s) / s
    z_top = max(abs(_beta(x, s)), abs(_beta(x + h, s)))
    c = h * h * (1.0 + z_top / s + 1.0 / (s * s)) / (x * x)
    if not c <= 1e-3:
        return 0.0, 0.0, math.inf
    kap = -h * (s + zm) / (s * wm)
    lh, ls = math.log(h), math.log(s)
    lg = lh - 0.5 * zm * zm - LOG_SQRT_2PI - lw - ls
    if lg < -700.0:  # (a subnormal mass has no relative precision: the CDF differences decide)
        return 0.0, 0.0, math.inf
    e_l = 16.0 * EPS64 * (zm * zm + abs(zm) * (abs(lw) + s * s) / s + abs(lw) + abs(lh) + abs(ls) + 4.0)
    if abs(kap) < 1e-3:
        i0 = 1.0 + kap * kap / 24.0
        f0 = 0.5 + kap / 12.0 - kap * kap * kap / 720.0
        e_s, e_f0 = kap ** 4 / 1000.0, kap ** 4 / 1000.0 + 8.0 * EPS64
    else:
        i0 = math.sinh(0.5 * kap) / (0.5 * kap)
        f0 = 1.0 / -math.expm1(-kap) - 1.0 / kap
        e_s, e_f0 = 8.0 * EPS64, 8.0 * EPS64 / abs(kap) + 8.0 * EPS64
    f0 = min(1.0, max(0.0, f0))
    m = math.exp(lg) * i0
    e_m = math.expm1(0.125 * c) + e_l + e_s + 8.0 * EPS64
    e_f = math.expm1(0.25 * c) + e_f0 + 4.0 * EPS64
    return m, f0 * h * m, min(1.0, max(e_m, e_f) * (1.0 + 1e-9))


@jit
def w_upper(h, K, mass, mean_off, err, out):
    """The spread of the cells onto the K + 1 lattice points, rounded so that every lattice mass is
    at least the exact spread's: each cell's mass inflated by its error bound err_k (to second
    order, and SLACK) and both ends' shares by as much (``lognormal_cells``: err_k bounds the
    fraction's error too).  Pointwise more mass than the exact spread: every δ, a non-negative functional
    increasing in the measure, can only grow -- for both directions."""
    for k in range(K + 1):
        out[k] = 0.0
    for k in range(K):
        # (m (1 + e) >= the exact mass M: |m - M| <= err M gives M <= m / (1 - err) <= m (1 + err
        # + 2 err^2) for err <= 1/2; err = 1 marks a mass that is an upper bound itself)
        e = (err[k] + 2.0 * err[k] * err[k] if err[k] <= 0.5 else 1.0) + SLACK
        m = mass[k] * (1.0 + e)
        if m == 0.0:
            continue
        f = mean_off[k] / (h * mass[k])
        out[k] += m * min(1.0, 1.0 - f + e)
        out[k + 1] += m * min(1.0, f + e)


@jit
def _cell(s, a, c):
    """(Q-mass, E[W; .]) of the cell (a, c) of W (log-normal-CDF differences)."""
    ba = _beta(a, s)
    bc = _beta(c, s)
    lm = log_ndtr_diff(ba, bc)
    lw = log_ndtr_diff(ba - s, bc - s)
    return (math.exp(lm) if lm != NEG_INF else 0.0), (math.exp(lw) if lw != NEG_INF else 0.0)


@jit
def _cell_err(s, a, c):
    """Bounds on the relative errors of ``_cell``'s (mass, E[W; .]) (``_diff_err``)."""
    ba = _beta(a, s)
    bc = _beta(c, s)
    return _diff_err(ba, bc), _diff_err(ba - s, bc - s)


@jit
def w_lower(s, h, K, rel, c0, out):
    """The lower bound's law of W on the offset lattice c0 + j h (j = 0..K, 0 < c0 <= h; entry j
    of ``out``): W's range [0, K h] cut into cells whose conditional means are lattice points,
    each cell's mass (deflated by SLACK) put there -- the first cell's mean c0, the next ones' at
    least h/2 above their start.
    Reporting the cell instead of W is post-processing, so the pair of the cells' law is
    dominated by the true pair; mass in a last cell whose mean stays below the next lattice
    point is dropped, and so is a cell whose mean is not pinned down (ETA_MAX, RHO_MAX).
    Returns (eta, rho, calls): every cell's exact conditional mean is within eta + rho x of its
    lattice point x, so a sum S of t reported points is within t eta + rho S of the sum of the
    means (the likelihood ratio times t); the callers move S to S (1 -+ rho) -+ t eta against the
    bound.  ``calls`` counts the CDF-difference pairs evaluated (the caller's work charge)."""
    for k in range(K + 1):
        out[k] = 0.0
    b = 0.0
    top = K * h
    eta = 0.0
    rho = 0.0
    calls = 0
    j = 0  # (the first cell's mean: c0, ``lower_offset``)
    while True:
        if j > K:
            break
        x = c0 + j * h
        m_top, e_top = _cell(s, b, top)
        calls += 3  # (this one, the last one and the error bounds below)
        if m_top == 0.0 or e_top - x * m_top <= 0.0:
            break
        # F(c) = E[W - x; (b, c)] < 0 at c = x, > 0 at c = top; F'(c) = (c - x) density(c):
        # Newton from the flat-density guess 2x - b, kept inside the bracket by bisection
        lo_c, hi_c = x, top
        c = min(2.0 * x - b, top)
        for _ in range(100):
            m, e = _cell(s, b, c)
            calls += 1
            f = e - x * m
            if f > 0.0:
                hi_c = c
            else:
                lo_c = c
            if hi_c - lo_c <= 1e-13 * hi_c:
                break
            bc = _beta(c, s)
            dens = math.exp(-0.5 * bc * bc) / (2.5066282746310002 * s * c)
            nxt = c - f / ((c - x) * dens) if c > x and dens > 0.0 else 0.5 * (lo_c + hi_c)
            if not (lo_c < nxt < hi_c):
                nxt = 0.5 * (lo_c + hi_c)
            if abs(nxt - c) <= 1e-14 * c:
                break
            c = nxt
        # any boundary c > b is a partition; eta records how far its mean is from x
        m, e = _cell(s, b, c)
        if m > 0.0:
            em, ew = _cell_err(s, b, c)
            bary = e / m
            # the computed mean e / m is within r = em + ew + 2u of the exact one relatively, so
            # the exact mean is within d + r (x + d) of x, d = |e / m - x|: an absolute part
            # d (1 + r) (the root finding's) and a relative part r x (the CDF differences')
            # (a d the rounding of e / m keeps above ETA_MAX h -- about r x, far up the tail --
            # counts as relative too); 4u more: x = c0 + j h is the lattice point (m / t + j) h of
            # the callers (c0 = m h / t) within 3u x
            r = (em + ew + 6.0 * EPS64) * (1.0 + 1e-9)
            d = abs(bary - x) * (1.0 + r)
            if em < 0.5 and d <= ETA_MAX * h and r <= RHO_MAX:
                eta = max(eta, d)
                rho = max(rho, r)
                out[j] += m * (1.0 - SLACK - em)
            elif em < 0.5 and d / x + r <= RHO_MAX:
                rho = max(rho, (d / x + r) * (1.0 + 1e-9))
                out[j] += m * (1.0 - SLACK - em)
            # else: a cell whose mean the root finding did not pin down is dropped
        b = c
        # the next: the first lattice point at least h/2 above b (no cell is narrower than ~h) and
        # at least rel b above it (up the tail the cells widen in proportion: any partition is one)
        # -- but not by more than a quarter of what is left below the top, so that the last cell,
        # whose mass is dropped, is narrow (a last cell 3 % of W wide below the top took 1.4e-4 of
        # E[W] at sigma 0.4, h 0.16, W_max 10^4)
        j = max(int(math.floor((b - c0) / h + 0.5)) + 1,
                int(math.ceil((b + min(b * rel, TOP_SHARE * (top - b)) - c0) / h)))
    return eta, rho, calls


@jit
def lower_offset(s, h):
    """The first lower cell's mean c0 in (0, h] for ``w_lower``: the fixed point of
    c = E[W | W < c + h/2] (a cell about centred on its mean).  Where most of W's mass lies far
    below h (small sigma) the cell [0, b) of mean h held most of it, and its variance was lost:
    0.64 of Var W's 7.1 below 50 at sigma 0.4, h 0.32, where this c0 (0.040) loses 0.0056 --
    the spread's upper law adds 0.011.  A heuristic: any c0 in (0, h] gives a lower bound."""
    c = 0.5 * h
    for _ in range(30):
        m, e = _cell(s, 0.0, c + 0.5 * h)
        nxt = min(e / m, h) if m > 0.0 else h
        if abs(nxt - c) <= 1e-6 * h:
            return nxt
        c = nxt
    return c


@jit
def log_sf(x, s, shift):
    """log P(W > x) for log W ~ N(-s^2/2 + shift s^2, s^2) (shift 1: the P-law of one coordinate)."""
    if x <= 0.0:
        return 0.0
    z = (math.log(x) + 0.5 * s * s - shift * s * s) / s
    return log_ndtr_diff(z, math.inf)


@jit
def _log_offset(ell_i, second, first, step):
    """log(e^{ell_i} * second / first) of a bin's atoms, clamped to [-step, 0] (exactly in it)."""
    rr = ell_i + math.log(second / first)
    return min(0.0, max(-step, rr))


@jit
def lattice_bins(q, origin, err, h, shift, t, step, j_lo, n, add, upper, out_a, out_b):
    """One epoch's PLD on the loss grid ell_j = j step (j = j_lo .. j_lo + n - 1) from the Q-law
    of S on the lattice s h (masses q_s = q[s - origin] for s = origin .. origin + q.size - 1, zero
    elsewhere; each within +- err of the exact value), every atom moved to s h + shift (the lower
    bound's eta correction).

    Remove: loss log(x / t) with P-mass (x / t) q_s, x = s h + shift; add: loss log(t / x) with
    Q-mass q_s.

    ``upper``: ``out_a`` gets the connect-the-dots masses of q_s + err (each bin's P- and Q-mass
    kept, the split rounded up); mass below the grid moves up to j_lo, mass at or above the top
    point goes to the returned +inf mass.  Otherwise: ``out_a`` / ``out_b`` get per bin the
    optimistic atom of max(q_s - err, 0) (offset of its conditional u-mean above the bin's lower
    point, rounded down, -1 if empty / its P-mass) as ``discretise.optimistic_step`` reads
    them; mass below the grid is dropped, mass at or above the top point moves down to it (the
    returned top mass).

    Rounding: a bin's P- and Q-masses are sums of c non-zero atoms (c up to ~26,000 on the lattices
    ``pld.allocation`` builds: ~C step), each term within (5 + sigma_s) u of the exact m x / t
    or m (m, s h, x = s h + shift, r = x / t and m r one rounding each; x's relative error is
    u (2 + sigma_s), sigma_s = |shift| / x when shift < 0 makes x a difference, else 0), and a
    recursive sum of c non-negative terms adds (c - 1) u: each sum is within (T + 4) u, T the
    sum over its atoms of 1 + sigma_s, so e = (T + 4) EPS64 (twice that) covers it with the
    products that follow, and log(second / first) is within e (both sums' errors, to first
    order; the rest is inside err_r's 256 u) more than ``_log_offset``'s own rounding.  Masses
    are rounded out by 1e-12 + e, offsets down by err_r + e.  (The flat 1e-12 and err_r alone
    did not cover it: c equal terms sum with an error of up to ~c u / 4, all of one sign --
    offsets 3.7x err_r on 12,301 equal masses a bin; tests/test_rounding_constants_rest.py.)"""
    lt = math.log(t)
    lh = math.log(h + abs(shift))
    for i in range(n):
        out_a[i] = 0.0 if upper else -1.0
        out_b[i] = 0.0
    first = np.zeros(n)  # per bin: first-measure mass
    second = np.zeros(n)  # and second-measure mass
    terms = np.zeros(n)  # and its sums' rounding, in EPS64 (sum over the atoms of 1 + sigma_s)
    beyond, t_beyond, low, t_low = _bin_atoms(q, origin, err, h, shift, t, lt, step, j_lo, n, add, upper, first, second,
                                              terms)
    if upper:
        out_a[0] += low * (1.0 + 1e-12 + (t_low + 4.0) * EPS64)
    _write_bins(first, second, terms, j_lo, step, lt, lh, upper, out_a, out_b)
    e = (t_beyond + 4.0) * EPS64
    return beyond * (1.0 + 1e-12 + e) if upper else beyond * (1.0 - 1e-12 - e)


# The two halves of ``lattice_bins`` are inlined into it (numba IR inlining): one compiled function,
# as before it was split.
@jit(inline="always")
def _bin_atoms(q, origin, err, h, shift, t, lt, step, j_lo, n, add, upper, first, second, terms):
    """``lattice_bins``' atoms into the bins j = 0 .. n - 2 of its loss grid: adds each atom's
    first- and second-measure masses (P and Q, Q and P when ``add``) to first[j] and second[j]
    and its rounding weight 1 + sigma_s to terms[j] (lt = log t).  Returns (beyond, t_beyond,
    low, t_low): the first-measure mass at or above the top point (upper: with the add
    direction's S = 0 atoms, loss +inf) and below the grid (upper only; the lower bound drops
    it), each with its sum of rounding weights."""
    beyond = 0.0  # upper: +inf mass; lower: top mass
    t_beyond = 0.0
    low = 0.0  # upper: the mass below the grid (moved up to j_lo)
    t_low = 0.0
    for si in range(q.shape[0]):
        m = q[si] + err if upper else max(q[si] - err, 0.0)
        if m == 0.0:  # (an empty atom adds exactly 0 to every sum: no term, no rounding; the
            continue  # windows leave most of a long lattice empty)
        x = (origin + si) * h + shift  # (the lattice point origin + si: an integer, a float exactly)
        if x <= 0.0:
            # S = 0: remove loss -inf (P-mass 0); add loss +inf (Q-mass m)
            if add and upper:
                beyond += m
                t_beyond += 1.0
            continue
        r = x / t  # the ratio P/Q at this atom
        ell = math.log(x) - lt
        if add:
            ell = -ell
            f, sec = m, m * r
        else:
            f, sec = m * r, m
        tk = 1.0 - shift / x if shift < 0.0 else 1.0
        j = int(math.floor(ell / step)) - j_lo
        if j < 0:
            if upper:
                low += f
                t_low += tk
            continue
        if j >= n - 1:
            beyond += f
            t_beyond += tk
            continue
        first[j] += f
        second[j] += sec
        terms[j] += tk
    return beyond, t_beyond, low, t_low


@jit(inline="always")
def _write_bins(first, second, terms, j_lo, step, lt, lh, upper, out_a, out_b):
    """``lattice_bins``' outputs from the bins' masses (lt = log t, lh = log(h + |shift|)):
    ``upper``, each bin's first-measure mass rounded up and split between its two grid points
    by the connect-the-dots fraction (rounded up); otherwise each bin's optimistic atom, its
    offset rounded down in ``out_a`` and its mass rounded down in ``out_b``."""
    em = -math.expm1(-step)
    for i in range(first.shape[0] - 1):
        m = first[i]
        if m == 0.0:
            continue
        ell_i = (j_lo + i) * step
        e = (terms[i] + 4.0) * EPS64
        err_r = 16.0 * EPS64 * (abs(ell_i) + abs(lt) + abs(lh) + 8.0) + e
        if upper:
            fp = min(1.0, -math.expm1(_log_offset(ell_i, second[i], m, step)) / em + err_r / em)
            mp = m * (1.0 + 1e-12 + e)
            out_a[i] += mp * (1.0 - fp)
            out_a[i + 1] += mp * fp
        else:
            pos = -_log_offset(ell_i, second[i], m, step) - err_r
            out_a[i] = pos if pos > 0.0 else 0.0
            out_b[i] = m * (1.0 - 1e-12 - e)
