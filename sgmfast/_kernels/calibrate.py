"""Root finding for calibration with the RDP accountant, entirely inside Numba.

Each solve brackets the root of h(x) = eps(x) - target in log-parameter space (x = log sigma,
log q or log steps), then runs Brent's zeroin (bisection safeguarding secant and inverse
quadratic steps) until the bracket is narrower than ``tol`` in x; it returns the end of the
bracket on the private side (eps <= target), which is therefore verified, not estimated.

Status codes in the returned tuple: 0 ok; 1 the target is met at the boundary of the allowed
range (sigma_min / q = 1 / steps_max); 2 the target cannot be met within the range.
"""

import math

import numba
import numpy as np

from ._jit import jit, jit_pair
from .logmath import log_ndtr
from .rdp import optimise_order
from .roots import zeroin_step

KIND_SIGMA = 0
KIND_Q = 1
KIND_STEPS = 2

OK = 0
AT_BOUNDARY = 1
IMPOSSIBLE = 2


@jit
def gaussian_log_delta(eps, sigma):
    """log delta(eps) of the Gaussian mechanism with sensitivity 1 (Balle & Wang 2018, Thm 8):
    delta = Phi(1/(2 sigma) - eps sigma) - e^eps Phi(-1/(2 sigma) - eps sigma)."""
    a = log_ndtr(0.5 / sigma - eps * sigma)
    b = eps + log_ndtr(-0.5 / sigma - eps * sigma)
    if b >= a:
        return -math.inf
    return a + math.log1p(-math.exp(b - a))


@jit
def gaussian_sigma(eps, log_delta):
    """Smallest sigma of the Gaussian mechanism achieving (eps, delta), by bisection in log sigma."""
    lo = -12.0
    hi = 12.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if gaussian_log_delta(eps, math.exp(mid)) > log_delta:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-13:
            break
    return math.exp(hi)


@jit
def _eps(kind, x, q, sigma, steps, log_delta, margin, xtol):
    qs = np.empty(1)
    ss = np.empty(1)
    cs = np.empty(1)
    qs[0] = q
    ss[0] = sigma
    cs[0] = steps
    if kind == KIND_SIGMA:
        ss[0] = math.exp(x)
    elif kind == KIND_Q:
        qs[0] = min(1.0, math.exp(x))
    else:
        cs[0] = math.exp(x)
    cs[0] *= 1.0 + margin
    v, _a = optimise_order(qs, ss, cs, log_delta, int(0), bool(True), xtol)
    return v


@jit
def _zeroin(kind, a, fa, b, fb, q, sigma, steps, log_delta, target, margin, xtol, tol):
    """Brent's zeroin on h(x) = eps(x) - target with h(a) h(b) < 0; returns the final bracket
    (lo, f(lo), hi, f(hi)) with lo < hi."""
    c = a
    fc = fa
    d = b - a
    e = d
    for _ in range(200):
        a, fa, b, fb, c, fc, d, e, done = zeroin_step(a, fa, b, fb, c, fc, d, e, tol, 0.0)
        if done:
            break
        fb = _eps(kind, b, q, sigma, steps, log_delta, margin, xtol) - target
    # The root lies between b and c.
    if b < c:
        return b, fb, c, fc
    return c, fc, b, fb


@jit
def solve(kind, target, log_delta, q, sigma, steps, lo_bound, hi_bound, guess, margin, xtol, tol):
    """Calibrate one parameter; returns (value, eps_at_value, status).

    kind: KIND_SIGMA (smallest sigma with eps <= target; eps decreases in sigma),
    KIND_Q (largest q) or KIND_STEPS (largest real steps; the caller rounds down and
    checks integers). The search runs in log space between log(lo_bound) and log(hi_bound)
    starting from ``guess``.
    """
    x_lo = math.log(lo_bound)
    x_hi = math.log(hi_bound)
    x0 = min(max(math.log(guess), x_lo), x_hi)
    increasing = kind != KIND_SIGMA
    f0 = _eps(kind, x0, q, sigma, steps, log_delta, margin, xtol) - target
    # Expand from the guess until the sign changes.
    step = 0.25
    xa = x0
    fa = f0
    xb = x0
    fb = f0
    found = False
    for _ in range(200):
        # Move towards the side that fixes the sign of fa.
        go_up = (fa > 0.0) != increasing
        xn = xa + step if go_up else xa - step
        if xn > x_hi:
            xn = x_hi
        if xn < x_lo:
            xn = x_lo
        if xn == xa:
            break
        fn = _eps(kind, xn, q, sigma, steps, log_delta, margin, xtol) - target
        if (fn > 0.0) != (fa > 0.0):
            xb = xn
            fb = fn
            found = True
            break
        xa = xn
        fa = fn
        step *= 2.0
    if not found:
        # The whole range lies on one side.
        ok_side = not (fa > 0.0)
        if kind == KIND_SIGMA:
            if ok_side:
                return math.exp(xa), fa + target, AT_BOUNDARY
            return math.nan, fa + target, IMPOSSIBLE
        if ok_side:
            return math.exp(xa), fa + target, AT_BOUNDARY
        return math.nan, fa + target, IMPOSSIBLE
    lo, flo, hi, fhi = _zeroin(kind, min(xa, xb), fa if xa < xb else fb, max(xa, xb),
                               fb if xa < xb else fa, q, sigma, steps, log_delta, target,
                               margin, xtol, tol)
    # Return the private end of the bracket.
    if kind == KIND_SIGMA:
        if fhi > 0.0:
            return math.nan, fhi + target, IMPOSSIBLE
        return math.exp(hi), fhi + target, OK
    if flo > 0.0:
        return math.nan, flo + target, IMPOSSIBLE
    return math.exp(lo), flo + target, OK


def _solve_points(kind, targets, log_deltas, qs, sigmas, steps, lo_bound, hi_bound, guesses,
                 margin, xtol, tol, out_val, out_eps, out_status):
    """``solve`` over independent points."""
    for i in numba.prange(targets.shape[0]):
        v, e, s = solve(kind, targets[i], log_deltas[i], qs[i], sigmas[i], steps[i], lo_bound,
                        hi_bound, guesses[i], margin, xtol, tol)
        out_val[i] = v
        out_eps[i] = e
        out_status[i] = s


#: Parallel and serial builds of the same loop: a parallel launch costs more than a few points.
solve_points, solve_points_serial = jit_pair(_solve_points)
PARALLEL_MIN_POINTS = 16
