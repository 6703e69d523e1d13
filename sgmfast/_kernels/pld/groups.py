"""Runs of a schedule's steps whose rounding costs about the same (the groups' sandwich,
``sgmfast.pld.schedule_groups``): a heuristic, never a bound.

A step (sigma, q) weighs w = q^2 (e^{1 / sigma^2} - 1), its share of the composed loss's variance
in the Gaussian limit (the exponent capped at ``WEIGHT_CAP``).  A run of steps replaced by its
least sigma and largest q (the upper bracket) costs count * w(least sigma, largest q) - sum of
the steps' w, by its largest sigma and least q (the lower bracket) sum w - count * w(largest
sigma, least q); the two added, count * (w(least sigma, largest q) - w(largest sigma, least q)),
are the run's cost.  ``cost_runs`` cuts the rows, in their given
order, into runs of cost at most ``lam``; ``least_cost_runs`` finds the least such ``lam`` that
gives at most ``groups`` runs.  Where steps near sigma 0.3 weigh 10^5 times those near 1.3 (a
noise decay at q 2.5e-4), runs of equal counts put a tenth of sigma's spread into the runs that
matter most; runs of equal cost put it where it costs nothing.
"""

import math

from .._jit import jit
from .exact import KIND_REMOVE, log_delta_bounds

__all__ = ["WEIGHT_CAP", "weight", "cost_runs", "least_cost_runs", "total_cost", "tail_weights",
           "weight_runs"]

#: the weight's exponent 1 / sigma^2 is capped here (no overflow at any count)
WEIGHT_CAP = 600.0


@jit
def weight(sigma, q):
    """q^2 (e^{min(1 / sigma^2, WEIGHT_CAP)} - 1)."""
    return q * q * math.expm1(min(1.0 / (sigma * sigma), WEIGHT_CAP))


@jit
def cost_runs(s, q, c, lam, out):
    """Cuts rows 0..n-1 (sigma s, rate q, count c) in order into runs, each extended while its
    cost stays at most lam; ``out[i]`` the run of row i.  Returns the number of runs (n >= 1)."""
    n = s.shape[0]
    k = 0
    s_lo = s_hi = s[0]
    q_lo = q_hi = q[0]
    cnt = c[0]
    out[0] = 0
    for i in range(1, n):
        a_lo, a_hi = min(s_lo, s[i]), max(s_hi, s[i])
        b_lo, b_hi = min(q_lo, q[i]), max(q_hi, q[i])
        cnt2 = cnt + c[i]
        cost = cnt2 * (weight(a_lo, b_hi) - weight(a_hi, b_lo))
        if cost > lam:
            k += 1
            s_lo = s_hi = s[i]
            q_lo = q_hi = q[i]
            cnt = c[i]
        else:
            s_lo, s_hi, q_lo, q_hi, cnt = a_lo, a_hi, b_lo, b_hi, cnt2
        out[i] = k
    return k + 1


@jit
def total_cost(s_lo, s_hi, q_lo, q_hi, n):
    """The summed cost of groups with these keys and step counts (groups of count 0 left out)."""
    tot = 0.0
    for g in range(n.shape[0]):
        if n[g] > 0.0:
            tot += n[g] * (weight(s_lo[g], q_hi[g]) - weight(s_hi[g], q_lo[g]))
    return tot


@jit
def least_cost_runs(s, q, c, groups, out):
    """``cost_runs`` at the least lam, to 1e-6 relative, that gives at most ``groups`` runs
    (bisection of log lam); ``out`` as there.  Returns the number of runs."""
    n = s.shape[0]
    s_lo, q_hi, cnt = s[0], q[0], 0.0
    for i in range(n):
        s_lo, q_hi, cnt = min(s_lo, s[i]), max(q_hi, q[i]), cnt + c[i]
    hi = 2.0 * cnt * weight(s_lo, q_hi) + 1e-300  # (above the cost of one run of all the rows)
    lo = hi * 1e-40
    if cost_runs(s, q, c, lo, out) <= groups:
        return cost_runs(s, q, c, lo, out)
    while hi > lo * (1.0 + 1e-6):  # (about 27 halvings of the 40 decades)
        mid = math.sqrt(lo * hi)
        if cost_runs(s, q, c, mid, out) <= groups:
            hi = mid
        else:
            lo = mid
    return cost_runs(s, q, c, hi, out)


@jit
def tail_weights(s, q, eps, out):
    """out[i] = e^{l_i - max l} + weight(s[i], q[i]) / the largest weight, l_i the log of step i's
    one-step remove δ at eps (``exact.log_delta_bounds``, its upper end; -inf where it has none):
    each step's tail at eps and its Gaussian weight, each scaled to a largest of 1 (the tail part 0
    where every tail underflows), for ``schedule_groups._by_tail``."""
    n = s.shape[0]
    top = -math.inf
    gtop = 1e-300
    for i in range(n):
        v = log_delta_bounds(KIND_REMOVE, eps, q[i], 1.0 / s[i])[1]
        out[i] = v if v == v else -math.inf
        top = max(top, out[i])
        gtop = max(gtop, weight(s[i], q[i]))
    for i in range(n):
        t = math.exp(out[i] - top) if top > -math.inf else 0.0
        out[i] = t + weight(s[i], q[i]) / gtop


@jit
def _weight_cut(w, c, lam, out):
    """Rows in order into runs, each extended while count * (its largest w - its least w) stays at
    most lam; ``out[i]`` the run of row i.  Returns the number of runs."""
    k = 0
    hi = lo = w[0]
    cnt = c[0]
    out[0] = 0
    for i in range(1, w.shape[0]):
        a, b, cnt2 = max(hi, w[i]), min(lo, w[i]), cnt + c[i]
        if cnt2 * (a - b) > lam:
            k += 1
            hi = lo = w[i]
            cnt = c[i]
        else:
            hi, lo, cnt = a, b, cnt2
        out[i] = k
    return k + 1


@jit
def weight_runs(w, c, groups, out):
    """``least_cost_runs`` with given row weights w (a run costs its count times the spread of its
    weights): the least lam, to 1e-6 relative, that gives at most ``groups`` runs."""
    cnt = 0.0
    top = 0.0
    for i in range(w.shape[0]):
        cnt += c[i]
        top = max(top, w[i])
    hi = 2.0 * cnt * top + 1e-300
    lo = hi * 1e-40
    if _weight_cut(w, c, lo, out) <= groups:
        return _weight_cut(w, c, lo, out)
    while hi > lo * (1.0 + 1e-6):
        mid = math.sqrt(lo * hi)
        if _weight_cut(w, c, mid, out) <= groups:
            hi = mid
        else:
            lo = mid
    return _weight_cut(w, c, hi, out)
