"""Opacus adapter: an accountant for ``PrivacyEngine`` backed by sgmfast, and a drop-in
``get_noise_multiplier``.

Importing this module registers the accountant with Opacus under the mechanism name
``"sgmfast"``, so ``PrivacyEngine(accountant="sgmfast")`` works; or attach an instance,
``privacy_engine.accountant = SGMFastAccountant()``.

Examples
--------
>>> from sgmfast.integrations.opacus import SGMFastAccountant   # doctest: +SKIP
>>> acc = SGMFastAccountant()                                     # doctest: +SKIP
>>> for _ in range(1000):                                         # doctest: +SKIP
...     acc.step(noise_multiplier=1.0, sample_rate=0.01)
>>> acc.get_epsilon(delta=1e-5)                                   # doctest: +SKIP
"""

from __future__ import annotations

from typing import Optional

from opacus.accountants.accountant import IAccountant
from opacus.accountants.registry import _ACCOUNTANTS, register_accountant

from .._types import Bounds, Step
from .._validation import check_delta, check_epsilon, check_q, check_sigma
from ._common import ScheduleCache, check_engine, fixed_size_bounds

__all__ = ["SGMFastAccountant", "get_noise_multiplier", "MECHANISM"]

MECHANISM = "sgmfast"


class SGMFastAccountant(IAccountant):
    """Opacus accountant backed by sgmfast's PLD engine (tight, certified) or its RDP engine.

    Follows Opacus's accountant interface: ``step(noise_multiplier=..., sample_rate=...)``,
    ``get_epsilon(delta)``, ``len()``, ``mechanism()``, ``state_dict()`` /
    ``load_state_dict()``, and ``history`` as a list of ``(noise_multiplier, sample_rate,
    num_steps)`` with consecutive repeated steps merged.

    Parameters
    ----------
    accountant : {"pld", "rdp"}
        Engine; PLD by default (``get_epsilon`` returns its certified upper bound).
    accuracy : float
        PLD accuracy (relative width of the certified epsilon interval).
    sampler : {"poisson", "shuffle", "fixed_size"}
        How the batches were drawn (:mod:`sgmfast.pld.samplers`). Opacus samples Poisson batches
        by default; with ``make_private(..., poisson_sampling=False)`` it walks through shuffled
        data in batches (sample_rate = 1 / batches per epoch) but its own accountants still
        account for Poisson sampling: ``sampler="shuffle"`` accounts for what ran (random
        allocation, add/remove; use ``drop_last=True`` loaders, so that sample_rate is 1 over
        whole batches, and note that the analysis is of balls-in-bins batching, the closest
        analysed model of shuffling). ``"fixed_size"``: independent batches of a fixed size
        (replace-one), any mix of noise and sample rates (``pld.fixed_size.epsilon_runs``, or
        RDP's curves added). Shuffled batches keep one sample rate; a noise that changes during
        the run is bracketed between the runs at its smallest (upper bound) and largest (lower
        bound) noise -- a step with more noise is a post-processing of one with less.
    """

    def __init__(self, accountant: str = "pld", accuracy: float = 1e-3, sampler: str = "poisson"):
        from ..calibrate.noise import check_sampler

        self.history: list[tuple[float, float, int]] = []
        self._engine = check_engine(accountant)
        self._accuracy = float(accuracy)
        self._sampler = check_sampler(sampler, self._engine)
        self._cache = ScheduleCache(self._engine, accuracy)

    def step(self, *, noise_multiplier: float, sample_rate: float) -> None:
        s = float(check_sigma(noise_multiplier, "noise_multiplier"))
        q = float(check_q(sample_rate, "sample_rate"))
        if self.history and self.history[-1][0] == s and self.history[-1][1] == q:
            self.history[-1] = (s, q, self.history[-1][2] + 1)
        else:
            self.history.append((s, q, 1))

    def _steps(self) -> tuple[Step, ...]:
        return tuple(Step(float(s), float(q), int(n)) for s, q, n in self.history if n > 0)

    def _run(self):
        """(smallest sigma, largest sigma, q, T) of a non-Poisson run, or None with no steps; a
        ValueError if the sample rate changed (these samplers' certifiers take one)."""
        steps = self._steps()
        if not steps:
            return None
        qs = {st.q for st in steps}
        if len(qs) > 1:
            raise ValueError(f"sampler {self._sampler!r}: the run must keep one sample_rate; found {sorted(qs)}")
        sig = [st.sigma for st in steps]
        return min(sig), max(sig), steps[0].q, sum(st.count for st in steps)

    def get_epsilon_bounds(self, delta: float) -> Bounds:
        """Certified (lower, upper) epsilon; lower is NaN for the RDP engine."""
        d = float(check_delta(delta))
        if self._sampler == "poisson":
            return self._cache.epsilon(self._steps(), d)
        if self._sampler == "fixed_size":
            return fixed_size_bounds(self._engine, self._steps(), "epsilon", d, self._accuracy)
        run = self._run()
        if run is None:
            return Bounds(0.0, 0.0)
        from .. import pld

        lo, hi, q, t = run
        up = pld.epsilon(lo, q, t, d, accuracy=self._accuracy, sampler=self._sampler)
        if hi == lo:
            return up
        low = pld.epsilon(hi, q, t, d, accuracy=self._accuracy, sampler=self._sampler)
        return Bounds(float(low.lower), float(up.upper))

    def get_epsilon(self, delta: float, *args, **kwargs) -> float:
        """Epsilon spent so far at ``delta``: sgmfast's certified upper bound."""
        return float(self.get_epsilon_bounds(delta).upper)

    def get_privacy_spent(self, *, delta: float, **kwargs) -> tuple[float, Optional[float]]:
        """(epsilon, None), for code written against Opacus's RDP accountant."""
        return self.get_epsilon(delta), None

    def get_delta(self, epsilon: float) -> float:
        """Smallest certified delta at ``epsilon``."""
        e = float(check_epsilon(epsilon))
        if self._sampler == "poisson":
            return float(self._cache.delta(self._steps(), e).upper)
        if self._sampler == "fixed_size":
            return float(fixed_size_bounds(self._engine, self._steps(), "delta", e, self._accuracy).upper)
        run = self._run()
        if run is None:
            return 0.0
        from .. import pld

        lo, _hi, q, t = run
        return float(pld.delta(lo, q, t, e, accuracy=self._accuracy, sampler=self._sampler).upper)

    def __len__(self) -> int:
        return int(sum(n for _, _, n in self.history))

    @classmethod
    def mechanism(cls) -> str:
        return MECHANISM


def get_noise_multiplier(
    *,
    target_epsilon: float,
    target_delta: float,
    sample_rate: float,
    epochs: Optional[float] = None,
    steps: Optional[int] = None,
    accountant: str = "pld",
    epsilon_tolerance: float = 0.01,
    sampler: str = "poisson",
    **kwargs,
) -> float:
    """Drop-in for ``opacus.accountants.utils.get_noise_multiplier``.

    Returns the smallest noise multiplier whose certified epsilon is <= ``target_epsilon``
    (to 1e-4 relative with PLD, 1e-6 with RDP; ``epsilon_tolerance`` is accepted and ignored:
    the result is never on the wrong side of the target). Steps from epochs follow Opacus:
    ``int(epochs / sample_rate)``. ``accountant`` may be "pld", "rdp" or Opacus's names
    "prv"/"sgmfast" (mapped to PLD) and "gdp" (rejected: not a bound). ``sampler`` as in
    :class:`SGMFastAccountant` (``"shuffle"`` for ``poisson_sampling=False`` loaders).
    """
    from ..calibrate import calibrate_sigma

    if (steps is None) == (epochs is None):
        raise ValueError("get_noise_multiplier takes either a number of steps or a number of epochs")
    q = float(check_q(sample_rate, "sample_rate"))
    if steps is None:
        steps = int(float(epochs) / q)
    engine = {"prv": "pld", "sgmfast": "pld", "pld": "pld", "rdp": "rdp"}.get(accountant)
    if engine is None:
        raise ValueError(f"accountant must be 'pld', 'rdp', 'prv' or 'sgmfast'; got {accountant!r}")
    return float(calibrate_sigma(target_epsilon, target_delta, q, steps, accountant=engine,
                                 accuracy=kwargs.get("accuracy", 1e-3), sampler=sampler))


if MECHANISM not in _ACCOUNTANTS:
    register_accountant(MECHANISM, SGMFastAccountant)
