"""The profile bound of a random search, from the certified privacy profile of one run (module
notes of :mod:`sgmfast.tuning`, with its proof)."""

from __future__ import annotations

import contextvars
import math

import numpy as np

from ._rounding import _F, _GAP, _REL, _TINY, _U
from .runs import RunCount


#: Cells of the Riemann sum for I (geometric in 1 - u near u = 1, where phi' is largest)
_CELLS = np.concatenate([[0.0], np.geomspace(1e-14, 1.0, 1500)])
#: The split search ranks splits by a sample of the Riemann sum: one cell in this many
#: (``_sampled_cells``); the splits near the best one are then summed on ``_CELLS``
_SAMPLE_EVERY = 20
#: Points of the run's privacy profile on [0, e_max] that the profile bound reads (the e1 of the
#: splits, and the coarse grid of e2)
_PROFILE_POINTS = 256
#: Points of the finer lookup of delta_Q and eps_Q on [0, e_max], where the profile is read off
#: kept grids (cheap reads: suffix sums or a narrow band)
_LOOKUP_POINTS = 4096
#: Largest e1, e2 and grid eps of the profile bound (e^600 is finite; a run whose eps is beyond
#: this gets the RDP bound or +inf)
_E_CAP = 600.0
#: Accuracy of the one PLD query that sharpens the best grid candidate (untilted profiles)
_REFINE = 1e-3
#: The kept tilted grids answer eps_Q(t) alone for t within this factor of the delta they are
#: tilted towards (further out, a PLD query of its own is asked too: the tilt's accuracy fades)
_TILT_REACH = 100.0
#: How far (relative) the add direction's coarse tilted grid may lie above the remove one before
#: its fine grid is built too
_ADD_SLACK = 1e-2


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


def _cells(runs: RunCount, s=_CELLS):
    """(hi, width, sum of hi width, sl): phi' at each cell's right end u_i = 1 - s_i, computed from
    s_i itself and rounded up, the cell widths (exact: s[i+1] <= 2 s[i] (Sterbenz), and s[1] - 0)
    and the cells' left ends 1 - sl (sl = s[1:]), for the cell edges s (1 - u at the edges,
    increasing from 0 to 1; cell i is [1 - s[i+1], 1 - s[i]] exactly).  They do not depend on
    (e1, e2): one evaluation serves every I(e1, e2) of a query."""
    hi = _exp_up(*runs._log_dpgf_gap(s[:-1]))
    width = np.diff(s)
    return hi, width, float(hi @ width), s[1:]


def _sampled_cells(runs: RunCount, every: int = _SAMPLE_EVERY):
    """:func:`_cells`' tuple for a sample of the Riemann sum on ``_CELLS``: each run of ``every``
    cells is represented by its middle cell (phi' at its right end, l at its left end, as the
    sum on ``_CELLS`` has them) over the run's whole width.  Its sums only approximate that one
    (they are no bound): the split search ranks splits with them, and the splits it keeps are
    summed on ``_cells``.  (The midpoint rule on coarse cells approximates I itself, but where
    e2 is near (eta + 1) e1 the sum on ``_CELLS`` lies far above I -- its cells shift l by their
    width -- and a split the midpoint rule ranks first can be one that sum cannot certify.)"""
    s = _CELLS
    n = s.size - 1
    starts = np.arange(0, n, every)
    rep = np.minimum(starts + every // 2, n - 1)
    big, _ = runs._log_dpgf_gap(s[rep])
    with np.errstate(over="ignore"):
        hi = np.exp(big)
    width = s[np.minimum(starts + every, n)] - s[starts]
    return hi, width, float(hi @ width), s[rep + 1]


def _gap_params(runs: RunCount):
    """(kind, constants) of ``runs._log_dpgf_gap`` for the kernels (``_kernels.tuning.dpgf_gap``):
    each constant by the expression that method evaluates, so that the kernels round as it does."""
    from .._kernels import tuning as kt

    u, f = _U, _F
    if runs.kind == "poisson":
        a = math.log(runs.mu)
        return kt.KIND_POISSON, np.array([a, runs.mu, f * abs(a)])
    if runs.kind == "binomial":
        a = math.log(runs.n * runs.p)
        if runs.n == 1:
            return kt.KIND_ONE, np.array([a, 2.0 * (1.01 * u + f * abs(a))])
        return kt.KIND_BINOMIAL, np.array([a, runs.p, float(runs.n - 1), 1.01 * u + f * abs(a), 1.01 * u, f + 2.0 * u,
                                           1.0 + 4.0 * u])
    const, e_const = runs._tnb_const
    return kt.KIND_TNB, np.array([runs.gamma, 1.0 - runs.gamma, const, e_const, runs.shape + 1.0, 3.1 * u,
                                  1.02 * f + 2.1 * u, 2.0 ** -1074])


def _phi_low(runs: RunCount, cells, e1s, d1s) -> np.ndarray:
    """phi'(l) at each cell's left end of :func:`_excess_rows`, rounded down: row r for
    (e1s[r], d1s[r]).  They do not depend on e2: the split search reuses a row's across its e2."""
    from .._kernels.tuning import phi_low

    sl = np.ascontiguousarray(cells[3], dtype=np.float64)
    e1 = np.ascontiguousarray(e1s, dtype=np.float64).reshape(-1)
    d1 = np.ascontiguousarray(d1s, dtype=np.float64).reshape(-1)
    kind, par = _gap_params(runs)
    lo = np.empty((e1.size, sl.size))
    phi_low(kind, par, _U, np.array([4.0 * _U, 4.0 * _F]), _TINY, 1.0 + _GAP, sl, e1, d1, lo)
    return lo


def _excess_rows(runs: RunCount, cells, e1s, d1s, e2: np.ndarray, lo=None) -> np.ndarray:
    """Upper bounds on I(e1, e2) = int_0^1 (phi'(u) - e^e2 phi'(l(u)))_+ du: row r for
    (e1s[r], d1s[r]), column k for e2[k] (module notes: (c) the Riemann sum, (d) its rounding).
    ``cells`` is :func:`_cells` of ``runs`` (or :func:`_sampled_cells`, to rank splits only);
    ``lo``, if given, is :func:`_phi_low` of the same rows.

    In kernels (``_kernels.tuning``), these steps, each as numpy would round it: 1 - l(u) at each
    cell's left end, as sums of non-negative terms (no cancellation, each form within _F + 3u),
    rounded up -- min(-expm1(-e1) + e^-e1 (sl + d1), e^e1 sl + d1) (1 + _GAP), at most 1 -- so
    that the l used is at most the true l, and phi'(l) too: phi'(l) rounded down
    (``runs._log_dpgf_gap``, then :func:`_exp_down`).  (e1 <= _E_CAP, so e^e1 is finite; s >=
    1e-14 here, so e^-e1 (s + d1) >= 2.6e-275 and e^e1 s are normal numbers, where the relative
    error bounds hold.)  e^e2 is rounded down (exp within _F; the product's rounding is covered by
    2 _F - _F).  The Riemann sum's arithmetic (``excess_rows``): each cell's exact (hi - scale
    lo)_+ is at most its computed value over 1 - u plus u hi; the products and the 1501-term sum
    err by at most (n + 2) u = 1.7e-13 relative (n <= 1500 cells): the relative 1e-9 covers the
    first part, 1e-15 of the sum of hi (dot product within 1.7e-13) the u hi part, and both leave
    >= 2u of slack for the caller's last addition."""
    from .._kernels.tuning import excess_scaled

    hi, width, hw, _ = cells
    lo = _phi_low(runs, cells, e1s, d1s) if lo is None else lo
    scale = np.exp(np.ascontiguousarray(e2, dtype=np.float64).reshape(-1)) * (1.0 - 2.0 * _F)
    out = np.empty((lo.shape[0], scale.size))
    excess_scaled(hi, lo, width, scale, 1.0 + 1e-9, 1e-15 * hw, out)
    return out


def _excess(runs: RunCount, e1: float, d1: float, e2: np.ndarray) -> np.ndarray:
    """Upper bounds on I(e1, e2) for each e2 (one row of :func:`_excess_rows`)."""
    return _excess_rows(runs, _cells(runs), [e1], [d1], e2)[0]


def _step_at(e, d, x):
    """d at the point of e at or below each x (1 below e[0]): the step function of a profile."""
    j = np.searchsorted(e, x, side="right") - 1
    return np.where(j >= 0, d[np.maximum(j, 0)], 1.0)


class _Profile:
    """The run's certified privacy profile on a grid: ``d[j]`` >= delta_Q(e[j]) (either direction),
    made non-increasing (the true profile is), so that delta_Q(x) <= d[j] for every x >= e[j].

    With ``tilt_at`` (a delta), the profile is read off the pessimistic composed grids of the PLD
    accountant tilted towards eps_Q(tilt_at), valid for every eps >= 0, which are kept
    (``grids``): :meth:`epsilon_sharp` and :meth:`delta_sharp` answer from them at any point, with
    no further composition (eps_Q at a delta far from ``tilt_at``: a PLD query as well).  Without
    it (or for runs the grids do not cover: noiseless steps, a closed form), one untilted
    composition per direction, and the sharp answers are PLD queries."""

    def __init__(self, sigma, q, steps, e_max, goal, accuracy, relation, tilt_at=None):
        self.relation = relation
        self.run = (sigma, q, steps)
        self.tilt_at = tilt_at
        self.e = np.linspace(0.0, min(e_max, _E_CAP), _PROFILE_POINTS)
        self.grids = None if tilt_at is None else _tilted_grids(sigma, q, steps, relation, accuracy, tilt_at, self.e)
        # the lookup's points read off the grids on a helper thread while this one reads the
        # profile's own (they do not depend on each other)
        ef = np.linspace(0.0, self.e[-1], _LOOKUP_POINTS)
        lookup = None if self.grids is None else _beside("lookup", self.delta_sharp, ef)
        d = None if self.grids is None else lookup.alongside(lambda: self.delta_sharp(self.e))
        if d is None or _weak_below(sigma, q, steps, self.e, d, tilt_at):
            from ..pld.tradeoff import _profile_upper

            # (both are upper bounds: the smaller is one)
            up = _profile_upper(sigma, q, int(steps), self.e, relation, accuracy, goal)
            d = up if d is None else np.minimum(d, up)
        self.d = np.minimum(np.minimum.accumulate(d), 1.0)
        # the lookup of delta_at / epsilon_at: (e, d) and, with the grids, _LOOKUP_POINTS points
        # read off them, merged (at each point the smaller of the two step functions: each bound
        # holds)
        self.ef, self.df = self.e, self.d
        if self.grids is not None:
            df = np.minimum.accumulate(lookup.result())
            both = np.union1d(ef, self.e)
            self.ef = both
            self.df = np.minimum(np.minimum(_step_at(ef, df, both), _step_at(self.e, self.d, both)), 1.0)
        self._neg_df = -self.df

    def delta_at(self, x):
        """Upper bounds on delta_Q(x) (array x >= 0): the lookup's value at its point at or below x
        (delta_Q does not increase)."""
        return _step_at(self.ef, self.df, np.asarray(x, dtype=np.float64))

    def epsilon_at(self, t):
        """Upper bounds on eps_Q(t) (array t): the lookup's first point whose delta is <= t, else
        inf."""
        t = np.asarray(t, dtype=np.float64)
        j = np.searchsorted(self._neg_df, -t, side="left")  # first j with df[j] <= t (df non-increasing)
        return np.where(j < self.ef.size, self.ef[np.minimum(j, self.ef.size - 1)], math.inf)

    def delta_sharp(self, x) -> np.ndarray:
        """Upper bounds on delta_Q at each x >= 0 (array), not rounded to the grid of ``e``."""
        from ..pld.grid.spectral import read_delta

        x = np.ascontiguousarray(x, dtype=np.float64)
        if self.grids is None:
            from .. import pld

            return np.asarray(pld.delta(*self.run, x, accuracy=_REFINE, relation=self.relation).upper)
        # the larger over the directions of the smallest of each one's certified upper bounds (each
        # holds at every eps >= 0)
        return np.minimum(np.max([np.min([read_delta(g, x) for g in gs], axis=0) for gs in self.grids], axis=0), 1.0)

    def epsilon_sharp(self, t: float) -> float:
        """An upper bound on eps_Q(t), not rounded to the grid of ``e``: with the grids, the
        largest of the directions' eps whose certified delta is <= t (delta_Q does not increase,
        so every direction's delta is <= t there)."""
        from ..pld.grid.spectral import read_eps

        out = math.inf
        if self.grids is not None:
            guess = float(self.epsilon_at(t)) if hasattr(self, "ef") else 1.0  # (where a band's search starts)
            guess = guess if math.isfinite(guess) else float(self.e[-1])
            out = max(min(float(read_eps(g, t, guess)) for g in gs) for gs in self.grids)
            if self.tilt_at / _TILT_REACH <= t <= self.tilt_at * _TILT_REACH:
                return out
        # (no grids, or t far from the delta they are tilted towards: a PLD query of its own)
        from .. import pld

        return min(out, float(pld.epsilon(*self.run, t, accuracy=_REFINE, relation=self.relation).upper))


def _beside(pool: str, fn, *args):
    """``pld.common.Beside``: fn(*args) on the helper thread ``pool`` meanwhile where there are two
    cores, its work charged where its result is taken (imported here: ``import sgmfast.tuning``
    does not load the PLD package)."""
    from ..pld.common import Beside

    return Beside(pool, fn, *args)


def _weak_below(sigma, q, steps, e, d, t0) -> bool:
    """Whether the tilted profile ``d`` is looser than RDP's conversion at some of 8 points where
    it is above t0: a strong tilt leaves the small eps (large delta) to the edge of its window,
    which the untilted profile then covers (a choice of work only: every profile is a bound)."""
    from .. import rdp

    js = np.flatnonzero(d > t0)
    if js.size == 0:
        return False
    js = js[np.linspace(0, js.size - 1, min(js.size, 8)).astype(np.int64)]
    return bool(np.any(d[js] > np.asarray(rdp.delta(sigma, q, steps, e[js]))))


def _tilted_grids(sigma, q, steps, relation, accuracy, t0, e):
    """Pessimistic composed grids of each direction of the run (a list per direction), tilted
    towards the eps of the delta ``t0`` and valid for every eps >= 0 (the grid, step and tail cut
    of a PLD query at t0); None where the PLD accountant answers without grids (noiseless steps, a
    closed form).  The add direction usually lies below the remove one, as in the accountant's
    own queries: its grid 4x coarser, and the fine one too only where the coarse one is more than
    ``_ADD_SLACK`` above the remove one at some point of ``e`` (a choice of tightness only)."""
    from ..pld.common import ADD, FIRST_BINS, REMOVE, REPLACE, add_pool, bins_limit, two_cores
    from ..pld.grid.spectral import read_delta
    from ..pld.engine import TILT, Engine

    if relation != "add_remove":
        return None  # (``_weak_below`` compares with RDP, which is of add/remove)
    engine = Engine([(sigma, q, int(steps))], accuracy, None, relation)
    if not engine.schedule or engine.p_hi > 0.0 or engine.form is not None:
        return None
    job = engine.job(t0)
    est, _, first, _ = engine._start(t0)  # (the Gaussian estimate and the first grid step of a query at t0)
    step = engine.grid_step or first
    with bins_limit(FIRST_BINS):
        if engine.replace:
            return [[TILT.grid(job, REPLACE, True, step, est, 0.0)]]
        # the coarse add grid on a helper thread while this one builds the remove grid (the
        # kernels and transforms release the GIL), as the accountant's own queries do
        coarse = (add_pool().submit(contextvars.copy_context().run, TILT.grid, job, ADD, True, 4 * step, est, 0.0)
                  if two_cores() else None)
        try:
            remove = TILT.grid(job, REMOVE, True, step, est, 0.0, True)  # (possibly a band: ``grid.banded``)
        finally:
            add = [coarse.result() if coarse is not None else TILT.grid(job, ADD, True, 4 * step, est, 0.0)]
        if np.any(read_delta(add[0], e) > read_delta(remove, e) * (1.0 + _ADD_SLACK)):
            add.append(TILT.grid(job, ADD, True, step, est, 0.0))
    return [[remove], add]


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


def _coarse_fine_rows(rows, n: int, every: int = 8):
    """:func:`_coarse_fine` with the j of each pass evaluated together: ``rows(js)`` gives the
    values and infos of all js (the same answer: the first j of least value)."""
    js = np.arange(0, n, every)
    vals, infos = rows(js)
    k = int(np.argmin(vals))
    best, info, jb = float(vals[k]), infos[k], int(js[k])
    if not best < math.inf:
        best, info, jb = math.inf, None, 0
    near = np.array([j for j in range(max(jb - every + 1, 0), min(jb + every, n)) if j % every], dtype=np.int64)
    if near.size:
        vals, infos = rows(near)
        k = int(np.argmin(vals))
        if vals[k] < best:
            best, info = float(vals[k]), infos[k]
    return best, info


def _split_totals(runs, cells, prof, e1s, d1s, e2, dlt, log_m, lo=None):
    """(tot, t, e2*): tot[r, k] an upper bound on the search's eps at ``dlt`` from the split e2[k]
    with e1 = e1s[r] (d1s[r] >= delta_Q(e1s[r])), t[r, k] the delta at which delta_Q is read, and
    e2* = fl(e2 (1 + _REL)) the split charged; ``cells``: :func:`_cells` (or, to rank splits only, :func:`_sampled_cells`: then tot is no bound).  The split is e2*: I is read at fl(e2 (1 - _REL)) <= e2*, and t <=
    (delta - I) / (E[K] e^e2*) -- the 1e-12 covers exp's _F, three roundings and the exponent's
    (u |e2* + log E[K]| <= 2e-13 while E[K] < e^1000); eps = e2* + eps_Q(t), the sum rounded up:
    delta_Q is read at or below eps - e2*."""
    from .._kernels.tuning import split_totals

    e2 = np.ascontiguousarray(e2, dtype=np.float64)
    e2_up = e2 * (1.0 + _REL)
    share = np.exp(-e2_up - log_m) * (1.0 - 1e-12)
    excess = _excess_rows(runs, cells, e1s, d1s, e2 * (1.0 - _REL), lo)
    # t = (dlt - I) share; tot = _sum_up(e2*, eps_Q(t) by ``prof.epsilon_at``, 0 at t >= 1), inf where
    # dlt - I <= 0: in one kernel, as numpy rounds them
    tot, t = np.empty(excess.shape), np.empty(excess.shape)
    split_totals(excess, e2_up, share, dlt, prof.ef, prof._neg_df, tot, t)
    return tot, t, e2_up


#: The fine stage of the split search (``_profile_epsilon``): e1 at the profile's points within
#: this many grid steps of the coarse stage's best, e2 on a grid this many steps either side
_NEAR_E1, _NEAR_E2 = 2, 2
#: ... e2 in steps of a grid step over this
_E2_SUBSTEPS = 8
#: Rows (e1) of the first stage evaluated together, the e2 above the least total so far dropped
#: between them
_ROW_CHUNK = 16
#: Candidate splits sharpened by one read of the kept grids each (or a PLD query): the fine
#: stage's best, and the zoom's (ranked by the lookup, whose rounding can reorder them); both
#: searches (``_profile_epsilon``, ``_profile_delta``)
_SHARPEN_EPS, _SHARPEN_ZOOM = 4, 2
#: Positions of the fine stage's e2 grid at most
_MOVES = 4
#: The zoom after the fine stage (``_zoom``): rounds, and e2 points per round between the best
#: split's two neighbours.  I(e1, e2) falls off a cliff as e2 grows (from ~delta to ~0 within a
#: few 1e-3 nats) and the best split sits at its foot, so the fine grid's spacing alone costs up to
#: a few % of delta; each round narrows the bracket 8x (two rounds: within h / 512 of the foot)
_ZOOM_ROUNDS, _ZOOM_POINTS = 2, 17


def _zoom(totals, e2f, k):
    """The least of ``totals(e2)`` (an array of upper bounds, one per e2 of an array) on finer and
    finer grids between the neighbours of ``e2f[k]``, the best of the grid ``e2f``; returns
    (values, e2) of the last grid and the ones before, concatenated (every value is a bound: the
    zoom only decides tightness)."""
    vals, grids = [], []
    lo, hi = e2f[max(k - 1, 0)], e2f[min(k + 1, e2f.size - 1)]
    for _ in range(_ZOOM_ROUNDS):
        grid = np.linspace(lo, hi, _ZOOM_POINTS)
        v = totals(grid)
        vals.append(v)
        grids.append(grid)
        b = int(np.argmin(v))
        lo, hi = grid[max(b - 1, 0)], grid[min(b + 1, grid.size - 1)]
    return np.concatenate(vals), np.concatenate(grids)


def _profile_epsilon(sigma, q, steps, dlt, runs, accuracy, relation, prof, cap=math.inf) -> float:
    """The profile bound's eps at ``dlt``; ``cap`` (a bound already known, e.g. the RDP one) only
    saves work: splits e2 with e2* >= cap give a total >= cap and are not evaluated.

    Every split (e1, e2) gives an upper bound (module notes, (c)), so the search only decides
    tightness: first over the profile's grid with a sample of the Riemann sums (one cell in
    ``_SAMPLE_EVERY``: :func:`_sampled_cells`, no bound), then, with those on ``_CELLS``, over the
    e1 near the best and a finer e2 grid around it; the best few splits are read off the kept
    grids (not rounded to the profile's points)."""
    prof = prof()
    e2 = prof.e[prof.e * (1.0 + _REL) < cap]
    if e2.size == 0:
        return math.inf
    big, err = runs._log_dpgf_gap(np.zeros(1))
    log_m = float(big[0] + err[0])  # >= log E[K] (its rounding: within the 1e-12 of the share)
    coarse = _sampled_cells(runs)

    seen = [math.inf]  # the least total so far: a split e2 above it has a larger total (>= e2)

    def rows(js):
        vals, infos = np.full(len(js), math.inf), [None] * len(js)
        for a in range(0, len(js), _ROW_CHUNK):
            cols = e2[e2 < seen[0]]
            if cols.size == 0:
                break
            part = js[a:a + _ROW_CHUNK]
            tot, _, _ = _split_totals(runs, coarse, prof, prof.e[part], prof.d[part], cols, dlt, log_m)
            ks = np.argmin(tot, axis=1)
            for r, (j, k) in enumerate(zip(part, ks)):
                if tot[r, k] < math.inf:
                    vals[a + r], infos[a + r] = tot[r, k], (int(j), float(cols[k]))
            seen[0] = min(seen[0], float(vals[a:a + len(part)].min()))
        return vals, infos

    best, info = _coarse_fine_rows(rows, prof.e.size)
    best = math.inf  # (the sampled sums are no bounds: only the fine stage's totals are)
    if info is None:
        return best
    # the fine stage: e1 near the best, e2 on a grid _E2_SUBSTEPS times finer around the best,
    # moved while its best lies at its edge (or it has none: the sums on _CELLS may exceed the sampled
    # ones, and a split the sample found barely feasible may need a larger e2)
    j0, e2_0 = info
    h = prof.e[1] - prof.e[0]
    js = np.arange(max(j0 - _NEAR_E1, 0), min(j0 + _NEAR_E1 + 1, prof.e.size))
    fine = _cells(runs)
    lo = _phi_low(runs, fine, prof.e[js], prof.d[js])  # (the rows' phi'(l): the same at every e2)
    offsets = h * np.arange(-_NEAR_E2 * _E2_SUBSTEPS, _NEAR_E2 * _E2_SUBSTEPS + 1) / _E2_SUBSTEPS
    for _ in range(_MOVES):
        e2f = e2_0 + offsets
        e2f = e2f[(e2f >= 0.0) & (e2f * (1.0 + _REL) < cap)]
        if e2f.size == 0:
            return best
        tot, t, e2_up = _split_totals(runs, fine, prof, prof.e[js], prof.d[js], e2f, dlt, log_m, lo)
        k = int(np.argmin(tot)) % e2f.size
        if not tot.min() < math.inf:
            e2_0 += 2.0 * _NEAR_E2 * h
        elif 0 < k < e2f.size - 1 or e2f[k] == 0.0:
            break
        else:
            e2_0 = float(e2f[k])
    best = min(best, float(tot.min()))
    # the best row's e2 zoomed in on (``_zoom``), then eps_Q at the best few targets of both,
    # sharpened: off the kept grids (or a PLD query)
    r0, k0 = divmod(int(np.argmin(tot)), e2f.size)
    cands = [(float(tot[r, k]), float(t[r, k]), float(e2_up[k]))
             for r, k in (divmod(int(f), e2f.size) for f in np.argsort(tot, axis=None)[:_SHARPEN_EPS])]
    if tot[r0, k0] < math.inf:
        def row(e2z):
            tz, _, _ = _split_totals(runs, fine, prof, prof.e[js[[r0]]], prof.d[js[[r0]]], e2z, dlt, log_m, lo[[r0]])
            return tz[0]

        vz, e2z = _zoom(row, e2f, k0)
        top = np.argsort(vz)[:_SHARPEN_ZOOM]
        tz, t_z, e2_z = _split_totals(runs, fine, prof, prof.e[js[[r0]]], prof.d[js[[r0]]], e2z[top], dlt, log_m, lo[[r0]])
        cands += [(float(tz[0, i]), float(t_z[0, i]), float(e2_z[i])) for i in range(top.size)]
    for total, tk, e2k in cands:
        best = min(best, total)
        if total < math.inf and tk < 1.0:
            best = min(best, float(_sum_up(e2k, prof.epsilon_sharp(tk))))
    return best


def _delta_splits(runs, cells, prof, e1s, d1s, eps, e2_grid, m, lo=None):
    """(tot, x, e2*, I): tot[r, k] an upper bound on the search's delta at ``eps`` from the split
    e2_grid[k] with e1 = e1s[r] (d1s[r] >= delta_Q(e1s[r])), delta_Q read at x[k] = fl(eps -
    e2_grid[k]) and the split charged e2*[k] = eps - x[k] exactly (an exact two-sum gives its float
    neighbours), rounded up in e^e2 ... and down in I, which falls as e2 grows; ``cells``:
    :func:`_cells` or, to rank splits only, :func:`_sampled_cells`.  ``m`` is
    E[K] rounded up times 1 + _REL, which covers exp's _F and the products (and the final sum,
    with the slack ``_excess_rows`` leaves)."""
    x = eps - e2_grid
    r, err = _two_diff(eps, x)
    e2 = np.maximum(np.maximum(e2_grid * (1.0 + _REL), np.where(err > 0.0, np.nextafter(r, np.inf), r)), 0.0)
    e2_in = np.minimum(e2_grid * (1.0 - _REL), np.where(err < 0.0, np.nextafter(r, -np.inf), r))
    excess = _excess_rows(runs, cells, e1s, d1s, e2_in, lo)
    return m * np.exp(e2) * prof.delta_at(x) + excess, x, e2, excess


def _profile_delta(sigma, q, steps, eps, runs, prof) -> float:
    """The profile bound's delta at ``eps``: the split search of :func:`_profile_epsilon` (sampled
    sums over the profile's grid, then the sums on ``_CELLS`` near the best, e2 on a finer grid,
    then zoomed in on),
    with e2 such that eps - e2 is a grid point, and the grid points themselves."""
    prof = prof()
    e2_grid = np.unique(np.concatenate([eps - prof.e[(prof.e <= eps) & (prof.e >= eps - _E_CAP)],
                                        prof.e[prof.e <= eps]]))
    if e2_grid.size == 0:
        return 1.0
    m = _mean_up(runs) * (1.0 + _REL)
    coarse = _sampled_cells(runs)

    def rows(js):
        tot = _delta_splits(runs, coarse, prof, prof.e[js], prof.d[js], eps, e2_grid, m)[0]
        ks = np.argmin(tot, axis=1)
        vals = tot[np.arange(len(js)), ks]
        return vals, [(int(j), float(e2_grid[k])) for j, k in zip(js, ks)]

    _, info = _coarse_fine_rows(rows, prof.e.size)  # (sampled sums: not bounds)
    if info is None:
        return 1.0
    j0, e2_0 = info
    h = prof.e[1] - prof.e[0]
    js = np.arange(max(j0 - _NEAR_E1, 0), min(j0 + _NEAR_E1 + 1, prof.e.size))
    fine = _cells(runs)
    lo = _phi_low(runs, fine, prof.e[js], prof.d[js])  # (the rows' phi'(l): the same at every e2)
    e2f = e2_0 + h * np.arange(-_NEAR_E2 * _E2_SUBSTEPS, _NEAR_E2 * _E2_SUBSTEPS + 1) / _E2_SUBSTEPS
    e2f = np.unique(np.concatenate([e2f[(e2f >= 0.0) & (e2f <= eps)], e2_grid[np.abs(e2_grid - e2_0) <= _NEAR_E2 * h]]))
    tot, x, e2, excess = _delta_splits(runs, fine, prof, prof.e[js], prof.d[js], eps, e2f, m, lo)
    best = min(float(tot.min()), 1.0)
    # the best row's e2 zoomed in on, as in ``_profile_epsilon`` (``_zoom``, on the lookup's
    # totals), then delta_Q read sharper than the lookup (off the kept grids, or one PLD query) at
    # the fine stage's best few splits and the zoom's last round, in one read: the round trip
    # delta(epsilon(d)) <= d holds to the query's accuracy
    r0, k0 = divmod(int(np.argmin(tot)), e2f.size)
    fine_picks = [divmod(int(f), e2f.size) for f in np.argsort(tot, axis=None)[:_SHARPEN_EPS]]
    xs, e2s, exs = ([x[k] for _, k in fine_picks], [e2[k] for _, k in fine_picks],
                    [excess[r, k] for r, k in fine_picks])

    def row(e2z):
        return _delta_splits(runs, fine, prof, prof.e[js[[r0]]], prof.d[js[[r0]]], eps, e2z, m, lo[[r0]])[0][0]

    vz, e2z = _zoom(row, e2f, k0)
    best = min(best, float(vz.min()))
    top = e2z[-_ZOOM_POINTS:]  # (the last round whole: the lookup's steps reorder its points)
    _, xz, e2c, exc = _delta_splits(runs, fine, prof, prof.e[js[[r0]]], prof.d[js[[r0]]], eps, top, m, lo[[r0]])
    xs, e2s, exs = np.array(xs + list(xz)), np.array(e2s + list(e2c)), np.array(exs + list(exc[0]))
    d_q = np.asarray(prof.delta_sharp(np.maximum(xs, 0.0)), dtype=np.float64)
    return min(best, float(np.min(m * np.exp(e2s) * d_q + exs)))
