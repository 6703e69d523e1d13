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


def _excess_rows_numpy(runs, cells, e1s, d1s, e2):
    """``_excess_rows`` as numpy expressions (the reference its kernels follow)."""
    from sgmfast.tuning._rounding import _F, _GAP

    hi, width, hw, sl = cells
    e1, d1 = np.asarray(e1s, dtype=np.float64).reshape(-1, 1), np.asarray(d1s, dtype=np.float64).reshape(-1, 1)
    gap = np.minimum(-np.expm1(-e1) + np.exp(-e1) * (sl + d1), np.exp(e1) * sl + d1)
    lo = profile_bound._exp_down(*runs._log_dpgf_gap(np.minimum(gap * (1.0 + _GAP), 1.0)))
    out = np.empty((lo.shape[0], np.size(e2)))
    excess_rows(hi, lo, width, np.exp(np.asarray(e2, dtype=np.float64)) * (1.0 - 2.0 * _F), out)
    return out * (1.0 + 1e-9) + 1e-15 * hw


def test_split_kernels_are_the_numpy_expressions():
    # the split search's kernels (``_kernels.tuning``) round as the numpy expressions they replace,
    # for every kind of K, on both kinds of cells: the same floats where numpy's exp and log are
    # libm's, within a few ulps where numpy dispatches to its own SIMD versions (AVX-512 machines:
    # 1-4 ulps apart, both within the rounding charge's premise ``_rounding._F``)
    from sgmfast.tuning._rounding import _REL

    def same(a, b):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=0.0)

    class Lookup:
        pass

    rng = np.random.default_rng(11)
    kinds = [tuning.poisson(7.5), tuning.binomial(40, 0.3), tuning.binomial(1, 0.6),
             tuning.truncated_negative_binomial(0.5, mean=12.0), tuning.logarithmic(mean=4.0), tuning.geometric(gamma=0.02)]
    for t in range(36):
        runs = kinds[t % 6]
        cells = profile_bound._cells(runs) if t % 2 else profile_bound._sampled_cells(runs)
        e1 = np.sort(rng.uniform(0.0, [1.0, 10.0, 600.0][t % 3], 4))
        d1 = np.sort(10.0 ** rng.uniform(-12, 0, 4))[::-1].copy()
        e2 = np.sort(rng.uniform(0.0, 5.0, 9))
        want = _excess_rows_numpy(runs, cells, e1, d1, e2)
        same(profile_bound._excess_rows(runs, cells, e1, d1, e2), want)
        prof = Lookup()
        prof.ef, df = np.linspace(0.0, 20.0, 300), np.minimum.accumulate(10.0 ** -np.sort(rng.uniform(0, 15, 300)))
        prof._neg_df = -df
        dlt, log_m = float(10.0 ** rng.uniform(-10, -1)), float(rng.uniform(0.0, 5.0))
        tot, tt, e2_up = profile_bound._split_totals(runs, cells, prof, e1, d1, e2, dlt, log_m)
        rest = dlt - _excess_rows_numpy(runs, cells, e1, d1, e2 * (1.0 - _REL))
        t_want = rest * (np.exp(-e2_up - log_m) * (1.0 - 1e-12))
        eps_q = profile_bound._Profile.epsilon_at(prof, t_want)
        with np.errstate(invalid="ignore"):
            tot_want = np.where(rest > 0.0, profile_bound._sum_up(e2_up, np.where(t_want >= 1.0, 0.0, eps_q)), math.inf)
        same(tt, t_want)
        same(tot, tot_want)
