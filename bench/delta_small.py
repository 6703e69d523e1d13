"""δ(eps) where δ is small, read back at the eps that eps(δ) certifies: random Poisson points (σ
0.4-10, q 1e-5-1, T 1-1e5, δ 1e-45-1e-3, a quarter replace-one), bench/README "Stop 67".

    python bench/delta_small.py N SEED [--points FILE] [--save FILE]

For each point: e = pld.epsilon(σ, q, T, δ), then pld.delta at e's midpoint (and, as a check of
the two entry points, at e's ends: δ(e.upper) has lower end <= δ, δ(e.lower) upper end >= δ --
the truth satisfies both).  ``--save`` writes the points (with e), ``--points`` reads them back,
so two trees answer the same queries.  Prints a line a point (the δ interval, its relative
width, seconds, work units) and a summary by δ band.
"""
import argparse
import json
import math
import statistics
import time

import numpy as np

from sgmfast import pld
from sgmfast._work import UNITS_PER_SECOND, metered


def points(n, seed):
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        s = float(np.exp(rng.uniform(np.log(0.4), np.log(10))))
        q = float(np.exp(rng.uniform(np.log(1e-5), 0.0)))
        T = int(np.exp(rng.uniform(0, np.log(1e5))))
        d = float(np.exp(rng.uniform(np.log(1e-45), np.log(1e-3))))
        rel = "replace_one" if rng.uniform() < 0.25 else "add_remove"
        e = pld.epsilon(s, q, T, d, relation=rel)
        if math.isfinite(e.upper) and e.upper > 0:
            out.append(dict(s=s, q=q, T=T, d=d, rel=rel, elo=float(e.lower), eup=float(e.upper)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("n", type=int)
    ap.add_argument("seed", type=int)
    ap.add_argument("--points")
    ap.add_argument("--save")
    a = ap.parse_args()
    pts = json.load(open(a.points)) if a.points else points(a.n, a.seed)
    if a.save:
        json.dump(pts, open(a.save, "w"))
    rows, bad = [], 0
    for p in pts:
        eps = 0.5 * (p["elo"] + p["eup"])
        t = time.perf_counter()
        with metered() as m:
            b = pld.delta(p["s"], p["q"], p["T"], eps, relation=p["rel"])
        sec, units = time.perf_counter() - t, m.units / UNITS_PER_SECOND
        lo_end = pld.delta(p["s"], p["q"], p["T"], p["eup"], relation=p["rel"]).lower
        up_end = pld.delta(p["s"], p["q"], p["T"], p["elo"], relation=p["rel"]).upper
        ok = lo_end <= p["d"] <= up_end
        bad += not ok
        w = (b.upper - b.lower) / b.upper if b.upper > 0 else 0.0
        rows.append((p["d"], w, sec, units))
        print(f"σ {p['s']:.4g} q {p['q']:.3g} T {p['T']} {p['rel']:11s} δ {p['d']:.3g}: eps [{p['elo']:.6g}, "
              f"{p['eup']:.6g}]  δ(mid) [{b.lower:.5g}, {b.upper:.5g}] {w:.2g}  {sec:.2f} s {units:.2f} u"
              f"{'' if ok else '  INCONSISTENT'}", flush=True)
    print(f"\n{len(rows)} points; eps(δ) and δ(eps) inconsistent at {bad}")
    for label, sel in (("δ >= 1e-18", lambda r: r[0] >= 1e-18), ("δ < 1e-18", lambda r: r[0] < 1e-18)):
        rr = [r for r in rows if sel(r)]
        if rr:
            print(f"{label}: {len(rr)} points, median relative width {statistics.median(r[1] for r in rr):.3g}, "
                  f"over 10 % {sum(r[1] > 0.1 for r in rr)}, seconds {sum(r[2] for r in rr):.1f} (max "
                  f"{max(r[2] for r in rr):.2f}), units {sum(r[3] for r in rr):.1f}")


if __name__ == "__main__":
    main()
