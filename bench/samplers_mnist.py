"""The three samplers on the MNIST run (60000 examples, batches of 256 -- 1/234 of the data for
shuffled batches --, sigma = 1.1, delta = 1e-5): certified epsilon after every 5th epoch
(``pld.epsilon_curve(..., sampler=...)``), and sgmfast's and dp_accounting's RDP for fixed-size
batches beside it.  Every run takes 234 steps per epoch;
fixed-size batches hold exactly 256 examples (q = 256/60000).  Writes docs/samplers_mnist.png and prints
the table of the README section "Three samplers".

Run: python bench/samplers_mnist.py   (needs the plot and peers extras; ~30 s)
"""

import time
from pathlib import Path

import numpy as np

from sgmfast import pld, rdp

SIGMA, DELTA, N = 1.1, 1e-5, 60000
Q = 1 / 234  # 234 batches per epoch: 256.4 examples per batch on average
EPOCHS = np.arange(5, 65, 5)


def main() -> None:
    import dp_accounting as dpa
    from dp_accounting import dp_event
    from dp_accounting.rdp import rdp_privacy_accountant

    rows = {}
    for sampler in ("poisson", "shuffle", "fixed_size"):
        t0 = time.perf_counter()
        q = 256 / N if sampler == "fixed_size" else Q  # batches of exactly 256
        b = pld.epsilon_curve(SIGMA, q, EPOCHS * 234, DELTA, sampler=sampler)
        rows[sampler] = (b.lower, b.upper, time.perf_counter() - t0)
    poisson_replace = pld.epsilon(SIGMA, Q, 60 * 234, DELTA, relation="replace_one")
    wor_rdp = []
    for e in EPOCHS:
        acc = rdp_privacy_accountant.RdpAccountant(neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE)
        acc.compose(dp_event.SampledWithoutReplacementDpEvent(N, 256, dp_event.GaussianDpEvent(SIGMA / 2)), int(e * 234))
        wor_rdp.append(acc.get_epsilon(DELTA))
    print("| sampler | relation | ε after 60 epochs (certified) | time for 12 checkpoints |")
    print("|---|---|---|---|")
    names = {"poisson": "Poisson, q = 1/234", "shuffle": "shuffled (random allocation), 234 batches",
             "fixed_size": "fixed size 256, without replacement"}
    for s, rel in (("poisson", "add/remove"), ("shuffle", "add/remove"), ("fixed_size", "replace-one")):
        lo, up, sec = rows[s]
        print(f"| {names[s]} | {rel} | [{lo[-1]:.4f}, {up[-1]:.4f}] | {sec:.1f} s |")
    print(f"| Poisson, q = 1/234 | replace-one | [{poisson_replace.lower:.4f}, {poisson_replace.upper:.4f}] | |")
    ours_rdp = [rdp.epsilon(SIGMA, 256 / N, int(e * 234), DELTA, sampler="fixed_size") for e in EPOCHS]
    print(f"| fixed size 256: sgmfast RDP (`rdp.epsilon(..., sampler=\"fixed_size\")`) | replace-one | "
          f"{ours_rdp[-1]:.4f} | |")
    print(f"| fixed size 256: dp_accounting RDP (WBK) | replace-one | {wor_rdp[-1]:.4f} | |")
    attained = pld.epsilon(SIGMA / 2, 256 / N, 60 * 234, DELTA)
    print(f"| fixed size 256: attained by a dataset pair (lower bound) | replace-one | >= {attained.lower:.4f} | |")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for s, label in (("poisson", "Poisson (add/remove)"), ("shuffle", "shuffled (add/remove)"),
                     ("fixed_size", "fixed size, w/o replacement (replace-one)")):
        lo, up, _ = rows[s]
        ax.fill_between(EPOCHS, lo, up, alpha=0.4)
        ax.plot(EPOCHS, up, marker="o", ms=3, label=label)
    ax.plot(EPOCHS, wor_rdp, ls="--", color="grey", label="fixed size: dp_accounting RDP")
    ax.plot(EPOCHS, ours_rdp, ls=":", color="black", label="fixed size: sgmfast RDP")
    ax.set_yscale("log")
    ax.set_xlabel("epochs")
    ax.set_ylabel("ε at δ = 1e-5 (certified upper bound)")
    ax.set_title("MNIST, σ = 1.1, 234 batches per epoch")
    ax.legend(fontsize=8)
    fig.tight_layout()
    out = Path(__file__).resolve().parent.parent / "docs" / "samplers_mnist.png"
    fig.savefig(out, dpi=120)
    print("wrote", out)


if __name__ == "__main__":
    main()
