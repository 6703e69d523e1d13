"""The command line: numbers on stdout, one-line errors on stderr with exit code 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sgmfast import __version__, rdp
from sgmfast.cli import main


@pytest.fixture(autouse=True)
def _no_compile_notice(monkeypatch):
    """The compile notices are tested in test_cli_first_run.py; here a command whose kernels are
    not cached yet (the suite on a fresh clone) must not change the stderr these tests read."""
    import sgmfast._kernels as kernels
    from sgmfast import _prewarm

    monkeypatch.setattr(kernels, "cache_is_cold", lambda: False)
    monkeypatch.setattr(_prewarm, "uncached", lambda key: 0)


def _run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _field(out, name):
    for line in out.splitlines():
        if line.startswith(name + ":"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"{name!r} not in output:\n{out}")


def test_epsilon_rdp(capsys):
    code, out, err = _run(["epsilon", "--sigma", "1.0", "--q", "0.01", "--steps", "1000", "--delta", "1e-5",
                           "--accountant", "rdp"], capsys)
    assert code == 0 and err == ""
    eps, order = rdp.epsilon(1.0, 0.01, 1000, 1e-5, return_order=True)
    assert float(_field(out, "epsilon")) == pytest.approx(eps, rel=1e-5)
    assert float(_field(out, "optimal order")) == pytest.approx(order, rel=1e-5)


def test_epsilon_pld_replace_one(capsys):
    from sgmfast import pld

    code, out, err = _run(["epsilon", "--sigma", "1.0", "--q", "0.01", "--steps", "1000", "--delta", "1e-5",
                           "--relation", "replace-one"], capsys)
    assert code == 0 and err == ""
    b = pld.epsilon(1.0, 0.01, 1000, 1e-5, relation="replace_one")
    assert float(_field(out, "epsilon")) == pytest.approx(b.upper, rel=1e-5)
    assert _field(out, "relation") == "replace-one"
    code, out, err = _run(["epsilon", "--sigma", "1.0", "--q", "0.01", "--steps", "1000", "--delta", "1e-5",
                           "--relation", "replace-one", "--accountant", "rdp"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--accountant pld" in err


def test_batch_size_and_epochs(capsys):
    code, out, _ = _run(["epsilon", "--sigma", "1.1", "--batch-size", "256", "--dataset-size", "60000",
                         "--epochs", "60", "--delta", "1e-5", "--accountant", "rdp"], capsys)
    assert code == 0
    assert int(_field(out, "steps")) == 14063  # ceil(60 * 60000 / 256): rounding up is pessimistic
    assert float(_field(out, "q")) == pytest.approx(256 / 60000, rel=1e-5)


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["epsilon", "--sigma", "1", "--q", "1.5", "--steps", "10", "--delta", "1e-5"], "q (sampling rate)"),
        (["epsilon", "--sigma", "-1", "--q", "0.1", "--steps", "10", "--delta", "1e-5"], "sigma"),
        (["epsilon", "--sigma", "1", "--q", "0.1", "--steps", "10", "--delta", "2"], "delta"),
        (["epsilon", "--sigma", "1", "--q", "0.1", "--steps", "1.5", "--delta", "1e-5"], "steps"),
        (["epsilon", "--sigma", "nan", "--q", "0.1", "--steps", "10", "--delta", "1e-5"], "sigma"),
        (["epsilon", "--sigma", "x", "--q", "0.1", "--steps", "10", "--delta", "1e-5"], "--sigma"),
        (["epsilon", "--q", "0.1", "--steps", "10", "--delta", "1e-5"], "--sigma"),
        (["epsilon", "--sigma", "1", "--batch-size", "10", "--steps", "10", "--delta", "1e-5"], "--dataset-size"),
        (["epsilon", "--sigma", "1", "--batch-size", "100", "--dataset-size", "10", "--steps", "10",
          "--delta", "1e-5"], "--batch-size"),
        (["nonsense"], "invalid choice"),
    ],
)
def test_bad_input_one_line_exit_2(argv, needle, capsys):
    code, out, err = _run(argv + (["--accountant", "rdp"] if argv[0] == "epsilon" else []), capsys)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("sgmfast: error:")
    assert needle in err


def test_console_script_version():
    res = subprocess.run([sys.executable, "-m", "sgmfast.cli", "--version"], capture_output=True, text=True)
    assert res.returncode == 0
    assert res.stdout.strip() == f"sgmfast {__version__}"


def test_calibrate_sigma_rdp(capsys):
    from sgmfast import calibrate as cal

    code, out, err = _run(["calibrate", "--epsilon", "8", "--delta", "1e-5", "--batch-size", "256",
                           "--dataset-size", "60000", "--epochs", "60", "--accountant", "rdp"], capsys)
    assert code == 0 and err == ""
    sigma = float(_field(out, "sigma"))
    assert sigma >= cal.calibrate_sigma(8.0, 1e-5, 256 / 60000, 14063, accountant="rdp")  # printed rounded up
    assert rdp.epsilon(sigma, 256 / 60000, 14063, 1e-5) <= 8.0
    assert float(_field(out, "epsilon")) >= rdp.epsilon(sigma, 256 / 60000, 14063, 1e-5)


def test_calibrate_solve_for_batch_size_and_epochs(capsys):
    code, out, _ = _run(["calibrate", "--epsilon", "8", "--delta", "1e-5", "--sigma", "0.7", "--dataset-size",
                         "60000", "--epochs", "60", "--solve-for", "batch-size", "--accountant", "rdp"], capsys)
    assert code == 0
    b = int(_field(out, "batch size"))
    steps = int(_field(out, "steps"))
    assert rdp.epsilon(0.7, b / 60000, steps, 1e-5) <= 8.0
    code, out, _ = _run(["calibrate", "--epsilon", "8", "--delta", "1e-5", "--sigma", "0.7", "--batch-size", "256",
                         "--dataset-size", "60000", "--solve-for", "epochs", "--accountant", "rdp"], capsys)
    assert code == 0
    steps = int(_field(out, "steps"))
    assert rdp.epsilon(0.7, 256 / 60000, steps, 1e-5) <= 8.0 < rdp.epsilon(0.7, 256 / 60000, steps + 1, 1e-5)


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["calibrate", "--epsilon", "-1", "--delta", "1e-5", "--q", "1", "--steps", "1000000"], "epsilon"),
        (["calibrate", "--epsilon", "1", "--delta", "1e-5", "--sigma", "1", "--solve-for", "batch-size",
          "--steps", "10"], "--dataset-size"),
        (["calibrate", "--epsilon", "1", "--delta", "1", "--q", "0.1", "--steps", "10"], "delta"),
    ],
)
def test_calibrate_bad_requests(argv, needle, capsys):
    code, out, err = _run(argv + ["--accountant", "rdp"], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and needle in err


def test_printed_bounds_round_outward():
    from sgmfast.cli import _fmt

    assert _fmt(7.9999994, "up") == "8" and _fmt(7.9999994, "down") == "7.99999"
    assert float(_fmt(2.101322131, "up")) >= 2.101322131 >= float(_fmt(2.101322131, "down"))


def test_batch_size_planner(capsys):
    code, out, err = _run(["batch-size", "--dataset-size", "60000", "--epsilon", "2", "--delta", "1e-5",
                           "--epochs", "10", "--grad-norm", "1", "--dim", "1000", "--candidates", "64", "1024",
                           "16384", "--accountant", "rdp"], capsys)
    assert code == 0 and err == ""
    assert _field(out, "best batch size") == "16384"
    code, out, err = _run(["batch-size", "--dataset-size", "100", "--epsilon", "2", "--delta", "1e-5",
                           "--epochs", "10", "--grad-norm", "1", "--candidates", "1000", "--accountant", "rdp"], capsys)
    assert code == 2 and err.count("\n") == 1 and "candidates" in err


def test_figures_writes_csv_and_png(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    code = main(["figures", "--out", str(tmp_path), "--epsilons", "1", "--steps", "1", "10",
                 "--n-q", "5", "--n-eps", "20"])
    assert code == 0
    for name in ("figure1.csv", "figure2.csv", "figure1.png", "figure2.png"):
        assert (tmp_path / name).stat().st_size > 0
    assert (tmp_path / "figure1.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "figure 1:" in capsys.readouterr().out


def test_figures_bad_grid_is_a_usage_error(tmp_path, capsys):
    code = main(["figures", "--out", str(tmp_path), "--csv-only", "--n-q", "0"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("sgmfast: error:") and "n_q" in err and err.count("\n") == 1


def test_calibrate_defaults_to_the_tight_accountant(capsys):
    code, out, err = _run(["calibrate", "--epsilon", "2", "--delta", "1e-5", "--q", "0.01", "--steps", "1000"], capsys)
    assert code == 0 and _field(out, "accountant") == "pld"
    sigma = float(_field(out, "sigma"))
    from sgmfast import pld

    assert pld.epsilon(sigma, 0.01, 1000, 1e-5).upper <= 2.0  # what the CLI calibrated, the API confirms


def test_batch_size_defaults_to_the_tight_accountant(capsys):
    code, out, err = _run(["batch-size", "--dataset-size", "60000", "--epsilon", "2", "--delta", "1e-5",
                           "--epochs", "10", "--grad-norm", "1", "--candidates", "4096"], capsys)
    assert code == 0 and err == "" and "accountant=pld" in out


def test_no_noise_through_the_cli(capsys):
    code, out, err = _run(["epsilon", "--sigma", "0", "--q", "0.01", "--steps", "100", "--delta", "1e-5"], capsys)
    assert code == 0 and _field(out, "epsilon") == "inf"


def test_no_batch_meets_the_target_with_epochs(capsys):
    # sigma = 0 and a delta below what one sampled example costs: no batch size > 0 is private,
    # so the planner answers 0 (no steps) -- was a ZeroDivisionError turning epochs into steps
    code, out, err = _run(["calibrate", "--epsilon", "0.0017", "--delta", "1.7e-17", "--solve-for", "batch-size",
                           "--sigma", "0", "--dataset-size", "33", "--epochs", "4.57"], capsys)
    assert code == 0 and err == ""
    assert _field(out, "batch size") == "0" and _field(out, "steps") == "0"


# ---------------------------------------------------------------- sgmfast curve


def _csv(out):
    lines = out.strip().splitlines()
    assert lines[0] == "step,epoch,epsilon_lower,epsilon_upper"
    return [line.split(",") for line in lines[1:]]


def test_curve_prints_what_the_api_computes_rounded_outward(capsys):
    from sgmfast import pld
    from sgmfast.cli import _fmt

    # q = 0.01, 3 epochs: one checkpoint per epoch, ceil(e / q) steps
    code, out, err = _run(["curve", "--sigma", "1.0", "--q", "0.01", "--epochs", "3", "--delta", "1e-5"], capsys)
    assert code == 0 and err == ""
    rows = _csv(out)
    b = pld.epsilon_curve(1.0, 0.01, [100, 200, 300], 1e-5)
    assert [r[0] for r in rows] == ["100", "200", "300"]
    assert [r[1] for r in rows] == ["1", "2", "3"]
    assert [r[2] for r in rows] == [_fmt(float(x), "down") for x in b.lower]
    assert [r[3] for r in rows] == [_fmt(float(x), "up") for x in b.upper]


def test_curve_default_checkpoints_over_steps_and_rdp_has_no_lower_column(capsys):
    from sgmfast.cli import CURVE_POINTS, _fmt

    code, out, err = _run(["curve", "--sigma", "1.0", "--batch-size", "100", "--dataset-size", "10000",
                           "--steps", "1000", "--delta", "1e-5", "--accountant", "rdp"], capsys)
    assert code == 0 and err == ""
    rows = _csv(out)
    steps = [int(r[0]) for r in rows]
    assert len(steps) == CURVE_POINTS and steps[-1] == 1000 and steps == sorted(set(steps))
    assert all(r[2] == "" for r in rows)
    up = rdp.epsilon_curve(1.0, 0.01, steps, 1e-5)
    assert [r[3] for r in rows] == [_fmt(float(x), "up") for x in up]
    assert float(rows[-1][1]) == pytest.approx(10.0)  # epoch = step * q


def test_curve_every_and_points(capsys):
    argv = ["curve", "--sigma", "1.0", "--q", "0.01", "--steps", "1000", "--delta", "1e-5", "--accountant", "rdp"]
    _, out, _ = _run(argv + ["--every", "300"], capsys)
    assert [int(r[0]) for r in _csv(out)] == [300, 600, 900, 1000]  # and the last step
    _, out, _ = _run(argv + ["--points", "4"], capsys)
    assert [int(r[0]) for r in _csv(out)] == [250, 500, 750, 1000]
    _, out, _ = _run(argv[:6] + ["10"] + argv[7:] + ["--points", "100"], capsys)
    assert [int(r[0]) for r in _csv(out)] == list(range(1, 11))  # no more checkpoints than steps
    _, out, _ = _run(argv[:5] + ["--checkpoints", "7", "70", "700"] + argv[7:], capsys)
    assert [int(r[0]) for r in _csv(out)] == [7, 70, 700]


def test_curve_in_chunks_stays_certified_and_monotone(capsys, monkeypatch):
    # past CURVE_CHUNK checkpoints the CLI calls the API chunk by chunk (to show progress): each
    # chunk is certified, so the merged curve must overlap the one-call curve at every checkpoint
    from sgmfast import pld
    from sgmfast.cli import curves

    monkeypatch.setattr(curves, "CURVE_CHUNK", 2)
    code, out, err = _run(["curve", "--sigma", "1.0", "--q", "0.01", "--steps", "500", "--points", "5",
                           "--delta", "1e-5"], capsys)
    assert code == 0 and err == ""
    rows = _csv(out)
    lo, up = [float(r[2]) for r in rows], [float(r[3]) for r in rows]
    b = pld.epsilon_curve(1.0, 0.01, [100, 200, 300, 400, 500], 1e-5)
    assert all(l <= bu and bl <= u for l, u, bl, bu in zip(lo, up, b.lower, b.upper))
    assert lo == sorted(lo) and up == sorted(up) and all(l <= u for l, u in zip(lo, up))


def test_sampler_curve_is_one_api_call(capsys, monkeypatch):
    """A sampler's curve costs a few times its last point per call, so the CLI makes one call
    whatever CURVE_CHUNK (chunks multiplied that: a fixed-size curve of 3591 epochs took 18
    calls), and prints the API's curve itself."""
    from sgmfast import pld
    from sgmfast.cli import curves

    monkeypatch.setattr(curves, "CURVE_CHUNK", 2)
    calls = []
    real = pld.epsilon_curve
    monkeypatch.setattr(pld, "epsilon_curve", lambda *a, **k: calls.append(a[2]) or real(*a, **k))
    code, out, err = _run(["curve", "--sigma", "1.0", "--q", "0.05", "--steps", "100", "--points", "5",
                           "--delta", "1e-5", "--sampler", "fixed-size"], capsys)
    assert code == 0 and len(calls) == 1
    b = real(1.0, 0.05, [20, 40, 60, 80, 100], 1e-5, sampler="fixed_size")
    rows = _csv(out)
    assert [float(r[3]) for r in rows] == pytest.approx(list(b.upper), rel=1e-5)


def test_curve_without_noise_is_inf(capsys):
    code, out, err = _run(["curve", "--sigma", "0", "--q", "0.01", "--steps", "100", "--points", "2",
                           "--delta", "1e-5"], capsys)
    assert code == 0 and err == ""
    assert _csv(out) == [["50", "0.5", "inf", "inf"], ["100", "1", "inf", "inf"]]


_CURVE = ["curve", "--sigma", "1", "--q", "0.01", "--delta", "1e-5"]


@pytest.mark.parametrize(
    "argv, needle",
    [
        (_CURVE + ["--checkpoints", "10", "5"], "strictly increasing"),
        (_CURVE + ["--checkpoints", "10", "10"], "strictly increasing"),
        (_CURVE + ["--checkpoints", "-10"], "--checkpoints"),
        (_CURVE + ["--steps", "100", "--points", "0"], "--points"),
        (_CURVE + ["--steps", "100", "--every", "0"], "--every"),
        (_CURVE + ["--steps", "0"], "at least one step"),
        (_CURVE + ["--epochs", "0"], "--epochs"),
        (_CURVE + ["--steps", "10", "--every", "2", "--points", "3"], "--points"),
        (_CURVE + ["--checkpoints", "10", "--every", "2"], "--checkpoints"),
        (_CURVE + ["--steps", "1e12", "--every", "1"], "checkpoints"),
        (["curve", "--sigma", "1", "--q", "0.01", "--steps", "100"], "--delta"),
        (["curve", "--sigma", "-1", "--q", "0.01", "--steps", "100", "--delta", "1e-5"], "sigma"),
        (["curve", "--sigma", "1", "--q", "0", "--epochs", "3", "--delta", "1e-5"], "q > 0"),
        (_CURVE + ["--steps", "10", "--relation", "replace-one", "--accountant", "rdp"], "--accountant pld"),
    ],
)
def test_curve_bad_input_one_line_exit_2(argv, needle, capsys):
    code, out, err = _run(argv, capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("sgmfast: error:")
    assert needle in err


def test_curve_out_writes_a_png(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    path = tmp_path / "curve.png"
    code, out, err = _run(["curve", "--sigma", "1.0", "--q", "0.01", "--epochs", "3", "--delta", "1e-5",
                           "--out", str(path)], capsys)
    assert code == 0 and err == ""
    assert len(_csv(out)) == 3  # the CSV still goes to stdout
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_curve_out_checked_before_the_work(tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    argv = _CURVE + ["--steps", "100", "--out"]
    for bad, needle in ((str(tmp_path / "curve.xyz"), ".png"), (str(tmp_path / "no" / "curve.png"), "no folder")):
        code, out, err = _run(argv + [bad], capsys)
        assert code == 2 and out == "" and err.count("\n") == 1 and needle in err
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed
    code, out, err = _run(argv + [str(tmp_path / "curve.png")], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and "matplotlib" in err


def test_console_run_flushes_before_its_fast_exit(tmp_path):
    # run as a command, main() ends the process itself (no interpreter teardown): the output must
    # be complete and the exit code kept, on success and on error
    cmd = [sys.executable, "-m", "sgmfast.cli", "curve", "--sigma", "1", "--q", "0.01", "--steps", "1000",
           "--every", "1", "--delta", "1e-5", "--accountant", "rdp"]
    from sgmfast.cli import FIRST_RUN

    def stderr(res):  # on an empty kernel cache (this test alone on a fresh clone) the notice comes first
        return res.stderr.replace(FIRST_RUN + "\n", "", 1)

    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0 and stderr(res) == ""
    assert len(_csv(res.stdout)) == 1000
    res = subprocess.run(cmd[:-4] + ["--delta", "2"], capture_output=True, text=True)
    assert res.returncode == 2 and res.stdout == "" and stderr(res).startswith("sgmfast: error:")


def test_tradeoff_prints_what_the_api_computes_rounded_outward(capsys):
    from scipy.stats import norm

    from sgmfast import pld
    from sgmfast.cli import _fmt

    fpr = [1e-4, 0.01, 0.2]
    code, out, err = _run(["tradeoff", "--sigma", "1.1", "--q", "0.01", "--steps", "300", "--fpr"]
                          + [str(a) for a in fpr], capsys)
    assert code == 0 and err == ""
    lines = out.strip().splitlines()
    assert lines[0] == "fpr,beta_lower,beta_upper,tpr_lower,tpr_upper"
    rows = [line.split(",") for line in lines[1:]]
    b = pld.tradeoff(1.1, 0.01, 300, fpr)
    t = pld.attack_tpr(1.1, 0.01, 300, fpr)
    assert [r[1] for r in rows] == [_fmt(float(x), "down") for x in b.lower]
    assert [r[2] for r in rows] == [_fmt(float(x), "up") for x in b.upper]
    assert [r[3] for r in rows] == [_fmt(float(x), "down") for x in t.lower]
    assert [r[4] for r in rows] == [_fmt(float(x), "up") for x in t.upper]
    # q = 1: the Gaussian curve lies inside the printed band
    code, out, err = _run(["tradeoff", "--sigma", "2.0", "--q", "1", "--steps", "4", "--points", "7"], capsys)
    assert code == 0
    for row in [line.split(",") for line in out.strip().splitlines()[1:]]:
        a = float(row[0])
        exact = norm.cdf(norm.ppf(1 - a) - 1.0)  # mu = sqrt(4) / 2
        assert float(row[1]) <= exact <= float(row[2])


def test_tradeoff_default_grid(capsys):
    """Without --fpr: TRADEOFF_POINTS log-spaced rates from 1e-6 to 1, each printed as evaluated."""
    import numpy as np

    from sgmfast import pld
    from sgmfast.cli import TRADEOFF_POINTS, _fmt

    code, out, err = _run(["tradeoff", "--sigma", "1.1", "--q", "0.01", "--steps", "300", "--relation",
                           "replace-one"], capsys)
    assert code == 0 and err == ""
    lines = out.strip().splitlines()
    assert lines[0] == "fpr,beta_lower,beta_upper,tpr_lower,tpr_upper"
    rows = [line.split(",") for line in lines[1:]]
    assert len(rows) == TRADEOFF_POINTS and all(len(r) == 5 for r in rows)
    fpr = np.array([float(r[0]) for r in rows])
    assert fpr[0] == 1e-6 and fpr[-1] == 1.0 and (np.diff(fpr) > 0).all()
    b = pld.tradeoff(1.1, 0.01, 300, fpr, relation="replace_one")  # (the printed rates are the evaluated ones)
    assert [r[2] for r in rows] == [_fmt(float(x), "up") for x in b.upper]
    for r in rows:
        beta_lo, beta_up, tpr_lo, tpr_up = map(float, r[1:])
        assert 0.0 <= beta_lo <= beta_up <= 1.0 and float(r[0]) <= tpr_lo <= tpr_up <= 1.0


def test_tradeoff_plot(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "roc.png"
    code, out, err = _run(["tradeoff", "--sigma", "1.1", "--q", "0.01", "--steps", "100", "--points", "5",
                           "--out", str(png)], capsys)
    assert code == 0 and err == "" and len(out.strip().splitlines()) == 6
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 1000


@pytest.mark.parametrize("argv, needle", [
    (["tradeoff", "--sigma", "1", "--q", "0.01", "--steps", "10", "--fpr", "1.5"], "--fpr"),
    (["tradeoff", "--sigma", "1", "--q", "0.01", "--steps", "10", "--fpr", "0.1", "nan"], "--fpr"),
    (["tradeoff", "--sigma", "1", "--q", "0.01", "--steps", "10", "--fpr", "-0.1"], "--fpr"),
    (["tradeoff", "--sigma", "1", "--q", "0.01", "--steps", "10", "--points", "1"], "--points"),
    (["tradeoff", "--sigma", "1", "--q", "0.01", "--steps", "10", "--fpr", "0.1", "--points", "50"], "--points"),
    (["tradeoff", "--sigma", "-1", "--q", "0.01", "--steps", "10"], "sigma"),
    (["tradeoff", "--sigma", "1", "--q", "1.5", "--steps", "10"], "q"),
    (["tradeoff", "--sigma", "1", "--q", "0.01", "--steps", "10", "--delta", "1e-5"], "--delta"),
    (["tradeoff", "--q", "0.01", "--steps", "10"], "--sigma"),
    (["tradeoff", "--sigma", "1", "--q", "0.01", "--steps", "10", "--out", "roc.nosuchformat"], "--out"),
    (["calibrate-risk", "--max-tpr", "0.05", "--fpr", "1.0", "--q", "0.01", "--steps", "10"], "fpr"),
    (["calibrate-risk", "--max-tpr", "0", "--fpr", "0.01", "--q", "0.01", "--steps", "10"], "max_tpr"),
    (["calibrate-risk", "--max-tpr", "0.05", "--q", "0.01", "--steps", "10"], "--fpr"),
    (["calibrate-risk", "--max-tpr", "0.05", "--fpr", "0.01", "--sigma", "1", "--q", "0.01", "--steps", "10"],
     "--sigma"),
])
def test_tradeoff_and_calibrate_risk_bad_input(capsys, argv, needle):
    code, out, err = _run(argv, capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith("sgmfast: error:") and needle in err


def test_calibrate_risk_prints_the_api_sigma_rounded_up(capsys):
    from sgmfast import calibrate, pld
    from sgmfast.cli import _fmt

    code, out, err = _run(["calibrate-risk", "--max-tpr", "0.05", "--fpr", "0.01", "--q", "0.01", "--steps", "300"],
                          capsys)
    assert code == 0 and err == "" and len(out.strip().splitlines()) == 1
    s = calibrate.calibrate_sigma_to_risk(0.05, 0.01, 0.01, 300)
    assert _field(out, "sigma") == _fmt(s, "up") and float(_field(out, "sigma")) >= s
    assert float(pld.attack_tpr(float(_field(out, "sigma")), 0.01, 300, 0.01).upper) <= 0.05
    # --batch-size/--epochs resolve as for the other commands (steps = ceil(epochs / q))
    code, out, err = _run(["calibrate-risk", "--max-tpr", "0.5", "--fpr", "0.1", "--batch-size", "100",
                           "--dataset-size", "1000", "--epochs", "2", "--relation", "replace-one"], capsys)
    assert code == 0
    s = calibrate.calibrate_sigma_to_risk(0.5, 0.1, 0.1, 20, relation="replace_one")
    assert _field(out, "sigma") == _fmt(s, "up")


def test_tune_prints_what_the_api_computes(capsys):
    from sgmfast import tuning
    from sgmfast.cli import _fmt

    code, out, err = _run(["tune", "--sigma", "1.1", "--q", "0.01", "--steps", "300", "--delta", "1e-5",
                           "--runs", "geometric", "--mean", "10"], capsys)
    assert code == 0 and err == ""
    assert _field(out, "epsilon") == _fmt(tuning.epsilon(1.1, 0.01, 300, 1e-5, tuning.geometric(mean=10)), "up")
    code, out, err = _run(["tune", "--sigma", "1.1", "--q", "0.01", "--steps", "300", "--delta", "1e-5",
                           "--runs", "binomial", "--n", "4", "--p", "0.5", "--method", "profile"], capsys)
    assert code == 0
    assert _field(out, "epsilon") == _fmt(tuning.epsilon(1.1, 0.01, 300, 1e-5, tuning.binomial(4, 0.5),
                                                         method="profile"), "up")
    for argv in (["--runs", "tnb", "--mean", "10"], ["--runs", "poisson"], ["--runs", "geometric", "--mean", "0.5"]):
        code, out, err = _run(["tune", "--sigma", "1.1", "--q", "0.01", "--steps", "300", "--delta", "1e-5"] + argv,
                              capsys)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1


def test_epsilon_shuffled_batches_prints_the_api_bounds(capsys):
    from sgmfast.pld.samplers import balls_in_bins as allocation

    code, out, err = _run(["epsilon", "--sigma", "1.2", "--batch-size", "100", "--dataset-size", "2000",
                           "--epochs", "5", "--delta", "1e-5", "--sampler", "balls-in-bins"], capsys)
    assert code == 0, err
    b = allocation.epsilon(1.2, 20, 100, 1e-5)
    up, lo = float(_field(out, "epsilon")), float(_field(out, "epsilon lower bound"))
    assert b.upper <= up <= b.upper * (1 + 1e-5) and b.lower * (1 - 1e-5) <= lo <= b.lower
    assert _field(out, "sampler") == "balls-in-bins"


def test_epsilon_balls_in_bins_k_of_t_prints_the_api_bounds_and_says_it_is_wide(capsys):
    # (each example in k = 2 of the 10 batches of every epoch: the API's ``selected``; the lower
    # end is a separate statistic, so the interval is wider than --accuracy, and stderr says so)
    from sgmfast.pld.samplers import balls_in_bins as allocation

    code, out, err = _run(["epsilon", "--sigma", "1.0", "--q", "0.1", "--steps", "100", "--delta", "1e-5",
                           "--sampler", "balls-in-bins", "--selected", "2"], capsys)
    assert code == 0, err
    b = allocation.epsilon(1.0, 10, 100, 1e-5, selected=2)
    up, lo = float(_field(out, "epsilon")), float(_field(out, "epsilon lower bound"))
    assert b.upper <= up <= b.upper * (1 + 1e-5) and b.lower * (1 - 1e-5) <= lo <= b.lower
    assert _field(out, "selected") == "2" and _field(out, "sampler") == "balls-in-bins"
    assert len(err.strip().splitlines()) == 1 and "--selected > 1" in err


@pytest.mark.parametrize("extra, needle", [
    (["--q", "0.3"], "whole number"),
    (["--q", "0.1", "--accountant", "rdp"], "--accountant pld"),
    (["--q", "0.1", "--relation", "replace-one"], "add-remove"),
    (["--q", "0.1", "--selected", "3"], "divide"),
    (["--q", "0.1", "--selected", "0"], "selected"),
])
def test_epsilon_shuffled_bad_input_exit_2(extra, needle, capsys):
    code, out, err = _run(["epsilon", "--sigma", "1.0", "--steps", "100", "--delta", "1e-5", "--sampler", "balls-in-bins",
                           *extra], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and needle in err


def test_selected_is_for_balls_in_bins_only(capsys):
    code, out, err = _run(["epsilon", "--sigma", "1.0", "--q", "0.1", "--steps", "100", "--delta", "1e-5",
                           "--selected", "2"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "balls-in-bins" in err


def test_epsilon_fixed_size_batches_prints_the_api_bounds(capsys):
    from sgmfast.pld.samplers import fixed_size

    code, out, err = _run(["epsilon", "--sigma", "1.2", "--batch-size", "100", "--dataset-size", "2000",
                           "--epochs", "5", "--delta", "1e-5", "--sampler", "fixed-size"], capsys)
    assert code == 0, err
    b = fixed_size.epsilon(1.2, 100 / 2000, 100, 1e-5)
    up, lo = float(_field(out, "epsilon")), float(_field(out, "epsilon lower bound"))
    assert b.upper <= up <= b.upper * (1 + 1e-5) and b.lower * (1 - 1e-5) <= lo <= b.lower
    assert _field(out, "sampler") == "fixed-size" and _field(out, "relation") == "replace-one"


@pytest.mark.parametrize("argv, needle", [
    (["epsilon", "--sigma", "1.0", "--q", "0.1", "--steps", "10", "--delta", "1e-5", "--sampler", "fixed-size",
      "--relation", "add-remove"], "replace-one"),
    (["epsilon", "--sigma", "1.0", "--q", "0.1", "--steps", "10", "--delta", "1e-5", "--sampler", "fixed-size",
      "--accountant", "rdp", "--relation", "add-remove"], "--accountant pld"),
    (["calibrate", "--epsilon", "2", "--delta", "1e-5", "--q", "0.1", "--sigma", "1.0", "--sampler", "fixed-size",
      "--solve-for", "epochs"], "--solve-for sigma"),
])
def test_fixed_size_bad_input_exit_2(argv, needle, capsys):
    code, out, err = _run(argv, capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and needle in err


def test_calibrate_under_a_sampler_prints_what_the_api_computes(capsys):
    from sgmfast.calibrate import calibrate_sigma
    from sgmfast.cli import _fmt

    code, out, err = _run(["calibrate", "--epsilon", "3", "--delta", "1e-5", "--q", "0.01", "--steps", "1000",
                           "--sampler", "fixed-size"], capsys)
    assert code == 0, err
    s = calibrate_sigma(3.0, 1e-5, 0.01, 1000, sampler="fixed_size")
    assert _field(out, "sigma") == _fmt(s, "up") and _field(out, "sampler") == "fixed-size"


def test_calibrate_batch_size_under_a_sampler_prints_what_the_api_computes(capsys):
    from sgmfast.calibrate import calibrate_batch_size
    from sgmfast.pld.samplers import run_of_batch

    code, out, err = _run(["calibrate", "--epsilon", "1", "--delta", "1e-5", "--solve-for", "batch-size",
                           "--sigma", "2", "--dataset-size", "1000", "--epochs", "2", "--sampler", "fixed-size"], capsys)
    assert code == 0, err
    b = calibrate_batch_size(1.0, 1e-5, 2.0, 1000, epochs=2, sampler="fixed_size")
    q, t = run_of_batch("fixed_size", b, 1000, None, 2)
    assert int(_field(out, "batch size")) == b and int(_field(out, "steps")) == t
    assert float(_field(out, "epsilon")) <= 1.0 and _field(out, "sampler") == "fixed-size"


def test_batch_size_command_takes_the_sampler(capsys):
    from sgmfast.analysis import plan_batch_size

    argv = ["batch-size", "--dataset-size", "2000", "--epsilon", "2", "--delta", "1e-5", "--epochs", "2",
            "--grad-sq-sum", "10", "--candidates", "100", "500"]
    code, out, err = _run(argv + ["--sampler", "fixed-size"], capsys)
    assert code == 0, err
    plan = plan_batch_size(2000, 2.0, 1e-5, grad_sq_sum=10.0, epochs=2, candidates=[100, 500], sampler="fixed_size")
    assert plan.to_text() in out and f"best batch size: {plan.best.batch_size}" in out
    code, out, err = _run(argv + ["--sampler", "balls-in-bins", "--accountant", "rdp"], capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "pld" in err


def test_fixed_size_rdp_through_the_cli_and_the_calibration(capsys):
    from sgmfast.calibrate import calibrate_sigma
    from sgmfast.cli import _fmt

    code, out, err = _run(["epsilon", "--sigma", "1.1", "--q", "0.01", "--steps", "1000", "--delta", "1e-5",
                           "--sampler", "fixed-size", "--accountant", "rdp"], capsys)
    assert code == 0, err
    assert _field(out, "epsilon") == _fmt(rdp.epsilon(1.1, 0.01, 1000, 1e-5, sampler="fixed_size"), "up")
    assert _field(out, "relation") == "replace-one"
    code, out, err = _run(["calibrate", "--epsilon", "3", "--delta", "1e-5", "--q", "0.01", "--steps", "1000",
                           "--sampler", "fixed-size", "--accountant", "rdp"], capsys)
    assert code == 0, err
    s = calibrate_sigma(3.0, 1e-5, 0.01, 1000, sampler="fixed_size", accountant="rdp")
    assert _field(out, "sigma") == _fmt(s, "up")
    assert rdp.epsilon(s, 0.01, 1000, 1e-5, sampler="fixed_size") <= 3.0
    assert float(_field(out, "epsilon")) <= 3.0


def test_curve_under_a_sampler_prints_the_api_curve(capsys):
    import numpy as np

    from sgmfast import pld
    from sgmfast.cli import _fmt

    code, out, err = _run(["curve", "--sigma", "1.1", "--q", "0.01", "--steps", "300", "--every", "100",
                           "--delta", "1e-5", "--sampler", "fixed-size"], capsys)
    assert code == 0, err
    b = pld.epsilon_curve(1.1, 0.01, np.array([100, 200, 300]), 1e-5, sampler="fixed_size")
    rows = out.strip().splitlines()[1:]
    assert [r.split(",")[3] for r in rows] == [_fmt(float(u), "up") for u in b.upper]
    code, out, err = _run(["curve", "--sigma", "1.1", "--q", "0.01", "--steps", "300", "--delta", "1e-5",
                           "--sampler", "balls-in-bins", "--accountant", "rdp"], capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1


def test_epsilon_balls_in_bins_partial_epoch_is_composed(capsys):
    # (1.5 epochs of 234 batches: the partial epoch was bracketed by 1 and 2 whole epochs and the
    # interval far wider than --accuracy, with a warning; it is composed as it is now, within the
    # accuracy, strictly between the two whole-epoch runs, and the CLI prints what the API computes)
    from sgmfast.cli import _fmt
    from sgmfast.pld import allocation

    code, out, err = _run(["epsilon", "--sigma", "1.1", "--q", repr(1 / 234), "--steps", "351", "--delta", "1e-5",
                           "--sampler", "balls-in-bins"], capsys)
    assert code == 0 and err == "", err
    up, lo = float(_field(out, "epsilon")), float(_field(out, "epsilon lower bound"))
    assert up - lo <= 1e-3 * up
    b = allocation.epsilon(1.1, 234, 351, 1e-5)
    assert _field(out, "epsilon") == _fmt(float(b.upper), "up")
    assert allocation.epsilon(1.1, 234, 234, 1e-5).upper < lo and up < allocation.epsilon(1.1, 234, 468, 1e-5).lower


def test_curve_says_when_checkpoints_are_wide(capsys):
    # (balls-in-bins: the checkpoints inside an epoch the curve had no work left to compose are
    # bracketed by their neighbours -- one warning line on stderr; a Poisson curve is met: none)
    code, out, err = _run(["curve", "--sigma", "1.1", "--q", repr(1 / 234), "--steps", "1000", "--delta", "1e-5",
                           "--sampler", "balls-in-bins", "--points", "6"], capsys)
    assert code == 0
    rows = [r.split(",") for r in out.strip().splitlines()[1:]]
    wide = sum(float(u) - float(lo) > 1e-3 * float(u) * 1.0001 for _, _, lo, u in rows)
    lines = err.strip().splitlines()
    assert wide >= 1 and len(lines) == 1 and f"{wide} of 6 checkpoints" in lines[0], err
    code, out, err = _run(["curve", "--sigma", "1.1", "--q", "0.01", "--steps", "1000", "--delta", "1e-5",
                           "--points", "6"], capsys)
    assert code == 0 and err == "", err
