"""The shared spectra of a privacy curve (``curve``): the run's one-step arrays discretised,
tilted and transformed once, each checkpoint's composed spectrum a power of them
(``fft_power.power_checkpoints``), read off a window of its own; with the cost model its
budgets plan with.  Soundness and work: ``curve``'s notes."""

from __future__ import annotations

import bisect
import heapq
import math
import threading

import numpy as np
from scipy.special import log_ndtr, ndtr

from .._failures import GridTooLarge
from .._kernels.pld import fft_power as kf
from .._work import apart, charge
from .common import ADD, SPLIT_MIN, split_pool, two_cores
from .grid.composition import ArrayPart, TiltedStep, composite, part_spectra
from .grid.onestep import one_step, planned_units
from .schedules import MAX_PARTS
from .grid.estimates import loss_moments
from .grid.banded import (LOG_CUT, POWER_PER_FREQ, POWER_PER_ROW, SPECTRAL_FIXED,  # noqa: F401  (the curve's too)
                          SPECTRAL_PER_FREQ, power_band as _power)
from .grid.spectral import SpectralGrid, unrolled
from .grid.windows import CHERNOFF_K, choose_window, log_mgf_table, widen

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


#: most entries (checkpoints x parts) of a run's counts table (32 MB): a history past it is
#: answered at an even spread of its checkpoints (``history_run``), the rest by monotonicity
TABLE_MAX = 1 << 22


def history_run(segments):
    """(run, kept) of a history [(sigma, q, count)], one checkpoint per segment: the run's rows are
    the checkpoints ``kept`` (all of them, unless checkpoints x distinct parts exceeds TABLE_MAX;
    then an even spread that fits, the last included), built without the full table."""
    index: dict = {}
    seg_part = np.array([index.setdefault((s, q), len(index)) for s, q, _ in segments], dtype=np.int64)
    seg_count = np.array([c for _, _, c in segments], dtype=np.int64)
    kk, m = len(segments), len(index)
    rows = max(1, min(kk, TABLE_MAX // max(m, 1)))
    kept = np.unique(np.linspace(0, kk - 1, rows).round().astype(np.int64)) if rows < kk else np.arange(kk)
    counts = np.zeros((kept.size, m), dtype=np.int64)
    row = np.zeros(m, dtype=np.int64)
    at = 0
    for k in range(kk):
        row[seg_part[k]] += seg_count[k]
        if at < kept.size and kept[at] == k:
            counts[at] = row
            at += 1
    return Run(list(index), counts), kept


def spread_back(kept, lo, up, kk: int):
    """Bounds at all ``kk`` checkpoints from those at ``kept`` (sorted, the last included): a
    checkpoint between two kept ones has the earlier one's lower bound and the later one's upper
    bound (both grow with the steps), before the first kept one lower bound 0."""
    lo, up = np.asarray(lo, dtype=np.float64), np.asarray(up, dtype=np.float64)
    if kept.size == kk:
        return lo, up
    k = np.arange(kk)
    before = np.searchsorted(kept, k, side="right") - 1
    after = np.searchsorted(kept, k, side="left")
    return np.where(before >= 0, lo[np.maximum(before, 0)], 0.0), up[after]


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
# (POWER_PER_FREQ, POWER_PER_ROW, SPECTRAL_PER_FREQ, SPECTRAL_FIXED: ``grid.banded``'s, shared)
READ_PER_BIN = 4.0


class _Layout:
    """The cheap half of a direction's composition at a run's checkpoints: the tilted one-step
    arrays, each checkpoint's ``Composite`` and window (``choose_window``; None where the window
    would exceed the bins cap: that checkpoint gets no grid).  ``_compose`` builds the grids."""

    def __init__(self, run: Run, add, pess: bool, step: float, theta: float, eps_lo, tau: float, coarse: bool = False,
                 held: dict | None = None):
        self.run, self.pess, self.theta = run, pess, theta
        # (``coarse``: the one-step grids of the final checkpoint's engine, ``Engine.coarse``)
        ones = one_steps(run.parts, add, step, tau, coarse, {} if held is None else held)
        self.steps = [TiltedStep(one, step, theta, pess) for one in ones]
        comps = [composite(self.steps, c, step, pess) for c in run.counts]
        tables = _Tables([s.part for s in self.steps], step, math.sqrt(comps[-1].var), run.counts)
        # (the lattice the windows' tables use: each composition's sd, lower tails as _chernoff_window says)
        tables.prefetch([math.sqrt(c.var) for c in comps], not pess or theta <= 0)
        for k, c in enumerate(comps):
            c.mgf = tables.table(k)
        self.comps = comps
        self.los = [min(e, c.sup_hi * step) for e, c in zip(eps_lo, comps)]
        self.wins = [_window(c, theta, pess, e, tau) for c, e in zip(comps, self.los)]


def one_steps(parts, add, step: float, tau: float, coarse: bool, held: dict) -> list:
    """Each part's one-step grid, kept in ``held`` (a curve's layouts of every tilt group share
    them: the one-step cache, bounded, would drop and rebuild them when a run has many parts) and
    charged at its full discretisation whether it was built or found: the charge -- and where a
    budget is hard, where it stops -- does not depend on what another thread has cached."""
    out = []
    for s, q in parts:
        key = (s, q, add, step, tau, coarse)
        one = held.get(key)
        if one is None:
            charge(planned_units(s, q, add, step, tau))
            one = held[key] = apart(one_step, s, q, add, step, tau, coarse)[0]
        out.append(one)
    return out


def one_step_units(parts, main, step, tau, add: bool) -> float:
    """The charge of the parts' one-step grids in the main direction, and the add direction's on
    the 4x grid (``curve_grids.one_steps``)."""
    dirs = ((main, step), (ADD, 4 * step))[: 2 if add else 1]
    return sum(planned_units(s, q, d, h, tau) for s, q in parts for d, h in dirs)


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


def _compose(prep, budget):
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
