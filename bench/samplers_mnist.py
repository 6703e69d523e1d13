"""The samplers on the MNIST run (60000 examples, batches of 256 -- 234 whole batches an epoch for
the epoch samplers --, sigma = 1.1, delta = 1e-5): certified epsilon after every 5th epoch
(``pld.epsilon_curve(..., sampler=...)``), and sgmfast's and dp_accounting's RDP for fixed-size
batches beside it (intervals to 4 decimals, lower ends rounded down and upper ends up).  Writes docs/samplers_mnist.png and docs/samplers_mnist.md (the table of the
README section "Samplers: what your data loader does", pasted there; tests/test_readme_samplers.py
checks the README's copy against the code).

Run: python bench/samplers_mnist.py   (needs the plot and peers extras; ~1 min)
"""

import time
import warnings
from pathlib import Path

import numpy as np

from sgmfast import pld, rdp

SIGMA, DELTA, N = 1.1, 1e-5, 60000
Q = 1 / 234  # 234 batches per epoch: 256.4 examples per batch on average
EPOCHS = np.arange(5, 65, 5)
DOCS = Path(__file__).resolve().parent.parent / "docs"

#: (what the data loader does, sampler, relation, q) -- the README table's rows
ROWS = [
    ("Poisson: each example in each step with probability q (Opacus's default `DPDataLoader`, "
     "`PoissonBatchSampler`)", "poisson", "add_remove", Q),
    ("balls-in-bins: every epoch each example joins one of the t batches at random "
     "(`BallsInBinsBatchSampler`)", "balls_in_bins", "add_remove", Q),
    ("shuffle: every epoch a permutation cut into t batches of B (`DataLoader(shuffle=True)`, Opacus "
     "`poisson_sampling=False`)", "shuffle", "zero_out", Q),
    ("fixed size: B examples without replacement, independently every step (`FixedSizeBatchSampler`)",
     "fixed_size", "replace_one", 256 / N),
]


def curves():
    """{sampler: (lower, upper, seconds)} over EPOCHS."""
    out = {}
    for _, sampler, relation, q in ROWS:
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", pld.LooseBoundWarning)
            b = pld.epsilon_curve(SIGMA, q, EPOCHS * 234, DELTA, sampler=sampler, relation=relation)
        out[sampler] = (b.lower, b.upper, time.perf_counter() - t0)
    return out


def fixed4(x: float, up: bool) -> str:
    """x to 4 decimals rounded in its bound's direction (upper up, lower down): the printed number
    keeps the guarantee of the computed one."""
    import math

    v = (math.ceil if up else math.floor)(x * 1e4 - (1e-9 if up else -1e-9)) / 1e4
    return f"{v:.4f}"


def table(rows) -> str:
    lines = ["| what your data loader does | `sampler=` | relation | ε after 60 epochs (certified) |",
             "|---|---|---|---|"]
    for text, sampler, relation, _ in ROWS:
        lo, up, _ = rows[sampler]
        lines.append(f"| {text} | `\"{sampler}\"` | {relation.replace('_', '-')} | "
                     f"[{fixed4(lo[-1], False)}, {fixed4(up[-1], True)}] |")
    return "\n".join(lines) + "\n"


def main() -> None:
    import dp_accounting as dpa
    from dp_accounting import dp_event
    from dp_accounting.rdp import rdp_privacy_accountant

    rows = curves()
    (DOCS / "samplers_mnist.md").write_text(table(rows))
    print(table(rows))
    for _, sampler, _, _ in ROWS:
        print(f"{sampler}: 12 checkpoints in {rows[sampler][2]:.1f} s")
    wor_rdp = []
    for e in EPOCHS:
        acc = rdp_privacy_accountant.RdpAccountant(neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE)
        acc.compose(dp_event.SampledWithoutReplacementDpEvent(N, 256, dp_event.GaussianDpEvent(SIGMA / 2)), int(e * 234))
        wor_rdp.append(acc.get_epsilon(DELTA))
    ours_rdp = [rdp.epsilon(SIGMA, 256 / N, int(e * 234), DELTA, sampler="fixed_size") for e in EPOCHS]
    print(f"fixed size 256, sgmfast RDP {ours_rdp[-1]:.4f}, dp_accounting RDP {wor_rdp[-1]:.4f}")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    labels = {"poisson": "Poisson (add/remove)", "balls_in_bins": "balls-in-bins (add/remove)",
              "shuffle": "shuffle, certified interval (zero-out)", "fixed_size": "fixed size (replace-one)"}
    for _, sampler, _, _ in ROWS:
        lo, up, _ = rows[sampler]
        if sampler == "shuffle":  # wide: the band is the answer
            ax.fill_between(EPOCHS, np.maximum(lo, 1e-3), up, alpha=0.25, color="tab:red", label=labels[sampler])
            ax.plot(EPOCHS, lo, color="tab:red", lw=1)
            ax.plot(EPOCHS, up, color="tab:red", lw=1)
        else:
            ax.plot(EPOCHS, up, marker="o", ms=3, label=labels[sampler])
    ax.plot(EPOCHS, wor_rdp, ls="--", color="grey", label="fixed size: dp_accounting RDP")
    ax.set_yscale("log")
    ax.set_xlabel("epochs")
    ax.set_ylabel("ε at δ = 1e-5 (certified upper bound)")
    ax.set_title("MNIST, σ = 1.1, batches of 256 (234 per epoch)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(DOCS / "samplers_mnist.png", dpi=120)
    print("wrote", DOCS / "samplers_mnist.png", "and", DOCS / "samplers_mnist.md")


if __name__ == "__main__":
    main()
