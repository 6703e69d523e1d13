"""Fixed-size batches sampled without replacement, replace-one adjacency, certified by the PLD
pipeline.

Every step draws a batch of exactly b of the n examples (gamma = b/n), uniformly and independently
of the other steps, and adds N(0, sigma^2 I) to the sum of the clipped gradients (norm <= 1).
Neighbouring datasets replace one example by another, so the sum can move by 2.

**One step** (derivation: ``docs/fixed_size_batches.md``).  With s = sigma / 2 and the pair

    P = (1 - gamma) N(0, s^2) + gamma N(1, s^2),   Q = N(0, s^2)

(the remove direction of the Poisson pair at noise s), every neighbouring pair of step outputs
has H_a <= H_a(P || Q) for all a >= 1 (advanced joint convexity, Balle, Barthe & Gaboardi
2018), with equality for one choice of gradients; its swap (Q, P) is attained as well.  An
adaptive run can take either order at every step, so a dominating pair must dominate both:
the tightest one is the symmetrisation (Zhu, Dong & Wang, AISTATS 2022, Sec. 5; Lebeda,
Regehr, Kamath & Steinke 2024 for this mechanism), whose trade-off curve is the convex hull
of the two.  As a pair of measures it is the disjoint union of

* (P, Q) restricted to x > 1/2 (where the loss log(P/Q) is positive),
* (Q, P) restricted to x > 1/2 (the same region, losses negated),
* an atom with the same mass c = 1 - P(x > 1/2) - Q(x > 1/2) = (1 - gamma) erf(1/(sigma sqrt 2))
  under both (loss 0; c >= 0 because gamma <= 1).

It is symmetric, so one direction suffices, and for eps >= 0 one step has exactly the remove
direction's δ(eps).

**Certification.** Each piece is discretised on the loss grid by stage 1 (``onestep.discretise``
with the other pieces' mass left out): connect-the-dots for the upper bound (δ only grows, for
every eps of either sign, so the dominance survives composition); the atom is exact up to the
rounding of erf (charged as 64 ulp, as in ``_kernels.pld.exact``). The pieces' masses are added
on one grid: a disjoint union of pairs is discretised piece by piece. For the lower bound the
atoms of both pieces and the atom at 0 are put on the grid by one convex-order minorant
(``onestep.joint_opt``): a minorant per piece pins each piece's ends at loss 0, where most of
the mass is, and loses a first-order share there (0.13 grid steps a step). T steps are then
composed by stages 2-3 with their round-off and window charges, and read off by ``queries``.
Where a saddle-point estimate of eps lies beyond every step's largest loss (many steps set it:
MNIST), the compositions start at once, tilted at the estimate. Otherwise a query starts from
the Poisson pair's accountant (below), and a single run is first tried as a sum over its
far-tail steps (``fixed_size_tail``: stage 5 on this pair), which resolves small batch fractions
at small δ where one tilted transform cannot (its round-off floor decides both bounds there);
where that is not narrow enough, the compositions refine from its interval. Where the far-tail
grids would be long (a tiny eps: their step is a share of it, ``TAIL_FIRST_POINTS``) and longer
than one step's grid of the compositions (``_events_first``), the compositions go first and the
far-tail sum, on a shorter grid, only refines what they leave wide. (Estimates and tilts choose
paths and tightness, never a bound.) The compositions are kept to ``COMPOSE_BINS`` bins
(memory), the refinements to ``BUDGET`` of counted work.

**Runs of different (sigma, gamma)** (``epsilon_runs``, ``delta_runs``).  Each step is dominated
by its own symmetrised pair, so an adaptive run of steps with different noise or batch fraction
is dominated by the product of their pairs (dominance survives adaptive composition); each
pair is discretised on the one loss grid as above and the products are composed by the same
stages (``composition.compose_copies``), with the same charges.  A run without noise
(sigma = 0) reveals a drawn example exactly: with p = P(the example is drawn in such a step),
δ <= p + (1 - p) δ_noisy (the batches are independent, and without the example the noiseless
outputs have the same law under both datasets), and δ >= max(p, δ_noisy).

**What the bounds mean.**  ``upper`` is a certified upper bound on the mechanism's ε.  ``lower``
is a certified lower bound on the ε of this dominating pair -- the number an exact PLD
accountant reports -- and never below the Poisson add/remove answer at noise sigma / 2, which
a dataset pair attains for fixed-size batches (the worst one-step gradients, kept fixed for all
steps).  Whether an adaptive adversary attains the symmetrised composition is open; the two
can differ by 10-25 % (README, "Three samplers").

Edges: q = 1 is the Gaussian mechanism with sensitivity 2 (exact); sigma = 0 gives ε = +inf and
δ(eps) = 1 - (1 - q)^T; a grid that cannot be built falls back to that Gaussian bound above
(every subsampled step is dominated by it) and to the Poisson lower bound below.
"""

from __future__ import annotations

import contextvars
import math

import numpy as np
from scipy.special import erf

from ..._failures import GridFailure, GridTooLarge
from ..._types import Bounds
from ..._validation import check_accuracy, check_delta, check_epsilon, check_q, check_sigma, check_steps
from ..._work import UNITS_PER_SECOND, metered
from ..common import (ADD, REMOVE, SPLIT_MIN, STEP_CACHE, TAU_STEP, Beside, bins_cap, bins_limit, delta_groups,
                      both_roundings, cache_put, refine_levels, resolved, split_pool, tail_cut, too_many_bins, two_cores,
                      within)
from ..certifiers.rdp_cap import RDPBound
from ..engine import BUDGET as ENGINE_BUDGET, DELTA_GROUPS_PAID, HARD_LIMIT as ENGINE_HARD, Engine
from ..grid.banded import compose_banded
from ..grid.composition import compose_copies, copies_delta, eps_groups, parts_theta, recentred
from ..grid.estimates import initial_step, saddle_eps
from ..grid.onestep import OneStep, discretise, grid_range, joint_opt, shared_bins
from ..grid.spectral import read_eps
from ..schedules import make_engine
from . import fixed_size_tail

#: Seconds of counted work (``_work``, not the clock) a query may spend refining its grids before
#: it returns what it has (always certified).
BUDGET = 3.0
#: Most bins of one step's grid: a finer step than the accuracy asks for is coarsened (still
#: certified, only wider).
MAX_STEP_BINS = 1 << 21
#: The Poisson pair's accuracy where a query starts (its lower bound is a lower bound here; its ε
#: only says where to look: the fixed-size pair's own grids refine both ends).
START_ACCURACY = 0.05
#: Its work (seconds, counted): a start, not an answer (at sigma 0.6, q 1e-6 it took 1.5 units)
START_BUDGET = 0.5
#: The accuracy whose first grid step the saddle-point estimate of ``_beyond_one_step`` is taken
#: on (twice the step of START_ACCURACY: MNIST's estimate 18.6 instead of 18.5, at ~0.5 ms less)
ESTIMATE_ACCURACY = 0.2
#: Most bins of a grid or transform of the compositions (MAX_BINS is 4 times more): with the
#: one-step cache this keeps a query's memory to a few hundred MB (it reached 0.7 GB).
COMPOSE_BINS = 1 << 22
#: The far-tail events (``_one_run``) go first where their first grid has at most this many points
#: (``fixed_size_tail.planned_points``).  Their step is a share of eps and their grids span the
#: one-step loss range, so a tiny eps makes them long: first at 1.7-5.1 million points they took
#: 3.5-16 s (sigma 1.8, q 9.1e-5, T 200, δ 5.5e-6: 12 work units, eps 0.0076), where the
#: compositions alone were narrow in 0.05-1.2 s.  Where they go first their grids had 0.03-0.2
#: million points (σ 0.8-1.8, q 6.5e-5 to 3.6e-4, δ 1e-12 to 1e-9), narrow in 0.06-0.2 s where
#: the compositions alone read 16-64 % wide.
TAIL_FIRST_POINTS = 1 << 19
#: the least work (seconds, counted) the Poisson pair's lower bound is given after the refinement
ATTAINED_MIN = 0.25
#: the work of the Poisson pair's lower bounds that start a δ query (all its eps together): at
#: eps 10.3 (δ ~ 1e-70, T 9548) its engine took 5.1 units of a 6.7-unit query
ATTAINED_DELTA = 1.0
_LIBM = 64.0 * np.finfo(np.float64).eps  # relative rounding charged to erf (a few ulp)
_ULPS8 = 8.0 * 2.0 ** -53


def sym_step(sigma: float, q: float, step: float, tau: float = TAU_STEP, lower: bool = True) -> OneStep:
    """One step of the symmetrised pair on the grid ell_j = j * step (module notes), both bounds
    (the optimistic masses -- one minorant over both pieces and the atom -- built here only with
    ``lower``, else on first use); cached."""
    key = ("fixed_size", sigma, q, step, tau)
    hit = STEP_CACHE.get(key)
    if hit is not None:
        return hit
    s = 0.5 * sigma
    J = _reach(s, q, step, tau)
    if 2 * J + 1 > bins_cap():
        raise too_many_bins(2 * J + 1)
    # both pieces read the remove-loss bins 0..J-1: computed once, then the pieces on two threads
    shared_bins(s, q, step, tau, 0, J - 1)
    # negative losses: (Q, P) on x > 1/2, mass below the grid moved up (upper) or dropped
    args = (s, q, ADD, step, tau, -J, 0, True, False)
    fut = (split_pool().submit(contextvars.copy_context().run, _piece, *args)
           if two_cores() and J >= SPLIT_MIN // 2 else None)
    # positive losses: (P, Q) on x > 1/2, mass above the grid to +inf (upper) or onto its top
    pos = _piece(s, q, REMOVE, step, tau, 0, J, False, True)
    neg = fut.result() if fut is not None else _piece(*args)
    c = (1.0 - q) * float(erf(1.0 / (sigma * math.sqrt(2.0))))
    pess = np.zeros(2 * J + 1)
    for piece, at in ((pos.pess, J), (neg.pess, 0)):
        pess[at : at + piece.size] += piece
    pess[J] += c * (1.0 + _LIBM)
    one = SymStep(-J, pess, pos.p_inf + neg.p_inf, step, None, None, None)
    one._pieces, one._atom = (pos, neg), c
    if lower:  # (here, before the compositions start: on a thread beside one, its allocation waited ~2 ms)
        _ = one.opt
    cache_put(key, one)
    return one


def _piece(s, q, add, step, tau, j_lo, j_hi, keep_low, keep_high) -> OneStep:
    """A piece of ``sym_step``: ``discretise`` (its optimistic atoms join the other piece's in
    ``SymStep.opt``)."""
    return discretise(s, q, add, step, tau, j_lo, j_hi, keep_low, keep_high)


class SymStep(OneStep):
    """One step of the symmetrised pair (``sym_step``).  Its optimistic masses are assembled from
    the pieces' on first use (the saddle-point estimate never needs them), then the pieces are
    let go; the same sums, in the same order, as an eager assembly."""

    __slots__ = ("_pieces", "_atom")

    @property
    def opt(self) -> np.ndarray:
        opt = self._opt
        if opt is None:  # (one minorant over both pieces and the atom: ``onestep.joint_opt``)
            opt = joint_opt(list(zip(self._pieces, (-self.j_lo, 0))), self.pess.size,
                            [(-self.j_lo, self._atom * (1.0 - _LIBM))])
            self._opt, self._pieces = opt, None  # (the pieces' arrays are not needed any more)
        return opt


def _reach(s: float, q: float, step: float, tau: float = TAU_STEP) -> int:
    """J: the grid -J..J covers both pieces (the remove direction's far end, the add direction's)."""
    _, j_hi = grid_range(s, q, REMOVE, step, tau)
    a_lo, _ = grid_range(s, q, ADD, step, tau)
    return max(j_hi, -a_lo, 1)


def _step0(runs, accuracy: float, eps_c: float) -> float:
    """The first grid step: the accuracy's step for the Poisson pairs at noise sigma / 2,
    coarsened until one step's grid has at most MAX_STEP_BINS bins."""
    step = initial_step([(0.5 * s, q, t) for s, q, t in runs], accuracy, eps_c)
    try:
        reach = 2e-3 * (max(_reach(0.5 * s, q, 1e-3) for s, q, _ in runs) + 1)
    except GridTooLarge:  # a loss range beyond any grid: the first attempt fails, the start bounds stay
        return step
    while reach / step > MAX_STEP_BINS:
        step *= 2.0
    return step


def _levels(runs, step0, compose, tau: float = TAU_STEP):
    """``refine_levels``' attempts: level r composes the runs' one-step arrays [(OneStep, T)], their
    far ends cut at P-mass ``tau``, on the grid step step0 / 2^r.  A first grid too large to
    compose (a very long run) is coarsened by 4, up to 6 times."""
    base = [step0]

    def parts(step):
        return [(sym_step(s, q, step, tau), t) for s, q, t in runs]

    def attempt(level):
        if level:
            step = base[0] * 0.5 ** level
            return compose(parts(step), step)
        for _ in range(6):
            try:
                return compose(parts(base[0]), base[0])
            except GridTooLarge:
                base[0] *= 4.0
        return compose(parts(base[0]), base[0])

    return attempt


def _check(sigma, q, steps, accuracy):
    """Validated scalars (sigma, q, T, accuracy)."""
    s, qq, t = check_sigma(sigma), check_q(q), check_steps(steps)
    if np.ndim(s) or np.ndim(qq) or np.ndim(t):
        raise ValueError("sigma, q and steps must be scalars here (pld.epsilon(..., sampler='fixed_size') "
                         "broadcasts arrays)")
    return float(s), float(qq), int(t), check_accuracy(accuracy)


def epsilon(sigma: float, q: float, steps: int, delta: float, *, accuracy: float = 1e-3) -> Bounds:
    """Certified bounds on ε(δ) of DP-SGD with fixed-size batches drawn without replacement
    (replace-one adjacency).

    Parameters
    ----------
    sigma : float
        Noise multiplier (noise std / clipping norm), >= 0.
    q : float
        Batch fraction b / n, in [0, 1].
    steps : int
        Number of steps T >= 0.
    delta : float
        Target δ in (0, 1).
    accuracy : float, optional
        Target relative width ``upper - lower <= accuracy * upper``; the loss grid is refined
        until it is met or a few seconds are spent (certified either way).

    Returns
    -------
    Bounds
        ``upper`` bounds the mechanism's ε; ``lower`` bounds the ε of its tightest dominating
        pair from below (module notes: what the bounds mean).

    Examples
    --------
    MNIST with batches of exactly 256 of 60000, 60 epochs, σ = 1.1:

    >>> from sgmfast.pld import fixed_size
    >>> b = fixed_size.epsilon(1.1, 256 / 60000, 14040, 1e-5)
    >>> 18.3 < b.lower <= b.upper < 18.5
    True
    """
    sigma, q, T, accuracy = _check(sigma, q, steps, accuracy)
    return _epsilon([(sigma, q, T)], float(check_delta(delta)), accuracy)


def upper_epsilon(sigma: float, q: float, steps: int, delta: float, *, accuracy: float = 1e-3,
                  memo: dict | None = None) -> float:
    """``epsilon(...).upper``, the same number, without the work that serves only the lower bound
    (the Poisson pair's query where the compositions' lower end is returned as it is): what a
    calibration searches on.  ``memo``: a dict that a search over nearby sigmas carries from
    point to point (``_one_run``); with it the value may be a little above ``epsilon``'s upper
    end, never below it in the same process state (its refinement is a prefix of ``epsilon``'s;
    a level's work, which decides where a budget stops, is charged only where the one-step
    cache misses, so a cold ``epsilon`` may stop a level earlier -- as any second evaluation may,
    hence ``calibrate.public.verified_epsilon``).  Either way it is a certified upper bound."""
    sigma, q, T, accuracy = _check(sigma, q, steps, accuracy)
    return float(_epsilon([(sigma, q, T)], float(check_delta(delta)), accuracy, attained=False, memo=memo).upper)


def _noiseless_mass(runs) -> tuple[float, float]:
    """p = 1 - prod (1 - q)^T over the runs without noise, rounded down and up: with probability p
    some noiseless step drew the example and released its gradient exactly."""
    terms = [t * math.log1p(-q) if q < 1.0 else -math.inf for s, q, t in runs if s == 0.0]
    p = -math.expm1(sum(terms))
    # each term within 3u, their sum (same signs) (k - 1) u more, expm1 2u: (k + 4) u for k runs,
    # charged as k + 8 (a flat 8 was exceeded from ~64 noiseless runs on: 13.9u measured at 64
    # equal runs, 232u at 1024; tests/test_rounding_constants.py)
    r = (len(terms) + 8) * 2.0 ** -53
    return p * (1 - r), min(1.0, p * (1 + r))


def _start(runs, accuracy: float = 1e-3, budget: float = ENGINE_BUDGET):
    """What every query of the runs starts from: the PLD accountant of the Poisson add/remove pairs
    at noise sigma / 2 (a dataset pair attains it under fixed-size batches: module notes; its
    lower bounds are lower bounds here) and the noise multiplier of one Gaussian step equal to
    the runs' Gaussians with sensitivity 2 composed (mu^2 = sum T (2 / sigma)^2), which bounds
    every step from above and is the mechanism itself where every q = 1."""
    merged: dict = {}  # (equal steps merged, as an accountant records them)
    for s, q, t in runs:
        merged[(0.5 * s, q)] = merged.get((0.5 * s, q), 0) + t
    engine = make_engine([(s, q, t) for (s, q), t in merged.items()], accuracy, budget=budget)
    return engine, 1.0 / math.sqrt(sum(t * (2.0 / s) ** 2 for s, _, t in runs))


def _gauss(s_gauss: float) -> Engine:
    """The one Gaussian step that bounds the runs from above (``_start``): a closed form."""
    return Engine([(s_gauss, 1.0, 1)], 1e-3)


def _active(runs):
    """The runs that do something (steps, a sampled example, finite noise)."""
    return [(s, q, t) for s, q, t in runs if t > 0 and q > 0.0 and s < math.inf]


def _epsilon(runs, delta: float, accuracy: float, attained: bool = True, memo: dict | None = None) -> Bounds:
    """``epsilon`` of consecutive runs [(sigma, q, T)] (validated scalars), composed (``attained``
    False: the Poisson pair's lower bound left out where no later choice reads it -- the same
    upper bound)."""
    runs = _active(runs)
    if not runs:
        return Bounds(0.0, 0.0)
    if any(s == 0.0 for s, _, _ in runs):
        # delta <= p + (1 - p) delta_noisy (module notes), so eps = +inf for delta <= p; the run's
        # eps is at least the noisy steps' (a marginal)
        p = _noiseless_mass(runs)[1]
        noisy = [r for r in runs if r[0] > 0.0]
        if delta <= p:
            return Bounds(math.inf, math.inf)
        if not noisy:
            return Bounds(0.0, 0.0)
        up = _epsilon(noisy, (delta - p) / (1.0 - p) * (1 - _ULPS8), accuracy, attained).upper
        return Bounds(min(_epsilon(noisy, delta, accuracy, attained).lower, up), up)
    coarse, s_gauss = _start(runs, START_ACCURACY, START_BUDGET)
    gauss = Bounds(*(float(x) for x in _gauss(s_gauss).epsilon(delta)[:2]))
    if all(q == 1.0 for _, q, _ in runs):  # full batches: the composed Gaussian, exact
        return gauss
    # (started beside the estimate, when a core is idle; only the lower bound's query reads it)
    rdp = _poisson_rdp(runs, delta) if attained else None
    estimate = _beyond_one_step(runs, delta)
    if estimate is not None:  # many steps set eps: straight to the pair's compositions
        lo, up = _composed_epsilon(runs, delta, accuracy, 0.0, float(gauss.upper), start=estimate, rdp=rdp,
                                   attained=attained)
        return Bounds(float(min(lo, up)), float(up))
    lo0, guess = (float(x) for x in coarse.epsilon(delta)[:2])
    up0 = float(gauss.upper)
    if len(runs) == 1 and runs[0][2] >= 2:
        return _one_run(runs[0], delta, accuracy, lo0, up0, guess, rdp, attained, memo)
    lo, up = _composed_epsilon(runs, delta, accuracy, lo0, up0, guess, rdp=rdp, attained=attained)
    return Bounds(float(min(lo, up)), float(up))


def _one_run(run, delta: float, accuracy: float, lo0: float, up0: float, guess: float, rdp,
             attained: bool = True, memo: dict | None = None) -> Bounds:
    """``_epsilon`` of one run of T >= 2 steps from the certified start [lo0, up0]: the far-tail
    events first where their first grid is short (``TAIL_FIRST_POINTS``), the compositions
    refining from what they leave; else the compositions first, and the events, on a grid cut to
    that length, only where those are not narrow.  Both are certified: the ends intersect.
    ``memo`` (a search's, ``upper_epsilon``): where the compositions after the events narrowed
    nothing at an earlier point, they are not run again (q 1e-4, T 6503, δ 1e-12: 2 s each
    for [0.49, 1.02] beside the events' [0.99787, 0.99953]); where the events settled the upper
    end at a level, later points stop there (``fixed_size_tail.events_epsilon``).  Either way
    the events' upper end is returned: a prefix of the refinement without the memo."""
    narrow = lambda lo, up: within(lo, up, accuracy)  # noqa: E731
    if _events_first(run, accuracy, lo0, up0, guess):
        with metered() as meter:
            got = fixed_size_tail.events_epsilon(run, delta, accuracy, lo0, up0, guess, BUDGET, memo=memo)
        if got is not None and narrow(got.lower, got.upper):
            return got
        if got is not None:
            lo0, up0 = got.lower, got.upper
            if memo is not None and (memo.get("compositions_idle") or memo.get("tail_level") is not None):
                return got
        # (one budget: the compositions refine with what the events left of it)
        lo, up = _composed_epsilon([run], delta, accuracy, lo0, up0, guess, rdp=rdp,
                                   budget=max(BUDGET - meter.units / UNITS_PER_SECOND, 0.0), attained=attained)
        if memo is not None and got is not None:
            memo["compositions_idle"] = lo <= lo0 and up >= up0
        return Bounds(float(min(lo, up)), float(up))
    with metered() as meter:
        lo, up = _composed_epsilon([run], delta, accuracy, lo0, up0, guess, rdp=rdp)
    left = max(BUDGET - meter.units / UNITS_PER_SECOND, 0.0)
    # (the events' first grid, cut to TAIL_FIRST_POINTS, runs whatever is left: sigma 0.75, q 2.4e-6,
    # T 32 ended [0.0780, 0.158] after the compositions spent the budget, where that grid alone
    # gives [0.078646, 0.078647] in 0.66 units; what is left of BUDGET refines them further)
    if not narrow(lo, up):
        # (centred at the middle, or, where the compositions left more than a factor 2, at the
        # Poisson pair's guess inside the interval: at sigma 1.55, q 3.1e-6, T 5402 they left
        # [0.0112, 0.238], and the events' first grid centred at 0.125 gave 2 % where at the
        # guess it gives 0.5 %)
        if up <= 2.0 * lo:
            centre = 0.5 * (lo + up)
        else:
            centre = min(max(guess, lo), up)
        got = fixed_size_tail.events_epsilon(run, delta, accuracy, lo, up, centre, left, most=TAIL_FIRST_POINTS)
        if got is not None:
            lo, up = max(lo, got.lower), min(up, got.upper)
    return Bounds(float(min(lo, up)), float(up))


def _events_first(run, accuracy: float, lo0: float, up0: float, guess: float) -> bool:
    """Whether ``_one_run`` starts with the far-tail events: where their first grid has at most
    TAIL_FIRST_POINTS points, or no more than one step's grid of the compositions that would go
    first (q 1.07e-4, T 14, δ 1e-7, eps 0.114: 7.6e5 points against 1.4e6 bins; the compositions
    took 2.9 s for [0.11362, 0.15846], the events 0.3 s for a 4e-6 wide interval)."""
    points = fixed_size_tail.first_points(run, accuracy, lo0, up0, guess)
    if points <= TAIL_FIRST_POINTS:
        return True
    try:
        return points <= 2 * _reach(0.5 * run[0], run[1], _step0([run], accuracy, max(lo0, 1e-3))) + 1
    except (GridFailure, ArithmeticError):
        return False


def _poisson_rdp(runs, delta: float):
    """A callable returning RDP's upper bound on the eps(delta) of the Poisson pairs at noise
    sigma / 2 (``_start``'s schedule), computed on a helper thread from now on (``Beside``: its
    work charged when it is asked for, never while the refinement's budget decisions run)."""
    merged: dict = {}
    for s, q, t in runs:
        merged[(0.5 * s, q)] = merged.get((0.5 * s, q), 0) + t
    schedule = [(s, q, t) for (s, q), t in merged.items()]
    return Beside("fixed-rdp", lambda: RDPBound(schedule, False).epsilon(delta)).result


def _beyond_one_step(runs, delta: float):
    """(eps, theta): the saddle-point estimate of the symmetrised pairs' eps(delta) on a coarse
    grid (the first step of ``ESTIMATE_ACCURACY``) and its tilt, where that eps lies beyond
    every step's largest finite loss -- no single far-tail step sets the answer, the far-tail
    sum does not apply (its cut lies above the one-step grid) and the Poisson start, a lower
    bound 10-25 % below the pair's eps, only told where to tilt; else None.  Heuristic: it
    chooses a path and a tilt, never a bound."""
    if sum(t for _, _, t in runs) < 2:
        return None
    step = _step0(runs, ESTIMATE_ACCURACY, math.inf)
    try:
        parts = [(sym_step(s, q, step, lower=False), t) for s, q, t in runs]
    except (GridFailure, ArithmeticError, MemoryError):  # (no such grid: the usual path decides)
        return None
    top = max((one.j_lo + one.pess.size - 1) * step for one, _ in parts)
    est = saddle_eps(parts, step, delta)
    return est if est is not None and est[0] > top else None


def _composed_epsilon(runs, delta: float, accuracy: float, lo0: float, up0: float, p_up: float = math.inf,
                      start=None, rdp=None, budget: float = BUDGET, attained: bool = True):
    """(lower, upper) of ``_epsilon`` by the T-fold compositions of the one-step arrays (stages
    2-3), refined from the certified start [lo0, up0] (tilted towards lo0, or ``start`` = (eps
    estimate, its tilt)), intersected with the Poisson pair's lower bound at the accuracy of the
    first start (a dataset pair attains it).  That lower bound is at most the Poisson pair's
    eps, hence at most ``p_up`` and RDP's bound (certified upper bounds on it): where the
    compositions' own lower end is already at or above either, it cannot raise it, and the
    Poisson query is not made (MNIST: 18.435 against 14.7, RDP 16.4).  ``rdp``: a callable
    returning RDP's bound (``_poisson_rdp``).  ``budget``: the work of the refinement and of that
    Poisson query together (at least ``ATTAINED_MIN`` for the query); ``attained`` False leaves
    that query out (the upper end is the same)."""
    # where the composition is tilted to: the answer's neighbourhood
    centre = [max(lo0, 1e-3) if start is None else start[0]]
    # (each step's far tail below TAU_STEP where T x TAU_STEP would matter at δ: MNIST's run at δ
    # 1e-30 read [55.65, 25713.7] with TAU_STEP)
    tau = tail_cut(delta, accuracy, sum(t for _, _, t in runs), TAU_STEP)
    tilts = {} if start is None else {start[0]: start[1]}

    def compose(parts, step):  # (re-centred: the pair's eps can be far above the Poisson start)
        return recentred(lambda eps_c: _bounds_pair(parts, step, eps_c, delta, tilts.get(eps_c), tau), centre,
                         lambda lo, up: within(lo, up, accuracy))

    with metered() as meter, bins_limit(COMPOSE_BINS):  # (memory: one composition's arrays, a few hundred MB)
        lo, up = refine_levels(_levels(runs, _step0(runs, accuracy, centre[0]), compose, tau),
                               lambda lo, up: within(lo, up, accuracy), lo0, up0, budget)
    if attained and lo < p_up and lo < (rdp or _poisson_rdp(runs, delta))():
        # (what is left, over the engine's own overrun allowance: the query stays within its budget)
        attained, _ = _start(runs, budget=max(budget - meter.units / UNITS_PER_SECOND, ATTAINED_MIN) / ENGINE_HARD)
        lo = max(lo, float(attained.epsilon(delta)[0]))
    return lo, up


def _bounds_pair(parts, step: float, eps_c: float, delta: float, theta: float | None = None, tau: float = TAU_STEP):
    """(lower, upper) eps(delta) of the parts [(OneStep, T)] composed, tilted towards eps_c (one
    tilt for both roundings, ``parts_theta`` unless given), each read off its spectrum's band
    where that is narrow (``grid.banded``); the lower composition on a second thread where there
    are two cores."""
    if theta is None:
        theta = parts_theta(parts, step, eps_c) if sum(c for _, c in parts) > 1 else 0.0

    def bound(pess):
        grid = compose_copies(parts, step, eps_c, tau, pess, theta=theta, finish=compose_banded)
        return read_eps(grid, delta, eps_c)

    up, lo = both_roundings(bound)
    return lo, up


def delta(sigma: float, q: float, steps: int, epsilon, *, accuracy: float = 1e-3) -> Bounds:
    """Certified bounds on δ(ε) of DP-SGD with fixed-size batches drawn without replacement.

    ``epsilon`` may be a float or a 1-D array; the other parameters are as in :func:`epsilon`.
    Refined, as ``pld.delta``, until every interval is no wider than the change of δ caused by a
    relative change ``accuracy`` of ε (``common.resolved``), or than ``accuracy`` / 1000 of δ,
    or the time budget is spent."""
    sigma, q, T, accuracy = _check(sigma, q, steps, accuracy)
    eps = np.atleast_1d(check_epsilon(epsilon)).astype(np.float64).reshape(-1)
    lo, up = _delta([(sigma, q, T)], eps, accuracy)
    return Bounds(float(lo[0]), float(up[0])) if np.ndim(epsilon) == 0 else Bounds(lo, up)


def _delta(runs, eps: np.ndarray, accuracy: float):
    """(lower, upper) arrays of ``delta`` at the 1-D ``eps`` for consecutive runs [(sigma, q, T)]
    (validated scalars), composed."""
    def flat(x):
        return np.asarray(x, dtype=np.float64).reshape(-1)

    runs = _active(runs)
    if not runs:
        return np.zeros(eps.size), np.zeros(eps.size)
    if any(s == 0.0 for s, _, _ in runs):  # max(p, δ_noisy) <= δ <= p + (1 - p) δ_noisy (module notes)
        p_lo, p_up = _noiseless_mass(runs)
        noisy = [r for r in runs if r[0] > 0.0]
        lo, up = _delta(noisy, eps, accuracy) if noisy else (np.zeros(eps.size), np.zeros(eps.size))
        return np.maximum(lo, p_lo), np.minimum(1.0, np.where(up > 0.0, (p_up + (1.0 - p_up) * up) * (1 + _ULPS8), p_up))
    n = eps.size
    eps = np.concatenate((eps, eps * (1.0 + accuracy)))  # (and each shifted by the accuracy: ``narrow``)
    # (the Poisson pair's engine pays each of its eps groups a budget: here they share ATTAINED_DELTA)
    attained, s_gauss = _start(runs, budget=ATTAINED_DELTA / min(np.unique(delta_groups(eps)).size, DELTA_GROUPS_PAID))
    if all(q == 1.0 for _, q, _ in runs):  # full batches: the composed Gaussian, exact
        gauss = Bounds(*_gauss(s_gauss).delta(eps[:n]))
        return flat(gauss.lower), flat(gauss.upper)
    gauss = Bounds(*_gauss(s_gauss).delta(eps))
    lo0 = flat(attained.delta(eps)[0])
    eps_c = max(float(_start(runs, START_ACCURACY, START_BUDGET)[0].epsilon(1e-6)[1]), 1e-3)  # (where to tilt to)
    groups = eps_groups(eps)
    # (each step's far tail cut below the least δ asked for: the Poisson pair's lower bounds, which
    # are lower bounds here -- at δ ~ 1e-40 a far end at TAU_STEP left [1e-40, 2e-32] over two steps)
    known = lo0[lo0 > 0.0]
    tau = tail_cut(float(known.min()) if known.size else 1.0, accuracy, sum(t for _, _, t in runs), TAU_STEP)

    def compose(parts, step):
        return (copies_delta(parts, step, eps, groups, tau, False),
                copies_delta(parts, step, eps, groups, tau, True))

    def resolved_at(lo, up):
        return resolved(lo[:n], up[:n], up[n:], accuracy)

    def narrow(lo, up):
        return bool(np.all(resolved_at(lo, up)))

    lo, up = lo0, np.minimum(flat(gauss.upper), 1.0)
    budget = BUDGET
    # (as ``_one_run``: the far-tail events first at the eps where they go first there, the
    # compositions refining what they leave)
    one = len(runs) == 1 and runs[0][2] >= 2
    centres = [i for i in range(n) if one and math.isfinite(eps[i])
               and _events_first(runs[0], accuracy, float(eps[i]), math.inf, 0.0)]
    if centres:
        with metered() as meter:
            lo, up = fixed_size_tail.events_delta(runs[0], eps, lo, up, accuracy, resolved_at, BUDGET, centres)
        if narrow(lo, up):
            return np.minimum(lo, up)[:n], up[:n]
        budget = max(BUDGET - meter.units / UNITS_PER_SECOND, 0.0)
    with bins_limit(COMPOSE_BINS):  # (memory, as for epsilon)
        lo, up = refine_levels(_levels(runs, _step0(runs, accuracy, eps_c), compose, tau), narrow, lo, up, budget)
    return np.minimum(lo, up)[:n], up[:n]


def _check_runs(runs, accuracy):
    out = [_check(s, q, t, accuracy)[:3] for s, q, t in runs]
    return out, check_accuracy(accuracy)


def epsilon_runs(runs, delta: float, *, accuracy: float = 1e-3) -> Bounds:
    """:func:`epsilon` of consecutive runs [(sigma, q, steps)] of fixed-size batches with
    different noise or batch fractions (a warm-up at another batch size, a noise schedule),
    composed: each step's symmetrised pair on one loss grid, the products charged as for one run.

    >>> from sgmfast.pld import fixed_size
    A warm-up of 1,000 steps at half the batch and less noise, then the MNIST run at sigma = 1.2:

    >>> b = fixed_size.epsilon_runs([(1.0, 128 / 60000, 1000), (1.2, 256 / 60000, 13040)], 1e-5)
    >>> 13.5 < b.lower <= b.upper < 13.7
    True
    """
    r, acc = _check_runs(runs, accuracy)
    return _epsilon(r, float(check_delta(delta)), acc)


def delta_runs(runs, epsilon, *, accuracy: float = 1e-3) -> Bounds:
    """:func:`delta` of consecutive runs [(sigma, q, steps)] (see :func:`epsilon_runs`)."""
    r, acc = _check_runs(runs, accuracy)
    eps = np.atleast_1d(check_epsilon(epsilon)).astype(np.float64).reshape(-1)
    lo, up = _delta(r, eps, acc)
    return Bounds(float(lo[0]), float(up[0])) if np.ndim(epsilon) == 0 else Bounds(lo, up)
