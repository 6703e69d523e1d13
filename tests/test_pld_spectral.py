"""Curves' queries read off composed spectra (``sgmfast.pld.grid.spectral``).

The kernel's window sums are checked against the same sums taken in mpmath over the exact
inverse transform of the same float spectrum (independent of the kernel's geometric series),
with the kernel's own rounding bound; the spectral queries of real curve compositions against
the grid the spectrum would have been unrolled into (``materialise``, the path the single
queries take and the reference tables test).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from sgmfast import pld
from sgmfast._kernels.pld import spectral as ks
from sgmfast.pld import common as pld_common
from sgmfast.pld.grid import spectral
from sgmfast.pld.grid.queries import delta_bound, eps_bound


def _window_sums_mp(z, n, j0, big_j, theta_step, step):
    """sum_{k=J..top} x_k alpha^(k-J) (and beta) with x the exact inverse transform of the band z."""
    mpmath.mp.dps = 30
    nf = z.size
    zz = [mpmath.mpc(complex(v).real, complex(v).imag) for v in z]
    a = mpmath.exp(-mpmath.mpf(theta_step))
    b = mpmath.exp(-mpmath.mpf(theta_step) - mpmath.mpf(step))
    sa = sb = mpmath.mpf(0)
    top = j0 + n - 1
    for k in range(big_j, top + 1):
        x = zz[0].real
        for f in range(1, nf):
            w = mpmath.expjpi(mpmath.mpf(2 * ((k * f) % n)) / n)
            if 2 * f == n:
                x += zz[f].real * w.real
            else:
                x += 2 * (zz[f] * w).real
        x /= n
        sa += x * a ** (k - big_j)
        sb += x * b ** (k - big_j)
    return sa, sb


@settings(max_examples=25, deadline=None)
@given(half=st.integers(8, 120), band=st.floats(0.05, 1.0), j0=st.integers(-5000, 5000),
       pos=st.floats(0.0, 1.0), theta=st.floats(0.0, 30.0), log_step=st.floats(-5.0, -1.0),
       seed=st.integers(0, 2**31))
def test_window_sums_against_mpmath(half, band, j0, pos, theta, log_step, seed):
    """The kernel's sums lie within their rounding bound of the exact sums of the same spectrum."""
    n = 2 * half
    rng = np.random.default_rng(seed)
    x = rng.exponential(size=n) * np.exp(-0.5 * ((np.arange(n) - n / 2) / (0.1 * n)) ** 2)
    x /= x.sum()
    spec = np.fft.rfft(x)
    nf = max(1, int(band * spec.size))
    z = np.ascontiguousarray(spec[:nf])
    step = 10.0 ** log_step
    ts = theta * step
    qf, da, db = (np.zeros(nf, dtype=np.complex128) for _ in range(3))
    ra, rb = ks.spectral_prep(z, n, j0, ts, step, qf, da, db)
    big_j = j0 + int(pos * (n - 1))
    sa, sb, ra_j, rb_j, ha, hb, _ = ks._sums_at(z, n, j0, big_j, j0 + n - 1, ts, step, qf, da, db, ra, rb, 0.0)
    ea, eb = _window_sums_mp(z, n, j0, big_j, ts, step)
    assert abs(sa - ea) <= ra_j, (sa, ea, ra_j)
    assert abs(sb - eb) <= rb_j, (sb, eb, rb_j)
    m = j0 + n - big_j
    assert ha == pytest.approx(float(sum(mpmath.exp(-mpmath.mpf(ts) * i) for i in range(m))), rel=1e-14)


def _spectral_grids(monkeypatch, sigma, q, steps, delta):
    """(grid, target, answer) of every spectral search of a curve's checkpoints."""
    seen = []
    real = spectral.SpectralGrid.eps_bound

    def record(self, target, guess):
        out = real(self, target, guess)
        seen.append((self, target, out))
        return out

    monkeypatch.setattr(spectral.SpectralGrid, "eps_bound", record)
    pld_common.STEP_CACHE.clear()
    pld.epsilon_curve(sigma, q, steps, delta)
    return seen


@pytest.mark.parametrize("sigma,q,steps,delta", [
    (1.1, 256 / 60000, np.arange(1, 31) * 468, 1e-5),
    (0.7, 0.02, np.arange(1, 21) * 50, 1e-7),
    (3.0, 1e-3, [1000, 5000, 20000, 100000], 1e-10),
])
def test_spectral_answers_hold_on_the_grid(monkeypatch, sigma, q, steps, delta):
    """Each eps a spectral grid returns is certified by the grid itself and as tight as the
    grid's own answer (to 1e-5); its δ bounds agree with the grid's."""
    seen = _spectral_grids(monkeypatch, sigma, q, steps, delta)
    assert seen  # the curve took the spectral path
    for g, target, e_sp in seen[:: max(1, len(seen) // 12)]:
        grid = g.materialise()
        e_grid = eps_bound(grid, target)
        d = float(delta_bound(grid, np.array([e_sp]))[0])
        if g.pess:
            assert d <= target * (1 + 1e-6)  # (the grid adds its inverse transform's round-off)
            assert e_sp <= e_grid * (1 + 1e-5) + 1e-12
        else:
            assert d > target * (1 - 1e-6)
            assert e_sp >= e_grid * (1 - 1e-5) - 1e-12
        es = np.array([0.5 * e_grid, e_grid, 1.5 * e_grid])
        # (within the error share a spectral answer may carry, ``spectral.LOOSE``, else the grid's)
        np.testing.assert_allclose(g.delta_bound(es), delta_bound(grid, es), rtol=2e-4, atol=1e-300)


def test_usable_needs_a_narrow_band():
    assert spectral.SpectralGrid.usable(10, 4096, 1.0)
    assert not spectral.SpectralGrid.usable(1000, 4096, 1.0)
    assert not spectral.SpectralGrid.usable(10, 4096, -1.0)
    assert not spectral.SpectralGrid.usable(-1, 4096, 1.0)


def test_curve_without_the_spectral_path_agrees(monkeypatch):
    """The curve with every checkpoint unrolled into its grid gives the same certified intervals."""
    args = (1.1, 256 / 60000, np.arange(1, 21) * 702, 1e-5)
    pld_common.STEP_CACHE.clear()
    fast = pld.epsilon_curve(*args)
    monkeypatch.setattr(spectral.SpectralGrid, "usable", staticmethod(lambda band, n, theta: False))
    pld_common.STEP_CACHE.clear()
    slow = pld.epsilon_curve(*args)
    np.testing.assert_allclose(fast.lower, slow.lower, rtol=1e-6)
    np.testing.assert_allclose(fast.upper, slow.upper, rtol=1e-6)
    assert math.isfinite(fast.upper[-1])


def test_scratch_arrays_are_per_thread_and_name():
    """``common.scratch``: the same memory for the same thread and name (the point: no fresh pages
    a call), another for another name or thread, a new array above ``SCRATCH_MAX``."""
    from concurrent.futures import ThreadPoolExecutor

    a, b = pld_common.scratch("t1", 1000), pld_common.scratch("t1", 800)
    assert np.shares_memory(a, b) and b.size == 800
    assert not np.shares_memory(a, pld_common.scratch("t2", 1000))
    with ThreadPoolExecutor(1) as pool:
        other = pool.submit(pld_common.scratch, "t1", 1000).result()
    assert not np.shares_memory(a, other)
    big = pld_common.SCRATCH_MAX + 1
    assert not np.shares_memory(pld_common.scratch("t1", big), pld_common.scratch("t1", big))


def test_banded_compositions_keep_nothing_of_the_scratch():
    """A composed grid read after later compositions (which reuse the scratch spectra and fold
    buffer) answers as it did right after it was built."""
    from sgmfast.pld.common import REMOVE, TAU_STEP
    from sgmfast.pld.grid.banded import compose_banded
    from sgmfast.pld.grid.composition import compose_copies
    from sgmfast.pld.grid.onestep import one_step

    step = 2e-3

    def grid(sigma, q):
        return compose_copies([(one_step(sigma, q, REMOVE, step), 1000)], step, 2.0, TAU_STEP, True,
                              finish=compose_banded)

    g = grid(1.0, 0.01)
    first = spectral.read_eps(g, 1e-5, 2.0)
    later = grid(0.9, 0.01)
    grid(0.8, 0.02)
    assert spectral.read_eps(g, 1e-5, 2.0) == first
    assert spectral.read_eps(later, 1e-5, 2.0) > first
