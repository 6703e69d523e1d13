"""The one place where jit options are set for every kernel."""

import numba

__all__ = ["jit", "jit_parallel"]


def jit(func=None, **options):
    """``numba.njit`` with the package's options: on-disk cache, numpy error model.

    The numpy error model makes a division by zero give inf/NaN instead of
    raising inside a kernel; fastmath stays off because the +inf atom and NaN
    status values must survive.
    """
    opts = {"cache": True, "error_model": "numpy"}
    opts.update(options)
    if func is None:
        return numba.njit(**opts)
    return numba.njit(**opts)(func)


def jit_parallel(func=None, **options):
    """Like :func:`jit` with ``parallel=True``, for loops over parameter points."""
    options.setdefault("parallel", True)
    return jit(func, **options)
