"""Eq. (25) and Appendix A.1 of Räisä et al.: the per-coordinate variance of the DP-SGD gradient
(subsampling + effective DP noise) and a batch-size planner built on it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._executor import check_executor
from .._progress import Progress
from .._validation import (
    as_float_array,
    check_delta,
    check_epsilon,
    check_positive,
    check_positive_int,
    check_q,
    check_sigma,
)


def variance_decomposition(sigma, q, grad_sq_sum, clipping_norm=1.0):
    """Per-coordinate variance of the DP-SGD gradient, Eq. (25) of Räisä et al. (ICML 2024).

    The gradient estimate is G = (G_q + C sigma eta)/q, with G_q the sum of the clipped
    per-example gradients of a Poisson batch (rate q). Per coordinate j:

    - subsampling variance (Appendix A.1, Eq. (55)): (1 - q)/q * sum_i g_ij^2;
    - effective DP-noise variance: (sigma C / q)^2, i.e. sigma_eff = sigma/q in units of C.

    Parameters
    ----------
    sigma : float or array_like
        Noise multiplier (> 0).
    q : float or array_like
        Sampling rate in (0, 1].
    grad_sq_sum : float or array_like
        sum over the dataset of the squared (clipped) per-example gradient coordinate (>= 0).
    clipping_norm : float
        C (> 0).

    Returns
    -------
    tuple of (subsampling, noise, total)

    Examples
    --------
    >>> from sgmfast.analysis import variance_decomposition
    >>> variance_decomposition(2.0, 0.5, 10.0)   # (sigma, q, grad_sq_sum)
    (10.0, 16.0, 26.0)
    """
    qq = check_q(q)
    s = check_sigma(sigma)
    g = as_float_array(grad_sq_sum, "grad_sq_sum")
    if not (np.isfinite(g) & (g >= 0)).all():
        raise ValueError(f"grad_sq_sum must be finite and >= 0; got {g[~(np.isfinite(g) & (g >= 0))].flat[0]!r}")
    cn = check_positive(clipping_norm, "clipping_norm")
    sub = (1.0 - qq) / qq * g
    noise = (s * cn / qq) ** 2
    tot = sub + noise
    if np.ndim(tot) == 0:
        return float(sub), float(noise), float(tot)
    return sub, noise, tot


@dataclass(frozen=True)
class PlanRow:
    """One candidate batch size: B, q = B/N, steps T, sigma(q, T), sigma/q, variances."""

    batch_size: int
    q: float
    steps: int
    sigma: float
    sigma_eff: float
    subsampling_var: float
    noise_var: float
    total_var: float


@dataclass(frozen=True)
class BatchSizePlan:
    """Result of :func:`plan_batch_size`: one row per candidate and the best (least total
    per-step gradient variance)."""

    rows: tuple
    best: PlanRow
    epsilon: float
    delta: float
    accountant: str
    sampler: str = "poisson"

    def to_text(self) -> str:
        """A fixed-width table, the best row marked with '*'."""
        head = (f"{'batch':>9} {'q':>10} {'steps':>9} {'sigma':>9} {'sigma/q':>11} "
                f"{'subsampling':>12} {'noise':>12} {'total':>12}")
        lines = [f"epsilon={self.epsilon:g}, delta={self.delta:g}, accountant={self.accountant}, "
                 f"sampler={self.sampler} (per-coordinate variance, units of C^2)", head]
        for r in self.rows:
            mark = "*" if r is self.best else " "
            lines.append(f"{r.batch_size:>9d} {r.q:>10.4g} {r.steps:>9d} {r.sigma:>9.4g} "
                         f"{r.sigma_eff:>11.4g} {r.subsampling_var:>12.4g} {r.noise_var:>12.4g} "
                         f"{r.total_var:>12.4g}{mark}")
        return "\n".join(lines)


def _default_candidates(n: int):
    cands = [2 ** k for k in range(4, 64) if 2 ** k < n]
    return cands + [n]


def _plan_sigma(eps, dl, q, t, accountant, sampler="poisson") -> float:
    """One candidate's sigma (a module-level function, so that executors can pickle it)."""
    from .. import calibrate as _cal
    from .. import rdp as _rdp

    if sampler != "poisson":
        return float(_cal.calibrate_sigma(eps, dl, q, t, accountant=accountant, sampler=sampler))
    try:
        return float(_cal.calibrate_sigma(eps, dl, q, t, accountant=accountant))
    except ValueError:
        # Met even at the smallest supported sigma: that sigma is private (RDP bounds PLD).
        if float(_rdp.epsilon(_cal.SIGMA_MIN, q, t, dl)) <= eps:
            return _cal.SIGMA_MIN
        raise


def plan_batch_size(dataset_size, epsilon, delta, *, clipping_norm=1.0, grad_sq_sum=None,
                    grad_norm=None, dim=1, epochs=None, steps=None, candidates=None,
                    accountant: str = "pld", progress: bool | None = None, executor=None,
                    sampler: str = "poisson") -> BatchSizePlan:
    """Tabulate the DP-SGD gradient variance per candidate batch size and name the best.

    Modelling assumptions (as in Räisä et al., ICML 2024, Sec. 4): Poisson sampling with
    q = B/N for batch size B on N examples; either a fixed number of ``epochs`` (then
    T = ceil(epochs/q) = ceil(epochs N / B) steps) or a fixed number of ``steps``; sigma is
    the smallest noise multiplier meeting (epsilon, delta) over T steps
    (:func:`sgmfast.calibrate.calibrate_sigma`), and each candidate is scored by the
    per-coordinate variance of one step's gradient estimate, Eq. (25):
    (1 - q)/q * sum_i g_ij^2 + (sigma C/q)^2. The score does not model the number of steps
    or the optimiser; it compares the noise of one update.

    Parameters
    ----------
    dataset_size : int
        N.
    epsilon, delta : float
        Target privacy of the whole run (epsilon > 0 in nats, delta in (0, 1)).
    clipping_norm : float
        C.
    grad_sq_sum : float, optional
        sum over the dataset of a squared clipped per-example gradient coordinate. Give this
        or ``grad_norm``.
    grad_norm : float, optional
        A typical per-example gradient norm; clipped to C and spread evenly over ``dim``
        coordinates: grad_sq_sum = N min(grad_norm, C)^2 / dim.
    dim : int
        Number of model parameters (only with ``grad_norm``).
    epochs, steps : int, optional
        Exactly one of them.
    candidates : sequence of int, optional
        Batch sizes in [1, N]; default powers of two from 16 below N, and N.
    accountant : {"pld", "rdp"}
    progress : bool, optional
        A progress bar on stderr (by default on a terminal, for four candidates or more).
    executor : concurrent.futures.Executor, optional
        Calibrate the candidates on it, one per task (a 'spawn' process pool, a Dask cluster's
        ``client.get_executor()``); the plan is the same as the serial one.
    sampler : {"poisson", "balls_in_bins", "shuffle", "fixed_size"}
        How batches are drawn (balls-in-bins, shuffle: PLD only): each candidate's q and T are
        ``pld.samplers.run_of_batch``'s (epoch samplers: n // B whole batches per epoch, q = 1 / (n // B)),
        its sigma ``calibrate_sigma(..., sampler=sampler)``'s.  Batches drawn without replacement
        (fixed size, shuffle) have subsampling variance at most (1 - q)/q * N/(N - 1) * sum_i
        g_ij^2 (the sample-sum variance, sum_i (g_ij - mean)^2 <= sum_i g_ij^2); that bound is
        the score's first term.

    Returns
    -------
    BatchSizePlan

    Examples
    --------
    >>> from sgmfast.analysis import plan_batch_size
    >>> p = plan_batch_size(60000, 2.0, 1e-5, grad_norm=1.0, dim=1000, epochs=10,
    ...                     candidates=[64, 1024, 16384], accountant="rdp")
    >>> p.best.batch_size
    16384
    """
    n = check_positive_int(dataset_size, "dataset_size")
    eps, dl, cn = _checked_target(epsilon, delta, clipping_norm, accountant, sampler)
    g2 = _grad_sq_sum(n, cn, grad_sq_sum, grad_norm, dim)
    plan = _candidate_runs(n, candidates, steps, epochs, sampler)
    sigmas = _plan_sigmas(plan, eps, dl, accountant, sampler, progress, executor)
    rows = [_plan_row(b, q, t, sigma, n, g2, cn, sampler) for (b, q, t), sigma in zip(plan, sigmas)]
    best = min(rows, key=lambda r: r.total_var)
    return BatchSizePlan(tuple(rows), best, eps, dl, accountant, sampler)


def _checked_target(epsilon, delta, clipping_norm, accountant, sampler) -> tuple:
    """(epsilon, delta, C) of :func:`plan_batch_size` as floats, checked with its accountant and
    sampler (a ValueError naming what is wrong)."""
    eps = float(check_epsilon(epsilon))
    if eps <= 0:
        raise ValueError(f"epsilon must be > 0; got {eps!r}")
    dl = float(check_delta(delta))
    cn = float(check_positive(clipping_norm, "clipping_norm"))
    if accountant not in ("pld", "rdp"):
        raise ValueError(f"accountant must be one of ('pld', 'rdp'); got {accountant!r}")
    from ..calibrate.noise import _check_sampler

    _check_sampler(sampler, accountant)
    return eps, dl, cn


def _grad_sq_sum(n: int, cn: float, grad_sq_sum, grad_norm, dim) -> float:
    """sum_i g_ij^2 for :func:`plan_batch_size`: ``grad_sq_sum`` as given, or from ``grad_norm``
    clipped to C and spread evenly over ``dim`` coordinates (exactly one of them)."""
    if (grad_sq_sum is None) == (grad_norm is None):
        raise ValueError("give exactly one of grad_sq_sum and grad_norm")
    if grad_sq_sum is not None:
        g2 = float(as_float_array(grad_sq_sum, "grad_sq_sum"))
        if not (math.isfinite(g2) and g2 >= 0):
            raise ValueError(f"grad_sq_sum must be finite and >= 0; got {g2!r}")
        return g2
    gn = float(as_float_array(grad_norm, "grad_norm"))
    if not (math.isfinite(gn) and gn >= 0):
        raise ValueError(f"grad_norm must be finite and >= 0; got {gn!r}")
    d = check_positive_int(dim, "dim")
    return n * min(gn, cn) ** 2 / d


def _candidate_runs(n: int, candidates, steps, epochs, sampler: str) -> list:
    """(B, q, T) of each distinct candidate batch size B, smallest first: q and T as
    ``pld.samplers.run_of_batch`` gives them for ``steps`` or ``epochs`` (exactly one)."""
    from ..pld.samplers import run_of_batch

    if (epochs is None) == (steps is None):
        raise ValueError("give exactly one of epochs and steps")
    ep = check_positive_int(epochs, "epochs") if epochs is not None else None
    st = check_positive_int(steps, "steps") if steps is not None else None
    cands = _default_candidates(n) if candidates is None else list(candidates)
    if not cands:
        raise ValueError("candidates must not be empty")
    bs = []
    for b in cands:
        bi = check_positive_int(b, "candidates")
        if bi > n:
            raise ValueError(f"candidates (batch sizes) must be <= dataset_size={n}; got {bi}")
        bs.append(bi)
    bs = sorted(set(bs))
    plan = [(b, *run_of_batch(sampler, b, n, st, ep)) for b in bs]
    return [(b, q, int(t)) for b, q, t in plan]


def _plan_sigmas(plan, eps, dl, accountant, sampler, progress, executor) -> list:
    """Each candidate run's sigma (``_plan_sigma``), in order, with a progress bar: on
    ``executor`` one candidate per task (each is independent), else here."""
    with Progress(len(plan), "planning batch sizes", progress, min_total=4) as bar:
        if check_executor(executor) is not None:
            futs = [executor.submit(_plan_sigma, eps, dl, q, t, accountant, sampler) for _, q, t in plan]
            sigmas = []
            for f in futs:
                sigmas.append(f.result())
                bar.update()
        else:
            sigmas = []
            for _, q, t in plan:
                sigmas.append(_plan_sigma(eps, dl, q, t, accountant, sampler))
                bar.update()
    return sigmas


def _plan_row(b: int, q: float, t: int, sigma: float, n: int, g2: float, cn: float, sampler: str) -> PlanRow:
    """One candidate's row: its variances by Eq. (25), the subsampling term scaled by N/(N - 1)
    for batches drawn without replacement (:func:`plan_batch_size`, ``sampler``)."""
    sub, noise, tot = variance_decomposition(sigma, q, g2, cn)
    if sampler != "poisson" and n > 1:
        sub *= n / (n - 1)
        tot = sub + noise
    return PlanRow(b, q, t, sigma, sigma / q, sub, noise, tot)
