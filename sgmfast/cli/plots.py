"""Figures of the curve commands (matplotlib, the ``plot`` extra): a certified band and its
line, written where ``--out`` says."""

from __future__ import annotations


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ValueError("--out needs matplotlib: pip install 'sgmfast[plot]' (the CSV on stdout does not)") from exc
    return plt


def _plot_curve(path, x, xlabel, lower, upper, title) -> None:
    """Upper bound as a line over the shaded certified interval (no interval for RDP)."""
    import numpy as np

    plt = _pyplot()

    def finite(v):  # (sigma = 0: epsilon is inf, nothing to draw)
        return np.where(np.isfinite(v), v, np.nan)

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    if lower is None:
        ax.plot(x, finite(upper), color="C0", lw=1.8, label="ε, RDP upper bound")
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            width = np.nanmax(np.append(finite((upper - lower) / upper), 0.0))
        _band(ax, x, finite(lower), finite(upper), "C0",
              f"certified interval [lower, upper] (width ≤ {100 * width:.2g} %)", "ε upper bound")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    _finish(fig, ax, plt, path, xlabel, "ε", title)


def _plot_roc(path, fpr, tpr_lo, tpr_up, title) -> None:
    """The attack's TPR against FPR on log-log axes (the view of membership-inference papers,
    where low FPR matters): the certified band, and the random guess TPR = FPR."""
    plt = _pyplot()
    keep = fpr > 0.0  # (log axes)
    x = fpr[keep]
    fig, ax = plt.subplots(figsize=(5.2, 4.6))
    _band(ax, x, tpr_lo[keep], tpr_up[keep], "C3",  # (tpr_lo >= fpr > 0: drawable on log axes)
          "certified [lower, upper] TPR of the best attack", "upper bound (report this)")
    ax.plot(x, x, color="0.5", ls="--", lw=1, label="random guess (TPR = FPR)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    _finish(fig, ax, plt, path, "false-positive rate α", "true-positive rate 1 - β(α)", title)


def _band(ax, x, lower, upper, color, band_label, line_label) -> None:
    """A certified interval: shaded between the bounds, the upper bound (the guarantee) as a line."""
    ax.fill_between(x, lower, upper, color=color, alpha=0.3, lw=0, label=band_label)
    ax.plot(x, upper, color=color, lw=1.8, label=line_label)


def _finish(fig, ax, plt, path, xlabel, ylabel, title) -> None:
    """Labels, grid and legend as every plot of the CLI has them; then write ``path``."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3, which="both")
    ax.legend(loc="lower right")
    _save(fig, path, plt)


def _save(fig, path, plt) -> None:
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=100)
    except OSError as exc:
        raise ValueError(f"--out: cannot write {path}: {exc.strerror or exc}") from exc
    finally:
        plt.close(fig)


def _check_out(path) -> None:
    """Fail before the computation if --out cannot be drawn: no matplotlib, a format it does not
    know, a folder that does not exist."""
    from pathlib import Path

    _pyplot()
    from matplotlib.backend_bases import FigureCanvasBase

    out = Path(path)
    fmt = out.suffix[1:].lower()
    known = FigureCanvasBase.get_supported_filetypes()
    if fmt not in known:
        raise ValueError(f"--out: the file name must end in one of {', '.join('.' + k for k in sorted(known))}; "
                         f"got {path!r}")
    if not out.resolve().parent.is_dir():
        raise ValueError(f"--out: no folder {str(out.parent)!r}")
