"""What every stage of the PLD pipeline shares: limits, direction codes, the composed-grid type,
the one-step cache and the helper threads."""

from __future__ import annotations

import bisect
import contextvars
import math
import threading
from contextlib import contextmanager
from contextvars import ContextVar
from concurrent import futures
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.fft

#: Largest number of loss bins (and FFT length) the accountant will allocate.
MAX_BINS = 1 << 24
#: ... on a query's first grid: one transform of this length takes ~0.2 s here, so the first
#: answer comes within seconds (every accuracy-sweep point meets 1e-3 within it); refinements
#: may go up to MAX_BINS while the time budget allows.
FIRST_BINS = 1 << 22
_BINS_CAP: ContextVar = ContextVar("sgmfast_bins_cap", default=MAX_BINS)


def bins_cap() -> int:
    """The most bins a grid or window may have now (``bins_limit``; MAX_BINS by default)."""
    return _BINS_CAP.get()


@contextmanager
def bins_limit(n: int):
    """Cap the grids built inside the block (the cap follows the context into helper threads
    started with ``contextvars.copy_context().run``)."""
    token = _BINS_CAP.set(min(n, MAX_BINS))
    try:
        yield
    finally:
        _BINS_CAP.reset(token)


# work, the measure of a query's cost (time limits in machine-independent units)
from .._failures import GridFailure, GridTooLarge, StepUnderflow  # noqa: E402,F401
from .._work import UNITS_PER_SECOND, Meter, apart, charge, charge_fft, metered, usable_cores  # noqa: E402,F401


U = np.finfo(np.float64).eps / 2  # unit round-off
TAU_STEP = 1e-30  # P-mass left beyond the near end of a one-step grid (and the far end's default)
TAU_MIN = 1e-60  # the least P-mass left beyond the far end (delta down to 1e-30 over 1e7 steps)
SPLIT_MIN = 16384  # array size below which one thread does a kernel's work alone

# Directions of a dominating pair.  Add/remove has two (the larger δ counts); replace-one is
# symmetric and has one.  The add/remove codes are the booleans the kernels take as ``add``.
REMOVE = False
ADD = True
REPLACE = "replace"
RELATIONS = ("add_remove", "replace_one")


class NotApplicable(Exception):
    """A strategy does not apply to this input (the caller tries another one)."""


@dataclass
class Grid:
    """A composed (tilted) PLD, upper (``pess``) or lower bound: the untilted mass at loss
    ell_i = (offset + i) * step is t_i * exp(log_scale - theta * ell_i), plus an atom ``p_inf`` at
    +inf.  ``err`` bounds, in tilted l1 units, mass the array may carry in excess (optimistic
    grids subtract its worst effect); ``inf_err`` is an absolute bound added to the upper
    (subtracted from the lower) δ; the bounds hold for eps >= ``floor`` (below it: δ <= 1, >= 0)."""

    step: float
    theta: float
    pess: bool
    offset: int
    t: np.ndarray
    log_scale: float
    err: float
    p_inf: float
    inf_err: float
    eta: float  # total (finite + inf) untilted mass <= 1 + eta
    floor: float = -math.inf
    sums: Any = field(default=None, repr=False)  # suffix sums, built by the first query
    padded: Any = field(default=None, repr=False)  # optional: [0, *t] in one array (t a view of it)

def rfft(x, n=None, out=None):
    """numpy's real FFT, the transform of every stage (pocketfft, as scipy.fft's: on numpy 2 the
    same bits at every length ``fast_len`` gives, tests/test_rounding_constants.py; the round-off
    bound ``fft_const`` is checked against it), one thread: importing scipy.fft took 0.03-0.07 s of
    every start of the command line.  Quiet, as scipy's was, where a grid holds inf or NaN (numpy's
    ufunc would warn; the callers read the NaN).  ``out``: the half spectrum's array (the same
    transform, written in place)."""
    with np.errstate(all="ignore"):
        return numpy.fft.rfft(x, n, out=out)


#: scratch arrays up to this many entries are kept per thread (``scratch``)
SCRATCH_MAX = 1 << 18
_SCRATCH = threading.local()


def scratch(name: str, n: int, dtype=np.float64) -> np.ndarray:
    """A work array of n entries, contents undefined, kept per thread and name for the next call.

    Fresh arrays of a few hundred kB are fresh pages to the kernel, and a page fault costs
    ~5 us on the reference machine (a Firecracker VM): the fold buffer, the transform and the
    spectra of one 80,000-point composition took ~500 faults, 2-3 ms of its ~5 (measured with
    ``resource.getrusage``).  Only for arrays that die before the caller returns (nothing may keep
    a reference); above ``SCRATCH_MAX`` entries a new array is returned."""
    if n > SCRATCH_MAX:
        return np.empty(n, dtype=dtype)
    key = (name, np.dtype(dtype).str)
    pool = getattr(_SCRATCH, "arrays", None)
    if pool is None:
        pool = _SCRATCH.arrays = {}
    buf = pool.get(key)
    if buf is None or buf.size < n:
        buf = pool[key] = np.empty(max(n, 1024), dtype=dtype)
    return buf[:n]


def irfft(z, n):
    """numpy's inverse real FFT of length n (as ``rfft``)."""
    with np.errstate(all="ignore"):
        return numpy.fft.irfft(z, n)


def dot(a, b) -> float:
    """The sum of a * b over 1-D arrays in one thread, by numpy's einsum loops rather than BLAS:
    OpenBLAS's threaded dot spun against a busy neighbour -- a 19,200-term dot took 4-8 ms for
    5 us in one thread with another process on the second core, and a balls-in-bins query 7.2 s
    of CPU for 4.4 s -- and its sum's order follows the machine's thread count."""
    return float(np.einsum("i,i->", a, b))



def fast_len(n: int) -> int:
    """The FFT length for n points: the least even 5-smooth number >= n.  Even, so that the
    half spectrum's last frequency is the Nyquist one, which the error sums of the power kernels
    weight once (an odd length's last frequency has a conjugate partner and would count twice)."""
    return 2 * next_fast_len(max((n + 1) // 2, 8))


def _smooth_table(top: int) -> tuple:
    """Every 2^a 3^b 5^c <= top, ascending (1,692 up to 2^31)."""
    out = []
    p5 = 1
    while p5 <= top:
        p35 = p5
        while p35 <= top:
            p = p35
            while p <= top:
                out.append(p)
                p *= 2
            p35 *= 3
        p5 *= 5
    return tuple(sorted(out))


#: the 5-smooth numbers ``next_fast_len`` looks up (a query asks for a few lengths: the search
#: below took ~30 us a length)
_SMOOTH = _smooth_table(1 << 31)


def next_fast_len(n: int) -> int:
    """The least 2^a 3^b 5^c >= n >= 1 (``scipy.fft.next_fast_len(n, real=True)``)."""
    if n <= _SMOOTH[-1]:
        return _SMOOTH[bisect.bisect_left(_SMOOTH, n)]
    best = 1 << (n - 1).bit_length()
    p5 = 1
    while p5 < best:
        p35 = p5
        while p35 < best:
            best = min(best, p35 << (-(-n // p35) - 1).bit_length())  # (the least p35 2^k >= n)
            p35 *= 3
        p5 *= 5
    return best


def _stirlerr(x: float) -> float:
    """log Gamma(x + 1) - (x + 1/2) log x + x - log sqrt(2 pi) for x >= 64 (four terms of the
    Stirling series: the next is below 1/(1188 x^9) < 1e-19)."""
    r = 1.0 / (x * x)
    return (1.0 / 12.0 - r * (1.0 / 360.0 - r * (1.0 / 1260.0 - r / 1680.0))) / x


def log_binom(n, k) -> float:
    """log C(n, k) for 0 <= k <= n, within ~1e-13 relative (callers round their bounds out).

    With m = min(k, n - k): below 64 the sum of log((n - m + i) / i), i = 1..m (each term >= log 2
    and within 2.5 u of itself, summed exactly); above, k log(n / k) - (n - k) log1p(-k / n) (two
    positive terms) + log sqrt(n / (2 pi k (n - k))) and the Stirling remainders, a few u
    relative.  (The lgamma difference lgamma(n + 1) - lgamma(k + 1) - lgamma(n - k + 1) cancels:
    it erred by ~u n log n, 4e-8 relative at n = 1e9, k = 1; tests/test_rounding_constants.py.)"""
    m = min(k, n - k)
    if m <= 0:
        return 0.0
    if m < 64 and m == int(m):
        return math.fsum(math.log((n - m + i) / i) for i in range(1, int(m) + 1))
    if m < 64:  # (non-integer arguments: the lgamma difference)
        return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
    return (m * math.log(n / m) - (n - m) * math.log1p(-m / n) + 0.5 * math.log(n / (2.0 * math.pi * m * (n - m)))
            + _stirlerr(n) - _stirlerr(m) - _stirlerr(n - m))


def too_many_bins(n: int, what: str = "loss grid") -> GridTooLarge:
    return GridTooLarge(f"the {what} would need {n} bins (> {bins_cap()}); raise accuracy or grid_step")


# --- the one-step cache ------------------------------------------------------------------------

STEP_CACHE: dict = {}
CACHE_BYTES = 256 << 20  # the one-step cache's budget: oldest entries leave first
_SIZES: dict = {}  # bytes of each entry, measured once when it is stored


def _nbytes(value) -> int:
    if isinstance(value, np.ndarray):
        return value.nbytes
    if isinstance(value, (tuple, list)):
        return sum(_nbytes(v) for v in value)
    slots = getattr(type(value), "__slots__", ())
    return sum(_nbytes(getattr(value, name, None)) for name in slots) if slots else 0


_CACHE_LOCK = threading.Lock()


def cache_put(key, value) -> None:
    """Store in the one-step cache, bounded in entries and bytes (callers keep their local:
    another thread may evict it).  Entries are measured once, on the way in."""
    size = _nbytes(value)
    with _CACHE_LOCK:  # (sweeps run calibrations on threads)
        STEP_CACHE.pop(key, None)
        STEP_CACHE[key] = value
        for k in [k for k in _SIZES if k not in STEP_CACHE]:  # (STEP_CACHE.clear() from outside)
            del _SIZES[k]
        _SIZES[key] = size
        total = sum(_SIZES.values())
        while STEP_CACHE and (total > CACHE_BYTES or len(STEP_CACHE) > 1024):
            old = next(iter(STEP_CACHE))
            del STEP_CACHE[old]
            total -= _SIZES.pop(old, 0)


# --- helper threads (the kernels and FFTs release the GIL) -------------------------------------

_POOLS: dict = {}


def _pool(name: str) -> ThreadPoolExecutor:
    pool = _POOLS.get(name)
    if pool is None:
        pool = _POOLS[name] = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"sgmfast-{name}")
    return pool


def split_pool() -> ThreadPoolExecutor:
    """One helper thread for splitting a large kernel call in two halves."""
    return _pool("split")


def grid_pool() -> ThreadPoolExecutor:
    """One thread that builds an optimistic grid while the caller builds the pessimistic one
    (separate from ``split_pool``, which the grid builders themselves use)."""
    return _pool("grid")


def add_pool() -> ThreadPoolExecutor:
    """One thread that builds a query's coarse add-direction grid while the caller builds the
    remove pair (``certifiers.tilted``)."""
    return _pool("add")


def side_pool(name: str) -> ThreadPoolExecutor:
    """One thread per ``name`` for a piece of work that does not depend on what the caller does
    meanwhile (``Beside``: the tuning bounds' ``"floor"``, the RDP floor, and ``"lookup"``, the
    profile's lookup read off its grids; ``"epoch-lower"``, a balls-in-bins epoch's lower powers),
    so that the second core is not idle while the caller runs Python."""
    return _pool("side-" + name)


def final_pool() -> ThreadPoolExecutor:
    """One thread for a curve's final checkpoint, whose engine runs while the others are read
    off shared spectra (``curve``)."""
    return _pool("final")


class Beside:
    """``fn(*args)`` started on the helper thread ``side_pool(name)`` where there are two cores (on
    one: run here, now), its work counted apart (``_work.apart``).  ``result()`` waits, charges that
    work to this thread's meters in one sum and returns (or raises) fn's outcome: the meters then
    take the same charges in the same order on any machine, whichever thread ran first (a helper's
    charges interleaved with this thread's would cross a meter's limit at a point that depends on
    the scheduler).  ``alongside(run)`` runs run() here meanwhile."""

    def __init__(self, name: str, fn, *args):
        self._fut = self._out = self._exc = None
        if two_cores():
            self._fut = side_pool(name).submit(contextvars.copy_context().run, apart, fn, *args)
            return
        try:
            self._out = apart(fn, *args)
        except BaseException as exc:  # (raised where the result is taken, as from a helper)
            self._exc = exc

    def result(self):
        if self._exc is not None:
            raise self._exc
        out, units = self._fut.result() if self._fut is not None else self._out
        charge(units)
        return out

    def alongside(self, run):
        """run() here meanwhile; if it fails, the helper is waited for before the failure goes on."""
        try:
            return run()
        except BaseException:
            if self._fut is not None:
                futures.wait([self._fut])
            raise


_CORES: list = []


def two_cores() -> bool:
    """Whether this process may run on two or more cores (asked once: the CPU affinity, or
    ``os.cpu_count`` where there is none, reads /proc or /sys each time, ~12 us, and a query asks a
    few dozen times; a process pinned to one CPU, ``taskset -c 0``, runs one thread): where a piece whose result is
    the same on any thread (a pair of grids, a coarse grid, an independent read) goes to a helper
    thread.  (Beside another busy process a helper only takes turns with it -- W1 12-15 % faster on
    one thread there, 8-25 % slower on an idle machine, paired A/B -- but a switch on the machine's
    recent load would put the clock behind a decision: none is.)"""
    if not _CORES:
        _CORES.append(usable_cores())
    return _CORES[0] >= 2


def both_roundings(run):
    """(run(True), run(False)): the pessimistic one on ``grid_pool``'s thread (in this context:
    the work meter counts it) while this thread does the optimistic one, where there are two
    cores (transforms and kernels release the GIL)."""
    if not two_cores():
        return run(True), run(False)
    fut = grid_pool().submit(contextvars.copy_context().run, run, True)
    try:
        opt = run(False)
    finally:
        pess = fut.result()
    return pess, opt


# --- refining until narrow (methods outside the engine: balls-in-bins and fixed-size batches) -------
#: A call of k such queries (several δ of one run) spends about this many single budgets in
#: all: each refines on min(1, SHARED_TOTAL / k) of its budget (``shared_budget``).  Three δ of
#: one balls-in-bins run at sigma 0.92 took 16 s at a full budget each.
SHARED_TOTAL = 1.0
#: ``refine_levels`` abandons a level that would take its work past this many budgets.
HARD_LEVELS = 2.0
_SHARE: ContextVar = ContextVar("sgmfast_budget_share", default=1.0)


@contextmanager
def shared_budget(queries: int):
    """Inside the block every ``refine_levels`` budget is scaled by min(1, SHARED_TOTAL / queries)."""
    token = _SHARE.set(_SHARE.get() * min(1.0, SHARED_TOTAL / max(1, queries)))
    try:
        yield
    finally:
        _SHARE.reset(token)


def budget_share() -> float:
    """The factor ``shared_budget`` puts on the budgets of the moment (1 outside it)."""
    return _SHARE.get()


#: A δ interval within RESOLVED_FLAT x accuracy of δ (relatively) is resolved even where it is
#: wider than the δ change of an accuracy change of eps: where δ barely changes with eps (the total
#: variation near 1 at eps = 0: sigma 0.5, q 0.5, 2000 steps, [1 - 1.1e-8, 1], refined 7 grids
#: for a shift of ~1e-13).
RESOLVED_FLAT = 1e-3


def within(lo, up, accuracy: float):
    """Whether [lo, up] meets a relative ``accuracy``: up - lo <= accuracy * up with up finite, or
    lo == up (an exact +inf too).  (Plain ``up - lo <= accuracy * up`` reads inf <= inf as true:
    an unbounded interval passed for narrow, and the RDP fallback after a failed grid was skipped.)
    A bool for scalars, an array for arrays."""
    if isinstance(lo, float) and isinstance(up, float):
        return lo == up or (up < math.inf and up - lo <= accuracy * up)
    lo, up = np.asarray(lo, dtype=float), np.asarray(up, dtype=float)
    with np.errstate(invalid="ignore"):
        ok = (lo == up) | (np.isfinite(up) & (up - lo <= accuracy * up))
    return bool(ok) if ok.ndim == 0 else ok


def resolved(lo, up, up_shifted, accuracy: float) -> np.ndarray:
    """Whether each δ(eps) interval [lo, up] is resolved at ``accuracy`` -- ``pld.delta``'s rule
    (the engine's and the samplers' δ queries): no wider than the change of δ a relative change ``accuracy`` of
    eps causes (lo at eps at least ``up_shifted``, the upper end at eps (1 + accuracy)), or within
    RESOLVED_FLAT x accuracy of δ, or below 1e-300 wide."""
    lo, up, ups = (np.asarray(v, dtype=np.float64) for v in (lo, up, up_shifted))
    return (lo >= ups) | (up - lo <= RESOLVED_FLAT * accuracy * up) | (up - lo <= 1e-300)


#: δ queries group nearby eps, which share one tilted composition: within 0.1 up to eps = 10,
#: within a relative GROUP_SPREAD beyond (the same width at 10; a tuning profile asks for ~20 eps
#: within 0.1 % of eps ~ 1000, which took a grid each)
GROUP_SPREAD = 0.01


def tail_cut(delta_goal: float, accuracy: float, steps: int, most: float = 1.0) -> float:
    """The P-mass each step's grid leaves beyond its far end (it is charged): ~1e-4 x accuracy x δ
    / T, at most ``most``, at least TAU_MIN, rounded down to a power of ten (one-step grids are
    cached by it: nearby queries share them)."""
    tau = max(TAU_MIN, min(most, 1e-4 * accuracy * delta_goal / max(steps, 1)))
    return 10.0 ** math.floor(math.log10(tau))


def delta_groups(eps: np.ndarray) -> np.ndarray:
    """The group key of each (finite, >= 0) eps of a δ query: equal keys share a grid."""
    eps = np.asarray(eps, dtype=np.float64)
    rel = 10.0 * np.exp(np.round(np.log(np.maximum(eps, 10.0) / 10.0) / math.log1p(GROUP_SPREAD))
                        * math.log1p(GROUP_SPREAD))
    return np.where(eps <= 10.0, np.round(eps, 1), rel)


def refine_levels(attempt, narrow, lo0, up0, budget: float, levels: int = 6, growth: float = 2.0,
                  stall: float = 0.75, before: float = 0.0):
    """Certified (lower, upper) from ``attempt(level)`` for level = 0, 1, ... (each finer and
    about ``growth`` times as costly as the one before), intersected with each other and with the certified
    start values lo0, up0 (returned at once where they are narrow), until ``narrow(lower, upper)``,
    ``levels`` are done, a level narrows no interval to ``stall`` of the one before (finer grids no
    longer pay: round-off has caught up with the discretisation), or the next level would end past
    ``budget`` seconds of work (units of ``_work``, counted, never read off a clock: the answer
    does not depend on the machine's load; scaled inside ``shared_budget``).
    An attempt that cannot be built (GridFailure, ArithmeticError, MemoryError) ends the
    refinement: what is certified so far is returned.  ``before``: the work of a coarser level
    the caller made itself; then the first level here is planned from it as well."""
    best_lo, best_up = lo0, up0
    if narrow(best_lo, best_up):  # (the start settles it: a δ below 1e-300, say -- no level needed)
        return best_lo, best_up
    limit = budget * _SHARE.get() * UNITS_PER_SECOND
    last = float(before)
    width = np.inf
    # (a level that runs past HARD_LEVELS times the budget is abandoned -- ``WorkLimit``, a
    # GridFailure -- and what is certified so far returned: the planned costs are estimates)
    with metered(Meter(HARD_LEVELS * limit)) as meter:
        prev = 0.0
        for level in range(levels):
            # (the next level's cost: ``growth`` times the last, or the last two levels' own ratio
            # where that is smaller -- at least 1.5: a level's lattice charges grow like its size)
            rate = growth if not prev else min(growth, max(1.5, last / prev))
            if (level or before) and meter.units + rate * last > limit:
                break
            start = meter.units
            try:
                lo, up = attempt(level)
            except (GridFailure, ArithmeticError, MemoryError):
                break
            prev, last = last, meter.units - start
            best_up = np.minimum(best_up, up)
            best_lo = np.maximum(best_lo, lo)
            if narrow(best_lo, best_up):
                break
            # judged on the level's own interval: where the start bounds are already close, the
            # intersected one hides a level's progress (a lower end 2.17 -> 2.35 under a start 2.34)
            new_width = np.asarray(up) - np.asarray(lo)
            if level and np.all(new_width > stall * width):
                break
            width = new_width
    return best_lo, best_up


def broadcast_groups(sigma, q, steps, x):
    """(shape, flat arrays, groups) of broadcast inputs: ``groups`` maps each distinct
    (sigma, q, steps) to the flat indices that share it (one engine answers them together)."""
    arrays = np.broadcast_arrays(sigma, q, steps, x)
    flat = [np.asarray(a, dtype=np.float64).reshape(-1) for a in arrays]
    groups: dict = {}
    for i, key in enumerate(zip(flat[0].tolist(), flat[1].tolist(), flat[2].tolist())):
        groups.setdefault(key, []).append(i)
    return arrays[0].shape, flat, groups
