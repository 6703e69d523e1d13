"""Argument checks at the API boundary: one function per rule.

Every check runs before any work or state change, rejects NaN and booleans,
and raises ``ValueError`` (or ``TypeError`` for a wrong kind of object) with a
message of the form "q (sampling rate) must be in (0, 1]; got 1.5".
Each returns a float64 (or int64) numpy array, so callers can broadcast.
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = [
    "as_float_array",
    "check_q",
    "check_sigma",
    "check_delta",
    "check_epsilon",
    "check_steps",
    "check_checkpoints",
    "check_orders",
    "check_positive_int",
    "check_positive",
    "check_accuracy",
]


def _show(bad) -> str:
    return np.array2string(np.asarray(bad), threshold=4) if np.ndim(bad) else repr(bad.item() if hasattr(bad, "item") else bad)


def as_float_array(value, name: str) -> np.ndarray:
    """Convert to a float64 array; booleans, strings and non-numbers are a TypeError."""
    if type(value) is float or (type(value) is int and abs(value) <= 2**53):
        # (a Python number, the common case: the same array and errors as the general path below,
        # without its ~15 us of numpy reductions -- calibration loops call this thousands of times)
        if value != value:
            raise ValueError(f"{name} must not be NaN; got {value!r}")
        return np.array(float(value))
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a number; got the boolean {value!r}")
    if isinstance(value, int) and abs(value) > 2**53:
        value = float(value)  # (a Python int beyond int64 would become an object array)
    try:
        arr = np.asarray(value)
    except Exception as exc:  # pragma: no cover - numpy raises many kinds
        raise TypeError(f"{name} must be a number or an array of numbers; got {value!r}") from exc
    if arr.dtype == bool:
        raise TypeError(f"{name} must be numeric; got booleans")
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be a number or an array of numbers; got {value!r}")
    arr = arr.astype(np.float64)
    if arr.size == 0:
        raise ValueError(f"{name} must not be empty")
    if np.isnan(arr).any():
        raise ValueError(f"{name} must not be NaN; got {_show(arr[np.isnan(arr)][0])}")
    return arr


def _all(ok) -> bool:
    """ok.all(), without numpy's reduction for a single number (~4 us of every scalar check)."""
    return bool(ok) if ok.ndim == 0 else bool(ok.all())


def _first_bad(arr: np.ndarray, ok: np.ndarray):
    return arr[~ok].flat[0]


def check_q(q, name: str = "q") -> np.ndarray:
    """Sampling rate q in [0, 1] (q = 0: no record is ever used, a step does nothing)."""
    arr = as_float_array(q, name)
    ok = (arr >= 0.0) & (arr <= 1.0)
    if not _all(ok):
        raise ValueError(f"{name} (sampling rate) must be in [0, 1]; got {_show(_first_bad(arr, ok))}")
    return arr


def check_sigma(sigma, name: str = "sigma") -> np.ndarray:
    """Noise multiplier sigma in [0, +inf] (0: no noise; +inf: a step that reveals nothing)."""
    arr = as_float_array(sigma, name)
    ok = arr >= 0.0
    if not _all(ok):
        raise ValueError(f"{name} (noise multiplier) must be >= 0 (+inf allowed); got {_show(_first_bad(arr, ok))}")
    return arr


def check_positive(value, name: str) -> np.ndarray:
    """A finite number > 0 (clipping norm, grid step, ...)."""
    arr = as_float_array(value, name)
    ok = np.isfinite(arr) & (arr > 0.0)
    if not _all(ok):
        raise ValueError(f"{name} must be finite and > 0; got {_show(_first_bad(arr, ok))}")
    return arr


def check_delta(delta, name: str = "delta") -> np.ndarray:
    """delta in (0, 1)."""
    arr = as_float_array(delta, name)
    ok = (arr > 0.0) & (arr < 1.0)
    if not _all(ok):
        raise ValueError(f"{name} must be in (0, 1); got {_show(_first_bad(arr, ok))}")
    return arr


def check_epsilon(epsilon, name: str = "epsilon") -> np.ndarray:
    """epsilon (nats) in [0, +inf]."""
    arr = as_float_array(epsilon, name)
    ok = arr >= 0.0
    if not _all(ok):
        raise ValueError(f"{name} must be >= 0 (+inf allowed); got {_show(_first_bad(arr, ok))}")
    return arr


def check_accuracy(accuracy, name: str = "accuracy") -> float:
    """The target relative width of a certified interval: one real number in (0, 1)."""
    if isinstance(accuracy, (bool, np.bool_)) or not isinstance(accuracy, (numbers.Real, np.floating, np.integer)):
        raise TypeError(f"{name} must be a real number in (0, 1); got {accuracy!r}")
    acc = float(accuracy)
    if not (0.0 < acc < 1.0):
        raise ValueError(f"{name} must be in (0, 1); got {accuracy!r}")
    return acc


def check_steps(steps, name: str = "steps") -> np.ndarray:
    """Number of steps: a non-negative integer (as int or integral float), returned as float64."""
    arr = as_float_array(steps, name)
    ok = np.isfinite(arr) & (arr >= 0.0) & (arr == np.floor(arr))
    if not _all(ok):
        raise ValueError(f"{name} must be a non-negative integer; got {_show(_first_bad(arr, ok))}")
    return arr


def check_checkpoints(steps, name: str = "steps") -> np.ndarray:
    """Checkpoints of a run: a non-empty 1-D increasing array of step counts (int64)."""
    arr = np.atleast_1d(check_steps(steps, name))
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a one-dimensional array of checkpoints; got shape {arr.shape}")
    if arr.size > 1 and not (np.diff(arr) > 0).all():
        raise ValueError(f"{name} must be strictly increasing; got {_show(arr)}")
    if arr[-1] > 2**62:
        raise ValueError(f"{name} must be at most 2**62; got {_show(arr[-1])}")
    return arr.astype(np.int64)


def check_positive_int(value, name: str) -> int:
    """A single integer >= 1 (dataset size, batch size, epochs)."""
    arr = as_float_array(value, name)
    if arr.ndim != 0 or not np.isfinite(arr) or arr < 1 or arr != np.floor(arr):
        raise ValueError(f"{name} must be an integer >= 1; got {_show(arr)}")
    return int(arr)


def check_orders(orders, name: str = "orders") -> np.ndarray:
    """RDP orders: a 1-D array of finite values > 1."""
    arr = np.atleast_1d(as_float_array(orders, name))
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional; got shape {arr.shape}")
    ok = np.isfinite(arr) & (arr > 1.0)
    if not _all(ok):
        raise ValueError(f"{name} must be finite and > 1; got {_show(_first_bad(arr, ok))}")
    return arr


def check_step_scalars(sigma, q, steps, not_scalar: str) -> tuple:
    """(sigma, q, steps) of one accountant ``step()`` as Python numbers, or a ValueError (the
    message ``not_scalar`` for arrays).  Floats and a plain int are checked without numpy: an
    accountant may record a step at a time for 10^5 steps."""
    if (isinstance(sigma, float) and isinstance(q, float) and isinstance(steps, (int, np.integer))
            and not isinstance(steps, bool)
            and sigma >= 0.0 and 0.0 <= q <= 1.0 and steps >= 0):
        return float(sigma), float(q), int(steps)
    s, qq, t = check_sigma(sigma), check_q(q), check_steps(steps)
    if s.ndim or qq.ndim or t.ndim:
        raise ValueError(not_scalar)
    return float(s), float(qq), int(t)
