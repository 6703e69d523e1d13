"""Small result types shared by the accountants."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Bounds", "Step"]


@dataclass(frozen=True)
class Bounds:
    """A certified interval around a privacy parameter: ``lower <= truth <= upper``.

    ``upper`` is the number to report as the privacy guarantee; ``upper - lower``
    is the certified discretisation error. Values may be numpy arrays.  ``met`` says whether
    the interval meets the ``accuracy`` the query asked for (every entry of an array; None where
    no accuracy applies or the engine does not report it): an interval that does not is still
    certified, only wider.  For δ(ε) the accuracy is a shift of ε: met where the interval is no
    wider than δ's change over a relative change ``accuracy`` of ε, or than ``accuracy`` x δ.
    """

    lower: Any
    upper: Any
    met: Any = field(default=None, compare=False, repr=False)

    @property
    def error(self):
        """Width of the certified interval, ``upper - lower``."""
        return self.upper - self.lower

    @property
    def width(self):
        """Relative width ``(upper - lower) / upper`` (0 where both ends are equal, inf included)."""
        import numpy as np  # (here, not at the top: ``import sgmfast`` stays light)

        lo, up = np.asarray(self.lower, dtype=float), np.asarray(self.upper, dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            w = np.where(lo == up, 0.0, (up - lo) / np.where(up > 0, up, 1.0))
        return float(w) if w.ndim == 0 else w

    def __iter__(self):
        yield self.lower
        yield self.upper


@dataclass(frozen=True)
class Step:
    """``count`` steps of the Poisson-subsampled Gaussian mechanism with noise multiplier ``sigma`` and sampling rate ``q``."""

    sigma: float
    q: float
    count: int
