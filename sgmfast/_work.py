"""Work, the measure of a query's cost.

Time limits are kept in units of transform work (a length-n FFT costs n log2 n), not seconds: an
answer then does not depend on the machine, its load, or whether numba was still compiling.
(No numba here: the calibration module imports it without loading the PLD engine.)
"""

from __future__ import annotations

import math
import threading
from contextlib import contextmanager
from contextvars import ContextVar

#: work units per CPU second of the composition pipeline on the reference machine (2 cores,
#: bench/README): budgets are stated in seconds there and kept in units everywhere.
UNITS_PER_SECOND = 2.5e8


class Meter:
    """Transform work charged inside a ``metered`` block (and its helper threads)."""

    def __init__(self):
        self.units = 0.0
        self._lock = threading.Lock()

    def add(self, units: float) -> None:
        with self._lock:  # (the grid pair charges from two threads)
            self.units += units


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


def charge_fft(n: int) -> None:
    """Charge one transform of length n to every open meter."""
    units = n * math.log2(max(n, 2))
    for meter in _METERS.get():
        meter.add(units)
