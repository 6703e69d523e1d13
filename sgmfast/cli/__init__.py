"""Command-line interface: ``sgmfast epsilon ...``.

Bad input gives one line on stderr and exit code 2; numbers go to stdout.

Where each command lives: ``parser`` (every subcommand's arguments), ``queries`` (``epsilon``,
``calibrate``, ``batch-size``, ``tune``, ``figures``), ``curves`` (``curve``), ``risk``
(``tradeoff``, ``calibrate-risk``), ``plots`` (their figures) and ``common`` (what they share:
``_fmt`` prints a bound rounded in its own direction, so the printed number keeps its guarantee).

Start-up time matters here (a command is often one query): only the parser is imported up
front; each subcommand's module, and what it needs, when it runs; and the process ends without
the interpreter's teardown (``main``).
"""

from __future__ import annotations

import importlib
import os
import sys
import warnings

from .._failures import Unverified
from .common import CURVE_POINTS, EXIT_USAGE, TRADEOFF_POINTS, _fmt, _UsageError  # noqa: F401  (the tests read them here)
from . import plain
from .parser import _build_parser

#: subcommand -> (module of this package, function)
_COMMANDS = {
    "epsilon": ("queries", "_cmd_epsilon"), "calibrate": ("queries", "_cmd_calibrate"),
    "batch-size": ("queries", "_cmd_batch_size"), "tune": ("queries", "_cmd_tune"),
    "figures": ("queries", "_cmd_figures"), "curve": ("curves", "_cmd_curve"),
    "tradeoff": ("risk", "_cmd_tradeoff"), "calibrate-risk": ("risk", "_cmd_calibrate_risk"),
    "warm-up": ("queries", "_cmd_warm_up"),
}


#: said on stderr before the first command on a machine whose kernel cache is empty
FIRST_RUN = ("sgmfast: compiling the numerical kernels for this machine (first run only; later runs load "
             "them from numba's cache; 'sgmfast warm-up' compiles them all at once)")
#: said instead when the cache holds other commands' kernels but not all of this one's (the manifest
#: ``_kernels/first_run.json`` says which; a second process compiles them too: ``sgmfast._prewarm``)
FIRST_USE = "sgmfast: compiling the kernels '{}' needs (its first use on this machine only)"
#: said after the answer of a first run or first use when the other commands' kernels are not all
#: cached: a detached low-priority process compiles them now (``_prewarm.start_rest``)
REST = ("sgmfast: compiling the other commands' kernels in the background (low priority, once; "
        "SGMFAST_PREWARM=0 turns this off)")


#: said on a first run (or a command's first use) that answers with the kernels as plain Python
#: while a detached low-priority process compiles them all (``plain``)
PLAIN_RUN = ("sgmfast: first run on this machine: answering without compiled kernels while they compile "
             "in the background (low priority, once; SGMFAST_PREWARM=0 turns this off)")


def _command(args, entry: bool = False) -> None:
    """Run a parsed command; a loose-bound warning of the API becomes one ``note:`` line after
    the answer on stdout (the interval printed is certified, only wide), other warnings pass.
    ``entry``: this process is the ``sgmfast`` command itself (``main`` without arguments)."""
    from .. import _prewarm
    from .._kernels import cache_is_cold

    helper = None
    key = _prewarm.key(args.command, getattr(args, "accountant", None) or "pld",
                       getattr(args, "sampler", None) or "poisson")
    first = cache_is_cold()
    missing = first or _prewarm.uncached(key) > 0
    plain_run = missing and entry and plain.use_plain(key)
    if plain_run:
        print(PLAIN_RUN, file=sys.stderr, flush=True)
        _prewarm.start_rest()
        first = False  # (nothing left to start after the answer)
    elif missing:
        if not plain.handed_over():  # (a plain run that handed over has said it compiles)
            print(FIRST_RUN if first else FIRST_USE.format(args.command), file=sys.stderr, flush=True)
        first = True
        helper = _prewarm.start(key)
    module, name = _COMMANDS[args.command]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            command = getattr(importlib.import_module(f".{module}", __name__), name)
            if plain_run:
                plain.run(lambda: command(args))
            else:
                command(args)
        finally:
            _prewarm.stop(helper)
    notes = []
    for w in caught:
        if w.category.__name__ == "LooseBoundWarning":
            if str(w.message) not in notes:
                notes.append(str(w.message))
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    for note in notes:
        print(f"note: {note}")
    if first and _prewarm.start_rest() is not None:
        print(REST, file=sys.stderr, flush=True)


def _run(argv, entry: bool = False) -> int:
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
        _command(args, entry)
    except (_UsageError, ValueError, TypeError) as exc:
        msg = str(exc).replace("\n", " ")
        print(f"sgmfast: error: {msg}", file=sys.stderr)
        return EXIT_USAGE
    except MemoryError as exc:
        print(f"sgmfast: error: out of memory: {exc}", file=sys.stderr)
        return 1
    except Unverified as exc:
        print(f"sgmfast: error: {exc}", file=sys.stderr)
        return 1
    return 0


def _exit_now(code: int) -> None:
    """End the process once stdout and stderr are flushed, skipping the interpreter's teardown.

    Tearing down numba's loaded kernels and the imported modules took 0.2-0.35 s after a PLD
    query (0.1 s after a bare ``import numba, scipy.special``): a fifth of a cold
    ``sgmfast epsilon``. Nothing is lost: output files are closed by then, numba writes its
    cache when it compiles, and the worker threads left are idle.
    """
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # (``| head``: the reader has gone; nothing to tell it)
        pass
    except OSError as exc:
        print(f"sgmfast: error: writing the output: {exc}", file=sys.stderr)
        code = 1
    try:
        sys.stderr.flush()
    except OSError:
        pass
    os._exit(code)


def main(argv=None) -> int:
    """Entry point of the ``sgmfast`` command; returns the exit code.

    ``argv`` None (the console script, ``python -m sgmfast.cli``): the arguments are
    ``sys.argv`` and the process ends here (:func:`_exit_now`) instead of returning. Pass a
    list to run a command in-process and get its exit code.
    """
    if argv is not None:
        return _run(argv)
    try:
        code = _run(None, entry=True)
    except BrokenPipeError:
        code = 1
    _exit_now(code)
    return code  # pragma: no cover - not reached
