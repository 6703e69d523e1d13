#!/usr/bin/env python
"""Domain sweep: random (edge-weighted) calls of every public entry point of sgmfast, each in an
isolated, memory- and time-limited worker process, classified and checked against exact
references where they exist.

    python bench/domain_sweep.py N SEED [--timeout 10] [--mem-gib 2] [--only NAME[,NAME]]
                                 [--out PATH] [--cases FILE] [--summary PATH] [--failures PATH]

The promise checked (the issue's "total domain"): q in [0, 1], sigma in [0, inf], T in [0, 1e7],
delta in [1e-30, 1), eps in [0, inf]; every valid input gets a certified answer (possibly +inf)
within ``--timeout`` seconds and ``--mem-gib`` GiB of address space; every invalid input raises
ValueError/TypeError naming the parameter (the CLI: exit 2, one line on stderr); an upper bound
is never below the truth and a lower bound never above it.

Isolation. One worker subprocess at a time (``RLIMIT_AS`` = mem, set before it imports anything),
warmed up (imports and one call of each kernel family) before any case is timed. The parent
enforces the wall-clock limit: on timeout it kills the worker and starts a new one. Outcomes:
``ok``, ``error:<Type>``, ``timeout``, ``oom`` (MemoryError, or the worker died with an
allocation failure in its log), ``crash`` (the worker died otherwise). Times are measured in the
worker around the call (worker start and warm-up excluded).

Exact references. q = 1 (the composed Gaussian, mu = c sqrt(sum T_i / sigma_i^2), c = 1
add/remove, 2 replace-one) and T = 1 (exact one-step delta; the larger direction for add/remove)
come from ``tests/reference/mp_exact.py`` (mpmath); without that module those checks are skipped
and the summary says so. Upper/lower eps bounds are checked in the delta form, which is exactly
equivalent and needs no root solve: upper >= eps* iff delta*(upper) <= delta, and lower <= eps*
iff lower = 0 or delta*(lower) >= delta. The trivial references need no module: nothing to
account (q = 0, T = 0, sigma = inf) gives eps = delta = 0; noiseless steps (sigma = 0) give
delta(eps) = D0 = 1 - prod (1 - q_i)^T_i for every eps, hence eps(delta) = +inf for delta < D0.

Outputs: a JSON-lines file of every case (``--out``), the failing cases alone (``--failures``,
re-runnable with ``--cases``) and a readable summary (``--summary``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import random
import re
import select
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REF_DIR = ROOT / "tests" / "reference"
REF_MODULE = REF_DIR / "mp_exact.py"
INF = math.inf
NAN = math.nan

# ============================================================================================
# value encoding (JSON lines; numpy scalars tagged) and reproducer formatting
# ============================================================================================


def enc(x):
    """Python / numpy value -> JSON-able (floats keep NaN/Infinity, which json reads back)."""
    try:
        import numpy as np
    except ImportError:  # pragma: no cover
        np = None
    if np is not None:
        if isinstance(x, np.ndarray):
            return [enc(v) for v in x.tolist()]
        if isinstance(x, np.generic):
            return {"__np__": type(x).__name__, "v": x.item()}
    if isinstance(x, (list, tuple)):
        return [enc(v) for v in x]
    if isinstance(x, dict):
        return {k: enc(v) for k, v in x.items()}
    if hasattr(x, "lower") and hasattr(x, "upper") and type(x).__name__ == "Bounds":
        return {"__bounds__": True, "lower": enc(x.lower), "upper": enc(x.upper)}
    if isinstance(x, (bool, int, float, str)) or x is None:
        return x
    return {"__repr__": repr(x)}


def dec(x):
    if isinstance(x, list):
        return [dec(v) for v in x]
    if isinstance(x, dict):
        if "__np__" in x:
            import numpy as np

            return getattr(np, x["__np__"])(x["v"])
        return {k: dec(v) for k, v in x.items()}
    return x


def pyrepr(x) -> str:
    """Copy-pasteable Python for an encoded argument."""
    if isinstance(x, dict) and "__np__" in x:
        return f"np.{x['__np__']}({pyrepr(x['v'])})"
    if isinstance(x, bool) or x is None:
        return repr(x)
    if isinstance(x, float):
        if math.isnan(x):
            return 'float("nan")'
        if math.isinf(x):
            return 'float("inf")' if x > 0 else '-float("inf")'
        return repr(x)
    if isinstance(x, list):
        return "[" + ", ".join(pyrepr(v) for v in x) + "]"
    return repr(x)


def uses_numpy(x) -> bool:
    if isinstance(x, dict):
        return "__np__" in x or any(uses_numpy(v) for v in x.values())
    if isinstance(x, list):
        return any(uses_numpy(v) for v in x)
    return False


# ============================================================================================
# entry points
# ============================================================================================

FUNCS = {
    "rdp.epsilon": ["sigma", "q", "steps", "delta"],
    "rdp.delta": ["sigma", "q", "steps", "epsilon"],
    "pld.epsilon": ["sigma", "q", "steps", "delta"],
    "pld.delta": ["sigma", "q", "steps", "epsilon"],
    "calibrate.calibrate_sigma": ["epsilon", "delta", "q", "steps"],
    "calibrate.calibrate_q": ["epsilon", "delta", "sigma", "steps"],
    "calibrate.calibrate_steps": ["epsilon", "delta", "sigma", "q"],
    "calibrate.calibrate_batch_size": ["epsilon", "delta", "sigma", "dataset_size"],
    "calibrate.gaussian_sigma": ["epsilon", "delta", "steps"],
    "analysis.one_step_delta": ["sigma", "q", "epsilon"],
    "analysis.one_step_sigma": ["epsilon", "delta", "q"],
}
ACCOUNTANTS = ("rdp.RDPAccountant", "pld.PLDAccountant", "dp_accounting")
ENTRY_WEIGHTS = {
    "rdp.epsilon": 8, "rdp.delta": 7, "rdp.RDPAccountant": 5,
    "pld.epsilon": 15, "pld.delta": 12, "pld.PLDAccountant": 6,
    "calibrate.calibrate_sigma": 10, "calibrate.calibrate_q": 5, "calibrate.calibrate_steps": 5,
    "calibrate.calibrate_batch_size": 4, "calibrate.gaussian_sigma": 4,
    "analysis.one_step_delta": 5, "analysis.one_step_sigma": 4,
    "cli": 7, "dp_accounting": 3,
}

#: Entry points added by other sweeps (bench/domain_sweep_more.py): entry name -> an object with
#: ``call(spec)`` (runs in the worker), ``repro(spec)``, ``check_valid(case, res, refs, runner)``,
#: ``family(spec)`` and ``params(spec)``.  The harness (worker, references, checks of invalid
#: input, summary) is shared; an extension only says how to call, reproduce and check its entries.
EXTENSIONS: dict = {}
#: the script a worker process runs (an extension's own, so that it registers its entries there too)
WORKER_SCRIPT = Path(__file__).resolve()
#: first line of the summary
TITLE = "sgmfast domain sweep"


def repro(spec) -> str:
    """A copy-pasteable Python line reproducing the case."""
    e = spec["entry"]
    if e in EXTENSIONS:
        return EXTENSIONS[e].repro(spec)
    np_import = "import numpy as np; " if uses_numpy(spec) else ""
    if e in FUNCS:
        mod, fn = e.split(".")
        parts = [pyrepr(a) for a in spec["args"]] + [f"{k}={pyrepr(v)}" for k, v in spec.get("kwargs", {}).items()]
        return f"{np_import}from sgmfast import {mod}; {mod}.{fn}({', '.join(parts)})"
    if e == "cli":
        return f"from sgmfast.cli import main; main({pyrepr(spec['argv'])})"
    init = ", ".join(f"{k}={pyrepr(v)}" for k, v in spec.get("init", {}).items())
    if e == "dp_accounting":
        s = (f"{np_import}import dp_accounting as dpa; from sgmfast.integrations.dp_accounting import "
             f"SGMFastPrivacyAccountant as A; acc = A({init}); ")
        for sg, q, t in spec["segments"]:
            ev = (f"dpa.GaussianDpEvent({pyrepr(sg)})" if spec.get("bare_gaussian") and q == 1.0
                  else f"dpa.PoissonSampledDpEvent({pyrepr(q)}, dpa.GaussianDpEvent({pyrepr(sg)}))")
            s += f"acc.compose({ev}, {pyrepr(t)}); "
        fn = "get_epsilon" if spec["query"] == "epsilon" else "get_delta"
        return s + f"acc.{fn}({pyrepr(spec['x'])})"
    mod, cls = e.split(".")
    s = f"{np_import}from sgmfast import {mod}; acc = {mod}.{cls}({init}); "
    for sg, q, t in spec["segments"]:
        s += f"acc.step({pyrepr(sg)}, {pyrepr(q)}, {pyrepr(t)}); "
    return s + f"acc.{spec['query']}({pyrepr(spec['x'])})"


# ============================================================================================
# worker (runs in the child process)
# ============================================================================================


def _peak_rss_reset():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _status_mb(key):
    """A memory figure of this process from /proc/self/status (MB), or None."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


def _peak_rss_mb():
    return _status_mb("VmHWM")


def _rss_mb():
    return _status_mb("VmRSS")


def _clear_library_state():
    """Drop sgmfast's module-level memo caches (pld keeps up to 65 one-step grids between calls)
    and return freed memory to the OS, so that one case's memory does not count against the next."""
    import gc

    for name, mod in list(sys.modules.items()):
        if name.startswith("sgmfast") and mod is not None:
            for attr, v in list(vars(mod).items()):
                if attr.endswith("_CACHE") and isinstance(v, dict):
                    v.clear()
    gc.collect()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _call(spec):
    """Run one case in this process; returns the raw value (or raises)."""
    import io
    import contextlib

    e = spec["entry"]
    if e in EXTENSIONS:
        return EXTENSIONS[e].call(spec)
    if e in FUNCS:
        import importlib

        mod, fn = e.split(".")
        m = importlib.import_module(f"sgmfast.{mod}")
        return getattr(m, fn)(*dec(spec["args"]), **dec(spec.get("kwargs", {})))
    if e == "cli":
        from sgmfast.cli import main

        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(spec["argv"]))
            except SystemExit as exc:  # argparse --help/--version
                code = exc.code if isinstance(exc.code, int) else 1
        return {"__cli__": True, "exit": code, "stdout": out.getvalue(), "stderr": err.getvalue()}
    init = dec(spec.get("init", {}))
    if e == "dp_accounting":
        import dp_accounting as dpa
        from sgmfast.integrations.dp_accounting import SGMFastPrivacyAccountant

        acc = SGMFastPrivacyAccountant(**init)
        for sg, q, t in dec(spec["segments"]):
            if spec.get("bare_gaussian") and q == 1.0:
                ev = dpa.GaussianDpEvent(sg)
            else:
                ev = dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(sg))
            acc.compose(ev, t)
        x = dec(spec["x"])
        return acc.get_epsilon(x) if spec["query"] == "epsilon" else acc.get_delta(x)
    import importlib

    mod, cls = e.split(".")
    acc = getattr(importlib.import_module(f"sgmfast.{mod}"), cls)(**init)
    for sg, q, t in dec(spec["segments"]):
        acc.step(sg, q, t)
    return getattr(acc, spec["query"])(dec(spec["x"]))


_MP = None


def _ref_eval(queries):
    """Exact references in mpmath (tests/reference/mp_exact.py); strings with 40 digits."""
    global _MP
    import mpmath

    if _MP is None:
        sys.path.insert(0, str(REF_DIR))
        import mp_exact  # noqa: F401

        _MP = mp_exact
    out = []
    with mpmath.workdps(60):
        for qy in queries:
            eps = mpmath.mpf(qy["eps"]) if math.isfinite(qy["eps"]) else mpmath.inf
            if qy["f"] == "gaussian_delta":
                if eps == mpmath.inf:
                    v = mpmath.mpf(0)
                elif len(qy["segs"]) == 1 and "div" not in qy:  # mu = c sqrt(T) / sigma formed inside
                    (s, t), = qy["segs"]
                    v = _MP.composed_gaussian_delta(s, t, eps, sensitivity=qy["c"])
                else:
                    with mpmath.workdps(120):
                        mu2 = mpmath.mpf(0)
                        for s, t in qy["segs"]:
                            mu2 += mpmath.mpf(t) / mpmath.mpf(s) ** 2
                        mu2 /= mpmath.mpf(qy.get("div", 1))  # (a sum statistic: sigma sqrt(div) each)
                        mu = mpmath.mpf(qy["c"]) * mpmath.sqrt(mu2)
                    v = _MP.gaussian_delta(mu, eps)
            elif qy["f"] == "one_step_delta":
                v = (mpmath.mpf(0) if eps == mpmath.inf else
                     _MP.one_step_delta(mpmath.mpf(qy["q"]), mpmath.mpf(qy["sigma"]), eps, qy["direction"]))
            elif qy["f"] == "gaussian_epsilon":
                with mpmath.workdps(120):
                    mu2 = sum(mpmath.mpf(t) / mpmath.mpf(s) ** 2 for s, t in qy["segs"]) / mpmath.mpf(qy.get("div", 1))
                    mu = mpmath.mpf(qy["c"]) * mpmath.sqrt(mu2)
                v = _MP.gaussian_epsilon(mu, mpmath.mpf(qy["delta"]))
            elif qy["f"] == "one_step_epsilon":
                v = _MP.one_step_epsilon(mpmath.mpf(qy["q"]), mpmath.mpf(qy["sigma"]), mpmath.mpf(qy["delta"]),
                                         qy["direction"])
            else:
                raise ValueError(qy["f"])
            out.append(mpmath.nstr(mpmath.mpf(v), 45))
    return out


WARMUP = [
    {"entry": "rdp.epsilon", "args": [1.0, 0.01, 1000, 1e-5]},
    {"entry": "rdp.delta", "args": [1.0, 0.01, 1000, 2.0]},
    {"entry": "rdp.epsilon", "args": [[0.8, 1.2], 0.01, 1000, 1e-5], "kwargs": {"orders": [2.0, 3.5, 8.0]}},
    {"entry": "pld.epsilon", "args": [1.1, 256 / 60000, 14062, 1e-5]},
    {"entry": "pld.epsilon", "args": [0.6, 1e-4, 10**6, 1e-5]},
    {"entry": "pld.epsilon", "args": [2.0, 1e-3, 10, 1e-10]},
    {"entry": "pld.epsilon", "args": [1.0, 0.1, 100, 1e-5], "kwargs": {"relation": "replace_one"}},
    {"entry": "pld.delta", "args": [1.0, 0.01, 1000, 1.0]},
    {"entry": "pld.delta", "args": [1.0, 0.01, 1000, 0.01]},
    {"entry": "pld.PLDAccountant", "init": {}, "segments": [[1.0, 0.02, 50], [0.8, 0.01, 100]],
     "query": "epsilon", "x": 1e-5},
    {"entry": "rdp.RDPAccountant", "init": {}, "segments": [[1.0, 0.02, 50]], "query": "delta", "x": 1.0},
    {"entry": "calibrate.calibrate_sigma", "args": [2.0, 1e-5, 0.01, 1000], "kwargs": {"accountant": "rdp"}},
    {"entry": "calibrate.calibrate_sigma", "args": [2.0, 1e-5, 0.01, 1000]},
    {"entry": "calibrate.calibrate_q", "args": [2.0, 1e-5, 1.0, 1000]},
    {"entry": "calibrate.calibrate_steps", "args": [2.0, 1e-5, 1.0, 0.01], "kwargs": {"accountant": "rdp"}},
    {"entry": "calibrate.calibrate_batch_size", "args": [2.0, 1e-5, 1.0, 1000], "kwargs": {"steps": 100}},
    {"entry": "calibrate.gaussian_sigma", "args": [1.0, 1e-5, 10]},
    {"entry": "analysis.one_step_delta", "args": [0.8, 0.01, 1.0]},
    {"entry": "analysis.one_step_sigma", "args": [1.0, 1e-5, 0.01]},
    {"entry": "cli", "argv": ["epsilon", "--sigma", "1.0", "--q", "0.01", "--steps", "100", "--delta", "1e-5"]},
    {"entry": "dp_accounting", "init": {}, "segments": [[1.0, 0.01, 100]], "query": "epsilon", "x": 1e-5},
]


def worker_main(mem_bytes: int, isolate: bool = False) -> None:
    import resource

    if mem_bytes > 0:
        resource.setrlimit(resource.RLIMIT_AS, (mem_bytes, mem_bytes))
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything the library prints at C level goes to the log, not the protocol
    sys.stdout = sys.stderr
    sys.path.insert(0, str(ROOT))
    import warnings

    warnings.simplefilter("ignore")
    for line in sys.stdin:
        job = json.loads(line)
        if job.get("warmup"):
            t0 = time.perf_counter()
            errors = []
            import sgmfast

            for spec in WARMUP:
                try:
                    _call(spec)
                except Exception as exc:  # recorded, the sweep will see it again
                    errors.append(f"{spec['entry']}: {type(exc).__name__}: {exc}")
            vm = None
            with open("/proc/self/status") as f:
                for ln in f:
                    if ln.startswith("VmSize:"):
                        vm = int(ln.split()[1]) / 1024.0
            proto.write(json.dumps({"warm": True, "file": sgmfast.__file__, "seconds": time.perf_counter() - t0,
                                    "errors": errors, "vm_mb": vm, "pid": os.getpid()}) + "\n")
            continue
        if job.get("ref"):
            t0 = time.perf_counter()
            try:
                res = {"ok": True, "values": _ref_eval(job["queries"])}
            except Exception as exc:
                res = {"ok": False, "message": f"{type(exc).__name__}: {exc}"}
            res["time"] = time.perf_counter() - t0
            proto.write(json.dumps(res) + "\n")
            continue
        spec = job["spec"]
        if isolate:
            _clear_library_state()
        rss_before = _rss_mb()
        _peak_rss_reset()
        t0 = time.perf_counter()
        try:
            value = _call(spec)
            dt = time.perf_counter() - t0
            res = {"outcome": "ok", "value": enc(value)}
        except MemoryError as exc:
            dt = time.perf_counter() - t0
            res = {"outcome": "oom", "exc_type": "MemoryError", "message": str(exc)[:500]}
        except BaseException as exc:  # noqa: BLE001 - everything is a finding
            dt = time.perf_counter() - t0
            tb = traceback.extract_tb(exc.__traceback__)
            where = f"{Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else ""
            res = {"outcome": f"error:{type(exc).__name__}", "exc_type": type(exc).__name__,
                   "message": str(exc)[:500], "where": where}
        res["time"] = dt
        res["mem_mb"] = _peak_rss_mb()
        res["rss_before_mb"] = rss_before
        res["rss_after_mb"] = _rss_mb()
        try:
            line = json.dumps(res)
        except (TypeError, ValueError) as exc:
            line = json.dumps({"outcome": "error:HarnessEncode", "message": str(exc), "time": dt})
        proto.write(line + "\n")


# ============================================================================================
# parent side: worker management
# ============================================================================================


class Worker:
    """One isolated worker process; restarted after a timeout, an OOM kill or a crash."""

    def __init__(self, mem_bytes: int, log_dir: Path, isolate: bool = True):
        self.mem_bytes = mem_bytes
        self.isolate = isolate
        self.log_dir = log_dir
        self.proc = None
        self.buf = b""
        self.starts = 0
        self.warm_info = None
        self.warm_total = 0.0
        self.log_path = None

    def _start(self):
        self.starts += 1
        self.log_path = self.log_dir / f"worker-{self.starts}.log"
        env = dict(os.environ)
        env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["PYTHONUNBUFFERED"] = "1"
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([sys.executable, str(WORKER_SCRIPT), "--worker",
                                      "--mem-bytes", str(self.mem_bytes)] + (["--isolate"] if self.isolate else []),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     env=env, cwd=str(ROOT), start_new_session=True)
        self.buf = b""
        self._send({"warmup": True})
        line = self._readline(1800.0)
        if line is None:
            raise RuntimeError(f"worker failed to warm up; log {self.log_path}:\n{self._log_tail()}")
        self.warm_info = json.loads(line)
        self.warm_total += self.warm_info["seconds"]
        if not self.warm_info["file"].startswith(str(ROOT)):
            raise RuntimeError(f"worker imported sgmfast from {self.warm_info['file']}, not {ROOT}")

    def _send(self, obj):
        self.proc.stdin.write((json.dumps(obj) + "\n").encode())
        self.proc.stdin.flush()

    def _readline(self, timeout):
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return "TIMEOUT"
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                return "TIMEOUT"
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()

    def _log_tail(self, n=3000):
        try:
            data = Path(self.log_path).read_bytes()
            return data[-n:].decode(errors="replace")
        except OSError:
            return ""

    def kill(self):
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
            self.proc = None
            self.log.close()

    def _ensure(self):
        if self.proc is None or self.proc.poll() is not None:
            if self.proc is not None:
                self.kill()
            self._start()

    def request(self, job, timeout):
        """Returns (reply dict | None, status) with status in ok/timeout/died."""
        self._ensure()
        t0 = time.monotonic()
        try:
            self._send(job)
        except BrokenPipeError:
            self.kill()
            return None, "died", ""
        line = self._readline(timeout)
        if line == "TIMEOUT":
            self.kill()
            return {"wall": time.monotonic() - t0}, "timeout", ""
        if line is None:
            rc = self.proc.wait()
            tail = self._log_tail()
            self.kill()
            return {"rc": rc, "wall": time.monotonic() - t0}, "died", tail
        return json.loads(line), "ok", ""

    def run(self, spec, timeout):
        rep, status, tail = self.request({"spec": spec}, timeout + 0.25)
        if status == "ok":
            if rep.get("time", 0.0) > timeout and rep["outcome"] == "ok":
                rep = dict(rep, outcome="timeout", slow_but_returned=True)
            if rep["outcome"] == "oom" or (rep.get("exc_type") == "OSError" and "Errno 12" in (rep.get("message") or "")):
                # a worker that has run out of address space stays short of it (its heap does not
                # shrink): the next case gets a fresh one, so one OOM does not make the next ones
                self.kill()
            return rep
        if status == "timeout":
            return {"outcome": "timeout", "time": timeout, "exc_type": None, "message": f"no answer in {timeout:g} s"}
        rc = rep.get("rc") if rep else None
        low = tail.lower()
        oomish = any(s in low for s in ("memoryerror", "bad_alloc", "cannot allocate", "out of memory",
                                        "failed to allocate", "allocation failed", "mmap",
                                        "memory allocation still failed"))  # (OpenBLAS's buffers)
        msg = f"worker died (exit {rc}); log tail: " + " | ".join(tail.strip().splitlines()[-4:])[:600]
        return {"outcome": "oom" if oomish else "crash", "time": rep.get("wall") if rep else None,
                "exc_type": None, "message": msg}

    def ref(self, queries, timeout=120.0):
        rep, status, tail = self.request({"ref": True, "queries": queries}, timeout)
        if status != "ok":
            return None, f"reference job {status}"
        if not rep["ok"]:
            return None, rep["message"]
        return rep["values"], None


# ============================================================================================
# sampler
# ============================================================================================


def lu(r, lo, hi):
    return math.exp(r.uniform(math.log(lo), math.log(hi)))


def pick(r, table):
    tot = sum(w for w, _ in table)
    x = r.uniform(0, tot)
    for w, v in table:
        x -= w
        if x <= 0:
            return v(r) if callable(v) else v
    v = table[-1][1]
    return v(r) if callable(v) else v


SIGMA = [(7, 0.0), (3, 1e-3), (3, 1e6), (2, 2e8), (2, 7e8), (2, INF),
         (46, lambda r: lu(r, 1e-3, 1e9)), (35, lambda r: lu(r, 0.3, 30.0))]
Q = [(6, 0.0), (15, 1.0), (4, 1 - 1e-12), (55, lambda r: lu(r, 1e-9, 1.0)), (20, lambda r: lu(r, 1e-4, 0.1))]
STEPS = [(5, 0), (15, 1), (5, 2), (5, 10**7), (70, lambda r: int(round(lu(r, 1.0, 1e7))))]
DELTA = [(8, 1e-30), (50, lambda r: min(lu(r, 1e-30, 1.0), 0.999999)), (20, lambda r: lu(r, 1e-10, 1e-3)),
         (6, 0.5), (5, 0.99), (4, 1 - 1e-12), (2, 1e-5)]
EPS = [(8, 0.0), (5, 1e-12), (60, lambda r: lu(r, 1e-8, 1e4)), (15, lambda r: lu(r, 0.1, 10.0)),
       (4, 1e30), (4, INF)]
EPS_TARGET = [(94, lambda r: lu(r, 1e-4, 1e2)), (3, 0.0), (3, INF)]
CAL_STEPS = [(3, 0), (20, 1), (5, 2), (5, 10**7), (67, lambda r: int(round(lu(r, 1.0, 1e7))))]
ACCURACY = [(80, None), (20, lambda r: lu(r, 1e-5, 0.5))]

EDGE = {"sigma": SIGMA, "q": Q, "steps": STEPS, "delta": DELTA, "eps": EPS, "eps_target": EPS_TARGET,
        "cal_steps": CAL_STEPS}
# Invalid cases corrupt one parameter of a case drawn from ordinary values, so that the error
# can only come from the corrupted one (an edge value elsewhere could be refused first).
TYPICAL = {"sigma": [(1, lambda r: lu(r, 0.3, 30.0))], "q": [(1, lambda r: lu(r, 1e-4, 0.1))],
           "steps": [(1, lambda r: int(round(lu(r, 2.0, 1e4))))], "delta": [(1, lambda r: lu(r, 1e-10, 1e-3))],
           "eps": [(1, lambda r: lu(r, 0.1, 10.0))], "eps_target": [(1, lambda r: lu(r, 0.5, 10.0))],
           "cal_steps": [(1, lambda r: int(round(lu(r, 2.0, 1e4))))]}

BAD = {
    "sigma": [-1.0, -1e-300, NAN, -INF, "1.0", True, None],
    "q": [-0.1, 1.5, 1.0000000000000002, NAN, INF, -INF, "0.1", True, None],
    "steps": [-1, 2.5, NAN, INF, -INF, "10", True, None],
    "delta": [-1e-5, 1.0, 1.5, NAN, INF, "1e-5", True, None],
    "epsilon": [-1.0, -1e-12, NAN, -INF, "1.0", True, None],
    "accuracy": ["1e-3", -1, NAN, 5.0, 0, 1, True, INF],
    "relation": ["add-remove", "foo", None, 1],
    "accountant": ["PLD", "foo", None],
    "direction": ["max", "foo", None],
    "dataset_size": [0, -1, 2.5, NAN, "100", True, INF],
    "epochs": [-1.0, NAN, INF],
    "orders": [[0.5], [NAN], [1.0], "abc", [INF]],
}


def maybe_np(r, x, kind="float"):
    """Sometimes pass a numpy scalar, or an integral float for an int; the same value."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return x
    u = r.random()
    if u < 0.06:
        return {"__np__": "float64", "v": float(x)}
    if kind == "int" and u < 0.12 and x < 2**53:
        return {"__np__": "int64", "v": int(x)} if r.random() < 0.5 else float(x)
    return x


def val(x):
    """Numeric value of an encoded argument (for the checks)."""
    if isinstance(x, dict) and "__np__" in x:
        return x["v"]
    return x


def draw_segments(r, TB, max_total=10**7):
    n = r.choice([1, 1, 2, 3])
    segs = []
    for _ in range(n):
        if segs and r.random() < 0.25:
            s, q, _t = segs[-1]
        else:
            s, q = pick(r, TB["sigma"]), pick(r, TB["q"])
        t = pick(r, TB["steps"])
        t = min(t, max_total // n)
        segs.append([s, q, t])
    return segs


def sample_case(r: random.Random, entry: str, TB=EDGE) -> dict:
    """A valid case for ``entry`` (invalid ones are made from it by ``corrupt``)."""
    if entry in ("rdp.epsilon", "rdp.delta", "pld.epsilon", "pld.delta"):
        is_eps = entry.endswith("epsilon")
        s, q, t = pick(r, TB["sigma"]), pick(r, TB["q"]), pick(r, TB["steps"])
        if r.random() < 0.1:  # a vector of targets
            xs = sorted(pick(r, TB["delta"] if is_eps else TB["eps"]) for _ in range(r.choice([3, 4])))
            x = xs
        else:
            x = maybe_np(r, pick(r, TB["delta"] if is_eps else TB["eps"]))
        spec = {"entry": entry, "args": [maybe_np(r, s), maybe_np(r, q), maybe_np(r, t, "int"), x], "kwargs": {}}
        if entry.startswith("pld"):
            a = pick(r, ACCURACY)
            if a is not None:
                spec["kwargs"]["accuracy"] = a
            if r.random() < 0.4:
                spec["kwargs"]["relation"] = "replace_one"
            elif r.random() < 0.2:
                spec["kwargs"]["relation"] = "add_remove"
        elif r.random() < 0.1:
            spec["kwargs"]["orders"] = sorted(r.sample([1.25, 1.5, 2.0, 2.5, 3.0, 5.0, 8.0, 16.0, 32.0, 64.0, 256.0],
                                                       r.choice([2, 4, 6])))
        return spec
    if entry in ("rdp.RDPAccountant", "pld.PLDAccountant", "dp_accounting"):
        query = r.choice(["epsilon", "delta"])
        x = pick(r, TB["delta"] if query == "epsilon" else TB["eps"])
        init = {}
        if entry == "pld.PLDAccountant":
            a = pick(r, ACCURACY)
            if a is not None:
                init["accuracy"] = a
            if r.random() < 0.3:
                init["relation"] = "replace_one"
        elif entry == "dp_accounting":
            init["accountant"] = r.choice(["pld", "rdp"])
        elif r.random() < 0.1:
            init["orders"] = [1.5, 2.0, 4.0, 8.0, 32.0]
        spec = {"entry": entry, "init": init, "segments": draw_segments(r, TB), "query": query, "x": x}
        if entry == "dp_accounting":
            spec["segments"] = spec["segments"][:1] if r.random() < 0.6 else spec["segments"]
            for sg in spec["segments"]:  # dp_accounting's own event builder rejects count = 0
                sg[2] = max(1, sg[2])
            spec["bare_gaussian"] = r.random() < 0.5
        return spec
    if entry.startswith("calibrate.") or entry.startswith("analysis."):
        kw = {}
        if entry in ("calibrate.calibrate_sigma", "calibrate.calibrate_q", "calibrate.calibrate_steps",
                     "calibrate.calibrate_batch_size"):
            u = r.random()
            if u < 0.45:
                kw["accountant"] = "rdp"
            elif u < 0.8:
                kw["accountant"] = "pld"
            a = pick(r, ACCURACY)
            if a is not None and kw.get("accountant") != "rdp":
                kw["accuracy"] = a
        e_t, d_t = pick(r, TB["eps_target"]), pick(r, TB["delta"])
        if entry == "calibrate.calibrate_sigma":
            args = [e_t, d_t, pick(r, TB["q"]), pick(r, TB["cal_steps"])]
        elif entry == "calibrate.calibrate_q":
            args = [e_t, d_t, pick(r, TB["sigma"]), pick(r, TB["cal_steps"])]
        elif entry == "calibrate.calibrate_steps":
            args = [e_t, d_t, pick(r, TB["sigma"]), pick(r, TB["q"])]
        elif entry == "calibrate.calibrate_batch_size":
            n = pick(r, [(10, 1), (90, lambda rr: int(round(lu(rr, 1.0, 1e7))))])
            args = [e_t, d_t, pick(r, TB["sigma"]), n]
            if r.random() < 0.5:
                kw["steps"] = pick(r, TB["cal_steps"])
            else:
                kw["epochs"] = lu(r, 0.01, 100.0)
        elif entry == "calibrate.gaussian_sigma":
            args = [e_t, d_t, pick(r, TB["cal_steps"])]
        elif entry == "analysis.one_step_delta":
            args = [pick(r, TB["sigma"]), pick(r, TB["q"]), pick(r, TB["eps"])]
            if r.random() < 0.5:
                kw["direction"] = r.choice(["both", "remove", "add"])
            if r.random() < 0.3:
                kw["log"] = True
        elif entry == "analysis.one_step_sigma":
            args = [pick(r, TB["eps"]), d_t, pick(r, TB["q"])]
            if r.random() < 0.5:
                kw["direction"] = r.choice(["both", "remove", "add"])
        else:
            raise ValueError(entry)
        names = FUNCS[entry]
        args = [maybe_np(r, a, "int" if n in ("steps", "dataset_size") else "float") for a, n in zip(args, names)]
        return {"entry": entry, "args": args, "kwargs": kw}
    if entry == "cli":
        return sample_cli(r, TB)
    raise ValueError(entry)


def fnum(x) -> str:
    if isinstance(x, float):
        return repr(x)
    return str(x)


def _steps_or_epochs(r, argv, meta, steps_table):
    """--steps from the table (4 in 5 cases) or --epochs, appended to argv and recorded in meta."""
    if r.random() < 0.8:
        t = pick(r, steps_table)
        argv += ["--steps", str(t)]
        meta["steps"] = t
    else:
        ep = lu(r, 0.01, 100.0)
        argv += ["--epochs", fnum(ep)]
        meta["epochs"] = ep


def sample_cli(r, TB=EDGE):
    u = r.random()
    if u < 0.6:
        s, d = pick(r, TB["sigma"]), pick(r, TB["delta"])
        argv = ["epsilon", "--sigma", fnum(s)]
        meta = {"cmd": "epsilon", "sigma": s, "delta": d}
        if r.random() < 0.8:
            q = pick(r, TB["q"])
            argv += ["--q", fnum(q)]
            meta["q"] = q
        else:
            n = int(round(lu(r, 1, 1e7)))
            b = max(1, min(n, int(round(lu(r, 1, n))))) if n > 1 else 1
            argv += ["--batch-size", str(b), "--dataset-size", str(n)]
            meta["batch_size"], meta["dataset_size"] = b, n
        _steps_or_epochs(r, argv, meta, TB["steps"])
        argv += ["--delta", fnum(d)]
        acc = r.choice(["pld", "pld", "rdp", None])
        if acc:
            argv += ["--accountant", acc]
        meta["accountant"] = acc or "pld"
        if meta["accountant"] == "pld" and r.random() < 0.35:
            argv += ["--relation", "replace-one"]
            meta["relation"] = "replace_one"
        if meta["accountant"] == "pld" and r.random() < 0.15:
            a = lu(r, 1e-5, 0.5)
            argv += ["--accuracy", fnum(a)]
            meta["accuracy"] = a
    else:
        e, d = pick(r, TB["eps_target"]), pick(r, TB["delta"])
        solve = r.choice(["sigma", "sigma", "batch-size", "epochs"])
        argv = ["calibrate", "--epsilon", fnum(e), "--delta", fnum(d)]
        meta = {"cmd": "calibrate", "solve_for": solve, "epsilon": e, "delta": d}
        if solve != "sigma":
            argv += ["--solve-for", solve]
            s = pick(r, TB["sigma"])
            argv += ["--sigma", fnum(s)]
            meta["sigma"] = s
        if solve in ("sigma", "epochs"):
            q = pick(r, TB["q"])
            argv += ["--q", fnum(q)]
            meta["q"] = q
        if solve == "batch-size":
            n = int(round(lu(r, 1, 1e7)))
            argv += ["--dataset-size", str(n)]
            meta["dataset_size"] = n
        if solve in ("sigma", "batch-size"):
            _steps_or_epochs(r, argv, meta, TB["cal_steps"])
        acc = r.choice(["pld", "rdp", None])
        if acc:
            argv += ["--accountant", acc]
        meta["accountant"] = acc or "rdp"
    return {"entry": "cli", "argv": argv, "meta": meta}


CLI_BAD = {
    "--sigma": ["-1", "nan", "abc", "-inf"],
    "--q": ["-0.1", "1.5", "nan", "abc"],
    "--steps": ["-3", "2.5", "nan", "inf"],
    "--delta": ["0", "1", "1.5", "nan", "-1e-5"],
    "--epsilon": ["-1", "nan", "abc"],
    "--accuracy": ["5", "-1", "nan", "0"],
    "--dataset-size": ["0", "-5", "2.5"],
    "--batch-size": ["0", "-1", "2.5"],
    "--epochs": ["-1", "nan", "inf"],
}


def corrupt(r, spec) -> dict | None:
    """An invalid variant of a valid case: one parameter replaced by a bad value."""
    spec = json.loads(json.dumps(spec))
    e = spec["entry"]
    if e == "cli":
        argv = spec["argv"]
        flags = [i for i, a in enumerate(argv) if a in CLI_BAD]
        u = r.random()
        if u < 0.15:  # drop a required flag and its value
            req = [i for i, a in enumerate(argv) if a in ("--delta", "--sigma", "--epsilon")]
            if req:
                i = r.choice(req)
                name = argv[i]
                if not (name == "--sigma" and argv[0] == "calibrate"):
                    del argv[i:i + 2]
                    spec["invalid_param"] = name.lstrip("-")
                    return spec
        if u < 0.25 and argv[0] == "epsilon" and "--accountant" not in argv:
            argv += ["--accountant", "rdp", "--relation", "replace-one"]
            spec["invalid_param"] = "relation"
            return spec
        if not flags:
            return None
        i = r.choice(flags)
        argv[i + 1] = r.choice(CLI_BAD[argv[i]])
        spec["invalid_param"] = argv[i].lstrip("-")
        spec["bad_value"] = argv[i + 1]
        return spec
    if e in FUNCS:
        names = list(FUNCS[e])
        kw_names = {"pld.epsilon": ["accuracy", "relation"], "pld.delta": ["accuracy", "relation"],
                    "rdp.epsilon": ["orders"], "rdp.delta": ["orders"],
                    "analysis.one_step_delta": ["direction"], "analysis.one_step_sigma": ["direction"],
                    "calibrate.gaussian_sigma": []}.get(e, ["accountant", "accuracy"])
        if e == "calibrate.calibrate_batch_size":
            kw_names = ["accountant", "epochs"]
        choices = names * 3 + kw_names
        p = r.choice(choices)
        # (relation=None is the sampler's own relation for pld.epsilon / pld.delta, as documented)
        bad = r.choice([v for v in BAD[p] if not (p == "relation" and v is None)])
        if p in names:
            spec["args"][names.index(p)] = bad
        else:
            if p == "epochs":
                spec["kwargs"].pop("steps", None)
            spec["kwargs"][p] = bad
        spec["invalid_param"] = p
        spec["bad_value"] = bad
        return spec
    # accountants: a bad step argument, a bad query or a bad constructor argument
    u = r.random()
    if u < 0.6:
        k = r.randrange(len(spec["segments"]))
        j = r.randrange(3)
        p = ["sigma", "q", "steps"][j]
        bad = r.choice(BAD[p])
        if e == "dp_accounting":
            if p == "steps" or bad is None or isinstance(bad, (str, bool)):
                return None
            spec["expect_any_error"] = True  # dp_accounting reports bad events its own way
        spec["segments"][k][j] = bad
        spec["bad_value"] = bad
        spec["invalid_param"] = p if e != "dp_accounting" else ("noise_multiplier" if p == "sigma" else "sampling_probability")
        return spec
    if u < 0.85 or e == "rdp.RDPAccountant":
        p = "delta" if spec["query"] == "epsilon" else "epsilon"
        spec["x"] = spec["bad_value"] = r.choice(BAD[p])
        spec["invalid_param"] = p
        if e == "dp_accounting":
            return None  # the adapter leaves query validation to sgmfast; keep it simple
        return spec
    if e == "pld.PLDAccountant":
        p = r.choice(["accuracy", "relation"])
        spec["init"][p] = spec["bad_value"] = r.choice(BAD[p])
        spec["invalid_param"] = p
        return spec
    return None


def build_cases(n, seed, only, weights, sample, corrupt_fn, typical, edge, invalid_share, prefix=""):
    """n cases drawn from the entry table ``weights`` (``only``: name prefixes to keep); a share
    ``invalid_share`` of them corrupted by ``corrupt_fn`` from a ``typical`` draw, the rest drawn
    from ``edge``; case i's generator is seeded "{prefix}{seed}:{i}" (reproducible one by one)."""
    names = [k for k in weights if not only or any(k.startswith(o) for o in only)]
    if not names:
        raise SystemExit(f"--only {only} matches no entry point; entries: {list(weights)}")
    table = [(weights[k], k) for k in names]
    cases = []
    for i in range(n):
        r = random.Random(f"{prefix}{seed}:{i}")
        entry = pick(r, table)
        invalid = r.random() < invalid_share
        spec = sample(r, entry, typical if invalid else edge)
        spec["valid"] = True
        if invalid:
            bad = corrupt_fn(r, spec)
            if bad is not None:
                spec = bad
                spec["valid"] = False
        spec["id"] = i
        spec["rng"] = f"{prefix}{seed}:{i}"
        cases.append(spec)
    return cases


def make_cases(n, seed, only):
    return build_cases(n, seed, only, ENTRY_WEIGHTS, sample_case, corrupt, TYPICAL, EDGE, 0.1)


# ============================================================================================
# truth models and checks (parent side)
# ============================================================================================

import mpmath  # noqa: E402

mpmath.mp.dps = 50


def mpf(x):
    return mpmath.mpf(x) if math.isfinite(x) else (mpmath.inf if x > 0 else -mpmath.inf)


def model_of(relation, segments):
    """Truth model of a schedule of valid (sigma, q, T) segments (floats)."""
    c = 2 if relation == "replace_one" else 1
    active = [(s, q, t) for s, q, t in segments if q > 0 and t > 0 and s < INF]
    if not active:
        return {"kind": "zero"}
    noiseless = [(s, q, t) for s, q, t in active if s == 0]
    noisy = [(s, q, t) for s, q, t in active if s > 0]
    d0 = None
    if noiseless:
        log_keep = mpmath.mpf(0)
        for s, q, t in noiseless:
            log_keep += mpmath.mpf(t) * mpmath.log1p(-mpmath.mpf(q))
        d0 = -mpmath.expm1(log_keep)
        return {"kind": "const" if not noisy else "atleast", "D0": d0}
    if all(q == 1.0 for s, q, t in noisy):
        return {"kind": "gauss", "c": c, "segs": [[s, t] for s, q, t in noisy]}
    if len(noisy) == 1 and noisy[0][2] == 1:
        s, q, _ = noisy[0]
        return {"kind": "onestep", "q": q, "sigma": s, "direction": "replace" if c == 2 else "max"}
    if sum(t for _, _, t in noisy) == 1:  # unreachable with merged segments, kept for clarity
        return {"kind": None}
    return {"kind": None}


class Refs:
    """Exact delta*(eps) for a model, from the worker's mpmath module (cached per run)."""

    def __init__(self, worker, available):
        self.worker = worker
        self.available = available
        self.cache = {}
        self.errors = []

    def delta_at(self, model, eps_list):
        """list of mpf (or None where unavailable) = exact delta(eps) for each eps."""
        kind = model["kind"]
        out = [None] * len(eps_list)
        todo = []
        for i, e in enumerate(eps_list):
            if e is None or (isinstance(e, float) and math.isnan(e)):
                continue
            if kind == "zero":
                out[i] = mpmath.mpf(0)
            elif kind == "const":
                out[i] = model["D0"]
            elif kind in ("gauss", "onestep"):
                if e == INF:
                    out[i] = mpmath.mpf(0)
                    continue
                if kind == "gauss":
                    qy = {"f": "gaussian_delta", "c": model["c"], "segs": model["segs"], "eps": float(e)}
                    if model.get("div", 1) != 1:
                        qy["div"] = model["div"]
                else:
                    qy = {"f": "one_step_delta", "q": model["q"], "sigma": model["sigma"], "eps": float(e),
                          "direction": model["direction"]}
                key = json.dumps(qy, sort_keys=True)
                if key in self.cache:
                    out[i] = self.cache[key]
                else:
                    todo.append((i, key, qy))
        if todo and self.available:
            vals, err = self.worker.ref([qy for _, _, qy in todo])
            if vals is None:
                self.errors.append(err)
            else:
                for (i, key, _), v in zip(todo, vals):
                    self.cache[key] = out[i] = mpmath.mpf(v)
        return out

    def eps_exact(self, model, delta):
        """exact eps*(delta) for the report (None if unavailable)."""
        if not self.available or model["kind"] not in ("gauss", "onestep"):
            return None
        if model["kind"] == "gauss":
            qy = {"f": "gaussian_epsilon", "c": model["c"], "segs": model["segs"], "delta": delta, "eps": 0.0}
            if model.get("div", 1) != 1:
                qy["div"] = model["div"]
        else:
            qy = {"f": "one_step_epsilon", "q": model["q"], "sigma": model["sigma"], "delta": delta,
                  "direction": model["direction"], "eps": 0.0}
        vals, err = self.worker.ref([qy], timeout=60.0)
        return None if vals is None else vals[0]


def fnum_s(x):
    if isinstance(x, mpmath.mpf):
        return mpmath.nstr(x, 17)
    return repr(x)


class Case:
    def __init__(self, spec):
        self.spec = spec
        self.failures = []  # (class, detail)
        self.warnings = []
        self.notes = []
        self.followups = []
        self.checks = []  # names of the checks performed (for the summary's coverage table)

    def fail(self, cls, detail):
        self.failures.append({"class": cls, "detail": detail})

    def warn(self, cls, detail):
        self.warnings.append({"class": cls, "detail": detail})


def as_list(x):
    if isinstance(x, list):
        return x
    return [x]


def isnum(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def bounds_of(value):
    """(lower list | None, upper list) from a returned value; None if not understood."""
    if isinstance(value, dict) and value.get("__bounds__"):
        return as_list(value["lower"]), as_list(value["upper"])
    if isinstance(value, list) and len(value) == 2 and not isinstance(value[0], list) and False:
        return None
    if isnum(value):
        return None, [float(value)]
    if isinstance(value, list) and all(isnum(v) for v in value):
        return None, [float(v) for v in value]
    return None


def _lengths_ok(case, n, lo, up, what):
    if len(up) != n or (lo is not None and len(lo) != n):
        case.fail("bad-output", f"{what}: {n} targets but {len(up)} values")
        return False
    return True


def _numeric_pairs(case, targets, lo, up, what, name):
    """(index, tag, lower or None, upper) of each target whose bounds are numbers; the others
    are recorded as bad output (the lengths are checked by ``_lengths_ok`` first)."""
    n = len(targets)
    for i in range(n):
        u = up[i]
        l = lo[i] if lo is not None else None
        tag = f"{what}[{name}={targets[i]!r}]" if n > 1 else what
        if not isnum(u) or math.isnan(u) or (l is not None and (not isnum(l) or math.isnan(l))):
            case.fail("bad-output", f"{tag}: NaN or non-number (lower={l!r}, upper={u!r})")
            continue
        yield i, tag, l, u


def check_eps_result(case, refs, model, deltas, lo, up, what, exact_ok=True):
    """lo/up lists (lo may be None): bounds on eps*(delta) for each delta."""
    n = len(deltas)
    if not _lengths_ok(case, n, lo, up, what):
        return
    for i, tag, l, u in _numeric_pairs(case, deltas, lo, up, what, "delta"):
        if u < 0 or (l is not None and l < 0):
            case.fail("bad-output", f"{tag}: negative eps (lower={l!r}, upper={u!r})")
        if l is not None and l > u:
            case.fail("lower>upper", f"{tag}: lower {l!r} > upper {u!r}")
    kind = model["kind"]
    if kind is None:
        return
    if kind == "zero":
        for i in range(n):
            if lo is not None and isnum(lo[i]) and lo[i] > 0:
                case.fail("wrong-side lower", f"{what}: truth eps = 0 (nothing to account) but lower = {lo[i]!r}")
        return
    if kind in ("const", "atleast"):
        d0 = model["D0"]
        for i in range(n):
            d = mpf(deltas[i])
            if d < d0 and isnum(up[i]) and up[i] < INF:
                case.fail("finite-where-inf", f"{what}: noiseless steps, delta={deltas[i]!r} < D0={fnum_s(d0)} "
                                              f"so eps = +inf, but upper = {up[i]!r}")
            if kind == "const" and d >= d0 and lo is not None and isnum(lo[i]) and lo[i] > 0:
                case.fail("wrong-side lower", f"{what}: noiseless steps, delta >= D0={fnum_s(d0)} so eps = 0, "
                                              f"but lower = {lo[i]!r}")
        return
    if not exact_ok:
        return
    pts = []
    for i in range(n):
        if isnum(up[i]) and not math.isnan(up[i]) and up[i] < INF:
            pts.append(("upper", i, up[i]))
        if lo is not None and isnum(lo[i]) and not math.isnan(lo[i]) and lo[i] > 0:
            pts.append(("lower", i, lo[i]))
    if not pts:
        return
    vals = refs.delta_at(model, [p[2] for p in pts])
    if any(v is not None for v in vals):
        case.checks.append(f"exact {kind}")
    for (side, i, e), dstar in zip(pts, vals):
        if dstar is None:
            case.notes.append("exact reference unavailable" if refs.available else "exact reference module missing")
            continue
        d = mpf(deltas[i])
        if side == "upper" and dstar > d:
            case.fail("wrong-side upper (exact)",
                      f"{what}: upper eps {e!r} < exact eps: exact delta(upper) = {fnum_s(dstar)} > delta = "
                      f"{deltas[i]!r} [{kind}]")
            case.need_exact_eps = (model, deltas[i])
        if side == "lower" and dstar < d:
            case.fail("wrong-side lower (exact)",
                      f"{what}: lower eps {e!r} > exact eps: exact delta(lower) = {fnum_s(dstar)} < delta = "
                      f"{deltas[i]!r} [{kind}]")
            case.need_exact_eps = (model, deltas[i])


def check_delta_result(case, refs, model, epss, lo, up, what):
    n = len(epss)
    if not _lengths_ok(case, n, lo, up, what):
        return
    for i, tag, l, u in _numeric_pairs(case, epss, lo, up, what, "eps"):
        if not (0 <= u <= 1) or (l is not None and not (0 <= l <= 1)):
            case.fail("bad-output", f"{tag}: delta outside [0, 1] (lower={l!r}, upper={u!r})")
        if l is not None and l > u:
            case.fail("lower>upper", f"{tag}: lower {l!r} > upper {u!r}")
    kind = model["kind"]
    if kind is None or kind == "atleast":
        if kind == "atleast":
            for i in range(n):
                if isnum(up[i]) and mpf(up[i]) < model["D0"]:
                    case.fail("wrong-side upper (exact)", f"{what}: noiseless steps give delta >= D0 = "
                                                          f"{fnum_s(model['D0'])}, but upper = {up[i]!r}")
        return
    if kind in ("gauss", "onestep") and not refs.available:
        case.notes.append("exact reference module missing")
        return
    vals = refs.delta_at(model, [float(e) for e in epss])
    if any(v is not None for v in vals):
        case.checks.append(f"exact {kind}")
    for i, dstar in enumerate(vals):
        if dstar is None:
            case.notes.append("exact reference unavailable")
            continue
        if isnum(up[i]) and up[i] == 0 and 0 < dstar < mpmath.mpf("1e-300"):
            case.fail("wrong-side upper (underflow)", f"{what}: upper delta 0.0 < exact {fnum_s(dstar)} "
                                                      f"at eps={epss[i]!r} [{kind}]; the float answer is 5e-324")
        elif isnum(up[i]) and not math.isnan(up[i]) and mpf(up[i]) < dstar:
            case.fail("wrong-side upper (exact)", f"{what}: upper delta {up[i]!r} < exact {fnum_s(dstar)} "
                                                  f"at eps={epss[i]!r} [{kind}]")
        if lo is not None and isnum(lo[i]) and not math.isnan(lo[i]) and mpf(lo[i]) > dstar:
            case.fail("wrong-side lower (exact)", f"{what}: lower delta {lo[i]!r} > exact {fnum_s(dstar)} "
                                                  f"at eps={epss[i]!r} [{kind}]")


def monotone_warn(case, xs, ys, increasing_truth: bool, what, certified_lo=None):
    """ys (upper bounds) along sorted xs; truth non-increasing (or non-decreasing) in x."""
    pairs = sorted(zip(xs, range(len(xs))))
    for (x1, i1), (x2, i2) in zip(pairs, pairs[1:]):
        y1, y2 = ys[i1], ys[i2]
        if not (isnum(y1) and isnum(y2)) or x1 == x2:
            continue
        bad = (y2 < y1) if increasing_truth else (y2 > y1)
        if bad:
            case.fail("non-monotone within one call", f"{what}: {y1!r} at {x1!r} then {y2!r} at {x2!r}")
        if certified_lo is not None:
            l1, l2 = certified_lo[i1], certified_lo[i2]
            # truth non-increasing in x: lower(x2) <= truth(x2) <= truth(x1) <= upper(x1)
            if not increasing_truth and isnum(l2) and l2 > y1:
                case.fail("certified contradiction", f"{what}: lower {l2!r} at {x2!r} > upper {y1!r} at {x1!r}"
                                                     " although the truth is non-increasing")


def relation_of(spec):
    if spec["entry"] == "pld.PLDAccountant":
        return spec.get("init", {}).get("relation", "add_remove")
    return spec.get("kwargs", {}).get("relation", "add_remove")


def accuracy_of(spec):
    if spec["entry"] == "pld.PLDAccountant":
        return spec.get("init", {}).get("accuracy", 1e-3)
    return spec.get("kwargs", {}).get("accuracy", 1e-3)


def check_valid_ok(case, res, refs, runner):
    """Checks of an ok result of a valid case; may run follow-up calls through ``runner``."""
    spec = case.spec
    e = spec["entry"]
    if e in EXTENSIONS:
        EXTENSIONS[e].check_valid(case, res, refs, runner)
        return
    v = res.get("value")
    if e in ("rdp.epsilon", "rdp.delta", "pld.epsilon", "pld.delta"):
        s, q, t = (float(val(a)) for a in spec["args"][:3])
        x = spec["args"][3]
        xs = [float(val(a)) for a in as_list(x)]
        model = model_of(relation_of(spec) if e.startswith("pld") else "add_remove", [(s, q, t)])
        b = bounds_of(v)
        if b is None:
            case.fail("bad-output", f"{e}: unexpected return value {str(v)[:200]}")
            return
        lo, up = b
        if e.endswith("epsilon"):
            check_eps_result(case, refs, model, xs, lo, up, e)
        else:
            check_delta_result(case, refs, model, xs, lo, up, e)
        if len(xs) > 1:
            monotone_warn(case, xs, up, False, e, certified_lo=lo)
        if e.startswith("pld") and lo is not None and len(xs) == 1:
            acc = accuracy_of(spec)
            if e == "pld.epsilon" and isnum(up[0]) and math.isfinite(up[0]) and up[0] - lo[0] > acc * up[0] * (1 + 1e-9):
                case.warn("accuracy not met", f"{e}: width {up[0] - lo[0]:.3g} > accuracy {acc:g} x upper {up[0]:.6g}"
                                              f" (T={t:g})")
            followups_pld(case, res, refs, runner, s, q, t, xs[0], lo[0], up[0])
        elif e.startswith("rdp") and len(xs) == 1:
            followups_rdp(case, res, runner, s, q, t, xs[0], up[0])
        return
    if e in ("rdp.RDPAccountant", "pld.PLDAccountant", "dp_accounting"):
        segs = [[float(val(a)) for a in sg] for sg in spec["segments"]]
        model = model_of(relation_of(spec) if e == "pld.PLDAccountant" else "add_remove", segs)
        if e == "dp_accounting" and spec["query"] == "delta" and any(sg[0] == 0 and sg[1] > 0 and sg[2] > 0
                                                                     for sg in segs):
            pass  # the adapter reports delta = 1 for a noiseless step: a valid (loose) upper bound
        b = bounds_of(v)
        if b is None:
            case.fail("bad-output", f"{e}: unexpected return value {str(v)[:200]}")
            return
        lo, up = b
        x = float(val(spec["x"]))
        if spec["query"] == "epsilon":
            check_eps_result(case, refs, model, [x], lo, up, f"{e}.epsilon")
        else:
            check_delta_result(case, refs, model, [x], lo, up, f"{e}.delta")
        return
    if e.startswith("calibrate."):
        check_calibration(case, res, refs, runner)
        return
    if e == "analysis.one_step_delta":
        check_one_step_delta(case, res, refs)
        return
    if e == "analysis.one_step_sigma":
        check_one_step_sigma(case, res, refs)
        return
    if e == "cli":
        check_cli_valid(case, res, refs)
        return


def followups_pld(case, res, refs, runner, s, q, t, x, lo, up):
    spec = case.spec
    e = spec["entry"]
    rel = relation_of(spec)
    acc = accuracy_of(spec)
    r = random.Random(spec.get("rng", "") + ":followup")
    cheap = (res.get("time") or 0) < 3.0
    kw = {k: spec["kwargs"][k] for k in ("accuracy", "relation") if k in spec["kwargs"]}
    # RDP cross-check (add/remove): both are certified, so rdp < pld lower is a contradiction.
    if rel == "add_remove" and 0 < s <= 1e5 and q > 0 and t > 0 and cheap:
        fn = "rdp.epsilon" if e == "pld.epsilon" else "rdp.delta"
        fr = runner({"entry": fn, "args": [s, q, t, x]})
        case.checks.append("rdp cross-check")
        if fr["outcome"] == "ok" and isnum(fr["value"]):
            rv = float(fr["value"])
            if isnum(lo) and lo > rv:
                case.fail("certified contradiction", f"{e} lower {lo!r} > {fn} {rv!r} (RDP is an upper bound)")
            if isnum(up) and up > rv * (1 + 1e-9) and up - rv > 1e-300:
                case.warn("pld upper > rdp", f"{e} upper {up!r} > {fn} {rv!r} (PLD is documented as capped by RDP)")
        else:
            case.notes.append(f"rdp cross-check: {fr['outcome']}")
    # eps/delta consistency: delta(upper eps) <= delta, so its certified lower bound must be too.
    if e == "pld.epsilon" and isnum(up) and 0 < up < INF and cheap and r.random() < 0.3:
        fr = runner({"entry": "pld.delta", "args": [s, q, t, up], "kwargs": kw})
        case.checks.append("eps/delta consistency")
        if fr["outcome"] == "ok" and isinstance(fr["value"], dict):
            dlo, dup = fr["value"]["lower"], fr["value"]["upper"]
            if isnum(dlo) and dlo > x:
                case.fail("certified contradiction", f"pld.delta at the upper eps {up!r} has lower {dlo!r} > "
                                                     f"delta = {x!r}")
            if isnum(dup) and dup > x * (1 + 10 * acc * max(1.0, up)):
                case.warn("eps/delta inconsistent", f"pld.delta at the upper eps {up!r} has upper {dup!r} vs delta "
                                                    f"{x!r} (ratio {dup / x:.4g})")
        else:
            case.notes.append(f"eps/delta consistency: {fr['outcome']}")
    # monotonicity in sigma, q, T
    if cheap and r.random() < 0.15 and isnum(up) and isnum(lo):
        moved = _moved_args(r, s, q, t, x)
        if moved is None:
            return
        which, a2, up_truth = moved
        fr = runner({"entry": e, "args": a2, "kwargs": kw})
        case.checks.append("monotonicity pair")
        if fr["outcome"] == "ok" and isinstance(fr["value"], dict):
            lo2, up2 = fr["value"]["lower"], fr["value"]["upper"]
            # the truth moves up (q, T) or down (sigma) in both eps(delta) and delta(eps)
            if up_truth:
                if isnum(up2) and lo > up2:
                    case.fail("certified contradiction", f"{e}: lower {lo!r} > upper {up2!r} at {which} increased "
                                                         f"({a2[:3]}) although the truth is non-decreasing")
                if isnum(up2) and up2 < up * (1 - 1e-12):
                    case.warn("non-monotone", f"{e}: upper {up!r} -> {up2!r} when {which} increases to {a2[:3]}")
            else:
                if isnum(lo2) and lo2 > up:
                    case.fail("certified contradiction", f"{e}: lower {lo2!r} at sigma x1.25 > upper {up!r}")
                if isnum(up2) and up2 > up * (1 + 1e-12):
                    case.warn("non-monotone", f"{e}: upper {up!r} -> {up2!r} when sigma increases to {a2[0]!r}")
        else:
            case.notes.append(f"monotonicity companion: {fr['outcome']}")


def _moved_args(r, s, q, t, x):
    """A monotonicity companion: (which, the arguments with sigma, q or T increased, whether the
    truth then increases), or None when the chosen parameter cannot move."""
    which = r.choice(["sigma", "q", "T"])
    if which == "sigma" and 0 < s < INF:
        return which, [s * 1.25, q, t, x], False
    if which == "q" and 0 < q < 1:
        return which, [s, min(1.0, q * 1.25), t, x], True
    if which == "T" and 0 < t < 10**7:
        return which, [s, q, min(10**7, 2 * int(t)), x], True
    return None


def followups_rdp(case, res, runner, s, q, t, x, up):
    spec = case.spec
    e = spec["entry"]
    r = random.Random(spec.get("rng", "") + ":followup")
    if (res.get("time") or 0) > 3.0 or not isnum(up) or r.random() >= 0.15:
        return
    moved = _moved_args(r, s, q, t, x)
    if moved is None:
        return
    which, a2, up_truth = moved
    fr = runner({"entry": e, "args": a2, "kwargs": spec.get("kwargs", {})})
    case.checks.append("monotonicity pair")
    if fr["outcome"] == "ok" and isnum(fr["value"]):
        up2 = float(fr["value"])
        if (up_truth and up2 < up * (1 - 1e-12)) or (not up_truth and up2 > up * (1 + 1e-12)):
            case.warn("non-monotone", f"{e}: {up!r} -> {up2!r} when {which} changes to {a2[:3]}")


def check_calibration(case, res, refs, runner):
    spec = case.spec
    e = spec["entry"]
    kw = spec.get("kwargs", {})
    a = [val(x) for x in spec["args"]]
    v = res.get("value")
    accountant = kw.get("accountant", "pld")
    acc = kw.get("accuracy", 1e-3)
    eps_t, delta_t = float(a[0]), float(a[1])
    if not isnum(v) or math.isnan(v):
        case.fail("bad-output", f"{e}: returned {v!r}")
        return
    if e in ("calibrate.calibrate_sigma", "calibrate.gaussian_sigma"):
        sigma = float(v)
        q = float(a[2]) if e == "calibrate.calibrate_sigma" else 1.0
        t = float(a[3]) if e == "calibrate.calibrate_sigma" else float(a[2]) if len(a) > 2 else 1.0
        if sigma < 0:
            case.fail("bad-output", f"{e}: negative sigma {sigma!r}")
            return
    elif e == "calibrate.calibrate_q":
        sigma, t = float(a[2]), float(a[3])
        q = float(v)
        if not (0 <= q <= 1):
            case.fail("bad-output", f"{e}: q = {q!r} outside [0, 1]")
            return
    elif e == "calibrate.calibrate_steps":
        sigma, q = float(a[2]), float(a[3])
        t = float(v)
        if t < 0 or t != math.floor(t):
            case.fail("bad-output", f"{e}: steps = {v!r}")
            return
    elif e == "calibrate.calibrate_batch_size":
        sigma, n = float(a[2]), int(a[3])
        b = v
        if not isinstance(b, int) or not (0 <= b <= n):
            case.fail("bad-output", f"{e}: batch size {b!r} not an integer in [0, {n}]")
            return
        q = b / n
        if "steps" in kw:
            t = float(val(kw["steps"]))
        else:
            t = float(math.ceil(float(kw["epochs"]) * n / b - 1e-9)) if b > 0 else 0.0
    else:
        return
    if eps_t == INF:
        return  # every parameter meets eps = inf
    model = model_of("add_remove", [(sigma, q, t)])
    # exact: delta*(eps_target) at the returned parameter must be <= delta_target
    if model["kind"] is not None and not (model["kind"] in ("gauss", "onestep") and not refs.available):
        (dstar,) = refs.delta_at(model, [eps_t]) if model["kind"] != "atleast" else [None]
        if model["kind"] == "atleast":
            dstar = model["D0"]
        if dstar is None:
            case.notes.append("exact reference unavailable")
        else:
            case.checks.append(f"exact {model['kind']}")
        if dstar is not None and dstar > mpf(delta_t):
            case.fail("calibration not private (exact)",
                      f"{e} -> {v!r}: exact delta(eps={eps_t!r}) = {fnum_s(dstar)} > delta = {delta_t!r} "
                      f"[{model['kind']}; sigma={sigma!r}, q={q!r}, T={t:g}]")
    elif model["kind"] in ("gauss", "onestep"):
        case.notes.append("exact reference module missing")
    # the public accountant at the returned value
    if e == "calibrate.gaussian_sigma" or model["kind"] in ("zero", "const", "atleast") or t == 0:
        return
    if accountant == "rdp":
        fr = runner({"entry": "rdp.epsilon", "args": [sigma, q, t, delta_t]})
        got = float(fr["value"]) if fr["outcome"] == "ok" and isnum(fr["value"]) else None
    else:
        fr = runner({"entry": "pld.epsilon", "args": [sigma, q, t, delta_t], "kwargs": {"accuracy": acc}})
        got = float(fr["value"]["upper"]) if fr["outcome"] == "ok" and isinstance(fr["value"], dict) else None
    case.checks.append("calibration re-check")
    if got is None:
        case.notes.append(f"accountant re-check: {fr['outcome']} {fr.get('message', '')[:100]}")
    elif got > eps_t:
        case.fail("calibration over target (accountant)",
                  f"{e} -> {v!r}: {accountant}.epsilon upper there = {got!r} > target {eps_t!r}")


def check_one_step_delta(case, res, refs):
    spec = case.spec
    sigma, q, eps = (float(val(x)) for x in spec["args"])
    kw = spec.get("kwargs", {})
    direction = {"both": "max", "remove": "remove", "add": "add"}[kw.get("direction", "both")]
    log = kw.get("log", False)
    v = res.get("value")
    if not isnum(v) or math.isnan(v):
        case.fail("bad-output", f"one_step_delta returned {v!r}")
        return
    if not log and not (0 <= v <= 1):
        case.fail("bad-output", f"one_step_delta = {v!r} outside [0, 1]")
    if log and v > 0:
        case.fail("bad-output", f"one_step_delta(log=True) = {v!r} > 0")
    # exact value
    if q == 0 or sigma == INF or (eps == INF and sigma > 0):
        ref = mpmath.mpf(0)
    elif sigma == 0:
        # no noise: a sampled record is revealed (loss +inf with probability q), so delta = q
        # at every eps, +inf included (the mass at +inf; tests/reference/mp_exact.py agrees)
        rem = mpmath.mpf(q)
        add = max(mpmath.mpf(0), 1 - mpmath.exp(mpf(eps)) * (1 - mpmath.mpf(q)))
        ref = {"remove": rem, "add": add, "max": max(rem, add)}[direction]
    elif not refs.available:
        case.notes.append("exact reference module missing")
        return
    else:
        (ref,) = refs.delta_at({"kind": "onestep", "q": q, "sigma": sigma, "direction": direction}, [eps])
        if ref is None:
            case.notes.append("exact reference unavailable")
            return
    case.checks.append("exact analysis")
    if log:
        if ref == 0:
            if v != -INF:
                case.fail("analysis inexact", f"one_step_delta(log=True) = {v!r}, exact log delta = -inf")
            return
        lref = mpmath.log(ref)
        if v == -INF or abs(mpf(v) - lref) > 1e-8 * max(1, abs(lref)):
            case.fail("analysis inexact", f"one_step_delta(log=True) = {v!r}, exact {fnum_s(lref)}")
        return
    if ref == 0:
        if v != 0:
            case.fail("analysis inexact", f"one_step_delta = {v!r}, exact 0")
        return
    if ref < mpmath.mpf("1e-300"):  # below the float range of a plain delta
        if v > 1e-290:
            case.fail("analysis inexact", f"one_step_delta = {v!r}, exact {fnum_s(ref)}")
        return
    rel = abs(mpf(v) - ref) / ref
    if rel > 1e-8:
        case.fail("analysis inexact", f"one_step_delta = {v!r}, exact {fnum_s(ref)} (relative error {float(rel):.2g})")


def check_one_step_sigma(case, res, refs):
    spec = case.spec
    eps, delta, q = (float(val(x)) for x in spec["args"])
    kw = spec.get("kwargs", {})
    direction = {"both": "max", "remove": "remove", "add": "add"}[kw.get("direction", "both")]
    v = res.get("value")
    if not isnum(v) or math.isnan(v) or v < 0:
        case.fail("bad-output", f"one_step_sigma returned {v!r}")
        return
    sigma = float(v)
    if q == 0 or sigma == INF or eps == INF:
        return
    if sigma == 0:
        rem = mpmath.mpf(q)
        add = max(mpmath.mpf(0), 1 - mpmath.exp(mpf(eps)) * (1 - mpmath.mpf(q)))
        d0 = {"remove": rem, "add": add, "max": max(rem, add)}[direction]
        if d0 > mpf(delta):
            case.fail("calibration not private (exact)", f"one_step_sigma = 0 but delta at sigma=0 is "
                                                         f"{fnum_s(d0)} > {delta!r}")
        return
    if not refs.available:
        case.notes.append("exact reference module missing")
        return
    (d,) = refs.delta_at({"kind": "onestep", "q": q, "sigma": sigma, "direction": direction}, [eps])
    case.checks.append("exact analysis")
    if d is None:
        case.notes.append("exact reference unavailable")
    elif d > mpf(delta):
        case.fail("calibration not private (exact)", f"one_step_sigma = {sigma!r}: exact delta there = {fnum_s(d)} > "
                                                     f"{delta!r} (relative excess {float(d / mpf(delta) - 1):.2g})")


_NUM = r"([-+]?(?:inf|nan|\d[\d.]*(?:e[-+]?\d+)?))"


def _cli_value(text, label):
    m = re.search(rf"^{re.escape(label)}: {_NUM}\s*$", text, re.M)
    return float(m.group(1)) if m else None


def cli_q_steps(meta):
    q = meta.get("q")
    if q is None:
        q = meta["batch_size"] / meta["dataset_size"]
    if "steps" in meta:
        t = float(meta["steps"])
    else:
        t = float(math.ceil(meta["epochs"] / q - 1e-9))
    return q, t


def check_cli_valid(case, res, refs):
    spec = case.spec
    v = res["value"]
    meta = spec["meta"]
    if v["exit"] != 0:
        lines = v["stderr"].strip().splitlines()
        oom = v["exit"] == 1 and "out of memory" in v["stderr"]
        case.fail("refusal (valid input)" if v["exit"] == 2 else "oom" if oom else "crash (exception)",
                  f"cli exit {v['exit']}: {(lines[-1] if lines else '')[:300]}")
        case.cli_error = lines[-1] if lines else ""
        return
    out = v["stdout"]
    if meta["cmd"] == "epsilon":
        q, t = cli_q_steps(meta)
        up = _cli_value(out, "epsilon")
        lo = _cli_value(out, "epsilon lower bound")
        if up is None:
            case.fail("bad-output", f"cli: no 'epsilon:' line in {out[:200]!r}")
            return
        model = model_of(meta.get("relation", "add_remove"), [(meta["sigma"], q, t)])
        check_eps_result(case, refs, model, [meta["delta"]], None if lo is None else [lo], [up], "cli epsilon")
    else:
        sig = _cli_value(out, "sigma")
        up = _cli_value(out, "epsilon")
        if up is not None and meta["epsilon"] < INF and up > meta["epsilon"] * (1 + 1e-5):
            case.fail("calibration over target (accountant)", f"cli calibrate prints epsilon {up!r} > target "
                                                              f"{meta['epsilon']!r}")
        if meta["solve_for"] == "sigma" and sig is not None and meta["epsilon"] < INF:
            q, t = cli_q_steps(meta)
            model = model_of("add_remove", [(sig, q, t)])
            if model["kind"] in ("gauss", "onestep", "const", "zero") and (refs.available or model["kind"] in ("const", "zero")):
                (d,) = refs.delta_at(model, [meta["epsilon"]])
                if d is not None and d > mpf(meta["delta"]):
                    case.fail("calibration not private (exact)", f"cli calibrate sigma {sig!r}: exact delta = "
                                                                 f"{fnum_s(d)} > {meta['delta']!r}")


def names_param(msg: str, p: str) -> bool:
    low = msg.lower()
    alts = {p, p.replace("_", "-"), p.replace("-", "_")}
    if p == "epsilon":
        alts |= {"eps"}
    if p == "steps":
        alts |= {"step"}
    if p == "noise_multiplier":
        alts |= {"sigma", "noise"}
    if p == "sampling_probability":
        alts |= {"q", "sampling"}
    for a in alts:
        if len(a) <= 2:
            if re.search(rf"(?<![a-z_]){re.escape(a)}(?![a-z_])", low):
                return True
        elif a in low:
            return True
    return False


def check_invalid(case, res):
    spec = case.spec
    p = spec.get("invalid_param")
    if spec["entry"] == "cli" or spec.get("cli"):
        if res["outcome"] != "ok":
            case.fail("validation", f"invalid CLI input ({p}): {res['outcome']} {res.get('message', '')[:200]}")
            return
        v = res["value"]
        lines = [ln for ln in v["stderr"].splitlines() if ln.strip()]
        if v["exit"] != 2:
            case.fail("validation", f"invalid CLI input ({p}) exited {v['exit']} (want 2); stdout "
                                    f"{v['stdout'][:120]!r}; stderr {v['stderr'][:200]!r}")
        elif len(lines) != 1:
            case.fail("validation", f"invalid CLI input ({p}): {len(lines)} lines on stderr: {v['stderr'][:300]!r}")
        elif not names_param(lines[0], p):
            case.fail("validation", f"invalid CLI input: message does not name {p}: {lines[0][:200]!r}")
        return
    if res["outcome"] == "ok":
        case.fail("validation", f"invalid {p}={pyrepr(bad_value(spec))} accepted; returned {str(res.get('value'))[:150]}")
        return
    et = res.get("exc_type")
    ok_types = ("ValueError", "TypeError")
    if spec.get("expect_any_error") and res["outcome"].startswith("error:"):
        return
    if et not in ok_types:
        case.fail("validation", f"invalid {p}={pyrepr(bad_value(spec))}: {res['outcome']} "
                                f"{(res.get('message') or '')[:200]} (want ValueError/TypeError)")
    elif not names_param(res.get("message") or "", p):
        case.fail("validation", f"invalid {p}={pyrepr(bad_value(spec))}: {et} does not name {p}: "
                                f"{(res.get('message') or '')[:200]!r}")


def bad_value(spec):
    return spec.get("bad_value")


# ============================================================================================
# tags and grouping
# ============================================================================================


def spec_params(spec):
    """(name -> numeric value) of the main parameters, for tags and the tables."""
    e = spec["entry"]
    if e in EXTENSIONS:
        return EXTENSIONS[e].params(spec)
    out = {}
    if e in FUNCS:
        for n, a in zip(FUNCS[e], spec["args"]):
            out[n] = val(a)
        for k, a in spec.get("kwargs", {}).items():
            out[k] = val(a)
    elif e == "cli":
        out.update(spec.get("meta", {}))
    else:
        segs = spec["segments"]
        out["segments"] = len(segs)
        if segs:
            out["sigma"], out["q"], out["steps"] = (val(x) for x in segs[0])
        out["delta" if spec["query"] == "epsilon" else "epsilon"] = val(spec["x"])
    return out


#: the edge tags of each parameter: the first rule that holds names the case's edge
_EDGE_RULES = {
    "sigma": [(lambda v: v == 0, "sigma=0"), (lambda v: v == INF, "sigma=inf"),
              (lambda v: v <= 0.02, "sigma<=0.02"), (lambda v: v >= 1e5, "sigma>=1e5")],
    "q": [(lambda v: v == 0, "q=0"), (lambda v: v == 1, "q=1"), (lambda v: v > 0.999, "q~1"),
          (lambda v: v < 1e-6, "q<1e-6")],
    "steps": [(lambda v: v == 0, "T=0"), (lambda v: v == 1, "T=1"), (lambda v: v >= 1e6, "T>=1e6")],
    "delta": [(lambda v: v <= 1e-20, "delta<=1e-20"), (lambda v: v >= 0.5, "delta>=0.5")],
    "epsilon": [(lambda v: v == 0, "eps=0"), (lambda v: v == INF, "eps=inf"),
                (lambda v: v <= 1e-6, "eps<=1e-6"), (lambda v: v >= 1e3, "eps>=1e3")],
}


def tags_of(spec):
    p = spec_params(spec)
    tags = []

    def num(x):
        return isinstance(x, (int, float)) and not isinstance(x, bool) and not (isinstance(x, float) and math.isnan(x))

    for name, rules in _EDGE_RULES.items():
        v = p.get(name)
        if num(v):
            tags.extend([label for holds, label in rules if holds(v)][:1])
    d, ep = p.get("delta"), p.get("epsilon")
    if isinstance(d, list) or isinstance(ep, list):
        tags.append("vector")
    return tags


def entry_family(spec):
    e = spec["entry"]
    if e in EXTENSIONS:
        return EXTENSIONS[e].family(spec)
    if e in ("pld.epsilon", "pld.delta") and relation_of(spec) == "replace_one":
        return e + "[replace_one]"
    if e == "pld.PLDAccountant" and relation_of(spec) == "replace_one":
        return e + "[replace_one]"
    if e.startswith("calibrate.") and e != "calibrate.gaussian_sigma":
        acc = spec.get("kwargs", {}).get("accountant", "pld")
        return e + f"[{acc if acc in ('pld', 'rdp') else '?'}]"
    if e == "cli":
        m = spec.get("meta", {})
        return f"cli {m.get('cmd', spec['argv'][0])}" + (f"[{m.get('accountant')}]" if m.get("accountant") else "")
    if e == "dp_accounting":
        return f"dp_accounting[{spec.get('init', {}).get('accountant', 'pld')}]"
    return e


def norm_msg(msg):
    msg = re.sub(r"0x[0-9a-f]+", "#", msg or "")
    msg = re.sub(r"(?<![\w.])[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?(?![\w.])",
                 lambda m: "0" if float(m.group(0)) == 0 else "#", msg)
    return msg[:90]


CLASS_ORDER = [
    "wrong-side upper (exact)", "wrong-side lower (exact)", "calibration not private (exact)",
    "wrong-side upper (underflow)",
    "certified contradiction", "calibration over target (accountant)", "finite-where-inf", "lower>upper",
    "non-monotone within one call",
    "bad-output", "analysis inexact", "crash", "crash (exception)", "oom", "timeout", "refusal (valid input)",
    "validation", "not reproduced on re-run",
]


MSG_CLASSES = ("crash (exception)", "refusal (valid input)", "validation")
RESOURCE_CLASSES = ("timeout", "oom", "crash")
EXACT_TAGS = ("q=1", "T=1", "sigma=0", "q=0", "T=0", "sigma=inf")


def group_key(case_rec, f):
    """Failures are grouped by what an engineer would fix: the message (refusals, exceptions,
    validation), the entry point (timeouts, OOM, crashes) or the entry point and the exact
    reference involved (wrong-side bounds)."""
    cls = f["class"]
    if cls in MSG_CLASSES:
        return (cls, f.get("norm") or "")
    if cls in RESOURCE_CLASSES:
        return (cls, case_rec["family"])
    return (cls, case_rec["family"] + " " + ",".join(t for t in case_rec["tags"] if t in EXACT_TAGS))


# ============================================================================================
# driver
# ============================================================================================


def run_case(worker, refs, spec, timeout):
    res = worker.run(spec, timeout)
    case = Case(spec)

    def runner(sub):
        return worker.run(sub, timeout)

    outcome = res["outcome"]
    if spec.get("valid", True):
        if outcome == "ok":
            try:
                check_valid_ok(case, res, refs, runner)
            except Exception as exc:  # a harness bug must not stop the sweep
                case.notes.append(f"HARNESS ERROR in checks: {type(exc).__name__}: {exc}")
                traceback.print_exc()
        elif outcome == "timeout":
            case.fail("timeout", f"no answer in {timeout:g} s")
        elif outcome == "oom":
            case.fail("oom", (res.get("message") or "")[:300])
        elif outcome == "crash":
            case.fail("crash", (res.get("message") or "")[:300])
        elif outcome == "error:ValueError":
            case.fail("refusal (valid input)", f"ValueError: {res.get('message')}")
        else:
            case.fail("crash (exception)", f"{outcome}: {res.get('message')} ({res.get('where', '')})")
    else:
        check_invalid(case, res)
    rb, ra = res.get("rss_before_mb"), res.get("rss_after_mb")
    if rb is not None and ra is not None and ra - rb > 256:
        case.warn("memory retained after the call", f"RSS {rb:.0f} MB before, {ra:.0f} MB after the call returned "
                                                    "(module-level caches)")
    if getattr(case, "need_exact_eps", None) and refs.available:
        model, d = case.need_exact_eps
        ex = refs.eps_exact(model, d)
        if ex is not None:
            case.notes.append(f"exact eps = {ex[:25]}")
    for f in case.failures:
        if f["class"] in ("refusal (valid input)", "crash (exception)"):
            f["norm"] = norm_msg(f"{res.get('exc_type') or ''} {res.get('message') or getattr(case, 'cli_error', '')}")
        elif f["class"] == "validation":
            f["norm"] = f"{spec.get('invalid_param')}: {norm_msg(f['detail'])}"
    rec = {
        "id": spec.get("id"), "entry": spec["entry"], "family": entry_family(spec), "valid": spec.get("valid", True),
        "spec": spec, "outcome": outcome, "exc_type": res.get("exc_type"), "message": res.get("message"),
        "value": res.get("value"), "time": res.get("time"), "mem_mb": res.get("mem_mb"), "tags": tags_of(spec),
        "rss_before_mb": res.get("rss_before_mb"), "rss_after_mb": res.get("rss_after_mb"),
        "failures": case.failures, "warnings": case.warnings, "notes": sorted(set(case.notes)),
        "checks": sorted(set(case.checks)),
        "repro": repro(spec),
    }
    return reclassify(rec)


def reclassify(rec):
    """Fix-ups applied to a finished record (also when re-summarising an older JSON-lines file):
    findings that are not sgmfast's, and CLI out-of-memory exits counted as OOM."""
    rec["family"] = entry_family(rec["spec"])
    keep = []
    for f in rec["failures"]:
        d = f.get("detail", "")
        if rec["entry"] == "dp_accounting" and "`count` must be positive" in d:
            rec["notes"] = sorted(set(rec["notes"]) | {"harness artifact: dp_accounting's own event builder "
                                                       "rejects count = 0 (not an sgmfast failure)"})
            continue
        if rec["entry"] in ("cli", "cli.sampler") and f["class"] == "crash (exception)" and "out of memory" in d:
            f = dict(f, **{"class": "oom"})
        if f["class"] == "crash" and "memory allocation still failed" in d.lower():  # (OpenBLAS, no exception)
            f = dict(f, **{"class": "oom"})
        if f["class"] == "crash (exception)" and "Errno 12" in d:  # (ENOMEM from the OS)
            f = dict(f, **{"class": "oom"})
        keep.append(f)
    rec["failures"] = keep
    return rec


def apply_confirmation(recs, confirm_path):
    """Replace each failing case by its re-run (--cases on the failures file, in a clean worker:
    sgmfast's caches cleared before each case), which is the more trustworthy result: a failure
    the re-run reproduces (in any class: a timeout may become an OOM in a clean worker) keeps the
    re-run's classification, marked with the first run's class when it differs; a case that
    passes on re-run keeps one failure of class 'not reproduced on re-run'."""
    again = {}
    for ln in Path(confirm_path).read_text().splitlines():
        if ln.strip():
            r = reclassify(json.loads(ln))
            again[r["repro"]] = r
    n_conf = n_not = n_missing = 0
    for rec in recs:
        if not rec["failures"]:
            continue
        r2 = again.get(rec["repro"])
        if r2 is None:
            n_missing += 1
            continue
        first = sorted({f["class"] for f in rec["failures"]})
        if r2["failures"]:
            n_conf += 1
            new = []
            for f in r2["failures"]:
                f = dict(f, confirmed=True)
                if f["class"] not in first:
                    f["detail"] = f["detail"] + f" [first run: {', '.join(first)}, {rec['outcome']}]"
                new.append(f)
            for k in ("outcome", "exc_type", "message", "value", "time", "mem_mb", "warnings", "notes", "checks"):
                rec[k] = r2.get(k)
            rec["failures"] = new
            rec["rerun"] = True
        else:
            n_not += 1
            rec["failures"] = [{"class": "not reproduced on re-run", "was": first,
                                "detail": f"first run: {', '.join(first)} ({rec['outcome']}, {fmt_t(rec['time'])}); "
                                          f"re-run in a clean worker: {r2['outcome']} in {fmt_t(r2['time'])}"}]
    return n_conf, n_not, n_missing


def resummarize(jsonl, summary, failures_path, extra, confirm=None):
    """Rewrite the summary and the failures file of a finished (or running) sweep from its records."""
    recs = [reclassify(json.loads(ln)) for ln in Path(jsonl).read_text().splitlines() if ln.strip()]
    meta = {}
    if Path(summary).exists():
        for ln in Path(summary).read_text().splitlines()[2:]:
            if not ln.strip():
                break
            k, _, v = ln.partition(": ")
            meta[k] = v
    meta["command"] = meta.get("command", "?") + f"   [summary re-rendered: {extra}]"
    if confirm:
        n_conf, n_not, n_missing = apply_confirmation(recs, confirm)
        meta["re-run"] = (f"every failing case was re-run ({confirm}; sgmfast caches cleared before each case) and "
                          f"is reported as re-run: {n_conf} cases failed again, {n_not} did not (class 'not "
                          f"reproduced on re-run')" + (f", {n_missing} not re-run" if n_missing else ""))
    if "sgmfast/ as of" not in meta.get("git commit", ""):
        meta["git commit"] = meta.get("git commit", "?").split()[0] + " at run time; now " + git_commit()
    write_summary(summary, recs, meta)
    write_failures(failures_path, recs)
    return recs


def write_failures(path, recs):
    with open(path, "w") as ff:
        for rec in recs:
            if rec["failures"]:
                ff.write(json.dumps({"spec": rec["spec"], "outcome": rec["outcome"], "failures": rec["failures"],
                                     "repro": rec["repro"]}) + "\n")


def percentile(xs, p):
    if not xs:
        return math.nan
    xs = sorted(xs)
    k = (len(xs) - 1) * p
    f = math.floor(k)
    c = min(len(xs) - 1, f + 1)
    return xs[f] + (xs[c] - xs[f]) * (k - f)


def git_commit():
    try:
        h = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "sgmfast"],
                               capture_output=True, text=True).stdout.strip()
        code = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%h", "--", "sgmfast"],
                              capture_output=True, text=True).stdout.strip()
        return h + f" (sgmfast/ as of {code}" + (", with uncommitted changes)" if dirty else ")")
    except OSError:
        return "?"


def fmt_t(x):
    if x is None:
        return "-"
    return f"{x * 1e3:.1f} ms" if x < 1 else f"{x:.2f} s"


def write_summary(path, recs, meta, final=True):
    L = []
    L.append(TITLE + ("" if final else " (PARTIAL: run still in progress)"))
    L.append("=" * 78)
    for k in ("command", "date", "machine", "python", "git commit", "sgmfast imported from", "cases", "timeout",
              "memory limit", "worker", "exact references", "wall time", "re-run"):
        if k in meta:
            L.append(f"{k}: {meta[k]}")
    L.append("")
    valid = [r for r in recs if r["valid"]]
    invalid = [r for r in recs if not r["valid"]]
    nfail = sum(1 for r in recs if r["failures"])
    L.append(f"{len(recs)} cases ({len(valid)} valid, {len(invalid)} invalid); {nfail} failing cases; "
             f"{sum(1 for r in recs if r['warnings'])} with warnings")
    L.append("")
    # outcome table
    L.append("Outcomes per entry point (valid inputs; invalid inputs in the last columns)")
    outs = sorted({r["outcome"] for r in recs}, key=lambda o: (o != "ok", o))
    fams = sorted({r["family"] for r in recs})
    w = max(len(f) for f in fams) if fams else 10
    hdr = f"  {'entry':<{w}} " + " ".join(f"{o[:18]:>18}" for o in outs) + f" {'fail':>6} | {'inval':>6} {'inv-fail':>8}"
    L.append(hdr)
    for f in fams:
        rv = [r for r in valid if r["family"] == f]
        ri = [r for r in invalid if r["family"] == f]
        row = f"  {f:<{w}} " + " ".join(f"{sum(1 for r in rv if r['outcome'] == o):>18}" for o in outs)
        row += f" {sum(1 for r in rv if r['failures']):>6} | {len(ri):>6} {sum(1 for r in ri if r['failures']):>8}"
        L.append(row)
    tot = f"  {'TOTAL':<{w}} " + " ".join(f"{sum(1 for r in valid if r['outcome'] == o):>18}" for o in outs)
    tot += f" {sum(1 for r in valid if r['failures']):>6} | {len(invalid):>6} {sum(1 for r in invalid if r['failures']):>8}"
    L.append(tot)
    L.append("")
    # failures grouped
    groups = {}
    for r in recs:
        for f in r["failures"]:
            groups.setdefault(group_key(r, f), []).append((r, f))
    by_class = {}
    for k, items in groups.items():
        by_class.setdefault(k[0], []).append((k, items))
    L.append(f"FAILURES: {sum(len(v) for v in groups.values())} in {len(groups)} groups")
    L.append("-" * 78)
    classes = sorted(by_class, key=lambda c: CLASS_ORDER.index(c) if c in CLASS_ORDER else 99)
    for cls in classes:
        items = sorted(by_class[cls], key=lambda kv: (-len(kv[1]), kv[0]))
        L.append(f"\n## {cls}: {sum(len(v) for _, v in items)} cases in {len(items)} groups")
        for (c, sub), its in items:
            its = sorted(its, key=lambda rf: ((rf[0]["time"] or 0) > 1.0, len(rf[0]["repro"]), rf[0]["time"] or 0))
            in_fams = {}  # (not ``fams``: the time table below iterates over that)
            for r, _ in its:
                in_fams[r["family"]] = in_fams.get(r["family"], 0) + 1
            L.append(f"- [{len(its)}x] {sub}")
            if cls in MSG_CLASSES or len(in_fams) > 1:
                L.append("    entry points: " + ", ".join(f"{k} x{v}" for k, v in sorted(in_fams.items(), key=lambda kv: -kv[1])))
            if cls in RESOURCE_CLASSES:
                th = {}
                for r, _ in its:
                    for t in r["tags"]:
                        th[t] = th.get(t, 0) + 1
                if th:
                    L.append("    tags: " + ", ".join(f"{k} x{v}" for k, v in sorted(th.items(), key=lambda kv: -kv[1])[:8]))
            shown, sigs = 0, set()
            limit = 3 if (cls in RESOURCE_CLASSES or cls in MSG_CLASSES) else 2
            for r, f in its:
                sig = (r["family"], tuple(r["tags"])) if cls in RESOURCE_CLASSES else r["family"]
                if sig in sigs:
                    continue
                sigs.add(sig)
                if shown == 0 or cls not in RESOURCE_CLASSES or f["detail"] != its[0][1]["detail"]:
                    L.append(f"    {f['detail'][:400]}")
                ex = [n for n in r["notes"] if n.startswith("exact eps")]
                if ex:
                    L.append(f"    ({ex[0]})")
                L.append(f"    repro ({fmt_t(r['time'])}{', ' + r['outcome'] if r['outcome'] != 'ok' else ''}): {r['repro']}")
                shown += 1
                if shown >= limit:
                    break
    # warnings
    wgroups = {}
    for r in recs:
        for f in r["warnings"]:
            wgroups.setdefault((f["class"], r["family"]), []).append((r, f))
    L.append("")
    L.append(f"WARNINGS: {sum(len(v) for v in wgroups.values())} in {len(wgroups)} groups")
    L.append("-" * 78)
    for (cls, fam), its in sorted(wgroups.items(), key=lambda kv: (kv[0][0], -len(kv[1]))):
        r0, f0 = its[0]
        L.append(f"- [{len(its)}x] {cls} / {fam}: {f0['detail'][:300]}")
        L.append(f"    repro: {r0['repro']}")
    # notes
    notes = {}
    for r in recs:
        for n in r["notes"]:
            if n.startswith("exact eps"):
                continue
            key = norm_msg(n)[:60]
            notes[key] = notes.get(key, 0) + 1
    if notes:
        L.append("")
        L.append("Checks skipped or unavailable (counts):")
        for k, n in sorted(notes.items(), key=lambda kv: -kv[1])[:15]:
            L.append(f"  {n:>6}  {k}")
    cov = {}
    for r in recs:
        for c in r.get("checks", []):
            cov[c] = cov.get(c, 0) + 1
    if cov:
        L.append("")
        L.append("Checks performed (cases): " + ", ".join(f"{k} {v}" for k, v in sorted(cov.items())))
    # slowest
    timed = [r for r in valid if r["time"] is not None and r["outcome"] == "ok"]
    L.append("")
    L.append("20 slowest valid cases that returned (time excludes worker start):")
    for r in sorted(timed, key=lambda r: -r["time"])[:20]:
        mem = f", peak RSS {r['mem_mb']:.0f} MB" if r.get("mem_mb") else ""
        L.append(f"  {fmt_t(r['time']):>10}{mem}  {r['repro']}")
    L.append("")
    L.append("Time per entry point (valid inputs that returned ok; ms): n, median, p90, p99, max")
    for f in fams:
        ts = [r["time"] * 1e3 for r in timed if r["family"] == f]
        if ts:
            L.append(f"  {f:<{w}} {len(ts):>5} {percentile(ts, .5):>10.2f} {percentile(ts, .9):>10.2f} "
                     f"{percentile(ts, .99):>10.2f} {max(ts):>10.2f}")
    ts = [(r["time"] or 0) * 1e3 for r in valid]
    if ts:
        L.append(f"  {'ALL valid, any outcome':<{w}} {len(ts):>5} {percentile(ts, .5):>10.2f} {percentile(ts, .9):>10.2f} "
                 f"{percentile(ts, .99):>10.2f} {max(ts):>10.2f}   (timeouts counted at the limit)")
    ts = [r["time"] * 1e3 for r in timed]
    if ts:
        L.append(f"  {'ALL':<{w}} {len(ts):>5} {percentile(ts, .5):>10.2f} {percentile(ts, .9):>10.2f} "
                 f"{percentile(ts, .99):>10.2f} {max(ts):>10.2f}")
    Path(path).write_text("\n".join(L) + "\n")


def main(argv=None, *, make=None, default_out=None, script=None, doc=None):
    """The sweep's command line; another sweep passes its case maker ``make(n, seed, only)``, its
    default ``--out`` (summary and failures are named after it), its script and docstring."""
    make = make or make_cases
    script = Path(script or __file__)
    ap = argparse.ArgumentParser(description=(doc or __doc__).split("\n\n")[0])
    ap.add_argument("n", type=int, nargs="?", default=200)
    ap.add_argument("seed", type=int, nargs="?", default=0)
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--mem-gib", type=float, default=2.0)
    ap.add_argument("--only", default="")
    ap.add_argument("--out", default=str(default_out or ROOT / "bench" / "domain_sweep.jsonl"))
    ap.add_argument("--summary", default=None, help="default: bench/domain_sweep.out next to --out")
    ap.add_argument("--failures", default=None, help="default: <out stem>_failures.jsonl")
    ap.add_argument("--cases", default=None, help="re-run the cases of a JSON-lines file (its 'spec' fields)")
    ap.add_argument("--resummarize", action="store_true",
                    help="only re-render the summary and failures file from the existing --out records")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--mem-bytes", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--isolate", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--no-isolate", action="store_true",
                    help="keep sgmfast's module caches between cases (default: cleared before each case)")
    ap.add_argument("--confirm", default=None,
                    help="with --resummarize: JSON-lines records of a re-run of the failures (--cases); "
                         "failures it does not reproduce are moved to their own class")
    args = ap.parse_args(argv)
    if args.worker:
        worker_main(args.mem_bytes, args.isolate)
        return 0
    out = Path(args.out)
    summary = Path(args.summary) if args.summary else out.with_name("domain_sweep.out") if out.stem == "domain_sweep" \
        else out.with_suffix(".out")
    failures_path = Path(args.failures) if args.failures else out.with_name(out.stem + "_failures.jsonl")
    only = [o for o in args.only.split(",") if o]
    if args.resummarize:
        resummarize(out, summary, failures_path, datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
                    args.confirm)
        print(f"wrote {summary}, {failures_path}", file=sys.stderr)
        return 0
    if args.cases:
        cases = []
        for ln in Path(args.cases).read_text().splitlines():
            if ln.strip():
                d = json.loads(ln)
                spec = d.get("spec", d)
                if not only or any(spec["entry"].startswith(o) for o in only):
                    cases.append(spec)
        cases = cases[: args.n] if args.n and args.n < len(cases) else cases
    else:
        cases = make(args.n, args.seed, only)
    mem = int(args.mem_gib * (1 << 30))
    import tempfile

    log_dir = Path(tempfile.mkdtemp(prefix="domain_sweep_"))
    worker = Worker(mem, log_dir, isolate=not args.no_isolate)
    t_start = time.time()
    worker._ensure()
    have_ref = REF_MODULE.exists()
    refs = Refs(worker, have_ref)
    meta = {
        "command": "python " + " ".join([os.path.relpath(script, ROOT)] + (argv if argv is not None else sys.argv[1:])),
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": f"{os.cpu_count()} cores, {platform.machine()}, {platform.system()} {platform.release()}; "
                   "one worker process (shared machine, niced)",
        "python": sys.version.split()[0],
        "git commit": git_commit(),
        "sgmfast imported from": worker.warm_info["file"],
        "cases": f"{len(cases)}" + (f" from {args.cases}" if args.cases else f" (seed {args.seed})")
                 + (f", only {only}" if only else ""),
        "timeout": f"{args.timeout:g} s per call (follow-up checks get their own)",
        "memory limit": f"RLIMIT_AS {args.mem_gib:g} GiB for the worker (its warm baseline VmSize: "
                        f"{worker.warm_info.get('vm_mb', 0):.0f} MB)"
                        + ("; sgmfast module caches kept between cases" if args.no_isolate else
                           "; sgmfast module caches cleared before each case"),
        "exact references": (f"{REF_MODULE.relative_to(ROOT)} present" if have_ref else
                             f"{REF_MODULE.relative_to(ROOT)} MISSING: q = 1 and T = 1 exact checks skipped "
                             "(trivial references q = 0, T = 0, sigma = 0, sigma = inf still checked)"),
    }
    if worker.warm_info.get("errors"):
        print("warm-up errors:", worker.warm_info["errors"], file=sys.stderr)
    recs = []
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w") as fo:
        for i, spec in enumerate(cases):
            rec = run_case(worker, refs, spec, args.timeout)
            recs.append(rec)
            fo.write(json.dumps(rec) + "\n")
            fo.flush()
            flag = "FAIL " + ",".join(sorted({f["class"] for f in rec["failures"]})) if rec["failures"] else ""
            print(f"[{i + 1}/{len(cases)}] {rec['family']:<38} {rec['outcome']:<24} {fmt_t(rec['time']):>10} {flag}",
                  file=sys.stderr, flush=True)
            if (i + 1) % 100 == 0:
                meta["wall time"] = f"{time.time() - t_start:.0f} s so far; worker starts: {worker.starts}"
                write_summary(summary, recs, meta, final=False)
    worker.kill()
    meta["wall time"] = (f"{time.time() - t_start:.0f} s; worker starts: {worker.starts} "
                         f"(warm-up {worker.warm_total:.0f} s in all)")
    if refs.errors:
        meta["exact references"] += f"; {len(refs.errors)} reference jobs failed (e.g. {refs.errors[0][:120]})"
    write_summary(summary, recs, meta)
    write_failures(failures_path, recs)
    print(f"wrote {out}, {summary}, {failures_path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
