"""The profile bound of a random search, from the certified privacy profile of one run (module
notes of :mod:`sgmfast.tuning`, with its proof)."""

from __future__ import annotations

import math

import numpy as np

from ._rounding import _F, _GAP, _REL, _TINY, _U
from .runs import RunCount


#: Cells of the Riemann sum for I (geometric in 1 - u near u = 1, where phi' is largest)
_CELLS = np.concatenate([[0.0], np.geomspace(1e-14, 1.0, 1500)])
#: Points of the run's privacy profile on [0, e_max] that the profile bound reads
_PROFILE_POINTS = 256
#: Largest e1, e2 and grid eps of the profile bound (e^600 is finite; a run whose eps is beyond
#: this gets the RDP bound or +inf)
_E_CAP = 600.0
#: Accuracy of the one PLD query that sharpens the best grid candidate
_REFINE = 1e-3


def _exp_up(big, err):
    """Floats >= e^L for every L within ``err`` of ``big`` (arrays; module notes, (d)).

    e^(big + err) is e^x with x = fl(big + err) off by at most 1.01 u |x| in the exponent, and
    exp(x) is within _F of e^x: the factor 1 + 4 u |x| + 4 _F covers both and its own two
    roundings ((1 + 4u|x| + 4F - u)(1 - u) >= (1 + 1.02u|x|)(1 + 1.01F)).  Subnormal results
    carry no relative accuracy: they become 2 _TINY."""
    with np.errstate(over="ignore", invalid="ignore"):
        x = big + err
        e = np.exp(x) * (1.0 + 4.0 * _U * np.abs(x) + 4.0 * _F)
    e = np.where(x == -np.inf, 0.0, e)  # (phi' = 0 exactly: 0 * inf above)
    e = np.where(e < _TINY, 2.0 * _TINY, e)
    return np.where(np.isnan(x), np.inf, e)  # (-inf + inf: nothing known)


def _exp_down(big, err):
    """Floats <= e^L for every L within ``err`` of ``big``: the mirror of :func:`_exp_up`;
    subnormal results become 0."""
    with np.errstate(over="ignore", invalid="ignore"):
        x = big - err
        e = np.exp(x) * np.maximum(1.0 - 4.0 * _U * np.abs(x) - 4.0 * _F, 0.0)
    return np.where((e < _TINY) | np.isnan(x), 0.0, e)


def _mean_up(runs: RunCount) -> float:
    """A float >= E[K] = phi'(1)."""
    return float(_exp_up(*runs._log_dpgf_gap(np.zeros(1)))[0])


def _two_diff(a, b):
    """(r, err) with r = fl(a - b) and a - b = r + err exactly (Knuth's two-sum; finite inputs)."""
    r = a - b
    bv = a - r
    av = r + bv
    return r, (a - av) + (bv - b)


def _sum_up(a, b):
    """fl(a + b), or the next float up when that was rounded down: a float >= a + b (a, b >= 0;
    inf stays inf)."""
    with np.errstate(invalid="ignore"):
        r, err = _two_diff(a, -b)
        return np.where(np.isfinite(r) & (err > 0.0), np.nextafter(r, np.inf), r)


def _excess(runs: RunCount, e1: float, d1: float, e2: np.ndarray) -> np.ndarray:
    """Upper bounds on I(e1, e2) = int_0^1 (phi'(u) - e^e2 phi'(l(u)))_+ du for each e2 (module
    notes: (c) the Riemann sum, (d) its rounding)."""
    s = _CELLS  # 1 - u at the cell edges, increasing; cell i is [1 - s[i+1], 1 - s[i]] exactly
    # phi' at each cell's right end u_i = 1 - s_i, from s_i itself, rounded up
    hi = _exp_up(*runs._log_dpgf_gap(s[:-1]))
    # 1 - l(u) at each cell's left end, as sums of non-negative terms (no cancellation, each form
    # within _F + 3u), rounded up: the l used is at most the true l, and phi'(l) too
    # (e1 <= _E_CAP, so e^e1 is finite; s >= 1e-14 here, so e^-e1 (s + d1) >= 2.6e-275 and
    # e^e1 s are normal numbers, where the relative error bounds hold)
    sl = s[1:]
    gap = np.minimum(-math.expm1(-e1) + math.exp(-e1) * (sl + d1), math.exp(e1) * sl + d1)
    gap = np.minimum(gap * (1.0 + _GAP), 1.0)
    lo = _exp_down(*runs._log_dpgf_gap(gap))  # phi'(l) at each cell's left end, rounded down
    width = np.diff(s)  # exact: s[i+1] <= 2 s[i] (Sterbenz), and s[1] - 0
    from .._kernels.tuning import excess

    # e^e2 rounded down (exp within _F; the product's rounding is covered by 2 _F - _F)
    scale = np.exp(np.asarray(e2, dtype=np.float64)) * (1.0 - 2.0 * _F)
    out = np.empty(scale.size)
    excess(hi, lo, width, scale, out)
    # the kernel's arithmetic: each cell's exact (hi - scale lo)_+ is at most its computed value
    # over 1 - u plus u hi; the products and the 1501-term sum err by at most (n + 2) u = 1.7e-13
    # relative: the relative 1e-9 covers the first part, 1e-15 of the sum of hi (dot product
    # within 1.7e-13) the u hi part, and both leave >= 2u of slack for the caller's last addition
    return out * (1.0 + 1e-9) + 1e-15 * float(hi @ width)


class _Profile:
    """The run's certified privacy profile on a grid: ``d[j]`` >= delta_Q(e[j]) (either direction),
    made non-increasing (the true profile is), so that delta_Q(x) <= d[j] for every x >= e[j]."""

    def __init__(self, sigma, q, steps, e_max, goal, accuracy, relation):
        from ..pld.tradeoff import _profile_upper

        self.relation = relation
        self.e = np.linspace(0.0, min(e_max, _E_CAP), _PROFILE_POINTS)
        d = _profile_upper(sigma, q, int(steps), self.e, relation, accuracy, goal)
        self.d = np.minimum(np.minimum.accumulate(d), 1.0)

    def delta_at(self, x):
        """Upper bounds on delta_Q(x) (array x >= 0): the value at the grid point at or below x."""
        j = np.searchsorted(self.e, np.asarray(x, dtype=np.float64), side="right") - 1
        return np.where(j >= 0, self.d[np.maximum(j, 0)], 1.0)

    def epsilon_at(self, t):
        """Upper bounds on eps_Q(t) (array t): the first grid point whose delta is <= t, else inf."""
        t = np.asarray(t, dtype=np.float64)
        j = np.searchsorted(-self.d, -t, side="left")  # first j with d[j] <= t (d non-increasing)
        return np.where(j < self.e.size, self.e[np.minimum(j, self.e.size - 1)], math.inf)


def _coarse_fine(at, n: int, every: int = 8):
    """min over j of at(j) (a (value, info) pair): every ``every``-th j, then all j near the best."""
    best, info, jb = math.inf, None, 0
    for j in range(0, n, every):
        v, i = at(j)
        if v < best:
            best, info, jb = v, i, j
    for j in range(max(jb - every + 1, 0), min(jb + every, n)):
        if j % every:
            v, i = at(j)
            if v < best:
                best, info = v, i
    return best, info


def _profile_epsilon(sigma, q, steps, dlt, runs, accuracy, relation, prof) -> float:
    from .. import pld

    prof = prof()
    e2 = prof.e
    big, err = runs._log_dpgf_gap(np.zeros(1))
    log_m = float(big[0] + err[0])  # >= log E[K] (its rounding: within the 1e-12 below)

    def at(j):
        """(best eps, (e2, target)) over e2 for e1 = e[j]."""
        rest = dlt - _excess(runs, float(prof.e[j]), float(prof.d[j]), e2 * (1.0 - _REL))
        ok = rest > 0.0
        if not ok.any():
            return math.inf, None
        # the split is e2* = fl(e2 (1 + _REL)): I is read at fl(e2 (1 - _REL)) <= e2*, and t <=
        # (delta - I) / (E[K] e^e2*) -- the 1e-12 covers exp's _F, three roundings and the
        # exponent's (u |e2* + log E[K]| <= 2e-13 while E[K] < e^1000)
        t = rest[ok] * np.exp(-e2[ok] * (1.0 + _REL) - log_m) * (1.0 - 1e-12)
        # eps = e2* + eps_Q(t), the sum rounded up: delta_Q is read at or below eps - e2*
        tot = _sum_up(e2[ok] * (1.0 + _REL), np.where(t >= 1.0, 0.0, prof.epsilon_at(t)))
        k = int(np.argmin(tot))
        return float(tot[k]), (float(e2[ok][k] * (1.0 + _REL)), float(t[k]))

    best, best_t = _coarse_fine(at, prof.e.size)
    if best_t is not None and best_t[1] < 1.0:
        # the grid's eps_Q at the best target, sharpened by one PLD query
        e_q = float(pld.epsilon(sigma, q, steps, best_t[1], accuracy=_REFINE, relation=relation).upper)
        best = min(best, float(_sum_up(best_t[0], e_q)))
    return best


#: splits of eps whose delta_Q ``_profile_delta`` sharpens by a PLD query
SHARPEN = 4


def _profile_delta(sigma, q, steps, eps, runs, prof) -> float:
    from .. import pld

    prof = prof()
    # e2 such that eps - e2 is a grid point, and the grid points themselves (the e2 that
    # ``epsilon`` tries: so that delta(epsilon(d)) <= d can hold)
    e2_grid = np.unique(np.concatenate([eps - prof.e[(prof.e <= eps) & (prof.e >= eps - _E_CAP)],
                                        prof.e[prof.e <= eps]]))
    if e2_grid.size == 0:
        return 1.0
    # delta_Q is read at x = fl(eps - e2_grid): the split charged is e2* = eps - x exactly (an
    # exact two-sum gives its float neighbours), rounded up in e^e2 ... and down in I (which
    # falls as e2 grows); e2* = e2_grid but for the rounding of x
    x = eps - e2_grid
    d_rest = prof.delta_at(x)
    r, err = _two_diff(eps, x)
    e2 = np.maximum(np.maximum(e2_grid * (1.0 + _REL), np.where(err > 0.0, np.nextafter(r, np.inf), r)), 0.0)
    e2_in = np.minimum(e2_grid * (1.0 - _REL), np.where(err < 0.0, np.nextafter(r, -np.inf), r))
    # E[K] rounded up; the 1 + _REL covers exp's _F and the products (and the final sum, with the
    # slack ``_excess`` leaves)
    m = _mean_up(runs) * (1.0 + _REL)

    def at(j):
        excess = _excess(runs, float(prof.e[j]), float(prof.d[j]), e2_in)
        tot = m * np.exp(e2) * d_rest + excess
        ks = np.argsort(tot)[:SHARPEN]
        return float(tot[ks[0]]), [(float(x[k]), float(e2[k]), float(excess[k])) for k in ks]

    best, args = _coarse_fine(at, prof.e.size)
    best = min(best, 1.0)
    # delta_Q at the best few splits by one sharper PLD query each instead of the grid's (the
    # grid's best split need not be the one ``epsilon`` sharpened: SHARPEN of them make the
    # round trip delta(epsilon(d)) <= d hold to the query's accuracy)
    if args is not None:
        xs = np.array([max(a[0], 0.0) for a in args])  # (the same x: the same split e2*)
        d_q = pld.delta(sigma, q, steps, xs, accuracy=_REFINE, relation=prof.relation).upper
        best = min(best, min(m * math.exp(a[1]) * float(d) + a[2] for a, d in zip(args, d_q)))
    return best
