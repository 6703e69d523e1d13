"""How much the RDP accountant rounds its totals up (``sgmfast.rdp``): a relative ``REL_MARGIN``
for log A's own error, the integer binomial sums' rounding bounded by a proof (``_sum_error``),
and the rounding of a sum over many mechanisms (``_margin``)."""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln

from ._kernels import rdp as _k

#: Relative amount by which total RDP is rounded up before conversion to (epsilon, delta).
REL_MARGIN = 1e-12
_U = 2.0 ** -53


def _margin(m: int, qs=None, sigmas=None, alpha_max: float = _k.ALPHA_MAX) -> float:
    """The factor by which the total RDP of m mechanisms is rounded up: ``REL_MARGIN`` and the
    integer sums' rounding (``_sum_error``) for log A's own error, times 1 + 4 (m - 1) units of
    rounding for the sum of m non-negative terms (its relative error is at most about m - 1 of
    them: Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., Sec. 4.2; ~1e-11 for
    10^5 distinct steps, which ``REL_MARGIN`` alone did not cover)."""
    extra = 0.0 if qs is None else _sum_error(qs, sigmas, alpha_max)
    return (1.0 + REL_MARGIN + extra) * (1.0 + 4 * max(m - 1, 0) * _U)


#: Integer orders at which ``_sum_error`` takes its largest value (it grows with the order).
_ERR_ORDERS = np.unique(np.round(np.geomspace(2.0, 1e6, 60)))


def _sum_error(qs, sigmas, alpha_max: float, each: bool = False):
    """A bound on the relative error of log A_alpha's integer binomial sums (0 < q < 1) up to
    order ``alpha_max``, beyond ``REL_MARGIN``.  Each term's log adds log C(n, k) (three lookups
    of lgamma, each within a few ulps of lgamma(n + 1) <= lgamma(n + 1) in size, or beyond the
    table n incremental logs), (n - k) log(1 - q), k log q and x_k (or log expm1 x_k), x_k =
    (k^2 - k) / (2 sigma^2) <= x_n; so it is off by at most E = u (20 lgamma(n + 1) + 8 n (|log q|
    + |log(1 - q)|) + 8 x_n + 8 log n + 16) -- the exp and the running sum included.  A
    log-sum-exp of such terms is then off by E, and log A = log1p(e^acc) by at most
    E x / ((1 + x) log1p x) <= E / max(1, log A) relatively (x = e^acc), where log A is at least
    the log of its top term, n log q + x_n (less log 2 for x_n < 1).  (The table's rounding alone
    put log_a_int 1.5e-12 below mpmath at q = 1e-6, sigma 30, alpha 1000: over REL_MARGIN.)"""
    qs, sigmas = np.asarray(qs, dtype=np.float64), np.asarray(sigmas, dtype=np.float64)
    ok = (qs > 0) & (qs < 1) & np.isfinite(sigmas) & (sigmas > 0)
    rel = np.zeros(int(ok.sum()))
    qo, so = qs[ok], sigmas[ok]
    for a in range(0, rel.size, _CHUNK):  # (bounded memory for 10^5 distinct mechanisms)
        rel[a:a + _CHUNK] = _rel_error(qo[a:a + _CHUNK], so[a:a + _CHUNK], alpha_max)
    if each:  # (one bound per mechanism: ``each``)
        out = np.zeros(qs.size)
        out[ok] = rel
        return out
    return float(rel.max()) if rel.size else 0.0


_CHUNK = 4096


def _rel_error(q, s, alpha_max: float) -> np.ndarray:
    """``_sum_error`` of each mechanism: the largest E / max(1, top) over the orders up to
    alpha_max, every order between two checked ones n_j < n < n_{j+1} covered by E(n_{j+1}) (E
    grows with n) over the least top on [n_j, n_{j+1}] (top is convex in n: its vertex
    0.5 - s^2 log q, clipped to the interval).  In one kernel (``_kernels.rdp.margin``), the
    operations of the numpy expressions (kept as its reference in tests/test_rdp.py) in their order."""
    from ._kernels.rdp.margin import rel_error

    k = int(np.searchsorted(_ERR_ORDERS, max(alpha_max, 2.0))) + 1
    out = np.empty(np.shape(q)[0])
    rel_error(np.ascontiguousarray(q, dtype=np.float64), np.ascontiguousarray(s, dtype=np.float64), _ERR_LO[:k],
              _ERR_ORDERS[:k], _ERR_LGAMMA[:k], _ERR_LOG[:k], math.log(2.0), _U, out)
    return out


#: the orders' lower neighbours (2 below the first), gammaln(n + 1) and log n (``_rel_error``)
_ERR_LO = np.concatenate(([2.0], _ERR_ORDERS[:-1]))
_ERR_LGAMMA = gammaln(_ERR_ORDERS + 1.0)
_ERR_LOG = np.log(_ERR_ORDERS)
