"""The noise multiplier: the smallest sigma whose certified epsilon meets a target (RDP in Numba,
PLD refined from the RDP answer), the Gaussian mechanism's exact sigma, sigma for a membership
attack's TPR.  The root finders are in ``roots``."""


from __future__ import annotations

import math

import numpy as np

from .._kernels import calibrate as _kc
from .._executor import CHUNK_PLD, CHUNK_RDP, check_executor, chunked
from .._progress import Progress
from .._work import UNITS_PER_SECOND, Meter, metered
from .._validation import (as_float_array, check_accuracy, check_delta, check_positive,
                          check_q, check_steps)
from ..rdp import ORDER_XTOL, REL_MARGIN
from .public import _check_accountant, _check_target_epsilon, _evaluate_eps, _public_eps, _verified
from .roots import _root_log, _search_log, _slope, _zeroin_py

#: Noise multipliers searched by the RDP kernel: [SIGMA_MIN, SIGMA_MAX] (beyond: a Python search).
SIGMA_MIN = 1e-4
SIGMA_MAX = 1e150
#: Smallest sampling rate searched.
Q_MIN = 1e-300
#: Largest number of steps searched.
STEPS_MAX = 1e12
#: Relative tolerance of the RDP and PLD solves.
RDP_TOL = 1e-6
PLD_TOL = 1e-4
#: A sampler's PLD search (every step a certified query of seconds) also stops at a sigma whose
#: upper epsilon is within this fraction of the accuracy below the target: the bound's own width
#: is ``accuracy`` of it, so a closer sigma would only be a digit of the bound's rounding.
SAMPLER_CLOSE = 0.1
#: What one calibrated point may spend refining its bracket (seconds on the reference machine,
#: counted as transform work like the engine's budget: the answer does not depend on the machine
#: or its load); past it the search uses RDP's bound, and the private end found so far is
#: returned (verified, less tight than the tolerance).
CAL_BUDGET = 1.0
#: A full evaluation whose gap is at most this fraction of the accuracy's, on a step that needs no
#: coarsening, settles the search's grid: later evaluations compute only the upper bound there
#: (``_PldUpper``).  1.0: the step met the accuracy (0.5 before: MNIST and q 1e-3, T 1e5 took one
#: or two full evaluations more at ratios 0.52 and 0.76; every value is a certified upper bound
#: either way, and the answer is verified by the public accountant).
SETTLED_RATIO = 1.0

def gaussian_sigma(epsilon: float, delta: float, steps: int = 1) -> float:
    """Smallest noise multiplier of ``steps`` compositions of the Gaussian mechanism (q = 1).

    Exact and certified: T steps with sigma are one step with mu = sqrt(T) / sigma (Balle & Wang
    2018, Thm 8; Räisä et al., ICML 2024, Sec. 5), and the returned sigma is verified by the
    certified closed form of ``pld.epsilon`` (its upper bound there is <= epsilon); one relative
    1e-12 step smaller is not private.  No range is imposed: tiny epsilon and delta give huge
    sigma, and sigma = 0 when delta >= 1 (never) -- every target in [0, inf] x (0, 1) is met.

    Examples
    --------
    >>> from sgmfast.calibrate import gaussian_sigma
    >>> round(gaussian_sigma(1.0, 1e-5), 4)
    3.7306
    """
    e = float(_check_target_epsilon(epsilon))
    d = float(check_delta(delta))
    t = float(check_steps(steps))
    if t == 0 or e == math.inf:
        return 0.0
    return _exact_sigma(e, d, t)


def calibrate_sigma_to_risk(max_tpr: float, fpr: float, q: float, steps: int, *, relation: str = "add_remove",
                            accuracy: float = 1e-3) -> float:
    """Smallest noise multiplier at which no membership attack has a true-positive rate above
    ``max_tpr`` at false-positive rate ``fpr``, certified: ``1 - pld.tradeoff(...).lower <=
    max_tpr`` holds at the returned sigma (within a relative ``PLD_TOL`` of the smallest such).

    An operational risk target (Kulynych et al., "Attack-aware noise calibration", 2024) in
    place of (ε, δ).  Returns 0 when even no noise meets it (``max_tpr`` >= 1) and +inf when no
    finite sigma does (``max_tpr`` <= ``fpr``: the attack that guesses at random has TPR = FPR).

    Examples
    --------
    >>> s = calibrate_sigma_to_risk(0.05, 0.01, 1.0, 1)   # Gaussian: mu = z(0.99) - z(0.95) = 0.6815
    >>> round(s, 3)
    1.467
    """
    from .. import pld

    t = float(check_positive(max_tpr, "max_tpr"))
    a = float(as_float_array(fpr, "fpr"))
    if not 0.0 <= a < 1.0:
        raise ValueError(f"fpr (false-positive rate) must be in [0, 1); got {a!r}")
    qq, steps_ = float(check_q(q)), int(check_steps(steps))
    if t >= 1.0:
        return 0.0
    if t <= a:
        return math.inf

    def ok(x):
        return 1.0 - float(pld.tradeoff(math.exp(x), qq, steps_, a, relation=relation, accuracy=accuracy).lower) <= t

    from scipy.special import ndtri

    mu = float(ndtri(1.0 - a) - ndtri(1.0 - t)) if a > 0.0 else 1.0
    guess = max(qq, 1e-6) * math.sqrt(max(steps_, 1)) / max(mu, 1e-3)  # (sigma_eff heuristic: a start)
    x = _search_log(ok, math.log(guess), True, PLD_TOL)
    return math.inf if x is None else math.exp(x)


def _exact_sigma(eps, delta, steps):
    ok = lambda x: _public_eps("pld", math.exp(x), 1.0, steps, delta, 1e-3) <= eps  # noqa: E731
    g = _kc.gaussian_sigma(max(eps, 1e-300), math.log(delta)) * math.sqrt(steps)
    x = _search_log(ok, math.log(min(max(g, 1e-300), 1e300)), True, 1e-12)
    if x is None:
        raise ValueError(f"no noise multiplier meets epsilon={eps:g}, delta={delta:g} (please report)")
    return math.exp(x)


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
    g = np.array([_kc.gaussian_sigma(max(e, 1e-300), math.log(d)) for e, d in zip(eps, delta)])
    return np.clip(q * np.sqrt(np.maximum(steps, 1.0)) * g, 2 * SIGMA_MIN, SIGMA_MAX / 2)


def calibrate_sigma(epsilon, delta, q, steps, *, accountant: str = "pld", accuracy: float = 1e-3,
                    progress: bool | None = None, executor=None, sampler: str = "poisson"):
    """Smallest noise multiplier whose certified epsilon is <= ``epsilon`` at ``delta``.

    Parameters
    ----------
    epsilon, delta : float or array_like
        Target privacy (epsilon in [0, inf] nats, delta in (0, 1)).
    q : float or array_like
        Poisson sampling rate in [0, 1].
    steps : int or array_like
        Number of steps (>= 0).
    accountant : {"pld", "rdp"}
        PLD (tight; sigma to 1e-4 relative) or RDP (sigma to 1e-6 relative).
    accuracy : float
        PLD accuracy setting (see :mod:`sgmfast.pld`), in (0, 1).
    progress : bool, optional
        Show a progress bar on stderr; by default only for long sweeps on a terminal.
    executor : concurrent.futures.Executor, optional
        Run the points of an array call on it, in chunks (a process pool; on a cluster
        ``dask.distributed.Client(...).get_executor()`` or Ray's); the answers are those of the
        serial call (``sgmfast._executor``).
    sampler : {"poisson", "balls_in_bins", "shuffle", "fixed_size"}
        How batches are drawn (:mod:`sgmfast.pld.samplers`; balls-in-bins and shuffle: PLD only):
        sigma is then the smallest whose ``pld.epsilon(..., sampler=sampler).upper`` (or
        ``rdp.epsilon(..., sampler="fixed_size")``) meets the target (a search on that bound,
        point by point).  For the permutation shuffle that bound is the Gaussian mechanism of
        each epoch (:mod:`sgmfast.pld.shuffle`, zero-out relation): no amplification is counted.

    Returns
    -------
    float or ndarray
        sigma, broadcast over the inputs. The public accountant (``rdp.epsilon``, or
        ``pld.epsilon(..., accuracy=accuracy).upper``) at the returned sigma is <= ``epsilon``;
        0 when no noise is needed (q = 0, steps = 0, epsilon = inf, or delta >= 1 - (1 - q)^T).

    Examples
    --------
    >>> from sgmfast.calibrate import calibrate_sigma
    >>> round(calibrate_sigma(8.0, 1e-5, 256 / 60000, 14062, accountant="rdp"), 4)
    0.678
    """
    _check_accountant(accountant)
    acc = check_accuracy(accuracy)
    e = _check_target_epsilon(epsilon)
    d = check_delta(delta)
    qq = check_q(q)
    t = check_steps(steps)
    shape, (e, d, qq, t) = _broadcast(e, d, qq, t)
    if sampler != "poisson":
        return _sampler_sigma(shape, e, d, qq, t, accountant, acc, sampler)
    if check_executor(executor) is not None and e.shape[0] > 1:
        out = chunked(__name__, "calibrate_sigma", (e, d, qq, t), dict(accountant=accountant, accuracy=acc, progress=False),
                      CHUNK_PLD if accountant == "pld" else CHUNK_RDP, executor)
        return out.reshape(shape)
    sig = np.zeros(e.shape[0])
    # no noise needed: nothing is sampled, nothing composed, no target, or delta >= 1 - (1 - q)^T
    with np.errstate(divide="ignore"):
        p0 = -np.expm1(t * np.log1p(-np.minimum(qq, 1.0)))
    trivial = (qq == 0.0) | (t == 0.0) | np.isinf(e) | (np.where(qq >= 1.0, 1.0, p0 * (1 + 1e-12)) <= d)
    gauss = (qq == 1.0) & ~trivial & (accountant == "pld")  # PLD is exact there
    reg = ~trivial & ~gauss
    for i in np.flatnonzero(gauss):
        sig[i] = _exact_sigma(e[i], d[i], t[i])
    if reg.any():
        _regular_sigmas(sig, np.flatnonzero(reg), e, d, qq, t, accountant, acc, progress)
    return float(sig[0]) if shape == () else sig.reshape(shape)


def _regular_sigmas(sig, idx, e, d, qq, t, accountant, acc, progress) -> None:
    """``calibrate_sigma`` at the points ``idx`` that need a search (into ``sig``): RDP by the
    Numba solver; PLD refined from it point by point, warm-started by the previous point's
    PLD/RDP ratio and grid (restarted with every executor chunk)."""
    er, dr, qr, tr = e[idx], d[idx], qq[idx], t[idx]
    guesses = _sigma_guess(er, dr, qr, tr)
    s_rdp, _got, status = _rdp_solve(_kc.KIND_SIGMA, er, dr, qr, np.zeros_like(er), tr, SIGMA_MIN, SIGMA_MAX,
                                     guesses, progress=progress if accountant == "rdp" else False)
    s_rdp = np.where(status == _kc.OK, s_rdp, np.nan)
    if accountant == "rdp":
        for j, i in enumerate(idx):
            sig[i] = _rdp_sigma_point(e[i], d[i], qq[i], t[i], s_rdp[j])
        return
    with Progress(idx.size, "calibrating (pld)", progress, min_total=20) as bar:
        block = -1
        for j, i in enumerate(idx):
            if i // CHUNK_PLD != block:  # (warm starts restart with every executor chunk)
                block = i // CHUNK_PLD
                ratio = None  # warm start: the PLD/RDP sigma ratio of the previous point
                upper = _PldUpper(acc)  # and its grid
            upper.restart()
            sig[i] = _pld_sigma_point(e[i], d[i], qq[i], t[i], s_rdp[j], upper, ratio, acc)
            if math.isfinite(s_rdp[j]) and sig[i] > 0:
                ratio = sig[i] / s_rdp[j]
            bar.update()


#: sigma under a sampler over the Poisson PLD sigma of a reference run (below): where the search
#: starts; measured on the MNIST run (balls-in-bins 0.99; fixed size 1.16 over twice the Poisson sigma)
_SAMPLER_START = {"balls_in_bins": 1.0, "fixed_size": 1.15}
#: the accuracy of the Poisson sigma that a sampler's search starts from
START_ACCURACY = 0.02
#: the accuracy of the cheaper bound whose root a sampler's certified search starts from
#: (``_coarse_start``), and how close to the target that search stops (a share of it).  0.01
#: cost as much as the certified search itself where queries are as dear at either accuracy
#: (q 1.3e-5, T 10328: 1.5 s each); at 0.03 no case of bench/fixed_size_calibrate.py took longer
COARSE_ACCURACY = 0.03
COARSE_CLOSE = 0.5


def _check_sampler(sampler: str, accountant: str) -> str:
    """``sampler`` if known and ``accountant`` has a bound for it (RDP: Poisson and fixed-size
    batches), else a ValueError naming what is wrong."""
    from .._samplers import check_engine

    return check_engine(sampler, accountant).name


def _sampler_sigma(shape, e, d, qq, t, accountant, acc, sampler):
    """calibrate_sigma for balls-in-bins, shuffled or fixed-size batches: per point, the smallest sigma (to
    PLD_TOL in log) whose certified upper epsilon meets the target, verified at the answer.

    Every evaluation is a full certified query (seconds for a balls-in-bins run at small sigma), so
    the search starts near the answer: at the Poisson PLD sigma (balls-in-bins batches are about
    as private as Poisson sampling at rate q), at the Gaussian sigma of the epochs for the
    permutation shuffle (its bound), or at twice the sigma that makes the Poisson
    add/remove run private to the target (fixed-size batches dominate it at noise sigma / 2),
    with a first step of 2 % and secant steps from there (``_root_log``).  Fixed-size searches
    first find the root of a cheaper bound (``_coarse_start``) and carry a memo from query to query
    (``fixed_size.upper_epsilon``: a certified upper bound, at least the public value in the same
    cache state; the value each answer was verified with is kept, ``verified_epsilon``)."""
    _check_sampler(sampler, accountant)
    sig = np.zeros(e.shape[0])
    for i in range(sig.size):
        if qq[i] == 0.0 or t[i] == 0.0 or math.isinf(e[i]):
            continue

        def ok(x, i=i):
            return _public_eps(accountant, math.exp(x), qq[i], t[i], d[i], acc, sampler) <= e[i]

        if _public_eps(accountant, 0.0, qq[i], t[i], d[i], acc, sampler) <= e[i]:
            continue  # no noise needed: δ is at least the chance the example is ever used (exact)

        if sampler == "shuffle":  # the Gaussian mechanism of each epoch touched: its exact sigma
            epochs = -(-int(t[i]) // round(1.0 / qq[i]))
            base = _exact_sigma(e[i], d[i], float(epochs)) if e[i] > 0 else 0.0
        else:
            # (a start only: the Poisson sigma at a coarse accuracy, about as close and cheaper)
            base = calibrate_sigma(e[i], d[i], qq[i], t[i], accountant=accountant, accuracy=max(acc, START_ACCURACY))
        if not 0.0 < base < math.inf:  # (no Poisson answer to start from: the generic guess)
            base = float(_sigma_guess(e[i:i + 1], d[i:i + 1], qq[i:i + 1], t[i:i + 1])[0])
        guess = base * (2.0 if sampler == "fixed_size" else 1.0) * _SAMPLER_START.get(sampler, 1.0)
        x0, tol = math.log(min(max(guess, SIGMA_MIN), SIGMA_MAX)), RDP_TOL if accountant == "rdp" else PLD_TOL
        if e[i] > 0.0:
            x0, slope = _coarse_start(accountant, acc, sampler, x0, e[i], qq[i], t[i], d[i])
            memo: dict = {}  # (what one query tells the next: ``fixed_size.upper_epsilon``)
            x = _root_log(lambda x, i=i, memo=memo: _public_eps(accountant, math.exp(x), qq[i], t[i], d[i], acc,
                                                              sampler, memo),
                          x0, e[i], tol, math.log(SIGMA_MIN), math.log(SIGMA_MAX),
                          rel=0.0 if accountant == "rdp" else SAMPLER_CLOSE * acc, slope=slope)
        else:
            x = _search_log(ok, x0, True, tol, x_min=math.log(SIGMA_MIN), x_max=math.log(SIGMA_MAX), step=0.02)
        sig[i] = math.inf if x is None else math.exp(x)
    return float(sig[0]) if shape == () else sig.reshape(shape)


def _coarse_start(accountant, acc, sampler, x0, eps, q, steps, delta):
    """Where a fixed-size search starts, and the slope it steps with: the root of the bound at
    ``COARSE_ACCURACY`` (a query there can cost a fraction of one at 1e-3: 0.2 s against 1.7 s at
    q 1e-4, T 80800, δ 4e-24), or (x0, None) where that finds none.  Only the way to the answer
    depends on it: every answer is verified at the target's accuracy.  (Balls-in-bins queries cost
    about as much at either accuracy: a coarse search first made them slower.)"""
    if accountant == "rdp" or sampler != "fixed_size" or acc >= COARSE_ACCURACY:
        return x0, None
    seen: list = []
    memo: dict = {}
    x = _root_log(lambda x: _evaluate_eps(accountant, math.exp(x), q, steps, delta, COARSE_ACCURACY, sampler, memo),
                  x0, eps, PLD_TOL, math.log(SIGMA_MIN), math.log(SIGMA_MAX), rel=COARSE_CLOSE * COARSE_ACCURACY,
                  seen=seen)
    return (x0, None) if x is None else (x, _slope(seen))


def _rdp_sigma_point(eps, delta, q, steps, sigma_kernel):
    """The RDP sigma of one point: the kernel's answer when it found one, else a search on the
    public ``rdp.epsilon``; verified there either way."""
    check = lambda s: _public_eps("rdp", s, q, steps, delta, None) <= eps  # noqa: E731
    if math.isfinite(sigma_kernel) and sigma_kernel > 0:
        return _verified("rdp", eps, sigma_kernel, check, True, RDP_TOL)
    x = _search_log(lambda x: check(math.exp(x)), math.log(max(q, 1e-300) * math.sqrt(steps) + 1e-300) + 1.0,
                    True, RDP_TOL)
    if x is None:
        raise ValueError(f"no noise multiplier meets epsilon={eps:g}, delta={delta:g} (please report)")
    return math.exp(x)


def _pld_sigma_point(eps, delta, q, steps, sigma_rdp, upper, ratio, accuracy):
    """The PLD sigma of one point: refined from the RDP sigma (private for PLD too: the PLD upper
    bound is capped by RDP) with the fast warm-started upper bound, or searched from a guess
    where RDP found none; then verified by the public ``pld.epsilon``."""
    seen: dict = {}  # (the public value at each sigma tried: the search's last candidate is one)

    def public(s):
        if s not in seen:
            seen[s] = _public_eps("pld", s, q, steps, delta, accuracy)
        return seen[s]

    check = lambda s: public(s) <= eps  # noqa: E731
    if math.isfinite(sigma_rdp) and sigma_rdp > 0:
        sigma = _pld_sigma(eps, delta, q, steps, sigma_rdp, upper, ratio, lambda x: public(math.exp(x)) - eps)
    else:
        fast = lambda x: upper(math.exp(x), q, steps, delta) <= eps  # noqa: E731
        guess = float(_sigma_guess(np.array([max(eps, 1e-300)]), np.array([delta]), np.array([q]),
                                   np.array([steps]))[0])
        x = _search_log(fast, math.log(guess), True, PLD_TOL)
        if x is None:
            raise ValueError(f"no noise multiplier meets epsilon={eps:g}, delta={delta:g} (please report)")
        sigma = math.exp(x)
    return _verified("pld", eps, sigma, check, True, PLD_TOL)


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

    def __init__(self, accuracy, budget: float = CAL_BUDGET):
        self.accuracy = accuracy
        self.step = None
        self.settled = False
        self.last = None
        self.budget = budget
        self.restart()

    def restart(self) -> None:
        """A new point of a sweep: its own budget (the grid hint is kept)."""
        self.meter = Meter()

    def spent(self) -> bool:
        """Has this point's budget been spent?"""
        return self.meter.units >= self.budget * UNITS_PER_SECOND

    def __call__(self, sigma, q, steps, delta):
        from ..pld.api import _epsilon_hinted, epsilon_upper_at

        if self.last is not None and any(not 0.5 < a / b < 2.0 for a, b in zip((sigma, q, steps), self.last)
                                         if b > 0):
            self.step, self.settled = None, False  # far from the last point: its grid is no hint
        self.last = (sigma, q, steps)
        # past the budget: RDP's bound (certified, cheap, looser: the search then errs towards
        # privacy), else the engine with what is left of the budget
        budget = self.budget - self.meter.units / UNITS_PER_SECOND
        if budget <= 0.0:
            return _public_eps("rdp", sigma, q, steps, delta, None) if q > 0.0 else 0.0
        with metered(self.meter):
            if self.settled:
                return float(epsilon_upper_at(sigma, q, steps, delta, self.accuracy, self.step, budget))
            lo, up, step = _epsilon_hinted(sigma, q, steps, delta, self.accuracy, self.step, budget)
        if step is not None:
            ratio = (up - lo) / (self.accuracy * up) if up > 0 else 1.0
            factor = 1.0
            while factor < 8.0 and ratio * (2.0 * factor) ** 2 <= 0.5:
                factor *= 2.0
            self.step = step * factor
            self.settled = factor == 1.0 and ratio <= SETTLED_RATIO
        return float(up)


def _rdp_eps(sigma, q, steps, delta):
    return _public_eps("rdp", sigma, q, steps, delta, None)


def _predicted_bracket(f, x0, f0, eps, rdp_eps, final=None, seen=None):
    """Try to bracket the root of f(x) = eps_upper(e^x) - eps within ~PLD_TOL in three
    evaluations: log eps_upper is close to linear in log sigma, so a step with RDP's local
    slope, then a secant step through the two PLD values, land within ~1e-5 of the root;
    f at +-0.45 PLD_TOL around the secant estimate then usually brackets it. Returns
    (x_not_private, f, x_private, f) from every point evaluated, or None.

    ``final`` (the public accountant's epsilon minus eps) replaces f at the last candidate,
    x2 + 0.45 PLD_TOL, which is the likely answer: the verification of the answer is then that
    evaluation (the caller keeps it) instead of one more.  Where it is not private there but f
    at x2 - 0.45 PLD_TOL is not either, and it exceeds eps by a hair (at most 4 PLD_TOL
    relative: a few of the verification's steps), the pair is returned as a bracket all the
    same: the caller's verification then steps up from x2 + 0.45 PLD_TOL with the public
    accountant, as it would have from a private f there.  ``seen`` (a list) receives every
    point evaluated."""
    pts = [(x0, f0)]
    h = 0.01
    k = (math.log(rdp_eps(x0)) - math.log(rdp_eps(x0 - h))) / h if rdp_eps(x0) > 0 else 0.0
    e0 = f0 + eps
    ok = lambda x: math.isfinite(x) and abs(x - x0) <= 50.0  # noqa: E731  (no inf/NaN step: an infinite eps)
    x1 = x0 + (math.log(eps) - math.log(e0)) / k if k < 0 and 0 < e0 < math.inf and eps > 0 else math.nan
    if math.isfinite(x1):  # (RDP's slope can be far flatter than PLD's: at most FIRST_STEP in log sigma)
        x1 = min(max(x1, x0 - FIRST_STEP), x0 + FIRST_STEP)
    if ok(x1):
        f1 = f(x1)
        pts.append((x1, f1))
        e1 = f1 + eps
        if 0 < e1 < math.inf and e1 != e0 and x1 != x0:
            k2 = (math.log(e1) - math.log(e0)) / (x1 - x0)
            x2 = x1 + (math.log(eps) - math.log(e1)) / k2 if k2 < 0 else math.nan
            if ok(x2):
                d = 0.45 * PLD_TOL
                pts.append((x2 - d, f(x2 - d)))
                if final is None:
                    pts.append((x2 + d, f(x2 + d)))
                else:
                    fin = final(x2 + d)
                    if 0 < fin <= 4.0 * PLD_TOL * eps and pts[-1][1] > 0:
                        return x2 - d, pts[-1][1], x2 + d, fin  # (public steps up from x2 + d)
                    pts.append((x2 + d, fin))
    if seen is not None:
        seen.extend(pts)
    above = [(x, v) for x, v in pts if v > 0]
    below = [(x, v) for x, v in pts if v <= 0]
    if not above or not below:
        return None
    xa, fa = max(above)
    xb, fb = min(below)
    return (xa, fa, xb, fb) if xa < xb else None


#: the largest first step (in log sigma) from the RDP sigma towards the PLD one: RDP's local slope
#: set it, and where PLD's eps falls much faster (q 1.3e-5, T 10328, δ 7e-8: PLD 0.022 at the RDP
#: sigma 0.715, 8.6 at 0.317) it reached a sigma whose one query spent the calibration's budget,
#: after which the search fell back to RDP and returned its sigma (0.715 for 0.47)
FIRST_STEP = 0.25


def _pld_sigma(eps, delta, q, steps, sigma_rdp, upper, start_ratio=None, final=None):
    """Refine the RDP sigma (private for PLD too) to the smallest PLD-private sigma
    (``final``: see ``_predicted_bracket``).

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
    seen: list = []
    bracket = _predicted_bracket(f, x0, f0, eps, lambda x: _rdp_eps(math.exp(x), q, steps, delta), final, seen)
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
    else:  # (downward from the least private sigma seen)
        xb, fb = min((p for p in seen if p[1] <= 0), default=(x0, f0))
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
