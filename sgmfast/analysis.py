"""The batch-size analysis of Räisä, Jälkö & Honkela (ICML 2024), "Subsampling is not magic".

What lives here, and where each number comes from:

- :func:`one_step_delta` -- the exact delta(epsilon) of ONE step of the Poisson-subsampled
  Gaussian mechanism, in closed form for both neighbouring directions (remove: Eq. (45) of
  the paper; add: the matching formula, derived from the same hockey-stick integral). Both
  were checked against mpmath quadrature of the definition (tests/reference/make_analysis.py).
- :func:`one_step_sigma` -- the smallest sigma(q) meeting (epsilon, delta) in one step, by
  Brent's method in log sigma (delta is strictly decreasing in sigma: Lemma 1 of Kalinin 2024).
- :func:`one_step_derivatives` -- sigma'(q) by implicit differentiation (Lemma 6.1), the
  slope of the effective noise sigma(q)/q, and the quantities a, b of Eqs. (46)-(47); by
  Theorem 6.2, a < b implies sigma(q)/q decreases in q (larger batches are better).
- :func:`kalinin_constant`, :func:`max_a_minus_b`, :func:`figure2_data` -- Conjecture 6.3
  (a < b for epsilon, q >= 4 delta), proved by Kalinin (2024) with the tight constant
  1/(1/2 - 2 Phi(-sqrt(2 log 2))) ~ 3.8319, and the data of the paper's Figure 2, computed
  at the exact sigma(q) of every grid point (one root solve per point, not a sigma grid).
- :func:`variance_decomposition`, :func:`plan_batch_size` -- Eq. (25) and Appendix A.1:
  per-coordinate variance of the DP-SGD gradient = subsampling + effective DP noise.
- :func:`amplified_epsilon`, :func:`base_epsilon`, :func:`noise_scale_ratio`,
  :func:`noise_inflation_bound` -- amplification by subsampling for pure DP (Steinke,
  "Limits of privacy amplification by subsampling", DifferentialPrivacy.org), Eqs. (3)-(8).

Epsilon is in nats throughout; sensitivity (clipping norm) 1 unless stated.

Examples
--------
>>> from sgmfast import analysis
>>> s = analysis.one_step_sigma(3.82e-6, 1e-6, 3.82e-6)    # Kalinin's counterexample
>>> round(s, 4)
0.8479
>>> d = analysis.one_step_derivatives(3.82e-6, 1e-6, 3.82e-6)
>>> round(d.a - d.b, 5)
0.00144
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._kernels import analysis as _ka
from ._validation import (
    as_float_array,
    check_delta,
    check_epsilon,
    check_positive,
    check_positive_int,
    check_q,
    check_sigma,
    check_steps,
)
from ._progress import Progress

__all__ = [
    "one_step_delta",
    "one_step_sigma",
    "one_step_derivatives",
    "OneStepDerivatives",
    "kalinin_constant",
    "max_a_minus_b",
    "AMinusB",
    "figure2_data",
    "Figure2Data",
    "sigma_eff",
    "sigma_eff_ratio",
    "figure1_data",
    "Figure1Data",
    "variance_decomposition",
    "plan_batch_size",
    "BatchSizePlan",
    "PlanRow",
    "amplified_epsilon",
    "base_epsilon",
    "noise_scale_ratio",
    "noise_inflation_bound",
]

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


# ---------------------------------------------------------------------------------------------
# 1. The exact one-step mechanism
# ---------------------------------------------------------------------------------------------


def one_step_delta(epsilon, q, sigma, direction: str = "both", *, log: bool = False):
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
    epsilon : float or array_like
        epsilon >= 0 (nats).
    q : float or array_like
        Poisson sampling rate in [0, 1].
    sigma : float or array_like
        Noise multiplier in [0, +inf] (0: no noise -- delta = q for remove; +inf: delta = 0).
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
    >>> print(f"{one_step_delta(1.0, 0.1, 1.0):.10e}")
    2.0712148602e-04
    >>> one_step_delta(1.0, 0.1, 1.0, direction="add")   # eps > -log(1 - q): no add term
    0.0
    >>> round(one_step_delta(8.0, 1e-6, 10.0, log=True), 3)   # delta ~ 1e-10342
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
    from ._kernels.pld import exact as kx

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
    from ._kernels.pld import exact as kx

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
    >>> abs(one_step_delta(1.0, 0.01, s) / 1e-5 - 1) < 1e-9
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


# ---------------------------------------------------------------------------------------------
# 2. Conjecture 6.3 and its tight constant
# ---------------------------------------------------------------------------------------------


def kalinin_constant() -> float:
    """The tight constant of Conjecture 6.3: 1/(1/2 - 2 Phi(-sqrt(2 log 2))) ~ 3.8319.

    Kalinin (2024) proves a < b whenever epsilon, q >= c delta for every c above this value,
    and shows it cannot be lowered. (His closing remark prints the denominator as
    3/2 - 2 Phi(...), which is 0.793, not the 3.8319 he quotes; 1/2 - ... is the value that
    makes T(sqrt(2 log 2)) = 0 in his Lemma 2 with min(e^eps - 1, q)/c in place of /4.)

    Examples
    --------
    >>> from sgmfast.analysis import kalinin_constant
    >>> round(kalinin_constant(), 4)
    3.8319
    """
    z = math.sqrt(2.0 * math.log(2.0))
    phi_minus = 0.5 * math.erfc(z / math.sqrt(2.0))
    return 1.0 / (0.5 - 2.0 * phi_minus)


@dataclass(frozen=True)
class Figure2Data:
    """Largest a - b over the q grid, per epsilon (the data of Figure 2 of Räisä et al.).

    Attributes
    ----------
    delta, c : the target delta and the constant: epsilon and q range over [c delta, ...].
    epsilon : the epsilon grid (log-spaced from c delta to ``eps_max``).
    q : the q grid (log-spaced from c delta to 1).
    max_a_minus_b : for each epsilon, max over q of a - b at the exact sigma(q).
    argmax_q, sigma : where that maximum is attained, and sigma(q) there.
    """

    delta: float
    c: float
    epsilon: np.ndarray
    q: np.ndarray
    max_a_minus_b: np.ndarray
    argmax_q: np.ndarray
    sigma: np.ndarray


def _check_grid(delta, c, n_eps, n_q, eps_max):
    dl = float(check_delta(delta))
    cc = as_float_array(c, "c")
    if cc.ndim != 0 or not (np.isfinite(cc) and cc > 0):
        raise ValueError(f"c must be a finite number > 0; got {cc!r}")
    cc = float(cc)
    ne = check_positive_int(n_eps, "n_eps")
    nq = check_positive_int(n_q, "n_q")
    em = float(check_epsilon(eps_max, "eps_max"))
    if not cc * dl < 1.0:
        raise ValueError(f"c * delta must be < 1 (the q range is [c delta, 1]); got {cc * dl:g}")
    if not em > cc * dl:
        raise ValueError(f"eps_max must exceed c * delta = {cc * dl:g}; got {em:g}")
    return dl, cc, ne, nq, em


def figure2_data(delta: float = 1e-5, c: float = 4.0, n_eps: int = 1000, n_q: int = 100,
                 eps_max: float = 4.0) -> Figure2Data:
    """The data of Figure 2 of Räisä et al. (ICML 2024): the largest a - b over q, per epsilon.

    For each epsilon on a log grid over [c delta, eps_max] and each q on a log grid over
    [c delta, 1], sigma(q) is solved exactly (the paper scanned a sigma grid instead and kept
    points with delta <= target); a - b is then evaluated there. The q loop runs from q = 1
    down, each solve warm-started from the previous sigma; the epsilon loop is parallel.
    1000 x 100 points take well under a second once compiled.

    Parameters
    ----------
    delta : float
        Target delta in (0, 1).
    c : float
        The constant of Conjecture 6.3 (epsilon, q >= c delta); 4 in the paper.
    n_eps, n_q : int
        Grid sizes.
    eps_max : float
        Largest epsilon (4 in the paper).

    Returns
    -------
    Figure2Data

    Examples
    --------
    >>> from sgmfast.analysis import figure2_data
    >>> f = figure2_data(1e-5, 4.0, n_eps=20, n_q=10)
    >>> bool((f.max_a_minus_b < 0).all())
    True
    """
    dl, cc, ne, nq, em = _check_grid(delta, c, n_eps, n_q, eps_max)
    lo = cc * dl
    eps = np.geomspace(lo, em, ne)
    q_desc = np.ascontiguousarray(np.geomspace(lo, 1.0, nq)[::-1])
    out_max = np.empty(ne)
    out_q = np.empty(ne)
    out_s = np.empty(ne)
    _ka.figure2(eps, q_desc, math.log(dl), SIGMA_XTOL, out_max, out_q, out_s)
    return Figure2Data(dl, cc, eps, q_desc[::-1].copy(), out_max, out_q, out_s)


@dataclass(frozen=True)
class AMinusB:
    """The largest a - b over a grid, and where: (epsilon, q, sigma(q))."""

    value: float
    epsilon: float
    q: float
    sigma: float


def max_a_minus_b(delta: float, c: float, n_eps: int = 1000, n_q: int = 100,
                  eps_max: float = 4.0) -> AMinusB:
    """Largest a - b over epsilon in [c delta, eps_max] and q in [c delta, 1] (log grids).

    Conjecture 6.3 of Räisä et al. (ICML 2024), proved by Kalinin (2024): for c above
    :func:`kalinin_constant` (~3.8319) the result is negative; below it, a positive value
    exists, attained near the corner epsilon = q = c delta (which is on the grid).

    Examples
    --------
    >>> from sgmfast.analysis import max_a_minus_b
    >>> m = max_a_minus_b(1e-6, 3.82, n_eps=50, n_q=20)
    >>> m.value > 0, round(m.q / 1e-6, 2), round(m.sigma, 4)
    (True, 3.82, 0.8479)
    >>> max_a_minus_b(1e-6, 4.0, n_eps=50, n_q=20).value < 0
    True
    """
    f = figure2_data(delta, c, n_eps, n_q, eps_max)
    i = int(np.argmax(f.max_a_minus_b))
    return AMinusB(float(f.max_a_minus_b[i]), float(f.epsilon[i]), float(f.argmax_q[i]),
                   float(f.sigma[i]))


# ---------------------------------------------------------------------------------------------
# 2b. Effective noise sigma_eff(q, T) = sigma(q, T) / q and Figure 1
# ---------------------------------------------------------------------------------------------


def sigma_eff(epsilon, delta, q, steps, *, accountant: str = "pld", accuracy: float = 1e-3):
    """Effective noise sigma(q, T) / q of Räisä et al. (ICML 2024), Section 5.

    sigma(q, T) is the smallest noise multiplier whose certified epsilon upper bound meets
    (epsilon, delta) after ``steps`` steps at sampling rate q (:func:`sgmfast.calibrate.
    calibrate_sigma`; tight PLD by default). At q = 1 it is the Gaussian mechanism's exact
    sigma(1, T) (Balle & Wang 2018), the asymptote sigma_eff approaches from above as q grows
    (their Cor. 5.4). Broadcasts over the inputs.

    Examples
    --------
    >>> from sgmfast.analysis import sigma_eff
    >>> from sgmfast.calibrate import gaussian_sigma
    >>> round(sigma_eff(1.0, 1e-5, 1.0, 100) / gaussian_sigma(1.0, 1e-5, 100), 6)
    1.0
    """
    from .calibrate import calibrate_sigma

    qq = check_q(q)
    out = calibrate_sigma(epsilon, delta, qq, steps, accountant=accountant, accuracy=accuracy) / qq
    return float(out) if np.ndim(out) == 0 else out


def sigma_eff_ratio(epsilon, delta, q, steps, *, accountant: str = "pld", accuracy: float = 1e-3):
    """sigma(q, T) / (q sigma(1, T)): how much more effective noise a sampling rate q costs than
    full batches (Cor. 5.4 of Räisä et al.: it tends to 1 as q grows, and for many steps
    sigma(q, T) ~ q sigma(1, T)). sigma(1, T) is the exact Gaussian-mechanism value."""
    from .calibrate import gaussian_sigma

    e, dl, t = np.broadcast_arrays(check_epsilon(epsilon), check_delta(delta), check_steps(steps))
    s1 = np.vectorize(gaussian_sigma, otypes=[float])(e, dl, t)
    out = sigma_eff(epsilon, delta, q, steps, accountant=accountant, accuracy=accuracy) / s1
    return float(out) if np.ndim(out) == 0 else out


#: The grid of Figure 1 of Räisä et al.: epsilon panels, step counts, q range, delta.
FIGURE1_EPSILONS = (0.125, 0.25, 0.5, 1.0, 2.0, 4.0)
FIGURE1_STEPS = (1, 10, 100, 1000)


@dataclass(frozen=True)
class Figure1Data:
    """sigma(q, T) on the grid of Figure 1 of Räisä et al. (ICML 2024).

    Attributes
    ----------
    delta : the target delta.
    epsilon, steps, q : the grids (q increasing).
    sigma : array (len(epsilon), len(steps), len(q)): the smallest certified-private sigma.
    sigma_gaussian : array (len(epsilon), len(steps)): the exact sigma(1, T).
    accountant, accuracy : how sigma was found for T > 1 (T = 1 uses the exact one-step
        sigma(q), which is tighter than any accountant).
    """

    delta: float
    epsilon: np.ndarray
    steps: np.ndarray
    q: np.ndarray
    sigma: np.ndarray
    sigma_gaussian: np.ndarray
    accountant: str
    accuracy: float

    @property
    def sigma_eff(self) -> np.ndarray:
        """sigma(q, T) / q, same shape as ``sigma``."""
        return self.sigma / self.q

    def to_csv(self, path) -> None:
        """One row per (epsilon, T, q): sigma, sigma_eff, sigma(1, T) and their ratio."""
        with open(path, "w", encoding="utf-8") as fh:
            fh.write("epsilon,delta,steps,q,sigma,sigma_eff,sigma_gaussian,ratio\n")
            for i, e in enumerate(self.epsilon):
                for j, t in enumerate(self.steps):
                    g = self.sigma_gaussian[i, j]
                    for k, q in enumerate(self.q):
                        s = self.sigma[i, j, k]
                        fh.write(f"{e:g},{self.delta:g},{int(t)},{q:.10g},{s:.10g},{s / q:.10g},"
                                 f"{g:.10g},{s / (q * g):.10g}\n")


def _figure1_curve(e, dl, t, q_desc, s1, accountant, accuracy):
    """sigma on a decreasing q grid for one (epsilon, T) curve of Figure 1 (q_desc[0] = 1)."""
    from .calibrate import calibrate_sigma

    if t == 1:
        return one_step_sigma(e, dl, q_desc)
    col = np.empty(q_desc.size)
    col[0] = s1
    if q_desc.size > 1:
        col[1:] = calibrate_sigma(e, dl, q_desc[1:], int(t), accountant=accountant,
                                  accuracy=accuracy, progress=False)
    return col


def figure1_data(delta: float = 1e-5, epsilons=FIGURE1_EPSILONS, steps=FIGURE1_STEPS,
                 n_q: int = 100, q_min: float = 1e-3, *, accountant: str = "pld",
                 accuracy: float = 1e-3, workers: int | None = None,
                 progress: bool | None = None) -> Figure1Data:
    """The data of Figure 1 of Räisä et al. (ICML 2024): sigma(q, T) for q log-spaced in
    [q_min, 1], one curve per (epsilon, T).

    T = 1 uses the exact one-step sigma(q) (:func:`one_step_sigma`, both directions); q = 1
    the exact Gaussian mechanism; the rest :func:`sgmfast.calibrate.calibrate_sigma` with the
    given accountant, each (epsilon, T) curve swept from q = 1 down so that every solve is
    warm-started from its neighbour (sigma ratio to RDP, and loss grid). Curves are spread
    over ``workers`` threads (default: one per core, up to 4, when there are several PLD
    curves). The paper used dp_accounting's PLD (``get_smallest_subsampled_gaussian_noise``),
    1 to 64 s per point.

    Examples
    --------
    >>> from sgmfast.analysis import figure1_data
    >>> f = figure1_data(1e-5, epsilons=(1.0,), steps=(1, 10), n_q=4, q_min=0.1)
    >>> f.sigma.shape
    (1, 2, 4)
    >>> bool((f.sigma_eff[0, :, :-1] >= f.sigma_eff[0, :, 1:]).all())
    True
    """
    from .calibrate import _check_accountant, gaussian_sigma

    _check_accountant(accountant)
    dl = float(check_delta(delta))
    eps = np.atleast_1d(check_epsilon(epsilons, "epsilons")).astype(float)
    ts = np.atleast_1d(check_steps(steps)).astype(float)
    if eps.ndim != 1 or ts.ndim != 1 or np.any(eps <= 0) or np.any(ts < 1):
        raise ValueError("epsilons must be > 0 and steps >= 1, each a number or a 1-d list")
    nq = check_positive_int(n_q, "n_q")
    qmin = float(check_q(q_min, "q_min"))
    if qmin <= 0.0:
        raise ValueError(f"q_min must be in (0, 1] (the q grid is logarithmic); got {qmin!r}")
    qs = np.geomspace(qmin, 1.0, nq) if nq > 1 else np.array([1.0])
    q_desc = np.ascontiguousarray(qs[::-1])
    s1 = np.array([[gaussian_sigma(e, dl, int(t)) for t in ts] for e in eps])
    sig = np.empty((eps.size, ts.size, qs.size))
    jobs = [(i, j) for i in range(eps.size) for j in range(ts.size)]
    heavy = sum(1 for _, j in jobs if ts[j] > 1 and nq > 1)
    if workers is None:
        workers = min(4, os.cpu_count() or 1) if heavy >= 4 and accountant == "pld" else 1
    workers = check_positive_int(workers, "workers")
    with Progress(len(jobs) * qs.size, "figure 1", progress, min_total=50) as bar:
        if workers == 1:
            for i, j in jobs:
                sig[i, j] = _figure1_curve(eps[i], dl, ts[j], q_desc, s1[i, j], accountant, accuracy)[::-1]
                bar.update(qs.size)
        else:
            import concurrent.futures as cf

            # threads: the kernels and the FFTs release the GIL
            with cf.ThreadPoolExecutor(workers) as pool:
                # the slowest curves (many steps at small epsilon) first
                order = sorted(jobs, key=lambda ij: (-ts[ij[1]], eps[ij[0]]))
                futs = {pool.submit(_figure1_curve, eps[i], dl, ts[j], q_desc, s1[i, j], accountant,
                                    accuracy): (i, j) for i, j in order}
                for fut in cf.as_completed(futs):
                    i, j = futs[fut]
                    sig[i, j] = fut.result()[::-1]
                    bar.update(qs.size)
    return Figure1Data(dl, eps, ts, qs, sig, s1, accountant, accuracy)


# ---------------------------------------------------------------------------------------------
# 3. Variance decomposition and a batch-size planner
# ---------------------------------------------------------------------------------------------


def variance_decomposition(q, sigma, grad_sq_sum, clipping_norm=1.0):
    """Per-coordinate variance of the DP-SGD gradient, Eq. (25) of Räisä et al. (ICML 2024).

    The gradient estimate is G = (G_q + C sigma eta)/q, with G_q the sum of the clipped
    per-example gradients of a Poisson batch (rate q). Per coordinate j:

    - subsampling variance (Appendix A.1, Eq. (55)): (1 - q)/q * sum_i g_ij^2;
    - effective DP-noise variance: (sigma C / q)^2, i.e. sigma_eff = sigma/q in units of C.

    Parameters
    ----------
    q : float or array_like
        Sampling rate in (0, 1].
    sigma : float or array_like
        Noise multiplier (> 0).
    grad_sq_sum : float or array_like
        sum over the dataset of the squared (clipped) per-example gradient coordinate (>= 0).
    clipping_norm : float
        C (> 0).

    Returns
    -------
    tuple of (subsampling, noise, total)

    Examples
    --------
    >>> from sgmfast.analysis import variance_decomposition
    >>> variance_decomposition(0.5, 2.0, 10.0)
    (10.0, 16.0, 26.0)
    """
    qq = check_q(q)
    s = check_sigma(sigma)
    g = as_float_array(grad_sq_sum, "grad_sq_sum")
    if not (np.isfinite(g) & (g >= 0)).all():
        raise ValueError(f"grad_sq_sum must be finite and >= 0; got {g[~(np.isfinite(g) & (g >= 0))].flat[0]!r}")
    cn = check_positive(clipping_norm, "clipping_norm")
    sub = (1.0 - qq) / qq * g
    noise = (s * cn / qq) ** 2
    tot = sub + noise
    if np.ndim(tot) == 0:
        return float(sub), float(noise), float(tot)
    return sub, noise, tot


@dataclass(frozen=True)
class PlanRow:
    """One candidate batch size: B, q = B/N, steps T, sigma(q, T), sigma/q, variances."""

    batch_size: int
    q: float
    steps: int
    sigma: float
    sigma_eff: float
    subsampling_var: float
    noise_var: float
    total_var: float


@dataclass(frozen=True)
class BatchSizePlan:
    """Result of :func:`plan_batch_size`: one row per candidate and the best (least total
    per-step gradient variance)."""

    rows: tuple
    best: PlanRow
    epsilon: float
    delta: float
    accountant: str

    def to_text(self) -> str:
        """A fixed-width table, the best row marked with '*'."""
        head = (f"{'batch':>9} {'q':>10} {'steps':>9} {'sigma':>9} {'sigma/q':>11} "
                f"{'subsampling':>12} {'noise':>12} {'total':>12}")
        lines = [f"epsilon={self.epsilon:g}, delta={self.delta:g}, accountant={self.accountant}"
                 " (per-coordinate variance, units of C^2)", head]
        for r in self.rows:
            mark = "*" if r is self.best else " "
            lines.append(f"{r.batch_size:>9d} {r.q:>10.4g} {r.steps:>9d} {r.sigma:>9.4g} "
                         f"{r.sigma_eff:>11.4g} {r.subsampling_var:>12.4g} {r.noise_var:>12.4g} "
                         f"{r.total_var:>12.4g}{mark}")
        return "\n".join(lines)


def _default_candidates(n: int):
    cands = [2 ** k for k in range(4, 64) if 2 ** k < n]
    return cands + [n]


def plan_batch_size(dataset_size, epsilon, delta, *, clipping_norm=1.0, grad_sq_sum=None,
                    grad_norm=None, dim=1, epochs=None, steps=None, candidates=None,
                    accountant: str = "pld") -> BatchSizePlan:
    """Tabulate the DP-SGD gradient variance per candidate batch size and name the best.

    Modelling assumptions (as in Räisä et al., ICML 2024, Sec. 4): Poisson sampling with
    q = B/N for batch size B on N examples; either a fixed number of ``epochs`` (then
    T = ceil(epochs/q) = ceil(epochs N / B) steps) or a fixed number of ``steps``; sigma is
    the smallest noise multiplier meeting (epsilon, delta) over T steps
    (:func:`sgmfast.calibrate.calibrate_sigma`), and each candidate is scored by the
    per-coordinate variance of one step's gradient estimate, Eq. (25):
    (1 - q)/q * sum_i g_ij^2 + (sigma C/q)^2. The score does not model the number of steps
    or the optimiser; it compares the noise of one update.

    Parameters
    ----------
    dataset_size : int
        N.
    epsilon, delta : float
        Target privacy of the whole run (epsilon > 0 in nats, delta in (0, 1)).
    clipping_norm : float
        C.
    grad_sq_sum : float, optional
        sum over the dataset of a squared clipped per-example gradient coordinate. Give this
        or ``grad_norm``.
    grad_norm : float, optional
        A typical per-example gradient norm; clipped to C and spread evenly over ``dim``
        coordinates: grad_sq_sum = N min(grad_norm, C)^2 / dim.
    dim : int
        Number of model parameters (only with ``grad_norm``).
    epochs, steps : int, optional
        Exactly one of them.
    candidates : sequence of int, optional
        Batch sizes in [1, N]; default powers of two from 16 below N, and N.
    accountant : {"pld", "rdp"}

    Returns
    -------
    BatchSizePlan

    Examples
    --------
    >>> from sgmfast.analysis import plan_batch_size
    >>> p = plan_batch_size(60000, 2.0, 1e-5, grad_norm=1.0, dim=1000, epochs=10,
    ...                     candidates=[64, 1024, 16384], accountant="rdp")
    >>> p.best.batch_size
    16384
    """
    from . import calibrate as _cal
    from . import rdp as _rdp

    n = check_positive_int(dataset_size, "dataset_size")
    eps = float(check_epsilon(epsilon))
    if eps <= 0:
        raise ValueError(f"epsilon must be > 0; got {eps!r}")
    dl = float(check_delta(delta))
    cn = float(check_positive(clipping_norm, "clipping_norm"))
    if accountant not in ("pld", "rdp"):
        raise ValueError(f"accountant must be one of ('pld', 'rdp'); got {accountant!r}")
    if (grad_sq_sum is None) == (grad_norm is None):
        raise ValueError("give exactly one of grad_sq_sum and grad_norm")
    if grad_sq_sum is not None:
        g2 = float(as_float_array(grad_sq_sum, "grad_sq_sum"))
        if not (math.isfinite(g2) and g2 >= 0):
            raise ValueError(f"grad_sq_sum must be finite and >= 0; got {g2!r}")
    else:
        gn = float(as_float_array(grad_norm, "grad_norm"))
        if not (math.isfinite(gn) and gn >= 0):
            raise ValueError(f"grad_norm must be finite and >= 0; got {gn!r}")
        d = check_positive_int(dim, "dim")
        g2 = n * min(gn, cn) ** 2 / d
    if (epochs is None) == (steps is None):
        raise ValueError("give exactly one of epochs and steps")
    ep = check_positive_int(epochs, "epochs") if epochs is not None else None
    st = check_positive_int(steps, "steps") if steps is not None else None
    cands = _default_candidates(n) if candidates is None else list(candidates)
    if not cands:
        raise ValueError("candidates must not be empty")
    bs = []
    for b in cands:
        bi = check_positive_int(b, "candidates")
        if bi > n:
            raise ValueError(f"candidates (batch sizes) must be <= dataset_size={n}; got {bi}")
        bs.append(bi)
    bs = sorted(set(bs))
    rows = []
    for b in bs:
        q = b / n
        t = st if st is not None else int(math.ceil(ep * n / b))
        try:
            sigma = float(_cal.calibrate_sigma(eps, dl, q, t, accountant=accountant))
        except ValueError:
            # Met even at the smallest supported sigma: that sigma is private (RDP bounds PLD).
            if float(_rdp.epsilon(_cal.SIGMA_MIN, q, t, dl)) <= eps:
                sigma = _cal.SIGMA_MIN
            else:
                raise
        sub, noise, tot = variance_decomposition(q, sigma, g2, cn)
        rows.append(PlanRow(b, q, t, sigma, sigma / q, sub, noise, tot))
    best = min(rows, key=lambda r: r.total_var)
    return BatchSizePlan(tuple(rows), best, eps, dl, accountant)


# ---------------------------------------------------------------------------------------------
# 4. Amplification by subsampling for pure DP
# ---------------------------------------------------------------------------------------------


def _check_p(p):
    return check_q(p, "p")


def amplified_epsilon(epsilon, p):
    """epsilon' = log(1 + p (e^epsilon - 1)): an epsilon-DP mechanism run on a Poisson
    p-subsample is epsilon'-DP (inverse of Eq. (3) of Steinke's "Limits of privacy
    amplification by subsampling").

    Examples
    --------
    >>> from sgmfast.analysis import amplified_epsilon, base_epsilon
    >>> round(amplified_epsilon(1.0, 0.01), 6)
    0.017037
    >>> round(float(base_epsilon(amplified_epsilon(1.0, 0.01), 0.01)), 12)
    1.0
    """
    e = check_epsilon(epsilon)
    pp = _check_p(p)
    out = np.log1p(pp * np.expm1(e))
    return float(out) if np.ndim(out) == 0 else out


def base_epsilon(epsilon, p):
    """epsilon_p = log(1 + (e^epsilon - 1)/p), Eq. (3) of Steinke: the epsilon a base mechanism
    may have so that its p-subsampled version is epsilon-DP (inverse of
    :func:`amplified_epsilon`).

    Examples
    --------
    >>> from sgmfast.analysis import base_epsilon
    >>> round(base_epsilon(0.01, 0.01), 4)   # ~ epsilon/p for small epsilon
    0.6957
    """
    e = check_epsilon(epsilon)
    pp = _check_p(p)
    out = np.log1p(np.expm1(e) / pp)
    return float(out) if np.ndim(out) == 0 else out


def noise_scale_ratio(epsilon, p):
    """p epsilon_p / epsilon, Eq. (7) of Steinke: the standard mechanism's noise scale over
    the subsampled one's (1/(epsilon n) vs 1/(epsilon_p p n)); in [p/(p + epsilon), 1], and
    >= log(1 + c)/c when epsilon <= c p (Eq. (8)). Its limit 1 is returned at epsilon = 0.

    Examples
    --------
    >>> from sgmfast.analysis import noise_scale_ratio, noise_inflation_bound
    >>> r = noise_scale_ratio(0.02, 0.01)          # epsilon = 2 p
    >>> 1 / noise_inflation_bound(2.0) <= r <= 1
    True
    """
    e = check_epsilon(epsilon)
    pp = _check_p(p)
    e, pp = np.broadcast_arrays(e, pp)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(e > 0, pp * np.log1p(np.expm1(e) / pp) / np.where(e > 0, e, 1.0), 1.0)
    return float(r) if np.ndim(r) == 0 else r


def noise_inflation_bound(c):
    """c / log(1 + c), Eq. (8) of Steinke: if epsilon <= c p, the p-subsampled mechanism adds
    at most this many times the noise of the standard one (the infimum of
    :func:`noise_scale_ratio` over epsilon in (0, c p] is its reciprocal).

    Examples
    --------
    >>> from sgmfast.analysis import noise_inflation_bound
    >>> round(noise_inflation_bound(1.0), 4)
    1.4427
    """
    cc = as_float_array(c, "c")
    if not (np.isfinite(cc) & (cc > 0)).all():
        raise ValueError(f"c must be finite and > 0; got {cc[~(np.isfinite(cc) & (cc > 0))].flat[0]!r}")
    out = cc / np.log1p(cc)
    return float(out) if np.ndim(out) == 0 else out
