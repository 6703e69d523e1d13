"""Certifier ``RDPBound``: the Rényi-DP bound of the same schedule, an upper bound only."""

from __future__ import annotations

import math

import numpy as np


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
        for sigma, q, count in schedule:
            self._acc.step(sigma, q, count)

    def epsilon(self, target: float) -> float:
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
