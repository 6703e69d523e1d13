"""Stage 4: long runs in two stages -- blocks of T1 ~ sqrt(T) steps on the fine grid, the blocks
composed on a coarse grid.

When the fine grid would be long -- heavy one-step tails (small q and sigma) and a wide composed
spread (large T) -- or δ is small (the FFT round-off of a T-th power grows like T), the
one-step PLD is cut into a core C on the fine grid and tails R on a coarse grid of spacing
m * step (``onestep.hybrid_step``).  A block of n steps is

    coarsen(P^{*n}) = sum_k binom(n, k) coarsen(C^{*(n-k)}) * R^{*k}      (k tail events)

(the coarse grid's edges are fine-grid edges, and coarsening commutes with shifts by coarse
steps).  The core powers are FFT powers on the fine grid, bounded for round-off like stage 3,
then coarsened (kernels: ``sgmfast._kernels.pld.coarsen``):

* pessimistic -- every atom split between its two coarse neighbours so that its mass and
  E e^{-loss} are kept (connect-the-dots on atoms: a mean-preserving spread in u = e^{-loss});
* optimistic -- the convex-order minorant of the collapsed cells (a contraction).

Blocks with more than K tail events go to +inf (pessimistic: their mass is at most
binom(n, K+1) r^{K+1} (c + r)^{n-K-1}) or are dropped (optimistic).  The blocks are then
composed T / T1 times like single steps (stage 3).  Coarsening adds about (T / T1) (m step)^2 / 6
to the loss variance, which m ~ sqrt(T1) keeps at the order of the fine grid's T step^2 / 6, and
both transforms are ~T^(1/4) times shorter than one fine-grid transform of all T steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..._failures import GridTooLarge
from ..._kernels.pld import coarsen as kc
from ..._kernels.pld import fft_power as kf
from ..._kernels.pld import tilt as kt
from ..common import Grid, NotApplicable, bins_cap, charge_fft, fast_len, irfft, log_binom
from .estimates import loss_moments, tilted_moments
from .composition import ArrayPart, Composite, compose_parts, entry_error, fft_const, shift_total, spectrum_of
from .lattice_shift import moved_down, shifts
from .onestep import grid_range, hybrid_step
from .windows import CHERNOFF_K, TAIL_GOAL, abs_goal as window_goal, chernoff_n

MIN_STEPS = 4096  # fewest steps of one schedule entry for the two-stage composition
MIN_ONE_STEP_BINS = 4000  # ... fewest fine bins of its one-step grid
MIN_TOTAL_BINS = 80000  # ... fewest bins of one-step grid plus composed spread (18 sd)
SMALL_TAU = 1e-15  # ... or at most this tail cut over all steps (δ below ~1e-8)
HUGE_SPREAD = 4e5  # ... or a composed spread (18 sd) of at least this many fine bins
CORE_TAIL = 1e-4  # one-step P-mass per block of T1 steps left to the coarse tail pieces
STAGE1_GOAL = 1e-18  # tilted mass (relative) the fine windows leave outside (Chernoff)
MAX_TAIL_EVENTS = 16  # most tail events per block composed exactly (else: one stage)
MAX_ENTRIES = 64  # most schedule entries composed in two stages


def plan(schedule, step, add, tau, multi: bool = False):
    """(t1s, m) for the two-stage composition -- every entry's block length and the common coarse
    factor -- or None when a single stage is better: for one schedule entry of many steps whose
    one-step grid (heavy tails) and composed spread are both long on the fine grid (thresholds
    measured, bench/README), or when δ is small: the first-order FFT round-off of a T-th power
    grows like T times that of one step, and two stages take powers of ~sqrt(T) only.

    ``multi``: several entries too (at most MAX_ENTRIES, MIN_STEPS in all), where δ is small or the
    spread huge: each entry in blocks of its own, all on one coarse grid.  Asked for only by the
    engine's extra certifier (``engine.TILT_TWO``), where one stage left the answer wide: two
    noise levels at q 1.87e-4, 5 x 10^4 steps each, δ 2.3e-15 are 19 % wide in one stage, 4 % in
    two; where the tilt reaches eps one stage is the tighter (five entries at q up to 0.028,
    δ 4.3e-10: 6.5e-4 in one stage, 2.3e-3 in two; bench/README stop 65)."""
    total = sum(c for _, _, c in schedule)
    if total < MIN_STEPS or len(schedule) > (MAX_ENTRIES if multi else 1):
        return None
    spread = 18.0 * math.sqrt(sum(c * loss_moments(s, q, add)[1] for s, q, c in schedule)) / step
    small_delta = tau * total <= SMALL_TAU  # FFT round-off grows with the power taken
    huge = spread >= HUGE_SPREAD  # light tails but a composed spread of ~1e6 fine bins (huge T)
    if len(schedule) > 1:
        if not (small_delta or huge):
            return None
        t1s = tuple(_block_length(c) for _, _, c in schedule)
        blocks = sum(-(-c // t1) for (_, _, c), t1 in zip(schedule, t1s))
        return t1s, 2 ** max(1, int(round(math.log2(math.sqrt(total / blocks)))))
    sigma, q, count = schedule[0]
    try:
        j_lo, j_hi = grid_range(sigma, q, add, step, tau)
    except GridTooLarge:  # too long for one stage
        j_lo, j_hi = 0, bins_cap()
    if not (small_delta or huge) and (j_hi - j_lo < MIN_ONE_STEP_BINS or j_hi - j_lo + spread < MIN_TOTAL_BINS):
        return None
    t1 = _block_length(count)
    m = 2 ** max(1, int(round(math.log2(math.sqrt(t1)))))  # H^2 T / T1 ~ step^2 T (module notes)
    return (t1,), m


def _block_length(count: int) -> int:
    """Steps per block of an entry of ``count`` steps: ~sqrt(count), a divisor nearby where there
    is one (it saves the remainder block; looked for nearby only: the search is Python and
    sqrt(count) reaches 3e6 for calibration's longest runs), at most the count."""
    t1 = max(2, int(round(math.sqrt(count))))
    low = max(2, t1 // 2)
    for i in range(min(t1, 4096)):
        if count % (t1 + i) == 0 or (t1 - i >= low and count % (t1 - i) == 0):
            t1 = t1 + i if count % (t1 + i) == 0 else t1 - i
            break
    return min(t1, count)


@dataclass
class Pieces:
    """A hybrid one-step PLD, tilted by theta: the core (fine grid, from point ``jc``; log
    normaliser ``sc``, tilted mean/variance, relative rounding ``rho_c``, untilted mass the tilt
    dropped ``drop_c``) and the tail (coarse grid of spacing m * step from point ``jr``, or None);
    ``cu``/``ru`` the untilted masses of core and tail."""

    step: float
    m: int
    theta: float
    tc: np.ndarray
    jc: int
    sc: float
    mc: float
    vc: float
    rho_c: float
    drop_c: float
    tr: np.ndarray | None
    jr: int
    sr: float
    mr: float
    vr: float
    rho_r: float
    drop_r: float
    cu: float
    ru: float
    #: the core's Chernoff MGF per block length n (``_fine_window``): (lams, log MGFs)
    mgfs: dict = field(default_factory=dict, repr=False, compare=False)


def tilt_pieces(pc, j_core, pr, j_tail, step, m, theta, pess, what="") -> Pieces:
    """Tilt the core masses ``pc`` (fine grid from j_core) and tail masses ``pr`` (coarse grid
    from j_tail; None or all zero: no tail)."""
    tc = np.empty(pc.size)
    sc, mc, vc, rho_c, drop_c = kt.tilt(pc, j_core, 0.0, step, theta, pess, tc)
    if pr is not None and pr.any():
        tr = np.empty(pr.size)
        sr, mr, vr, rho_r, drop_r = kt.tilt(pr, j_tail, 0.0, m * step, theta, pess, tr)
        ru = float(pr.sum()) * (1 + 1e-12)
    else:
        tr, sr, mr, vr, rho_r, drop_r, ru = None, -math.inf, 0.0, 0.0, 0.0, 0.0, 0.0
    if not all(math.isfinite(v) for v in (sc, mc, vc, rho_c, rho_r, drop_c, drop_r, mr, vr, sr if tr is not None else 0.0)):
        raise FloatingPointError(f"non-finite tilted masses{what}")
    cu = float(pc.sum()) * (1 + 1e-12)
    return Pieces(step, m, theta, tc, j_core, sc, mc, vc, rho_c, drop_c, tr, j_tail, sr, mr, vr, rho_r, drop_r, cu, ru)


class BlockPart:
    """coarsen(P^{*n}) for a hybrid one-step P = C + R, as sum_k e^{lw_k} D_k * R^{*k}
    (D_k: the coarsened fine-grid power C^{*(n-k)}, tilted; R the coarse tail, tilted), composed
    ``count`` times.  Never materialised: its spectrum is formed from those of D_k and R."""

    __slots__ = ("terms", "jr", "tr", "count")

    def __init__(self, terms, jr, tr, count):
        self.terms, self.jr, self.tr, self.count = terms, jr, tr, count

    @property
    def sup(self):
        jr_hi = self.jr + self.tr.size - 1 if self.tr is not None else 0
        lo = min(bj + k * self.jr for bj, d, lw, k in self.terms)
        hi = max(bj + d.size - 1 + k * jr_hi for bj, d, lw, k in self.terms)
        return lo, hi

    def mass(self):
        r = float(self.tr.sum()) if self.tr is not None else 0.0
        return sum(math.exp(lw) * float(d.sum()) * r**k for _, d, lw, k in self.terms) * (1 + 1e-12)

    def log_mgf(self, step, lams):
        """Upper bounds on log E e^{lam L}: log sum_k e^{lw_k + Lambda_Dk + k Lambda_R}."""
        out = np.empty(lams.size)
        if self.tr is not None:
            lr = np.empty(lams.size)
            kt.log_mgf_multi(self.tr, self.jr, step, lams, lr)
        vals = []
        for bj, d, lw, k in self.terms:
            kt.log_mgf_multi(d, bj, step, lams, out)
            vals.append(lw + out + (k * lr if k else 0.0))
        tot = np.logaddexp.reduce(np.array(vals), axis=0)
        return tot + 1e-12 * (1.0 + np.abs(tot))

    def spectrum(self, n, c_n):
        """The half spectrum sum_k e^{lw_k} F(D_k) F(R)^k (each folded modulo n) and a bound on
        its l2 error over the full spectrum (the l1 bound of ``kf.power_product`` per term, plus
        the rounding of the sum)."""
        h = n // 2 + 1
        if self.tr is not None:
            spec_r, e2_r = spectrum_of(self.tr, self.jr, n, c_n)
        else:
            spec_r, e2_r = np.ones(h, dtype=np.complex128), 0.0
        spec_d = np.empty((len(self.terms), h), dtype=np.complex128)
        e2_d = np.empty(len(self.terms))
        for i, (bj, d, _, _) in enumerate(self.terms):
            spec_d[i], e2_d[i] = spectrum_of(d, bj, n, c_n)
        ks = np.array([k for _, _, _, k in self.terms], dtype=np.int64)
        # (the log weights carry a rounding margin far above exp's own error)
        w = np.exp(np.array([lw for _, _, lw, _ in self.terms]))
        out = np.empty(h, dtype=np.complex128)
        err = kf.block_spectrum(spec_d, e2_d, spec_r, e2_r, ks, w, out)
        return out, err * (1 + 1e-9)


def _kept_tail_events(pc: Pieces, n, blocks, abs_goal):
    """(K, log of the mass of the blocks with more than K tail events): K keeps that mass below
    1e-3 abs_goal over ``blocks`` blocks; more than MAX_TAIL_EVENTS: not applicable."""
    if pc.tr is None or not pc.ru > 0:
        return 0, -math.inf
    lr = math.log(pc.ru)
    lcr = max(math.log(pc.cu + pc.ru), 0.0)
    budget = math.log(1e-3 * abs_goal / max(blocks, 1))
    k_max, rem_log = 0, -math.inf
    while k_max < n:
        kk = k_max + 1
        rem_log = log_binom(n, kk) + kk * lr + (n - kk) * lcr
        if rem_log <= budget:
            break
        k_max += 1
        if k_max > MAX_TAIL_EVENTS:
            raise NotApplicable("too many tail events per block")
    if k_max == n:
        rem_log = -math.inf
    return k_max, rem_log


def _fine_window(pc: Pieces, n, counts, goal=STAGE1_GOAL):
    """The fine window [j0, j0 + n1) of the core powers C^{*c}, c in counts: Chernoff edges of
    every power from the tilted core's MGF (``goal`` of tilted mass outside), within the supports
    of the powers.  Returns
    (j0, n1, wrap, mgf, sup_lo): ``wrap`` is whether any power's support exceeds the window,
    sup_lo the lowest point of the supports."""
    step = pc.step
    if n not in pc.mgfs:  # (the same for every number of tail events: event_grids' terms share it)
        var_c = float(tilted_moments(pc.tc, pc.jc, step, 0.0)[1])
        base = 2.0 ** (CHERNOFF_K / 2.0) / math.sqrt(max(n * var_c, 1e-300))
        lams = np.concatenate((base, -base))
        lm = np.empty(lams.size)
        kt.log_mgf_multi(pc.tc, pc.jc, step, lams, lm)
        pc.mgfs[n] = lams, lm
    lams, lm = pc.mgfs[n]
    up = lams > 0
    lg = math.log(goal)
    b = max(float(np.min((c * lm[up] - lg) / lams[up])) for c in counts)
    a = min(float(np.max((c * lm[~up] - lg) / lams[~up])) for c in counts)
    # the supports of the powers: n jc .. n (jc + size - 1) for every n in counts (jc may be < 0)
    sup_lo = min(c * pc.jc for c in counts)
    sup_hi = max(c * (pc.jc + pc.tc.size - 1) for c in counts)
    j0 = max(sup_lo, math.floor(a / step) - 1)
    j1 = min(sup_hi, math.ceil(b / step) + 1)
    if j1 - j0 + 1 > bins_cap() // 4:
        raise NotApplicable("fine window too long")
    n1 = fast_len(max(j1 - j0 + 1, 16))
    wrap = sup_hi - sup_lo + 1 > n1
    return (j0 if wrap else sup_lo), n1, wrap, (lams, lm), sup_lo


def block(pc: Pieces, n, blocks, pess, abs_goal, ks=None, floor=-math.inf):
    """One block of n steps: ``BlockPart`` terms for P~^{*n} = sum_k binom(n, k) a^{n-k} b^k
    tc^{*(n-k)} * tr^{*k} (a = e^{sc} / (e^{sc} + e^{sr}), b = 1 - a).  Blocks with more than
    K tail events go to +inf (pessimistic) or are dropped (optimistic); K keeps their mass below
    1e-3 abs_goal over the ``blocks`` blocks.  Mass outside the fine windows: above goes to +inf
    (pessimistic); optimistic, all of it may wrap in, an excess bounded in tilted l1.

    Returns (terms, log_scale, p_inf, err): terms [(coarse point, D_k, log weight, k)], the log
    normaliser n log(e^{sc} + e^{sr}), the block's untilted +inf mass (beyond the one-step
    one), and the optimistic excess in tilted l1, relative to e^{log_scale}.

    Given ``ks`` (numbers of tail events), only those terms are built and the blocks with other
    numbers of tail events are left to the caller (``tail_events``): p_inf and err then cover
    the built terms only.  ``floor``: the term is read only at eps >= floor (``tail_events``' term
    without tail steps), so an optimistic window too long to untilt keeps just the cells from
    there up (``_untiltable``)."""
    has_tail = pc.tr is not None and pc.ru > 0
    log_m = float(np.logaddexp(pc.sc, pc.sr)) if has_tail else pc.sc
    la = pc.sc - log_m
    lb = pc.sr - log_m if has_tail else -math.inf
    rel_all = ks is None
    if ks is None:
        k_max, rem_log = _kept_tail_events(pc, n, blocks, abs_goal)
        ks = range(k_max + 1)
    else:
        rem_log = -math.inf
    p_inf = math.exp(rem_log) * (1 + 1e-9) if pess else 0.0
    counts = [n - k for k in ks if n - k > 0] or [1]  # (only k = n asked for: a power is not used)
    # (below delta ~ 1e-15 the fine windows' charges must scale with delta too)
    goal = STAGE1_GOAL if abs_goal >= TAIL_GOAL else min(STAGE1_GOAL, 1e-3 * abs_goal / max(blocks, 1))
    j0, n1, wrap, mgf, sup_lo = _fine_window(pc, n, counts, goal)
    c_n = fft_const(n1)
    spec, e2 = spectrum_of(pc.tc, pc.jc, n1, c_n)
    big_lo = j0 // pc.m
    nc = (j0 + n1 - 1) // pc.m - big_lo + 2
    c_lo = min(counts)
    zs = np.empty((max(counts) - c_lo + 1, n1 // 2 + 1), dtype=np.complex128)
    err_s, z2_s = kf.power_series(spec, e2, c_lo, zs)
    terms = []
    err = 0.0
    for k in ks:
        nk = n - k
        lb_k = log_binom(n, k)
        lw = lb_k + nk * la + (k * lb if k else 0.0)
        # rounding of lgamma, of la, lb and of the sum (a few u of each magnitude): rounded out
        lw_err = 1e-13 * (1.0 + abs(lb_k) + nk * (abs(la) + abs(pc.sc)) + (k * (abs(lb) + abs(pc.sr)) if k else 0.0))
        lw = lw + lw_err if pess else lw - lw_err
        if nk == 0:
            terms.append((0, np.ones(1), lw, k))  # no core step: the atom at loss 0
            continue
        x = _core_power(pc, zs[nk - c_lo], err_s[nk - c_lo], z2_s[nk - c_lo], nk, j0, n1, c_n, pess)
        if wrap:
            top = (j0 + n1) * pc.step
            up_m = chernoff_n(mgf, nk, top, True)
            if pess:  # untilted mass above: <= e^{nk sc - theta top} * tilted, times ru^k binom(n, k)
                p_inf += math.exp(log_binom(n, k) + nk * pc.sc + (k * math.log(pc.ru) if k else 0.0)
                                  - pc.theta * top) * up_m * (1 + 1e-9)
            else:
                lo_m = chernoff_n(mgf, nk, j0 * pc.step, False) if j0 > sup_lo else 0.0
                # coarsening moves tilted mass by at most e^{theta m step}
                # (one term asked for: relative to its own weight, which may be far out of range)
                err += math.exp((lw if rel_all else 0.0) + pc.theta * pc.m * pc.step) * (up_m + lo_m) * (1 + 1e-9)
        lo_k, nc_k = big_lo, nc
        if not pess and pc.theta * nc * pc.m * pc.step > kc.UNTILT_SPAN:
            lo_k, nc_k = _untiltable(x, j0, pc.m, pc.m * pc.step, pc.theta, big_lo, nc, floor)
        d = np.empty(nc_k)
        if pess:
            kc.coarsen_pess(x, j0, pc.m, pc.step, pc.theta, big_lo, d)
        elif not kc.coarsen_opt(x, j0, pc.m, pc.step, pc.theta, lo_k, d):
            raise NotApplicable("optimistic coarsening window too long to untilt")
        terms.append((lo_k, d, lw, k))
    return terms, n * log_m, p_inf, err


def _untiltable(x, j0, m, big_h, theta, big_lo, nc, floor):
    """(first coarse cell, cells) of an optimistic window that ``coarsen_opt`` can untilt: where
    theta times the window passes kc.UNTILT_SPAN and the term is read only at eps >= ``floor``, the
    cells from just below floor up to kc.UNTILT_SPAN / theta above it; the fine masses outside are
    set to 0 in ``x``.  Dropping mass only lowers every δ(eps) (a lower bound stays one), and mass
    below eps adds nothing to δ(eps).  Otherwise the window as it was (``coarsen_opt`` refuses)."""
    if not math.isfinite(floor):
        return big_lo, nc
    first = max(big_lo, math.floor(floor / big_h) - 1)
    last = min(big_lo + nc - 2, first + math.floor(0.95 * kc.UNTILT_SPAN / (theta * big_h)) - 1)
    if last < first:
        return big_lo, nc
    cell = np.floor_divide(j0 + np.arange(x.size), m)
    x[(cell < first) | (cell > last)] = 0.0
    return first, last - first + 2


def _core_power(pc: Pieces, z, err_sum, z2, nk, j0, n1, c_n, pess):
    """C^{*nk} on the fine window from its spectrum z: the inverse transform, its round-off bound
    added (pessimistic) or subtracted (optimistic) per entry, the input rounding (1 +- rho)^nk,
    and zero outside the exact support of the power."""
    charge_fft(n1)
    x = irfft(z, n1)
    e_inf = entry_error(err_sum, z2, n1)
    if not (np.isfinite(x).all() and math.isfinite(e_inf)):
        raise FloatingPointError("non-finite values in the FFT composition of the PLD")
    x = np.roll(x, -(j0 % n1))
    grow = math.expm1(nk * pc.rho_c * (1 + 1e-9))
    if pess:
        x = (np.maximum(x, 0.0) + e_inf) * (1 + grow)
    else:
        x = np.maximum(x - e_inf, 0.0) * (1 - min(grow, 0.5))
    x[: max(nk * pc.jc - j0, 0)] = 0.0
    x[max(nk * (pc.jc + pc.tc.size - 1) - j0 + 1, 0) :] = 0.0
    return x


def compose_two_stage(schedule, add, step, t1s, m, theta, pess, eps_lo, tau, finish=None) -> Grid:
    """The composition of a schedule [(sigma, q, count)] of SGM steps by blocks: for each entry,
    coarsen(P^{*T1}) (``block``) composed count // T1 times with coarsen(P^{*(count mod T1)}), T1
    its entry of ``t1s``, every block on the one coarse grid of spacing m * step.

    Coarsening is a mean-preserving spread (pessimistic) or contraction (optimistic) in
    u = e^{-loss}, so the bounds stay bounds (module notes), and so are products of independently
    coarsened blocks: the spread of a sum of independent losses is the sum of their spreads.
    ``finish`` composes the blocks' ``Composite`` (default ``compose_parts``;
    ``banded.compose_banded``: possibly kept as its spectrum's band, with the same charges)."""
    abs_goal = window_goal(tau, sum(c for _, _, c in schedule))
    # the blocks of all entries share the budget of the blocks dropped for many tail events
    n_blocks = sum(c // t1 + 1 for (_, _, c), t1 in zip(schedule, t1s))
    parts = []
    mean = var = log_scale = p_inf_log = err_log = mass_log = rho = 0.0
    sup_lo = sup_hi = 0
    hybs = [hybrid_step(sigma, q, add, step, m, tau, CORE_TAIL / t1) for (sigma, q, _), t1 in zip(schedule, t1s)]
    # (optimistic: the entries' bulks shifted onto knots, ``lattice_shift``)
    ds = shifts([h.core for h in hybs], [c for _, _, c in schedule], step, pess)
    for (sigma, q, count), t1, hyb, d in zip(schedule, t1s, hybs, ds):
        core = hyb.core
        pc = tilt_pieces(core.opt_by(d) if d else core.masses(pess), core.j_lo, hyb.tail(pess, d),
                         hyb.big_lo, step, m, theta, pess, f" for sigma={sigma}, q={q}")
        p_inf1 = (hyb.p_inf + pc.drop_c + pc.drop_r) * (1 + 1e-12) if pess else 0.0
        if p_inf1 >= 0.5:
            raise NotApplicable("one-step +inf mass too large for blocks")
        # moments of the tilted one-step mixture (window heuristics)
        wb = 1.0 / (1.0 + math.exp(pc.sc - pc.sr)) if pc.tr is not None else 0.0
        mean1 = (1 - wb) * pc.mc + wb * pc.mr
        mean += count * mean1
        var += count * ((1 - wb) * (pc.vc + pc.mc * pc.mc) + wb * (pc.vr + pc.mr * pc.mr) - mean1 * mean1)
        t2, t_rem = divmod(count, t1)
        # rho_r (rounding of the tilted tail entries) enters at most K times per block
        rho += MAX_TAIL_EVENTS * (t2 + 1) * pc.rho_r
        for nb, times in ([(t1, t2)] if t2 else []) + ([(t_rem, 1)] if t_rem else []):
            terms, ls, pinf_b, err_b = block(pc, nb, n_blocks, pess, abs_goal)
            part = BlockPart(terms, hyb.big_lo, pc.tr, times)
            parts.append(part)
            log_scale += times * ls
            p_one = -math.expm1(nb * math.log1p(-p_inf1)) + pinf_b if pess else 0.0
            p_inf_log += times * math.log1p(-p_one) if p_one < 1.0 else -math.inf
            mass = part.mass()
            mass_log += times * math.log(max(mass, 1e-300))
            err_log += times * math.log1p(err_b / max(mass, 1e-300))
            lo, hi = part.sup
            sup_lo += times * lo
            sup_hi += times * hi
    p_inf = -math.expm1(p_inf_log) * (1 + 1e-12) if pess else 0.0
    # the excess composes to at most prod (|B| (1 + e_B))^{times} - prod |B|^{times}
    err_rel = math.exp(mass_log) * math.expm1(err_log * (1 + 1e-9)) if not pess else 0.0
    count = sum(c for _, _, c in schedule)
    total = shift_total([c for _, _, c in schedule], ds)
    g = (compose_parts if total > 0.0 else finish or compose_parts)(
        Composite(parts, m * step, count, mean, var, log_scale, rho, p_inf, sup_lo, sup_hi, err_rel),
        theta, pess, eps_lo, tau)
    return moved_down(g, total)


def one_stage_core(pc: Pieces, count, pess, eps_lo, tau) -> Grid:
    """The core's own T-th power on the fine grid (no coarsening), by one transform (stage 3)."""
    lo, hi = count * pc.jc, count * (pc.jc + pc.tc.size - 1)
    p_inf = count * pc.drop_c * (1 + 1e-12) if pess else 0.0
    return compose_parts(Composite([ArrayPart(pc.jc, pc.tc, count)], pc.step, count, count * pc.mc, count * pc.vc,
                                   count * pc.sc, count * pc.rho_c, min(p_inf, 1.0), lo, hi),
                         pc.theta, pess, eps_lo, tau)
