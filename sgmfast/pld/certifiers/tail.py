"""Certifier ``TailEvents``: small δ as a sum over the number of far-tail steps (stage 5)."""

from __future__ import annotations

import math

import numpy as np

from ..common import REMOVE, REPLACE
from ..grid.queries import scan
from ..grid.tail_events import event_sum
from ..grid.tail_events_multi import EVENT_ENTRIES, event_sum_multi
from .contract import Job

#: the sum's interval is about a grid step or two wide in eps whatever the number of steps (its
#: one term without tail steps is tilted to its saddle point, the others are few): it is first
#: asked on the coarsest power-of-two multiple of the query's grid step that is at most this share
#: of accuracy x the upper end found so far, and on the query's own step only where that is still
#: wide.  The query's step is set for the whole composition and can be tens of times finer than
#: the sum needs, with windows past the bins limit: σ 1.9, q 3e-4, 454 steps, δ 1e-40 read
#: [0.2692, 0.3093] after 1.1 s; on a 16 times coarser step the sum gives [0.269168, 0.269203].
#: At most STEP_COARSEN_MAX doublings (the upper end found so far may be RDP's, far above eps)
STEP_SHARE = 0.25
STEP_COARSEN_MAX = 6


class TailEvents:
    """Certifier: the remove direction of an add/remove schedule, or the replace-one direction, as
    a sum over the number of far-tail steps (stage 5: one entry ``tail_events``, 2 to
    EVENT_ENTRIES entries ``tail_events_multi``), for an interval that is still wide.
    (Replace-one since stop 64, several entries since stop 65.)

    Soundness: the decomposition P^{*T} = sum_k binom(T, k) C^{*(T-k)} * R^{*k} (several entries:
    over each entry's number) holds for any direction's one-step PLD split into core and tail, and
    δ is linear in the PLD; every term
    of the sum is bounded like ``TiltedFFT``'s grids; the terms with more
    than K tail steps are charged to the upper bound by the union bound and dropped from the
    lower; any eps whose upper δ is <= target is an upper bound of eps(target), any eps whose
    lower δ exceeds it a lower bound, whatever the curves' shape between the points tried."""

    @staticmethod
    def applies(job: Job) -> bool:
        return (len(job.schedule) == 1 and job.schedule[0][2] >= 2) or 1 < len(job.schedule) <= EVENT_ENTRIES

    def epsilon(self, job: Job, step: float, target: float, lo: float, up: float) -> dict | None:
        """{direction: (lower, upper)} of eps(target) searched inside the interval [lo, up] found
        so far, or None (the direction: remove, or replace-one): on a coarser step first
        (``STEP_SHARE``), then on ``step`` where that left it wide; both intervals hold, and the
        answer is their intersection."""
        if not (self.applies(job) and lo < up < math.inf):
            return None
        ratio = STEP_SHARE * job.accuracy * up / step
        j = math.floor(math.log2(ratio)) if 0.0 < ratio < math.inf else 0
        found = None
        for s in ([step * 2.0 ** min(j, STEP_COARSEN_MAX)] if j >= 1 else []) + [step]:
            got = self._epsilon_at(job, s, target, lo, up)
            if got is None:
                continue
            l, u = got if found is None else (max(got[0], found[0]), min(got[1], found[1]))
            found = (l, u)
            if u < math.inf and u - l <= job.accuracy * u:
                break
            # (the query's step searches the interval it was given: its cuts placed inside a
            # narrower one can lose the lower end -- two entries at δ 1.3e-13, bench/README)
        return None if found is None else {_direction(job): found}

    def _epsilon_at(self, job: Job, step: float, target: float, lo: float, up: float):
        """(lower, upper) of eps(target) inside [lo, up] from the sum on grid step ``step``, or None."""
        eps_c = 0.5 * (lo + up)
        # the cut a little above the likely eps: the term without tail steps then has a
        # bounded core reaching past eps, which its tilt centres (measured: a cut below eps
        # loosens that term, bench/README)
        found = _searched(job, step, target, lo, up, eps_c, 0.5 * (eps_c + up))
        if found is None:
            return None
        l, u = found
        if u - l > job.accuracy * u and up - lo > 0.25 * up:
            # a wide interval puts that cut far above eps, where the single steps that set eps fall
            # in the term without tail steps, which cannot resolve them: once more, cut in the
            # interval's lower quarter (replace-one, σ 0.84, q 1.9e-5, 289 steps, δ 1.5e-15: the
            # interval [0.054, 0.27] cut at 0.22 left [0, 0.1414]; cut at 0.11, [0.14139, 0.14140])
            top = min(up, u)
            again = _searched(job, step, target, lo, top, eps_c, lo + 0.25 * (top - lo))
            if again is not None:
                l, u = max(l, again[0]), min(u, again[1])
        return l, u

    def delta(self, job: Job, step: float, e: np.ndarray, e_shift: np.ndarray, eps_c: float, goal: float):
        """({direction: (lower, upper)} at e, its upper at e_shift), or None."""
        if not self.applies(job):
            return None
        ev = _event_sum(job, step, eps_c, float(e_shift.max()), 0.5 * eps_c, goal)
        if ev is None:
            return None
        return {_direction(job): (ev.delta_lower(e), ev.delta_upper(e))}, ev.delta_upper(e_shift)


def _searched(job: Job, step, target, lo, up, eps_c, cut):
    """(lower, upper) of eps(target) inside [lo, up] from the tail-event sum cut at ``cut`` (0 and
    +inf where the search finds none), or None where the sum does not apply."""
    ev = _event_sum(job, step, eps_c, cut, 0.5 * lo, 1e-3 * job.accuracy * target)
    if ev is None:
        return None
    hit_up = scan(lambda e: ev.delta_upper(e) <= target, lo, up, first=True)
    hit_lo = scan(lambda e: ev.delta_lower(e) > target, lo, up if hit_up is None else hit_up, first=False)
    return 0.0 if hit_lo is None else hit_lo, math.inf if hit_up is None else hit_up


def _event_sum(job: Job, step, eps_c, cut, eps_lo, rem_goal):
    """The ``EventSum`` of the job's direction: one entry's (``tail_events``) or several entries'
    (``tail_events_multi``)."""
    sum_of = event_sum if len(job.schedule) == 1 else event_sum_multi
    rem_goal = max(rem_goal, 5e-324)  # (the terms left out are charged: a goal that underflowed is the least float)
    return sum_of(job.schedule, step, job.tau, job.accuracy, eps_c, cut, eps_lo, rem_goal, job.coarse, _direction(job))


def _direction(job: Job):
    """The direction the sum bounds: replace-one's own, or add/remove's remove direction."""
    return REPLACE if job.replace else REMOVE
