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

Edge values follow dp_accounting's own accountants (``pld.PLDAccountant``, ``rdp.RdpAccountant``)
wherever their answer is sound; the target is checked first (``target_delta`` in [0, 1],
``target_epsilon`` in [0, +inf], NaN and booleans rejected: ``ValueError`` / ``TypeError``
naming the parameter -- where dp_accounting's PLD answers NaN, inf or 0 for such input).

* No events, only no-ops, or only steps that reveal nothing (noise +inf): epsilon 0 at every
  delta in [0, 1], delta 0 at every epsilon in [0, +inf].
* ``NonPrivateDpEvent`` (dp_accounting's convention, required by its conformance tests):
  epsilon +inf at every delta, delta = 1 at every epsilon.  At delta = 1 this is conservative
  (every mechanism is (0, 1)-DP): ``get_epsilon_bounds(1)`` is ``Bounds(0, inf)``.
* delta = 0: epsilon +inf once a step has finite noise (the Gaussian mechanism is not pure DP).
* delta = 1: epsilon 0 (exact: the hockey-stick divergence never exceeds 1); just below 1 the
  engine answers, 0 once delta reaches the total variation distance, as dp_accounting does.
* epsilon = 0 and epsilon = +inf: the engine's certified answer (at +inf: the probability of an
  infinite privacy loss, 0 for Gaussian noise; dp_accounting's PLD answers its truncated tail
  mass there, ~1e-15, and its RDP 0).  A finite epsilon above 1e30 is answered at 1e30: the
  engines' products with exp(epsilon) overflow far above it (PLD answered 1 at 1e200, RDP 0 at
  1e305), and delta(epsilon) never increases, so delta(1e30) bounds it.
* Deliberately not followed, for soundness or sharpness: dp_accounting's PLD answers a negative
  delta with +inf and a negative epsilon with a delta (its RDP raises; so does this adapter);
  a noiseless Gaussian (noise multiplier 0) under sampling is non-private to dp_accounting
  (epsilon +inf, delta 1 everywhere), while sgmfast answers it exactly: delta = 1 - (1 - q)^T
  at every epsilon, epsilon 0 at delta at least that and +inf below.

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
from .._validation import as_float_array
from ._common import ScheduleCache, check_engine, fixed_size_bounds

__all__ = ["SGMFastPrivacyAccountant"]

NeighborRel = dp_accounting.NeighboringRelation

# Finite epsilons above this are answered at it (delta is non-increasing in epsilon, so that is an
# upper bound); the engines' exp(epsilon) products overflow somewhere above 1e100.
_EPSILON_CAP = 1e30


def _target(value, name: str, high: float) -> float:
    """One real number in [0, high]; NaN, booleans and non-numbers are rejected."""
    arr = as_float_array(value, name)
    if arr.ndim != 0:
        raise TypeError(f"{name} must be a single number; got shape {arr.shape}")
    x = float(arr)
    if not (0.0 <= x <= high):
        rng = "[0, 1]" if high == 1.0 else ">= 0 (+inf allowed)"
        raise ValueError(f"{name} must be {'in ' if high == 1.0 else ''}{rng}; got {value!r}")
    return x + 0.0  # (-0.0 -> 0.0)


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

    def _reveals_nothing(self) -> bool:
        """No recorded step has a privacy loss (none at all, or only steps of infinite noise)."""
        return all(math.isinf(st.sigma) for st in self._steps)

    def get_epsilon_bounds(self, target_delta: float) -> Bounds:
        """Certified (lower, upper) epsilon at ``target_delta`` in [0, 1]; lower is NaN for the RDP
        engine except at the edge values answered exactly (delta 0 or 1, no privacy loss)."""
        delta = _target(target_delta, "target_delta", 1.0)
        if self._non_private:
            return Bounds(0.0 if delta == 1.0 else math.inf, math.inf)
        if delta == 1.0 or self._reveals_nothing():
            return Bounds(0.0, 0.0)
        if delta == 0.0:
            return Bounds(math.inf, math.inf)
        if self.neighboring_relation is NeighborRel.REPLACE_ONE:
            return fixed_size_bounds(self._engine, self._steps, "epsilon", delta, self._accuracy)
        return self._cache.epsilon(self._steps, delta)

    def get_epsilon(self, target_delta: float) -> float:
        """Certified upper bound on epsilon at ``target_delta`` in [0, 1] (edge values: see the
        module docstring)."""
        return float(self.get_epsilon_bounds(target_delta).upper)

    def get_delta(self, target_epsilon: float) -> float:
        """Certified upper bound on delta at ``target_epsilon`` in [0, +inf] (edge values: see the
        module docstring)."""
        eps = _target(target_epsilon, "target_epsilon", math.inf)
        if self._non_private:
            return 1.0
        if self._reveals_nothing():
            return 0.0
        if eps != math.inf:
            eps = min(eps, _EPSILON_CAP)
        if self.neighboring_relation is NeighborRel.REPLACE_ONE:
            return float(fixed_size_bounds(self._engine, self._steps, "delta", eps, self._accuracy).upper)
        return float(self._cache.delta(self._steps, eps).upper)
