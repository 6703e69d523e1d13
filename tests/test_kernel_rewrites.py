"""Kernels rewritten for speed give the floats of the forms they replaced, bit for bit.

* ``fft_power.power_range``: a one-part frequency whose power underflows skips its log and exps
  (they would give exactly 0) -- checked against a plain-Python transcription of the loop as it
  was (CPython's ``math`` and complex arithmetic call the same libm as the kernel);
* ``chernoff._prefix_sums``: the lams side by side -- against one scalar walk per lam;
* ``chernoff.spread_coarse`` and ``chernoff.step_bound`` -- against the numpy forms
  (``np.bincount``, ``np.searchsorted``) they replaced in ``epoch_chernoff._majorant`` and
  ``epoch_tail._given_one``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sgmfast._kernels.logmath import EPS64
from sgmfast._kernels.pld import chernoff as kc
from sgmfast._kernels.pld import fft_power as kf


_cpow = kf._cpow.py_func  # (unchanged: exponentiation by squaring, run as Python)


def _power_range_before(spectra, counts, e2, out, k0, k1, wsum):
    """``power_range`` as it was before the underflow shortcut, in plain Python."""
    mcount, h = spectra.shape
    ntot = float(sum(int(c) for c in counts))
    rel = math.expm1(ntot * math.log1p(3.0 * EPS64))
    err = z2 = 0.0
    logr = [0.0] * mcount
    ws = [0.0] * mcount
    for k in range(k0, k1):
        wk = 1.0 if (k == 0 or k == h - 1) else 2.0
        lr = 0.0
        for i in range(mcount):
            r = abs(complex(spectra[i, k])) + float(e2[i])
            logr[i] = math.log(r) if r > 0.0 else -math.inf
            lr += int(counts[i]) * logr[i]
        for i in range(mcount):
            if logr[i] > -math.inf:
                w = math.exp(lr - logr[i] + 1e-12 * (1.0 + abs(lr - logr[i])))
            else:
                w = 0.0 if counts[i] > 1 else math.exp(lr)
            ws[i] += wk * w * w
        if lr < -740.0:
            out[k] = 0.0
            err += wk * math.exp(lr) + wk * 1e-300
            continue
        z = complex(1.0, 0.0)
        for i in range(mcount):
            z = z * _cpow(complex(spectra[i, k]), int(counts[i]))
        out[k] = z
        mag = math.exp(lr + 1e-12 * (1.0 + abs(lr)))
        err += wk * (rel * mag + 1e-300 * ntot)
        z2 += wk * (z.real * z.real + z.imag * z.imag)
    up = 1.0 + ((k1 - k0) + 3.0) * EPS64
    for i in range(mcount):
        wsum[i] += ws[i] * up
    return err, z2


@pytest.mark.parametrize("counts", [[2], [3], [17], [10000], [3, 1], [200, 7]])
def test_power_range_is_the_loop_it_was(counts):
    rng = np.random.default_rng(len(counts) * 1000 + counts[0])
    h = 600
    # moduli from 1 down to 1e-6 (underflowing at the large counts, not at the small), and 0
    mod = np.exp(-rng.uniform(0.0, 14.0, size=(len(counts), h)) * rng.random((len(counts), h)) ** 3)
    mod[:, 5] = 0.0
    mod[:, 0] = 1.0
    spectra = (mod * np.exp(2j * np.pi * rng.random((len(counts), h)))).astype(np.complex128)
    counts = np.array(counts, dtype=np.int64)
    e2 = np.full(len(counts), 1e-15)
    out_a, out_b = np.empty(h, np.complex128), np.empty(h, np.complex128)
    ws_a, ws_b = np.zeros(len(counts)), np.zeros(len(counts))
    got = kf.power_range(spectra, counts, e2, out_a, 0, h, ws_a)
    want = _power_range_before(spectra, counts, e2, out_b, 0, h, ws_b)
    assert got == want
    assert np.array_equal(out_a, out_b) and np.array_equal(ws_a, ws_b)


def _one_walk(w, h, lam, ks, second):
    """One lam's walk of ``_prefix_sums``, in plain Python."""
    ratio = math.exp(lam * h)
    a = b = b2 = 0.0
    e = 1.0
    rows = []
    j = 0
    for k in range(int(ks[-1]) + 1):
        e = math.exp(lam * (k * h)) if k % kc.CHERNOFF_BLOCK == 0 else e * ratio
        if w[k] > 0.0:
            a += w[k] * e
            b += w[k] * ((k * h) * e)
            if second:
                b2 += w[k] * ((k * h) * ((k * h) * e))
        while j < len(ks) and ks[j] == k:
            rows.append((a, b, b2))
            j += 1
    return rows


@pytest.mark.parametrize("nl", [1, 3, 4, 9])
def test_prefix_sums_side_by_side_are_one_walk_per_lam(nl):
    rng = np.random.default_rng(nl)
    w = rng.random(300) * (rng.random(300) > 0.2)
    w /= w.sum()
    lams = np.exp(np.linspace(-9.0, 0.5, nl))
    ks = np.array([0, 31, 32, 100, 299], dtype=np.int64)
    m, dm, d2m = (np.empty((ks.size, nl)) for _ in range(3))
    kc.chernoff_prefix(w, 0.37, lams, ks, m, dm, d2m)
    s, ds = np.empty(nl), np.empty(nl)
    kc.chernoff_sums(w, 0.37, lams, s, ds)
    for i, lam in enumerate(lams):
        rows = _one_walk(w, 0.37, float(lam), ks, True)
        assert [tuple(r) for r in zip(m[:, i], dm[:, i], d2m[:, i])] == rows
        assert (s[i], ds[i]) == rows[-1][:2]


@pytest.mark.parametrize("size,most", [(1, 4), (7, 3), (4097, 4096), (50000, 4096), (50000, 16384)])
def test_spread_coarse_is_the_bincount_form(size, most):
    rng = np.random.default_rng(size)
    w = rng.random(size) * rng.random(size) ** 6
    f = max(1, -(-w.size // most))
    k = np.arange(w.size)
    lo, frac = k // f, (k % f) / f
    n = w.size // f + 2
    want = (np.bincount(lo, w * (1.0 - frac), n) + np.bincount(lo + 1, w * frac, n)) * (1.0 + 1e-12)
    got = np.empty(n)
    kc.spread_coarse(w, int(f), int(n), got)
    assert np.array_equal(got, want)


def test_step_bound_is_the_searchsorted_form():
    rng = np.random.default_rng(5)
    x = np.arange(5000) * 0.3
    rs = np.unique(rng.uniform(10.0, 1600.0, 40))
    tails = np.minimum.accumulate(rng.random(rs.size))
    for cap, top in ((900.0, 1500.0), (2000.0, 1550.0), (5.0, 1e9), (1600.0, 0.0)):
        y = cap - x
        j = np.searchsorted(rs, y, side="right") - 1
        want = np.where(j >= 0, tails[np.maximum(j, 0)], 1.0)
        want[y >= top] = 0.0
        got = np.empty(x.size)
        kc.step_bound(rs, tails, cap, x, top, got)
        assert np.array_equal(got, want)
