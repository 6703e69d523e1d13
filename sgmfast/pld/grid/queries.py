"""δ(eps) and eps(δ) read off composed grids (kernels: ``sgmfast._kernels.pld.query``).

δ(eps) = E[(1 - e^{eps - L})_+] + P(L = +inf) is a sum over the atoms above eps.  The bound of a
pessimistic grid adds its +inf mass, its charged errors and the rounding slack of the sum; that
of an optimistic grid subtracts them.  Below a grid's ``floor`` only the trivial bounds hold.
eps(δ) searches a grid's bound curve and checks every answer at the value returned, so it is
valid even where a curve is not monotone.
"""

from __future__ import annotations

import numpy as np

from ..._kernels.pld import query as kq
from ..._work import PER_TERM_DIRECT, charge
from ..common import Grid


def suffix_sums(g: Grid):
    """(t with a zero first, a, b): ``kq.suffix_sums`` of the grid, built once and kept on it
    (a[i]: the tilted mass above t[i]'s point, relative to it)."""
    if g.sums is None:
        # a zero at offset-1 makes eps below the grid a regular case
        t = g.padded if g.padded is not None else np.concatenate(([0.0], g.t))
        a = np.empty_like(t)
        b = np.empty_like(t)
        kq.suffix_sums(t, g.theta * g.step, g.step, a, b)
        g.sums = (t, a, b)
    return g.sums


def delta_bound(g: Grid, eps: np.ndarray) -> np.ndarray:
    """The grid's δ bound (upper if pessimistic, lower if optimistic) at each eps, from suffix
    sums: O(1) per eps, rounding slack ~n u of the mass above eps."""
    t, a, b = suffix_sums(g)
    out = np.empty(eps.size)
    kq.delta_curve(np.ascontiguousarray(eps, dtype=np.float64), g.offset - 1, g.step, g.theta, g.log_scale,
                   t, a, b, g.p_inf, g.inf_err, g.err, g.pess, g.floor, out)
    return out


def delta_precise(g: Grid, eps: np.ndarray) -> np.ndarray:
    """``delta_bound`` summed term by term (``kq.delta_direct``): O(n) per eps, but its error is
    relative to δ rather than to the mass above eps."""
    charge(PER_TERM_DIRECT * g.t.size * eps.size)
    out = np.empty(eps.size)
    kq.delta_direct(np.ascontiguousarray(eps, dtype=np.float64), g.offset, g.step, g.theta, g.log_scale, g.t,
                    g.p_inf, g.inf_err, g.err, g.pess, g.floor, out)
    return out


def eps_bound(g: Grid, target: float) -> float:
    """The grid's eps bound at δ = target: upper (pessimistic) -- some eps whose upper δ is <=
    target (+inf if none on the grid); lower (optimistic) -- some eps whose lower δ exceeds it,
    or 0."""
    t, a, b = suffix_sums(g)
    return kq.eps_search(target, g.offset - 1, g.step, g.theta, g.log_scale, t, a, b, g.p_inf, g.inf_err, g.err,
                         g.pess, g.floor)


def sum_delta(grids, rem, eps: np.ndarray, precise: bool = False) -> np.ndarray:
    """sum_k δ_{G_k}(eps) + rem, capped at 1 (the bound of a sum of sub-PLDs, stage 5);
    ``precise``: each term summed atom by atom (``delta_precise``)."""
    out = np.full(eps.size, float(rem))
    for g in grids:
        out += delta_precise(g, eps) if precise else delta_bound(g, eps)
    return np.minimum(out, 1.0)


def scan(pred, a, b, first):
    """The first (``first``) or last point of [a, b] where the vectorised ``pred`` holds, from
    six rounds of 17 points, each round inside the bracketing pair of the last (a resolution of
    16^-6 ~ 6e-8 of [a, b] for 102 evaluations: pred may cost O(grid) per point); None if none
    holds.  Only points where pred was evaluated are returned."""
    best = None
    for _ in range(6):
        e = np.linspace(a, b, 17)
        hit = pred(e)
        if not hit.any():
            break
        i = int(np.argmax(hit)) if first else len(e) - 1 - int(np.argmax(hit[::-1]))
        best = float(e[i])
        a, b = (e[max(i - 1, 0)], e[i]) if first else (e[i], e[min(i + 1, len(e) - 1)])
    return best
