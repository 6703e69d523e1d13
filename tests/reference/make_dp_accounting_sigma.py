"""Reference noise multipliers from dp_accounting's PLD accountant on a fine grid.

For issue #4's check "sigma agrees with dp_accounting's PLD calibration at a fine grid to
0.1 %": for each (epsilon, delta, q, T) below, dp_accounting.calibrate_dp_mechanism (its
Brent search) finds the smallest sigma whose PLD epsilon, with a value discretisation
interval of 1e-4 (connect-the-dots, pessimistic), is <= epsilon, to an absolute tolerance
of 1e-7 in sigma. dp_accounting is an independent implementation; its pessimistic estimate
is not a certified bound, so tests compare to 0.1 % rather than demand an ordering.

Run: ``python tests/reference/make_dp_accounting_sigma.py`` (needs the ``peers`` extra;
a few minutes), which rewrites ``dp_accounting_sigma.csv`` beside it.
"""

import csv
from pathlib import Path

import dp_accounting as dpa
from dp_accounting.pld import pld_privacy_accountant

POINTS = [  # epsilon, delta, q, T
    (8.0, 1e-5, 256 / 60000, 14062),
    (3.0, 1e-5, 0.001, 100_000),
    (1.0, 1e-5, 0.01, 1000),
    (0.5, 1e-5, 0.1, 10),
    (0.125, 1e-5, 0.001, 1000),
    (2.0, 1e-6, 0.05, 200),
    (1.0, 1e-5, 0.001, 10),
]


def sigma_for(eps, delta, q, steps):
    def make_event(sigma):
        return dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(sigma))

    def make_accountant():
        return pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)

    # Bracket: +-3 % around sgmfast's PLD sigma. Only the bracket comes from sgmfast: the root is
    # dp_accounting's, and brentq fails loudly if the bracket does not contain it. A wide
    # bracket reaching small sigma makes dp_accounting's PLD grid explode (tens of GB at
    # sigma = 0.05, T = 14062).
    from sgmfast.calibrate import calibrate_sigma

    guess = calibrate_sigma(eps, delta, q, steps, accountant="pld")
    return dpa.calibrate_dp_mechanism(
        make_accountant, lambda s: dpa.SelfComposedDpEvent(make_event(s), steps), eps, delta,
        bracket_interval=dpa.ExplicitBracketInterval(0.97 * guess, 1.03 * guess), tol=1e-7)


def main():
    out = Path(__file__).with_name("dp_accounting_sigma.csv")
    with open(out, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["epsilon", "delta", "q", "steps", "sigma_dp_accounting"])
        for eps, delta, q, steps in POINTS:
            s = sigma_for(eps, delta, q, steps)
            print(f"eps={eps} delta={delta} q={q:.6g} T={steps}: sigma={s:.8f}", flush=True)
            w.writerow([repr(eps), repr(delta), repr(q), steps, f"{s:.10g}"])


if __name__ == "__main__":
    main()
