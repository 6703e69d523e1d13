"""Schedules with many distinct (sigma, q): a sandwich of two short schedules.

A noise (or batch-size) schedule that changes every step has as many distinct one-step PLDs as
steps, and each costs a discretisation and a transform.  Beyond ``MAX_PARTS`` distinct steps the
schedule is bracketed instead: its steps are sorted by sigma / q (the effective noise, which
orders their privacy to first order) and cut into G groups of about equal step counts; every
step of a group is replaced by (the group's smallest sigma, its largest q) for the upper bound and
by (its largest sigma, its smallest q) for the lower bound.  Each bracket has at most G distinct
steps, and G doubles while the interval is wider than the accuracy and the time budget allows.

Soundness.  More noise is post-processing of the output (N(m, s^2) plus independent
N(0, s'^2 - s^2) is N(m, s'^2)), and a smaller sampling rate is a mixture with the neighbour's
own distribution: with lambda = q / q', (1 - q) N(0) + q N(1) = (1 - lambda) N(0) +
lambda ((1 - q') N(0) + q' N(1)), so by joint convexity of the hockey-stick divergence every
δ(eps) of rate q is at most lambda times that of rate q' (the replace-one pair is the same
mixture on both sides).  So each step of the upper schedule is at least as revealing as the step
it replaces, each of the lower at most as revealing, and composition keeps both orders: the
upper schedule's certified upper bound bounds the schedule's eps (δ), the lower schedule's
certified lower bound bounds it from below.  The RDP bound of the schedule itself caps the
upper.  Noiseless steps and steps that do nothing are kept as they are.
"""

from __future__ import annotations

import math

import numpy as np

from .._work import UNITS_PER_SECOND, Meter, metered
from .certifiers import RDPBound
from .engine import BUDGET, Engine

#: distinct noisy steps composed exactly (~1.5 s at 128 on the reference machine); beyond, the sandwich
MAX_PARTS = 128
#: group counts tried in turn while the interval is wider than the accuracy and the budget lasts
#: (32: a 10^4-step schedule in about a second on the reference machine, bench/README)
GROUPS = (32,)


def distinct_noisy(schedule) -> int:
    return len({(s, q) for s, q, c in schedule if c > 0 and q > 0.0 and 0.0 < s < math.inf})


def make_engine(schedule, accuracy, grid_step=None, relation="add_remove", budget=BUDGET):
    """An ``Engine`` for the schedule, or a ``Sandwich`` when it has more than ``MAX_PARTS``
    distinct noisy steps (and not every step is a full batch, whose composition is exact)."""
    noisy = [(s, q, c) for s, q, c in schedule if c > 0 and q > 0.0 and 0.0 < s < math.inf]
    if distinct_noisy(schedule) > MAX_PARTS and any(q < 1.0 for _, q, _ in noisy):
        return Sandwich(schedule, accuracy, grid_step, relation, budget)
    return Engine(schedule, accuracy, grid_step, relation, budget=budget)


def brackets(schedule, groups: int):
    """(upper schedule, lower schedule) of at most ``groups`` distinct noisy steps each (module
    notes); other steps are kept in both."""
    noisy = [(s, q, c) for s, q, c in schedule if c > 0 and q > 0.0 and 0.0 < s < math.inf]
    other = [(s, q, c) for s, q, c in schedule if not (c > 0 and q > 0.0 and 0.0 < s < math.inf)]
    noisy.sort(key=lambda p: (p[0] / p[1], p[0]))
    total = sum(c for _, _, c in noisy)
    up: dict = {}
    lo: dict = {}
    start, acc = 0, 0
    for i, (s, q, c) in enumerate(noisy):
        acc += c
        if acc * groups >= total * (len(up) + 1) or i == len(noisy) - 1:  # close this group
            grp = noisy[start : i + 1]
            n = sum(x[2] for x in grp)
            key_u = (min(x[0] for x in grp), max(x[1] for x in grp))
            key_l = (max(x[0] for x in grp), min(x[1] for x in grp))
            up[key_u] = up.get(key_u, 0) + n
            lo[key_l] = lo.get(key_l, 0) + n
            start = i + 1
    return ([(s, q, c) for (s, q), c in up.items()] + other, [(s, q, c) for (s, q), c in lo.items()] + other)


class Sandwich:
    """eps(δ) and δ(eps) of a schedule with many distinct steps from two bracketing schedules
    (module notes); the ``Engine`` interface that the accountant uses."""

    def __init__(self, schedule, accuracy, grid_step=None, relation="add_remove", budget=BUDGET):
        self.schedule = tuple(schedule)
        self.accuracy = accuracy
        self.grid_step = grid_step
        self.relation = relation
        self.budget = budget
        self.last_step = None
        self._rdp = None

    @property
    def rdp(self) -> RDPBound:
        if self._rdp is None:
            noisy = [(s, q, c) for s, q, c in self.schedule if c > 0 and q > 0.0 and 0.0 < s < math.inf]
            self._rdp = RDPBound(noisy, self.relation == "replace_one")
        return self._rdp

    def _engines(self, g, budget):
        up, lo = brackets(self.schedule, g)
        return (Engine(up, self.accuracy, self.grid_step, self.relation, budget=budget),
                Engine(lo, self.accuracy, self.grid_step, self.relation, budget=budget))

    def _rounds(self, meter: Meter):
        """(group count, budget of each of its two engines) while work is left: ``meter`` counts
        the work of the rounds so far (units of ``_work``, never a clock: the same answer under
        any load)."""
        for g in GROUPS:
            left = self.budget - meter.units / UNITS_PER_SECOND
            if left <= 0.1 * self.budget:
                return
            yield g, max(0.5 * left, 0.1)

    def epsilon(self, target: float, step0=None):
        lo, up = 0.0, math.inf
        cap = math.inf if self._noiseless() else self.rdp.epsilon(target)  # (RDP of the noisy steps alone)
        meter = Meter()
        for g, budget in self._rounds(meter):
            with metered(meter):
                e_up, e_lo = self._engines(g, budget)
                up = min(up, e_up.epsilon(target)[1], cap)
                lo = max(lo, e_lo.epsilon(target)[0])
            if up < math.inf and up - lo <= self.accuracy * up:
                break
        return lo, up, None

    def delta(self, eps: np.ndarray):
        eps = np.asarray(eps, dtype=np.float64)
        lo, up = np.zeros(eps.size), np.ones(eps.size)
        cap = np.ones(eps.size) if self._noiseless() else self.rdp.delta(eps)
        meter = Meter()
        for g, budget in self._rounds(meter):
            with metered(meter):
                e_up, e_lo = self._engines(g, budget)
                up = np.minimum(up, np.minimum(e_up.delta(eps)[1], cap))
                lo = np.maximum(lo, e_lo.delta(eps)[0])
            if (up - lo <= self.accuracy * up).all():
                break
        return lo, up

    def _noiseless(self) -> bool:
        return any(s == 0.0 for s, q, c in self.schedule if c > 0 and q > 0.0)
