"""Re-run the domain sweep's timeouts and out-of-memory cases (bench/domain_sweep_more_failures.jsonl)
on the current tree, each in a fresh process after a warm-up, and print its time and peak RSS.

    python bench/recheck_failures.py [SUBSTRING]     # only repros containing SUBSTRING

Times depend on the machine and its load (say what else ran); 120 s per case at most.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

FAILURES = Path(__file__).with_name("domain_sweep_more_failures.jsonl")
WARM = ("import warnings; warnings.simplefilter('ignore')\n"
        "from sgmfast import pld\n"
        "pld.epsilon(1.1, 0.01, 100, 1e-5, sampler='balls_in_bins'); pld.epsilon(1.1, 0.01, 100, 1e-5, sampler='fixed_size')\n"
        "import time, resource\nt0 = time.perf_counter()\n")
DONE = "\nprint('TIME', round(time.perf_counter() - t0, 2), 's', round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024), 'MB')"


def main(only: str = "") -> None:
    for i, line in enumerate(FAILURES.read_text().splitlines()):
        row = json.loads(line)
        if row["outcome"] not in ("timeout", "oom") and "over target" not in str(row["failures"]):
            continue
        if only and only not in row["repro"]:
            continue
        code = WARM + row["repro"].replace("; ", "\n") + DONE
        try:
            run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                                 env=dict(os.environ))
            got = [ln for ln in run.stdout.splitlines() if ln.startswith("TIME")]
            res = got[0][5:] if got else "error: " + (run.stderr.strip().splitlines() or ["?"])[-1][:120]
        except subprocess.TimeoutExpired:
            res = "over 120 s"
        print(f"{i} | {row['outcome']} | {row['spec'].get('entry')} | {res} | {row['repro'][:110]}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "")
