"""Tight privacy-loss-distribution (PLD) accountant for DP-SGD with certified bounds.

Pipeline (one function per stage):

1. ``_one_step`` — one step of the Poisson-subsampled Gaussian mechanism
   discretised on the loss grid ``ell_k = k * grid_step`` twice: a pessimistic
   PLD (connect-the-dots, Doroshenko et al., PETS 2022, Thm 3.3) and an
   optimistic PLD (convex-order minorant of the bins), see ``sgmfast._kernels.pld``.
2. ``_compose`` — exponential tilting e^{theta ell} (Esscher transform, as in the
   saddle-point accountant of Alghamdi et al., 2023) towards the eps of interest,
   then the whole T-fold composition in one transform: fold each tilted one-step
   array modulo the FFT length, one forward FFT each, the T-th power of every
   coefficient by exponentiation by squaring, one inverse FFT.
3. Queries: δ(eps) and eps(δ) with upper and lower bounds (``Bounds``).

Many steps (``_compose_two_stage``).  When the fine grid would be long -- heavy one-step
tails (small q and sigma) and a wide composed spread (large T) -- the T-fold composition
is done in two stages.  The one-step PLD is cut into a core on the fine grid and its
tails on a coarse grid of spacing m * step (m a power of two, so the shared bin edges are
the same floating-point numbers).  A block of T1 ~ sqrt(T) steps is
sum_k binom(T1, k) C^{*(T1-k)} * R^{*k} (k tail events): the core powers are FFT powers on
the fine grid, coarsened -- pessimistically by splitting every atom between its two coarse
neighbours so that mass and E e^{-loss} are kept (connect-the-dots applied to atoms),
optimistically by the convex-order minorant of the collapsed cells -- and the block's
spectrum on the coarse grid is sum_k w_k F(D_k) F(R)^k.  The blocks are then composed
T / T1 times like single steps.  Blocks with more tail events than kept go to +inf
(upper bound) or are dropped (lower bound); the fine windows are bounded like the final
one.  With m ~ sqrt(T1) the coarsening adds about as much loss variance as the fine grid,
and both FFT lengths are ~T^(1/4) times shorter than one fine-grid transform of all T steps.

Few tail events (``_event_grids``).  With q << 1 the one-step loss has a long, log-normal-like
tail (loss ~ q e^{(2z-1)/(2 sigma^2)} for a sampled step), and at small δ the answer can be
set by one or two steps far in it: no single exponential tilt centres the composition at
eps without that tail taking over the window.  Where a plain tilt leaves the interval wide,
the one-step PLD is cut at a loss c ~ eps into a core C (fine grid) and a tail R (coarse
grid), and δ(eps) = sum_k δ of binom(T, k) C^{*(T-k)} * R^{*k} over k <= K tail steps, each
term composed by itself (the one with k = 0 tilted to its saddle point, which exists because
its core is bounded by c; the others untilted, their δ being of the order of their mass),
plus binom(T, K+1) r^{K+1} for the rest (union bound).  Each term's FFT round-off is then
relative to its own mass.

Soundness.  Upper bound = pessimistic δ + a per-entry bound on the FFT round-off
(Higham 2002 Thm 24.2 with a conservative constant, propagated through the power)
+ the Chernoff-bounded tilted mass outside the FFT window (to +inf); lower bound =
optimistic δ minus the round-off bound and minus the largest effect the wrapped-around
mass can have.  Both directions of the add/remove relation are bounded and the
larger δ (larger eps) is reported.

Windows.  Wrapped-around mass only adds to the pessimistic PLD (sound as it is) and is
subtracted from the optimistic one.  With tilt theta > 0, mass that wraps up from below
lands a window length W higher, where its untilted weight is at most e^{-theta W} times
its own; mass that wraps down from above weighs e^{theta W} times more where it lands,
so its tilted mass is kept small by a Chernoff edge.  Window lengths are chosen so that
both effects stay below ~tau * T (~1e-4 * accuracy * δ, the scale of the one-step tail
cut): the pessimistic effects then cost at most that much tightness, and the optimistic
ones are subtracted exactly as bounded.

Neighbouring relations.  ``"add_remove"`` (dominating pairs remove:
P = (1-q)N(0,s^2) + qN(1,s^2), Q = N(0,s^2); add: the pair swapped; Zhu, Dong &
Wang, AISTATS 2022 / Mironov et al. 2019).  ``"replace_one"``: P = (1-q)N(0,s^2) +
qN(-1,s^2), Q = (1-q)N(0,s^2) + qN(1,s^2) (clipped contributions of norm <= 1 on
either side of the replacement, so the batch sum moves by up to 2; symmetric, so
one direction suffices; no RDP cap applies to it).
"""

from __future__ import annotations

import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor
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
_RELATIONS = ("add_remove", "replace_one")
_REPLACE = "replace"  # direction code of the replace-one pair (add/remove: False = remove, True = add)
_WORKERS = 1  # threads oversubscribe 2 cores for these sizes (measured)
# Exponential tilting is implemented but off: its pessimistic lower-tail move is not yet
# certified tightly enough (see the module notes); untilted results are sound.
_USE_TILT = True


def _check_relation(relation: str) -> None:
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
    inf_err: float  # absolute error bound: added to the upper bound (p_inf's), subtracted from the lower
    eta: float  # total (finite + inf) untilted mass <= 1 + eta
    floor: float = -math.inf  # the bound holds for eps >= floor (below: upper 1, lower 0)
    _sums: Any = field(default=None, repr=False)


def _grid_range(sigma: float, q: float, add: bool, step: float, tau: float = _TAU_STEP) -> tuple[int, int]:
    """Grid indices covering one step, leaving about ``tau`` of P-mass beyond the far (long) tail.

    The far tail is the high-loss end of the remove direction and the low-loss end of the add
    direction; what lies beyond the grid is accounted exactly by the discretisation (to +inf or
    moved onto the grid when pessimistic, dropped or moved onto the grid when optimistic).
    """
    x = _X_TAU
    x_far = float(-ndtri(min(0.25, max(tau, _TAU_STEP) / q)))
    x_near = float(-ndtri(min(0.25, max(tau, _TAU_STEP))))
    if add == _REPLACE:
        # P = (1-q) N(0, s^2) + q N(-1, s^2); the loss decreases in z
        lo = _k.replace_loss(sigma * x, sigma, q)
        hi = _k.replace_loss(min(-1.0 - sigma * x_far, -sigma * x_near), sigma, q)
    elif add:
        hi = -_k.remove_loss(-sigma * x, sigma, q)
        lo = -_k.remove_loss(1.0 + sigma * max(x_far, x_near), sigma, q)
    else:
        # both components' tails: at large sigma the (1 - q) N(0) tail outweighs q N(1)'s
        hi = _k.remove_loss(max(1.0 + sigma * x_far, sigma * x_near), sigma, q)
        lo = _k.remove_loss(-sigma * x, sigma, q)
    j_lo, j_hi = math.floor(lo / step), math.ceil(hi / step)
    if j_hi - j_lo + 1 > MAX_BINS:
        raise ValueError(
            f"the loss grid would need {j_hi - j_lo + 1} bins (> {MAX_BINS}); raise accuracy or grid_step"
        )
    return j_lo, max(j_hi, j_lo + 1)


class _OneStep:
    """One direction of one SGM step on the grid: pessimistic masses from index ``j_lo`` and
    +inf mass ``p_inf``; the optimistic masses are built on first use (upper-bound-only
    evaluations never need them)."""

    __slots__ = ("j_lo", "pess", "p_inf", "_step", "_frac", "_amass", "_top", "_opt")

    def __init__(self, j_lo, pess, p_inf, step, frac, amass, top):
        self.j_lo, self.pess, self.p_inf, self._step = j_lo, pess, p_inf, step
        self._frac, self._amass, self._top, self._opt = frac, amass, top, None

    @property
    def opt(self) -> np.ndarray:
        opt = self._opt
        if opt is None:
            opt = np.empty(self.pess.size)
            _k.optimistic_step(self._step, self._frac, self._amass, self._top, opt)
            if not np.isfinite(opt).all():
                raise FloatingPointError("non-finite optimistic one-step masses")
            self._opt = opt
        return opt


_STEP_CACHE: dict = {}


def _bins(sigma: float, q: float, step: float, tau: float, k_lo: int, k_hi: int):
    """The remove-loss bins k_lo..k_hi of ``_k.step_bins`` (log N(0)-mass, log mixture ratio, log
    error bound), as arrays starting at the returned index. Both directions read them (the add
    direction's bins are the remove direction's, mirrored); a cached range is extended, never
    recomputed."""
    key = ("bins", sigma, q, step, tau)
    hit = _STEP_CACHE.get(key)
    if hit is not None and hit[0] <= k_lo and k_hi <= hit[0] + hit[1].size - 1:
        return hit
    if hit is not None:
        k_lo, k_hi = min(k_lo, hit[0]), max(k_hi, hit[0] + hit[1].size - 1)
    if k_hi - k_lo + 1 > MAX_BINS:
        raise ValueError(f"the loss grid would need {k_hi - k_lo + 1} bins (> {MAX_BINS}); raise accuracy or grid_step")
    arrs = tuple(np.empty(k_hi - k_lo + 1) for _ in range(3))
    if hit is None:
        _step_bins_split(sigma, q, step, k_lo, arrs)
    else:
        c_lo, cached = hit[0], hit[1:]
        c_hi = c_lo + cached[0].size - 1
        for a, c in zip(arrs, cached):
            a[c_lo - k_lo : c_hi - k_lo + 1] = c
        if c_lo > k_lo:
            _k.step_bins(sigma, q, step, k_lo, c_lo - k_lo, *arrs)
        if k_hi > c_hi:
            _k.step_bins(sigma, q, step, c_hi + 1, k_hi - c_hi, *(a[c_hi - k_lo + 1 :] for a in arrs))
    out = (k_lo, *arrs)
    _cache_put(key, out)
    return out


_POOL = None
_SPLIT_MIN = 16384  # array size below which one thread does it all


_GRID_POOL = None


def _grid_pool() -> ThreadPoolExecutor:
    """One thread for building an optimistic grid while the caller builds the pessimistic one
    (separate from ``_pool``, which the grid builders themselves use)."""
    global _GRID_POOL
    if _GRID_POOL is None:
        _GRID_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sgmfast-grid")
    return _GRID_POOL


def _pool() -> ThreadPoolExecutor:
    """One helper thread for splitting large kernels in two (they release the GIL)."""
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sgmfast")
    return _POOL


def _step_bins_split(sigma, q, step, k_lo, arrs) -> None:
    """``_k.step_bins`` over the whole arrays, the upper half on a second thread (the kernels
    release the GIL; the edge between the halves is the same floating-point value either way)."""
    nb = arrs[0].size
    if nb < _SPLIT_MIN or (os.cpu_count() or 1) < 2:
        _k.step_bins(sigma, q, step, k_lo, nb, *arrs)
        return
    h = nb // 2
    fut = _pool().submit(_k.step_bins, sigma, q, step, k_lo + h, nb - h, *(a[h:] for a in arrs))
    _k.step_bins(sigma, q, step, k_lo, h, *arrs)
    fut.result()


def _power_product(spectra, counts, e2, z):
    """``_k.power_product``, the upper half of the frequencies on a second thread."""
    h = spectra.shape[1]
    if h < _SPLIT_MIN or (os.cpu_count() or 1) < 2:
        return _k.power_product(spectra, counts, e2, z)
    m = h // 2
    w_hi = np.zeros(spectra.shape[0])
    w_lo = np.zeros(spectra.shape[0])
    fut = _pool().submit(_k.power_range, spectra, counts, e2, z, m, h, w_hi)
    err_lo, z2_lo = _k.power_range(spectra, counts, e2, z, 0, m, w_lo)
    err_hi, z2_hi = fut.result()
    return err_lo + err_hi + _k.power_weight_err(counts, e2, w_lo + w_hi), z2_lo + z2_hi


def _cache_put(key, value) -> None:
    if len(_STEP_CACHE) > 64:
        _STEP_CACHE.clear()
    _STEP_CACHE[key] = value  # (callers use their local: another thread may clear the cache meanwhile)


def _one_step(sigma: float, q: float, add: bool, step: float, tau: float = _TAU_STEP) -> _OneStep:
    """One direction of one step on the grid, cached per (sigma, q, direction, step, tau)."""
    key = (sigma, q, add, step, tau)
    hit = _STEP_CACHE.get(key)
    if hit is None:
        j_lo, j_hi = _grid_range(sigma, q, add, step, tau)
        hit = _discretise(sigma, q, add, step, tau, j_lo, j_hi)
        _cache_put(key, hit)
    return hit


def _discretise(sigma, q, add, step, tau, j_lo, j_hi, keep_low=True, keep_high=True) -> _OneStep:
    """One direction on the grid points j_lo..j_hi. The P-mass beyond the grid is accounted
    (pessimistic: below moved up to j_lo, above to +inf; optimistic: below dropped, above moved
    down to j_hi) unless ``keep_low`` / ``keep_high`` is False: then it belongs to another
    piece of the same step (``_hybrid_step``) and is left out here."""
    # loss bins as remove-loss bins: remove j_lo..j_hi-1, add (and replace) -j_hi..-j_lo-1
    k_lo, k_hi = (-j_hi, -j_lo - 1) if add else (j_lo, j_hi - 1)
    err0 = 1.0 + 1.0 / (sigma * sigma) + abs(math.log(q))
    if add == _REPLACE:
        b_lo = k_lo
        lm0, ls, le = (np.empty(k_hi - k_lo + 1) for _ in range(3))
        _k.replace_bins(sigma, q, step, k_lo, lm0.size, lm0, ls, le)
        lp_low, lp_high = _k.replace_tails(sigma, q, step, j_lo, j_hi)
        err0 *= 2.0  # the replace loss moves twice as fast in z
    else:
        b_lo, lm0, ls, le = _bins(sigma, q, step, tau, k_lo, k_hi)
        lp_low, lp_high = _k.addremove_tails(sigma, q, step, j_lo, j_hi, add)
    lp_low = lp_low if keep_low else -math.inf
    lp_high = lp_high if keep_high else -math.inf
    n = j_hi - j_lo + 1
    pess, frac, amass = np.empty(n), np.empty(n), np.empty(n)
    p_inf, top = _k.discretise_direction(sigma, q, step, b_lo, lm0, ls, le, j_lo, j_hi, bool(add), lp_low, lp_high,
                                         err0, pess, frac, amass)
    if not (np.isfinite(pess).all() and math.isfinite(p_inf) and math.isfinite(top)):
        raise FloatingPointError(f"non-finite masses discretising sigma={sigma}, q={q}")
    return _OneStep(j_lo, pess, p_inf, step, frac, amass, top)


def _fft_const(n: int) -> float:
    """Relative l2 error bound of one real FFT of length n (Higham 2002, Thm 24.2).

    Higham: a radix-2 FFT has relative l2 error <= log2(n) eta / (1 - log2(n) eta),
    eta = mu + gamma_4 (sqrt 2 + mu) ~ 6.7u.  We use the conservative constant
    (25 log2 n + 5) u to cover the mixed-radix real transforms of pocketfft.
    """
    return (25.0 * math.log2(max(n, 2)) + 5.0) * _U


class _ArrayPart:
    """A tilted array t from grid point j_lo, composed ``count`` times."""

    __slots__ = ("j_lo", "t", "count")

    def __init__(self, j_lo, t, count):
        self.j_lo, self.t, self.count = j_lo, t, count

    @property
    def sup(self):
        return self.j_lo, self.j_lo + self.t.size - 1

    def log_mgf(self, step, lams):
        out = np.empty(lams.size)
        _k.log_mgf_multi(self.t, self.j_lo, step, lams, out)
        return out

    def spectrum(self, n, c_n):
        """(half spectrum of the array folded modulo n, bound on its l2 error over the full spectrum)."""
        f = np.zeros(n)
        _k.fold(self.t, self.j_lo, n, f)
        # Parseval: |F f|_2 = sqrt(n) |f|_2
        return scipy.fft.rfft(f, workers=_WORKERS), c_n * math.sqrt(n * _k.sumsq(f)) * 1.01


_WINDOW_SDS = 9.0  # initial half-width of the FFT window in tilted standard deviations
_TAIL_GOAL = 1e-15  # tilted mass allowed outside the window (Chernoff bound)
_PESS_UP_SDS = 3.0  # pessimistic windows: sds above max(mean, eps_lo) before the Chernoff edge


def _compose(schedule, add: bool, step: float, theta: float, pess: bool, eps_lo: float, tau: float) -> _Grid:
    """Tilted composition of a schedule of SGM steps on the loss grid, by one FFT power.

    Every one-step array is tilted by e^{theta ell}, folded modulo the FFT
    length n and transformed once; the composed spectrum prod_i F_i^{T_i} is
    formed by exponentiation by squaring of each coefficient, and one inverse
    transform gives the composed tilted PLD on a window [J0, J0 + n) of grid
    indices.  Mass outside the window wraps around (circular convolution);
    it is bounded by Chernoff bounds on the (exactly known) tilted one-step
    moment generating functions and charged to the bounds: the pessimistic
    answer adds the mass above the window (to +inf) and keeps the wrapped mass
    (it only adds non-negative mass), the optimistic answer subtracts the
    largest effect the wrapped mass can have.  FFT round-off is bounded per
    entry (see ``_k.power_product``) and added to (pessimistic) or subtracted
    from (optimistic) every entry.
    """
    plan = _two_stage_plan(schedule, step, add, tau)
    if plan is not None:
        try:
            return _compose_two_stage(*schedule[0], add, step, *plan, theta, pess, eps_lo, tau)
        except _NoTwoStage:
            pass
    parts = []
    mean = var = 0.0
    log_scale = 0.0
    rho_n = 0.0
    p_inf_log = 0.0  # log of the finite mass product (1 - p_inf) ^ T
    sup_lo = sup_hi = 0
    for sigma, q, count in schedule:
        one = _one_step(sigma, q, add, step, tau)
        j_lo, p_inf = one.j_lo, one.p_inf
        p = one.pess if pess else one.opt
        t = np.empty(p.size)
        s, mu, v, rho, dropped = _k.tilt(p, j_lo, 0.0, step, theta, pess, t)
        if not (math.isfinite(s) and math.isfinite(mu) and math.isfinite(v)):
            raise FloatingPointError(f"non-finite tilted masses for sigma={sigma}, q={q}")
        p_inf_step = (p_inf + dropped) * (1 + 1e-12) if pess else 0.0
        parts.append(_ArrayPart(j_lo, t, int(count)))
        mean += count * mu
        var += count * v
        log_scale += count * s
        rho_n += count * rho
        p_inf_log += count * math.log1p(-min(p_inf_step, 1.0)) if p_inf_step < 1.0 else -math.inf
        sup_lo += count * j_lo
        sup_hi += count * (j_lo + p.size - 1)
    p_inf = -math.expm1(p_inf_log) * (1 + 1e-12) if pess else 0.0
    if len(parts) == 1 and parts[0].count == 1:
        # a single step: the tilted array itself, no transform and no round-off to bound
        j_lo, t = parts[0].j_lo, parts[0].t
        grow = math.expm1(rho_n * (1 + 1e-9))
        ls = log_scale + (math.log1p(grow) if pess else math.log1p(-min(grow, 0.5)))
        return _Grid(step, theta, pess, j_lo, t, ls, 0.0, p_inf, 0.0, 0.0)
    n_steps = sum(p.count for p in parts)
    return _compose_parts(parts, step, theta, pess, eps_lo, tau, n_steps, mean, var, log_scale, rho_n, p_inf,
                          sup_lo, sup_hi)


def _compose_parts(parts, step, theta, pess, eps_lo, tau, n_steps, mean, var, log_scale, rho_n, p_inf,
                   sup_lo, sup_hi, err_rel=0.0):
    """The composition of ``parts`` (``_ArrayPart``, ``_BlockPart``) by one FFT power (see
    ``_compose``): mean/var of the composed tilted loss, log_scale, rho_n (relative rounding of
    the tilted entries, summed over the count), the +inf mass, the support [sup_lo, sup_hi]
    and n_steps (the SGM steps composed, for the window goals).  ``err_rel`` (optimistic only)
    bounds the tilted l1 mass, relative to e^{log_scale}, that the arrays may carry in excess
    of an optimistic PLD; it is subtracted at its worst effect like the wrapped mass."""
    sd = math.sqrt(var)
    # The window: mean +- _WINDOW_SDS sd (and room below eps_lo), widened to where Chernoff
    # bounds on the tilted composed MGF put less than _TAIL_GOAL of mass outside it -- far
    # beyond the sd scale when one-step tails are heavy (small q and sigma, few steps).
    lo_l = min(mean - _WINDOW_SDS * sd, eps_lo - 2 * sd - 2 * step)
    hi_l = max(mean, eps_lo) + (_PESS_UP_SDS if pess else _WINDOW_SDS) * sd
    tail_up = tail_alias = wrap_up = 0.0
    j0 = max(sup_lo, math.floor(lo_l / step))
    j1 = min(sup_hi, math.ceil(hi_l / step))
    if j1 - j0 + 1 > MAX_BINS:
        raise ValueError(f"the composed loss grid would need {j1 - j0 + 1} bins (> {MAX_BINS}); lower the accuracy")
    n = scipy.fft.next_fast_len(max(j1 - j0 + 1, 16), real=True)
    if sup_hi - sup_lo + 1 <= n:
        j0 = sup_lo  # the whole support fits: no wrap-around at all
    else:
        mgf = _log_mgf_table(parts, step, sd, lower=not pess)
        a_max = eps_lo - 2 * sd - 2 * step  # the window must reach below every eps queried
        # untilted mass the window may leave to +inf (upper) or let wrap (both), on the scale of
        # the one-step tail cut: tau * T ~ 1e-4 * accuracy * delta (within [1e-15, 1e-6])
        abs_goal = min(1e-6, max(tau * n_steps, _TAIL_GOAL))
        # What wraps down from above lands W lower, where it weighs e^{theta W} times more: its
        # effect on delta(eps >= eps_lo) is at most e^{S - theta eps_lo} times its tilted mass.
        # Keep that below abs_goal: the tilted mass that can land on [eps_lo, ...), i.e. that
        # above eps_lo + W, below abs_goal e^{theta eps_lo - S} (never asking for less than
        # _TAIL_GOAL: a wider window costs more FFT round-off than it saves).
        lg_down = min(max(math.log(abs_goal) + theta * eps_lo - log_scale, math.log(_TAIL_GOAL)), 0.0)
        w_down = _chernoff_edge(mgf, math.exp(lg_down), upper=True, shift=0.0) - eps_lo
        # What wraps up from below lands >= W higher, where its untilted weight is at most
        # e^{-theta W} times its own (<= e^{-theta W} in all): for theta > 0 a window of
        # -log(abs_goal) / theta suffices; otherwise the lower tail is cut by Chernoff.
        w_min = -math.log(abs_goal) / theta if theta > 0 else math.inf
        if pess:
            # Mass above the window goes to +inf, untilted at most e^{S - theta b} times its
            # tilted mass; mass that wraps around only adds non-negative mass (sound).
            hi_l = max(hi_l, _chernoff_edge(mgf, abs_goal, upper=True, shift=theta, offset=log_scale))
            if theta > 0:
                lo_l = max(lo_l, hi_l - max(w_min, w_down))
            lo_l = min(a_max, lo_l)
        else:
            # wrapped mass is subtracted at its worst effect; the lower edge either by the
            # e^{-theta W} rule or where Chernoff leaves < _TAIL_GOAL below: the shorter window
            lo_c = min(lo_l, _chernoff_edge(mgf, _TAIL_GOAL, upper=False, shift=0.0) + step)
            hi_c = max(hi_l, w_down + eps_lo - max(eps_lo - lo_c, 0.0))
            w = max(hi_l - a_max, w_min, w_down)
            wrap_by_theta = w < hi_c - lo_c
            lo_l, hi_l = (a_max, a_max + w) if wrap_by_theta else (lo_c, hi_c)
            if wrap_by_theta and hi_l > sup_hi * step:
                # the support ends first: reach further down instead, so that what wraps up still
                # travels the whole window length w
                lo_l, hi_l = min(a_max, sup_hi * step - w), sup_hi * step
            elif not wrap_by_theta and lo_l < sup_lo * step:
                # the support starts first: reach further up instead, so that what wraps down
                # still lands w_down lower (its bound is taken there)
                hi_l = max(hi_l, sup_lo * step + w_down)
        j0 = max(sup_lo, math.floor(lo_l / step), j0 - MAX_BINS // 4)
        a = j0 * step
        j1 = min(sup_hi, math.ceil(hi_l / step), j0 + MAX_BINS - 1)  # past MAX_BINS: charged, not avoided
        n = scipy.fft.next_fast_len(max(j1 - j0 + 1, 16), real=True)
        if sup_hi - sup_lo + 1 <= n:
            j0 = sup_lo
        else:
            j1 = j0 + n - 1
            b = (j1 + 1) * step
            if pess:
                tail_up = _chernoff(mgf, b, mean, upper=True)
            else:
                tail_alias = _chernoff(mgf, b + max(eps_lo - a, 0.0), mean, upper=True)
                if j0 > sup_lo:
                    if wrap_by_theta:
                        wrap_up = math.exp(-theta * n * step) * (1 + 1e-9)
                    else:
                        tail_alias += _chernoff(mgf, a - step, mean, upper=False)
    c_n = _fft_const(n)
    spectra = np.empty((len(parts), n // 2 + 1), dtype=np.complex128)
    e2 = np.empty(len(parts))
    for i, part in enumerate(parts):
        spectra[i], e2[i] = part.spectrum(n, c_n)
    counts = np.array([p.count for p in parts], dtype=np.int64)
    z = np.empty(n // 2 + 1, dtype=np.complex128)
    err_sum, z2 = _power_product(spectra, counts, e2, z)
    x = scipy.fft.irfft(z, n, workers=_WORKERS)
    # per-entry error: spectrum errors through the (1/n)-normalised inverse, plus its own round-off
    e_inf = err_sum / n + c_n * math.sqrt(z2 / n) * 1.01
    if not (np.isfinite(x).all() and math.isfinite(e_inf)):
        raise FloatingPointError("non-finite values in the FFT composition of the PLD")
    x = np.roll(x, -(j0 % n))  # entry i <-> grid index j0 + i
    # input rounding: every tilted mass within a factor (1 +- rho): composed within (1 +- rho)^N
    grow = math.expm1(rho_n * (1 + 1e-9))
    if pess:
        t = np.maximum(x, 0.0) + e_inf
        ls = log_scale + math.log1p(grow)
        # mass above the window (untilted <= e^{S - theta b} * tilted) goes to +inf
        top = (j0 + n) * step
        p_inf = min(1.0, p_inf + math.exp(ls - theta * top) * tail_up)
        floor = j0 * step if j0 > sup_lo else -math.inf
        return _Grid(step, theta, True, j0, t, ls, 0.0, p_inf, 0.0, 0.0, floor=floor)
    t = np.maximum(x - e_inf, 0.0)
    ls = log_scale + math.log1p(-min(grow, 0.5))
    # wrapped mass: at most tail_hi + tail_lo (tilted), its effect on delta(eps) <= e^{S - theta eps} * that
    alias = tail_alias * (1 + 2 * grow) * math.exp(log_scale - ls)
    # the alias bound holds for eps >= eps_lo: below it the lower bound is 0
    floor = eps_lo if alias > 0 or wrap_up > 0 else -math.inf
    # excess mass carried in (any eps: untilted <= e^{S - theta eps} times tilted at losses >= eps)
    alias += err_rel * (1 + 2 * grow) * math.exp(log_scale - ls) * (1 + 1e-9)
    return _Grid(step, theta, False, j0, t, ls, alias, 0.0, wrap_up, 0.0, floor=floor)


# ----------------------------------------------------------------------------
# two-stage composition for many steps: fine grid for blocks of T1 steps, coarse grid for the rest
# ----------------------------------------------------------------------------

_TWO_STAGE_MIN = 4096  # fewest steps of one schedule entry for the two-stage composition
_TWO_STAGE_ONE = 4000  # ... fewest fine bins of its one-step grid
_TWO_STAGE_BINS = 80000  # ... fewest bins of one-step grid plus composed spread (18 sd)
_TWO_STAGE_TAU = 1e-15  # ... or at most this tail cut over all steps (δ below ~1e-8)
_CORE_TAIL = 1e-4  # one-step P-mass per block of T1 steps left to the coarse tail pieces
_STAGE1_GOAL = 1e-18  # tilted mass (relative) the fine windows leave outside (Chernoff)
_MAX_TAIL_EVENTS = 16  # most tail events per block composed exactly (else: one stage)


class _NoTwoStage(Exception):
    """The two-stage composition does not apply here (the caller falls back to one stage)."""


class _Hybrid:
    """One direction of one SGM step in three pieces partitioning its loss line: the core on the
    fine grid (spacing step), the low and high tails on the coarse grid (spacing m * step, m a
    power of two, so that shared edges are the same floating-point values); +inf mass p_inf."""

    __slots__ = ("core", "low", "high", "p_inf", "m", "big_lo", "big_hi")

    def tail(self, pess: bool):
        """The two tails as one coarse array from coarse point big_lo (zeros between them)."""
        r = np.zeros(self.big_hi - self.big_lo + 1)
        for piece in (self.low, self.high):
            if piece is not None:
                p = piece.pess if pess else piece.opt
                r[piece.j_lo - self.big_lo : piece.j_lo - self.big_lo + p.size] += p
        return r


def _hybrid_step(sigma, q, add, step, m, tau, r_tail, hi_cut=None) -> _Hybrid:
    """The pieces of one step: the tails hold at most about r_tail of P-mass each; or, given
    ``hi_cut`` (a coarse grid index), the high tail is everything from that point up."""
    key = ("hybrid", sigma, q, add, step, m, tau, r_tail, hi_cut)
    hit = _STEP_CACHE.get(key)
    if hit is not None:
        return hit
    big = m * step
    if big / m != step:
        raise FloatingPointError("coarse grid step is not an exact multiple of the fine one")
    b_lo, b_hi = _grid_range(sigma, q, add, big, tau)
    whole = _discretise(sigma, q, add, big, tau, b_lo, b_hi)
    cum_up = np.cumsum(whole.pess[::-1])[::-1]  # mass at or above each coarse point
    cum_dn = np.cumsum(whole.pess)
    above = np.nonzero(cum_up > r_tail)[0]
    below = np.nonzero(cum_dn > r_tail)[0]
    c_hi = b_lo + int(above[-1]) if above.size else b_hi
    c_lo = b_lo + int(below[0]) if below.size else b_lo
    if hi_cut is not None:
        c_hi = min(max(hi_cut, b_lo), b_hi)
    c_hi = max(c_hi, c_lo + 1)
    h = _Hybrid()
    h.m, h.big_lo, h.big_hi = m, b_lo, b_hi
    h.low = _discretise(sigma, q, add, big, tau, b_lo, c_lo, True, False) if c_lo > b_lo else None
    h.high = _discretise(sigma, q, add, big, tau, c_hi, b_hi, False, True) if c_hi < b_hi else None
    # without a tail piece the core ends where a one-step grid would (its end bins occupied)
    f_lo, f_hi = _grid_range(sigma, q, add, step, tau)
    j_lo = c_lo * m if h.low is not None else max(c_lo * m, f_lo)
    j_hi = c_hi * m if h.high is not None else min(c_hi * m, f_hi)
    h.core = _discretise(sigma, q, add, step, tau, j_lo, max(j_hi, j_lo + 1), h.low is None, h.high is None)
    h.p_inf = (h.high or h.core).p_inf
    _cache_put(key, h)
    return h


def _two_stage_plan(schedule, step, add, tau):
    """(T1, m) for the two-stage composition, or None when a single stage is better: for one
    schedule entry of many steps whose one-step grid (heavy tails) and composed spread are
    both long on the fine grid (thresholds measured, bench/README), or when δ is small: the
    first-order FFT round-off of a T-th power grows like T times that of one step, and two
    stages take powers of ~sqrt(T) only."""
    if len(schedule) != 1 or schedule[0][2] < _TWO_STAGE_MIN:
        return None
    sigma, q, count = schedule[0]
    try:
        j_lo, j_hi = _grid_range(sigma, q, add, step, tau)
    except ValueError:  # too long for one stage
        j_lo, j_hi = 0, MAX_BINS
    spread = 18.0 * math.sqrt(count * _moments(sigma, q, add)[1]) / step
    small_delta = tau * count <= _TWO_STAGE_TAU  # FFT round-off grows with the power taken
    if not small_delta and (j_hi - j_lo < _TWO_STAGE_ONE or j_hi - j_lo + spread < _TWO_STAGE_BINS):
        return None
    t1 = max(2, int(round(math.sqrt(count))))
    # a divisor of the count near sqrt(count) saves the remainder block
    for i in range(t1):
        if count % (t1 + i) == 0 or (t1 - i >= max(2, t1 // 2) and count % (t1 - i) == 0):
            t1 = t1 + i if count % (t1 + i) == 0 else t1 - i
            break
    m = 2 ** max(1, int(round(math.log2(math.sqrt(t1)))))  # H^2 T / T1 ~ step^2 T (module notes)
    return t1, m



def _log_binom(n, k):
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def _chernoff_n(mgf, n, b, upper):
    """Chernoff bound on the tilted mass of the n-fold composition at or above (below) b."""
    lams, total = mgf
    sel = lams > 0 if upper else lams < 0
    return float(min(1.0, math.exp(min(float(np.min(n * total[sel] - lams[sel] * b)), 0.0))))


class _BlockPart:
    """coarsen(P^{*n}) for a hybrid one-step P = C + R, as sum_k e^{lw_k} D_k * R^{*k}
    (D_k: the coarsened fine-grid power C^{*(n-k)}, tilted; R the coarse tail, tilted), composed
    ``count`` times.  Never materialised: its spectrum is formed from those of D_k and R."""

    __slots__ = ("terms", "jr", "tr", "count")

    def __init__(self, terms, jr, tr, count):
        self.terms, self.jr, self.tr, self.count = terms, jr, tr, count

    @property
    def sup(self):
        jr_hi = self.jr + self.tr.size - 1 if self.tr is not None else 0
        lo = min(bj + k * self.jr for bj, d, lw, k in self.terms)
        hi = max(bj + d.size - 1 + k * jr_hi for bj, d, lw, k in self.terms)
        return lo, hi

    def mass(self):
        r = float(self.tr.sum()) if self.tr is not None else 0.0
        return sum(math.exp(lw) * float(d.sum()) * r**k for _, d, lw, k in self.terms) * (1 + 1e-12)

    def log_mgf(self, step, lams):
        """Upper bounds on log E e^{lam L}: log sum_k e^{lw_k + Lambda_Dk + k Lambda_R}."""
        out = np.empty(lams.size)
        if self.tr is not None:
            lr = np.empty(lams.size)
            _k.log_mgf_multi(self.tr, self.jr, step, lams, lr)
        vals = []
        for bj, d, lw, k in self.terms:
            _k.log_mgf_multi(d, bj, step, lams, out)
            vals.append(lw + out + (k * lr if k else 0.0))
        tot = np.logaddexp.reduce(np.array(vals), axis=0)
        return tot + 1e-12 * (1.0 + np.abs(tot))

    def spectrum(self, n, c_n):
        """The half spectrum sum_k e^{lw_k} F(D_k) F(R)^k (each folded modulo n) and a bound on
        its l2 error over the full spectrum (the l1 bound of ``_k.power_product`` per term, plus
        the rounding of the sum)."""
        h = n // 2 + 1
        if self.tr is not None:
            f = np.zeros(n)
            _k.fold(self.tr, self.jr, n, f)
            spec_r = scipy.fft.rfft(f, workers=_WORKERS)
            e2_r = c_n * math.sqrt(n * _k.sumsq(f)) * 1.01
        else:
            spec_r, e2_r = np.ones(h, dtype=np.complex128), 0.0
        spec_d = np.empty((len(self.terms), h), dtype=np.complex128)
        e2_d = np.empty(len(self.terms))
        for i, (bj, d, _, _) in enumerate(self.terms):
            f = np.zeros(n)
            _k.fold(d, bj, n, f)
            spec_d[i] = scipy.fft.rfft(f, workers=_WORKERS)
            e2_d[i] = c_n * math.sqrt(n * _k.sumsq(f)) * 1.01
        ks = np.array([k for _, _, _, k in self.terms], dtype=np.int64)
        # (the log weights carry a rounding margin far above exp's own error)
        w = np.exp(np.array([lw for _, _, lw, _ in self.terms]))
        out = np.empty(h, dtype=np.complex128)
        err = _k.block_spectrum(spec_d, e2_d, spec_r, e2_r, ks, w, out)
        return out, err * (1 + 1e-9)


def _block(tc, jc, sc, rho_c, tr, jr, sr, cu, ru, n, blocks, step, m, theta, pess, abs_goal, ks=None):
    """One block of n steps: ``_BlockPart`` terms for P~^{*n} = sum_k binom(n, k) a^{n-k} b^k
    tc^{*(n-k)} * tr^{*k} (tilted core tc from fine point jc with log normaliser sc; tilted tail
    tr from coarse point jr, log normaliser sr; a = e^{sc} / (e^{sc} + e^{sr}), b = 1 - a;
    untilted masses cu, ru).  The core powers are FFT powers on the fine grid, bounded for
    round-off like ``_compose_parts``, then coarsened (``_k.coarsen_pess`` / ``coarsen_opt``).
    Blocks with more than K tail events go to +inf (pessimistic: their untilted mass is at
    most binom(n, K+1) ru^{K+1} (cu + ru)^{n-K-1}) or are dropped (optimistic); K keeps that
    below 1e-3 abs_goal over the ``blocks`` blocks.  Mass outside the fine windows: above goes
    to +inf (pessimistic); optimistic, all of it may wrap in, an excess bounded in tilted l1.

    Returns (terms, log_scale, p_inf, err): terms [(coarse point, D_k, log weight, k)], the log
    normaliser n log(e^{sc} + e^{sr}), the block's untilted +inf mass (beyond the one-step
    one), and the optimistic excess in tilted l1, relative to e^{log_scale}.

    Given ``ks`` (numbers of tail events), only those terms are built and the blocks with other
    numbers of tail events are left to the caller (``_event_grids``): p_inf and err then cover
    the built terms only."""
    has_tail = tr is not None and ru > 0
    log_m = float(np.logaddexp(sc, sr)) if has_tail else sc
    la = sc - log_m
    lb = sr - log_m if has_tail else -math.inf
    k_max, rem_log = 0, -math.inf
    rel_all = ks is None
    if ks is not None:
        k_max = max(ks)
    elif has_tail:
        lr = math.log(ru)
        lcr = max(math.log(cu + ru), 0.0)
        budget = math.log(1e-3 * abs_goal / max(blocks, 1))
        while k_max < n:
            kk = k_max + 1
            rem_log = _log_binom(n, kk) + kk * lr + (n - kk) * lcr
            if rem_log <= budget:
                break
            k_max += 1
            if k_max > _MAX_TAIL_EVENTS:
                raise _NoTwoStage
        if k_max == n:
            rem_log = -math.inf
    p_inf = math.exp(rem_log) * (1 + 1e-9) if pess else 0.0
    ks = range(k_max + 1) if ks is None else ks
    counts = [n - k for k in ks if n - k > 0] or [1]  # (only k = n asked for: a power is not used)
    # the fine window: Chernoff edges of every power, from the tilted core's MGF
    var_c = float(_k.tilted_moments(tc, jc, step, 0.0)[1])
    base = 2.0 ** (_CHERNOFF_K / 2.0) / math.sqrt(max(n * var_c, 1e-300))
    lams = np.concatenate((base, -base))
    lm = np.empty(lams.size)
    _k.log_mgf_multi(tc, jc, step, lams, lm)
    mgf = (lams, lm)
    up = lams > 0
    lg = math.log(_STAGE1_GOAL)
    b = max(float(np.min((c * lm[up] - lg) / lams[up])) for c in counts)
    a = min(float(np.max((c * lm[~up] - lg) / lams[~up])) for c in counts)
    # the supports of the powers: n jc .. n (jc + size - 1) for every n in counts (jc may be < 0)
    sup_lo = min(c * jc for c in counts)
    sup_hi = max(c * (jc + tc.size - 1) for c in counts)
    j0 = max(sup_lo, math.floor(a / step) - 1)
    j1 = min(sup_hi, math.ceil(b / step) + 1)
    if j1 - j0 + 1 > MAX_BINS // 4:
        raise _NoTwoStage
    n1 = scipy.fft.next_fast_len(max(j1 - j0 + 1, 16), real=True)
    wrap = sup_hi - sup_lo + 1 > n1
    if not wrap:
        j0 = sup_lo
    c_n = _fft_const(n1)
    spectra, e2 = _ArrayPart(jc, tc, 1).spectrum(n1, c_n)
    spectra, e2 = spectra[None, :], np.array([e2])
    terms = []
    err = 0.0
    big_lo = j0 // m
    nc = (j0 + n1 - 1) // m - big_lo + 2
    c_lo = min(counts)
    zs = np.empty((max(counts) - c_lo + 1, n1 // 2 + 1), dtype=np.complex128)
    err_s, z2_s = _k.power_series(spectra[0], e2[0], c_lo, zs)
    for k in ks:
        nk = n - k
        lb_k = _log_binom(n, k)
        lw = lb_k + nk * la + (k * lb if k else 0.0)
        # rounding of lgamma, of la, lb and of the sum (a few u of each magnitude): rounded out
        lw_err = 1e-13 * (1.0 + abs(lb_k) + nk * (abs(la) + abs(sc)) + (k * (abs(lb) + abs(sr)) if k else 0.0))
        lw = lw + lw_err if pess else lw - lw_err
        if nk == 0:
            terms.append((0, np.ones(1), lw, k))  # no core step: the atom at loss 0
            continue
        err_sum, z2 = err_s[nk - c_lo], z2_s[nk - c_lo]
        x = scipy.fft.irfft(zs[nk - c_lo], n1, workers=_WORKERS)
        e_inf = err_sum / n1 + c_n * math.sqrt(z2 / n1) * 1.01
        if not (np.isfinite(x).all() and math.isfinite(e_inf)):
            raise FloatingPointError("non-finite values in the FFT composition of the PLD")
        x = np.roll(x, -(j0 % n1))
        grow = math.expm1(nk * rho_c * (1 + 1e-9))
        if pess:
            x = (np.maximum(x, 0.0) + e_inf) * (1 + grow)
        else:
            x = np.maximum(x - e_inf, 0.0) * (1 - min(grow, 0.5))
        # outside the exact support of tc^{*nk} the exact value is 0
        x[: max(nk * jc - j0, 0)] = 0.0
        x[max(nk * (jc + tc.size - 1) - j0 + 1, 0) :] = 0.0
        if wrap:
            top = (j0 + n1) * step
            up_m = _chernoff_n(mgf, nk, top, True)
            if pess:  # untilted mass above: <= e^{nk sc - theta top} * tilted, times ru^k binom(n, k)
                p_inf += math.exp(_log_binom(n, k) + nk * sc + (k * math.log(ru) if k else 0.0)
                                  - theta * top) * up_m * (1 + 1e-9)
            else:
                lo_m = _chernoff_n(mgf, nk, j0 * step, False) if j0 > sup_lo else 0.0
                # coarsening moves tilted mass by at most e^{theta m step}
                # (one term asked for: relative to its own weight, which may be far out of range)
                err += math.exp((lw if rel_all else 0.0) + theta * m * step) * (up_m + lo_m) * (1 + 1e-9)
        d = np.empty(nc)
        if pess:
            _k.coarsen_pess(x, j0, m, step, theta, big_lo, d)
        elif not _k.coarsen_opt(x, j0, m, step, theta, big_lo, d):
            raise _NoTwoStage
        terms.append((big_lo, d, lw, k))
    return terms, n * log_m, p_inf, err


def _compose_two_stage(sigma, q, count, add, step, t1, m, theta, pess, eps_lo, tau) -> _Grid:
    """T-fold composition of one SGM step by blocks: coarsen(P^{*T1}) (``_block``) composed
    T // T1 times with coarsen(P^{*(T mod T1)}) on the coarse grid of spacing m * step.

    The one-step PLD P (``_hybrid_step``) is a fine-grid core C and coarse-grid tails R, and
    P^{*n} = sum_k binom(n, k) C^{*(n-k)} * R^{*k} (k tail events among n steps).  The coarse
    grid's edges are fine-grid edges, and coarsening commutes with shifts by coarse steps, so
    coarsen(P^{*n}) = sum_k binom(n, k) coarsen(C^{*(n-k)}) * R^{*k}.  Coarsening is a
    mean-preserving spread (pessimistic) or contraction (optimistic) in u = e^{-loss}, so
    the bounds stay bounds; it adds about (T / T1) (m step)^2 / 6 to the loss variance, which
    m ~ sqrt(T1) keeps at the order of the fine grid's T step^2 / 6."""
    hyb = _hybrid_step(sigma, q, add, step, m, tau, _CORE_TAIL / t1)
    big = m * step
    core = hyb.core
    pc = core.pess if pess else core.opt
    tc = np.empty(pc.size)
    sc, mc, vc, rho_c, drop_c = _k.tilt(pc, core.j_lo, 0.0, step, theta, pess, tc)
    pr = hyb.tail(pess)
    if pr.any():
        tr = np.empty(pr.size)
        sr, mr, vr, rho_r, drop_r = _k.tilt(pr, hyb.big_lo, 0.0, big, theta, pess, tr)
        ru = float(pr.sum()) * (1 + 1e-12)
    else:
        tr, sr, mr, vr, rho_r, drop_r, ru = None, -math.inf, 0.0, 0.0, 0.0, 0.0, 0.0
    if not all(math.isfinite(v) for v in (sc, mc, vc, rho_c, rho_r, drop_c, drop_r, mr, vr)):
        raise FloatingPointError(f"non-finite tilted masses for sigma={sigma}, q={q}")
    cu = float(pc.sum()) * (1 + 1e-12)
    p_inf1 = (hyb.p_inf + drop_c + drop_r) * (1 + 1e-12) if pess else 0.0
    if p_inf1 >= 0.5:
        raise _NoTwoStage
    # moments of the tilted one-step mixture (window heuristics)
    wb = 1.0 / (1.0 + math.exp(sc - sr)) if tr is not None else 0.0
    mean1 = (1 - wb) * mc + wb * mr
    var1 = (1 - wb) * (vc + mc * mc) + wb * (vr + mr * mr) - mean1 * mean1
    abs_goal = min(1e-6, max(tau * count, _TAIL_GOAL))
    t2, t_rem = divmod(count, t1)
    parts = []
    log_scale = 0.0
    p_inf_log = 0.0
    err_log = 0.0
    mass_log = 0.0
    sup_lo = sup_hi = 0
    for nb, times in [(t1, t2)] + ([(t_rem, 1)] if t_rem else []):
        terms, ls, pinf_b, err_b = _block(tc, core.j_lo, sc, rho_c, tr, hyb.big_lo, sr, cu, ru, nb, t2 + 1,
                                          step, m, theta, pess, abs_goal)
        part = _BlockPart(terms, hyb.big_lo, tr, times)
        parts.append(part)
        log_scale += times * ls
        p_one = -math.expm1(nb * math.log1p(-p_inf1)) + pinf_b if pess else 0.0
        p_inf_log += times * math.log1p(-p_one) if p_one < 1.0 else -math.inf
        mass = part.mass()
        mass_log += times * math.log(max(mass, 1e-300))
        err_log += times * math.log1p(err_b / max(mass, 1e-300))
        lo, hi = part.sup
        sup_lo += times * lo
        sup_hi += times * hi
    p_inf = -math.expm1(p_inf_log) * (1 + 1e-12) if pess else 0.0
    # rho_r (rounding of the tilted tail entries) enters at most K times per block
    # the excess composes to at most prod (|B| (1 + e_B))^{times} - prod |B|^{times}
    err_rel = math.exp(mass_log) * math.expm1(err_log * (1 + 1e-9)) if not pess else 0.0
    return _compose_parts(parts, big, theta, pess, eps_lo, tau, count, count * mean1, count * var1, log_scale,
                          _MAX_TAIL_EVENTS * (t2 + 1) * rho_r, p_inf, sup_lo, sup_hi, err_rel)


# ----------------------------------------------------------------------------
# tail events: δ as a sum over the number of steps whose loss lands in the far tail
# ----------------------------------------------------------------------------

_EVENT_MAX = 6  # most tail events composed exactly by _event_grids (else: not used)


def _event_theta(moments, eps_target, cap, v_max):
    """Saddle point of one tail-event term (``_saddle_bracket`` on its moments)."""
    m, v = moments(0.0)
    if m >= eps_target or v <= 0:
        return 0.0
    return _saddle_bracket(moments, m, v, eps_target, cap, v_max)


def _event_grids(sigma, q, count, add, step, m, cut, pess, eps_c, eps_lo, tau, rem_goal, fine0=False):
    """The T-fold composition as a sum over k, the number of steps whose loss lands in the
    tail R = [cut, +inf) (coarse grid of spacing m * step; the rest, the core C, on the fine
    grid):  P^{*T} = sum_k binom(T, k) C^{*(T-k)} * R^{*k}.  Each term is composed by itself
    (``_block`` with one k, then ``_compose_parts``) with its own saddle-point tilt, so FFT
    round-off is relative to that term's mass: when δ is set by one or two far-tail steps
    (small q and δ: a log-normal-like tail no single tilt can centre), the terms with k >= 1
    hold it and are resolved to full relative precision.

    The term with k = 0 is coarsened like the others unless ``fine0`` (eps inside the bulk: it
    keeps the fine grid, at the cost of a fine-grid transform of the whole window).

    Returns (grids, rem): δ(eps) of the composition is bounded by sum_k δ_{G_k}(eps) (+ rem,
    pessimistic: the terms with more than K tail events, at most binom(T, K+1) r^{K+1}
    (c + r)^{T-K-1} by the union bound).  None when more than ``_EVENT_MAX`` terms would be
    needed to bring rem below ``rem_goal``."""
    big = m * step
    hyb = _hybrid_step(sigma, q, add, step, m, tau, 1e-300, max(math.ceil(cut / big), 1))
    if hyb.high is None:
        return None
    core = hyb.core
    pc = core.pess if pess else core.opt
    pr = hyb.tail(pess)
    cu = float(pc.sum()) * (1 + 1e-12)
    ru = float(pr.sum()) * (1 + 1e-12)
    if not ru > 0:
        return None
    lr, lcr = math.log(ru), max(math.log(cu + ru), 0.0)
    k_max = 0
    while True:
        if k_max >= count:  # every term kept
            rem = 0.0
            break
        rem = math.exp(_log_binom(count, k_max + 1) + (k_max + 1) * lr + (count - k_max - 1) * lcr) * (1 + 1e-9)
        if rem <= rem_goal:
            break
        k_max += 1
        if k_max > _EVENT_MAX:
            return None
    if pess:  # every composition with a +inf step: at most T of them
        p_one = min(hyb.p_inf * (1 + 1e-12), 1.0)
        rem += -math.expm1(count * math.log1p(-p_one)) * (1 + 1e-12) if p_one < 1.0 else 1.0
    cap = min(_THETA_MAX, max(_THETA_FLOOR, 300.0 / max(eps_c, 1e-12)))
    vc0 = _k.tilted_moments(pc, core.j_lo, step, 0.0)[1]
    abs_goal = min(1e-6, max(tau * count, _TAIL_GOAL))

    def term(k, theta):
        tc = np.empty(pc.size)
        sc, mc, vc, rho_c, drop_c = _k.tilt(pc, core.j_lo, 0.0, step, theta, pess, tc)
        tr = np.empty(pr.size)
        sr, mr, vr, rho_r, drop_r = _k.tilt(pr, hyb.big_lo, 0.0, big, theta, pess, tr)
        if not all(math.isfinite(v) for v in (sc, mc, vc, rho_c, rho_r, drop_c, drop_r, sr, mr, vr)):
            raise FloatingPointError(f"non-finite tilted masses for sigma={sigma}, q={q}")
        if k == 0 and fine0 and count <= _DIRECT_MAX_STEPS and count * pc.size <= _DIRECT_MAX_BINS:
            return _direct_power(pc, core.j_lo, count, step, pess)
        if k == 0 and fine0:
            # no tail step: the core's T-th power on the fine grid itself (no coarsening, so a
            # tiny eps inside the bulk keeps the fine resolution)
            lo, hi = count * core.j_lo, count * (core.j_lo + pc.size - 1)
            p_inf = count * drop_c * (1 + 1e-12) if pess else 0.0
            return _compose_parts([_ArrayPart(core.j_lo, tc, count)], step, theta, pess, eps_lo, tau, count,
                                  count * mc, count * vc, count * sc, count * rho_c, min(p_inf, 1.0), lo, hi)
        terms, ls, p_inf, err = _block(tc, core.j_lo, sc, rho_c, tr, hyb.big_lo, sr, cu, ru, count, 1,
                                       step, m, theta, pess, abs_goal, ks=[k])
        # one term: its log weight joins the log normaliser (both are huge under strong tilts)
        (bj, d, lw, _), = terms
        part = _BlockPart([(bj, d, 0.0, k)], hyb.big_lo, tr, 1)
        if pess:  # entries the tilt left out (sent to +inf): in at most T steps
            p_inf += count * (drop_c + drop_r) * (1 + 1e-12)
        lo, hi = part.sup
        return _compose_parts([part], big, theta, pess, eps_lo, tau, count, (count - k) * mc + k * mr,
                              (count - k) * vc + k * vr, ls + lw, k * rho_r, min(p_inf, 1.0), lo, hi,
                              0.0 if pess else err)

    grids = []
    for k in range(k_max + 1):
        # Only the term without tail steps is tilted: its core is bounded by the cut ~ eps, so
        # its saddle point exists.  A term with tail steps has a step at or above the cut, its δ
        # is of the order of its mass, and a tilt would only lift the round-off floor of the
        # core's fine T-th power (~T u of its peak) towards the tilted scale.
        theta = 0.0
        if k == 0:
            theta = _event_theta(lambda th: tuple(count * x for x in _k.tilted_moments(pc, core.j_lo, step, th)),
                                 eps_c, cap, 1e12 * count * vc0)
        for attempt in range(8):
            try:
                grids.append(term(k, theta))
                break
            except (_NoTwoStage, ValueError):
                # a strong tilt's window can be too long (to untilt, or for MAX_BINS): any
                # weaker one is as sound
                theta = 0.0 if attempt >= 6 else 0.6 * theta
        else:
            if pess:
                return None
            # optimistic: a term left out only lowers the lower bound
    return grids, rem if pess else 0.0


_DIRECT_MAX_STEPS = 16  # direct (not FFT) powers of the core when eps lies inside the bulk: at
_DIRECT_MAX_BINS = 100_000  # most this many steps and this long a result (~1e9 products)


def _direct_power(p, j_lo, n, step, pess) -> _Grid:
    """p^{*n} by direct convolutions (binary powers), untilted, as a grid.  Each entry of a
    direct convolution of non-negative arrays is a sum of at most L non-negative products,
    computed within a relative gamma_L = L u / (1 - L u) of itself in any order: the result
    has a relative error and no FFT round-off floor.  Used when eps lies inside the bulk
    (q = 2.7e-5, sigma = 1.33, T = 7, eps ~ 1.4e-7: δ must be resolved to ~2e-6 of itself,
    and the tilted FFT power left 7e-11 between the bounds where the arrays are 1e-11 apart)."""
    acc, acc_rel, base, base_rel = None, 0.0, p, 0.0
    c = n
    while c > 0:
        if c & 1:
            if acc is None:
                acc, acc_rel = base, base_rel
            else:
                g = min(acc.size, base.size) * _U * 1.01
                acc, acc_rel = np.convolve(acc, base), (1 + acc_rel) * (1 + base_rel) * (1 + g / (1 - g)) - 1
        c >>= 1
        if c > 0:
            g = base.size * _U * 1.01
            base, base_rel = np.convolve(base, base), (1 + base_rel) ** 2 * (1 + g / (1 - g)) - 1
    rel = acc_rel * (1 + 1e-9)
    if not (np.isfinite(acc).all() and rel < 1e-3):
        raise FloatingPointError("non-finite values in a direct composition of the PLD")
    t = acc * (1 + rel) if pess else np.maximum(acc * (1 - rel), 0.0)
    return _Grid(step, 0.0, pess, n * j_lo, t, 0.0, 0.0, 0.0, 0.0, 0.0)


def _scan(pred, a, b, first):
    """The first (``first``) or last point of [a, b] where the vectorised ``pred`` holds, from
    three rounds of 129 points, each round inside the bracketing pair of the last; None if
    none holds.  Only points where pred was evaluated are returned."""
    best = None
    for _ in range(3):
        e = np.linspace(a, b, 129)
        hit = pred(e)
        if not hit.any():
            break
        i = int(np.argmax(hit)) if first else len(e) - 1 - int(np.argmax(hit[::-1]))
        best = float(e[i])
        a, b = (e[max(i - 1, 0)], e[i]) if first else (e[i], e[min(i + 1, len(e) - 1)])
    return best


def _sum_delta(grids, rem, eps: np.ndarray, precise: bool = False) -> np.ndarray:
    """sum_k δ_{G_k}(eps) + rem, capped at 1; ``precise``: term by term (``_delta_precise``)."""
    out = np.full(eps.size, float(rem))
    for g in grids:
        out += _delta_precise(g, eps) if precise else _delta_bound(g, eps)
    return np.minimum(out, 1.0)


def _delta_precise(G: _Grid, eps: np.ndarray) -> np.ndarray:
    """``_delta_bound`` summed term by term (``_k.delta_direct``): O(n) per eps, but its error is
    relative to δ rather than to the mass above eps."""
    out = np.empty(eps.size)
    _k.delta_direct(np.ascontiguousarray(eps, dtype=np.float64), G.offset, G.step, G.theta, G.log_scale, G.t,
                    G.p_inf, G.inf_err, G.err, G.pess, G.floor, out)
    return out


#: Chernoff parameters: lambda = +-2^(k/2) / sd for k in this range (sd of the composed tilted
#: loss); small lambda for heavy one-step tails, large for light ones. Any lambda gives a valid
#: bound, so the grid only decides how tight it is.
_CHERNOFF_K = np.arange(-24, 17, 2)


def _log_mgf_table(parts, step, sd, lower=True):
    """(lambdas, log E e^{lambda L}) of the composed tilted loss L, each log-MGF rounded up
    (lambda < 0, for lower tails, only when ``lower``)."""
    base = 2.0 ** (_CHERNOFF_K / 2.0) / max(sd, 1e-300)
    lams = np.concatenate((base, -base)) if lower else base
    total = np.zeros(lams.size)
    for part in parts:
        total += part.count * part.log_mgf(step, lams)
    return lams, total


def _chernoff_edge(mgf, goal, upper, shift=0.0, offset=0.0):
    """The edge beyond which the Chernoff bounds of the table leave at most ``goal``:
    upper: the smallest b with min over lambda > 0 of e^{offset + Lambda(lambda) - (lambda + shift) b}
    <= goal; lower: the largest a with min over lambda < 0 of e^{Lambda(lambda) - lambda a} <= goal."""
    lams, total = mgf
    lg = math.log(goal)
    if upper:
        sel = lams > 0
        return float(np.min((total[sel] + offset - lg) / (lams[sel] + shift)))
    sel = lams < 0
    return float(np.max((total[sel] - lg) / lams[sel]))


def _chernoff(mgf, b, mean, upper):
    """Chernoff bound on the tilted composed mass at or above b (upper) or at or below b (lower):
    min over the tabulated lambda of the same sign of exp(log E e^{lambda L} - lambda b)."""
    if (b - mean if upper else mean - b) <= 0:
        return 1.0
    lams, total = mgf
    sel = lams > 0 if upper else lams < 0
    logb = total[sel] - lams[sel] * b
    return float(min(1.0, math.exp(min(float(logb.min()), 0.0))))


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
        t, a, b, G.p_inf, G.inf_err, G.err, G.pess, G.floor, out,
    )  # fmt: skip
    return out


def _eps_bound(G: _Grid, target: float) -> float:
    t, a, b = _sums(G)
    return _k.eps_search(
        target, G.offset - 1, G.step, G.theta, G.log_scale, t, a, b, G.p_inf, G.inf_err, G.err, G.pess, G.floor
    )


# ----------------------------------------------------------------------------
# heuristics: grid step and tilt (they affect tightness only, never soundness)
# ----------------------------------------------------------------------------


_MOM_CACHE: dict = {}


def _moments(sigma: float, q: float, add: bool):
    key = (sigma, q, add)
    hit = _MOM_CACHE.get(key)
    if hit is None:
        hit = _k.loss_moments(sigma, q, 2 if add == _REPLACE else int(add), 20001)
        if len(_MOM_CACHE) > 4096:  # bounded: calibration sweeps visit many sigmas
            _MOM_CACHE.clear()
        _MOM_CACHE[key] = hit
    return hit


def _gauss_delta(eps, mean, var):
    s = math.sqrt(var)
    x = (mean - eps) / s
    return float(ndtr(x) - math.exp(eps - mean + var / 2 + log_ndtr(x - s)))


def _eps_estimate(schedule, target_delta: float, d=False) -> float:
    """Gaussian approximation of the composed PLD of direction d (mean and variance add over steps)."""
    mean = sum(c * _moments(s, q, d)[0] for s, q, c in schedule)
    var = sum(c * _moments(s, q, d)[1] for s, q, c in schedule)
    if var <= 0 or _gauss_delta(0.0, mean, var) <= target_delta:
        return 0.0
    hi = mean + 50 * math.sqrt(var) + 50
    if _gauss_delta(hi, mean, var) > target_delta:
        return hi
    return brentq(lambda e: _gauss_delta(e, mean, var) - target_delta, 0.0, hi, xtol=1e-6)


_STEP_FACTOR = 0.8


def _initial_step(schedule, accuracy: float, eps_est: float, d=False) -> float:
    total = sum(c for _, _, c in schedule)
    var = sum(c * _moments(s, q, d)[1] for s, q, c in schedule)
    # the certified gap grows like step^2 / (per-step loss variance); _STEP_FACTOR is set so that
    # the first grid usually meets the accuracy without a second round (measured, bench/README)
    d = _STEP_FACTOR * math.sqrt(3.0 * accuracy * var / total)
    d = min(d, 0.5 * accuracy * max(eps_est, 1e-2), 0.05)
    # quarter octaves times 1e-6: a handful of distinct steps keeps the one-step cache useful
    return 2.0 ** (math.floor(4 * math.log2(d / 1e-6)) / 4) * 1e-6 if d > 1e-12 else 1e-12


_THETA_MAX = 1e5
_THETA_FLOOR = 64.0  # the cap 300 / eps never goes below this (large eps: theta ~ 1e-3 is typical)
_VAR_GROWTH = 4.0  # the tilted variance may grow this much (FFT window length) ...
_VAR_GROWTH_SMALL = 1000.0  # ... or this much in a second try when delta is small (_Engine._eps_at)


def _saddle_theta(schedule, add: bool, step: float, eps_target: float, tau: float,
                  growth: float = _VAR_GROWTH, bracket: bool = False) -> float:
    """theta >= 0 with E_theta[L_T] ~ eps_target for the tilted composed PLD (Newton on the cumulant).

    Any theta >= 0 gives valid bounds; the saddle point only makes FFT round-off
    small relative to the mass near eps_target.
    """
    parts = []
    plan = _two_stage_plan(schedule, step, add, tau)
    for sigma, q, count in schedule:
        if plan is not None:
            t1, m = plan
            hyb = _hybrid_step(sigma, q, add, step, m, tau, _CORE_TAIL / t1)
            pieces = [(hyb.core.j_lo, hyb.core.pess, step)]
            pieces += [(x.j_lo, x.pess, m * step) for x in (hyb.low, hyb.high) if x is not None]
        else:
            one = _one_step(sigma, q, add, step, tau)
            pieces = [(one.j_lo, one.pess, step)]
        parts.append((count, pieces))

    def moments(theta):
        m = v = 0.0
        for count, pieces in parts:
            if len(pieces) == 1:
                j_lo, p, st = pieces[0]
                mu, var = _k.tilted_moments(p, j_lo, st, theta)
            else:  # a mixture of pieces
                st = np.array([_k.tilted_stats(p, j_lo, st, theta) for j_lo, p, st in pieces])
                w = np.exp(st[:, 0] - np.max(st[:, 0]))
                w /= w.sum()
                mu = float(w @ st[:, 1])
                var = float(w @ (st[:, 2] + st[:, 1] ** 2)) - mu * mu
            m += count * mu
            v += count * var
        return m, v

    m, v = moments(0.0)
    if m >= eps_target or v <= 0:
        return 0.0
    v0 = v
    # Newton on the tilted mean m(theta) (increasing: its derivative is the tilted variance),
    # at most doubling each time; a theta whose tilted variance exceeds growth * v0 (heavy one-step
    # tails: a long FFT window) is halved back towards the last one taken, and the search stops
    # there.  e^{theta * loss} must stay far inside the float range, hence cap; tiny eps needs
    # theta ~ eps / var, far beyond the unit scale (16 doublings reach 6.5e4).
    cap = min(_THETA_MAX, max(_THETA_FLOOR, 300.0 / max(eps_target, 1e-12)))
    if bracket:
        return _saddle_bracket(moments, m, v, eps_target, cap, growth * v0)
    theta = 0.0
    for _ in range(16):
        new = min(max(theta + (eps_target - m) / v, 0.5 * theta), 2 * theta + 1.0, cap)
        if abs(new - theta) < 1e-3 * max(1.0, theta):
            break
        m_new, v_new = moments(new)
        halvings = 0
        while not (math.isfinite(m_new) and v_new <= growth * v0) and halvings < 8:
            new = 0.5 * (theta + new)
            m_new, v_new = moments(new)
            halvings += 1
        if not (math.isfinite(m_new) and v_new <= growth * v0):
            break
        if m_new > eps_target + 3.0 * math.sqrt(v_new):
            # far past the saddle point (all tilted mass in the far tail): back towards it
            new = 0.5 * (theta + new)
            m_new, v_new = moments(new)
            if not (math.isfinite(m_new) and v_new <= growth * v0) or m_new > eps_target + 3.0 * math.sqrt(v_new):
                break
        theta, m, v = new, m_new, v_new
        if halvings or abs(m - eps_target) < 0.05 * math.sqrt(v):
            break
    return max(theta, 0.0)


def _saddle_bracket(moments, m, v, eps_target, cap, v_max):
    """The saddle point by a bracket search (``_saddle_theta`` with ``bracket``): safeguarded
    Newton in a bracket [lo, hi] with m(lo) < eps_target <= m(hi); a theta whose tilted variance
    exceeds v_max bounds the bracket instead.  Slower than the doubling search, but it gets
    close to the window limit, which some small-delta heavy-tail points need (bench/README)."""
    lo, hi = 0.0, cap
    theta = 0.0
    too_wide = 0
    for _ in range(24):
        new = min(theta + (eps_target - m) / v, 4 * theta + 1) if v > 0 and not too_wide else math.inf
        if not lo < new < hi:
            new = math.sqrt(lo * hi) if lo > 0 and hi > 4 * lo else (0.5 * (lo + hi) if lo > 0 else min(hi / 8, 1.0))
        m_new, v_new = moments(new)
        if not (math.isfinite(m_new) and math.isfinite(v_new)) or v_new > v_max:
            hi = new
            too_wide += 1
        else:
            theta, m, v = new, m_new, v_new
            if m >= eps_target:
                hi = new
            else:
                lo = new
            if abs(m - eps_target) < 0.05 * math.sqrt(v) or (too_wide and hi - lo <= 0.25 * hi):
                break
        if hi - lo <= 0.05 * hi:  # any theta gives valid bounds: 5 % is close enough
            break
    if m > eps_target + 3.0 * math.sqrt(v):
        theta = lo  # never far past the saddle point (all tilted mass in the far tail)
    return max(theta, 0.0)


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
    """Holds the composed grids for one schedule; everything is cached.

    Both directions of the add/remove relation are bounded.  The remove
    direction is composed pessimistically and optimistically; the add
    direction first only pessimistically: when its upper bound is below the
    remove upper bound it cannot change the answer (the larger δ counts, and
    the remove lower bound is a lower bound of the larger δ), so its
    optimistic composition is skipped.
    """

    def __init__(self, schedule, accuracy: float, grid_step: float | None, relation: str = "add_remove"):
        self.schedule = tuple(schedule)
        self.replace = relation == "replace_one"
        self.main = _REPLACE if self.replace else False  # the direction that sets the estimates
        self.accuracy = accuracy
        self.grid_step = grid_step
        self._grids: dict = {}
        self._lock = threading.Lock()
        self.tilt_mode = (_VAR_GROWTH, False)  # (variance growth, bracket search): see _saddle_theta
        self._theta_cache: dict = {}
        self.tau = _TAU_STEP
        self.total = sum(c for _, _, c in self.schedule)
        self._up_add: dict = {}  # delta -> least upper bound on the add direction's eps found
        self._events: dict = {}  # the last tail-event interval (``_eps_events``)

    def set_delta_goal(self, delta_goal: float) -> None:
        """Cut each step's far tail at P-mass ~1e-4 * accuracy * delta_goal / T (it is still accounted)."""
        tau = max(_TAU_STEP, 1e-4 * self.accuracy * delta_goal / max(self.total, 1))
        tau = 10.0 ** math.floor(math.log10(tau))  # a few distinct values keep the caches useful
        if tau != self.tau:
            self.tau = tau
            self._grids.clear()
            self._theta_cache.clear()

    def grid(self, add: bool, pess: bool, step: float, eps_c: float, eps_lo: float | None = None) -> _Grid:
        """Composed grid tilted towards eps_c; its bounds hold for every eps >= eps_lo."""
        theta = self._theta(add, step, eps_c)
        eps_lo = eps_c if eps_lo is None else eps_lo
        key = (add, pess, step, theta, eps_lo)
        g = self._grids.get(key)
        if g is None:
            for _ in range(4):
                try:
                    g = _compose(self.schedule, add, step, theta, pess, eps_lo, self.tau)
                    break
                except (ValueError, FloatingPointError):
                    # heavy tails: the Chernoff window of a strong tilt can outgrow MAX_BINS
                    # where a weaker one fits; a tilt towards an eps beyond the direction's
                    # support (the add direction's loss is at most -log(1 - q) per step) can
                    # overflow (the tilt only decides tightness)
                    if theta <= 0:
                        raise
                    theta = 0.5 * theta if theta > 1e-3 else 0.0
            if g is None:
                g = _compose(self.schedule, add, step, 0.0, pess, eps_lo, self.tau)
            with self._lock:  # grid_pair builds two grids on two threads
                if len(self._grids) > 16:
                    self._grids.pop(next(iter(self._grids)))
                self._grids[key] = g
        return g

    def grid_pair(self, add: bool, step: float, eps_c: float, eps_lo: float | None = None):
        """(pessimistic, optimistic) grids of one direction, built concurrently: the kernels and
        FFTs release the GIL, and on two cores the pair takes little more than one of them."""
        theta = self._theta(add, step, eps_c)  # builds the one-step pieces both need
        key = (add, False, step, theta, eps_c if eps_lo is None else eps_lo)
        if key in self._grids or (os.cpu_count() or 1) < 2:
            return self.grid(add, True, step, eps_c, eps_lo), self.grid(add, False, step, eps_c, eps_lo)
        fut = _grid_pool().submit(self.grid, add, False, step, eps_c, eps_lo)
        try:
            pess = self.grid(add, True, step, eps_c, eps_lo)
        finally:
            opt = fut.result()
        return pess, opt

    def _theta(self, add, step, eps_c):
        key = (add, step, round(eps_c, 6), self.tilt_mode)
        th = self._theta_cache.get(key)
        if th is None:
            single = len(self.schedule) == 1 and self.schedule[0][2] == 1
            # one step needs no transform, hence no tilt
            th = (_saddle_theta(self.schedule, add, step, eps_c, self.tau, *self.tilt_mode)
                  if _USE_TILT and not single else 0.0)
            self._theta_cache[key] = th
        return th

    def _rdp_eps(self, target: float) -> float:
        """RDP's epsilon, also a valid upper bound for add/remove (none is used for replace-one)."""
        return math.inf if self.replace else self._rdp().epsilon(target)

    def _rdp(self):
        """The RDP accountant of the same schedule: its epsilon is also a valid upper bound,
        so it caps the PLD upper bound (never above RDP)."""
        from . import rdp

        acc = rdp.RDPAccountant()
        for sigma, q, count in self.schedule:
            acc.step(sigma, q, count)
        return acc

    # --- eps(δ) ---------------------------------------------------------
    def _eps_at(self, step, target, est):
        lo, up = self._eps_at_tilt(step, target, est)
        # the tail-event sum is cheap for short runs (the core's T-th power has a short window)
        # and the extra tilts are cheap for long ones (two stages): the cheaper one first.  It
        # cuts at the likely eps, so it also needs a fairly narrow first interval (measured on
        # the random-sweep points, bench/README)
        events_first = self.total < _TWO_STAGE_MIN and up - lo <= 0.1 * up
        if events_first:
            lo, up = self._eps_at_events(step, target, lo, up)
        if self.tau * self.total <= _TWO_STAGE_TAU and self.tilt_mode == (_VAR_GROWTH, False):
            # small delta: a tilt found by the bracket search, then one that lets the window grow
            # further, may resolve what FFT round-off hid; all the intervals are certified, so
            # their intersection is
            for mode in ((_VAR_GROWTH, True), (_VAR_GROWTH_SMALL, True)):
                if up - lo <= self.accuracy * up:
                    break
                self.tilt_mode = mode
                try:
                    lo2, up2 = self._eps_at_tilt(step, target, est)
                finally:
                    self.tilt_mode = (_VAR_GROWTH, False)
                lo, up = max(lo, lo2), min(up, up2)
        return (lo, up) if events_first else self._eps_at_events(step, target, lo, up)

    def _eps_at_events(self, step, target, lo, up):
        """[lo, up] narrowed by the tail-event sum (``_eps_events``) when still wide."""
        if up - lo > self.accuracy * up:
            # δ set by a few far-tail steps: sum over their number (``_event_grids``)
            ev = self._eps_events(step, target, lo, up)
            if ev is not None:
                up_a = self._up_add.get(target, math.inf)
                lo, up = max(lo, ev[0]), min(up, max(ev[1], up_a))
        return lo, up

    def _event_pair(self, step, eps_c, cut, eps_lo, rem_goal):
        """Pessimistic and optimistic tail-event grids of the remove direction
        (``_event_grids``): (upper grids, upper remainder, lower grids, precise), or None where
        the decomposition does not apply (too many tail events, windows too long); ``precise``:
        eps lies inside the bulk and ``_sum_delta`` must sum term by term."""
        if self.replace or len(self.schedule) != 1 or self.schedule[0][2] < 2:
            return None
        sigma, q, count = self.schedule[0]
        # cheap test first: the one-step mass above the cut must allow few tail events
        one = _one_step(sigma, q, False, step, self.tau)
        top = np.cumsum(one.pess[::-1])[::-1] + one.p_inf  # one-step mass at or above each point
        k = _EVENT_MAX + 1
        above = float(top[min(max(math.floor(cut / step) - one.j_lo, 0), top.size - 1)])
        m = 2 ** max(0, min(12, round(math.log2(0.25 * self.accuracy * max(eps_c, 1e-3) / step))))
        if count >= k and above > 0 and _log_binom(count, k) + k * math.log(above) > math.log(rem_goal):
            # eps inside the bulk (tiny eps): cut instead above the bulk, where T r ~ 1e-3.  Every
            # tail atom then lies far above eps, where δ is linear in e^{-loss}, which both
            # discretisations keep: a coarse tail grid costs little (cut / 64: cut / 8 left the
            # k = 1 term 2e-10 apart at q = 2.7e-5, sigma = 1.33, T = 7, eps ~ 1.4e-7).
            idx = np.nonzero(top <= 1e-3 / count)[0]
            if idx.size == 0:
                return None
            cut = max(cut, (one.j_lo + int(idx[0])) * step)
            m = 2 ** max(0, min(16, math.floor(math.log2(cut / (64 * step)))))
            fine0 = True
        else:
            fine0 = False
        out = []
        for pess in (True, False):
            try:
                r = _event_grids(sigma, q, count, False, step, m, cut, pess, eps_c, eps_lo, self.tau,
                                 rem_goal, fine0)
            except (ValueError, _NoTwoStage):
                r = None
            if r is None:
                return None
            out.append(r)
        (g_up, rem_up), (g_lo, _) = out
        return g_up, rem_up, g_lo, fine0  # (eps inside the bulk: δ is evaluated term by term)

    def _eps_events(self, step, target, lo, up):
        """(lower, upper) of the remove direction's eps in [lo, up] by the tail-event
        decomposition, or None where it does not apply."""
        if not up > lo:
            return None
        key = (step, target, lo, up)
        if key in self._events:
            return self._events[key]
        self._events.clear()  # (the accuracy loop asks again for the last step only)
        eps_c = 0.5 * (lo + up)
        # the cut a little above the likely eps: the term without tail steps then has a
        # bounded core reaching past eps, which its tilt centres (measured: a cut below eps
        # loosens that term, bench/README)
        pair = self._event_pair(step, eps_c, 0.5 * (eps_c + up), 0.5 * lo, 1e-3 * self.accuracy * target)
        self._events[key] = None
        if pair is None:
            return None
        g_up, rem_up, g_lo, precise = pair
        # any eps whose upper δ is <= target is an upper bound, any whose lower δ exceeds it a lower
        # bound (whatever the curves' shape between the points tried)
        up_m = _scan(lambda e: _sum_delta(g_up, rem_up, e, precise) <= target, lo, up, first=True)
        up_m = up if up_m is None else min(up, up_m)
        lo_m = _scan(lambda e: _sum_delta(g_lo, 0.0, e, precise) > target, lo, up_m, first=False)
        lo_m = lo if lo_m is None else max(lo, lo_m)
        self._events[key] = (lo_m, up_m)
        return lo_m, up_m

    def _eps_at_tilt(self, step, target, est):
        lo_e = 0.5 * est
        if self.replace:  # one symmetric pair: one direction
            g_up, g_lo = self.grid_pair(_REPLACE, step, est, lo_e)
            return _eps_bound(g_lo, target), _eps_bound(g_up, target)
        g_up, g_lo = self.grid_pair(False, step, est, lo_e)
        up_r, lo = _eps_bound(g_up, target), _eps_bound(g_lo, target)
        # the add direction usually lies well below: a 4x coarser pessimistic grid often proves it
        up_a = _eps_bound(self.grid(True, True, 4 * step, est, lo_e), target)
        if up_a > up_r:
            up_a = _eps_bound(self.grid(True, True, step, est, lo_e), target)
            if up_a > up_r:
                lo = max(lo, _eps_bound(self.grid(True, False, step, est, lo_e), target))
        # every add-direction upper bound holds: the least one found caps that direction
        self._up_add[target] = min(up_a, self._up_add.get(target, math.inf))
        return lo, max(up_r, up_a)

    def epsilon(self, target: float, step0: float | None = None) -> tuple[float, float]:
        """(lower, upper) at delta = target; ``step0`` overrides the first grid step (the loop
        still refines until the accuracy is met). The last step used is kept in ``last_step``."""
        self.set_delta_goal(target)
        est = _eps_estimate(self.schedule, target, self.main)
        step = self.grid_step or step0 or _initial_step(self.schedule, self.accuracy, est, self.main)
        cap = self._rdp_eps(target)
        best = None
        while True:
            self.last_step = step
            lo, up = self._eps_at(step, target, est)
            up = min(up, cap)
            if best is not None:
                lo, up = max(lo, best[0]), min(up, best[1])  # both intervals are certified
            gap = up - lo
            if self.grid_step is not None or gap <= self.accuracy * up or gap <= 1e-12:
                return lo, up
            if best is not None and gap > 0.8 * (best[1] - best[0]):
                return lo, up  # refining no longer helps; the interval is still sound
            best = (lo, up)
            est = 0.5 * (lo + up)
            step = self._refine(step, gap, self.accuracy * up)
            try:
                self._eps_at(step, target, est)  # builds (and caches) the finer grids
            except ValueError:
                return best  # the finer grid would not fit in memory: keep the certified interval

    def _refine(self, step, gap, goal):
        factor = max(0.25, min(0.5, 0.9 * math.sqrt(goal / gap))) if gap > 0 else 0.5
        new = step * (0.25 if factor < 0.375 else 0.5)
        if new < 1e-12:
            raise ValueError("cannot reach the requested accuracy: the grid step would drop below 1e-12")
        return new

    # --- δ(eps) ---------------------------------------------------------
    def _delta_at(self, step, eps, eps_c):
        """(lower, upper of the remove direction, upper of the add direction) at eps; the
        upper bound is the larger (replace-one: one direction, the add part is 0)."""
        if self.replace:
            return (_delta_bound(self.grid(_REPLACE, False, step, eps_c), eps),
                    _delta_bound(self.grid(_REPLACE, True, step, eps_c), eps), np.zeros(eps.size))
        up_r = _delta_bound(self.grid(False, True, step, eps_c), eps)
        lo = _delta_bound(self.grid(False, False, step, eps_c), eps)
        up_a = _delta_bound(self.grid(True, True, 4 * step, eps_c), eps)
        if (up_a > up_r).any():
            up_a = _delta_bound(self.grid(True, True, step, eps_c), eps)
            if (up_a > up_r).any():
                lo = np.maximum(lo, _delta_bound(self.grid(True, False, step, eps_c), eps))
        return lo, up_r, up_a

    def _delta_events(self, step, e, h, eps_c, lo, up, up_shift, up_a, up_a_shift):
        """``delta``'s group of eps values e refined by the tail-event decomposition of the
        remove direction: (lower, upper, upper at e + h), each intersected with the given
        (up_a, up_a_shift: the add direction's upper bounds at e and e + h)."""
        goal = 1e-3 * self.accuracy * max(float(lo.min()), 1e-6 * float(up.min()), 1e-300)
        pair = self._event_pair(step, eps_c, float(e.max() + h.max()), 0.5 * eps_c, goal)
        if pair is None:
            return lo, up, up_shift
        g_up, rem_up, g_lo, precise = pair
        lo = np.maximum(lo, _sum_delta(g_lo, 0.0, e, precise))
        up = np.minimum(up, np.maximum(_sum_delta(g_up, rem_up, e, precise), up_a))
        up_shift = np.minimum(up_shift, np.maximum(_sum_delta(g_up, rem_up, e + h, precise), up_a_shift))
        return lo, up, up_shift

    def delta(self, eps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        self.set_delta_goal(1e-16)
        est = _eps_estimate(self.schedule, 1e-6, self.main)
        step = self.grid_step or _initial_step(self.schedule, self.accuracy, max(float(eps.max()), est), self.main)
        h = self.accuracy * np.maximum(eps, 1e-2)
        keys = np.round(eps, 1)
        if self.replace:
            cap = np.ones(eps.size)
        else:
            rdp_acc = self._rdp()
            cap = np.array([rdp_acc.delta(float(x)) for x in eps])
        best = None
        while True:
            lo = np.empty(eps.size)
            up = np.empty(eps.size)
            ok = np.ones(eps.size, dtype=bool)
            try:
                for key in np.unique(keys):
                    # one tilted composition per group of nearby eps (saddle point of the group)
                    sel = keys == key
                    e = eps[sel]
                    eps_c = float(e.min())
                    lo_g, up_r, up_a = self._delta_at(step, e, eps_c)
                    _, up_r_s, up_a_s = self._delta_at(step, e + h[sel], eps_c)
                    up_g, up_shift = np.maximum(up_r, up_a), np.maximum(up_r_s, up_a_s)
                    if not ((lo_g >= up_shift) | (up_g - lo_g <= 1e-300)).all():
                        # δ set by a few far-tail steps: sum over their number
                        lo_g, up_g, up_shift = self._delta_events(step, e, h[sel], eps_c, lo_g, up_g, up_shift,
                                                                  up_a, up_a_s)
                    lo[sel], up[sel] = lo_g, up_g
                    ok[sel] = (lo[sel] >= up_shift) | (up[sel] - lo[sel] <= 1e-300)
            except ValueError:
                if best is None:
                    raise
                return best  # the next grid would not fit in memory: keep the certified interval
            up = np.minimum(up, cap)
            if best is not None:
                lo, up = np.maximum(lo, best[0]), np.minimum(up, best[1])
            best = (lo, up)
            if self.grid_step is not None or ok.all():
                return lo, up
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


def _sensitivity(relation: str) -> float:
    """Largest change of the batch sum: 1 clipping norm for add/remove, 2 for replace-one."""
    return 2.0 if relation == "replace_one" else 1.0


def _epsilon_one(sigma, q, steps, target, accuracy, grid_step, relation="add_remove"):
    if steps == 0:
        return 0.0, 0.0
    if q == 1.0:
        return _gaussian_eps(_sensitivity(relation) * math.sqrt(steps) / sigma, target)
    return _Engine([(sigma, q, int(steps))], accuracy, grid_step, relation).epsilon(target)


def _epsilon_hinted(sigma, q, steps, target, accuracy, step0):
    """(lower, upper, last grid step) of ``steps`` SGM steps, the first grid step being ``step0``
    if given: for calibration loops, where neighbouring sigmas need about the same grid.
    Arguments must already be validated."""
    if q == 1.0:
        lo, up = _gaussian_eps(math.sqrt(steps) / sigma, target)
        return lo, up, None
    eng = _Engine([(sigma, q, int(steps))], accuracy, None)
    lo, up = eng.epsilon(target, step0)
    return lo, up, eng.last_step


def _epsilon_upper_at(sigma, q, steps, target, accuracy, step):
    """Only the upper bound on epsilon(target), on a given grid step (no accuracy loop): for
    calibration searches once a full evaluation has shown that this step meets the accuracy
    nearby. Still a certified upper bound. Arguments must already be validated."""
    if q == 1.0:
        return _gaussian_eps(math.sqrt(steps) / sigma, target)[1]
    eng = _Engine([(sigma, q, int(steps))], accuracy, None)
    eng.set_delta_goal(target)
    est = _eps_estimate(eng.schedule, target)
    lo_e = 0.5 * est
    up = _eps_bound(eng.grid(False, True, step, est, lo_e), target)
    up_a = _eps_bound(eng.grid(True, True, 4 * step, est, lo_e), target)
    if up_a > up:
        up = max(up, _eps_bound(eng.grid(True, True, step, est, lo_e), target))
    return min(up, eng._rdp().epsilon(target))


def _delta_one(sigma, q, steps, eps, accuracy, grid_step, relation="add_remove"):
    if steps == 0:
        return 0.0, 0.0
    if q == 1.0:
        d = float(_exact_gaussian_delta(_sensitivity(relation) * math.sqrt(steps) / sigma, np.array([eps]))[0])
        return max(0.0, d * (1 - 1e-12)), min(1.0, d * (1 + 1e-12))
    lo, up = _Engine([(sigma, q, int(steps))], accuracy, grid_step, relation).delta(np.array([eps], dtype=np.float64))
    return float(lo[0]), float(up[0])


def _broadcast_call(fn, sigma, q, steps, x, accuracy, grid_step, relation="add_remove"):
    arrays = np.broadcast_arrays(sigma, q, steps, x)
    shape = arrays[0].shape
    lo = np.empty(shape)
    up = np.empty(shape)
    for idx in np.ndindex(shape):
        lo[idx], up[idx] = fn(*(float(a[idx]) for a in arrays), accuracy, grid_step, relation)
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
    relation : {"add_remove", "replace_one"}
        Neighbouring relation. ``"add_remove"``: one record added or removed;
        both directions are composed and the larger ε is reported.
        ``"replace_one"``: one record replaced by another. Sensitivity
        convention: every clipped per-example gradient has norm <= 1 (one
        clipping norm), so a replacement moves the batch sum by up to 2; the
        dominating pair is (1-q)N(0, σ²) + qN(-1, σ²) against
        (1-q)N(0, σ²) + qN(1, σ²) (dp_accounting's REPLACE adjacency), and at
        q = 1 it is the Gaussian mechanism with sensitivity 2. (Passing
        "sensitivity 2" into an add/remove accountant instead is a different,
        looser pair; treating replacement as sensitivity 1 under-reports ε.)
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
    return _broadcast_call(_epsilon_one, s, qq, t, d, acc, gs, relation)


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
    return _broadcast_call(_delta_one, s, qq, t, e, acc, gs, relation)


class PLDAccountant:
    """Accountant for a schedule of SGM steps, with certified (lower, upper) answers.

    Parameters
    ----------
    accuracy : float, optional
        As in :func:`epsilon`.
    relation : {"add_remove", "replace_one"}
        Neighbouring relation, as in :func:`epsilon`.
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
            self._engine = _Engine(self._schedule(), self.accuracy, self.grid_step, self.relation)
        return self._engine

    def epsilon(self, delta) -> Bounds:
        """Certified bounds on ε(δ) for the recorded schedule."""
        d = check_delta(delta)
        if not self.history:
            return Bounds(np.zeros(d.shape), np.zeros(d.shape)) if d.ndim else Bounds(0.0, 0.0)
        sched = self._schedule()
        if len(sched) == 1 and sched[0][1] == 1.0:
            mu = _sensitivity(self.relation) * math.sqrt(sched[0][2]) / sched[0][0]
            fn = lambda x: _gaussian_eps(mu, x)  # noqa: E731
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
            d = _exact_gaussian_delta(_sensitivity(self.relation) * math.sqrt(sched[0][2]) / sched[0][0], flat)
            lo, up = np.maximum(0, d * (1 - 1e-12)), np.minimum(1, d * (1 + 1e-12))
        else:
            lo, up = self._get_engine().delta(flat)
        lo, up = lo.reshape(e.shape), up.reshape(e.shape)
        return Bounds(float(lo), float(up)) if e.ndim == 0 else Bounds(lo, up)
