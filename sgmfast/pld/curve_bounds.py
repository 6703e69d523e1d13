"""The bounds a privacy curve (``curve``) falls back on at checkpoints its shared spectra leave
wide: the single steps' closed forms and RDP's caps (fixed orders for all, optimised where the
budget pays).  All certified; soundness: ``curve``'s notes."""

from __future__ import annotations

import math

import numpy as np

from .._kernels import rdp as _rdp_k
from .._kernels.rdp import orders as _orders
from .._kernels.rdp.log_a import QUAD_CHEAP
from .. import rdp as _rdp
from .._work import charge, metered
from .certifiers import RDPBound, exact
from .curve_grids import Run, _spread
from .schedules import cell_parts, merged_cells


RDP_PER_NODE = 1000.0
RDP_FIXED = 2e4


def _closed_forms(run: Run, relation, bounds):
    """(lower, upper) at each checkpoint from closed forms (``exact``): where its schedule has one
    (a single step), both; elsewhere the most revealing single step it has as a lower bound (a
    composition is at least as revealing as any one of its steps, a post-processing) and the
    trivial upper bound (+inf: the caller's own stands)."""
    per = np.array([bounds(exact.closed_form([(s, q, 1)], relation))[0] for s, q in run.parts])
    lo = np.where(run.counts > 0, per, 0.0).max(axis=1)
    up = np.full(lo.shape, math.inf)
    for k in np.flatnonzero(run.counts.sum(axis=1) == 1):
        form = exact.closed_form(run.schedule(int(k)), relation)
        if form is not None:
            lo[k], up[k] = bounds(form)
    return lo, up


def _rdp_units(schedule) -> float:
    """Work charged for one RDP optimisation of ``schedule`` (RDP_PER_NODE notes)."""
    units = RDP_FIXED
    for sigma, q, _ in schedule:
        if 0.0 < q < 1.0 and 0.0 < sigma < math.inf:
            nodes = int(_orders._node_cap(sigma, 3.0))
            if nodes <= QUAD_CHEAP:
                units += RDP_PER_NODE * nodes
    return units


#: of a curve's shared-spectra budget, the share kept for the RDP caps of the checkpoints the
#: grids leave wide (with what the grids did not use)
RDP_SHARE = 0.1


def _rdp_bounds(run: Run, targets, mode: int, budget, memo: dict) -> np.ndarray:
    """RDP's upper bounds at each checkpoint of ``run`` (rows) and target (columns; mode as
    ``_rdp_caps``): the caps at fixed orders for all, then the optimised order (``rdp``'s own
    search, ``_schedule_value``) at as many as what is left of ``budget`` pays for, in ``_spread``
    order (``memo`` keeps both for a second pass on another grid step).  Each is an upper bound:
    the smaller stands."""
    out = np.full((run.counts.shape[0], len(targets)), math.inf)
    qs = np.array([q for _, q in run.parts])
    ss = np.array([s for s, _ in run.parts])
    with metered(budget.meter):
        for j, x in enumerate(targets):
            out[:, j] = _rdp_caps(run, x, mode, memo)
        units = _rdp_units([(s, q, 1) for s, q in run.parts])
        for k in _spread(run.counts.shape[0]):
            c = run.counts[k]
            sel = c > 0
            for j, x in enumerate(targets):
                key = ("opt", x, mode, c.tobytes())
                if key not in memo:
                    if budget.left() < units:
                        continue  # (the ones a first pass paid for still count)
                    charge(units)
                    v = _rdp._schedule_value(qs[sel], ss[sel], c[sel].astype(np.float64), x, mode)
                    memo[key] = v if mode == 0 else _rdp._delta_of(v)
                out[k, j] = min(out[k, j], memo[key])
    return out


#: orders of the curves' RDP caps: 47 fractional ones in (1, 2) (where their quadrature is cheap,
#: ``orders._quad_cheap``) and the integer grid of the order search
RDP_FRACTIONAL = 1.0 + np.geomspace(1e-7, 1.0, 48)[:-1]


def _rdp_caps(run: Run, target: float, mode: int, memo: dict) -> np.ndarray:
    """RDP's eps (mode 0, at log δ = target) or δ (mode 1, at eps = target) at each checkpoint
    of ``run``: an upper bound, at the best of fixed orders (``RDP_FRACTIONAL`` and the integer
    grid).  Each mechanism's one-step RDP is computed once at those orders (kept in ``memo``) and
    scaled by its count -- RDP adds over the steps -- so the caps of all checkpoints cost about
    one optimisation, not one each (sigma ~ 0.015: 20 s for 300 checkpoints); any order gives a
    valid bound, if not the best one (the objective is sharp at its minimum: up to 20 % above the
    optimised order's, ``_rdp_bounds``).  The per-step values are already rounded up by
    ``rdp.REL_MARGIN``; the scaled sums are rounded up by 1e-12 more."""
    qs = np.array([q for _, q in run.parts])
    ss = np.array([s for s, _ in run.parts])
    ones = np.ones(len(run.parts))
    key = ("per-step", qs.tobytes(), ss.tobytes())
    if key not in memo:
        frac = _orders._quad_cheap(qs, ss, ones, 2.0)
        orders = np.concatenate((RDP_FRACTIONAL, _orders.DEFAULT_GRID)) if frac else _orders.DEFAULT_GRID.copy()
        nodes = sum(int(_orders._node_cap(s, 2.0)) for s in ss) if frac else 0
        charge(RDP_PER_NODE / 20.0 * nodes * RDP_FRACTIONAL.size + RDP_FIXED * len(run.parts))  # (one pass each)
        memo[key] = orders, np.stack([_rdp._rdp_curve(qs[i:i + 1], ss[i:i + 1], ones[i:i + 1], orders)
                                      for i in range(len(run.parts))])
    orders, per = memo[key]
    tot = (run.counts.astype(np.float64) @ per) * (1.0 + 1e-12)
    out = np.empty(run.counts.shape[0])
    for k in range(out.size):
        v = _rdp_k.best_of_orders(np.ascontiguousarray(tot[k]), orders, target, mode)[0]
        out[k] = v if mode == 0 else _rdp._delta_of(v)
    return out


def _cell_runs(run: Run, accuracy: float):
    """(upper run, lower run) where the run's parts merge into far fewer cells
    (``schedules.merged_cells``: each cell at its most and its least revealing corner), else None."""
    cell = merged_cells(run.parts, accuracy)
    if cell is None:
        return None
    up, lo = cell_parts(run.parts, cell)
    counts = np.zeros((run.counts.shape[0], len(up)), dtype=np.int64)
    np.add.at(counts, (slice(None), cell), run.counts)
    return Run(up, counts), Run(lo, counts)


def _below_floats(run: Run, eps: float, relation: str):
    """(0, RDP's bound) at every checkpoint where RDP's δ(eps) of the whole run is below 1e-300
    (resolved at once by the δ rule, ``common.resolved``; every prefix's δ is at most the run's),
    else None: the shared spectra would spend their budget on a δ no float can hold."""
    if not (math.isfinite(eps) and run.plain):
        return None
    cap = float(RDPBound(run.schedule(run.counts.shape[0] - 1), relation == "replace_one").delta(np.array([eps]))[0])
    if not cap <= 1e-300:
        return None
    live = run.counts.sum(axis=1) > 0
    return np.zeros(live.size), np.where(live, max(cap, exact.TINY), 0.0)


def _sandwiched(pair, curve):
    """A curve's (lower, upper) from its lower run's lower bounds and its upper run's upper ones."""
    up_run, lo_run = pair
    lo, up = curve(lo_run)[0], curve(up_run)[1]
    return np.minimum(lo, up), up
