"""A first run that answers at once (``sgmfast.cli.plain``): the kernels as plain Python give the
same answers bit for bit as the compiled ones, on every command that runs that way
(``_prewarm.PLAIN_FAST``); a kernel's exception or a long run hands the command to a compiled
run, with nothing printed twice; and a real first run on an empty cache says so and answers."""

from __future__ import annotations

import io
import os
import pathlib
import subprocess
import sys
import threading
from contextlib import redirect_stdout

import pytest

from sgmfast import _prewarm, cli
from sgmfast.cli import plain

ROOT = pathlib.Path(__file__).resolve().parents[1]

#: one command line for each command that answers with plain kernels on a first run
LINES = {
    "epsilon/pld/poisson": ["epsilon", "--sigma", "1.1", "--q", "0.00427", "--steps", "14062", "--delta", "1e-5"],
    "epsilon/rdp/poisson": ["epsilon", "--sigma", "0.9", "--q", "0.01", "--steps", "3000", "--delta", "1e-7",
                            "--accountant", "rdp"],
    "epsilon/pld/shuffle": ["epsilon", "--sigma", "1.1", "--batch-size", "256", "--dataset-size", "60000",
                            "--epochs", "60", "--delta", "1e-5", "--sampler", "shuffle"],
    "epsilon/pld/fixed_size": ["epsilon", "--sigma", "1.1", "--batch-size", "256", "--dataset-size", "60000",
                               "--epochs", "60", "--delta", "1e-5", "--sampler", "fixed-size"],
    "calibrate/pld/poisson": ["calibrate", "--epsilon", "3", "--delta", "1e-6", "--q", "0.02", "--steps", "2000"],
    "curve/pld/poisson": ["curve", "--sigma", "0.8", "--q", "0.01", "--steps", "2000", "--delta", "1e-5"],
    "tradeoff/pld/poisson": ["tradeoff", "--sigma", "1.5", "--q", "0.05", "--steps", "100"],
    "tune/pld/poisson": ["tune", "--sigma", "1.1", "--batch-size", "256", "--dataset-size", "60000", "--epochs",
                         "10", "--delta", "1e-5", "--runs", "poisson", "--mean", "8"],
}

#: the same API calls printed at full precision (repr), with the kernels as they are in the process
API = r"""
from sgmfast import pld, rdp, tuning, calibrate
print(repr(pld.epsilon(1.1, 0.00427, 14062, 1e-5)))
print(repr(pld.epsilon(0.7, 0.03, 500, 1e-9)))
print(repr(pld.epsilon(1.0, 0.01, 1000, 1e-6, relation="replace_one")))
print(repr(rdp.epsilon(0.9, 0.01, 3000, 1e-7, return_order=True)))
print(repr(calibrate.calibrate_sigma(2.0, 1e-5, 0.01, 1000)))
print(repr(tuning.epsilon(1.1, 0.00427, 2000, 1e-5, tuning.geometric(mean=8))))
"""


def _plain_env(**extra):
    env = dict(os.environ, SGMFAST_PURE_PYTHON="1", SGMFAST_PREWARM="0", PYTHONPATH=str(ROOT))
    env.pop("NUMBA_CACHE_DIR", None)
    env.update(extra)
    return env


def test_the_list_covers_every_plain_command():
    assert set(LINES) == set(_prewarm.PLAIN_FAST)


def _plain_stdout(script: str) -> str:
    run = subprocess.run([sys.executable, "-c", script], env=_plain_env(), capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout


def test_plain_kernels_answer_bit_for_bit_as_the_compiled_ones():
    # every kernel is a loop over float64 arithmetic and ``math`` functions: IEEE double and the
    # same C library either way (a kernel that raised would crash the plain process here)
    compiled = io.StringIO()
    with redirect_stdout(compiled):
        exec(compile(API, "<api>", "exec"), {})
    assert _plain_stdout(API).splitlines() == compiled.getvalue().splitlines()


@pytest.mark.parametrize("key", sorted(LINES))
def test_each_plain_command_prints_what_the_compiled_one_prints(key):
    compiled = io.StringIO()
    with redirect_stdout(compiled):
        assert cli.main(LINES[key]) == 0
    assert _plain_stdout(f"from sgmfast import cli\ncli.main({LINES[key]!r})\n") == compiled.getvalue()


class _Handed(Exception):
    """Stands for the compiled re-run (``os.execve`` never returns)."""


def test_a_kernels_exception_hands_the_command_to_a_compiled_run(monkeypatch, capsys):
    from sgmfast._kernels._jit import PlainDiverged

    why = []

    def handed(reason):
        why.append(reason)
        raise _Handed

    monkeypatch.setattr(plain, "_compiled_instead", handed)

    def command():
        print("a partial answer")
        raise PlainDiverged("math range error")

    with pytest.raises(_Handed):
        plain.run(command)
    assert why == ["a kernel stopped without compiling"]
    assert capsys.readouterr().out == ""  # (held, never printed)


def test_a_long_plain_run_hands_the_command_to_a_compiled_run(monkeypatch, capsys):
    fired = threading.Event()
    why = []

    def handed(reason):  # (the real one replaces the process; here the run goes on, unprinted)
        why.append(reason)
        fired.set()

    monkeypatch.setattr(plain, "_compiled_instead", handed)
    monkeypatch.setattr(plain, "PATIENCE", 0.0)

    def command():
        assert fired.wait(60.0)
        print("the answer")

    plain.run(command)
    assert why == ["slow without compiled kernels"] and capsys.readouterr().out == ""


def test_a_finished_plain_run_is_left_alone(monkeypatch, capsys):
    monkeypatch.setattr(plain, "_compiled_instead", lambda reason: pytest.fail(reason))
    plain.run(lambda: print("the answer"))
    assert capsys.readouterr().out == "the answer\n"


def test_plain_only_where_it_can_be(monkeypatch):
    # (this process has imported kernel modules: a plain kernel cannot be called from a compiled one)
    assert not plain.use_plain("epsilon/pld/poisson")
    assert not plain.use_plain("epsilon/pld/balls_in_bins")  # (a lattice: minutes as plain Python)
    monkeypatch.setattr(sys, "modules", {k: v for k, v in sys.modules.items() if not k.startswith("sgmfast._kernels.")})
    monkeypatch.setenv(plain.NO_PLAIN, "0")
    assert not plain.use_plain("epsilon/pld/poisson")  # (the compiled re-run)
    monkeypatch.delenv(plain.NO_PLAIN)
    monkeypatch.setenv("SGMFAST_PREWARM", "0")
    assert not plain.use_plain("epsilon/pld/poisson")  # (nothing would compile the kernels)


#: ends the background compile a first run started (detached: not this test's child) as soon as it
#: holds the lock file with its pid in it (it may still be starting; it runs for a minute)
STOP_REST = """
import fcntl, os, signal, time
from sgmfast import _prewarm
for _ in range(600):
    with open(_prewarm.lock_path(), "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.seek(0)
            pid = f.read().split()
            if pid:  # (its process group: the process holding the lock and the one it compiles beside)
                try:
                    os.killpg(int(pid[0]), signal.SIGTERM)
                except ProcessLookupError:  # (not a group's leader)
                    os.kill(int(pid[0]), signal.SIGTERM)
                break
    time.sleep(0.1)
"""


def test_a_real_first_run_answers_without_compiling(tmp_path):
    env = _plain_env(NUMBA_CACHE_DIR=str(tmp_path), SGMFAST_PREWARM="1")
    env.pop("SGMFAST_PURE_PYTHON")
    argv = LINES["epsilon/pld/poisson"]
    try:
        run = subprocess.run([sys.executable, "-m", "sgmfast", *argv], env=env, capture_output=True, text=True,
                             timeout=600)
    finally:  # the background compile it started: stopped once it holds its lock (the file has its pid), with
        # the second process it starts on two cores (``_prewarm.compile_rest``; left running, it compiled half of
        # the kernels into this test's cache at the lowest priority after the test had ended)
        subprocess.run([sys.executable, "-c", STOP_REST], env=env, timeout=120)
    assert run.returncode == 0 and run.stderr.strip() == cli.PLAIN_RUN
    compiled = io.StringIO()
    with redirect_stdout(compiled):
        assert cli.main(argv) == 0
    assert run.stdout == compiled.getvalue()
