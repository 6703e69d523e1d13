"""Shared scenario registry for the benchmarks (and the peer table)."""

DELTA = 1e-5

#: (q, sigma, steps) of the epsilon scenarios named in the issues.
EPSILON_SCENARIOS = [
    (0.01, 1.0, 1000),
    (256 / 60000, 1.1, 14062),
    (0.001, 0.8, 100_000),
    (1e-4, 0.6, 1_000_000),
]


def scenario_id(q, sigma, steps):
    return f"q={q:.4g},sigma={sigma:g},T={steps:g}"
