"""Optimistic one-step masses on a shifted lattice, where one bin holds the bulk of a step.

Where q is below the grid step, a step's loss is almost surely within one bin of 0 (not sampled:
loss in (log(1 - q), q-ish)), and the optimistic discretisation (``onestep``, module notes there)
cannot put that bulk atom on a grid point by a contraction: no contraction of an atom strictly
between two knots lies on them.  The kernel then rounds what it cannot merge *down* in loss, a
bias of ~q / 5 per step (σ 0.6, q 1e-5: -1.9e-6 of mean loss per step on a 3.2e-5 grid, where
the exact mean is +1e-9).  Composed over T steps it is T times that: at 2,000 steps 3.9e-3 of
loss, and the lower δ 2.3 % below the upper where both should meet (bench/README, stop 65);
finer grids do not help until the step is below q.

Here the whole step is shifted up by d in [0, step) -- L + d, its bulk atom exactly on a knot --
before the optimistic masses are made (``shifted_opt``); the other atoms move up by d too,
rounded down (optimistic), and atoms meeting in one bin are merged at their u-mean (a
contraction).  A composition of steps shifted by d_i represents sum (L_i + d_i) = L + S,
S = sum count_i d_i; ``moved_down`` moves the composed optimistic grid down by K steps,
K step >= S (K = ceil(S / step)): every atom lands at or below its true loss, and δ(eps) can only
shrink.  The composed bias is then below one grid step instead of T times the per-step one.

Soundness: moving atoms down in loss lowers every δ(eps) ((1 - e^{eps - ell})_+ grows with
ell), and so does merging atoms at their u-mean (convex order, ``onestep``); the bulk atom is put
on the knot only where its rounded-down offset plus d reaches it in exact arithmetic.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..._kernels.pld import discretise as kd
from ..._work import PER_BIN_DISCRETISE
from ..common import U, Grid

#: the bin must hold at least this share of the step's optimistic mass to be shifted onto a knot
BULK_SHARE = 0.5
#: work units per bin of one set of shifted masses (the atoms moved, the minorant kernel: about half
#: a discretisation's per bin, measured at 166,193 bins: 0.016 s a kernel pass, 0.04 s three sets)
PER_BIN = 0.5 * PER_BIN_DISCRETISE
#: its neighbours join the bulk atom where they hold at least this share of its mass
NEIGHBOUR_SHARE = 1e-3


def bulk_shift(frac, amass, step: float, reach: int = 1):
    """(d, bins, knot): the atoms of ``bins`` (the heaviest bin and its heavy neighbours, at most
    ``reach`` on either side) merged at their u-mean (a contraction, its loss rounded down) land on
    grid point ``knot`` when shifted up by d in [0, step) -- in exact arithmetic the merged loss
    plus d reaches the knot; or (0, (), -1) where no bin holds BULK_SHARE of the mass."""
    none = 0.0, (), -1
    if amass is None or amass.size < 3:
        return none
    b = int(np.argmax(amass[:-1]))
    if not amass[b] >= BULK_SHARE * float(amass.sum()):
        return none
    heavy = NEIGHBOUR_SHARE * amass[b]
    lo_i, hi_i = b, b
    while lo_i > 0 and b - lo_i < reach and amass[lo_i - 1] >= heavy:
        lo_i -= 1
    while hi_i < amass.size - 2 and hi_i - b < reach and amass[hi_i + 1] >= heavy:
        hi_i += 1
    bins = tuple(range(lo_i, hi_i + 1))
    ms = np.array([amass[i] for i in bins])
    pos = np.array([(i - bins[0]) * step + max(float(frac[i]), 0.0) for i in bins])  # (from point bins[0])
    p = _merged(ms, pos)
    # d with p + d >= k step in exact arithmetic, k the first knot at or above p
    fp, fs = Fraction(p), Fraction(step)
    k = math.ceil(fp / fs)
    d = float(k * fs - fp)
    while Fraction(d) + fp < k * fs:
        d = math.nextafter(d, math.inf)
    if not 0.0 < d < step:
        return none
    return d, bins, bins[0] + k


def _merged(ms, pos) -> float:
    """The loss of the u-mean of atoms of masses ``ms`` at losses ``pos`` (>= 0), rounded down past
    the rounding of pos, of the sums, the exponentials and the logarithm (a few u of each
    magnitude, and of the count), and at least 0 (every atom's true loss is >= 0)."""
    lo = float(pos.min())
    u = float(np.sum(ms * np.exp(lo - pos)) / ms.sum())  # u-mean over e^{-lo}, in (0, 1]
    lu = math.log(u)
    margin = 8.0 * U * (ms.size + 6 + float(pos.max()) + abs(lo) + abs(lu))
    return min(max(lo - lu - margin, 0.0), float(pos.max()))


def shifted_opt(frac, amass, top, step: float, d: float, bins=(), knot: int = -1) -> np.ndarray:
    """Optimistic masses of the step shifted up by d (the atoms of ``bins`` merged onto grid
    point ``knot``; none: every atom moved): the atoms moved up by d, rounded down, merged where
    two meet in one bin, through the kernel's minorant; the merged bulk added on its knot."""
    n = frac.size
    occ = amass > 0.0
    for i in bins:
        occ[i] = False
    occ[n - 1] = False  # (no bin above the top point)
    pos = np.nextafter(frac + d, -np.inf)  # (<= the exact frac + d)
    up = occ & (pos >= step)
    stay = occ & ~up
    nf = np.full(n, -1.0)
    nm = np.zeros(n)
    nf[stay], nm[stay] = np.maximum(pos[stay], 0.0), amass[stay]
    src = np.flatnonzero(up)
    moved_top = src + 1 >= n - 1  # (past the top point: onto it, down)
    top2 = top + float(amass[src[moved_top]].sum()) * (1 - 1e-12)
    src = src[~moved_top]
    dst = src + 1
    f_in = np.maximum(pos[src] - step, 0.0)  # (exact: step <= pos < 2 step)
    both = nm[dst] > 0.0
    nf[dst[~both]], nm[dst[~both]] = f_in[~both], amass[src[~both]]
    if both.any():  # two atoms in one bin: merged at their u-mean (a contraction), rounded down
        j = dst[both]
        m1, f1, m2, f2 = nm[j], nf[j], amass[src[both]], f_in[both]
        lo = np.minimum(f1, f2)
        u = (m1 * np.exp(lo - f1) + m2 * np.exp(lo - f2)) / (m1 + m2)  # u-mean over e^{-lo}, <= 1
        lu = np.log(u)
        f = lo - lu - 8.0 * U * (8.0 + np.maximum(f1, f2) + lo + np.abs(lu))  # (rounded down, as ``_merged``)
        nf[j] = np.maximum(np.minimum(f, np.maximum(f1, f2)), lo)  # (the true merge lies above lo)
        nm[j] = (m1 + m2) * (1 - 1e-12)
    opt = np.empty(n)
    kd.optimistic_step(step, nf, nm, top2, opt)
    if bins:
        opt[knot] += float(sum(amass[i] for i in bins)) * (1 - 1e-12)
    if not np.isfinite(opt).all():
        raise FloatingPointError("non-finite shifted optimistic one-step masses")
    return opt


def shifts(ones, counts, step: float, pess: bool) -> list:
    """Each step's shift d (``onestep.OneStep.bulk_d``; ``ones``: the steps, composed ``counts``
    times each) where the mean loss they keep over the plain masses, in all, exceeds ``step`` --
    the most that moving the composition back down costs; else none (and never pessimistic: the
    connect-the-dots masses keep the mean).  A run of 20 steps at q 1.2e-5 kept 4e-5 of loss and
    lost up to a step of 1e-4 moving down: its lower δ went from 1.6e-3 to 3.2e-3 below the
    reference (tests/test_pld_rare.py)."""
    if pess:
        return [0.0] * len(ones)
    ds = [one.bulk_d() for one in ones]
    gain = math.fsum(c * one.shift_gain() for one, c in zip(ones, counts))
    return ds if gain > step else [0.0] * len(ones)


def moved_down(g: Grid, total: float) -> Grid:
    """An optimistic grid of L + total moved down by K steps, K step >= total: a grid below L.
    The untilted masses are kept (offset - K, log_scale - theta K step); the tilted excess ``err``
    bounds the same untilted excess (its effect e^{log_scale - theta eps} err at eps below every
    atom it sits on)."""
    if total <= 0.0:
        return g
    k = math.ceil(total / g.step * (1 + 1e-12))
    if k * g.step < total:
        k += 1
    return Grid(g.step, g.theta, g.pess, g.offset - k, g.t, g.log_scale - g.theta * k * g.step, g.err, g.p_inf,
                g.inf_err, g.eta, g.floor)
