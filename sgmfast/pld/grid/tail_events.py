"""Stage 5: δ as a sum over the number of steps whose loss lands in the far tail.

With q << 1 the one-step loss has a long, log-normal-like tail (loss ~ q e^{(2z-1)/(2 sigma^2)}
for a sampled step), and at small δ the answer can be set by one or two steps far out in it: no
single exponential tilt centres the composition at eps without that tail taking over the window.
The one-step PLD is cut at a loss c ~ eps into a core C (fine grid) and a tail R (coarse grid),
and, with k the number of tail steps,

    P^{*T} = sum_k binom(T, k) C^{*(T-k)} * R^{*k},   δ(eps) = sum_k δ_k(eps).

Each term is composed by itself (``two_stage.block`` with one k, then stage 3), so its FFT
round-off is relative to its own mass.  Only the term with k = 0 is tilted (its core is bounded
by c, so its saddle point exists); a term with tail steps has δ of the order of its mass, and a
tilt would only lift the round-off floor of the core's T-th power.

Soundness.  Every term is an upper (lower) bound of its exact sub-PLD, so their sum bounds δ.
The terms with more than K tail steps are bounded by the union bound binom(T, K+1) r^{K+1}
(c + r)^{T-K-1} and added to the upper bound; the lower bound drops them.  Compositions with a
+inf step go to the upper bound (at most T times the one-step +inf mass).

When eps lies inside the bulk (tiny eps, δ close to δ(0)), the cut moves above the bulk, the
core's power is taken on the fine grid -- by direct convolutions where short enough, whose
round-off is relative per entry -- and δ is summed atom by atom, not as P(L > eps) -
e^eps Q(L > eps), a difference of two numbers far larger than δ.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..._failures import GridFailure
from ..common import REMOVE, U, Grid, NotApplicable, log_binom
from .composition import Composite, compose_parts, shift_total
from .lattice_shift import moved_down, shifts
from .estimates import tilted_moments
from .onestep import hybrid_step, one_step
from .queries import sum_delta
from .tilting import saddle_of
from .two_stage import BlockPart, block, one_stage_core, tilt_pieces
from .windows import abs_goal as window_goal

EVENT_MAX = 6  # most tail steps composed exactly (else: not used)
DIRECT_MAX_STEPS = 16  # direct (not FFT) powers of the core when eps lies inside the bulk: at
DIRECT_MAX_BINS = 100_000  # most this many steps and this long a result (~1e9 products)


@dataclass
class EventSum:
    """The tail-event decomposition of one direction: δ <= sum of ``upper`` terms + ``rem``,
    δ >= sum of ``lower`` terms; ``precise``: sum each term atom by atom (eps inside the bulk)."""

    upper: list
    rem: float
    lower: list
    precise: bool

    def delta_upper(self, eps: np.ndarray) -> np.ndarray:
        return sum_delta(self.upper, self.rem, eps, self.precise)

    def delta_lower(self, eps: np.ndarray) -> np.ndarray:
        return sum_delta(self.lower, 0.0, eps, self.precise)


def event_sum(schedule, step, tau, accuracy, eps_c, cut, eps_lo, rem_goal, coarse=False, add=REMOVE):
    """The ``EventSum`` of direction ``add`` (remove, or replace-one) for a one-entry schedule, cut
    near ``cut``; None where the decomposition does not apply (too many tail events, windows too
    long).
    ``coarse``: the query's one-step grid (``onestep.one_step``), read for the mass above the cut."""
    if len(schedule) != 1 or schedule[0][2] < 2:
        return None
    sigma, q, count = schedule[0]
    # cheap test first: the one-step mass above the cut must allow few tail events
    one = one_step(sigma, q, add, step, tau, coarse)
    top = np.cumsum(one.pess[::-1])[::-1] + one.p_inf  # one-step mass at or above each point
    k = EVENT_MAX + 1
    m = 2 ** max(0, min(12, round(math.log2(0.25 * accuracy * max(eps_c, 1e-3) / step))))
    last = (one.j_lo + top.size - 1 - 2 * m) * step
    if cut > last > 0.0:
        # a cut past the one-step grid's top (its far tail cut at tau) leaves the tail empty: cut just
        # below it, where the tail's mass is about tau (few steps at eps past one step's reach: σ
        # 0.624, q 0.00364, 6 steps, δ 6.4e-35 read [16.76, 17.90] from the tilts; cut at 16.87,
        # [17.491424, 17.491467])
        cut = last
    above = float(top[min(max(math.floor(cut / step) - one.j_lo, 0), top.size - 1)])
    fine0 = count >= k and above > 0 and log_binom(count, k) + k * math.log(above) > math.log(rem_goal)
    if fine0:
        # eps inside the bulk (tiny eps): cut instead above the bulk, where T r ~ 1e-3.  Every
        # tail atom then lies far above eps, where δ is linear in e^{-loss}, which both
        # discretisations keep: a coarse tail grid costs little (cut / 64: cut / 8 left the
        # k = 1 term 2e-10 apart at q = 2.7e-5, sigma = 1.33, T = 7, eps ~ 1.4e-7).
        idx = np.nonzero(top <= 1e-3 / count)[0]
        if idx.size == 0:
            return None
        cut = max(cut, (one.j_lo + int(idx[0])) * step)
        m = 2 ** max(0, min(16, math.floor(math.log2(cut / (64 * step)))))
    return both_roundings(sigma, q, count, step, m, cut, eps_c, eps_lo, tau, rem_goal, fine0, add=add)


def both_roundings(sigma, q, count, step, m, cut, eps_c, eps_lo, tau, rem_goal, fine0=False, hyb=None, add=REMOVE):
    """The ``EventSum`` of both roundings' ``event_grids`` (direction ``add``: remove, or
    replace-one), or None where either cannot be built."""
    return rounded_pair(lambda pess: event_grids(sigma, q, count, add, step, m, cut, pess, eps_c, eps_lo, tau,
                                                 rem_goal, fine0, hyb=hyb), fine0)


def rounded_pair(terms, precise: bool = False) -> EventSum | None:
    """The ``EventSum`` of ``terms(pess)`` -- (grids, rem) or None -- for both roundings, or None
    where either cannot be built (a grid failure or not applicable)."""
    out = []
    for pess in (True, False):
        try:
            r = terms(pess)
        except (GridFailure, NotApplicable):
            r = None
        if r is None:
            return None
        out.append(r)
    (g_up, rem_up), (g_lo, _) = out
    return EventSum(g_up, rem_up, g_lo, precise)


def _kept_events(count, cu, ru, rem_goal):
    """(K, union bound on the terms with more than K tail steps) with that bound <= rem_goal, or
    None when K would exceed EVENT_MAX."""
    lr, lcr = math.log(ru), max(math.log(cu + ru), 0.0)
    k_max = 0
    while True:
        if k_max >= count:  # every term kept
            return k_max, 0.0
        rem = math.exp(log_binom(count, k_max + 1) + (k_max + 1) * lr + (count - k_max - 1) * lcr) * (1 + 1e-9)
        if rem <= rem_goal:
            return k_max, rem
        k_max += 1
        if k_max > EVENT_MAX:
            return None


def event_grids(sigma, q, count, add, step, m, cut, pess, eps_c, eps_lo, tau, rem_goal, fine0=False, hyb=None):
    """The terms of the decomposition, the tail R = [cut, +inf) on the coarse grid of spacing
    m * step: returns (grids, rem) -- δ(eps) is bounded by sum_k δ_{G_k}(eps) (+ rem,
    pessimistic) -- or None when more than EVENT_MAX terms would be needed to bring rem below
    ``rem_goal``.  ``fine0``: the term with k = 0 keeps the fine grid (eps inside the bulk).
    ``hyb``: the one-step pieces (an ``onestep.Hybrid`` on these grids, cut there) of another
    dominating pair (the fixed-size sampler's symmetrised one); default: the SGM direction's."""
    big = m * step
    if hyb is None:
        hyb = hybrid_step(sigma, q, add, step, m, tau, 1e-300, max(math.ceil(cut / big), 1))
    if hyb.high is None:
        return None
    core = hyb.core
    d, = shifts([core], [count], step, pess)  # (optimistic: onto a knot, each term moved back down)
    pc = core.opt_by(d) if d else core.masses(pess)
    pr = hyb.tail(pess, d)
    cu = float(pc.sum()) * (1 + 1e-12)
    ru = float(pr.sum()) * (1 + 1e-12)
    if not ru > 0:
        return None
    kept = _kept_events(count, cu, ru, rem_goal)
    if kept is None:
        return None
    k_max, rem = kept
    if pess:  # every composition with a +inf step: at most T of them
        p_one = min(hyb.p_inf * (1 + 1e-12), 1.0)
        rem += -math.expm1(count * math.log1p(-p_one)) * (1 + 1e-12) if p_one < 1.0 else 1.0
    vc0 = tilted_moments(pc, core.j_lo, step, 0.0)[1]
    abs_goal = window_goal(tau, count)
    grids = []
    untilted = None  # (the pieces at theta = 0: the same for every k >= 1)
    for k in range(k_max + 1):
        if k == 0 and fine0 and count <= DIRECT_MAX_STEPS and count * pc.size <= DIRECT_MAX_BINS:
            grids.append(moved_down(direct_power(pc, core.j_lo, count, step, pess), shift_total([count], [d])))
            continue
        theta = 0.0
        if k == 0:  # (module notes: only the term without tail steps is tilted)
            theta = saddle_of(lambda th: tuple(count * x for x in tilted_moments(pc, core.j_lo, step, th)),
                              eps_c, 1e12 * count * vc0)
        for attempt in range(8):
            try:
                if theta == 0.0 and untilted is not None:
                    pieces = untilted
                else:
                    pieces = tilt_pieces(pc, core.j_lo, pr, hyb.big_lo, step, m, theta, pess,
                                         f" for sigma={sigma}, q={q}")
                    untilted = pieces if theta == 0.0 else untilted
                grids.append(moved_down(_term(pieces, k, count, pess, fine0, eps_lo, tau, abs_goal),
                                        shift_total([count], [d])))
                break
            except (NotApplicable, GridFailure):
                # a strong tilt's window can be too long (to untilt, or for MAX_BINS): any
                # weaker one is as sound
                theta = 0.0 if attempt >= 6 else 0.6 * theta
        else:
            if pess:
                return None
            # optimistic: a term left out only lowers the lower bound
    return grids, rem if pess else 0.0


def _term(pc, k, count, pess, fine0, eps_lo, tau, abs_goal) -> Grid:
    """The term with k tail steps, binom(T, k) C^{*(T-k)} * R^{*k}, composed by itself."""
    if k == 0 and fine0:
        # no tail step: the core's T-th power on the fine grid itself (no coarsening, so a
        # tiny eps inside the bulk keeps the fine resolution)
        return one_stage_core(pc, count, pess, eps_lo, tau)
    terms, ls, p_inf, err = block(pc, count, 1, pess, abs_goal, ks=[k], floor=eps_lo)  # (read at eps >= eps_lo)
    # one term: its log weight joins the log normaliser (both are huge under strong tilts)
    (bj, d, lw, _), = terms
    part = BlockPart([(bj, d, 0.0, k)], pc.jr, pc.tr, 1)
    if pess:  # entries the tilt left out (sent to +inf): in at most T steps
        p_inf += count * (pc.drop_c + pc.drop_r) * (1 + 1e-12)
    lo, hi = part.sup
    return compose_parts(Composite([part], pc.m * pc.step, count, (count - k) * pc.mc + k * pc.mr,
                                   (count - k) * pc.vc + k * pc.vr, ls + lw, k * pc.rho_r, min(p_inf, 1.0), lo, hi,
                                   0.0 if pess else err),
                         pc.theta, pess, eps_lo, tau)


def direct_power(p, j_lo, n, step, pess) -> Grid:
    """p^{*n} by direct convolutions (binary powers), untilted, as a grid.  Each entry of a
    direct convolution of non-negative arrays is a sum of at most L non-negative products,
    computed within a relative gamma_L = L u / (1 - L u) of itself in any order: the result
    has a relative error and no FFT round-off floor.  Used when eps lies inside the bulk
    (q = 2.7e-5, sigma = 1.33, T = 7, eps ~ 1.4e-7: δ must be resolved to ~2e-6 of itself,
    and the tilted FFT power left 7e-11 between the bounds where the arrays are 1e-11 apart)."""
    acc, acc_rel, base, base_rel = None, 0.0, p, 0.0
    c = n
    while c > 0:
        if c & 1:
            if acc is None:
                acc, acc_rel = base, base_rel
            else:
                g = min(acc.size, base.size) * U * 1.01
                acc, acc_rel = np.convolve(acc, base), (1 + acc_rel) * (1 + base_rel) * (1 + g / (1 - g)) - 1
        c >>= 1
        if c > 0:
            g = base.size * U * 1.01
            base, base_rel = np.convolve(base, base), (1 + base_rel) ** 2 * (1 + g / (1 - g)) - 1
    rel = acc_rel * (1 + 1e-9)
    if not (np.isfinite(acc).all() and rel < 1e-3):
        raise FloatingPointError("non-finite values in a direct composition of the PLD")
    t = acc * (1 + rel) if pess else np.maximum(acc * (1 - rel), 0.0)
    return Grid(step, 0.0, pess, n * j_lo, t, 0.0, 0.0, 0.0, 0.0, 0.0)

