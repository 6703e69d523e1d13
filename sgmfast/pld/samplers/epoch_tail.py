"""One balls-in-bins epoch's heavy tail in closed form: the coordinate that holds the example.

Under P (remove direction) the example's step is the coordinate i whose W_i = e^{(2 y_i - 1) /
(2 sigma^2)} has the shifted law, log W_i ~ N(s^2/2, s^2) (s = 1/sigma), and S = W_i + R with R
the sum of the t - 1 others (unshifted, independent of W_i).  The lattice of ``balls_in_bins``
carries the event "every W_j <= W_max"; what it cuts is

* exactly one coordinate above W_max, the others cut: the example's own (B = {W_i > W_max}, the
  loss log((W_i + R) / t) with W_i's shifted law in closed form) or another's (W_j's unshifted
  law, the example's coordinate among the others).  Both are put on the loss grid from one law of
  the others' sum (``epoch_sums``: taken from the epoch's own lattice of S, in increasing convex
  order, which the composed δ respects on this event) instead of charging the P-mass at +inf
  (for sigma below ~0.6 that was above delta and left the upper bound +inf);
* two coordinates above W_max, the others cut (the example's and one of the t - 1 others, or two
  of the others): S <= 2 M + R for M the larger of the two, whose law is closed form too
  (``_two_above``, with R below the stochastic rungs below; their P-mass was charged at +inf,
  and its budget kept W_max -- and the lattice's spacing -- high).

Two or three coordinates above W_max: ``_two_above``.  Four are charged at +inf by the caller
(``four_above``).

Upper bound: at each point r of ``epoch_sums.upper_sums`` the P'-mass of W_i > W_max goes to
log((W_i + r) / t) and the Q-mass of W_j > W_max, times r, the same way, rounded up on the grid
(``_kernels.pld.allocation_tail.tail_bins``).

Lower bound: the mechanism that reports each coordinate's lattice cell for W <= W_max (the
lattice's lower law, ``w_lower``) and W itself above: post-processing, so its δ is at most the
true one; the others' reported sum from ``epoch_sums.lower_sums``, each point's masses rounded
down and merged with the lattice's atoms (``_merge``).

The rungs (``rungs``, for two above W_max): a law R* >= R in the usual stochastic order, rungs
r_0 < .. < r_K = (t - 1) W_max with P(R* >= r_k) = T(r_{k-1}), T an upper bound on P(R > r) --
the least of Chernoff on a convex-order majorant of the cut lattice law (whose MGF is at least the
true one) and, for a heavy-tailed W, Chernoff on the coordinates truncated at M plus the union
bound on one above M (``_truncated_tails``).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy.special import ndtri

from ..._kernels.pld import allocation as ka
from ..._kernels.pld import allocation_tail as kt
from ..._kernels.pld import chernoff as kc
from ..._work import PER_BIN_DISCRETISE, apart, charge
from ..common import SPLIT_MIN, U, dot, split_pool, two_cores
from . import epoch_sums
from .epoch_chernoff import GIVEN_TRUNCATIONS, TRUNCATIONS, _chernoff_over, _table, _truncation_points, coarse_majorant

def rungs(w: np.ndarray, h: float, t1: int, w_max: float, shifted: bool = False, s: float | None = None):
    """(r, weight): the stochastic upper bound R* of the sum of t1 cut lattice variables (masses
    w at k h, each <= W_max; with ``shifted`` one of them has the P-law x w(x) instead): rungs r
    and P(R* = r) (module notes).  ``_chernoff_over(w, h, t, cap)`` bounds (E[S / t; S > cap],
    P(S > cap)) for a sum S of t; the first is P(S' > cap) for S' = one P-law variable + t - 1
    others (E[S / t; .] = E[W_1; .] by symmetry).  With ``s`` (log W's sd) the tails also take ``_truncated_tails``."""
    wc, H = coarse_majorant(w, h)
    x = np.arange(wc.size) * H
    m1, m2, m3 = dot(wc, x), dot(wc, x * x), dot(wc, x * x * x)
    if shifted:
        mu = (t1 - 1) * m1 + m2
        sd = math.sqrt(max((t1 - 1) * (m2 - m1 * m1) + m3 - m2 * m2, 0.0))
    else:
        mu, sd = t1 * m1, math.sqrt(max(t1 * (m2 - m1 * m1), 0.0))
    top = t1 * w_max
    r = [mu + 0.5 * k * sd for k in range(1, 13)]
    if s is not None:  # (the truncated bounds resolve R near its mean: ``_truncated_tails``)
        r += [mu * (1.0 + 0.5 ** j) for j in range(1, 14) if mu * 0.5 ** j < 0.5 * sd]
    g = 8.0 * sd
    while mu + g < top and len(r) < 40:
        r.append(mu + g)
        g *= 2.0
    r = sorted({v for v in r if v < top}) + [top]
    if len(r) < 2:
        return np.asarray(r), np.ones(1)
    tab = _table(wc, H, t1 + 1)
    p_b, q_b = tab.bounds(wc.size - 1, 0.0, 0.0, t1, r[:-1])
    tails = p_b if shifted else q_b
    if s is not None:
        tails = np.minimum(tails, _truncated_tails(wc, H, t1, np.asarray(r[:-1]), m1, s, w_max, shifted, tab=tab))
    tails = np.minimum.accumulate(np.concatenate((tails, [0.0])))
    prev = np.concatenate(([1.0], tails[:-1]))
    weight = (prev - tails) * (1.0 + 1e-12)
    keep = weight > 0
    return np.asarray(r)[keep], weight[keep]


def add_tail(epoch, step: float, j_lo: int, n: int, pess: np.ndarray, frac: np.ndarray, amass: np.ndarray,
             tail: float) -> float:
    """Adds "exactly one coordinate above W_max" to the remove direction's upper masses ``pess``
    and lower atoms (frac, amass: one atom a bin, merged with the lattice's), and two above to the
    upper; returns the upper mass above the grid (the caller's +inf mass).  (The others' sum R from
    the epoch's lattice, ``epoch_sums``: at each of its points r of Q-mass m, the example's own
    coordinate above W_max with P'-mass m and another's with Q-mass r m.)  ``tail``: the truncation
    budget, TAIL_FLOOR of which the sweeps may charge (``_sweeps``)."""
    s, w_max, t = epoch.s, epoch.w_max, epoch.t
    rel = epoch_sums.spacing(s, w_max, step, t)
    # (the lattices' non-zero entries, from their first)
    r_up, m_up, scale = epoch_sums.upper_sums(epoch.up, epoch.up_o, epoch._wu, epoch.h, t, w_max, rel)
    r_lo, m_lo = epoch_sums.lower_sums(epoch.lo, epoch.lo_o, epoch.h, t, epoch.eta, epoch.rho, w_max, rel)
    # (the others' sum outside the lattice's kept entries -- Q-mass at most q_cut + q_over, and
    # E_Q[R; there] at most E_Q[S; there] = t (p_cut + p_over): the example's coordinate above W_max
    # with that Q-mass at t W_max, the most ``upper_sums``' stand-in for R (the lattice sum of t
    # coordinates, each at most W_max, shifted down by a mean) can be there -- moving its mass up
    # keeps it above R in increasing convex order; at +inf, 3.6e-14 an epoch held sigma 0.42,
    # t 10^4, 200 epochs, δ 1e-12 at eps = +inf --, and another's above W_max with that weight,
    # there too (at +inf, 4.6e-13 an epoch held sigma 0.4, t 1000, 200 epochs, δ 1e-12 at +inf
    # once W_max was set by four coordinates above it, not three, and the cap came down with it).
    # Where the epoch has a ladder above the cap (``over_ladder``), S > cap is at its rungs instead:
    # its Q-masses for the example's coordinate, t times its P-masses (E_Q[S; S > y] = t P(S' > y))
    # for another's -- stochastically above the stand-in there, and both terms grow with R.  At t W_max,
    # 2.5e-7 of P-mass above the cap set sigma 0.4, t 10^4, one epoch, δ 1e-12 at log W_max: [11.026, 11.329])
    top_r = float(t * w_max) * (1.0 + 4 * U)
    ladder = epoch.ladder
    at_top_q, at_top_p = (epoch.q_cut, epoch.p_cut) if ladder is not None else (epoch.q_cut + epoch.q_over, epoch.p_out)
    rs, qs, ps = (np.array([top_r]), np.array([at_top_q]), np.array([at_top_p])) if ladder is None else (
        np.append(np.minimum(ladder[0], top_r), top_r), np.append(ladder[2], at_top_q), np.append(ladder[1], at_top_p))
    # the upper's terms (shift, r, weight): the example's coordinate (P'-law, shift 1) and another's
    # (Q-law, weight r m), outside the lattice as above, then at the points of ``upper_sums``
    r_all = np.concatenate((rs, rs, r_up, r_up))
    w_all = np.concatenate((qs * scale * (1.0 + 1e-9), t * ps * scale * (1.0 + 1e-9), m_up,
                            r_up * m_up * (1.0 + 4 * U)))
    sh_all = np.repeat([1.0, 0.0, 1.0, 0.0], [rs.size, rs.size, r_up.size, r_up.size])
    # the lower's, at the points of ``lower_sums``
    r_low = np.concatenate((r_lo, r_lo))
    w_low = np.concatenate((m_lo, r_lo * m_lo * (1.0 - 4 * U)))
    sh_low = np.repeat([1.0, 0.0], r_lo.size)
    # (each upper sweep stops where its weight times W's survival falls below ``floor``: all of them
    # charge at most TAIL_FLOOR of the truncation budget at +inf.  Sweeping on to the grid's top took
    # sigma 9.5, t 24, 11 epochs 1.9 s for the bins' masses of ~1e-120.  The lower sweeps run to the
    # top: dropped there, the last bins' tiny masses left the optimistic step's convex-order minorant
    # without atoms at the pinned top, and its fallback, the contractions, read sigma 2.998, t 3,
    # δ 2.4e-4 0.14 % lower)
    floor = TAIL_FLOOR * tail / max(r_all.size, 1)
    beyond = _sweeps(s, w_max, t, r_all, w_all, sh_all, step, j_lo, n, True, pess, np.empty(0), floor)
    if t > 1:
        beyond += _two_above(epoch, step, j_lo, n, pess)
    low, low_u = np.zeros(n), np.zeros(n)
    _sweeps(s, w_max, t, r_low, w_low, sh_low, step, j_lo, n, False, low, low_u, 0.0)
    _merge(low, low_u, frac, amass, step)
    return beyond


#: The share of the truncation budget ``add_tail``'s sweeps may charge in all where they stop early.
TAIL_FLOOR = 1e-3
#: Where the lower sweeps stop (``_kernels.pld.allocation_tail.Z_ZERO``): every bin past it holds
#: exactly 0, so nothing there is read.  Swept to the grid's top, sigma 1000, t 6, 2 epochs read
#: 8,556 sweeps of zeros: 9.7 s of an 11 s query (``tests/test_pld_allocation_tail.py`` checks the
#: bins are the same).
Z_ZERO = kt.Z_ZERO


def _sweeps(s, w_max, t, r, w, shift, step, j_lo, n, upper, out, out_u, floor):
    """``tail_bins`` for each (r, weight, shift), each sweep stopped where its weight times W's
    survival is at most ``floor`` (the mass above: +inf for ``upper``, dropped otherwise; a weight
    at most ``floor`` is not swept: charged whole, or dropped); returns the +inf mass.  Charges
    a pass a bin swept."""
    c = (0.5 - shift) * s * s
    with np.errstate(divide="ignore"):
        z_stop = -ndtri(np.minimum(floor / np.maximum(w, 1e-300), 1.0))  # (+inf where floor is 0)
    if not upper:  # (past Z_ZERO every bin's mass is exactly 0: the stop changes no bit)
        z_stop = np.minimum(z_stop, Z_ZERO)
    swept = w > floor
    first = (np.log(w_max + r) - math.log(t)) / step - j_lo
    with np.errstate(over="ignore", divide="ignore"):  # (unswept terms: not read)
        last = (np.log(np.exp(np.minimum(z_stop * s - c, 700.0)) + r) - math.log(t)) / step - j_lo
    spans = np.maximum(np.clip(last, 0.0, n) - np.clip(first, 0.0, n), 1.0)  # (a sweep reads one bin at least)
    charge(PER_BIN_DISCRETISE * float(np.sum(np.where(swept, spans, 0.0))))
    beyond = float(np.sum(w[~swept])) * (1.0 + 1e-12) if upper else 0.0
    for i in np.flatnonzero(swept):
        beyond += kt.tail_bins(s, float(shift[i]), w_max, float(t), float(r[i]), float(w[i]), step, j_lo, n, upper, out,
                               out_u, float(z_stop[i]))
    return beyond


def _merge(low, low_u, frac, amass, step):
    """Each bin's lower tail mass merged with the lattice's atom there."""
    # (each bin's atom and the tail's mass there become one atom at their mean of u = e^{-loss}, a
    # convex-order minorant; u-means and sums rounded up, masses and offsets down: each only lowers
    # δ.  The atom used to go down to its grid point, and below the lattice's top the tail was dropped)
    hit = low > 0.0
    if hit.any():
        a = amass[hit]
        u_old = np.where(a > 0.0, a * np.exp(-np.maximum(frac[hit], 0.0)), 0.0)
        mass = (a + low[hit]) * (1.0 - 4 * U)
        mean_u = (u_old + low_u[hit]) * (1.0 + 16 * U) / mass
        frac[hit] = np.clip(-np.log(mean_u) - 16 * U, 0.0, step)
        amass[hit] = mass


def _two_above(epoch, step: float, j_lo: int, n: int, pess: np.ndarray) -> float:
    """Two coordinates above W_max, the others cut (module notes): the example's and one of the
    t - 1 others, the rest's sum below the unshifted rungs (t - 1 cut variables bound t - 2); or
    two of the t - 1 others, the rest -- the example's cut coordinate and t - 3 others -- below the
    shifted rungs.  On each, S <= 2 M + R for M the larger of the two: its P-mass is put at
    log((2 M + r) / t) per rung (``two_tail_bins``; union bounds over the choices).  Three above
    W_max likewise, S <= 3 M + R (``three_tail_bins``): the example's and two of the others over
    the unshifted rungs, or three of the others over the shifted ones.  Returns the mass above the
    grid."""
    s, w_max, t = epoch.s, epoch.w_max, epoch.t
    beyond = 0.0
    for kernel, cases in ((kt.two_tail_bins, ((False, t - 1), (True, math.comb(t - 1, 2)))),
                          (kt.three_tail_bins, ((False, math.comb(t - 1, 2)), (True, math.comb(t - 1, 3))))):
        for shifted, choices in cases:
            if choices <= 0:
                continue
            r_all, w_all = epoch.tail_rungs(shifted)
            charge(PER_BIN_DISCRETISE * n * r_all.size)
            for r, wgt in zip(r_all, w_all):
                beyond += kernel(s, 0.0 if shifted else 1.0, w_max, float(t), float(r),
                                 float(wgt) * float(choices) * (1.0 + 1e-12), step, j_lo, n, pess)
    return beyond


def four_above(s: float, t: int, w_max: float) -> float:
    """The P-mass of four coordinates above W_max (charged at +inf by the caller, union bounds):
    the example's and three of the t - 1 others, or four of the others."""
    q_w, p_w = math.exp(ka.log_sf(w_max, s, 0.0)), math.exp(ka.log_sf(w_max, s, 1.0))
    return (math.comb(t - 1, 3) * p_w * q_w ** 3 + math.comb(t - 1, 4) * q_w ** 4) * (1.0 + 1e-9)


def _truncated_tails(wc: np.ndarray, H: float, t1: int, caps: np.ndarray, m1: float, s: float, w_top: float,
                     shifted: bool = False, count: int = TRUNCATIONS, tab=None) -> np.ndarray:
    """Upper bounds on P(R > cap) for R the sum of t1 cut variables of the convex-order majorant wc
    (spacing H; with ``shifted`` one of them of P-law), each the least over truncation points M
    of P(some W_j > M) + Chernoff for the sum of the W_j 1{W_j <= M}: R > cap needs one or the
    other.  The MGF of W 1{W <= M} is at most wc's terms at points <= M (a point's mass comes
    from W values within a spacing of it, split in mean; those at most M are split between points
    at most M, and the others' shares only add) plus P(W > M) at 0; the P-law one's, E[W e^{lam W};
    W <= M] + P'(W > M), likewise.  A heavy-tailed W makes the plain Chernoff bound loose by orders
    (sigma 0.4, t 10^4: P(R > 4.5 E R) <= 0.15 plain)."""
    best = np.ones(caps.size)
    tab = _table(wc, H, t1 + 1) if tab is None else tab
    for q_m, p_m, k in _truncations(wc, H, t1, m1, s, w_top, count):
        union = ((t1 - 1) * q_m + p_m) if shifted else t1 * q_m
        p_b, q_b = tab.bounds(k, q_m, p_m, t1, caps)
        chern = p_b if shifted else q_b
        best = np.minimum(best, chern + union * (1.0 + 1e-12))
    return best


def _truncations(wc, H, t, m1, s, w_top: float, count: int = TRUNCATIONS):
    """(q_M, p_M, k) at ``count`` points M = k H from 8 E[W] to the top where t q_M < 1: P(M < W < w_top)
    and P'(M < W < w_top) for W cut at w_top (closed forms, rounded up; they also bound the
    lattice variables' P(X > M) and E[X; X > M]: X > M only comes from the cells at and above M,
    M being a lattice point, and on such a cell E[X; X > M] <= E[W]); the truncated majorant is
    wc's terms at points <= M with q_M added at 0 (at least the MGF of W 1{W <= M},
    ``_truncated_tails``; ``_Table.bounds(k, q_M, ..)``).  (Without the cut, t P(W > w_top)
    stayed in every bound: sigma 0.4, t 10^4, P(R > r) >= 5.2e-6 at any r.)"""
    q_top = math.exp(float(ka.log_sf(w_top, s, 0.0))) * (1.0 - 1e-9)
    p_top = math.exp(float(ka.log_sf(w_top, s, 1.0))) * (1.0 - 1e-9)
    for k in _truncation_points(wc, H, m1, count):
        q_m = min(1.0, max(0.0, math.exp(float(ka.log_sf(k * H, s, 0.0))) * (1.0 + 1e-9) - q_top) * (1.0 + 4 * U))
        p_m = min(1.0, max(0.0, math.exp(float(ka.log_sf(k * H, s, 1.0))) * (1.0 + 1e-9) - p_top) * (1.0 + 4 * U))
        if t * q_m >= 1.0:
            continue
        yield q_m, p_m, int(k)


def over_cap(w: np.ndarray, h: float, t: int, cap: float, w_max: float, s: float, need: float = math.inf):
    """(P(S' > cap), Q(S > cap)) for S the sum of t lattice variables cut at w_max (masses w) and
    S' the same with one of P-law -- the P-mass E_Q[S / t; S > cap] --, each the least of plain
    Chernoff (``_chernoff_over``) and, at each truncation point M (``_truncations``), of two
    bounds: Chernoff on the truncated coordinates plus the union bound on one above M
    (``_truncated_tails``); and, with x0 = cap - w_max > 0, "two above M (union bound), or one,
    i, above M and the others -- all at most M, so their sum is their truncated sum -- above x0
    (as X_i <= w_max; independent of X_i: P(X_i > M) times Chernoff on the t - 1 truncated), or
    none (Chernoff on the t truncated)"; with P-law X_1 the terms are p_M (t - 1) q_M + C(t - 1, 2)
    q_M^2 and p_M Q(others > x0) + (t - 1) q_M P(others' > x0).  A heavy tail leaves plain
    Chernoff loose by orders: sigma 0.5, t 100, 2e-6 of P-mass above the lattice.  Where the
    P-bound is still above ``need``, also by conditioning on one coordinate (``_given_one``)."""
    p, q = _chernoff_over(w, h, t, cap)
    wc, H = coarse_majorant(w, h)
    m1 = dot(wc, np.arange(wc.size) * H)
    x0 = float(cap) - w_max
    tab = _table(wc, H, t)
    for q_m, p_m, k in _truncations(wc, H, t, m1, s, w_max):
        p_all, q_all = (float(v[0]) for v in tab.bounds(k, q_m, p_m, t, [float(cap)]))
        p = min(p, (p_all + (t - 1) * q_m + p_m) * (1.0 + 1e-12))
        q = min(q, (q_all + t * q_m) * (1.0 + 1e-12))
        if x0 <= 0.0 or t < 2:
            continue
        p_oth, q_oth = (float(v[0]) for v in tab.bounds(k, q_m, p_m, t - 1, [x0]))
        two_q = 0.5 * t * (t - 1) * q_m * q_m
        two_p = p_m * (t - 1) * q_m + 0.5 * (t - 1) * (t - 2) * q_m * q_m
        q = min(q, (two_q + t * q_m * q_oth + q_all) * (1.0 + 1e-12))
        p = min(p, (two_p + p_m * q_oth + (t - 1) * q_m * p_oth + p_all) * (1.0 + 1e-12))
    if p > need and t >= 2:
        p_one, q_one = _given_one(w, h, t, cap, wc, H, m1, s, tab)
        p, q = min(p, p_one), min(q, q_one)
    return min(p, 1.0), min(q, 1.0)


#: The ladder's rungs above the cap (``over_ladder``), in cap: a heavy tail's P-mass above the
#: cap sits just above it (sigma 0.45, t 1065: 6e-10 above the cap, 3e-12 above 1.1 cap).
LADDER = (1.02, 1.05, 1.1, 1.25, 1.5, 2.0, 3.0, 5.0)


def over_ladder(w: np.ndarray, h: float, t: int, cap: float, w_max: float, s: float, p_cap: float, need: float,
                q_cap: float):
    """The P-mass above the cap, ``p_cap`` (>= P(S' > cap), ``over_cap``), as atoms at finite S
    instead of +inf: (xs, masses, q_masses), the masses summing to p_cap.  With B_k the running least of
    p_cap and ``over_cap`` at the rungs x_k = cap LADDER[k], the atom at x_k carries B_{k-1} - B_k
    (what lies in (x_{k-1}, x_k] is put at its top) and the last, at t x_max, the rest: S' of the
    lattice law is at most t x_max (x_max = (w.size - 1) h, every coordinate's top).  So the atoms'
    law is stochastically above the lattice law's S' on S' > cap (its survival is B_{k-1} >=
    P(S' > y) on [x_{k-1}, x_k)), and the loss log(S/t) only grows: an upper bound may place it so.
    Stops where B_k <= ``need``, the rest at the top.  ``q_masses`` do the same for the Q-mass
    above the cap, ``q_cap`` (>= Q(S > cap)), from ``over_cap``'s Q-bounds at the same rungs
    (``add_tail`` puts the others' sum there; no default: 0 would drop that Q-mass from the upper bound)."""
    top = t * (w.size - 1) * h
    xs, masses, q_masses, left, left_q = [], [], [], p_cap, q_cap
    _table(*coarse_majorant(w, h), t, charged=False)  # (built here, not twice on two threads: each use charges it)
    rungs = [cap * f for f in LADDER if cap * f < top]
    # the rungs' bounds two at a time, the second on a helper thread (two cores), each one's work
    bounds = []  # counted apart, charged as the loop reads it: the same sums in the same order on one core
    for k, x in enumerate(rungs):
        if left <= need:
            break
        if k == len(bounds):
            pair = k + 1 < len(rungs) and two_cores()
            nxt = split_pool().submit(apart, over_cap, w, h, t, rungs[k + 1], w_max, s, need) if pair else None
            bounds.append(apart(over_cap, w, h, t, x, w_max, s, need))
            if nxt is not None:
                bounds.append(nxt.result())
        (p_x, q_x), units = bounds[k]
        charge(units)
        b, b_q = min(left, p_x), min(left_q, q_x)
        xs.append(x)
        masses.append(left - b)
        q_masses.append(left_q - b_q)
        left, left_q = b, b_q
    if left > 0.0 or left_q > 0.0:
        xs.append(top)
        masses.append(left)
        q_masses.append(left_q)
    return np.array(xs), np.array(masses), np.array(q_masses)


def place_ladder(ladder, t: int, step: float, j_lo: int, pess: np.ndarray) -> float:
    """Adds ``over_ladder``'s atoms to the remove direction's upper masses at their losses
    log(x / t), rounded up to the grid (x raised 1e-12 relative first, above the log's and the
    division's rounding); returns the mass above the grid's top (the caller's +inf mass)."""
    beyond = 0.0
    for x, m in zip(ladder[0], ladder[1]):
        i = math.ceil(math.log(x * (1.0 + 1e-12) / t) / step) - j_lo
        if i < pess.size:
            pess[max(i, 0)] += m * (1.0 + 1e-12)
        else:
            beyond += m * (1.0 + 1e-12)
    return beyond


#: Points r of ``_given_one``'s tail bounds on the others' sum (twice this many: geometric in r and
#: in cap - r; its truncation points: ``epoch_chernoff.GIVEN_TRUNCATIONS``).
GIVEN_RS = 32
#: Bins of the one coordinate above M in ``_sum_tails``.
GIVEN_BINS = 16


def _given_one(w, h, t, cap, wc, H, m1, s, tab=None):
    """(P, Q) bounds of ``over_cap`` by conditioning on the first coordinate X (masses w at k h):
    S > cap is R > cap - X for R the sum of the t - 1 others, independent of X, so
    Q(S > cap) = sum_x w(x) P(R > cap - x) and the P-mass E[X; S > cap] = sum_x x w(x) P(R > cap - x)
    (symmetry, ``_chernoff_over``).  P(R > y) <= T(r_j) for the largest point r_j <= y of a
    geometric grid from cap - x_max, T the least of plain Chernoff and ``_truncated_tails`` (on the
    coarse majorant wc, which bounds R's MGF) made non-increasing (P(R > r) is); 0 above the
    others' largest sum (t - 1) x_max.  Sums of non-negative products: (n + 4) u relative more.
    (The split of ``over_cap`` at W_max charged every X as if at the top; a heavy tail's X
    rarely is: sigma 0.4, t 10^4, 3.7e-6 of P-mass above the lattice against delta 1e-5.)"""
    n, t1 = w.size, t - 1
    x = np.arange(n) * h
    x_max = (n - 1) * h
    r0, top = max(float(cap) - x_max - h, H), t1 * x_max
    if r0 >= top:
        return 0.0, 0.0
    # (geometric in r, and in x = cap - r: most of X's P-mass sits at x far below x_max, where
    # P(R > cap - x) falls fast -- sigma 0.5, t 100: 1.1e-8 on r alone, 3.5e-9 with both)
    rs = np.concatenate((np.geomspace(r0, float(cap), GIVEN_RS), float(cap) - np.geomspace(h, x_max, GIVEN_RS)))
    rs = np.unique(rs[(rs >= r0) & (rs <= top)])
    tails = np.minimum.accumulate(_sum_tails(wc, H, t1, rs, m1, s, x_max, _table(wc, H, t) if tab is None else tab))
    bound = np.empty(n)
    kc.step_bound(rs, np.ascontiguousarray(tails, dtype=np.float64), float(cap), x, float(top), bound)
    up = (1.0 + (n + 4) * U) * (1.0 + 1e-12)
    return min(1.0, float(np.sum(x * w * bound)) * up), min(1.0, float(np.sum(w * bound)) * up)


def _sum_tails(wc, H, t1, rs, m1, s, w_top, tab=None):
    """Upper bounds on P(R > r) at each r of ``rs`` for R the sum of t1 variables cut at w_top
    (majorant wc): the least of plain Chernoff and, at each truncation point M, of "two above M
    (union), or exactly one, X_i, above M with the others -- all at most M -- summing past
    r - X_i, or none, with the truncated sum above r" (``over_cap``'s split for the others' sum,
    X_i's range M .. w_top cut into GIVEN_BINS geometric bins, each taken at its top: the bins'
    masses P(e_k < W < e_k+1) times Chernoff on the t1 - 1 others' truncated sum at r - e_k+1).
    The Chernoff bounds are ``tab``'s (default ``_table(wc, H, t1 + 1)``)."""
    tab = _table(wc, H, t1 + 1) if tab is None else tab
    best = tab.bounds(wc.size - 1, 0.0, 0.0, t1, rs)[1]

    def sf(x, up):  # (P(W > x), rounded up or down)
        return math.exp(float(ka.log_sf(x, s, 0.0))) * ((1.0 + 1e-9) if up else (1.0 - 1e-9))

    for q_m, _, k in _truncations(wc, H, t1, m1, s, w_top, GIVEN_TRUNCATIONS):
        q_all = tab.bounds(k, q_m, 0.0, t1, rs)[1]
        best = np.minimum(best, (q_all + t1 * q_m) * (1.0 + 1e-12))
        m = k * H
        if t1 < 2 or m >= w_top or q_m <= 0.0:
            continue
        edges = np.geomspace(m, w_top, GIVEN_BINS + 1)
        mass = np.array([max(0.0, sf(a, True) - sf(b, False)) for a, b in zip(edges[:-1], edges[1:])])
        ys = np.geomspace(H, max(float(rs.max()), 2.0 * H), 2 * GIVEN_RS)  # (the others' tail, a step function)
        q_oth = np.minimum.accumulate(tab.bounds(k, q_m, 0.0, t1 - 1, ys)[1])
        y = rs[:, None] - edges[None, 1:]
        k = np.searchsorted(ys, y, side="right") - 1
        tail = np.where(k >= 0, q_oth[np.maximum(k, 0)], 1.0)
        one = t1 * np.einsum("ij,j->i", tail, mass) * (1.0 + (GIVEN_BINS + 4) * U)
        two = 0.5 * t1 * (t1 - 1) * q_m * q_m
        best = np.minimum(best, (two + one + q_all) * (1.0 + 1e-12))
    return best


def top_loss(s: float, t: int, tail: float, r: float) -> float:
    """A loss above which B's P'-mass is below ``tail``: the grid's top for the tail."""
    z = float(-ndtri(max(tail, 1e-300)))
    return min(0.5 * s * s + s * z, 700.0) + math.log1p(r / math.exp(min(0.5 * s * s + s * z, 700.0))) - math.log(t)


def least_top(s: float, t: int, tail: float) -> float:
    """The least W_max (to a factor 1.1) at which four coordinates above it -- charged at +inf
    (``four_above``) -- have at most 1000 truncation budgets ``tail`` (1e-4 of δ per epoch at
    the default accuracy).  (Two, then three above it were charged so before ``_two_above`` put
    them on the grid; their budget set the top: sigma 0.434, t 201, 145 epochs, δ 6.5e-9 took
    W_max 5.8e5 and a lattice spacing of 1.1 for E[W] = 1, with an upper end of 1153 at level 0;
    sigma 0.4, t 3, 200 epochs, δ 1e-12 took 5.9e4 for the 300 of t 2.  With W_max cut to 1000 t
    regardless, sigma 0.4, t 2 charged 3.3e-7 there: eps = +inf at delta 1e-12.)"""
    w = 2.0
    for _ in range(8000):
        if four_above(s, t, w) <= 1e3 * tail or w > 1e300:
            return w
        w *= 1.1
    return w


def upper_law(s: float, h: float, K: int) -> np.ndarray:
    """W's upper lattice law on 0, h, .., K h (K cells; ``_kernels.pld.allocation.w_upper``:
    each cell's mass split between its ends keeping its mean, W cut at K h)."""
    mass, off, err = np.empty(K), np.empty(K), np.empty(K)
    if K < SPLIT_MIN or not two_cores():
        ka.lognormal_cells(s, h, K, mass, off, err)
    else:  # (each cell on its own: the upper half on a second thread, the same floats)
        m = K // 2
        fut = split_pool().submit(ka.lognormal_cells_from, s, h, m, K, mass, off, err)
        ka.lognormal_cells_from(s, h, 0, m, mass, off, err)
        fut.result()
    wu = np.empty(K + 1)
    ka.w_upper(h, K, mass, off, err, wu)
    return wu


#: The room above W_max the cap may take (``cap_room``), in W_max, and the lattice points of its estimate.
CAP_ROOMS, ROOM_POINTS = (1.0, 1.25, 1.5, 2.0), 2048


@functools.lru_cache(maxsize=256)
def cap_room(s: float, t: int, w_max: float, var: float, tail: float) -> float:
    """The least room r of CAP_ROOMS for the lattice cap t + r W_max + 12 sd(S) + 1 at which the
    P-mass above it (``over_cap`` on a coarse lattice of ROOM_POINTS, an estimate: the epoch's
    own lattice charges its own) is at most 1000 budgets ``tail`` -- as ``least_top`` allows four
    coordinates above W_max --, else the largest.  A heavy tail at a small budget needs the room:
    sigma 0.631, t 140, δ 4.9e-11 over 41 epochs charged 3.9e-11 an epoch above the cap at r = 1,
    and its upper end was +inf on every lattice (the Gaussian's 116.4 for [15.6, ...])."""
    if t < 2:
        return 1.0
    h = w_max / ROOM_POINTS
    wu = upper_law(s, h, ROOM_POINTS)
    charge(PER_BIN_DISCRETISE * ROOM_POINTS * len(CAP_ROOMS))
    for r in CAP_ROOMS:
        cap = t + r * w_max + 12.0 * math.sqrt(t * var) + 1.0
        if over_cap(wu, h, t, cap, ROOM_POINTS * h, s, 0.0)[0] <= 1e3 * tail:
            return r
    return CAP_ROOMS[-1]
