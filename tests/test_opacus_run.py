"""Issue #28's Opacus reproducers in real training loops: the sampler travels with the run through
calibration, checkpoints and attachment, so nothing under-reports ε."""

from __future__ import annotations

import math

import pytest

from sgmfast import pld

torch = pytest.importorskip("torch")
opacus = pytest.importorskip("opacus")

from sgmfast.integrations.opacus import SGMFastAccountant, mechanism_name  # noqa: E402
from sgmfast.integrations.torch import BallsInBinsBatchSampler, FixedSizeBatchSampler  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning"),  # Opacus's secure-RNG notes, the loose shuffle
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]

N = 64


def _data():
    torch.manual_seed(0)
    return torch.utils.data.TensorDataset(torch.randn(N, 5), torch.randint(0, 2, (N,)))


def _model():
    model = torch.nn.Linear(5, 2)
    return model, torch.optim.SGD(model.parameters(), lr=0.1)


def _train(model, opt, loader, epochs):
    for _ in range(epochs):
        for xb, yb in loader:
            if len(xb) == 0:
                continue
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()


def _collate(batch):
    return torch.utils.data.default_collate(batch)


def test_make_private_with_epsilon_calibrates_with_the_attached_sampler():
    """Issue reproducer: a fixed-size accountant with make_private_with_epsilon used to be
    calibrated by a Poisson accountant (ε 16-26 after training for a target of 3)."""
    data = _data()
    loader = torch.utils.data.DataLoader(data, batch_sampler=FixedSizeBatchSampler(N, 8, generator=torch.Generator().manual_seed(1)))
    engine = opacus.PrivacyEngine()
    engine.accountant = SGMFastAccountant(sampler="fixed_size")
    model, opt = _model()
    model, opt, loader = engine.make_private_with_epsilon(module=model, optimizer=opt, data_loader=loader,
                                                          target_epsilon=3.0, target_delta=1e-5, epochs=3,
                                                          max_grad_norm=1.0, poisson_sampling=False)
    _train(model, opt, loader, 3)
    assert len(engine.accountant) == 24
    assert engine.accountant.mechanism() == mechanism_name("fixed_size", "replace_one", "pld")
    assert engine.get_epsilon(1e-5) <= 3.0
    assert engine.get_epsilon(1e-5) >= 2.5  # calibrated to the target, not far below it


def test_a_named_sampler_that_is_not_the_loaders_is_refused():
    """fixed_size named, but the loader is a plain shuffled DataLoader: refused, not mis-accounted."""
    loader = torch.utils.data.DataLoader(_data(), batch_size=8, shuffle=True)
    engine = opacus.PrivacyEngine()
    engine.accountant = SGMFastAccountant(sampler="fixed_size")
    model, opt = _model()
    with pytest.raises(ValueError, match="shuffle"):
        engine.make_private_with_epsilon(module=model, optimizer=opt, data_loader=loader, target_epsilon=3.0,
                                         target_delta=1e-5, epochs=3, max_grad_norm=1.0, poisson_sampling=False)
    engine = opacus.PrivacyEngine()
    engine.accountant = SGMFastAccountant(sampler="balls_in_bins")
    with pytest.raises(ValueError, match="poisson"):
        engine.make_private(module=model, optimizer=opt, data_loader=loader, noise_multiplier=1.0,
                            max_grad_norm=1.0)


def test_poisson_sampling_false_accounts_for_the_permutation_shuffle():
    """PrivacyEngine(accountant="sgmfast") with make_private(poisson_sampling=False) over a
    DataLoader(shuffle=True): the shuffle, not Poisson, is accounted (its sound upper bound)."""
    import sgmfast.integrations.opacus  # noqa: F401

    loader = torch.utils.data.DataLoader(_data(), batch_size=8, shuffle=True, drop_last=True)
    engine = opacus.PrivacyEngine(accountant="sgmfast")
    model, opt = _model()
    model, opt, loader = engine.make_private(module=model, optimizer=opt, data_loader=loader, noise_multiplier=1.1,
                                             max_grad_norm=1.0, poisson_sampling=False)
    _train(model, opt, loader, 3)
    acc = engine.accountant
    assert acc.sampler == "shuffle" and acc.relation == "zero_out" and acc.history == [(1.1, 1 / 8, 24)]
    ref = pld.epsilon(1.1, 1 / 8, 24, 1e-5, sampler="shuffle")
    assert engine.get_epsilon(1e-5) == ref.upper
    assert engine.get_epsilon(1e-5) > pld.epsilon(1.1, 1 / 8, 24, 1e-5).upper  # above Poisson's here


def test_balls_in_bins_loader_is_accounted_tightly():
    loader = torch.utils.data.DataLoader(_data(), batch_sampler=BallsInBinsBatchSampler(N, 8), collate_fn=_collate)
    engine = opacus.PrivacyEngine()
    engine.accountant = SGMFastAccountant()
    model, opt = _model()
    model, opt, loader = engine.make_private(module=model, optimizer=opt, data_loader=loader, noise_multiplier=1.1,
                                             max_grad_norm=1.0, poisson_sampling=False)
    _train(model, opt, loader, 2)
    assert engine.accountant.sampler == "balls_in_bins"
    b = pld.epsilon(1.1, 1 / 8, len(engine.accountant), 1e-5, sampler="balls_in_bins")
    assert engine.get_epsilon(1e-5) == b.upper


def test_state_dict_carries_the_sampler():
    """Issue reproducer: a fixed-size run's state loaded into a default accountant resumed at a
    fraction of its ε (7.02 -> 0.85); now the load raises, and the same configuration resumes."""
    acc = SGMFastAccountant(sampler="fixed_size")
    for _ in range(300):
        acc.step(noise_multiplier=1.0, sample_rate=0.05)
    state = acc.state_dict()
    assert state["sampler"] == "fixed_size" and state["relation"] == "replace_one"
    with pytest.raises(ValueError, match="fixed_size"):
        SGMFastAccountant().load_state_dict(state)
    from opacus.accountants import RDPAccountant

    with pytest.raises(ValueError):
        RDPAccountant().load_state_dict(state)
    again = SGMFastAccountant(sampler="fixed_size")
    again.load_state_dict(state)
    assert again.get_epsilon(1e-5) == acc.get_epsilon(1e-5)
    # a checkpoint through the engine, resumed by a new engine with the same accountant
    legacy = {"history": [(1.0, 0.05, 300)], "mechanism": "sgmfast"}
    with pytest.raises(ValueError):
        SGMFastAccountant(sampler="fixed_size").load_state_dict(legacy)


def test_checkpoint_round_trip_through_the_engine(tmp_path):
    loader = torch.utils.data.DataLoader(_data(), batch_sampler=FixedSizeBatchSampler(N, 8), collate_fn=_collate)
    engine = opacus.PrivacyEngine()
    engine.accountant = SGMFastAccountant(sampler="fixed_size")
    model, opt = _model()
    model, opt, loader = engine.make_private(module=model, optimizer=opt, data_loader=loader, noise_multiplier=1.0,
                                             max_grad_norm=1.0, poisson_sampling=False)
    _train(model, opt, loader, 2)
    eps = engine.get_epsilon(1e-5)
    engine.save_checkpoint(path=tmp_path / "ck.pt", module=model, optimizer=opt)
    fresh = opacus.PrivacyEngine(accountant="sgmfast")  # the default: Poisson -- refused
    with pytest.raises(ValueError):
        fresh.load_checkpoint(path=tmp_path / "ck.pt", module=model)
    fresh = opacus.PrivacyEngine(accountant=mechanism_name("fixed_size", "replace_one", "pld"))
    fresh.load_checkpoint(path=tmp_path / "ck.pt", module=model)
    assert fresh.get_epsilon(1e-5) == eps and math.isfinite(eps)


def test_attaching_after_make_private_raises_at_once():
    """Issue reproducer: an accountant attached after make_private recorded nothing (ε 0.0 after
    300 steps); now the assignment itself raises."""
    loader = torch.utils.data.DataLoader(_data(), batch_size=8)
    engine = opacus.PrivacyEngine()
    model, opt = _model()
    engine.make_private(module=model, optimizer=opt, data_loader=loader, noise_multiplier=1.0, max_grad_norm=1.0)
    with pytest.raises(RuntimeError, match="before make_private"):
        engine.accountant = SGMFastAccountant()
