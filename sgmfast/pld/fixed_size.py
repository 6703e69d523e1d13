"""Fixed-size batches sampled without replacement, replace-one adjacency, certified by the PLD
pipeline.

Every step draws a batch of exactly b of the n examples (gamma = b/n), uniformly and independently
of the other steps, and adds N(0, sigma^2 I) to the sum of the clipped gradients (norm <= 1).
Neighbouring datasets replace one example by another, so the sum can move by 2.

**One step** (derivation: ``docs/fixed_size_batches.md``).  With s = sigma / 2 and the pair

    P = (1 - gamma) N(0, s^2) + gamma N(1, s^2),   Q = N(0, s^2)

(the remove direction of the Poisson pair at noise s), every neighbouring pair of step outputs
has H_a <= H_a(P || Q) for all a >= 1 (advanced joint convexity, Balle, Barthe & Gaboardi
2018), with equality for one choice of gradients; its swap (Q, P) is attained as well.  An
adaptive run can take either order at every step, so a dominating pair must dominate both:
the tightest one is the symmetrisation (Zhu, Dong & Wang, AISTATS 2022, Sec. 5; Lebeda,
Regehr, Kamath & Steinke 2024 for this mechanism), whose trade-off curve is the convex hull
of the two.  As a pair of measures it is the disjoint union of

* (P, Q) restricted to x > 1/2 (where the loss log(P/Q) is positive),
* (Q, P) restricted to x > 1/2 (the same region, losses negated),
* an atom with the same mass c = 1 - P(x > 1/2) - Q(x > 1/2) = (1 - gamma) erf(1/(sigma sqrt 2))
  under both (loss 0; c >= 0 because gamma <= 1).

It is symmetric, so one direction suffices, and for eps >= 0 one step has exactly the remove
direction's δ(eps).

**Certification.**  Each piece is discretised on the loss grid by stage 1 (``onestep.discretise``
with the other pieces' mass left out): connect-the-dots for the upper bound (δ only grows, for
every eps of either sign, so the dominance survives composition), the convex-order minorant
for the lower; the atom is exact up to the rounding of erf (charged as 64 ulp, as in
``_kernels.pld.exact``).  The pieces' masses are added on one grid: a disjoint union of pairs is
discretised piece by piece.  T steps are then composed by stages 2-3 with their round-off and
window charges, and read off by ``queries``.

**What the bounds mean.**  ``upper`` is a certified upper bound on the mechanism's ε.  ``lower``
is a certified lower bound on the ε of this dominating pair -- the number an exact PLD
accountant reports -- and never below the Poisson add/remove answer at noise sigma / 2, which
a dataset pair attains for fixed-size batches (the worst one-step gradients, kept fixed for all
steps).  Whether an adaptive adversary attains the symmetrised composition is open; the two
can differ by 10-25 % (README, "Three samplers").

Edges: q = 1 is the Gaussian mechanism with sensitivity 2 (exact); sigma = 0 gives ε = +inf and
δ(eps) = 1 - (1 - q)^T; a grid that cannot be built falls back to that Gaussian bound above
(every subsampled step is dominated by it) and to the Poisson lower bound below.
"""

from __future__ import annotations

import math
import time

import numpy as np
from scipy.special import erf

from .._types import Bounds
from . import accountant as pld
from .._validation import check_accuracy, check_delta, check_epsilon, check_q, check_sigma, check_steps
from .common import ADD, REMOVE, STEP_CACHE, TAU_STEP, bins_cap, cache_put, too_many_bins
from .composition import compose_repeated
from .estimates import initial_step
from .onestep import OneStep, discretise, grid_range
from .queries import delta_bound, eps_bound

#: Seconds a query may spend refining its grid before it returns what it has (always certified).
BUDGET = 3.0
_LIBM = 64.0 * np.finfo(np.float64).eps  # relative rounding charged to erf (a few ulp)


def sym_step(sigma: float, q: float, step: float, tau: float = TAU_STEP) -> OneStep:
    """One step of the symmetrised pair on the grid ell_j = j * step (module notes), both bounds;
    cached."""
    key = ("fixed_size", sigma, q, step, tau)
    hit = STEP_CACHE.get(key)
    if hit is not None:
        return hit
    s = 0.5 * sigma
    _, j_hi = grid_range(s, q, REMOVE, step, tau)
    a_lo, _ = grid_range(s, q, ADD, step, tau)
    J = max(j_hi, -a_lo, 1)
    if 2 * J + 1 > bins_cap():
        raise too_many_bins(2 * J + 1)
    # positive losses: (P, Q) on x > 1/2, mass above the grid to +inf (upper) or onto its top
    pos = discretise(s, q, REMOVE, step, tau, 0, J, keep_low=False, keep_high=True)
    # negative losses: (Q, P) on x > 1/2, mass below the grid moved up (upper) or dropped
    neg = discretise(s, q, ADD, step, tau, -J, 0, keep_low=True, keep_high=False)
    c = (1.0 - q) * float(erf(1.0 / (sigma * math.sqrt(2.0))))
    pess = np.zeros(2 * J + 1)
    opt = np.zeros(2 * J + 1)
    pess[J:] += pos.pess
    pess[: J + 1] += neg.pess
    opt[J:] += pos.opt
    opt[: J + 1] += neg.opt
    pess[J] += c * (1.0 + _LIBM)
    opt[J] += c * (1.0 - _LIBM)
    one = OneStep(-J, pess, pos.p_inf, step, None, None, None)
    one._opt = opt
    cache_put(key, one)
    return one


# --- the edges and the bounds every answer starts from ---------------------------------------
def _poisson(fn, sigma, q, T, x):
    """The Poisson add/remove answer at noise sigma / 2 (a lower bound here) and the Gaussian
    mechanism with sensitivity 2 composed T times (an upper bound)."""
    lower = getattr(pld, fn)(0.5 * sigma, q, T, x).lower
    upper = getattr(pld, fn)(0.5 * sigma, 1.0, T, x).upper
    return lower, upper


#: Most points of an FFT window that takes the whole composed support (nothing wraps around).
FULL_WINDOW = 1 << 22


def _n_min(one: OneStep, T: int) -> int:
    """The whole composed support as the FFT window when it is small enough.  The pair's atom
    at loss 0 holds most of the mass, so the composed standard deviation understates its flanks
    and a window of a few sds would let much of them wrap around (sound, but loose)."""
    support = T * (one.pess.size - 1) + 1
    return support if support <= FULL_WINDOW else 16


def _check(sigma, q, steps, accuracy):
    s = float(check_sigma(sigma))
    qq = float(check_q(q))
    T = check_steps(steps)
    if np.ndim(s) or np.ndim(qq) or np.ndim(T):
        raise ValueError("sigma, q and steps must be scalars here")
    return s, qq, int(T), check_accuracy(accuracy)


#: Most bins of one step's grid: a finer step than this allows is coarsened (still certified).
MAX_STEP_BINS = 1 << 21


def _step0(sigma, q, T, accuracy, eps_c) -> float:
    """The first grid step: the accuracy's step for the Poisson pair at noise sigma / 2, coarsened
    so that one step's grid has at most MAX_STEP_BINS bins."""
    step = initial_step([(0.5 * sigma, q, T)], accuracy, eps_c)
    try:
        _, j_hi = grid_range(0.5 * sigma, q, REMOVE, 1e-3)
        a_lo, _ = grid_range(0.5 * sigma, q, ADD, 1e-3)
    except ValueError:  # a loss range beyond any grid: the caller falls back
        return step
    reach = 2e-3 * (max(j_hi, -a_lo) + 1)
    while reach / step > MAX_STEP_BINS:
        step *= 2.0
    return step


def epsilon(sigma: float, q: float, steps: int, delta: float, *, accuracy: float = 1e-3) -> Bounds:
    """Certified bounds on ε(δ) of DP-SGD with fixed-size batches drawn without replacement
    (replace-one adjacency).

    Parameters
    ----------
    sigma : float
        Noise multiplier (noise std / clipping norm), >= 0.
    q : float
        Batch fraction b / n, in [0, 1].
    steps : int
        Number of steps T >= 0.
    delta : float
        Target δ in (0, 1).
    accuracy : float, optional
        Target relative width ``upper - lower <= accuracy * upper``; the loss grid is refined
        until it is met or a few seconds are spent (certified either way).

    Returns
    -------
    Bounds
        ``upper`` bounds the mechanism's ε; ``lower`` bounds the ε of its tightest dominating
        pair from below (module notes: what the bounds mean).

    Examples
    --------
    MNIST with batches of exactly 256 of 60000, 60 epochs, σ = 1.1:

    >>> from sgmfast.pld import fixed_size
    >>> b = fixed_size.epsilon(1.1, 256 / 60000, 14040, 1e-5)
    >>> 18.3 < b.lower <= b.upper < 18.5
    True
    """
    sigma, q, T, accuracy = _check(sigma, q, steps, accuracy)
    delta = float(check_delta(delta))
    if T == 0 or q == 0.0:
        return Bounds(0.0, 0.0)
    if sigma == 0.0:
        return Bounds(math.inf, math.inf)
    if q == 1.0:  # every step is the Gaussian mechanism with sensitivity 2 (exact)
        lo, up = _poisson("epsilon", sigma, q, T, delta)
        return Bounds(float(lo), float(up))
    lo0, up0 = _poisson("epsilon", sigma, q, T, delta)
    eps_c = max(float(lo0), 1e-3)

    def evaluate(step):
        one = sym_step(sigma, q, step)
        n = _n_min(one, T)
        up = eps_bound(compose_repeated(one, T, step, eps_c, TAU_STEP, True, n_min=n), delta)
        lo = eps_bound(compose_repeated(one, T, step, eps_c, TAU_STEP, False, n_min=n), delta)
        return lo, up

    lo, up = _refine(_step0(sigma, q, T, accuracy, eps_c), evaluate, lambda lo, up: up - lo <= accuracy * up,
                     float(lo0), float(up0))
    return Bounds(float(min(lo, up)), float(up))


def delta(sigma: float, q: float, steps: int, epsilon, *, accuracy: float = 1e-3) -> Bounds:
    """Certified bounds on δ(ε) of DP-SGD with fixed-size batches drawn without replacement.

    ``epsilon`` may be a float or a 1-D array; the other parameters are as in :func:`epsilon`.
    Refined until ``upper - lower <= accuracy * max(ε, 1e-3) * upper`` everywhere (about the δ
    change of a relative ε change ``accuracy``) or the time budget is spent."""
    sigma, q, T, accuracy = _check(sigma, q, steps, accuracy)
    eps = np.atleast_1d(check_epsilon(epsilon)).astype(np.float64).reshape(-1)
    scalar = np.ndim(epsilon) == 0

    def out(lo, up):
        lo, up = np.minimum(lo, up), up
        return Bounds(float(lo[0]), float(up[0])) if scalar else Bounds(lo, up)

    if T == 0 or q == 0.0:
        return out(np.zeros(eps.size), np.zeros(eps.size))
    lo0, up0 = (np.asarray(v, dtype=np.float64).reshape(-1) for v in _poisson("delta", sigma, q, T, eps))
    if sigma == 0.0:  # the batch sum is released exactly: δ = P(the example is ever drawn), as for Poisson
        return out(lo0, np.asarray(pld.delta(0.0, q, T, eps).upper, dtype=np.float64).reshape(-1))
    if q == 1.0:
        return out(lo0, up0)
    eps_c0 = max(float(pld.epsilon(0.5 * sigma, q, T, 1e-6, accuracy=0.05).upper), 1e-3)
    order = np.argsort(eps)
    groups = np.array_split(order, min(32, eps.size))

    def evaluate(step):
        one = sym_step(sigma, q, step)
        up, lo = np.ones(eps.size), np.zeros(eps.size)
        for g in groups:
            e = eps[g]
            e_c, e_min = float(np.median(e)), float(e.min())
            up[g] = delta_bound(compose_repeated(one, T, step, e_c, TAU_STEP, True, e_min, _n_min(one, T)), e)
            lo[g] = delta_bound(compose_repeated(one, T, step, e_c, TAU_STEP, False, e_min, _n_min(one, T)), e)
        return lo, up

    def narrow(lo, up):
        return bool(np.all(up - lo <= accuracy * np.maximum(eps, 1e-3) * np.maximum(up, 1e-300)))

    lo, up = _refine(_step0(sigma, q, T, accuracy, eps_c0), evaluate, narrow, lo0, np.minimum(up0, 1.0))
    return out(lo, up)


def _refine(step, evaluate, narrow, lo0, up0):
    """Evaluate on grids of halving step until ``narrow(lower, upper)`` or the time budget is
    spent, intersecting every certified answer with those before (and with lo0, up0).  A first
    grid too large to build is coarsened (by 4, up to 6 times): a coarse grid is as certified,
    only wider."""
    best_lo, best_up = lo0, up0
    start = time.monotonic()
    done = coarsened = 0
    last = 0.0  # seconds the last evaluation took: a finer grid costs about twice as much
    while done < 6 and time.monotonic() - start + 2.0 * last <= BUDGET:
        t0 = time.monotonic()
        try:
            lo, up = evaluate(step)
        except (ValueError, ArithmeticError, MemoryError):
            if done or coarsened >= 6:
                break
            step, coarsened = 4.0 * step, coarsened + 1
            continue
        done += 1
        last = time.monotonic() - t0
        best_up = np.minimum(best_up, up)
        best_lo = np.maximum(best_lo, lo)
        if narrow(best_lo, best_up):
            break
        step *= 0.5
    return best_lo, best_up
