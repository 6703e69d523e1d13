"""Peak memory and time of accountant curves over many distinct noise levels (the lattice
mixtures, ``schedule_compose``), each in a fresh process: #31 item 3's 1 GiB.

    python bench/schedule_memory.py > bench/schedule_memory.out

Cases: the domain sweep's (seed 85, case 232) delta curve of 346 random noise levels at q
6.7e-4, which peaked at 1.5 GB; and random schedules of the same kind (noise levels log-uniform
in [lo, hi], one step each, one rate), seeded here.  Each child warms the JIT kernels on a small
schedule first; peak RSS (``resource.getrusage``) includes that (~200 MB).  ``width`` is the
relative width (upper - lower) / upper at the last step.
"""

from __future__ import annotations

import json
import os
import pathlib
import random
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]

CHILD = r"""
import json, random, resource, time
from sgmfast import pld
a2 = pld.PLDAccountant(); a2.step(0.8, 0.00067, 3); a2.delta_curve(0.05); a2.epsilon_curve(1e-5)  # (JIT warm-up)
lo, hi, q, n, seed, query, x = CASE
rr = random.Random(seed)
acc = pld.PLDAccountant()
for _ in range(n):
    acc.step(lo * (hi / lo) ** rr.random(), q, 1)
cpu, wall = time.process_time(), time.perf_counter()
b = acc.delta_curve(x) if query == "delta_curve" else acc.epsilon_curve(x)
cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
l, u = float(b.lower[-1]), float(b.upper[-1])
print(json.dumps(dict(cpu=cpu, wall=wall, rss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      last=[l, u], width=(u - l) / u if u > 0 else 0.0)))
"""


def cases():
    out = [(0.7144306727964689, 0.9920373550766659, 0.0006704766570525444, 346, 650885, "delta_curve",
            0.052922324062210396)]
    rng = random.Random(2026)
    for _ in range(9):
        lo = 10 ** rng.uniform(-0.3, 0.3)
        hi = lo * 10 ** rng.uniform(0.05, 0.4)
        q = 10 ** rng.uniform(-4, -1.5)
        n = rng.randint(100, 600)
        query = rng.choice(["delta_curve", "epsilon_curve"])
        x = 10 ** rng.uniform(-2, 0.3) if query == "delta_curve" else 10 ** rng.uniform(-10, -5)
        out.append((lo, hi, q, n, rng.randrange(10 ** 6), query, x))
    return out


def run(case) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    code = CHILD.replace("CASE", repr(case))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    print("# bench/schedule_memory.py: each row a fresh process (JIT warmed on a small schedule first)")
    print(f"# {'sigma range':>17} {'q':>9} {'steps':>5} {'query':>13} {'x':>9}  {'cpu s':>6} {'wall s':>6} "
          f"{'peak MB':>7}  {'last [lower, upper]':<30} width")
    for case in cases():
        lo, hi, q, n, _, query, x = case
        r = run(case)
        print(f"  [{lo:.3f}, {hi:.3f}] {q:9.2e} {n:5d} {query:>13} {x:9.2e}  {r['cpu']:6.2f} {r['wall']:6.2f} "
              f"{r['rss']:7.0f}  [{r['last'][0]:.6g}, {r['last'][1]:.6g}]".ljust(100) + f" {r['width']:.2e}", flush=True)


if __name__ == "__main__":
    main()
