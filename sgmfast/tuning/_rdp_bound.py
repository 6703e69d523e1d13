"""The RDP bound of a random search (Papernot & Steinke 2022, Theorems 2 and 6): module notes of
:mod:`sgmfast.tuning`."""

from __future__ import annotations

import math

import numpy as np

from ._rounding import _REL
from .runs import RunCount



#: Rényi orders of the ``"rdp"`` bound (lambda and lambda_hat of Papernot & Steinke)
ORDERS = 1.0 + np.geomspace(1e-3, 1e4, 120)
#: Factors on (order - 1) around a centre order (``_orders``)
_SPREAD = np.geomspace(1.0 / 30.0, 30.0, 60)
#: Orders always tried (cheap ones: log A costs little below ~64)
_LOW = 1.0 + np.geomspace(1e-3, 63.0, 24)
#: Orders added between the neighbours of the best order (and of the best lambda_hat)
_FINE = 40


def _tuned_rdp(lam, base, runs: RunCount, prof) -> np.ndarray:
    """RDP of the search at orders ``lam`` (increasing) from one run's RDP ``base`` there (inf
    where no theorem applies), made non-decreasing."""
    if runs.kind == "tnb":
        eta, g = runs.shape, runs.gamma
        c = (1.0 + eta) * float(np.min((1.0 - 1.0 / lam) * base + math.log(1.0 / g) / lam))  # Theorem 2
        out = base + c + math.log(runs.mean) / (lam - 1.0)
    elif runs.kind == "poisson":
        eps_hat = np.log1p(1.0 / (lam - 1.0)) * (1.0 - _REL)  # Theorem 6: e^eps_hat <= 1 + 1/(lambda - 1)
        p = prof()
        d_hat = p.delta_at(eps_hat)
        if p.grids is not None:  # (reads off the kept grids: each bound holds, the smaller too)
            d_hat = np.minimum(d_hat, p.delta_sharp(eps_hat))
        out = base + runs.mu * d_hat + math.log(runs.mu) / (lam - 1.0)
    else:
        return np.full(lam.shape, math.inf)
    out = out * (1.0 + _REL) + 1e-300
    return np.minimum.accumulate(out[::-1])[::-1]  # D_lambda is non-decreasing in lambda


def _rdp_best(sigma, q, steps, runs, prof, target, mode):
    """Best (value, order) of the converted tuned RDP (mode 0: eps at log delta ``target``, 1: log
    delta at eps ``target``): ``ORDERS``, then a finer grid around the best order and around the
    best lambda_hat of Theorem 2 (every order is a valid choice; the grid only costs tightness)."""
    from .. import rdp
    from .._kernels import rdp as _k

    if runs.kind == "binomial":
        return math.inf, math.nan
    lam = _orders(sigma, q, steps, runs, target, mode)
    base = rdp.rdp(sigma, q, steps, lam)
    curve = _tuned_rdp(lam, base, runs, prof)
    _, a = _k.best_of_orders(curve, lam, target, mode)
    extra = [_around(lam, float(a))] if math.isfinite(a) else []
    if runs.kind == "tnb":
        j = int(np.argmin((1.0 - 1.0 / lam) * base + math.log(1.0 / runs.gamma) / lam))
        extra.append(_around(lam, float(lam[j])))
    if extra:
        new = np.concatenate(extra)
        lam = np.concatenate([lam, new])
        base = np.concatenate([base, rdp.rdp(sigma, q, steps, new)])
        order = np.argsort(lam)
        lam, base = lam[order], base[order]
        curve = _tuned_rdp(lam, base, runs, prof)
    v, a = _k.best_of_orders(curve, lam, target, mode)
    return float(v), float(a)


def _orders(sigma, q, steps, runs, target, mode):
    """The orders to try: ``ORDERS`` scaled around the run's own best order for the target and,
    for Theorem 2, around its best order at delta = gamma (where lambda_hat's term is smallest).
    log A at large orders is slow for small sigma (seconds each at sigma = 0.01), so the grid
    stays near where the optimum can be."""
    from .. import rdp

    if mode == 0:
        centres = [rdp.epsilon(sigma, q, steps, math.exp(target), return_order=True)[1]]
    else:
        centres = [rdp.delta(sigma, q, steps, target, return_order=True)[1]]
    if runs.kind == "tnb":
        centres.append(rdp.epsilon(sigma, q, steps, min(runs.gamma, 0.5), return_order=True)[1])
    grids = [1.0 + (c - 1.0) * _SPREAD for c in centres if math.isfinite(c) and c > 1.0]
    lam = np.unique(np.concatenate(grids + [_LOW]))
    lam = lam[(lam >= ORDERS[0]) & (lam <= ORDERS[-1])]
    return lam


def _around(lam, a):
    """_FINE orders strictly between the grid neighbours of order a."""
    j = int(np.searchsorted(lam, a))
    lo, hi = lam[max(j - 1, 0)], lam[min(j + 1, lam.size - 1)]
    return np.geomspace(lo - 1.0, hi - 1.0, _FINE + 2)[1:-1] + 1.0


def _rdp_epsilon(sigma, q, steps, dlt, runs, prof) -> float:
    return _rdp_best(sigma, q, steps, runs, prof, math.log(dlt), 0)[0]


def _rdp_delta(sigma, q, steps, eps, runs, prof) -> float:
    v = _rdp_best(sigma, q, steps, runs, prof, eps, 1)[0]
    return 1.0 if not v < 0.0 else math.exp(v)


#: Orders of :func:`_rdp_epsilon_floor`: _FLOOR_POINTS geometric in lambda - 1 from ORDERS[0] up to
#: _FLOOR_SPAN times the run's own best order at the target delta, within [_FLOOR_MIN, _FLOOR_TOP]
#: (above it, one interval to ``ORDERS[-1]``; log A is slow at large orders for small sigma)
_FLOOR_POINTS, _FLOOR_SPAN, _FLOOR_MIN, _FLOOR_TOP = 96, 4.0, 16.0, 100.0


def _rdp_epsilon_floor(sigma, q, steps, dlt, runs: RunCount) -> float:
    """A number at or below what :func:`_rdp_epsilon` returns (truncated negative binomial K; else
    0), from the run's RDP at _FLOOR_POINTS orders only: where the profile bound is already below it,
    the RDP bound need not be computed (a choice of work: every returned value is a bound).

    Why it is below.  ``_rdp_epsilon`` returns eps_from_rdp(lambda, v, log delta) at one of its
    orders lambda in [ORDERS[0], ORDERS[-1]] = [a_0, top], with v = D(lambda') rounded up for some
    order lambda' >= lambda of its grid, D = r + C + log(E[K]) / (lambda' - 1) (Theorem 2), r the
    run's RDP (non-decreasing in the order: Rényi divergences are) and C = (1 + eta) min over its
    grid of (1 - 1/l) r(l) + log(1/gamma) / l.  So v >= r(lambda) + C* (E[K] >= 1), C* the same
    infimum over all l in [a_0, top], and eps_from_rdp = max(v + f(lambda), 0), f = log(1 -
    1/lambda) - (log delta + log lambda) / (lambda - 1), is non-decreasing in v (the
    Bretagnolle-Huber zero needs v <= -log(1 - delta^2): excluded by C* > 2 delta^2).  On each
    interval [a_i, a_i+1] of the orders here, r(lambda) >= r(a_i), 1 - 1/l >= 1 - 1/a_i, 1/l >=
    1/a_i+1, log(1 - 1/lambda) >= log(1 - 1/a_i) and, N = -(log delta + log lambda) falling in
    lambda, N / (lambda - 1) >= N(a_i+1) / (a_i+1 - 1) where N(a_i+1) >= 0, else N(a_i+1) /
    (a_i - 1); the last interval ends at top.  r is the accountant's value divided by its rounding
    margin (``_rdp_margin``) twice: the true RDP is at least that."""
    from .. import rdp
    from .._rdp_margin import _margin

    if runs.kind != "tnb" or runs.mean < 1.0:
        return 0.0
    best = float(rdp.epsilon(sigma, q, steps, dlt, return_order=True)[1])
    last = min(max(_FLOOR_SPAN * best, _FLOOR_MIN), _FLOOR_TOP) if math.isfinite(best) else _FLOOR_TOP
    orders = 1.0 + np.geomspace(ORDERS[0] - 1.0, last - 1.0, _FLOOR_POINTS)  # (any orders: a floor)
    a = np.append(orders, ORDERS[-1])
    r = np.asarray(rdp.rdp(sigma, q, steps, orders), dtype=np.float64)
    r = np.maximum(r / _margin(1, [q], [sigma]) ** 2 * (1.0 - 1e-12), 0.0)
    lo, hi = a[:-1], a[1:]
    with np.errstate(invalid="ignore"):
        c = (1.0 + runs.shape) * float(np.min((1.0 - 1.0 / lo) * r + math.log(1.0 / runs.gamma) / hi))
        if not c > 2.0 * dlt * dlt:
            return 0.0
        n = -(math.log(dlt) + np.log(hi))
        f = np.log1p(-1.0 / lo) + np.where(n >= 0.0, n / (hi - 1.0), n / (lo - 1.0))
        floor = float(np.min(r + f)) + c
    # (the few roundings of these sums, ~1e-15 relative, are covered by the 1e-9)
    return max(floor - 1e-9 * abs(floor), 0.0) if math.isfinite(floor) else 0.0
