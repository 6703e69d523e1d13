"""Which batch sampler a run uses, and its certified ε(δ) / δ(ε): one entry for each.

============= ========================================= ============== ============================
sampler       batches                                   relation       certifier
============= ========================================= ============== ============================
poisson       each example in each step with prob. q    add_remove (or ``engine`` (the SGM): tight
                                                        replace_one)
balls_in_bins every epoch, each example joins one of    add_remove     ``allocation`` (random
              the 1/q batches uniformly at random                      allocation, k = 1): tight
              (batch sizes vary)
shuffle       every epoch, a random permutation cut     zero_out (or   ``shuffle``: sound, loose
              into 1/q batches of a fixed size          replace_one)   (no amplification proved)
              (``DataLoader(shuffle=True)``)
fixed_size    b = q n examples drawn without            replace_one    ``fixed_size``: tight
              replacement, independently every step
============= ========================================= ============== ============================

``relation=None`` takes the sampler's own relation (the one its analysis is for).  Balls-in-bins
is not a shuffle: a permutation cut into fixed-size batches can be far less private (Chua et al.,
ICML 2024); ``integrations.torch`` has batch samplers that draw exactly what these accountants
assume.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from ..._failures import GridFailure
from ..._types import Bounds
from ..._work import UNITS_PER_SECOND, Meter, metered
from ..common import broadcast_groups, shared_budget
from ..engine import monotone

from ..._samplers import EPOCH_SAMPLERS, SAMPLERS, TABLE, resolve  # noqa: F401  (the one table)

#: said with every answer for the permutation shuffle (API warning, CLI note)
SHUFFLE_NOTE = ("sampler 'shuffle' (a permutation cut into fixed-size batches) has no tight analysis: "
                "its upper bound is the Gaussian mechanism of each epoch (no amplification) and its lower "
                "bound an explicit dataset pair, so the interval can be wide; for tight accounting run "
                "Poisson or balls-in-bins batches (sgmfast.integrations.torch) and account them with "
                "sampler='poisson' or 'balls_in_bins'")


def allowed(sampler: str) -> tuple:
    """The relations ``sampler`` is analysed under by the PLD engine (its own first)."""
    return TABLE[sampler].relations["pld"]


def poisson_only(**options) -> None:
    """A ValueError naming the first option given (not None) that only Poisson sampling takes."""
    for name, value in options.items():
        if value is not None:
            raise ValueError(f"{name} applies to sampler 'poisson' only")


def batches_per_epoch(q: float, sampler: str = "balls_in_bins") -> int:
    """t = 1/q for the epoch samplers (balls-in-bins, shuffle), which must be a whole number."""
    t = round(1.0 / q) if q > 0 else 0
    if t < 1 or abs(t * q - 1.0) > 1e-9:
        raise ValueError(f"q must be 1/t for a whole number t of batches per epoch with sampler {sampler!r}; "
                         f"got q = {q!r}")
    return int(t)


def run_of_batch(sampler: str, batch: int, n: int, steps=None, epochs=None) -> tuple:
    """(q, T) of a run with batches of ``batch`` of ``n`` examples under ``sampler``, given
    ``steps`` or ``epochs`` (exactly one):

    * poisson, fixed_size: q = batch / n; T = steps, or ceil(epochs n / batch);
    * balls_in_bins, shuffle: t = n // batch whole batches per epoch, q = 1 / t (for the
      shuffle, the partial last batch dropped, as ``drop_last=True`` loaders do; its upper bound
      also holds with the partial batch kept); T = steps, or ceil(epochs t)."""
    if sampler in EPOCH_SAMPLERS:
        t = n // batch
        q = 1.0 / t
        total = steps if steps is not None else math.ceil(epochs * t - 1e-9)
        return q, float(total)
    q = batch / n
    total = steps if steps is not None else math.ceil(epochs * n / batch - 1e-9)
    return q, float(total)


def _one(kind: str, sampler: str, relation: str, sigma, q, steps, x, accuracy) -> Bounds:
    """One (sigma, q, steps) of a sampler: x is one δ (epsilon) or an array of ε (delta)."""
    from . import balls_in_bins as allocation, fixed_size, shuffle

    # (a q that is no 1/t is refused for the epoch samplers, whatever the steps and noise)
    t = batches_per_epoch(q, sampler) if sampler != "fixed_size" and q > 0.0 else 0
    if q == 0.0 or steps == 0 or sigma == math.inf:
        return Bounds(0.0, 0.0)  # (no step uses the example, or every output is pure noise)
    if sampler == "fixed_size":
        return getattr(fixed_size, kind)(sigma, q, steps, x, accuracy=accuracy)
    if sampler == "shuffle":
        return getattr(shuffle, kind)(sigma, t, steps, x, relation=relation, accuracy=accuracy)
    return getattr(allocation, kind)(sigma, t, steps, x, accuracy=accuracy)  # (sigma = 0 too: ``epoch_gauss``)


class LooseBoundWarning(UserWarning):
    """A certified interval that is wide because its sampler has no tight analysis."""


def warn_if_loose(sampler: str, bounds: Bounds) -> None:
    """A ``LooseBoundWarning`` when a sampler without a tight analysis returns a wide interval."""
    if not TABLE[sampler].tight:
        from .shuffle import wide

        if wide(bounds):
            warnings.warn(SHUFFLE_NOTE, LooseBoundWarning, stacklevel=4)


def call(kind: str, sampler: str, sigma, q, steps, x, accuracy, relation: str | None = None) -> Bounds:
    """``kind`` ("epsilon" or "delta") of a non-Poisson sampler, broadcast over validated inputs:
    one call per (sigma, q, steps), with all its epsilons at once for ``delta`` (one composition
    serves them), one per δ for ``epsilon``."""
    shape, flat, groups = broadcast_groups(sigma, q, steps, x)
    lo = np.empty(flat[0].size)
    up = np.empty(flat[0].size)
    for (s, qq, t), idx in groups.items():
        if kind == "delta":
            b = _one(kind, sampler, relation, s, qq, int(t), flat[3][idx], accuracy)
            lo[idx], up[idx] = b.lower, b.upper
        else:
            with shared_budget(len(idx)):  # (several δ of one run: one budget in all)
                for i in idx:
                    b = _one(kind, sampler, relation, s, qq, int(t), float(flat[3][i]), accuracy)
                    lo[i], up[i] = b.lower, b.upper
        # (both eps(δ) and δ(eps) fall as their argument grows: each bound holds beyond its own
        # point, so one call's answers agree -- a query cut short keeps its neighbours' bounds)
        lo[idx], up[idx] = monotone(np.asarray(flat[3][idx], dtype=np.float64), lo[idx], up[idx])
    out = Bounds(float(lo[0]), float(up[0])) if shape == () else Bounds(lo.reshape(shape), up.reshape(shape))
    warn_if_loose(sampler, out)
    return out


#: A sampler curve's work after its last checkpoint's query: at most this many times that
#: query's, or CURVE_FLOOR seconds of work (``_work``) where that is more.
CURVE_FACTOR, CURVE_FLOOR = 1.5, 1.0


def curve(kind: str, sampler: str, sigma: float, q: float, checkpoints, x: float, accuracy,
          relation: str | None = None) -> Bounds:
    """``kind`` at each checkpoint of one run of a non-Poisson sampler.  Balls-in-bins: the whole
    epochs on one epoch lattice (``allocation_curve``), a checkpoint inside an epoch bracketed by
    them; then such checkpoints, and the others' checkpoints, by a certified query each (the
    one-step distributions are kept in the cache, so each costs its compositions), the last
    checkpoint first and then in ``_spread`` order while the work lasts (CURVE_FACTOR); then
    made non-decreasing -- both ε(δ) and δ(ε) grow with the steps (a run's prefix is a
    post-processing of it), so an upper bound holds at every earlier checkpoint and a lower
    bound at every later one, which brackets the checkpoints left out."""
    from ..curve_grids import _spread

    n = len(checkpoints)
    lo, up = np.zeros(n), np.full(n, np.inf)
    steps = checkpoints.tolist()
    todo = list(range(n))
    x1 = x if kind == "epsilon" else np.array([x])
    with metered() as meter:
        if sampler == "balls_in_bins" and q > 0.0 and 0.0 < sigma < math.inf and checkpoints[-1] > 0:
            t = batches_per_epoch(q, sampler)
            if t > 1:  # (one lattice for the whole epochs: ``allocation_curve``; inside an epoch, a query
                # each -- a partial epoch is composed as it ran, ``epoch_runs``: the last checkpoint as
                # tight as ``pld.epsilon`` there, which 1.5 epochs of 234 read 29 % wider bracketed)
                from . import allocation_curve

                b = getattr(allocation_curve, kind + "_curve")(sigma, t, checkpoints, x, accuracy)
                lo, up = np.array(b.lower, dtype=np.float64), np.array(b.upper, dtype=np.float64)
                todo = [i for i in range(n) if steps[i] % t]
        # the last checkpoint first, then the first, then the middles of the widest gaps (the
        # rest bracketed by monotonicity), until CURVE_FACTOR times the work before them (or the
        # first query's, where none was) is spent: one full query each made a 30-checkpoint
        # fixed-size curve cost 30 queries (60-120 s); after a balls-in-bins δ(0) query of 6.6
        # units, 1.5 times that took a 0.4-unit curve to 11.5 s
        base = meter.units
        for k, j in enumerate(_spread(len(todo))):
            i = todo[j]
            if k == 1:
                limit = meter.units + max(CURVE_FACTOR * (base or meter.units), CURVE_FLOOR * UNITS_PER_SECOND)
            if k and meter.units >= limit:
                break
            try:
                # (after the first, each query within what is left of the allowance: one that would
                # run past it is abandoned -- it overran by a whole query, a fixed-size delta curve
                # at accuracy 1.5e-4 counted 11.9 units for an allowance of 8.8)
                with metered(Meter(limit - meter.units) if k else None):
                    b = _one(kind, sampler, relation, sigma, q, int(steps[i]), x1, accuracy)
            except GridFailure:  # (WorkLimit: the allowance is spent; monotonicity brackets the rest)
                break
            lo[i], up[i] = max(lo[i], float(np.ravel(b.lower)[0])), min(up[i], float(np.ravel(b.upper)[0]))
    out = Bounds(np.maximum.accumulate(lo), np.minimum.accumulate(up[::-1])[::-1])
    warn_if_loose(sampler, out)
    return out
