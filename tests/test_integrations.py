"""Adapters for Opacus and dp_accounting; the package itself stays light to import."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from sgmfast import pld, rdp

ENGINES = ["rdp", "pld"]


def _sgmfast_epsilon(engine, steps, delta):
    """sgmfast's own accountant over a list of (sigma, q, count)."""
    if engine == "rdp":
        acc = rdp.RDPAccountant()
    else:
        from sgmfast import pld

        acc = pld.PLDAccountant()
    for s, q, n in steps:
        acc.step(s, q, n)
    r = acc.epsilon(delta)
    return float(getattr(r, "upper", r))


def test_import_is_light():
    code = ("import sys, sgmfast; sgmfast.rdp; "
            "bad=[m for m in ('torch','opacus','dp_accounting','matplotlib') if m in sys.modules]; "
            "print(','.join(bad))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert res.stdout.strip() == ""


# ------------------------------------------------------------------ dp_accounting

@pytest.fixture
def dpa():
    return pytest.importorskip("dp_accounting")


@pytest.mark.parametrize("engine", ENGINES)
def test_dp_accounting_adapter_matches_sgmfast(dpa, engine):
    from sgmfast.integrations.dp_accounting import SGMFastPrivacyAccountant

    warm = dpa.PoissonSampledDpEvent(0.02, dpa.GaussianDpEvent(1.2))
    main = dpa.PoissonSampledDpEvent(0.01, dpa.GaussianDpEvent(0.9))
    event = dpa.ComposedDpEvent([dpa.SelfComposedDpEvent(warm, 50), dpa.SelfComposedDpEvent(main, 400)])
    acc = SGMFastPrivacyAccountant(accountant=engine).compose(event, 2)
    expected = _sgmfast_epsilon(engine, [(1.2, 0.02, 100), (0.9, 0.01, 800)], 1e-5)
    # Composition order does not change the result; the adapter records (50, 400) twice.
    assert acc.get_epsilon(1e-5) == pytest.approx(expected, rel=1e-3 if engine == "pld" else 1e-12)
    assert acc.get_delta(acc.get_epsilon(1e-5)) <= 1e-5 * (1 + 1e-3)


def test_dp_accounting_adapter_rejects_other_events(dpa):
    from sgmfast.integrations.dp_accounting import SGMFastPrivacyAccountant

    acc = SGMFastPrivacyAccountant(accountant="rdp")
    bad = dpa.ComposedDpEvent([dpa.GaussianDpEvent(1.0), dpa.LaplaceDpEvent(1.0)])
    assert not acc.supports(bad)
    with pytest.raises(dpa.UnsupportedEventError):
        acc.compose(bad)
    assert acc.get_epsilon(1e-5) == 0.0  # nothing was recorded
    assert not acc.supports(dpa.SampledWithoutReplacementDpEvent(100, 10, dpa.GaussianDpEvent(1.0)))
    special = SGMFastPrivacyAccountant(neighboring_relation=dpa.NeighboringRelation.REPLACE_SPECIAL)
    assert not special.supports(dpa.GaussianDpEvent(1.0))


def test_dp_accounting_gaussian_event_is_q_one(dpa):
    from sgmfast.integrations.dp_accounting import SGMFastPrivacyAccountant

    acc = SGMFastPrivacyAccountant(accountant="rdp").compose(dpa.GaussianDpEvent(3.0), 4)
    assert acc.get_epsilon(1e-5) == rdp.epsilon(3.0, 1.0, 4, 1e-5)


def test_calibrate_dp_mechanism_works_on_the_adapter(dpa):
    from sgmfast.integrations.dp_accounting import SGMFastPrivacyAccountant

    def make_event(sigma):
        return dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(0.01, dpa.GaussianDpEvent(sigma)), 1000)

    sigma = dpa.calibrate_dp_mechanism(lambda: SGMFastPrivacyAccountant(accountant="rdp"), make_event, 2.0, 1e-5)
    assert rdp.epsilon(sigma, 0.01, 1000, 1e-5) <= 2.0
    from sgmfast.calibrate import calibrate_sigma

    assert sigma == pytest.approx(calibrate_sigma(2.0, 1e-5, 0.01, 1000, accountant="rdp"), rel=1e-3)


# ------------------------------------------------------------------ Opacus

@pytest.fixture
def opacus():
    pytest.importorskip("torch")
    return pytest.importorskip("opacus")


@pytest.mark.parametrize("engine", ENGINES)
def test_opacus_accountant_interface(opacus, engine):
    from sgmfast.integrations.opacus import SGMFastAccountant

    acc = SGMFastAccountant(accountant=engine)
    for _ in range(30):
        acc.step(noise_multiplier=1.0, sample_rate=0.05)
    for _ in range(20):
        acc.step(noise_multiplier=0.8, sample_rate=0.05)
    assert len(acc) == 50
    assert acc.history == [(1.0, 0.05, 30), (0.8, 0.05, 20)]
    from sgmfast.integrations.opacus import mechanism_name

    assert acc.mechanism() == mechanism_name("poisson", "add_remove", engine)  # "sgmfast" for PLD
    assert (acc.mechanism() == "sgmfast") == (engine == "pld")
    eps = acc.get_epsilon(1e-5)
    assert eps == pytest.approx(_sgmfast_epsilon(engine, [(1.0, 0.05, 30), (0.8, 0.05, 20)], 1e-5), rel=1e-12)
    state = acc.state_dict()
    fresh = SGMFastAccountant(accountant=engine)
    fresh.load_state_dict(state)
    assert fresh.get_epsilon(1e-5) == eps
    with pytest.raises(ValueError, match="sample_rate"):
        acc.step(noise_multiplier=1.0, sample_rate=1.5)


def test_opacus_registry_and_noise_multiplier(opacus):
    from opacus.accountants import create_accountant

    from sgmfast.calibrate import calibrate_sigma
    from sgmfast.integrations.opacus import SGMFastAccountant, get_noise_multiplier

    assert isinstance(create_accountant("sgmfast"), SGMFastAccountant)
    s = get_noise_multiplier(target_epsilon=2.0, target_delta=1e-5, sample_rate=0.01, epochs=10, accountant="rdp")
    assert s == calibrate_sigma(2.0, 1e-5, 0.01, 1000, accountant="rdp")
    with pytest.raises(ValueError, match="either a number of steps or a number of epochs"):
        get_noise_multiplier(target_epsilon=2.0, target_delta=1e-5, sample_rate=0.01)


def _train(opacus, accountant, steps=12, noiseless=()):
    import torch

    torch.manual_seed(0)
    x = torch.randn(64, 5)
    y = torch.randint(0, 2, (64,))
    model = torch.nn.Linear(5, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8)
    engine = opacus.PrivacyEngine(accountant=accountant)
    model, opt, loader = engine.make_private(module=model, optimizer=opt, data_loader=loader,
                                             noise_multiplier=1.1, max_grad_norm=1.0)
    done = 0
    while done < steps:
        for xb, yb in loader:
            opt.noise_multiplier = 0.0 if done in noiseless else 1.1  # (a non-private phase: no noise)
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
            done += 1
            if done == steps:
                break
    return engine


@pytest.mark.filterwarnings("ignore:Secure RNG turned off:UserWarning")
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_opacus_training_loop(opacus):
    import sgmfast.integrations.opacus  # noqa: F401  registers "sgmfast"

    engine = _train(opacus, "sgmfast")
    acc = engine.accountant
    assert len(acc) == 12
    ((sigma, q, n),) = acc.history
    assert (sigma, q, n) == (1.1, 8 / 64, 12)
    eps = engine.get_epsilon(1e-5)
    assert eps == pytest.approx(_sgmfast_epsilon("pld", [(sigma, q, n)], 1e-5), rel=1e-12)
    # Within the PRV accountant's error bar (its estimate is not a certified bound).
    prv = pytest.importorskip("prv_accountant")
    acc = prv.PRVAccountant(prvs=[prv.PoissonSubsampledGaussianMechanism(noise_multiplier=sigma, sampling_probability=q)],
                            max_self_compositions=[n], eps_error=0.01, delta_error=1e-8)
    e_low, e_est, e_up = acc.compute_epsilon(delta=1e-5, num_self_compositions=[n])
    assert e_low <= eps <= e_up
    assert math.isfinite(eps) and eps > 0


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_opacus_training_loop_with_an_unnoised_phase(opacus):
    """sigma = 0 for three steps in the middle of a run: Opacus's own RDP accountant reports
    eps = inf for it, and so must ours (δ(eps) >= 1 - (1 - q)^3 for every finite eps)."""
    import sgmfast.integrations.opacus  # noqa: F401  registers "sgmfast"

    engine = _train(opacus, "sgmfast", noiseless=(4, 5, 6))
    acc = engine.accountant
    assert [h[0] for h in acc.history] == [1.1, 0.0, 1.1] and len(acc) == 12
    q = 8 / 64
    p = 1 - (1 - q) ** 3
    assert engine.get_epsilon(1e-5) == math.inf
    assert acc.get_delta(1.0) >= p
    assert math.isfinite(acc.get_epsilon(min(0.99, p + 0.05)))
    theirs = _train(opacus, "rdp", noiseless=(4, 5, 6))
    assert theirs.get_epsilon(1e-5) == math.inf


def test_dp_accounting_non_private_is_infinite(dpa):
    from sgmfast.integrations.dp_accounting import SGMFastPrivacyAccountant

    acc = SGMFastPrivacyAccountant(accountant="rdp").compose(dpa.PoissonSampledDpEvent(0.1, dpa.GaussianDpEvent(0)))
    # without noise a sampled record is revealed: eps = +inf below delta = q, and delta(eps) = q
    assert acc.get_epsilon(1e-5) == math.inf and acc.get_delta(1.0) == pytest.approx(0.1, rel=1e-12)
    assert acc.get_delta(1.0) >= 0.1
    pld_acc = SGMFastPrivacyAccountant().compose(dpa.PoissonSampledDpEvent(0.1, dpa.GaussianDpEvent(0)), 3)
    assert pld_acc.get_epsilon(1e-5) == math.inf and pld_acc.get_epsilon(0.5) == 0.0
    acc2 = SGMFastPrivacyAccountant(accountant="rdp").compose(dpa.NonPrivateDpEvent())
    assert acc2.get_epsilon(1e-5) == math.inf


def _overlap(a, b):
    """Two certified intervals of one quantity: they must overlap.  (Not equality: a refinement
    stops on a wall-clock budget, so a first call that also compiles kernels can stop earlier.)"""
    return a.lower <= b.upper * (1 + 1e-12) and b.lower <= a.upper * (1 + 1e-12)


# ------------------------------------------------------------------ dp_accounting, REPLACE_ONE

def _replace_one(dpa, **kw):
    from sgmfast.integrations.dp_accounting import SGMFastPrivacyAccountant

    return SGMFastPrivacyAccountant(neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE, **kw)


def test_dp_accounting_conformance_suite_both_relations(dpa):
    """dp_accounting's own abstract accountant tests (no events, no-op, non-private, unsupported
    events) on the adapter under both relations it takes."""
    import unittest

    from dp_accounting import privacy_accountant_test as pat

    from sgmfast.integrations.dp_accounting import SGMFastPrivacyAccountant

    class Conformance(pat.PrivacyAccountantTest):
        def _make_test_accountants(self):
            return [SGMFastPrivacyAccountant(), SGMFastPrivacyAccountant(accountant="rdp"), _replace_one(dpa)]

    suite = unittest.defaultTestLoader.loadTestsFromTestCase(Conformance)
    res = unittest.TextTestRunner(verbosity=0).run(suite)
    assert res.testsRun >= 10 and res.wasSuccessful(), (res.failures, res.errors)


def test_dp_accounting_fixed_size_batches_under_replace_one(dpa):
    """SampledWithoutReplacementDpEvent (dp_accounting's noise multiplier is per replace-one
    sensitivity, two clipping norms: sgmfast's sigma is twice it) is fixed_size's run, below
    dp_accounting's own RDP accountant for that event (the committed table's first row)."""
    import csv
    from pathlib import Path

    from sgmfast.pld.samplers import fixed_size

    ev = dpa.SampledWithoutReplacementDpEvent(60000, 256, dpa.GaussianDpEvent(0.55))
    acc = _replace_one(dpa).compose(dpa.SelfComposedDpEvent(ev, 14000)).compose(ev, 40)
    ours = fixed_size.epsilon(1.1, 256 / 60000, 14040, 1e-5)
    assert acc.get_epsilon_bounds(1e-5) == ours
    with open(Path(__file__).parent / "reference" / "dp_accounting_wor.csv") as fh:
        row = next(r for r in csv.DictReader(line for line in fh if not line.startswith("#")))
    assert (float(row["sigma"]), int(row["steps"])) == (1.1, 14040)
    assert acc.get_epsilon(1e-5) < float(row["epsilon_rdp"])
    d = acc.get_delta(ours.upper)
    assert d == fixed_size.delta(1.1, 256 / 60000, 14040, ours.upper).upper and d <= 1e-5 * (1 + 1e-3)
    # a bare Gaussian under REPLACE_ONE is the full batch: sensitivity 2 at noise 2 * multiplier
    full = _replace_one(dpa).compose(dpa.GaussianDpEvent(1.0), 3)
    assert full.get_epsilon(1e-5) == fixed_size.epsilon(2.0, 1.0, 3, 1e-5).upper


def test_dp_accounting_replace_one_refuses_what_it_cannot_account(dpa):
    """Poisson-sampled events have no replace-one accounting here; fixed-size runs of any kind do."""
    wor = dpa.SampledWithoutReplacementDpEvent(1000, 10, dpa.GaussianDpEvent(1.0))
    other = dpa.SampledWithoutReplacementDpEvent(1000, 20, dpa.GaussianDpEvent(1.0))
    acc = _replace_one(dpa).compose(wor, 5)
    assert acc.supports(wor) and acc.supports(other)  # runs of different batch fractions compose
    assert not acc.supports(dpa.PoissonSampledDpEvent(0.01, dpa.GaussianDpEvent(1.0)))
    assert _replace_one(dpa, accountant="rdp").supports(wor)
    from sgmfast.integrations.dp_accounting import SGMFastPrivacyAccountant

    assert not SGMFastPrivacyAccountant().supports(wor)  # add/remove: not this sampler's relation
    with pytest.raises(dpa.UnsupportedEventError):
        acc.compose(dpa.PoissonSampledDpEvent(0.01, dpa.GaussianDpEvent(1.0)))
    assert acc.get_epsilon_bounds(1e-5) == _replace_one(dpa).compose(wor, 5).get_epsilon_bounds(1e-5)


def test_dp_accounting_replace_one_rdp_engine_is_below_dp_accountings(dpa):
    ev = dpa.SampledWithoutReplacementDpEvent(60000, 256, dpa.GaussianDpEvent(0.55))
    ours = _replace_one(dpa, accountant="rdp").compose(ev, 14040)
    theirs = dpa.rdp.RdpAccountant(neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE).compose(ev, 14040)
    assert ours.get_epsilon(1e-5) == rdp.epsilon(1.1, 256 / 60000, 14040, 1e-5, sampler="fixed_size")
    assert ours.get_epsilon(1e-5) < theirs.get_epsilon(1e-5)
    assert ours.get_delta(ours.get_epsilon(1e-5)) <= 1e-5 * (1 + 1e-9)


def test_dp_accounting_replace_one_rdp_engine_composes_mixed_fixed_size_runs(dpa):
    """A warm-up at another batch size and noise: the RDP engine adds the runs' curves.  Below
    dp_accounting's own RDP for the same events, between the constant runs at the extremes (RDP
    grows as sigma falls and as the batch fraction grows), and delta(eps) consistent."""
    warm = dpa.SampledWithoutReplacementDpEvent(60000, 128, dpa.GaussianDpEvent(0.5))
    main = dpa.SampledWithoutReplacementDpEvent(60000, 256, dpa.GaussianDpEvent(0.6))
    events = dpa.ComposedDpEvent([dpa.SelfComposedDpEvent(warm, 500), dpa.SelfComposedDpEvent(main, 5000)])
    ours = _replace_one(dpa, accountant="rdp")
    assert ours.supports(events)
    ours.compose(events)
    theirs = dpa.rdp.RdpAccountant(neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE).compose(events)
    e = ours.get_epsilon(1e-6)
    assert e < theirs.get_epsilon(1e-6)
    lo = rdp.epsilon(1.2, 128 / 60000, 5500, 1e-6, sampler="fixed_size")
    hi = rdp.epsilon(1.0, 256 / 60000, 5500, 1e-6, sampler="fixed_size")
    assert lo <= e <= hi
    assert ours.get_delta(e) <= 1e-6 * (1 + 1e-9)
    assert ours.get_delta(0.99 * e) > 1e-6
    pld_acc = _replace_one(dpa).compose(events)  # the PLD engine: the same runs, certified
    from sgmfast.pld.samplers import fixed_size

    runs = [(1.0, 128 / 60000, 500), (1.2, 256 / 60000, 5000)]
    b = pld_acc.get_epsilon_bounds(1e-6)
    assert _overlap(b, fixed_size.epsilon_runs(runs, 1e-6))
    assert b.lower <= e  # (RDP above the pair's certified lower end)
    d = fixed_size.delta_runs(runs, b.upper)
    assert d.lower <= pld_acc.get_delta(b.upper) and d.lower <= 1e-6


# ------------------------------------------------------------------ Opacus, other samplers

def test_opacus_accountant_under_shuffled_and_fixed_size_batches(opacus):
    """poisson_sampling=False loaders walk shuffled data: sampler="balls_in_bins" accounts for that run
    (the public pld answer), a changing noise is bracketed by the constant runs at its ends, a
    changing sample rate or an unsupported engine is a clear ValueError."""
    from sgmfast.integrations.opacus import SGMFastAccountant, get_noise_multiplier

    q, t = 1 / 50, 100
    acc = SGMFastAccountant(sampler="balls_in_bins")
    assert acc.get_epsilon(1e-5) == 0.0
    for _ in range(t):
        acc.step(noise_multiplier=1.0, sample_rate=q)
    assert _overlap(acc.get_epsilon_bounds(1e-5), pld.epsilon(1.0, q, t, 1e-5, sampler="balls_in_bins"))
    e = acc.get_epsilon(1e-5)
    d = pld.delta(1.0, q, t, e, sampler="balls_in_bins")  # (delta's accuracy is a shift of eps by 1e-3 eps)
    assert d.lower <= acc.get_delta(e) and d.lower <= 1e-5 <= pld.delta(1.0, q, t, e * 0.998, sampler="balls_in_bins").upper

    mixed = SGMFastAccountant(sampler="balls_in_bins")
    for i in range(t):
        mixed.step(noise_multiplier=0.9 if i < 50 else 1.2, sample_rate=q)
    b = mixed.get_epsilon_bounds(1e-5)
    less, more = pld.epsilon(0.9, q, t, 1e-5, sampler="balls_in_bins"), pld.epsilon(1.2, q, t, 1e-5, sampler="balls_in_bins")
    assert less.lower <= b.upper and b.lower <= more.upper  # the constant runs' bounds at its ends
    assert b.lower <= b.upper

    bad = SGMFastAccountant(sampler="balls_in_bins")
    bad.step(noise_multiplier=1.0, sample_rate=0.02)
    bad.step(noise_multiplier=1.0, sample_rate=0.04)
    with pytest.raises(ValueError, match="sample_rate"):
        bad.get_epsilon(1e-5)
    with pytest.raises(ValueError, match="accountant"):
        SGMFastAccountant(accountant="rdp", sampler="balls_in_bins")
    with pytest.raises(ValueError, match="sampler"):
        SGMFastAccountant(sampler="shuffled")

    fs = SGMFastAccountant(accountant="rdp", sampler="fixed_size")
    for i in range(300):
        fs.step(noise_multiplier=1.0 if i < 100 else 1.3, sample_rate=0.01)
    assert fs.get_epsilon(1e-5) == rdp.fixed_size_runs([(1.0, 0.01, 100), (1.3, 0.01, 200)], 1e-5, 0)
    assert rdp.epsilon(1.3, 0.01, 300, 1e-5, sampler="fixed_size") <= fs.get_epsilon(1e-5) \
        <= rdp.epsilon(1.0, 0.01, 300, 1e-5, sampler="fixed_size")

    from sgmfast.pld.samplers import fixed_size

    fp = SGMFastAccountant(sampler="fixed_size")
    for i in range(300):
        fp.step(noise_multiplier=1.0 if i < 100 else 1.3, sample_rate=0.005 if i < 100 else 0.01)
    runs = [(1.0, 0.005, 100), (1.3, 0.01, 200)]
    assert _overlap(fp.get_epsilon_bounds(1e-5), fixed_size.epsilon_runs(runs, 1e-5))
    assert fixed_size.delta_runs(runs, 1.0).lower <= fp.get_delta(1.0)

    sigma = get_noise_multiplier(target_epsilon=2.0, target_delta=1e-5, sample_rate=q, epochs=10,
                                 sampler="balls_in_bins")
    check = SGMFastAccountant(sampler="balls_in_bins")
    for _ in range(t):
        check.step(noise_multiplier=sigma, sample_rate=q)
    assert check.get_epsilon(1e-5) <= 2.0


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_opacus_training_loop_without_poisson_sampling(opacus):
    """make_private(poisson_sampling=False): shuffled batches of 8 of 64, sample_rate = 1/8; the
    accountant attached to the engine accounts for the shuffled run, 3 epochs."""
    import torch

    from sgmfast.integrations.opacus import SGMFastAccountant

    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(64, 5), torch.randint(0, 2, (64,)))
    loader = torch.utils.data.DataLoader(data, batch_size=8, shuffle=True, drop_last=True)
    model = torch.nn.Linear(5, 2)
    engine = opacus.PrivacyEngine()
    engine.accountant = SGMFastAccountant(sampler="shuffle")
    model, opt, loader = engine.make_private(module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                                             data_loader=loader, noise_multiplier=1.1, max_grad_norm=1.0,
                                             poisson_sampling=False)
    for _ in range(3):
        for xb, yb in loader:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
    ((sigma, q, n),) = engine.accountant.history
    assert (sigma, q, n) == (1.1, 1 / 8, 24)
    ref = pld.epsilon(1.1, 1 / 8, 24, 1e-5, sampler="shuffle")
    assert _overlap(engine.accountant.get_epsilon_bounds(1e-5), ref) and engine.get_epsilon(1e-5) >= ref.lower
