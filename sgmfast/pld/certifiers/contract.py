"""The certifier contract: what every certifier receives (``Job``: the schedule, relation,
accuracy, tail cut and caches) and returns (``Certified``: intervals per direction of the
dominating pair, which the engine intersects).  A certifier returns only intervals that hold --
never a best effort -- or None where it does not apply."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np

from ..common import ADD, REMOVE, REPLACE

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
    one-step tail cut tau (set from the δ of interest), the engine's caches, and whether its
    one-step grids bin the far tail coarser (``onestep.coarse_tail``: one decision for every
    grid, tilt and tail-event sum of the query, which then share their one-step grids)."""

    schedule: tuple
    replace: bool
    accuracy: float
    tau: float
    caches: Caches
    coarse: bool = False

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
            total = sum(_nbytes(x) for x in self.grids.values())
            while len(self.grids) > 16 or (total > GRID_BYTES and len(self.grids) > 2):
                total -= _nbytes(self.grids.pop(next(iter(self.grids))))


def _nbytes(g) -> int:
    """Bytes of a cached grid's array (a ``Grid``'s entries, a ``SpectralGrid``'s band)."""
    t = getattr(g, "t", None)
    return t.nbytes if t is not None else g.z.nbytes * 4
