"""The first run's second compiling process (``sgmfast._prewarm``): its manifest names real kernels
with argument types numba reads back, a stale entry is skipped, and it can be turned off."""

import json
import os

import numba
from numba.core import types

from sgmfast import _prewarm


def _entries():
    return [(key, e) for key, entries in json.loads(_prewarm.MANIFEST.read_text()).items() for e in entries]


def test_the_manifest_names_kernels_and_types_numba_reads():
    import importlib

    assert {"epsilon/pld/poisson", "calibrate/pld/poisson", "curve/pld/poisson"} <= {k for k, _ in _entries()}
    for key, (module, qualname, args) in _entries():
        disp = _prewarm.find(importlib.import_module(module), qualname)
        assert isinstance(disp, numba.core.registry.CPUDispatcher), f"{key}: {module}.{qualname}"
        sig = tuple(eval(a, {"__builtins__": {}}, dict(vars(types))) for a in args)
        assert all(isinstance(t, types.Type) for t in sig)


def test_compile_backwards_skips_stale_entries(tmp_path, monkeypatch):
    manifest = tmp_path / "first_run.json"
    manifest.write_text(json.dumps({"k": [["sgmfast._kernels.pld.windows", "edge", _edge_args()],
                                          ["sgmfast._kernels.pld.windows", "no_such_kernel", []],
                                          ["sgmfast._kernels.pld.windows", "edge", ["NoSuchType"]]]}))
    monkeypatch.setattr(_prewarm, "MANIFEST", manifest)
    assert _prewarm.compile_backwards("k") == 1
    assert _prewarm.start("not-a-key") is None


def test_turned_off_by_the_environment(monkeypatch):
    monkeypatch.setenv("SGMFAST_PREWARM", "0")
    assert _prewarm.start("epsilon/pld/poisson") is None
    assert _prewarm.key("epsilon", "pld", "balls-in-bins") == "epsilon/pld/balls_in_bins"


def _edge_args():
    for _, (module, qualname, args) in _entries():
        if qualname == "edge":
            return args
    raise AssertionError("the manifest has no windows.edge")


def _literal_calls(module):
    """Calls, in ``module``'s source, of one of its kernels with a constant bool, int or str
    argument: numba types such an argument as a Literal and compiles the callee once more for
    it (a first run then compiles the same kernel twice or more)."""
    import ast
    import inspect

    def constant(node):
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            node = node.operand
        return isinstance(node, ast.Constant) and isinstance(node.value, (bool, int, str))

    found = []
    for node in ast.walk(ast.parse(inspect.getsource(module))):
        if not isinstance(node, ast.Call):
            continue
        f, target = node.func, None
        if isinstance(f, ast.Name):
            target = vars(module).get(f.id)
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            target = getattr(vars(module).get(f.value.id), f.attr, None)
        if isinstance(target, numba.core.registry.CPUDispatcher):
            args = list(node.args) + [k.value for k in node.keywords]
            found += [f"{module.__name__}:{node.lineno} {ast.unparse(node)[:60]}" for a in args if constant(a)]
    return found


def test_no_kernel_calls_a_kernel_with_a_literal_argument():
    import importlib
    import pkgutil

    import sgmfast._kernels as kernels

    found = []
    for info in pkgutil.walk_packages(kernels.__path__, kernels.__name__ + "."):
        found += _literal_calls(importlib.import_module(info.name))
    assert found == [], "pass bool(True), int(0), ...: a constant argument compiles the callee again"


def test_the_helper_asks_for_the_lowest_priority(monkeypatch):
    import os

    asked = []
    monkeypatch.setattr(os, "nice", asked.append)
    _prewarm._lower_priority()
    assert asked == [19]
    monkeypatch.delattr(os, "nice")
    _prewarm._lower_priority()  # (no os.nice: nothing to do)


def _one_entry_manifest(tmp_path, monkeypatch, lock_dir):
    manifest = tmp_path / "first_run.json"
    manifest.write_text(json.dumps({"a": [["sgmfast._kernels.pld.windows", "edge", _edge_args()]],
                                    "b": [["sgmfast._kernels.pld.windows", "edge", _edge_args()],
                                          ["sgmfast._kernels.pld.windows", "no_such_kernel", []]]}))
    monkeypatch.setattr(_prewarm, "MANIFEST", manifest)
    monkeypatch.setattr(_prewarm, "lock_path", lambda: lock_dir / "prewarm.lock")


def test_the_rest_is_every_entry_once_and_compiles_under_the_lock(tmp_path, monkeypatch):
    _one_entry_manifest(tmp_path, monkeypatch, tmp_path)
    assert [e[1] for e in _prewarm._all_entries()] == ["edge", "no_such_kernel"]
    monkeypatch.setattr(_prewarm, "_missing", lambda entries: entries)
    monkeypatch.setattr(_prewarm, "_cores", lambda: 1)
    assert _prewarm.compile_rest() == 1  # (the stale entry skipped)
    held = _prewarm._lock()
    assert held is not None and (tmp_path / "prewarm.lock").read_text().split() == [str(os.getpid())]
    with held:
        assert _prewarm._lock() is None  # one at a time
        assert _prewarm.compile_rest() == 0


def test_start_rest_detaches_once_and_only_when_something_is_missing(tmp_path, monkeypatch):
    import subprocess

    _one_entry_manifest(tmp_path, monkeypatch, tmp_path)
    started = []
    monkeypatch.setattr(subprocess, "Popen", lambda argv, **kw: started.append((argv, kw)) or "proc")
    monkeypatch.setenv("SGMFAST_PREWARM", "1")
    monkeypatch.setattr(_prewarm, "_missing", lambda entries: [])
    assert _prewarm.start_rest() is None and started == []  # nothing left to compile
    monkeypatch.setattr(_prewarm, "_missing", lambda entries: entries)
    with _prewarm._lock():
        assert _prewarm.start_rest() is None and started == []  # one is running
    assert _prewarm.start_rest() == "proc"
    argv, kw = started[0]
    assert argv[-3:] == ["-m", "sgmfast._prewarm", "--rest"] and kw["start_new_session"] is True
    monkeypatch.setenv("SGMFAST_PREWARM", "0")
    assert _prewarm.start_rest() is None and len(started) == 1


def test_the_rest_goes_first_to_commands_without_a_plain_run_and_splits_over_two_cores(tmp_path, monkeypatch):
    """The kernels of commands that cannot answer as plain Python come first (their first use
    waits for them); with two cores a second process compiles every other entry."""
    import subprocess

    manifest = tmp_path / "first_run.json"
    plain, other = sorted(_prewarm.PLAIN_FAST)[0], "batch-size/pld/poisson"
    assert other not in _prewarm.PLAIN_FAST
    entries = {plain: [["m", "a", []], ["m", "b", []]], other: [["m", "c", []], ["m", "a", []]]}
    manifest.write_text(json.dumps(entries))
    monkeypatch.setattr(_prewarm, "MANIFEST", manifest)
    monkeypatch.setattr(_prewarm, "lock_path", lambda: tmp_path / "prewarm.lock")
    assert [e[1] for e in _prewarm._all_entries()] == ["c", "a", "b"]
    monkeypatch.setattr(_prewarm, "_missing", lambda entries: entries)
    monkeypatch.setattr(_prewarm, "_cores", lambda: 2)
    compiled, started = [], []

    class Proc:
        def __init__(self, argv, **kw):
            started.append(argv)

        def wait(self):
            return 0

    monkeypatch.setattr(subprocess, "Popen", Proc)
    monkeypatch.setattr(_prewarm, "_compile", lambda entry: compiled.append(entry[1]) or True)
    assert _prewarm.compile_rest() == 2
    assert compiled == ["c", "b"]
    assert started[0][-3:-1] == ["sgmfast._prewarm", "--part"] and json.loads(started[0][-1]) == [["m", "a", []]]
