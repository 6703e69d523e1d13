"""Balls-in-bins with k > 1 (each example in k of the t steps of an epoch): a certified lower
bound on its eps(δ) and δ(eps), from one statistic of each epoch.

The pair.  One example whose clipped gradient is the same unit vector at every step, the other
examples' known: an epoch's outputs along it are y_1 .. y_t, N(0, sigma^2) each without the
example (Q) and, with it, N(1, sigma^2) at the k steps of a uniform k-subset of the t steps (P, a
mixture).  Every hockey-stick divergence of the mechanism is at least this pair's, and the pair's
is at least that of any function of its outputs (post-processing).

The statistic.  W_i = exp((y_i - 1/2) / sigma^2) is step i's likelihood ratio, and
N = sum_i min(floor(W_i / h), K) (an integer) is a function of the outputs.  It is symmetric in
the steps, so under P it has the same law whichever k steps are chosen: the convolution
u^(t - k) * v^k of one coordinate's cell masses u (unshifted) and v (shifted), against u^t under
Q.  (For k = 1 the likelihood ratio of the whole epoch is sum_i W_i / t, which N resolves to
within h: the statistic loses little; for k > 1 the epoch's likelihood ratio is the k-th
elementary symmetric polynomial of the W_i over C(t, k), of which N captures the leading term.)

A second statistic, M = max_i log W_i, has closed-form laws: P(M <= m) = F(m)^(t - k) G(m)^k
and F(m)^t, F and G the normal CDFs of log W without and with the shift (``max_laws``).  Where
one large coordinate carries the loss (small sigma) it is nearly sufficient, and its cells sit on
a log scale, which the heavy tail needs; the bound below is computed for both statistics and the
larger taken (sigma 0.5, t 20, k 2, 10 epochs, δ 1e-5: 20.50 from N, 30.50 from M, upper 39.83).

The bound.  A second function g(N) = round(log(P(N) / Q(N)) / step), clipped -- any function of N
will do, this one nearly the likelihood ratio -- is composed over the E epochs, and for the laws
of sum_e g_e under both measures (again a post-processing of the E epochs' outputs)
    δ(eps) >= sum_m (P(m) - e^eps Q(m))_+
in each direction (the add direction swaps P and Q).  Every float is on the safe side:
the cell masses and the lattice powers carry relative error bounds (direct convolutions of
non-negative arrays: ``_kernels.pld.selected_lower``), so P is taken low and Q high per lattice
point; the epochs' composition is by FFT with the entry-wise bound of ``epoch_power._conv``.

The FFT's round-off bound is additive (~1e-16 of the laws' norms per entry), and e^eps times it
would soon exceed the composed masses (the bound saturated near eps ~ 20): the high laws are
composed tilted towards where the bound reads them and untilted entry by entry.

Where it is weak.  The lattice spans
the shifted coordinates' heavy tail at small sigma with MAX_CELLS points, so its spacing grows
there (sigma 0.7, t 2: 81 % of the exact δ at eps 0, 99.8 % from sigma 1).  ``balls_in_bins``
takes the larger of this bound and the epoch-sum statistic's, which is exact for k = t and
better at large sigma, where the sum of the outputs is nearly sufficient.
"""

from __future__ import annotations

import math

import numpy as np

from ..._kernels.pld import selected_lower as ks
from ..._work import charge
from ..common import U
from .epoch_power import _power

#: Lattice points of N (the direct convolutions cost up to ~15 x this squared multiply-adds)
MAX_CELLS = 4000
#: Bins of g per epoch at most, and of the composed sum
MAX_BINS, MAX_SUM = 2001, 1 << 18
#: Absolute error allowed each lattice entry for underflow (module notes)
UNDERFLOW = 1e-300


def _power_direct(a, r, n, cap):
    """(a^n cut to ``cap`` entries, its relative error bound), given a's relative bound r."""
    out, rel, base, rb = None, 0.0, a, r
    while True:
        if n & 1:
            if out is None:
                out, rel = base, rb
            else:
                out, rel = _times(out, rel, base, rb, cap)
        n >>= 1
        if not n:
            return out, rel
        base, rb = _times(base, rb, base, rb, cap)


def _times(a, ra, b, rb, cap):
    """The product of two relative-bounded laws and its bound: (1 + ra)(1 + rb)(1 + (m + 1) u)."""
    out = np.empty(min(cap, a.size + b.size - 1))
    charge(4.0 * min(a.size, b.size) * out.size)  # (work units: one multiply-add is about 4 here)
    ks.conv_direct(a, b, cap, out)
    m = min(a.size, b.size)
    return out, (1.0 + ra) * (1.0 + rb) * (1.0 + (m + 1) * U) * (1.0 + 4 * U) - 1.0


def epoch_laws(sigma: float, t: int, k: int):
    """(P, its error, Q, its error, P(N >= cap) <= p_top, Q(N >= cap) <= q_top): the laws of N on
    0 .. cap - 1 under both measures, each entry with an absolute error bound (module notes).  The lattice covers
    the sum to 30 sd above t and k shifted coordinates to 6 sd; one coordinate's cells stop at a
    shifted coordinate's 7 sd (K: any K defines a statistic)."""
    s = 1.0 / sigma
    var = math.expm1(s * s)
    top = t + 30.0 * math.sqrt(t * var) + k * math.exp(min(0.5 * s * s + 6.0 * s, 700.0)) + 1.0
    h = top / MAX_CELLS
    cap = MAX_CELLS + 1
    K = int(min(cap, math.ceil(math.exp(min(0.5 * s * s + 7.0 * s, 700.0)) / h)))
    u, v = np.empty(K + 1), np.empty(K + 1)
    ru = ks.cell_masses(s, h, K, 0.0, u)
    rv = ks.cell_masses(s, h, K, 1.0, v)
    a, ra = _power_direct(u, ru, t - k, cap) if t > k else (np.ones(1), 0.0)
    bu, rbu = _power_direct(u, ru, k, cap)
    bv, rbv = _power_direct(v, rv, k, cap)
    q, rq = _times(a, ra, bu, rbu, cap)
    p, rp = _times(a, ra, bv, rbv, cap)
    r = min(max(rq, rp), 1.0)  # (a cell lost to cancellation has no relative bound: then nothing below)
    q_in = float(np.sum(q)) * (1.0 - r) * (1.0 - cap * U) - cap * UNDERFLOW
    p_in = float(np.sum(p)) * (1.0 - r) * (1.0 - cap * U) - cap * UNDERFLOW
    # (absolute errors: r of each value, and UNDERFLOW for products below the normal range, which
    # lose their relative accuracy -- at most 2^-1074 each, far below this over every product)
    return p, r * p + UNDERFLOW, q, r * q + UNDERFLOW, max(0.0, 1.0 - p_in), max(0.0, 1.0 - q_in)


def _g_laws(p, ep, q, eq, p_top, q_top, ell, step, bins):
    """Per-epoch laws of g (bins 0 .. bins-1, g = index - bins // 2): (P low, P high, Q low,
    Q high), from a statistic's laws p, q with absolute error bounds ep, eq per value and g
    = ell / step rounded, ell = log(p / q) as computed (any function of the statistic will do).  The
    statistic's values above its range (masses p_top, q_top) get g's bottom value in the remove
    direction's laws and its top in the add direction's (each direction's bound is a
    post-processing of its own: the two may use different functions), where the tilts of
    ``SelectedLower`` shrink them; in the low laws they are left out."""
    half = bins // 2
    g = np.where(np.isnan(ell), -half, np.clip(np.rint(ell / step), -half, bins - 1 - half))
    idx = (g + half).astype(np.int64)
    slack = 1.0 + (p.size + 4) * U  # (the sums' rounding, relative)

    def total(x):
        return np.bincount(idx, weights=x, minlength=bins)

    pl, ql = np.maximum(total(np.maximum(p - ep, 0.0)) / slack, 0.0), np.maximum(total(np.maximum(q - eq, 0.0)) / slack, 0.0)
    ph, qh = total(p + ep) * slack, total(q + eq) * slack
    ph[-1] += p_top * (1.0 + 4 * U)  # (the add direction's high law)
    qh[0] += q_top * (1.0 + 4 * U)  # (the remove direction's)
    return pl, ph, ql, qh


def max_laws(sigma: float, t: int, k: int):
    """(P, its error, Q, its error, 0, 0): the laws of the largest log W_i of an epoch on MAX_CELLS
    cells (``_kernels.pld.selected_lower.max_cells``), a statistic nearly sufficient where one
    large coordinate carries the loss (small sigma: the heavy tail the lattice of N spans with a
    coarse spacing)."""
    s = 1.0 / sigma
    lo, hi = -0.5 * s * s - 9.0 * s, 0.5 * s * s + 9.0 * s
    n = MAX_CELLS
    p, ep, q, eq = (np.empty(n + 2) for _ in range(4))
    charge(50.0 * n)  # (a few transcendentals a cell, as the one-step bins)
    ks.max_cells(s, float(t), float(k), lo, hi, n, p, ep, q, eq)
    return p, ep, q, eq, 0.0, 0.0


def _epochs(law, E, low):
    """The E-fold convolution power of a per-epoch law (``epoch_power._power``: FFT products with
    their entry-wise error bound), entry-wise low or high."""
    _, out, e = _power(law, E, E * law.size)
    return np.maximum(out - e, 0.0) if low else out + e


def _tilted_log_power(law, step, E, sign):
    """log of upper bounds on the E-fold power of a high law, composed tilted by e^(sign g step)
    and untilted entry by entry: the FFT's additive round-off then stays small next to the masses
    where the bound reads them (remove: Q near loss eps, tilt +1; add: P near -eps, tilt -1).
    Every rounding is charged against the bound: exp and log within 8 ulps (the package's premise,
    ``tuning``'s _F = 16 u) plus u |x| for the argument x's own rounding, 32 u (|x| + 1) in all;
    and the epochs' rounded g step, whose sum differs from the composed entry's G step by up to
    u E max |g step| (the tilt factors' product is e^(sum of the rounded x))."""
    g = (np.arange(law.size) - law.size // 2) * step
    theta = _tilt_rate(law, sign * g, E)
    x = theta * sign * g
    tilted = law * np.exp(x) * (1.0 + 32.0 * U * (np.abs(x) + 1.0))
    comp = _epochs(tilted, E, False)
    G = (np.arange(comp.size) - E * (law.size // 2)) * step
    with np.errstate(divide="ignore", invalid="ignore"):
        lc = np.log(comp)
    finite = np.isfinite(lc)  # (an empty entry stays -inf: no mass)
    slack = (32.0 * U * (np.where(finite, np.abs(lc), 0.0) + theta * np.abs(G) + 2.0)
             + 2.0 * U * E * theta * float(np.max(np.abs(g))))
    # (NaN or +inf, from a composition out of range: no bound there, +inf)
    return np.where(finite, lc - theta * sign * G + slack, np.where(lc == -np.inf, -np.inf, np.inf))


def _tilt_rate(law, x, E):
    """The tilt rate theta in (0, 1] of ``_tilted_log_power``: 1, halved until the tilted law's
    factors and its E-th power's total stay inside the float range on both sides (E |log sum law
    e^(theta x)| <= 600).  At sigma 0.2 the per-epoch loss spans +-30,000: e^x overflowed, the
    composition was NaN, and the lower bound read it as no Q-mass at all (787,413 above an upper
    bound of 49,212); and where the mass sits far below 0 the tilted law underflowed to 0 entire,
    its composition was 0 with a round-off bound of 0, read as no Q-mass (the largest coordinate's
    statistic, sigma 0.2, t 636, k 6, 773 epochs: 524,287 above an upper bound of 58,842).  Any
    theta is sound (the untilting matches it); a smaller one only lets more round-off through."""
    theta = 1.0
    with np.errstate(over="ignore", under="ignore"):
        for _ in range(1100):
            top = float(np.max(theta * x))
            total = float(np.sum(law * np.exp(theta * x)))
            if top <= 600.0 and math.isfinite(total) and total > 0.0 and E * abs(math.log(total)) <= 600.0:
                break
            theta *= 0.5
    return theta


def _exp_up(x):
    """Floats >= e^x (x may hold -inf and +inf): exp rounded up by 32 u (|x| + 1), and 1e-300 for
    results below the normal range (an underflow to 0 is no upper bound)."""
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(x) * (1.0 + 32.0 * U * (np.where(np.isfinite(x), np.abs(x), 0.0) + 1.0))
    # (NaN is no bound: +inf, never 0)
    return np.where(np.isnan(x), np.inf, np.where(x > -np.inf, e + UNDERFLOW, 0.0))


class SelectedLower:
    """δ lower bounds at any eps for E epochs of k-of-t allocation (module notes)."""

    def __init__(self, laws, epochs: int, eps_hint: float):
        p, ep, q, eq, p_top, q_top = laws
        bins = int(min(MAX_BINS, MAX_SUM // max(epochs, 1)))
        bins -= 1 - bins % 2  # (odd: g = 0 in the middle)
        with np.errstate(divide="ignore", invalid="ignore"):
            ell = np.log(p) - np.log(q)
        live = np.isfinite(ell) & (p > 1e-30) & (q > 1e-30)  # (the rest is clipped: g is any function)
        span = float(np.max(np.abs(ell[live]))) if np.any(live) else 1.0
        # (the per-epoch loss resolved to about 1e-4 of the answer's scale, within the bins' span)
        step = max(2.0 * span / (bins - 2), 1e-4 * max(eps_hint, 0.1) / math.sqrt(epochs))
        pl, ph, ql, qh = _g_laws(p, ep, q, eq, p_top, q_top, ell, step, bins)
        self.pl, self.ql = _epochs(pl, epochs, True), _epochs(ql, epochs, True)
        # (log upper bounds: remove's Q tilted up, add's P tilted down)
        self.log_qh = _tilted_log_power(qh, step, epochs, 1.0)
        self.log_ph = _tilted_log_power(ph, step, epochs, -1.0)

    def delta(self, eps: float) -> float:
        """A lower bound on δ(eps): the larger direction's sum, rounded down (e^(eps + log) rounded
        up by 32 u (|x| + 1), as in ``_tilted_log_power``)."""
        rem = float(np.sum(np.maximum(self.pl - _exp_up(eps + self.log_qh), 0.0)))
        add = float(np.sum(np.maximum(self.ql - _exp_up(eps + self.log_ph), 0.0)))
        low = max(rem, add) * (1.0 - (self.pl.size + 4) * U)
        return low if low >= 0.0 else 0.0  # (a NaN law, out of range: no lower bound)

    def epsilon(self, delta: float, hi: float) -> float:
        """A lower bound on eps(δ): an eps whose δ lower bound is above ``delta`` (0 if none),
        by bisection on [0, hi]."""
        if not self.delta(0.0) > delta:
            return 0.0
        lo = 0.0
        while not self.delta(hi) <= delta:
            lo, hi = hi, 2.0 * hi + 1.0
            if hi > 1e6:
                return lo
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            if self.delta(mid) > delta:
                lo = mid
            else:
                hi = mid
            if hi - lo <= 1e-7 * hi:
                break
        return lo


def _applies(sigma: float, t: int, k: int, epochs: int) -> bool:
    """Whether the bound is worth its work: k = t is the Gaussian mechanism, which the sum
    statistic gives exactly (``epoch_gauss``)."""
    return epochs > 0 and 1 <= k < t and 0.0 < sigma < math.inf


def _hint(eps_hint: float) -> float:
    """The eps scale a caller's hint gives (1 where it gives none)."""
    return eps_hint if math.isfinite(eps_hint) and eps_hint > 0.0 else 1.0


def _bounds(sigma, t, k, epochs, hint):
    """The ``SelectedLower`` of each statistic: N (the lattice sum) and the largest coordinate."""
    return [SelectedLower(laws(sigma, t, k), epochs, hint) for laws in (epoch_laws, max_laws)]


def epsilon_lower(sigma: float, t: int, k: int, epochs: int, delta: float, eps_hint: float) -> float:
    """A certified lower bound on eps(δ) of ``epochs`` epochs of k-of-t allocation (0 for none),
    the larger of the two statistics'; ``eps_hint`` (e.g. the upper bound) sets the loss step and
    where the search starts."""
    if not _applies(sigma, t, k, epochs):
        return 0.0
    hint = _hint(eps_hint)
    return max(b.epsilon(delta, hint) for b in _bounds(sigma, t, k, epochs, hint))


def delta_lower(sigma: float, t: int, k: int, epochs: int, eps, eps_hint: float) -> np.ndarray:
    """Certified lower bounds on δ at each eps (array) of ``epochs`` epochs of k-of-t allocation."""
    eps = np.atleast_1d(np.asarray(eps, dtype=np.float64))
    if not _applies(sigma, t, k, epochs):
        return np.zeros(eps.size)
    bounds = _bounds(sigma, t, k, epochs, _hint(eps_hint))
    return np.array([max(b.delta(float(e)) for b in bounds) for e in eps])
