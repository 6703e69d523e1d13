"""Balls-in-bins' Chernoff tables (``pld.samplers.epoch_chernoff._Table``, ``_kernels.pld.chernoff``):
the MGF of every truncated majorant on one lam grid, and the least bound over it by a search.

* Each look-up's log bound is rounded up past the exact one (x87 long double sums of the float
  masses at the exact lattice points) by at most its charged margin, on the lattices the
  sampler builds (heavy and light tails), every truncation row, at caps across the sum's range.
* The search (``chernoff_least``: bisection on the exponents' slopes) finds the least of the
  values over every lam: a walk that stopped at the first rise of their float noise kept a bound
  of 1 for one of 1e-30 (sigma 0.42, t 10^4).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sgmfast._kernels.pld import chernoff as kc
from sgmfast.pld.common import U, dot
from sgmfast.pld.samplers import epoch_chernoff as ec
from sgmfast.pld.samplers import epoch_tail as et

from _rounding import check as _check

#: (sigma, t, lattice spacing h, cells K): a heavy tail at the top of the range (sigma 0.42,
#: t 10^4: the lattice of the query that found the walk's fault), a middling one, a light one.
LATTICES = [(0.42, 10000, 234.8, 2048), (0.6, 300, 0.05, 20000), (2.0, 1000, 0.01, 3000)]


def _table(sigma, t, h, K):
    wu = et.upper_law(1.0 / sigma, h, K)
    wc, H = ec.coarse_majorant(wu, h)
    return wc, H, ec._Table(wc, H, t)


@pytest.mark.parametrize("sigma,t,h,K", LATTICES)
def test_table_bounds_are_rounded_up_past_the_exact_ones(sigma, t, h, K):
    """For every row k (the law wc[0 .. k], q_M added at 0, p_M to M') and every 7th lam: the
    Q and P exponents as the kernel computes them are >= the exact ones (long double sums at the
    exact points k H), by at most the charged margin t r + 2u (sums of magnitudes).  Measured
    worst 0.69 of the margin (sigma 0.42: the float subtraction t log M - lam c of two terms near
    7e6), 0.48 at the others."""
    if np.finfo(np.longdouble).nmant < 60:
        pytest.skip("needs an extended-precision long double for the reference")
    wc, H, tab = _table(sigma, t, h, K)
    m1 = dot(wc, np.arange(wc.size) * H)
    worst = 0.0
    rows = list(et._truncations(wc, H, t, m1, 1.0 / sigma, K * h, ec.GIVEN_TRUNCATIONS)) + [(0.0, 0.0, wc.size - 1)]
    for q0, dm0, k in rows:
        m, dm, _, r = tab.rows[k]
        wl = wc[:k + 1].astype(np.longdouble)
        xl = np.arange(k + 1).astype(np.longdouble) * np.longdouble(H)
        for i in range(0, tab.lams.size, 7):
            lam = float(tab.lams[i])
            with np.errstate(over="ignore", invalid="ignore"):
                el = np.exp(np.longdouble(lam) * xl)
                ml = (wl * el).sum() + np.longdouble(q0)
                dml = (wl * xl * el).sum() + np.longdouble(dm0)
            if not (np.isfinite(ml) and np.isfinite(dml)) or dml <= 0 or ml > 1e300:
                continue
            for cap in (0.5 * t * m1, t * m1, 2.0 * t * m1, 0.5 * t * k * H):
                lp, lq = kc._log_bounds(m[i] + q0, dm[i] + dm0, cap * lam, float(t), r[i])
                if not (math.isfinite(m[i] + q0) and math.isfinite(dm[i] + dm0)):
                    assert lp == lq == math.inf  # (overflowed in float64: no bound taken at this lam)
                    continue
                lcl = np.longdouble(lam) * np.longdouble(cap)
                ex_q = t * np.log(ml) - lcl
                ex_p = (t - 1) * np.log(ml) + np.log(dml) - lcl
                assert lq >= ex_q and lp >= ex_p, (k, lam, cap)
                lm, ldm, lc = math.log(m[i] + q0), math.log(dm[i] + dm0), cap * lam
                margin_q = t * r[i] + 2 * U * (t * abs(lm) + abs(lc) + 2.0)
                margin_p = t * r[i] + 2 * U * ((t - 1) * abs(lm) + abs(ldm) + math.log(t) + abs(lc) + 3.0)
                plain_q, plain_p = t * lm - lc, (t - 1) * lm + ldm - lc
                worst = max(worst, abs(float(np.longdouble(plain_q) - ex_q)) / margin_q,
                            abs(float(np.longdouble(plain_p) - ex_p)) / margin_p)
    _check(f"Chernoff table exponent error / its margin (sigma {sigma}, t {t})", worst, 1.0)


@pytest.mark.parametrize("sigma,t,h,K", LATTICES)
def test_the_search_finds_the_least_of_the_scan(sigma, t, h, K):
    """``chernoff_least`` at 64 caps from 0.1 to 40 times E[S] against the least over every lam of
    the same values (``chernoff_logs``), for every truncation row, both with and without the
    rows' q_M and p_M: equal in the exponent up to 1e-6 of it (float noise of flat curves)."""
    wc, H, tab = _table(sigma, t, h, K)
    m1 = dot(wc, np.arange(wc.size) * H)
    caps = np.geomspace(0.1 * t * m1, 40.0 * t * m1, 64)
    rows = list(et._truncations(wc, H, t, m1, 1.0 / sigma, K * h, ec.GIVEN_TRUNCATIONS))
    for q0, dm0, k in rows + [(0.0, 0.0, k) for _, _, k in rows] + [(0.0, 0.0, wc.size - 1)]:
        m, dm, d2m, r = tab.rows[k]
        out_p, out_q = np.empty(caps.size), np.empty(caps.size)
        kc.chernoff_least(m, dm, d2m, q0, dm0, r, tab.lams, caps, float(t), out_p, out_q)
        lp, lq = np.empty((caps.size, tab.lams.size)), np.empty((caps.size, tab.lams.size))
        kc.chernoff_logs(m + q0, dm + dm0, r, tab.lams, caps, float(t), lp, lq)
        for got, scan in ((out_p, lp.min(axis=1)), (out_q, lq.min(axis=1))):
            with np.errstate(divide="ignore"):
                lg = np.log(got)
            want = np.minimum(scan, 0.0)
            ok = (lg <= want + 1e-6 * (1.0 + np.abs(want)) + 1e-11) | (want < -700)  # (below: subnormal exps)
            assert ok.all(), (k, caps[~ok], lg[~ok], want[~ok])
