"""Balls-in-bins batches: DP-SGD under random allocation, certified by the PLD pipeline.

(Not a shuffle: a data loader that permutes the data and cuts it into batches of a fixed size
is ``pld.shuffle``'s, and can be far less private; ``integrations.torch.BallsInBinsBatchSampler``
draws the batches analysed here.)

Random allocation with k = 1 (balls-in-bins batching; Feldman & Shenfeld, arXiv 2502.08202;
Chua et al. 2024): every epoch of t steps, each example joins exactly one step drawn uniformly
and independently of the other examples; the steps add N(0, sigma^2) noise to the sum of
clipped gradients.  One epoch is the mixture pair (kernel notes, ``_kernels/pld/allocation``)

    P = (1/t) sum_i N(e_i, sigma^2 I_t),   Q = N(0, sigma^2 I_t),   P/Q = S/t,  S = sum_i W_i,

under add/remove adjacency (remove: (P, Q); add: (Q, P)).  E epochs compose E independent
copies.

How it is certified (each step only moves a bound in its own direction):

1. **W on a lattice.**  The Q-law of W = e^{(2y - 1)/(2 sigma^2)} (lognormal, mean 1) is
   replaced on the lattice k h by its mean-preserving spread (larger in convex order) for the
   upper bound and by a convex-order minorant for the lower (``_kernels.pld.allocation``).
   Both δ functionals after any number of epochs are convex in each epoch's S, and convex
   order survives sums of independent terms, so δ only grows (shrinks).  Variance moves by
   O(h^2): the lattice can be coarse.
2. **Truncation.**  W above the lattice top W_max is cut out.  Upper bound: the remove
   direction puts the P-mass of "some W_i > W_max" at +inf (its exact bound:
   P'(W > W_max) + (t - 1) P(W > W_max), P' the law of the shifted coordinate); the add
   direction, whose δ falls as S grows, moves that Q-mass down to S = W_max + R*, R* below
   the other coordinates' sum in the usual stochastic order (Chernoff, ``epoch_add.place_out``).
   Lower bound: dropped (every δ is a non-negative functional of the measure).
3. **S = sum of t lattice variables** by one transform, the spectrum raised to the t-th power
   (the PLD engine's ``fft_power`` kernel and round-off bounds) and one inverse, cyclic over
   at least the lattice: upper masses take the wrapped mass (it only adds), lower ones a length
   of 2-8 lattices and the wrapped mass, by Chernoff, taken off -- or, for t < 4 and where
   narrow windows make it cheaper (``epoch_power.windowed_cheaper``), by FFT exponentiation by
   squaring, each product
   cut at the lattice cap (partial sums only grow: a cut partial sum has a cut total); either
   way with a per-entry round-off bound (Higham's FFT bound) added to the upper and subtracted
   from the lower masses; for the upper masses each entry takes the least of
   the untilted power's bound and those of the powers tilted by e^{+-lam x}, which fall off
   away from the bulk.  What lies above the cap is, for the upper bound, bounded by Chernoff
   on the lattice MGF: its P-mass goes to +inf (remove; where it passes its budget, to the finite
   losses of a ladder of such bounds up to t W_max, ``epoch_tail.over_ladder``), its Q-mass down
   to the cap (add);
   the lower bound drops it.  (``epoch_power``: each partial sum is also cut to a window of a
   few dozen sd about its mean, by Chernoff bounds of 1e-60 whose mass is charged the same way.)
4. **One epoch on the loss grid**: the lattice atoms (loss log(sh/t) or its negative) are put
   on the pipeline's grid by connect-the-dots (upper) and the convex-order minorant of the bin
   atoms (lower) -- the same orders as stage 1.
5. **E epochs** by the pipeline's stages 2-3 (tilt, one FFT power with its round-off and
   wrap-around charges) and read off by ``queries``.

A run of T steps that is not a whole number of epochs ends with the first r = T mod t steps of
an epoch: the r-step allocation subsampled at rate r/t, composed after the floor(T/t) whole
epochs (``epoch_runs``).  (k > 1 brackets it -- dropping outputs is post-processing, so ceil(T/t)
epochs bound it above and floor(T/t) epochs below --, and so do curves at the checkpoints inside
an epoch they have no work left to compose, ``samplers.curve``.)

Start values of the refinement (kept where no grid can be built, e.g. sigma ~ 0.3): above, the
Gaussian mechanism per epoch (every epoch is a mixture of Gaussian mechanisms); below, the sum
of each epoch's outputs (``_sum_statistic_eps``).

**k > 1** (each example in k of the t steps of an epoch, k dividing t; ``selected=k``): the
upper bound is that of k E epochs of 1-of-(t/k) allocation -- the decomposition of Feldman &
Shenfeld's PLD method (arXiv 2602.17284; pld-accounting computes k > 1 the same way).  Its
idea, for gradients fixed in advance: a uniform k-subset of the t steps is the block allocation
(one uniform step in each of k blocks of t/k) under a uniformly random relabelling of the steps,
which leaves Q unchanged, so by joint convexity every hockey-stick divergence of the k-subset
pair is at most the block pair's, and the block pair is k independent 1-of-(t/k) allocations
(for adaptive steps the reduction is Feldman & Shenfeld's, as for k = 1 the dominating pair).
The lower bound is the larger of ``selected_lower`` (a statistic of each epoch: its steps'
likelihood ratios summed on a lattice; MNIST, k = 2: [5.1248, 5.1579]) and ``_sum_statistic_eps``
(the epoch's output sum, N(k, t sigma^2) against N(0, t sigma^2)); ``accuracy`` applies to the
decomposition's own interval.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..._kernels.pld import allocation as ka
from ..._failures import GridFailure, GridTooLarge
from ..._types import Bounds
from ..._validation import check_accuracy, check_delta, check_epsilon, check_positive_int
from ..._work import PER_BIN_DISCRETISE, charge
from ..common import STEP_CACHE, U, Beside, cache_put, refine_levels, resolved, within
from ..grid.composition import eps_groups, recentred
from ..grid.onestep import OneStep
from . import epoch_add, epoch_tail, selected_lower
from .epoch_runs import PartialEpoch, delta_bounds, eps_bounds
from .epoch_gauss import (_gauss_delta, _gauss_eps, _sum_statistic_eps, accountant_eps_lower, noiseless,
                          poisson_delta_guess, poisson_guess)
from .epoch_grid import (BUDGET, FINE_STEP_LATTICE, MAX_GRID, SAME_TOP, TILTED_LOWER_TAIL, _lattice, _loss_step,
                         first_tops, second_top)
from .epoch_power import CELL_UNITS, LOWER_CELL_REL, Shifted, Windows, _lower_power, _upper_power, lower_shift

#: Cost of a refinement level over the one before: the lattice spacing falls by sqrt 2, its size limit
#: doubles and the loss step halves (``refine_levels`` stops when the next would overrun).
LEVEL_GROWTH = 3.0
#: δ(eps) at most this is not refined further (the lattice's lower law cannot resolve it, and its
#: upper end sits at the truncation's charge: sigma 3.19, t 886, 24 epochs, eps 4.4 and 9.9 took
#: six levels, 12 s, to stay at [0, 7.2e-58])
DELTA_FLOOR = 1e-50
#: A level whose interval is wider than this fraction of the last one's ends the refinement: one can
#: gain ~25 % before the next halves it (sigma 0.422, t 2, 55 epochs: 1.68e-3, 1.27e-3, 7.0e-4)
STALL = 0.8


def _window(part, C: int, shift: int = 0):
    """(first, entries, count): a power's (offset, entries), moved up by ``shift`` lattice entries and
    cut to the lattice 0 .. C-1, as its entries from the first non-zero one to the last (a copy:
    zeros elsewhere), and the count of its non-zero entries."""
    o, y = part
    o += shift
    y = y[:max(0, C - o)]
    nz = np.flatnonzero(y)
    if not nz.size:
        return 0, np.zeros(0), 0
    return o + int(nz[0]), y[nz[0]:nz[-1] + 1].copy(), int(nz.size)


class Epoch:
    """The Q-law of one epoch's S on the lattice s h (s = 0..C-1), both bounds, and the masses
    charged by truncation.  Built once per (sigma, t, lattice) and kept in the one-step cache
    (``epoch``): a calibration or a curve asks for the same epoch many times."""

    __slots__ = ("t", "h", "C", "up", "lo", "eta", "rho", "p_inf_remove", "ladder", "q_out", "q_over", "q_cut", "span",
                 "w_max", "_steps", "s", "_wu", "_rungs", "p_out", "p_cut", "up_o", "lo_o", "_wins")

    def __init__(self, sigma: float, t: int, h: float, w_max: float, cap: float, tail: float = 0.0):
        tilted_lower = tail < TILTED_LOWER_TAIL
        s = 1.0 / sigma
        K = max(2, int(math.ceil(w_max / h)))
        w_max = K * h
        C = max(K + 1, int(math.ceil(cap / h)) + 1)
        charge(CELL_UNITS[0] * K)  # (the cells of both laws: CDF differences, and Newton for the lower's)
        wu, wl = epoch_tail.upper_law(s, h, K), np.empty(K + 1)
        m, c0 = lower_shift(s, h, t)  # (the lower law on c0 + j h: its power's entry J is S = (J + m) h)
        eta, rho, calls = ka.w_lower(s, h, K, float(LOWER_CELL_REL * h), c0, wl)
        charge(CELL_UNITS[1] * calls)
        self.eta, self.rho = float(eta), float(rho)
        self.t, self.h, self.C = t, h, C
        # (every partial sum cut to its window, ``epoch_power``: what the cuts remove is charged
        # below; each lattice is kept as its non-zero entries, ``_window``)
        wins = Windows(wu, h, t, C)
        # (the lower on a second core; untilted where its flat round-off floor holds at most ``tail``
        # of mass in all, else the tilted powers count too: a heavy-tailed W's δ is set far below the
        # floor -- sigma 0.7, t 20, δ 1e-5 read [3.6226, 3.6845] with the floor, [3.6768, 3.6845] tilted)
        lower = Beside("epoch-lower", _lower_power, wl, t, C, h, s, tilted_lower, Shifted(wins, m, t),
                       0.0 if tilted_lower else tail, m)
        # meanwhile, the upper (round-off added) and what it charges (module notes, steps 2 and 3):
        # "S > cap" (cap = C - 1 lattice steps) by Chernoff on the spread's lattice law -- past 1000
        # budgets at finite losses (``over_ladder``: sigma 0.45, t 1065, 10 epochs, δ 5.9e-9 charged
        # 6.1e-10 an epoch at +inf, and its upper end was the Gaussian's 64.0 for [11.96, ...]) --;
        # "some other W_i > W_max" by the union bound (the example's own: on the grid, ``epoch_tail``)
        def upper_side():
            over = epoch_tail.over_cap(wu, h, t, (C - 1) * h, w_max, s, tail)
            big = over[0] > 1e3 * tail
            ladder = epoch_tail.over_ladder(wu, h, t, (C - 1) * h, w_max, s, over[0], tail, over[1]) if big else None
            return _window(_upper_power(wu, t, C, h, s, tilted_lower, wins), C), over, ladder

        # each lattice as its entries from the first non-zero one to the last, ``up`` from entry
        # ``up_o`` (``lo``, ``lo_o``), zeros elsewhere: a light tail's windows keep 2e5 of 7e6 entries
        # (sigma 10, t 10^4); ``span``, the upper's non-zero entries
        (self.up_o, self.up, self.span), (p_over, q_over), self.ladder = lower.alongside(upper_side)
        # (the lower: round-off taken off; moved up by m entries, S's lattice)
        self.lo_o, self.lo, _ = _window(lower.result(), C, m)
        p_cut, q_cut = wins.charge(t)
        p_out = epoch_tail.four_above(s, t, w_max)  # (two, three above: on the grid, ``epoch_tail._two_above``)
        q_out = t * math.exp(ka.log_sf(w_max, s, 0.0))
        # (the P-mass of S outside the kept lattice: ``epoch_tail.add_tail``)
        self.p_out = min(1.0, (p_over + p_cut) * (1 + 1e-9))
        self.p_cut = min(1.0, p_cut * (1 + 1e-9))
        p_over = 0.0 if self.ladder is not None else p_over
        self.p_inf_remove = min(1.0, (p_out + p_over + p_cut) * (1 + 1e-9))
        self.q_out, self.q_over = min(1.0, q_out * (1 + 1e-9)), min(1.0, q_over * (1 + 1e-9))
        self.q_cut = q_cut
        self.w_max, self.s, self._wu, self._rungs, self._wins = w_max, s, wu, {}, wins
        self._steps = {}

    def tail_rungs(self, shifted: bool):
        """The rungs of ``epoch_tail``'s bound on the other coordinates' sum (kept)."""
        if shifted not in self._rungs:
            self._rungs[shifted] = epoch_tail.rungs(self._wu, self.h, self.t - 1, self.w_max, shifted, self.s)
        return self._rungs[shifted]

    def one_step(self, add: bool, step: float, tail: float) -> OneStep:
        """One direction on the loss grid of spacing ``step`` (module notes, step 4), kept."""
        key = (add, step, tail)
        one = self._steps.get(key)
        if one is None:
            one = self._steps[key] = self._one_step(add, step, tail)
        return one

    def _one_step(self, add: bool, step: float, tail: float) -> OneStep:
        t, h = self.t, self.h
        n_s = self.C
        # the grid: from where the lower bound's first-measure mass exceeds ``tail`` (remove: the
        # mass below moves up pessimistically) to the top atom; add: the whole lattice
        up_o, up, small = self.up_o, self.up, None
        if add:
            # the top: where the upper bound's Q-mass below S (loss above) passes ``tail``; what
            # lies beyond goes to +inf (``lattice_bins``).  A grid out to log(t / h) carried the
            # spread's far floor (~1e-17 at loss 7-13), which kept the composition's tilt small
            # and its upper bound wide (sigma 10, t 1000, 200 epochs, delta 1e-12: 1.12 for 0.087)
            lo_l = -math.log((n_s - 1) * h / t)
            up_o, up, small, x_top = epoch_add.add_law(up, up_o, n_s, h, self.s, t, tail)  # (``epoch_add.small_sums``)
            hi_l = math.log(t / x_top)
        else:
            # (from the first non-zero entry: the zeros before it add exactly 0 to every prefix sum)
            a0 = self.lo_o
            cum = np.cumsum(self.lo * (np.arange(a0, a0 + self.lo.size) * (h / t)))
            k = int(np.searchsorted(cum, tail))
            i0 = a0 + k if k < cum.size else n_s  # (tail > 0: never within the zeros before a0)
            i0 = min(max(i0, 1), n_s - 1)
            lo_l = math.log(i0 * h / t)
            r = self.tail_rungs(False)[0]
            hi_l = max(math.log((n_s - 1) * h / t), epoch_tail.top_loss(self.s, t, tail, float(r[min(11, r.size - 1)])))
        j_lo = math.floor(lo_l / step) - 1
        j_hi = math.ceil(hi_l / step) + 1
        n = j_hi - j_lo + 1
        if n > MAX_GRID:
            raise GridTooLarge("too many loss bins for one epoch")
        # (the two lattice passes onto the grid: a log and an exp for each non-zero entry; and 2 a
        # lattice entry, as when the passes also tested the zeros around them: the planner's counts,
        # and so its answers, stay as measured)
        charge(PER_BIN_DISCRETISE * (n + 2 * self.span) + 2 * n_s)
        pess, frac, amass = np.empty(n), np.empty(n), np.empty(n)
        # upper: the spread's power (its error already added); lower: the cells' power (minus
        # its error), every atom moved against the bound by t eta (remove: down, add: up)
        p_inf = ka.lattice_bins(up, int(up_o), 0.0, h, 0.0, t, step, j_lo, n, add, True, pess, amass)
        if small is not None:
            p_inf += epoch_add.place_atoms(small[2], small[3], t, step, j_lo, n, pess)
        # (and scaled by 1 -+ rho: the cells' means are within rho relative, ``w_lower``; 4u
        # more covers the rounding of the product, so the scaled spacing errs against the bound)
        shift = t * self.eta * (1 + 1e-9) * (1.0 if add else -1.0)
        h_lo = h * (1.0 + self.rho + 4 * U) if add else h * (1.0 - self.rho - 4 * U)
        top = ka.lattice_bins(self.lo, int(self.lo_o), 0.0, h_lo, shift, t, step, j_lo, n, add, False, frac, amass)
        if add:
            # truncated Q-mass (module notes, steps 2-3): "some W_i > W_max", S = W_i + R, by the
            # others' sum R's lower tail (``epoch_add.place_out``); S > cap beyond the lattice, its
            # add loss below log(t / cap): on the grid point at or above (rounded up: pessimistic)
            p_inf += epoch_add.place_out(self.q_out, self.w_max, self._wins, t, step, j_lo, n, pess)
            i = math.ceil(-math.log((n_s - 1) * h / t) / step) - j_lo
            pess[min(max(i, 0), n - 1)] += self.q_over * (1 + 1e-12)
            p_inf += self.q_cut  # (the windows' cuts: at +inf, ``epoch_power``)
        else:
            p_inf += self.p_inf_remove + epoch_tail.add_tail(self, step, j_lo, n, pess, frac, amass, tail)
            if self.ladder is not None:
                p_inf += epoch_tail.place_ladder(self.ladder, t, step, j_lo, pess)
        return OneStep(j_lo, pess, min(p_inf, 1.0), step, frac, amass, top)


def epoch(sigma: float, t: int, h: float, w_max: float, cap: float, tail: float = 0.0) -> Epoch:
    """The ``Epoch`` of these parameters for truncation budget ``tail``, from the one-step cache
    when it is there."""
    key = ("allocation", sigma, t, h, w_max, cap, tail)
    hit = STEP_CACHE.get(key)
    if hit is None:
        hit = Epoch(sigma, t, h, w_max, cap, tail)
        cache_put(key, hit)
    return hit


def _check(sigma, steps_per_epoch, steps, accuracy):
    """Validated (sigma, t, T, accuracy): scalars only."""
    if isinstance(sigma, (str, bytes, bool)):
        raise ValueError(f"sigma must be a number > 0, got {sigma!r}")
    try:
        sigma = float(sigma)
    except (TypeError, ValueError):
        raise ValueError(f"sigma must be a number > 0, got {sigma!r}") from None
    if not sigma >= 0:
        raise ValueError(f"sigma must be a number >= 0 (+inf allowed), got {sigma!r}")
    t = check_positive_int(steps_per_epoch, "steps_per_epoch")
    try:
        T = int(steps)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"steps must be an integer >= 0, got {steps!r}") from None
    if T < 0 or T != steps:
        raise ValueError(f"steps must be an integer >= 0, got {steps!r}")
    return sigma, t, T, check_accuracy(accuracy)


def _selected(selected, t: int) -> int:
    k = check_positive_int(selected, "selected")
    if k > t or t % k:
        raise ValueError(f"selected (k) must divide steps_per_epoch ({t}); got {k}")
    return k


def epsilon(sigma: float, steps_per_epoch: int, steps: int, delta: float, *, accuracy: float = 1e-3,
            selected: int = 1) -> Bounds:
    """Certified bounds on ε(δ) of DP-SGD with balls-in-bins batches (random allocation, each example
    in ``selected`` = k of the t steps of every epoch; k = 1 by default).

    Parameters
    ----------
    sigma : float
        Noise multiplier, >= 0 (0 and +inf in closed form, ``epoch_gauss``).
    steps_per_epoch : int
        t, the number of batches per epoch (each example is in exactly one of them; the batch
        fraction is 1/t).
    steps : int
        T, the steps in all; a partial last epoch (T mod t steps) is composed as it is
        (``epoch_runs``; for k > 1 bounded by whole epochs on either side).
    delta : float
        Target δ in (0, 1).
    accuracy : float, optional
        Target relative width ``upper - lower <= accuracy * upper``; the lattice and the loss
        grid are refined until it is met or a few seconds are spent.
    selected : int, optional
        k, the steps of an epoch each example is in (a divisor of t; default 1).  For k > 1 the
        upper bound is the decomposition's and the lower a loose one (module notes), so the
        interval is wide; ``accuracy`` then applies to the decomposition.

    Returns
    -------
    Bounds
        ``lower <= ε <= upper`` under add/remove adjacency (the larger direction), both
        certified (module notes); ``met`` says whether the interval is within ``accuracy``
        (k > 1, above all with a partial last epoch, can leave it wider).

    Examples
    --------
    MNIST, 60 epochs of 234 batches at σ = 1.1:

    >>> from sgmfast.pld import allocation
    >>> b = allocation.epsilon(1.1, 234, 60 * 234, 1e-5)
    >>> 2.33 < b.lower <= b.upper < 2.35 and b.met
    True
    """
    sigma, t, T, accuracy = _check(sigma, steps_per_epoch, steps, accuracy)
    b = _epsilon(sigma, t, T, float(check_delta(delta)), accuracy, selected)
    return dataclasses.replace(b, met=bool(within(b.lower, b.upper, accuracy * (1 + 1e-9))))


def _epsilon(sigma: float, t: int, T: int, delta: float, accuracy: float, selected: int) -> Bounds:
    k = _selected(selected, t)
    e_hi, e_lo = -(-T // t), T // t
    if e_hi == 0 or sigma == math.inf:  # (no epoch touched, or pure noise)
        return Bounds(0.0, 0.0)
    if sigma == 0.0:  # (no noise: closed form)
        e = noiseless("epsilon", t, k, T, delta)
        return Bounds(e, e)
    if k > 1:  # (module notes: the decomposition above, the sum statistic below)
        up = float(epsilon(sigma, t // k, k * e_hi * (t // k), delta, accuracy=accuracy).upper)
        lo = max(float(accountant_eps_lower(sigma * math.sqrt(t) / k, e_lo, delta)),
                 selected_lower.epsilon_lower(sigma, t, k, e_lo, delta, up))  # (its module notes)
        return Bounds(min(lo, up), up)
    gauss = _gauss_eps(sigma, e_hi, delta)
    if t == 1:  # every epoch is the Gaussian mechanism
        return Bounds(_gauss_eps(sigma, e_lo, delta, lower=True) if e_lo else 0.0, gauss)
    # the truncation's P-mass budget, taken to its decade: nearby queries share the epoch
    tail = _tail_decade(accuracy * delta / e_hi)
    centre = [poisson_guess(sigma, t, T, delta)]  # the tilt target, re-centred on the answer
    add_cap = epoch_add.eps_upper(sigma, t, e_hi, delta)

    capped = []  # (the upper ends with the add direction capped: intersected at the end)

    def evaluate(epoch, step, part):
        return _tilted(lambda eps_c: eps_bounds(epoch, step, e_hi, e_lo, eps_c, tail, delta, add_cap, capped, part),
                       centre, narrow, e_hi)

    def narrow(lo, up):
        return within(lo, up, accuracy)

    lo0 = _sum_statistic_eps(sigma, t, e_lo, delta)
    attempt = _levels(sigma, t, accuracy, lambda: tail, evaluate, lambda: centre[0], e_hi, narrow, T - e_lo * t)
    lo, up = refine_levels(attempt, narrow, lo0, gauss, BUDGET, growth=LEVEL_GROWTH, stall=STALL)
    up = min(up, *capped) if capped else up
    return Bounds(float(min(lo, up)), float(up))


def delta(sigma: float, steps_per_epoch: int, steps: int, epsilon: float, *, accuracy: float = 1e-3,
          selected: int = 1) -> Bounds:
    """Certified bounds on δ(ε) of DP-SGD with balls-in-bins batches (random allocation, k of t).

    ``epsilon`` may be a float or a 1-D array (one composition serves them all); the other
    parameters are as in :func:`epsilon`.  Refined, as ``pld.delta``, until every interval is no
    wider than the change of δ caused by a relative change ``accuracy`` of ε (its lower end at ε
    at least the upper at ε (1 + accuracy), ``common.resolved``), or than ``accuracy`` / 1000
    of δ, or the time budget is spent; certified either way."""
    sigma, t, T, accuracy = _check(sigma, steps_per_epoch, steps, accuracy)
    eps = np.atleast_1d(check_epsilon(epsilon)).astype(np.float64)
    scalar = np.ndim(epsilon) == 0
    k = _selected(selected, t)
    e_hi, e_lo = -(-T // t), T // t
    if sigma == math.inf or sigma == 0.0:  # (pure noise; no noise: closed form)
        lo, up = noiseless("delta", t, k, T, eps) if sigma == 0.0 else (np.zeros(eps.size), np.zeros(eps.size))
        return Bounds(float(lo[0]), float(up[0])) if scalar else Bounds(lo, up)
    if k > 1 and e_hi:  # (module notes)
        up = np.asarray(delta(sigma, t // k, k * e_hi * (t // k), eps, accuracy=accuracy).upper,
                        dtype=np.float64).reshape(-1)
        lo = _gauss_delta(sigma * math.sqrt(t) / k, e_lo, eps)[0] if e_lo else np.zeros(eps.size)
        lo = np.minimum(np.maximum(lo, selected_lower.delta_lower(sigma, t, k, e_lo, eps, float(eps.max()))), up)
        return Bounds(float(lo[0]), float(up[0])) if scalar else Bounds(lo, up)

    def out(lo, up):
        lo, up = np.minimum(lo, up), up
        return Bounds(float(lo[0]), float(up[0])) if scalar else Bounds(lo, up)

    if e_hi == 0:
        return out(np.zeros(eps.size), np.zeros(eps.size))
    if t == 1:
        g_lo = _gauss_delta(sigma, e_lo, eps)[0] if e_lo else np.zeros(eps.size)
        return out(g_lo, _gauss_delta(sigma, e_hi, eps)[1])
    g_up = _gauss_delta(sigma, e_hi, eps)[1]
    far = g_up <= DELTA_FLOOR
    if far.any() and not far.all():  # (eps whose Gaussian bound is below the floor: alone, at once)
        # (one composition serves nearby eps; with eps 515 beside eps 1.4 and 1.4e-4 its tilts and
        # lattice had to span both: 10.2 units, 26 s, and looser ends than 5.6 units without it)
        lo, up = np.zeros(eps.size), g_up.copy()
        near = delta(sigma, t, T, eps[~far], accuracy=accuracy)
        lo[~far] = np.asarray(near.lower, dtype=np.float64).reshape(-1)
        up[~far] = np.asarray(near.upper, dtype=np.float64).reshape(-1)
        return out(lo, up)
    n = eps.size
    eps = np.concatenate((eps, eps * (1.0 + accuracy)))  # (and each shifted by the accuracy: ``narrow``)
    gauss = _gauss_delta(sigma, e_hi, eps)[1]
    # tail cut: first from the Poisson run's δ at rate 1/t (a guess, about the answer), then
    # from the upper δ found (1e-4 accuracy of it); any cut is charged, so a guess is safe.  (A
    # fixed first scale of 1e-10 built MNIST's first lattice for tails 100 times smaller than
    # it needed: 2.6 work units where its ε query spends 0.9.)
    tail = [_tail_decade(accuracy * poisson_delta_guess(sigma, t, T, eps) / e_hi)]
    groups = eps_groups(eps)  # one tilt per group of nearby eps; the epoch lattice is shared

    add_cap = epoch_add.delta_upper(sigma, t, e_hi, eps)
    capped = []  # (the upper ends with the add direction capped: intersected at the end)

    def evaluate(epoch, step, part):
        up, lo = delta_bounds(epoch, step, e_hi, e_lo, eps, groups, tail[0], add_cap, capped, part=part)
        if e_hi > 1 and not narrow(lo, up):  # (a heavy tail: a stronger tilt too, as ``epsilon``)
            up2, lo2 = delta_bounds(epoch, step, e_hi, e_lo, eps, groups, tail[0], add_cap, capped, 2.0, part)
            up, lo = np.minimum(up, up2), np.maximum(lo, lo2)
        # (scaled to the answer as far as the lower end knows it: a coarse level's upper end can be
        # far above it -- sigma 0.4, t 2, eps 19.55: 7.6e-11 at level 0 for δ ~ 9.8e-13 -- and the
        # next lattice's truncations, charged at +inf, are budgeted from it)
        ref = np.maximum(lo, 1e-3 * up)
        pos = ref[ref > 0]
        if pos.size:
            tail[0] = max(1e-300, min(tail[0], 1e-4 * accuracy * float(pos.min()) / e_hi))
        return lo, up

    def narrow(lo, up):
        return bool(np.all(resolved(lo[:n], up[:n], up[n:], accuracy) | (up[:n] <= DELTA_FLOOR)))

    lo0 = _gauss_delta(sigma * math.sqrt(t), e_lo, eps)[0] if e_lo else np.zeros(eps.size)  # (the sum statistic)
    hint = float(np.min(eps[eps > 0])) if np.any(eps > 0) else math.inf  # (the loss step's scale)
    attempt = _levels(sigma, t, accuracy, lambda: tail[0], evaluate, lambda: hint, e_hi, narrow, T - e_lo * t)
    lo, up = refine_levels(attempt, narrow, lo0, gauss, BUDGET, growth=LEVEL_GROWTH, stall=STALL)
    for c in capped:
        up = np.minimum(up, c)
    return out(lo[:n], up[:n])


#: How close (relative) the tilt target must be to the interval's midpoint before the answer is kept
#: (``recentred``; 5 % elsewhere): sigma 1.2, t 300, 5 epochs, δ 1e-12 read [1.04431, 1.04720] at
#: the Poisson guess 1.079 (3 % off), [1.04431, 1.04579] at 1.045.
RECENTRE = 0.01


def _tilted(run, centre, narrow, epochs):
    """``recentred(run, centre, narrow)`` and, where that is not narrow, ``run`` again towards
    twice its upper end, each end the better (any tilt is sound): a heavy tail's δ is set far
    above its eps, and a tilt centred there charged the mass above its window -- sigma 0.641,
    t 912, 2 epochs, δ 1.1e-5: [1.1989, 1.2234] at 1.21, [1.1989, 1.1995] at 2.4.  Where still
    not narrow, once more towards LOW_TILT times its lower end."""
    lo, up = recentred(run, centre, narrow, close=RECENTRE)
    if not narrow(lo, up) and epochs > 1 and 0.0 < up < math.inf:
        lo2, up2 = run(2.0 * up)
        lo, up = max(lo, lo2), min(up, up2)
    if LOW_TILT and not narrow(lo, up) and epochs > 1 and 0.0 < lo < math.inf:
        lo2, up2 = run(LOW_TILT * lo)
        lo, up = max(lo, lo2), min(up, up2)
    return lo, up


#: The third tilt's target in the lower end (``_tilted``): sigma 1.2, t 300, 5 epochs, δ 1e-12
#: read [1.04429, 1.04575] tilted at the answer, [1.04429, 1.04516] at 0.9 of it (1.0: 1.04548).
LOW_TILT = 0.9


def _levels(sigma, t, accuracy, tail, evaluate, eps=lambda: math.inf, epochs=1, narrow=None, r=0):
    """``refine_levels``' attempts: level r evaluates on the r-th finer lattice and loss grid, the
    lattice cut at the truncation budget ``tail()`` of the moment, the loss step for the answer
    ``eps()`` guessed at the moment; level 0 on two tops (``first_tops``, then ``second_top``), the
    second only where the first's interval is not ``narrow``.  ``evaluate(epoch, step, part)``:
    ``part`` is the partial last epoch of ``r`` steps (``epoch_runs.PartialEpoch``; None for r = 0),
    its lattice an r-step epoch's on the same level and top."""
    tops = first_tops(epochs)
    tops_r = {}  # (a second top -> the partial epoch's: its one coordinate that alone makes its share of eps)

    def second():
        top = second_top(eps(), t, epochs)
        if r:
            x, p = min(eps() / math.sqrt(epochs), 700.0), r / t
            tops_r[top] = second_top(math.log((math.expm1(x) + p) / p), r, 1)
        return top

    def attempt(level):
        e0 = eps()  # (the loss step for the answer as guessed now)
        share = (epochs - 1 + r / t) / epochs if r else 1.0  # (a partial epoch: r/t of an epoch's variance)
        top_of = {}

        def grid_of(top):
            grid = _lattice(sigma, t, accuracy, tail(), level, BUDGET, top=top)
            top_of[grid] = top
            return grid

        def run(grid):  # (a long lattice's level not narrow: once more, the loss step a level finer)
            ep = epoch(sigma, t, *grid, tail()) if epochs > bool(r) else None  # (none for a partial epoch alone)
            part = None if not r else PartialEpoch(sigma, t, r, None if r == 1 else epoch(
                sigma, r, *_lattice(sigma, r, accuracy, tail(), level, BUDGET, top=tops_r.get(top_of[grid], top_of[grid])),
                tail()),
                _loss_step(sigma, r, accuracy, level, e0), e0)
            lo, up = evaluate(ep, _loss_step(sigma, t, accuracy, level, e0, share), part)
            if grid[2] / grid[0] >= FINE_STEP_LATTICE and narrow is not None and not narrow(lo, up):
                lo2, up2 = evaluate(ep, _loss_step(sigma, t, accuracy, level + 1, e0, share), part)
                lo, up = np.maximum(lo, lo2), np.minimum(up, up2)
            return lo, up

        return on_tops(tops, grid_of, run, lambda lo, up: float(np.max(np.asarray(up) - np.asarray(lo))), second,
                       narrow)

    return attempt


def on_tops(tops: list, grid_of, evaluate, width, second, done=None):
    """One level on each lattice top of ``tops`` (None: ``second()``, asked once the first top's
    evaluation has moved the answer): ``grid_of(top)`` its (h, W_max, cap), ``evaluate(grid)`` its
    (lo, up).  No top is evaluated after an interval ``done(lo, up)`` says is narrow, nor one whose
    W_max is above SAME_TOP times the first's; a failure after the first evaluation leaves the
    first's answer.  With two evaluated, ``tops`` keeps the one of the smaller ``width(lo, up)``
    for the levels after.  Returns the intersection (both certified)."""
    runs = []
    for k, top in enumerate(tops):
        if runs and done is not None and done(*runs[0][1]):  # (narrow already: no second lattice)
            break
        if top is None:  # (the second top, from the answer as the first evaluation left it)
            top = tops[k] = second()
        grid = grid_of(top)
        if runs and grid[1] > SAME_TOP * runs[0][0][1]:  # (about the same top: nothing more to try)
            break
        try:
            runs.append((grid, evaluate(grid)))
        except (GridFailure, ArithmeticError, MemoryError):
            if not runs:  # (the second top's failure leaves the first's answer)
                raise
            break
    if len(runs) > 1:  # (keep the top of the narrower interval for the levels after)
        tops[:] = [tops[int(np.argmin([width(lo, up) for _, (lo, up) in runs]))]]
    lo, up = runs[0][1]
    for _, (lo2, up2) in runs[1:]:
        lo, up = np.maximum(lo, lo2), np.minimum(up, up2)
    return lo, up


def _tail_decade(scale: float) -> float:
    """The truncation's P-mass budget, 1e-4 of ``scale`` (accuracy x δ / epochs) taken to its
    decade: nearby queries share the epoch."""
    return 10.0 ** math.floor(math.log10(max(1e-300, 1e-4 * scale)))
