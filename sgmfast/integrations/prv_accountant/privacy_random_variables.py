"""Privacy random variables (PRVs) with prv_accountant 0.2's names and constructor arguments.

What the accountant composes is only the mechanism's parameters: a
:class:`PoissonSubsampledGaussianMechanism` becomes one SGM step (sigma, q) of sgmfast's schedule
and a :class:`GaussianMechanism` a step with q = 1 and sigma = noise_multiplier / l2_sensitivity.
The distribution methods (``cdf``, ``pdf``, ``rdp``) are there for code that inspects a PRV;
they are written from the definitions below, not used by the accounting.

The PRV of a mechanism is the privacy loss Y = log(P(X) / Q(X)) with X ~ P.  For the Poisson
subsampled Gaussian (the "remove" direction, as in prv_accountant),
P = (1 - q) N(0, s^2) + q N(1, s^2) and Q = N(0, s^2), so the loss
log(1 - q + q exp((2x - 1) / (2 s^2))) is increasing in x and

    P(Y <= t) = (1 - q) Phi(z / s) + q Phi((z - 1) / s),   z(t) = s^2 log((e^t - 1 + q) / q) + 1/2,

for t > log(1 - q) (0 below).  For the Gaussian mechanism with mu = sensitivity / noise, Y is
N(mu^2 / 2, mu^2).

:class:`LaplaceMechanism`, :class:`PureDPMechanism` and :class:`ApproximateDPMechanism` (and any
subclass of :class:`PrivacyRandomVariable` defined outside this module) can be constructed with
prv_accountant's arguments, but sgmfast does not account them: the accountants raise
``NotImplementedError`` naming the mechanism instead of returning a number, and so do their
distribution methods.
"""

from __future__ import annotations

import math
import numbers
from abc import ABC, abstractmethod

import numpy as np
from scipy import special

__all__ = ["PrivacyRandomVariable", "PoissonSubsampledGaussianMechanism", "GaussianMechanism", "LaplaceMechanism",
           "PureDPMechanism", "ApproximateDPMechanism"]

_SUPPORTED = "sgmfast accounts only PoissonSubsampledGaussianMechanism and GaussianMechanism"


def _real(value, name: str, *, low: float = 0.0, low_open: bool = False, high: float = math.inf,
          high_open: bool = False) -> float:
    """One real number in the stated range (booleans, NaN and non-numbers rejected)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        raise TypeError(f"{name} must be a real number; got {value!r}")
    x = float(value)
    if math.isnan(x) or x < low or (low_open and x == low) or x > high or (high_open and x == high):
        lo = "(" if low_open else "["
        hi = ")" if high_open else "]"
        raise ValueError(f"{name} must be in {lo}{low}, {high}{hi}; got {value!r}")
    return x


def _loss_floor(q: float) -> float:
    """log(1 - q): the smallest privacy loss of the remove direction (-inf at q = 1)."""
    return -math.inf if q >= 1.0 else math.log1p(-q)


def unsupported(mechanism) -> NotImplementedError:
    """The error for a mechanism sgmfast does not account, naming it."""
    name = type(mechanism).__name__
    return NotImplementedError(
        f"{name} is not supported by sgmfast.integrations.prv_accountant: {_SUPPORTED} "
        f"(Poisson-subsampled Gaussian steps, q = 1 for the Gaussian mechanism). Account {name} with "
        "another accountant; nothing was composed.")


class PrivacyRandomVariable(ABC):
    """Base class of the PRVs (prv_accountant's interface: ``cdf`` is required, the rest optional).

    Subclassing it defines a PRV that prv_accountant could compose numerically from its ``cdf``;
    sgmfast composes only the two Gaussian mechanisms of this module, so the accountants raise
    ``NotImplementedError`` naming any other subclass.
    """

    def mean(self) -> float:
        """Mean of the privacy loss (not provided unless a subclass defines it)."""
        raise NotImplementedError(f"{type(self).__name__} does not provide the mean of its privacy loss")

    def probability(self, a, b):
        """Probability of the privacy loss in (a, b]: ``cdf(b) - cdf(a)``."""
        return self.cdf(b) - self.cdf(a)

    def pdf(self, t):
        """Density of the (finite part of the) privacy loss at t."""
        raise NotImplementedError(f"{type(self).__name__} does not provide a density")

    @abstractmethod
    def cdf(self, t):
        """Distribution function of the (finite part of the) privacy loss at t."""

    def rdp(self, alpha: float) -> float:
        """Rényi DP of order alpha of one use of the mechanism."""
        raise NotImplementedError(f"{type(self).__name__} does not provide its Rényi DP")

    @property
    def pm_inf(self) -> float:
        """Probability that the privacy loss is +inf."""
        return 0.0


class PoissonSubsampledGaussianMechanism(PrivacyRandomVariable):
    """One step of DP-SGD: Poisson sampling at rate ``sampling_probability``, Gaussian noise of
    std ``noise_multiplier`` times the clipping norm (sgmfast's (sigma, q)).

    Attributes ``p`` (= q) and ``sigma`` as in prv_accountant, stored as Python floats.
    """

    def __init__(self, sampling_probability: float, noise_multiplier: float) -> None:
        self.p = _real(sampling_probability, "sampling_probability", high=1.0)
        self.sigma = _real(noise_multiplier, "noise_multiplier")

    @property
    def sampling_probability(self) -> float:
        return self.p

    @property
    def noise_multiplier(self) -> float:
        return self.sigma

    def __repr__(self) -> str:
        return f"PoissonSubsampledGaussianMechanism(sampling_probability={self.p!r}, noise_multiplier={self.sigma!r})"

    def _z(self, t):
        """z(t) = s^2 log((e^t - 1 + q) / q) + 1/2 where t > log(1 - q) (NaN elsewhere)."""
        q, s = self.p, self.sigma
        t = np.asarray(t, dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            # log(e^t - (1 - q)) = t + log1p(-(1 - q) e^-t): no overflow for large t
            w = t + np.log1p(-(1.0 - q) * np.exp(-t)) - math.log(q)
        return s * s * w + 0.5

    def cdf(self, t):
        q, s = self.p, self.sigma
        t = np.asarray(t, dtype=np.float64)
        if q == 0.0 or s == math.inf:
            return np.where(t >= 0.0, 1.0, 0.0)[()]
        if s == 0.0:
            raise ValueError("a noiseless mechanism (noise_multiplier 0) has no finite privacy-loss distribution")
        z = self._z(t)
        inside = t > _loss_floor(q)
        with np.errstate(invalid="ignore"):
            val = (1.0 - q) * special.ndtr(z / s) + q * special.ndtr((z - 1.0) / s)
        return np.where(inside, np.nan_to_num(val, nan=1.0), 0.0)[()]

    def pdf(self, t):
        q, s = self.p, self.sigma
        t = np.asarray(t, dtype=np.float64)
        if q == 0.0 or s == math.inf or s == 0.0:
            raise ValueError("the privacy loss has no density for q = 0, noise_multiplier 0 or +inf")
        z = self._z(t)
        inside = t > _loss_floor(q)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            dz = s * s / -np.expm1(_loss_floor(q) - t)  # dz/dt = s^2 e^t / (e^t - 1 + q)
            phi = lambda u: np.exp(-0.5 * u * u) / math.sqrt(2.0 * math.pi)  # noqa: E731
            val = ((1.0 - q) * phi(z / s) + q * phi((z - 1.0) / s)) / s * dz
        return np.where(inside, np.nan_to_num(val, nan=0.0, posinf=0.0), 0.0)[()]

    def rdp(self, alpha: float) -> float:
        """Rényi DP of one step at order alpha > 1 (sgmfast's ``rdp.rdp``, rounded up)."""
        a = float(alpha)
        if self.p == 0.0 or self.sigma == math.inf:
            return 0.0
        if math.isinf(a) or self.sigma == 0.0:
            return math.inf
        from ... import rdp as _rdp

        return float(_rdp.rdp(self.sigma, self.p, 1, [a])[0])


class GaussianMechanism(PrivacyRandomVariable):
    """The Gaussian mechanism: noise of std ``noise_multiplier``, sensitivity ``l2_sensitivity``.

    Composed as an SGM step with q = 1 and sigma = noise_multiplier / l2_sensitivity.  Attribute
    ``mu`` = l2_sensitivity / noise_multiplier as in prv_accountant.
    """

    def __init__(self, noise_multiplier: float, l2_sensitivity: float = 1.0) -> None:
        self.noise_multiplier = _real(noise_multiplier, "noise_multiplier", low_open=True)
        self.l2_sensitivity = _real(l2_sensitivity, "l2_sensitivity", low_open=True, high_open=True)
        self.mu = self.l2_sensitivity / self.noise_multiplier

    def __repr__(self) -> str:
        return f"GaussianMechanism(noise_multiplier={self.noise_multiplier!r}, l2_sensitivity={self.l2_sensitivity!r})"

    def cdf(self, t):
        t = np.asarray(t, dtype=np.float64)
        if self.mu == 0.0:
            return np.where(t >= 0.0, 1.0, 0.0)[()]
        return special.ndtr(t / self.mu - self.mu / 2.0)[()]

    def pdf(self, t):
        t = np.asarray(t, dtype=np.float64)
        u = t / self.mu - self.mu / 2.0
        return (np.exp(-0.5 * u * u) / (math.sqrt(2.0 * math.pi) * self.mu))[()]

    def mean(self) -> float:
        return self.mu * self.mu / 2.0

    def rdp(self, alpha: float) -> float:
        return float(alpha) * self.mu * self.mu / 2.0


class _Unsupported(PrivacyRandomVariable):
    """A mechanism constructible with prv_accountant's arguments that sgmfast does not account."""

    def cdf(self, t):
        raise unsupported(self)

    def pdf(self, t):
        raise unsupported(self)

    def rdp(self, alpha: float) -> float:
        raise unsupported(self)

    def mean(self) -> float:
        raise unsupported(self)


class LaplaceMechanism(_Unsupported):
    """prv_accountant's Laplace mechanism (``mu`` = sensitivity / scale): constructible, not
    accounted (the accountants raise ``NotImplementedError`` naming it)."""

    def __init__(self, mu: float) -> None:
        self.mu = _real(mu, "mu", low_open=True)

    def __repr__(self) -> str:
        return f"LaplaceMechanism(mu={self.mu!r})"


class PureDPMechanism(_Unsupported):
    """prv_accountant's worst-case eps-DP mechanism: constructible, not accounted."""

    def __init__(self, eps: float) -> None:
        self.eps = _real(eps, "eps")

    def __repr__(self) -> str:
        return f"PureDPMechanism(eps={self.eps!r})"


class ApproximateDPMechanism(_Unsupported):
    """prv_accountant's worst-case (epsilon, delta)-DP mechanism: constructible, not accounted."""

    def __init__(self, epsilon: float, delta: float) -> None:
        self.epsilon = _real(epsilon, "epsilon")
        self.delta = _real(delta, "delta", high=1.0)

    def __repr__(self) -> str:
        return f"ApproximateDPMechanism(epsilon={self.epsilon!r}, delta={self.delta!r})"

    @property
    def pm_inf(self) -> float:
        return self.delta


def sgm_parameters(prv) -> tuple[float, float]:
    """(sigma, q) of the SGM step a PRV stands for, or ``NotImplementedError`` naming it.

    Besides this module's classes, prv_accountant's own ``PoissonSubsampledGaussianMechanism``
    and ``GaussianMechanism`` objects are recognised by class name and module (without importing
    prv_accountant), so code that still builds its PRVs from prv_accountant works too.
    """
    if isinstance(prv, PoissonSubsampledGaussianMechanism):
        return prv.sigma, prv.p
    if isinstance(prv, GaussianMechanism):
        return 1.0 / prv.mu, 1.0
    cls = type(prv)
    if cls.__module__.split(".")[0] == "prv_accountant":
        if cls.__name__ == "PoissonSubsampledGaussianMechanism":
            return (_real(float(prv.sigma), "noise_multiplier"),
                    _real(float(prv.p), "sampling_probability", high=1.0))
        if cls.__name__ == "GaussianMechanism":
            return 1.0 / _real(float(prv.mu), "mu", low_open=True, high_open=True), 1.0
    raise unsupported(prv)


def is_prv(obj) -> bool:
    """True for a single PRV object (this module's or prv_accountant's), False for a sequence."""
    if isinstance(obj, PrivacyRandomVariable):
        return True
    return any(c.__name__ == "PrivacyRandomVariable" and c.__module__.split(".")[0] == "prv_accountant"
               for c in type(obj).__mro__)
