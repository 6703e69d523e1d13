"""A first run compiles on two cores: while a command compiles its kernels in the order it needs
them, a second process compiles the same kernels from the last one backwards into numba's
on-disk cache, and the command loads each one it reaches that is there already.

Which kernels, with which argument types, in which order: ``_kernels/first_run.json``, written by
``python bench/first_run.py --manifest`` (each recorded command run on an empty cache, numba's
compile events in order; the top-level kernels kept).  A stale or missing entry costs only
time: the command compiles whatever is not in the cache, as it always did, so the answers do
not depend on the helper (it writes the same cache numba would).

The helper starts when one of the command's kernels is not in the cache (``uncached``: a first
run, or a command's first use after others filled the cache), is stopped when the command ends,
and is off with ``SGMFAST_PREWARM=0``.  It runs at the lowest CPU priority (``os.nice(19)``), so
that on a machine whose other core is busy it does not slow the command down.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

MANIFEST = pathlib.Path(__file__).parent / "_kernels" / "first_run.json"


def key(command: str, accountant: str = "pld", sampler: str = "poisson") -> str:
    """The manifest's key of a command line (its compile path depends on these)."""
    return f"{command}/{accountant}/{sampler.replace('-', '_')}"


def _entries(name: str) -> list:
    try:
        return json.loads(MANIFEST.read_text()).get(name, [])
    except (OSError, ValueError):
        return []


def uncached(name: str) -> int:
    """How many of the manifest's kernels of ``name`` have no index in numba's cache (file
    names only: nothing is imported; a kernel cached for other argument types counts as there)."""
    from ._kernels import cached_kernels

    root = pathlib.Path(__file__).parent
    listed, count = {}, 0
    for module, qualname, _args in _entries(name):
        path = root.joinpath(*module.split(".")[1:])
        if path.parent not in listed:
            listed[path.parent] = cached_kernels(path.parent)
        count += f"{path.name}.{qualname}" not in listed[path.parent]
    return count


def start(name: str):
    """The helper process compiling ``name``'s kernels backwards, or None (no entry, turned off)."""
    if os.environ.get("SGMFAST_PREWARM", "1") == "0":
        return None
    try:
        if name not in json.loads(MANIFEST.read_text()):
            return None
    except (OSError, ValueError):
        return None
    return subprocess.Popen([sys.executable, "-m", "sgmfast._prewarm", name], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop(proc) -> None:
    """End the helper (what it saved stays in the cache; numba writes each file whole)."""
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()


def find(module, qualname: str):
    """The kernel of ``module`` whose Python function is ``qualname`` (by attribute, or among the
    module's kernels: a serial twin's function has its own name), or an AttributeError."""
    obj = module
    try:
        for part in qualname.split("."):
            obj = getattr(obj, part)
        return obj
    except AttributeError:
        for value in vars(module).values():
            if getattr(getattr(value, "py_func", None), "__qualname__", None) == qualname:
                return value
        raise


def compile_backwards(name: str) -> int:
    """Compile the manifest's kernels of ``name``, last first; the number compiled."""
    import importlib

    from numba.core import types

    done = 0
    for module, qualname, args in reversed(json.loads(MANIFEST.read_text()).get(name, [])):
        try:
            disp = find(importlib.import_module(module), qualname)
            disp.compile(tuple(eval(a, {"__builtins__": {}}, dict(vars(types))) for a in args))
            done += 1
        except Exception:  # a stale entry: the command compiles it itself
            continue
    return done


def _lower_priority() -> None:
    """Run at the lowest CPU priority: the helper then takes only a core nothing else wants.  On
    a busy machine (other jobs on both cores) a helper at normal priority took its share of CPU
    from the command it was helping: the MNIST ``epsilon``'s first run took 34 s with it and 20 s
    without (bench/README, "First run")."""
    try:
        os.nice(19)
    except (AttributeError, OSError):  # (no ``os.nice`` on Windows)
        pass


if __name__ == "__main__":
    _lower_priority()
    compile_backwards(sys.argv[1])
