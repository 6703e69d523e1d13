"""Figures 1 and 2 of Räisä, Jälkö & Honkela (ICML 2024), as PNG and CSV.

``write_figures(out_dir)`` computes the data with :func:`sgmfast.analysis.figure1_data` and
:func:`sgmfast.analysis.figure2_data` and writes

* ``figure1.csv`` / ``figure1.png``: sigma_eff = sigma(q, T) / q against q (log-log), one
  panel per epsilon, one curve per T, the exact sigma(1, T) of the Gaussian mechanism dashed;
* ``figure2.csv`` / ``figure2.png``: the largest a - b over q against epsilon (Conjecture 6.3;
  negative everywhere at c = 4, Kalinin's tight constant is ~3.8319).

Plotting needs matplotlib, the optional extra ``sgmfast[plot]``; the CSV files do not.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from .analysis import (
    FIGURE1_EPSILONS,
    FIGURE1_STEPS,
    Figure1Data,
    Figure2Data,
    figure1_data,
    figure2_data,
)

__all__ = ["write_figures", "plot_figure1", "plot_figure2", "FigureFiles"]


@dataclass(frozen=True)
class FigureFiles:
    """Paths written by :func:`write_figures` and the seconds each figure's data took."""

    paths: tuple
    seconds_figure1: float
    seconds_figure2: float


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ValueError("plotting needs matplotlib: pip install 'sgmfast[plot]' "
                         "(or pass --csv-only)") from exc
    return plt


def plot_figure1(data: Figure1Data, path) -> None:
    """sigma_eff against q, log-log; one panel per epsilon, one curve per T."""
    plt = _pyplot()
    n = data.epsilon.size
    cols = min(n, 3)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, e in enumerate(data.epsilon):
        ax = axes[i // cols][i % cols]
        for j, t in enumerate(data.steps):
            c = colours[j % len(colours)]
            ax.loglog(data.q, data.sigma_eff[i, j], color=c, label=f"T = {int(t)}")
            ax.axhline(data.sigma_gaussian[i, j], color=c, linestyle="--", linewidth=0.9)
        ax.set_title(f"ε = {e:g}, δ = {data.delta:g}")
        ax.set_xlabel("sampling rate q")
        ax.set_ylabel("σ_eff = σ(q, T) / q")
        ax.grid(True, which="both", alpha=0.25)
    for k in range(n, rows * cols):
        axes[k // cols][k % cols].set_visible(False)
    axes[0][0].legend(fontsize="small")
    fig.suptitle("Effective noise σ_eff against q (dashed: σ(1, T), the Gaussian mechanism)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_figure2(data: Figure2Data, path) -> None:
    """Largest a - b over q against epsilon."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.0, 3.8))
    ax.semilogx(data.epsilon, data.max_a_minus_b)
    ax.axhline(0.0, color="k", linewidth=0.8)
    ax.set_xlabel("ε")
    ax.set_ylabel("max over q of a − b")
    ax.set_title(f"Conjecture 6.3: q, ε ∈ [c δ, ·], c = {data.c:g}, δ = {data.delta:g}")
    ax.grid(True, which="both", alpha=0.25)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _figure2_csv(data: Figure2Data, path) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("epsilon,delta,c,max_a_minus_b,argmax_q,sigma\n")
        for e, m, q, s in zip(data.epsilon, data.max_a_minus_b, data.argmax_q, data.sigma):
            fh.write(f"{e:.10g},{data.delta:g},{data.c:g},{m:.10g},{q:.10g},{s:.10g}\n")


def write_figures(out_dir, *, delta: float = 1e-5, epsilons=FIGURE1_EPSILONS, steps=FIGURE1_STEPS,
                  n_q: int = 100, accuracy: float = 1e-3, c: float = 4.0, n_eps: int = 1000,
                  csv_only: bool = False, progress: bool | None = None) -> FigureFiles:
    """Compute Figures 1 and 2 and write their CSV (and, unless ``csv_only``, PNG) files.

    ``progress``: a bar on stderr while Figure 1 is computed. None: on a terminal, for a long
    sweep; True (what ``sgmfast figures`` asks for): live on a terminal, one line when done
    anywhere else (no ``\\r`` in a log or a pipe); False: none.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if not csv_only:
        _pyplot()  # fail before the long computation if matplotlib is missing
    t0 = time.perf_counter()
    f1 = figure1_data(delta, epsilons, steps, n_q=n_q, accuracy=accuracy, progress=progress)
    t1 = time.perf_counter()
    f2 = figure2_data(delta, c, n_eps=n_eps, n_q=n_q)
    t2 = time.perf_counter()
    paths = [out / "figure1.csv", out / "figure2.csv"]
    f1.to_csv(paths[0])
    _figure2_csv(f2, paths[1])
    if not csv_only:
        plot_figure1(f1, out / "figure1.png")
        plot_figure2(f2, out / "figure2.png")
        paths += [out / "figure1.png", out / "figure2.png"]
    return FigureFiles(tuple(paths), t1 - t0, t2 - t1)
