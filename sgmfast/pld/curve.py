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
others, which start on the grid step that engine starts from (``_beside_final``).  A curve
answers within seconds (5 ms more a checkpoint): past its ``_fast_budget`` the remaining
checkpoints go to engines of their own, which share ``REST_BUDGET``; any left then keep the
bounds monotonicity gives them.  Budgets are in units of work (``sgmfast._work``), not wall-clock
time: the answers do not depend on the machine, its load or numba compiling.

Soundness.  Each checkpoint's grid is the one ``composition.compose_parts`` builds for its
schedule on that step, tilt and window (``composition.grid_of``, with the error sums of the
shared kernel, which are ``power_product``'s for the cumulative counts): the same certified
bounds.  A tilt away from a checkpoint's saddle point only widens its interval.  A checkpoint
whose interval is wider than the accuracy (or whose add direction may set the answer) is
answered by its own ``Engine``, started on the same grid step.  Both eps(δ) and δ(eps) grow
with the number of steps (a run's prefix is a post-processing of the run), so every upper bound
also holds at the earlier checkpoints and every lower bound at the later ones: the curve is made
monotone that way, never looser than its points.
"""

from __future__ import annotations

import bisect
import contextvars
import math

import numpy as np
from scipy.special import log_ndtr, ndtr

from .._failures import GridFailure
from .._kernels.pld import fft_power as kf
from .. import rdp as _rdp
from .._work import UNITS_PER_SECOND, Meter, metered
from .common import ADD, REMOVE, REPLACE, SPLIT_MIN, final_pool, grid_pool, split_pool, two_cores
from .composition import ArrayPart, TiltedStep, composite, part_spectra
from .onestep import one_step
from .certifiers import Caches, Job
from .engine import BUDGET, TILT, Engine
from .schedules import MAX_PARTS, make_engine
from .estimates import loss_moments
from .spectral import SpectralGrid, read_delta, read_eps, unrolled
from .windows import CHERNOFF_K, choose_window, log_mgf_table, widen

#: memory for the composed spectra of a batch of checkpoints (complex, bytes)
BATCH_BYTES = 64 << 20


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


def grids(run: Run, add, pess: bool, step: float, theta: float, eps_lo: np.ndarray, tau: float):
    """The composed grid of every checkpoint of ``run`` in one direction, in order (``composition``
    notes: the same grids, their spectra shared); a generator, so that each grid can be read and
    dropped before the next is built (fresh memory for all of them costs more than the transforms)."""
    steps = [TiltedStep(one_step(s, q, add, step, tau), step, theta, pess) for s, q in run.parts]
    comps = [composite(steps, c, step, pess) for c in run.counts]
    tables = _Tables([s.part for s in steps], step, math.sqrt(comps[-1].var), run.counts)
    # (the lattice the windows' tables use: each composition's sd, lower tails as _chernoff_window says)
    tables.prefetch([math.sqrt(c.var) for c in comps], not pess or theta <= 0)
    for k, c in enumerate(comps):
        c.mgf = tables.table(k)
    los = [min(e, c.sup_hi * step) for e, c in zip(eps_lo, comps)]
    wins = [choose_window(c, theta, pess, e, tau) for c, e in zip(comps, los)]
    n = max(w.n for w in wins)
    divisors = _even_divisors(n)
    wins = [widen(w, divisors[bisect.bisect_left(divisors, w.n)]) for w in wins]
    spectra, e2 = part_spectra([s.part for s in steps], n)
    rows, row_of = np.unique(np.diff(run.counts, axis=0, prepend=0), axis=0, return_inverse=True)
    ntot = run.counts.sum(axis=1).astype(np.float64)
    dec = np.array([n // w.n for w in wins], dtype=np.int64)
    h = n // 2 + 1
    state = (np.ones(h, dtype=np.complex128), np.zeros(h), np.zeros(h))
    batch = max(1, BATCH_BYTES // (16 * h))
    for k0 in range(0, len(comps), batch):
        k1 = min(len(comps), k0 + batch)
        z, err, z2, wsum, band = _power(spectra, e2, rows.astype(np.int64), row_of.reshape(-1)[k0:k1].astype(np.int64),
                                        ntot[k0:k1], dec[k0:k1], n, k0, state, len(comps))
        cnt = run.counts[k0:k1]
        werrs = np.where(cnt > 0, cnt * e2 * np.sqrt(wsum), 0.0).sum(axis=1) * (1 + 1e-12)
        for j, k in enumerate(range(k0, k1)):
            werr = float(werrs[j])
            m, nk = int(dec[k]), wins[k].n
            if SpectralGrid.usable(int(band[j]), nk, theta):
                zr = np.ascontiguousarray(z[j, ::m][: int(band[j]) + 1])
                yield SpectralGrid(comps[k], wins[k], theta, pess, los[k], zr, err[j] + werr, z2[j])
            else:  # (the stored columns; those beyond were cut)
                yield unrolled(comps[k], wins[k], theta, pess, los[k], z[j, ::m][: nk // 2 + 1], err[j] + werr, z2[j])


#: spectra below this are cut (``kf.power_checkpoints``): an error of at most this per
#: frequency, charged; what is left is the composed loss's band, far below n at late checkpoints
LOG_CUT = math.log(1e-30)


def _power(spectra, e2, rows, row_of, ntot, dec, n, k0, state, k_all):
    """``kf.power_checkpoints`` over all frequencies, the upper half on a second thread:
    (spectra, err, z2, wsum, band) of the checkpoints.  The spectra are stored up to the last
    frequency that can survive the cut (``kf.live_extent``: columns beyond are 0, charged)."""
    nk = row_of.size
    h = kf.live_extent(spectra, e2, ntot, LOG_CUT)
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
    return _curve(run, accuracy, relation, math.inf, run.plain,
                  lambda final: final.epsilon(target), lambda final: final.first_step(target),
                  lambda final, sub, step: _fast_epsilon(final, sub, target, step),
                  lambda engine, step: engine.epsilon(target, step)[:2])


def delta_curve(run: Run, eps: float, accuracy: float, relation: str):
    """(lower, upper) of δ(eps) at every checkpoint of ``run``."""
    e = np.array([eps])

    def answer(final):
        l, u = final.delta(e)
        return l[0], u[0], final.last_step

    def single(engine, step):
        l, u = engine.delta(e)
        return l[0], u[0]

    return _curve(run, accuracy, relation, 1.0, run.plain and math.isfinite(eps), answer,
                  lambda final: final.first_delta_step(eps),
                  lambda final, sub, step: _fast_delta(final, sub, eps, step), single)


def _curve(run: Run, accuracy, relation, trivial, shareable, answer, first_step, shared, single):
    """The plan of both curves: the last checkpoint by its own engine (``answer(final)`` ->
    (lower, upper, grid step)), the others read off shared spectra on that step
    (``shared(final, sub, step)`` -> (lower, upper, narrow); ``shareable``: the run allows it),
    those left wide by engines of their own (``single(engine, step)`` -> (lower, upper)) within
    REST_BUDGET; then monotone in the steps.  ``trivial`` is the trivial upper bound."""
    kk = run.counts.shape[0]
    lo, up = np.zeros(kk), np.full(kk, trivial)
    live = run.counts.sum(axis=1) > 0
    if not live.any():
        return np.zeros(kk), np.zeros(kk)
    last = kk - 1
    final = _engine(run, last, accuracy, relation, BUDGET)
    todo = [k for k in range(last) if live[k]]
    sub = Run(run.parts, run.counts[todo])

    def fast(step):
        try:
            return shared(final, sub, step)
        except (ArithmeticError, GridFailure, MemoryError):
            return np.zeros(len(todo)), np.full(len(todo), trivial), np.zeros(len(todo), bool)

    (lo[last], up[last], step), got = _beside_final(final, shareable and bool(todo), lambda: answer(final),
                                                    lambda: first_step(final), fast)
    if got is not None:
        f_lo, f_up, ok = got
        lo[todo], up[todo] = f_lo, f_up
        rest = [k for k, good in zip(todo, ok) if not good]
    else:
        rest = todo
    with metered() as meter:
        for k, budget in _within_budget(rest, meter):  # each on its own engine (the exact paths, or a tilt of its own)
            e_lo, e_up = single(_engine(run, k, accuracy, relation, budget), step)
            lo[k], up[k] = max(lo[k], e_lo), min(up[k], e_up)
    lo[~live], up[~live] = 0.0, 0.0
    return _monotone_in_steps(lo, up)


#: seconds (of work, ``sgmfast._work``) for all the checkpoints that need an engine of their own,
#: and the least budget one of them is given
REST_BUDGET = 2.0
REST_MIN = 0.05


def _spread(m: int) -> list:
    """0 .. m-1 in an order that brackets every index early: the last, the first, then the
    midpoints of the gaps, widest first (where time runs out, the curve's monotonicity bounds
    the checkpoints left out from the ones on either side)."""
    if m <= 0:
        return []
    order, gaps = [m - 1] + ([0] if m > 1 else []), [(0, m - 1)]
    while gaps:
        gaps.sort(key=lambda g: g[1] - g[0])
        a, b = gaps.pop()
        if b - a < 2:
            continue
        mid = (a + b) // 2
        order.append(mid)
        gaps += [(a, mid), (mid, b)]
    return order


def _within_budget(rest: list, meter):
    """(checkpoint, engine budget) for the checkpoints ``rest``, in ``_spread`` order, sharing
    REST_BUDGET seconds of work charged to ``meter`` (at least REST_MIN each) and stopping when it
    is spent: a curve that needs many engines of its own still answers within seconds; the ones
    left keep the bounds they have, which the curve's monotonicity then narrows from their
    neighbours (certified, maybe wide)."""
    order = [rest[i] for i in _spread(len(rest))]
    for i, k in enumerate(order):
        left = REST_BUDGET - meter.units / UNITS_PER_SECOND
        if left <= 0.0:
            return
        yield k, max(left / (len(order) - i), REST_MIN)


def _beside_final(final, shareable: bool, answer, first_step, fast):
    """(the final checkpoint's ``answer()`` -- its last item the grid step --, ``fast(step)`` of
    the other checkpoints on that step, or None where they cannot share it: ``shareable`` false
    or no step).  On two cores the final engine runs on a thread of its own while ``fast``
    starts on the step the engine starts from (``first_step()``); where the engine ends on
    another step, ``fast`` runs again on it."""
    if not (shareable and isinstance(final, Engine) and two_cores()):
        res = answer()
        return res, (fast(res[-1]) if shareable and res[-1] is not None else None)
    guess = first_step()
    fut = final_pool().submit(contextvars.copy_context().run, answer)
    try:
        got = fast(guess)
    finally:
        res = fut.result()
    step = res[-1]
    if step is None:
        return res, None
    return res, (got if step == guess else fast(step))


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
    does the optimistic ones (transforms and kernels release the GIL), as ``TiltedFFT.grid_pair``."""
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


def _eps_list(grids_, target, est, trivial, budget) -> list:
    """eps bounds at δ = target of the grids of successive checkpoints, each searched from its
    Gaussian estimate scaled as the last answer was (a search start only); past ``budget``
    the remaining checkpoints get the ``trivial`` bound (their own engines may still answer)."""
    out, ratio = [], 1.0
    for x, e in zip(_until(grids_, budget), est):
        v = read_eps(x, target, e * ratio)
        if math.isfinite(v) and v > 0.0 and e > 0.0:
            ratio = v / e
        out.append(v)
    return out + [trivial] * (len(est) - len(out))


#: seconds (of work, ``sgmfast._work``) for a curve's shared-spectra checkpoints, plus
#: FAST_PER_POINT a checkpoint (beyond: their own engines)
FAST_BUDGET = 2.0
FAST_PER_POINT = 0.005


class _Budget:
    """Work charged to ``meter`` (open it with ``metered``) against a limit in seconds of work."""

    def __init__(self, seconds: float):
        self.meter, self.limit = Meter(), seconds * UNITS_PER_SECOND

    def spent(self) -> bool:
        return self.meter.units >= self.limit


def _fast_budget(sub: Run) -> _Budget:
    return _Budget(FAST_BUDGET + FAST_PER_POINT * sub.counts.shape[0])


def _until(items, budget: _Budget):
    """The items while the budget is not spent."""
    for x in items:
        if budget.spent():
            return
        yield x


def _fast_epsilon(final: Engine, sub: Run, target, step):
    """(lower, upper, narrow) of eps(target) at the checkpoints of ``sub`` on shared spectra."""
    budget = _fast_budget(sub)
    with metered(budget.meter):
        return _shared_epsilon(final, sub, target, step, budget)


def _shared_epsilon(final: Engine, sub: Run, target, step, budget: _Budget):
    est = _estimates(sub, target, final.main)
    eps_lo = 0.5 * np.maximum(est, 1e-9)
    kk = len(est)
    lo, up = np.zeros(kk), np.full(kk, math.inf)
    for g in _tilt_groups(sub, TILT_GROUP_EPS):
        theta, theta_a, tau = _tilts(final, sub, g, step, max(est[g[-1]], 1e-9), target)
        up[g], lo[g] = _group(final, sub, g, step, theta, theta_a, tau, eps_lo[g], lambda grids_, idx, pess, g=g: (
            _eps_list(grids_, target, est[g][idx], math.inf if pess else 0.0, budget)))
    if not final.replace:
        up = np.minimum(up, _rdp_curve(sub, math.log(target), 0))
    return lo, up, _narrow(lo, up, final.accuracy)


def _group(final: Engine, sub: Run, g, step, theta, theta_a, tau, lo_e, read):
    """(upper, lower) bounds at the checkpoints g of one tilt group: ``read(grids, idx, pess)``
    gives those of the grids of checkpoints g[idx] (upper if pess).  The pair's bound is the
    larger direction's: the add direction's upper bound (on a 4x coarser grid, as the engine first
    checks it) joins the main one's where it can matter (``_sparse_add``), its first pass beside
    the pessimistic grids."""
    main = REPLACE if final.replace else REMOVE
    part = Run(sub.parts, sub.counts[g])
    add_at = None if theta_a is None else (lambda sel: np.array(read(
        grids(Run(sub.parts, sub.counts[g[sel]]), ADD, True, 4 * step, theta_a, lo_e[sel], tau), sel, True)))

    def run(pess):
        out = np.array(read(grids(part, main, pess, step, theta, lo_e, tau), np.arange(len(g)), pess))
        return out, (add_at(_add_sel(len(g))) if pess and add_at is not None else None)

    (up, first), (lo, _) = _both(run)
    if add_at is not None:
        up = np.maximum(up, _sparse_add(up, add_at, first))
    return up, lo


def _pad(out: list, size: int, trivial) -> list:
    """``out`` filled up to ``size`` with the trivial bound (checkpoints past the budget)."""
    return out + [trivial] * (size - len(out))


def _fast_delta(final: Engine, sub: Run, eps, step):
    """The checkpoints' δ at eps and its upper bound at eps + h (h = accuracy * max(eps, 1e-2)):
    resolved where lower(eps) >= upper(eps + h), the engine's criterion."""
    budget = _fast_budget(sub)
    with metered(budget.meter):
        return _shared_delta(final, sub, eps, step, budget)


def _shared_delta(final: Engine, sub: Run, eps, step, budget: _Budget):
    h = final.accuracy * max(eps, 1e-2)
    e = np.array([eps, eps + h])
    kk = sub.counts.shape[0]
    ups, lo = np.ones((kk, 2)), np.zeros(kk)

    def read(grids_, idx, pess):  # upper: at eps and eps + h; lower: at eps
        out = [read_delta(x, e) if pess else read_delta(x, e[:1])[0] for x in _until(grids_, budget)]
        return _pad(out, len(idx), np.ones(2) if pess else 0.0)

    for g in _tilt_groups(sub, TILT_GROUP_DELTA):
        theta, theta_a, tau = _tilts(final, sub, g, step, eps, 1e-16)
        ups[g], lo[g] = _group(final, sub, g, step, theta, theta_a, tau, np.full(len(g), eps), read)
    if not final.replace:
        ups = np.minimum(ups, [[_rdp_delta(sub, k, x) for x in e] for k in range(kk)])
    up = np.minimum(ups[:, 0], 1.0)
    ok = (lo >= ups[:, 1]) | (up - lo <= 1e-300)
    return lo, up, ok


def _rdp_curve(run: Run, log_target: float, mode: int) -> np.ndarray:
    """RDP's eps (mode 0, at δ = e^log_target) or log δ (mode 1, at eps = log_target's place)
    at each checkpoint: an upper bound, as the engine's cap."""
    qs = np.array([q for _, q in run.parts])
    ss = np.array([s for s, _ in run.parts])
    out = np.empty(run.counts.shape[0])
    for k, c in enumerate(run.counts):
        sel = c > 0
        out[k] = _rdp.schedule_value(qs[sel], ss[sel], c[sel].astype(np.float64), log_target, mode)
    return out


def _rdp_delta(run: Run, k: int, eps: float) -> float:
    c = run.counts[k]
    sel = c > 0
    qs = np.array([q for _, q in run.parts])[sel]
    ss = np.array([s for s, _ in run.parts])[sel]
    return _rdp._delta_of(_rdp.schedule_value(qs, ss, c[sel].astype(np.float64), eps, 1))
