"""Schedules with many distinct (sigma, q): mixtures on a lattice of noise levels, or a sandwich.

A noise (or batch-size) schedule that changes every step has as many distinct one-step PLDs as
steps, and each costs a discretisation and a transform.  Up to ``MAX_PARTS`` distinct noisy
steps are composed exactly (``engine.Engine``).  Beyond:

* **Mixtures** (add/remove, every q < 1, at most ``MAX_RATES`` distinct q; ``schedule_mix``):
  for each sampling rate, a lattice of noise levels spans the steps' sigmas, closer where steps
  are dense and where the answer is sensitive to them; each step is replaced by a mixture of its
  two neighbouring lattice points that is at least as revealing (upper bound: the chord of δ in
  t = Phi(1 / (2 sigma)), in which δ is convex at every eps) and one that is at most as
  revealing up to a failure mass H (lower bound, H subtracted).  Groups of nearby mixtures
  become k copies of one (a Poisson-binomial count of lattice draws lies between two binomials).
  Only lattice points are discretised and transformed; the mixtures' spectra are combined from
  theirs inside the product.  The interval is second order in the lattice spacing: 10^4
  distinct sigma in [0.9, 1.3] at q = 256/60000 are certified to 1e-3 (bench/README, "Per-step
  schedules certified to 1e-3").
* **Rate chords** (add/remove, every q < 1, more than ``MAX_RATES`` distinct q among at most
  ``schedule_rates.MAX_SIGMAS`` noise levels, and at most ``RATE_POINTS`` lattice points;
  ``schedule_rates``): for each noise level a lattice of rates; each step is below the revealed
  mixture of its two neighbouring rates (the chord), and bounded below by the test {S >= s} of a
  sum of lattice points' losses, whose laws are linear in each step's own rate.  10^4 steps each
  with its own q at one or a few noise levels are certified to 1e-3 in about a second.
* **Cells** (more than ``CELLS_FROM`` distinct noisy steps that fall into at most a quarter as
  many cells, and at most ``CELLS_MAX``, of a geometric lattice, relative spacing accuracy / 16 in sigma and in q: a
  schedule whose values drift by rounding-sized amounts, or a short ramp between close
  values): a sandwich of each cell at its extremes (as below), first order in a spread of a
  sixteenth of the accuracy; a few distinct steps then cost what a few do.
* **Both at once** (add/remove, every q < 1, more than ``MAX_RATES`` distinct q and more than
  ``MAX_SIGMAS`` noise levels): up to ``MAX_PARTS_MIXED`` distinct steps, the exact engine
  (``_ExactMix``); beyond, the product of the two lattices (``schedule_product``: the noise chord
  times the rate chord above, the noise lower weights times the statistic below), where its
  noise-weight groups are at most ``PRODUCT_PARTS`` (steps along a path in (sigma, q), such as a
  noise decay with a batch-size ramp: 10^4 steps of sigma 1.3 -> 0.9, q 0.003 -> 0.006 certified to
  1e-3 in about 2.5 s, of sigma 1.5 -> 0.8, q 0.002 -> 0.006 to 0.25 % in 2 s; steps spread
  over both axes need a part each, and 1,000-3,000 of them end 0.6-0.7 % wide in about 2 s); where
  the parts are more, the product lattice of twice, four times, ... the accuracy, up to
  ``COARSE_PRODUCT``, with more points and parts (``schedule_product.COARSE_POINTS``, ``COARSE_PARTS``;
  10^4 such steps: 0.30 % wide in about 3 s, where the groups alone were 23 % wide).  Where
  either ends wider than the accuracy, the groups' sandwich (below) also runs and the two are
  intersected (past a quarter of the interval for the coarser lattice).
* **Sandwich** (replace-one, full batches among the steps, or more distinct steps than the
  engines above take): the
  steps are cut into G groups -- runs of about equal step counts or of about equal cost in the
  order of sigma / q, or the cells of a grid of sigma and q quantiles, whichever costs least
  (``schedule_groups.brackets``); every step
  of a group is replaced by (the group's smallest sigma, its largest q) for the upper bound and
  by (its largest sigma, its smallest q) for the lower bound (first order in the groups' spread).
  A schedule that samples few steps in expectation (sum of q below ``RATE_SAMPLED``) asks the
  groups' engines first for a share of the groups' own spread: at tiny rates their parts' grids
  are long, and at the accuracy itself the first round ran out of work.  A wide answer is
  also intersected with the hull: every step at the least sigma and largest q of all, and at the
  largest sigma and least q (``Sandwich.hull``: two one-part engines), for such a schedule.

Soundness.  Mixtures: ``schedule_mix`` (module notes) -- every replacement is ordered against
the step it replaces in δ at every eps (the order composition keeps), the lower one up to a
failure event whose total probability H is subtracted, and the lattice points are composed
with the grids' own certified bounds.  Sandwich: more noise is post-processing of the output
(N(m, s^2) plus independent N(0, s'^2 - s^2) is N(m, s'^2)), and a smaller sampling rate is a
mixture with the neighbour's own distribution: with lambda = q / q', (1 - q) N(0) + q N(1) =
(1 - lambda) N(0) + lambda ((1 - q') N(0) + q' N(1)), so by joint convexity of the hockey-stick
divergence every δ(eps) of rate q is at most lambda times that of rate q' (the replace-one pair
is the same mixture on both sides).  So each step of the upper schedule is at least as
revealing as the step it replaces, each of the lower at most as revealing, and composition keeps
both orders.  Both: the RDP bound of a schedule that rounds every step towards less noise caps
the upper; noiseless steps (sigma = 0) add an atom at +inf of mass p = 1 - prod (1 - q)^T,
handled as ``engine.Engine`` does (δ <= p + (1 - p) δ_noisy, δ >= max(p, δ_noisy)); a finer
accuracy is intersected with the default one's answer, so it never returns a wider interval.
"""

from __future__ import annotations

import math

import numpy as np

from .._work import UNITS_PER_SECOND, Meter, metered
from .certifiers import exact
from .certifiers import RDPBound
from .common import U, within
from .engine import BUDGET, DEFAULT_ACCURACY, Engine, monotone
from .grid.estimates import eps_estimate
from .grid.tail_events_multi import EVENT_ENTRIES
from .schedule_groups import _extremes, _grouped, brackets

#: distinct noisy steps composed exactly (~1.5 s at 128 on the reference machine); beyond, the
#: lattice mixtures (or the sandwich)
MAX_PARTS = 128
#: the same, inside the sandwich (``_ExactMix``), where both sigma and q take more values than the
#: mixtures and the rate chords take: their product lattice is no tighter there (200 random
#: (sigma, q): [0.38310, 0.38671] in 3.3 s, exactly [0.384575, 0.384644] in 1.4 s; 400 in 3.9 s)
MAX_PARTS_MIXED = 320
#: group counts the sandwich tries in turn while the interval is wider than the accuracy and the
#: budget lasts (32: a 10^4-step schedule in about a second on the reference machine)
GROUPS = (32,)
#: below this δ the sandwich first tries ``tail_events_multi.EVENT_ENTRIES`` groups: their engines
#: have the tail-event sum over several entries, which 32 groups' engines lack (the 10^5-step
#: noise decay σ 1.385 -> 1.034, q 1.87e-4, δ 2.3e-15: 32 groups [0.4214, 0.5017], 8 groups
#: [0.4275, 0.4627]; 247 random noise levels in [0.92, 1.04], q 1.6e-4, δ at eps 0.108:
#: [1.74e-11, 5.02e-11] and [1.69e-11, 2.82e-11])
SMALL_DELTA = 1e-9
#: the share of the sandwich's budget its rounds of 32 groups leave to those of EVENT_ENTRIES
SMALL_RESERVE = 0.4
#: groups of the upper schedule whose RDP bound caps the answer
RDP_GROUPS = 64
#: most distinct sampling rates the mixtures take (each has a lattice of its own); beyond, the
#: sandwich
MAX_RATES = 32
#: where the product lattice does not fit at the accuracy asked for (steps spread over both axes
#: need a part each), it is tried at twice the accuracy, four times, ... up to this one: 10^4
#: steps of random (sigma, q) were [1.99377, 2.58118] (23 %) as the groups' sandwich alone, and
#: are [2.267400, 2.274175] (0.30 %) on the lattice of accuracy 0.002 with up to
#: ``schedule_product.COARSE_POINTS`` points (bench/schedules_coarse_product.out)
COARSE_PRODUCT = 0.05
#: schedules sampling fewer than ``schedule_rates.RATE_SAMPLED`` steps in expectation (sum of q)
#: give the groups' engines a first round at a share of the groups' spread, at most this
#: (``Sandwich._rounds``)
COARSE_SANDWICH = 0.02
#: work budget of each of the hull's two one-part engines (``Sandwich.hull``)
HULL_BUDGET = 0.5
#: a query at an accuracy finer than the default asks the default-accuracy twin first
#: (``Sandwich.coarse``); where its answer is wider than this, the finer query -- finer grids and
#: lattices within the same budget -- is not asked: its work had run out or its groups' spread set
#: the width (a δ curve of 500 noise levels in [1.57, 7.1], q 3.2e-4, at accuracy 3.6e-4: the twin
#: read [2.1e-20, 6.2e-20] in 3.0 s, the finer query [1.4e-20, 1.04e-19] in 13.8 s)
COARSE_WIDE = 10 * DEFAULT_ACCURACY


#: distinct noisy steps past which steps whose sigma and q agree to within CELL_SHARE * accuracy
#: (relative) are merged, for a sandwich of far fewer distinct steps (``cells``)
CELLS_FROM = 8
CELL_SHARE = 1.0 / 16.0
#: the merge is taken where it leaves at most this share of the distinct steps, and at most
#: CELLS_MAX cells (each an exact part of the sandwich's engines)
CELLS_GAIN = 0.25
CELLS_MAX = 32


def cells(parts, accuracy: float) -> np.ndarray:
    """The cell of each part [(sigma, q)]: parts of one cell of a geometric lattice, relative
    spacing CELL_SHARE * accuracy in sigma and in q, share it; the others (sigma 0 or +inf, q 0
    or 1) keep cells of their own.  Heuristic only: the sandwich takes each cell's own extremes
    (``cell_parts``)."""
    r = math.log1p(CELL_SHARE * accuracy)
    arr = np.array([(float(s), float(q)) for s, q in parts], dtype=np.float64).reshape(-1, 2)
    s, q = arr[:, 0], arr[:, 1]
    ok = (s > 0.0) & (s < math.inf) & (q > 0.0) & (q < 1.0)
    keys = np.zeros((len(arr), 3))
    keys[:, 0] = np.where(ok, -1.0, np.arange(len(arr)))  # (the others each a cell of its own)
    keys[ok, 1], keys[ok, 2] = np.floor(np.log(s[ok]) / r), np.floor(np.log(q[ok]) / r)
    return np.unique(keys, axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)


def cell_parts(parts, cell: np.ndarray):
    """(upper parts, lower parts), one per cell: its least sigma with its largest q (every step
    of the cell at most as noisy and sampled at least as often: at least as revealing, module
    notes) and its largest sigma with its least q (at most as revealing)."""
    m = int(cell.max()) + 1 if cell.size else 0
    arr = np.array([(p[0], p[1]) for p in parts], dtype=np.float64).reshape(-1, 2)
    s_lo, s_hi, q_lo, q_hi = _extremes(arr, cell, m)
    return ([(float(a), float(b)) for a, b in zip(s_lo, q_hi)], [(float(a), float(b)) for a, b in zip(s_hi, q_lo)])


def merged_cells(parts, accuracy: float):
    """``cells`` of the parts where merging pays (more than CELLS_FROM distinct, at most CELLS_GAIN
    of them and CELLS_MAX left), else None."""
    if len(parts) <= CELLS_FROM:
        return None
    cell = cells(parts, accuracy)
    return cell if int(cell.max()) + 1 <= min(CELLS_GAIN * len(parts), CELLS_MAX) else None


def _cell_brackets(schedule, accuracy: float):
    """(upper schedule, lower schedule) of a schedule whose steps merge into cells, else None."""
    sched = [(s, q, c) for s, q, c in schedule if c > 0]
    cell = merged_cells([(s, q) for s, q, _ in sched], accuracy)
    if cell is None:
        return None
    return _grouped(np.array(sched, dtype=np.float64).reshape(-1, 3), cell)


def distinct_noisy(schedule) -> int:
    return len({(s, q) for s, q, c in schedule if c > 0 and q > 0.0 and 0.0 < s < math.inf})


def make_engine(schedule, accuracy, grid_step=None, relation="add_remove", budget=BUDGET):
    """An ``Engine`` for the schedule, or a ``Sandwich`` when it has more than ``MAX_PARTS``
    distinct noisy steps (and not every step is a full batch, whose composition is exact)."""
    noisy = [(s, q, c) for s, q, c in schedule if c > 0 and q > 0.0 and 0.0 < s < math.inf]
    distinct = distinct_noisy(schedule)
    pair = _cell_brackets(_merged(noisy), accuracy) if grid_step is None and distinct > CELLS_FROM else None
    if pair is not None:  # (the noisy steps here are ``exact.normalise``'s, which the sandwich takes)
        return Sandwich(schedule, accuracy, grid_step, relation, budget, pair=pair)
    if distinct > MAX_PARTS and any(q < 1.0 for _, q, _ in noisy):
        return Sandwich(schedule, accuracy, grid_step, relation, budget)
    return Engine(schedule, accuracy, grid_step, relation, budget=budget)


def _merged(schedule):
    """The schedule with each distinct (sigma, q) once, its counts summed."""
    out: dict = {}
    for s, q, c in schedule:
        out[(s, q)] = out.get((s, q), 0) + c
    return [(s, q, c) for (s, q), c in out.items()]


def rarely_sampled(noisy) -> bool:
    """Whether the noisy steps [(sigma, q, count)] sample fewer steps in expectation (sum of q)
    than the rate chords take (``schedule_rates.RATE_SAMPLED``): their loss is a sum of a few
    large draws, and the groups' engines struggle there too."""
    from .schedule_rates import RATE_SAMPLED

    return sum(c * q for _, q, c in noisy) < RATE_SAMPLED


def first_accuracies(pair, accuracy: float, target: float):
    """The groups' engines' accuracies in turn, for a rarely sampled schedule whose groups are
    ``pair`` (upper, lower schedules): half their spread in the Gaussian estimate (at most
    COARSE_SANDWICH), then the accuracy itself (a heuristic: ``Sandwich._rounds``)."""
    e_up, e_lo = eps_estimate(pair[0], target), eps_estimate(pair[1], target)
    share = 0.5 * (e_up - e_lo) / e_up if e_up > 0.0 else 0.0
    coarse = min(max(share, accuracy), COARSE_SANDWICH)
    return (coarse, accuracy) if coarse > accuracy else (accuracy,)


def hull_engines(noisy, accuracy: float, grid_step, relation: str):
    """(upper, lower) one-part engines: every noisy step at the least sigma and largest q of them
    all, and at the largest sigma and least q (each step is at most / at least as revealing,
    module notes) -- a rarely sampled schedule's wide answer is intersected with theirs (10^4 steps
    of q 1e-4 to 2e-4 at sigma 0.8: δ(0.58) of the groups [8.7e-11, 2.1e-9], the hull's upper
    3.8e-10)."""
    total = int(sum(c for _, _, c in noisy))
    extremes = cell_parts([(s, q) for s, q, _ in noisy], np.zeros(len(noisy), dtype=np.int64))  # (one cell)
    return tuple(Engine([(*x[0], total)], accuracy, grid_step, relation, budget=HULL_BUDGET) for x in extremes)


class _ExactMix(Engine):
    """The exact engine in the sandwich's mixture slot, for add/remove schedules of at most
    ``MAX_PARTS_MIXED`` distinct steps whose noise levels and rates are both many (no lattice is
    tighter there).  Where it ends wide the groups' sandwich runs beside it and the two are
    intersected: at tiny rates and small δ the exact engine's budget may end first (155 steps at
    q ~ 1e-3, δ ~ 1e-11: [1.9e-11, 7.3e-7], the groups' [2.8e-11, 3.4e-10])."""

    sandwich_if_wider = 0.0

    def release(self) -> None:
        pass

    def delta(self, eps, below: float = 1.0):
        """``Engine.delta`` (``below``, the mixtures' tail hint, unused: the engine caps by RDP itself)."""
        return super().delta(eps)


def _product(noisy, accuracy, budget, grid_step):
    """The product lattice's engine at the accuracy asked for where it fits, else at the least
    of twice, four times, ... that accuracy (at most COARSE_PRODUCT) where it does: a wider
    certified answer (``ProductEngine(coarse=True)``: its caps and sandwich threshold);
    None where none fits."""
    from .schedule_product import ProductEngine

    acc = accuracy
    while True:
        both = ProductEngine(noisy, acc, budget, grid_step, coarse=acc > accuracy)
        if both.fits():
            return both
        acc *= 2.0
        if acc > COARSE_PRODUCT or grid_step is not None:
            return None


def _group_counts(small: bool, beside_mixtures: bool) -> tuple:
    """The sandwich's group counts in turn.  At small δ it also takes EVENT_ENTRIES groups, whose
    engines have the tail-event sum: first where it stands beside the mixtures' wide answer (they
    are finer than 32 groups: what the sandwich adds there is that sum), else after 32 groups,
    which keep ``SMALL_RESERVE`` of the budget for them (a rate ramp at δ 1e-10 whose 8 groups'
    rates lie far apart: 8 groups first, 6.2 %; 32 groups first, 2.0 %)."""
    if not small:
        return GROUPS
    return (EVENT_ENTRIES,) + GROUPS if beside_mixtures else GROUPS + (EVENT_ENTRIES,)


class Sandwich:
    """eps(δ) and δ(eps) of a schedule with many distinct steps (module notes); the ``Engine``
    interface that the accountant uses."""

    def __init__(self, schedule, accuracy, grid_step=None, relation="add_remove", budget=BUDGET, pair=None):
        self.schedule = tuple(schedule)
        self.accuracy = accuracy
        self.grid_step = grid_step
        self.relation = relation
        self.budget = budget
        self.last_step = None
        self._rdp = None
        self._coarse = None
        self._hull = None
        self._tv = None
        noisy, (self.p_lo, self.p_hi) = exact.normalise(self.schedule)
        self.noisy = tuple(noisy)
        self.pair = pair  # (the noisy steps merged into cells, ``_cell_brackets``: one round, no mixtures)
        self.mix = None
        from .schedule_engine import MixEngine, families_of  # (here: a one-step run's query needs neither)
        from .schedule_rates import MAX_SIGMAS, RateEngine

        fams = families_of(self.noisy) if relation == "add_remove" and self.noisy else None
        if fams is not None and self.pair is None:
            if len(fams) <= MAX_RATES:
                self.mix = MixEngine(self.noisy, accuracy, budget, grid_step)
            elif len({s for s, _, _ in self.noisy}) <= MAX_SIGMAS:  # (many rates, few noise levels)
                rates = RateEngine(self.noisy, accuracy, budget, grid_step)
                self.mix = rates if rates.fits() else None
            elif distinct_noisy(self.noisy) <= MAX_PARTS_MIXED:  # (many of both, few steps: exactly)
                self.mix = _ExactMix(self.noisy, accuracy, grid_step, relation, budget=budget)
            else:  # (many rates and many noise levels)
                self.mix = _product(self.noisy, accuracy, budget, grid_step)

    @property
    def rdp(self) -> RDPBound:
        """The RDP bound of the upper sandwich schedule (``RDP_GROUPS`` groups, each at its least
        sigma and largest q: at least as revealing, and RDP is monotone in both)."""
        if self._rdp is None:
            self._rdp = RDPBound(brackets(self.noisy, RDP_GROUPS)[0], self.relation == "replace_one")
        return self._rdp

    @property
    def hull(self):
        """``hull_engines`` of the noisy steps, built on first use."""
        if self._hull is None:
            self._hull = hull_engines(self.noisy, self.accuracy, self.grid_step, self.relation)
        return self._hull

    @property
    def coarse(self) -> Sandwich | None:
        """The same schedule at the default accuracy, when this one asks for a finer one: its
        answer is intersected (a finer accuracy never returns a wider interval)."""
        if self.accuracy >= DEFAULT_ACCURACY or self.grid_step is not None:
            return None
        if self._coarse is None:
            pair = None if self.pair is None else _cell_brackets(_merged(self.noisy), DEFAULT_ACCURACY)
            self._coarse = Sandwich(self.schedule, DEFAULT_ACCURACY, None, self.relation, self.budget, pair)
        return self._coarse

    def first_step(self, target: float) -> float | None:
        return self.grid_step

    def first_delta_step(self, eps: float) -> float | None:
        return self.grid_step

    # --- eps(δ) ----------------------------------------------------------------------------------
    def epsilon(self, target: float, step0=None):
        """(lower, upper, None) of eps(target) (the default-accuracy twin first: ``COARSE_WIDE``)."""
        if self.coarse is None:
            return (*self._epsilon(target, step0), None)
        lo, up, _ = self.coarse.epsilon(target)
        if within(lo, up, COARSE_WIDE):
            f_lo, f_up = self._epsilon(target, step0)
            lo, up = max(lo, f_lo), min(up, f_up)
        else:
            self.last_step = self.coarse.last_step
        return lo, up, None

    def _epsilon(self, target, step0):
        if self.p_hi > 0.0:
            # noiseless steps: δ >= p for every finite eps, and δ <= p + (1 - p) δ_noisy
            lo = math.inf if target < self.p_lo else self._eps_noisy(target, step0)[0]
            if target <= self.p_hi:
                return lo, math.inf
            return lo, self._eps_noisy((target - self.p_hi) / (1.0 - self.p_hi) * (1 - 4 * U), step0)[1]
        return self._eps_noisy(target, step0)

    @property
    def tv_upper(self) -> float:
        if self._tv is None:
            self._tv = exact.tv_upper(self.noisy, self.relation)
        return self._tv

    def _eps_noisy(self, target, step0=None):
        if not self.noisy or target >= self.tv_upper:
            return 0.0, 0.0
        if self.mix is not None:
            lo, up, _ = self.mix.epsilon(target, step0)
            self.last_step = self.mix.last_step
            if not within(lo, up, max(self.accuracy, self.mix.sandwich_if_wider)):  # (both certified: intersected)
                self.mix.release()
                s_lo, s_up = self._sandwich_eps(target, up)
                lo, up = max(lo, s_lo), min(up, s_up)
        else:
            lo, up = self._sandwich_eps(target)
        if not within(lo, up, min(self.accuracy, DEFAULT_ACCURACY)):  # wide: RDP (rarely sampled, the hull) may help
            up = min(up, self.rdp.epsilon(target))
            if rarely_sampled(self.noisy):
                h_up, h_lo = self.hull
                up, lo = min(up, h_up.epsilon(target)[1]), max(lo, h_lo.epsilon(target)[0])
        return min(lo, up), up

    # --- δ(eps) ----------------------------------------------------------------------------------
    def delta(self, eps: np.ndarray):
        """(lower, upper) of δ at each eps (the default-accuracy twin first: ``COARSE_WIDE``)."""
        eps = np.asarray(eps, dtype=np.float64)
        if self.coarse is None:
            return monotone(eps, *self._delta(eps))
        lo, up = self.coarse.delta(eps)
        fine = up - lo <= COARSE_WIDE * up
        if fine.any():
            f_lo, f_up = self._delta(eps[fine])
            lo[fine], up[fine] = np.maximum(lo[fine], f_lo), np.minimum(up[fine], f_up)
        else:
            self.last_step = self.coarse.last_step
        return monotone(eps, lo, up)

    def _delta(self, eps):
        lo, up = np.zeros(eps.size), np.zeros(eps.size)
        finite = np.isfinite(eps)  # (noisy steps put no mass at +inf: δ(+inf) = 0)
        if self.noisy and finite.any():
            e = eps[finite]
            cap = self.rdp.delta(e)
            if self.mix is not None:
                # (the steps' far tails cut below RDP's bound where that is small: at δ ~ 1e-25 a cut
                # at 1e-16's share left 300 noise levels [5.6e-26, 1.5e-25])
                l, u = self.mix.delta(e, float(cap.min()))
                self.last_step = self.mix.last_step
                if not (u - l <= max(self.accuracy, self.mix.sandwich_if_wider) * u).all():  # (both certified)
                    self.mix.release()
                    s_l, s_u = self._sandwich_delta(e, float(u.max()))
                    l, u = np.maximum(l, s_l), np.minimum(u, s_u)
            else:
                l, u = self._sandwich_delta(e)
            wide = ~(u - l <= self.accuracy * u)
            if wide.any():
                u[wide] = np.minimum(u[wide], cap[wide])
                if rarely_sampled(self.noisy):
                    h_up, h_lo = self.hull
                    u[wide] = np.minimum(u[wide], h_up.delta(e[wide])[1])
                    l[wide] = np.maximum(l[wide], h_lo.delta(e[wide])[0])
            # with noise, every finite eps has δ > 0 (the remove loss is unbounded): never report 0
            lo[finite], up[finite] = np.minimum(l, u), np.maximum(u, exact.TINY)
        if self.p_hi > 0.0:
            lo = np.maximum(lo, self.p_lo)
            up = np.minimum(1.0, (self.p_hi + (1.0 - self.p_hi) * up) * (1 + 4 * U))
        lo = np.maximum(lo - 1e-322, 0.0)
        up = np.where(up > 0.0, np.minimum(up + 1e-322, 1.0), up)
        return lo, up

    # --- the sandwich (replace-one, full batches) ----------------------------------------------
    def _engines(self, pair, budget, accuracy):
        return tuple(Engine(x, accuracy, self.grid_step, self.relation, budget=budget) for x in pair)

    def _sandwich_eps(self, target: float, eps_hint: float | None = None):
        """(lower, upper) of eps(target) from the groups' sandwich; ``eps_hint``: an upper bound
        found so far (each round's upper replaces it)."""
        lo, up = 0.0, math.inf
        meter = Meter()
        hint = {"eps": eps_hint}
        for pair, budget, acc in _rounds(self, meter, target, target < SMALL_DELTA, hint):
            with metered(meter):
                e_up, e_lo = self._engines(pair, budget, acc)
                up = min(up, e_up.epsilon(target)[1])
                lo = max(lo, e_lo.epsilon(target)[0])
            hint["eps"] = up if math.isfinite(up) else hint["eps"]
            if within(lo, up, self.accuracy):
                break
        return lo, up

    def _sandwich_delta(self, eps: np.ndarray, goal: float = 1.0):
        """(lower, upper) of δ at eps from the groups' sandwich; ``goal``: about the largest δ
        (small: ``SMALL_DELTA``)."""
        lo, up = np.zeros(eps.size), np.ones(eps.size)
        meter = Meter()
        # (each engine of a round half of what is left: a δ query's engines also bracket δ by eps(δ)
        # queries, and at all of it each two rounds of 8 groups took 21 units of a 4-unit budget)
        for pair, budget, acc in _rounds(self, meter, 1e-5, goal < SMALL_DELTA, {"eps": float(eps.max())}, 0.5):
            with metered(meter):
                e_up, e_lo = self._engines(pair, budget, acc)
                up = np.minimum(up, e_up.delta(eps)[1])
                lo = np.maximum(lo, e_lo.delta(eps)[0])
            if (up - lo <= self.accuracy * up).all():
                break
        return lo, up


def _rounds(sw: Sandwich, meter: Meter, target: float, small: bool = False, hint: dict | None = None,
            events_share: float = 1.0):
    """The rounds of the sandwich ``sw``: ((upper, lower) schedules, budget of each of their engines,
    their accuracy) while work is left; ``meter`` counts the work of the rounds so far (units of
    ``_work``, never a clock: the same answer under any load).  A rarely sampled schedule (fewer
    than RATE_SAMPLED steps in expectation) first asks its engines only for a share of the
    groups' own spread: their parts' grids resolve losses of order q over tails of order 1, and
    at the accuracy itself the first round of 32 such parts outran its work limit (10^4 steps of
    q 1e-4 to 2e-4 at sigma 0.8, δ 1e-10: [0.12, 2.03]; at 1e-2: [0.574, 0.586] in 1.3 units an
    engine).
    ``hint["eps"]``: about where eps lies, read when the EVENT_ENTRIES groups are made (their
    grouping, ``schedule_groups._by_tail``); ``events_share``: the share of what is left each of
    their engines gets."""
    groups = (None,) if sw.pair is not None else _group_counts(small, sw.mix is not None)
    for i, g in enumerate(groups):
        events = g == EVENT_ENTRIES and small
        tail_eps = (hint or {}).get("eps") if events else None
        pair = sw.pair if sw.pair is not None else brackets(sw.noisy, g, tail_eps)
        rare = sw.grid_step is None and rarely_sampled(sw.noisy)
        keep = SMALL_RESERVE * sw.budget if groups[i + 1:] == (EVENT_ENTRIES,) else 0.0  # (for the last round)
        # (EVENT_ENTRIES groups: at the accuracy itself, each engine with all that is left -- a
        # few entries' engine with the tail-event sum costs a single query's work, and at half
        # the budget or a coarser accuracy it stopped short: 8 groups of 1,030 noise levels at
        # q 9.2e-5, δ 1.1e-13, [0.167, 0.491] -> [0.3154, 0.4015])
        for acc in first_accuracies(pair, sw.accuracy, target) if rare and not events else (sw.accuracy,):
            left = sw.budget - meter.units / UNITS_PER_SECOND - keep
            if left <= 0.1 * sw.budget:
                break
            yield pair, max((events_share if events else 0.5) * left, 0.1), acc
