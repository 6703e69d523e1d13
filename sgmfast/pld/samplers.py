"""Which batch sampler a run uses, and its certified ε(δ) / δ(ε): one entry for the three.

========== ============================================ ================= =====================
sampler    batches                                      relation          certifier
========== ============================================ ================= =====================
poisson    each example in each step with prob. q       add_remove (or    ``engine`` (the SGM)
                                                        replace_one)
shuffle    data shuffled every epoch into 1/q batches   add_remove        ``allocation`` (random
           (random allocation, k = 1)                                     allocation)
fixed_size b = q n examples drawn without replacement,  replace_one       ``fixed_size``
           independently every step
========== ============================================ ================= =====================

``relation=None`` takes the sampler's own relation (the one its analysis is for).
"""

from __future__ import annotations

import math

import numpy as np

from .._types import Bounds

SAMPLERS = ("poisson", "shuffle", "fixed_size")
_RELATION = {"poisson": "add_remove", "shuffle": "add_remove", "fixed_size": "replace_one"}
_ALLOWED = {"poisson": ("add_remove", "replace_one"), "shuffle": ("add_remove",), "fixed_size": ("replace_one",)}


def resolve(sampler: str, relation: str | None) -> str:
    """The relation to use for ``sampler`` (``relation`` or the sampler's own); a ValueError
    naming the parameter for an unknown sampler or a relation it is not analysed under."""
    if sampler not in SAMPLERS:
        raise ValueError(f"sampler must be one of {SAMPLERS}; got {sampler!r}")
    if relation is None:
        return _RELATION[sampler]
    if relation not in _ALLOWED[sampler]:
        raise ValueError(f"relation {relation!r} is not available for sampler {sampler!r} (allowed: "
                         f"{_ALLOWED[sampler]})")
    return relation


def poisson_only(**options) -> None:
    """A ValueError naming the first option given (not None) that only Poisson sampling takes."""
    for name, value in options.items():
        if value is not None:
            raise ValueError(f"{name} applies to sampler 'poisson' only")


def batches_per_epoch(q: float) -> int:
    """t = 1/q for shuffled batches, which must be a whole number."""
    t = round(1.0 / q) if q > 0 else 0
    if t < 1 or abs(t * q - 1.0) > 1e-9:
        raise ValueError(f"q must be 1/t for a whole number t of batches per epoch with sampler 'shuffle'; "
                         f"got q = {q!r}")
    return int(t)


def run_of_batch(sampler: str, batch: int, n: int, steps=None, epochs=None) -> tuple:
    """(q, T) of a run with batches of ``batch`` of ``n`` examples under ``sampler``, given
    ``steps`` or ``epochs`` (exactly one):

    * poisson, fixed_size: q = batch / n; T = steps, or ceil(epochs n / batch);
    * shuffle: t = n // batch whole batches per epoch, q = 1 / t (the partial last batch dropped,
      as ``drop_last=True`` loaders do: an example left out of an epoch is not used in it, a
      mixture with no output that can only lower its privacy loss); T = steps, or
      ceil(epochs t)."""
    if sampler == "shuffle":
        t = n // batch
        q = 1.0 / t
        total = steps if steps is not None else math.ceil(epochs * t - 1e-9)
        return q, float(total)
    q = batch / n
    total = steps if steps is not None else math.ceil(epochs * n / batch - 1e-9)
    return q, float(total)


def _one(kind: str, sampler: str, sigma, q, steps, x, accuracy) -> Bounds:
    """One (sigma, q, steps) of a sampler: x is one δ (epsilon) or an array of ε (delta)."""
    from . import allocation, fixed_size

    if sampler == "fixed_size":
        return getattr(fixed_size, kind)(sigma, q, steps, x, accuracy=accuracy)
    if q == 0.0 or steps == 0:
        return Bounds(0.0, 0.0)
    t = batches_per_epoch(q)
    if sigma == 0.0:
        # no noise: the output reveals whether the example was used, which it surely is within
        # an epoch (its step is uniform among the epoch's t): δ(ε) = min(1, T/t) for every ε
        used = min(1.0, steps / t)
        if kind == "delta":
            return Bounds(used, used)
        return Bounds(0.0, 0.0) if x >= used else Bounds(math.inf, math.inf)
    return getattr(allocation, kind)(sigma, t, steps, x, accuracy=accuracy)


def call(kind: str, sampler: str, sigma, q, steps, x, accuracy) -> Bounds:
    """``kind`` ("epsilon" or "delta") of a non-Poisson sampler, broadcast over validated inputs:
    one call per (sigma, q, steps), with all its epsilons at once for ``delta`` (one composition
    serves them), one per δ for ``epsilon``."""
    arrays = np.broadcast_arrays(sigma, q, steps, x)
    shape = arrays[0].shape
    flat = [np.asarray(a, dtype=np.float64).reshape(-1) for a in arrays]
    lo = np.empty(flat[0].size)
    up = np.empty(flat[0].size)
    groups: dict = {}
    for i, key in enumerate(zip(*(f.tolist() for f in flat[:3]))):
        groups.setdefault(key, []).append(i)
    for (s, qq, t), idx in groups.items():
        if kind == "delta":
            b = _one(kind, sampler, s, qq, int(t), flat[3][idx], accuracy)
            lo[idx], up[idx] = b.lower, b.upper
        else:
            for i in idx:
                b = _one(kind, sampler, s, qq, int(t), float(flat[3][i]), accuracy)
                lo[i], up[i] = b.lower, b.upper
    if shape == ():
        return Bounds(float(lo[0]), float(up[0]))
    return Bounds(lo.reshape(shape), up.reshape(shape))


def curve(kind: str, sampler: str, sigma: float, q: float, checkpoints, x: float, accuracy) -> Bounds:
    """``kind`` at each checkpoint of one run of a non-Poisson sampler: a certified query per
    checkpoint (the one-step or epoch distribution is built once and kept in the cache, so each
    costs a composition), then made non-decreasing -- both ε(δ) and δ(ε) grow with the steps (a
    run's prefix is a post-processing of it), so an upper bound holds at every earlier
    checkpoint and a lower bound at every later one."""
    n = len(checkpoints)
    lo, up = np.empty(n), np.empty(n)
    for i, t in enumerate(checkpoints.tolist()):
        b = _one(kind, sampler, sigma, q, int(t), x if kind == "epsilon" else np.array([x]), accuracy)
        lo[i], up[i] = float(np.ravel(b.lower)[0]), float(np.ravel(b.upper)[0])
    return Bounds(np.maximum.accumulate(lo), np.minimum.accumulate(up[::-1])[::-1])
