"""RDP accountant for the Poisson-subsampled Gaussian mechanism (SGM).

Computes the Rényi DP of T steps of the SGM (add/remove neighbouring relation, sensitivity 1,
noise standard deviation ``sigma`` times the clipping norm, Poisson sampling rate ``q``) and
converts it to (epsilon, delta)-DP, optimising over real orders alpha > 1.

Accuracy: log A_alpha is computed to ~1e-14 relative (tested against 50-digit mpmath values,
``tests/reference/log_a.csv``) for integer and fractional orders alike; the total RDP is then
rounded up by a relative 1e-12 before conversion (a schedule of m distinct mechanisms by
4 (m - 1) units of rounding more, for its sum: ``_margin``), so floating-point rounding can
never make epsilon smaller than the RDP bound it comes from. For a schedule the integer orders'
binomial sums stop once a proven bound on their remaining terms falls below e^-40 of them, and
add it (``_kernels/rdp/truncated.py``). The result is an upper bound on the true epsilon (RDP
is not tight: the PLD accountant, :mod:`sgmfast.pld`, is).

``sampler="fixed_size"`` (batches of exactly b of n drawn without replacement, replace-one,
``sigma`` the noise std over the clipping norm) uses one step's bound from
``_kernels/rdp/fixed_size.py`` (its derivation there) over the orders ``FIXED_SIZE_ORDERS``.

References
----------
.. [MTZ19] I. Mironov, K. Talwar, L. Zhang. "Rényi Differential Privacy of the Sampled
   Gaussian Mechanism", arXiv:1908.10530, 2019 (Theorems 4, 5, 11; Section 3.3).
.. [BBGHS20] B. Balle, G. Barthe, M. Gaboardi, J. Hsu, T. Sato. "Hypothesis Testing
   Interpretations and Rényi Differential Privacy", AISTATS 2020 (Theorem 21).
.. [CKS20] C. Canonne, G. Kamath, T. Steinke. "The Discrete Gaussian for Differential
   Privacy", NeurIPS 2020 (Proposition 12).
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

import numpy as np

from . import _samplers
from ._accountant import Accountant
from ._kernels import rdp as _k
from ._types import Step
from ._rdp_prefix import CURVE_EXACT_SEGMENTS, CURVE_ORDERS, prefix_curve  # noqa: F401 (CURVE_ORDERS: read here)
from ._rdp_prefix import pair_ids as _pair_ids, upper_monotone as _upper_monotone
from ._rdp_margin import REL_MARGIN, _U, _margin, _sum_error  # noqa: F401  (REL_MARGIN, _U: public, read here)
from ._validation import (
    check_checkpoints,
    check_step_scalars,
    check_delta,
    check_epsilon,
    check_orders,
    check_q,
    check_sigma,
    check_steps,
)

__all__ = [
    "log_a",
    "log_a_closed_form_bound",
    "rdp",
    "epsilon_curve",
    "epsilon",
    "delta",
    "RDPAccountant",
    "REL_MARGIN",
    "FIXED_SIZE_ORDERS",
]

#: Relative tolerance on the optimal order in the continuous optimisation; the epsilon at the
#: returned order is within ~1e-9 relative of the optimum (and a valid bound regardless).
ORDER_XTOL = 1e-6



#: Orders searched for fixed-size batches (no continuous optimisation there): 1.05 .. 10 in
#: steps of 0.05, the integers to 256, and a few beyond.
FIXED_SIZE_ORDERS = np.unique(np.concatenate((1.0 + np.arange(1, 181) / 20.0, np.arange(11.0, 257.0),
                                              [320.0, 400.0, 512.0, 768.0, 1024.0])))
RDP_SAMPLERS = _samplers.samplers_of("rdp")


def _check_sampler(sampler: str) -> str:
    if sampler not in RDP_SAMPLERS:
        raise ValueError(f"sampler must be one of {RDP_SAMPLERS} for the RDP accountant; got {sampler!r} "
                         "(balls-in-bins and permutation-shuffle batches: pld.epsilon(..., sampler=...))")
    return sampler


def _fixed_size_curve(sigma: float, q: float, steps: float, orders: np.ndarray) -> np.ndarray:
    from ._kernels.rdp import fixed_size as _kfs

    out = np.empty(orders.shape[0])
    _kfs.rdp_curve(q, sigma, steps, orders, out)
    return out * (1.0 + REL_MARGIN)


def fixed_size_runs(runs, value: float, mode: int) -> float:
    """RDP's eps (mode 0, ``value`` = delta) or delta (mode 1, ``value`` = eps) of consecutive
    fixed-size runs [(sigma, q, steps)] with different noise or batch fractions (replace-one):
    their curves over ``FIXED_SIZE_ORDERS`` add (RDP composes adaptively), the sum rounded up
    by 4 ulps an addition (one run: exactly ``epsilon(..., sampler="fixed_size")``).  Runs without noise (sigma = 0) reveal a drawn example: with p the chance
    that one draws it, delta = p + (1 - p) delta_noisy, so eps = +inf for delta <= p (as
    :meth:`RDPAccountant.epsilon`)."""
    if mode not in (0, 1):
        raise ValueError(f"mode must be 0 (epsilon at delta) or 1 (delta at epsilon); got {mode!r}")
    value = float(check_delta(value, "delta")) if mode == 0 else float(check_epsilon(value, "epsilon"))
    noisy, p = _split([Step(float(check_sigma(s)), float(check_q(q)), int(check_steps(t))) for s, q, t in runs])
    if mode == 0:
        if value <= p:
            return math.inf
        target = value if p == 0.0 else (value - p) / (1.0 - p) * (1 - 4 * _U)
    else:
        target = value
    v = 0.0  # the noisy runs' eps or delta (none: 0)
    if noisy and (mode == 0 or target < math.inf):
        o = FIXED_SIZE_ORDERS
        total = np.zeros(o.shape)
        for st in noisy:
            total += rdp(st.sigma, st.q, st.count, o, sampler="fixed_size")
        total *= 1.0 + 4 * (len(noisy) - 1) * _U  # (the sum's rounding; one run: rdp.epsilon's value)
        v = float(_k.best_of_orders(total, o, math.log(target) if mode == 0 else target, mode)[0])
        if mode == 1:
            v = _delta_of(v)
    if mode == 0 or p == 0.0:
        return v
    return min(1.0, (p + (1.0 - p) * v) * (1 + 4 * _U))


def _noiseless_mass(sigma, q, steps):
    """p = 1 - (1 - q)^T of steps without noise (sigma = 0), rounded up: with probability p some
    step used the record and revealed it (+inf privacy loss); elementwise."""
    with np.errstate(divide="ignore"):
        p = -np.expm1(steps * np.log1p(-np.minimum(q, 1.0)))
    return np.where(q >= 1.0, 1.0, np.minimum(1.0, p * (1 + 4 * _U)))


def _split(history):
    """(the steps that add noise and do something, the +inf mass p of the noiseless ones): q = 0,
    sigma = +inf or count 0 do nothing; sigma = 0 reveals a sampled record."""
    noisy = [st for st in history if st.count > 0 and st.q > 0.0 and 0.0 < st.sigma < math.inf]
    log_keep = sum(st.count * math.log1p(-st.q) if st.q < 1.0 else -math.inf
                   for st in history if st.sigma == 0.0 and st.q > 0.0 and st.count > 0)
    p = 0.0 if log_keep == 0.0 else min(1.0, -math.expm1(log_keep) * (1 + 4 * _U))
    return noisy, p


def _delta_of(log_delta: float) -> float:
    """delta from its log bound, clipped at 1; a positive bound that underflows is reported as the
    smallest positive float (an upper bound must not drop to 0 where delta is not 0)."""
    if log_delta == -math.inf:
        return 0.0
    return min(1.0, math.exp(min(log_delta, 0.0)) + 1e-322)  # (subnormals carry a few bits: padded)


def _scalar_or_array(arr: np.ndarray, scalar: bool):
    return float(arr.reshape(-1)[0]) if scalar else arr


def log_a(sigma, q, order):
    """log A_alpha for one step of the SGM, broadcast over arrays.

    A_alpha = E_{z ~ N(0, sigma^2)}[(1 - q + q exp((2z - 1)/(2 sigma^2)))^alpha]; one step is
    (alpha, log(A_alpha)/(alpha - 1))-RDP ([MTZ19], Theorems 4 and 5: the reversed divergence
    is never larger).

    Integer orders use the exact binomial sum of [MTZ19] Sec. 3.3 written for A - 1 with
    ``expm1``; fractional orders integrate the non-negative function
    e^(alpha l) - 1 - alpha (e^l - 1) of the privacy loss l, which equals A - 1 in expectation
    and so keeps full relative precision when q is tiny (the two-sided series of [MTZ19] sums
    A itself and cannot). q = 1 gives alpha (alpha - 1) / (2 sigma^2) exactly.

    Parameters
    ----------
    sigma : float or array_like
        Noise multiplier (> 0).
    q : float or array_like
        Poisson sampling rate, in (0, 1].
    order : float or array_like
        Rényi order alpha > 1.

    Returns
    -------
    float or ndarray
        log A_alpha (nats), same shape as the broadcast inputs.

    Examples
    --------
    >>> from sgmfast import rdp
    >>> round(rdp.log_a(2.0, 1.0, 3.0), 12)   # q = 1: alpha (alpha - 1) / (2 sigma^2)
    0.75
    >>> float(f"{rdp.log_a(2.0, 0.1, 1.5):.6e}")
    0.001049467
    """
    s = check_sigma(sigma)
    qq = check_q(q)
    a = check_orders(np.ravel(order)).reshape(np.shape(order))
    s, qq, a = np.broadcast_arrays(s, qq, a)
    scalar = s.ndim == 0
    out = np.empty(s.shape)
    flat = out.reshape(-1)
    for i, (si, qi, ai) in enumerate(zip(s.ravel(), qq.ravel(), a.ravel())):
        flat[i] = _k.log_a(float(qi), float(si), float(ai))
    return _scalar_or_array(out, scalar)


def log_a_closed_form_bound(sigma: float, q: float, order: float) -> float:
    """The closed-form bound of [MTZ19] Theorem 11 on log A_alpha, or +inf outside its conditions.

    If q <= 1/5, sigma >= 4, 1 < alpha <= sigma^2 L / 2 - 2 log sigma and
    alpha <= (sigma^2 L^2 / 2 - log 5 - 2 log sigma) / (L + log(q alpha) + 1/(2 sigma^2)),
    where L = log(1 + 1/(q (alpha - 1))), then one step is (alpha, 2 q^2 alpha / sigma^2)-RDP,
    i.e. log A_alpha <= 2 q^2 alpha (alpha - 1) / sigma^2. A cheap sanity check; the
    accountant always uses the exact value.

    Examples
    --------
    >>> from sgmfast import rdp
    >>> rdp.log_a_closed_form_bound(5.0, 0.01, 8.0) >= rdp.log_a(5.0, 0.01, 8.0)
    True
    """
    s = float(check_sigma(sigma))
    qq = float(check_q(q))
    a = float(check_orders(order)[0])
    return float(_k.log_a_closed_form_bound(qq, s, a))


def _schedule_arrays(steps_list: Sequence[Step]):
    """(qs, sigmas, counts) of the steps, repeated (sigma, q) pairs merged (their counts added,
    exactly: integers below 2^53), in the order of first appearance: the total RDP is the same
    sum with fewer terms."""
    qs = np.array([st.q for st in steps_list], dtype=np.float64)
    sigmas = np.array([st.sigma for st in steps_list], dtype=np.float64)
    counts = np.array([st.count for st in steps_list], dtype=np.float64)
    ids, first, m = _pair_ids(qs, sigmas)
    if m < qs.size:
        counts = np.bincount(ids, weights=counts, minlength=m)
        qs, sigmas = qs[first], sigmas[first]
    return qs, sigmas, counts


def _rdp_curve(qs, sigmas, counts, orders) -> np.ndarray:
    out = np.empty(orders.shape[0])
    _k.rdp_curve(qs, sigmas, counts, orders, out)
    return out * _margin(qs.shape[0], qs, sigmas, float(np.max(orders)) if orders.size else 2.0)


def rdp(sigma: float, q: float, steps, orders, *, sampler: str = "poisson") -> np.ndarray:
    """Total RDP epsilon_alpha of ``steps`` steps of the SGM at each of ``orders``
    (``sampler="fixed_size"``: of fixed-size batches, replace-one; module notes).

    Parameters
    ----------
    sigma, q : float
        Noise multiplier (> 0) and sampling rate in (0, 1].
    steps : int
        Number of steps (>= 0).
    orders : array_like
        Rényi orders alpha > 1.

    Returns
    -------
    ndarray
        steps * log(A_alpha) / (alpha - 1) at each order, rounded up by ``REL_MARGIN``.

    Examples
    --------
    >>> from sgmfast import rdp
    >>> rdp.rdp(1.0, 1.0, 10, [2.0, 4.0]).round(9)   # Gaussian: steps * alpha / (2 sigma^2)
    array([10., 20.])
    """
    s = float(check_sigma(sigma))
    qq = float(check_q(q))
    t = float(check_steps(steps))
    o = check_orders(orders)
    _check_sampler(sampler)
    if t == 0 or qq == 0.0 or s == math.inf:
        return np.zeros(o.shape)
    if s == 0.0:
        return np.full(o.shape, math.inf)  # a sampled record is revealed: infinite divergence
    if sampler == "fixed_size":
        return _fixed_size_curve(s, qq, t, o)
    return _rdp_curve(np.array([qq]), np.array([s]), np.array([t]), o)


def _optimise(qs, sigmas, counts, target, mode, orders):
    """Best (value, order) for one schedule: continuous optimisation or the given orders."""
    if orders is not None:
        curve = _rdp_curve(qs, sigmas, counts, orders)
        return _k.best_of_orders(curve, orders, target, mode)
    # The margin is applied by inflating the step counts, which scales the total RDP.
    return _k.optimise_order(qs, sigmas, counts * _margin(qs.shape[0], qs, sigmas), target, mode, True, ORDER_XTOL)


def _schedule_value(qs, sigmas, counts, target: float, mode: int) -> float:
    """RDP's eps at log δ = target (mode 0) or its log δ at eps = target (mode 1) for a schedule
    of noisy steps given as arrays (no validation: for the PLD engine's caps)."""
    return float(_k.optimise_order(qs, sigmas, counts * _margin(qs.shape[0], qs, sigmas), target, mode, True,
                                   ORDER_XTOL)[0])


_SCALARS = (int, float)


def _fast_scalar(sigma, q, steps, value, mode):
    """(value, order) for plain-number arguments that pass every check, else None.

    Skips array validation and broadcasting (most of a single call's cost); anything
    unusual returns None and goes through the full validators, which raise the errors.
    """
    for x in (sigma, q, steps, value):
        if type(x) not in _SCALARS:
            return None
    if not (0.0 < sigma < math.inf and 0.0 < q <= 1.0 and 0 <= steps < math.inf and steps == int(steps)):
        return None
    if mode == 0:
        if not 0.0 < value < 1.0:
            return None
        target = math.log(value)
    else:
        if not 0.0 <= value < math.inf:
            return None
        target = float(value)
    if steps == 0:
        return 0.0, math.nan
    v, a = _k.optimise_order(np.array([float(q)]), np.array([float(sigma)]),
                             np.array([float(steps) * _margin(1, (float(q),), (float(sigma),))]), target, mode,
                             True, ORDER_XTOL)
    return (float(v), float(a)) if mode == 0 else (_delta_of(v), float(a))


def _query(sigma, q, steps, value, mode, orders, return_order, sampler="poisson"):
    if _check_sampler(sampler) == "fixed_size":
        if orders is None:
            orders = FIXED_SIZE_ORDERS
    elif orders is None:
        fast = _fast_scalar(sigma, q, steps, value, mode)
        if fast is not None:
            return fast if return_order else fast[0]
    s = check_sigma(sigma)
    qq = check_q(q)
    t = check_steps(steps)
    if mode == 0:
        v = check_delta(value, "delta")
        targets = np.log(v)
    else:
        v = check_epsilon(value, "epsilon")
        targets = v
    o = None if orders is None else check_orders(orders)
    s, qq, t, targets, v = np.broadcast_arrays(s, qq, t, targets, v)
    scalar = s.ndim == 0
    shape = s.shape
    s, qq, t, targets, v = (np.ascontiguousarray(x.reshape(-1), dtype=np.float64) for x in (s, qq, t, targets, v))
    n = s.shape[0]
    val = np.zeros(n)
    alpha = np.full(n, np.nan)
    zero = (t == 0.0) | (qq == 0.0) | (s == math.inf)  # nothing is revealed: eps = 0, delta = 0
    noiseless = (s == 0.0) & ~zero  # a sampled record is revealed
    reg = ~(zero | noiseless) & ~((mode == 1) & np.isinf(targets))
    if reg.any():
        got, a = np.empty(int(reg.sum())), np.empty(int(reg.sum()))
        args = [np.ascontiguousarray(x[reg]) for x in (qq, s, t, targets)]
        if o is None:
            kernel = _k.optimise_points if got.size >= _k.PARALLEL_MIN_POINTS else _k.optimise_points_serial
            kernel(args[0], args[1], args[2] * (1.0 + REL_MARGIN + _sum_error(args[0], args[1], _k.ALPHA_MAX, True)),
                   args[3], mode, True, ORDER_XTOL, got, a)
        elif sampler == "fixed_size":
            for i in range(got.size):
                curve = _fixed_size_curve(args[1][i], args[0][i], args[2][i], o)
                got[i], a[i] = _k.best_of_orders(curve, o, args[3][i], mode)
        else:
            for i in range(got.size):
                got[i], a[i] = _optimise(*(x[i:i + 1] for x in args[:3]), args[3][i], mode, o)
        val[reg] = got if mode == 0 else [_delta_of(x) for x in got]
        alpha[reg] = a
    if noiseless.any():
        # delta(eps) = 1 - (1 - q)^T for every finite eps: eps = +inf below it, 0 at or above
        p = _noiseless_mass(s[noiseless], qq[noiseless], t[noiseless])
        if mode == 0:
            val[noiseless] = np.where(v[noiseless] >= p, 0.0, math.inf)  # (p rounded up: certified)
        else:
            val[noiseless] = p
    val = val.reshape(shape)
    alpha = alpha.reshape(shape)
    if scalar:
        val, alpha = float(val), float(alpha)
    return (val, alpha) if return_order else val


def epsilon(sigma, q, steps, delta, *, orders=None, return_order: bool = False, sampler: str = "poisson"):
    """Smallest epsilon (nats) that the RDP of ``steps`` SGM steps certifies at ``delta``.

    Minimises the conversion of [BBGHS20] Theorem 21 / [CKS20] Proposition 12,
    epsilon = r(alpha) + log(1 - 1/alpha) - (log delta + log alpha)/(alpha - 1),
    over real orders alpha > 1 (bracketed on an integer grid, refined with exact fractional
    orders), or over the given ``orders``. Broadcasts over arrays of all four parameters.

    Parameters
    ----------
    sigma : float or array_like
        Noise multiplier: noise standard deviation divided by the clipping norm (> 0).
    q : float or array_like
        Poisson sampling rate, in (0, 1] (batch size / dataset size).
    steps : int or array_like
        Number of steps T >= 0; T = 0 gives epsilon = 0.
    delta : float or array_like
        Target delta in (0, 1).
    orders : array_like, optional
        Restrict the optimisation to these orders (> 1) instead of all real alpha > 1.
    return_order : bool
        Also return the optimal order (NaN where steps = 0).
    sampler : {"poisson", "fixed_size"}
        ``"fixed_size"``: batches of exactly q n examples drawn without replacement every step,
        replace-one relation (module notes), over ``FIXED_SIZE_ORDERS`` unless ``orders`` is given.

    Returns
    -------
    float or ndarray, or a tuple (epsilon, order)

    Examples
    --------
    >>> from sgmfast import rdp
    >>> round(rdp.epsilon(1.0, 0.01, 1000, 1e-5), 4)
    2.1013
    >>> eps, order = rdp.epsilon(1.1, 256 / 60000, 14062, 1e-5, return_order=True)
    >>> round(eps, 4), round(order, 2)
    (2.5965, 8.12)
    """
    return _query(sigma, q, steps, delta, 0, orders, return_order, sampler)


def delta(sigma, q, steps, epsilon, *, orders=None, return_order: bool = False, sampler: str = "poisson"):
    """Smallest delta that the RDP of ``steps`` SGM steps certifies at ``epsilon`` (nats).

    The inverse of :func:`epsilon`: delta = min over alpha of
    exp((alpha - 1)(r(alpha) - epsilon)) (1 - 1/alpha)^(alpha - 1) / alpha ([CKS20] Prop. 12),
    clipped at 1. Broadcasts like :func:`epsilon`; ``sampler`` as there.

    Examples
    --------
    >>> from sgmfast import rdp
    >>> d = rdp.delta(1.0, 0.01, 1000, 2.101322)
    >>> abs(d - 1e-5) / 1e-5 < 1e-4
    True
    """
    return _query(sigma, q, steps, epsilon, 1, orders, return_order, sampler)


def epsilon_curve(sigma, q, steps, delta, *, orders=None) -> np.ndarray:
    """:func:`epsilon` after each of the checkpoints ``steps`` (a strictly increasing 1-D array of
    step counts) of one run: an array, non-decreasing in the steps.

    Examples
    --------
    >>> from sgmfast import rdp
    >>> rdp.epsilon_curve(1.0, 0.01, [100, 1000], 1e-5).round(4)
    array([1.214 , 2.1013])
    """
    t = check_checkpoints(steps)
    for name, v in (("sigma", sigma), ("q", q), ("delta", delta)):
        if np.ndim(v):
            raise ValueError(f"{name} must be a single number for a curve; got shape {np.shape(v)}")
    return _upper_monotone(np.atleast_1d(epsilon(sigma, q, t.astype(np.float64), delta, orders=orders)))


class RDPAccountant(Accountant):
    """Records SGM steps and reports (epsilon, delta) by RDP; an upper bound.

    Steps with different (sigma, q) — a warm-up at another batch size, a noise schedule —
    compose by adding their RDP curves at every order, exactly.

    Parameters
    ----------
    orders : array_like, optional
        Fixed orders to optimise over; by default all real alpha > 1.

    Examples
    --------
    >>> from sgmfast.rdp import RDPAccountant
    >>> acc = RDPAccountant()
    >>> acc.step(sigma=1.0, q=0.01, steps=500).step(sigma=1.0, q=0.01, steps=500)
    RDPAccountant(steps=1000, segments=1)
    >>> round(acc.epsilon(1e-5), 4)
    2.1013
    """

    engine = "rdp"

    def __init__(self, orders=None):
        self._orders = None if orders is None else check_orders(orders)
        self._history: list[Step] = []

    def _options(self) -> dict:
        return {"orders": None if self._orders is None else self._orders.tolist()}

    def __repr__(self) -> str:
        return f"RDPAccountant(steps={len(self)}, segments={len(self._history)})"

    def __len__(self) -> int:
        return int(sum(st.count for st in self._history))

    @property
    def history(self) -> tuple[Step, ...]:
        """The recorded steps, consecutive repeats merged, as (sigma, q, count) records."""
        return tuple(self._history)

    def step(self, sigma: float, q: float, steps: int = 1) -> "RDPAccountant":
        """Record ``steps`` steps with noise multiplier ``sigma`` and sampling rate ``q``."""
        s, qq, t = check_step_scalars(sigma, q, steps, "step() takes scalars; call it once per segment of a schedule")
        if t == 0:
            return self
        if self._history and self._history[-1].sigma == s and self._history[-1].q == qq:
            last = self._history[-1]
            self._history[-1] = Step(s, qq, last.count + t)
        else:
            self._history.append(Step(s, qq, t))
        return self

    def compose(self, other: "RDPAccountant | Iterable[Step]") -> "RDPAccountant":
        """Append another accountant's history (or an iterable of :class:`Step`)."""
        steps = other.history if isinstance(other, RDPAccountant) else tuple(other)
        for st in steps:
            if not isinstance(st, Step):
                raise TypeError(f"compose() takes an RDPAccountant or Step records; got {type(st).__name__}")
        for st in steps:
            self.step(st.sigma, st.q, st.count)
        return self

    def epsilon_curve(self, delta: float) -> np.ndarray:
        """:meth:`epsilon` after each recorded segment (``history``): an array of upper bounds,
        non-decreasing, the last point :meth:`epsilon` itself.

        The first ``CURVE_EXACT_SEGMENTS`` points (each an order search over at most that many
        segments) and the last are exactly :meth:`epsilon` of their prefix. Every other point
        is the best, over the orders ``CURVE_ORDERS`` (or the accountant's fixed ``orders``:
        then :meth:`epsilon` of its prefix, up to rounding), of its prefix's total RDP from
        running sums (one pass per order), capped by the points after it. The curve then costs
        about one to four :meth:`epsilon` queries of the whole history, however many segments;
        such a point can lie above its prefix's :meth:`epsilon` by ~0.1 % where the RDP is about
        linear in the order, by a few % where the objective is steep between the orders tried
        (small sigma; near the order where a step's top binomial terms take over: up to ~2 %
        seen), and by up to ~10 % where its best order is above 64 and right at such a wall
        (few steps of small q) or below 1.25 or above 4096."""
        d = float(check_delta(delta))
        hist = self._history
        head = np.array([RDPAccountant(self._orders).compose(hist[: k + 1]).epsilon(d)
                         for k in range(min(len(hist), CURVE_EXACT_SEGMENTS))], dtype=np.float64)
        if len(hist) <= CURVE_EXACT_SEGMENTS:
            return _upper_monotone(head)
        qs, sigmas, _ = _schedule_arrays(hist)
        margin = _margin(qs.size, qs, sigmas, _k.ALPHA_MAX if self._orders is None else float(np.max(self._orders)))
        return prefix_curve(hist, d, self._orders, margin - 1.0, *self.epsilon(d, return_order=True), head)

    def rdp(self, orders) -> np.ndarray:
        """Total RDP of the recorded steps at ``orders`` (+inf with a noiseless step)."""
        o = check_orders(orders)
        noisy, p = _split(self._history)
        if p > 0.0:
            return np.full(o.shape, math.inf)
        if not noisy:
            return np.zeros_like(o)
        return _rdp_curve(*_schedule_arrays(noisy), o)

    def epsilon(self, delta: float, *, return_order: bool = False):
        """Smallest epsilon certified at ``delta`` (optionally with the optimal order).

        Noiseless steps (sigma = 0) reveal a sampled record with probability p = 1 - prod
        (1 - q)^T: eps = +inf for delta <= p, else the noisy steps' eps at (delta - p) / (1 - p)
        (delta_total <= p + (1 - p) delta_noisy)."""
        d = float(check_delta(delta))
        noisy, p = _split(self._history)
        if p > 0.0:
            if d <= p:
                return (math.inf, math.nan) if return_order else math.inf
            d = (d - p) / (1.0 - p) * (1 - 4 * _U)
        if not noisy:
            return (0.0, math.nan) if return_order else 0.0
        v, a = _optimise(*_schedule_arrays(noisy), math.log(d), 0, self._orders)
        return (float(v), float(a)) if return_order else float(v)

    def delta(self, epsilon: float, *, return_order: bool = False):
        """Smallest delta certified at ``epsilon`` (optionally with the optimal order); with
        noiseless steps, p + (1 - p) delta_noisy (see :meth:`epsilon`)."""
        e = float(check_epsilon(epsilon))
        noisy, p = _split(self._history)
        v, a = (-math.inf, math.nan)
        if noisy and e < math.inf:
            v, a = _optimise(*_schedule_arrays(noisy), e, 1, self._orders)
        d = _delta_of(v) if noisy else 0.0
        if p > 0.0:
            d = min(1.0, (p + (1.0 - p) * d) * (1 + 4 * _U))
        return (d, float(a)) if return_order else d
