"""Certifier ``RDPBound``: the Rényi-DP bound of the same schedule, an upper bound only."""

from __future__ import annotations

import math

import numpy as np

from ..._work import charge


#: Relative grid a long schedule's noise levels are rounded down to (and rates up) for the cap.
CAP_GRID = 1e-3
#: Distinct (sigma, q) beyond which a schedule is coarsened (``_coarsened``).
CAP_DISTINCT = 16
#: Work units of one RDP optimisation per mechanism of the schedule (measured: 0.2 s for 200
#: mechanisms here, ~1 ms each at the reference rate ``_work.UNITS_PER_SECOND``).
UNITS_PER_MECHANISM = 2.5e5


def _coarsened(schedule):
    """The schedule, or for more than CAP_DISTINCT distinct (sigma, q): each sigma rounded down and
    each q rounded up to a geometric grid of ratio 1 + CAP_GRID, equal steps merged.  RDP falls
    with sigma and grows with q at every order, so every step's RDP only grows: the cap stays an
    upper bound, ~0.1 % looser, at a handful of mechanisms' cost (200 noise levels within 1e-4
    of each other took 0.2 s an optimisation, 13 s for a replace-one delta curve)."""
    steps = [(float(s), float(q), int(c)) for s, q, c in schedule]
    if len({(s, q) for s, q, _ in steps}) <= CAP_DISTINCT:
        return steps
    r = math.log1p(CAP_GRID)
    merged: dict = {}
    for s, q, c in steps:
        if 0.0 < s < math.inf:
            s = math.exp(math.floor(math.log(s) / r) * r) * (1.0 - 1e-15)
        if 0.0 < q < 1.0:
            q = min(1.0, math.exp(math.ceil(math.log(q) / r) * r) * (1.0 + 1e-15))
        merged[(s, q)] = merged.get((s, q), 0) + c
    return [(s, q, c) for (s, q), c in merged.items()]


class RDPBound:
    """Certifier: the Rényi-DP bound of the same schedule (``sgmfast.rdp``), an upper bound on the
    add/remove pair's eps (δ) -- never looser than RDP.

    Replace-one through group privacy: replacing x by x' is removing x, then adding x', two
    add/remove neighbours, so an (e, d) add/remove guarantee of the whole run gives
    (2 e, (1 + e^e) d) for replace-one; the replace-one pair is realised by the mechanism (one
    record's gradient -1, the other's +1, the rest 0), so this bounds the pair too.  Loose, but
    finite wherever the grids cannot go (eps in the hundreds)."""

    def __init__(self, schedule, replace: bool):
        from ... import rdp

        self.replace = replace
        self._acc = rdp.RDPAccountant()
        steps = _coarsened(schedule)
        for sigma, q, count in steps:
            self._acc.step(sigma, q, count)
        self._units = UNITS_PER_MECHANISM * len(steps)  # (an optimisation's work, on the one meter)

    def epsilon(self, target: float) -> float:
        charge(self._units * (1 if not self.replace else 3))
        if not self.replace:
            return self._acc.epsilon(target)
        # find e with eps_ar(target / (1 + e^e)) <= e: then (1 + e^{e'}) target / (1 + e^e) <= target
        # (the map e -> eps_ar(target / (1 + e^e)) increases: a guess 2 % above its last value
        # usually lands above the fixed point at once)
        e = self._acc.epsilon(0.5 * target)
        for _ in range(8):
            guess = 1.02 * e + 1e-6
            if not guess < 700.0:
                return math.inf
            e_new = self._acc.epsilon(target / (1.0 + math.exp(guess)))
            if e_new <= guess:
                return 2.0 * e_new
            e = e_new
        return math.inf

    def delta(self, eps: np.ndarray) -> np.ndarray:
        charge(self._units * eps.size)
        if not self.replace:
            return np.array([self._acc.delta(float(x)) for x in eps])
        out = np.empty(eps.size)
        for i, x in enumerate(eps):
            half = 0.5 * float(x)
            d = self._acc.delta(half)
            # (1 + e^{eps/2}) d, in logs (d ~ 1e-300 at eps ~ 500); rounding padded by 1e-12
            log_v = math.log(d) + float(np.logaddexp(0.0, half)) if d > 0.0 else -math.inf
            out[i] = min(1.0, math.exp(min(log_v, 0.0)) * (1 + 1e-12))
        return out
