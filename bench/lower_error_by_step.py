"""Errors of the certified lower and upper ε at fixed grid steps, relative to a reference interval
at accuracy 1e-6 (its midpoint; its own width is printed), for a few (σ, q, T, δ).

Shows the optimistic one-step grid's order in the step: a first-order loss in the lower end (the
contraction sweep's last carry rounded down beside the remove direction's hard lower end,
bench/README stop 61) shows as errors that jump with the step's alignment to log(1 - q) and do not
shrink fourfold per halving; a second-order one as errors about twice the upper's.

Run: ``python bench/lower_error_by_step.py`` (about a minute; output in lower_error_by_step.out).
"""
from sgmfast import pld

POINTS = [(1.0, 0.004, 10_000, 1e-5), (1.1, 256 / 60000, 14062, 1e-5), (0.8, 1e-3, 100_000, 1e-5)]
STEPS = [4e-4, 3e-4, 2.4e-4, 2e-4, 1.81e-4, 1.5e-4, 1.2e-4, 1e-4, 9.05e-5, 6e-5]

for s, q, t, d in POINTS:
    ref = pld.epsilon(s, q, t, d, accuracy=1e-6)
    mid = 0.5 * (ref.lower + ref.upper)
    print(f"sigma {s}, q {q:.6g}, T {t}, delta {d:g}: reference [{ref.lower:.9f}, {ref.upper:.9f}]")
    print("  grid step   lower error   upper error   (relative to the reference's midpoint)")
    for h in STEPS:
        b = pld.epsilon(s, q, t, d, grid_step=h)
        print(f"  {h:9.3g}   {(mid - b.lower) / mid:11.2e}   {(b.upper - mid) / mid:11.2e}")
