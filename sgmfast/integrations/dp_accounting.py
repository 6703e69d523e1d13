"""dp_accounting adapter: a ``PrivacyAccountant`` backed by sgmfast.

Accepts the DpEvents of this mechanism family — ``PoissonSampledDpEvent`` of a
``GaussianDpEvent``, a bare ``GaussianDpEvent`` (q = 1), ``SelfComposedDpEvent``,
``ComposedDpEvent``, ``NoOpDpEvent`` and ``NonPrivateDpEvent`` — under the add/remove
neighbouring relation, and ``SampledWithoutReplacementDpEvent`` of a ``GaussianDpEvent``
(fixed-size batches, :mod:`sgmfast.pld.fixed_size`) under ``REPLACE_ONE``, where a bare
``GaussianDpEvent`` is the full batch.  Any other event is reported as unsupported
(``supports`` is False, ``compose`` raises ``UnsupportedEventError``); nothing is mis-accounted.
``dp_accounting.calibrate_dp_mechanism`` and code written against ``PrivacyAccountant`` work
unchanged.

Noise convention: dp_accounting's ``noise_multiplier`` is the noise std over the sensitivity
under the accountant's relation.  Add/remove moves a batch sum by one clipping norm, so it is
sgmfast's sigma; replace-one moves it by two, so sgmfast's sigma (noise std over the clipping
norm) is twice it -- the convention of dp_accounting's own RDP accountant for
``SampledWithoutReplacementDpEvent``, which it is checked against in the tests.

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
from ._common import ScheduleCache, check_engine, fixed_size_bounds

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
        ``ADD_OR_REMOVE_ONE`` (Poisson-sampled Gaussian steps, any schedule) or ``REPLACE_ONE``
        (fixed-size batches drawn without replacement, any mix of noise and batch fractions:
        ``pld.fixed_size.epsilon_runs`` / ``rdp.fixed_size_runs``, the single-run answers of
        ``pld.epsilon`` / ``rdp.epsilon(..., sampler="fixed_size")`` for one run).
    """

    def __init__(self, accountant: str = "pld", accuracy: float = 1e-3,
                 neighboring_relation: NeighborRel = NeighborRel.ADD_OR_REMOVE_ONE):
        super().__init__(neighboring_relation)
        self._engine = check_engine(accountant)
        self._accuracy = float(accuracy)
        self._cache = ScheduleCache(self._engine, accuracy)
        self._steps: list[Step] = []
        self._non_private = False  # a step without noise: epsilon = +inf, delta = 1

    def _maybe_compose(self, event: dp_event.DpEvent, count: int,
                       do_compose: bool) -> Optional[dp_accounting.PrivacyAccountant.CompositionErrorDetails]:
        found = []
        err = self._collect(event, count, found)
        if err is not None or not do_compose:
            return err
        for kind, sigma, q, n in found:
            if n <= 0:
                continue
            if kind == "non_private":
                self._non_private = True
            elif self._steps and self._steps[-1].sigma == sigma and self._steps[-1].q == q:
                last = self._steps[-1]
                self._steps[-1] = Step(last.sigma, last.q, last.count + n)
            else:
                self._steps.append(Step(sigma, q, n))
        return None

    def _collect(self, event, count, found):
        """Append the (kind, sigma, q, count) records of ``event`` composed ``count`` times to
        ``found`` (sigma in sgmfast's convention), or return why it is not supported."""
        details = dp_accounting.PrivacyAccountant.CompositionErrorDetails
        rel = self.neighboring_relation
        if rel not in (NeighborRel.ADD_OR_REMOVE_ONE, NeighborRel.REPLACE_ONE):
            return details(event, f"sgmfast supports ADD_OR_REMOVE_ONE and REPLACE_ONE; found {rel}")
        if isinstance(event, dp_event.NoOpDpEvent):
            return None
        if isinstance(event, dp_event.NonPrivateDpEvent):
            found.append(("non_private", 0.0, 0.0, count))
            return None
        if isinstance(event, dp_event.SelfComposedDpEvent):
            return self._collect(event.event, event.count * count, found)
        if isinstance(event, dp_event.ComposedDpEvent):
            for e in event.events:
                err = self._collect(e, count, found)
                if err is not None:
                    return err
            return None
        if isinstance(event, dp_event.GaussianDpEvent):
            return self._record(event, 1.0, event.noise_multiplier, count, found)
        replace = rel is NeighborRel.REPLACE_ONE
        if isinstance(event, dp_event.PoissonSampledDpEvent) and not replace:
            inner = event.event
            if not isinstance(inner, dp_event.GaussianDpEvent):
                return details(event, "PoissonSampledDpEvent must wrap a GaussianDpEvent; found "
                                      f"{type(inner).__name__}")
            return self._record(event, event.sampling_probability, inner.noise_multiplier, count, found)
        if isinstance(event, dp_event.SampledWithoutReplacementDpEvent) and replace:
            inner = event.event
            if not isinstance(inner, dp_event.GaussianDpEvent):
                return details(event, "SampledWithoutReplacementDpEvent must wrap a GaussianDpEvent; found "
                                      f"{type(inner).__name__}")
            if not 0 <= event.sample_size <= event.source_dataset_size or event.source_dataset_size <= 0:
                return details(event, "sample_size must be in [0, source_dataset_size] and source_dataset_size "
                                      f"> 0; found {event.sample_size} of {event.source_dataset_size}")
            return self._record(event, event.sample_size / event.source_dataset_size, inner.noise_multiplier,
                                count, found)
        if isinstance(event, (dp_event.PoissonSampledDpEvent, dp_event.SampledWithoutReplacementDpEvent)):
            need = "ADD_OR_REMOVE_ONE" if replace else "REPLACE_ONE"
            return details(event, f"sgmfast accounts for {type(event).__name__} under {need} only")
        return details(event, f"sgmfast accounts for the subsampled Gaussian mechanism only; "
                              f"{type(event).__name__} is not supported")

    def _record(self, event, q, noise_multiplier, count, found):
        details = dp_accounting.PrivacyAccountant.CompositionErrorDetails
        if not (0.0 <= q <= 1.0):
            return details(event, f"sampling_probability must be in [0, 1]; found {q}")
        if not (noise_multiplier >= 0.0):
            return details(event, f"noise_multiplier must be >= 0; found {noise_multiplier}")
        # (sigma = 0 with q < 1 is not private at small delta: the engines answer exactly, eps = +inf
        # below delta = 1 - (1 - q)^T)
        if q > 0.0:  # (count 0 too: ``supports`` asks with count 0, and the run's parameters must fit)
            scale = 2.0 if self.neighboring_relation is NeighborRel.REPLACE_ONE else 1.0
            found.append(("step", scale * float(noise_multiplier), float(q), int(count)))
        return None

    def get_epsilon_bounds(self, target_delta: float) -> Bounds:
        """Certified (lower, upper) epsilon; lower is NaN for the RDP engine."""
        if self._non_private:
            return Bounds(math.inf, math.inf)
        if self.neighboring_relation is NeighborRel.REPLACE_ONE:
            return fixed_size_bounds(self._engine, self._steps, "epsilon", target_delta, self._accuracy)
        return self._cache.epsilon(self._steps, target_delta)

    def get_epsilon(self, target_delta: float) -> float:
        return float(self.get_epsilon_bounds(target_delta).upper)

    def get_delta(self, target_epsilon: float) -> float:
        if self._non_private:
            return 1.0
        if self.neighboring_relation is NeighborRel.REPLACE_ONE:
            return float(fixed_size_bounds(self._engine, self._steps, "delta", target_epsilon, self._accuracy).upper)
        return float(self._cache.delta(self._steps, target_epsilon).upper)
