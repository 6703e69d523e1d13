"""Fixed-size lower ends against an independent upper bound: dp_accounting's RDP accountant for
sampling without replacement (Wang, Balle & Kasiviswanathan 2019; replace-one, its Gaussian at
noise sigma / 2: the batch sum moves by 2), at random points.  Every certified lower end must lie
below it (RDP is loose, so this catches only gross errors: bench/README, "Stop 60").

    PYTHONPATH=<tree> python bench/fixed_size_vs_dp_rdp.py SEED N     (needs the peers extra)

Draws n = 10^3..10^6, a batch b log-uniform in [1, n/3], sigma in [0.6, 6], T in [2, 3e4] and
δ in [1e-12, 1e-3] (log-uniform); prints each interval beside dp_accounting's ε and the count of
lower ends above it.
"""
import math, random, sys
import dp_accounting as dpa
from dp_accounting.rdp import rdp_privacy_accountant as rdpa
from sgmfast import pld
rng = random.Random(int(sys.argv[1]))
lu = lambda a, b: math.exp(rng.uniform(math.log(a), math.log(b)))
bad = 0
for i in range(int(sys.argv[2])):
    n = 10 ** rng.randint(3, 6)
    b = max(1, int(lu(1, n / 3)))
    s, T, d = lu(0.6, 6.0), max(2, int(lu(2, 3e4))), lu(1e-12, 1e-3)
    acc = rdpa.RdpAccountant(neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE)
    acc.compose(dpa.SampledWithoutReplacementDpEvent(n, b, dpa.GaussianDpEvent(s / 2)), T)
    e_rdp = acc.get_epsilon(d)
    bb = pld.epsilon(s, b / n, T, d, sampler="fixed_size")
    ok = bb.lower <= e_rdp * (1 + 1e-9)
    bad += not ok
    print(f"{i:3d} σ {s:.3g} q {b/n:.3g} T {T} δ {d:.2g}: pld [{bb.lower:.6g}, {bb.upper:.6g}] rdp {e_rdp:.6g} {'ok' if ok else 'WRONG'}", flush=True)
print("wrong:", bad)
