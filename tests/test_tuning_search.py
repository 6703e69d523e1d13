"""The default's fast path in ``sgmfast.tuning``: the two-stage split search of the profile bound
against a plain exhaustive search written out here, the floor under the RDP bound against that
bound and against dp_accounting (one-sided), the default against the smaller of the two bounds it
chooses between, and the profile's merged lookup against its own definition."""

import math

import numpy as np
import pytest

from sgmfast import tuning
from sgmfast.tuning import _profile_bound as profile_bound
from sgmfast.tuning import _rdp_bound as rdp_bound

MNIST = (1.1, 256 / 60000, 14062)
RUNS = {"logarithmic": tuning.logarithmic(mean=10), "geometric": tuning.geometric(mean=10),
        "tnb-2": tuning.truncated_negative_binomial(2.0, mean=10),
        "tnb-0.5": tuning.truncated_negative_binomial(-0.5, mean=10), "geometric-100": tuning.geometric(mean=100)}
RUNS_ = [pytest.param(v, id=k) for k, v in RUNS.items()]
CASES = [MNIST, (0.8, 0.01, 1000), (2.0, 0.05, 200), (1.0, 1.0, 1)]


@pytest.mark.parametrize("runs", RUNS_)
@pytest.mark.parametrize("run", CASES, ids=str)
@pytest.mark.parametrize("delta", [1e-5, 1e-8])
def test_rdp_floor_is_below_the_rdp_bound(runs, run, delta):
    floor = rdp_bound._rdp_epsilon_floor(*map(float, run), delta, runs)
    assert 0.0 < floor <= tuning.epsilon(*run, delta, runs, method="rdp")


@pytest.mark.peers
@pytest.mark.parametrize("shape", [0.0, 1.0, 2.0])
def test_rdp_floor_is_below_dp_accountings_rdp_bound(shape):
    """dp_accounting's RepeatAndSelectDpEvent (Theorem 2 at its own orders, all within those the
    floor covers): no bound of this theorem at any order lies below the floor."""
    pytest.importorskip("dp_accounting")
    from dp_accounting import dp_event
    from dp_accounting.rdp import RdpAccountant

    sigma, q, steps = MNIST
    one = dp_event.SelfComposedDpEvent(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma)), steps)
    acc = RdpAccountant()
    acc.compose(dp_event.RepeatAndSelectDpEvent(one, 10.0, shape))
    runs = tuning.truncated_negative_binomial(shape, mean=10.0)
    assert rdp_bound._rdp_epsilon_floor(sigma, q, float(steps), 1e-5, runs) <= acc.get_epsilon(1e-5)


@pytest.mark.parametrize("runs", RUNS_)
@pytest.mark.parametrize("run", CASES[:3], ids=str)
def test_default_is_the_smaller_bound(runs, run):
    """The default skips the RDP bound only where its floor is above the profile bound: the
    answer is the smaller of the two either way."""
    both = min(tuning.epsilon(*run, 1e-5, runs, method="rdp"), tuning.epsilon(*run, 1e-5, runs, method="profile"))
    assert tuning.epsilon(*run, 1e-5, runs) == pytest.approx(both, rel=1e-9)


def test_rdp_bound_skipped_where_its_floor_is_above(monkeypatch):
    calls = []
    real = tuning._rdp_epsilon
    monkeypatch.setattr(tuning, "_rdp_epsilon", lambda *a: calls.append(a) or real(*a))
    runs = RUNS["geometric"]
    eps = tuning.epsilon(*MNIST, 1e-5, runs)
    assert not calls  # (floor 4.46 against a profile bound of 3.90 here)
    assert eps < rdp_bound._rdp_epsilon_floor(*map(float, MNIST), 1e-5, runs)
    tuning.epsilon(*MNIST, 1e-5, tuning.poisson(10.0))
    assert len(calls) == 1  # (Poisson K: the RDP bound, which reads the profile, is the smaller)


def _plain_search(runs, prof, dlt, every=2):
    """The profile bound by brute force: every ``every``-th e1 of the profile's grid, every e2 of
    it, I(e1, e2) as the Riemann sum of the module notes (phi' at each cell's right end, l at its
    left end) in plain numpy floats, and eps_Q rounded up to the 256-point grid."""
    s = profile_bound._CELLS
    u_right, u_left = 1.0 - s[:-1], 1.0 - s[1:]
    width = np.diff(s)
    dpgf = lambda u: np.exp(runs.log_dpgf(np.clip(u, 0.0, 1.0)))  # noqa: E731
    hi = dpgf(u_right)
    e, d = prof.e, prof.d
    best = math.inf
    for j in range(0, e.size, every):
        e1, d1 = e[j], d[j]
        low = np.maximum.reduce([np.zeros_like(u_left), math.exp(-e1) * (u_left - d1),
                                 1.0 - math.exp(e1) * (1.0 - u_left) - d1])
        lo = dpgf(low)
        excess = (width * np.maximum(hi[None, :] - np.exp(e)[:, None] * lo[None, :], 0.0)).sum(axis=1)
        t = (dlt - excess) * np.exp(-e) / runs.mean
        k = np.searchsorted(-d, -t, side="left")  # first grid point with d <= t
        tot = np.where((t > 0) & (k < e.size), e + e[np.minimum(k, e.size - 1)], math.inf)
        best = min(best, float(tot.min()))
    return best


@pytest.mark.parametrize("name", ["geometric", "tnb-0.5"])
def test_two_stage_search_is_no_looser_than_a_plain_one(name):
    runs, dlt = RUNS[name], 1e-5
    lazy = tuning._target_profile(*MNIST, dlt, runs, 1e-3, "add_remove")
    got = profile_bound._profile_epsilon(*MNIST, dlt, runs, 1e-3, "add_remove", lazy)
    ref = _plain_search(runs, lazy(), dlt)
    assert got <= ref * (1 + 1e-9)
    assert got >= ref - 0.2  # (it searches finer splits and reads eps_Q off the grids, no more)


def test_merged_lookup_is_the_smaller_of_its_two_step_functions():
    runs, dlt = RUNS["geometric"], 1e-5
    prof = tuning._target_profile(*MNIST, dlt, runs, 1e-3, "add_remove")()
    x = np.linspace(0.0, prof.e[-1], 3001)
    fine = np.linspace(0.0, prof.e[-1], profile_bound._LOOKUP_POINTS)
    fine_d = np.minimum(np.minimum.accumulate(prof.delta_sharp(fine)), 1.0)

    def step(e, d, y):
        j = np.searchsorted(e, y, side="right") - 1
        return np.where(j >= 0, d[np.maximum(j, 0)], 1.0)

    assert np.array_equal(prof.delta_at(x), np.minimum(step(prof.e, prof.d, x), step(fine, fine_d, x)))
    for t in np.geomspace(1e-12, 1e-2, 40):
        eps = float(prof.epsilon_at(t))
        assert prof.delta_at(np.array([eps]))[0] <= t
        assert float(prof.delta_sharp(np.array([eps]))[0]) <= t  # (the grids' own bound there)
