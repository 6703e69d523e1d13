"""Sweeps on a ``concurrent.futures.Executor``: the points of a vectorised call cut into chunks,
each chunk one task that runs the same serial call (so a process pool, a Dask cluster's
``client.get_executor()`` or Ray's executor all work, and the answers are the serial call's).

The chunks are fixed by the call, not by the executor: a serial call walks the same chunks and
restarts its warm starts at the same places, which is what makes the results identical whatever
runs them (a warm start changes a calibrated value within its tolerance, never its guarantee).
"""

from __future__ import annotations

import importlib
import math
import sys
from concurrent.futures import Executor

import numpy as np

#: points per task: calibrations with the PLD cost 0.05-0.5 s a point, with RDP microseconds;
#: queries of the PLD 10-50 ms
CHUNK_PLD = 16
CHUNK_RDP = 1 << 16


def check_executor(executor):
    """The executor, checked: something with ``submit``; a process pool must not fork (numba's
    threading layer is not fork-safe once a parallel kernel has run: the workers die)."""
    if executor is None:
        return None
    if not (isinstance(executor, Executor) or callable(getattr(executor, "submit", None))):
        raise TypeError(f"executor must be a concurrent.futures.Executor (or have .submit); got {type(executor).__name__}")
    # (where concurrent.futures.process is not loaded, no process pool exists: importing it only
    # to ask would cost every start of the command line ~0.01 s)
    process = sys.modules.get("concurrent.futures.process")
    if process is not None and isinstance(executor, process.ProcessPoolExecutor):
        ctx = getattr(executor, "_mp_context", None)
        if ctx is not None and ctx.get_start_method() == "fork":
            raise ValueError("executor: a ProcessPoolExecutor must start its workers with 'spawn' or 'forkserver' "
                             "(numba's threads do not survive fork): "
                             "ProcessPoolExecutor(mp_context=multiprocessing.get_context('spawn'))")
    return executor


def _call(module: str, name: str, args, kwargs):
    """One task: the serial call on one chunk (a module-level function, so that it pickles)."""
    fn = getattr(importlib.import_module(module), name)
    return np.asarray(fn(*args, **kwargs), dtype=np.float64).reshape(-1)


def chunked(module: str, name: str, arrays, kwargs: dict, chunk: int, executor) -> np.ndarray:
    """``module.name(*arrays_chunk, **kwargs)`` over consecutive chunks of the flat, broadcast
    ``arrays``, on ``executor`` (or here, in order, when it is None); the results in order."""
    n = arrays[0].size
    starts = range(0, n, chunk)
    pieces = [tuple(np.ascontiguousarray(a[s : s + chunk]) for a in arrays) for s in starts]
    if executor is None:
        parts = [_call(module, name, p, kwargs) for p in pieces]
    else:
        futures = [executor.submit(_call, module, name, p, kwargs) for p in pieces]
        parts = [f.result() for f in futures]
    return np.concatenate(parts) if parts else np.zeros(0)


def n_chunks(n: int, chunk: int) -> int:
    return max(1, math.ceil(n / chunk))
