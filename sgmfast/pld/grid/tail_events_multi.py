"""Stage 5 for a schedule of several entries: δ as a sum over how many of each entry's steps land
in the far tail.

The one-entry sum (``tail_events``, module notes there) resolves a small δ set by a few steps far
out in the heavy one-step tail.  A schedule of a few entries (sigma_i, q_i, T_i) -- a run in
phases, a resumed run, a batch size changed once -- has the same far tail, and one stage or two
leave it wide: two noise levels at q 1.87e-4, 5 x 10^4 steps each, δ 2.3e-15 read [0.46, 0.56] in
one stage, [0.51, 0.53] in two (bench/README, stop 65).  Every entry's one-step PLD is cut at one
loss c into a core C_i (fine grid) and a tail R_i (one coarse grid of spacing m * step for all),
and with kappa_i the number of entry i's steps in the tail,

    prod_i (C_i + R_i)^{*T_i} = sum_kappa prod_i binom(T_i, kappa_i) C_i^{*(T_i - kappa_i)} * R_i^{*kappa_i}.

Each term with |kappa| <= K is composed by itself: its entries' blocks (``two_stage.block`` with
the entry's one number of tail events, the coarsened core power times the tail's power) are the
parts of one transform, so its FFT round-off is relative to its own mass.  Only the term without
tail steps is tilted (its core is bounded by c).

Soundness.  Every term is bounded as the one-entry terms are: each block is a spread
(pessimistic) or contraction (optimistic) of its entry's exact sub-PLD in u = e^{-loss}, and so is
the composition of independently coarsened blocks (the spread of a product of independent u's is
the product of their spreads).  Their sum bounds δ.  The upper bound adds:

* the terms with more than K tail steps, by the union bound over which K + 1 steps are in the tail:
  e_{K+1}(r_s) prod_s max(1, c_s + r_s), e the elementary symmetric sum over every step's tail mass;
* every term with |kappa| <= K whose mass bound prod_i binom(T_i, kappa_i) c_i^(T_i - kappa_i)
  r_i^kappa_i is below rem_goal / (number of terms) -- left out of both bounds (the lower bound
  only loses it);
* the mass the blocks send to +inf (their windows, the tilt's dropped entries), once for all
  terms: entry i's charges times the other entries' total mass bounds (c_l + r_l)^{T_l};
* every composition with a +inf step: 1 - prod_i (1 - p_i)^{T_i}.

The optimistic blocks' excess (wrapped window mass, relative to each block's weight) composes to at
most prod (M_i + e_i) - prod M_i of the term's parts."""

from __future__ import annotations

import itertools
import math

import numpy as np

from ..._failures import GridFailure
from ..common import REMOVE, NotApplicable, log_binom
from .composition import Composite, compose_parts, shift_total
from .lattice_shift import moved_down, shifts
from .estimates import tilted_moments
from .onestep import hybrid_step, one_step
from .tail_events import EVENT_MAX, rounded_pair
from .tilting import saddle_of
from .two_stage import BlockPart, block, tilt_pieces
from .windows import abs_goal as window_goal

EVENT_ENTRIES = 8  # most schedule entries the sum takes
EVENT_TERMS = 120  # most terms (numbers of tail steps per entry) it composes


def event_sum_multi(schedule, step, tau, accuracy, eps_c, cut, eps_lo, rem_goal, coarse=False, add=REMOVE):
    """The ``EventSum`` of direction ``add`` (remove, or replace-one) for a schedule of 2 to
    EVENT_ENTRIES entries, cut near ``cut``; None where the decomposition does not apply (too many
    tail events or terms, eps inside the bulk, a window too long).  ``coarse``: the query's
    one-step grids (``onestep.one_step``), read for the masses above the cut."""
    if not 1 < len(schedule) <= EVENT_ENTRIES:
        return None
    # cheap test first: the steps' one-step masses above the cut must allow few tail events
    above = []
    for sigma, q, _ in schedule:
        one = one_step(sigma, q, add, step, tau, coarse)
        j = math.floor(cut / step) - one.j_lo
        above.append(float(one.pess[max(j, 0):].sum()) + one.p_inf if j < one.pess.size else one.p_inf)
    counts = [c for _, _, c in schedule]
    if _log_excess(counts, above, EVENT_MAX) > math.log(rem_goal):
        return None
    m = 2 ** max(0, min(12, round(math.log2(0.25 * accuracy * max(eps_c, 1e-3) / step))))
    hi_cut = max(math.ceil(cut / (m * step)), 1)
    return rounded_pair(lambda pess: _terms(schedule, add, step, m, hi_cut, pess, eps_c, eps_lo, tau, rem_goal))


def _log_excess(counts, r, k):
    """log of e_{k+1} over every step's tail mass (entry i: counts[i] steps of mass r[i]), the
    union bound's sum: the coefficient of z^{k+1} in prod_i (1 + r_i z)^{T_i}, in logs (rounded
    up: log_binom is within ~1e-13 relative, each log-sum within a few u)."""
    poly = np.full(k + 2, -math.inf)
    poly[0] = 0.0
    for n, ri in zip(counts, r):
        if not ri > 0:
            continue
        lr = math.log(ri)
        f = np.array([log_binom(n, j) + j * lr if j <= n else -math.inf for j in range(k + 2)])
        poly = np.array([np.logaddexp.reduce(poly[: d + 1] + f[d::-1]) for d in range(k + 2)])
    v = float(poly[k + 1])
    return v + 1e-10 * (1.0 + abs(v)) if math.isfinite(v) else v


def _compositions(caps, total):
    """Every (k_0, ..., k_{E-1}) with 0 <= k_i <= caps[i] and sum at most ``total``."""
    if not caps:
        yield ()
        return
    for k in range(min(caps[0], total) + 1):
        for rest in _compositions(caps[1:], total - k):
            yield (k,) + rest


def _kept(counts, cu, ru, rem_goal):
    """(K, union bound on the terms with more than K tail steps) with that bound <= rem_goal, or
    None when K would exceed EVENT_MAX."""
    lcr = sum(n * max(math.log(c + r), 0.0) for n, c, r in zip(counts, cu, ru))
    for k in range(EVENT_MAX + 1):
        if k >= sum(counts):
            return k, 0.0
        rem = math.exp(_log_excess(counts, ru, k) + lcr) * (1 + 1e-9)
        if rem <= rem_goal:
            return k, rem
    return None


def _terms(schedule, add, step, m, hi_cut, pess, eps_c, eps_lo, tau, rem_goal):
    """(grids of the terms, rem): δ(eps) <= sum of the grids' δ + rem (pessimistic), or >= the sum
    (optimistic, rem 0); None when more than EVENT_MAX tail steps or EVENT_TERMS terms would be
    needed."""
    counts = [c for _, _, c in schedule]
    hybs = [hybrid_step(sigma, q, add, step, m, tau, 1e-300, hi_cut) for sigma, q, _ in schedule]
    ds = shifts([h.core for h in hybs], counts, step, pess)  # (optimistic: onto knots, ``lattice_shift``)
    pcs = [h.core.opt_by(d) if d else h.core.masses(pess) for h, d in zip(hybs, ds)]
    prs = [h.tail(pess, d) if h.high is not None else None for h, d in zip(hybs, ds)]
    cu = [float(p.sum()) * (1 + 1e-12) for p in pcs]
    ru = [float(p.sum()) * (1 + 1e-12) if p is not None else 0.0 for p in prs]
    if not any(r > 0 for r in ru):
        return None
    kept = _kept(counts, cu, ru, rem_goal)
    if kept is None:
        return None
    k_max, rem = kept
    caps = [min(k_max, n) if r > 0 else 0 for n, r in zip(counts, ru)]
    kappas = list(itertools.islice(_compositions(caps, k_max), EVENT_TERMS + 1))
    if len(kappas) > EVENT_TERMS:
        return None
    if pess:  # every composition with a +inf step
        log_ok = sum(n * math.log1p(-min(h.p_inf * (1 + 1e-12), 1.0)) for n, h in zip(counts, hybs))
        rem += -math.expm1(log_ok) * (1 + 1e-12)
    abs_goal = window_goal(tau, sum(counts))
    lmass = [n * math.log(c + r) for n, c, r in zip(counts, cu, ru)]  # each entry's total mass bound

    def blocks(theta, ks):
        """Every entry's pieces tilted by theta and its blocks (terms of ks[i] tail events), and the
        +inf mass they send (times the other entries' mass bounds)."""
        out, charge = [], 0.0
        tilted = [tilt_pieces(pc, h.core.j_lo, pr, h.big_lo, step, m, theta, pess, f" for sigma={schedule[i][0]}")
                  for i, (h, pc, pr) in enumerate(zip(hybs, pcs, prs))]
        # an entry's block is read with the others' sums added: its floor (below which an optimistic
        # window too long to untilt may drop cells, ``two_stage.block``) is eps_lo less the others'
        # tilted means and 10 sd -- a floor of eps_lo itself dropped the cells the others' sums lift
        # past eps (two entries, replace-one, δ 1e-14: the lower δ 3.4 times below the upper)
        reach = [n * pc.mc + 10.0 * math.sqrt(max(n * pc.vc, 0.0)) for n, pc in zip(counts, tilted)]
        for i, pieces in enumerate(tilted):
            floor = eps_lo - (sum(reach) - reach[i])
            terms, ls, p_inf, err = block(pieces, counts[i], 1, pess, abs_goal, ks=ks[i], floor=floor)
            if pess:
                p_inf += counts[i] * (pieces.drop_c + pieces.drop_r) * (1 + 1e-12)
                charge += p_inf * math.exp(sum(lmass) - lmass[i]) * (1 + 1e-9)
            out.append((pieces, {t[3]: t for t in terms}, ls, err))
        return out, charge

    untilted, charge = blocks(0.0, [list(range(c + 1)) for c in caps])
    tilted, charge_t = _tilted_blocks(blocks, pcs, hybs, counts, step, eps_c, len(schedule))
    if tilted is None:
        if pess:
            return None
        tilted = untilted  # (optimistic: the term without tail steps from the untilted blocks)
    rem += charge + charge_t
    share = math.log(rem_goal / len(kappas))
    grids = []
    for kp in kappas:
        lm = sum(log_binom(n, k) + (k * math.log(r) if k else 0.0) + (n - k) * math.log(c)
                 for n, k, c, r in zip(counts, kp, cu, ru))
        if lm <= share:  # (a term this light: charged to the upper bound, left out of the lower)
            rem += math.exp(lm) * (1 + 1e-9) if pess else 0.0
            continue
        grids.append(moved_down(_term(tilted if not any(kp) else untilted, kp, counts, m * step, pess, eps_lo, tau),
                                shift_total(counts, ds)))
    return grids, rem if pess else 0.0


def _tilted_blocks(blocks, pcs, hybs, counts, step, eps_c, n_entries):
    """The blocks of the term without tail steps, tilted to its saddle point (a weaker tilt where
    a strong one's window is too long, at last none), and their +inf charge; (None, 0) if none
    can be built."""
    vc0 = sum(n * tilted_moments(pc, h.core.j_lo, step, 0.0)[1] for n, pc, h in zip(counts, pcs, hybs))

    def moments(th):
        ms = [tilted_moments(pc, h.core.j_lo, step, th) for pc, h in zip(pcs, hybs)]
        return sum(n * x[0] for n, x in zip(counts, ms)), sum(n * x[1] for n, x in zip(counts, ms))

    theta = saddle_of(moments, eps_c, 1e12 * vc0)
    for attempt in range(8):
        try:
            return blocks(theta, [[0]] * n_entries)
        except (NotApplicable, GridFailure):
            theta = 0.0 if attempt >= 6 else 0.6 * theta
    return None, 0.0


def _term(entries, kp, counts, big, pess, eps_lo, tau):
    """The term with kp[i] tail steps of entry i: the entries' blocks composed by one transform."""
    parts, log_scale, mean, var, rho, lo, hi = [], 0.0, 0.0, 0.0, 0.0, 0, 0
    mass_log = err_log = 0.0
    for (pieces, terms, ls, err), k, n in zip(entries, kp, counts):
        bj, d, lw, _ = terms[k]
        part = BlockPart([(bj, d, 0.0, k)], pieces.jr, pieces.tr, 1)
        parts.append(part)
        log_scale += ls + lw
        mean += (n - k) * pieces.mc + k * pieces.mr
        var += (n - k) * pieces.vc + k * pieces.vr
        rho += k * pieces.rho_r
        p_lo, p_hi = part.sup
        lo, hi = lo + p_lo, hi + p_hi
        mass = part.mass()
        mass_log += math.log(max(mass, 1e-300))
        err_log += math.log1p(err / max(mass, 1e-300))
    # the excess composes to at most prod (M_i (1 + e_i / M_i)) - prod M_i (optimistic)
    err_rel = math.exp(mass_log) * math.expm1(err_log * (1 + 1e-9)) if not pess else 0.0
    return compose_parts(Composite(parts, big, sum(counts), mean, var, log_scale, rho, 0.0, lo, hi, err_rel),
                         entries[0][0].theta, pess, eps_lo, tau)
