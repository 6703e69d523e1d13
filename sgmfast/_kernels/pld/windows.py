"""Chernoff edges and tail bounds from a table of (lambda, log E e^{lambda L}) (``sgmfast.pld.windows``).

A NaN in the table carries no information: an edge is then NaN (the caller keeps its heuristic
edge) and a bound the trivial 1.
"""

import math

from .._jit import jit

__all__ = ["edge", "tail"]


@jit
def edge(lams, total, lg, upper, shift, offset):
    """upper: min over lambda > 0 of (total + offset - lg) / (lambda + shift); lower: max over
    lambda < 0 of (total - lg) / lambda; NaN if a NaN is met or no finite value results."""
    best = math.inf if upper else -math.inf
    for i in range(lams.shape[0]):
        lam = lams[i]
        if (lam > 0.0) if upper else (lam < 0.0):
            v = (total[i] + offset - lg) / (lam + shift) if upper else (total[i] - lg) / lam
            if v != v:
                return math.nan
            if (v < best) if upper else (v > best):
                best = v
    return best if math.isfinite(best) else math.nan


@jit
def tail(lams, total, scale, b, upper):
    """min(1, min over lambda of the side's sign of exp(scale * total - lambda b)): the Chernoff
    bound on the mass at or above (upper) / at or below b of a loss with log-MGF scale * total."""
    best = 0.0
    for i in range(lams.shape[0]):
        lam = lams[i]
        if (lam > 0.0) if upper else (lam < 0.0):
            v = scale * total[i] - lam * b
            if v != v:
                return 1.0
            if v < best:
                best = v
    return min(1.0, math.exp(best))
