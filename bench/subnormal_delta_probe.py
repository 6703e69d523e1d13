"""One step's δ below the normal float range (1e-318 and below, subnormal floats): ``pld.delta`` and a
curve's first checkpoint (``pld.delta_curve``, the closed form) against the exact value (mpmath,
tests/reference/mp_exact.py, compared unrounded), add/remove and replace-one, 300 random (σ, q)
with eps where the exact δ is about 1e-318.

    python bench/subnormal_delta_probe.py > bench/subnormal_delta_probe.out
"""
import pathlib
import sys

import mpmath
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "reference"))
import mp_exact as m  # noqa: E402
from sgmfast import pld  # noqa: E402
rng = np.random.default_rng(3)
bad = 0; n = 0
for i in range(300):
    s = float(rng.uniform(2, 12)); q = float(10 ** rng.uniform(-5, -1))
    rel = 'replace_one' if rng.random() < 0.5 else 'add_remove'
    # aim eps where delta ~ 1e-315..1e-322: search on the analysis function
    lo, hi = 0.0, 50.0
    d = lambda e: m.one_step_delta(q, s, e, 'replace' if rel == 'replace_one' else 'max')
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        if d(mid) > mpmath.mpf('1e-318'): lo = mid
        else: hi = mid
    e = float(lo * (1 + 1e-4 * rng.random()))
    ref = d(e)
    if not (0 < ref < 2.2250738585072014e-308): continue
    n += 1
    checks = [("delta", pld.delta(s, q, 1, e, relation=rel)), ("curve", pld.delta_curve(s, q, [1, 2], e, relation=rel))]
    for name, b in checks:
        up = float(np.atleast_1d(b.upper)[0]); lo_ = float(np.atleast_1d(b.lower)[0])
        if mpmath.mpf(up) < ref or mpmath.mpf(lo_) > ref:
            bad += 1; print("BAD", name, s, q, e, rel, lo_, up, mpmath.nstr(ref, 6))
print(n, "probed,", bad, "bad")
