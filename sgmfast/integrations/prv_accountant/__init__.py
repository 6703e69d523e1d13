"""A drop-in for Microsoft's ``prv_accountant`` 0.2 (DP-SGD surface), answered by sgmfast.

Code written against prv_accountant changes one import line::

    from sgmfast.integrations import prv_accountant          # was: import prv_accountant
    from sgmfast.integrations.prv_accountant import Accountant, PRVAccountant
    from sgmfast.integrations.prv_accountant.dpsgd import find_noise_multiplier, DPSGDAccountant
    from sgmfast.integrations.prv_accountant.privacy_random_variables import PoissonSubsampledGaussianMechanism

Same names, argument names and order, defaults and return shapes as prv_accountant 0.2:
``Accountant`` (deprecated, with a ``DeprecationWarning``), ``PRVAccountant(prvs, eps_error,
delta_error, max_self_compositions=None, eps_max=None)`` with ``compute_epsilon(delta,
num_self_compositions)`` and ``compute_delta(epsilon, num_self_compositions)``, the PRVs
``PoissonSubsampledGaussianMechanism(sampling_probability, noise_multiplier)`` and
``GaussianMechanism(noise_multiplier, l2_sensitivity=1.0)``, and the submodules ``dpsgd``
(``DPSGDAccountant``, ``find_noise_multiplier``), ``privacy_random_variables`` and
``accountant``.  prv_accountant itself is never imported.

Conventions
-----------
* The numbers are sgmfast's PLD accountant's (:class:`sgmfast.pld.PLDAccountant`): a list of
  PRVs with a list of self-composition counts is the schedule of ``PLDAccountant().step(sigma,
  q, count)``, one per PRV (a ``GaussianMechanism`` is q = 1, sigma = noise_multiplier /
  l2_sensitivity), under the add/remove relation with both directions bounded (prv composes
  the "remove" direction only; where the other dominates, sgmfast's epsilon is the larger).
* ``(lower, estimate, upper)``: lower and upper are sgmfast's certified bounds (``lower <= true
  value <= upper``, rounding included); the estimate is the certified upper bound, so it is
  never below the true value (prv's estimate can be on either side, and its lower bound can
  exceed the true epsilon at small noise).
* ``eps_error`` (absolute, as in prv) bounds the width of the epsilon interval: sgmfast is asked
  for relative accuracy 1e-3 and, when ``upper - lower > eps_error``, again at ``0.9 * eps_error
  / upper`` (at least 1e-5 relative; below that the interval is certified but may be wider than
  ``eps_error``).  For delta, the relative accuracy is ``eps_error / epsilon`` clipped to
  [1e-5, 1e-3]; where sgmfast's RDP bound (``sgmfast.rdp``) puts delta below 1e-30, the answer
  is (0, that bound), certified and at most 1e-30 wide.  ``delta_error`` and ``eps_max`` are
  accepted and have no role: sgmfast's bounds hold at the exact delta or epsilon asked for and
  need no assumed range.
* ``ValueError`` when a count exceeds ``max_self_compositions`` (default 1 per PRV), as prv.
* ``find_noise_multiplier`` returns the smallest sigma (1e-4 relative) whose certified upper
  bound meets the target, and raises ``RuntimeError`` when that sigma exceeds ``mu_max``, as prv
  does when its search passes ``mu_max``.
* ``LaplaceMechanism``, ``PureDPMechanism``, ``ApproximateDPMechanism`` (and other PRV classes)
  can be constructed, but sgmfast does not account them: ``PRVAccountant`` raises
  ``NotImplementedError`` naming the mechanism instead of returning a number.
* Not provided: ``compute_composition`` (prv's discretised composed PRV; it raises
  ``NotImplementedError``), prv's ``other_accountants``, ``domain``, ``composers``,
  ``discretisers``.
"""

from . import accountant, privacy_random_variables  # noqa: F401
from .accountant import Accountant, PRVAccountant
from .privacy_random_variables import (ApproximateDPMechanism, GaussianMechanism, LaplaceMechanism,
                                       PoissonSubsampledGaussianMechanism, PrivacyRandomVariable, PureDPMechanism)
from . import dpsgd  # noqa: E402,F401  (after the accountant it subclasses)

__all__ = ["Accountant", "PRVAccountant", "PrivacyRandomVariable", "PoissonSubsampledGaussianMechanism",
           "GaussianMechanism", "LaplaceMechanism", "PureDPMechanism", "ApproximateDPMechanism", "dpsgd",
           "privacy_random_variables", "accountant"]
