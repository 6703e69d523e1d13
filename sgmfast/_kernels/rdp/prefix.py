"""Epsilon after every prefix of a schedule (the accountant's curve) in one pass per order.

RDP composes additively, so at a fixed order alpha the total RDP of the first k + 1 segments is
a running sum, and each prefix's epsilon at alpha follows from it (``conversion.eps_from_rdp``).
The minimum over a set of orders is then an upper bound on each prefix's epsilon for the cost of
one sum per order, instead of an order search per prefix (a pass over the schedule each).

Two rules stop an order's pass early; both only skip values that cannot lower the result:

* once its epsilon reaches ``stop`` (the whole schedule's epsilon, which bounds every prefix's
  and which the caller caps the curve with): epsilon at one order is non-decreasing along the
  prefixes (the RDP grows; delta can only shrink);
* with the same delta for every prefix, once its unclipped conversion
  g(alpha) = r + log(1 - 1/alpha) - (log delta + log alpha)/(alpha - 1) is no smaller than the
  best g of a lower order alpha' at some prefix: r(alpha) - r(alpha') only grows along the
  prefixes (each step's RDP is non-decreasing in the order), so alpha never beats alpha' later,
  in g nor after the clipping at 0 and the Bretagnolle-Huber test (which passes at alpha only if
  it passes at alpha', whose RDP is smaller). Orders far above the optimum then stop after the
  few first prefixes that need them.
"""

import math

import numpy as np

from .._jit import jit
from .conversion import eps_from_rdp
from .truncated import schedule_log_a

_U = 2.0 ** -53


@jit
def prefix_epsilons(qs, sigmas, counts, uid, n_unique, orders, log_deltas, same_delta, stop, out):
    """out[k] = min(out[k], the smallest epsilon over ``orders`` (ascending) of segments 0..k).

    Segment i is counts[i] steps of (qs[i], sigmas[i]) (counts[i] = 0: no RDP; the caller rounds
    the counts up by its relative margin), uid[i] in [0, n_unique) names its (q, sigma) pair so
    that repeated pairs share one log A per order; log_deltas[k] is log delta for prefix k
    (non-increasing in k). Each log A is ``truncated.schedule_log_a``'s upper bound; the running sum of k terms is rounded up by 4 k units of rounding (its
    error is at most about k of them; all terms are non-negative). The early stops of the module
    notes apply, the second only with ``same_delta``."""
    n = qs.shape[0]
    g_best = np.full(n, math.inf)
    cache = np.empty(n_unique)
    for j in range(orders.shape[0]):
        alpha = orders[j]
        am1 = alpha - 1.0
        conv = math.log1p(-1.0 / alpha) - math.log(alpha) / am1
        cache[:] = math.nan
        total = 0.0
        terms = 0
        for k in range(n):
            if counts[k] > 0.0:
                u = uid[k]
                if math.isnan(cache[u]):
                    cache[u] = schedule_log_a(qs[k], sigmas[k], alpha)
                total += counts[k] * cache[u]
                terms += 1
            r = total * (1.0 + 4.0 * terms * _U) / am1
            if not r < math.inf:
                break
            e = eps_from_rdp(alpha, r, log_deltas[k])
            if e >= stop:
                break
            if e < out[k]:
                out[k] = e
            if same_delta:
                g = r + conv - log_deltas[k] / am1
                if g >= g_best[k]:
                    break
                g_best[k] = g
    return out
