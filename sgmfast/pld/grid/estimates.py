"""Heuristics: where eps probably lies and which grid step will do.

Nothing here enters a bound.  The one-step loss moments (trapezoid rule) and the Gaussian
approximation of the composed loss only choose the grid step, the tilt and the FFT windows;
a poor choice costs tightness or time, never soundness.
"""

from __future__ import annotations

import math

from scipy.special import erfcx, log_ndtr, ndtr

from ..._kernels.pld import losses as kl
from ..._kernels.pld import tilt as kt
from ..._work import PER_BIN_MOMENTS, charge
from ..common import REPLACE, StepUnderflow

_MOM_CACHE: dict = {}
STEP_FACTOR = 0.8  # first grid step relative to the accuracy's (measured, bench/README)


def loss_moments(sigma: float, q: float, add):
    """(mean, variance) of the one-step loss under P for a direction (cached)."""
    key = (sigma, q, add)
    hit = _MOM_CACHE.get(key)
    if hit is None:
        hit = kl.loss_moments(sigma, q, 2 if add == REPLACE else int(add), 20001)
        if len(_MOM_CACHE) > 4096:  # bounded: calibration sweeps visit many sigmas
            _MOM_CACHE.clear()
        _MOM_CACHE[key] = hit
    return hit


def _gauss_delta(eps, mean, var):
    s = math.sqrt(var)
    x = (mean - eps) / s
    return float(ndtr(x) - math.exp(eps - mean + var / 2 + log_ndtr(x - s)))


def eps_estimate(schedule, target_delta: float, add=False) -> float:
    """Gaussian approximation of the composed PLD of one direction (mean and variance add over
    steps): its eps at ``target_delta``."""
    mean = sum(c * loss_moments(s, q, add)[0] for s, q, c in schedule)
    var = sum(c * loss_moments(s, q, add)[1] for s, q, c in schedule)
    if var <= 0 or _gauss_delta(0.0, mean, var) <= target_delta:
        return 0.0
    hi = mean + 50 * math.sqrt(var) + 50
    if _gauss_delta(hi, mean, var) > target_delta:
        return hi
    return brent_root(lambda e: _gauss_delta(e, mean, var) - target_delta, 0.0, hi, 1e-6)


def tilted_moments(p, j_lo, step: float, theta: float):
    """``tilt.tilted_moments`` of one array, charged as one pass over it (``PER_BIN_MOMENTS`` an
    entry): every saddle-point and window heuristic reads its moments through here or
    ``tilted_stats``."""
    charge(PER_BIN_MOMENTS * p.size)
    return kt.tilted_moments(p, j_lo, step, theta)


def tilted_stats(p, j_lo, step: float, theta: float):
    """``tilt.tilted_stats`` of one array, charged as ``tilted_moments``."""
    charge(PER_BIN_MOMENTS * p.size)
    return kt.tilted_stats(p, j_lo, step, theta)


def _saddle_log_delta(parts, step: float, theta: float):
    """(log of the saddle-point δ of ``saddle_eps`` at tilt theta, the composed tilted mean and
    variance)."""
    k = m = v = 0.0
    for one, count in parts:
        ki, mi, vi = tilted_stats(one.pess, one.j_lo, step, theta)
        k, m, v = k + count * ki, m + count * mi, v + count * vi
    r = math.sqrt(0.5 * v)
    g = 0.5 * (float(erfcx(theta * r)) - float(erfcx((theta + 1.0) * r)))
    return (k - theta * m + math.log(g) if g > 0.0 and math.isfinite(k + m) else math.nan), m, v


def saddle_eps(parts, step: float, delta: float, tol: float = 0.05):
    """(eps, theta): the saddle-point estimate of eps(delta) of the arrays [(OneStep, count)]
    composed, and the tilt theta whose composed tilted mean is that eps; None where eps lies
    below the composed mean or the search fails.

    With S the composed loss and K its log-MGF, δ(eps) = E[(1 - e^{eps - S})_+] is
    e^{K(theta) - theta eps} E_theta[e^{-theta (S - eps)} (1 - e^{eps - S})_+] for every theta; at
    the saddle point K'(theta) = eps, and with S - eps ~ N(0, v), v = K''(theta), under the tilt
    the expectation is (erfcx(theta r) - erfcx((theta + 1) r)) / 2, r = sqrt(v / 2).  Its log
    falls with theta; theta is bracketed, then narrowed by regula falsi (Illinois) until eps
    (= K'(theta), which grows at rate v) is known to ``tol`` of the composed tilted sd -- the
    tolerance of ``composition.parts_theta``.  MNIST's fixed-size pair (256 of 60000, sigma 1.1,
    T 14,040, δ 1e-5) on a grid of step 5.8e-3: 18.5 where the certified eps is 18.436.
    Heuristic: it only says where to look and how to tilt, never a bound."""
    goal = math.log(delta)
    f_lo, m, v = _saddle_log_delta(parts, step, 0.0)
    if not f_lo >= goal:
        return None  # eps below the mean (or no estimate)
    lo, hi, f_lo = 0.0, 1.0, f_lo - goal
    while True:
        f_hi, m, v = _saddle_log_delta(parts, step, hi)
        f_hi -= goal
        if f_hi != f_hi or hi > 1e6:
            return None
        if f_hi < 0:
            break
        lo, hi, f_lo = hi, 2.0 * hi, f_hi
    side, theta = 0, hi  # (m, v: the composed tilted mean and variance at theta, the last tilt tried)
    for _ in range(100):
        if (hi - lo) * math.sqrt(v) <= tol:
            break
        x = hi - f_hi * (hi - lo) / (f_hi - f_lo)
        if not lo < x < hi:
            x = 0.5 * (lo + hi)
        f, m, v = _saddle_log_delta(parts, step, x)
        f, theta = f - goal, x
        if f != f:
            return None
        if f >= 0:  # (Illinois: halve the end kept twice in a row)
            lo, f_lo = x, f
            f_hi, side = (0.5 * f_hi if side == -1 else f_hi), -1
        else:
            hi, f_hi = x, f
            f_lo, side = (0.5 * f_lo if side == 1 else f_lo), 1
    return (m, theta) if m > 0.0 else None


RTOL = 4.0 * 2.220446049250313e-16  # scipy.optimize.brentq's default rtol (4 machine epsilons)


def brent_root(f, a: float, b: float, xtol: float, rtol: float = RTOL, maxiter: int = 100) -> float:
    """A root of f in [a, b] (f(a), f(b) of opposite signs) by Brent's method, taking the steps of
    ``scipy.optimize.brentq`` (its C loop, the same arithmetic in the same order: the same root to
    the bit, tests/test_estimates.py), so that ``sgmfast`` need not import ``scipy.optimize``
    (0.2-0.3 s of every start of the command line).  After ``maxiter`` steps it returns the last
    point (brentq raises).  Heuristic use only: no bound depends on it."""
    xp, xc = float(a), float(b)
    fp, fc = f(xp), f(xc)
    if math.isnan(fp) or math.isnan(fc):
        raise ValueError("brent_root: f is NaN at an end of the bracket")
    if fp == 0.0:
        return xp
    if fc == 0.0:
        return xc
    if math.copysign(1.0, fp) == math.copysign(1.0, fc):
        raise ValueError("brent_root: f(a) and f(b) must have different signs")
    xb = fb = sp = sc = 0.0  # the far end of the bracket, the last two steps
    for _ in range(maxiter):
        if fp != 0.0 and fc != 0.0 and math.copysign(1.0, fp) != math.copysign(1.0, fc):
            xb, fb = xp, fp
            sp = sc = xc - xp
        if abs(fb) < abs(fc):  # (xc: the end with the smaller |f|)
            xp, xc, xb = xc, xb, xc
            fp, fc, fb = fc, fb, fc
        tol = (xtol + rtol * abs(xc)) / 2
        half = (xb - xc) / 2
        if fc == 0.0 or abs(half) < tol:
            return xc
        sp, sc = _brent_steps(xp, fp, xc, fc, xb, fb, sp, sc, half, tol)
        xp, fp = xc, fc
        xc += sc if abs(sc) > tol else (tol if half > 0 else -tol)
        fc = f(xc)
        if math.isnan(fc):
            raise ValueError(f"brent_root: f is NaN at {xc!r}")
    return xc


def _brent_steps(xp, fp, xc, fc, xb, fb, sp, sc, half, tol):
    """Brent's next two steps (previous, current): the secant (xp == xb) or inverse quadratic
    step when it is short enough, else bisection."""
    if abs(sp) > tol and abs(fc) < abs(fp):
        if xp == xb:
            den = fc - fp
            st = -fc * (xc - xp) / den if den != 0.0 else math.nan
        else:
            dp = (fp - fc) / (xp - xc)
            db = (fb - fc) / (xb - xc)
            den = db * dp * (fb - fp)  # (underflows where f is ~1e-300 at both ends: bisection then)
            st = -fc * (fb * db - fp * dp) / den if den != 0.0 else math.nan
        cap = 3 * abs(half) - tol
        if 2 * abs(st) < (abs(sp) if abs(sp) < cap else cap):  # (C's MIN, NaN included)
            return sc, st
    return half, half


def initial_step(schedule, accuracy: float, eps_est: float, add=False) -> float:
    """The first grid step: the certified gap grows like step^2 / (per-step loss variance);
    STEP_FACTOR is set so that the first grid usually meets the accuracy without a second round."""
    total = sum(c for _, _, c in schedule)
    var = sum(c * loss_moments(s, q, add)[1] for s, q, c in schedule)
    d = STEP_FACTOR * math.sqrt(3.0 * accuracy * var / total)
    # (0.05 keeps small losses resolved; a huge eps -- tiny sigma, losses ~ 1 / (2 sigma^2) --
    # needs only accuracy * eps, and 0.05 there would ask for a grid of ~1e7 bins per step)
    d = min(d, 0.5 * accuracy * max(eps_est, 1e-2), max(0.05, 1e-4 * eps_est))
    # quarter octaves times 1e-6: a handful of distinct steps keeps the one-step cache useful
    return 2.0 ** (math.floor(4 * math.log2(d / 1e-6)) / 4) * 1e-6 if d > 1e-12 else 1e-12


def refine(step: float, gap: float, goal: float) -> float:
    """The next, finer grid step: a quarter when the gap is far from the goal, else a half."""
    factor = max(0.25, min(0.5, 0.9 * math.sqrt(float(goal) / float(gap)))) if gap > 0 else 0.5  # (inf / inf: 0.5)
    new = step * (0.25 if factor < 0.375 else 0.5)
    if new < 1e-12:
        raise StepUnderflow("cannot reach the requested accuracy: the grid step would drop below 1e-12")
    return new
