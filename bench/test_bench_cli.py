"""Cold start of the command line (issue #16): a fresh process per round, numba's cache built.

Run with ``pytest bench/test_bench_cli.py --benchmark-only``. One group, side by side:

* the floor, ``python -c "import numba, scipy.special"`` (every sgmfast command pays it);
* ``sgmfast epsilon`` with the PLD accountant (the issue asks for <= 1 s above the floor);
* ``sgmfast curve`` over the 60 epochs of the MNIST example (60 certified checkpoints).

Each command runs once before timing, which builds numba's on-disk cache if needed. The
machine has 2 cores: run nothing else beside it, and compare medians (a process start varies
by a few hundred ms under load).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

ROUNDS = 9

MNIST = ["--sigma", "1.1", "--batch-size", "256", "--dataset-size", "60000", "--delta", "1e-5"]

COMMANDS = {
    "floor: import numba, scipy.special": ["-c", "import numba, scipy.special"],
    "sgmfast epsilon (pld)": ["-m", "sgmfast.cli", "epsilon", "--sigma", "1.1", "--q", "0.004267",
                              "--steps", "14062", "--delta", "1e-5"],
    "sgmfast curve (pld, 60 epochs)": ["-m", "sgmfast.cli", "curve", *MNIST, "--epochs", "60"],
}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_cli_cold_start_vs_floor(benchmark, name):
    cmd = [sys.executable, *COMMANDS[name]]
    subprocess.run(cmd, check=True, capture_output=True)  # builds numba's cache if needed

    def run():
        subprocess.run(cmd, check=True, capture_output=True)

    benchmark.group = "cli-cold-start|floor vs commands"
    benchmark.extra_info["command"] = " ".join(["python", *COMMANDS[name]])
    benchmark.pedantic(run, rounds=ROUNDS, iterations=1)
