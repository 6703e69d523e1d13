"""Random allocation (shuffled batches): one epoch's likelihood ratio on a linear lattice.

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
* ``w_lower``: a convex-order minorant on the same lattice (same mass and mean).  Its call
  function c -> E(W - c)_+ is the chord interpolation of the true one lowered, at every knot,
  by the most a neighbouring cell's chord can exceed the true call function (m f (1 - f) h for
  a cell of mass m whose mean is a fraction f across it); negative knot masses are removed by
  the lower convex hull.  Variance lost is O(m h^2) per cell, second order like the spread.

Mass above x_K is left out of both (the callers charge it); the lattice sums are then
sub-probability measures, which only the callers' overflow terms need to know.
"""

import math

import numpy as np

from .._jit import jit
from ..logmath import EPS64, NEG_INF, log_ndtr_diff

__all__ = ["lognormal_cells", "w_upper", "w_lower", "lattice_bins", "log_sf"]

#: Relative slack on every lattice mass and split fraction: covers the rounding of the
#: log-normal-CDF differences (<= ~1e-12 relative here: cells are >= h wide and the
#: log-CDF has full relative precision in both tails) and of the subtraction x_k m_k.
SLACK = 1e-9
#: Largest distance (in lattice spacings, plus 1e-10 relative) of a lower-bound cell's mean from
#: its lattice point; a cell beyond it is dropped (a sub-measure is still a lower bound).
ETA_MAX = 1e-7


@jit
def _beta(x, s):
    """Standardised log of x under log W ~ N(-s^2/2, s^2)."""
    if x <= 0.0:
        return NEG_INF
    return (math.log(x) + 0.5 * s * s) / s


@jit
def lognormal_cells(s, h, K, mass, mean_off):
    """Per cell k (0..K-1, [x_k, x_k + h]): its Q-mass m_k and E[W - x_k; cell] (in [0, h m_k])."""
    for k in range(K):
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


@jit
def w_upper(h, K, mass, mean_off, out):
    """The spread of the cells onto the K + 1 lattice points, each mass inflated by SLACK and the
    upper split rounded up (the mean can only grow by the slack: still an upper bound for the
    remove direction; the add direction's caller lowers the top instead)."""
    for k in range(K + 1):
        out[k] = 0.0
    for k in range(K):
        m = mass[k] * (1.0 + SLACK)
        if m == 0.0:
            continue
        f = mean_off[k] / (h * mass[k]) if mass[k] > 0.0 else 0.0
        f = min(1.0, f + SLACK)
        out[k] += m * (1.0 - f)
        out[k + 1] += m * f


@jit
def _cell(s, a, c):
    """(Q-mass, E[W; .]) of the cell (a, c) of W (log-normal-CDF differences)."""
    ba = _beta(a, s)
    bc = _beta(c, s)
    lm = log_ndtr_diff(ba, bc)
    lw = log_ndtr_diff(ba - s, bc - s)
    return (math.exp(lm) if lm != NEG_INF else 0.0), (math.exp(lw) if lw != NEG_INF else 0.0)


@jit
def w_lower(s, h, K, out):
    """The lower bound's law of W on the lattice: W's range [0, K h] cut into cells whose
    conditional means are lattice points, each cell's mass (deflated by SLACK) put there.
    Reporting the cell instead of W is post-processing, so the pair of the cells' law is
    dominated by the true pair; mass in a last cell whose mean stays below the next lattice
    point is dropped, and so is a cell whose mean is further than ETA_MAX h + 1e-10 x from its point x.  Returns eta, a bound on |conditional mean - its lattice point| over
    the cells (root finding and rounding): the callers move S by t eta against the bound."""
    for k in range(K + 1):
        out[k] = 0.0
    b = 0.0
    top = K * h
    eta = 0.0
    while True:
        # the first lattice point at least h/2 above b: no cell is narrower than ~h
        j = int(math.floor(b / h + 0.5)) + 1
        if j > K:
            break
        x = j * h
        m_top, e_top = _cell(s, b, top)
        if m_top == 0.0 or e_top - x * m_top <= 0.0:
            break
        # F(c) = E[W - x; (b, c)] < 0 at c = x, > 0 at c = top; F'(c) = (c - x) density(c):
        # Newton from the flat-density guess 2x - b, kept inside the bracket by bisection
        lo_c, hi_c = x, top
        c = min(2.0 * x - b, top)
        for _ in range(100):
            m, e = _cell(s, b, c)
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
            bary = e / m
            d = abs(bary - x) + 1e-11 * (x + h)
            if d <= ETA_MAX * h + 1e-10 * x:
                if d > eta:
                    eta = d
                out[j] += m * (1.0 - SLACK)
            # else: a cell whose mean the root finding did not pin down is dropped
        b = c
    return eta


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
def lattice_bins(q, err, h, shift, t, step, j_lo, n, add, keep_low, pess, frac, amass):
    """One epoch's PLD on the loss grid ell_j = j step (j = j_lo .. j_lo + n - 1) from the Q-law
    of S on the lattice s h (masses q_s, each within +- err of the exact value), every atom
    moved to s h + shift (shift >= -h: the lower bound's eta correction).

    Remove: loss log(s h / t) with P-mass (s h / t) q_s; add: loss log(t / (s h)) with Q-mass
    q_s.  ``pess``: connect-the-dots masses from q_s + err (both P- and Q-mass of each bin kept;
    mass below the grid moved up to j_lo, above added to the returned +inf mass).  ``frac`` /
    ``amass``: per bin the optimistic atom (offset of its conditional u-mean above the bin's
    lower point, rounded down; P-mass from max(q_s - err, 0)) as ``discretise.optimistic_step``
    reads them; mass below the grid dropped, above moved down to the top point (returned).
    Returns (p_inf, top, below): pessimistic +inf mass, optimistic top mass, and the
    first-measure mass below the grid (pessimistic, already moved)."""
    lt = math.log(t)
    lh = math.log(h + abs(shift))
    em = -math.expm1(-step)
    for i in range(n):
        pess[i] = 0.0
        frac[i] = -1.0
        amass[i] = 0.0
    # per-bin sums: first-measure mass and second-measure mass, upper and lower
    mu_u = np.zeros(n)
    nu_u = np.zeros(n)
    mu_l = np.zeros(n)
    nu_l = np.zeros(n)
    p_inf = 0.0
    top = 0.0
    below = 0.0
    S = q.shape[0]
    for si in range(S):
        qu = q[si] + err
        ql = q[si] - err
        if ql < 0.0:
            ql = 0.0
        if si == 0:
            # S = 0: remove loss -inf (P-mass 0); add loss +inf (Q-mass q_0, P-mass 0)
            if add:
                p_inf += qu
            continue
        x = si * h + shift
        if x <= 0.0:
            if add:
                p_inf += qu
            continue
        r = x / t  # the ratio P/Q at this atom
        ell = math.log(x) - lt
        if add:
            ell = -ell
            fu, su = qu, qu * r
            fl, sl = ql, ql * r
        else:
            fu, su = qu * r, qu
            fl, sl = ql * r, ql
        j = int(math.floor(ell / step)) - j_lo
        if j < 0:
            if keep_low:
                pess[0] += fu
                below += fu
            continue
        if j >= n - 1:
            p_inf += fu
            top += fl
            continue
        mu_u[j] += fu
        nu_u[j] += su
        mu_l[j] += fl
        nu_l[j] += sl
    for i in range(n - 1):
        ell_i = (j_lo + i) * step
        err_r = 16.0 * EPS64 * (abs(ell_i) + abs(lt) + abs(lh) + 8.0)
        m = mu_u[i]
        if m > 0.0:
            fp = min(1.0, -math.expm1(_log_offset(ell_i, nu_u[i], m, step)) / em + err_r / em)
            mp = m * (1.0 + 1e-12)
            pess[i] += mp * (1.0 - fp)
            pess[i + 1] += mp * fp
        m = mu_l[i]
        if m > 0.0:
            pos = -_log_offset(ell_i, nu_l[i], m, step) - err_r
            frac[i] = pos if pos > 0.0 else 0.0
            amass[i] = m * (1.0 - 1e-12)
    return p_inf * (1.0 + 1e-12), top * (1.0 - 1e-12), below
