"""One accountant contract (``sgmfast._accountant``) and one sampler table (``sgmfast._samplers``):
what the RDP and PLD accountants share, what calibration and the adapters ask of them, and every
restatement of the sampler rules read from the table."""

import math

import pytest

from sgmfast import _samplers, calibrate, pld, rdp
from sgmfast._accountant import Accountant
from sgmfast.pld import PLDAccountant
from sgmfast.rdp import RDPAccountant

RUN = [(1.1, 0.01, 300), (0.9, 0.02, 100), (1.1, 0.01, 50)]


def _record(acc):
    for s, q, t in RUN:
        assert acc.step(s, q, t) is acc
    return acc


@pytest.mark.parametrize("cls", [RDPAccountant, PLDAccountant])
def test_both_accountants_keep_the_contract(cls):
    acc = _record(cls())
    assert isinstance(acc, Accountant) and acc.engine in _samplers.ENGINES
    up = acc.epsilon_upper(1e-5)
    assert isinstance(up, float) and 0.0 < up < math.inf
    ans = acc.epsilon(1e-5)
    assert up == (ans.upper if acc.engine == "pld" else ans)
    d = acc.delta_upper(up)
    assert isinstance(d, float) and 0.0 < d <= 1e-5 * (1 + 1e-3)  # δ(ε(δ)) comes back to about δ
    curve = acc.epsilon_curve(1e-5)
    last = curve.upper[-1] if acc.engine == "pld" else curve[-1]
    assert last == pytest.approx(up, rel=2e-3)


@pytest.mark.parametrize("cls, options", [(RDPAccountant, {"orders": [2.0, 8.0, 32.0]}),
                                          (PLDAccountant, {"accuracy": 1e-2, "relation": "replace_one"})])
def test_state_dict_rebuilds_the_same_accountant(cls, options):
    acc = _record(cls(**options))
    state = acc.state_dict()
    assert state["engine"] == acc.engine and len(state["history"]) >= 2
    again = cls().load_state_dict(state)
    assert again.state_dict() == state
    assert again.epsilon_upper(1e-6) == acc.epsilon_upper(1e-6)


def test_a_state_of_another_engine_is_refused():
    with pytest.raises(ValueError, match="engine"):
        PLDAccountant().load_state_dict(_record(RDPAccountant()).state_dict())


def test_the_accountant_agrees_with_the_one_call_functions():
    for s, q, t in [(1.1, 256 / 60000, 14062), (0.8, 0.01, 1000), (1.0, 1.0, 10)]:
        assert PLDAccountant().step(s, q, t).epsilon_upper(1e-5) == pld.epsilon(s, q, t, 1e-5).upper
        assert RDPAccountant().step(s, q, t).epsilon_upper(1e-5) == rdp.epsilon(s, q, t, 1e-5)


@pytest.mark.parametrize("engine", ["pld", "rdp"])
def test_calibrated_sigma_meets_the_target_by_the_contract(engine):
    sigma = calibrate.calibrate_sigma(2.0, 1e-5, 0.01, 500, accountant=engine)
    acc = (PLDAccountant() if engine == "pld" else RDPAccountant()).step(sigma, 0.01, 500)
    assert acc.epsilon_upper(1e-5) <= 2.0


def test_every_restatement_of_the_samplers_reads_the_table():
    from sgmfast.cli.common import EPOCH_SAMPLERS as cli_epoch
    from sgmfast.cli.parser import SAMPLERS as cli_samplers
    from sgmfast.integrations import opacus  # noqa: F401  (registers the mechanisms)
    from sgmfast.integrations.opacus import mechanism_name
    from sgmfast.pld import samplers as pld_samplers

    table = _samplers.TABLE
    assert cli_samplers == tuple(s.replace("_", "-") for s in table)
    assert set(cli_epoch) == {s.cli for s in table.values() if s.per_epoch}
    assert pld_samplers.SAMPLERS == tuple(table) and pld_samplers.EPOCH_SAMPLERS == _samplers.EPOCH_SAMPLERS
    assert rdp.RDP_SAMPLERS == tuple(s for s, row in table.items() if "rdp" in row.relations)
    for sampler, row in table.items():
        assert pld_samplers.allowed(sampler) == row.relations["pld"]
        for engine in _samplers.ENGINES:
            if engine not in row.relations:
                with pytest.raises(ValueError, match="accountant must be"):
                    _samplers.check_engine(sampler, engine)
                continue
            for relation in row.relations[engine]:
                assert _samplers.resolve(sampler, relation, engine) == relation
                name = mechanism_name(sampler, relation, engine)
                from opacus.accountants.registry import _ACCOUNTANTS
                assert name in _ACCOUNTANTS


def test_unknown_sampler_and_relation_name_the_parameter():
    with pytest.raises(ValueError, match="sampler must be one of"):
        _samplers.get("permutation")
    with pytest.raises(ValueError, match="relation 'replace_one' is not available for sampler 'poisson' with the RDP"):
        _samplers.resolve("poisson", "replace_one", "rdp")


@pytest.mark.parametrize("cls", [RDPAccountant, PLDAccountant])
def test_step_checks_plain_numbers_as_numpy_ones(cls):
    # (plain floats take a fast path that skips numpy: the same records, the same refusals)
    import numpy as np

    fast, slow = cls(), cls()
    for s, q, t in RUN:
        fast.step(float(s), float(q), int(t))
        slow.step(np.array(s), np.array(q), np.array(t))
    assert fast.state_dict() == slow.state_dict()
    for bad in [(math.nan, 0.1, 1), (1.0, 1.5, 1), (1.0, -0.1, 1), (1.0, 0.1, -1), (-1.0, 0.1, 1),
                (1.0, math.nan, 1), (1.0, 0.1, 1.5), ([1.0, 2.0], 0.1, 1)]:
        with pytest.raises(ValueError):
            cls().step(*bad)
    with pytest.raises(TypeError, match="boolean"):
        cls().step(1.0, 0.1, True)
