"""The FFT window of a composition and the Chernoff bounds on the mass outside it.

A circular convolution of length n folds every loss modulo the window: mass outside it wraps
around.  Wrap-around is not avoided by padding but bounded, by Chernoff bounds on the exactly
known (tilted) one-step moment generating functions:

* pessimistic: the mass above the window goes to +inf (charged); mass that wraps around only
  adds non-negative mass, which is sound as it is;
* optimistic: the wrapped mass is subtracted at its largest possible effect on δ(eps).

With tilt theta > 0, mass that wraps up from below lands a window length W higher, where its
untilted weight is at most e^{-theta W} times its own; mass that wraps down from above weighs
e^{theta W} times more where it lands, so its tilted mass is kept small by a Chernoff edge.
Window lengths are chosen so that both effects stay below ~tau * T (~1e-4 * accuracy * δ, the
scale of the one-step tail cut): the pessimistic effects then cost at most that much tightness,
and the optimistic ones are subtracted exactly as bounded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

import numpy as np

from ..._kernels.pld import windows as kw
from ..common import bins_cap, fast_len, too_many_bins

#: Chernoff parameters: lambda = +-2^(k/2) / sd for k in this range (sd of the composed tilted
#: loss); small lambda for heavy one-step tails, large for light ones. Any lambda gives a valid
#: bound, so the grid only decides how tight it is.
CHERNOFF_K = np.arange(-24, 17, 2)
_CHERNOFF_SCALES = 2.0 ** (CHERNOFF_K / 2.0)
WINDOW_SDS = 9.0  # initial half-width of the FFT window in tilted standard deviations
#: an optimistic composition whose whole support is at most this many times its first window is
#: composed on all of it: nothing wraps, and no Chernoff bound of what could is subtracted (the
#: tail-event sum's term without tail steps, one block of 48,053 steps: its optimistic window charged
#: 5.3e-6 of tilted mass -- the round-off of its far cells -- which, untilted, exceeded δ 3e-15).
#: Not the pessimistic side, whose mass past a window is charged, not wrapped, and where a longer
#: transform's larger round-off bound can cost more (σ 1e6, q 3.6e-6, 65 steps, replace-one, δ
#: 3e-19: upper end 1.14e-9 -> 1.43e-9 with it)
WHOLE_SUPPORT = 4
TAIL_GOAL = 1e-15  # tilted mass allowed outside the window (Chernoff bound)


def abs_goal(tau: float, n_steps: int) -> float:
    """Untilted mass a window may leave to +inf (upper) or let wrap (both): on the scale of the
    one-step tail cut, tau * T ~ 1e-4 * accuracy * delta, within [TAIL_GOAL, 1e-6] -- below
    TAIL_GOAL only where 1e3 tau T ~ 0.1 * accuracy * delta is (so that delta ~ 1e-30 stays
    resolvable).  (The floor used to hold down to tau T = 1e-22: at δ ~ 2e-15 the windows could
    leave 1e-15 to +inf, 40 % of δ -- σ 1.03, q 1.9e-4, 10^5 steps were [0.5710, 0.5856].)"""
    t = max(tau * n_steps, 5e-324)  # (a tail cut that underflowed -- δ at the end of the floats -- leaves the least)
    return min(1e-6, max(t, min(TAIL_GOAL, 1e3 * t)))
PESS_UP_SDS = 3.0  # pessimistic windows: sds above max(mean, eps_lo) before the Chernoff edge


def log_mgf_table(parts, step, sd, lower=True):
    """(lambdas, log E e^{lambda L}) of the composed tilted loss L, each log-MGF rounded up
    (lambda < 0, for lower tails, only when ``lower``).  The lambdas scale as 1 / sd, or 1 / step
    where sd is 0 (a point-like composed loss); a log-MGF that overflows is
    +inf, a valid (trivial) bound.  (A NaN entry -- inf - inf in a block's MGF -- carries no
    information: ``chernoff_edge`` then keeps the heuristic edge and ``chernoff`` charges 1.)"""
    base = _CHERNOFF_SCALES / (sd if sd > 0.0 else step)
    lams = np.concatenate((base, -base)) if lower else base
    total = np.zeros(lams.size)
    with np.errstate(over="ignore", invalid="ignore"):
        for part in parts:
            total += part.count * part.log_mgf(step, lams)
    return lams, total


def chernoff_edge(mgf, goal, upper, shift=0.0, offset=0.0):
    """The edge beyond which the Chernoff bounds of the table leave at most ``goal``:
    upper: the smallest b with min over lambda > 0 of e^{offset + Lambda(lambda) - (lambda + shift) b}
    <= goal; lower: the largest a with min over lambda < 0 of e^{Lambda(lambda) - lambda a} <= goal.
    NaN where the table gives no finite edge (every log-MGF overflowed): the callers take it as
    the second argument of max/min, which then keep their first -- the heuristic edge -- and the
    Chernoff charges of that window are then the trivial 1."""
    lams, total = mgf
    return kw.edge(lams, total, math.log(goal), upper, shift, offset)


def chernoff(mgf, b, mean, upper):
    """Chernoff bound on the tilted composed mass at or above b (upper) or at or below b (lower):
    min over the tabulated lambda of the same sign of exp(log E e^{lambda L} - lambda b)."""
    if (b - mean if upper else mean - b) <= 0:
        return 1.0
    lams, total = mgf
    return kw.tail(lams, total, 1.0, b, upper)


def chernoff_n(mgf, n, b, upper):
    """Chernoff bound on the tilted mass of the n-fold composition at or above (below) b, from
    a one-step table."""
    lams, total = mgf
    return kw.tail(lams, total, float(n), b, upper)


@dataclass
class Window:
    """The FFT window [j0, j0 + n) of grid indices and the Chernoff bounds charged for it:
    ``tail_up`` (tilted mass above, pessimistic: to +inf), ``tail_alias`` (tilted mass that may
    wrap in, optimistic), ``wrap_up`` (optimistic: the e^{-theta W} bound of what wraps up)."""

    j0: int
    n: int
    tail_up: float = 0.0
    tail_alias: float = 0.0
    wrap_up: float = 0.0


def widen(win: Window, n: int) -> Window:
    """The same window with length n >= win.n, its charges kept: each is a bound for the shorter
    window that holds for the longer one too (the mass above j0 + n, and what wraps in from above
    -- it lands n lower -- only shrink as n grows; what wraps up travels n and weighs at most
    e^{-theta n step}; the mass below j0 and the floor do not depend on n)."""
    return Window(win.j0, n, win.tail_up, win.tail_alias, win.wrap_up)


def choose_window(c, theta, pess, eps_lo, tau, n_min: int = 16) -> Window:
    """The window for composing ``c`` (a ``composition.Composite``) tilted by theta.

    It starts at mean +- WINDOW_SDS sd (and room below eps_lo) and is widened to where Chernoff
    bounds on the tilted composed MGF leave less than TAIL_GOAL outside it -- far beyond the sd
    scale when one-step tails are heavy (small q and sigma, few steps).  If the whole support
    fits, nothing wraps at all.  The length is at least ``n_min`` (a longer window is as sound:
    its charges are computed for the length it has)."""
    step, sd = c.step, math.sqrt(c.var)
    lo_l = min(c.mean - WINDOW_SDS * sd, eps_lo - 2 * sd - 2 * step)
    hi_l = max(c.mean, eps_lo) + (PESS_UP_SDS if pess else WINDOW_SDS) * sd
    j0 = max(c.sup_lo, math.floor(lo_l / step))
    j1 = min(c.sup_hi, math.ceil(hi_l / step))
    if j1 - j0 + 1 > bins_cap():
        raise too_many_bins(j1 - j0 + 1, "composed loss grid")
    n = fast_len(max(j1 - j0 + 1, n_min))
    support = c.sup_hi - c.sup_lo + 1
    if support <= n or (not pess and support <= min(WHOLE_SUPPORT * n, bins_cap())):
        return Window(c.sup_lo, fast_len(support))  # the whole support fits: no wrap-around at all
    return _chernoff_window(c, theta, pess, eps_lo, tau, lo_l, hi_l, j0, n_min)


def _chernoff_window(c, theta, pess, eps_lo, tau, lo_l, hi_l, j0, n_min) -> Window:
    step = c.step
    # lower-tail bounds: optimistic windows charge what wraps; untilted pessimistic ones reach
    # past the lower tail (below)
    mgf = (c.mgf or partial(log_mgf_table, c.parts, step))(math.sqrt(c.var), lower=not pess or theta <= 0)
    a_max = eps_lo - 2 * math.sqrt(c.var) - 2 * step  # the window must reach below every eps queried
    goal = abs_goal(tau, c.n_steps)
    # What wraps down from above lands W lower, where it weighs e^{theta W} times more: its
    # effect on delta(eps >= eps_lo) is at most e^{S - theta eps_lo} times its tilted mass.
    # Keep that below abs_goal: the tilted mass that can land on [eps_lo, ...), i.e. that
    # above eps_lo + W, below abs_goal e^{theta eps_lo - S} (never asking for less than
    # TAIL_GOAL: a wider window costs more FFT round-off than it saves).
    lg_down = min(max(math.log(goal) + theta * eps_lo - c.log_scale, math.log(TAIL_GOAL)), 0.0)
    w_down = chernoff_edge(mgf, math.exp(lg_down), upper=True, shift=0.0) - eps_lo
    # What wraps up from below lands >= W higher, where its untilted weight is at most
    # e^{-theta W} times its own (<= e^{-theta W} in all): for theta > 0 a window of
    # -log(abs_goal) / theta suffices; otherwise the lower tail is cut by Chernoff.
    w_min = -math.log(goal) / theta if theta > 0 else math.inf
    wrap_by_theta = False
    if pess:
        # Mass above the window goes to +inf, untilted at most e^{S - theta b} times its
        # tilted mass; mass that wraps around only adds non-negative mass (sound).
        hi_l = max(hi_l, chernoff_edge(mgf, goal, upper=True, shift=theta, offset=c.log_scale))
        if theta > 0:
            lo_l = max(lo_l, hi_l - max(w_min, w_down))
            if lo_l < c.sup_lo * step:
                # the support starts first: reach further up instead, so that what wraps down
                # still lands w_down lower (cut at the support's bottom, the window was shorter
                # than w_down, and what wrapped down from above it weighed e^{theta W} more where
                # it landed: sigma 0.696, t 1345, 2 epochs, δ 1.6e-5 read [0.5390, 0.5492] for
                # [0.5390, 0.5392] -- sound, but 1.9 % wide)
                hi_l = max(hi_l, c.sup_lo * step + w_down)
        else:
            # untilted, what wraps up from below lands near the top with its full weight: sound,
            # but loose where the sd understates the lower flank (a PLD whose atom holds most of
            # the mass: fixed-size batches).  Reach down to where the lower tail leaves < goal.
            lo_l = min(lo_l, chernoff_edge(mgf, goal, upper=False, shift=0.0) + step)
        lo_l = min(a_max, lo_l)
    else:
        # wrapped mass is subtracted at its worst effect; the lower edge either by the
        # e^{-theta W} rule or where Chernoff leaves < TAIL_GOAL below: the shorter window
        lo_c = min(lo_l, chernoff_edge(mgf, TAIL_GOAL, upper=False, shift=0.0) + step)
        hi_c = max(hi_l, w_down + eps_lo - max(eps_lo - lo_c, 0.0))
        if theta <= 0:
            # untilted, the mass above the window wraps down below eps_lo and is lost to the
            # bound (sound, but loose where the sd understates the upper flank): reach past it
            hi_c = max(hi_c, chernoff_edge(mgf, goal, upper=True, shift=0.0))
        w = max(hi_l - a_max, w_min, w_down)
        wrap_by_theta = w < hi_c - lo_c
        lo_l, hi_l = (a_max, a_max + w) if wrap_by_theta else (lo_c, hi_c)
        if wrap_by_theta and hi_l > c.sup_hi * step:
            # the support ends first: reach further down instead, so that what wraps up still
            # travels the whole window length w
            lo_l, hi_l = min(a_max, c.sup_hi * step - w), c.sup_hi * step
        elif not wrap_by_theta and lo_l < c.sup_lo * step:
            # the support starts first: reach further up instead, so that what wraps down
            # still lands w_down lower (its bound is taken there)
            hi_l = max(hi_l, c.sup_lo * step + w_down)
    cap = bins_cap()
    j0 = max(c.sup_lo, math.floor(lo_l / step), j0 - cap // 4)
    j1 = min(c.sup_hi, math.ceil(hi_l / step), j0 + cap - 1)  # past the cap: charged, not avoided
    n = fast_len(max(j1 - j0 + 1, n_min))
    if c.sup_hi - c.sup_lo + 1 <= n:
        return Window(c.sup_lo, n)
    win = Window(j0, n)
    b = (j0 + n) * step
    if pess:
        win.tail_up = chernoff(mgf, b, c.mean, upper=True)
        return win
    a = j0 * step
    win.tail_alias = chernoff(mgf, b + max(eps_lo - a, 0.0), c.mean, upper=True)
    if j0 > c.sup_lo:
        if wrap_by_theta:
            win.wrap_up = math.exp(-theta * n * step) * (1 + 1e-9)
        else:
            win.tail_alias += chernoff(mgf, a - step, c.mean, upper=False)
    return win
