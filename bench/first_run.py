"""Where a first run's time goes: one CLI command on an empty numba cache, with the compile time
of every kernel it compiles (numba's "numba:compile" events).

    python bench/first_run.py epsilon --sigma 1.1 --q 0.00427 --steps 14062 --delta 1e-5

runs the command in a fresh process whose package copy has no ``__pycache__`` (a ``git archive``
of HEAD in a temporary folder, so the checkout's cache stays as it is), prints the wall time and
the kernels by compile time.  Used for bench/README's "First run" section (issue #32 item 1).
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
class Listener(event.Listener):
    def on_start(self, ev):
        self.t0 = getattr(self, "t0", {}); self.t0[id(ev.data["dispatcher"])] = time.perf_counter()
    def on_end(self, ev):
        d = ev.data["dispatcher"]; spent[d.py_func.__module__ + "." + d.py_func.__name__] += time.perf_counter() - self.t0.pop(id(d), time.perf_counter())
event.register("numba:compile", Listener())
t0 = time.perf_counter()
from sgmfast.cli import _run
code = _run(sys.argv[1:])
wall = time.perf_counter() - t0
print(f"# wall {wall:.2f} s, {len(spent)} kernels compiled, {sum(spent.values()):.2f} s in (nested) compiles", file=sys.stderr)
for name, t in sorted(spent.items(), key=lambda x: -x[1])[:25]:
    print(f"#   {t:6.2f} s  {name}", file=sys.stderr)
"""


def main(argv):
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", "HEAD", "sgmfast"], capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        env = dict(os.environ, PYTHONPATH=tmp, NUMBA_CACHE_DIR=os.path.join(tmp, "numba-cache"))
        return subprocess.run([sys.executable, "-c", CHILD, *argv], env=env, cwd=tmp).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["epsilon", "--sigma", "1.1", "--q", "0.00427", "--steps", "14062",
                                   "--delta", "1e-5"]))
