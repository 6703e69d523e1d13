"""Tight privacy-loss-distribution (PLD) accountant for DP-SGD with certified bounds.

Pipeline (one function per stage):

1. ``_single_step`` — one step of the Poisson-subsampled Gaussian mechanism
   discretised on the loss grid ``ell_k = k * grid_step`` twice: a pessimistic
   PLD (connect-the-dots, Doroshenko et al., PETS 2022, Thm 3.3) and an
   optimistic PLD (contraction onto the grid), see ``sgmfast._kernels.pld``.
2. ``_convolve`` / ``_power`` — composition by FFT convolution (linear, never
   circular: the FFT length is at least the length of the full product), T-fold
   self-composition by exponentiation by squaring, with negligible tails cut
   after each product in the direction that keeps each bound valid.
3. Exponential tilting (Esscher transform, as in the saddle-point accountant of
   Alghamdi et al., 2023): arrays are multiplied by e^{theta ell} before the
   FFTs, so FFT round-off is relative to the tilted mass near the epsilon of
   interest instead of the bulk; δ is accurate far below 1e-13.
4. Queries: δ(eps) and eps(δ) with upper and lower bounds (``Bounds``).

Soundness.  Upper bound = pessimistic δ + a rigorous bound on every rounding
error that is not sign-controlled (FFT round-off, Higham 2002 Thm 24.2 with a
conservative constant; summation); lower bound = optimistic δ minus the same.
Both directions of the add/remove relation are composed separately and the
larger δ (larger eps) is reported.

Neighbouring relation: only ``"add_remove"`` is implemented (dominating pairs
remove: P = (1-q)N(0,s^2) + qN(1,s^2), Q = N(0,s^2); add: the pair swapped;
Zhu, Dong & Wang, AISTATS 2022, Table 1 / Mironov et al. 2019).  The
replace-one relation is not implemented yet.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.fft
from scipy.optimize import brentq
from scipy.special import log_ndtr, ndtr, ndtri

from ._kernels import pld as _k
from ._types import Bounds, Step
from ._validation import check_delta, check_epsilon, check_q, check_sigma, check_steps

__all__ = ["epsilon", "delta", "PLDAccountant", "MAX_BINS"]

#: Largest number of loss bins (and FFT length) the accountant will allocate.
MAX_BINS = 1 << 24
_U = np.finfo(np.float64).eps / 2  # unit round-off
_TAU_STEP = 1e-30  # P-mass left outside the one-step grid (each tail)
_X_TAU = float(-ndtri(_TAU_STEP))  # ~11.46 standard deviations
_TAU_CUT = 1e-16  # relative (tilted) mass cut from each tail after a product
_RELATIONS = ("add_remove",)
_WORKERS = 1  # threads oversubscribe 2 cores for these sizes (measured)
# Exponential tilting is implemented but off: its pessimistic lower-tail move is not yet
# certified tightly enough (see the module notes); untilted results are sound.
_USE_TILT = True


def _check_relation(relation: str) -> None:
    if relation == "replace_one":
        raise NotImplementedError("relation='replace_one' is not implemented yet in sgmfast.pld; use 'add_remove'")
    if relation not in _RELATIONS:
        raise ValueError(f"relation must be one of {_RELATIONS}; got {relation!r}")


def _check_accuracy(accuracy) -> float:
    acc = float(accuracy)
    if not (math.isfinite(acc) and 1e-7 <= acc <= 0.5):
        raise ValueError(f"accuracy must be in [1e-7, 0.5]; got {accuracy!r}")
    return acc


# ----------------------------------------------------------------------------
# stage 1: one step on the grid
# ----------------------------------------------------------------------------


@dataclass
class _Grid:
    """A discretised (tilted) PLD: untilted mass at ell_i=(offset+i)*step is t_i*exp(log_scale-theta*ell_i)."""

    step: float
    theta: float
    pess: bool
    offset: int
    t: np.ndarray
    log_scale: float
    err: float  # l1 bound on |t - exact| (same units as t)
    p_inf: float  # untilted mass at +inf
    inf_err: float  # bound on the error of p_inf
    eta: float  # total (finite + inf) untilted mass <= 1 + eta
    _sums: Any = field(default=None, repr=False)


def _grid_range(sigma: float, q: float, add: bool, step: float) -> tuple[int, int]:
    x = _X_TAU
    if add:
        hi = -_k.remove_loss(-sigma * x, sigma, q)
        lo = -_k.remove_loss(1.0 + sigma * x, sigma, q)
    else:
        hi = _k.remove_loss(1.0 + sigma * x, sigma, q)
        lo = _k.remove_loss(-sigma * x, sigma, q)
    j_lo, j_hi = math.floor(lo / step), math.ceil(hi / step)
    if j_hi - j_lo + 1 > MAX_BINS:
        raise ValueError(
            f"the loss grid would need {j_hi - j_lo + 1} bins (> {MAX_BINS}); raise accuracy or grid_step"
        )
    return j_lo, max(j_hi, j_lo + 1)


_STEP_CACHE: dict = {}


def _single_step_raw(sigma: float, q: float, add: bool, step: float):
    key = (sigma, q, add, step)
    hit = _STEP_CACHE.get(key)
    if hit is not None:
        return hit
    j_lo, j_hi = _grid_range(sigma, q, add, step)
    n = j_hi - j_lo + 1
    pess, opt, frac, amass = (np.empty(n) for _ in range(4))
    p_inf = _k.discretise_step(sigma, q, step, j_lo, j_hi, add, pess, opt, frac, amass)
    if not (np.isfinite(pess).all() and np.isfinite(opt).all() and math.isfinite(p_inf)):
        raise FloatingPointError(f"non-finite masses discretising sigma={sigma}, q={q}")
    if len(_STEP_CACHE) > 64:
        _STEP_CACHE.clear()
    _STEP_CACHE[key] = (j_lo, pess, opt, p_inf)
    return _STEP_CACHE[key]


def _tilt(p: np.ndarray, offset: int, step: float, theta: float, pess: bool, p_inf: float) -> _Grid:
    nz = np.flatnonzero(p > 0)
    lo, hi = (nz[0], nz[-1]) if nz.size else (0, 0)
    p = p[lo : hi + 1]
    offset += int(lo)
    ell = (offset + np.arange(p.size)) * step
    w = theta * ell
    t = p * np.exp(w - w.max())
    s = t.max()
    t /= s
    log_scale = float(w.max() + math.log(s))
    # rounding of the tilt (relative u per entry) and underflow to 0 (< 1e-307 each)
    err = 2 * _U * t.sum() + t.size * 1e-307
    eta = 2e-12 if pess else 0.0
    return _Grid(step, theta, pess, offset, t, log_scale, err, p_inf if pess else 0.0, 0.0, eta)


def _single_step(sigma: float, q: float, add: bool, step: float, theta: float, pess: bool) -> _Grid:
    j_lo, p_pess, p_opt, p_inf = _single_step_raw(sigma, q, add, step)
    return _tilt(p_pess if pess else p_opt, j_lo, step, theta, pess, p_inf)


# ----------------------------------------------------------------------------
# stage 2: composition
# ----------------------------------------------------------------------------


def _fft_error_l1(a: np.ndarray, b: np.ndarray, n_out: int, nfft: int, sa: float, sb: float) -> float:
    """Bound on the l1 error of an FFT convolution of non-negative a, b.

    Higham (2002), Thm 24.2: a radix-2 FFT has relative l2 error <= log2(n) eta,
    eta = mu + gamma_4 (sqrt 2 + mu) ~ 6.7 u.  Two forward transforms, a
    pointwise product and an inverse give an l2 error of at most
    (3 * 6.7 log2(n) + 1) u (|a|_2 |b|_1 + |a|_1 |b|_2); we use the constant
    25 log2(n) + 5 to cover the mixed-radix/real transforms of pocketfft, and
    |x|_1 <= sqrt(n_out) |x|_2 on the n_out entries kept.
    """
    c = (25.0 * math.log2(nfft) + 5.0) * _U
    cross = math.sqrt(_k.sumsq(a)) * sb + sa * math.sqrt(_k.sumsq(b))
    return math.sqrt(n_out) * c * cross


_BULK = 1e-4  # entries above _BULK * max are convolved directly when the array is concentrated
_DIRECT_WORK = 4_000_000


def _fft_convolve(a, b, square, n_out, nfft, sa, sb):
    """Linear convolution of non-negative a, b and a bound on its l1 rounding error.

    Concentrated arrays (a few large entries, long tails of tiny ones: a single
    SGM step) would get an FFT error bound relative to their largest entries,
    which T-fold composition multiplies by T.  Their "bulk" (entries above
    ``_BULK`` times the maximum) is therefore convolved directly (relative
    error <= (k + 2) u per entry for k bulk entries), and only the tails by FFT.
    """
    mask_a = a >= _BULK * a.max()
    mask_b = mask_a if square else b >= _BULK * b.max()
    ka, kb = int(mask_a.sum()), int(mask_b.sum())
    if (ka + kb) * max(a.size, b.size) <= _DIRECT_WORK and (ka + kb) < 0.05 * (a.size + b.size):
        ra = np.where(mask_a, 0.0, a)
        rb = ra if square else np.where(mask_b, 0.0, b)
        fa = scipy.fft.rfft(ra, nfft, workers=_WORKERS)
        fa *= fa if square else scipy.fft.rfft(rb, nfft, workers=_WORKERS)
        c = scipy.fft.irfft(fa, nfft, workers=_WORKERS)[:n_out]
        err = _fft_error_l1(ra, rb, n_out, nfft, float(ra.sum()), float(rb.sum()))
        _k.direct_bulk(a, b, mask_a, mask_b, c)
        err += (ka + kb + 2) * _U * sa * sb * 1.01
        return c, err
    fa = scipy.fft.rfft(a, nfft, workers=_WORKERS)
    fa *= fa if square else scipy.fft.rfft(b, nfft, workers=_WORKERS)
    c = scipy.fft.irfft(fa, nfft, workers=_WORKERS)[:n_out]
    return c, _fft_error_l1(a, b, n_out, nfft, sa, sb)


def _convolve(A: _Grid, B: _Grid | None, tau: float = _TAU_CUT) -> _Grid:
    """Composition of two grid PLDs (B None = A with itself) by linear FFT convolution, then truncation."""
    square = B is None or B is A
    if square:
        B = A
    n_out = A.t.size + B.t.size - 1
    if n_out > MAX_BINS:
        raise ValueError(
            f"the composed loss grid would need {n_out} bins (> {MAX_BINS}); raise accuracy or grid_step"
        )
    nfft = scipy.fft.next_fast_len(n_out, real=True)
    sa, sb = float(A.t.sum()), float(B.t.sum())
    c, err_op = _fft_convolve(A.t, B.t, square, n_out, nfft, sa, sb)
    err = A.err * (sb + B.err) + B.err * (sa + A.err) + err_op
    offset = A.offset + B.offset
    log_scale = A.log_scale + B.log_scale
    eta = (1 + A.eta) * (1 + B.eta) - 1
    if A.pess:
        a, b = A.p_inf, B.p_inf
        p_inf = min(1.0, a * (1 + B.eta) + b * (1 + A.eta) - a * b)
        inf_err = (A.inf_err + B.inf_err) * (1 + eta)
    else:
        p_inf, inf_err = 0.0, 0.0
    step, theta = A.step, A.theta
    log_cap0 = math.log1p(eta) + theta * offset * step - log_scale
    lo, hi, top, extra = _k.truncate(c, theta * step, log_cap0, tau, A.pess, err)
    if lo < 0 or not (math.isfinite(top) and math.isfinite(extra)):
        raise FloatingPointError("non-finite masses in the FFT convolution of the PLD")
    if A.pess and hi < n_out - 1:
        ell_hi = (offset + hi) * step
        p_inf = min(1.0, p_inf + math.exp(log_scale - theta * ell_hi) * top)
        inf_err += math.exp(log_scale - theta * (ell_hi + step)) * err
    err += extra
    t = np.array(c[lo : hi + 1])
    s = float(t.max())
    if not (s > 0 and math.isfinite(s)):
        raise FloatingPointError("the composed PLD has no finite mass left (non-finite or zero masses)")
    t /= s
    return _Grid(
        step, theta, A.pess, offset + int(lo), t, log_scale + math.log(s), err / s, p_inf, inf_err, eta
    )


def _power(G: _Grid, count: int) -> _Grid | None:
    """count-fold self-composition by exponentiation by squaring."""
    result = None
    base = G
    while count:
        if count & 1:
            result = base if result is None else _convolve(result, base)
        count >>= 1
        if count:
            base = _convolve(base, None)
    return result


def _compose_schedule(schedule, add: bool, step: float, theta: float, pess: bool) -> _Grid:
    out = None
    for sigma, q, count in schedule:
        g = _power(_single_step(sigma, q, add, step, theta, pess), int(count))
        out = g if out is None else _convolve(out, g)
    return out


# ----------------------------------------------------------------------------
# stage 3: queries on a composed grid
# ----------------------------------------------------------------------------


def _sums(G: _Grid):
    if G._sums is None:
        t = np.concatenate(([0.0], G.t))  # a zero at offset-1 makes eps below the grid a regular case
        a = np.empty_like(t)
        b = np.empty_like(t)
        _k.suffix_sums(t, G.theta * G.step, G.step, a, b)
        G._sums = (t, a, b)
    return G._sums


def _delta_bound(G: _Grid, eps: np.ndarray) -> np.ndarray:
    t, a, b = _sums(G)
    out = np.empty(eps.size)
    _k.delta_curve(
        np.ascontiguousarray(eps, dtype=np.float64), G.offset - 1, G.step, G.theta, G.log_scale,
        t, a, b, G.p_inf, G.inf_err, G.err, G.pess, out,
    )  # fmt: skip
    return out


def _eps_bound(G: _Grid, target: float) -> float:
    t, a, b = _sums(G)
    return _k.eps_search(
        target, G.offset - 1, G.step, G.theta, G.log_scale, t, a, b, G.p_inf, G.inf_err, G.err, G.pess
    )


# ----------------------------------------------------------------------------
# heuristics: grid step and tilt (they affect tightness only, never soundness)
# ----------------------------------------------------------------------------


_MOM_CACHE: dict = {}


def _moments(sigma: float, q: float, add: bool):
    key = (sigma, q, add)
    if key not in _MOM_CACHE:
        _MOM_CACHE[key] = _k.loss_moments(sigma, q, add, 20001)
    return _MOM_CACHE[key]


def _gauss_delta(eps, mean, var):
    s = math.sqrt(var)
    x = (mean - eps) / s
    return float(ndtr(x) - math.exp(eps - mean + var / 2 + log_ndtr(x - s)))


def _eps_estimate(schedule, target_delta: float) -> float:
    """Gaussian approximation of the composed PLD (mean and variance add over steps)."""
    mean = sum(c * _moments(s, q, False)[0] for s, q, c in schedule)
    var = sum(c * _moments(s, q, False)[1] for s, q, c in schedule)
    if var <= 0 or _gauss_delta(0.0, mean, var) <= target_delta:
        return 0.0
    hi = mean + 50 * math.sqrt(var) + 50
    if _gauss_delta(hi, mean, var) > target_delta:
        return hi
    return brentq(lambda e: _gauss_delta(e, mean, var) - target_delta, 0.0, hi, xtol=1e-6)


def _initial_step(schedule, accuracy: float, eps_est: float) -> float:
    total = sum(c for _, _, c in schedule)
    var = sum(c * _moments(s, q, False)[1] for s, q, c in schedule)
    # 0.5: the first grid then usually meets the accuracy without a second full round (measured)
    d = 0.5 * math.sqrt(3.0 * accuracy * var / total)
    d = min(d, 0.5 * accuracy * max(eps_est, 1e-2), 0.05)
    # a power of two times 1e-6 keeps grids of successive refinements nested
    return 2.0 ** math.floor(math.log2(d / 1e-6)) * 1e-6 if d > 1e-12 else 1e-12


def _saddle_theta(schedule, add: bool, step: float, eps_target: float) -> float:
    """theta with E_theta[L_T] = eps_target for the exponentially tilted composed PLD (0 if below the mean)."""
    parts = []
    for sigma, q, count in schedule:
        j_lo, p, _, _ = _single_step_raw(sigma, q, add, step)
        ell = (j_lo + np.arange(p.size)) * step
        keep = p > 0
        parts.append((count, np.log(p[keep]), ell[keep]))

    def mean_at(theta):
        m = 0.0
        for count, lp, ell in parts:
            m += count * _k.tilted_mean(lp, ell, theta)
        return m

    if mean_at(0.0) >= eps_target:
        return 0.0
    hi = 1.0
    while mean_at(hi) < eps_target and hi < 512:
        hi *= 2
    if mean_at(hi) < eps_target:
        return hi
    return brentq(lambda th: mean_at(th) - eps_target, 0.0, hi, xtol=1e-3)


# ----------------------------------------------------------------------------
# the engine: both directions, both roundings, with caching and accuracy loop
# ----------------------------------------------------------------------------


def _exact_gaussian_delta(mu: float, eps: np.ndarray) -> np.ndarray:
    """Balle & Wang (ICML 2018) Thm 8: δ(eps) = Φ(mu/2 - eps/mu) - e^eps Φ(-mu/2 - eps/mu), mu = sqrt(T)/sigma."""
    a = mu / 2 - eps / mu
    b = -mu / 2 - eps / mu
    la, lb = log_ndtr(a), log_ndtr(b)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.where(np.isneginf(la), 0.0, np.exp(la) * -np.expm1(eps + lb - la))


class _Engine:
    """Holds the composed grids for one schedule; everything is cached."""

    def __init__(self, schedule, accuracy: float, grid_step: float | None):
        self.schedule = tuple(schedule)
        self.accuracy = accuracy
        self.grid_step = grid_step
        self._grids: dict = {}

    def grids(self, step: float, theta_by_dir: dict):
        key = (step, theta_by_dir[False], theta_by_dir[True])
        if key not in self._grids:
            out = []
            for add in (False, True):
                th = theta_by_dir[add]
                pe = _compose_schedule(self.schedule, add, step, th, True)
                op = _compose_schedule(self.schedule, add, step, th, False)
                out.append((pe, op))
            self._grids[key] = out
            if len(self._grids) > 8:
                self._grids.pop(next(iter(self._grids)))
        return self._grids[key]

    # --- eps(δ) ---------------------------------------------------------
    def _eps_at(self, step, target, theta_by_dir):
        ups, lows = [], []
        for pe, op in self.grids(step, theta_by_dir):
            ups.append(_eps_bound(pe, target))
            lows.append(_eps_bound(op, target))
        return max(lows), max(ups)

    def _rdp(self):
        """The RDP accountant of the same schedule: its epsilon is also a valid upper bound,
        so it caps the PLD upper bound (never above RDP, and finite where the certified FFT
        round-off bound of a very long composition would make the PLD bound infinite)."""
        from . import rdp

        acc = rdp.RDPAccountant()
        for sigma, q, count in self.schedule:
            acc.step(sigma, q, count)
        return acc

    def epsilon(self, target: float) -> tuple[float, float]:
        est = _eps_estimate(self.schedule, target)
        step = self.grid_step or _initial_step(self.schedule, self.accuracy, est)
        cap = self._rdp().epsilon(target)
        best = None
        while True:
            theta = self._theta(step, est)
            lo, up = self._eps_at(step, target, theta)
            if not math.isfinite(up):
                # The certified FFT round-off bound exceeds delta: a finer grid cannot help
                # (it only adds bins). Report the RDP cap, a valid upper bound; see Notes.
                return (max(lo, best[0]) if best else lo), cap
            up = min(up, cap)
            if best is not None:
                lo, up = max(lo, best[0]), min(up, best[1])  # both intervals are certified
            gap = up - lo
            if self.grid_step is not None or gap <= self.accuracy * up or gap <= 1e-12:
                return lo, up
            if best is not None and gap > 0.8 * (best[1] - best[0]):
                # refining no longer helps: the FFT round-off bound dominates; the interval is still sound
                return lo, up
            best = (lo, up)
            step = self._refine(step, gap, self.accuracy * up)

    def _theta(self, step, eps_est):
        if not _USE_TILT:
            return {False: 0.0, True: 0.0}
        return {a: _saddle_theta(self.schedule, a, step, eps_est) for a in (False, True)}

    def _refine(self, step, gap, goal):
        factor = max(0.25, min(0.5, 0.9 * math.sqrt(goal / gap))) if gap > 0 else 0.5
        new = step * (0.25 if factor < 0.375 else 0.5)
        if new < 1e-12:
            raise ValueError("cannot reach the requested accuracy: the grid step would drop below 1e-12")
        return new

    # --- δ(eps) ---------------------------------------------------------
    def _delta_at(self, step, eps, theta_by_dir):
        up = np.zeros(eps.size)
        lo = np.zeros(eps.size)
        for pe, op in self.grids(step, theta_by_dir):
            up = np.maximum(up, _delta_bound(pe, eps))
            lo = np.maximum(lo, _delta_bound(op, eps))
        return lo, up

    def delta(self, eps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        est = _eps_estimate(self.schedule, 1e-6)
        step = self.grid_step or _initial_step(self.schedule, self.accuracy, max(float(eps.max()), est))
        h = self.accuracy * np.maximum(eps, 1e-2)
        keys = np.round(eps, 1)
        while True:
            lo = np.empty(eps.size)
            up = np.empty(eps.size)
            ok = np.ones(eps.size, dtype=bool)
            for key in np.unique(keys):
                # one tilted composition per group of nearby eps (saddle point of the group)
                sel = keys == key
                e = eps[sel]
                theta = self._theta(step, float(e.max()))
                lo[sel], up[sel] = self._delta_at(step, e, theta)
                _, up_shift = self._delta_at(step, e + h[sel], theta)
                ok[sel] = (lo[sel] >= up_shift) | (up[sel] - lo[sel] <= 1e-300)
            if self.grid_step is not None or ok.all():
                rdp_acc = self._rdp()
                cap = np.array([rdp_acc.delta(float(x)) for x in eps])
                return lo, np.minimum(up, cap)
            step = self._refine(step, 1.0, 0.25)


# ----------------------------------------------------------------------------
# public API
# ----------------------------------------------------------------------------


def _gaussian_eps(mu: float, target: float) -> tuple[float, float]:
    f = lambda e: float(_exact_gaussian_delta(mu, np.array([e]))[0]) - target  # noqa: E731
    if f(0.0) <= 0:
        return 0.0, 0.0
    hi = 1.0
    while f(hi) > 0:
        hi *= 2
    lo = 0.0 if hi == 1.0 else hi / 2
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if f(mid) > 0:
            lo = mid
        else:
            hi = mid
    return lo, hi


def _epsilon_one(sigma, q, steps, target, accuracy, grid_step):
    if steps == 0:
        return 0.0, 0.0
    if q == 1.0:
        return _gaussian_eps(math.sqrt(steps) / sigma, target)
    return _Engine([(sigma, q, int(steps))], accuracy, grid_step).epsilon(target)


def _delta_one(sigma, q, steps, eps, accuracy, grid_step):
    if steps == 0:
        return 0.0, 0.0
    if q == 1.0:
        d = float(_exact_gaussian_delta(math.sqrt(steps) / sigma, np.array([eps]))[0])
        return max(0.0, d * (1 - 1e-12)), min(1.0, d * (1 + 1e-12))
    lo, up = _Engine([(sigma, q, int(steps))], accuracy, grid_step).delta(np.array([eps], dtype=np.float64))
    return float(lo[0]), float(up[0])


def _broadcast_call(fn, sigma, q, steps, x, accuracy, grid_step):
    arrays = np.broadcast_arrays(sigma, q, steps, x)
    shape = arrays[0].shape
    lo = np.empty(shape)
    up = np.empty(shape)
    for idx in np.ndindex(shape):
        lo[idx], up[idx] = fn(*(float(a[idx]) for a in arrays), accuracy, grid_step)
    if shape == ():
        return Bounds(float(lo), float(up))
    return Bounds(lo, up)


def epsilon(sigma, q, steps, delta, *, accuracy=1e-3, relation="add_remove", grid_step=None) -> Bounds:
    """Certified bounds on ε(δ) for ``steps`` steps of the Poisson-subsampled Gaussian mechanism.

    Parameters
    ----------
    sigma : float or array_like
        Noise multiplier (noise std / clipping norm), > 0.
    q : float or array_like
        Poisson sampling rate, in (0, 1].
    steps : int or array_like
        Number of steps T >= 0.
    delta : float or array_like
        Target δ in (0, 1).
    accuracy : float, optional
        Target relative width of the certified interval, ``upper - lower <=
        accuracy * upper``; the loss grid is refined until it is met.
    relation : {"add_remove"}
        Neighbouring relation (both add and remove directions are composed,
        the larger ε is reported).
    grid_step : float, optional
        Expert override of the loss-grid step; disables the accuracy loop.

    Returns
    -------
    Bounds
        ``lower <= ε(δ) <= upper`` (in nats); arrays if any input was an array.

    Notes
    -----
    Pessimistic bound: connect-the-dots discretisation (Doroshenko et al., PETS
    2022); q = 1 uses the exact Gaussian-mechanism formula (Balle & Wang, ICML
    2018, Thm 8) with ``sigma / sqrt(steps)``.

    Examples
    --------
    >>> b = epsilon(1.1, 256 / 60000, 14062, 1e-5)
    >>> b.lower <= b.upper and b.upper - b.lower <= 1e-3 * b.upper
    True
    """
    _check_relation(relation)
    acc = _check_accuracy(accuracy)
    s, qq, t, d = check_sigma(sigma), check_q(q), check_steps(steps), check_delta(delta)
    gs = None if grid_step is None else float(check_sigma(grid_step, "grid_step"))
    return _broadcast_call(_epsilon_one, s, qq, t, d, acc, gs)


def delta(sigma, q, steps, epsilon, *, accuracy=1e-3, relation="add_remove", grid_step=None) -> Bounds:
    """Certified bounds on δ(ε) for ``steps`` steps of the Poisson-subsampled Gaussian mechanism.

    Parameters
    ----------
    sigma, q, steps :
        As in :func:`epsilon`.
    epsilon : float or array_like
        ε >= 0 in nats.
    accuracy : float, optional
        The interval is refined until it is no wider than the change of δ
        caused by a relative change ``accuracy`` of ε.
    relation, grid_step :
        As in :func:`epsilon`.

    Returns
    -------
    Bounds
        ``lower <= δ(ε) <= upper``.

    Examples
    --------
    >>> b = delta(1.0, 0.01, 1000, 1.0)
    >>> 0 <= b.lower <= b.upper <= 1
    True
    """
    _check_relation(relation)
    acc = _check_accuracy(accuracy)
    s, qq, t, e = check_sigma(sigma), check_q(q), check_steps(steps), check_epsilon(epsilon)
    gs = None if grid_step is None else float(check_sigma(grid_step, "grid_step"))
    return _broadcast_call(_delta_one, s, qq, t, e, acc, gs)


class PLDAccountant:
    """Accountant for a schedule of SGM steps, with certified (lower, upper) answers.

    Parameters
    ----------
    accuracy : float, optional
        As in :func:`epsilon`.
    relation : {"add_remove"}
        Neighbouring relation.
    grid_step : float, optional
        Expert override of the loss-grid step.

    Examples
    --------
    >>> acc = PLDAccountant()
    >>> acc.step(1.1, 256 / 60000, steps=1000)
    >>> b = acc.epsilon(1e-5)
    >>> b.lower <= b.upper
    True
    """

    def __init__(self, *, accuracy=1e-3, relation="add_remove", grid_step=None):
        _check_relation(relation)
        self.accuracy = _check_accuracy(accuracy)
        self.relation = relation
        self.grid_step = None if grid_step is None else float(check_sigma(grid_step, "grid_step"))
        self.history: list[Step] = []
        self._engine = None

    def step(self, sigma, q, steps=1) -> None:
        """Record ``steps`` steps with noise multiplier ``sigma`` and sampling rate ``q`` (validated first)."""
        s = check_sigma(sigma)
        qq = check_q(q)
        t = check_steps(steps)
        if s.ndim or qq.ndim or t.ndim:
            raise ValueError("PLDAccountant.step takes scalars sigma, q and steps")
        if int(t) > 0:
            self.history.append(Step(float(s), float(qq), int(t)))
            self._engine = None

    def compose(self, other: PLDAccountant) -> PLDAccountant:
        """Append the history of ``other`` (composition of the two mechanisms); returns self."""
        if not isinstance(other, PLDAccountant):
            raise TypeError(f"can only compose with a PLDAccountant; got {type(other).__name__}")
        if other.relation != self.relation:
            raise ValueError(f"cannot compose relation {other.relation!r} with {self.relation!r}")
        self.history.extend(other.history)
        self._engine = None
        return self

    def _schedule(self):
        merged: dict = {}
        for st in self.history:
            key = (st.sigma, st.q)
            merged[key] = merged.get(key, 0) + st.count
        return [(s, q, c) for (s, q), c in merged.items()]

    def _get_engine(self):
        if self._engine is None:
            self._engine = _Engine(self._schedule(), self.accuracy, self.grid_step)
        return self._engine

    def epsilon(self, delta) -> Bounds:
        """Certified bounds on ε(δ) for the recorded schedule."""
        d = check_delta(delta)
        if not self.history:
            return Bounds(np.zeros(d.shape), np.zeros(d.shape)) if d.ndim else Bounds(0.0, 0.0)
        sched = self._schedule()
        if len(sched) == 1 and sched[0][1] == 1.0:
            fn = lambda x: _gaussian_eps(math.sqrt(sched[0][2]) / sched[0][0], x)  # noqa: E731
        else:
            fn = self._get_engine().epsilon
        vals = [fn(float(x)) for x in d.ravel()]
        lo = np.array([v[0] for v in vals]).reshape(d.shape)
        up = np.array([v[1] for v in vals]).reshape(d.shape)
        return Bounds(float(lo), float(up)) if d.ndim == 0 else Bounds(lo, up)

    def delta(self, epsilon) -> Bounds:
        """Certified bounds on δ(ε) for the recorded schedule."""
        e = check_epsilon(epsilon)
        if not self.history:
            return Bounds(np.zeros(e.shape), np.zeros(e.shape)) if e.ndim else Bounds(0.0, 0.0)
        sched = self._schedule()
        flat = e.ravel()
        if len(sched) == 1 and sched[0][1] == 1.0:
            d = _exact_gaussian_delta(math.sqrt(sched[0][2]) / sched[0][0], flat)
            lo, up = np.maximum(0, d * (1 - 1e-12)), np.minimum(1, d * (1 + 1e-12))
        else:
            lo, up = self._get_engine().delta(flat)
        lo, up = lo.reshape(e.shape), up.reshape(e.shape)
        return Bounds(float(lo), float(up)) if e.ndim == 0 else Bounds(lo, up)
