"""Permutation shuffle: DP-SGD whose data loader shuffles the data every epoch and cuts it into
batches of a fixed size (``DataLoader(shuffle=True)``, Opacus ``poisson_sampling=False``, TF/JAX
input pipelines).  Certified bounds that provably hold for that sampler -- a sound but loose
interval: nothing tight is proved for it (Chua et al., ICML 2024 and NeurIPS 2024, show its ε
can lie well above Poisson's).  For tight accounting run a sampler that has a tight analysis:
Poisson (``sampler="poisson"``) or balls-in-bins (``sampler="balls_in_bins"``; ``integrations.torch``
has loaders for both).

The run: t batches per epoch (q = 1/t), T steps; epoch e is a uniformly random permutation of the
n = t b examples cut into t batches of b, independently of the other epochs; every step adds
N(0, sigma^2 C^2 I) to the sum of the batch's gradients clipped to norm C.

Relations (the dataset size, and so the batching, stays the same):

* ``"zero_out"`` (default): one example is replaced by a record whose clipped gradient is zero
  (Kairouz et al., ICML 2021; the relation Chua et al. analyse the shuffle under).  A batch sum
  moves by at most C.  (Add/remove is not analysed: one more example shifts the batch boundaries
  of the whole permutation.)
* ``"replace_one"``: one example replaced by any other; a batch sum moves by at most 2 C.

**Upper bound.**  Condition on the permutations of all epochs (the same for both datasets: they
do not depend on the data).  Then each epoch uses the differing example in exactly one step, and
the run is an adaptive composition of Gaussian mechanisms in which only those steps have a
non-zero sensitivity c C (c = 1 zero-out, 2 replace-one): given the past, every other step has
the same output law under both datasets.  An adaptive composition of Gaussian mechanisms with
sensitivities Delta_i is mu-GDP with mu^2 = sum Delta_i^2 / (sigma C)^2 (Dong, Roth & Su, JRSS-B
2022, Cor. 3.3), so every conditional pair is dominated by the Gaussian mechanism with
mu = c sqrt(E) / sigma, E = ceil(T / t) the epochs the run touches; mixing the conditional pairs
over the permutations with the same weights cannot raise a hockey-stick divergence (joint
convexity).  So δ(ε) <= δ_G(ε; mu).  This holds for any batch sizes within an epoch, so also
with a partial last batch (``drop_last=False``) and with examples dropped (``drop_last=True``):
all that is used is that an example is in at most one batch per epoch.

**Lower bound.**  An explicit pair of neighbouring datasets, one clipping-norm coordinate
(Chua et al., ICML 2024, Sec. 4): every other example's gradient is -C, the target's +C, and in
the neighbour the target is replaced by the zero record (zero-out) or by a -C record
(replace-one).  After subtracting the known sum -b C of a batch of others, an epoch's t outputs
(in units of sigma C) are

    P = (1/t) sum_j N(a e_j, I_t),   Q = (1/t) sum_j N(b e_j, I_t),

a = 2 / sigma, b = 1 / sigma (zero-out) or 0 (replace-one), j the target's batch, uniform:
with fixed batch sizes the others fill every slot, so the target's batch stands out.  Every
post-processing of the outputs gives a lower bound (data processing); two are used and the
larger kept:

1. the epoch's maximum M = max_i y_i, whose CDF is Phi(x - m) Phi(x)^(t-1) (m = a or b), binned
   on a uniform x grid (binning is post-processing too).  Each bin's P-mass is rounded down and
   its Q-mass up by a bound on their rounding, its loss rounded down onto the loss grid; dropped
   tail bins only lower δ.  E = floor(T / t) whole epochs of that binned pair are composed by
   the pipeline's optimistic path (``composition.compose_repeated`` with ``pess=False``), both
   directions;
2. the sum of an epoch's outputs, N(a, t) against N(b, t): E Gaussian mechanisms with
   mu = (a - b) / sqrt(t).

The lower bound assumes n is a multiple of the batch size (t whole batches, every example in
one); a partial last epoch is left out of it (dropping outputs is post-processing).  For t = 1
both bounds are the Gaussian mechanism's, exact.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import log_ndtr

from ..._failures import GridFailure, WorkLimit
from ..._types import Bounds
from ..._work import at_most
from ..common import ADD, REMOVE, U
from ..grid.composition import compose_repeated, repeated_delta
from ..certifiers import exact
from ..grid.queries import eps_bound
from .epoch_gauss import noiseless

__all__ = ["RELATIONS", "epsilon", "delta", "upper_epsilon", "wide"]

RELATIONS = ("zero_out", "replace_one")
#: bins of the maximum's x grid (the binned pair's δ is within ~1e-4 of the maximum's own)
X_BINS = 4096
#: log-mass below which a tail of the maximum's law is left out (left out: δ only falls)
LOG_TAIL = -92.0
#: relative width above which an interval is reported as wide (API warning text, CLI note)
WIDE = 0.05
#: Work (seconds of ``_work`` units) the maximum's compositions may spend for one lower bound; past
#: it the bounds found so far stand (sigma 0.05, t 2, 1650 steps, replace-one: 16 compositions of
#: 1.3e7 bins, 21 units a δ, for a lower end a factor 2 below the upper)
LOWER_WORK = 2.0


def _pairs(sigma: float, relation: str) -> list:
    """[(a, b)]: the target's mean in its batch under the two datasets, in units of sigma C, of
    each pair tried.  A zero-out neighbour is a replace-one neighbour too (the zero record is a
    record), so replace-one tries both."""
    zero_out = (2.0 / sigma, 1.0 / sigma)
    return [zero_out] if relation == "zero_out" else [zero_out, (2.0 / sigma, 0.0)]


def _sum_mu(sigma: float, t: int, relation: str) -> float:
    """mu of one epoch's output sum, N(a, t) against N(b, t): the largest a - b over the pairs."""
    return max(a - b for a, b in _pairs(sigma, relation)) / math.sqrt(t)


def _gauss(sigma_eff: float, count: int):
    """The closed form of ``count`` Gaussian mechanisms with noise multiplier ``sigma_eff``."""
    return exact.closed_form([(sigma_eff, 1.0, count)], "add_remove")


def _upper_form(sigma: float, epochs: int, relation: str):
    c = 2.0 if relation == "replace_one" else 1.0
    return _gauss(sigma / c, epochs)


def _log_cdf(x: np.ndarray, m: float, t: int) -> np.ndarray:
    """log P(max_i y_i <= x) with one coordinate N(m, 1) and t - 1 standard normal."""
    return log_ndtr(x - m) + (t - 1) * log_ndtr(x)


def _x_edges(a: float, b: float, t: int) -> np.ndarray:
    """Bin edges of the maximum covering all but e^LOG_TAIL of both laws at each end."""
    def solve(f, lo, hi):  # f increasing; the x where f crosses LOG_TAIL
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if f(mid) < LOG_TAIL:
                lo = mid
            else:
                hi = mid
        return lo
    # low end: the larger CDF (the smaller mean, b) is below e^LOG_TAIL; high end: both survivals
    x_lo = solve(lambda x: float(_log_cdf(np.array([x]), b, t)[0]), -60.0, 60.0)
    x_hi = max(a, b) + math.sqrt(-2.0 * LOG_TAIL + 2.0 * math.log(t)) + 1.0
    return np.linspace(x_lo, x_hi, X_BINS + 1)


def _bin_masses(edges: np.ndarray, m: float, t: int):
    """(mass, relative error bound) of each bin of the maximum's law with mean m.

    A bin's mass is the difference of the CDF (below the median) or of the survival function
    (above) at its edges, both from log-CDFs: log_ndtr has a relative error of a few u, so
    log F(x) = log Phi(x - m) + (t - 1) log Phi(x) is within ~8u (|log F| + 1) absolutely, and a
    difference F(b) - F(a) = F(b) (1 - e^{log F(a) - log F(b)}) within that error over
    |log F(b) - log F(a)| relatively (the same for the survival side).  The bound returned is 64
    times that estimate (and at least 1e-12)."""
    lf = _log_cdf(edges, m, t)
    ls = np.log(-np.expm1(np.minimum(lf, -1e-300)))  # log survival (lf < 0 strictly)
    lo_side = lf[1:] <= math.log(0.5)
    with np.errstate(divide="ignore", invalid="ignore"):
        d_f = lf[1:] - lf[:-1]
        d_s = ls[:-1] - ls[1:]
        mass_f = np.exp(lf[1:]) * -np.expm1(-d_f)
        mass_s = np.exp(ls[:-1]) * -np.expm1(-d_s)
        err_f = 8 * U * (np.abs(lf[1:]) + np.abs(lf[:-1]) + 1.0) / d_f
        err_s = 8 * U * (np.abs(ls[1:]) + np.abs(ls[:-1]) + 1.0) / d_s * 4.0
    mass = np.where(lo_side, mass_f, mass_s)
    err = np.maximum(64.0 * np.where(lo_side, err_f, err_s), 1e-12)
    bad = ~(np.isfinite(mass) & np.isfinite(err) & (mass > 0) & (err < 0.5))
    return np.where(bad, 0.0, mass), np.where(bad, 1.0, err)


class MaxEpoch:
    """One epoch of the maximum statistic, binned, as the optimistic (lower-bound) array of one
    direction on the loss grid of spacing ``step``: the interface of ``onestep.OneStep`` that the
    composition reads (``j_lo``, ``masses(False)``, ``p_inf``)."""

    __slots__ = ("j_lo", "_opt", "p_inf")

    def __init__(self, a: float, b: float, t: int, add: bool, step: float):
        edges = _x_edges(a, b, t)
        p, ep = _bin_masses(edges, a, t)
        q, eq = _bin_masses(edges, b, t)
        if add:  # the other direction: Q against P
            p, ep, q, eq = q, eq, p, ep
        p_lo = p * (1.0 - ep)
        q_hi = q * (1.0 + eq)
        keep = (p_lo > 0) & (q_hi > 0)
        p_lo, q_hi = p_lo[keep], q_hi[keep]
        loss = np.log(p_lo) - np.log(q_hi)
        # the loss rounded down onto the grid (losses are then smaller: δ only falls)
        j = np.floor(loss / step)
        j -= (j * step > loss - 4 * U * (np.abs(loss) + 1.0))
        j = j.astype(np.int64)
        self.j_lo = int(j.min())
        self._opt = np.bincount(j - self.j_lo, weights=p_lo * (1.0 - 4 * U)).astype(np.float64)
        self.p_inf = 0.0

    @property
    def pess(self) -> np.ndarray:
        """The same array: read only by the tilt heuristic (``composition.parts_theta``)."""
        return self._opt

    def masses(self, pess: bool) -> np.ndarray:
        if pess:
            raise TypeError("MaxEpoch is a lower-bound array only")
        return self._opt


def _step(eps_scale: float, epochs: int, accuracy: float) -> float:
    """Loss-grid spacing for the maximum's composition: its rounding costs about
    step sqrt(E) of ε; kept to a few thousand points per epoch."""
    return max(min(0.05, 0.5 * accuracy * max(eps_scale, 0.05) / math.sqrt(epochs)), 1e-4)


def _max_epochs(sigma, t, relation, step):
    """The maximum's binned epochs: every pair of the relation, both directions."""
    return [MaxEpoch(a, b, t, add, step) for a, b in _pairs(sigma, relation) for add in (REMOVE, ADD)]


def _lower_eps(sigma: float, t: int, epochs: int, delta: float, relation: str, accuracy: float,
               eps_scale: float) -> float:
    """The larger of the two statistics' lower bounds on ε(δ) over ``epochs`` whole epochs.  The
    maximum's composition is tilted towards a guess of its answer (any tilt is certified; a far
    one only loosens the bound) and composed again at the answer while that moves by > 5 %."""
    low = float(exact.eps_bounds(_gauss(1.0 / _sum_mu(sigma, t, relation), epochs), delta)[0])
    step = _step(eps_scale, epochs, accuracy)
    tail = 1e-3 * accuracy * delta
    try:  # (within LOWER_WORK: past it, as on a failure, the bounds found so far stand)
        with at_most(LOWER_WORK):
            for one in _max_epochs(sigma, t, relation, step):
                centre = math.sqrt(max(low, 1e-3) * eps_scale) if math.isfinite(eps_scale) else max(2 * low, 1.0)
                for _ in range(5):
                    found = eps_bound(compose_repeated(one, epochs, step, centre, tail, False), delta)
                    low = max(low, found)
                    if abs(found - centre) <= 0.05 * max(found, 1e-3):
                        break
                    # re-centred on what was found (a bound of 0: the tilt was far above the answer)
                    centre = found if found > 0 else 0.25 * centre
    except WorkLimit:  # (an enclosing meter's: it goes on)
        raise
    except (ArithmeticError, MemoryError, GridFailure):
        pass
    return float(low)


def _lower_delta(sigma: float, t: int, epochs: int, eps: np.ndarray, relation: str, accuracy: float,
                 eps_scale: float) -> np.ndarray:
    low = exact.delta_bounds(_gauss(1.0 / _sum_mu(sigma, t, relation), epochs), eps)[0]
    step = _step(max(eps_scale, float(eps.max())), epochs, accuracy)
    groups = [np.arange(eps.size)] if eps.size == 1 else np.array_split(np.argsort(eps), min(8, eps.size))
    try:  # (as ``_lower_eps``)
        with at_most(LOWER_WORK):
            for one in _max_epochs(sigma, t, relation, step):
                low = np.maximum(low, repeated_delta(one, epochs, step, eps, groups, 1e-300, False))
    except WorkLimit:
        raise
    except (ArithmeticError, MemoryError, GridFailure):
        pass
    return np.maximum(low, 0.0)


def _check_relation(relation: str) -> str:
    if relation not in RELATIONS:
        raise ValueError(f"relation must be one of {RELATIONS} for sampler 'shuffle'; got {relation!r}")
    return relation


def epsilon(sigma: float, steps_per_epoch: int, steps: int, delta: float, *, relation: str = "zero_out",
            accuracy: float = 1e-3) -> Bounds:
    """Certified bounds on ε(δ) of T steps with a permutation shuffle of t batches per epoch.

    Parameters
    ----------
    sigma : float
        Noise multiplier, >= 0.
    steps_per_epoch : int
        t, whole batches per epoch (q = 1/t).
    steps : int
        T, the steps in all.
    delta : float
        Target δ in (0, 1).
    relation : {"zero_out", "replace_one"}
        Neighbouring relation (module notes).
    accuracy : float
        Grid resolution of the lower bound (the interval itself is as wide as the sampler's
        analysis leaves it: see ``wide``).

    Returns
    -------
    Bounds
        ``lower <= ε <= upper`` (module notes: upper the Gaussian mechanism of the epochs,
        lower an explicit pair).

    Examples
    --------
    >>> from sgmfast.pld import shuffle
    >>> b = shuffle.epsilon(1.0, 2, 2, 1e-5)        # t = 2, one epoch: hardly any amplification
    >>> 4.3 < b.lower <= b.upper < 4.38
    True
    """
    t, T = int(steps_per_epoch), int(steps)
    relation = _check_relation(relation)
    e_hi, e_lo = -(-T // t), T // t
    if e_hi == 0 or sigma == math.inf:  # (no epoch touched, or pure noise)
        return Bounds(0.0, 0.0)
    if sigma == 0.0:  # (the target is used with chance min(1, T / t) and then seen exactly)
        e = noiseless("epsilon", t, 1, T, delta)
        return Bounds(e, e)
    up = upper_epsilon(sigma, t, T, delta, relation)
    if e_lo == 0:
        return Bounds(0.0, float(up))
    if t == 1:
        return Bounds(float(exact.eps_bounds(_upper_form(sigma, e_lo, relation), delta)[0]), float(up))
    lo = _lower_eps(sigma, t, e_lo, delta, relation, accuracy, up)
    return Bounds(float(min(lo, up)), float(up))


def delta(sigma: float, steps_per_epoch: int, steps: int, epsilon, *, relation: str = "zero_out",
          accuracy: float = 1e-3) -> Bounds:
    """Certified bounds on δ(ε) (``epsilon`` a float or 1-D array); parameters as :func:`epsilon`."""
    t, T = int(steps_per_epoch), int(steps)
    relation = _check_relation(relation)
    eps = np.atleast_1d(np.asarray(epsilon, dtype=np.float64))
    scalar = np.ndim(epsilon) == 0
    e_hi, e_lo = -(-T // t), T // t

    def out(lo, up):
        lo = np.minimum(lo, up)
        return Bounds(float(lo[0]), float(up[0])) if scalar else Bounds(lo, up)

    if e_hi == 0 or sigma == math.inf:  # (no epoch touched, or pure noise)
        return out(np.zeros(eps.size), np.zeros(eps.size))
    if sigma == 0.0:
        return out(*noiseless("delta", t, 1, T, eps))
    up = exact.delta_bounds(_upper_form(sigma, e_hi, relation), eps)[1]
    if e_lo == 0:
        return out(np.zeros(eps.size), up)
    if t == 1:
        return out(exact.delta_bounds(_upper_form(sigma, e_lo, relation), eps)[0], up)
    scale = float(exact.eps_bounds(_upper_form(sigma, e_hi, relation), 1e-5)[1])
    return out(_lower_delta(sigma, t, e_lo, eps, relation, accuracy, scale), up)


def upper_epsilon(sigma: float, steps_per_epoch: int, steps: int, delta: float, relation: str = "zero_out") -> float:
    """The upper end of :func:`epsilon` alone (what calibration needs): the Gaussian mechanism
    of the epochs the run touches."""
    e_hi = -(-int(steps) // int(steps_per_epoch))
    if e_hi == 0 or sigma == math.inf:  # (no epoch touched, or pure noise)
        return 0.0
    if sigma == 0.0:
        return noiseless("epsilon", int(steps_per_epoch), 1, int(steps), delta)
    return float(exact.eps_bounds(_upper_form(sigma, e_hi, _check_relation(relation)), delta)[1])


def wide(bounds: Bounds) -> bool:
    """Whether an interval is wider than ``WIDE`` relative to its upper end (somewhere)."""
    lo, up = np.asarray(bounds.lower, dtype=float), np.asarray(bounds.upper, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.where(up > 0, (up - lo) / np.where(up > 0, up, 1.0), 0.0)
    return bool(np.any(np.isinf(up) & ~np.isinf(lo)) or np.any(rel > WIDE))
