"""A first run that talks: on an empty kernel cache the CLI says on stderr that it is compiling
(one line, before the answer), and so does a command's first use when other commands filled the
cache; ``sgmfast warm-up`` compiles every command's kernels."""

from __future__ import annotations

import sgmfast._kernels as kernels
from sgmfast import _prewarm, cli


def test_cold_cache_notice_goes_to_stderr_once(monkeypatch, capsys):
    monkeypatch.setattr(kernels, "cache_is_cold", lambda: True)
    assert cli.main(["epsilon", "--sigma", "1.1", "--q", "0.01", "--steps", "100", "--delta", "1e-5"]) == 0
    out, err = capsys.readouterr()
    assert err.strip() == cli.FIRST_RUN and "epsilon:" in out
    monkeypatch.setattr(kernels, "cache_is_cold", lambda: False)
    monkeypatch.setattr(_prewarm, "uncached", lambda key: 0)
    assert cli.main(["epsilon", "--sigma", "1.1", "--q", "0.01", "--steps", "100", "--delta", "1e-5"]) == 0
    assert capsys.readouterr().err == ""


def test_a_commands_first_use_says_so_once(monkeypatch, capsys):
    # the cache holds other commands' kernels, not all of this one's (by the manifest)
    monkeypatch.setattr(kernels, "cache_is_cold", lambda: False)
    monkeypatch.setattr(_prewarm, "uncached", lambda key: 3 if key == "calibrate/pld/poisson" else 0)
    argv = ["calibrate", "--epsilon", "2", "--delta", "1e-5", "--q", "0.01", "--steps", "100"]
    assert cli.main(argv) == 0
    assert capsys.readouterr().err.strip() == cli.FIRST_USE.format("calibrate")
    assert cli.main(["epsilon", "--sigma", "1.1", "--q", "0.01", "--steps", "100", "--delta", "1e-5"]) == 0
    assert capsys.readouterr().err == ""


def test_cache_is_cold_reads_the_cache_folders():
    # this checkout has run kernels (the tests above), so its cache is warm
    assert kernels.cache_is_cold() is False


def test_warm_up_compiles_every_kind(capsys):
    assert cli.main(["warm-up"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [x for x in lines if x.startswith("compiled: ")] and lines[-1].startswith("warm:")


def test_cache_folders_follow_numba_cache_dir(tmp_path, monkeypatch):
    # numba keeps a source folder's kernels in NUMBA_CACHE_DIR/<folder>_<sha1 of its path>/
    from sgmfast import _prewarm

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    assert kernels.cache_is_cold() is True
    entries = [e for e in _prewarm._entries("epsilon/pld/poisson") if e[0] == "sgmfast._kernels.pld.query"]
    before = _prewarm.uncached("epsilon/pld/poisson")
    folder = kernels.cache_dirs(kernels._HERE / "pld")[0]
    assert folder.parent == tmp_path and folder.name.startswith("pld_")
    folder.mkdir()
    (folder / f"query.{entries[0][1]}-1.py311.nbi").write_bytes(b"")
    assert kernels.cache_is_cold() is False
    assert _prewarm.uncached("epsilon/pld/poisson") == before - 1


def test_a_first_run_says_it_compiles_the_rest_in_the_background(monkeypatch, capsys):
    monkeypatch.setattr(kernels, "cache_is_cold", lambda: True)
    monkeypatch.setattr(_prewarm, "start_rest", lambda: "proc")
    assert cli.main(["epsilon", "--sigma", "1.1", "--q", "0.01", "--steps", "100", "--delta", "1e-5"]) == 0
    assert capsys.readouterr().err.strip().splitlines() == [cli.FIRST_RUN, cli.REST]
    monkeypatch.setattr(kernels, "cache_is_cold", lambda: False)
    monkeypatch.setattr(_prewarm, "uncached", lambda key: 0)
    assert cli.main(["epsilon", "--sigma", "1.1", "--q", "0.01", "--steps", "100", "--delta", "1e-5"]) == 0
    assert capsys.readouterr().err == ""  # (a warm run starts nothing)
