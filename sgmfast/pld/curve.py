"""Privacy curves: eps(δ) or δ(eps) at every checkpoint of one run, for about the cost of the last.

A run's checkpoints T_1 < ... < T_K share its one-step arrays.  The composed spectrum at T_k is
the one at T_{k-1} times the steps in between (kernel ``fft_power.power_checkpoints``), so the
one-step arrays are discretised, tilted and transformed once -- on the grid step and the tilt
that the last checkpoint needed -- and each checkpoint reads its own window off them: every
d-th frequency of a length-n spectrum is the spectrum of the arrays folded modulo n / d, so an
early checkpoint, whose composed loss is narrower, reads a shorter window off the same spectrum.
The composed loss is smooth, so only a narrow band of each checkpoint's spectrum survives the
kernel's cut-off (tens of frequencies of ~20,000 at late MNIST checkpoints); where it is narrow,
the checkpoint is answered from that band (``spectral.SpectralGrid``: no inverse transform),
elsewhere by one inverse transform of its window.  The add direction, rarely the larger, is
composed at every ``ADD_STRIDE``-th checkpoint and wherever the bound borrowed from a later one
could matter (``_sparse_add``).  On two cores the last checkpoint's own engine runs beside the
others, which start on the grid step that engine starts from, and again on the one it ends on
if that differs (the two answers intersected).  Checkpoints left wide get RDP's bound
(``_rdp_bounds``), closed forms where they apply (a single step) and, within ``REST_BUDGET``,
engines of their own; any left then keep the bounds monotonicity gives them.

Work.  Everything but the final checkpoint's engine is charged to one meter, in units of work
(``sgmfast._work``), never wall-clock time: the answers do not depend on the machine, its load or
numba compiling.  The shared spectra get ``_fast_budget`` (5 ms of work more a checkpoint), the
rest what ``_allowance`` leaves: a few times the final engine's own work -- a curve costs a few
single queries even where the shared spectra say little.  Every pass is charged before it runs
(the transforms, the power kernel's frequencies and increment rows, the reads, RDP's
quadrature), and each tilt group's directions plan their grids against their share of the
predicted work (``_shared_groups``, ``_plan``): where not all checkpoints fit, those that do
are composed in ``_spread`` order -- the last, the first, the middles of the widest gaps -- so
that monotonicity brackets the rest, rather than the first ones until the work runs out.
Memory: a shared grid has at most SHARED_BINS bins (windows past it are cut and charged, or
skipped), and those longer than PAIR_BINS are built one at a time, beside the final engine's.

Soundness.  Each checkpoint's grid is the one ``composition.compose_parts`` builds for its
schedule on that step, tilt and window (``composition.grid_of``, with the error sums of the
shared kernel, which are ``power_product``'s for the cumulative counts): the same certified
bounds.  A tilt away from a checkpoint's saddle point only widens its interval.  A checkpoint
whose interval is wider than the accuracy (or whose add direction may set the answer) is
answered by its own ``Engine``, started on the same grid step, while the budget lasts.  Both
eps(δ) and δ(eps) grow with the number of steps (a run's prefix is a post-processing of the
run), so every upper bound also holds at the earlier checkpoints and every lower bound at the
later ones: the curve is made monotone that way, never looser than its points.  What a budget
stops leaves a checkpoint its trivial bounds (0, and +inf or 1), narrowed only by certified
ones: RDP's, the single steps' closed forms, its neighbours'.
"""

from __future__ import annotations

import bisect
import contextlib
import contextvars
import heapq
import math
import threading

import numpy as np
from scipy.special import log_ndtr, ndtr

from .._failures import GridFailure, GridTooLarge
from .._kernels import rdp as _rdp_k
from .._kernels.pld import fft_power as kf
from .._kernels.rdp import orders as _orders
from .._kernels.rdp.log_a import QUAD_CHEAP
from .. import rdp as _rdp
from .._work import UNITS_PER_SECOND, Meter, charge, metered
from . import exact
from .common import (ADD, REMOVE, REPLACE, SPLIT_MIN, bins_limit, final_pool, grid_pool, split_pool,
                     two_cores)
from .composition import ArrayPart, TiltedStep, composite, part_spectra
from .onestep import one_step
from .certifiers import Caches, Job
from .engine import BUDGET, TILT, Engine
from .schedules import MAX_PARTS, make_engine
from .two_stage import MIN_STEPS
from .estimates import loss_moments
from .spectral import SpectralGrid, read_delta, read_eps, unrolled
from .windows import CHERNOFF_K, choose_window, log_mgf_table, widen

#: memory for the composed spectra of a batch of checkpoints (complex, bytes); for transforms
#: longer than PAIR_BINS (built beside the final checkpoint's engine, whose own grids are large)
BATCH_BYTES = 64 << 20
BATCH_BYTES_BIG = 16 << 20


class Run:
    """A run as checkpoints: ``parts`` [(sigma, q)] and ``counts`` (K x m) the number of steps of
    each part composed by checkpoint k (non-decreasing down the rows)."""

    def __init__(self, parts, counts):
        self.parts = list(parts)
        self.counts = np.asarray(counts, dtype=np.int64).reshape(-1, len(self.parts))

    def schedule(self, k: int):
        return [(s, q, int(c)) for (s, q), c in zip(self.parts, self.counts[k]) if c > 0]

    @property
    def plain(self) -> bool:
        """Every part a noisy, subsampled step (the exact paths of ``Engine`` do the others), and
        few enough of them to be composed exactly (``schedules``)."""
        return len(self.parts) <= MAX_PARTS and all(0.0 < s < math.inf and 0.0 < q < 1.0 for s, q in self.parts)


def _monotone_in_steps(lo, up):
    """Non-decreasing in the checkpoints: an upper bound holds at every earlier one, a lower
    bound at every later one."""
    return np.maximum.accumulate(lo), np.minimum.accumulate(up[::-1])[::-1]


def _estimates(run: Run, target: float, add) -> np.ndarray:
    """The Gaussian estimate of eps(target) at each checkpoint (mean and variance add), by one
    vectorised bisection to ~1e-6 relative (plenty for a tilt, a window and a search start)."""
    mom = np.array([loss_moments(s, q, add) for s, q in run.parts])
    counts = run.counts.astype(np.float64)
    mean, var = counts @ mom[:, 0], counts @ mom[:, 1]
    live = var > 0
    mean, sd = mean[live], np.sqrt(var[live])

    def gauss_delta(eps):
        x = (mean - eps) / sd
        return ndtr(x) - np.exp(eps - mean + 0.5 * sd * sd + log_ndtr(x - sd))

    lo, hi = np.zeros(mean.size), mean + 50 * sd + 50
    with np.errstate(over="ignore", invalid="ignore"):
        some = gauss_delta(lo) > target
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            above = gauss_delta(mid) > target
            lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
            if np.all(hi - lo <= 1e-6 * hi):
                break
    out = np.zeros(run.counts.shape[0])
    out[np.flatnonzero(live)] = np.where(some, hi, 0.0)
    return out


def _even_divisors(n: int) -> list:
    out = set()
    i = 1
    while i * i <= n:
        if n % i == 0:
            out.update(d for d in (i, n // i) if d % 2 == 0)
        i += 1
    return sorted(out)


class _Tables:
    """Chernoff tables (``windows.log_mgf_table``) shared by the checkpoints: each part's log-MGF
    on the lattice lambda = +-2^(j/2) / sd_ref, the checkpoint's table the count-weighted sum at
    the lattice points nearest its own 2^(k/2) / sd.  (Any lambda gives a valid bound.)  Where
    every checkpoint counts every part, the tables of all checkpoints at one lattice shift are one
    product (``rows`` the checkpoints' counts)."""

    def __init__(self, parts, step, sd_ref, rows):
        self.parts, self.step, self.sd_ref, self.rows = parts, step, sd_ref, rows
        self.dense = bool((rows > 0).all())
        self.memo = {}
        self.cols = {}  # (m, sign) -> each part's log-MGF at lambda = sign 2^(m/2) / sd_ref
        self.products = {}  # (shift, lower) -> every checkpoint's table at that shift (dense rows)

    def _columns(self, ms, sign):
        """The parts' log-MGFs at lambda = sign 2^(m/2) / sd_ref for each m (P x len(ms)); the
        lattice points not met before in one kernel call per part (shifts share most of them)."""
        miss = sorted({int(m) for m in ms if (int(m), sign) not in self.cols})
        if miss:
            lams = sign * (2.0 ** (np.array(miss) / 2.0) / self.sd_ref)
            with np.errstate(over="ignore", invalid="ignore"):
                vals = np.array([p.log_mgf(self.step, lams) for p in self.parts])
            for i, m in enumerate(miss):
                self.cols[(m, sign)] = vals[:, i]
        return np.stack([self.cols[(int(m), sign)] for m in ms], axis=1)

    def _per_part(self, shift, lower):
        key = (shift, lower)
        if key not in self.memo:
            ms = CHERNOFF_K + shift
            base = 2.0 ** (ms / 2.0) / self.sd_ref
            lams = np.concatenate((base, -base)) if lower else base
            per = self._columns(ms, 1.0)
            self.memo[key] = (lams, np.concatenate((per, self._columns(ms, -1.0)), axis=1) if lower else per)
        return self.memo[key]

    def prefetch(self, sds, lower):
        """The parts' log-MGFs at every lattice point the tables at these sds will use, in one
        kernel call per part (the shifts of a curve's checkpoints share most of them)."""
        shifts = {int(round(2.0 * math.log2(self.sd_ref / sd))) for sd in sds if sd > 0.0 and self.sd_ref > 0.0}
        if shifts:
            ms = np.unique(np.concatenate([CHERNOFF_K + shift for shift in shifts]))
            for sign in ((1.0, -1.0) if lower else (1.0,)):
                self._columns(ms, sign)

    def table(self, k):
        """Checkpoint k's mgf: sd, lower -> (lambdas, log-MGFs)."""
        counts = self.rows[k]
        used = counts > 0

        def mgf(sd, lower=True):
            if not (sd > 0.0 and self.sd_ref > 0.0):
                parts = [ArrayPart(p.j_lo, p.t, int(c)) for p, c in zip(self.parts, counts) if c > 0]
                return log_mgf_table(parts, self.step, sd, lower)
            key = (int(round(2.0 * math.log2(self.sd_ref / sd))), lower)
            lams, per = self._per_part(*key)
            with np.errstate(over="ignore", invalid="ignore"):
                if not self.dense:
                    return lams, counts[used].astype(np.float64) @ per[used]
                if key not in self.products:
                    self.products[key] = self.rows.astype(np.float64) @ per
                return lams, self.products[key][k]

        return mgf


#: the most bins one shared grid may have (``common.bins_limit``; windows past it are cut, their
#: charges say so, or the checkpoint is left to other bounds).  The shared grids are built beside
#: the final checkpoint's engine, whose own grids may reach MAX_BINS: this keeps both in memory
SHARED_BINS = 1 << 21
#: composed windows longer than this are built one direction at a time (``_BIG``): two of them at
#: once, beside the final engine, would hold ~100 bytes a bin
PAIR_BINS = 1 << 19
_BIG = threading.Lock()

#: work (``sgmfast._work`` units) of the curve's passes that the transforms' charges do not cover,
#: measured here against the FFT's ~3 ns a unit: ``fft_power.power_checkpoints`` ~60 ns a stored
#: frequency, plus ~20 ns per checkpoint and per increment row it carries there; reading an
#: unrolled grid (``unroll``, the queries' suffix sums) ~10 ns a bin; a spectral read a few
#: hundred ns per band frequency
POWER_PER_FREQ = 20.0
POWER_PER_ROW = 8.0
READ_PER_BIN = 4.0
SPECTRAL_PER_FREQ = 100.0
SPECTRAL_FIXED = 1e4


class _Layout:
    """The cheap half of a direction's composition at a run's checkpoints: the tilted one-step
    arrays, each checkpoint's ``Composite`` and window (``choose_window``; None where the window
    would exceed the bins cap: that checkpoint gets no grid).  ``_compose`` builds the grids."""

    def __init__(self, run: Run, add, pess: bool, step: float, theta: float, eps_lo, tau: float):
        self.run, self.pess, self.theta = run, pess, theta
        self.steps = [TiltedStep(one_step(s, q, add, step, tau), step, theta, pess) for s, q in run.parts]
        comps = [composite(self.steps, c, step, pess) for c in run.counts]
        tables = _Tables([s.part for s in self.steps], step, math.sqrt(comps[-1].var), run.counts)
        # (the lattice the windows' tables use: each composition's sd, lower tails as _chernoff_window says)
        tables.prefetch([math.sqrt(c.var) for c in comps], not pess or theta <= 0)
        for k, c in enumerate(comps):
            c.mgf = tables.table(k)
        self.comps = comps
        self.los = [min(e, c.sup_hi * step) for e, c in zip(eps_lo, comps)]
        self.wins = [_window(c, theta, pess, e, tau) for c, e in zip(comps, self.los)]


def _window(c, theta, pess, eps_lo, tau):
    try:
        return choose_window(c, theta, pess, eps_lo, tau)
    except GridTooLarge:
        return None


def _fft_units(n: int) -> float:
    return n * math.log2(max(n, 2))


def _predicted(lay: _Layout, fit, n, spectra, e2, dec):
    """(work of each checkpoint of ``fit``, live half-spectrum length) on the shared length n,
    before composing: the power kernel's share, and the read -- off the band (``SpectralGrid``)
    where it will be narrow, else an inverse transform and passes over the window.  With one
    part the band of checkpoint k is where |F|^C_k stays above the cut-off (the kernel's test,
    less its rounding terms: a prediction); with more, every checkpoint is taken as unrolled."""
    ntot = lay.run.counts[fit].sum(axis=1).astype(np.float64)
    h = kf.live_extent(spectra, e2, ntot, LOG_CUT)
    units = []
    if spectra.shape[0] == 1:
        g = np.log(np.abs(spectra[0]) + e2[0])
        smax = np.maximum.accumulate(g[::-1])[::-1]  # non-increasing: the last live frequency by bisection
        live = np.searchsorted(-smax, -LOG_CUT / ntot, side="left")
    else:
        live = np.full(len(fit), spectra.shape[1])
    for i, k in enumerate(fit):
        nk = lay.wins[k].n
        band = max(int(live[i]) - 1, 0) // int(dec[i])
        if SpectralGrid.usable(band, nk, lay.theta):
            read = SPECTRAL_FIXED + SPECTRAL_PER_FREQ * band
        else:
            read = _fft_units(nk) + READ_PER_BIN * nk
        units.append(2.0 * POWER_PER_ROW * h + read)
    return units, h


def _plan(units, fixed: float, left: float) -> list:
    """Positions of the checkpoints to compose: all where their work (``units``, plus ``fixed``)
    fits ``left``, else those that fit in ``_spread`` order -- the last, the first, then the
    middles of the widest gaps: the curve's monotonicity bounds the others from either side."""
    if fixed + sum(units) <= left:
        return list(range(len(units)))
    out, total = [], fixed
    for i in _spread(len(units)):
        if total + units[i] <= left:
            out.append(i)
            total += units[i]
    return sorted(out)


class _Prep:
    """A direction's shared spectra and each of its checkpoints' predicted work (``_prepare``)."""

    __slots__ = ("lay", "fit", "wins", "n", "spectra", "e2", "units", "fixed", "cut")

    def __init__(self, lay, fit, wins, n, spectra, e2, units, fixed, cut):
        self.lay, self.fit, self.wins, self.n, self.spectra, self.e2 = lay, fit, wins, n, spectra, e2
        self.units, self.fixed, self.cut = units, fixed, cut

    @property
    def need(self) -> float:
        return self.fixed + sum(self.units)


def _prepare(lay: _Layout, cap: float):
    """The spectra of ``lay``'s parts on the longest window that fits the bins cap, and each
    checkpoint's predicted work (``_predicted``); None where no window fits, or where not even the
    spectra and one checkpoint's grid fit ``cap`` units."""
    fit = [k for k, w in enumerate(lay.wins) if w is not None]
    if not fit:
        return None
    n = max(lay.wins[k].n for k in fit)
    if len(lay.steps) * _fft_units(n) + _fft_units(lay.wins[fit[-1]].n) > cap:
        return None  # (the curve's other bounds stand)
    divisors = _even_divisors(n)
    wins = {k: widen(lay.wins[k], divisors[bisect.bisect_left(divisors, lay.wins[k].n)]) for k in fit}
    spectra, e2 = part_spectra([s.part for s in lay.steps], n)
    dec = np.array([n // wins[k].n for k in fit], dtype=np.int64)
    units, h = _predicted(lay, fit, n, spectra, e2, dec)
    return _Prep(lay, fit, wins, n, spectra, e2, units, POWER_PER_FREQ * h, len(fit) < len(lay.wins))


def _compose(prep, budget: _Budget):
    """The grids of the checkpoints of ``prep`` that fit ``budget`` (``_plan``): ``(index, grid)``
    in order; ``budget.cut`` set where some are left out."""
    if prep is None:
        budget.cut = True
        return
    plan = _plan(prep.units, prep.fixed, budget.left())
    budget.cut |= prep.cut or len(plan) < len(prep.fit)
    if plan:
        yield from _composed(prep.lay, [prep.fit[i] for i in plan], prep.wins, prep.n, prep.spectra, prep.e2, budget)




def _composed(lay: _Layout, sel, wins, n, spectra, e2, budget):
    counts = lay.run.counts[sel]
    rows, row_of = np.unique(np.diff(counts, axis=0, prepend=0), axis=0, return_inverse=True)
    row_of = row_of.reshape(-1).astype(np.int64)
    rows = rows.astype(np.int64)
    ntot = counts.sum(axis=1).astype(np.float64)
    dec = np.array([n // wins[k].n for k in sel], dtype=np.int64)
    h = n // 2 + 1
    state = (np.ones(h, dtype=np.complex128), np.zeros(h), np.zeros(h))
    batch = max(1, (BATCH_BYTES if n <= PAIR_BINS else BATCH_BYTES_BIG) // (16 * h))
    theta, pess = lay.theta, lay.pess
    for k0 in range(0, len(sel), batch):
        if budget is not None and budget.spent():
            budget.cut = True
            return
        k1 = min(len(sel), k0 + batch)
        z, err, z2, wsum, band = _power(spectra, e2, rows, row_of[k0:k1], ntot[k0:k1], dec[k0:k1], n, k0, state,
                                        len(sel))
        cnt = counts[k0:k1]
        werrs = np.where(cnt > 0, cnt * e2 * np.sqrt(wsum), 0.0).sum(axis=1) * (1 + 1e-12)
        for j in range(k1 - k0):
            k = sel[k0 + j]
            werr = float(werrs[j])
            m, nk, c, w, lo = int(dec[k0 + j]), wins[k].n, lay.comps[k], wins[k], lay.los[k]
            bj = int(band[j])
            if SpectralGrid.usable(bj, nk, theta):
                charge(SPECTRAL_FIXED + SPECTRAL_PER_FREQ * bj)
                zr = np.ascontiguousarray(z[j, ::m][: bj + 1])
                yield k, SpectralGrid(c, w, theta, pess, lo, zr, err[j] + werr, z2[j])
            else:  # (the stored columns; those beyond were cut)
                if budget is not None and budget.spent():
                    budget.cut = True
                    return
                charge(READ_PER_BIN * nk)
                yield k, unrolled(c, w, theta, pess, lo, z[j, ::m][: nk // 2 + 1], err[j] + werr, z2[j])


#: spectra below this are cut (``kf.power_checkpoints``): an error of at most this per
#: frequency, charged; what is left is the composed loss's band, far below n at late checkpoints
LOG_CUT = math.log(1e-30)


def _power(spectra, e2, rows, row_of, ntot, dec, n, k0, state, k_all):
    """``kf.power_checkpoints`` over all frequencies, the upper half on a second thread:
    (spectra, err, z2, wsum, band) of the checkpoints.  The spectra are stored up to the last
    frequency that can survive the cut (``kf.live_extent``: columns beyond are 0, charged).

    With one part the kernel is given only this batch's increment rows: it forms each row's
    power at every live frequency, and a run of log-spaced checkpoints has as many distinct rows
    as checkpoints (all of them at every batch made the kernel's work quadratic in the
    checkpoints).  Its early exit -- a frequency cut for good when no row can raise its bound --
    is the same for any set of rows then: with one part every row is a positive multiple of the
    same log modulus."""
    nk = row_of.size
    if spectra.shape[0] == 1:
        used, row_of = np.unique(row_of, return_inverse=True)
        rows, row_of = np.ascontiguousarray(rows[used]), row_of.reshape(-1).astype(np.int64)
    h = kf.live_extent(spectra, e2, ntot, LOG_CUT)
    charge(h * (POWER_PER_FREQ + POWER_PER_ROW * (nk + rows.shape[0])))
    z = np.zeros((nk, h), dtype=np.complex128)
    parts = [(np.zeros(nk), np.zeros(nk), np.zeros((nk, spectra.shape[0])), np.full(nk, -1, dtype=np.int64))]
    acc, lsum, labs = state
    args = (spectra, e2, rows, row_of, ntot, dec, n, k0)
    if h < SPLIT_MIN or not two_cores():
        kf.power_checkpoints(*args, 0, h, acc, lsum, labs, z, *parts[0][:3], LOG_CUT, k_all, parts[0][3])
    else:
        parts.append((np.zeros(nk), np.zeros(nk), np.zeros((nk, spectra.shape[0])), np.full(nk, -1, dtype=np.int64)))
        m = h // 2
        fut = split_pool().submit(kf.power_checkpoints, *args, m, h, acc, lsum, labs, z, *parts[1][:3], LOG_CUT, k_all,
                                  parts[1][3])
        kf.power_checkpoints(*args, 0, m, acc, lsum, labs, z, *parts[0][:3], LOG_CUT, k_all, parts[0][3])
        fut.result()
    err = sum(p[0] for p in parts)
    kf.charge_cut(dec, h, spectra.shape[1], LOG_CUT, err)  # (the frequencies not stored)
    z2 = sum(p[1] for p in parts)
    wsum = sum(p[2] for p in parts)
    band = np.max([p[3] for p in parts], axis=0)
    return z, err, z2, wsum, band


# --- the curves --------------------------------------------------------------------------------

def _engine(run, k, accuracy, relation, budget):
    return make_engine(run.schedule(k), accuracy, None, relation, budget=budget)


def epsilon_curve(run: Run, target: float, accuracy: float, relation: str):
    """(lower, upper) of eps(target) at every checkpoint of ``run``."""

    def single(engine, step):
        lo, up = engine.epsilon(target, step)[:2]
        wide = not up - lo <= accuracy * up
        short = sum(c for _, _, c in engine.schedule) < MIN_STEPS if isinstance(engine, Engine) else True
        return lo, up, int(wide) + int(short)  # (the engine's RDP calls: its cap where wide, a floor when short)

    return _curve(run, accuracy, relation, math.inf, run.plain,
                  lambda final: final.epsilon(target), lambda final: final.first_step(target),
                  lambda final, sub, step, budget, memo: _fast_epsilon(final, sub, target, step, budget, memo), single,
                  lambda form: exact.eps_bounds(form, target))


def delta_curve(run: Run, eps: float, accuracy: float, relation: str):
    """(lower, upper) of δ(eps) at every checkpoint of ``run``."""
    e = np.array([eps])

    def answer(final):
        l, u = final.delta(e)
        return l[0], u[0], final.last_step

    def single(engine, step):
        l, u = engine.delta(e)
        return l[0], u[0], 2  # (the engine's RDP caps at eps and eps + h)

    return _curve(run, accuracy, relation, 1.0, run.plain and math.isfinite(eps), answer,
                  lambda final: final.first_delta_step(eps),
                  lambda final, sub, step, budget, memo: _fast_delta(final, sub, eps, step, budget, memo), single,
                  lambda form: tuple(float(b[0]) for b in exact.delta_bounds(form, e)))


#: seconds (of work, ``sgmfast._work``) for the shared spectra (``_fast_budget``: FAST_BUDGET plus
#: FAST_PER_POINT a checkpoint, over both steps they may be read on) and for the checkpoints that
#: need an engine of their own (REST_BUDGET; REST_MIN the least one of them is given)
FAST_BUDGET = 2.0
FAST_PER_POINT = 0.005
REST_BUDGET = 2.0
REST_MIN = 0.05
#: at most this many checkpoints left wide are given all of REST_BUDGET (``_curve``)
REST_FEW = 8
#: all of a curve's work but its final engine's is at most CURVE_FACTOR times that engine's, or
#: the shared spectra's budget where that is more (a cheap last checkpoint), and never more
#: than the two budgets above together: a curve costs a few single queries
CURVE_FACTOR = 3.0
#: units charged for an engine of its own beyond its transforms (its setup, its tilt searches),
#: and for an RDP optimisation (``sgmfast.rdp``: a few dozen passes over each mechanism's
#: quadrature nodes for its fractional orders, ``orders._node_cap``; measured 1-4 us a node
#: here, the more for small sigma: 0.06-0.12 s at sigma = 0.015, 0.3 ms at 0.2)
ENGINE_UNITS = 2e6
RDP_PER_NODE = 1000.0
RDP_FIXED = 2e4


#: a hard budget stops its work at this multiple of its limit, plus this many units (plans are
#: made against the limit; the slack absorbs their small misses: a band wider than predicted)
HARD_SLACK = 1.25
HARD_EXTRA = 2.5e5


class _Budget:
    """Work charged to ``meter`` (open it with ``metered``) against a limit in units.  A ``hard``
    one raises ``WorkLimit`` at the charge that would pass it (HARD_SLACK; charges come before
    their work: a one-step grid, a transform, a kernel pass), so a prediction that falls short
    cannot overrun it by much; only a budget charged from one thread may be hard (which of two
    threads' charges passes a shared limit depends on their timing, and the answers must not)."""

    def __init__(self, units: float, hard: bool = False):
        self.limit = max(float(units), 0.0)
        self.meter = Meter(HARD_SLACK * self.limit + HARD_EXTRA if hard else None)
        self.cut = False  # (set where its grids stopped short: a window too long, no work left)

    def left(self) -> float:
        return max(self.limit - self.meter.units, 0.0)

    def spent(self) -> bool:
        return self.meter.units >= self.limit


def _fast_budget(points: int) -> float:
    """Units for a curve's shared spectra (both steps they may be read on)."""
    return (FAST_BUDGET + FAST_PER_POINT * points) * UNITS_PER_SECOND


def _allowance(points: int, final_units: float) -> float:
    """Units for all of a curve's work but its final engine's (CURVE_FACTOR notes)."""
    fast = _fast_budget(points)
    return min(fast + REST_BUDGET * UNITS_PER_SECOND, max(fast, CURVE_FACTOR * final_units))


def _measured(answer):
    """(answer(), the work it charged)."""
    with metered() as meter:
        res = answer()
    return res, meter.units


def _merge(a, b):
    """Two (lower, upper, narrow, complete) of the same checkpoints (both certified): their
    intersection, narrow where the second (on the final's step) is -- as if it were the only one."""
    if a is None or b is None:
        return b if a is None else a
    return np.maximum(a[0], b[0]), np.minimum(a[1], b[1]), b[2], b[3]


def _curve(run: Run, accuracy, relation, trivial, shareable, answer, first_step, shared, single, closed):
    """The plan of both curves: the last checkpoint by its own engine (``answer(final)`` ->
    (lower, upper, grid step)), the others read off shared spectra on that step
    (``shared(final, sub, step, budget, memo)`` -> (lower, upper, narrow, complete); ``shareable``: the run
    allows it), closed forms where they apply (``closed(form)`` -> (lower, upper),
    ``_closed_forms``), those left wide by engines of their own (``single(engine, step)`` ->
    (lower, upper, its RDP calls)) within REST_BUDGET; then monotone in the steps.  ``trivial``
    is the trivial upper bound.  All but the final engine is charged to one meter and kept
    within ``_allowance``."""
    kk = run.counts.shape[0]
    lo, up = np.zeros(kk), np.full(kk, trivial)
    live = run.counts.sum(axis=1) > 0
    if not live.any():
        return np.zeros(kk), np.zeros(kk)
    last = kk - 1
    final = _engine(run, last, accuracy, relation, BUDGET)
    todo = [k for k in range(last) if live[k]]
    sub = Run(run.parts, run.counts[todo])
    work = Meter()  # everything but the final engine
    fast_units = _fast_budget(len(todo))
    share = shareable and bool(todo)
    memo = {}  # (RDP's bounds, for a second pass on the final's step)

    def fast(step, units):
        if units <= 0.0:
            return None
        with metered(work), bins_limit(SHARED_BINS):
            try:
                return shared(final, sub, step, _Budget(units), memo)
            except (ArithmeticError, GridFailure, MemoryError):
                return None

    guess = got = None
    if share and isinstance(final, Engine) and two_cores():
        # the final engine on a thread of its own; the others meanwhile on the step it starts from,
        # within what any allowance grants (the final's work is not known yet)
        guess = first_step(final)
        fut = final_pool().submit(contextvars.copy_context().run, _measured, lambda: answer(final))
        try:
            got = fast(guess, fast_units)
        finally:
            (lo[last], up[last], step), final_units = fut.result()
    else:
        (lo[last], up[last], step), final_units = _measured(lambda: answer(final))
    allowance = _allowance(len(todo), final_units)
    if share and step is not None and step != guess:  # (on the final's step too; both certified)
        # where every grid on the first step was composed, those on the final's get the shared
        # spectra's whole budget again (as they always did); where the first pass was cut short
        # -- a hard corner -- the second gets what the allowance leaves
        units = fast_units if got is not None and got[3] else min(fast_units, allowance) - work.units
        got = _merge(got, fast(step, units))
    if got is not None:
        f_lo, f_up, ok, _ = got
        lo[todo], up[todo] = f_lo, f_up
        rest = [k for k, good in zip(todo, ok) if not good]
    else:
        rest = todo
    if run.plain:  # (closed forms: a single step exactly, a floor for the others)
        c_lo, c_up = _closed_forms(run, relation, closed)
        lo, up = np.maximum(lo, c_lo), np.minimum(up, c_up)
        rest = [k for k in rest if not c_up[k] < math.inf]
    # a few checkpoints left wide get the whole REST_BUDGET (their engines as fine as ever); many
    # -- a hard corner, where the shared spectra say little -- share what the allowance leaves
    limit = REST_BUDGET * UNITS_PER_SECOND
    if len(rest) > REST_FEW:
        limit = min(limit, allowance - work.units)
    with metered(work):
        # each on its own engine (the exact paths, or a tilt of its own)
        for k, budget in _within_budget(rest, work, limit):
            engine = _engine(run, k, accuracy, relation, budget)
            e_lo, e_up, rdp_calls = single(engine, step)
            charge(ENGINE_UNITS + rdp_calls * _rdp_units(run.schedule(k)))
            lo[k], up[k] = max(lo[k], e_lo), min(up[k], e_up)
    lo[~live], up[~live] = 0.0, 0.0
    return _monotone_in_steps(lo, up)


def _closed_forms(run: Run, relation, bounds):
    """(lower, upper) at each checkpoint from closed forms (``exact``): where its schedule has one
    (a single step), both; elsewhere the most revealing single step it has as a lower bound (a
    composition is at least as revealing as any one of its steps, a post-processing) and the
    trivial upper bound (+inf: the caller's own stands)."""
    per = np.array([bounds(exact.closed_form([(s, q, 1)], relation))[0] for s, q in run.parts])
    lo = np.where(run.counts > 0, per, 0.0).max(axis=1)
    up = np.full(lo.shape, math.inf)
    for k in np.flatnonzero(run.counts.sum(axis=1) == 1):
        form = exact.closed_form(run.schedule(int(k)), relation)
        if form is not None:
            lo[k], up[k] = bounds(form)
    return lo, up


def _rdp_units(schedule) -> float:
    """Work charged for one RDP optimisation of ``schedule`` (RDP_PER_NODE notes)."""
    units = RDP_FIXED
    for sigma, q, _ in schedule:
        if 0.0 < q < 1.0 and 0.0 < sigma < math.inf:
            nodes = int(_orders._node_cap(sigma, 3.0))
            if nodes <= QUAD_CHEAP:
                units += RDP_PER_NODE * nodes
    return units


def _spread(m: int) -> list:
    """0 .. m-1 in an order that brackets every index early: the last, the first, then the
    midpoints of the gaps, widest first (where time runs out, the curve's monotonicity bounds
    the checkpoints left out from the ones on either side)."""
    if m <= 0:
        return []
    order, gaps, count = [m - 1] + ([0] if m > 1 else []), [(-(m - 1), 0, 0, m - 1)], 1
    while gaps:
        _, _, a, b = heapq.heappop(gaps)  # the widest gap (of equal ones, the latest)
        if b - a < 2:
            continue
        mid = (a + b) // 2
        order.append(mid)
        for lo, hi in ((a, mid), (mid, b)):
            heapq.heappush(gaps, (-(hi - lo), -count, lo, hi))
            count += 1
    return order


def _within_budget(rest: list, meter, limit: float):
    """(checkpoint, engine budget) for the checkpoints ``rest``, in ``_spread`` order, sharing
    ``limit`` units of work charged to ``meter`` (at least REST_MIN seconds each) and stopping when
    it is spent: a curve that needs many engines of its own still answers within seconds; the
    ones left keep the bounds they have, which the curve's monotonicity then narrows from their
    neighbours (certified, maybe wide)."""
    order = [rest[i] for i in _spread(len(rest))]
    start = meter.units
    for i, k in enumerate(order):
        left = (limit - (meter.units - start)) / UNITS_PER_SECOND
        if left <= 0.0:
            return
        yield k, max(left / (len(order) - i), REST_MIN)


def _narrow(lo, up, accuracy):
    return np.isfinite(up) & (up - lo <= accuracy * up)


#: checkpoints within this ratio of steps share one tilt, the saddle point of the largest of them
#: (a tilt far from a checkpoint's own widens its interval, or sends it to its own engine).  At a
#: fixed δ the saddle point moves slowly with the steps (eps grows like their square root): one
#: tilt serves a factor 64 (MNIST's 60 epochs: one group instead of three, the curve ~30 %
#: faster, no interval wider); at a fixed eps δ spans orders of magnitude, and so does the tilt.
TILT_GROUP_EPS = 64.0
TILT_GROUP_DELTA = 4.0


def _tilt_groups(sub: Run, ratio: float):
    """Index ranges of ``sub``'s checkpoints, from the first, each within ``ratio`` in steps."""
    tot = sub.counts.sum(axis=1)
    groups, hi = [], len(tot)
    while hi > 0:
        lo = hi - 1
        while lo > 0 and tot[lo - 1] * ratio > tot[hi - 1]:
            lo -= 1
        groups.append(np.arange(lo, hi))
        hi = lo
    return groups[::-1]


def _tilts(final: Engine, sub: Run, g, step, eps_c, goal):
    """(tilt of the main direction, tilt of the add direction on the 4x grid) for a group, at the
    saddle points of its largest checkpoint (a ``Job`` of its own: the tilt caches are per schedule)."""
    job = final.job(goal)
    own = Job(tuple(sub.schedule(int(g[-1]))), final.replace, final.accuracy, job.tau, Caches())
    main = REPLACE if final.replace else REMOVE
    theta_a = None if final.replace else TILT.theta(own, ADD, 4 * step, eps_c)
    return TILT.theta(own, main, step, eps_c), theta_a, job.tau


def _both(run):
    """(run(True), run(False)): the pessimistic checkpoints on the helper thread while this one
    does the optimistic ones (transforms and kernels release the GIL), as ``TiltedFFT.grid_pair``
    (windows longer than PAIR_BINS are composed one at a time, ``_BIG``)."""
    if not two_cores():
        return run(True), run(False)
    fut = grid_pool().submit(contextvars.copy_context().run, run, True)
    try:
        opt = run(False)
    finally:
        pess = fut.result()
    return pess, opt


#: the add direction is composed at every ADD_STRIDE-th checkpoint of a tilt group (and its last)
ADD_STRIDE = 4


def _add_sel(kk: int) -> np.ndarray:
    """Every ADD_STRIDE-th of kk checkpoints, counted from the last."""
    return np.arange(kk - 1, -1, -ADD_STRIDE)[::-1]


def _sparse_add(main_up: np.ndarray, bound_at, first) -> np.ndarray:
    """Upper bounds of the add direction at a tilt group's checkpoints, where they can matter.

    ``bound_at(sel)`` gives the add direction's upper bounds (eps, or δ at some eps) at the
    positions ``sel``; ``first`` are those at ``_add_sel`` (every ADD_STRIDE-th checkpoint
    counted from the last, composed beside the main direction's grids).  Each bound also holds at the checkpoints before it (one direction's eps(δ) and δ(eps)
    grow with the steps too: the earlier composition is a marginal of the later one).  Where that
    borrowed bound is already <= the main direction's upper bound, the pair's bound (the larger
    of the two) is the main one's and the add direction needs no grid of its own; only the other
    checkpoints are composed in a second pass."""
    kk = main_up.shape[0]
    sel = _add_sel(kk)
    out = np.full(main_up.shape, math.inf)
    out[sel] = first
    later = np.minimum.accumulate(out[::-1])[::-1]  # the least bound composed at or after each
    bad = ~(later <= main_up)
    need = np.flatnonzero((bad.reshape(kk, -1).any(axis=1)) & ~np.isin(np.arange(kk), sel))
    if need.size:
        out[need] = bound_at(need)
    return np.minimum.accumulate(out[::-1])[::-1]


def _group(final: Engine, sub: Run, g, step, theta_a, tau, lo_e, read, trivial, lays, share: float):
    """(upper, lower, units left, cut) at the checkpoints g of one tilt group, within ``share``.

    ``read(items, out, pess, ks)`` writes the bounds of the grids ``items`` ((position, grid)
    pairs; position i is the checkpoint ks[i] of the curve's run) into ``out`` (upper if pess;
    ``trivial`` = (upper, lower) where no grid is read).  ``lays`` are the ``_Layout`` of the
    main direction (pessimistic, optimistic) and of the add direction's first pass (None where
    they failed).  Their spectra and predicted work come first (``_prepare``); the rest of the
    share goes to each direction in proportion to its predicted work where not all fit (a
    checkpoint is narrow only where both main directions composed it: each then covers the same
    part of them).  The pair's bound is the larger direction's: the add direction's upper bound
    (on a 4x coarser grid, as the engine first checks it) joins the main one's where it can
    matter (``_sparse_add``), its first pass beside the pessimistic grids, a second one from
    what the three left.  Each budget sees only planned work: the answers do not depend on the
    threads' timing, or on which one-step grids are cached.  A grid that fails (too large, too
    much work) leaves the trivial bounds from where it stopped, the ones read before it stand;
    ``cut`` says whether any grid was left out."""
    kk = len(g)
    idx = [np.arange(kk), np.arange(kk), _add_sel(kk)]
    group = _Budget(share)
    preps = []
    with metered(group.meter):
        for lay in lays:
            try:
                preps.append(None if lay is None else _prepare(lay, group.left()))
            except (ArithmeticError, GridFailure, MemoryError):
                preps.append(None)
    needs = [0.0 if p is None else p.need for p in preps]
    avail, total, used = group.left(), sum(needs), 2 if theta_a is None else 3
    if total <= avail:
        split = [d + (avail - total) / used if i < used else 0.0 for i, d in enumerate(needs)]
    else:
        split = [avail * d / total for d in needs]
    own = [_Budget(u, hard=True) for u in split]

    def composed(prep, i, pess, budget):
        t = trivial[0] if pess else trivial[1]
        out = np.full((len(idx[i]),) + np.shape(t), t, dtype=np.float64)
        big = prep is not None and prep.n > PAIR_BINS
        try:
            with (_BIG if big else contextlib.nullcontext()), metered(budget.meter):
                read(_compose(prep, budget), out, pess, g[idx[i]])
        except (ArithmeticError, GridFailure, MemoryError):
            budget.cut = True  # (what was read stands)
        return out

    def run(pess):
        if not pess:
            return composed(preps[1], 1, False, own[1]), None
        first = None if theta_a is None else composed(preps[2], 2, True, own[2])
        return composed(preps[0], 0, True, own[0]), first

    (up, first), (lo, _) = _both(run)
    preps = None
    left = sum(b.left() for b in own)
    cut = any(b.cut for b in own[:2 if theta_a is None else 3])
    if theta_a is not None:
        second = _Budget(left, hard=True)

        def add_at(sel):
            lay = _layout(Run(sub.parts, sub.counts[g[sel]]), ADD, True, 4 * step, theta_a, lo_e[sel], tau)
            t = trivial[0]
            out = np.full((len(sel),) + np.shape(t), t, dtype=np.float64)
            try:
                with metered(second.meter):
                    prep = None if lay is None else _prepare(lay, second.left())
                    read(_compose(prep, second), out, True, g[sel])
            except (ArithmeticError, GridFailure, MemoryError):
                second.cut = True
            return out

        up = np.maximum(up, _sparse_add(up, add_at, first))
        left, cut = second.left(), cut or second.cut
    return up, lo, left, cut


def _layout(run, add, pess, step, theta, eps_lo, tau):
    """``_Layout``, or None where it fails (a grid too large)."""
    try:
        return _Layout(run, add, pess, step, theta, eps_lo, tau)
    except (ArithmeticError, GridFailure, MemoryError):
        return None


def _need(lay) -> float:
    """The work of composing all of ``lay``'s checkpoints, each taken as unrolled (an upper
    estimate where bands are narrow: it weighs the groups against each other, and what one does
    not use goes on to the next)."""
    wins = [] if lay is None else [w for w in lay.wins if w is not None]
    if not wins:
        return 0.0
    n = max(w.n for w in wins)
    h = n // 2 + 1
    return (len(lay.steps) * _fft_units(n) + POWER_PER_FREQ * h
            + sum(_fft_units(w.n) + READ_PER_BIN * w.n + 2.0 * POWER_PER_ROW * h for w in wins))


def _eps_reader(target, est):
    """``_group``'s reader of eps bounds at δ = target, each searched from its Gaussian estimate
    ``est`` scaled as the last answer was (a search start only)."""

    def read(items, out, pess, ks):
        ratio = 1.0
        for i, x in items:
            e = est[ks[i]]
            v = read_eps(x, target, e * ratio)
            if math.isfinite(v) and v > 0.0 and e > 0.0:
                ratio = v / e
            out[i] = v

    return read


def _shared_groups(final: Engine, sub: Run, step, units: float, ratio, tilt_at, eps_lo, read, trivial, ups, lo):
    """Every tilt group's bounds into ``ups`` / ``lo`` (``_group``); returns (the units of the
    ``units`` given that no group used, whether every grid was composed in full).

    The tilts and layouts of all groups come first (their work is charged, not planned: whether a
    one-step grid is already cached -- by the final engine, running meanwhile -- must not change
    the plan); then each group in turn gets its share of what is left among the groups left, by
    their predicted work (``_need``: every grid taken as unrolled, an upper estimate;
    ``_water_fill``: the cheaper ones all they need, the others one level), and gives back what
    its grids did not use (most, where their bands are narrow): cheap groups are answered in
    full, the costly ones share the rest, each composing the checkpoints that fit (``_group``,
    ``_plan``).  A group whose tilts fail keeps the trivial bounds."""
    plans = []
    main = REPLACE if final.replace else REMOVE
    for g in _tilt_groups(sub, ratio):
        try:
            theta, theta_a, tau = tilt_at(g)
        except (ArithmeticError, GridFailure, MemoryError):
            continue
        lays = [_layout(Run(sub.parts, sub.counts[g]), main, pess, step, theta, eps_lo[g], tau)
                for pess in (True, False)]
        sel = g[_add_sel(len(g))]
        lays.append(None if theta_a is None else
                    _layout(Run(sub.parts, sub.counts[sel]), ADD, True, 4 * step, theta_a, eps_lo[sel], tau))
        plans.append((g, theta_a, tau, lays))
    complete = len(plans) == len(_tilt_groups(sub, ratio))
    if not plans:
        return units, complete
    needs = [[_need(x) for x in p[3]] for p in plans]
    for i in range(len(plans)):
        (g, theta_a, tau, lays), plans[i] = plans[i], None  # (each group's arrays dropped once read)
        share = _water_fill([sum(d) for d in needs[i:]], units)[0]
        ups[g], lo[g], left, cut = _group(final, sub, g, step, theta_a, tau, eps_lo[g], read, trivial, lays, share)
        units -= share - left
        complete = complete and not cut
    return units, complete


def _water_fill(needs, total: float) -> list:
    """Shares of ``total`` for the ``needs``: each its need and an equal part of the slack where
    they all fit, else the cheaper ones all they need and the others one equal level (max-min
    fair)."""
    s = float(sum(needs))
    if s <= total:
        return [d + (total - s) / len(needs) for d in needs]
    rem, cnt, level = total, len(needs), 0.0
    for d in sorted(needs):
        if d * cnt <= rem:
            rem -= d
            cnt -= 1
        else:
            level = rem / cnt
            break
    return [min(d, level) for d in needs]


def _fast_epsilon(final: Engine, sub: Run, target, step, budget: _Budget, memo: dict):
    """(lower, upper, narrow, complete) of eps(target) at the checkpoints of ``sub`` on shared spectra
    (complete: every grid composed in full, none cut by the budget or the bins cap)."""
    est = _estimates(sub, target, final.main)
    eps_lo = 0.5 * np.maximum(est, 1e-9)
    kk = len(est)
    lo, up = np.zeros(kk), np.full(kk, math.inf)
    with metered(budget.meter):
        avail = budget.left()
        unused, complete = _shared_groups(final, sub, step, (1.0 - RDP_SHARE) * avail, TILT_GROUP_EPS,
                                          lambda g: _tilts(final, sub, g, step, max(est[g[-1]], 1e-9), target),
                                          eps_lo, _eps_reader(target, est), (math.inf, 0.0), up, lo)
        wide = ~_narrow(lo, up, final.accuracy)
        if not final.replace and wide.any():  # RDP's bound where the grids left them wide
            up[wide] = np.minimum(up[wide], _rdp_bounds(Run(sub.parts, sub.counts[wide]), [math.log(target)], 0,
                                                        _Budget(RDP_SHARE * avail + unused), memo)[:, 0])
    return lo, up, _narrow(lo, up, final.accuracy), complete


def _fast_delta(final: Engine, sub: Run, eps, step, budget: _Budget, memo: dict):
    """(lower, upper, resolved, complete) of δ at eps at the checkpoints, resolved where lower(eps)
    >= upper(eps + h) (h = accuracy * max(eps, 1e-2)), the engine's criterion (complete as
    ``_fast_epsilon``)."""
    h = final.accuracy * max(eps, 1e-2)
    e = np.array([eps, eps + h])
    kk = sub.counts.shape[0]
    ups, lo = np.ones((kk, 2)), np.zeros(kk)

    def read(items, out, pess, ks):  # upper: at eps and eps + h; lower: at eps
        for i, x in items:
            out[i] = read_delta(x, e) if pess else read_delta(x, e[:1])[0]

    with metered(budget.meter):
        avail = budget.left()
        unused, complete = _shared_groups(final, sub, step, (1.0 - RDP_SHARE) * avail, TILT_GROUP_DELTA,
                                          lambda g: _tilts(final, sub, g, step, eps, 1e-16), np.full(kk, eps), read,
                                          (np.ones(2), 0.0), ups, lo)
        wide = ~(lo >= ups[:, 1])
        if not final.replace and wide.any():
            ups[wide] = np.minimum(ups[wide], _rdp_bounds(Run(sub.parts, sub.counts[wide]), e, 1,
                                                          _Budget(RDP_SHARE * avail + unused), memo))
    up = np.minimum(ups[:, 0], 1.0)
    ok = (lo >= ups[:, 1]) | (up - lo <= 1e-300)
    return lo, up, ok, complete


#: of a curve's shared-spectra budget, the share kept for the RDP caps of the checkpoints the
#: grids leave wide (with what the grids did not use)
RDP_SHARE = 0.1


def _rdp_bounds(run: Run, targets, mode: int, budget: _Budget, memo: dict) -> np.ndarray:
    """RDP's upper bounds at each checkpoint of ``run`` (rows) and target (columns; mode as
    ``_rdp_caps``): the caps at fixed orders for all, then the optimised order (``rdp``'s own
    search, ``schedule_value``) at as many as what is left of ``budget`` pays for, in ``_spread``
    order (``memo`` keeps both for a second pass on another grid step).  Each is an upper bound:
    the smaller stands."""
    out = np.full((run.counts.shape[0], len(targets)), math.inf)
    qs = np.array([q for _, q in run.parts])
    ss = np.array([s for s, _ in run.parts])
    with metered(budget.meter):
        for j, x in enumerate(targets):
            out[:, j] = _rdp_caps(run, x, mode, memo)
        units = _rdp_units([(s, q, 1) for s, q in run.parts])
        for k in _spread(run.counts.shape[0]):
            c = run.counts[k]
            sel = c > 0
            for j, x in enumerate(targets):
                key = ("opt", x, mode, c.tobytes())
                if key not in memo:
                    if budget.left() < units:
                        continue  # (the ones a first pass paid for still count)
                    charge(units)
                    v = _rdp.schedule_value(qs[sel], ss[sel], c[sel].astype(np.float64), x, mode)
                    memo[key] = v if mode == 0 else _rdp._delta_of(v)
                out[k, j] = min(out[k, j], memo[key])
    return out


#: orders of the curves' RDP caps: 47 fractional ones in (1, 2) (where their quadrature is cheap,
#: ``orders._quad_cheap``) and the integer grid of the order search
RDP_FRACTIONAL = 1.0 + np.geomspace(1e-7, 1.0, 48)[:-1]


def _rdp_caps(run: Run, target: float, mode: int, memo: dict) -> np.ndarray:
    """RDP's eps (mode 0, at log δ = target) or δ (mode 1, at eps = target) at each checkpoint
    of ``run``: an upper bound, at the best of fixed orders (``RDP_FRACTIONAL`` and the integer
    grid).  Each mechanism's one-step RDP is computed once at those orders (kept in ``memo``) and
    scaled by its count -- RDP adds over the steps -- so the caps of all checkpoints cost about
    one optimisation, not one each (sigma ~ 0.015: 20 s for 300 checkpoints); any order gives a
    valid bound, if not the best one (the objective is sharp at its minimum: up to 20 % above the
    optimised order's, ``_rdp_bounds``).  The per-step values are already rounded up by
    ``rdp.REL_MARGIN``; the scaled sums are rounded up by 1e-12 more."""
    qs = np.array([q for _, q in run.parts])
    ss = np.array([s for s, _ in run.parts])
    ones = np.ones(len(run.parts))
    key = ("per-step", qs.tobytes(), ss.tobytes())
    if key not in memo:
        frac = _orders._quad_cheap(qs, ss, ones, 2.0)
        orders = np.concatenate((RDP_FRACTIONAL, _orders.DEFAULT_GRID)) if frac else _orders.DEFAULT_GRID.copy()
        nodes = sum(int(_orders._node_cap(s, 2.0)) for s in ss) if frac else 0
        charge(RDP_PER_NODE / 20.0 * nodes * RDP_FRACTIONAL.size + RDP_FIXED * len(run.parts))  # (one pass each)
        memo[key] = orders, np.stack([_rdp._rdp_curve(qs[i:i + 1], ss[i:i + 1], ones[i:i + 1], orders)
                                      for i in range(len(run.parts))])
    orders, per = memo[key]
    tot = (run.counts.astype(np.float64) @ per) * (1.0 + 1e-12)
    out = np.empty(run.counts.shape[0])
    for k in range(out.size):
        v = _rdp_k.best_of_orders(np.ascontiguousarray(tot[k]), orders, target, mode)[0]
        out[k] = v if mode == 0 else _rdp._delta_of(v)
    return out
