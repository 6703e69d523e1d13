"""Stage 1: one step of the Poisson-subsampled Gaussian mechanism on the loss grid.

Each direction of a dominating pair is discretised twice on the grid ell_j = j * step
(kernels: ``sgmfast._kernels.pld.bins`` and ``.discretise``):

* pessimistic -- connect-the-dots (Doroshenko et al., PETS 2022, Thm 3.3): every bin's P-mass is
  split between its two grid points keeping its P- and Q-mass; δ(eps) can only grow, also after
  composition.  P-mass below the grid moves up to the lowest point, mass above goes to +inf.
* optimistic -- the convex-order minorant of the bin atoms; δ(eps) can only shrink.  Mass below
  the grid is dropped, mass above moves down to the top point.

Bin masses are normal-CDF differences in log space with a bound on their rounding, inflated
(pessimistic) or deflated (optimistic) by it.  The grid stops where about ``tau`` of P-mass is
left in the far tail (``grid_range``); that mass is accounted as above, never lost.

``hybrid_step`` cuts one step into a core on the fine grid and tails on a coarse grid (spacing
m * step, m a power of two, so shared edges are the same floats) for stages 4 and 5.

For runs of at least ``COARSE_MIN_STEPS`` steps, ``one_step`` bins the far tail -- beyond the
point where about ``TAIL_COARSE * tau`` of P-mass is left -- ``COARSE_M`` times coarser, on every
``COARSE_M``-th grid point (``_coarse_tail``).  Each piece is discretised as above on its own
bins; the pieces partition the loss line at one shared edge (the same float), so their sum is
the discretisation of that partition, pessimistic and optimistic as before (connect-the-dots
holds for bins of any width).  A wider bin spreads its mass further, but only where the composed
loss has a kink inside it: far-tail bins hold ~1e-10 of mass, and the intervals moved by ~1e-8
relative on the workloads (bench/README), for ~40 % fewer bins, the one-step work that
dominates runs of ~1000 steps.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import ndtri

from ..._kernels.pld import bins as kb
from ..._kernels.pld import discretise as kd
from ..._kernels.pld import losses as kl
from ..._work import PER_BIN_DISCRETISE, charge
from . import lattice_shift
from ..common import (ADD, REPLACE, dot, GridTooLarge, bins_cap, SPLIT_MIN, STEP_CACHE, TAU_MIN, TAU_STEP, cache_put,
                     two_cores, split_pool, too_many_bins)

_X_TAU = float(-ndtri(TAU_STEP))  # ~11.46 standard deviations
#: the far tail beyond the point leaving this multiple of tau of P-mass (at most
#: ``TAIL_COARSE_MAX``) is binned ``COARSE_M`` times coarser, where that saves at least
#: ``COARSE_MIN_SAVED`` fine bins (``_coarse_tail``)
TAIL_COARSE = 1e6
TAIL_COARSE_MAX = 1e-9
COARSE_M = 8
COARSE_MIN_SAVED = 512
COARSE_MIN_STEPS = 100  # (``coarse_tail``)


def grid_range(sigma: float, q: float, add, step: float, tau: float = TAU_STEP) -> tuple[int, int]:
    """Grid indices covering one step, leaving about ``tau`` of P-mass beyond the far (long) tail.

    The far tail is the high-loss end of the remove direction and the low-loss end of the add
    direction; what lies beyond the grid is accounted exactly by the discretisation (to +inf or
    moved onto the grid when pessimistic, dropped or moved onto the grid when optimistic).
    """
    x = _X_TAU
    x_far = float(-ndtri(min(0.25, max(tau, TAU_MIN) / q)))
    x_near = float(-ndtri(min(0.25, max(tau, TAU_STEP))))
    if add == REPLACE:
        # P = (1-q) N(0, s^2) + q N(-1, s^2); the loss decreases in z
        lo = kl.replace_loss(sigma * x, sigma, q)
        hi = kl.replace_loss(min(-1.0 - sigma * x_far, -sigma * x_near), sigma, q)
    elif add:
        hi = -kl.remove_loss(-sigma * x, sigma, q)
        lo = -kl.remove_loss(1.0 + sigma * max(x_far, x_near), sigma, q)
    else:
        # both components' tails: at large sigma the (1 - q) N(0) tail outweighs q N(1)'s
        hi = kl.remove_loss(max(1.0 + sigma * x_far, sigma * x_near), sigma, q)
        lo = kl.remove_loss(-sigma * x, sigma, q)
    j_lo, j_hi = math.floor(lo / step), math.ceil(hi / step)
    if j_hi - j_lo + 1 > bins_cap():
        raise too_many_bins(j_hi - j_lo + 1)
    return j_lo, max(j_hi, j_lo + 1)


#: most points of a query's first one-step grids (``affordable_step``: eps(δ), and each group of a
#: δ(eps) query)
FIRST_ONE_STEP_BINS = 1 << 17


def affordable_step(schedule, step: float, tau: float, add) -> float:
    """``step``, or 4, 16, ... (at most 256) times it, until every entry's one-step grid
    (``grid_range``) has at most FIRST_ONE_STEP_BINS points.  The variance rule of
    ``estimates.initial_step`` asks for grids far finer than eps needs where few steps are
    sampled (q ~ 1e-5, sigma ~ 0.6, δ ~ 1e-13: 1.5 million points a step, and the query's whole
    work budget went on one round, [0.28, 0.80] for 14 steps); a coarse first round is cheap, and
    its interval re-centres the tilt of the finer rounds that follow ([0.516650, 0.516715] in
    0.5 s).  A heuristic: the step decides cost and tightness, never soundness."""
    for _ in range(4):
        try:
            n = max(j_hi - j_lo + 1 for j_lo, j_hi in (grid_range(s, q, add, step, tau) for s, q, _ in schedule))
        except GridTooLarge:
            n = math.inf
        if n <= FIRST_ONE_STEP_BINS:
            break
        step *= 4.0
    return step


class OneStep:
    """One direction of one SGM step on the grid: pessimistic masses from index ``j_lo`` and
    +inf mass ``p_inf``; the optimistic masses are built on first use (upper-bound-only
    evaluations never need them)."""

    __slots__ = ("j_lo", "pess", "p_inf", "_step", "_frac", "_amass", "_top", "_opt", "_pieces", "_shifted", "_bulk")

    def __init__(self, j_lo, pess, p_inf, step, frac, amass, top, pieces=None):
        self.j_lo, self.pess, self.p_inf, self._step = j_lo, pess, p_inf, step
        self._frac, self._amass, self._top, self._opt = frac, amass, top, None
        self._pieces = pieces  # (``_coarse_tail``: the pieces it is the sum of, see ``_joined``)
        self._shifted = None  # (d, the masses shifted by d: ``opt_by``)
        self._bulk = None  # (d, bins, knot, mean loss gained) of ``bulk_d``

    @property
    def opt(self) -> np.ndarray:
        opt = self._opt
        if opt is None and self._pieces is not None:
            opt = self._opt = _joined(self._pieces, self.pess.size, False)
        elif opt is None:
            opt = np.empty(self.pess.size)
            kd.optimistic_step(self._step, self._frac, self._amass, self._top, opt)
            if not np.isfinite(opt).all():
                raise FloatingPointError("non-finite optimistic one-step masses")
            self._opt = opt
        return opt

    def masses(self, pess: bool) -> np.ndarray:
        return self.pess if pess else self.opt

    def bulk_d(self) -> float:
        """The shift d that merges the bins holding the step's bulk onto a knot (``lattice_shift``),
        of the merges of 1, 2 or 4 neighbours on either side the one that keeps the most optimistic
        mean loss, if more than the plain masses keep; else 0 (a step joined from pieces: its fine
        piece's).  (All are optimistic; the mean loss lost is the bias a composition accumulates.)"""
        if self._pieces is not None:
            return next(p for p, stride, _ in self._pieces if stride == 1).bulk_d()
        if self._bulk is None:
            bulk, shifted = (0.0, (), -1, 0.0), None
            if lattice_shift.bulk_shift(self._frac, self._amass, self._step)[0] > 0.0:
                cands = [c for c in dict.fromkeys(lattice_shift.bulk_shift(self._frac, self._amass, self._step, reach)
                                                  for reach in (1, 2, 4)) if c[0] > 0.0]
                # (charged before the work: a work limit reached here leaves no state behind)
                charge(lattice_shift.PER_BIN * self.pess.size * len(cands))
                ell = (self.j_lo + np.arange(self.pess.size)) * self._step
                plain = best = dot(self.opt, ell)
                for d, bins, knot in cands:
                    p = lattice_shift.shifted_opt(self._frac, self._amass, self._top, self._step, d, bins, knot)
                    mean = dot(p, ell) - d * float(p.sum())
                    if mean > best:
                        best, bulk, shifted = mean, (d, bins, knot, mean - plain), (d, p)
            self._bulk = bulk
            if shifted is not None:
                self._shifted = shifted
        return self._bulk[0]

    def shift_gain(self) -> float:
        """The mean loss per step ``bulk_d``'s shift keeps over the plain optimistic masses (0 for
        none; a step joined from pieces: its fine piece's)."""
        if self._pieces is not None:
            return next(p for p, stride, _ in self._pieces if stride == 1).shift_gain()
        self.bulk_d()
        return self._bulk[3]

    def opt_by(self, d: float) -> np.ndarray:
        """The optimistic masses of the step shifted up by d (``lattice_shift.shifted_opt``: the
        bulk merged onto its knot where d is this step's ``bulk_d``); d = 0: ``opt``.  Cached per d."""
        if d == 0.0:
            return self.opt
        if self._shifted is not None and self._shifted[0] == d:
            return self._shifted[1]
        if self._pieces is not None:
            out = np.zeros(self.pess.size)
            for piece, stride, at in self._pieces:
                p = piece.opt_by(d)
                out[at : at + stride * (p.size - 1) + 1 : stride] += p
        else:
            own = self._bulk[:3] if self._bulk is not None and self._bulk[0] == d else (d, (), -1)
            charge(lattice_shift.PER_BIN * self.pess.size)
            out = lattice_shift.shifted_opt(self._frac, self._amass, self._top, self._step, d, *own[1:])
        self._shifted = (d, out)
        return out

    @property
    def step(self) -> float:
        return self._step

    def atoms(self):
        """(frac, amass, top): the optimistic atoms the lower masses are made of (per bin a loss
        offset above its lower point, -1 where empty, and its mass; the mass at the top point),
        for a map applied before ``kd.optimistic_step`` (``samplers.epoch_runs``); a step joined
        from pieces keeps none."""
        if self._pieces is not None:
            raise ValueError("a one-step joined from pieces keeps no atoms")
        return self._frac, self._amass, self._top


def coarse_tail(schedule) -> bool:
    """Whether a composition of ``schedule`` [(sigma, q, count)] takes one-step grids with a coarse
    far tail (``one_step``'s ``coarse``): runs of at least ``COARSE_MIN_STEPS`` steps.  (In a few
    steps eps is set by single steps' tails, and the wider bins there cost up to 8 % of the
    interval's width at T = 5; past 100 steps at most 0.2 %, bench/README.)"""
    return sum(c for _, _, c in schedule) >= COARSE_MIN_STEPS


def one_step(sigma: float, q: float, add, step: float, tau: float = TAU_STEP, coarse: bool = False) -> OneStep:
    """One direction of one step on the grid, cached per (sigma, q, direction, step, tau,
    coarse); ``coarse``: the far tail binned ``COARSE_M`` times coarser (``_coarse_tail``)."""
    key = (sigma, q, add, step, tau, coarse)
    hit = STEP_CACHE.get(key)
    if hit is None:
        j_lo, j_hi = grid_range(sigma, q, add, step, tau)
        hit = _coarse_tail(sigma, q, add, step, tau, j_lo, j_hi) if coarse and add != REPLACE else None
        if hit is None:
            hit = discretise(sigma, q, add, step, tau, j_lo, j_hi)
        cache_put(key, hit)
    return hit


def _coarse_tail(sigma, q, add, step, tau, j_lo, j_hi) -> OneStep | None:
    """One add/remove direction on the grid j_lo..j_hi with its far tail (the remove direction's
    high end, the add direction's low end) binned ``COARSE_M`` times coarser, on the points
    that are multiples of ``COARSE_M`` (module notes): the fine core and the coarse tail meet
    at one such point, where their masses add.  None where that would save fewer than
    ``COARSE_MIN_SAVED`` fine bins."""
    m = COARSE_M
    big = m * step
    if big / m != step:
        return None
    c_lo, c_hi = grid_range(sigma, q, add, step, min(TAIL_COARSE * tau, TAIL_COARSE_MAX))
    b_lo, b_hi = grid_range(sigma, q, add, big, tau)
    if add:  # the far tail is below: coarse from b_lo up to the cut, fine from the cut
        cut = -(-c_lo // m)
        if cut * m - j_lo < COARSE_MIN_SAVED or not b_lo < cut or cut * m >= j_hi or j_hi - b_lo * m + 1 > bins_cap():
            return None
        tail = discretise(sigma, q, add, big, tau, b_lo, cut, True, False)
        core = discretise(sigma, q, add, step, tau, cut * m, j_hi, False, True)
        start, p_inf = b_lo * m, core.p_inf
    else:  # above: fine up to the cut, coarse from it to b_hi
        cut = c_hi // m
        if j_hi - cut * m < COARSE_MIN_SAVED or not cut < b_hi or cut * m <= j_lo or b_hi * m - j_lo + 1 > bins_cap():
            return None
        core = discretise(sigma, q, add, step, tau, j_lo, cut * m, True, False)
        tail = discretise(sigma, q, add, big, tau, cut, b_hi, False, True)
        start, p_inf = j_lo, tail.p_inf
    n = (j_hi if add else b_hi * m) - start + 1
    pieces = ((core, 1, core.j_lo - start), (tail, m, tail.j_lo * m - start))
    return OneStep(start, _joined(pieces, n, True), p_inf, step, None, None, None, pieces)


def _joined(pieces, n: int, pess: bool) -> np.ndarray:
    """The masses of ``pieces`` ((OneStep, stride, first index), in that order) summed onto n
    grid points: each piece's point i at first + stride * i.  Only the point the pieces share
    takes a sum, rounded once more (<= u relative): far inside the ``bins.MASS_SLACK`` (1e-12)
    by which every mass was inflated (upper) or deflated (lower) over the few roundings of its
    own sums (``discretise.discretise_direction``)."""
    out = np.zeros(n)
    for one, stride, at in pieces:
        p = one.masses(pess)
        out[at : at + stride * (p.size - 1) + 1 : stride] += p
    return out


def joint_opt(pieces, size: int, points=()) -> np.ndarray:
    """The optimistic masses of one step made of disjoint pieces [(OneStep, at)] -- piece point i
    at grid point at + i of one grid of ``size`` points, on the pieces' own step, no two pieces
    with an atom in one bin -- and masses [(grid point, mass)] exactly on grid points, from one
    convex-order minorant of all the pieces' atoms (``kd.optimistic_step``).  A minorant per piece
    pins both ends of each piece: where mass sits at a joint (the fixed-size pair's two pieces meet
    at loss 0, with most of the mass beside it) each pinned end loses mass to a one-sided
    rounding, first order in the step (at q 1e-5, T 2,180 a lower bound 23 % below the upper in δ
    on a step of 3e-4, half that on half the step).  The masses on grid points need no rounding:
    they are added to the minorant's (a convex-order minorant of the atoms plus the same point
    masses is one of the whole step)."""
    step = pieces[0][0]._step
    frac, amass = np.full(size, -1.0), np.zeros(size)
    top = 0.0
    for one, at in pieces:
        live = np.flatnonzero(one._amass > 0.0)
        if np.any(amass[at + live] > 0.0):
            raise ValueError("joint_opt: two pieces share a bin")
        frac[at + live], amass[at + live] = one._frac[live], one._amass[live]
        if one._top > 0.0:  # (mass moved down onto a piece's top point: a point mass there)
            points = (*points, (at + one.pess.size - 1, one._top))
    for i, a in points:
        if i == size - 1:
            top += a
    opt = np.empty(size)
    kd.optimistic_step(step, frac, amass, top, opt)
    for i, a in points:
        if i != size - 1:
            opt[i] += a
    if not np.isfinite(opt).all():
        raise FloatingPointError("non-finite optimistic one-step masses")
    return opt


def discretise_units(n: int, add) -> float:
    """The work charged for discretising n grid points of one direction: the replace-one bins have
    no shared-edge fast path and cost about 4 times as much per bin (measured)."""
    return PER_BIN_DISCRETISE * n * (4.0 if add == REPLACE else 1.0)


def planned_units(sigma: float, q: float, add, step: float, tau: float) -> float:
    """``discretise_units`` of the grid ``grid_range`` gives, before any grid is built."""
    j_lo, j_hi = grid_range(sigma, q, add, step, tau)
    return discretise_units(j_hi - j_lo + 1, add)


def discretise(sigma, q, add, step, tau, j_lo, j_hi, keep_low=True, keep_high=True) -> OneStep:
    """One direction on the grid points j_lo..j_hi. The P-mass beyond the grid is accounted
    (pessimistic: below moved up to j_lo, above to +inf; optimistic: below dropped, above moved
    down to j_hi) unless ``keep_low`` / ``keep_high`` is False: then it belongs to another
    piece of the same step (``hybrid_step``) and is left out here."""
    # loss bins as remove-loss bins: remove j_lo..j_hi-1, add (and replace) -j_hi..-j_lo-1
    k_lo, k_hi = (-j_hi, -j_lo - 1) if add else (j_lo, j_hi - 1)
    err0 = 1.0 + 1.0 / (sigma * sigma) + abs(math.log(q))
    n = j_hi - j_lo + 1
    charge(discretise_units(n, add))  # (before the work: a hard work limit stops it before it starts)
    if add == REPLACE:
        b_lo = k_lo
        lm0, ls, le = (np.empty(k_hi - k_lo + 1) for _ in range(3))
        kb.replace_bins(sigma, q, step, k_lo, lm0.size, lm0, ls, le)
        lp_low, lp_high = kb.replace_tails(sigma, q, step, j_lo, j_hi)
        err0 *= 2.0  # the replace loss moves twice as fast in z
    else:
        b_lo, lm0, ls, le = _bins(sigma, q, step, tau, k_lo, k_hi)
        lp_low, lp_high = kb.addremove_tails(sigma, q, step, j_lo, j_hi, add)
    lp_low = lp_low if keep_low else -math.inf
    lp_high = lp_high if keep_high else -math.inf
    pess, frac, amass = np.empty(n), np.empty(n), np.empty(n)
    p_inf, top = kd.discretise_direction(sigma, q, step, b_lo, lm0, ls, le, j_lo, j_hi, bool(add), lp_low, lp_high,
                                         err0, pess, frac, amass)
    if not (np.isfinite(pess).all() and math.isfinite(p_inf) and math.isfinite(top)):
        raise FloatingPointError(f"non-finite masses discretising sigma={sigma}, q={q}")
    return OneStep(j_lo, pess, p_inf, step, frac, amass, top)


def _bins(sigma: float, q: float, step: float, tau: float, k_lo: int, k_hi: int):
    """The remove-loss bins k_lo..k_hi of ``kb.step_bins`` (log N(0)-mass, log mixture ratio, log
    error bound), as arrays starting at the returned index. Both directions read them (the add
    direction's bins are the remove direction's, mirrored); a cached range is extended, never
    recomputed."""
    key = ("bins", sigma, q, step, tau)
    hit = STEP_CACHE.get(key)
    if hit is not None and hit[0] <= k_lo and k_hi <= hit[0] + hit[1].size - 1:
        return hit
    if hit is not None:
        k_lo, k_hi = min(k_lo, hit[0]), max(k_hi, hit[0] + hit[1].size - 1)
    if k_hi - k_lo + 1 > bins_cap():
        raise too_many_bins(k_hi - k_lo + 1)
    arrs = tuple(np.empty(k_hi - k_lo + 1) for _ in range(3))
    if hit is None:
        _step_bins_split(sigma, q, step, k_lo, arrs)
    else:
        c_lo, cached = hit[0], hit[1:]
        c_hi = c_lo + cached[0].size - 1
        for a, c in zip(arrs, cached):
            a[c_lo - k_lo : c_hi - k_lo + 1] = c
        if c_lo > k_lo:
            kb.step_bins(sigma, q, step, k_lo, c_lo - k_lo, *arrs)
        if k_hi > c_hi:
            kb.step_bins(sigma, q, step, c_hi + 1, k_hi - c_hi, *(a[c_hi - k_lo + 1 :] for a in arrs))
    out = (k_lo, *arrs)
    cache_put(key, out)
    return out


def shared_bins(sigma: float, q: float, step: float, tau: float, k_lo: int, k_hi: int) -> None:
    """Compute (and cache) the remove-loss bins k_lo..k_hi that ``discretise`` reads, before
    pieces of one step that share them are discretised on several threads."""
    _bins(sigma, q, step, tau, k_lo, k_hi)


def _step_bins_split(sigma, q, step, k_lo, arrs) -> None:
    """``kb.step_bins`` over the whole arrays, the upper half on a second thread (the edge between
    the halves is the same floating-point value either way)."""
    nb = arrs[0].size
    if nb < SPLIT_MIN or not two_cores():
        kb.step_bins(sigma, q, step, k_lo, nb, *arrs)
        return
    h = nb // 2
    fut = split_pool().submit(kb.step_bins, sigma, q, step, k_lo + h, nb - h, *(a[h:] for a in arrs))
    kb.step_bins(sigma, q, step, k_lo, h, *arrs)
    fut.result()


class Hybrid:
    """One direction of one SGM step in three pieces partitioning its loss line: the core on the
    fine grid (spacing step), the low and high tails on the coarse grid (spacing m * step, m a
    power of two, so that shared edges are the same floating-point values); +inf mass p_inf."""

    __slots__ = ("core", "low", "high", "p_inf", "m", "big_lo", "big_hi")

    def tail(self, pess: bool, d: float = 0.0) -> np.ndarray:
        """The two tails as one coarse array from coarse point big_lo (zeros between them);
        optimistic: shifted up by d (``OneStep.opt_by``, the core's ``bulk_d``)."""
        r = np.zeros(self.big_hi - self.big_lo + 1)
        for piece in (self.low, self.high):
            if piece is not None:
                p = piece.masses(pess) if pess or d == 0.0 else piece.opt_by(d)
                r[piece.j_lo - self.big_lo : piece.j_lo - self.big_lo + p.size] += p
        return r


def hybrid_step(sigma, q, add, step, m, tau, r_tail, hi_cut=None) -> Hybrid:
    """The pieces of one step: the tails hold at most about r_tail of P-mass each; or, given
    ``hi_cut`` (a coarse grid index), the high tail is everything from that point up."""
    key = ("hybrid", sigma, q, add, step, m, tau, r_tail, hi_cut)
    hit = STEP_CACHE.get(key)
    if hit is not None:
        return hit
    big = m * step
    if big / m != step:
        raise FloatingPointError("coarse grid step is not an exact multiple of the fine one")
    b_lo, b_hi = grid_range(sigma, q, add, big, tau)
    whole = discretise(sigma, q, add, big, tau, b_lo, b_hi)
    cum_up = np.cumsum(whole.pess[::-1])[::-1]  # mass at or above each coarse point
    cum_dn = np.cumsum(whole.pess)
    above = np.nonzero(cum_up > r_tail)[0]
    below = np.nonzero(cum_dn > r_tail)[0]
    c_hi = b_lo + int(above[-1]) if above.size else b_hi
    c_lo = b_lo + int(below[0]) if below.size else b_lo
    if hi_cut is not None:
        c_hi = min(max(hi_cut, b_lo), b_hi)
    c_hi = max(c_hi, c_lo + 1)
    h = Hybrid()
    h.m, h.big_lo, h.big_hi = m, b_lo, b_hi
    h.low = discretise(sigma, q, add, big, tau, b_lo, c_lo, True, False) if c_lo > b_lo else None
    h.high = discretise(sigma, q, add, big, tau, c_hi, b_hi, False, True) if c_hi < b_hi else None
    # without a tail piece the core ends where a one-step grid would (its end bins occupied)
    f_lo, f_hi = grid_range(sigma, q, add, step, tau)
    j_lo = c_lo * m if h.low is not None else max(c_lo * m, f_lo)
    j_hi = c_hi * m if h.high is not None else min(c_hi * m, f_hi)
    h.core = discretise(sigma, q, add, step, tau, j_lo, max(j_hi, j_lo + 1), h.low is None, h.high is None)
    h.p_inf = (h.high or h.core).p_inf
    cache_put(key, h)
    return h


def direction_name(add) -> str:
    return {REPLACE: "replace-one", ADD: "add"}.get(add, "remove")
