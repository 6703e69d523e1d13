"""Certifier ``TiltedFFT``: the whole composition on one tilted grid, both roundings (stages 1-4)."""

from __future__ import annotations

import contextvars
import math
from concurrent import futures

import numpy as np

from ..._failures import GridFailure, WorkLimit
from ..common import ADD, REMOVE, REPLACE, Grid, NotApplicable, add_pool, grid_pool, two_cores
from ..grid.banded import compose_banded
from ..grid.composition import compose_one_stage
from ..grid.spectral import SpectralGrid, read_delta, read_eps
from ..grid.tilting import VAR_GROWTH, saddle_theta
from ..grid.onestep import one_step
from ..grid.two_stage import compose_two_stage, plan
from .contract import Job


#: the add direction's upper bound is read first on a grid this many times coarser (usually far
#: enough below the remove direction's to leave it out), then, where that does not show it, on
#: one ``ADD_NEXT`` times coarser, and only then on the query's grid
ADD_FIRST = 16
ADD_NEXT = 4


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
    ``bracket`` finds the saddle point by the slower bracket search; ``multi``: a schedule of
    several entries in two stages where ``two_stage.plan`` allows it (small δ)."""

    def __init__(self, growth: float = VAR_GROWTH, bracket: bool = False, multi: bool = False):
        self.mode = (growth, bracket, multi)
        self.multi = multi

    # --- grids -----------------------------------------------------------------------------
    def theta(self, job: Job, add, step, eps_c) -> float:
        key = (job.tau, add, step, round(eps_c, 6), self.mode)
        th = job.caches.thetas.get(key)
        if th is None:
            single = len(job.schedule) == 1 and job.schedule[0][2] == 1
            # one step needs no transform, hence no tilt
            th = 0.0 if single else saddle_theta(job.schedule, add, step, eps_c, job.tau, *self.mode[:2], job.coarse,
                                                 self.multi)
            job.caches.thetas[key] = th
        return th

    def grid(self, job: Job, add, pess: bool, step: float, eps_c: float, eps_lo: float | None = None,
             banded: bool = False) -> Grid:
        """Composed grid tilted towards eps_c; its bounds hold for every eps >= eps_lo.  ``banded``:
        it may be a ``SpectralGrid`` (the band of its spectrum, ``grid.banded``), read by
        ``read_eps`` / ``read_delta``; else the ``Grid`` (a cached band is unrolled)."""
        theta = self.theta(job, add, step, eps_c)
        eps_lo = eps_c if eps_lo is None else eps_lo
        key = (job.tau, add, pess, step, theta, eps_lo, self.multi)
        g = job.caches.grids.get(key)
        if g is not None and not banded and isinstance(g, SpectralGrid):
            g = g.materialise()
            job.caches.put_grid(key, g)
        if g is None:
            for _ in range(4):
                try:
                    g = _compose(job.schedule, add, step, theta, pess, eps_lo, job.tau, banded, job.coarse,
                                 self.multi)
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
                g = _compose(job.schedule, add, step, 0.0, pess, eps_lo, job.tau, banded, job.coarse, self.multi)
            job.caches.put_grid(key, g)
        return g

    def grid_pair(self, job: Job, add, step: float, eps_c: float, eps_lo: float, banded: bool = True):
        """(pessimistic, optimistic) grids of one direction, built concurrently: the kernels and
        FFTs release the GIL, and on two cores the pair takes little more than one of them."""
        if two_cores() and plan(job.schedule, step, add, job.tau, self.multi) is None:
            # the one-step pieces both grids compose; their optimistic masses on the thread that
            # composes the optimistic grid, while this one searches the tilt
            ones = [one_step(sigma, q, add, step, job.tau, job.coarse) for sigma, q, _ in job.schedule]
            grid_pool().submit(_optimistic_masses, ones)
        theta = self.theta(job, add, step, eps_c)  # builds the one-step pieces both need
        if (job.tau, add, False, step, theta, eps_lo, self.multi) in job.caches.grids or not two_cores():
            return (self.grid(job, add, True, step, eps_c, eps_lo, banded),
                    self.grid(job, add, False, step, eps_c, eps_lo, banded))
        fut = grid_pool().submit(contextvars.copy_context().run, self.grid, job, add, False, step, eps_c, eps_lo,
                                 banded)
        try:
            pess = self.grid(job, add, True, step, eps_c, eps_lo, banded)
        finally:
            opt = fut.result()
        return pess, opt

    # --- queries ---------------------------------------------------------------------------
    # (the grids are read off their spectra's bands where those are narrow: ``grid.banded``)
    def epsilon(self, job: Job, step: float, target: float, est: float) -> dict:
        """{direction: (lower, upper)} of eps(target), tilted towards ``est``.  The add
        direction usually lies well below the remove one: a pessimistic grid ``ADD_FIRST`` times
        coarser, then one ``ADD_NEXT`` times coarser, often shows that it cannot set the answer
        (its upper bound is below the remove direction's), and its lower bound is then not needed."""
        lo_e = 0.5 * est

        def eps(add, pess, at):
            return read_eps(self.grid(job, add, pess, at, est, lo_e, True), target, est)

        if job.replace:
            g_up, g_lo = self.grid_pair(job, REPLACE, step, est, lo_e)
            return {REPLACE: (read_eps(g_lo, target, est), read_eps(g_up, target, est))}

        def first_add():
            return _coarsest_add(lambda m: eps(ADD, True, m * step), math.inf)

        # the coarsest add grid is always read: built on a helper thread beside the remove pair
        fut = add_pool().submit(contextvars.copy_context().run, first_add) if two_cores() else None
        try:
            g_up, g_lo = self.grid_pair(job, REMOVE, step, est, lo_e)
            up_r = read_eps(g_up, target, est)
            found = {REMOVE: (read_eps(g_lo, target, est), up_r)}
        except BaseException:
            if fut is not None:
                futures.wait([fut])  # (its own failure, if any, is this one's consequence)
            raise
        up_a = fut.result() if fut is not None else first_add()
        if up_a > up_r:  # (the next coarser grid)
            up_a = min(up_a, eps(ADD, True, ADD_NEXT * step))
        lo_a = 0.0
        if up_a > up_r:
            fine = eps(ADD, True, step)
            if fine > up_r:
                lo_a = eps(ADD, False, step)
            up_a = min(up_a, fine)
        found[ADD] = (lo_a, up_a)
        return found

    def epsilon_upper(self, job: Job, step: float, target: float, est: float) -> float:
        """Only the upper bound of the pair's eps(target) (for calibration searches)."""
        lo_e = 0.5 * est

        def eps(add, at):
            return read_eps(self.grid(job, add, True, at, est, lo_e, True), target, est)

        up = eps(REMOVE, step)
        up_a = _coarsest_add(lambda m: eps(ADD, m * step), math.inf)
        if up_a > up:
            up_a = min(up_a, eps(ADD, ADD_NEXT * step))
        if up_a > up:
            up = max(up, eps(ADD, step))
        return up

    def delta(self, job: Job, step: float, eps: np.ndarray, eps_c: float) -> dict:
        """{direction: (lower, upper)} of δ at each eps, tilted towards eps_c."""
        def bound(add, pess, at):
            return read_delta(self.grid(job, add, pess, at, eps_c, None, True), eps)

        if job.replace:
            return {REPLACE: (bound(REPLACE, False, step), bound(REPLACE, True, step))}
        up_r = bound(REMOVE, True, step)
        found = {REMOVE: (bound(REMOVE, False, step), up_r)}
        up_a = _coarsest_add(lambda m: bound(ADD, True, m * step), np.ones(eps.size))
        if (up_a > up_r).any():
            up_a = np.minimum(up_a, bound(ADD, True, ADD_NEXT * step))
        lo_a = np.zeros(eps.size)
        if (up_a > up_r).any():
            fine = bound(ADD, True, step)
            if (fine > up_r).any():
                lo_a = bound(ADD, False, step)
            up_a = np.minimum(up_a, fine)
        found[ADD] = (lo_a, up_a)
        return found


def _coarsest_add(read, failed):
    """``read(ADD_FIRST)``, the add direction's upper bound on its coarsest grid, or ``failed`` (a
    trivial bound: the next grid decides) where that grid fails; a ``WorkLimit`` goes on."""
    try:
        return read(ADD_FIRST)
    except WorkLimit:
        raise
    except (GridFailure, ArithmeticError):
        return failed


def _optimistic_masses(ones) -> None:
    """Build each ``OneStep``'s optimistic masses (cached on it; a failure is raised again where
    they are read)."""
    for one in ones:
        try:
            one.opt
        except FloatingPointError:
            return


def _compose(schedule, add, step, theta, pess, eps_lo, tau, banded: bool = False, coarse: bool = False,
             multi: bool = False) -> Grid:
    """The composed grid: in two stages where ``two_stage.plan`` says so (``multi``: for several
    entries too) and it applies, else in one transform (``banded``: possibly kept as its
    spectrum's band, ``grid.banded``)."""
    stages = plan(schedule, step, add, tau, multi)
    if stages is not None:
        try:
            return compose_two_stage(schedule, add, step, *stages, theta, pess, eps_lo, tau,
                                     compose_banded if banded else None)
        except NotApplicable:
            pass
    return compose_one_stage(schedule, add, step, theta, pess, eps_lo, tau, compose_banded if banded else None, coarse)
