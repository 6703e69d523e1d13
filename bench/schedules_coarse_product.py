"""The product lattice at a coarser accuracy (``schedules.COARSE_PRODUCT``) against the exact
engine: N steps of random (sigma, q), sigma uniform in [0.9, 1.3] and q in [0.003, 0.006]
(``numpy.random.default_rng(SEED)``), add/remove, δ 1e-5; the accountant's interval (its engine
and the accuracy it ran at), and ``engine.Engine`` composing every step exactly with an
unbounded budget (72 s at N = 5000).  The two certified intervals must meet (bench/README,
"Stop 60").

    PYTHONPATH=<tree> python bench/schedules_coarse_product.py N [SEED] [--no-exact]
"""
import sys
import time

import numpy as np

from sgmfast.pld import PLDAccountant
from sgmfast.pld.engine import Engine


def main(n, seed=0, exact=True):
    rng = np.random.default_rng(seed)
    sig, q = rng.uniform(0.9, 1.3, n), rng.uniform(0.003, 0.006, n)
    acc = PLDAccountant()
    for s, qq in zip(sig, q):
        acc.step(float(s), float(qq))
    t = time.time()
    b = acc.epsilon(1e-5)
    mix = acc._engine.mix
    print(f"accountant: [{b.lower:.6f}, {b.upper:.6f}] {(b.upper - b.lower) / b.upper:.2e} met {b.met}, "
          f"{time.time() - t:.1f} s, {type(mix).__name__} at accuracy {getattr(mix, 'accuracy', None)}", flush=True)
    if not exact:
        return
    t = time.time()
    lo, up = Engine([(float(s), float(qq), 1) for s, qq in zip(sig, q)], 1e-3, budget=1e9).epsilon(1e-5)[:2]
    print(f"exact engine: [{lo:.6f}, {up:.6f}] {(up - lo) / up:.2e}, {time.time() - t:.1f} s")
    print("meet:", bool(b.lower <= up and lo <= b.upper))


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--no-exact"]
    main(int(args[0]), int(args[1]) if len(args) > 1 else 0, "--no-exact" not in sys.argv)
