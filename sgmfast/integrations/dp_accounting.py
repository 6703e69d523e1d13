"""dp_accounting adapter: a ``PrivacyAccountant`` backed by sgmfast.

Accepts the DpEvents of this mechanism family — ``PoissonSampledDpEvent`` of a
``GaussianDpEvent``, a bare ``GaussianDpEvent`` (q = 1), ``SelfComposedDpEvent``,
``ComposedDpEvent`` and ``NoOpDpEvent`` — under the add/remove neighbouring relation. Any
other event is reported as unsupported (``supports`` is False, ``compose`` raises
``UnsupportedEventError``); nothing is mis-accounted. ``dp_accounting.calibrate_dp_mechanism``
and code written against ``PrivacyAccountant`` work unchanged.

Examples
--------
>>> import dp_accounting                                                 # doctest: +SKIP
>>> from sgmfast.integrations.dp_accounting import SGMFastPrivacyAccountant  # doctest: +SKIP
>>> ev = dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.0))  # doctest: +SKIP
>>> SGMFastPrivacyAccountant().compose(ev, 1000).get_epsilon(1e-5)      # doctest: +SKIP
"""

from __future__ import annotations

import math
from typing import Optional

import dp_accounting
from dp_accounting import dp_event

from .._types import Bounds, Step
from ._common import ScheduleCache, check_engine

__all__ = ["SGMFastPrivacyAccountant"]

NeighborRel = dp_accounting.NeighboringRelation


class SGMFastPrivacyAccountant(dp_accounting.PrivacyAccountant):
    """dp_accounting ``PrivacyAccountant`` backed by sgmfast (PLD by default, or RDP).

    Parameters
    ----------
    accountant : {"pld", "rdp"}
        Engine; ``get_epsilon``/``get_delta`` return the certified upper bound.
    accuracy : float
        PLD accuracy (relative width of the certified epsilon interval).
    neighboring_relation : NeighboringRelation
        Only ``ADD_OR_REMOVE_ONE`` is supported.
    """

    def __init__(self, accountant: str = "pld", accuracy: float = 1e-3,
                 neighboring_relation: NeighborRel = NeighborRel.ADD_OR_REMOVE_ONE):
        super().__init__(neighboring_relation)
        self._cache = ScheduleCache(check_engine(accountant), accuracy)
        self._steps: list[Step] = []
        self._non_private = False  # a step without noise: epsilon = +inf, delta = 1

    def _maybe_compose(self, event: dp_event.DpEvent, count: int,
                       do_compose: bool) -> Optional[dp_accounting.PrivacyAccountant.CompositionErrorDetails]:
        details = dp_accounting.PrivacyAccountant.CompositionErrorDetails
        if self.neighboring_relation is not NeighborRel.ADD_OR_REMOVE_ONE:
            return details(event, f"sgmfast supports ADD_OR_REMOVE_ONE only; found {self.neighboring_relation}")
        if isinstance(event, dp_event.NoOpDpEvent):
            return None
        if isinstance(event, dp_event.NonPrivateDpEvent):
            if do_compose and count > 0:
                self._non_private = True
            return None
        if isinstance(event, dp_event.SelfComposedDpEvent):
            return self._maybe_compose(event.event, event.count * count, do_compose)
        if isinstance(event, dp_event.ComposedDpEvent):
            for e in event.events:  # check everything before changing state
                err = self._maybe_compose(e, count, False)
                if err is not None:
                    return err
            if do_compose:
                for e in event.events:
                    self._maybe_compose(e, count, True)
            return None
        if isinstance(event, dp_event.GaussianDpEvent):
            return self._add(event, 1.0, event.noise_multiplier, count, do_compose)
        if isinstance(event, dp_event.PoissonSampledDpEvent):
            inner = event.event
            if not isinstance(inner, dp_event.GaussianDpEvent):
                return details(event, "PoissonSampledDpEvent must wrap a GaussianDpEvent; found "
                                      f"{type(inner).__name__}")
            return self._add(event, event.sampling_probability, inner.noise_multiplier, count, do_compose)
        return details(event, f"sgmfast accounts for the subsampled Gaussian mechanism only; "
                              f"{type(event).__name__} is not supported")

    def _add(self, event, q, sigma, count, do_compose):
        details = dp_accounting.PrivacyAccountant.CompositionErrorDetails
        if not (0.0 < q <= 1.0):
            if q == 0.0:
                return None  # never sampled: no privacy cost
            return details(event, f"sampling_probability must be in (0, 1]; found {q}")
        if not (sigma >= 0.0):
            return details(event, f"noise_multiplier must be >= 0; found {sigma}")
        # (sigma = 0 with q < 1 is not private at small delta: the engines answer exactly, eps = +inf
        # below delta = 1 - (1 - q)^T)
        if do_compose and count > 0:
            if self._steps and self._steps[-1].sigma == sigma and self._steps[-1].q == q:
                last = self._steps[-1]
                self._steps[-1] = Step(last.sigma, last.q, last.count + int(count))
            else:
                self._steps.append(Step(float(sigma), float(q), int(count)))
        return None

    def get_epsilon_bounds(self, target_delta: float) -> Bounds:
        """Certified (lower, upper) epsilon; lower is NaN for the RDP engine."""
        if self._non_private:
            return Bounds(math.inf, math.inf)
        return self._cache.epsilon(self._steps, target_delta)

    def get_epsilon(self, target_delta: float) -> float:
        return float(self.get_epsilon_bounds(target_delta).upper)

    def get_delta(self, target_epsilon: float) -> float:
        if self._non_private:
            return 1.0
        return float(self._cache.delta(self._steps, target_epsilon).upper)
