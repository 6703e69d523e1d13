"""sgmfast against the peer accountants on one shared scenario registry, in one run.

    python bench/peers.py            # full table (several minutes: some peers take seconds per call)
    python bench/peers.py --quick    # skips peer calls known to take more than ~5 s

For every scenario it prints each implementation's value, its warm time per call (best of a
few repeats; slow calls are timed once) and the time as a multiple of sgmfast's PLD. Peers
that are not installed are listed as such. Values in the same row answer the same question:
epsilon at delta = 1e-5, or the noise multiplier for a target epsilon.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from scenarios import DELTA, EPSILON_SCENARIOS  # noqa: E402

CALIBRATION_SCENARIOS = [  # (epsilon, delta, q, steps)
    (1.0, 1e-5, 0.01, 1000),
    (8.0, 1e-5, 256 / 60000, 14062),
    (3.0, 1e-5, 0.001, 100_000),
]

SLOW_SECONDS = 5.0


# ----------------------------------------------------------------------------- implementations

def _sgm_rdp_eps(q, s, t, d):
    from sgmfast import rdp

    return rdp.epsilon(s, q, t, d)


def _sgm_pld_eps(q, s, t, d):
    from sgmfast import pld

    b = pld.epsilon(s, q, t, d)
    return f"{b.upper:.4f} [{b.lower:.4f}]"


def _dpa_rdp_eps(q, s, t, d):
    import dp_accounting as dpa

    acc = dpa.rdp.RdpAccountant()
    acc.compose(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(s)), int(t))
    return acc.get_epsilon(d)


def _dpa_pld_eps(q, s, t, d):
    import dp_accounting as dpa

    acc = dpa.pld.PLDAccountant()
    acc.compose(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(s)), int(t))
    return acc.get_epsilon(d)


def _opacus_rdp_eps(q, s, t, d):
    from opacus.accountants import RDPAccountant

    acc = RDPAccountant()
    acc.history = [(s, q, int(t))]
    return acc.get_epsilon(d)


def _opacus_prv_eps(q, s, t, d):
    from opacus.accountants import PRVAccountant

    acc = PRVAccountant()
    acc.history = [(s, q, int(t))]
    return acc.get_epsilon(d)


def _prv_eps(q, s, t, d):
    from prv_accountant import PoissonSubsampledGaussianMechanism, PRVAccountant

    prv = PoissonSubsampledGaussianMechanism(noise_multiplier=s, sampling_probability=q)
    acc = PRVAccountant(prvs=[prv], max_self_compositions=[int(t)], eps_error=0.01, delta_error=d / 1000)
    lo, est, up = acc.compute_epsilon(delta=d, num_self_compositions=[int(t)])
    return f"{up:.4f} [{lo:.4f}]"


def _sgm_rdp_cal(e, d, q, t):
    from sgmfast.calibrate import calibrate_sigma

    return calibrate_sigma(e, d, q, t, accountant="rdp")


def _sgm_pld_cal(e, d, q, t):
    from sgmfast.calibrate import calibrate_sigma

    return calibrate_sigma(e, d, q, t, accountant="pld")


def _opacus_cal(kind):
    def run(e, d, q, t):
        from opacus.accountants.utils import get_noise_multiplier

        return get_noise_multiplier(target_epsilon=e, target_delta=d, sample_rate=q, steps=int(t), accountant=kind)

    return run


def _dpa_cal(kind):
    def run(e, d, q, t):
        import dp_accounting as dpa

        make = (lambda: dpa.rdp.RdpAccountant()) if kind == "rdp" else (lambda: dpa.pld.PLDAccountant())

        def event(s):
            return dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(s)), int(t))

        return dpa.calibrate_dp_mechanism(make, event, e, d)

    return run


def _prv_cal(e, d, q, t):
    from prv_accountant.dpsgd import find_noise_multiplier

    return find_noise_multiplier(sampling_probability=q, num_steps=int(t), target_epsilon=e, target_delta=d,
                                 eps_error=0.01)


EPS_IMPLS = {
    "sgmfast PLD": (None, _sgm_pld_eps),
    "sgmfast RDP": (None, _sgm_rdp_eps),
    "dp_accounting RDP": ("dp_accounting", _dpa_rdp_eps),
    "dp_accounting PLD": ("dp_accounting", _dpa_pld_eps),
    "opacus RDP": ("opacus", _opacus_rdp_eps),
    "opacus PRV": ("opacus", _opacus_prv_eps),
    "prv_accountant": ("prv_accountant", _prv_eps),
}

CAL_IMPLS = {
    "sgmfast PLD": (None, _sgm_pld_cal),
    "sgmfast RDP": (None, _sgm_rdp_cal),
    "dp_accounting RDP": ("dp_accounting", _dpa_cal("rdp")),
    "dp_accounting PLD": ("dp_accounting", _dpa_cal("pld")),
    "opacus RDP": ("opacus", _opacus_cal("rdp")),
    "opacus PRV": ("opacus", _opacus_cal("prv")),
    "prv_accountant": ("prv_accountant", _prv_cal),
}

# Peer calls measured here to take well over SLOW_SECONDS; skipped with --quick.
KNOWN_SLOW = {
    ("prv_accountant", "eps", 1_000_000), ("opacus PRV", "cal", 100_000), ("prv_accountant", "cal", 100_000),
    ("prv_accountant", "cal", 14062), ("opacus PRV", "cal", 14062), ("dp_accounting PLD", "cal", 100_000),
}


def _available(module):
    if module is None:
        return True
    try:
        __import__(module)
        return True
    except Exception:
        return False


def _time(fn, args, repeats=5):
    """(value, best seconds); a first call warms caches and JITs and is not counted when fast."""
    t0 = time.perf_counter()
    value = fn(*args)
    first = time.perf_counter() - t0
    if first > SLOW_SECONDS / 5:
        return value, first
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        value = fn(*args)
        best = min(best, time.perf_counter() - t0)
    return value, best


def _fmt_value(v):
    return v if isinstance(v, str) else f"{v:.4f}"


def _fmt_time(s):
    if s < 1e-3:
        return f"{s * 1e6:.0f} µs"
    if s < 1:
        return f"{s * 1e3:.1f} ms"
    return f"{s:.2f} s"


def _table(title, scenarios, impls, kind, quick, label):
    print(f"\n### {title}\n")
    print("| scenario | implementation | value | time | × sgmfast PLD |")
    print("|---|---|---|---|---|")
    for sc in scenarios:
        ref_time = None
        for name, (module, fn) in impls.items():
            if not _available(module):
                print(f"| {label(sc)} | {name} | not installed | | |")
                continue
            steps = sc[2] if kind == "eps" else sc[3]
            if quick and (name, kind, steps) in KNOWN_SLOW:
                print(f"| {label(sc)} | {name} | skipped (--quick) | | |")
                continue
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    value, secs = _time(fn, tuple(sc) + ((DELTA,) if kind == "eps" else ()))
            except Exception as exc:  # peers fail on some valid inputs: report it
                msg = str(exc).splitlines()[0][:60] if str(exc) else type(exc).__name__
                print(f"| {label(sc)} | {name} | error: {msg} | | |")
                continue
            if name == "sgmfast PLD":
                ref_time = secs
            ratio = f"{secs / ref_time:.1f}" if ref_time else ""
            print(f"| {label(sc)} | {name} | {_fmt_value(value)} | {_fmt_time(secs)} | {ratio} |")
            sys.stdout.flush()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="skip peer calls known to take more than ~5 s")
    args = p.parse_args(argv)
    import numba
    import numpy

    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.processor() or platform.platform()}; "
          f"Python {platform.python_version()}, numpy {numpy.__version__}, numba {numba.__version__}")
    for mod in ("dp_accounting", "opacus", "prv_accountant"):
        try:
            from importlib.metadata import version

            print(f"{mod}: {version(mod.replace('_', '-'))}")
        except Exception:
            print(f"{mod}: not installed")
    print("ε with PLD/PRV given as `upper [lower]` where the accountant certifies both.")
    _table(f"epsilon at delta = {DELTA:g}", EPSILON_SCENARIOS, EPS_IMPLS, "eps", args.quick,
           lambda sc: f"q={sc[0]:.4g}, σ={sc[1]:g}, T={sc[2]:g}")
    _table("noise multiplier for a target epsilon", CALIBRATION_SCENARIOS, CAL_IMPLS, "cal", args.quick,
           lambda sc: f"ε={sc[0]:g}, δ={sc[1]:g}, q={sc[2]:.4g}, T={sc[3]:g}")


if __name__ == "__main__":
    main()
