"""``PRVAccountant`` and the deprecated ``Accountant``: prv_accountant 0.2's accountants, answered
by sgmfast's certified PLD accountant (:class:`sgmfast.pld.PLDAccountant`).

The conventions are stated in the package docstring (:mod:`sgmfast.integrations.prv_accountant`).
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections import OrderedDict
from typing import Optional, Sequence, Tuple, Union

import numpy as np

from ... import pld, rdp
from .privacy_random_variables import PrivacyRandomVariable, is_prv, sgm_parameters

__all__ = ["PRVAccountant", "Accountant", "ACCURACY", "ACCURACY_MIN", "DELTA_FLOOR"]

#: sgmfast's relative accuracy of the first query (its default): upper - lower <= ACCURACY * upper.
ACCURACY = 1e-3
#: The finest relative accuracy asked of sgmfast when ``eps_error`` calls for a narrower interval.
ACCURACY_MIN = 1e-5
#: delta below this by sgmfast's RDP bound is answered as (0, RDP bound): the PLD's tail stage would
#: spend seconds bracketing a number this small (a noise search passes through such values).
DELTA_FLOOR = 1e-30
_CACHE = 16  # sgmfast accountants (with their composed grids) kept per PRVAccountant


def _real(value, name: str, low: float, high: float) -> float:
    """One real number in [low, high] (NaN, booleans, non-numbers rejected)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        raise TypeError(f"{name} must be a real number; got {value!r}")
    x = float(value)
    if not (low <= x <= high):
        raise ValueError(f"{name} must be in [{low}, {high}]; got {value!r}")
    return x


def _error(value, name: str, allow_zero: bool) -> Optional[float]:
    """``eps_error`` / ``delta_error``: None or a real number > 0 (>= 0 where allowed)."""
    if value is None:
        return None
    x = _real(value, name, 0.0, math.inf)
    if x == 0.0 and not allow_zero:
        raise ValueError(f"{name} must be > 0; got {value!r}")
    return x


def _count(value, name: str) -> int:
    """A number of compositions: a non-negative whole number (int, numpy integer or integral float)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        raise TypeError(f"{name} must hold whole numbers; got {value!r}")
    x = float(value)
    if not (math.isfinite(x) and x >= 0 and x == int(x)):
        raise ValueError(f"{name} must hold whole numbers >= 0; got {value!r}")
    return int(x)


def _is_count(value) -> bool:
    return isinstance(value, (numbers.Real, np.floating, np.integer)) and not isinstance(value, (bool, np.bool_))


class PRVAccountant:
    """Heterogeneous composition of Poisson-subsampled Gaussian and Gaussian mechanisms, with
    prv_accountant 0.2's arguments and return values and sgmfast's certified bounds.

    Parameters
    ----------
    prvs : PrivacyRandomVariable or sequence of them
        :class:`PoissonSubsampledGaussianMechanism` (one DP-SGD step, sigma and q) or
        :class:`GaussianMechanism` (q = 1, sigma = noise_multiplier / l2_sensitivity); prv_accountant's
        own objects of these two classes are accepted too.  Any other mechanism raises
        ``NotImplementedError`` naming it, here, before anything is composed.
    eps_error : float
        prv's absolute error in epsilon, honoured as a bound on the width of the certified
        interval: :meth:`compute_epsilon` asks sgmfast for relative accuracy 1e-3 and, if
        ``upper - lower > eps_error``, asks again at ``min(acc / 2, 0.9 * eps_error / upper)``
        (never below ``ACCURACY_MIN`` = 1e-5 relative: below ``1e-5 * epsilon`` the interval may
        stay wider than ``eps_error``; it is still certified).  :meth:`compute_delta` asks for
        relative accuracy ``eps_error / epsilon`` clipped to [1e-5, 1e-3]: its delta interval is
        no wider than the change of delta over an epsilon shift of ``eps_error`` (prv's own
        delta interval spans a shift of ``2 * eps_error`` plus ``2 * delta_error``).  Where
        sgmfast's RDP bound puts delta below ``DELTA_FLOOR`` = 1e-30, the answer is
        ``(0, RDP bound)``: certified, at most 1e-30 wide, without the PLD's seconds-long tail
        stage.  ``None`` (prv's ``Accountant`` default) means sgmfast's default accuracy 1e-3.
    delta_error : float
        Accepted and stored.  prv widens its bounds by it because it discretises; sgmfast's
        bounds hold at the exact delta (epsilon) asked for, so it plays no role.
    max_self_compositions : int or sequence of int, optional
        Most compositions of each PRV a query may ask for (default 1 each, as in prv): a larger
        ``num_self_compositions`` raises ``ValueError``, as prv does.
    eps_max : float, optional
        Accepted and ignored: prv assumes the true epsilon is below it (and warns); sgmfast's
        bounds need no such assumption, so no warning is given.

    Returns of the queries are ``(lower, estimate, upper)`` floats: lower and upper are
    sgmfast's certified bounds, and the estimate is the certified upper bound (never below the
    true value).
    """

    def __init__(self, prvs: Union[PrivacyRandomVariable, Sequence[PrivacyRandomVariable]],
                 eps_error: float, delta_error: float,
                 max_self_compositions: Sequence[int] = None,
                 eps_max: Optional[float] = None):
        if is_prv(prvs):
            prvs = [prvs]
            if max_self_compositions is not None and _is_count(max_self_compositions):
                max_self_compositions = [max_self_compositions]
        try:
            prvs = list(prvs)
        except TypeError:
            raise TypeError(f"prvs must be a PrivacyRandomVariable or a sequence of them; got {prvs!r}") from None
        if not prvs:
            raise ValueError("prvs is empty: nothing to compose")
        for p in prvs:
            if not is_prv(p):
                raise TypeError(f"prvs must hold PrivacyRandomVariable objects; got {type(p).__name__}")
        if max_self_compositions is None:
            maxes = [1] * len(prvs)
        else:
            if _is_count(max_self_compositions):
                max_self_compositions = [max_self_compositions]
            maxes = [_count(m, "max_self_compositions") for m in max_self_compositions]
        if len(maxes) != len(prvs):
            raise ValueError(f"max_self_compositions has {len(maxes)} entries for {len(prvs)} PRVs")
        self.eps_error = _error(eps_error, "eps_error", allow_zero=False)
        self.delta_error = _error(delta_error, "delta_error", allow_zero=True)
        self.eps_max = None if eps_max is None else _real(eps_max, "eps_max", 0.0, math.inf)
        self.prvs = prvs
        self.max_self_compositions = maxes
        # (sigma, q) of each PRV; NotImplementedError naming any mechanism sgmfast does not account
        self._mechanisms = [sgm_parameters(p) for p in prvs]
        self._cache: OrderedDict = OrderedDict()

    def __repr__(self) -> str:
        return (f"PRVAccountant(prvs={self.prvs!r}, eps_error={self.eps_error!r}, delta_error={self.delta_error!r}, "
                f"max_self_compositions={self.max_self_compositions!r})")

    # -- the schedule -------------------------------------------------------------------------

    def _counts(self, num_self_compositions) -> Tuple[int, ...]:
        n = len(self.prvs)
        if num_self_compositions is None:
            counts = [1] * n
        elif _is_count(num_self_compositions):
            counts = [num_self_compositions]
        else:
            try:
                counts = list(num_self_compositions)
            except TypeError:
                raise TypeError("num_self_compositions must be an int or a sequence of ints; "
                                f"got {num_self_compositions!r}") from None
        if len(counts) != n:
            raise ValueError(f"num_self_compositions has {len(counts)} entries for {n} PRVs")
        counts = [_count(c, "num_self_compositions") for c in counts]
        if any(c > m for c, m in zip(counts, self.max_self_compositions)):
            raise ValueError(f"Requested number of compositions {counts} exceeds the maximum number of compositions "
                             f"{self.max_self_compositions} (max_self_compositions)")
        return tuple(counts)

    def _schedule(self, counts) -> list:
        """The steps that can leak: (sigma, q, count) with count > 0, q > 0 and sigma < inf."""
        return [(s, q, c) for (s, q), c in zip(self._mechanisms, counts) if c > 0 and q > 0.0 and s < math.inf]

    def _pld(self, schedule, accuracy: float) -> pld.PLDAccountant:
        key = (tuple(schedule), accuracy)
        acc = self._cache.get(key)
        if acc is None:
            acc = pld.PLDAccountant(accuracy=accuracy)
            for s, q, c in schedule:
                acc.step(s, q, c)
            self._cache[key] = acc
            while len(self._cache) > _CACHE:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        return acc

    def epsilon_bounds(self, delta: float, num_self_compositions=None) -> Tuple[float, float]:
        """Certified ``(lower, upper)`` on epsilon(delta) (what :meth:`compute_epsilon` reports)."""
        d = _real(delta, "delta", 0.0, math.inf)
        schedule = self._schedule(self._counts(num_self_compositions))
        if not schedule or d >= 1.0:
            return 0.0, 0.0  # nothing leaks; or delta >= 1, which every mechanism meets at epsilon 0
        if d == 0.0:
            return math.inf, math.inf  # a Gaussian step is not pure DP
        acc = ACCURACY
        lo, up = -math.inf, math.inf
        while True:
            b = self._pld(schedule, acc).epsilon(d)
            lo, up = max(lo, float(b.lower)), min(up, float(b.upper))  # both certified: intersect
            if (self.eps_error is None or up - lo <= self.eps_error or acc <= ACCURACY_MIN
                    or not math.isfinite(up)):
                return lo, up
            acc = max(ACCURACY_MIN, min(acc / 2.0, 0.9 * self.eps_error / up))

    def delta_bounds(self, epsilon: float, num_self_compositions=None) -> Tuple[float, float]:
        """Certified ``(lower, upper)`` on delta(epsilon) (what :meth:`compute_delta` reports)."""
        e = _real(epsilon, "epsilon", 0.0, math.inf)
        schedule = self._schedule(self._counts(num_self_compositions))
        if not schedule:
            return 0.0, 0.0
        if e == math.inf and all(s > 0.0 for s, _, _ in schedule):
            return 0.0, 0.0  # the loss of a Gaussian step is finite
        acc_rdp = rdp.RDPAccountant()
        for s, q, c in schedule:
            acc_rdp.step(s, q, c)
        up_rdp = float(acc_rdp.delta(e))  # an upper bound on delta (RDP, add/remove: both directions)
        if up_rdp <= DELTA_FLOOR:
            return 0.0, up_rdp
        if self.eps_error is None:
            acc = ACCURACY
        else:
            acc = min(ACCURACY, max(ACCURACY_MIN, self.eps_error / max(e, 1e-300)))
        b = self._pld(schedule, acc).delta(e)
        return float(b.lower), float(b.upper)

    # -- prv_accountant's API ----------------------------------------------------------------------

    def compute_composition(self, num_self_compositions: Union[Optional[int], Sequence[int]]):
        """Not provided: sgmfast does not build prv's discretised ``DiscretePrivacyRandomVariable``.
        The counts are checked as prv checks them (``ValueError`` past ``max_self_compositions``),
        then ``NotImplementedError`` is raised; use :meth:`compute_epsilon` / :meth:`compute_delta`."""
        self._counts(num_self_compositions)
        raise NotImplementedError("compute_composition is not provided by sgmfast.integrations.prv_accountant: "
                                  "sgmfast does not build a discretised composed PRV; call compute_epsilon(delta, "
                                  "num_self_compositions) or compute_delta(epsilon, num_self_compositions)")

    def compute_delta(self, epsilon: float, num_self_compositions: Sequence[int]) -> Tuple[float, float, float]:
        """Bounds on delta(epsilon) after ``num_self_compositions`` compositions of each PRV.

        :param float epsilon: Target epsilon (>= 0, +inf allowed).
        :param num_self_compositions: One count per PRV (an int for a single PRV).
        :return: ``(lower, estimate, upper)``: sgmfast's certified bounds, and as the estimate the
                 certified upper bound.
        """
        lo, up = self.delta_bounds(epsilon, num_self_compositions)
        return (lo, up, up)

    def compute_epsilon(self, delta: float, num_self_compositions: Sequence[int]) -> Tuple[float, float, float]:
        """Bounds on epsilon(delta) after ``num_self_compositions`` compositions of each PRV.

        :param float delta: Target delta (0 gives +inf, >= 1 gives 0).
        :param num_self_compositions: One count per PRV (an int for a single PRV).
        :return: ``(lower, estimate, upper)``: sgmfast's certified bounds, at most ``eps_error``
                 apart (down to 1e-5 relative), and as the estimate the certified upper bound.
        """
        lo, up = self.epsilon_bounds(delta, num_self_compositions)
        return (lo, up, up)


class Accountant:
    """prv_accountant's deprecated single-mechanism accountant (DP-SGD with Poisson sampling).

    Same arguments as prv_accountant 0.2 and the same ``DeprecationWarning``; the numbers are
    :class:`PRVAccountant`'s (``delta_error = delta / 1000``, as prv sets it).  ``eps_error=None``
    means sgmfast's default accuracy (prv fails on it); ``mesh_size`` must be None (prv asserts
    it; here ``ValueError``); ``verbose`` is ignored.
    """

    def __init__(self, noise_multiplier: float, sampling_probability: float,
                 delta: float, max_compositions: int, eps_error: float = None,
                 mesh_size: float = None, verbose: bool = False) -> None:
        warnings.warn("`Accountant` is deprecated (as in prv_accountant): use `PRVAccountant` with a "
                      "`PoissonSubsampledGaussianMechanism` PRV instead.", DeprecationWarning, stacklevel=2)
        if mesh_size is not None:
            raise ValueError("mesh_size is not supported (prv_accountant requires it to be None as well); "
                             "set eps_error instead")
        from .privacy_random_variables import PoissonSubsampledGaussianMechanism

        prv = PoissonSubsampledGaussianMechanism(sampling_probability=sampling_probability,
                                                 noise_multiplier=noise_multiplier)
        self.delta = _real(delta, "delta", 0.0, 1.0)
        self.accountant = PRVAccountant(prvs=[prv], eps_error=eps_error, delta_error=self.delta / 1000,
                                        max_self_compositions=[max_compositions])

    def compute_epsilon(self, num_compositions: int) -> Tuple[float, float, float]:
        """Bounds on epsilon at the accountant's delta after ``num_compositions`` DP-SGD steps.

        :return: ``(lower, estimate, upper)``: certified bounds; the estimate is the upper bound.
        """
        return self.accountant.compute_epsilon(self.delta, [num_compositions])
