"""The RDP accountant's curve over a long history: epsilon after every recorded segment from
running sums of the RDP, one pass per order (``_kernels/rdp/prefix.py``), instead of an order
search per prefix (which took a pass over the history each: 256 segments of distinct sigma
took over 10 s). Also the helpers the accountant shares with it: repeated (q, sigma) pairs, and
the non-decreasing pass over upper bounds along a run."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ._kernels import rdp as _k
from ._kernels.rdp import prefix as _kp
from ._types import Step

__all__ = ["CURVE_EXACT_SEGMENTS", "CURVE_ORDERS", "pair_ids", "prefix_curve", "upper_monotone"]

_U = 2.0 ** -53

#: the first this many points of a curve (all of them, for a history this short) are each an order
#: search over its own prefix (:meth:`RDPAccountant.epsilon`); the others come from ``prefix_curve``
CURVE_EXACT_SEGMENTS = 4
#: the orders of a long history's curve points: the integers 2..64, then about 10 % apart up to
#: 4096 (``DEFAULT_GRID``'s range), and 1.25, 1.5, 1.75, 2.25, 2.75 and n + 1/2 below 16 (by
#: quadrature, so only where it is cheap: ``_quad_cheap``). An order within 5 % of a point's best
#: costs it ~0.1 % of its epsilon where the RDP is about linear in the order; where it is steep
#: (small sigma, or past the order where the top terms of a step's sum take over) the points can
#: be a few % above their prefix's epsilon.
CURVE_ORDERS = np.unique(np.concatenate((np.arange(2.0, 65.0), np.round(16.0 * 1.1 ** np.arange(58)), [4096.0],
                                         [1.25, 1.5, 1.75, 2.25, 2.75], np.arange(2.5, 16.0))))


def upper_monotone(up: np.ndarray) -> np.ndarray:
    """Upper bounds on a quantity that grows along a run: each also bounds every earlier point."""
    return np.minimum.accumulate(up[::-1])[::-1]


def pair_ids(qs: np.ndarray, sigmas: np.ndarray):
    """(ids, first, m): ids[i] numbers the distinct (q, sigma) pair of entry i in the order of
    first appearance, first[j] is the first entry of pair j, m the number of pairs."""
    if qs.size <= 1:
        return np.zeros(qs.size, dtype=np.int64), np.arange(qs.size), qs.size
    _, first, inv = np.unique(np.stack((qs, sigmas), axis=1), axis=0, return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    return rank[inv.reshape(-1)], np.sort(first), first.size


def _prefix_deltas(sig, qs, cnt, d):
    """(log delta left to the noisy steps of each prefix, whether some is left, whether every
    prefix has the same): noiseless steps (sigma = 0) reveal a sampled record with probability
    p_k = 1 - prod (1 - q)^T, rounded up (as ``rdp._split``), which leaves (d - p_k) / (1 - p_k),
    rounded down, where d > p_k, and -inf (eps = +inf) elsewhere."""
    bare = (cnt > 0) & (qs > 0) & (sig == 0)
    log_keep = np.zeros(sig.size)
    with np.errstate(divide="ignore"):
        log_keep[bare] = cnt[bare] * np.log1p(-qs[bare])
    log_keep = np.cumsum(log_keep)
    p = np.where(log_keep == 0.0, 0.0, np.minimum(1.0, -np.expm1(log_keep) * (1 + 4 * _U)))
    left = d > p
    log_deltas = np.full(sig.size, -math.inf)
    pl = p[left]
    log_deltas[left] = np.log(np.where(pl > 0.0, (d - pl) / (1.0 - pl) * (1 - 4 * _U), d))
    return log_deltas, left, not bare.any()


def prefix_curve(history: Sequence[Step], d: float, orders, rel_margin: float, last: float, last_order: float,
                 head: np.ndarray) -> np.ndarray:
    """Upper bounds on epsilon at ``d`` after each segment of ``history``: for each prefix the
    best of ``orders`` (None: ``CURVE_ORDERS`` and, where the whole history's best order
    ``last_order`` is above 16, the integers 2 % apart from 0.94 to 1.27 times it: in steep
    regimes the prefixes' best orders crowd there) from running sums of its RDP, the counts
    rounded up by ``rel_margin`` (the kernel says which orders it skips and why that costs
    nothing); the first points lowered to ``head`` (the first prefixes' epsilons), the last to
    ``last`` (the whole history's, an upper bound for every prefix too), then made
    non-decreasing. Noiseless steps count as in :meth:`RDPAccountant.epsilon`."""
    sig, qs, cnt = (np.array([getattr(st, f) for st in history], dtype=np.float64) for f in ("sigma", "q", "count"))
    noisy = (cnt > 0) & (qs > 0) & (sig > 0) & (sig < math.inf)
    log_deltas, left, same = _prefix_deltas(sig, qs, cnt, d)
    ids = np.zeros(sig.size, dtype=np.int64)
    ids[noisy], _, m = pair_ids(qs[noisy], sig[noisy])
    o = np.ascontiguousarray(CURVE_ORDERS if orders is None else np.sort(orders), dtype=np.float64)
    if orders is None and not _k._quad_cheap(qs[noisy], sig[noisy], cnt[noisy], 16.0):
        o = o[o == np.floor(o)]  # (their quadrature would cost more than the query)
    if orders is None and last_order > 16.0:
        near = np.round(last_order * 1.02 ** np.arange(-3, 13))
        o = np.unique(np.concatenate((o, near[(near >= 2.0) & (near <= 5000.0)])))
    out = np.full(sig.size, math.inf)
    _kp.prefix_epsilons(np.where(noisy, qs, 0.5), np.where(noisy, sig, 1.0), np.where(noisy, cnt, 0.0) * (1.0 + rel_margin),
                        ids, m, o, log_deltas, same, last, out)
    out[~left] = math.inf
    out[: head.size] = np.minimum(out[: head.size], head)
    out[-1] = min(out[-1], last)
    return upper_monotone(out)
