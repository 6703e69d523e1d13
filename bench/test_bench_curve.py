"""A training run's accounting (issue #16): the privacy curve and per-step schedules, sgmfast beside
what a user does with the peers.

Run with ``pytest bench/test_bench_curve.py --benchmark-only -s``; ``SGMFAST_BENCH_SKIP_SLOW=1``
skips the peer calls that take more than ~30 s.  Every round starts from empty one-step caches
(sgmfast) or a fresh accountant (peers), so it is the cost of one user call.

* ``curve|mnist-60``: eps(1e-5) after each of 60 epochs, q = 256/60000, sigma = 1.1 (234 steps
  per epoch).  sgmfast's ``pld.epsilon_curve`` and, for scale, one ``pld.epsilon`` at the last
  epoch and the 60 single calls a user would otherwise make; Opacus's RDP and PRV accountants
  and dp_accounting's PLD accountant queried after every epoch, as in a training loop.
* ``schedule|*``: a noise schedule that changes every step, sigma uniform in [0.9, 1.3] at
  q = 256/60000: sgmfast's ``PLDAccountant`` (10^4 and 100 distinct sigmas), its RDP accountant,
  and PRV's heterogeneous composition (100 distinct sigmas: one PRV per segment).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from sgmfast import pld, rdp
from sgmfast.pld import common as pld_common

Q, SIGMA, EPOCHS, DELTA = 256 / 60000, 1.1, 60, 1e-5
PER_EPOCH = 234
CHECKPOINTS = np.arange(1, EPOCHS + 1) * PER_EPOCH
SLOW = {"opacus_prv_per_epoch", "dp_accounting_pld_per_epoch"}


def _skip_slow(impl):
    if os.environ.get("SGMFAST_BENCH_SKIP_SLOW") and impl in SLOW:
        pytest.skip("slow peer call skipped (SGMFAST_BENCH_SKIP_SLOW)")


def _fresh():
    pld_common.STEP_CACHE.clear()


def _curve_fn(impl):
    if impl == "sgmfast_pld_curve":
        def run():
            _fresh()
            b = pld.epsilon_curve(SIGMA, Q, CHECKPOINTS, DELTA)
            return float(b.upper[-1])
        return run
    if impl == "sgmfast_pld_one_epsilon":
        def run():
            _fresh()
            return float(pld.epsilon(SIGMA, Q, int(CHECKPOINTS[-1]), DELTA).upper)
        return run
    if impl == "sgmfast_pld_per_epoch":
        def run():
            _fresh()
            return [float(pld.epsilon(SIGMA, Q, int(t), DELTA).upper) for t in CHECKPOINTS][-1]
        return run
    if impl == "sgmfast_rdp_curve":
        return lambda: float(rdp.epsilon_curve(SIGMA, Q, CHECKPOINTS, DELTA)[-1])
    if impl.startswith("opacus"):
        accountants = pytest.importorskip("opacus.accountants")
        cls = accountants.RDPAccountant if impl == "opacus_rdp_per_epoch" else accountants.PRVAccountant

        def run():
            acc = cls()
            out = []
            for _ in range(EPOCHS):
                for _ in range(PER_EPOCH):
                    acc.step(noise_multiplier=SIGMA, sample_rate=Q)
                out.append(acc.get_epsilon(DELTA))
            return out[-1]
        return run
    dpa = pytest.importorskip("dp_accounting")

    def run():
        acc = dpa.pld.PLDAccountant()
        event = dpa.PoissonSampledDpEvent(Q, dpa.GaussianDpEvent(SIGMA))
        out = []
        for _ in range(EPOCHS):
            acc.compose(event, PER_EPOCH)
            out.append(acc.get_epsilon(DELTA))
        return out[-1]
    return run


CURVE_IMPLS = ["sgmfast_pld_curve", "sgmfast_pld_one_epsilon", "sgmfast_pld_per_epoch", "sgmfast_rdp_curve",
               "opacus_rdp_per_epoch", "opacus_prv_per_epoch", "dp_accounting_pld_per_epoch"]


@pytest.mark.parametrize("impl", CURVE_IMPLS)
def test_privacy_curve(benchmark, impl):
    _skip_slow(impl)
    benchmark.group = "curve|mnist-60-epochs"
    fn = _curve_fn(impl)
    print(f"\n{impl}: eps after epoch 60 = {fn()}")
    # (sgmfast's rounds take milliseconds: 15 of them give a median the machine's noise does not move)
    rounds = 1 if impl in SLOW else 15 if impl in ("sgmfast_pld_curve", "sgmfast_pld_one_epsilon") else 3
    benchmark.pedantic(fn, rounds=rounds, iterations=1, warmup_rounds=0)


def _sigmas(n):
    return np.random.default_rng(16).uniform(0.9, 1.3, n)


def _schedule_fn(impl, n):
    sig = _sigmas(n)
    steps = 10_000 // n
    if impl == "sgmfast_pld":
        def run():
            _fresh()
            acc = pld.PLDAccountant()
            for s in sig:
                acc.step(float(s), Q, steps)
            b = acc.epsilon(DELTA)
            return f"[{b.lower:.4f}, {b.upper:.4f}]"
        return run
    if impl == "sgmfast_rdp":
        def run():
            acc = rdp.RDPAccountant()
            for s in sig:
                acc.step(float(s), Q, steps)
            return acc.epsilon(DELTA)
        return run
    prv = pytest.importorskip("prv_accountant")

    def run():
        acc = prv.PRVAccountant(
            prvs=[prv.PoissonSubsampledGaussianMechanism(noise_multiplier=float(s), sampling_probability=Q) for s in sig],
            max_self_compositions=[steps] * n, eps_error=0.01, delta_error=DELTA / 1000)
        return acc.compute_epsilon(delta=DELTA, num_self_compositions=[steps] * n)
    return run


@pytest.mark.parametrize("impl, n", [("sgmfast_pld", 10_000), ("sgmfast_pld", 100), ("sgmfast_rdp", 10_000),
                                     ("prv_accountant", 100)])
def test_per_step_schedule(benchmark, impl, n):
    benchmark.group = f"schedule|{n}-distinct-sigmas"
    fn = _schedule_fn(impl, n)
    print(f"\n{impl} ({n} distinct sigmas, 10^4 steps): eps = {fn()}")
    rounds = 1 if impl == "prv_accountant" else 3
    benchmark.pedantic(fn, rounds=rounds, iterations=1, warmup_rounds=0)
