"""Conjecture 6.3 (a < b for epsilon, q >= c delta), Kalinin's tight constant and the data of
Figure 2, at the exact sigma(q) of every grid point."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._kernels import analysis as _ka
from .._validation import as_float_array, check_delta, check_epsilon, check_positive_int
from .onestep import SIGMA_XTOL


def kalinin_constant() -> float:
    """The tight constant of Conjecture 6.3: 1/(1/2 - 2 Phi(-sqrt(2 log 2))) ~ 3.8319.

    Kalinin (2024) proves a < b whenever epsilon, q >= c delta for every c above this value,
    and shows it cannot be lowered. (His closing remark prints the denominator as
    3/2 - 2 Phi(...), which is 0.793, not the 3.8319 he quotes; 1/2 - ... is the value that
    makes T(sqrt(2 log 2)) = 0 in his Lemma 2 with min(e^eps - 1, q)/c in place of /4.)

    Examples
    --------
    >>> from sgmfast.analysis import kalinin_constant
    >>> round(kalinin_constant(), 4)
    3.8319
    """
    z = math.sqrt(2.0 * math.log(2.0))
    phi_minus = 0.5 * math.erfc(z / math.sqrt(2.0))
    return 1.0 / (0.5 - 2.0 * phi_minus)


@dataclass(frozen=True)
class Figure2Data:
    """Largest a - b over the q grid, per epsilon (the data of Figure 2 of Räisä et al.).

    Attributes
    ----------
    delta, c : the target delta and the constant: epsilon and q range over [c delta, ...].
    epsilon : the epsilon grid (log-spaced from c delta to ``eps_max``).
    q : the q grid (log-spaced from c delta to 1).
    max_a_minus_b : for each epsilon, max over q of a - b at the exact sigma(q).
    argmax_q, sigma : where that maximum is attained, and sigma(q) there.
    """

    delta: float
    c: float
    epsilon: np.ndarray
    q: np.ndarray
    max_a_minus_b: np.ndarray
    argmax_q: np.ndarray
    sigma: np.ndarray


def _check_grid(delta, c, n_eps, n_q, eps_max):
    dl = float(check_delta(delta))
    cc = as_float_array(c, "c")
    if cc.ndim != 0 or not (np.isfinite(cc) and cc > 0):
        raise ValueError(f"c must be a finite number > 0; got {cc!r}")
    cc = float(cc)
    ne = check_positive_int(n_eps, "n_eps")
    nq = check_positive_int(n_q, "n_q")
    em = float(check_epsilon(eps_max, "eps_max"))
    if not cc * dl < 1.0:
        raise ValueError(f"c * delta must be < 1 (the q range is [c delta, 1]); got {cc * dl:g}")
    if not em > cc * dl:
        raise ValueError(f"eps_max must exceed c * delta = {cc * dl:g}; got {em:g}")
    return dl, cc, ne, nq, em


def figure2_data(delta: float = 1e-5, c: float = 4.0, n_eps: int = 1000, n_q: int = 100,
                 eps_max: float = 4.0) -> Figure2Data:
    """The data of Figure 2 of Räisä et al. (ICML 2024): the largest a - b over q, per epsilon.

    For each epsilon on a log grid over [c delta, eps_max] and each q on a log grid over
    [c delta, 1], sigma(q) is solved exactly (the paper scanned a sigma grid instead and kept
    points with delta <= target); a - b is then evaluated there. The q loop runs from q = 1
    down, each solve warm-started from the previous sigma; the epsilon loop is parallel.
    1000 x 100 points take well under a second once compiled.

    Parameters
    ----------
    delta : float
        Target delta in (0, 1).
    c : float
        The constant of Conjecture 6.3 (epsilon, q >= c delta); 4 in the paper.
    n_eps, n_q : int
        Grid sizes.
    eps_max : float
        Largest epsilon (4 in the paper).

    Returns
    -------
    Figure2Data

    Examples
    --------
    >>> from sgmfast.analysis import figure2_data
    >>> f = figure2_data(1e-5, 4.0, n_eps=20, n_q=10)
    >>> bool((f.max_a_minus_b < 0).all())
    True
    """
    dl, cc, ne, nq, em = _check_grid(delta, c, n_eps, n_q, eps_max)
    lo = cc * dl
    eps = np.geomspace(lo, em, ne)
    q_desc = np.ascontiguousarray(np.geomspace(lo, 1.0, nq)[::-1])
    out_max = np.empty(ne)
    out_q = np.empty(ne)
    out_s = np.empty(ne)
    _ka.figure2(eps, q_desc, math.log(dl), SIGMA_XTOL, out_max, out_q, out_s)
    return Figure2Data(dl, cc, eps, q_desc[::-1].copy(), out_max, out_q, out_s)


@dataclass(frozen=True)
class AMinusB:
    """The largest a - b over a grid, and where: (epsilon, q, sigma(q))."""

    value: float
    epsilon: float
    q: float
    sigma: float


def max_a_minus_b(delta: float, c: float, n_eps: int = 1000, n_q: int = 100,
                  eps_max: float = 4.0) -> AMinusB:
    """Largest a - b over epsilon in [c delta, eps_max] and q in [c delta, 1] (log grids).

    Conjecture 6.3 of Räisä et al. (ICML 2024), proved by Kalinin (2024): for c above
    :func:`kalinin_constant` (~3.8319) the result is negative; below it, a positive value
    exists, attained near the corner epsilon = q = c delta (which is on the grid).

    Examples
    --------
    >>> from sgmfast.analysis import max_a_minus_b
    >>> m = max_a_minus_b(1e-6, 3.82, n_eps=50, n_q=20)
    >>> m.value > 0, round(m.q / 1e-6, 2), round(m.sigma, 4)
    (True, 3.82, 0.8479)
    >>> max_a_minus_b(1e-6, 4.0, n_eps=50, n_q=20).value < 0
    True
    """
    f = figure2_data(delta, c, n_eps, n_q, eps_max)
    i = int(np.argmax(f.max_a_minus_b))
    return AMinusB(float(f.max_a_minus_b[i]), float(f.epsilon[i]), float(f.argmax_q[i]),
                   float(f.sigma[i]))
