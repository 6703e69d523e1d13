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

import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

# the property tests draw the same examples on every run (a test command that passes anywhere:
# a run that drew a new failing example would not land); SGMFAST_HYPOTHESIS=explore draws new ones
# each run, to look for failures (stop 45's run found delta(0) and eps(delta(0)) of RDP apart so)
settings.register_profile("fixed", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("SGMFAST_HYPOTHESIS", "fixed"))


@pytest.fixture(autouse=True)
def _trim_after_each_test():
    """After each test, the C heap's free pages go back to the system (``_trim_heap``), so a
    worker's resident size does not carry one test's largest query into the next ones.  (Before,
    glibc's mmap threshold was fixed at 1 MiB: every large block mapped on its own and unmapped
    when freed, so each grid array came as fresh zeroed pages -- ~1.8e7 page faults and ~50 s of
    system time a suite run.  Within a test the allocator now reuses the blocks it freed.  The
    whole suite, warm kernel cache, both cores shared with other work, one run each: system time
    95 -> 47 s, peak resident size of a worker 1.47 -> 1.56 GB.)"""
    yield
    _trim_heap()


@pytest.fixture(autouse=True, scope="module")
def _release_caches_after_each_module():
    """Each test module leaves the one-step cache empty, so a worker's memory does not carry
    one module's grids into the next (the suite stays within ~2 GB per worker)."""
    yield
    from sgmfast.pld import common

    common.STEP_CACHE.clear()
    gc.collect()
    _trim_heap()


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
