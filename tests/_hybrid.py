"""The direct composition of hybrid one-step arrays (core on the fine grid, tails on every m-th
fine point), by numpy's FFT without any tilt: the check of the tail-event sums
(tests/test_pld_events.py, tests/test_pld_events_multi.py)."""

from __future__ import annotations

import math

import numpy as np

from sgmfast.pld.common import REMOVE
from sgmfast.pld.grid import onestep


def one_array(sigma, q, step, m, hi_cut, pess):
    """(first fine point, the hybrid one-step array on the fine grid: the tail on every m-th point,
    the +inf mass) of one remove step cut at coarse point ``hi_cut``."""
    hyb = onestep.hybrid_step(sigma, q, REMOVE, step, m, 1e-30, 1e-300, hi_cut)
    pc = hyb.core.pess if pess else hyb.core.opt
    pr = hyb.tail(pess)
    lo = min(hyb.core.j_lo, hyb.big_lo * m)
    hi = max(hyb.core.j_lo + pc.size - 1, hyb.big_hi * m)
    one = np.zeros(hi - lo + 1)
    one[hyb.core.j_lo - lo : hyb.core.j_lo - lo + pc.size] += pc
    one[hyb.big_lo * m - lo :: m][: pr.size] += pr
    return lo, one, hyb.p_inf


def direct_delta(schedule, step, m, cut, pess, eps):
    """δ(eps) of the composition of every entry's hybrid one-step arrays [(sigma, q, count)]; the
    +inf mass counts in full (pessimistic).  On the fine grid: with m > 1 the event terms coarsen
    the core powers, which (pessimistic) keeps δ or raises it."""
    hi_cut = max(math.ceil(cut / (m * step)), 1)
    arrays = [(one_array(s, q, step, m, hi_cut, pess), t) for s, q, t in schedule]
    n = sum(t * (one.size - 1) for (_, one, _), t in arrays) + 1
    nfft = 1 << (n - 1).bit_length()
    spec = np.ones(nfft // 2 + 1, dtype=complex)
    for (_, one, _), t in arrays:
        spec *= np.fft.rfft(one, nfft) ** t
    comp = np.fft.irfft(spec, nfft)[:n]
    ell = (sum(t * lo for (lo, _, _), t in arrays) + np.arange(n)) * step
    out = np.array([float(np.sum(comp[ell > e] * -np.expm1(e - ell[ell > e]))) for e in eps])
    if pess:
        out += -math.expm1(sum(t * math.log1p(-p) for (_, _, p), t in arrays))
    return out


def check_terms(grids, rem, schedule, step, m, cut, pess, eps, all_kept):
    """The event terms' δ against ``direct_delta``: above it (pessimistic) or below (optimistic),
    equal up to round-off, coarsening (m > 1) and the remainder bound (``all_kept``: no term left
    to the union bound)."""
    import pytest

    from sgmfast.pld.grid import queries

    got = queries.sum_delta(grids, rem, eps)
    ref = direct_delta(schedule, step, m, cut, pess, eps)
    assert (ref > 1e-6).all()
    if pess:
        assert (got >= ref * (1 - 1e-9)).all()
        assert got == pytest.approx(ref, rel=1e-6 if m == 1 else 1e-3, abs=2 * rem + 1e-12)
    else:
        assert (got <= ref * (1 + 1e-9)).all()
        assert got == pytest.approx(ref, rel=1e-6 if m == 1 and all_kept else 2e-3)
