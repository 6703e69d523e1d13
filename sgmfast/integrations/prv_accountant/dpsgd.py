"""DP-SGD helpers with prv_accountant 0.2's names: :class:`DPSGDAccountant` and
:func:`find_noise_multiplier`, answered by sgmfast (certified bounds; calibration by
:func:`sgmfast.calibrate.calibrate_sigma`).
"""

from __future__ import annotations

import math
from typing import Tuple

from .accountant import ACCURACY, ACCURACY_MIN, PRVAccountant, _real
from .privacy_random_variables import PoissonSubsampledGaussianMechanism

__all__ = ["DPSGDAccountant", "find_noise_multiplier"]

# relative steps by which the calibrated sigma is raised if the drop-in's own check disagrees
_BUMP = 1e-4
_MAX_BUMPS = 200


class DPSGDAccountant(PRVAccountant):
    """Accountant for DP-SGD (and DP-Adam etc.): Poisson sampling at rate ``sampling_probability``,
    noise multiplier ``noise_multiplier``, at most ``max_steps`` steps.

    ``eps_error`` and ``delta_error`` as in :class:`PRVAccountant` (defaults 0.1 and 1e-9, as prv's).
    """

    def __init__(self, noise_multiplier: float, sampling_probability: float,
                 max_steps: int, eps_error: float = 0.1, delta_error: float = 1e-9) -> None:
        super().__init__(prvs=PoissonSubsampledGaussianMechanism(noise_multiplier=noise_multiplier,
                                                                 sampling_probability=sampling_probability),
                         max_self_compositions=max_steps, eps_error=eps_error, delta_error=delta_error)

    def compute_epsilon(self, delta: float, num_steps: int) -> Tuple[float, float, float]:
        """Bounds on epsilon(delta) after ``num_steps`` steps: ``(lower, estimate, upper)``, the
        certified bounds with the upper bound as the estimate."""
        return super().compute_epsilon(delta=delta, num_self_compositions=num_steps)


def _check_upper(sigma, q, steps, epsilon, delta, eps_error) -> bool:
    """The drop-in's own answer at sigma meets the target (the check a user makes)."""
    acc = DPSGDAccountant(noise_multiplier=sigma, sampling_probability=q, max_steps=steps, eps_error=eps_error,
                          delta_error=delta / 1000)
    return acc.compute_epsilon(delta=delta, num_steps=steps)[2] <= epsilon


def find_noise_multiplier(sampling_probability: float, num_steps: int, target_epsilon: float, target_delta: float,
                          eps_error: float = 0.1, mu_max: float = 100.0) -> float:
    """Smallest noise multiplier whose certified epsilon meets ``target_epsilon`` at ``target_delta``.

    :param float sampling_probability: Poisson sampling rate q in [0, 1].
    :param int num_steps: Number of DP-SGD steps.
    :param float target_epsilon: Target epsilon (> 0).
    :param float target_delta: Target delta in (0, 1).
    :param float eps_error: Sets sgmfast's relative accuracy, ``eps_error / target_epsilon`` clipped
        to [1e-5, 1e-3], and is the ``eps_error`` of the final check.
    :param float mu_max: Largest noise multiplier allowed.
    :return: sigma, found by :func:`sgmfast.calibrate.calibrate_sigma` (PLD, sigma to 1e-4 relative):
        sgmfast's certified upper bound at sigma, ``pld.epsilon(sigma, q, num_steps, target_delta,
        accuracy=acc).upper``, is <= ``target_epsilon``, and so is
        ``DPSGDAccountant(sigma, q, num_steps, eps_error=eps_error).compute_epsilon(target_delta,
        num_steps)[2]`` (sigma is raised by 1e-4 relative steps until it is).  prv instead returns a
        sigma whose own upper bound is below ``target_epsilon + eps_error``.  0.0 when no noise is
        needed (q = 0, num_steps = 0, or target_delta >= 1 - (1 - q)^T).
    :raises RuntimeError: when the smallest such sigma exceeds ``mu_max`` (prv raises
        RuntimeError when its doubling search passes mu_max), including ``target_epsilon`` 0.
    """
    from ...calibrate import calibrate_sigma

    q = _real(sampling_probability, "sampling_probability", 0.0, 1.0)
    steps = num_steps
    eps = _real(target_epsilon, "target_epsilon", 0.0, math.inf)
    delta = _real(target_delta, "target_delta", 0.0, 1.0)
    if not 0.0 < delta < 1.0:
        raise ValueError(f"target_delta must be in (0, 1); got {target_delta!r}")
    err = _real(eps_error, "eps_error", 0.0, math.inf)
    if err == 0.0:
        raise ValueError("eps_error must be > 0")
    mu = _real(mu_max, "mu_max", 0.0, math.inf)
    acc = min(ACCURACY, max(ACCURACY_MIN, err / eps)) if eps > 0 else ACCURACY
    sigma = float(calibrate_sigma(eps, delta, q, steps, accountant="pld", accuracy=acc))
    if not sigma <= mu:
        shown = "no finite sigma" if not math.isfinite(sigma) else f"the smallest is {sigma:.6g}"
        raise RuntimeError(f"No noise multiplier up to mu_max={mu_max!r} meets target_epsilon={target_epsilon!r} at "
                           f"target_delta={target_delta!r} ({shown}). Increase target_epsilon or mu_max, or decrease "
                           "sampling_probability or num_steps.")
    if sigma == 0.0:
        return 0.0
    for _ in range(_MAX_BUMPS):
        if _check_upper(sigma, q, steps, eps, delta, err):
            break
        sigma *= 1.0 + _BUMP
    else:  # pragma: no cover - calibrate_sigma's answer is checked by the same accountant
        raise RuntimeError(f"the calibrated sigma {sigma!r} does not meet target_epsilon={target_epsilon!r}")
    if sigma > mu:
        raise RuntimeError(f"No noise multiplier up to mu_max={mu_max!r} meets target_epsilon={target_epsilon!r} "
                           f"at target_delta={target_delta!r} (the smallest is {sigma:.6g}).")
    return sigma
