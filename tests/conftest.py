"""Commands the tests start (``python -m sgmfast ...``, ``python -c ...``) import this checkout,
like the tests themselves (``pythonpath`` in pyproject.toml), whatever folder they run in: one
copy of the package, one numba kernel cache, no second compilation of every kernel."""

import os
import pathlib

ROOT = str(pathlib.Path(__file__).resolve().parents[1])
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)

# a command started on an empty kernel cache would start a second compiling process
# (sgmfast._prewarm): not in tests, whose own processes already keep the cores busy
os.environ.setdefault("SGMFAST_PREWARM", "0")


import ctypes  # noqa: E402
import gc  # noqa: E402
import hashlib  # noqa: E402
import tempfile  # noqa: E402

import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

# the property tests draw the same examples on every run (a test command that passes anywhere:
# a run that drew a new failing example would not land); SGMFAST_HYPOTHESIS=explore draws new ones
# each run, to look for failures (stop 45's run found delta(0) and eps(delta(0)) of RDP apart so)
settings.register_profile("fixed", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("SGMFAST_HYPOTHESIS", "fixed"))


def _compile_each_kernel_once():
    """In the xdist workers: a kernel is compiled by one worker at a time (a lock file per kernel,
    held while numba compiles it and writes it to its on-disk cache); a worker that needs a kernel
    the other one is compiling waits, then loads it from the cache.  On an empty cache both
    workers start on tests that need the same kernels (the PLD pipeline, the RDP order search),
    and each compiled them itself: 16 kernels twice, ~40 s of CPU in a suite run (numba's compile
    events, measured).  The compiled code is numba's either way: only who compiles it changes."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    try:
        import fcntl

        from numba.core import sigutils
        from numba.core.compiler_lock import global_compiler_lock
        from numba.core.dispatcher import Dispatcher
    except ImportError:  # (no fcntl on Windows: each worker compiles what it needs, as before)
        return
    tag = hashlib.sha1(ROOT.encode()).hexdigest()[:12]  # (this checkout's kernels: its own cache)
    folder = pathlib.Path(tempfile.gettempdir()) / f"sgmfast-tests-compile-{tag}"
    folder.mkdir(exist_ok=True)
    compile_, held = Dispatcher.compile, set()

    def compile_once(self, sig):
        name = f"{self.py_func.__module__}.{self.py_func.__qualname__}"
        if tuple(sigutils.normalize_signature(sig)[0]) in self.overloads or name in held:
            return compile_(self, sig)  # (in memory already, or this thread holds its lock)
        with global_compiler_lock, open(folder / f"{name}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # (released when the file closes, or the worker ends)
            held.add(name)
            try:
                return compile_(self, sig)  # (loads it from the cache if the other worker wrote it)
            finally:
                held.discard(name)

    Dispatcher.compile = compile_once


_compile_each_kernel_once()


@pytest.fixture(autouse=True)
def _trim_after_each_test():
    """After a test that left the worker 64 MiB or more above its size after the last trim, the
    C heap's free pages go back to the system (``_trim_heap``), so a worker's resident size does
    not carry one test's largest query into the next ones (a trim walks the whole heap, ~3 ms:
    not after each of the ~3,800 tests).  (Before, glibc's mmap threshold was fixed at 1 MiB:
    every large block mapped on its own and unmapped when freed, so each grid array came as fresh
    zeroed pages -- ~1.8e7 page faults and ~50 s of system time a suite run.  Within a test the
    allocator now reuses the blocks it freed.  The whole suite, warm kernel cache, both cores
    shared with other work, one run each: system time 95 -> 47 s, peak resident size of a worker
    1.47 -> 1.56 GB.)"""
    yield
    if _resident() > _TRIMMED[0] + (64 << 20):
        _trim_heap()
        _TRIMMED[0] = _resident()


_TRIMMED = [0]  # (the worker's resident size after its last trim)


def _resident() -> int:
    """This process's resident size in bytes (Linux: /proc/self/statm; elsewhere 0)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return 0


@pytest.fixture(autouse=True, scope="module")
def _release_caches_after_each_module():
    """Each test module leaves the one-step cache empty, so a worker's memory does not carry
    one module's grids into the next (the suite stays within ~2 GB per worker)."""
    yield
    from sgmfast.pld import common

    common.STEP_CACHE.clear()
    gc.collect()
    _trim_heap()
    _TRIMMED[0] = _resident()


def _trim_heap():
    """Give the C heap's free pages back (glibc: ``malloc_trim``).  Freed grid arrays below the
    allocator's mmap threshold (which grows to 32 MiB after the first frees) stay in the heap, and
    a worker's resident size then carries one query's grids into every later test's (measured:
    0.94 GiB resident after the accuracy-monotone module against 0.36 GiB before it, all caches
    empty)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # (not glibc: nothing to do)
        pass
