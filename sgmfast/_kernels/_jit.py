"""The one place where jit options are set for every kernel.

A kernel calls another with variables, or with ``bool(True)``, ``int(0)``: never with a bare
constant bool or int, which numba types as a Literal and compiles the callee (and its callees)
once more for, a first run's time (``tests/test_prewarm.py`` checks the kernels' sources)."""

import os
import types

import numba

__all__ = ["jit", "jit_parallel", "jit_pair"]

#: Leave the kernels plain Python functions, not compiled.  The CLI sets it on a first run before
#: any kernel module is imported (``cli.plain``): the answer then comes without waiting ~20 s
#: for numba, bit for bit the same (the kernels use only float64 arithmetic and ``math``
#: functions, the same either way: ``tests/test_cli_plain_first_run.py`` compares), while a
#: background process compiles them.  ``SGMFAST_PURE_PYTHON=1`` sets it too (for the tests).
PURE = os.environ.get("SGMFAST_PURE_PYTHON", "") == "1"


class PlainDiverged(BaseException):
    """A kernel run as plain Python raised where the compiled one would have gone on (IEEE
    arithmetic: 1/0 = inf, log(0) = -inf, exp(1000) = inf): this process's answer could differ
    from the compiled kernels', so it is not given (the CLI runs the command compiled instead).
    A BaseException, so that no ``except ArithmeticError`` fallback of the engine takes it."""


def _plain(func):
    """``func`` itself as a kernel left uncompiled (``PURE``), any exception it raises turned into
    ``PlainDiverged``; its name and docstring kept."""
    def kernel(*args):
        try:
            return func(*args)
        except PlainDiverged:
            raise
        except Exception as exc:
            raise PlainDiverged(f"{func.__module__}.{func.__qualname__}: {type(exc).__name__}: {exc}") from exc

    return _as_kernel(kernel, func)


def _as_kernel(kernel, func):
    """``kernel`` under ``func``'s names and docstring (``py_func`` stays ``func``)."""
    kernel.__name__, kernel.__qualname__, kernel.__doc__ = func.__name__, func.__qualname__, func.__doc__
    kernel.__module__, kernel.py_func = func.__module__, func
    return kernel


def jit(func=None, **options):
    """``numba.njit`` with the package's options: on-disk cache, numpy error model.

    ``plain=f`` names the function a plain run (``PURE``) calls instead of the kernel: the same
    float64 operations in the same order on numpy arrays, where the kernel's loops would take
    seconds as Python (``tests/test_cli_plain_first_run.py`` compares the two bit for bit).

    The numpy error model makes a division by zero give inf/NaN instead of
    raising inside a kernel; fastmath stays off because the +inf atom and NaN
    status values must survive. Kernels release the GIL, so sweeps can run on
    threads (``analysis.figure1_data``).
    """
    plain = options.pop("plain", None)
    if PURE:
        if plain is not None:  # (an array form of the same arithmetic, for plain runs: see ``plain``)
            return lambda f: _as_kernel(_plain(plain), f)
        return _plain(func) if func is not None else _plain
    opts = {"cache": True, "error_model": "numpy", "nogil": True}
    opts.update(options)
    if func is None:
        return numba.njit(**opts)
    return numba.njit(**opts)(func)


def jit_parallel(func=None, **options):
    """Like :func:`jit` with ``parallel=True``, for loops over parameter points."""
    options.setdefault("parallel", True)
    return jit(func, **options)


def jit_pair(func):
    """Parallel and serial builds of one loop over points: ``(parallel, serial)``.

    A parallel launch costs more than a few points, so callers pick the serial build for
    small inputs. The serial build compiles a renamed copy of ``func``: numba's on-disk
    cache keys entries by qualified name, source line and signature but not by the
    ``parallel`` flag, so two dispatchers of the same function would share one cache
    entry and whichever was compiled first would silently serve both.
    """
    serial_func = types.FunctionType(func.__code__, func.__globals__, func.__name__ + "_serial",
                                     func.__defaults__, func.__closure__)
    serial_func.__qualname__ = func.__qualname__ + "_serial"
    serial_func.__doc__ = func.__doc__
    return jit_parallel(func), jit(serial_func)
