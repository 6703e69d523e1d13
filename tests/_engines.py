"""A schedule engine's intervals against the exact engine's (``pld.engine.Engine``): shared by the
lattice engines' tests."""

import numpy as np

from sgmfast.pld.engine import Engine


def meets_exact(make, sched, delta, width):
    """``make(sched)``'s eps(delta) interval meets the exact engine's and is at most ``width``
    (relative) wide, and its δ intervals at the middle of the exact eps interval and at twice its
    upper end meet the exact engine's."""
    lo, up, _ = make(sched).epsilon(delta)
    e_lo, e_up, _ = Engine(sched, 1e-3).epsilon(delta)
    assert lo <= e_up * (1 + 1e-12) and e_lo <= up * (1 + 1e-12)
    assert 0.0 < lo and up - lo <= width * up
    eps = np.array([0.5 * (e_lo + e_up), 2.0 * e_up])
    d_lo, d_up = make(sched).delta(eps)
    x_lo, x_up = Engine(sched, 1e-3).delta(eps)
    assert np.all(d_lo <= x_up * (1 + 1e-12)) and np.all(x_lo <= d_up * (1 + 1e-12))
