"""Figures of the curve commands (matplotlib, the ``plot`` extra): a certified upper bound as a
line over its band (drawn where it is thick enough to see), written where ``--out`` says."""

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
    """Upper bound as a line over the shaded certified interval where it is thick enough to see
    (no interval for RDP)."""
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
              f"certified interval [lower, upper] (width ≤ {100 * width:.2g} %)", "ε upper bound", floor=0.0)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    _finish(fig, ax, plt, path, xlabel, "ε", title)


def _plot_roc(path, fpr, tpr_lo, tpr_up, title) -> None:
    """The attack's TPR against FPR on log-log axes (the view of membership-inference papers,
    where low FPR matters): the upper bound over the certified band (where it can be seen), and
    the random guess TPR = FPR."""
    plt = _pyplot()
    keep = fpr > 0.0  # (log axes)
    x = fpr[keep]
    fig, ax = plt.subplots(figsize=(5.2, 4.6))
    _band(ax, x, tpr_lo[keep], tpr_up[keep], "C3",  # (tpr_lo >= fpr > 0: drawable on log axes)
          "certified [lower, upper] TPR of the best attack", "upper bound (report this)",
          floor=float(x.min()) if x.size else 1.0, log=True)
    ax.plot(x, x, color="0.5", ls="--", lw=1, label="random guess (TPR = FPR)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    _finish(fig, ax, plt, path, "false-positive rate α", "true-positive rate 1 - β(α)", title)


#: a certified band thinner than this fraction of the axes' height hides under its own upper line
#: (1.8 pt, ~2.5 px, on ~300 px of axes at the size the CLI draws): it is drawn only where it is
#: thicker, and the legend lists it only if it is drawn somewhere
VISIBLE = 0.01


def _band(ax, x, lower, upper, color, band_label, line_label, *, floor, log=False) -> None:
    """A certified interval: the upper bound (the guarantee) as a line, shaded down to the lower
    bound where the band is thick enough to be seen (``VISIBLE`` of the height from ``floor``, the
    axes' lowest value, to the highest upper bound; on log axes in decades). Where it is too thin
    the line's legend entry says how close the lower bound is instead, so the legend never lists
    what the figure does not show."""
    import numpy as np

    lower = np.asarray(lower, dtype=float)
    upper = np.asarray(upper, dtype=float)
    ok = np.isfinite(lower) & np.isfinite(upper) & (upper > 0.0)
    if log:
        ok &= lower > 0.0
    scale = np.log10 if log else (lambda v: v)
    seen = np.zeros(upper.shape, dtype=bool)
    if ok.any():
        bottom = min(float(floor), float(lower[ok].min()))
        span = float(scale(upper[ok].max()) - scale(bottom)) if (bottom > 0.0 or not log) else 0.0
        if span > 0.0 and np.isfinite(span):
            seen[ok] = (scale(upper[ok]) - scale(lower[ok])) >= VISIBLE * span
    hidden = ok & ~seen
    if seen.any():
        # a segment is shaded when both its ends are: widen by one point so each visible stretch
        # reaches its neighbours
        where = seen.copy()
        where[1:] |= seen[:-1]
        where[:-1] |= seen[1:]
        ax.fill_between(x, lower, upper, where=where & ok, color=color, alpha=0.3, lw=0, label=band_label)
    rel = float(((upper[hidden] - lower[hidden]) / upper[hidden]).max()) if hidden.any() else 0.0
    if rel > 0.0:  # (where the bounds coincide the line is the whole interval)
        line_label += (f"\n({'elsewhere ' if seen.any() else ''}certified lower bound within "
                       f"{100 * rel:.2g} %,\n too close to draw)")
    ax.plot(x, upper, color=color, lw=1.8, label=line_label)


def _finish(fig, ax, plt, path, xlabel, ylabel, title) -> None:
    """Labels, grid and legend as every plot of the CLI has them; then write ``path``."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3, which="both")
    ax.legend(loc="lower right", fontsize="small")
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
