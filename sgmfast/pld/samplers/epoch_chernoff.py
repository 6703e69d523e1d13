"""Chernoff bounds on sums of one balls-in-bins epoch's coordinates (``epoch_tail``, ``epoch_power``).

For S the sum of t iid lattice variables of masses w at k h (a sub-probability law) and any
lam > 0, Q(S > c) <= e^{-lam c} M(lam)^t and E_Q[S / t; S > c] <= e^{-lam c} M'(lam) M(lam)^(t-1)
(the kernels: ``_kernels.pld.chernoff``).  Here:

* ``coarse_majorant``: the law spread onto a coarser lattice, larger in convex order (e^{lam x}
  and x e^{lam x} are convex, so every bound only grows);
* ``_chernoff_over``: the least bound over a searched lam grid, at one cap (the lattice's top);
* ``_Table`` / ``_table``: M, M' (and M'', to find the best lam) of the law truncated at each of
  ``epoch_tail._truncations``' points, on one lam grid, for bounds at any cap by a look-up
  (``_Table.bounds``; ``chernoff_above`` on the whole law).
"""

from __future__ import annotations

import math

import numpy as np

from ..._failures import GridFailure
from ..._kernels.pld import chernoff as kc
from ..._work import charge
from ..common import U, dot

#: Points of the coarse majorant the rungs' Chernoff bounds are computed on.
COARSE = 4096


#: the last few (w, h, most, result) of ``coarse_majorant`` (same array object: asked at every ladder rung)
_MAJORANTS: list = []


def coarse_majorant(w: np.ndarray, h: float, most: int = COARSE):
    """(masses, spacing H): w (masses at k h) spread onto a lattice of at most ``most`` + 2 points
    of spacing H, each mass split between its two neighbouring points keeping its mean -- larger
    in convex order; rounded up by 1e-12 (the splits' rounding is ~3u of each mass)."""
    for hit in list(_MAJORANTS):
        if hit[0] is w and hit[1] == h and hit[2] == most:
            return hit[3]
    out = _majorant(w, h, most)
    _MAJORANTS[:] = _MAJORANTS[-3:] + [(w, h, most, out)]
    return out


def _majorant(w, h, most):
    f = max(1, -(-w.size // most))
    out = np.empty(w.size // f + 2)
    kc.spread_coarse(np.ascontiguousarray(w, dtype=np.float64), int(f), int(out.size), out)
    return out, f * h


#: Truncation points of ``epoch_tail._truncated_tails`` and ``over_cap`` (geometric from 8 E[W]
#: to the lattice's top), and of ``epoch_tail._sum_tails`` (a heavy tail's bound on P(R > r) is
#: set by the one above M ~ r / 2): the rows of every ``_Table``.
TRUNCATIONS, GIVEN_TRUNCATIONS = 8, 24


def _truncation_points(wc: np.ndarray, H: float, m1: float, count: int) -> np.ndarray:
    """The indices k of ``_truncations``' points M = k H: geometric from 8 E[W] to the top (only
    the top where that is below 8 E[W]: a light tail at large sigma, W_max ~ 1.0006 at sigma 10^5,
    whose geometric points ran past the lattice, and the kernels read past its end)."""
    top = wc.size - 1
    start = min(max(2.0, 8.0 * m1 / H), max(top, 1))
    return np.unique(np.clip(np.geomspace(start, max(top, 1), count).astype(np.int64), 0, top))


# --- Chernoff above the lattice cap (``balls_in_bins.Epoch``) and at many caps -----------------------
#: Points of the majorant the cap's bound is computed on (``_chernoff_over``): its spacing is at
#: most 8 h on the longest lattices, which adds <= 16 h^2 to Var W (a 1e-5 fraction at the
#: default spacing), while the sums cost 8 times less than on the lattice itself.
COARSE_CAP = 1 << 16
#: Points of the coarse log-lam grid, then BISECT halvings of the two cells around each least
#: value by the sign of the exponent's slope (``_slope``): the search ends ~ 0.01 in log lam, where
#: a lam off the best loosens a bound of e^-40 by ~ 0.1 %; any lam > 0 gives a valid bound.  (Three
#: finer grids of 17 lams each did the same in 102 passes over the lattice, 16 now.)
GRID, BISECT = 25, 8
#: Spacing in log lam of the Chernoff tables (``_table``): a lam off the best by half of it
#: loosens a bound of e^-40 by ~ 0.2 % (by the measure of GRID's note).
LAM_STEP = 0.03


def _lam_range(w, x, t, cap_lo, cap_hi):
    """(lo, hi) of log lam: on the scale of 1/cap, and of 1/sd(S) (a light-tailed S, large
    sigma: the best lam is about (cap - E S) / Var S, far above 1/cap)."""
    h = x[1] - x[0] if x.size > 1 else 1.0
    sd = math.sqrt(max(t * (dot(w, x * x) - dot(w, x) ** 2), 1e-300))
    return (math.log(min(1e-6 / max(cap_hi, 1e-12), 1e-2 / max(sd, h))),
            math.log(max(1e3 / max(cap_lo, 1e-12), 1e3 / max(sd, h))))


def _chernoff_over(w, h, t, cap):
    """Upper bounds on the P-mass E_Q[S/t; S > cap] and the Q-mass Q(S > cap) of the sum of t
    iid lattice variables with masses w (sub-probability): for every lam > 0,
    Q(S > cap) <= e^{-lam cap} M(lam)^t and E_Q[S/t; S > cap] <= e^{-lam cap} M'(lam) M(lam)^(t-1),
    M the lattice MGF; the least over a grid of lam (``_chernoff_logs``: each rounded up by its
    rounding).  Lattices longer than COARSE_CAP are first spread onto a coarser one
    (``coarse_majorant``: larger in convex order, and e^{lam x}, x e^{lam x} are convex for
    x, lam >= 0, so both bounds only grow).  Both logs are convex in lam, so a coarse grid finds
    each one's basin and finer grids around its least point narrow it."""
    if w.size > COARSE_CAP:
        w, h = coarse_majorant(w, h, COARSE_CAP)
    x = np.arange(w.size) * h
    lo_l, hi_l = _lam_range(w, x, t, cap, cap)
    caps = np.array([float(cap)])
    best = [1.0, 1.0]  # (P-mass, Q-mass)
    grid = np.linspace(lo_l, hi_l, GRID)
    first = _chernoff_logs(w, h, t, caps, np.exp(grid))
    for which in (0, 1):
        vals = first[which][0]
        i = int(np.argmin(vals))
        a, b = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
        for _ in range(BISECT):
            mid = 0.5 * (a + b)
            if _slope(w, h, t, float(cap), math.exp(mid), which) < 0.0:
                a = mid
            else:
                b = mid
        v = min(float(vals.min()), float(_chernoff_logs(w, h, t, caps, np.exp(np.linspace(a, b, 3)))[which][0].min()))
        best[which] = min(1.0, math.exp(min(v, 0.0)) * (1 + 1e-12))
    return best[0], best[1]


def _slope(w, h, t, cap, lam, which):
    """The slope in lam of ``_chernoff_over``'s exponent at lam (``which`` 0: (t - 1) M'/M + M''/M'
    - cap, the P-mass's; 1: t M'/M - cap, Q's), +1 where the sums overflow (the least is below):
    only to find the best lam."""
    m, dm, d2m = (np.empty((1, 1)) for _ in range(3))
    charge(1.5 * w.size)
    kc.chernoff_prefix(np.ascontiguousarray(w, dtype=np.float64), float(h), np.array([lam]),
                       np.array([w.size - 1], dtype=np.int64), m, dm, d2m)
    m, dm, d2m = float(m[0, 0]), float(dm[0, 0]), float(d2m[0, 0])
    if not (math.isfinite(m) and math.isfinite(dm) and math.isfinite(d2m) and m > 0.0 and dm > 0.0):
        return 1.0
    return ((t - 1) * dm / m + d2m / dm if which == 0 else t * dm / m) - cap


def _chernoff_logs(w, h, t, caps, lams, dm0: float = 0.0):
    """(log P-bounds, log Q-bounds) of ``_chernoff_over``, arrays (caps x lams), rounded up:
    M and M' within r = (w.size + 2 |lam| x_max + 3 CHERNOFF_BLOCK + 6) u relative
    (``chernoff_sums``: its exponentials and sums; ``dm0`` added to M'), raised to the power t;
    the logs and the sum 2u of their magnitudes (``kc.chernoff_logs``); plus 1e-12 by the caller
    (+inf where the MGF overflows: no bound at that lam).  (A flat 1e-12 relative was exceeded:
    2.0e-12 at sigma 2, t 1000, 6894 lattice points, tests/test_rounding_constants_more.py.)"""
    m, dm = np.empty(lams.size), np.empty(lams.size)
    charge(w.size * lams.size)  # (on the one meter: a product and two multiply-adds a term, ~ a unit)
    kc.chernoff_sums(np.ascontiguousarray(w, dtype=np.float64), float(h), lams, m, dm)
    dm += dm0  # (a non-negative term more: its rounding is the 2u added to r below)
    r = (w.size + 2.0 * np.abs(lams) * ((w.size - 1) * h) + 3.0 * kc.CHERNOFF_BLOCK + 6.0) * U
    caps = np.ascontiguousarray(caps, dtype=np.float64)
    lp, lq = np.empty((caps.size, lams.size)), np.empty((caps.size, lams.size))
    kc.chernoff_logs(m, dm, r, lams, caps, float(t), lp, lq)
    return lp, lq


class _Table:
    """``chernoff_sums`` of the prefixes wc[0 .. k] of a majorant at the truncation points k
    (``_truncation_points``) and the whole, on one lam grid: Chernoff bounds on a sum of
    truncated coordinates at any cap for the price of a look-up (``bounds``)."""

    def __init__(self, wc: np.ndarray, H: float, t: int):
        x_max = (wc.size - 1) * H
        m1 = dot(wc, np.arange(wc.size) * H)
        sd = math.sqrt(max(t * (dot(wc, (np.arange(wc.size) * H) ** 2) - m1 * m1), 1e-300))
        lo = math.log(min(1e-6 / (t * x_max + H), 1e-2 / max(sd, H)))  # (``_lam_range``'s, any cap <= t x_max)
        hi = math.log(1e3 / H)
        self.lams = np.exp(np.linspace(lo, hi, int(math.ceil((hi - lo) / LAM_STEP)) + 1))
        self.wc, self.H, self.rows = wc, H, {}
        self.cost = self._add(np.union1d(np.union1d(_truncation_points(wc, H, m1, TRUNCATIONS),
                                        _truncation_points(wc, H, m1, GIVEN_TRUNCATIONS)), [wc.size - 1]))

    def _add(self, ks: np.ndarray) -> float:
        """Rows for the prefixes wc[0 .. k], k in ``ks`` (increasing); returns their work."""
        ks = np.ascontiguousarray(ks, dtype=np.int64)
        if not (ks.size and ks[0] >= 0 and ks[-1] < self.wc.size and np.all(np.diff(ks) > 0)):
            # (the kernel reads w[k] unchecked)
            raise GridFailure(f"Chernoff table rows {ks} outside the law's {self.wc.size} points")
        m, dm, d2m = (np.empty((ks.size, self.lams.size)) for _ in range(3))
        kc.chernoff_prefix(np.ascontiguousarray(self.wc, dtype=np.float64), float(self.H), self.lams, ks, m, dm, d2m)
        # (``chernoff_prefix``'s (k + 1 + 2 lam k H + 3 B + 2) u, and 2u for the additions of q_M
        # to M and of dm0 to M' in ``bounds``, each a non-negative term more; 4u spare as above)
        r = (ks[:, None] + 1.0 + 2.0 * self.lams[None, :] * (ks[:, None] * self.H) + 3.0 * kc.CHERNOFF_BLOCK + 8.0) * U
        for j, k in enumerate(ks.tolist()):
            self.rows[k] = (m[j], dm[j], d2m[j], r[j])
        return 1.5 * (int(ks[-1]) + 1) * self.lams.size  # (a table's is charged at each use: ``_table``)

    def bounds(self, k: int, q0: float, dm0: float, t: int, caps) -> tuple[np.ndarray, np.ndarray]:
        """(P-bounds, Q-bounds) at each cap of ``caps`` for the sum of t coordinates of the law
        wc[0 .. k] with q0 added at 0 (``_truncations``' q_M) and dm0 added to M' (its P-law
        share, ``_chernoff_over``), each the least over the table's lams (``kc.chernoff_least``)."""
        caps = np.ascontiguousarray(caps, dtype=np.float64)
        if k not in self.rows:  # (a truncation point of another E[W]: only where a caller passes its own)
            charge(self._add(np.array([k])))
        m, dm, d2m, r = self.rows[k]
        out_p, out_q = np.empty(caps.size), np.empty(caps.size)
        charge(4 * self.lams.size + 64 * caps.size)  # (the slopes, then a bisection and 12 exponents a cap)
        kc.chernoff_least(m, dm, d2m, float(q0), float(dm0), r, self.lams, caps, float(t), out_p, out_q)
        return out_p, out_q


#: The last few (wc, H, t, table) of ``_table``.
_TABLES: list = []


def _table(wc: np.ndarray, H: float, t: int, charged: bool = True) -> _Table:
    """The ``_Table`` of the majorant wc (spacing H) for sums of at most t coordinates, built once
    and kept for the next few calls, and its work charged at every call (``charged``) whether it
    was built or found: so the work a query counts does not depend on what an earlier one left
    (nor on which of two helper threads built it)."""
    for hit in list(_TABLES):
        if hit[0] is wc and hit[1] == H and hit[2] == t:
            out = hit[3]
            break
    else:
        out = _Table(wc, H, t)
        _TABLES[:] = _TABLES[-3:] + [(wc, H, t, out)]
    if charged:
        charge(out.cost)
    return out


def chernoff_above(wc: np.ndarray, H: float, t: int, caps):
    """(P-bounds, Q-bounds) at each cap for the sum of t coordinates of the law wc (spacing H):
    ``_Table.bounds`` on the whole law."""
    return _table(wc, H, t).bounds(wc.size - 1, 0.0, 0.0, t, caps)
