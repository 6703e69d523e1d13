"""A warm CLI start against ``python -c "import numba, scipy.special"`` (issue #32 item 1's target:
at most 0.5 s above it), and where the rest goes.

    python bench/warm_start.py [--repeat N] [PACKAGE_DIR ...]

runs, alternating and N times each (default 9): the base imports, the same plus one call of a
cached one-line ``@njit(cache=True)`` kernel (numba's own floor: its first cached-kernel load
refreshes numba's target context), and the MNIST ``sgmfast epsilon`` with each PACKAGE_DIR on
PYTHONPATH (default: this checkout; a ``git archive`` of an older commit to compare), each from
a temporary folder (a ``python -c`` or ``-m`` puts the current folder first on ``sys.path``) with
``.pyc`` files written (as in an installed venv); prints the median wall and CPU (user + sys)
times and each above the base.  Run the command once per package first, so that its kernels are
cached.

    python bench/warm_start.py --phases

prints, in one process, the base imports, sgmfast's imports, numba's target refresh (forced
alone) and the command, with the time of its kernel loads (``Cache.load_overload``).
"""

from __future__ import annotations

import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
ARGV = ["epsilon", "--sigma", "1.1", "--q", "0.00427", "--steps", "14062", "--delta", "1e-5"]
BASE = "import numba, scipy.special"
TRIVIAL = "from numba import njit\n\n\n@njit(cache=True)\ndef f(x):\n    return x + 1.0\n"

PHASES = r"""
import io, contextlib, sys, time
t0 = time.perf_counter()
import numba, scipy.special
t1 = time.perf_counter()
from sgmfast.cli import _run
import sgmfast.pld.api, sgmfast.cli.queries
t2 = time.perf_counter()
from numba.core.registry import cpu_target
cpu_target.target_context.refresh()
t3 = time.perf_counter()
from numba.core import caching
spent = [0.0]
load = caching.Cache.load_overload
def timed(self, sig, ctx):
    t = time.perf_counter(); r = load(self, sig, ctx); spent[0] += time.perf_counter() - t; return r
caching.Cache.load_overload = timed
with contextlib.redirect_stdout(io.StringIO()):
    _run(sys.argv[1:])
t4 = time.perf_counter()
print(f"base imports {t1 - t0:.3f} s, sgmfast imports {t2 - t1:.3f} s, numba refresh {t3 - t2:.3f} s, "
      f"command {t4 - t3:.3f} s (kernel loads {spent[0]:.3f} s)")
"""


def _timed(cmd, env, cwd):
    """(wall, user + sys) seconds of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv):
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if argv == ["--phases"]:
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([sys.executable, "-c", PHASES, *ARGV], env=dict(env, PYTHONPATH=str(ROOT)), cwd=tmp,
                           check=True)
        return 0
    repeat = 9
    if argv[:1] == ["--repeat"]:
        repeat, argv = int(argv[1]), argv[2:]
    packages = argv or [str(ROOT)]
    with tempfile.TemporaryDirectory() as tmp:
        pathlib.Path(tmp, "trivial_kernel.py").write_text(TRIVIAL)
        runs = {"base": ([sys.executable, "-c", BASE], env),
                "one kernel": ([sys.executable, "-c", BASE + "; import trivial_kernel; trivial_kernel.f(1.0)"],
                               dict(env, PYTHONPATH=tmp))}
        for p in packages:
            runs[f"sgmfast {p}"] = ([sys.executable, "-m", "sgmfast", *ARGV], dict(env, PYTHONPATH=p))
        for cmd, e in runs.values():  # (a first run writes the .pyc files and the kernel cache)
            subprocess.run(cmd, env=e, cwd=tmp, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        got = {name: [] for name in runs}
        load0 = os.getloadavg()[0]
        for _ in range(repeat):
            for name, (cmd, e) in runs.items():
                got[name].append(_timed(cmd, e, tmp))
    wall0 = statistics.median(w for w, _ in got["base"])
    cpu0 = statistics.median(c for _, c in got["base"])
    print(f"# {repeat} runs each, alternating; 1-min load average {load0:.1f} before, {os.getloadavg()[0]:.1f} after")
    for name, xs in got.items():
        wall, cpu = statistics.median(w for w, _ in xs), statistics.median(c for _, c in xs)
        print(f"{name}: wall {wall:.2f} s ({wall - wall0:+.2f}), CPU {cpu:.2f} s ({cpu - cpu0:+.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
