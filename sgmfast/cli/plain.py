"""A first run that answers at once: the kernels as plain Python while they compile elsewhere.

On an empty kernel cache numba needs 15-25 s to compile what ``sgmfast epsilon`` runs; the same
functions run as plain Python (``_kernels._jit.PURE``) answer the MNIST query in ~2 s, bit for
bit the same interval: the kernels are loops over float64 arithmetic and ``math`` functions,
which are IEEE double and the same C library functions either way
(``tests/test_cli_plain_first_run.py`` compares the two on every command of ``_prewarm.PLAIN_FAST``).  Meanwhile a detached
low-priority process compiles every kernel into numba's cache (``_prewarm.start_rest``).

Two things end a plain run early, and the command then runs again compiled in the same process
image (``os.execve``: the same arguments, nothing printed twice -- the plain run's output is held
until it is complete):

* a kernel raises (``_jit.PlainDiverged``): plain Python raises where the compiled kernel goes on
  with IEEE infinities (exp overflow, 1/0), so its answer could differ;
* the run takes longer than ``PATIENCE`` seconds: plain Python loops are ~100x slower than the
  compiled ones, and a large query would otherwise run for minutes.  (Only the way to the answer
  depends on this clock, never the answer: both ways give the same interval.)
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import threading

#: Seconds a plain run may take before the command runs compiled instead (a compiled first run
#: takes 15-30 s on a 2-core machine; the plain ones of ``_prewarm.PLAIN_FAST`` 1-7 s quiet).
PATIENCE = 10.0
#: Set in the environment of the compiled re-run, so that it compiles instead of trying again.
NO_PLAIN = "SGMFAST_PLAIN_FIRST_RUN"


def use_plain(key: str) -> bool:
    """Whether this process runs the command ``key`` with plain-Python kernels (and sets them so):
    only for the commands of ``_prewarm.PLAIN_FAST``, with the background compile on (else the
    kernels would never be compiled), not in a compiled re-run, and before any kernel module is
    imported (a plain kernel cannot be called from a compiled one)."""
    from .. import _prewarm

    if key not in _prewarm.PLAIN_FAST or handed_over():
        return False
    if os.environ.get("SGMFAST_PREWARM", "1") == "0":
        return False
    if any(m.startswith("sgmfast._kernels.") for m in sys.modules):
        return False
    from .._kernels import _jit

    _jit.PURE = True
    return True


def handed_over() -> bool:
    """Whether this process is the compiled run a plain run handed its command to."""
    return os.environ.get(NO_PLAIN) == "0"


class _Run:
    """The plain run's state shared with its watchdog: once ``done``, the answer is printed and
    the watchdog leaves it alone; once ``handed`` to a compiled run, nothing of it is printed."""

    def __init__(self):
        self.lock = threading.Lock()
        self.done = False
        self.handed = False

    def give_up(self, why: str) -> None:
        with self.lock:
            if not self.done:
                self.handed = True
                _compiled_instead(why)


def _compiled_instead(why: str) -> None:
    """Run the same command again, compiled, in place of this process (never returns)."""
    print(f"sgmfast: {why}: compiling the kernels for this command instead (first run only)",
          file=sys.stderr, flush=True)
    from .._prewarm import compiling_env

    env = dict(compiling_env(), **{NO_PLAIN: "0"})
    os.execve(sys.executable, [sys.executable, "-m", "sgmfast", *sys.argv[1:]], env)


def run(command) -> None:
    """``command()`` with plain kernels: its output held until it ends, numpy's floating-point
    warnings off (the compiled kernels raise none), given up for a compiled run on a kernel's
    exception or past PATIENCE seconds."""
    import numpy as np
    import warnings

    from .._kernels._jit import PlainDiverged

    state = _Run()
    watchdog = threading.Timer(PATIENCE, state.give_up, args=("slow without compiled kernels",))
    watchdog.daemon = True
    held = io.StringIO()
    watchdog.start()
    try:
        with contextlib.redirect_stdout(held), np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            try:
                command()
            except PlainDiverged:
                state.give_up("a kernel stopped without compiling")
    finally:
        with state.lock:
            state.done = True
            watchdog.cancel()
            if not state.handed:
                sys.stdout.write(held.getvalue())
