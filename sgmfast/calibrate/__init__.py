"""Calibration: the smallest noise multiplier, or the largest sampling rate or number of
steps, whose certified epsilon upper bound meets a target (epsilon, delta).

Every returned value is on the private side and verified at that value by the public accountant
(``rdp.epsilon``, or ``pld.epsilon(...).upper`` with the same ``accuracy``): its epsilon there is
<= the target, so what a user checks is what was calibrated.  It is also minimal (maximal) to the
stated tolerance: one tolerance step towards less privacy exceeds the target.  The whole domain is
covered: sigma = 0 is returned when even no noise meets the target (delta >= 1 - (1 - q)^T),
q = 1 when full batches do, and no search stops at an artificial bound.

RDP solves run entirely in Numba (bracket from the Gaussian mechanism's exact sigma, then
Brent's zeroin in log space), about a millisecond per point, vectorised and parallel over
arrays of targets. PLD solves start from the RDP answer, which is private for PLD too (the
PLD upper bound never exceeds RDP), and refine it with a few PLD evaluations.

Examples
--------
>>> from sgmfast import calibrate
>>> s = calibrate.calibrate_sigma(2.0, 1e-5, 0.01, 1000, accountant="rdp")
>>> round(s, 4)
1.0223
>>> from sgmfast import rdp
>>> rdp.epsilon(s, 0.01, 1000, 1e-5) <= 2.0
True

Modules: ``noise`` -- sigma (``calibrate_sigma``, ``gaussian_sigma``, ``calibrate_sigma_to_risk``)
and the searches every calibration shares; ``run`` -- the run's shape at a given sigma
(``calibrate_q``, ``calibrate_batch_size``, ``calibrate_steps``, ``calibrate_epochs``); below
both, ``public`` -- the public accountant's epsilon that every answer is verified with, and
``roots`` -- the root finders.
"""

# tolerances and limits stay readable here (tests and users check answers against them)
from .noise import (PLD_TOL, Q_MIN, RDP_TOL, SIGMA_MAX, SIGMA_MIN, STEPS_MAX,  # noqa: F401
                    calibrate_sigma, calibrate_sigma_to_risk, gaussian_sigma)
from .run import calibrate_batch_size, calibrate_epochs, calibrate_q, calibrate_steps

__all__ = [
    "calibrate_sigma",
    "calibrate_q",
    "calibrate_batch_size",
    "calibrate_steps",
    "calibrate_epochs",
    "gaussian_sigma",
    "calibrate_sigma_to_risk",
    "SIGMA_MIN",
    "SIGMA_MAX",
]
