"""Balls-in-bins runs composed on the loss grid: whole epochs, and a partial last one as it ran.

A run of T = E t + r steps (0 < r < t) ends with the first r steps of an epoch.  Every example
joins one of that epoch's t steps uniformly; with probability p = r/t its step is one of the r
that ran, uniform among them, and otherwise none of them.  So the partial epoch is the r-step
allocation (``balls_in_bins.Epoch`` with r steps: P_r / Q = S_r / r) subsampled at rate p:

    remove: ((1 - p) Q + p P_r, Q),   add: (Q, (1 - p) Q + p P_r),

and its likelihood ratio (S_r + t - r) / t is the full epoch's with the t - r steps that did not
run integrated out (their W's have mean 1) -- dropping outputs is post-processing, so the
partial epoch lies between none and one whole epoch, where the bracketing put it.  Both
directions come from the r-step epoch's grids by ``_kernels.pld.subsample``, which keeps
pessimistic masses pessimistic and optimistic ones optimistic (its module notes); every charge of
the r-step epoch (truncations, round-off) is carried through the same map.  For r = 1 the
partial epoch is one Poisson-subsampled Gaussian step at rate 1/t (``grid.onestep``).

The run is then the parts [(whole epoch, E), (partial epoch, 1)] composed on one loss grid
(``grid.composition.compose_copies``), upper and lower bound alike (``eps_bounds``,
``delta_bounds``; without a partial epoch, whole epochs only).  The r-step epoch's lattice is
chosen as a whole epoch's (``epoch_grid._lattice`` with r steps) on the same level, its second
top from the partial epoch's share of the answer (``balls_in_bins._levels``), its loss step as
``PartialEpoch`` says.  Only the tightness and the cost depend on these choices.  Tests:
tests/test_allocation_partial.py (the kernels against the exact subsampled pair of discrete
pairs; runs against an mpmath quadrature table and against their whole epochs).
"""

from __future__ import annotations

import math

import numpy as np

from ..._failures import GridFailure, GridTooLarge, WorkLimit
from ..._kernels.pld import subsample as ksub
from ..._work import PER_BIN_DISCRETISE, charge
from ..common import ADD, REMOVE
from ..grid.composition import compose_copies, copies_delta
from ..grid.onestep import OneStep, one_step as poisson_step
from ..grid.queries import eps_bound
from .epoch_grid import MAX_GRID


class PartialEpoch:
    """The first r of an epoch's t steps (0 < r < t) on the loss grid, both directions, both bounds;
    ``epoch`` is the r-step ``Epoch`` (None for r = 1).  Its grids are built on a coarser step than
    the run's where the subsampling shrinks the losses that matter: by its slope at loss ``eps`` (the
    run's answer as guessed; the slope grows with the loss, from about r/t near 0 to 1), up to
    ``step_r``, the step the r-step epoch would have alone (sigma 9.8, t 279, r 6: on the run's step
    its tail sweeps took 7.7 s; sigma 1.5, t 69, r 10, δ 1e-12, where eps = 0.82 is in the tail,
    t/r times the run's step left it 2e-3 wide)."""

    __slots__ = ("sigma", "t", "r", "epoch", "step_r", "shrink", "_steps")

    def __init__(self, sigma: float, t: int, r: int, epoch=None, step_r: float = 0.0, eps: float = 0.0):
        self.sigma, self.t, self.r, self.epoch, self.step_r = sigma, t, r, epoch, step_r
        p = r / t
        slope = p if not eps > 0 else (1.0 if eps > 700 else 1.0 - (1.0 - p) * math.exp(-eps))
        self.shrink = 1.0 / max(slope, p)  # (d/d ell of log(1 - p + p e^ell) where that is eps)
        self._steps: dict = {}

    def one_step(self, add: bool, step: float, tail: float) -> OneStep:
        """One direction on the loss grid of spacing ``step`` (kept)."""
        key = (add, step, tail)
        one = self._steps.get(key)
        if one is None:
            if self.r == 1:
                one = poisson_step(self.sigma, 1.0 / self.t, add, step)
            else:
                step_in = max(step, min(step * self.shrink, self.step_r))
                one = subsampled(self.epoch.one_step(add, step_in, tail), self.r / self.t, add, step)
            self._steps[key] = one
        return one


def subsampled(one: OneStep, p: float, add: bool, step: float) -> OneStep:
    """The pair of ``one`` (its pessimistic and optimistic masses, on its own grid) subsampled at rate
    ``p``, on the grid of spacing ``step`` over its losses (``_kernels.pld.subsample``)."""
    n, step_in = one.pess.size, one.step
    ends = [ksub.moved_loss(one.j_lo * step_in, p, add), ksub.moved_loss((one.j_lo + n - 1) * step_in, p, add)]
    if p < 1.0:  # (remove: the second measure's mass off the grid; add: the +inf mass)
        ends.append(math.log1p(-p) if not add else -math.log1p(-p))
    j_lo, j_hi = math.floor(min(ends) / step) - 1, math.ceil(max(ends) / step) + 1
    n_out = j_hi - j_lo + 1
    if n_out > MAX_GRID:
        raise GridTooLarge("too many loss bins for a partial epoch")
    charge(PER_BIN_DISCRETISE * (2 * n + n_out))
    pess = np.empty(n_out)
    p_inf = ksub.subsample_upper(one.pess, float(one.p_inf), int(one.j_lo), step_in, p, add, j_lo, step, pess)
    frac_in, amass_in, top_in = one.atoms()
    frac, amass = np.empty(n_out), np.empty(n_out)
    top = ksub.subsample_lower(frac_in, amass_in, float(top_in), int(one.j_lo), step_in, p, add, j_lo, step, frac, amass)
    return OneStep(j_lo, pess, min(float(p_inf), 1.0), step, frac, amass, float(top))


def _parts(epoch, part, add, step, tail, e_hi: int, e_lo: int, pess: bool) -> list:
    """The parts [(OneStep, count)] of the run bounded in direction ``add``: with a ``part``
    (``PartialEpoch``), e_lo whole epochs and it; without, e_hi whole epochs (upper, ``pess``) or
    e_lo (lower, none: [])."""
    if part is None:
        n = e_hi if pess else e_lo
        return [(epoch.one_step(add, step, tail), n)] if n else []
    whole = [(epoch.one_step(add, step, tail), e_lo)] if e_lo else []
    return whole + [(part.one_step(add, step, tail), 1)]


def _lower(compute, none):
    """A lower end from ``compute()``, or ``none`` (0: always a lower bound) where its grid
    cannot be built: on a coarse lattice the lower law can be 0 everywhere (sigma 0.434, t 201,
    h 1.1 for E[W] = 1), and its failed composition took the level's upper end with it (the
    Gaussian's 541.5 for [12.57, ...]).  A work limit goes on: the level is abandoned, not
    finished without its lower end."""
    try:
        return compute()
    except WorkLimit:
        raise
    except (GridFailure, ArithmeticError):
        return none


def delta_bounds(epoch, step, e_hi, e_lo, eps, groups, tail, add_cap, capped=None, scale=1.0, part=None):
    """(upper, lower) δ at ``eps`` of the run (e_hi whole epochs above, e_lo below; with a
    ``part``, e_lo whole epochs and it on both sides), as ``eps_bounds`` (the capped upper to
    ``capped``), the compositions tilted towards ``scale`` times each eps group's median."""
    zero = np.zeros(eps.size)

    def composed(add, pess):
        parts = _parts(epoch, part, add, step, tail, e_hi, e_lo, pess)
        return copies_delta(parts, step, eps, groups, tail, pess, scale) if parts else zero

    up = composed(REMOVE, True)
    lo = _lower(lambda: composed(REMOVE, False), zero)
    if np.all(add_cap <= lo):
        return up, lo
    up_add = composed(ADD, True)
    if capped is not None:
        capped.append(np.maximum(up, np.minimum(add_cap, up_add)))
    return np.maximum(up, up_add), np.maximum(lo, _lower(lambda: composed(ADD, False), zero))


def eps_bounds(epoch, step, e_hi, e_lo, eps_c, tail, delta, add_cap, capped=None, part=None):
    """(lower, upper) eps(δ) of the run (e_hi whole epochs above, e_lo below; with a ``part``, e_lo
    whole epochs and it on both sides) on one lattice and loss grid, both directions.  Where
    ``add_cap`` (``epoch_add``'s bound on the add direction of e_hi epochs, which is above the run's)
    is at most the remove direction's lower bound, the add direction cannot be the larger one and is
    not composed at all.  Otherwise the upper returned is the lattice's own -- the refinement judges
    its progress on it: capped, a finite but stuck upper end stopped it after two levels while
    finer ones resolve the add direction (sigma 1.1, t 2, 200 epochs, δ 1e-12: [118.78, 199.0]
    for [118.793, 118.806]) -- and the capped one, max(remove, min(add, cap)), goes to the list
    ``capped`` for the caller to intersect with at the end."""

    def composed(add, pess):
        parts = _parts(epoch, part, add, step, tail, e_hi, e_lo, pess)
        return eps_bound(compose_copies(parts, step, eps_c, tail, pess), delta) if parts else 0.0

    up = composed(REMOVE, True)
    lo = _lower(lambda: composed(REMOVE, False), 0.0)
    if add_cap <= lo:
        return lo, up
    up_add = composed(ADD, True)
    if capped is not None:
        capped.append(max(up, min(add_cap, up_add)))
    return max(lo, _lower(lambda: composed(ADD, False), 0.0)), max(up, up_add)
