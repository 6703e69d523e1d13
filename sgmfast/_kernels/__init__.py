"""Numba kernels: pure functions on float64 scalars and arrays.

Nothing in this sub-package imports from the rest of sgmfast. Kernels never
raise: they signal trouble by returning NaN, +inf or a status code, and the
Python layer above decides what the user sees.
"""

import os
import pathlib


def cache_is_cold() -> bool:
    """True when no compiled kernel of this package is in numba's on-disk cache yet (a first run
    compiles them, which takes seconds): no ``*.nbi`` index beside the kernels' sources, nor in
    ``NUMBA_CACHE_DIR`` or numba's user-wide cache (where it goes when the package's folder is not
    writable).  Reads directory listings only; imports nothing."""
    here = pathlib.Path(__file__).parent
    if any(here.glob("**/__pycache__/*.nbi")):
        return False
    for root in (os.environ.get("NUMBA_CACHE_DIR"), os.path.join(os.path.expanduser("~"), ".cache", "numba")):
        if root and os.path.isdir(root) and any(pathlib.Path(root).glob("**/*sgmfast*/**/*.nbi")):
            return False
    return True
