"""The fast path of the tuning profile bound (``sgmfast.tuning._profile_bound``): the batched
Riemann sum against a plain sum, the batched coarse-to-fine search against the one-at-a-time one,
and the profile read off tilted pessimistic grids against the PLD accountant's own two-sided
bounds (an independent query: its optimistic grids, a different tilt and its accuracy loop)."""

import math

import numpy as np
import pytest

from sgmfast import pld, tuning
from sgmfast._kernels.tuning import excess_rows
from sgmfast.tuning import _profile_bound as profile_bound


def test_excess_rows_is_the_plain_sum():
    rng = np.random.default_rng(7)
    hi = rng.random(301) * 10.0
    lo = rng.random((5, 301)) * 5.0
    lo[:, ::7] = 0.0
    lo[2, 3] = np.inf
    hi[3] = np.inf  # (inf - inf: NaN, dropped, as the one-row kernel does)
    width = rng.random(301)
    scale = np.exp(np.linspace(0.0, 4.0, 33))
    out = np.empty((5, 33))
    excess_rows(hi, lo, width, scale, out)
    h, w, low, sc = hi.tolist(), width.tolist(), lo.tolist(), scale.tolist()  # (Python floats)
    for j in range(5):
        for k in range(33):
            terms = []
            for i in range(301):
                v = h[i] - sc[k] * low[j][i] if low[j][i] != 0.0 else h[i]
                if v > 0.0:  # (NaN is not)
                    terms.append(w[i] * v)
            exact = math.fsum(terms)
            assert out[j, k] == pytest.approx(exact, rel=1e-13) if math.isfinite(exact) else out[j, k] == exact


@pytest.mark.parametrize("seed", range(6))
def test_batched_coarse_fine_is_the_sequential_search(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 70))
    vals = rng.random(n)
    vals[rng.random(n) < 0.3] = math.inf
    vals[rng.integers(0, n)] = vals.min() if np.isfinite(vals).any() else math.inf  # (ties)

    def at(j):
        return float(vals[j]), (j if vals[j] < math.inf else None)

    def rows(js):
        return vals[js], [at(int(j))[1] for j in js]

    want = profile_bound._coarse_fine(at, n)
    got = profile_bound._coarse_fine_rows(rows, n)
    assert got == want


@pytest.mark.parametrize("sigma,q,steps", [(1.1, 256 / 60000, 14062), (0.8, 0.01, 1000), (2.0, 0.05, 200)])
def test_tilted_profile_brackets_the_pld_accountant(sigma, q, steps):
    prof = profile_bound._Profile(sigma, q, steps, 8.0, 1e-10, 1e-3, "add_remove", tilt_at=2.5e-8)
    assert prof.grids is not None
    x = prof.e[::32]
    ref = pld.delta(sigma, q, steps, x, accuracy=1e-3)
    d = prof.delta_sharp(x)
    assert np.all(d >= np.asarray(ref.lower))  # an upper bound: above the accountant's lower bound
    assert np.all(prof.delta_at(x) >= np.asarray(ref.lower))  # (the profile: the smaller of two bounds)
    # and tight where the bound reads it (delta below 1e-2: a tilt towards small delta leaves the
    # largest deltas to its window's edge, up to ~35 % loose at eps = 0 here)
    up = np.asarray(ref.upper)
    assert np.all(prof.delta_at(x) <= np.where(up < 1e-2, np.maximum(up * 1.05, 1e-13), 1.5 * up))
    for t in (1e-6, 2.5e-8):
        r = pld.epsilon(sigma, q, steps, t, accuracy=1e-3)
        e = prof.epsilon_sharp(t)
        assert r.lower <= e <= r.upper * (1 + 2e-3)
        assert prof.delta_sharp(np.array([e]))[0] <= t


def test_profile_bound_same_with_and_without_the_tilt():
    """The default (tilted, kept grids) against the untilted profile with PLD queries: both upper
    bounds, the default never more than 1e-3 above the other on MNIST's run (and at most 2e-3
    below: the zoom on e2 reads the kept grids' fine lookup, which the untilted profile lacks)."""
    sigma, q, steps, dlt = 1.1, 256 / 60000, 14062, 1e-5
    for runs in (tuning.geometric(mean=10), tuning.poisson(10.0)):
        d = tuning._decade(dlt) / runs.mean
        fast = tuning._target_profile(sigma, q, steps, dlt, runs, 1e-3, "add_remove")
        slow = tuning._lazy_profile(sigma, q, steps, lambda: fast().e[-1], 1e-4 * d, 1e-3, "add_remove")
        a = profile_bound._profile_epsilon(sigma, q, steps, dlt, runs, 1e-3, "add_remove", fast)
        b = profile_bound._profile_epsilon(sigma, q, steps, dlt, runs, 1e-3, "add_remove", slow)
        assert slow().grids is None and fast().grids is not None
        assert b * (1 - 2e-3) <= a <= b * (1 + 1e-3)


def test_sharp_eps_far_from_the_tilt_is_no_worse_than_a_query():
    """Far from the delta the grids are tilted towards, eps_Q is asked of the accountant as well."""
    sigma, q, steps = 0.52, 0.0066, 495
    prof = profile_bound._Profile(sigma, q, steps, 30.0, 1e-14, 1e-3, "add_remove", tilt_at=1.8e-11)
    for t in (2.8e-14, 1e-5):
        r = pld.epsilon(sigma, q, steps, t, accuracy=1e-3)
        assert r.lower <= prof.epsilon_sharp(t) <= r.upper
