"""A finer ``accuracy`` never returns a wider interval than the default (issue #30 item 3): a
query asking for more first answers at the default accuracy and refines from there, keeping the
intersection of certified intervals.  Before, accuracy=1e-6 at the point below gave
[0.29844, 0.34067] where the default gives [0.3052904, 0.3052912]."""

import numpy as np
import pytest

from sgmfast import pld

POINTS = [
    (0.8236963278920236, 0.00022309339773680164, 128, 1.115890072541247e-10),
    (1.1, 256 / 60000, 3000, 1e-5),
    (0.6, 0.05, 40, 1e-8),
]


@pytest.mark.parametrize("point", POINTS)
def test_finer_epsilon_is_never_wider(point):
    base = pld.epsilon(*point)
    for acc in (1e-5, 1e-6):
        b = pld.epsilon(*point, accuracy=acc)
        assert base.lower <= b.lower <= b.upper <= base.upper


def test_finer_delta_is_never_wider():
    sigma, q, steps, _ = POINTS[0]
    eps = np.array([0.05, 0.3052904, 1.0])
    base = pld.delta(sigma, q, steps, eps)
    b = pld.delta(sigma, q, steps, eps, accuracy=1e-6)
    assert np.all(base.lower <= b.lower) and np.all(b.lower <= b.upper) and np.all(b.upper <= base.upper)
