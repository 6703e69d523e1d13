"""Exact paths: answers that need no grid, each certified (kernels: ``sgmfast._kernels.pld.exact``).

* Steps that do nothing -- q = 0, sigma = +inf, count 0 -- are dropped from the schedule.
* sigma = 0 (no noise): a sampled step reveals its record, so the remove direction has an atom
  at +inf loss of mass p = 1 - prod (1 - q)^T and δ(eps) >= p for every finite eps; alone,
  δ(eps) = p exactly (the steps without a sample have loss T log(1 - q) <= 0).  Mixed with noisy
  steps: eps(δ) = +inf below p; otherwise it lies between the noisy steps' own eps(δ) (removing
  mechanisms from a composition never raises δ) and their eps((δ - p) / (1 - p)) (the noiseless
  steps' finite losses are <= 0, so δ <= p + (1 - p) δ_noisy).
* q = 1 everywhere: the Gaussian mechanism, mu = c sqrt(sum T / sigma^2) (c = 1 add/remove, 2
  replace-one; Balle & Wang, ICML 2018, Thm 8).
* One step: the closed form of the hockey-stick divergence at the optimal threshold (Räisä et al.,
  ICML 2024, eq. 45, its add twin, and the replace-one pair).
* δ at or above the total variation: TV of T steps <= 1 - prod (1 - tv)^T (a coupling per step),
  tv = q (2 Φ(c / (2 sigma)) - 1); eps(δ) = 0 when δ is at least that.

The closed forms are evaluated at the float shift w = c / sigma (mu for the Gaussian) rounded
down (lower bound) and up (upper bound): δ grows with w (less noise), so the exact real w
between them is covered, and every other rounding is bounded inside the kernel.
"""

from __future__ import annotations

import math

import numpy as np
from ..._kernels.pld import exact as kx
from ..common import U

TINY = 5e-324  # the smallest positive float: an upper bound for a δ that is positive but underflows


def sensitivity(relation: str) -> float:
    """Largest change of the batch sum: 1 clipping norm for add/remove, 2 for replace-one."""
    return 2.0 if relation == "replace_one" else 1.0


def normalise(schedule):
    """The schedule without steps that do nothing (q = 0, sigma = +inf, count 0), and the +inf
    mass p = 1 - prod (1 - q)^T of its noiseless (sigma = 0) steps, which it also leaves out."""
    noisy, log_keep, k = [], 0.0, 0
    for sigma, q, count in schedule:
        if count == 0 or q == 0.0 or sigma == math.inf:
            continue
        if sigma == 0.0:
            log_keep += count * math.log1p(-q) if q < 1.0 else -math.inf
            k += 1
        else:
            noisy.append((sigma, q, count))
    # p_inf rounded up (lower bound side: the caller uses p_lo): each of the k terms within 3u,
    # their sum (same signs) within (k - 1) u more, expm1 2u: (k + 4) u (a flat 4u was exceeded
    # from k ~ 16 noiseless runs on: 13.9u measured at 64 equal runs; tests/test_rounding_constants.py)
    p = -math.expm1(log_keep)
    r = (k + 4) * U
    return noisy, (max(p * (1 - r), 0.0), min(p * (1 + r) if p > 0 else 0.0, 1.0))


def _bracket(x: float, n: int = 4) -> tuple[float, float]:
    """Floats below and above a value computed within n u (n small)."""
    return x * (1 - (n + 1) * U), x * (1 + (n + 1) * U)


def gaussian_w(schedule, relation):
    """(mu_lo, mu_hi) bracketing mu of the composed Gaussian when every step has q = 1, else None."""
    if not schedule or any(q != 1.0 for _, q, _ in schedule):
        return None
    c = sensitivity(relation)
    mu2 = sum(count / (sigma * sigma) for sigma, _, count in schedule)
    return _bracket(c * math.sqrt(mu2), 2 * len(schedule) + 4)


#: beyond this L = -sum T log q the Gaussian bracket is skipped: its floor e^-L δ_G is below the
#: smallest δ asked (1e-30), and with q^T that small RDP caps far below δ_G
NEAR_GAUSSIAN_MAX_L = 70.0


def near_gaussian(schedule, relation):
    """The Gaussian bracket of nearly full batches: (form, L) with form the composed Gaussian's
    closed form (q = 1 everywhere) and L >= -sum T log q, or None where L > 70.

    Upper: subsampling is post-processing (given the Gaussian's output, keep it with probability
    q, else replace it by fresh N(0, sigma^2) noise), so δ(eps) <= δ_G(eps).  Lower: P^T >=
    Q_all P_G^T as measures, Q_all = prod q^T = e^-L the chance that every step samples the
    record; in the remove direction Q = N(0)^T is the Gaussian's own, so δ(eps) >= e^-L
    δ_G(eps + L) and eps(δ) >= eps_G(δ e^L) - L.  Replace-one's Q is a mixture too (the other
    terms can be negative): no floor there (L = +inf).  Tight when L is small: q = 1 - 1e-12,
    T = 5e5 gives L = 5e-7."""
    if not schedule:
        return None
    big_l = -sum(count * math.log(q) for _, q, count in schedule) * (1 + (len(schedule) + 4) * U)
    if big_l > NEAR_GAUSSIAN_MAX_L:
        return None
    mu2 = sum(count / (sigma * sigma) for sigma, _, count in schedule)
    w = _bracket(sensitivity(relation) * math.sqrt(mu2), 2 * len(schedule) + 4)
    return ((kx.KIND_GAUSS,), 1.0) + w, (math.inf if relation == "replace_one" else big_l)


def near_gaussian_delta(near, eps: np.ndarray):
    """(lower, upper) of δ at each eps from ``near_gaussian`` ([0, 1] without one)."""
    if near is None:
        return np.zeros(eps.size), np.ones(eps.size)
    form, big_l = near
    up = delta_bounds(form, eps)[1]
    if big_l == math.inf:
        return np.zeros(eps.size), up
    lo = delta_bounds(form, eps + big_l * (1 + 2 * U))[0] * math.exp(-big_l) * (1 - 4 * U)
    return np.maximum(lo, 0.0), up


def near_gaussian_eps(near, target: float):
    """(lower, upper) of eps(target) from ``near_gaussian`` ([0, inf] without one)."""
    if near is None:
        return 0.0, math.inf
    form, big_l = near
    up = eps_bounds(form, target)[1]
    t = target * math.exp(big_l) * (1 + 4 * U) if big_l < 700 else math.inf
    if not t < 1.0:
        return 0.0, up
    return max(0.0, eps_bounds(form, t)[0] - big_l * (1 + 2 * U)), up


def _kind(relation: str, gauss: bool):
    if gauss:
        return (kx.KIND_GAUSS,)
    return (kx.KIND_REPLACE,) if relation == "replace_one" else (kx.KIND_REMOVE, kx.KIND_ADD)


def _one_step_w(schedule, relation):
    """(q, w_lo, w_hi) for a single step with q < 1 (w = 1 / sigma), else None."""
    if len(schedule) == 1 and schedule[0][2] == 1 and schedule[0][1] < 1.0:
        sigma, q, _ = schedule[0]
        return (q,) + _bracket(1.0 / sigma, 1)
    return None


def closed_form(schedule, relation):
    """(kinds, q, w_lo, w_hi) when a closed form covers the (normalised, non-empty) schedule."""
    w = gaussian_w(schedule, relation)
    if w is not None:
        return _kind(relation, True), 1.0, w[0], w[1]
    one = _one_step_w(schedule, relation)
    if one is not None:
        return (_kind(relation, False),) + one
    return None


def delta_bounds(form, eps: np.ndarray):
    """(lower, upper) of δ at each eps from a ``closed_form``."""
    kinds, q, w_lo, w_hi = form
    lo = np.zeros(eps.size)
    up = np.zeros(eps.size)
    for i, e in enumerate(eps):
        for kind in kinds:
            l_lo = kx.log_delta_bounds(kind, float(e), q, w_lo)[0]
            l_hi = kx.log_delta_bounds(kind, float(e), q, w_hi)[1]
            v = math.exp(l_lo) if l_lo > -math.inf else 0.0
            # (below the normal range exp rounds to a multiple of 5e-324, up as often as down:
            # a lower bound there is 0 -- the sweep found 7.4e-323 over the exact 7.26e-323)
            lo[i] = max(lo[i], v if v >= 2.2250738585072014e-308 else 0.0)
            if math.isnan(l_hi):
                up[i] = 1.0
            elif l_hi > -math.inf:
                # (and an upper bound there is padded by a few of those steps, as ``Engine.delta``
                # pads: the sweep found 3.0237e-321 under the exact 3.0253e-321)
                v = math.exp(l_hi)
                up[i] = max(up[i], min(1.0, v if v >= 2.2250738585072014e-308 else v + 1e-322))
    return lo, up


def eps_bounds(form, target: float):
    """(lower, upper) of eps(target) from a ``closed_form`` (the larger over the directions)."""
    kinds, q, w_lo, w_hi = form
    lt = math.log(target)
    lo = max(kx.eps_bound(kind, lt, q, w_lo, False) for kind in kinds)
    up = max(kx.eps_bound(kind, lt, q, w_hi, True) for kind in kinds)
    return lo, up


def _tv_step(sigma: float, q: float, c: float) -> float:
    """An upper bound on one step's total variation q (2 Phi(c / (2 sigma)) - 1)."""
    if q >= 1.0 and sigma == 0.0:
        return 1.0
    g = 1.0 if sigma == 0.0 else math.erf(c / (2.0 * math.sqrt(2.0) * sigma))  # 2 Φ(x) - 1 = erf(x / sqrt 2)
    return q * g * (1 + 8 * U) + 1e-300


def tv_uppers(parts, counts, relation) -> np.ndarray:
    """Upper bounds on δ(0), the total variation of the composed pair, after each row of
    ``counts`` (the steps of each of ``parts`` [(sigma, q)]): 1 - prod (1 - tv)^T.  The sum of
    the logs, all <= 0, errs by at most (P + 2) u of its size (P parts; log1p and the products
    within u each): taken (P + 4) u larger, then expm1 within 8 u (tests: mpmath, 50 digits)."""
    c = sensitivity(relation)
    counts = np.asarray(counts).reshape(-1, len(parts))
    tv = np.array([_tv_step(float(s), float(q), c) for s, q in parts], dtype=np.float64)
    full = tv >= 1.0
    logs = np.log1p(-np.where(full, 0.0, tv))
    log_keep = np.empty(counts.shape[0])
    for a in range(0, counts.shape[0], 256):  # (in row blocks: a curve's counts can be 10^4 x 10^4)
        log_keep[a:a + 256] = counts[a:a + 256].astype(np.float64) @ logs
    log_keep *= 1 + (len(parts) + 4) * U
    out = np.minimum(1.0, -np.expm1(log_keep) * (1 + 8 * U))
    out[(counts[:, full] > 0).any(axis=1)] = 1.0
    return out


def tv_upper(schedule, relation) -> float:
    """``tv_uppers`` of one schedule [(sigma, q, count)]."""
    if not schedule:
        return 0.0
    return float(tv_uppers([(s, q) for s, q, _ in schedule], [[c for _, _, c in schedule]], relation)[0])
