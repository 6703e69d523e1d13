"""Opacus adapter: an accountant for ``PrivacyEngine`` backed by sgmfast, and a drop-in
``get_noise_multiplier``.

Importing this module registers the accountant with Opacus under the mechanism name
``"sgmfast"`` (and one name per sampler, relation and engine, e.g.
``"sgmfast[sampler=shuffle,relation=zero_out,accountant=pld]"``), so
``PrivacyEngine(accountant="sgmfast")`` works; or attach an instance before ``make_private``,
``privacy_engine.accountant = SGMFastAccountant(...)``.

**The sampler travels with the run.**  What an accountant certifies is only as good as the match
between its sampler and the data loader, so importing this module also makes ``PrivacyEngine``

* tell an sgmfast accountant how the batches are drawn when ``make_private`` (or
  ``make_private_with_epsilon``) runs: Poisson with ``poisson_sampling=True`` (Opacus then draws
  Poisson batches); with ``poisson_sampling=False`` the loader's own batches -- the sampler of an
  ``sgmfast.integrations.torch`` batch sampler, otherwise the permutation shuffle of a
  ``DataLoader(shuffle=True)`` (``sampler="shuffle"``).  An accountant whose sampler was named
  and does not match raises ``ValueError``; one left unnamed takes the loader's;
* calibrate ``make_private_with_epsilon`` with that sampler: the mechanism name carries it, so
  Opacus's ``get_noise_multiplier`` builds the same accountant;
* refuse (``RuntimeError``, at once) an sgmfast accountant attached after ``make_private``: the
  optimizer's step hook belongs to the accountant that was there, and the new one would record
  nothing.

``state_dict`` stores the sampler, relation and engine beside the history; loading a state into
an accountant of another mechanism raises ``ValueError`` (Opacus's own check, on the full name).

Examples
--------
>>> from sgmfast.integrations.opacus import SGMFastAccountant   # doctest: +SKIP
>>> acc = SGMFastAccountant()                                     # doctest: +SKIP
>>> for _ in range(1000):                                         # doctest: +SKIP
...     acc.step(noise_multiplier=1.0, sample_rate=0.01)
>>> acc.get_epsilon(delta=1e-5)                                   # doctest: +SKIP
"""

from __future__ import annotations

import functools
import warnings
from typing import Optional

from opacus import PrivacyEngine
from opacus.accountants.accountant import IAccountant
from opacus.accountants.registry import _ACCOUNTANTS, register_accountant

from .._types import Bounds, Step
from .._validation import check_delta, check_epsilon, check_q, check_sigma
from ._common import ScheduleCache, check_engine, fixed_size_bounds

__all__ = ["SGMFastAccountant", "get_noise_multiplier", "MECHANISM", "mechanism_name"]

MECHANISM = "sgmfast"
_DEFAULT = ("poisson", "add_remove", "pld")


def mechanism_name(sampler: str = "poisson", relation: str = "add_remove", accountant: str = "pld") -> str:
    """The Opacus mechanism name of an accountant: ``"sgmfast"`` for Poisson, add/remove, PLD;
    otherwise ``"sgmfast[sampler=...,relation=...,accountant=...]"``."""
    if (sampler, relation, accountant) == _DEFAULT:
        return MECHANISM
    return f"{MECHANISM}[sampler={sampler},relation={relation},accountant={accountant}]"


class _Mechanism:
    """``mechanism()`` on an instance: its own name; on the class (Opacus's registry calls it
    there): the default configuration's, ``"sgmfast"``."""

    def __get__(self, obj, cls):
        name = MECHANISM if obj is None else obj._name
        return lambda: name


def _check_config(sampler: str, relation: Optional[str], engine: str) -> tuple[str, str]:
    """(sampler, relation) validated for ``engine``: a ValueError naming what is wrong."""
    from .._samplers import resolve

    return sampler, resolve(sampler, relation, engine)


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
    sampler : {"poisson", "balls_in_bins", "shuffle", "fixed_size"}, optional
        How the batches were drawn (:mod:`sgmfast.pld.samplers`).  Left out (None), the
        accountant takes the run's sampler when ``make_private`` runs (module notes): Poisson
        with Opacus's default ``poisson_sampling=True``; with ``poisson_sampling=False`` the
        sampler of an ``sgmfast.integrations.torch`` batch sampler, else ``"shuffle"`` -- the
        permutation shuffle of ``DataLoader(shuffle=True)``, certified soundly but loosely
        (:mod:`sgmfast.pld.shuffle`: no amplification is proved for it, so ε can be many times
        Poisson's; run ``PoissonBatchSampler`` or ``BallsInBinsBatchSampler`` for tight accounting).
        ``"balls_in_bins"``: random allocation (tight, PLD only); ``"fixed_size"``: independent
        batches of a fixed size (replace-one), any mix of noise and sample rates.  The epoch
        samplers keep one sample rate; a noise that changes during the run is bracketed between
        the runs at its smallest (upper bound) and largest (lower bound) noise -- a step with
        more noise is a post-processing of one with less.
    relation : str, optional
        Neighbouring relation (default: the sampler's own; ``"replace_one"`` also for Poisson
        with PLD and for the shuffle).
    """

    mechanism = _Mechanism()

    def __init__(self, accountant: str = "pld", accuracy: float = 1e-3, sampler: Optional[str] = None,
                 relation: Optional[str] = None):
        self.history: list[tuple[float, float, int]] = []
        self._engine = check_engine(accountant)
        self._accuracy = float(accuracy)
        self._named = sampler is not None
        self._configure("poisson" if sampler is None else sampler, relation)

    def _configure(self, sampler: str, relation: Optional[str]) -> None:
        self._sampler, self._relation = _check_config(sampler, relation, self._engine)
        self._name = mechanism_name(self._sampler, self._relation, self._engine)
        self._cache = ScheduleCache(self._engine, self._accuracy, self._relation)

    @property
    def sampler(self) -> str:
        """The sampler accounted for (:mod:`sgmfast.pld.samplers`)."""
        return self._sampler

    @property
    def relation(self) -> str:
        return self._relation

    def bind_run(self, sampler: str) -> None:
        """Account for batches drawn by ``sampler`` (``PrivacyEngine.make_private`` calls this):
        an accountant whose sampler was named must match it (ValueError otherwise); one left
        unnamed takes it, if it has recorded no step under another."""
        if sampler == self._sampler:
            return
        if self._named:
            raise ValueError(f"this run draws its batches by {sampler!r} but the accountant was made for "
                             f"sampler {self._sampler!r}; make it with sampler={sampler!r} (or change the loader)")
        if self.history:
            raise ValueError(f"the accountant has recorded {len(self)} steps under sampler {self._sampler!r}; "
                             f"a run drawing its batches by {sampler!r} needs an accountant of its own")
        self._configure(sampler, None)

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
        """(smallest sigma, largest sigma, q, T) of an epoch sampler's run, or None with no steps;
        a ValueError if the sample rate changed (these samplers' certifiers take one)."""
        steps = self._steps()
        if not steps:
            return None
        qs = {st.q for st in steps}
        if len(qs) > 1:
            raise ValueError(f"sampler {self._sampler!r}: the run must keep one sample_rate; found {sorted(qs)}")
        sig = [st.sigma for st in steps]
        return min(sig), max(sig), steps[0].q, sum(st.count for st in steps)

    def _epoch_query(self, kind: str, value: float, sigma_at: int) -> Bounds:
        from .. import pld

        lo, hi, q, t = self._run()
        return getattr(pld, kind)((lo, hi)[sigma_at], q, t, value, accuracy=self._accuracy, sampler=self._sampler,
                                  relation=self._relation)

    def get_epsilon_bounds(self, delta: float) -> Bounds:
        """Certified (lower, upper) epsilon; lower is NaN for the RDP engine."""
        d = float(check_delta(delta))
        if self._sampler == "poisson":
            return self._cache.epsilon(self._steps(), d)
        if self._sampler == "fixed_size":
            return fixed_size_bounds(self._engine, self._steps(), "epsilon", d, self._accuracy)
        if self._run() is None:
            return Bounds(0.0, 0.0)
        up = self._epoch_query("epsilon", d, 0)
        if self._run()[0] == self._run()[1]:
            return up
        return Bounds(float(self._epoch_query("epsilon", d, 1).lower), float(up.upper))

    def get_epsilon(self, delta: float, *args, **kwargs) -> float:
        """Epsilon spent so far at ``delta``: sgmfast's certified upper bound."""
        if self._sampler == "shuffle" and self._run() is not None:
            from ..pld import samplers, shuffle

            lo, _hi, q, t = self._run()  # (the upper bound alone: a closed form, no lower bound needed)
            warnings.warn(samplers.SHUFFLE_NOTE, samplers.LooseBoundWarning, stacklevel=2)
            return shuffle.upper_epsilon(lo, samplers.batches_per_epoch(q, "shuffle"), t,
                                         float(check_delta(delta)), self._relation)
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
        if self._run() is None:
            return 0.0
        return float(self._epoch_query("delta", e, 0).upper)

    def state_dict(self, destination=None):
        """Opacus's state (history, mechanism name) with the sampler, relation and engine."""
        state = super().state_dict(destination)
        state["sampler"], state["relation"], state["accountant"] = self._sampler, self._relation, self._engine
        return state

    def load_state_dict(self, state_dict) -> None:
        """Load a state saved by an accountant of the same mechanism (sampler, relation, engine);
        anything else raises ValueError (a run resumed under another sampler would be
        mis-accounted)."""
        if state_dict:
            saved = tuple(state_dict.get(k, d) for k, d in zip(("sampler", "relation", "accountant"), _DEFAULT))
            if saved != (self._sampler, self._relation, self._engine):
                raise ValueError(f"state_dict of mechanism {state_dict.get('mechanism')!r} ({saved[0]} batches, "
                                 f"{saved[1]}, {saved[2]}) cannot be loaded into an accountant of mechanism "
                                 f"{self._name!r}")
        super().load_state_dict(state_dict)
        self.history = [tuple(h) for h in self.history]

    def __len__(self) -> int:
        return int(sum(n for _, _, n in self.history))


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
    "prv"/"sgmfast" (mapped to PLD), a full sgmfast mechanism name (its sampler, relation and
    engine) and "gdp" (rejected: not a bound). ``sampler`` as in :class:`SGMFastAccountant`
    (``"shuffle"`` for ``poisson_sampling=False`` loaders over ``DataLoader(shuffle=True)``).
    """
    from ..calibrate import calibrate_sigma

    if (steps is None) == (epochs is None):
        raise ValueError("get_noise_multiplier takes either a number of steps or a number of epochs")
    q = float(check_q(sample_rate, "sample_rate"))
    if steps is None:
        steps = int(float(epochs) / q)
    relation = None
    if accountant.startswith(MECHANISM + "["):  # a full mechanism name: its sampler and relation
        config = dict(kv.split("=", 1) for kv in accountant[len(MECHANISM) + 1:-1].split(","))
        named = config.get("sampler", "poisson")
        if sampler not in ("poisson", named):
            raise ValueError(f"sampler {sampler!r} does not match the mechanism {accountant!r}")
        sampler, relation, accountant = named, config.get("relation"), config.get("accountant", "pld")
    engine = {"prv": "pld", "sgmfast": "pld", "pld": "pld", "rdp": "rdp"}.get(accountant)
    if engine is None:
        raise ValueError(f"accountant must be 'pld', 'rdp', 'prv' or 'sgmfast'; got {accountant!r}")
    sampler, relation = _check_config(sampler, relation, engine)
    scale = 1.0
    if relation != _check_config(sampler, None, engine)[1]:
        if sampler != "shuffle":
            raise ValueError(f"get_noise_multiplier calibrates sampler {sampler!r} under its own relation only")
        scale = 2.0  # the shuffle's replace-one bound is its zero-out bound at half the noise (pld.shuffle)
    return scale * float(calibrate_sigma(target_epsilon, target_delta, q, steps, accountant=engine,
                                         accuracy=kwargs.get("accuracy", 1e-3), sampler=sampler))


def _register() -> None:
    """Every valid (sampler, relation, engine) under its mechanism name, so that Opacus's
    ``create_accountant`` (``get_noise_multiplier``, ``make_private_with_epsilon``) rebuilds the
    accountant it is asked about."""
    from .._samplers import TABLE

    for sampler, row in TABLE.items():
        for engine, relations in row.relations.items():
            for relation in relations:
                name = mechanism_name(sampler, relation, engine)
                if name not in _ACCOUNTANTS:
                    factory = SGMFastAccountant if name == MECHANISM else functools.partial(
                        SGMFastAccountant, accountant=engine, sampler=sampler, relation=relation)
                    register_accountant(name, factory)


def _run_sampler(kwargs) -> str:
    """The sampler of the run ``make_private`` is asked for (module notes)."""
    if kwargs.get("poisson_sampling", True):
        return "poisson"
    loader = kwargs.get("data_loader")
    own = getattr(getattr(loader, "batch_sampler", None), "sampler", None)
    from .._samplers import SAMPLERS

    return own if isinstance(own, str) and own in SAMPLERS else "shuffle"


def _bind(method):
    """``make_private`` / ``make_private_with_epsilon`` that first bind an sgmfast accountant to
    the run's sampler, and mark the engine as made private."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        acc = self.__dict__.get("accountant")
        if isinstance(acc, SGMFastAccountant):
            acc.bind_run(_run_sampler(kwargs))
        out = method(self, *args, **kwargs)
        self.__dict__["_sgmfast_made_private"] = True
        return out

    wrapper._sgmfast = True
    return wrapper


def _get_accountant(engine):
    return engine.__dict__["accountant"]


def _set_accountant(engine, value):
    if isinstance(value, SGMFastAccountant) and engine.__dict__.get("_sgmfast_made_private") \
            and value is not engine.__dict__.get("accountant"):
        raise RuntimeError("attach the sgmfast accountant before make_private (PrivacyEngine(accountant=...) or "
                           "engine.accountant = ... first): the optimizer's step hook belongs to the accountant "
                           "that was there, and this one would record no step")
    engine.__dict__["accountant"] = value


def _patch_engine() -> None:
    if getattr(PrivacyEngine.make_private, "_sgmfast", False):
        return
    PrivacyEngine.make_private = _bind(PrivacyEngine.make_private)
    PrivacyEngine.make_private_with_epsilon = _bind(PrivacyEngine.make_private_with_epsilon)
    PrivacyEngine.accountant = property(_get_accountant, _set_accountant)


_register()
_patch_engine()
