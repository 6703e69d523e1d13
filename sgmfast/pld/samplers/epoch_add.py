"""Balls-in-bins: a closed-form upper bound on the add direction, for where the lattice cannot
resolve it (few steps per epoch, small sigma).

The add direction of E epochs is the pair (Q, P) with privacy loss L = sum_e log(t / S_e),
S_e = sum_i W_{e,i} (``balls_in_bins``), so

    δ_add(eps) = E_Q[(1 - e^{eps - L})_+] <= Q(L > eps) <= e^{-lam eps} m(lam)^E  (every lam > 0),

m(lam) = E_Q[(t / S)^lam].  Its mass sits where S is near 0, which a linear lattice of spacing h
puts in one cell charged at loss +inf: at sigma 0.5, t 3 the lattice's add direction gave eps =
+inf where the remove direction was within 1 % (σ 0.6, t 3, δ 1e-6: [7.717, 7.800]).  Here
S >= M = max_i W_i, so (t / S)^lam <= (t / M)^lam, and M's law is exact: log W ~ N(-s^2/2, s^2)
iid, P(M <= x) = Phi((log x + s^2/2) / s)^t.  m(lam) is bounded above on a grid y_0 < ... < y_n
of log x, (t / x)^lam falling in x: each cell's mass at its left end, below y_0 the single
coordinate's partial moment (M < x_0 forces W_1 < x_0, and (t / M)^lam <= (t / W_1)^lam):
t^lam E[W^-lam; W < x_0] P(W < x_0)^(t-1) with E[W^-lam; log W < y] = e^{lam s^2/2 + lam^2 s^2/2}
Phi((y + s^2/2) / s + lam s), above y_n its value there times P(M > x_n); the result is rounded
up by SLACK (the cell masses are differences of t-th powers of Phi, accurate to ~1e-13
relative of the larger; the terms are positive).

The bound is loose where the add direction matters (large sigma: it is then not used), and far
below the remove direction where it does not, which is all it must show there.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy.special import log_ndtr

from ..._work import PER_BIN_MOMENTS, charge

#: Points of the log x grid, its half-width in sd of log W, and the lam values tried.
GRID, HALF_WIDTH = 4001, 40.0
LAMS = np.geomspace(1e-2, 64.0, 160)
#: Relative rounding slack on m(lam) (module notes), and an absolute one on each cell's mass.
SLACK = 1e-9
CELL_ABS = 1e-15


@functools.lru_cache(maxsize=64)
def log_moments(sigma: float, t: int) -> np.ndarray:
    """log m(lam) upper bounds at each lam of LAMS (module notes); kept per (sigma, t), read-only:
    a curve asks for every epoch count of one run (200 counts recomputed the same table 200
    times, half a 10 s curve)."""
    charge(PER_BIN_MOMENTS * GRID * (LAMS.size + 2))  # (an exp a cell and lam, on the one meter)
    s = 1.0 / sigma
    mu = -0.5 * s * s
    y = np.linspace(mu - HALF_WIDTH * s, mu + HALF_WIDTH * s, GRID)
    log_f = log_ndtr((y - mu) / s)  # log P(W <= e^y)
    g = np.exp(t * log_f)  # P(M <= e^y)
    mass = np.maximum(np.diff(g), 0.0) + CELL_ABS * np.maximum(g[1:], 1e-300)
    top = -math.expm1(t * float(log_f[-1]))  # P(M > x_n)
    log_t = math.log(t)
    out = np.empty(LAMS.size)
    for i, lam in enumerate(LAMS):
        # below y_0: t^lam E[W^-lam; log W < y_0] P(W < x_0)^(t-1), all in logs
        low = (lam * log_t + lam * 0.5 * s * s + 0.5 * lam * lam * s * s
               + float(log_ndtr((y[0] - mu) / s + lam * s)) + (t - 1) * float(log_f[0]))
        body = lam * (log_t - y[:-1]) + np.log(np.maximum(mass, 1e-300))
        last = lam * (log_t - y[-1]) + (math.log(top) if top > 0 else -math.inf)
        terms = np.concatenate(([low, last], body))
        mx = float(np.max(terms))
        out[i] = mx + math.log(float(np.sum(np.exp(terms - mx)))) + math.log1p(SLACK)
    out.flags.writeable = False
    return out


def eps_upper(sigma: float, t: int, epochs: int, delta: float) -> float:
    """An upper bound on the add direction's eps(δ) after ``epochs`` epochs: the least over lam of
    (E log m(lam) - log δ) / lam (module notes); +inf if no lam gives one."""
    lm = log_moments(float(sigma), int(t))
    with np.errstate(invalid="ignore"):
        e = (epochs * lm - math.log(delta)) / LAMS
    e = e[np.isfinite(e)]
    return max(float(e.min()), 0.0) * (1 + 1e-12) if e.size else math.inf


def delta_upper(sigma: float, t: int, epochs: int, eps: np.ndarray) -> np.ndarray:
    """Upper bounds on the add direction's δ(eps) after ``epochs`` epochs (each <= 1)."""
    lm = log_moments(float(sigma), int(t))
    eps = np.asarray(eps, dtype=np.float64).reshape(-1, 1)
    log_d = np.min(epochs * lm[None, :] - LAMS[None, :] * eps, axis=1)
    return np.minimum(1.0, np.exp(np.minimum(log_d, 0.0)) * (1 + 1e-12))
