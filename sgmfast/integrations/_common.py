"""Engine-neutral accounting of a schedule of SGM segments, shared by the adapters."""

from __future__ import annotations

import math
from typing import Sequence

from .._samplers import ENGINES
from .._types import Bounds, Step


def check_engine(engine: str) -> str:
    if engine not in ENGINES:
        raise ValueError(f"accountant must be one of {ENGINES}; got {engine!r}")
    return engine


def _build(engine: str, steps: Sequence[Step], accuracy: float, relation: str = "add_remove"):
    if engine == "rdp":
        from .. import rdp

        acc = rdp.RDPAccountant()
    else:
        from .. import pld

        acc = pld.PLDAccountant(accuracy=accuracy, relation=relation)
    for st in steps:
        acc.step(st.sigma, st.q, st.count)
    return acc


class ScheduleCache:
    """Builds the sgmfast accountant for a history once and reuses it while it is unchanged."""

    def __init__(self, engine: str, accuracy: float, relation: str = "add_remove"):
        self.engine = check_engine(engine)
        self.accuracy = float(accuracy)
        self.relation = relation
        self._key = None
        self._acc = None

    def accountant(self, steps: Sequence[Step]):
        key = tuple(steps)
        if key != self._key:
            self._acc = _build(self.engine, key, self.accuracy, self.relation)
            self._key = key
        return self._acc

    def epsilon(self, steps: Sequence[Step], delta: float) -> Bounds:
        if not steps:
            return Bounds(0.0, 0.0)
        r = self.accountant(steps).epsilon(delta)
        return r if isinstance(r, Bounds) else Bounds(math.nan, float(r))

    def delta(self, steps: Sequence[Step], epsilon: float) -> Bounds:
        if not steps:
            return Bounds(0.0, 0.0)
        r = self.accountant(steps).delta(epsilon)
        return r if isinstance(r, Bounds) else Bounds(math.nan, float(r))


def fixed_size_bounds(engine: str, steps: Sequence[Step], kind: str, value: float, accuracy: float) -> Bounds:
    """``kind`` ("epsilon" at delta = ``value``, or "delta" at epsilon = ``value``) of fixed-size
    runs (replace-one) of any mix of noise and batch fraction, by either engine: PLD's certified
    ``pld.fixed_size.epsilon_runs`` / ``delta_runs``, or RDP's ``rdp.fixed_size_runs`` (lower NaN)."""
    runs = [(st.sigma, st.q, st.count) for st in steps]
    if not runs:
        return Bounds(0.0, 0.0)
    if engine == "rdp":
        from .. import rdp

        return Bounds(math.nan, rdp.fixed_size_runs(runs, value, 0 if kind == "epsilon" else 1))
    from ..pld import fixed_size

    return (fixed_size.epsilon_runs if kind == "epsilon" else fixed_size.delta_runs)(runs, value, accuracy=accuracy)
