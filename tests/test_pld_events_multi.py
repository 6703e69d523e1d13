"""The tail-event sum of a schedule of several entries (``sgmfast.pld.grid.tail_events_multi``) and
the two-stage composition of several entries (``two_stage.plan``'s ``multi``).

prod_i (C_i + R_i)^{*T_i} = sum_kappa prod_i binom(T_i, kappa_i) C_i^{*(T_i - kappa_i)} * R_i^{*kappa_i}:
the terms' sum is checked against the direct composition of the same one-step arrays (numpy FFT,
no tilt), its union bound against the elementary symmetric sum in exact arithmetic, and the
engine's intervals at small δ against the grid-free references (tests/reference/sgm_rare.csv,
sgm_rare_multi.csv) and against δ queries.
"""

import csv
import functools
import itertools
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from sgmfast import pld
from sgmfast.pld.common import REMOVE
from sgmfast.pld.engine import Engine
from sgmfast.pld.grid import tail_events_multi as tm, two_stage

from _hybrid import check_terms

REF = Path(__file__).parent / "reference"


CASES = [
    # schedule, step, m, cut, eps values: tails that matter at a few steps
    ([(0.8, 0.02, 3), (1.0, 0.05, 2)], 2e-4, 1, 0.5, [0.3, 0.6, 1.0, 1.6]),
    ([(0.8, 0.02, 3), (1.0, 0.05, 2)], 2e-4, 4, 0.5, [0.3, 0.6, 1.0, 1.6]),
    ([(0.7, 0.3, 2), (1.2, 0.1, 2), (0.9, 0.02, 1)], 1e-4, 2, 0.3, [0.2, 1.0, 2.0]),
    ([(1.0, 0.05, 4), (2.0, 0.5, 1)], 1e-4, 1, 0.6, [0.5, 1.0, 1.5]),  # one entry's tail takes most of it
]


@pytest.mark.parametrize("schedule,step,m,cut,eps", CASES)
@pytest.mark.parametrize("rem_goal", [1e-300, 1e-9])
def test_multi_event_terms_bracket_the_direct_composition(schedule, step, m, cut, eps, rem_goal):
    eps = np.array(eps)
    hi_cut = max(math.ceil(cut / (m * step)), 1)
    for pess in (True, False):
        out = tm._terms(schedule, REMOVE, step, m, hi_cut, pess, float(eps.min()), 0.0, 1e-30, rem_goal)
        assert out is not None
        grids, rem = out
        if rem_goal < 1e-100:
            assert rem < 1e-12
            # every term kept: one per way of putting up to all steps in the tail
            assert len(grids) == math.prod(t + 1 for _, _, t in schedule)
        elif max(q for _, q, _ in schedule) <= 0.05:
            assert len(grids) < math.prod(t + 1 for _, _, t in schedule)  # the union bound is in use
        check_terms(grids, rem, schedule, step, m, cut, pess, eps, rem_goal < 1e-100)


@pytest.mark.parametrize("counts,r,k", [([3, 2], [0.1, 0.02], 1), ([40, 7, 1], [1e-3, 0.3, 0.5], 3),
                                        ([10**5, 5 * 10**4], [1e-9, 3e-8], 6), ([5], [0.2], 4)])
def test_log_excess_is_the_elementary_symmetric_sum(counts, r, k):
    # [z^{k+1}] prod (1 + r_i z)^{T_i} in exact rationals, from the binomial expansions
    fr = [Fraction(x) for x in r]
    poly = [Fraction(1)] + [Fraction(0)] * (k + 1)
    for n, ri in zip(counts, fr):
        f = [Fraction(math.comb(n, j)) * ri**j if j <= n else Fraction(0) for j in range(k + 2)]
        poly = [sum(poly[a] * f[d - a] for a in range(d + 1)) for d in range(k + 2)]
    exact = poly[k + 1]
    got = tm._log_excess(counts, r, k)
    if exact == 0:
        assert got == -math.inf
        return
    # rounded up, by little
    assert math.exp(got) >= float(exact) and got - math.log(float(exact)) < 1e-8


def test_compositions_keep_to_the_caps_and_the_total():
    got = list(tm._compositions([2, 0, 3], 3))
    assert got == [kp for kp in itertools.product(range(3), range(1), range(4)) if sum(kp) <= 3]


def test_plan_takes_several_entries_only_when_asked():
    sch = [(1.03, 1.866e-4, 50_000), (1.38, 1.866e-4, 50_000)]
    assert two_stage.plan(sch, 3.2e-5, REMOVE, 1e-25) is None
    t1s, m = two_stage.plan(sch, 3.2e-5, REMOVE, 1e-25, multi=True)
    assert len(t1s) == 2 and all(50_000 % t == 0 for t in t1s) and m >= 2
    # at δ ~ 1e-5 (a large tail cut) one stage is the rule
    assert two_stage.plan(sch, 3.2e-5, REMOVE, 1e-14, multi=True) is None
    # one entry: as before, whatever ``multi``
    assert two_stage.plan(sch[:1], 3.2e-5, REMOVE, 1e-25) == two_stage.plan(sch[:1], 3.2e-5, REMOVE, 1e-25, True)


def _rare_point6():
    with open(REF / "sgm_rare.csv") as f:
        rows = [r for r in csv.DictReader(line for line in f if not line.startswith("#"))]
    return next(r for r in rows if r["kind"] == "epsilon" and int(r["steps"]) == 100_000)


def test_two_equal_entries_meet_the_one_entry_reference():
    # the rare reference's point 6 (σ 1.03, q 1.87e-4, 10^5 steps, δ 2.3e-15) as two entries of
    # 5 x 10^4 steps (the engine does not merge them): 7.7 % wide in one stage before
    r = _rare_point6()
    sigma, q, delta, eps = float(r["sigma"]), float(r["q"]), float(r["delta_ref"]), float(r["eps"])
    err = float(r["eps_err_bound"])
    lo, up, _ = Engine([(sigma, q, 50_000), (sigma, q, 50_000)], 1e-3).epsilon(delta)
    assert lo <= eps + err and eps - err <= up
    assert up - lo <= 5e-3 * up


WIDE_BEFORE = [
    # schedule, δ, width on fec2300 (one stage, no tail-event sum for several entries)
    ([(1.03, 1.866e-4, 50_000), (1.38, 1.866e-4, 50_000)], 2.3e-15, 0.18),
    ([(0.9, 1e-4, 20_000), (1.2, 3e-4, 30_000)], 1e-14, 0.35),
    ([(0.75, 2.4e-05, 122_222), (1.93, 5.1e-05, 50_241)], 1.3e-13, 0.92),
    ([(0.68, 2.0e-05, 83_254), (2.37, 7.0e-04, 12_523)], 1.1e-09, 0.11),
]


@functools.lru_cache(maxsize=None)
def _epsilon(schedule, delta, relation="add_remove"):
    acc = pld.PLDAccountant(relation=relation)
    for s, q, t in schedule:
        acc.step(s, q, t)
    return acc, acc.epsilon(delta)


@pytest.mark.parametrize("schedule,delta,before", WIDE_BEFORE)
def test_segments_at_small_delta_meet_the_accuracy(schedule, delta, before):
    _, b = _epsilon(tuple(schedule), delta)
    assert b.met and b.upper - b.lower <= 1e-3 * b.upper


@pytest.mark.parametrize("schedule,delta,before", WIDE_BEFORE[:2])
def test_segments_delta_queries_agree(schedule, delta, before):
    # at the upper eps the true δ is <= delta, at the lower eps it is > delta
    acc, b = _epsilon(tuple(schedule), delta)
    d = acc.delta(np.array([b.lower, b.upper]))
    assert d.lower[1] <= delta * (1 + 1e-12) and d.upper[0] >= delta * (1 - 1e-12)


def _multi_rows(kind):
    """The grid-free reference's rows of ``kind`` (tests/reference/make_sgm_rare_multi.py): per
    (schedule, relation), the rows."""
    with open(REF / "sgm_rare_multi.csv") as f:
        rows = [r for r in csv.DictReader(line for line in f if not line.startswith("#")) if r["kind"] == kind]
    out: dict = {}
    for r in rows:
        if r["direction"] not in ("max", "replace") or ";" not in r["steps"]:
            continue
        sch = tuple(zip(map(float, r["sigma"].split(";")), map(float, r["q"].split(";")), map(int, r["steps"].split(";"))))
        rel = "replace_one" if r["direction"] == "replace" else "add_remove"
        out.setdefault((sch, rel), []).append(r)
    return sorted(out.items())


@pytest.mark.parametrize("key,rows", _multi_rows("epsilon"), ids=lambda k: str(k[1]) if isinstance(k, tuple) else "")
def test_segments_bracket_the_grid_free_reference(key, rows):
    # two-entry schedules at δ 1e-15..1e-13 (tests/reference/sgm_rare_multi.csv); fec2300: 18 %, 35 %
    # and 80 % wide (add/remove), 1.7 % and 71 % (replace-one; the first 0.33 % with each entry's block
    # read from eps_lo, ``tail_events_multi._terms``)
    sch, rel = key
    (r,) = rows
    eps, err = float(r["eps"]), float(r["eps_err_bound"])
    _, b = _epsilon(sch, float(r["delta_ref"]), rel)
    assert b.lower <= eps + err and eps - err <= b.upper
    assert b.upper - b.lower <= 1e-3 * b.upper


@pytest.mark.parametrize("key,rows", _multi_rows("delta"), ids=lambda k: str(k[1]) if isinstance(k, tuple) else "")
def test_segments_delta_bracket_the_grid_free_reference(key, rows):
    sch, rel = key
    eps = np.array([float(r["eps"]) for r in rows])
    ref = np.array([float(r["delta_ref"]) for r in rows])
    tol = np.array([float(r["rel_err_bound"]) for r in rows])
    acc = pld.PLDAccountant(relation=rel)
    for s, q, t in sch:
        acc.step(s, q, t)
    b = acc.delta(eps)
    assert np.all(b.lower <= ref * (1 + tol)) and np.all(b.upper >= ref * (1 - tol))
