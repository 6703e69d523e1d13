"""What the rounding-constant tests share: the unit round-off, the mpmath precision they measure
at (an autouse fixture each test module imports), and ``check``, which prints the measured worst
against the stated constant and asserts it is within it."""

from __future__ import annotations

import mpmath
import pytest

U = 2.0 ** -53  # unit round-off (the kernels' EPS64 is 2 u)
DPS = 50


@pytest.fixture(autouse=True)
def _precision():
    with mpmath.workdps(DPS):
        yield


def check(name, worst, bound):
    """Print the measured worst / the stated constant (``pytest -s``) and assert it is <= 1."""
    worst, bound = float(worst), float(bound)
    ratio = worst / bound
    print(f"\n{name}: measured worst {worst:.3g}, stated {bound:.3g}, ratio {ratio:.3g}")
    assert worst <= bound, f"{name}: measured worst {worst!r} exceeds the stated {bound!r} (ratio {ratio:.3g})"
