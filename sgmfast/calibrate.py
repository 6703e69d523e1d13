"""Calibration: the smallest noise multiplier, or the largest sampling rate or number of
steps, whose certified epsilon upper bound meets a target (epsilon, delta).

Every returned value is on the private side and verified at that value: the accountant's
epsilon upper bound there is <= the target. It is also minimal (maximal) to the stated
tolerance: one tolerance step towards less privacy exceeds the target.

RDP solves run entirely in Numba (bracket from the Gaussian mechanism's exact sigma, then
Brent's zeroin in log space), about a millisecond per point, vectorised and parallel over
arrays of targets. PLD solves start from the RDP answer, which is private for PLD too (the
PLD upper bound never exceeds RDP), and refine it with a few PLD evaluations.

Examples
--------
>>> from sgmfast import calibrate
>>> s = calibrate.calibrate_sigma(2.0, 1e-5, 0.01, 1000, accountant="rdp")
>>> round(s, 4)
1.0223
>>> from sgmfast import rdp
>>> rdp.epsilon(s, 0.01, 1000, 1e-5) <= 2.0
True
"""

from __future__ import annotations

import math
import numpy as np

from ._kernels import calibrate as _kc
from ._kernels import roots as _roots
from ._progress import Progress
from ._validation import check_delta, check_epsilon, check_positive_int, check_q, check_sigma, check_steps
from .rdp import ORDER_XTOL, REL_MARGIN

__all__ = [
    "calibrate_sigma",
    "calibrate_q",
    "calibrate_batch_size",
    "calibrate_steps",
    "calibrate_epochs",
    "gaussian_sigma",
    "SIGMA_MIN",
    "SIGMA_MAX",
]

#: Noise multipliers searched: [SIGMA_MIN, SIGMA_MAX].
SIGMA_MIN = 0.02
SIGMA_MAX = 1e6
#: Smallest sampling rate searched.
Q_MIN = 1e-12
#: Largest number of steps searched.
STEPS_MAX = 1e12
#: Relative tolerance of the RDP and PLD solves.
RDP_TOL = 1e-6
PLD_TOL = 1e-4

_ACCOUNTANTS = ("pld", "rdp")


def _check_accountant(accountant: str) -> str:
    if accountant not in _ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {_ACCOUNTANTS}; got {accountant!r}")
    return accountant


def _check_target_epsilon(epsilon) -> np.ndarray:
    e = check_epsilon(epsilon)
    if np.any(e <= 0):
        raise ValueError(f"epsilon must be > 0 for calibration; got {e[e <= 0].flat[0]!r}")
    return e


def gaussian_sigma(epsilon: float, delta: float, steps: int = 1) -> float:
    """Exact noise multiplier of ``steps`` compositions of the Gaussian mechanism (q = 1).

    The smallest sigma with delta(epsilon) <= delta for one step is found by bisection on the
    exact curve of Balle & Wang (2018, Thm 8); T steps with sigma equal one step with
    sigma / sqrt(T), so sigma(1, T) = sqrt(T) sigma(1, 1) (Räisä et al., ICML 2024, Sec. 5).

    Examples
    --------
    >>> from sgmfast.calibrate import gaussian_sigma
    >>> round(gaussian_sigma(1.0, 1e-5), 4)
    3.7306
    """
    e = float(_check_target_epsilon(epsilon))
    d = float(check_delta(delta))
    t = float(check_steps(steps))
    if t == 0:
        return 0.0
    return math.sqrt(t) * _kc.gaussian_sigma(e, math.log(d))


def _broadcast(*arrays):
    b = np.broadcast_arrays(*arrays)
    shape = b[0].shape
    return shape, [np.ascontiguousarray(x.reshape(-1), dtype=np.float64) for x in b]


_CHUNK = 1024


def _rdp_solve(kind, eps, delta, q, sigma, steps, lo, hi, guesses, tol=RDP_TOL, progress=None):
    n = eps.shape[0]
    val = np.empty(n)
    got = np.empty(n)
    status = np.empty(n, dtype=np.int64)
    log_delta = np.log(delta)
    with Progress(n, "calibrating (rdp)", progress) as bar:
        for a in range(0, n, _CHUNK):
            b = min(n, a + _CHUNK)
            kernel = _kc.solve_points if b - a >= _kc.PARALLEL_MIN_POINTS else _kc.solve_points_serial
            kernel(kind, eps[a:b], log_delta[a:b], q[a:b], sigma[a:b], steps[a:b], lo, hi, guesses[a:b],
                   REL_MARGIN, ORDER_XTOL, tol, val[a:b], got[a:b], status[a:b])
            bar.update(b - a)
    return val, got, status


def _sigma_guess(eps, delta, q, steps):
    # sigma(q, T) ~ q sigma(1, T) = q sqrt(T) sigma(1, 1) for many steps (Räisä et al. 2024,
    # Cor. 5.4); never below the single-step bound's order of magnitude.
    g = np.array([_kc.gaussian_sigma(e, math.log(d)) for e, d in zip(eps, delta)])
    return np.clip(q * np.sqrt(np.maximum(steps, 1.0)) * g, 2 * SIGMA_MIN, SIGMA_MAX / 2)


def _raise_impossible(what: str, i: int, eps, delta, extra: str):
    raise ValueError(
        f"no {what} meets epsilon={eps[i]:g}, delta={delta[i]:g} ({extra})"
    )


def calibrate_sigma(epsilon, delta, q, steps, *, accountant: str = "pld", accuracy: float = 1e-3,
                    progress: bool | None = None):
    """Smallest noise multiplier whose certified epsilon is <= ``epsilon`` at ``delta``.

    Parameters
    ----------
    epsilon, delta : float or array_like
        Target privacy (epsilon > 0 in nats, delta in (0, 1)).
    q : float or array_like
        Poisson sampling rate in (0, 1].
    steps : int or array_like
        Number of steps (>= 1).
    accountant : {"pld", "rdp"}
        PLD (tight; sigma to 1e-4 relative) or RDP (sigma to 1e-6 relative).
    accuracy : float
        PLD accuracy setting (see :mod:`sgmfast.pld`).
    progress : bool, optional
        Show a progress bar on stderr; by default only for long sweeps on a terminal.

    Returns
    -------
    float or ndarray
        sigma, broadcast over the inputs. At the returned sigma the accountant's epsilon upper
        bound is <= ``epsilon``; at sigma * (1 - 2 tol) it is > ``epsilon``.

    Raises
    ------
    ValueError
        For invalid input, or a target that no sigma <= 1e6 reaches.

    Examples
    --------
    >>> from sgmfast.calibrate import calibrate_sigma
    >>> round(calibrate_sigma(8.0, 1e-5, 256 / 60000, 14062, accountant="rdp"), 4)
    0.678
    """
    _check_accountant(accountant)
    e = _check_target_epsilon(epsilon)
    d = check_delta(delta)
    qq = check_q(q)
    t = check_steps(steps)
    if np.any(t < 1):
        raise ValueError("steps must be >= 1 for calibration; got 0")
    shape, (e, d, qq, t) = _broadcast(e, d, qq, t)
    guesses = _sigma_guess(e, d, qq, t)
    rdp_progress = progress if accountant == "rdp" else False
    sig, got, status = _rdp_solve(_kc.KIND_SIGMA, e, d, qq, np.zeros_like(e), t, SIGMA_MIN, SIGMA_MAX, guesses,
                                  progress=rdp_progress)
    for i in np.flatnonzero(status == _kc.IMPOSSIBLE):
        _raise_impossible("noise multiplier up to 1e6", i, e, d, f"q={qq[i]:g}, steps={t[i]:g}")
    for i in np.flatnonzero(status == _kc.AT_BOUNDARY):
        raise ValueError(
            f"epsilon={e[i]:g} at delta={d[i]:g} is met even at sigma={SIGMA_MIN}; noise "
            f"multipliers below {SIGMA_MIN} are outside the supported range"
        )
    if accountant == "pld":
        n = e.shape[0]
        with Progress(n, "calibrating (pld)", progress, min_total=20) as bar:
            ratio = None  # warm start: the PLD/RDP sigma ratio of the previous point
            upper = _PldUpper(accuracy)  # and its grid
            for i in range(n):
                s_rdp = sig[i]
                if qq[i] == 1.0:
                    # PLD is exact at q = 1 (Balle & Wang): the exact sigma, nudged to the private side
                    sig[i] = gaussian_sigma(e[i], d[i], int(t[i])) * (1 + 1e-12)
                else:
                    sig[i] = _pld_sigma(e[i], d[i], qq[i], t[i], s_rdp, upper, ratio)
                ratio = sig[i] / s_rdp
                bar.update()
    return float(sig[0]) if shape == () else sig.reshape(shape)


class _PldUpper:
    """epsilon_upper(sigma) for one calibration or a sweep of neighbouring ones.

    Neighbouring sigmas need about the same loss grid, so each evaluation starts from the
    previous one's final step, coarsened by a power of 2 when its certified gap was far
    below the accuracy (the gap grows like step^2). A too-coarse start costs one cheap
    grid: the accuracy loop then refines as usual. Once a full evaluation (both bounds)
    has met the accuracy with room to spare on a step that needs no coarsening, later
    evaluations compute only the upper bound on that step. Every value is a certified upper
    bound either way; the grid only decides how tight it is.
    """

    def __init__(self, accuracy):
        self.accuracy = accuracy
        self.step = None
        self.settled = False

    def __call__(self, sigma, q, steps, delta):
        from .pld.accountant import epsilon_hinted, epsilon_upper_at

        if self.settled:
            return float(epsilon_upper_at(sigma, q, steps, delta, self.accuracy, self.step))
        lo, up, step = epsilon_hinted(sigma, q, steps, delta, self.accuracy, self.step)
        if step is not None:
            ratio = (up - lo) / (self.accuracy * up) if up > 0 else 1.0
            factor = 1.0
            while factor < 8.0 and ratio * (2.0 * factor) ** 2 <= 0.5:
                factor *= 2.0
            self.step = step * factor
            self.settled = factor == 1.0 and ratio <= 0.5
        return float(up)


def _zeroin_py(f, a, fa, b, fb, tol, max_iter=60):
    """Brent's zeroin on a Python function with f(a) f(b) < 0; returns the final bracket."""
    c, fc = a, fa
    d = e = b - a
    for _ in range(max_iter):
        a, fa, b, fb, c, fc, d, e, done = _roots.zeroin_step(a, fa, b, fb, c, fc, d, e, tol, 0.0)
        if done:
            break
        fb = f(b)
    return (b, fb, c, fc) if b < c else (c, fc, b, fb)


def _rdp_eps(sigma, q, steps, delta):
    from . import rdp

    return rdp.epsilon(float(sigma), float(q), float(steps), float(delta))


def _predicted_bracket(f, x0, f0, eps, rdp_eps):
    """Try to bracket the root of f(x) = eps_upper(e^x) - eps within ~PLD_TOL in three
    evaluations: log eps_upper is close to linear in log sigma, so a step with RDP's local
    slope, then a secant step through the two PLD values, land within ~1e-5 of the root;
    f at +-0.45 PLD_TOL around the secant estimate then usually brackets it. Returns
    (x_not_private, f, x_private, f) from every point evaluated, or None."""
    pts = [(x0, f0)]
    h = 0.01
    k = (math.log(rdp_eps(x0)) - math.log(rdp_eps(x0 - h))) / h if rdp_eps(x0) > 0 else 0.0
    e0 = f0 + eps
    if k < 0 and e0 > 0:
        x1 = x0 + (math.log(eps) - math.log(e0)) / k
        f1 = f(x1)
        pts.append((x1, f1))
        e1 = f1 + eps
        if e1 > 0 and e1 != e0:
            k2 = (math.log(e1) - math.log(e0)) / (x1 - x0)
            if k2 < 0:
                x2 = x1 + (math.log(eps) - math.log(e1)) / k2
                d = 0.45 * PLD_TOL
                pts += [(x2 - d, f(x2 - d)), (x2 + d, f(x2 + d))]
    above = [(x, v) for x, v in pts if v > 0]
    below = [(x, v) for x, v in pts if v <= 0]
    if not above or not below:
        return None
    xa, fa = max(above)
    xb, fb = min(below)
    return (xa, fa, xb, fb) if xa < xb else None


def _pld_sigma(eps, delta, q, steps, sigma_rdp, upper, start_ratio=None):
    """Refine the RDP sigma (private for PLD too) to the smallest PLD-private sigma.

    The search starts at sigma_rdp * start_ratio when a neighbouring point of a sweep gave
    that ratio (first step 0.2 % in log sigma, doubling), else at sigma_rdp (steps of 5 %,
    downward: PLD sigma is typically 3-20 % below RDP's). Once the sign of
    eps_upper(sigma) - eps changes, Brent's zeroin finishes to ``PLD_TOL``.
    """
    f = lambda x: upper(math.exp(x), q, steps, delta) - eps  # noqa: E731
    x_rdp = math.log(sigma_rdp)
    warm = start_ratio is not None and 0.0 < start_ratio < 1.0
    x0 = x_rdp + math.log(start_ratio) if warm else x_rdp
    step = 2e-3 if warm else 0.05
    f0 = f(x0)
    bracket = _predicted_bracket(f, x0, f0, eps, lambda x: _rdp_eps(math.exp(x), q, steps, delta))
    if bracket is not None:
        xa, fa, xb, fb = bracket
        if xb - xa <= PLD_TOL:
            return math.exp(xb)  # private, and sigma (1 - PLD_TOL) is below xa: not private
    elif f0 > 0:
        # Not private yet: upward, never past the RDP sigma, whose PLD epsilon (capped by
        # RDP's) is within the budget unless PLD > RDP, which the expansion handles.
        xa, fa = x0, f0
        for _ in range(200):
            xb = xa + step if xa + step < x_rdp or xa >= x_rdp else x_rdp
            fb = f(xb)
            if fb <= 0:
                break
            xa, fa = xb, fb
            step = min(step * 2, 0.05) if xa >= x_rdp else step * 2
        else:
            raise ValueError(f"no noise multiplier found for epsilon={eps:g}")
    else:
        xb, fb = x0, f0
        for _ in range(60):
            xa = xb - step
            if xa < math.log(SIGMA_MIN):
                return math.exp(xb)
            fa = f(xa)
            if fa > 0:
                break
            xb, fb = xa, fa
            step *= 2
    lo, flo, hi, fhi = _zeroin_py(f, xa, fa, xb, fb, PLD_TOL)
    return math.exp(hi) if fhi <= 0 else math.exp(xb)


def calibrate_q(epsilon, delta, sigma, steps, *, accountant: str = "pld", accuracy: float = 1e-3):
    """Largest sampling rate q in (0, 1] whose certified epsilon is <= ``epsilon``.

    Returns q (broadcast over the inputs); q = 1 if even full batches meet the target.

    Examples
    --------
    >>> from sgmfast.calibrate import calibrate_q
    >>> q = calibrate_q(2.0, 1e-5, 1.0, 1000, accountant="rdp")
    >>> 0.009 < q < 0.011
    True
    """
    _check_accountant(accountant)
    e = _check_target_epsilon(epsilon)
    d = check_delta(delta)
    s = check_sigma(sigma)
    t = check_steps(steps)
    if np.any(t < 1):
        raise ValueError("steps must be >= 1 for calibration; got 0")
    shape, (e, d, s, t) = _broadcast(e, d, s, t)
    guesses = np.clip(s / np.maximum(1.0, np.sqrt(t)), Q_MIN, 1.0)
    qv, got, status = _rdp_solve(_kc.KIND_Q, e, d, np.zeros_like(e), s, t, Q_MIN, 1.0, guesses)
    for i in np.flatnonzero(status == _kc.IMPOSSIBLE):
        _raise_impossible(f"sampling rate >= {Q_MIN:g}", i, e, d, f"sigma={s[i]:g}, steps={t[i]:g}")
    if accountant == "pld":
        qv = np.array([_pld_q(e[i], d[i], s[i], t[i], qv[i], status[i], accuracy) for i in range(e.shape[0])])
    return float(qv[0]) if shape == () else qv.reshape(shape)


def _pld_q(eps, delta, sigma, steps, q_rdp, status, accuracy):
    if status == _kc.AT_BOUNDARY:
        return 1.0
    upper = _PldUpper(accuracy)
    f = lambda x: upper(sigma, min(1.0, math.exp(x)), steps, delta) - eps  # noqa: E731
    xa = math.log(q_rdp)
    fa = f(xa)
    step = 0.05
    xb, fb = xa, fa
    for _ in range(60):
        xb = min(0.0, xa + step)
        fb = f(xb)
        if fb > 0:
            break
        if xb == 0.0:
            return 1.0
        xa, fa = xb, fb
        step *= 2
    lo, flo, hi, fhi = _zeroin_py(f, xa, fa, xb, fb, PLD_TOL)
    return math.exp(lo) if flo <= 0 else math.exp(xa)


def calibrate_batch_size(epsilon, delta, sigma, dataset_size, *, steps=None, epochs=None,
                         accountant="pld", accuracy=1e-3) -> int:
    """Largest expected batch size B (q = B / dataset_size) whose certified epsilon is <= ``epsilon``.

    Give either ``steps`` (fixed number of steps) or ``epochs`` (fixed number of passes:
    steps = ceil(epochs * dataset_size / B) then changes with B). With epochs fixed, the
    search is a bisection over integers that assumes epsilon grows with B (it does: the
    effective noise sigma/q dominates, Räisä et al. 2024); the returned B is verified.

    Raises ValueError if not even B = 1 fits.

    Examples
    --------
    >>> from sgmfast.calibrate import calibrate_batch_size
    >>> calibrate_batch_size(2.0, 1e-5, 1.0, 60000, steps=1000, accountant="rdp")
    569
    """
    _check_accountant(accountant)
    n = check_positive_int(dataset_size, "dataset_size")
    e = float(_check_target_epsilon(epsilon))
    d = float(check_delta(delta))
    s = float(check_sigma(sigma))
    if (steps is None) == (epochs is None):
        raise ValueError("give exactly one of steps and epochs")
    if steps is not None:
        t = float(check_steps(steps))
        steps_of = lambda b: t  # noqa: E731
    else:
        ep = float(check_epsilon(epochs, "epochs"))
        if ep <= 0:
            raise ValueError(f"epochs must be > 0; got {ep:g}")
        steps_of = lambda b: float(math.ceil(ep * n / b - 1e-9))  # noqa: E731
    ok = lambda b: _upper(accountant, s, b / n, steps_of(b), d, accuracy) <= e  # noqa: E731
    if not ok(1):
        raise ValueError(
            f"no batch size fits: even 1 of {n} examples per step (q={1 / n:g}) exceeds "
            f"epsilon={e:g} with sigma={s:g}, steps={steps_of(1):g}"
        )
    if steps is not None:
        # Start from the continuous answer: q is exact to 1e-6 relative for RDP.
        q = calibrate_q(e, d, s, steps, accountant="rdp")
        lo = max(1, min(n, int(math.floor(q * n + 1e-9))))
        if not ok(lo):
            lo = 1
    else:
        lo = 1
    if ok(n):
        return n
    hi = n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo


def _upper(accountant, sigma, q, steps, delta, accuracy):
    if accountant == "rdp":
        from . import rdp

        return rdp.epsilon(sigma, q, steps, delta)
    return _PldUpper(accuracy)(sigma, q, steps, delta)


def calibrate_steps(epsilon, delta, sigma, q, *, accountant: str = "pld", accuracy: float = 1e-3) -> int:
    """Largest integer number of steps whose certified epsilon is <= ``epsilon``.

    Returns 0 if not even one step fits.

    Examples
    --------
    >>> from sgmfast.calibrate import calibrate_steps
    >>> t = calibrate_steps(2.0, 1e-5, 1.0, 0.01, accountant="rdp")
    >>> from sgmfast import rdp
    >>> rdp.epsilon(1.0, 0.01, t, 1e-5) <= 2.0 < rdp.epsilon(1.0, 0.01, t + 1, 1e-5)
    True
    """
    _check_accountant(accountant)
    e = float(_check_target_epsilon(epsilon))
    d = float(check_delta(delta))
    s = float(check_sigma(sigma))
    qq = float(check_q(q))
    if _upper(accountant, s, qq, 1, d, accuracy) > e:
        return 0
    guess = np.array([max(1.0, (s * _kc.gaussian_sigma(e, math.log(d)) ** -1 / qq) ** 2)])
    tv, got, status = _rdp_solve(_kc.KIND_STEPS, np.array([e]), np.array([d]), np.array([qq]),
                                 np.array([s]), np.zeros(1), 1.0, STEPS_MAX, guess)
    if status[0] == _kc.AT_BOUNDARY:
        raise ValueError(f"epsilon={e:g} is met beyond {STEPS_MAX:g} steps")
    t_lo = max(1, int(math.floor(tv[0])))
    # Integer search: RDP gives a private lower end; PLD can allow more.
    ok = lambda t: _upper(accountant, s, qq, t, d, accuracy) <= e  # noqa: E731
    while t_lo > 1 and not ok(t_lo):
        t_lo -= 1
    # Exponential search upward, then bisection on integers.
    step = max(1, t_lo // 64) if accountant == "pld" else 1
    t_hi = t_lo + step
    while ok(t_hi):
        t_lo = t_hi
        step *= 2
        t_hi = t_lo + step
        if t_hi > STEPS_MAX:
            raise ValueError(f"epsilon={e:g} is met beyond {STEPS_MAX:g} steps")
    while t_hi - t_lo > 1:
        mid = (t_lo + t_hi) // 2
        if ok(mid):
            t_lo = mid
        else:
            t_hi = mid
    return t_lo


def calibrate_epochs(epsilon, delta, sigma, q, *, accountant: str = "pld", accuracy: float = 1e-3) -> float:
    """Largest number of epochs (steps * q) within the budget, from :func:`calibrate_steps`."""
    t = calibrate_steps(epsilon, delta, sigma, q, accountant=accountant, accuracy=accuracy)
    return t * float(check_q(q))
