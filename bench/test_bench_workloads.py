"""Every workload of issue #33 in one run: sgmfast side by side with the fastest tight peers.

    pytest bench/test_bench_workloads.py --benchmark-only -s

One pytest-benchmark group per workload (``workload|W1`` ...), sgmfast beside each peer:

* W1-W4, ε(δ = 1e-5): dp_accounting's PLD (pessimistic, value_discretization_interval 1e-4) and
  Opacus's PRV accountant (its defaults);
* C1-C3, the noise multiplier for a target ε (the order of ``bench/peers.py``): dp_accounting's
  PLD calibration and Opacus's PRV ``get_noise_multiplier`` (seconds a call: one round);
* F1, fixed-size batches (256 of 60000, σ 1.1, 14,040 steps, replace-one): dp_accounting's RDP
  accountant for ``SampledWithoutReplacementDpEvent``, its only accountant for this sampler;
* T1, T2, the cost of tuning MNIST's run (``sgmfast.tuning.epsilon``, its default) by a random
  search over K runs, E[K] = 10, geometric (T1) and Poisson (T2): dp_accounting's RDP accountant
  for ``RepeatAndSelectDpEvent`` (Papernot & Steinke's theorems), its only accountant for it.

sgmfast is timed cold: the one-step cache (``sgmfast.pld.common.STEP_CACHE``) is cleared before
every round, as the peers start from scratch; its kernels are compiled (numba's on-disk cache)
and loaded by the warm-up calls first.  Every implementation but the slow peers (``_SLOW``, one
round of seconds) is called ``SGMFAST_BENCH_WARM`` times (default 8) before it is timed, sgmfast
with its cache cleared each time: CPython 3.11 specialises a function's bytecode after its first
8 calls, and the first rounds after a single warm-up call ran ~30 % slower (W1: 7 rounds' median
4.3 ms, 21 rounds' 3.1 ms, bench/README stop 52), the peers' Python as much as sgmfast's.  Each row
prints its value (sgmfast: the certified interval); at the end the file prints a table of ratios:
the fastest peer's median over sgmfast's median.  Set ``SGMFAST_BENCH_ROUNDS`` to change
sgmfast's rounds (default 7).
"""

from __future__ import annotations

import os
import warnings

import pytest

from sgmfast import pld, tuning
from sgmfast.calibrate import calibrate_sigma
from sgmfast.pld import common as pld_common
from sgmfast.pld.samplers import fixed_size

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::RuntimeWarning",
                                        "ignore::DeprecationWarning", "ignore::FutureWarning")

DELTA = 1e-5
N_MNIST = 60000
#: name -> (kind, parameters): "eps" (q, sigma, T), "cal" (epsilon, q, T), "fixed" (sigma, b/n, T),
#: "tune" (q, sigma, T, E[K], shape eta of K's truncated negative binomial; inf: Poisson)
WORKLOADS = {
    "W1": ("eps", (0.01, 1.0, 1000)),
    "W2": ("eps", (256 / 60000, 1.1, 14062)),
    "W3": ("eps", (1e-3, 0.8, 100_000)),
    "W4": ("eps", (1e-4, 0.6, 1_000_000)),
    "C1": ("cal", (1.0, 0.01, 1000)),
    "C2": ("cal", (8.0, 256 / 60000, 14062)),
    "C3": ("cal", (3.0, 1e-3, 100_000)),
    "F1": ("fixed", (1.1, 256 / 60000, 14040)),
    "T1": ("tune", (256 / 60000, 1.1, 14062, 10.0, 1.0)),
    "T2": ("tune", (256 / 60000, 1.1, 14062, 10.0, float("inf"))),
}
PEERS = {"eps": ["dp_accounting PLD", "opacus PRV"], "cal": ["dp_accounting PLD", "opacus PRV"],
         "fixed": ["dp_accounting RDP"], "tune": ["dp_accounting RDP"]}
ROUNDS = int(os.environ.get("SGMFAST_BENCH_ROUNDS", "7"))
WARM = max(1, int(os.environ.get("SGMFAST_BENCH_WARM", "8")))
#: (workload, implementation) -> (median seconds, value), filled as the rows run
RESULTS: dict = {}


# --- the calls ---------------------------------------------------------------------------------
def _sgmfast(kind, p):
    if kind == "eps":
        q, sigma, steps = p
        return lambda: pld.epsilon(sigma, q, steps, DELTA)
    if kind == "cal":
        eps, q, steps = p
        return lambda: calibrate_sigma(eps, DELTA, q, steps, accountant="pld")
    if kind == "tune":
        q, sigma, steps, mean, shape = p
        runs = tuning.poisson(mean) if shape == float("inf") else tuning.truncated_negative_binomial(shape, mean=mean)
        return lambda: tuning.epsilon(sigma, q, steps, DELTA, runs)
    sigma, g, steps = p
    return lambda: fixed_size.epsilon(sigma, g, steps, DELTA)


def _dpa_eps(q, sigma, steps):
    import dp_accounting as dpa

    acc = dpa.pld.PLDAccountant()  # value_discretization_interval 1e-4, pessimistic
    acc.compose(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(sigma)), steps)
    return acc.get_epsilon(DELTA)


def _opacus_eps(q, sigma, steps):
    from opacus.accountants import PRVAccountant

    acc = PRVAccountant()
    acc.history = [(sigma, q, steps)]
    return acc.get_epsilon(DELTA)


def _dpa_cal(eps, q, steps):
    import dp_accounting as dpa

    def event(s):
        return dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(s)), steps)

    return dpa.calibrate_dp_mechanism(dpa.pld.PLDAccountant, event, eps, DELTA)


def _opacus_cal(eps, q, steps):
    from opacus.accountants.utils import get_noise_multiplier

    return get_noise_multiplier(target_epsilon=eps, target_delta=DELTA, sample_rate=q, steps=steps, accountant="prv")


def _dpa_wor(sigma, g, steps):
    import dp_accounting as dpa
    from dp_accounting import dp_event
    from dp_accounting.rdp import rdp_privacy_accountant

    acc = rdp_privacy_accountant.RdpAccountant(neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE)
    acc.compose(dp_event.SampledWithoutReplacementDpEvent(N_MNIST, round(g * N_MNIST), dp_event.GaussianDpEvent(sigma / 2)),
                steps)
    return acc.get_epsilon(DELTA)


def _dpa_tune(q, sigma, steps, mean, shape):
    from dp_accounting import dp_event
    from dp_accounting.rdp import RdpAccountant

    one = dp_event.SelfComposedDpEvent(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma)), steps)
    acc = RdpAccountant()
    acc.compose(dp_event.RepeatAndSelectDpEvent(one, mean, shape))
    return acc.get_epsilon(DELTA)


_PEER_FNS = {("eps", "dp_accounting PLD"): ("dp_accounting", _dpa_eps), ("eps", "opacus PRV"): ("opacus", _opacus_eps),
             ("cal", "dp_accounting PLD"): ("dp_accounting", _dpa_cal), ("cal", "opacus PRV"): ("opacus", _opacus_cal),
             ("fixed", "dp_accounting RDP"): ("dp_accounting", _dpa_wor),
             ("tune", "dp_accounting RDP"): ("dp_accounting", _dpa_tune)}
#: peer calls of more than ~2 s here: one round
_SLOW = {("cal", "dp_accounting PLD"), ("cal", "opacus PRV"), ("W4", "opacus PRV")}


def _show(value) -> str:
    if hasattr(value, "lower"):
        return f"[{value.lower:.6f}, {value.upper:.6f}]"
    return f"{float(value):.6f}"


# --- the rows ----------------------------------------------------------------------------------
ROWS = [(w, "sgmfast") for w in WORKLOADS] + [(w, p) for w, (k, _) in WORKLOADS.items() for p in PEERS[k]]


@pytest.mark.parametrize("workload,impl", sorted(ROWS, key=lambda r: list(WORKLOADS).index(r[0])),
                         ids=[f"{w}-{i.replace(' ', '_')}" for w, i in sorted(ROWS, key=lambda r: list(WORKLOADS).index(r[0]))])
def test_workload(benchmark, workload, impl):
    kind, p = WORKLOADS[workload]
    benchmark.group = f"workload|{workload}"
    if impl == "sgmfast":
        fn = _sgmfast(kind, p)
        for _ in range(WARM):  # load the kernels (numba cache), warm the imports and the interpreter
            pld_common.STEP_CACHE.clear()
            fn()
        value = benchmark.pedantic(fn, setup=pld_common.STEP_CACHE.clear, rounds=ROUNDS, iterations=1)
    else:
        module, call = _PEER_FNS[(kind, impl)]
        pytest.importorskip(module)
        slow = (kind, impl) in _SLOW or (workload, impl) in _SLOW
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(0 if slow else WARM):
                call(*p)  # its imports, first-call set-up and the interpreter's warm-up
            value = benchmark.pedantic(call, args=p, rounds=1 if slow else 3, iterations=1)
    median = benchmark.stats.stats.median
    RESULTS[(workload, impl)] = (median, value)
    benchmark.extra_info["value"] = _show(value)
    print(f"\n{workload} {impl:>18}: {_show(value)}  median {median * 1e3:.2f} ms")


@pytest.fixture(scope="module", autouse=True)
def _ratio_table():
    """After the module: the ratios (fastest peer's median / sgmfast's median), as a table."""
    yield
    if not RESULTS:
        return
    lines = ["", "| workload | sgmfast | median | fastest peer | median | ratio |", "|---|---|---|---|---|---|"]
    for w, (kind, _) in WORKLOADS.items():
        ours = RESULTS.get((w, "sgmfast"))
        peers = [(RESULTS[(w, p)][0], p, RESULTS[(w, p)][1]) for p in PEERS[kind] if (w, p) in RESULTS]
        if ours is None or not peers:
            continue
        t, name, v = min(peers, key=lambda x: x[0])
        lines.append(f"| {w} | {_show(ours[1])} | {ours[0] * 1e3:.2f} ms | {name} {_show(v)} | {t * 1e3:.1f} ms "
                     f"| {t / ours[0]:.1f}x |")
    print("\n".join(lines))
