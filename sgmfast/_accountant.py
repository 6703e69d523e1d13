"""The accountant contract that :class:`sgmfast.rdp.RDPAccountant` and
:class:`sgmfast.pld.PLDAccountant` share, and calibration and the adapters use.

An accountant records a run as segments of SGM steps -- ``step(sigma, q, steps)`` -- and answers
for the whole run:

=====================  ========================================================================
``step``               record ``steps`` steps of noise multiplier sigma and sampling rate q;
                       returns the accountant, so calls chain
``epsilon(delta)``     its answer: a float upper bound (RDP) or certified ``Bounds`` (PLD)
``delta(epsilon)``     the same for δ
``epsilon_upper``      the upper bound alone, a float, whatever the engine (what a target is
``delta_upper``        checked against)
``epsilon_curve``      ε(δ) after each recorded segment
``state_dict``         everything needed to rebuild it (``engine``, ``options``, ``history``);
``load_state_dict``    replaces the history and options with a saved state's
=====================  ========================================================================
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from ._types import Bounds


def upper_of(answer) -> float:
    """The upper bound of an accountant's answer (a float or ``Bounds``), as a float."""
    value = answer.upper if isinstance(answer, Bounds) else answer
    return float(np.asarray(value, dtype=np.float64).reshape(-1)[-1]) if np.ndim(value) else float(value)


class Accountant(ABC):
    """Base of the accountants (module notes). Subclasses set ``engine`` and implement ``step``,
    ``epsilon``, ``delta``, ``epsilon_curve``, ``_options`` and ``_restore``."""

    engine: str = ""

    @abstractmethod
    def step(self, sigma, q, steps=1) -> Accountant:
        """Record ``steps`` steps with noise multiplier ``sigma`` and sampling rate ``q``."""

    @abstractmethod
    def epsilon(self, delta):
        """ε at ``delta`` for the recorded run."""

    @abstractmethod
    def delta(self, epsilon):
        """δ at ``epsilon`` for the recorded run."""

    @abstractmethod
    def epsilon_curve(self, delta):
        """ε at ``delta`` after each recorded segment."""

    @abstractmethod
    def _options(self) -> dict:
        """The constructor's options, as keyword arguments."""

    def epsilon_upper(self, delta: float) -> float:
        """The upper bound on ε(``delta``), a float."""
        return upper_of(self.epsilon(delta))

    def delta_upper(self, epsilon: float) -> float:
        """The upper bound on δ(``epsilon``), a float."""
        return upper_of(self.delta(epsilon))

    def state_dict(self) -> dict:
        """``{"engine", "options", "history"}``: the history as (sigma, q, count) triples."""
        return {"engine": self.engine, "options": self._options(),
                "history": [(st.sigma, st.q, st.count) for st in self.history]}

    def load_state_dict(self, state: dict) -> Accountant:
        """Replace the options and history with ``state``'s (from :meth:`state_dict` of an
        accountant of the same engine); returns the accountant."""
        if state.get("engine") != self.engine:
            raise ValueError(f"state_dict is of engine {state.get('engine')!r}; this accountant is {self.engine!r}")
        fresh = type(self)(**state.get("options", {}))
        for sigma, q, count in state.get("history", []):
            fresh.step(float(sigma), float(q), int(count))
        self.__dict__.update(fresh.__dict__)
        return self
