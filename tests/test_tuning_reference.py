"""sgmfast.tuning against an exact best-of-K Gaussian search, and the rounding of its profile bound.

* ``reference/tuning_best_of_k.csv`` (``reference/make_tuning_best_of_k.py``, mpmath, no sgmfast):
  the exact privacy profile of one tuning instance -- the Gaussian mechanism run K times, the
  largest output released -- at q = 1, where a DP-SGD run is exactly mu-GDP, mu = sqrt(steps) /
  sigma.  One score on one pair of datasets: a lower bound on the search's true privacy cost, so
  the check is one-sided (sgmfast's epsilon and delta are upper bounds; ``method="best"`` is the
  smaller of the two bounds, so both are checked at once).  How far above the instance they lie
  is in ``reference/README.md``.
* the profile bound's Riemann sum (module notes, (d)): every cell's phi' values on the safe side
  of the exact ones (mpmath), and the whole sum above the exact sum, on run counts where the
  float rounding of u = 1 - s and of l(u) used to move it either way (gamma below an ulp of 1).
"""

import csv
import math
from pathlib import Path

import mpmath as mp
import numpy as np
import pytest

from sgmfast import tuning
from sgmfast.tuning import _profile_bound as profile_bound

TABLE = Path(__file__).parent / "reference" / "tuning_best_of_k.csv"


def _rows():
    with open(TABLE) as fh:
        return list(csv.DictReader(line for line in fh if not line.startswith("#")))


def _runs(row):
    p = float(row["param"])
    if row["runs"] == "poisson":
        return tuning.poisson(p)
    if row["runs"] == "geometric":
        return tuning.geometric(gamma=p)
    assert row["runs"] == "logarithmic"
    return tuning.logarithmic(gamma=p)


ROWS = _rows()


def test_table_covers_the_grid():
    assert len(ROWS) == 324
    assert {(r["sigma"], r["steps"]) for r in ROWS} == {(s, t) for s in ("0.7", "1.0", "2.0") for t in ("1", "4", "16")}
    assert {r["runs"] for r in ROWS} == {"poisson", "geometric", "logarithmic"}
    assert {round(float(r["mean"])) for r in ROWS} == {2, 10, 50}
    for r in ROWS:
        # mu = sqrt(steps) / sigma, and the delta written is the larger direction
        assert float(r["mu"]) == pytest.approx(math.sqrt(int(r["steps"])) / float(r["sigma"]), rel=1e-15)
        assert float(r["delta"]) == pytest.approx(max(float(r["delta_fwd"]), float(r["delta_bwd"])), rel=1e-15)
        assert _runs(r).mean == pytest.approx(float(r["mean"]), rel=1e-9)


@pytest.mark.parametrize("key", sorted({(r["sigma"], r["steps"], r["runs"], r["param"]) for r in ROWS}),
                         ids=lambda k: f"sigma{k[0]}-T{k[1]}-{k[2]}{float(k[3]):.3g}")
def test_bounds_not_below_the_exact_instance(key):
    for r in (r for r in ROWS if (r["sigma"], r["steps"], r["runs"], r["param"]) == key):
        sigma, steps, runs = float(r["sigma"]), int(r["steps"]), _runs(r)
        if r["query"] == "epsilon":
            ours = tuning.epsilon(sigma, 1.0, steps, float(r["delta"]), runs)
            ref = float(r["epsilon"])
        else:
            ours = tuning.delta(sigma, 1.0, steps, float(r["epsilon"]), runs)
            ref = float(r["delta"])
        # (the table is good to 25 digits; 1e-12 leaves the reading of it room)
        assert ours >= ref * (1 - 1e-12), (r["row_id"], r["query"], ours, ref)


# ------------------------------------------------------------------------------------------------
# The rounding of the Riemann sum

def _dpgf_exact(runs, s):
    """phi'(1 - s) at 50 digits, s an mpf (the cell edges are exact binary values)."""
    if runs.kind == "poisson":
        mu = mp.mpf(runs.mu)
        return mu * mp.exp(-mu * s)
    if runs.kind == "binomial":
        p = mp.mpf(runs.p)
        return runs.n * p * (1 - p * s) ** (runs.n - 1)
    eta, g = mp.mpf(runs.shape), mp.mpf(runs.gamma)
    c = 1 - g
    const = c / mp.log(1 / g) if eta == 0 else eta * c / (g ** (-eta) - 1)
    return const * (g + c * s) ** (-(eta + 1))


def _gap_exact(e1, d1, s):
    """1 - l(1 - s), l(u) = max(0, e^-e1 (u - d1), 1 - e^e1 (1 - u) - d1), exactly."""
    e1, d1 = mp.mpf(e1), mp.mpf(d1)
    u = 1 - s
    return 1 - max(mp.mpf(0), mp.exp(-e1) * (u - d1), 1 - mp.exp(e1) * (1 - u) - d1)


CELL_CASES = [
    (tuning.truncated_negative_binomial(-0.7, gamma=1e-17), 0.0, 1e-15),
    (tuning.truncated_negative_binomial(-0.7, gamma=1e-17), 0.2535, 6.909e-17),
    (tuning.truncated_negative_binomial(-0.99, gamma=1e-300), 0.01, 1e-200),
    (tuning.truncated_negative_binomial(50.0, gamma=1e-3), 2.0, 1e-9),
    (tuning.geometric(mean=50), 0.01, 1e-13),
    (tuning.poisson(1e4), 0.5, 1e-12),
    (tuning.binomial(5, 0.999999), 0.001, 1e-14),
    (tuning.binomial(8, 1.0), 3.0, 0.0),
]


@pytest.mark.parametrize("runs,e1,d1", CELL_CASES, ids=lambda x: getattr(x, "kind", None) or f"{x:g}")
def test_cells_round_to_the_safe_side(runs, e1, d1):
    s = profile_bound._CELLS
    hi = profile_bound._exp_up(*runs._log_dpgf_gap(s[:-1]))
    gap = np.minimum(-math.expm1(-e1) + math.exp(-e1) * (s[1:] + d1), math.exp(e1) * s[1:] + d1)
    gap = np.minimum(gap * (1.0 + profile_bound._GAP), 1.0)
    lo = profile_bound._exp_down(*runs._log_dpgf_gap(gap))
    with mp.workdps(50):
        for i in range(s.size - 1):
            assert hi[i] >= _dpgf_exact(runs, mp.mpf(float(s[i]))), i  # phi' at u_i, rounded up
            g = _gap_exact(e1, d1, mp.mpf(float(s[i + 1])))
            assert gap[i] >= g, i  # 1 - l at u_{i+1}, rounded up
            assert lo[i] <= _dpgf_exact(runs, g), i  # phi'(l(u_{i+1})), rounded down
    assert profile_bound._mean_up(runs) >= runs.mean * (1 - 1e-15)


@pytest.mark.parametrize("runs,e1,d1,e2", [
    # (the old float evaluation put the first two 5.9e-5 and 2.4e-3 below the exact sum)
    (tuning.truncated_negative_binomial(-0.7, gamma=1e-17), 0.0, 1e-15, 0.5),
    (tuning.truncated_negative_binomial(-0.7, gamma=1e-17), 0.2622, 8.557e-18, 2.0),
    (tuning.truncated_negative_binomial(-0.7, gamma=1e-17), 0.02, 1e-13, 2.0),
    (tuning.geometric(mean=50), 0.01, 1e-13, 0.0),
    (tuning.poisson(5.0), 0.0, 1e-13, 0.0),
])
def test_riemann_sum_not_below_its_exact_value(runs, e1, d1, e2):
    s = profile_bound._CELLS
    got = float(profile_bound._excess(runs, e1, d1, np.array([e2]))[0])
    with mp.workdps(50):
        exact = mp.mpf(0)
        for i in range(s.size - 1):
            v = (_dpgf_exact(runs, mp.mpf(float(s[i])))
                 - mp.exp(mp.mpf(e2)) * _dpgf_exact(runs, _gap_exact(e1, d1, mp.mpf(float(s[i + 1])))))
            if v > 0:
                exact += (mp.mpf(float(s[i + 1])) - mp.mpf(float(s[i]))) * v
    assert got >= exact
    assert got <= exact * (1 + 2e-9) + 2e-15  # the charge: 1e-9 relative, 1e-15 of the sum of phi'
