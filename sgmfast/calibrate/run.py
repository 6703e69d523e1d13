"""The run's shape: the largest sampling rate or batch size, or the most steps or epochs, whose
certified epsilon meets a target at a given noise multiplier (each point verified by the public
accountant, like ``noise.calibrate_sigma``)."""

from __future__ import annotations

import math

import numpy as np

from .._executor import CHUNK_PLD, CHUNK_RDP, check_executor, chunked

from .._kernels import calibrate as _kc
from .._validation import (check_accuracy, check_delta, check_epsilon, check_positive_int, check_q, check_sigma,
                           check_steps)
from .noise import PLD_TOL, RDP_TOL, STEPS_MAX, _broadcast, _check_sampler, _PldUpper, _rdp_solve
from .public import _check_accountant, _check_target_epsilon, _public_eps, _verified
from .roots import _int_boundary, _search_log

def calibrate_q(epsilon, delta, sigma, steps, *, accountant: str = "pld", accuracy: float = 1e-3, executor=None):
    """Largest sampling rate q in [0, 1] whose certified epsilon is <= ``epsilon``.

    Returns q (broadcast over the inputs), verified by the public accountant; q = 1 if even full
    batches meet the target; q = 0 only if every q > 0 exceeds it at the search's resolution.
    ``executor``: as in :func:`calibrate_sigma`.

    Examples
    --------
    >>> from sgmfast.calibrate import calibrate_q
    >>> q = calibrate_q(2.0, 1e-5, 1.0, 1000, accountant="rdp")
    >>> 0.009 < q < 0.011
    True
    """
    _check_accountant(accountant)
    arrays = (_check_target_epsilon(epsilon), check_delta(delta), check_sigma(sigma), check_steps(steps))
    return _vectorised("_q_point", arrays, (), dict(accountant=accountant, accuracy=check_accuracy(accuracy)),
                       accountant, executor)


def _q_point(eps, delta, sigma, steps, *, accountant="pld", accuracy=1e-3):
    check = lambda q: _public_eps(accountant, sigma, q, steps, delta, accuracy) <= eps  # noqa: E731
    if check(1.0):
        return 1.0
    if sigma == 0.0:
        # no noise: delta(eps) = 1 - (1 - q)^T, so q = 1 - (1 - delta)^(1/T), rounded down
        q = -math.expm1(math.log1p(-delta) / steps) * (1 - 1e-12)
        return _verified(accountant, eps, q, check, False, 1e-12)
    tol = RDP_TOL if accountant == "rdp" else PLD_TOL
    # start at the Gaussian asymptote q ~ sigma / sigma(1, T) (Räisä et al., ICML 2024, Cor. 5.4)
    s1 = _kc.gaussian_sigma(max(eps, 1e-300), math.log(delta)) * math.sqrt(max(steps, 1.0))
    x0 = math.log(min(1.0, max(sigma / s1, 1e-300)))
    stop = None
    if accountant == "pld":
        upper = _PldUpper(accuracy)
        fast = lambda x: upper(sigma, min(1.0, math.exp(x)), steps, delta) <= eps  # noqa: E731
        stop = upper.spent
    else:
        fast = lambda x: check(min(1.0, math.exp(x)))  # noqa: E731
    x = _search_log(fast, x0, False, tol, x_max=0.0, stop=stop)
    if x is None:
        return 0.0
    return _verified(accountant, eps, min(1.0, math.exp(x)), check, False, tol)


def calibrate_batch_size(epsilon, delta, sigma, dataset_size, *, steps=None, epochs=None,
                         accountant="pld", accuracy=1e-3, executor=None, sampler: str = "poisson"):
    """Largest expected batch size B (q = B / dataset_size) whose certified epsilon is <= ``epsilon``.

    Give either ``steps`` (fixed number of steps) or ``epochs`` (fixed number of passes:
    steps = ceil(epochs * dataset_size / B) then changes with B). With epochs fixed, the
    search is a bisection over integers that assumes epsilon grows with B (it does: the
    effective noise sigma/q dominates, Räisä et al. 2024); the returned B is verified by the
    public accountant.  Returns 0 if not even B = 1 fits.  ``epsilon``, ``delta`` and ``sigma``
    broadcast (an int array comes back); ``executor``: as in :func:`calibrate_sigma`.

    ``sampler`` (:mod:`sgmfast.pld.samplers`; balls-in-bins and shuffle: PLD only): ``"poisson"``
    (expected batch size), ``"fixed_size"`` (batches of exactly B drawn without replacement,
    replace-one), ``"balls_in_bins"`` (each epoch, every example in one of n // B batches at random)
    or ``"shuffle"`` (each epoch a permutation cut into n // B whole batches of B, the rest dropped;
    sound, loose bound: :mod:`sgmfast.pld.shuffle`); for the epoch samplers with ``epochs``,
    T = ceil(epochs * (n // B)).  The returned B's run, accounted by
    the public accountant's ``epsilon(..., sampler=sampler)`` (``samplers.run_of_batch`` gives its
    q and T), meets the target.

    Examples
    --------
    >>> from sgmfast.calibrate import calibrate_batch_size
    >>> calibrate_batch_size(2.0, 1e-5, 1.0, 60000, steps=1000, accountant="rdp")
    569
    >>> calibrate_batch_size([1.0, 2.0], 1e-5, 1.0, 60000, steps=1000, accountant="rdp").tolist()
    [213, 569]
    """
    _check_accountant(accountant)
    acc = check_accuracy(accuracy)
    n = check_positive_int(dataset_size, "dataset_size")
    if (steps is None) == (epochs is None):
        raise ValueError("give exactly one of steps and epochs")
    if steps is not None:
        check_steps(steps)
    elif not 0.0 < float(check_epsilon(epochs, "epochs")) < math.inf:
        raise ValueError(f"epochs must be finite and > 0; got {float(epochs):g}")
    _check_sampler(sampler, accountant)
    kwargs = dict(steps=steps, epochs=epochs, accountant=accountant, accuracy=acc, sampler=sampler)
    _check_target_epsilon(epsilon), check_delta(delta), check_sigma(sigma)
    out = _vectorised("_batch_size_point", (epsilon, delta, sigma), (n,), kwargs, accountant, executor)
    return int(out) if np.ndim(out) == 0 else out.astype(np.int64)


def _batch_size_point(epsilon, delta, sigma, n, *, steps=None, epochs=None, accountant="pld", accuracy=1e-3,
                      sampler="poisson"):
    acc = accuracy
    e = float(_check_target_epsilon(epsilon))
    d = float(check_delta(delta))
    s = float(check_sigma(sigma))
    n = int(n)
    if (steps is None) == (epochs is None):
        raise ValueError("give exactly one of steps and epochs")
    if steps is not None:
        t = float(check_steps(steps))
        steps_of = lambda b: t  # noqa: E731
    else:
        ep = float(check_epsilon(epochs, "epochs"))
        if not 0.0 < ep < math.inf:
            raise ValueError(f"epochs must be finite and > 0; got {ep:g}")
        steps_of = lambda b: float(math.ceil(ep * n / b - 1e-9))  # noqa: E731
    if sampler != "poisson":
        from ..pld.samplers import run_of_batch

        def public_ok(b):
            q, t = run_of_batch(sampler, b, n, steps, ep if steps is None else None)
            return _public_eps(accountant, s, q, t, d, acc, sampler) <= e
        # epsilon grows with B (fewer, larger batches): bisection on the public bound itself
        if not public_ok(1):
            return 0
        return n if public_ok(n) else _int_boundary(public_ok, public_ok, 1, n)
    public_ok = lambda b: _public_eps(accountant, s, b / n, steps_of(b), d, acc) <= e  # noqa: E731
    if not public_ok(1):
        return 0
    if public_ok(n):
        return n
    if accountant == "pld":
        upper = _PldUpper(acc)
        ok = lambda b: upper(s, b / n, steps_of(b), d) <= e  # noqa: E731
    else:
        ok = public_ok
    lo = 1
    if steps is not None:
        # start from the continuous answer
        q = calibrate_q(e, d, s, steps, accountant=accountant, accuracy=acc)
        lo = max(1, min(n - 1, int(math.floor(q * n + 1e-9))))
        if not ok(lo):
            lo = 1
    return _int_boundary(ok, public_ok, lo, n)


def calibrate_steps(epsilon, delta, sigma, q, *, accountant: str = "pld", accuracy: float = 1e-3, executor=None):
    """Largest integer number of steps whose certified epsilon is <= ``epsilon``.

    Returns 0 if not even one step fits, and ``math.inf`` when every number of steps does (q = 0,
    sigma = inf, epsilon = inf, or delta at or above the total variation of any number of steps
    cannot happen with noise, but without sampling nothing is ever revealed).  Verified by the
    public accountant.

    Examples
    --------
    >>> from sgmfast.calibrate import calibrate_steps
    >>> t = calibrate_steps(2.0, 1e-5, 1.0, 0.01, accountant="rdp")
    >>> from sgmfast import rdp
    >>> rdp.epsilon(1.0, 0.01, t, 1e-5) <= 2.0 < rdp.epsilon(1.0, 0.01, t + 1, 1e-5)
    True

    The arguments broadcast (a float array comes back, +inf where every number of steps fits);
    ``executor``: as in :func:`calibrate_sigma`.
    """
    _check_accountant(accountant)
    acc = check_accuracy(accuracy)
    _check_target_epsilon(epsilon), check_delta(delta), check_sigma(sigma), check_q(q)
    out = _vectorised("_steps_point", (epsilon, delta, sigma, q), (), dict(accountant=accountant, accuracy=acc),
                      accountant, executor)
    if np.ndim(out) == 0:
        return math.inf if out == math.inf else int(out)
    return out


def _vectorised(name, arrays, extra, kwargs, accountant, executor):
    """The point function ``name``: ``name(*scalars, *extra, **kwargs)`` over the broadcast ``arrays``: a scalar for scalar
    inputs, else a float array of their shape; on ``executor`` in fixed chunks (each point is
    independent, so the answers are the serial call's)."""
    flat = [np.asarray(a, dtype=np.float64) for a in arrays]
    shape, flat = _broadcast(*flat)
    if check_executor(executor) is not None and flat[0].shape[0] > 1:
        out = chunked(__name__, "_chunk_points", tuple(flat), dict(point=name, extra=extra, **kwargs),
                      CHUNK_PLD if accountant == "pld" else CHUNK_RDP, executor)
    else:
        out = _chunk_points(*flat, point=name, extra=extra, **kwargs)
    return float(out[0]) if shape == () else out.reshape(shape)


def _chunk_points(*arrays, point="", extra=(), **kwargs):
    """One executor task of :func:`_vectorised`: the named point function over a chunk."""
    fn = _POINTS[point]
    return np.array([float(fn(*[float(a[i]) for a in arrays], *extra, **kwargs)) for i in range(arrays[0].shape[0])])


def _steps_point(epsilon, delta, sigma, q, *, accountant="pld", accuracy=1e-3):
    acc = accuracy
    e = float(_check_target_epsilon(epsilon))
    d = float(check_delta(delta))
    s = float(check_sigma(sigma))
    qq = float(check_q(q))
    if qq == 0.0 or s == math.inf or e == math.inf:
        return math.inf
    public_ok = lambda t: _public_eps(accountant, s, qq, t, d, acc) <= e  # noqa: E731
    if not public_ok(1):
        return 0
    if accountant == "pld":
        # the search on the fast, budgeted upper bound; the answer verified publicly below
        upper = _PldUpper(acc)
        ok = lambda t: upper(s, qq, t, d) <= e  # noqa: E731
    else:
        ok = public_ok
    if s == 0.0:
        # delta(eps) = 1 - (1 - q)^T: the largest T with it <= delta
        t = math.floor(math.log1p(-d) / math.log1p(-qq)) if qq < 1.0 else 1
        while t > 1 and not ok(t):
            t -= 1
        return int(t)
    t_lo = 1
    if accountant == "rdp" or ok(2):
        guess = np.array([max(1.0, (s * _kc.gaussian_sigma(max(e, 1e-300), math.log(d)) ** -1 / qq) ** 2)])
        tv, _got, status = _rdp_solve(_kc.KIND_STEPS, np.array([e]), np.array([d]), np.array([qq]), np.array([s]),
                                      np.zeros(1), 1.0, STEPS_MAX, guess)
        if status[0] == _kc.OK:
            t_lo = max(1, int(math.floor(tv[0])))
        while t_lo > 1 and not ok(t_lo):
            t_lo -= 1
    # exponential search upward, then bisection on integers
    step = max(1, t_lo // 64) if accountant == "pld" else 1
    t_hi = t_lo + step
    while ok(t_hi):
        t_lo = t_hi
        step *= 2
        t_hi = t_lo + step
        if t_hi > 1e300:
            return math.inf
    return _int_boundary(ok, public_ok, t_lo, t_hi)


def calibrate_epochs(epsilon, delta, sigma, q, *, accountant: str = "pld", accuracy: float = 1e-3, executor=None):
    """Largest number of epochs (steps * q) within the budget, from :func:`calibrate_steps`
    (arrays and ``executor`` as there)."""
    t = calibrate_steps(epsilon, delta, sigma, q, accountant=accountant, accuracy=accuracy, executor=executor)
    if np.ndim(t) == 0:
        return math.inf if t == math.inf else t * float(check_q(q))
    fin = np.isfinite(t)
    return np.where(fin, np.where(fin, t, 0.0) * np.broadcast_to(check_q(q), t.shape), math.inf)


#: the point functions ``_vectorised`` runs (by name, so that executor tasks pickle)
_POINTS = {"_q_point": _q_point, "_batch_size_point": _batch_size_point, "_steps_point": _steps_point}
