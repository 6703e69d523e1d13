"""The privacy curves of issue #31 item 3's hard corners, and MNIST: CPU time, wall time and peak
memory of each curve and of the single query at its last checkpoint, each in a fresh process.

    python bench/curve_corners.py [a b c mnist ...] > bench/curve_corners.out

The requirement: every curve within 10 s and 1 GiB on 2 cores, and no more than a few times
(~4x) a single ``pld.epsilon`` query at its last checkpoint.  Each child warms the JIT kernels on
a small curve first; its peak RSS (``resource.getrusage``) includes that warm-up (~200 MB of
numba, numpy and scipy).  The width columns are the curve's relative widths (upper - lower) /
upper over its checkpoints (quartiles and the widest); ``wide`` counts the checkpoints not
within the default accuracy 1e-3.  CPU time is the process's (both threads), so it can exceed the
wall time; on a loaded machine it is the steadier of the two.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]

CASES = {
    "a": "(0.015395817801565431, 2.6299085047269766e-07, np.unique(np.geomspace(1, 78070, 364).astype(int)), "
         "1.4768483261678107e-27)",
    "b": "(0.198, 4e-7, np.unique(np.geomspace(1, 2e5, 486).astype(int)), 3e-17)",
    "c": "(0.0173, 0.409, np.unique(np.geomspace(1, 5e4, 225).astype(int)), 1.9e-19)",
    "mnist": "(1.1, 256 / 60000, np.arange(234, 14063, 234), 1e-5)",
}

CHILD = r"""
import json, resource, sys, time
import numpy as np
from sgmfast import pld
sigma, q, steps, delta = CASE
pld.epsilon(1.1, 0.01, 10, 1e-5); pld.epsilon_curve(1.1, 0.01, [5, 10], 1e-5)  # (JIT warm-up)
cpu, wall = time.process_time(), time.perf_counter()
if MODE == "curve":
    b = pld.epsilon_curve(sigma, q, steps, delta)
    lo, up = np.asarray(b.lower), np.asarray(b.upper)
else:
    b = pld.epsilon(sigma, q, int(steps[-1]), delta)
    lo, up = np.array([b.lower]), np.array([b.upper])
cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
rel = np.where(up > 0, (up - lo) / np.where(up > 0, up, 1.0), 0.0)
ok = bool((lo <= up).all() and (np.diff(lo) >= 0).all() and (np.diff(up) >= 0).all())
print(json.dumps(dict(cpu=cpu, wall=wall, rss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      points=len(lo), last=[float(lo[-1]), float(up[-1])],
                      quart=np.quantile(rel, [0.25, 0.5, 0.75]).tolist(), widest=float(rel.max()),
                      wide=int((~(rel <= 1e-3)).sum()), monotone=ok)))
"""


def run(case: str, mode: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    code = CHILD.replace("CASE", CASES[case]).replace("MODE", repr(mode))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(names) -> None:
    print("# bench/curve_corners.py: each row a fresh process (JIT warmed on a small curve first)")
    print("# case  what    points    cpu s   wall s  peak MB   last [lower, upper]            "
          "rel width q1/median/q3  widest  wide  monotone")
    for name in names:
        for mode in ("curve", "single"):
            r = run(name, mode)
            last = f"[{r['last'][0]:.8g}, {r['last'][1]:.8g}]"
            quart = "/".join(f"{x:.3f}" for x in r["quart"])
            print(f"{name:6s} {mode:7s} {r['points']:6d} {r['cpu']:8.2f} {r['wall']:8.2f} {r['rss']:8.0f}   {last:30s} "
                  f"{quart:23s} {r['widest']:.3f} {r['wide']:5d}  {r['monotone']}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or list(CASES))
