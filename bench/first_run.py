"""Where a first run's time goes: one CLI command on an empty numba cache, with the compile time
of every kernel it compiles (numba's "numba:compile" events).

    python bench/first_run.py epsilon --sigma 1.1 --q 0.00427 --steps 14062 --delta 1e-5
    python bench/first_run.py --repeat 3 --after-epsilon calibrate --epsilon 2 --delta 1e-5 ...
    python bench/first_run.py --user --repeat 3 epsilon --sigma 1.1 --q 0.00427 --steps 14062 --delta 1e-5

runs the command in a fresh process whose package copy has no ``__pycache__`` (a ``git archive``
of HEAD in a temporary folder, so the checkout's cache stays as it is; numba caches in the
copy's ``__pycache__`` folders, as in a fresh venv), prints the wall time, the
kernels by compile time (nested compiles included) and any kernel compiled for more than one
signature; ``--repeat N`` runs it N times (each on a new empty cache) and
prints the process wall times (interpreter start included) and their median;
``--after-epsilon`` runs the MNIST ``epsilon`` command first on the same cache, so that the time
is a subcommand's first use right after the first ``sgmfast epsilon``; ``--after-rest`` also
waits until the background compile that first run started (``sgmfast._prewarm.start_rest``) has
finished, and prints how long that took.  Used for bench/README's "First
run" section (issue #32 item 1).

    python bench/first_run.py --manifest

runs each command of ``COMMANDS`` that way (with the two-process start turned off) and writes
``sgmfast/_kernels/first_run.json``: its top-level kernel compiles in order, with their argument
types, which ``sgmfast._prewarm`` compiles backwards in a second process on a first run.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]

CHILD = r"""
import sys, time, collections
from numba.core import event
spent = collections.defaultdict(float)
sigs = collections.defaultdict(set)
class Listener(event.Listener):
    def on_start(self, ev):
        self.t0 = getattr(self, "t0", {}); self.t0[id(ev.data["dispatcher"])] = time.perf_counter()
    def on_end(self, ev):
        d = ev.data["dispatcher"]; name = d.py_func.__module__ + "." + d.py_func.__name__
        spent[name] += time.perf_counter() - self.t0.pop(id(d), time.perf_counter())
        sigs[name].add(str(ev.data["args"]))
event.register("numba:compile", Listener())
t0 = time.perf_counter()
from sgmfast.cli import _run
code = _run(sys.argv[1:])
wall = time.perf_counter() - t0
print(f"# wall {wall:.2f} s, {len(spent)} kernels compiled, {sum(spent.values()):.2f} s in (nested) compiles", file=sys.stderr)
for name, t in sorted(spent.items(), key=lambda x: -x[1])[:25]:
    print(f"#   {t:6.2f} s  {name}", file=sys.stderr)
for name in sorted(n for n in sigs if len(sigs[n]) > 1 and n.startswith("sgmfast")):
    print(f"# compiled {len(sigs[name])} times: {name} {sorted(sigs[name])}", file=sys.stderr)
from sgmfast.cli import _exit_now
_exit_now(code)  # as the console script ends (no interpreter teardown)
"""


RECORD = r"""
import json, sys
from numba.core import event
out, depth = [], [0]
class Listener(event.Listener):
    def on_start(self, ev):
        if depth[0] == 0:
            f = ev.data["dispatcher"].py_func
            out.append([f.__module__, f.__qualname__, [repr(a) for a in ev.data["args"]]])
        depth[0] += 1
    def on_end(self, ev):
        depth[0] -= 1
event.register("numba:compile", Listener())
from sgmfast.cli import _run
_run(sys.argv[1:])
print(json.dumps(out))
"""

#: (command line, its manifest key): what a first run most often is; the README's commands after
#: the first six.  The background compile after a first run (``_prewarm.start_rest``) compiles
#: them in this order, those without a plain first run (``_prewarm.PLAIN_FAST``) first
COMMANDS = [
    (["epsilon", "--sigma", "1.1", "--q", "0.00427", "--steps", "14062", "--delta", "1e-5"], "epsilon/pld/poisson"),
    (["calibrate", "--epsilon", "2", "--delta", "1e-5", "--q", "0.00427", "--steps", "14062"], "calibrate/pld/poisson"),
    (["curve", "--sigma", "1.1", "--q", "0.00427", "--steps", "14062", "--delta", "1e-5"], "curve/pld/poisson"),
    (["tradeoff", "--sigma", "1.1", "--q", "0.00427", "--steps", "14062"], "tradeoff/pld/poisson"),
    (["epsilon", "--sigma", "1.1", "--q", repr(1 / 234), "--steps", "14040", "--delta", "1e-5",
      "--sampler", "balls-in-bins"], "epsilon/pld/balls_in_bins"),
    (["tune", "--sigma", "1.1", "--batch-size", "256", "--dataset-size", "60000", "--epochs", "60",
      "--delta", "1e-5", "--runs", "geometric", "--mean", "10"], "tune/pld/poisson"),
    (["epsilon", "--sigma", "1.1", "--q", "0.00427", "--steps", "14062", "--delta", "1e-5", "--accountant", "rdp"],
     "epsilon/rdp/poisson"),
    (["calibrate-risk", "--max-tpr", "0.05", "--fpr", "0.01", "--batch-size", "256", "--dataset-size", "60000",
      "--epochs", "60"], "calibrate-risk/pld/poisson"),
    (["batch-size", "--dataset-size", "60000", "--epsilon", "2", "--delta", "1e-5", "--epochs", "10",
      "--grad-norm", "1", "--dim", "1000"], "batch-size/pld/poisson"),
    (["epsilon", "--sigma", "1.1", "--batch-size", "256", "--dataset-size", "60000", "--epochs", "60",
      "--delta", "1e-5", "--sampler", "shuffle"], "epsilon/pld/shuffle"),
    (["epsilon", "--sigma", "1.1", "--batch-size", "256", "--dataset-size", "60000", "--epochs", "60",
      "--delta", "1e-5", "--sampler", "fixed-size"], "epsilon/pld/fixed_size"),
]


#: the commit whose package is measured (``--rev``, to compare with an earlier one)
REV = ["HEAD"]


def _cold_copy(tmp):
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", REV[0], "sgmfast"], capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
    # as in a fresh venv: numba caches beside the copy's sources (its __pycache__ folders)
    env = dict(os.environ, PYTHONPATH=tmp)
    env.pop("NUMBA_CACHE_DIR", None)
    return env


def manifest():
    import json

    out = {}
    for argv, key in COMMANDS:
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(_cold_copy(tmp), SGMFAST_PREWARM="0")
            run = subprocess.run([sys.executable, "-c", RECORD, *argv], env=env, cwd=tmp, capture_output=True,
                                 text=True, check=True)
            out[key] = json.loads(run.stdout.strip().splitlines()[-1])
            print(f"{key}: {len(out[key])} kernels", file=sys.stderr)
    path = ROOT / "sgmfast" / "_kernels" / "first_run.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    return 0


#: waits for the background compile the first run started (``_prewarm.start_rest``): it takes its
#: lock file within a second of starting; a blocking lock returns once it has finished
WAIT_REST = """
import fcntl, time
from sgmfast import _prewarm
time.sleep(3.0)
with open(_prewarm.lock_path(), "a") as f:
    fcntl.flock(f, fcntl.LOCK_EX)
"""


#: ends the background compile of a package copy about to be deleted (the pid its lock file holds)
STOP_REST = """
import fcntl, os, signal
from sgmfast import _prewarm
with open(_prewarm.lock_path(), "a+") as f:
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.seek(0)
        os.kill(int(f.read().split()[0]), signal.SIGTERM)
"""


#: run each command as the user does (``python -m sgmfast ...``: a first run answers with plain-Python
#: kernels, ``sgmfast.cli.plain``) instead of timing numba's compiles (``--user``)
AS_USER = [False]


def _first(commands, after=None, rest=False):
    """Cold runs of each command line in ``commands``, one after the other on one empty cache
    (after ``after`` filled it, if given; with ``rest``, after the background compile that run
    started has finished): each process's wall time in seconds, measured from here (interpreter
    start and imports included)."""
    import time

    with tempfile.TemporaryDirectory() as tmp:
        env = _cold_copy(tmp)
        if after:
            subprocess.run([sys.executable, "-m", "sgmfast", *after], env=env, cwd=tmp, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if rest:
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", WAIT_REST], env=env, cwd=tmp, check=True)
            print(f"# the background compile ended {time.perf_counter() - t0:.1f} s after the first run",
                  file=sys.stderr)
        walls = []
        try:
            for argv in commands:
                print(f"# load {os.getloadavg()[0]:.1f}: {' '.join(argv)}", file=sys.stderr)
                t0 = time.perf_counter()
                if AS_USER[0]:
                    subprocess.run([sys.executable, "-m", "sgmfast", *argv], env=env, cwd=tmp, check=True,
                                   stdout=subprocess.DEVNULL)
                else:
                    subprocess.run([sys.executable, "-c", CHILD, *argv], env=env, cwd=tmp, check=True)
                walls.append(time.perf_counter() - t0)
            return walls
        finally:
            subprocess.run([sys.executable, "-c", STOP_REST], env=env, cwd=tmp, check=False)


def main(argv):
    """``[--rev COMMIT] [--user] [--repeat N] [--after-epsilon | --after-rest] command... [-- command...]``:
    N cold first runs (default 1), each in a new copy of the package at COMMIT (default HEAD);
    ``--after-epsilon``: each on a cache that the MNIST epsilon command filled first (a
    subcommand's first use after ``sgmfast epsilon``); ``--after-rest``: also after the
    background compile it started; commands separated by ``--`` run in turn on the same cache;
    ``--user``: each as ``python -m sgmfast ...`` (its stderr shown), not timing numba's compiles."""
    if argv == ["--manifest"]:
        return manifest()
    import statistics

    repeat, after, rest = 1, None, False
    while argv and argv[0] in ("--repeat", "--after-epsilon", "--after-rest", "--rev", "--user"):
        if argv[0] == "--user":
            AS_USER[0], argv = True, argv[1:]
        elif argv[0] == "--rev":
            REV[0], argv = argv[1], argv[2:]
        elif argv[0] == "--repeat":
            repeat, argv = int(argv[1]), argv[2:]
        else:
            after, rest, argv = COMMANDS[0][0], rest or argv[0] == "--after-rest", argv[1:]
    commands = [[]]
    for a in argv:
        if a == "--":
            commands.append([])
        else:
            commands[-1].append(a)
    commands = [c for c in commands if c] or [COMMANDS[0][0]]
    walls, loads = [], []
    for _ in range(repeat):
        loads.append(os.getloadavg()[0])
        walls.append(_first(commands, after, rest))
    for k, argv in enumerate(commands):
        w = [run[k] for run in walls]
        print(f"# {argv[0]}: process wall {', '.join(f'{x:.2f}' for x in w)} s; median {statistics.median(w):.2f} s "
              f"(1-min load average before each repeat: {', '.join(f'{x:.1f}' for x in loads)})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
