"""Answers count work, never read a clock: the same call gives the same interval, bit for bit,
on a quiet machine and beside processes that keep every core busy (issue #30 item 2)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from sgmfast import pld
from sgmfast.pld import common


def _answers():
    common.STEP_CACHE.clear()  # (cold: every refinement level is recomputed)
    acc = pld.PLDAccountant()
    for s in np.linspace(0.9, 1.3, 300):  # more distinct steps than MAX_PARTS: the sandwich
        acc.step(float(s), 0.01, 2)
    return [tuple(pld.epsilon(1.0, 0.01, 300, 1e-5, sampler="balls_in_bins")),
            tuple(pld.delta(1.5, 1 / 2, 2, 3.3, sampler="balls_in_bins")),
            tuple(pld.epsilon(1.1, 256 / 60000, 3000, 1e-5, sampler="fixed_size")),
            tuple(acc.epsilon(1e-5))]


def test_same_interval_beside_cpu_hogs():
    quiet = _answers()
    hogs = [subprocess.Popen([sys.executable, "-c", "for _ in range(10 ** 12): pass"])
            for _ in range(3)]
    try:
        busy = _answers()
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    assert busy == quiet
