"""Internal failures: a certifier could not finish a grid, and its caller keeps what it had
already certified (a sound interval, only wider).

None of them is a ``ValueError``.  ``ValueError`` means bad input and is raised only at the API
boundary; a ``ValueError`` from inside a certifier (a math domain error, a wrong shape) is a bug,
and it surfaces instead of quietly becoming a wider "certified" answer.  (No numba, no numpy
here: every layer imports it.)
"""

from __future__ import annotations


class GridFailure(Exception):
    """A grid could not be built or finished; the interval certified so far stands."""


class GridTooLarge(GridFailure):
    """The grid a step or a composition needs has more bins than the memory cap allows."""


class WorkLimit(GridFailure):
    """A metered block went past its hard work limit: the work in progress is abandoned (nothing
    partial is returned)."""


class StepUnderflow(GridFailure):
    """Refining the grid step would take it below the smallest step supported (1e-12)."""


class Unverified(RuntimeError):
    """A calibrated answer whose certified value, evaluated again, misses the target it was
    verified against (the command line reports it as an error rather than print that value)."""
