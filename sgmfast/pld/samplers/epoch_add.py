"""Balls-in-bins: a closed-form upper bound on the add direction, for where the lattice cannot
resolve it (few steps per epoch, small sigma).

The add direction of E epochs is the pair (Q, P) with privacy loss L = sum_e log(t / S_e),
S_e = sum_i W_{e,i} (``balls_in_bins``), so

    δ_add(eps) = E_Q[(1 - e^{eps - L})_+] <= Q(L > eps) <= e^{-lam eps} m(lam)^E  (every lam > 0),

m(lam) = E_Q[(t / S)^lam].  Its mass sits where S is near 0, which a linear lattice of spacing h
puts in one cell charged at loss +inf: at sigma 0.5, t 3 the lattice's add direction gave eps =
+inf where the remove direction was within 1 % (σ 0.6, t 3, δ 1e-6: [7.717, 7.800]).  Here
S >= M = max_i W_i, so (t / S)^lam <= (t / M)^lam, and M's law is exact: log W ~ N(-s^2/2, s^2)
iid, P(M <= x) = Phi((log x + s^2/2) / s)^t.  m(lam) is bounded above on a grid y_0 < ... < y_n
of log x, (t / x)^lam falling in x: each cell's mass at its left end, below y_0 the single
coordinate's partial moment (M < x_0 forces W_1 < x_0, and (t / M)^lam <= (t / W_1)^lam):
t^lam E[W^-lam; W < x_0] P(W < x_0)^(t-1) with E[W^-lam; log W < y] = e^{lam s^2/2 + lam^2 s^2/2}
Phi((y + s^2/2) / s + lam s), above y_n its value there times P(M > x_n); the result is rounded
up by SLACK (the cell masses are differences of t-th powers of Phi, accurate to ~1e-13
relative of the larger; the terms are positive).

The bound is loose where the add direction matters (large sigma: it is then not used), and far
below the remove direction where it does not, which is all it must show there.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy.special import log_ndtr

from ..._work import PER_BIN_MOMENTS, charge
from ..common import U

#: Points of the log x grid, its half-width in sd of log W, and the lam values tried.
GRID, HALF_WIDTH = 4001, 40.0
LAMS = np.geomspace(1e-2, 64.0, 160)
#: Relative rounding slack on m(lam) (module notes), and an absolute one on each cell's mass.
SLACK = 1e-9
CELL_ABS = 1e-15


@functools.lru_cache(maxsize=64)
def log_moments(sigma: float, t: int) -> np.ndarray:
    """log m(lam) upper bounds at each lam of LAMS (module notes); kept per (sigma, t), read-only:
    a curve asks for every epoch count of one run (200 counts recomputed the same table 200
    times, half a 10 s curve)."""
    charge(PER_BIN_MOMENTS * GRID * (LAMS.size + 2))  # (an exp a cell and lam, on the one meter)
    s = 1.0 / sigma
    mu = -0.5 * s * s
    y = np.linspace(mu - HALF_WIDTH * s, mu + HALF_WIDTH * s, GRID)
    log_f = log_ndtr((y - mu) / s)  # log P(W <= e^y)
    g = np.exp(t * log_f)  # P(M <= e^y)
    mass = np.maximum(np.diff(g), 0.0) + CELL_ABS * np.maximum(g[1:], 1e-300)
    top = -math.expm1(t * float(log_f[-1]))  # P(M > x_n)
    log_t = math.log(t)
    out = np.empty(LAMS.size)
    for i, lam in enumerate(LAMS):
        # below y_0: t^lam E[W^-lam; log W < y_0] P(W < x_0)^(t-1), all in logs
        low = (lam * log_t + lam * 0.5 * s * s + 0.5 * lam * lam * s * s
               + float(log_ndtr((y[0] - mu) / s + lam * s)) + (t - 1) * float(log_f[0]))
        body = lam * (log_t - y[:-1]) + np.log(np.maximum(mass, 1e-300))
        last = lam * (log_t - y[-1]) + (math.log(top) if top > 0 else -math.inf)
        terms = np.concatenate(([low, last], body))
        mx = float(np.max(terms))
        out[i] = mx + math.log(float(np.sum(np.exp(terms - mx)))) + math.log1p(SLACK)
    out.flags.writeable = False
    return out


def eps_upper(sigma: float, t: int, epochs: int, delta: float) -> float:
    """An upper bound on the add direction's eps(δ) after ``epochs`` epochs: the least over lam of
    (E log m(lam) - log δ) / lam (module notes); +inf if no lam gives one."""
    lm = log_moments(float(sigma), int(t))
    with np.errstate(invalid="ignore"):
        e = (epochs * lm - math.log(delta)) / LAMS
    e = e[np.isfinite(e)]
    return max(float(e.min()), 0.0) * (1 + 1e-12) if e.size else math.inf


def delta_upper(sigma: float, t: int, epochs: int, eps: np.ndarray) -> np.ndarray:
    """Upper bounds on the add direction's δ(eps) after ``epochs`` epochs (each <= 1)."""
    lm = log_moments(float(sigma), int(t))
    eps = np.asarray(eps, dtype=np.float64).reshape(-1, 1)
    log_d = np.min(epochs * lm[None, :] - LAMS[None, :] * eps, axis=1)
    return np.minimum(1.0, np.exp(np.minimum(log_d, 0.0)) * (1 + 1e-12))


# --- the lattice's smallest sums, for the add direction's grid ---------------------------------
#: Lattice points whose sums ``small_sums`` may re-place, and the ratio of its integration grid.
SMALL_POINTS, SMALL_RATIO = 64, 1.01


def small_sums(up: np.ndarray, h: float, s: float, t: int):
    """(k0, atom, xs, ms): the add direction's law of S with its smallest lattice sums re-placed --
    up[:k0] by atoms at xs (0 < xs < k0 h) with masses ms (the atom at S = 0, loss +inf, is
    ms[0] at xs[0] = 0), and up[k0] by ``atom`` -- or None where nothing moves.

    Why: the lattice puts the spread of W's first cell at 0, and t of them at S = 0 carry
    ~P(W < h)^t (6e-6 an epoch at sigma 0.6, t 5) to loss +inf, which left the add direction's
    eps +inf at delta 1e-8 over 50 epochs where its finite part gives 76.34.

    Why it is an upper bound: every add-direction δ is a decreasing convex function h(S) of each
    epoch's S (the others fixed: (1 - c S)_+ averaged), and such h are non-negative mixtures of
    (a - S)_+ and constants, so a measure S* of at least S's mass with Psi*(a) = E(a - S*)_+ >=
    Psi(a) = E(a - S)_+ at every a gives a larger δ.  Psi(a) is at most the lattice law's
    Psi_lat(a) (larger in convex order, entries rounded up) and at most E(a - M)_+, M = max_i W_i
    <= S, whose CDF Phi((log x + s^2/2) / s)^t is exact (the integral by upper Riemann sums on a
    geometric grid).  S* is the greatest convex minorant of the smaller of the two at the points
    0, the grid below h (every 20th) and the lattice points up to k0 h: convex and at or above
    Psi at each point (Psi is convex and below both), linear between them -- above Psi there too.
    At k0 h it is Psi_lat, and the lattice's own masses continue it (checked: the atom there is
    non-negative, else None)."""
    k0 = min(SMALL_POINTS, up.size - 2)
    if k0 < 2:
        return None
    mu = -0.5 * s * s
    x_min = math.exp(min(mu - 40.0 * s, math.log(h) - 1.0))  # (P(W < x_min) below ~1e-300)
    g = np.geomspace(x_min, k0 * h, int(math.log(k0 * h / x_min) / math.log(SMALL_RATIO)) + 2)
    cdf = np.exp(t * log_ndtr((np.log(g) - mu) / s))  # P(M <= g)
    psi_m = np.concatenate(([g[0] * cdf[0]], g[0] * cdf[0] + np.cumsum(cdf[1:] * np.diff(g)))) * (1.0 + 1e-8)
    c = np.cumsum(up[:k0 + 1])
    lat_x = np.arange(1, k0 + 1) * h
    psi_lat = h * np.cumsum(c[:k0]) * (1.0 + 4 * (k0 + 4) * U)  # Psi_lat(k h), k = 1 .. k0
    # Psi_M at the lattice points: the grid's value at or above each (Psi_M is increasing)
    at = np.minimum(np.searchsorted(g, lat_x * (1.0 - 1e-12)), g.size - 1)
    y_lat = np.minimum(psi_lat, psi_m[at])
    y_lat[-1] = psi_lat[-1]
    below = g < h
    xs = np.concatenate(([0.0], g[below][::20], lat_x))
    ys = np.concatenate(([0.0], psi_m[below][::20], y_lat))
    hull = _lower_hull(xs, ys)
    hx, hy = xs[hull], ys[hull]
    slopes = np.diff(hy) / np.diff(hx)
    if hx[-1] != lat_x[-1] or np.any(np.diff(slopes) < 0):
        return None
    atom = float(c[k0]) - float(slopes[-1])  # (the lattice's slope after k0 h, less the hull's)
    if atom < 0.0:
        return None
    ms = np.concatenate(([slopes[0]], np.diff(slopes)))  # (at hx[:-1]: each vertex's jump in slope)
    return k0, atom, hx[:-1], ms * (1.0 + 1e-12)


def _lower_hull(x: np.ndarray, y: np.ndarray) -> list:
    """Indices of the lower convex hull of the points (x increasing), left to right."""
    out: list = []
    for i in range(x.size):
        while len(out) >= 2:
            a, b = out[-2], out[-1]
            if (y[b] - y[a]) * (x[i] - x[a]) >= (y[i] - y[a]) * (x[b] - x[a]):
                out.pop()
            else:
                break
        out.append(i)
    return out


def add_law(up: np.ndarray, first: int, C: int, h: float, s: float, t: int, tail: float):
    """(first', masses, ``small_sums``' atoms or None, x_top) of the add direction's law of S: the
    lattice of C entries whose non-zero ones are ``up`` from entry ``first`` (zero elsewhere),
    with its smallest sums re-placed where ``small_sums`` applies, as masses from entry first'
    on; and the least sum x_top at which the law's mass below passes ``tail`` (the add grid's
    top is at loss log(t / x_top); what lies above goes to +inf)."""
    head = np.zeros(min(SMALL_POINTS + 2, C))  # (the entries ``small_sums`` reads)
    n = max(0, min(head.size - first, up.size))
    head[first:first + n] = up[:n]
    small = small_sums(head, h, s, t)
    if small is None:
        i = int(np.searchsorted(np.cumsum(up), tail, side="right"))
        i_top = C if i == up.size else first + i  # (the zeros around the entries: at or below tail)
        return first, up, None, min(max(i_top, 1), C - 1) * h
    k0, atom, xs, ms = small
    # the entries from k0 on, the smallest sums' place taken by the atom at k0 (zeros before it)
    out = np.zeros(max(first + up.size, k0 + 1) - k0)
    skip = max(0, k0 - first)
    if skip < up.size:
        out[first + skip - k0:first + up.size - k0] = up[skip:]
    out[0] = atom
    cum = np.cumsum(ms)
    i = int(np.searchsorted(cum, tail, side="right"))
    if i < xs.size:
        return k0, out, small, float(xs[max(i, 1)]) if xs.size > 1 else k0 * h
    rest = float(cum[-1]) + np.cumsum(out)
    i = int(np.searchsorted(rest, tail, side="right"))
    i = C - k0 if i == rest.size else i
    return k0, out, small, (k0 + min(i, C - k0 - 1)) * h


def place_atoms(xs: np.ndarray, ms: np.ndarray, t: int, step: float, j_lo: int, n: int, pess: np.ndarray) -> float:
    """Adds atoms of Q-mass ms at sums S = xs (``small_sums``' off-lattice ones, ``place_out``'s) to
    the add direction's upper masses ``pess`` at loss log(t / x) rounded up to the grid
    (pessimistic; beyond the top and at x = 0: returned, the caller's +inf mass)."""
    with np.errstate(divide="ignore"):
        j = np.ceil(np.log(t / xs) / step + 1e-6) - j_lo  # (x = 0: +inf)
    on = j < n
    np.add.at(pess, np.maximum(j[on], 0).astype(np.int64), ms[on])
    return float(np.sum(ms[~on]))


#: Rungs of ``place_out``: the others' sum R at its mean less k RUNG_SD of its sd, k = 1, 2, ...,
#: until the Chernoff bound on R below the rung is under RUNG_REST (the rest at W_max, mostly past the
#: grid's top: +inf), at most RUNGS of them (100 sd).
RUNG_SD, RUNG_REST, RUNGS = 0.5, 1e-30, 200


def place_out(q_out: float, w_max: float, wins, t: int, step: float, j_lo: int, n: int, pess: np.ndarray) -> float:
    """Adds the add direction's truncated Q-mass ``q_out`` ("some W_i > W_max", union bound) to
    its upper masses ``pess``; returns the part above the grid (the caller's +inf mass).  On that
    event S = W_i + R > W_max + R, R the other t - 1 coordinates' sum (independent of W_i), so the
    loss log(t / S) is below log(t / (W_max + R)).  With T_k >= Q(R < r_k) at rungs r_1 > r_2 >
    .. (``wins.below``, Chernoff; made non-increasing), the mass q_out (T_{k-1} - T_k) (T_0 = 1)
    has R >= r_k and goes to log(t / (W_max + r_k)) rounded up, the rest q_out T_K to
    log(t / W_max): a law of R stochastically below R's, so the losses only rise.  (All of q_out
    went to log(t / W_max), past the grid's top, and so to the top bin -- the top is where the
    lattice's own mass below passes the budget, and R below it was left uncharged: sound only up
    to that -- and at sigma 0.9968, t 2026, 3 epochs, δ 2.6e-9 its 2.3e-7 an epoch set the upper
    end, 0.2793 for a lower 0.2761.)"""
    t1 = t - 1
    mean, sd = t1 * wins.mean, math.sqrt(t1) * wins.sd
    ks = np.arange(1, RUNGS + 1)
    rs = mean - RUNG_SD * sd * ks
    rs = rs[rs > 0.0]
    q_w = 1.0 if q_out >= 1.0 else q_out / t  # (>= P(W > W_max): q_out is t P(W > W_max) rounded up, or 1)
    tails = np.minimum.accumulate(wins.below(t1, rs, q_w, w_max)) if t1 > 0 and rs.size else np.zeros(0)
    keep = int(np.searchsorted(-tails, -RUNG_REST, side="right")) + 1  # (rungs down to the first under RUNG_REST)
    rs, tails = rs[:keep], tails[:keep]
    prev = np.concatenate(([1.0], tails[:-1]))
    xs = np.concatenate((w_max + rs, [w_max]))
    ms = np.concatenate((np.maximum(prev - tails, 0.0), [tails[-1] if tails.size else 1.0])) * q_out * (1.0 + 1e-12)
    return place_atoms(xs, ms, t, step, j_lo, n, pess)
