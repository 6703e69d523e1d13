"""The effective noise sigma_eff(q, T) = sigma(q, T) / q and the data of Figure 1 (tight PLD or
RDP calibrations, the exact one-step and Gaussian columns in closed form)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from .._progress import Progress
from .._executor import check_executor
from .._validation import check_delta, check_epsilon, check_positive_int, check_q, check_steps
from .onestep import one_step_sigma


def sigma_eff(epsilon, delta, q, steps, *, accountant: str = "pld", accuracy: float = 1e-3):
    """Effective noise sigma(q, T) / q of Räisä et al. (ICML 2024), Section 5.

    sigma(q, T) is the smallest noise multiplier whose certified epsilon upper bound meets
    (epsilon, delta) after ``steps`` steps at sampling rate q (:func:`sgmfast.calibrate.
    calibrate_sigma`; tight PLD by default). At q = 1 it is the Gaussian mechanism's exact
    sigma(1, T) (Balle & Wang 2018), the asymptote sigma_eff approaches from above as q grows
    (their Cor. 5.4). Broadcasts over the inputs.

    Examples
    --------
    >>> from sgmfast.analysis import sigma_eff
    >>> from sgmfast.calibrate import gaussian_sigma
    >>> round(sigma_eff(1.0, 1e-5, 1.0, 100) / gaussian_sigma(1.0, 1e-5, 100), 6)
    1.0
    """
    from ..calibrate import calibrate_sigma

    qq = check_q(q)
    out = calibrate_sigma(epsilon, delta, qq, steps, accountant=accountant, accuracy=accuracy) / qq
    return float(out) if np.ndim(out) == 0 else out


def sigma_eff_ratio(epsilon, delta, q, steps, *, accountant: str = "pld", accuracy: float = 1e-3):
    """sigma(q, T) / (q sigma(1, T)): how much more effective noise a sampling rate q costs than
    full batches (Cor. 5.4 of Räisä et al.: it tends to 1 as q grows, and for many steps
    sigma(q, T) ~ q sigma(1, T)). sigma(1, T) is the exact Gaussian-mechanism value."""
    from ..calibrate import gaussian_sigma

    e, dl, t = np.broadcast_arrays(check_epsilon(epsilon), check_delta(delta), check_steps(steps))
    s1 = np.vectorize(gaussian_sigma, otypes=[float])(e, dl, t)
    out = sigma_eff(epsilon, delta, q, steps, accountant=accountant, accuracy=accuracy) / s1
    return float(out) if np.ndim(out) == 0 else out


#: The grid of Figure 1 of Räisä et al.: epsilon panels, step counts, q range, delta.
FIGURE1_EPSILONS = (0.125, 0.25, 0.5, 1.0, 2.0, 4.0)
FIGURE1_STEPS = (1, 10, 100, 1000)


@dataclass(frozen=True)
class Figure1Data:
    """sigma(q, T) on the grid of Figure 1 of Räisä et al. (ICML 2024).

    Attributes
    ----------
    delta : the target delta.
    epsilon, steps, q : the grids (q increasing).
    sigma : array (len(epsilon), len(steps), len(q)): the smallest certified-private sigma.
    sigma_gaussian : array (len(epsilon), len(steps)): the exact sigma(1, T).
    accountant, accuracy : how sigma was found for T > 1 (T = 1 uses the exact one-step
        sigma(q), which is tighter than any accountant).
    """

    delta: float
    epsilon: np.ndarray
    steps: np.ndarray
    q: np.ndarray
    sigma: np.ndarray
    sigma_gaussian: np.ndarray
    accountant: str
    accuracy: float

    @property
    def sigma_eff(self) -> np.ndarray:
        """sigma(q, T) / q, same shape as ``sigma``."""
        return self.sigma / self.q

    def to_csv(self, path) -> None:
        """One row per (epsilon, T, q): sigma, sigma_eff, sigma(1, T) and their ratio."""
        with open(path, "w", encoding="utf-8") as fh:
            fh.write("epsilon,delta,steps,q,sigma,sigma_eff,sigma_gaussian,ratio\n")
            for i, e in enumerate(self.epsilon):
                for j, t in enumerate(self.steps):
                    g = self.sigma_gaussian[i, j]
                    for k, q in enumerate(self.q):
                        s = self.sigma[i, j, k]
                        fh.write(f"{e:g},{self.delta:g},{int(t)},{q:.10g},{s:.10g},{s / q:.10g},"
                                 f"{g:.10g},{s / (q * g):.10g}\n")


def _figure1_curve(e, dl, t, q_desc, s1, accountant, accuracy):
    """sigma on a decreasing q grid for one (epsilon, T) curve of Figure 1 (q_desc[0] = 1)."""
    from ..calibrate import calibrate_sigma

    if t == 1:
        return one_step_sigma(e, dl, q_desc)
    col = np.empty(q_desc.size)
    col[0] = s1
    if q_desc.size > 1:
        col[1:] = calibrate_sigma(e, dl, q_desc[1:], int(t), accountant=accountant,
                                  accuracy=accuracy, progress=False)
    return col


def figure1_data(delta: float = 1e-5, epsilons=FIGURE1_EPSILONS, steps=FIGURE1_STEPS,
                 n_q: int = 100, q_min: float = 1e-3, *, accountant: str = "pld",
                 accuracy: float = 1e-3, workers: int | None = None,
                 progress: bool | None = None, executor=None) -> Figure1Data:
    """The data of Figure 1 of Räisä et al. (ICML 2024): sigma(q, T) for q log-spaced in
    [q_min, 1], one curve per (epsilon, T).

    T = 1 uses the exact one-step sigma(q) (:func:`one_step_sigma`, both directions); q = 1
    the exact Gaussian mechanism; the rest :func:`sgmfast.calibrate.calibrate_sigma` with the
    given accountant, each (epsilon, T) curve swept from q = 1 down so that every solve is
    warm-started from its neighbour (sigma ratio to RDP, and loss grid). Curves are spread
    over ``workers`` threads (default: one per core, up to 4, when there are several PLD
    curves), or over ``executor`` (any ``concurrent.futures.Executor``: a process pool started
    with 'spawn', a Dask cluster's ``client.get_executor()``), one curve per task; the values are
    the same either way. The paper used dp_accounting's PLD (``get_smallest_subsampled_gaussian_noise``),
    1 to 64 s per point.

    Examples
    --------
    >>> from sgmfast.analysis import figure1_data
    >>> f = figure1_data(1e-5, epsilons=(1.0,), steps=(1, 10), n_q=4, q_min=0.1)
    >>> f.sigma.shape
    (1, 2, 4)
    >>> bool((f.sigma_eff[0, :, :-1] >= f.sigma_eff[0, :, 1:]).all())
    True
    """
    from ..calibrate.noise import gaussian_sigma
    from ..calibrate.public import _check_accountant

    _check_accountant(accountant)
    dl = float(check_delta(delta))
    eps = np.atleast_1d(check_epsilon(epsilons, "epsilons")).astype(float)
    ts = np.atleast_1d(check_steps(steps)).astype(float)
    if eps.ndim != 1 or ts.ndim != 1 or np.any(eps <= 0) or np.any(ts < 1):
        raise ValueError("epsilons must be > 0 and steps >= 1, each a number or a 1-d list")
    nq = check_positive_int(n_q, "n_q")
    qmin = float(check_q(q_min, "q_min"))
    if qmin <= 0.0:
        raise ValueError(f"q_min must be in (0, 1] (the q grid is logarithmic); got {qmin!r}")
    qs = np.geomspace(qmin, 1.0, nq) if nq > 1 else np.array([1.0])
    q_desc = np.ascontiguousarray(qs[::-1])
    s1 = np.array([[gaussian_sigma(e, dl, int(t)) for t in ts] for e in eps])
    sig = np.empty((eps.size, ts.size, qs.size))
    jobs = [(i, j) for i in range(eps.size) for j in range(ts.size)]
    heavy = sum(1 for _, j in jobs if ts[j] > 1 and nq > 1)
    if workers is None:
        workers = min(4, os.cpu_count() or 1) if heavy >= 4 and accountant == "pld" else 1
    workers = check_positive_int(workers, "workers")
    with Progress(len(jobs) * qs.size, "figure 1", progress, min_total=50) as bar:
        if check_executor(executor) is not None:
            futs = {(i, j): executor.submit(_figure1_curve, eps[i], dl, ts[j], q_desc, s1[i, j], accountant, accuracy)
                    for i, j in jobs}
            for (i, j), fut in futs.items():
                sig[i, j] = fut.result()[::-1]
                bar.update(qs.size)
        elif workers == 1:
            for i, j in jobs:
                sig[i, j] = _figure1_curve(eps[i], dl, ts[j], q_desc, s1[i, j], accountant, accuracy)[::-1]
                bar.update(qs.size)
        else:
            import concurrent.futures as cf

            # threads: the kernels and the FFTs release the GIL
            with cf.ThreadPoolExecutor(workers) as pool:
                # the slowest curves (many steps at small epsilon) first
                order = sorted(jobs, key=lambda ij: (-ts[ij[1]], eps[ij[0]]))
                futs = {pool.submit(_figure1_curve, eps[i], dl, ts[j], q_desc, s1[i, j], accountant,
                                    accuracy): (i, j) for i, j in order}
                for fut in cf.as_completed(futs):
                    i, j = futs[fut]
                    sig[i, j] = fut.result()[::-1]
                    bar.update(qs.size)
    return Figure1Data(dl, eps, ts, qs, sig, s1, accountant, accuracy)
