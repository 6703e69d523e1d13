"""Fixed-size calibrations at the corners where they were slow: each ``sgmfast calibrate ...
--sampler fixed-size`` in a fresh process (compiled kernels cached), on the cores ``taskset``
gives it.  Prints the answer's sigma, the certified upper eps at that sigma, and the wall time.

    python bench/fixed_size_calibrate.py [NAME ...]

bench/README, "Stop 59".
"""
import subprocess
import sys
import time

CASES = {
    # name: (eps, q, steps, delta)
    "q1e-4_T6503": (1.0, 1e-4, 6503, 1e-12),
    "q1e-4_T80800": (5.24, 1e-4, 80800, 4e-24),
    "q1.3e-5_T10328": (1.2565719918271565, 1.288951134113177e-05, 10328, 6.97091551016405e-08),
    "delta0.999": (0.0392, 0.275, 159874, 0.999),
    "mnist": (2.0, 256 / 60000, 14063, 1e-5),
}


def run(name):
    eps, q, steps, delta = CASES[name]
    cmd = [sys.executable, "-m", "sgmfast", "calibrate", "--epsilon", repr(eps), "--q", repr(q), "--steps",
           str(steps), "--delta", repr(delta), "--sampler", "fixed-size"]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    wall = time.perf_counter() - t0
    got = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
    print(f"{name:16s} sigma {got['sigma']:>9s}  eps {got['epsilon']:>9s}  {wall:5.1f} s", flush=True)


if __name__ == "__main__":
    for name in sys.argv[1:] or CASES:
        run(name)
