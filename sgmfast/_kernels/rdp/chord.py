"""Fractional orders without quadrature, for the order search where the quadrature would be
expensive (small sigma: ~order / sigma^2 nodes; or a schedule of many distinct mechanisms).

At alpha = n + t (n an integer, 0 <= t <= 1) each mechanism's log A_alpha is at most the chord
(1 - t) log A_n + t log A_(n+1) between its exact integer-order values (log A is convex in the
order, by Hoelder's inequality; log A_1 = 0) and at most the closed form ``log_a_jensen``; the
smaller of the two is a valid bound. The Jensen bound is convex in alpha too, so for most
mechanisms one test at the ends of [n, n + 1] shows it never dips below the chord there
(``_jensen_above_chord``): their chords are summed once, and each point of the search then
costs O(1) for them and a loop over the others only (a schedule of 10^5 distinct steps took
~0.6 s per search before).
"""

import math

import numpy as np

from .._jit import jit
from .conversion import _from_rdp
from .log_a import ALPHA_MAX, log_a, log_a_jensen
from .truncated import schedule_log_a


@jit
def cheap_log_a(qs, sigmas, counts, n, out):
    """log A at the integer order n of every mechanism (log A_1 = 0), into ``out``: exact sums,
    for several mechanisms the upper bounds of ``truncated.schedule_log_a`` (a chord between
    upper bounds lies above the exact chord)."""
    m = qs.shape[0]
    for i in range(m):
        if n == 1.0 or not counts[i] > 0.0:
            out[i] = 0.0
        else:
            out[i] = log_a(qs[i], sigmas[i], n) if m == 1 else schedule_log_a(qs[i], sigmas[i], n)


@jit
def _jensen_slope(q, sigma, alpha):
    """d/dalpha of ``log_a_jensen``: q e^x / (1 + q expm1(x)) (2 alpha - 1) / (2 sigma^2),
    x = alpha (alpha - 1) / (2 sigma^2)."""
    x = alpha * (alpha - 1.0) / (2.0 * sigma * sigma)
    w = q * math.exp(x) / (1.0 + q * math.expm1(x)) if x < 700.0 else 1.0 / (1.0 + (1.0 - q) / q * math.exp(-x))
    return w * (2.0 * alpha - 1.0) / (2.0 * sigma * sigma)


@jit
def _jensen_above_chord(q, sigma, n, lo, hi):
    """Whether ``log_a_jensen`` stays at or above the chord from (n, lo) to (n + 1, hi).

    J(alpha) = log(1 - q + q e^x) is convex and increasing in x = alpha (alpha - 1)/(2 sigma^2),
    which is convex in alpha, so J is convex and J - chord too: at or above 0 at n with a slope
    >= 0 there, or at or above 0 at n + 1 with a slope <= 0 there, it is >= 0 on [n, n + 1].
    Only tightness rests on this float test: the chord alone is a valid bound, so a wrong "yes"
    gives a value larger by a rounding error, never smaller."""
    slope = hi - lo
    if log_a_jensen(q, sigma, n) >= lo and _jensen_slope(q, sigma, n) >= slope:
        return True
    return log_a_jensen(q, sigma, n + 1.0) >= hi and _jensen_slope(q, sigma, n + 1.0) <= slope


@jit
def chord_split(qs, sigmas, counts, n, lo, hi, idx):
    """(sum counts lo, sum counts hi, k) over the mechanisms whose Jensen bound never dips below
    their chord on [n, n + 1]; the indices of the k others go to idx[:k]."""
    s_lo = 0.0
    s_hi = 0.0
    k = 0
    for i in range(qs.shape[0]):
        if not counts[i] > 0.0:
            continue
        if _jensen_above_chord(qs[i], sigmas[i], n, lo[i], hi[i]):
            s_lo += counts[i] * lo[i]
            s_hi += counts[i] * hi[i]
        else:
            idx[k] = i
            k += 1
    return s_lo, s_hi, k


@jit
def cheap_rdp(alpha, t, s_lo, s_hi, idx, k, qs, sigmas, counts, lo, hi):
    """A schedule's total RDP at alpha = n + t without quadrature (module notes): the summed
    chords of the mechanisms ``chord_split`` set aside, plus min(chord, Jensen) for the others."""
    total = (1.0 - t) * s_lo + t * s_hi
    for j in range(k):
        i = idx[j]
        total += counts[i] * min((1.0 - t) * lo[i] + t * hi[i], log_a_jensen(qs[i], sigmas[i], alpha))
    return total / (alpha - 1.0)


@jit
def _golden_side(n, best, best_a, s_lo, s_hi, idx, k, qs, sigmas, counts, lo, hi, target, mode):
    """A golden-section search of the objective by ``cheap_rdp`` on (n, n + 1): the best
    (value, order) seen, starting from (best, best_a)."""
    t_lo = 0.0
    t_hi = 1.0
    for _ in range(40):
        t1 = t_hi - 0.618 * (t_hi - t_lo)
        t2 = t_lo + 0.618 * (t_hi - t_lo)
        f1 = _from_rdp(n + t1, cheap_rdp(n + t1, t1, s_lo, s_hi, idx, k, qs, sigmas, counts, lo, hi), target, mode)
        f2 = _from_rdp(n + t2, cheap_rdp(n + t2, t2, s_lo, s_hi, idx, k, qs, sigmas, counts, lo, hi), target, mode)
        if f1 < best:
            best = f1
            best_a = n + t1
        if f2 < best:
            best = f2
            best_a = n + t2
        if f1 <= f2:
            t_hi = t2
        else:
            t_lo = t1
        if t_hi - t_lo < 1e-6:
            break
    return best, best_a


@jit
def interpolated_min(best, best_a, qs, sigmas, counts, target, mode):
    """Fractional orders next to the best integer best_a without quadrature: a golden-section
    search on (best_a - 1, best_a) and on (best_a, best_a + 1) (module notes); every point
    evaluated is a valid bound. Returns the best (value, order) seen."""
    a0 = best_a
    m = qs.shape[0]
    lo = np.empty(m)
    hi = np.empty(m)
    idx = np.empty(m, dtype=np.int64)
    have = -1.0  # the order whose values ``hi`` holds
    for side in range(2):
        n = a0 - 1.0 + side
        if n < 1.0 or n + 1.0 > ALPHA_MAX:
            continue
        if have == n:
            lo, hi = hi, lo
        else:
            cheap_log_a(qs, sigmas, counts, n, lo)
        cheap_log_a(qs, sigmas, counts, n + 1.0, hi)
        have = n + 1.0
        s_lo, s_hi, k = chord_split(qs, sigmas, counts, n, lo, hi, idx)
        best, best_a = _golden_side(n, best, best_a, s_lo, s_hi, idx, k, qs, sigmas, counts, lo, hi, target, mode)
    return best, best_a
