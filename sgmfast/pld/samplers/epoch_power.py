"""One balls-in-bins epoch's S = W_1 + ... + W_t on the lattice (step 3 of ``balls_in_bins``):
the t-fold convolution power of the lattice law of W -- by one transform and a coefficient-wise
power (``_spectral_power``), or by FFT exponentiation by squaring with windows (``_power``, for
t < 4 and light tails) -- with a certified per-entry round-off bound, and tilted powers for the
tails.

**Windows.**  The partial sums of n terms live near n E[W], within a few sd sqrt(n Var W); an
FFT over the whole lattice [0, cap] spends most of its length where they have no mass (for
t = 1446 at sigma 19.6, S lies within 1446 +- 25 of a lattice to 1470).  So every partial sum
of n terms is cut to a window [lo_n, hi_n) of lattice indices, where Chernoff bounds on the
lattice law (below: Q(S_n < lo_n) <= e^{lam lo_n} M(-lam)^n; above: the P-mass of
S_n >= hi_n, (n E[W e^{lam W}] M^{n-1} + (t - n) M^n) e^{-lam hi_n} / t, and its Q-mass
e^{-lam hi_n} M^n) are at most CUT each.  The powers then give (upper and lower) bounds on the
measure Q(S = x, A), A the event that no partial sum left its window.  For the upper bound
what is cut is charged: the remove direction puts the P-mass of not-A at +inf (a partial sum
of n < t terms below its window has P-mass at most its Q-mass: P(S_n < lo) =
E_Q[S/t; S_n < lo] <= Q(S_n < lo) (lo + t - n) / t and lo <= n), the add direction its Q-mass;
the lower bound drops it.  ``Windows.charge`` is 2 CUT for every product, far below any
truncation budget a query sets.
"""

from __future__ import annotations

import math

import numpy as np

from ..._kernels.pld import allocation as ka
from ..._kernels.pld import chernoff as kc
from ..._work import UNITS_PER_SECOND
from ..common import U, charge_fft, dot, irfft, next_fast_len, rfft
from ..grid.composition import _power_product, entry_error, fft_const, spectrum_of
from .epoch_chernoff import chernoff_above, coarse_majorant

#: Mass each window's two sides may cut (Chernoff bounds; charged, module notes).
CUT = 1e-60
#: Points of the majorant the windows' MGFs are computed on, and the number of lam values.
WIN_POINTS, WIN_LAMS = 1 << 14, 400
#: The windows' sums are taken of W - x0 (x0 the first point with mass) where the largest lam
#: times x0 passes this (``Windows``): e^{-lam x0} would underflow past ~700.
SHIFT_FROM = 300.0


class Windows:
    """The windows [lo_n, hi_n) of the partial sums of n of t terms of the lattice law w (spacing
    h), and ``charge`` = (P-mass, Q-mass) of everything they cut after the products of a power
    of t (``products``)."""

    def __init__(self, w, h, t, cap_index):
        wc, H = coarse_majorant(w, h, WIN_POINTS)  # (larger in convex order: every bound holds)
        x = np.arange(wc.size) * H
        mean = dot(wc, x)
        var = dot(wc, x * x) - mean * mean
        if var < 1e-6 * mean * mean:  # (cancelled to nothing at sigma 10^5: centred instead)
            var = dot(wc, (x - mean) ** 2)
        sd = math.sqrt(max(var, 1e-300))
        lams = np.exp(np.linspace(math.log(1e-3 / (sd * math.sqrt(t))), math.log(1e3 / max(sd, H)), WIN_LAMS))
        m_pos, d_pos, m_neg, d_neg = (np.empty(WIN_LAMS) for _ in range(4))
        # (sums of W - x0 for x0 the majorant's first point with mass, where e^{-lam x0} would
        # underflow -- a light tail at large sigma, W within 1e-4 of 1 at sigma 10^5: every lam
        # that cuts there had M(-lam) ~ e^{-lam} below 1e-250 and M(lam) overflowing, so the
        # windows were the whole lattice and its transforms 8.4 million points long; x0 = 0 below)
        k0 = int(np.flatnonzero(wc)[0]) if np.any(wc > 0.0) else 0
        k0 = k0 if lams[-1] * k0 * H > SHIFT_FROM else 0
        x0 = k0 * H
        kc.chernoff_sums(wc[k0:], H, lams, m_pos, d_pos)
        kc.chernoff_sums(wc[k0:], H, -lams, m_neg, d_neg)
        # each log within (size + 2 |lam| x_max + 3 B + 4) u relative (``chernoff_sums`` on W - x0;
        # the 2 |lam| x0 u of the shift's rounding and 4u for x0 m + d inside it); over n <= t
        # terms that is far below the e^{-1} slack taken off CUT
        r = (wc.size + 2.0 * lams * x[-1] + 3.0 * kc.CHERNOFF_BLOCK + 8.0) * U
        fine = t * r < 0.5  # (where it is not, that lam is not used)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            # (a sum near the underflow range has lost terms to it -- an M(-lam) too small, an
            # unsound bound: such lam are not used)
            self._lneg = np.where((m_neg > 1e-250) & fine, np.log(m_neg) - lams * x0, np.nan)
            self._lpos = np.where(np.isfinite(m_pos) & (m_pos > 0) & fine, np.log(m_pos) + lams * x0, np.inf)
            d_pos = d_pos + x0 * m_pos if x0 else d_pos  # (E[W e^{lam (W - x0)}])
            self._ldpos = np.where(np.isfinite(d_pos) & (d_pos > 0) & fine, np.log(d_pos) + lams * x0, np.inf)
        self._lams, self._t, self._h, self._cap = lams, t, h, cap_index
        self._r = np.where(fine, r, np.inf)
        self.mean, self.sd = mean, sd  # (one coordinate's, on the majorant)
        self._memo = {}
        self.products = 0

    def below(self, n: int, ys: np.ndarray, q_top: float, w_top: float) -> np.ndarray:
        """Upper bounds on Q(S_n < y) at each y of ``ys`` for S_n a sum of n coordinates of W's law
        cut at w_top (cutting only lowers a sum: they bound the uncut sum's too): the least over
        the lams of e^{lam y} (M(-lam) + q_top e^{-lam w_top})^n -- M the majorant's MGF, at least
        the cut law's (e^{-lam x} is convex), q_top >= P(W > w_top) the cut mass at w_top --, the
        logs' rounding (``__init__``'s r per term) and 1e-12 of the exponent's terms added; 1
        where no lam gives a bound."""
        ys = np.asarray(ys, dtype=np.float64)
        lams = self._lams
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            lm = np.logaddexp(self._lneg, math.log(q_top) - lams * w_top) if q_top > 0.0 else self._lneg
            lm = lm + self._r * 1.01
            expo = lams[None, :] * ys[:, None] + n * lm[None, :]
            expo = expo + 1e-12 * (np.abs(lams[None, :] * ys[:, None]) + n * np.abs(lm[None, :]) + 1.0)
            expo = np.where(np.isfinite(expo), expo, np.inf)
        return np.minimum(np.exp(np.min(expo, axis=1)), 1.0)

    def __call__(self, n: int):
        hit = self._memo.get(n)
        if hit is None:
            hit = self._memo[n] = self._window(n)
        return hit

    def _window(self, n: int):
        lams, t, h = self._lams, self._t, self._h
        target = math.log(CUT) - 1.0
        with np.errstate(invalid="ignore", over="ignore"):
            # below: Q(S_n < y) <= e^{lam y} M(-lam)^n <= CUT for y <= (target - n log M(-lam)) / lam
            v = (target - n * self._lneg) / lams
            y_lo = float(np.nanmax(v)) if not np.all(np.isnan(v)) else -math.inf
            # above: both e^{-lam y} M^n and e^{-lam y} M^{n-1} (n M' + (t - n) M) / t <= CUT
            q_y = (n * self._lpos - target) / lams
            p_y = ((n - 1) * self._lpos + np.logaddexp(math.log(n) + self._ldpos,
                                                       math.log(max(t - n, 0) or 1e-300) + self._lpos)
                   - math.log(t) - target) / lams
            v = np.maximum(q_y, p_y)
            y_hi = float(np.nanmin(v)) if not np.all(np.isnan(v)) else math.inf
        lo = max(0, int(math.floor(y_lo / h)) - 1) if math.isfinite(y_lo) else 0
        hi = min(self._cap, int(math.ceil(y_hi / h)) + 2) if math.isfinite(y_hi) else self._cap
        return lo, max(hi, lo + 1)

    def charge(self, t: int):
        """(P-mass, Q-mass) of what the windows of one power of t can cut: 2 CUT a product."""
        products = t.bit_length() - 1 + bin(t).count("1") - 1
        return 2 * CUT * products, 2 * CUT * products


class Shifted:
    """The windows of ``Windows`` for the lower law on the offset lattice c0 + j h (``w_lower``,
    c0 = m h / t): a partial sum of n terms sits n c0 / h lattice steps below its index in S's
    frame, so its window moves down by as much (any window is sound for the lower bound, which
    drops what it cuts; moved, it keeps what the windows of S keep)."""

    def __init__(self, wins, m: int, t: int):
        self._wins, self._m, self._t = wins, m, t

    def __call__(self, n: int):
        lo, hi = self._wins(n)
        d = (n * self._m) // self._t
        return max(0, lo - d - 1), max(hi - d, 1)


def lower_shift(s: float, h: float, t: int):
    """(m, c0): the lower law's offset c0 = m h / t (``w_lower``'s first cell mean, m in 1..t
    nearest t ``lower_offset`` / h), so that a sum of t of its points, m h + J h, is on S's lattice:
    entry J of the lower power is S = (J + m) h."""
    c = float(ka.lower_offset(s, h))
    m = min(t, max(1, int(round(t * c / h))))
    return m, m * h / t


def _conv(a, ea, b, eb, cap, same=False):
    """Linear convolution of non-negative arrays a, b (entry-wise error bounds ea, eb) cut to
    ``cap`` entries, and its entry-wise error bound.

    Round-off of one product by real FFTs of length n (c_n = Higham's relative l2 bound of one
    transform, ``composition.fft_const``): with A, B the exact spectra, |A|_inf <= |a|_1 and
    |A - A~|_2 <= c_n sqrt(n) |a|_2, the spectral product is off by at most
    c_n sqrt(n) (|a|_2 |b|_1 + |a|_1 |b|_2) + 4u |A~|_2 |B~|_inf (to first order), and the
    inverse transform maps that to c_n (|a|_2 |b|_1 + |a|_1 |b|_2) + 4u |a|_2 |b|_1 in l2 (hence
    per entry), plus its own round-off c_n |a * b|_2 <= c_n |a|_1 |b|_2.  Second-order terms are
    below c_n sqrt(n) < 1e-9 of these and covered by the factor 1.01.  The inputs' own errors
    add ea |b|_1 + eb |a|_1 (+ ea eb len)."""
    la, lb = a.size, b.size
    n = next_fast_len(la + lb - 1)
    # the product's work (the budget counts work, not time): its three plain transforms cost about
    # one unit of the pipeline's per-transform rate, which also covers the passes between them
    # (measured against the wall-clock budget this replaced: the same levels run on a quiet machine)
    charge_fft(n)
    fa = rfft(a, n)
    fb = fa if same else rfft(b, n)
    c = irfft(fa * fb, n)[:min(cap, la + lb - 1)]
    np.maximum(c, 0.0, out=c)
    l1a, l1b = float(a.sum()), float(b.sum())
    l2a, l2b = math.sqrt(dot(a, a)), math.sqrt(dot(b, b))
    cn = fft_const(n)
    e_fft = 1.01 * ((cn + 4 * U) * (l2a * l1b + l1a * l2b) + cn * l1a * l2b)
    e = e_fft + ea * (l1b + lb * eb) + eb * l1a
    return c, e * (1 + 1e-12)


def _power(w, t, cap, wins=None):
    """The t-fold convolution power of w cut to ``cap`` entries -- with ``wins``, every partial
    sum of n terms also cut to its window of lattice indices wins(n) = [lo, hi) -- as
    (offset, array, entry-wise error bound): the array holds the entries offset, offset + 1, ..."""
    res = None
    base = (0, w, 0.0, 1)
    while True:
        if t & 1:
            res = base if res is None else _mul(res, base, cap, wins)
        t >>= 1
        if not t:
            return res[:3]
        base = _mul(base, base, cap, wins, same=True)


def _any_power(w, t, C, h, wins, upper):
    """The t-fold power of w on 0 .. C-1 as (offset, array, entry-wise error bound): by one
    transform (``_spectral_power``) unless the windowed squarings (``_power``) cost less
    (``windowed_cheaper``: windows a small share of the lattice), or t < 4 (one or two products)."""
    if t < 4:
        return _power(w, t, C, wins)
    if wins is None:
        return _spectral_power(w, t, C, h, upper)
    lo, hi = wins(t)
    if windowed_cheaper(hi - lo, C, t):
        return _power(w, t, C, wins)
    o, y, e = _spectral_power(w, t, C, h, upper)
    if hi - lo >= C // 2:
        return o, y, e
    # (a narrow window: cut to it, as the squarings' last product is -- what lies outside has at
    # most CUT of mass, charged with the windows' cuts, ``Windows.charge``, plus round-off; kept,
    # the upper's flat floor spread over the whole lattice, and its passes with it: sigma 7.9,
    # t 247, 190 epochs took 2.9 s for the 0.25 s of the squarings.  Wide windows are kept whole,
    # as before: cut, sigma 0.5, t 10^4, 200 epochs read 1.15e-3 wide for 7.7e-4, not understood)
    lo, hi = max(lo, o), min(hi, o + y.size)
    return lo, y[lo - o:hi - o].copy(), e


def windowed_cheaper(span: float, n: float, t: int) -> bool:
    """Whether t-fold windowed squarings over windows of ``span`` lattice points cost less than
    one transform of the whole lattice of n points (the planning constants WINDOWED_UNITS and
    SPECTRAL_UNITS): about where span < 1.4 n / log2(t).  (The rule before, span < n / 2, took
    the squarings at sigma 1.29, t 5957, windows 0.35 of the lattice: 0.3-0.4 s a power where a
    transform takes 0.05 s, and 6.2 work units for the query.)"""
    span, n = max(span, 2.0), max(n, 2.0)
    return WINDOWED_UNITS[0] * span * math.log2(span) * math.log2(max(t, 2)) < SPECTRAL_UNITS[0] * n * math.log2(n)


def _spectral_power(w, t, C, h, upper):
    """(0, y, e): the t-fold convolution power of w on the lattice entries 0 .. C-1 by one
    transform -- the spectrum of w raised to the t-th power coefficient by coefficient
    (``fft_power.power_range``, the PLD engine's kernel: its per-frequency rounding and
    Cauchy-Schwarz input-error bounds) and one inverse -- and e, a bound on every entry's error.

    The power is cyclic, of length n >= C: entry s holds Q(S = s) plus the wrapped mass of
    S = s + n, s + 2n, ... (non-negative).  Upper bounds (``upper``): that only adds, n = C (the
    entries beyond are the mass above cap, charged by the caller).  Lower bounds: n covers S's
    whole support where that is at most 2C (nothing wraps); else n >= C (``_lower_length``) and
    the wrapped mass -- at most Q(S >= n), by Chernoff -- is taken off every entry with the
    round-off.  Per entry: the inverse's l2 error (``composition.entry_error``) bounds each entry's."""
    support = t * (w.size - 1) + 1  # (S's lattice points: none wraps if n reaches them)
    if upper:
        n, wrap = next_fast_len(C), 0.0
    elif support <= 2 * C:
        n, wrap = next_fast_len(max(C, support)), 0.0
    else:
        n, wrap = _lower_length(w, t, C, h)
    # (the PLD engine's single-part composition: its spectrum, power and per-entry error bound)
    spec, e2 = spectrum_of(w, 0, n, fft_const(n))  # (w.size <= C <= n: the fold moves nothing)
    charge_fft(n)  # (the power and the inverse, as ``compose_parts`` charges them)
    z = np.empty(n // 2 + 1, dtype=np.complex128)
    err, z2 = _power_product(spec.reshape(1, -1), np.array([t], dtype=np.int64), np.array([e2]), z)
    y = irfft(z, n)[:C]
    e = entry_error(err, z2, n)
    if not (np.isfinite(y).all() and math.isfinite(e)):
        raise FloatingPointError("non-finite values in an epoch's spectral power")
    np.maximum(y, 0.0, out=y)
    return 0, y, (e + wrap) * (1 + 1e-12)


#: Lengths (multiples of the lattice) the lower path may take, the first whose wrapped mass is at
#: most WRAP_SHARE of the round-off bound.  (From 1: at sigma 0.4, t 10^4 the negatively tilted
#: powers wrap 5e-147 and 8e-42 at C, half the transform of 2C; of 355 bench intervals eleven
#: moved, ten lower ends and one upper, by 2e-5 relative or less, either way.)
LOWER_LENGTHS, WRAP_SHARE = (1, 2, 3, 4, 6, 8), 0.01


def _lower_length(w, t, C, h):
    """(n, Q(S >= n)) for the lower path: the shortest of LOWER_LENGTHS x C whose wrapped mass
    (Chernoff, ``epoch_chernoff.chernoff_above`` on a convex-order majorant of w) is at most
    WRAP_SHARE of the round-off bound's leading term t c_n |w|_2 (a heavy-tailed law tilted up
    wraps 1e-11 at 2C where its round-off is 1e-13: sigma 0.7, t 20), else the longest."""
    wc, H = coarse_majorant(w, h)  # (COARSE points: a few hundred thousand terms a table)
    ns = [next_fast_len(m * C) for m in LOWER_LENGTHS]
    wraps = chernoff_above(wc, H, t, [(n - 1) * h for n in ns])[1]  # (Q(S >= n h))
    lead = t * math.sqrt(dot(w, w))
    for n, wrap in zip(ns, wraps):
        if wrap <= WRAP_SHARE * fft_const(n) * lead:
            break
    return n, float(wrap)


def _mul(x, y, cap, wins, same=False):
    """The product of two partial sums (offset, array, error, terms), cut to its window."""
    (oa, a, ea, na), (ob, b, eb, nb) = x, y
    o, n = oa + ob, na + nb
    lo, hi = (0, cap) if wins is None else wins(n)
    hi = max(min(hi, cap), o + 1)  # (o < hi always: o is at most n E[W], below the window's top)
    c, e = _conv(a, ea, b, eb, hi - o, same)
    if lo > o:  # (and o + c.size > lo: at least one entry is kept)
        k = min(lo - o, c.size - 1)
        c, o = c[k:], o + k
    return o, c, e, n


def _upper_power(w, t, C, h, s, strong=False, wins=None):
    """Entry-wise upper bounds on the t-fold power of w (cut to C entries), and 0.0 (the error is
    already added).  The untilted power's round-off bound is flat across the lattice, which in
    the far tails is far above the true masses; the powers of w e^{+-lam x} (tilting commutes
    with convolution) have bounds that fall off exponentially away from the bulk, so each
    entry takes the least of the three certified upper values."""
    return _tilted_power(w, t, C, h, s, True, strong, wins)


def _lower_power(w, t, C, h, s, strong=False, wins=None, lost=0.0, m=0):
    """Entry-wise lower bounds on the t-fold power of w, and 0.0 (the error is already taken
    off): as ``_upper_power``, each entry the largest of the three certified lower values --
    the untilted power minus its flat round-off bound is 0 in the far tails, where the tilted
    powers still resolve the masses that set a small δ.  With ``lost`` > 0 the tilts are skipped
    where the flat bound takes at most ``lost`` of P- and Q-mass in all (``_floor_mass``).  ``m``:
    entry J of the power is S = (J + m) h (``lower_shift``)."""
    return _tilted_power(w, t, C, h, s, False, strong, wins, lost, m)


def _floor_mass(o, size, e, h, t):
    """The most P- or Q-mass a flat per-entry error ``e`` over the entries o .. o + size - 1 of
    the lattice of S can hold (the P-mass of S = x is its Q-mass times x / t)."""
    top = (o + size - 1) * h / t
    return e * size * max(1.0, top)


def _tilted_power(w, t, C, h, s, upper, strong=False, wins=None, lost=0.0, m=0):
    """(offset, entry-wise bounds) of the t-fold power, each entry the least (upper) or largest
    (lower) of the untilted power's and the tilted ones' certified values.  All of them are cut
    to the same windows: the tilt of a law restricted to an event of the partial sums is the
    tilted law restricted to the same event (the tilt factorises over the terms), so every power
    bounds the same measure, Q(S = x, no partial sum outside its window)."""
    x = np.arange(w.size) * h
    o, y, e = _any_power(w, t, C, h, wins, upper)
    sign = 1.0 if upper else -1.0
    out = y + e if upper else np.maximum(y - e, 0.0)
    if not upper and _floor_mass(o + m, out.size, e, h, t) <= lost:
        # (the round-off floor cannot move δ by more than ``lost``: the tilts would not pay.  One
        # tilt fewer is not a lower bound's risk -- each entry is the largest of certified values)
        return o, out
    var = max(dot(w, x * x) - dot(w, x) ** 2, 1e-300)
    # the tilt must not let the tilted law sit at the lattice top: e^{lam W_max} stays below
    # P(W > W_max)^{-1/2}
    decay = -float(ka.log_sf(x[-1], s, 0.0))
    lam0 = min(1.0 / math.sqrt(t * var), max(0.5 * decay, 1.0) / max(x[-1], h))
    idx = (o + np.arange(out.size)) * h
    # (a negative tilt has no lattice top to respect: e^{-lam x} falls; one sd of S is its scale.
    # With the top's limit on it too, sigma 1, t 1000 kept a floor of 1.6e-13 at S = 0 -- loss
    # +inf in the add direction, eps = +inf at delta 1e-12 after 200 epochs)
    # (``strong``, for small δ: tilts of 4 sd^-1 as well -- one sd's tilt leaves the flat round-off
    # e^{0.5 - d} of the bulk's at d sd from the mean, which summed over the entries 7 sd below
    # set the add direction's δ 1e-12 at sigma 2, t 1000: [0.1025, 0.1129] for pld-accounting's
    # [0.1026, 0.1063]; four sd's leave e^{8 - 4d})
    sd = math.sqrt(t * var)
    lams = [lam0, -1.0 / sd]
    if strong:
        lams += [min(4.0 / sd, max(0.5 * decay, 1.0) / max(x[-1], h)), -4.0 / sd]
    if not np.any(w > 0.0):  # (a law of zeros -- the lower law far out, sigma 0.5 at eps 288: no tilt)
        return o, out
    with np.errstate(divide="ignore"):
        log_w = np.log(w)  # (once for every tilt; -inf where w is 0)
    log_w_max = float(np.max(np.abs(log_w[w > 0])))
    for lam in sorted(set(lams)):
        lw = log_w + lam * x
        mx = float(np.max(lw))
        if not math.isfinite(mx):  # (a tilt that overflows gives no bound: the untilted one stands)
            continue
        c = mx + math.log(float(np.sum(np.exp(lw - mx))))  # log of the tilted total: wt sums to ~1
        wt = np.exp(lw - c)
        # relative rounding of each tilted entry (log, product, exp): rho; composed: (1 + rho)^t
        rho = 8 * U * (1.0 + abs(lam) * x[-1] + abs(c) + log_w_max)
        ot, yt, et = _any_power(wt, t, C, h, wins, upper)
        if ot != o or yt.size != out.size:  # (the same windows give the same cut: else skip)
            continue
        with np.errstate(over="ignore"):
            scale = np.exp(t * c - lam * idx) * math.exp(
                sign * (t * rho * 1.01 + 1e-13 * (abs(t * c) + abs(lam) * abs(idx[-1]))))
        if upper:
            cand = (yt + et) * scale
            np.minimum(out, np.where(np.isfinite(cand), cand, np.inf), out=out)
        else:
            with np.errstate(invalid="ignore"):
                cand = np.maximum(yt - et, 0.0) * scale
            np.maximum(out, np.where(np.isfinite(cand), cand, 0.0), out=out)
    return o, out


# --- the planned cost of an epoch (``balls_in_bins._lattice`` sizes its first lattice by it) ------
#: Work units per cell of W's upper lattice law (``lognormal_cells``) and per CDF-difference pair
#: of the lower's Newton steps (``w_lower``: 4-7 a cell): CPU seconds times UNITS_PER_SECOND,
#: measured on six lattices (0.57 us a cell, 0.37 us a pair at sigma 1.07, t 8, 3.3e5 cells; ~0.7 s
#: of CPU an epoch there had been uncharged).  Planned (``epoch_cost``) at 8 pairs a lower cell (``lower_cells``).
CELL_UNITS = 150.0, 100.0
#: The lower law's cells widen up W's tail to LOWER_CELL_REL h of their start (``w_lower``: any
#: partition is one; up the tail the loss grid resolves W relatively, and at 1.0 the lower ends
#: lost 1e-4 where 0.1 keeps them to 6 digits, sigma 0.4-3, t 3-10^4, with 30-40 % less work).
LOWER_CELL_REL = 0.1
#: Work (seconds of ``_work`` units) of one epoch's powers: by one transform each
#: (``_spectral_power``), per n log2(n) (n lattice points), measured 8.7-8.8 x 1e-8 on sigma 0.4-1.5,
#: t 16-1000, 1.2e-7 with the four tilts of a small truncation budget (``strong``: sigma 0.78, t 10^4);
#: windowed squarings (``_power``, where ``windowed_cheaper`` says they cost less), per
#: m log2(m) log2(t), m the window's points: 3-6 x 1e-8 at sigma 2 and 10, t 1000 (the old fit over
#: whole lattices, 65-90 x 1e-9, kept: it errs on the costly side).
SPECTRAL_UNITS = 9e-8, 1.2e-7
WINDOWED_UNITS = 65e-9, 90e-9


def window_low(t: int, var: float) -> float:
    """Where the windows of S start, about: t - 17 sd(S) (a light-tailed S at large t has all its
    mass above; ``balls_in_bins._fit`` sizes the lattice by it)."""
    return max(0.0, t - 17.0 * math.sqrt(t * var))


def lower_cells(h: float, w_max: float) -> float:
    """About how many cells ``w_lower`` forms on [0, w_max] (spacing h): ~h wide up to W ~
    1 / (2 LOWER_CELL_REL), then each LOWER_CELL_REL h of its start wider (a planning figure)."""
    b0 = 0.5 / LOWER_CELL_REL
    return min(w_max, b0) / h + math.log(max(w_max / b0, 1.0)) / (2.0 * LOWER_CELL_REL * h)


def epoch_cost(h: float, w_max: float, cap: float, t: int, var: float, strong: bool) -> float:
    """Planned work (seconds of units) of an epoch on the lattice 0 .. cap of spacing h, with
    w_max / h cells of W (variance ``var``): a planning figure only (what is done is charged as it
    is done).  The powers take the path ``_any_power`` takes: windowed squarings where the windows
    cost less (``windowed_cheaper``, or t < 4), one transform each otherwise."""
    n = max(cap / h, 2.0)
    span = max((cap - window_low(t, var)) / h, 2.0)
    if t < 4 or windowed_cheaper(span, n, t):
        powers = WINDOWED_UNITS[bool(strong)] * span * math.log2(span) * math.log2(max(t, 2))
    else:
        powers = SPECTRAL_UNITS[bool(strong)] * n * math.log2(n)
    return powers + (CELL_UNITS[0] * w_max / h + 8.0 * CELL_UNITS[1] * lower_cells(h, w_max)) / UNITS_PER_SECOND
