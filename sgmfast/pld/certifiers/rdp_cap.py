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
        self._steps = steps
        self._units_of_one = None
        self._table_curve = None  # (``_log_delta_table``)

    @property
    def _units(self) -> float:
        """The work units of one order search (``_optimisation_units``), counted on first use (it
        calls two kernels: loading them costs a cold query that never takes the cap ~0.1 s)."""
        if self._units_of_one is None:
            self._units_of_one = _optimisation_units(self._steps)
        return self._units_of_one

    def epsilon(self, target: float) -> float:
        charge(self._units * (1 if not self.replace else 3))
        if not self.replace:
            return self._acc.epsilon(target)
        # find e with eps_ar(target / (1 + e^e)) <= e: then (1 + e^{e'}) target / (1 + e^e) <= target
        # (the map e -> eps_ar(target / (1 + e^e)) increases: a guess 2 % above its last value
        # usually lands above the fixed point at once)
        if not 0.5 * target > 0.0:  # (δ at the end of the subnormals: no bound from here)
            return math.inf
        e = self._acc.epsilon(0.5 * target)
        for _ in range(8):
            guess = 1.02 * e + 1e-6
            if not guess < 700.0:
                return math.inf
            t = target / (1.0 + math.exp(guess))
            if not t > 0.0:  # (underflow at δ ~ 1e-300: no bound from here, the sound +inf)
                return math.inf
            e_new = self._acc.epsilon(t)
            if e_new <= guess:
                return 2.0 * e_new
            e = e_new
        return math.inf

    def delta(self, eps: np.ndarray) -> np.ndarray:
        from ... import rdp

        if not self.replace:
            return self._add_remove_delta(eps)
        out = np.empty(eps.size)
        for i, d in enumerate(self._add_remove_delta(0.5 * eps)):
            half = 0.5 * float(eps[i])
            # (1 + e^{eps/2}) d, in logs (d ~ 1e-300 at eps ~ 500); rounding padded by 1e-12
            log_d = math.log(d) if d > 0.0 else -math.inf
            if d < 1e-290:  # (d near or past the float range: its log from the orders' table)
                log_d = min(log_d, self._log_delta_table(half))
            if log_d == -math.inf:  # (eps = +inf: δ = 0)
                out[i] = 0.0
                continue
            log_v = log_d + float(np.logaddexp(0.0, half))
            out[i] = rdp._delta_of(log_v + 1e-12 * abs(log_v))  # (an underflow stays positive)
        return out

    def _log_delta_table(self, eps: float) -> float:
        """log of RDP's add/remove δ bound at eps from the curve at ``TABLE_ORDERS`` (the
        conversions ``rdp`` uses at fixed orders, ``best_of_orders``), in logs: no underflow at
        eps ~ 1e4.  The curve is computed once (charged as the anchors' integer sums)."""
        from ..._kernels.rdp import best_of_orders

        if self._table_curve is None:
            charge(UNITS_PER_MECHANISM * len(self._steps))
            self._table_curve = np.asarray(self._acc.rdp(TABLE_ORDERS), dtype=np.float64)
        return min(float(best_of_orders(self._table_curve, TABLE_ORDERS, eps, 1)[0]), 0.0)

    def _add_remove_delta(self, eps: np.ndarray) -> np.ndarray:
        """RDP's δ at each eps: an order search at each distinct eps where searches are cheap
        (CHEAP_SEARCH) or there are at most ``OWN_SEARCHES`` of them; else at anchors
        (``_anchors``), the other eps taking the best of the anchors' orders and the integer grid
        ``TABLE_ORDERS`` -- every order gives a valid bound, and an order searched for an eps
        within a relative ``ANCHOR_SPREAD`` is within a second-order term of the best.  (A search costs ~0.1-0.2 s at sigma ~ 0.01, where the fractional orders below
        2 are quadratures of ~4e4 nodes; a tuning profile asks for δ at ~40 nearby eps.)"""
        from ... import rdp

        eps = np.asarray(eps, dtype=np.float64)
        uniq = np.unique(eps)
        if uniq.size <= OWN_SEARCHES or self._units <= CHEAP_SEARCH or rdp._split(self._acc.history)[1] > 0.0:
            charge(self._units * uniq.size)
            found = {float(x): self._acc.delta(float(x)) for x in uniq}
            return np.array([found[float(x)] for x in eps])
        anchors = _anchors(uniq)
        # (and the curve: integer sums, about a mechanism's search unit each, and one quadrature
        # for each anchor's fractional order, a search's node work over QUADRATURES_PER_SEARCH)
        base = UNITS_PER_MECHANISM * len(self._steps)
        charge(self._units * anchors.size + base + (self._units - base) * anchors.size / QUADRATURES_PER_SEARCH)
        searched = [self._acc.delta(float(x), return_order=True) for x in anchors]
        orders = np.unique(np.array([a for _, a in searched if a > 1.0] + list(TABLE_ORDERS)))
        curve = self._acc.rdp(orders)
        out = np.array([_table_delta(curve, orders, float(x)) for x in eps])
        for x, (d, _) in zip(anchors, searched):
            out[eps == x] = np.minimum(out[eps == x], d)
        return out


#: Distinct eps up to which each gets its own order search (a single query asks for two).
OWN_SEARCHES = 4
#: Work units of a search up to which every eps gets its own (~10 ms: sigma >~ 0.1).
CHEAP_SEARCH = 2.5e6
#: Most order searches of one δ request beyond OWN_SEARCHES eps.
MAX_ANCHORS = 4
#: Relative spread of eps that share one anchor's order search.
ANCHOR_SPREAD = 2e-3
#: The integer orders every eps is also tried at, beside the anchors' (exact binomial sums).
TABLE_ORDERS = np.array([2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0, 48.0, 64.0, 96.0, 128.0, 192.0, 256.0,
                         384.0, 512.0, 768.0, 1024.0, 2048.0, 4096.0])
#: Quadratures a search whose best order is below 2 evaluates (measured: 0.20 s a search, 5 ms a
#: quadrature of 39,518 nodes at sigma 0.0134).
QUADRATURES_PER_SEARCH = 40
#: Work units per quadrature node of a search whose best order is below 2 (measured ~5 us a node
#: at sigma 0.0134 and 0.03: 0.20 s for 39,518 nodes, 45 ms for 8,870).
NODE_UNITS = 1250.0


def _optimisation_units(steps) -> float:
    """The work units charged for one order search of the schedule: UNITS_PER_MECHANISM for
    each mechanism, plus, where the fractional orders below 3 are quadratures
    (``_kernels.rdp.fractional._quad_cheap``), NODE_UNITS for each of their nodes."""
    from ..._kernels.rdp import _node_cap, _quad_cheap

    noisy = [(s, q, c) for s, q, c in steps if 0.0 < s < math.inf and 0.0 < q < 1.0 and c > 0]
    units = UNITS_PER_MECHANISM * len(steps)
    if not noisy:
        return units
    sigmas, qs, counts = (np.array(x, dtype=np.float64) for x in zip(*noisy))
    if _quad_cheap(qs, sigmas, counts, 3.0):
        units += NODE_UNITS * sum(_node_cap(s, 3.0) for s in sigmas)
    return units


def _anchors(uniq: np.ndarray) -> np.ndarray:
    """The eps (sorted, distinct) to search orders at: the first of each run of eps within a
    relative ANCHOR_SPREAD of it, and of more than MAX_ANCHORS such, MAX_ANCHORS spread evenly
    over them (the smallest and the largest among them)."""
    firsts = [float(uniq[0])]
    for x in uniq[1:]:
        if x > firsts[-1] * (1.0 + ANCHOR_SPREAD):
            firsts.append(float(x))
    if len(firsts) > MAX_ANCHORS:
        firsts = [firsts[i] for i in np.unique(np.round(np.linspace(0, len(firsts) - 1, MAX_ANCHORS)).astype(int))]
    return np.array(firsts)


def _table_delta(curve: np.ndarray, orders: np.ndarray, eps: float) -> float:
    """δ at eps from the RDP ``curve`` at ``orders``: the best order's conversion (Bretagnolle-
    Huber included), as ``rdp`` converts at fixed orders."""
    from ... import rdp
    from ..._kernels.rdp import best_of_orders

    if eps == math.inf:
        return 0.0
    log_d = float(best_of_orders(curve, orders, eps, 1)[0])
    return rdp._delta_of(log_d)
