"""δ(eps) bracketed by eps(δ) queries, so that the two entry points agree where the δ grids cannot
reach (δ far below the grids' truncated mass, ~1e-20 and under).

Why it is sound.  For noisy steps δ(eps) = E_P[(1 - e^(eps - L))_+] is non-increasing and
continuous in eps, and eps(δ) is the least eps with δ(eps) <= δ.  Let [a, b] be a certified
interval of eps(d) for some d:

* b <= eps: then eps(d) <= eps, so δ(eps) <= δ(eps(d)) <= d -- d is an upper bound on δ(eps);
* a >= eps and a > 0: then eps(d) > 0, so every eps' < eps(d) has δ(eps') > d; if eps < eps(d)
  that gives δ(eps) > d, and if eps = eps(d) > 0, δ(eps) >= d by continuity from the left -- either
  way d is a lower bound on δ(eps).  (a = eps = 0 says nothing: eps(d) = 0 for every d >= δ(0).)

The d asked for is the float kept, so no rounding enters.  Where to ask is a heuristic (``aim``: a
secant on the answers' midpoints (their logs) against sqrt(-log d), aiming just outside their own width on each
side of eps); it decides only how tight the bracket is and what it costs.  Tests:
tests/test_delta_inverse.py (a model profile with a known inverse; mpmath's two-step table).
"""

from __future__ import annotations

import math

import numpy as np

#: most eps(δ) queries one δ(eps) entry may take
MAX_QUERIES = 12
#: the first secant step in log δ, before a slope is known
FIRST_STEP = 2.0
#: most a secant step outside the probes may move y = sqrt(-log δ), relative to y (at least 2)
MAX_STEP = 0.5
#: each side aims this share of the eps answers' width beyond half that width from eps (the
#: answers' widths vary a little from one δ to the next)
MARGIN = 0.2
#: a bracket is settled where its two ends' answers span at most accuracy x eps (the grids' rule for
#: δ: an interval no wider than δ's change over a relative change ``accuracy`` of eps), or at most
#: this many times the two answers' widths (aimed just outside their width on either side of eps,
#: they span about 1.2 times their sum: answers as wide as the accuracy allow no better)
SETTLED_SPAN = 1.5
#: a secant between probes on both sides of its target stays this share of their span from either
#: end (it always shrinks the span)
BRACKET_KEEP = 0.02
#: the secant runs on log(eps + LOG_OFFSET x target), not on eps: where a few far-tail steps set a
#: small eps (small q), log eps grows about linearly in y (one step's loss ~ q e^(x / σ^2), x
#: Gaussian), and where eps is large the log costs little (on ``bench/delta_small.py``'s 86 tiny-δ
#: points, median width 0.050 -> 0.038; σ 1.9, q 3e-4, 454 steps at eps 0.2886 took 9 queries,
#: the first secant overshooting to δ 4e-55)
LOG_OFFSET = 1e-3
#: the least δ asked for
X_FLOOR = 1e-300


class _Bracket:
    """The certified bracket [lo, up] of δ(eps), narrowed by probes (d, a, b): certified eps(d)
    intervals (log d, eps midpoint and width kept for the secant)."""

    def __init__(self, eps: float, lo: float, up: float, probes):
        self.eps, self.lo, self.up = eps, lo, up
        self.probes: list = []
        for p in probes:
            self.add(*p)

    def add(self, d: float, a: float, b: float) -> None:
        if b <= self.eps:
            self.up = min(self.up, d)
        if a >= self.eps and a > 0.0:  # (a = 0: eps(d) may be 0 with δ(0) < d -- module notes)
            self.lo = max(self.lo, d)
        if math.isfinite(b) and b >= a:
            self.probes.append((math.log(d), 0.5 * (a + b), b - a))

    def aim(self, target: float, x_min: float, x_max: float) -> float | None:
        """log d where the midpoint would reach ``target``, inside [x_min, x_max], in y = sqrt(-log d)
        (eps, or log eps, grows about linearly in it where δ is small: a Gaussian tail; LOG_OFFSET).  With probes on both
        sides of ``target``: the secant between the nearest on either side, kept BRACKET_KEEP of
        their span from its ends, or the span's middle where the last two probes fell on one side
        (regula falsi stalls at a curved profile).  With probes on one side: the secant through
        the two nearest, a step of at most MAX_STEP x y (FIRST_STEP in log d with one probe).
        None without probes."""
        if not self.probes:
            return None
        c = LOG_OFFSET * abs(target) + 1e-300
        pts = [(math.sqrt(max(-x, 0.0)), math.log(max(m, 0.0) + c)) for x, m, _ in self.probes]
        target = math.log(max(target, 0.0) + c)
        below = [p for p in pts if p[1] < target]
        above = [p for p in pts if p[1] > target]
        if below and above:
            (y_b, m_b), (y_a, m_a) = max(below, key=lambda p: p[1]), min(above, key=lambda p: p[1])
            last = [p[1] < target for p in pts[-2:]]
            if len(last) == 2 and last[0] == last[1]:
                y = 0.5 * (y_a + y_b)
            else:
                t = min(max((target - m_b) / (m_a - m_b), BRACKET_KEEP), 1.0 - BRACKET_KEEP)
                y = y_b + t * (y_a - y_b)
        else:
            near = sorted(pts, key=lambda p: abs(p[1] - target))
            (y0, m0), y = near[0], None
            for y1, m1 in near[1:]:
                if y1 != y0 and (m1 - m0) / (y1 - y0) > 0.0:  # (eps falls as δ grows)
                    reach = MAX_STEP * max(y0, 2.0)
                    y = y0 + max(-reach, min(reach, (target - m0) * (y1 - y0) / (m1 - m0)))
                    break
            if y is None:
                return max(x_min, min(x_max, -y0 * y0 + (FIRST_STEP if m0 > target else -FIRST_STEP)))
        return max(x_min, min(x_max, -max(y, 0.0) ** 2))

    def probe_at(self, d: float):
        """The probe (log d, midpoint, width) at d, None if d was not asked."""
        if d > 0.0:
            x = math.log(d)
            for p in self.probes:
                if p[0] == x:
                    return p
        return None

    def settled(self, tol: float) -> bool:
        """Whether the answers at the bracket's ends span at most ``tol`` of eps, or SETTLED_SPAN
        times their two widths (from the upper end's answer's lower end to the lower end's upper)."""
        pu, pl = self.probe_at(self.up), self.probe_at(self.lo)
        if pu is None or pl is None:
            return False
        return (pl[1] + 0.5 * pl[2]) - (pu[1] - 0.5 * pu[2]) <= max(tol, SETTLED_SPAN * (pu[2] + pl[2]))

    def met(self, tol: float) -> bool:
        """Whether the answers at the bracket's ends span at most ``tol`` of eps: the ends' answers
        [a_u, b_u] <= eps <= [a_l, b_l] put the bracket inside [δ(b_l), δ(a_u)], δ over an eps window
        of width b_l - a_u around eps (module notes) -- the δ grids' own rule with h = ``tol``."""
        pu, pl = self.probe_at(self.up), self.probe_at(self.lo)
        return pu is not None and pl is not None and (pl[1] + 0.5 * pl[2]) - (pu[1] - 0.5 * pu[2]) <= tol

    def width_near(self, target: float) -> float:
        """The eps width of the probe whose midpoint is nearest ``target``."""
        return min(self.probes, key=lambda p: abs(p[1] - target))[2]


def bracket_delta(ask, eps: float, lo: float, up: float, accuracy: float, probes=()):
    """(lower, upper, settled) of δ(eps), narrowed from the certified [lo, up] by eps(δ) queries
    (module notes): ``ask(d)`` returns a certified (a, b) of eps(d), or None when no work is left;
    ``probes``: (d, a, b) asked before, for other eps (each bounds every eps' δ), to which the new
    ones are appended.  Stops when settled (``_Bracket.settled``, ``tol`` = ``accuracy`` x eps),
    after MAX_QUERIES, or when ``ask`` returns None."""
    br = _Bracket(eps, lo, up, probes)
    tol = accuracy * max(eps, 1e-2)
    if not br.lo < br.up:  # (nothing to narrow: δ is known)
        return br.lo, br.up, True
    for _ in range(MAX_QUERIES):
        if br.settled(tol):
            break
        x_lo, x_up = (math.log(v) if v > 0.0 else math.log(X_FLOOR) for v in (br.lo, br.up))
        if br.probes:  # (aim just outside the answers' width, on the side further from eps)
            w = br.width_near(eps)
            pu, pl = br.probe_at(br.up), br.probe_at(br.lo)
            side = -1.0 if _gap(pu, eps) >= _gap(pl, eps) else 1.0
            x = br.aim(eps + side * (0.5 + MARGIN) * w, x_lo, x_up)
        else:
            x = x_up
        if any(abs(x - p[0]) < 1e-12 for p in br.probes):
            break  # (no new point to ask: the bracket is as narrow as these answers allow)
        d = math.exp(x)  # (the float asked is the float kept)
        r = ask(d)
        if r is None:
            break
        br.add(d, *r)
        if isinstance(probes, list):
            probes.append((d, *r))
    return br.lo, br.up, br.settled(tol)


def bracket_deltas(ask, eps, lo, up, accuracy: float):
    """``bracket_delta`` at each eps (arrays), smallest eps first, every probe shared: (lower,
    upper, settled, met) -- met: ``_Bracket.met`` at accuracy x max(eps, 1e-2), with every probe."""
    lo, up = np.array(lo, dtype=np.float64), np.array(up, dtype=np.float64)
    ok = np.zeros(lo.size, dtype=bool)
    probes: list = []
    for i in np.argsort(eps, kind="stable"):
        lo[i], up[i], ok[i] = bracket_delta(ask, float(eps[i]), float(lo[i]), float(up[i]), accuracy, probes)
    met = np.array([lo[i] == up[i] or _Bracket(float(e), lo[i], up[i], probes).met(accuracy * max(float(e), 1e-2))
                    for i, e in enumerate(eps)], dtype=bool)
    return lo, up, ok, met


def _gap(probe, eps: float) -> float:
    """How far a bracket end's probe reads from eps (+inf without one)."""
    return math.inf if probe is None else abs(probe[1] - eps)
