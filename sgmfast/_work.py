"""Work, the measure of a query's cost.

Time limits are kept in units of work, not seconds: an answer then does not depend on the
machine, its load, or whether numba was still compiling.  A length-n FFT costs n log2 n units;
the other passes over a grid are charged per bin at their measured cost relative to it (a one-step
discretisation evaluates a few logs and exps per bin, a tilted-moment pass one exp).
(No numba here: the calibration module imports it without loading the PLD engine.)
"""

from __future__ import annotations

import math
import threading
from contextlib import contextmanager
from contextvars import ContextVar

from ._failures import WorkLimit  # noqa: F401  (past a meter's hard limit: callers keep what they had)


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity (``taskset -c 0``: one), or
    ``os.cpu_count`` where there is none."""
    import os

    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # (no affinity on this platform)
        return os.cpu_count() or 1

#: work units per CPU second of the composition pipeline on the reference machine (2 cores,
#: bench/README): budgets are stated in seconds there and kept in units everywhere.
UNITS_PER_SECOND = 2.5e8




class Meter:
    """Transform work charged inside a ``metered`` block (and its helper threads); past ``limit``
    units (if given) the next charge raises ``WorkLimit``.  Each charge is rounded up to whole units
    and summed as an integer: exact, so the total is the same in any order of the additions --
    whichever of two threads charges first (a float sum could differ in its last bit, and a budget
    decision with it)."""

    def __init__(self, limit: float | None = None):
        self.units = 0
        self.limit = limit
        self._lock = threading.Lock()

    def add(self, units: float) -> None:
        with self._lock:  # (the grid pair charges from two threads)
            self.units += math.ceil(units) if math.isfinite(units) else units
        if self.limit is not None and self.units > self.limit:
            raise WorkLimit(f"work limit of {self.limit / UNITS_PER_SECOND:.3g} s reached")


_METERS: ContextVar = ContextVar("sgmfast_meters", default=())


@contextmanager
def metered(meter: Meter | None = None):
    """Charge the block's work to ``meter`` (a new one if None) and to the enclosing meters."""
    meter = Meter() if meter is None else meter
    token = _METERS.set(_METERS.get() + (meter,))
    try:
        yield meter
    finally:
        _METERS.reset(token)


@contextmanager
def at_most(seconds: float):
    """A block with a work allowance of its own (seconds of units): past it the block ends quietly,
    what it left behind standing (``pld.samplers.shuffle``'s lower bound); an enclosing meter's
    limit goes on (the enclosing meters are charged first, so theirs raises before this one)."""
    meter = Meter(seconds * UNITS_PER_SECOND)
    try:
        with metered(meter):
            yield meter
    except WorkLimit:
        if not meter.units > meter.limit:
            raise


def apart(fn, *args):
    """(fn(*args), the work it charged): its charges go to a meter of its own only, for the caller
    to charge as one sum where it takes the result (``pld.common.Beside``, ``epoch_tail.over_ladder``)."""
    meter = Meter()
    token = _METERS.set((meter,))
    try:
        return fn(*args), meter.units
    finally:
        _METERS.reset(token)


#: units per bin of the other passes (measured against the FFT's ~4 ns per unit here)
PER_BIN_DISCRETISE = 50.0
PER_BIN_MOMENTS = 3.0
PER_TERM_DIRECT = 4.0


def charge(units: float) -> None:
    """Charge ``units`` of work to every open meter."""
    for meter in _METERS.get():
        meter.add(units)


def charge_fft(n: int) -> None:
    """Charge one transform of length n."""
    charge(n * math.log2(max(n, 2)))
