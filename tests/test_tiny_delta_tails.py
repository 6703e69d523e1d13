"""eps(δ) and δ(eps) where a few far-tail steps set δ far below 1e-20 (small q): the tail-event sum on
a coarser step than the composition's (``certifiers.tail.STEP_SHARE``) and the δ bracket's secant on
log eps (``delta_inverse.LOG_OFFSET``), against the mpmath table of
tests/reference/make_sgm_tiny_delta.py (grid-free: Fourier inversion of the composed loss)."""

import csv
import math
import pathlib

import pytest

from sgmfast import pld

TABLE = pathlib.Path(__file__).parent / "reference" / "sgm_tiny_delta.csv"


def _rows(kind):
    """The table's rows of one kind (δ rows: the remove direction's, which is add/remove's δ -- the
    add direction's is 0 at every tabulated eps, its loss never reaching them)."""
    with open(TABLE) as f:
        rows = [r for r in csv.DictReader(line for line in f if not line.startswith("#"))]
    return [r for r in rows if r["kind"] == kind and r["direction"] != "add"]


def _key(r):
    return f"s{float(r['sigma']):.4g}-q{float(r['q']):.3g}-T{r['steps']}"


# points whose eps(δ) was wide before the sum ran on a coarser step: (σ, q, T, δ, interval before)
WIDE_BEFORE = [
    (1.9, 3e-4, 454, 1e-40, (0.2692, 0.3093)),
    (0.4045, 1.73e-5, 40, 1.22e-37, (21.1058, 25.1495)),
    (0.5329219, 1.2e-5, 2429, 2.17e-28, (10.1025, 10.3131)),
    # (a cut past the one-step grid's top: the sum did not apply, the tilts left it 6 % wide)
    (0.624, 0.00364, 6, 6.37e-35, (16.7554, 17.9015)),
    # (the sum's term without tail steps, one block of 48,053 steps, charged what could wrap in its
    # optimistic window -- its far cells' round-off -- above δ: no lower end, 1.8 % wide)
    (1.1153939696983854, 3.0785217492888666e-05, 48053, 2.9865356770664434e-15, (0.052385, 0.053320)),
]


@pytest.mark.parametrize("sigma,q,steps,delta,before", WIDE_BEFORE)
def test_epsilon_meets_the_accuracy_where_far_tail_steps_set_it(sigma, q, steps, delta, before):
    b = pld.epsilon(sigma, q, steps, delta)
    assert b.met and b.width <= 1e-3


@pytest.mark.parametrize("r", _rows("epsilon"), ids=_key)
def test_epsilon_holds_the_reference(r):
    sigma, q, steps, delta = float(r["sigma"]), float(r["q"]), int(r["steps"]), float(r["delta_ref"])
    eps, err = float(r["eps"]), float(r["eps_err_bound"])
    b = pld.epsilon(sigma, q, steps, delta)
    assert b.lower <= eps + err and eps - err <= b.upper
    assert b.width <= 1e-3


@pytest.mark.parametrize("r", _rows("delta"), ids=_key)
def test_delta_holds_the_reference(r):
    sigma, q, steps, eps = float(r["sigma"]), float(r["q"]), int(r["steps"]), float(r["eps"])
    ref, rel = float(r["delta_ref"]), float(r["rel_err_bound"])
    b = pld.delta(sigma, q, steps, eps)
    assert b.lower <= ref * (1 + rel) and ref * (1 - rel) <= b.upper
    assert b.met is True  # (no wider than δ's change over a relative change 1e-3 of eps)


def test_delta_reads_back_the_epsilon_of_a_tiny_delta():
    # σ 1.9, q 3e-4, 454 steps at eps 0.2886 (δ ~1.4e-41): the first secant on eps overshot to
    # δ 4e-55 and the budget's nine queries left [5.3e-44, 1.59e-41]
    b = pld.delta(1.9, 3e-4, 454, 0.2886)
    assert b.width <= 0.01
    e = pld.epsilon(1.9, 3e-4, 454, float(b.upper))
    assert e.upper <= 0.2886 * (1 + 1e-3)  # (the upper δ's eps is at most the eps asked, within its width)
    assert math.isfinite(e.upper)
