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

After a first run (or a command's first use), once the answer is out, the CLI starts one more
process, detached, at the same priority (``start_rest``): it compiles every kernel of the
manifest that is not in the cache yet -- the other commands' -- so that their first use loads
them instead of compiling them (``calibrate``'s RDP order optimiser alone took 30-45 s to compile
on a loaded 2-core machine).  One runs at a time (a lock file, ``lock_path``); off with
``SGMFAST_PREWARM=0`` too.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import subprocess
import sys
import tempfile

from ._work import usable_cores as _cores

MANIFEST = pathlib.Path(__file__).parent / "_kernels" / "first_run.json"
#: The commands (manifest keys) whose first run answers with the kernels as plain Python while
#: ``start_rest`` compiles them (``cli.plain``): at its usual sizes each takes a few
#: seconds that way, where compiling took 15-25 s (bench/README, "First run"); the others
#: (balls-in-bins lattices, calibration searches) would run minutes as plain Python.
PLAIN_FAST = frozenset({"epsilon/pld/poisson", "epsilon/rdp/poisson", "epsilon/pld/shuffle", "epsilon/pld/fixed_size",
                        "calibrate/pld/poisson", "curve/pld/poisson", "tradeoff/pld/poisson", "tune/pld/poisson"})


def key(command: str, accountant: str = "pld", sampler: str = "poisson") -> str:
    """The manifest's key of a command line (its compile path depends on these)."""
    return f"{command}/{accountant}/{sampler.replace('-', '_')}"


def _entries(name: str) -> list:
    try:
        return json.loads(MANIFEST.read_text()).get(name, [])
    except (OSError, ValueError):
        return []


def _missing(entries: list) -> list:
    """The manifest entries whose kernel has no index in numba's cache (file names only: nothing
    is imported; a kernel cached for other argument types counts as there)."""
    from ._kernels import cached_kernels

    root = pathlib.Path(__file__).parent
    listed, out = {}, []
    for entry in entries:
        path = root.joinpath(*entry[0].split(".")[1:])
        if path.parent not in listed:
            listed[path.parent] = cached_kernels(path.parent)
        if f"{path.name}.{entry[1]}" not in listed[path.parent]:
            out.append(entry)
    return out


def uncached(name: str) -> int:
    """How many of the manifest's kernels of ``name`` have no index in numba's cache."""
    return len(_missing(_entries(name)))


def _all_entries() -> list:
    """Every manifest entry once, each kernel at its first place: first the commands that do not
    answer as plain Python (``PLAIN_FAST``: their first use waits for the compile), then the
    others, each group in the manifest's order (MNIST ``epsilon`` first)."""
    try:
        manifest = json.loads(MANIFEST.read_text())
    except (OSError, ValueError):
        return []
    seen, out = set(), []
    for name in sorted(manifest, key=lambda n: n in PLAIN_FAST):  # (stable: the manifest's order within)
        entries = manifest[name]
        for entry in entries:
            if (k := json.dumps(entry)) not in seen:
                seen.add(k)
                out.append(entry)
    return out


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
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=compiling_env())


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


def _compile(entry) -> bool:
    """Compile one manifest entry (numba loads it instead when it is cached); False if stale."""
    import importlib

    from numba.core import types

    module, qualname, args = entry
    try:
        disp = find(importlib.import_module(module), qualname)
        disp.compile(tuple(eval(a, {"__builtins__": {}}, dict(vars(types))) for a in args))
        return True
    except Exception:  # a stale entry: the command compiles it itself
        return False


def compile_backwards(name: str) -> int:
    """Compile the manifest's kernels of ``name``, last first; the number compiled."""
    return sum(_compile(entry) for entry in reversed(_entries(name)))


def _lower_priority() -> None:
    """Run at the lowest CPU priority: the helper then takes only a core nothing else wants.  On
    a busy machine (other jobs on both cores) a helper at normal priority took its share of CPU
    from the command it was helping: the MNIST ``epsilon``'s first run took 34 s with it and 20 s
    without (bench/README, "First run")."""
    try:
        os.nice(19)
    except (AttributeError, OSError):  # (no ``os.nice`` on Windows)
        pass


def lock_path() -> pathlib.Path:
    """The lock file of the background compile of this package copy and cache (one at a time)."""
    tag = f"{pathlib.Path(__file__).resolve().parent}|{os.environ.get('NUMBA_CACHE_DIR', '')}"
    return pathlib.Path(tempfile.gettempdir()) / f"sgmfast-prewarm-{hashlib.sha1(tag.encode()).hexdigest()[:16]}.lock"


def _lock():
    """The lock, held (an open file: released when closed or when the process ends), or None when
    another process holds it.  (No ``fcntl`` on Windows: no lock there.)"""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return open(os.devnull, "w")
    try:
        f = open(lock_path(), "a")
    except OSError:
        return None
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        return None
    f.truncate(0)
    f.write(f"{os.getpid()}\n")  # (who holds it: bench/first_run.py ends it with its package copy)
    f.flush()
    return f


def start_rest():
    """After a first run or first use: a detached process compiling every manifest kernel not in
    the cache (``compile_rest``), or None (off, nothing left, or one is running already)."""
    if os.environ.get("SGMFAST_PREWARM", "1") == "0" or not _missing(_all_entries()):
        return None
    held = _lock()
    if held is None:
        return None
    held.close()  # (the child takes it; two starting at once: the second one's child stops at once)
    return subprocess.Popen([sys.executable, "-m", "sgmfast._prewarm", "--rest"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                            env=compiling_env())


def compiling_env() -> dict:
    """The environment of a compiling process (a helper, or ``cli.plain``'s compiled re-run): this
    one without ``SGMFAST_PURE_PYTHON``."""
    return {k: v for k, v in os.environ.items() if k != "SGMFAST_PURE_PYTHON"}


def compile_rest() -> int:
    """Compile every manifest kernel not in the cache, in ``_all_entries``' order, holding the
    lock; the number compiled (0 when another process holds the lock).  With two cores or more a
    second process (``--part``, same priority) takes every other entry: both cores are free once
    the first answer is out, and the rest is done about twice as soon (a kernel's callees may be
    compiled in both)."""
    held = _lock()
    if held is None:
        return 0
    with held:
        todo = _missing(_all_entries())
        other = None
        if _cores() >= 2 and len(todo) > 1:
            other = subprocess.Popen([sys.executable, "-m", "sgmfast._prewarm", "--part", json.dumps(todo[1::2])],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, env=compiling_env())
            todo = todo[0::2]
        done = sum(_compile(entry) for entry in todo)
        if other is not None:
            other.wait()  # (the lock held until both are done)
        return done


if __name__ == "__main__":
    _lower_priority()
    if sys.argv[1] == "--rest":
        compile_rest()
    elif sys.argv[1] == "--part":
        for part_entry in json.loads(sys.argv[2]):
            _compile(part_entry)
    else:
        compile_backwards(sys.argv[1])
