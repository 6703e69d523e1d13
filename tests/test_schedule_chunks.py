"""Lattice compositions in chunks of points (``schedule_compose.CHUNK_BYTES``, #31 item 3): a
composition whose table of lattice spectra would pass the chunk size holds the spectra of a few
points at a time, and multiplies the chunks' products (``_Joined``, with its error bound).

Checked here: the chunks cover every part once and hold at most their size; the chunked
product's error bound (``_Joined``) against the exact product of perturbed spectra (rationals),
beside one table's; and a noise-level schedule composed in
chunks of two points against the same composition in one table and against the exact composition
of its distinct steps (``engine.Engine``, no lattice)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sgmfast.pld import schedule_compose as sc
from sgmfast.pld.engine import Engine
from sgmfast.pld.schedules import MAX_PARTS, make_engine


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 40), st.integers(2, 6), st.integers(2, 4), st.integers(0, 2**32 - 1))
def test_chunks_hold_every_part_once_within_their_size(points, per, kk, seed):
    rng = np.random.default_rng(seed)
    per = max(per, kk)
    first = rng.integers(0, points, size=3 * points)
    jdx = np.minimum(first[:, None] + np.arange(kk)[None, :] * rng.integers(0, 2, size=(first.size, 1)), points - 1)
    chunks = sc._chunks(jdx, per)
    seen = np.concatenate([sel for _, sel in chunks])
    assert sorted(seen.tolist()) == list(range(jdx.shape[0]))
    for rows, sel in chunks:
        assert rows.size <= per and (np.diff(rows) > 0).all()
        assert np.isin(jdx[sel], rows).all()
    if np.unique(jdx).size <= per:  # (one chunk: the parts in their order, the one-table path)
        assert len(chunks) == 1 and (chunks[0][1] == np.arange(jdx.shape[0])).all()


def _tables(seed, points=6, h=9):
    """Lattice spectra of modulus 1 whose phases drift slowly from point to point (so that the
    parts' moduli stay near 1 and errors are not damped), the same spectra moved outwards by errors
    of full-spectrum l2 norm 0.9 e2, even over the frequencies (the "exact" ones, in rationals:
    the input-error term's worst case up to Cauchy-Schwarz), and noise-chord parts over them."""
    rng = np.random.default_rng(seed)
    phase = rng.uniform(-np.pi, np.pi, h)[None, :] + 0.05 * rng.standard_normal((points, h)).cumsum(axis=0)
    lat = np.exp(1j * phase) * 0.999
    lat[:, 0] = 0.999  # (the ends of a real array's half spectrum are real)
    lat[:, -1] = np.where(rng.random(points) < 0.5, 0.999, -0.999)
    wk = np.full(h, 2.0)
    wk[0] = wk[-1] = 1.0
    e2 = np.full(points, 1e-9 * (1 + seed))
    d = lat / np.abs(lat)
    d *= (0.9 * e2 / np.sqrt((wk * np.abs(d) ** 2).sum(axis=1)))[:, None]
    exact = [[(Fraction(float(f.real)) + Fraction(float(e.real)), Fraction(float(f.imag)) + Fraction(float(e.imag)))
              for f, e in zip(row, drow)] for row, drow in zip(lat, d)]
    m = 10
    first = rng.integers(0, points - 1, m)
    jdx = np.column_stack((first, first + 1)).astype(np.int64)
    wt = rng.uniform(0.1, 1, (m, 2))
    wt /= wt.sum(axis=1, keepdims=True)
    k = rng.integers(1, 5, m).astype(np.int64)
    nrm = np.sqrt(2 * h * (wk * np.abs(lat) ** 2).sum(axis=1))  # (any bound on the l2 norm)
    pe2 = ((wt * e2[jdx]).sum(axis=1) + 2 * 2 * sc.U * (wt * nrm[jdx]).sum(axis=1) + 4 * sc.U) * (1 + 1e-9)
    return lat, exact, jdx, wt, k, pe2, wk


def _exact_error(exact, jdx, wt, k, z, wk):
    """sum_k w_k |prod_j (sum_c w_jc F_exact[jdx_jc])^{k_j} - z_k|, the product in rationals."""
    tot = 0.0
    for f in range(z.size):
        pr, pi = Fraction(1), Fraction(0)
        for j in range(jdx.shape[0]):
            yr = sum(Fraction(float(wt[j, c])) * exact[jdx[j, c]][f][0] for c in range(2))
            yi = sum(Fraction(float(wt[j, c])) * exact[jdx[j, c]][f][1] for c in range(2))
            for _ in range(int(k[j])):
                pr, pi = pr * yr - pi * yi, pr * yi + pi * yr
        dr, di = float(pr - Fraction(float(z[f].real))), float(pi - Fraction(float(z[f].imag)))
        tot += wk[f] * float(np.hypot(dr, di)) * (1 + 1e-15)
    return tot


@pytest.mark.parametrize("seed", range(5))
def test_chunks_product_bounds_the_exact_product(seed):
    lat, exact, jdx, wt, k, pe2, wk = _tables(seed)
    lre, lim = np.ascontiguousarray(lat.real), np.ascontiguousarray(lat.imag)
    n = 2 * (lat.shape[1] - 1)
    (err1, z2_1), z1 = sc._mix_power(lre, lim, jdx, wt, pe2, k, n)
    acc = sc._Joined(lat.shape[1])
    chunks = sc._chunks(jdx, 3)
    assert len(chunks) > 1
    for rows, sel in chunks:
        local = np.searchsorted(rows, jdx[sel])
        acc.add(*sc._mix_power(np.ascontiguousarray(lre[rows]), np.ascontiguousarray(lim[rows]), local, wt[sel],
                               pe2[sel], k[sel], n, True))
    (err, z2), z = acc.result()
    assert _exact_error(exact, jdx, wt, k, z1, wk) <= err1
    assert _exact_error(exact, jdx, wt, k, z, wk) <= err
    assert err <= 1.5 * err1  # (as tight as one table, up to the chunks' own rounding)
    assert z2 >= float((wk * np.abs(z) ** 2).sum())
    assert np.allclose(z, z1, rtol=0, atol=1e-12)


def _noise_schedule():
    rng = np.random.default_rng(7)
    return [(float(s), 0.004, 40) for s in rng.uniform(0.9, 1.3, MAX_PARTS + 8)]


def test_chunked_composition_meets_the_one_table_and_the_exact_one(monkeypatch):
    sched = _noise_schedule()
    eng = make_engine(sched, 1e-3)
    assert type(eng.mix).__name__ == "MixEngine"
    whole = eng.epsilon(1e-6)[:2]
    d_whole = eng.delta(np.array([0.3, 0.8]))
    calls = []
    result = sc._Joined.result
    monkeypatch.setattr(sc._Joined, "result", lambda self: calls.append(1) or result(self))
    monkeypatch.setattr(sc, "CHUNK_BYTES", 1)  # (chunks of two points: the most products)
    eng = make_engine(sched, 1e-3)
    chunked = eng.epsilon(1e-6)[:2]
    d_chunked = eng.delta(np.array([0.3, 0.8]))
    assert calls
    exact = Engine(sched, 1e-3).epsilon(1e-6)[:2]
    d_exact = Engine(sched, 1e-3).delta(np.array([0.3, 0.8]))
    for lo, up in (whole, chunked):
        assert lo <= exact[1] and exact[0] <= up
    assert chunked[0] <= whole[1] and whole[0] <= chunked[1]
    assert abs(chunked[1] - whole[1]) <= 1e-6 * whole[1] and abs(chunked[0] - whole[0]) <= 1e-6 * whole[0]
    for lo, up in (d_whole, d_chunked):
        assert (lo <= d_exact[1]).all() and (d_exact[0] <= up).all()
    assert np.allclose(d_chunked, d_whole, rtol=1e-6, atol=0)
