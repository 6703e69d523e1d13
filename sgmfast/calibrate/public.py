"""What every calibration checks its answers with: the epsilon the public accountant reports at a
point (``_public_eps``: ``rdp.epsilon``, ``pld.epsilon(...).upper`` or the sampler's own bound),
the record of the least value seen there (``verified_epsilon``, which the CLI prints), and the
nudge that moves a fast search's answer onto a verified point (``_verified``).  The searches
(``noise``, ``run``) sit above this module; it imports none of them."""

from __future__ import annotations

import threading

import numpy as np

from .._samplers import ENGINES
from .._validation import check_epsilon

_ACCOUNTANTS = ENGINES


def _check_accountant(accountant: str) -> str:
    if accountant not in _ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {_ACCOUNTANTS}; got {accountant!r}")
    return accountant


def _check_target_epsilon(epsilon) -> np.ndarray:
    """Target epsilon in [0, +inf] (0: only delta >= the total variation can be met)."""
    return check_epsilon(epsilon)


#: The least certified upper epsilon seen at each recent point (key: ``_point_key``): the value a
#: returned answer was verified with, which a caller can report (``verified_epsilon``) -- a
#: second evaluation of the same point may be looser (a MemoryError ends a grid's refinement
#: early; both are certified upper bounds, so the least holds).
_SEEN: dict = {}
_SEEN_MAX = 256
_SEEN_LOCK = threading.Lock()


def _point_key(accountant, sigma, q, steps, delta, accuracy, sampler):
    # (RDP has no accuracy: the searches pass theirs along anyway)
    return (accountant, float(sigma), float(q), float(steps), float(delta),
            None if accuracy is None or accountant == "rdp" else float(accuracy), sampler)


def verified_epsilon(accountant, sigma, q, steps, delta, accuracy, sampler="poisson"):
    """The least certified upper epsilon a calibration in this process saw at this point, or
    None (not evaluated, or forgotten: only the last ``_SEEN_MAX`` points are kept)."""
    return _SEEN.get(_point_key(accountant, sigma, q, steps, delta, accuracy, sampler))


def _public_eps(accountant, sigma, q, steps, delta, accuracy, sampler="poisson", memo=None) -> float:
    """The epsilon the public accountant reports: what every returned value is verified with
    (Poisson: the engine's accountant, through the contract of ``sgmfast._accountant``; with a
    search's ``memo``, a certified upper bound at least that); the least value seen at each point
    is kept (``verified_epsilon``)."""
    value = _evaluate_eps(accountant, sigma, q, steps, delta, accuracy, sampler, memo)
    key = _point_key(accountant, sigma, q, steps, delta, accuracy, sampler)
    with _SEEN_LOCK:  # (calibrations may run in threads, ``executor=``)
        old = _SEEN.pop(key, None)
        _SEEN[key] = value if old is None else min(old, value)
        while len(_SEEN) > _SEEN_MAX:
            del _SEEN[next(iter(_SEEN))]
    return value


def _evaluate_eps(accountant, sigma, q, steps, delta, accuracy, sampler="poisson", memo=None) -> float:
    """``_public_eps`` without the record (``memo``: a search's, ``fixed_size.upper_epsilon``)."""
    if sampler == "shuffle":  # (its upper bound alone: the lower one is not needed here)
        from ..pld import samplers, shuffle

        return shuffle.upper_epsilon(float(sigma), samplers.batches_per_epoch(float(q), sampler), int(steps),
                                     float(delta))
    if sampler != "poisson":
        if accountant == "rdp":
            from .. import rdp

            return float(rdp.epsilon(float(sigma), float(q), float(steps), float(delta), sampler=sampler))
        from .. import pld

        if sampler == "fixed_size":  # (the same upper bound, without the lower bound's own work)
            from ..pld.samplers import fixed_size

            return fixed_size.upper_epsilon(float(sigma), float(q), int(steps), float(delta), accuracy=accuracy,
                                            memo=memo)
        return float(pld.epsilon(float(sigma), float(q), int(steps), float(delta), accuracy=accuracy,
                                 sampler=sampler).upper)
    return _make_accountant(accountant, accuracy).step(float(sigma), float(q), steps).epsilon_upper(float(delta))


def _make_accountant(engine: str, accuracy: float):
    """A fresh accountant of ``engine`` ("pld" at ``accuracy``, or "rdp")."""
    from ..pld import PLDAccountant
    from ..rdp import RDPAccountant

    return {"pld": lambda: PLDAccountant(accuracy=accuracy), "rdp": RDPAccountant}[engine]()


def _verified(accountant, eps, value, check, up: bool, tol):
    """Nudge ``value`` towards privacy (up for sigma, down for q) until the public accountant
    meets the target there (grid effects can leave a fast search's answer a hair short)."""
    for k in range(200):
        if check(value):
            return value
        value = value * (1 + tol * 2.0**k) if up else value / (1 + tol * 2.0**k)
    raise ValueError(f"calibration could not verify a value for epsilon={eps:g} (please report)")
