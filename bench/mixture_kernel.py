"""The mixture kernel's cost (``sgmfast._kernels.pld.schedule_parts.mix_power_range``): ns per product
and frequency, and per set of lattice points and frequency, on synthetic tables (bench/README, "Stop
58"; ``schedule_mix.PER_PRODUCT_FREQ`` and ``PER_SET_POINT_FREQ`` are charged from these).

    python bench/mixture_kernel.py

Each row: P lattice points, m parts of K points drawn from S sets, every part composed once
(T = 1), 20,000 frequencies; the best of three runs after a warm-up.  Then, for each K, the least
squares fit time / frequency = a * products + b * sets.
"""

from __future__ import annotations

import time

import numpy as np

from sgmfast._kernels.pld import schedule_parts as ks

H = 20000


def run(rng, points, m, kk, sets):
    lat = np.exp(1j * rng.random((points, H)) * 0.01) * (1 - 1e-6 * rng.random((points, H)))
    lre, lim = np.ascontiguousarray(lat.real), np.ascontiguousarray(lat.imag)
    rows = np.array([rng.choice(points, kk, replace=False) for _ in range(sets)])
    idx = rows[np.arange(m) % sets]
    w = rng.random((m, kk))
    w /= w.sum(axis=1, keepdims=True)
    bit_ptr, bit_idx = np.array([0, m], dtype=np.int64), np.arange(m, dtype=np.int64)
    sidx, inv = np.unique(idx, axis=0, return_inverse=True)
    scnt = np.bincount(inv.reshape(-1), minlength=sidx.shape[0]).astype(np.int64)
    out = np.empty(H, dtype=np.complex128)
    args = (lre, lim, idx, w, bit_ptr, bit_idx, sidx.astype(np.int64), np.ones(sidx.shape[0]),
            np.full(sidx.shape[0], 1e-12), scnt, float(m) + 4.0, out, 0, H, np.empty(0), np.empty(0))
    ks.mix_power_range(*args)
    best = np.inf
    for _ in range(3):
        t = time.perf_counter()
        ks.mix_power_range(*args)
        best = min(best, time.perf_counter() - t)
    return m, sidx.shape[0], best


def main():
    rng = np.random.default_rng(0)
    rows = []
    for points, m, kk, sets in [(160, 10000, 4, 100), (160, 2000, 4, 100), (160, 2000, 4, 1000), (160, 500, 4, 400),
                                (80, 400, 2, 66), (80, 4000, 2, 66), (80, 400, 2, 400)]:
        prod, nset, t = run(rng, points, m, kk, sets)
        rows.append((kk, prod, nset, t))
        print(f"K {kk} points {points} parts {m} sets {nset}: {t / H * 1e9:.0f} ns a frequency, "
              f"{t / (prod * H) * 1e9:.2f} ns a product-frequency")
    for kk in (2, 4):
        a = np.array([[p, s] for k, p, s, _ in rows if k == kk], dtype=np.float64)
        y = np.array([t / H * 1e9 for k, _, _, t in rows if k == kk])
        per_prod, per_set = np.linalg.lstsq(a, y, rcond=None)[0]
        print(f"K {kk}: {per_prod:.2f} ns a product-frequency, {per_set:.1f} ns a set-frequency")


if __name__ == "__main__":
    main()
