"""The batch-size analysis of Räisä, Jälkö & Honkela (ICML 2024), "Subsampling is not magic".

What lives here (one module per part of the paper), and where each number comes from:

- ``onestep.py`` :func:`one_step_delta` -- the exact delta(epsilon) of ONE step of the
  Poisson-subsampled Gaussian mechanism, in closed form for both neighbouring directions (remove:
  Eq. (45) of the paper; add: the matching formula, derived from the same hockey-stick integral).
  Both were checked against mpmath quadrature of the definition
  (tests/reference/make_analysis.py).
- ``onestep.py`` :func:`one_step_sigma` -- the smallest sigma(q) meeting (epsilon, delta) in one
  step, by Brent's method in log sigma (delta is strictly decreasing in sigma: Lemma 1 of Kalinin
  2024).
- ``onestep.py`` :func:`one_step_derivatives` -- sigma'(q) by implicit differentiation (Lemma
  6.1), the slope of the effective noise sigma(q)/q, and the quantities a, b of Eqs. (46)-(47); by
  Theorem 6.2, a < b implies sigma(q)/q decreases in q (larger batches are better).
- ``conjecture.py`` :func:`kalinin_constant`, :func:`max_a_minus_b`, :func:`figure2_data` --
  Conjecture 6.3 (a < b for epsilon, q >= 4 delta), proved by Kalinin (2024) with the tight
  constant 1/(1/2 - 2 Phi(-sqrt(2 log 2))) ~ 3.8319, and the data of the paper's Figure 2,
  computed at the exact sigma(q) of every grid point (one root solve per point, not a sigma grid).
- ``effective_noise.py`` :func:`sigma_eff`, :func:`sigma_eff_ratio`, :func:`figure1_data` -- the
  effective noise sigma(q, T) / q of a calibrated run and the data of the paper's Figure 1 (PLD
  calibrations; the T = 1 and q = 1 columns in closed form).
- ``batch_size.py`` :func:`variance_decomposition`, :func:`plan_batch_size` -- Eq. (25) and
  Appendix A.1: per-coordinate variance of the DP-SGD gradient = subsampling + effective DP noise.
- ``amplification.py`` :func:`amplified_epsilon`, :func:`base_epsilon`, :func:`noise_scale_ratio`,
  :func:`noise_inflation_bound` -- amplification by subsampling for pure DP (Steinke, "Limits of
  privacy amplification by subsampling", DifferentialPrivacy.org), Eqs. (3)-(8).

Epsilon is in nats throughout; sensitivity (clipping norm) 1 unless stated.

Examples
--------
>>> from sgmfast import analysis
>>> s = analysis.one_step_sigma(3.82e-6, 1e-6, 3.82e-6)    # Kalinin's counterexample
>>> round(s, 4)
0.8479
>>> d = analysis.one_step_derivatives(3.82e-6, 1e-6, 3.82e-6)
>>> round(d.a - d.b, 5)
0.00144
"""

from .amplification import amplified_epsilon, base_epsilon, noise_inflation_bound, noise_scale_ratio
from .batch_size import BatchSizePlan, PlanRow, plan_batch_size, variance_decomposition
from .conjecture import AMinusB, Figure2Data, figure2_data, kalinin_constant, max_a_minus_b
from .onestep import OneStepDerivatives, one_step_delta, one_step_derivatives, one_step_sigma
from .effective_noise import (
    FIGURE1_EPSILONS,
    FIGURE1_STEPS,
    Figure1Data,
    figure1_data,
    sigma_eff,
    sigma_eff_ratio,
)


__all__ = [
    "one_step_delta",
    "one_step_sigma",
    "one_step_derivatives",
    "OneStepDerivatives",
    "kalinin_constant",
    "max_a_minus_b",
    "AMinusB",
    "figure2_data",
    "Figure2Data",
    "sigma_eff",
    "sigma_eff_ratio",
    "figure1_data",
    "Figure1Data",
    "variance_decomposition",
    "plan_batch_size",
    "BatchSizePlan",
    "PlanRow",
    "amplified_epsilon",
    "base_epsilon",
    "noise_scale_ratio",
    "noise_inflation_bound",
]

