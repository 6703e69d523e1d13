"""Run the Examples sections of the public modules as doctests."""

import doctest
import importlib

import pytest

MODULES = ["sgmfast.rdp", "sgmfast.pld.api", "sgmfast.calibrate", "sgmfast.calibrate.noise", "sgmfast.calibrate.run", "sgmfast.analysis",
           "sgmfast.analysis.onestep", "sgmfast.analysis.conjecture", "sgmfast.analysis.effective_noise",
           "sgmfast.analysis.batch_size", "sgmfast.analysis.amplification", "sgmfast.pld.samplers.balls_in_bins"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError:
        pytest.skip(f"{name} not present")
    failed, tried = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert failed == 0
    assert tried > 0, f"{name} has no examples"
