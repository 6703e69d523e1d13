"""Operational risk: ``tradeoff`` (the certified f-DP trade-off curve) and ``calibrate-risk``."""

from __future__ import annotations

from .common import TRADEOFF_POINTS, _fmt, _resolve_q_steps
from .plots import _check_out, _plot_roc


def _tradeoff_alpha(args):
    """The false-positive rates of ``tradeoff``: --fpr as given, or P log-spaced ones from 1e-6
    to 1 rounded to 6 significant digits, so that each printed rate is the one evaluated (a
    printed rate above the computed one would claim an upper bound there that was not shown)."""
    import numpy as np

    if args.fpr is not None:
        alpha = np.asarray(args.fpr, dtype=np.float64)
        bad = ~((alpha >= 0.0) & (alpha <= 1.0))
        if bad.any():
            raise ValueError(f"--fpr must be in [0, 1]; got {float(alpha[bad][0])!r}")
        return alpha
    points = TRADEOFF_POINTS if args.points is None else args.points
    if not 2 <= points <= 100_000:
        raise ValueError(f"--points must be in [2, 100000]; got {points}")
    return np.array([float(f"{a:.6g}") for a in np.geomspace(1e-6, 1.0, points)])


def _cmd_tradeoff(args) -> None:
    import numpy as np

    q, steps = _resolve_q_steps(args)
    alpha = _tradeoff_alpha(args)
    if args.out is not None:
        _check_out(args.out)
    from .. import pld
    from ..pld.tradeoff import tpr_bounds

    b = pld.tradeoff(args.sigma, q, steps, alpha, accuracy=args.accuracy, relation=args.relation.replace("-", "_"))
    lo, up = np.atleast_1d(b.lower), np.atleast_1d(b.upper)
    tpr_lo, tpr_up = tpr_bounds(alpha, lo, up)  # (what pld.attack_tpr returns, without a second query)
    rows = ["fpr,beta_lower,beta_upper,tpr_lower,tpr_upper"]
    for a, bl, bu, tl, tu in zip(alpha.tolist(), lo.tolist(), up.tolist(), tpr_lo.tolist(), tpr_up.tolist()):
        fpr = f"{a:.6g}" if float(f"{a:.6g}") == a else repr(a)  # (the rate evaluated, exactly)
        rows.append(f"{fpr},{_fmt(bl, 'down')},{_fmt(bu, 'up')},{_fmt(tl, 'down')},{_fmt(tu, 'up')}")
    print("\n".join(rows))
    if args.out is not None:
        title = f"σ = {args.sigma:g}, q = {q:.4g}, {steps:g} steps ({args.relation})"
        _plot_roc(args.out, alpha, tpr_lo, tpr_up, title)


def _cmd_calibrate_risk(args) -> None:
    from .. import calibrate

    q, steps = _resolve_q_steps(args)
    sigma = calibrate.calibrate_sigma_to_risk(args.max_tpr, args.fpr, q, steps, accuracy=args.accuracy,
                                              relation=args.relation.replace("-", "_"))
    print(f"sigma: {_fmt(float(sigma), 'up')}")  # rounded up: more noise is still private
