"""Every sampler answers sigma = +inf (each output is pure noise, whatever the data: the two
neighbouring runs have the same distribution, so eps(delta) = 0 and delta(eps) = 0 for eps >= 0)
through every entry point, instead of refusing it or failing inside."""

import math
import subprocess
import sys

import numpy as np
import pytest

from sgmfast import pld
from sgmfast.pld import allocation, shuffle

SAMPLERS = ["poisson", "balls_in_bins", "shuffle", "fixed_size"]


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_infinite_noise_reveals_nothing(sampler):
    b = pld.epsilon(math.inf, 0.25, 8, 1e-5, sampler=sampler)
    assert (b.lower, b.upper) == (0.0, 0.0)
    d = pld.delta(math.inf, 0.25, 8, np.array([0.0, 0.5, 3.0]), sampler=sampler)
    assert np.all(d.lower == 0.0) and np.all(d.upper == 0.0)
    c = pld.epsilon_curve(math.inf, 0.25, [4, 8], 1e-5, sampler=sampler)
    assert np.all(c.upper == 0.0)


def test_the_samplers_own_calls_take_infinite_noise():
    assert tuple(allocation.epsilon(math.inf, 4, 8, 1e-5)) == (0.0, 0.0)
    assert tuple(allocation.delta(math.inf, 4, 8, 0.0)) == (0.0, 0.0)
    assert tuple(shuffle.epsilon(math.inf, 4, 8, 1e-5)) == (0.0, 0.0)
    assert shuffle.upper_epsilon(math.inf, 4, 8, 1e-5) == 0.0
    with pytest.raises(ValueError, match="sigma"):
        allocation.epsilon(math.nan, 4, 8, 1e-5)


def test_the_cli_prints_zero_for_infinite_noise():
    out = subprocess.run([sys.executable, "-m", "sgmfast", "epsilon", "--sigma", "inf", "--q", "0.25", "--steps", "8",
                          "--delta", "1e-5", "--sampler", "shuffle"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "epsilon: 0" in out.stdout
