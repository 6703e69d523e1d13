"""Stage 2: the exponential tilt e^{theta * loss} towards the eps of interest (saddle point).

Tilting commutes with convolution (Esscher transform, as in the saddle-point accountant of
Alghamdi et al., 2023), so the whole composition runs on tilted arrays and FFT round-off
becomes relative to the mass near eps instead of to the peak: δ is certified down to 1e-15
and below.  The saddle point theta solves E_theta[L_T] = eps (the tilted mean; its derivative
in theta is the tilted variance).

Any theta >= 0 gives valid bounds: this module only decides tightness.  The search is held
back where heavy one-step tails would make the tilted variance -- the FFT window -- grow more
than a factor ``growth``, and never goes far past the saddle point.
"""

from __future__ import annotations

import math

import numpy as np

from ..common import dot
from .estimates import tilted_moments, tilted_stats
from .onestep import hybrid_step, one_step
from .two_stage import CORE_TAIL, plan

THETA_MAX = 1e5
THETA_FLOOR = 64.0  # the cap 300 / eps never goes below this (large eps: theta ~ 1e-3 is typical)
VAR_GROWTH = 4.0  # the tilted variance may grow this much (FFT window length) ...
VAR_GROWTH_SMALL = 1000.0  # ... or this much in a last try when delta is small


def theta_cap(eps_target: float) -> float:
    """e^{theta * loss} must stay far inside the float range; tiny eps needs theta ~ eps / var,
    far beyond the unit scale (16 doublings reach 6.5e4)."""
    return min(THETA_MAX, max(THETA_FLOOR, 300.0 / max(eps_target, 1e-12)))


def _schedule_moments(schedule, add, step, tau, coarse=False, multi=False):
    """moments(theta) -> (mean, variance) of the tilted composed loss, from the same one-step
    pieces the composition will use (one grid -- its far tail coarser where ``coarse`` --, or
    the two-stage core and tails; ``multi``: as ``two_stage.plan``'s)."""
    parts = []
    stages = plan(schedule, step, add, tau, multi)
    for i, (sigma, q, count) in enumerate(schedule):
        if stages is not None:
            t1, m = stages[0][i], stages[1]
            hyb = hybrid_step(sigma, q, add, step, m, tau, CORE_TAIL / t1)
            pieces = [(hyb.core.j_lo, hyb.core.pess, step)]
            pieces += [(x.j_lo, x.pess, m * step) for x in (hyb.low, hyb.high) if x is not None]
        else:
            one = one_step(sigma, q, add, step, tau, coarse)
            pieces = [(one.j_lo, one.pess, step)]
        parts.append((count, pieces))

    def moments(theta):
        m = v = 0.0
        for count, pieces in parts:
            if len(pieces) == 1:
                j_lo, p, st = pieces[0]
                mu, var = tilted_moments(p, j_lo, st, theta)
            else:  # a mixture of pieces
                st = np.array([tilted_stats(p, j_lo, st, theta) for j_lo, p, st in pieces])
                w = np.exp(st[:, 0] - np.max(st[:, 0]))
                w /= w.sum()
                mu = dot(w, st[:, 1])
                var = dot(w, st[:, 2] + st[:, 1] ** 2) - mu * mu
            m += count * mu
            v += count * var
        return m, v

    return moments


def saddle_theta(schedule, add, step: float, eps_target: float, tau: float, growth: float = VAR_GROWTH,
                 bracket: bool = False, coarse: bool = False, multi: bool = False) -> float:
    """theta >= 0 with E_theta[L_T] ~ eps_target for the tilted composed PLD.

    Newton on the tilted mean, at most doubling each time; a theta whose tilted variance exceeds
    growth * v0 (heavy one-step tails: a long FFT window) is halved back towards the last one
    taken, and the search stops there.  ``bracket``: the slower bracket search instead;
    ``coarse``: the one-step grids the composition takes (``onestep.one_step``); ``multi``: a
    schedule of several entries in two stages (``two_stage.plan``)."""
    return saddle_search(_schedule_moments(schedule, add, step, tau, coarse, multi), eps_target, growth, bracket)


def saddle_search(moments, eps_target: float, growth: float = VAR_GROWTH, bracket: bool = False) -> float:
    """theta >= 0 with the tilted mean ``moments(theta)[0]`` near ``eps_target``, the tilted
    variance grown at most ``growth``-fold (as :func:`saddle_theta`; any ``moments`` of a
    composition, heuristic only: any tilt is sound)."""
    m, v = moments(0.0)
    if m >= eps_target or not v > 0:
        return 0.0
    cap = theta_cap(eps_target)
    if bracket:
        return saddle_bracket(moments, m, v, eps_target, cap, growth * v)
    v_max = growth * v
    theta = 0.0
    for _ in range(16):
        if not v > 0:  # all tilted mass on one point: no Newton step (any theta is sound)
            break
        new = min(max(theta + (eps_target - m) / v, 0.5 * theta), 2 * theta + 1.0, cap)
        if abs(new - theta) < 1e-3 * max(1.0, theta):
            break
        m_new, v_new = moments(new)
        halvings = 0
        while not (math.isfinite(m_new) and v_new <= v_max) and halvings < 8:
            new = 0.5 * (theta + new)
            m_new, v_new = moments(new)
            halvings += 1
        if not (math.isfinite(m_new) and v_new <= v_max):
            break
        if m_new > eps_target + 3.0 * math.sqrt(v_new):
            # far past the saddle point (all tilted mass in the far tail): back towards it
            new = 0.5 * (theta + new)
            m_new, v_new = moments(new)
            if not (math.isfinite(m_new) and v_new <= v_max) or m_new > eps_target + 3.0 * math.sqrt(v_new):
                break
        theta, m, v = new, m_new, v_new
        if halvings or abs(m - eps_target) < 0.05 * math.sqrt(v):
            break
    return max(theta, 0.0)


def saddle_bracket(moments, m, v, eps_target, cap, v_max):
    """The saddle point by a bracket search: safeguarded Newton in a bracket [lo, hi] with
    m(lo) < eps_target <= m(hi); a theta whose tilted variance exceeds v_max bounds the bracket
    instead.  Slower than the doubling search, but it gets close to the window limit, which
    some small-delta heavy-tail points need (bench/README)."""
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


def saddle_of(moments, eps_target, v_max):
    """The bracket saddle point of a term with its own ``moments`` (stage 5), its tilted
    variance at most ``v_max``."""
    m, v = moments(0.0)
    if m >= eps_target or v <= 0:
        return 0.0
    return saddle_bracket(moments, m, v, eps_target, theta_cap(eps_target), v_max)
