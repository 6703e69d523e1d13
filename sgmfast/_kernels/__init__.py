"""Numba kernels: pure functions on float64 scalars and arrays.

Nothing in this sub-package imports from the rest of sgmfast. Kernels never
raise: they signal trouble by returning NaN, +inf or a status code, and the
Python layer above decides what the user sees.
"""

import hashlib
import os
import pathlib

_HERE = pathlib.Path(__file__).parent


def cache_dirs(source_dir) -> list:
    """The folders where numba may keep the compiled kernels of the modules in ``source_dir``
    (as its cache locators name them): ``NUMBA_CACHE_DIR`` (numba then uses it alone), else the
    ``__pycache__`` beside the sources and the user-wide cache (when the package's folder is
    not writable).  Both cache roots hold one folder per source folder: its name and the sha1
    of its absolute path."""
    path = os.path.abspath(str(source_dir))
    sub = f"{os.path.basename(path)}_{hashlib.sha1(path.encode()).hexdigest()}"
    root = os.environ.get("NUMBA_CACHE_DIR")
    if root:
        return [pathlib.Path(root) / sub]
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return [pathlib.Path(path) / "__pycache__", pathlib.Path(xdg) / "numba" / sub]


def cached_kernels(source_dir) -> set:
    """``<module>.<qualname>`` of every kernel of a module in ``source_dir`` that has an index in
    numba's cache (its ``<module>.<qualname>-<line>.py*.nbi``): one directory listing a folder."""
    out = set()
    for d in cache_dirs(source_dir):
        try:
            names = os.listdir(d)
        except OSError:
            continue
        out.update(n.rsplit("-", 1)[0] for n in names if n.endswith(".nbi"))
    return out


def cache_is_cold() -> bool:
    """True when no compiled kernel of this package is in numba's on-disk cache yet (a first run
    compiles them, which takes seconds): no ``*.nbi`` index in any of the cache folders of the
    kernels' source folders (:func:`cache_dirs`).  Reads directory listings only; imports nothing."""
    for source in (_HERE, *(p for p in _HERE.iterdir() if p.is_dir() and p.name != "__pycache__")):
        if any(d.is_dir() and any(d.glob("*.nbi")) for d in cache_dirs(source)):
            return False
    return True
