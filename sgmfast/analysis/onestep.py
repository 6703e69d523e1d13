"""The exact one-step mechanism: delta(epsilon) in closed form (both directions), the noise
multiplier sigma(q) meeting (epsilon, delta) in one step, and its derivatives (Lemma 6.1,
Theorem 6.2 of Räisä et al., ICML 2024)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._kernels import analysis as _ka
from .._validation import check_delta, check_epsilon, check_q, check_sigma


_DIRECTIONS = {"remove": _ka.DIR_REMOVE, "add": _ka.DIR_ADD, "both": _ka.DIR_BOTH}
#: Bracket width of the sigma root solve, in log sigma (relative accuracy of sigma).
SIGMA_XTOL = 1e-13


def _direction(direction: str) -> int:
    if direction not in _DIRECTIONS:
        raise ValueError(f"direction must be one of {tuple(_DIRECTIONS)}; got {direction!r}")
    return _DIRECTIONS[direction]


def _broadcast(*arrays):
    b = np.broadcast_arrays(*arrays)
    shape = b[0].shape
    return shape, [np.ascontiguousarray(x.reshape(-1), dtype=np.float64) for x in b]


def _out(arr: np.ndarray, shape):
    return float(arr[0]) if shape == () else arr.reshape(shape)





def one_step_delta(sigma, q, epsilon, direction: str = "both", *, log: bool = False):
    """Exact delta(epsilon) of one step of the Poisson-subsampled Gaussian mechanism.

    With mu0 = N(0, sigma^2) and mu = (1 - q) N(0, sigma^2) + q N(1, sigma^2) (sensitivity 1),
    delta is the hockey-stick divergence sup_S P(S) - e^eps Q(S):

    - ``"remove"`` (P = mu, Q = mu0), Eq. (45) of Räisä et al., ICML 2024: with
      h = e^eps - 1 + q and x = sigma log(h/q),
      delta = q Phibar(x - 1/(2 sigma)) - h Phibar(x + 1/(2 sigma));
    - ``"add"`` (P = mu0, Q = mu): with z' = sigma^2 log((e^-eps - 1 + q)/q) + 1/2,
      delta = Phi(z'/sigma) - e^eps [(1 - q) Phi(z'/sigma) + q Phi((z' - 1)/sigma)]
      for eps < -log(1 - q), and 0 beyond;
    - ``"both"``: the add/remove relation, the larger of the two. (In all our checks,
      eps >= 0, the remove direction is the larger.)

    Evaluated in log space, so delta keeps its relative precision down to 1e-300 and, with
    ``log=True``, far below (log delta is returned).

    Parameters
    ----------
    sigma : float or array_like
        Noise multiplier in [0, +inf] (0: no noise -- delta = q for remove; +inf: delta = 0).
    q : float or array_like
        Poisson sampling rate in [0, 1].
    epsilon : float or array_like
        epsilon >= 0 (nats).
    direction : {"both", "remove", "add"}
    log : bool
        Return log delta instead of delta (-inf where delta = 0).

    Returns
    -------
    float or ndarray
        Broadcast over the inputs.

    Examples
    --------
    >>> from sgmfast.analysis import one_step_delta
    >>> print(f"{one_step_delta(1.0, 0.1, 1.0):.10e}")   # (sigma, q, epsilon)
    2.0712148602e-04
    >>> one_step_delta(1.0, 0.1, 1.0, direction="add")   # eps > -log(1 - q): no add term
    0.0
    >>> round(one_step_delta(10.0, 1e-6, 8.0, log=True), 3)   # delta ~ 1e-10342
    -23811.994
    """
    d = _direction(direction)
    e = check_epsilon(epsilon)
    qq = check_q(q)
    s = check_sigma(sigma)
    shape, (e, qq, s) = _broadcast(e, qq, s)
    out = np.full_like(e, -np.inf)  # q = 0, sigma = +inf, or eps = +inf with noise: delta = 0
    reg = (qq > 0) & (s > 0) & np.isfinite(s) & np.isfinite(e)
    if reg.any():
        r = np.empty(int(reg.sum()))
        _ka.log_delta_points(d, np.ascontiguousarray(e[reg]), np.ascontiguousarray(qq[reg]),
                             np.ascontiguousarray(s[reg]), r)
        out[reg] = r
    noiseless = (s == 0) & (qq > 0)
    if noiseless.any():
        # sigma = 0: remove reveals a sampled record (loss +inf with probability q, else
        # log(1 - q) < 0): delta = q for every eps, +inf included; add: (1 - e^eps (1 - q))_+
        en, qn = e[noiseless], qq[noiseless]
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            add = np.where(np.isinf(en), 0.0, np.maximum(-np.expm1(en + np.log1p(-qn)), 0.0))
        val = {_ka.DIR_REMOVE: qn, _ka.DIR_ADD: add}.get(d, np.maximum(qn, add))
        with np.errstate(divide="ignore"):
            out[noiseless] = np.log(val)
    if not log:
        out = np.exp(out)
    return _out(out, shape)


def _certified_upper(direction: int, eps: float, q: float, sigma: float) -> float:
    """log of the certified upper bound on one step's delta (``sgmfast._kernels.pld.exact``)."""
    from .._kernels.pld import exact as kx

    kinds = {_ka.DIR_REMOVE: (kx.KIND_REMOVE,), _ka.DIR_ADD: (kx.KIND_ADD,)}.get(
        direction, (kx.KIND_REMOVE, kx.KIND_ADD))
    if q >= 1.0:
        kinds = (kx.KIND_GAUSS,)
    w_hi = (1.0 / sigma) * (1.0 + 4.0 * 2.0**-53)
    vals = [kx.log_delta_bounds(kind, eps, q, w_hi)[1] for kind in kinds]
    return math.inf if any(math.isnan(v) for v in vals) else max(vals)


def _certified_sigma_search(direction: int, eps: float, delta: float, q: float) -> float:
    """The smallest sigma (to 1e-12 in log) whose certified delta bound is <= delta, by bisection in
    log sigma over the whole float range; 0 if every sigma (the add direction beyond its support)
    meets it."""
    ld = math.log(delta)
    ok = lambda x: _certified_upper(direction, eps, q, math.exp(x)) <= ld  # noqa: E731
    lo, hi = -744.0, 700.0
    if ok(lo):
        return 0.0 if direction == _ka.DIR_ADD or eps == math.inf else math.exp(lo)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if hi - lo <= 1e-12 * max(1.0, abs(mid)):
            break
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return math.exp(hi)


def _certified_private(direction: int, eps: float, delta: float, q: float, sigma: float) -> float:
    """sigma nudged up (by 1e-13 relative steps, doubling) until the certified upper bound on
    delta (``sgmfast._kernels.pld.exact``, rounding bounded) is <= delta: the root solve above
    works on the uncertified log-space delta, whose last digits can sit on the wrong side."""
    from .._kernels.pld import exact as kx

    kinds = {_ka.DIR_REMOVE: (kx.KIND_REMOVE,), _ka.DIR_ADD: (kx.KIND_ADD,)}.get(
        direction, (kx.KIND_REMOVE, kx.KIND_ADD))
    if q >= 1.0:
        kinds = (kx.KIND_GAUSS,)
    log_delta = math.log(delta)
    for k in range(80):
        w_hi = (1.0 / sigma) * (1.0 + 4.0 * 2.0**-53)
        if all(kx.log_delta_bounds(kind, eps, q, w_hi)[1] <= log_delta for kind in kinds):  # NaN: no bound
            return sigma
        sigma *= 1.0 + 1e-13 * 2.0**k
    return sigma  # (not reached: delta -> 0 as sigma grows)


def one_step_sigma(epsilon, delta, q, direction: str = "both"):
    """Smallest noise multiplier sigma(q) for which one SGM step is (epsilon, delta)-DP.

    delta(epsilon; q, sigma) is strictly decreasing in sigma (Lemma 1 of Kalinin 2024, for
    Eq. (45); adding noise is post-processing for the add direction), so the root is unique.
    It is found by Brent's method on log delta against log sigma, started from the Gaussian
    mechanism's exact sigma (q = 1, an upper bound), to a relative accuracy of ~1e-13, and
    returned on the private side (delta(sigma) <= delta).

    Parameters
    ----------
    epsilon : float or array_like
        Target epsilon >= 0 (nats).
    delta : float or array_like
        Target delta in (0, 1).
    q : float or array_like
        Poisson sampling rate in (0, 1].
    direction : {"both", "remove", "add"}

    Returns
    -------
    float or ndarray
        sigma(q). It is 0 where delta >= q: the supremum of delta over sigma is q, so no
        noise is needed.

    Examples
    --------
    >>> from sgmfast.analysis import one_step_sigma, one_step_delta
    >>> s = one_step_sigma(1.0, 1e-5, 0.01)
    >>> round(s, 4)
    0.6738
    >>> abs(one_step_delta(s, 0.01, 1.0) / 1e-5 - 1) < 1e-9
    True
    """
    d = _direction(direction)
    e = check_epsilon(epsilon)
    dl = check_delta(delta)
    qq = check_q(q)
    shape, (e, dl, qq) = _broadcast(e, dl, qq)
    out = np.zeros_like(e)  # q = 0 or eps = +inf: no noise needed
    reg = (qq > 0) & np.isfinite(e)
    if reg.any():
        r = np.empty(int(reg.sum()))
        _ka.solve_sigma_points(d, np.ascontiguousarray(e[reg]), np.log(dl[reg]), np.ascontiguousarray(qq[reg]),
                               SIGMA_XTOL, r)
        out[reg] = r
        for i in np.flatnonzero(reg & ~(out >= 0)):
            # outside the root solver's bracket (a huge eps: sigma below e^-40; or an add
            # direction whose delta is 0 for every sigma): bisection on the certified bound
            out[i] = _certified_sigma_search(d, float(e[i]), float(dl[i]), float(qq[i]))
        for i in np.flatnonzero(reg & (out > 0)):
            out[i] = _certified_private(d, float(e[i]), float(dl[i]), float(qq[i]), float(out[i]))
    return _out(out, shape)


@dataclass(frozen=True)
class OneStepDerivatives:
    """sigma(q) for one step and its derivatives (floats or arrays of the broadcast shape).

    Attributes
    ----------
    sigma : smallest sigma meeting (epsilon, delta) (remove direction, Eq. (45)).
    dsigma_dq : sigma'(q), Lemma 6.1 of Räisä et al. (2024).
    d_sigma_over_q : d/dq [sigma(q)/q] = (q sigma' - sigma)/q^2, the slope of the effective
        noise; negative means larger batches need less effective noise.
    a, b : Eqs. (46)-(47): a = 1/(2 sqrt(2) sigma), b = sigma log((e^eps - 1 + q)/q)/sqrt(2).
        a < b implies d_sigma_over_q < 0 (Theorem 6.2).
    """

    sigma: Any
    dsigma_dq: Any
    d_sigma_over_q: Any
    a: Any
    b: Any

    @property
    def a_less_than_b(self):
        """The condition of Theorem 6.2."""
        return self.a < self.b


def one_step_derivatives(epsilon, delta, q) -> OneStepDerivatives:
    """sigma(q), sigma'(q), d/dq[sigma(q)/q], a and b for one step (Räisä et al., ICML 2024).

    sigma(q) solves Psi(q, sigma) = delta for Psi the right side of Eq. (45). Implicit
    differentiation (Lemma 6.1) gives sigma' = -(dPsi/dq)/(dPsi/dsigma) with, writing
    x1 = sigma log(h/q) - 1/(2 sigma), x2 = x1 + 1/sigma and using q phi(x1) = h phi(x2),
    dPsi/dq = Phi(x2) - Phi(x1) and dPsi/dsigma = -q phi(x1)/sigma^2, hence
    sigma'(q) = sigma^2 (Phi(x2) - Phi(x1)) / (q phi(x1)),
    which is Eq. (48)/(136) of the paper since x1 = sqrt(2)(b - a) and x2 = sqrt(2)(a + b).

    Parameters
    ----------
    epsilon : float or array_like
        epsilon > 0 (nats).
    delta : float or array_like
        delta in (0, 1), with delta < q (otherwise sigma(q) = 0 and nothing is defined).
    q : float or array_like
        Poisson sampling rate in (0, 1].

    Returns
    -------
    OneStepDerivatives

    Examples
    --------
    >>> from sgmfast.analysis import one_step_derivatives
    >>> d = one_step_derivatives(1.0, 1e-5, 0.01)
    >>> bool(d.a < d.b), bool(d.d_sigma_over_q < 0)
    (True, True)
    """
    e = check_epsilon(epsilon)
    if np.any(e <= 0):
        raise ValueError(f"epsilon must be > 0 for the derivatives; got {e[e <= 0].flat[0]!r}")
    dl = check_delta(delta)
    qq = check_q(q)
    shape, (e, dl, qq) = _broadcast(e, dl, qq)
    bad = dl >= qq
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"delta must be < q (else sigma(q) = 0); got delta={dl[i]:g}, q={qq[i]:g}")
    outs = [np.empty_like(e) for _ in range(5)]
    _ka.derivatives_points(e, np.log(dl), qq, SIGMA_XTOL, *outs)
    return OneStepDerivatives(*(_out(o, shape) for o in outs))
