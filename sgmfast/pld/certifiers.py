"""Certifiers: each takes a schedule and a query and returns certified intervals, or None where it
does not apply.  It never returns a best effort: every interval it returns holds, so the engine
may intersect any number of them.

Intervals are per direction of the dominating pair (``Certified``): add/remove has two, whose
larger eps (δ) is the answer, replace-one has one.  A certifier may bound only some directions.

=================  ==========================================================================
``TiltedFFT``      both roundings of the whole composition, tilted to the saddle point (stages
                   1-4): the general method, applies everywhere it fits in memory
``TailEvents``     the remove direction as a sum over the number of far-tail steps (stage 5):
                   small δ with small q, where no single tilt centres the composition
``RDPBound``       the Rényi-DP bound of the same schedule: an upper bound only (replace-one by group privacy)
=================  ==========================================================================
"""

from __future__ import annotations

import contextvars
import math
import threading
from dataclasses import dataclass, field

import numpy as np

from .._failures import GridFailure
from .common import ADD, REMOVE, REPLACE, Grid, NotApplicable, grid_pool, two_cores
from .composition import compose_one_stage
from .queries import delta_bound, eps_bound, scan
from .tail_events import event_sum
from .tilting import VAR_GROWTH, saddle_theta
from .two_stage import compose_two_stage, plan


GRID_BYTES = 384 << 20  # composed grids kept per engine (the newest two always)


class Certified:
    """Certified intervals [lower, upper] per direction (scalars or arrays); ``narrow``
    intersects.  The pair's value is the largest over directions, so its interval is
    [max of the lowers, max of the uppers]."""

    def __init__(self, directions, lower, upper):
        self.lo = {d: np.copy(lower) if np.ndim(lower) else lower for d in directions}
        self.up = {d: np.copy(upper) if np.ndim(upper) else upper for d in directions}

    def narrow(self, found) -> Certified:
        """Intersect with ``found`` ({direction: (lower, upper)}, None for no information)."""
        for d, (lo, up) in (found or {}).items():
            self.lo[d] = np.maximum(self.lo[d], lo)
            self.up[d] = np.minimum(self.up[d], up)
        return self

    def cap(self, upper) -> Certified:
        """Intersect every direction with an upper bound on the pair's value."""
        for d in self.up:
            self.up[d] = np.minimum(self.up[d], upper)
        return self

    def found_dict(self) -> dict:
        return {d: (self.lo[d], self.up[d]) for d in self.lo}

    def put(self, sel, other: Certified) -> None:
        """Write ``other``'s intervals into the entries ``sel`` (array intervals)."""
        for d in self.lo:
            self.lo[d][sel] = other.lo[d]
            self.up[d][sel] = other.up[d]

    @property
    def lower(self):
        return _max(self.lo.values())

    @property
    def upper(self):
        return _max(self.up.values())


def _max(values):
    it = iter(values)
    out = next(it)
    for v in it:
        out = np.maximum(out, v)
    return out


@dataclass
class Job:
    """One query's context: the schedule [(sigma, q, count)], the relation, the accuracy, the
    one-step tail cut tau (set from the δ of interest) and the engine's caches."""

    schedule: tuple
    replace: bool
    accuracy: float
    tau: float
    caches: Caches

    @property
    def total(self) -> int:
        return sum(c for _, _, c in self.schedule)

    @property
    def directions(self):
        return (REPLACE,) if self.replace else (REMOVE, ADD)


@dataclass
class Caches:
    """Composed grids and saddle points of one schedule, keyed by everything they depend on
    (bounded: oldest out first)."""

    grids: dict = field(default_factory=dict)
    thetas: dict = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def put_grid(self, key, g) -> None:
        with self.lock:  # the grid pair is built on two threads
            self.grids[key] = g
            total = sum(x.t.nbytes for x in self.grids.values())
            while len(self.grids) > 16 or (total > GRID_BYTES and len(self.grids) > 2):
                total -= self.grids.pop(next(iter(self.grids))).t.nbytes


class TiltedFFT:
    """Certifier: the schedule's composed PLD on one grid, pessimistic and optimistic, tilted by
    e^{theta * loss} towards the eps of interest (stages 1-4).

    Soundness: the pessimistic one-step grid (connect-the-dots) dominates the true PLD in convex
    order and the optimistic one (convex-order minorant) is dominated by it; composition keeps
    both orders.  Stage 3 adds its FFT round-off bound to every pessimistic entry and subtracts
    it from every optimistic one, and charges the mass outside the window (to +inf, or its worst
    wrap-around effect); stage 4's coarsening is a spread (pessimistic) or contraction
    (optimistic) in u = e^{-loss}; blocks with too many tail events go to +inf or are dropped.
    The tilt changes only where round-off is small, never a bound.

    ``growth`` bounds the tilted variance (FFT window) relative to the untilted one;
    ``bracket`` finds the saddle point by the slower bracket search."""

    def __init__(self, growth: float = VAR_GROWTH, bracket: bool = False):
        self.mode = (growth, bracket)

    # --- grids -----------------------------------------------------------------------------
    def theta(self, job: Job, add, step, eps_c) -> float:
        key = (job.tau, add, step, round(eps_c, 6), self.mode)
        th = job.caches.thetas.get(key)
        if th is None:
            single = len(job.schedule) == 1 and job.schedule[0][2] == 1
            # one step needs no transform, hence no tilt
            th = 0.0 if single else saddle_theta(job.schedule, add, step, eps_c, job.tau, *self.mode)
            job.caches.thetas[key] = th
        return th

    def grid(self, job: Job, add, pess: bool, step: float, eps_c: float, eps_lo: float | None = None) -> Grid:
        """Composed grid tilted towards eps_c; its bounds hold for every eps >= eps_lo."""
        theta = self.theta(job, add, step, eps_c)
        eps_lo = eps_c if eps_lo is None else eps_lo
        key = (job.tau, add, pess, step, theta, eps_lo)
        g = job.caches.grids.get(key)
        if g is None:
            for _ in range(4):
                try:
                    g = _compose(job.schedule, add, step, theta, pess, eps_lo, job.tau)
                    break
                except (GridFailure, FloatingPointError):
                    # heavy tails: the Chernoff window of a strong tilt can outgrow MAX_BINS
                    # where a weaker one fits; a tilt towards an eps beyond the direction's
                    # support (the add direction's loss is at most -log(1 - q) per step) can
                    # overflow (the tilt only decides tightness)
                    if theta <= 0:
                        raise
                    theta = 0.5 * theta if theta > 1e-3 else 0.0
            if g is None:
                g = _compose(job.schedule, add, step, 0.0, pess, eps_lo, job.tau)
            job.caches.put_grid(key, g)
        return g

    def grid_pair(self, job: Job, add, step: float, eps_c: float, eps_lo: float):
        """(pessimistic, optimistic) grids of one direction, built concurrently: the kernels and
        FFTs release the GIL, and on two cores the pair takes little more than one of them."""
        theta = self.theta(job, add, step, eps_c)  # builds the one-step pieces both need
        if (job.tau, add, False, step, theta, eps_lo) in job.caches.grids or not two_cores():
            return self.grid(job, add, True, step, eps_c, eps_lo), self.grid(job, add, False, step, eps_c, eps_lo)
        fut = grid_pool().submit(contextvars.copy_context().run, self.grid, job, add, False, step, eps_c, eps_lo)
        try:
            pess = self.grid(job, add, True, step, eps_c, eps_lo)
        finally:
            opt = fut.result()
        return pess, opt

    # --- queries ---------------------------------------------------------------------------
    def epsilon(self, job: Job, step: float, target: float, est: float) -> dict:
        """{direction: (lower, upper)} of eps(target), tilted towards ``est``.  The add
        direction usually lies well below the remove one: a 4x coarser pessimistic grid often
        shows that it cannot set the answer, and its lower bound is then not needed."""
        lo_e = 0.5 * est
        if job.replace:
            g_up, g_lo = self.grid_pair(job, REPLACE, step, est, lo_e)
            return {REPLACE: (eps_bound(g_lo, target), eps_bound(g_up, target))}
        g_up, g_lo = self.grid_pair(job, REMOVE, step, est, lo_e)
        up_r = eps_bound(g_up, target)
        found = {REMOVE: (eps_bound(g_lo, target), up_r)}
        up_a = eps_bound(self.grid(job, ADD, True, 4 * step, est, lo_e), target)
        lo_a = 0.0
        if up_a > up_r:
            fine = eps_bound(self.grid(job, ADD, True, step, est, lo_e), target)
            if fine > up_r:
                lo_a = eps_bound(self.grid(job, ADD, False, step, est, lo_e), target)
            up_a = min(up_a, fine)
        found[ADD] = (lo_a, up_a)
        return found

    def epsilon_upper(self, job: Job, step: float, target: float, est: float) -> float:
        """Only the upper bound of the pair's eps(target) (for calibration searches)."""
        lo_e = 0.5 * est
        up = eps_bound(self.grid(job, REMOVE, True, step, est, lo_e), target)
        up_a = eps_bound(self.grid(job, ADD, True, 4 * step, est, lo_e), target)
        if up_a > up:
            up = max(up, eps_bound(self.grid(job, ADD, True, step, est, lo_e), target))
        return up

    def delta(self, job: Job, step: float, eps: np.ndarray, eps_c: float) -> dict:
        """{direction: (lower, upper)} of δ at each eps, tilted towards eps_c."""
        if job.replace:
            return {REPLACE: (delta_bound(self.grid(job, REPLACE, False, step, eps_c), eps),
                              delta_bound(self.grid(job, REPLACE, True, step, eps_c), eps))}
        up_r = delta_bound(self.grid(job, REMOVE, True, step, eps_c), eps)
        found = {REMOVE: (delta_bound(self.grid(job, REMOVE, False, step, eps_c), eps), up_r)}
        up_a = delta_bound(self.grid(job, ADD, True, 4 * step, eps_c), eps)
        lo_a = np.zeros(eps.size)
        if (up_a > up_r).any():
            fine = delta_bound(self.grid(job, ADD, True, step, eps_c), eps)
            if (fine > up_r).any():
                lo_a = delta_bound(self.grid(job, ADD, False, step, eps_c), eps)
            up_a = np.minimum(up_a, fine)
        found[ADD] = (lo_a, up_a)
        return found


def _compose(schedule, add, step, theta, pess, eps_lo, tau) -> Grid:
    """The composed grid: in two stages where ``two_stage.plan`` says so and it applies, else in
    one transform."""
    stages = plan(schedule, step, add, tau)
    if stages is not None:
        try:
            return compose_two_stage(*schedule[0], add, step, *stages, theta, pess, eps_lo, tau)
        except NotApplicable:
            pass
    return compose_one_stage(schedule, add, step, theta, pess, eps_lo, tau)


class TailEvents:
    """Certifier: the remove direction of a one-entry add/remove schedule as a sum over the
    number of far-tail steps (stage 5, ``tail_events``), for an interval that is still wide.

    Soundness: every term of the sum is bounded like ``TiltedFFT``'s grids; the terms with more
    than K tail steps are charged to the upper bound by the union bound and dropped from the
    lower; any eps whose upper δ is <= target is an upper bound of eps(target), any eps whose
    lower δ exceeds it a lower bound, whatever the curves' shape between the points tried."""

    @staticmethod
    def applies(job: Job) -> bool:
        return not job.replace and len(job.schedule) == 1 and job.schedule[0][2] >= 2

    def epsilon(self, job: Job, step: float, target: float, lo: float, up: float) -> dict | None:
        """{REMOVE: (lower, upper)} of eps(target) searched inside the interval [lo, up] found so
        far, or None."""
        if not (self.applies(job) and lo < up < math.inf):
            return None
        eps_c = 0.5 * (lo + up)
        # the cut a little above the likely eps: the term without tail steps then has a
        # bounded core reaching past eps, which its tilt centres (measured: a cut below eps
        # loosens that term, bench/README)
        ev = event_sum(job.schedule, step, job.tau, job.accuracy, eps_c, 0.5 * (eps_c + up), 0.5 * lo,
                       1e-3 * job.accuracy * target)
        if ev is None:
            return None
        hit_up = scan(lambda e: ev.delta_upper(e) <= target, lo, up, first=True)
        hit_lo = scan(lambda e: ev.delta_lower(e) > target, lo, up if hit_up is None else hit_up, first=False)
        return {REMOVE: (0.0 if hit_lo is None else hit_lo, math.inf if hit_up is None else hit_up)}

    def delta(self, job: Job, step: float, e: np.ndarray, e_shift: np.ndarray, eps_c: float, goal: float):
        """({REMOVE: (lower, upper)} at e, its upper at e_shift), or None."""
        if not self.applies(job):
            return None
        ev = event_sum(job.schedule, step, job.tau, job.accuracy, eps_c, float(e_shift.max()), 0.5 * eps_c, goal)
        if ev is None:
            return None
        return {REMOVE: (ev.delta_lower(e), ev.delta_upper(e))}, ev.delta_upper(e_shift)


class RDPBound:
    """Certifier: the Rényi-DP bound of the same schedule (``sgmfast.rdp``), an upper bound on the
    add/remove pair's eps (δ) -- never looser than RDP.

    Replace-one through group privacy: replacing x by x' is removing x, then adding x', two
    add/remove neighbours, so an (e, d) add/remove guarantee of the whole run gives
    (2 e, (1 + e^e) d) for replace-one; the replace-one pair is realised by the mechanism (one
    record's gradient -1, the other's +1, the rest 0), so this bounds the pair too.  Loose, but
    finite wherever the grids cannot go (eps in the hundreds)."""

    def __init__(self, schedule, replace: bool):
        from .. import rdp

        self.replace = replace
        self._acc = rdp.RDPAccountant()
        for sigma, q, count in schedule:
            self._acc.step(sigma, q, count)

    def epsilon(self, target: float) -> float:
        if not self.replace:
            return self._acc.epsilon(target)
        # find e with eps_ar(target / (1 + e^e)) <= e: then (1 + e^{e'}) target / (1 + e^e) <= target
        # (the map e -> eps_ar(target / (1 + e^e)) increases: a guess 2 % above its last value
        # usually lands above the fixed point at once)
        e = self._acc.epsilon(0.5 * target)
        for _ in range(8):
            guess = 1.02 * e + 1e-6
            if not guess < 700.0:
                return math.inf
            e_new = self._acc.epsilon(target / (1.0 + math.exp(guess)))
            if e_new <= guess:
                return 2.0 * e_new
            e = e_new
        return math.inf

    def delta(self, eps: np.ndarray) -> np.ndarray:
        if not self.replace:
            return np.array([self._acc.delta(float(x)) for x in eps])
        out = np.empty(eps.size)
        for i, x in enumerate(eps):
            half = 0.5 * float(x)
            d = self._acc.delta(half)
            # (1 + e^{eps/2}) d, in logs (d ~ 1e-300 at eps ~ 500); rounding padded by 1e-12
            log_v = math.log(d) + float(np.logaddexp(0.0, half)) if d > 0.0 else -math.inf
            out[i] = min(1.0, math.exp(min(log_v, 0.0)) * (1 + 1e-12))
        return out
