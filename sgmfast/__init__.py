"""sgmfast: fast, exact privacy accounting for DP-SGD.

The privacy of DP-SGD is that of T compositions of the Poisson-subsampled Gaussian mechanism
(SGM). Two accountants answer "how private?", both Numba kernels under a thin API:

- :mod:`sgmfast.rdp` -- Rényi DP with exact integer and fractional orders (an upper bound);
- :mod:`sgmfast.pld` -- the privacy-loss distribution (certified upper and lower bounds);
- :mod:`sgmfast.calibrate` -- the smallest noise (or largest batch, fewest steps) for a target;
- :mod:`sgmfast.analysis` -- the batch-size results of Räisä et al. and Kalinin;
- :mod:`sgmfast.tuning` -- the privacy cost of a hyperparameter search.

Submodules load on first use, so ``import sgmfast`` stays light.
"""

from __future__ import annotations

import importlib

from ._types import Bounds, Step

__version__ = "0.1.0"

__all__ = ["Bounds", "Step", "__version__", "rdp", "pld", "calibrate", "analysis", "tuning"]

_SUBMODULES = {"rdp", "pld", "calibrate", "analysis", "tuning", "cli", "integrations"}


def __getattr__(name: str):
    if name in _SUBMODULES:
        module = importlib.import_module(f".{name}", __name__)
        globals()[name] = module
        return module
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | _SUBMODULES)
