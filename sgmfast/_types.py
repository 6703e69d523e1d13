"""Small result types shared by the accountants."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Bounds", "Step"]


@dataclass(frozen=True)
class Bounds:
    """A certified interval around a privacy parameter: ``lower <= truth <= upper``.

    ``upper`` is the number to report as the privacy guarantee; ``upper - lower``
    is the certified discretisation error. Values may be numpy arrays.
    """

    lower: Any
    upper: Any

    @property
    def error(self):
        """Width of the certified interval, ``upper - lower``."""
        return self.upper - self.lower

    def __iter__(self):
        yield self.lower
        yield self.upper


@dataclass(frozen=True)
class Step:
    """``count`` steps of the Poisson-subsampled Gaussian mechanism with noise multiplier ``sigma`` and sampling rate ``q``."""

    sigma: float
    q: float
    count: int
