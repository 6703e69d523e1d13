"""``sgmfast curve``: the privacy curve of a run, epsilon after each checkpoint, certified."""

from __future__ import annotations

import math
import sys

from .common import CURVE_MAX_CHECKPOINTS, CURVE_POINTS, _fmt, _relation, _resolve_q_steps
from .plots import _check_out, _plot_curve


#: ``curve`` asks the PLD accountant for at most this many checkpoints per call, so that a long
#: curve can show progress (a call costs about one epsilon plus ~3 ms per checkpoint on two
#: cores; 1,000 checkpoints in 4 or 8 calls took no longer than in one)
CURVE_CHUNK = 200


def _curve_checkpoints(args, q: float, steps: float):
    """The checkpoints of ``curve``: step counts, int64, strictly increasing."""
    import numpy as np

    from .._validation import check_checkpoints, check_positive_int, check_steps

    if args.checkpoints is not None:
        if args.every is not None or args.points is not None:
            raise ValueError("--checkpoints gives the checkpoints; leave out --every/--points")
        return check_checkpoints(args.checkpoints, "--checkpoints")
    if args.epochs is not None and q == 0.0:
        raise ValueError("--epochs needs q > 0 (at q = 0 no step uses any example)")
    t = int(check_steps(steps, "--steps"))
    if t == 0:
        raise ValueError("a curve needs at least one step; got --steps 0" if args.epochs is None
                         else f"a curve needs --epochs > 0; got {args.epochs:g}")
    if args.every is not None:
        k = check_positive_int(args.every, "--every")
        count = t // k + 1
    elif args.points is not None or args.epochs is None:
        p = min(check_positive_int(args.points if args.points is not None else CURVE_POINTS, "--points"), t)
        count = p
    else:
        count = math.ceil(args.epochs)
    if count > CURVE_MAX_CHECKPOINTS:
        raise ValueError(f"a curve of at most {CURVE_MAX_CHECKPOINTS} checkpoints; these options ask for {count}")
    if args.every is not None:
        return np.unique(np.append(np.arange(k, t + 1, k, dtype=np.int64), t))
    if args.points is not None or args.epochs is None:
        return np.unique(np.ceil(np.arange(1, p + 1) * (t / p) - 1e-9).astype(np.int64).clip(1, t))
    # one per epoch (and the last, fractional one): the steps after epoch e round up as
    # _resolve_q_steps does, so the last checkpoint is the run's length
    epochs = np.append(np.arange(1, math.floor(args.epochs) + 1, dtype=np.float64), args.epochs)
    return np.unique(np.ceil(epochs / q - 1e-9).astype(np.int64))


def _pld_curve(args, q, checkpoints, relation):
    """Certified (lower, upper) from ``pld.epsilon_curve``, CURVE_CHUNK checkpoints per call
    with a progress bar on a terminal -- for Poisson batches; a sampler's curve in one call (it
    queries its checkpoints one by one within a few times its last point's work: each chunk would
    pay that again -- a fixed-size curve of 3591 epochs took 18 chunks, 20 s)."""
    import numpy as np

    from .. import pld
    from .._progress import Progress

    per_call = CURVE_CHUNK if args.sampler == "poisson" else checkpoints.size
    chunks = np.array_split(checkpoints, -(-checkpoints.size // per_call))
    lower, upper = [], []
    with Progress(checkpoints.size, "curve (pld)", min_total=CURVE_CHUNK + 1) as bar:
        for chunk in chunks:
            b = pld.epsilon_curve(args.sigma, q, chunk, args.delta, accuracy=args.accuracy, relation=relation,
                                  sampler=args.sampler.replace("-", "_"))
            lower.append(b.lower)
            upper.append(b.upper)
            bar.update(chunk.size)
    lo, up = np.concatenate(lower), np.concatenate(upper)
    # pld.epsilon_curve's monotone pass, across the chunks: epsilon grows along a run (a prefix
    # is a post-processing of the run), so an upper bound holds at every earlier checkpoint and
    # a lower bound at every later one; with one chunk this changes nothing
    return np.maximum.accumulate(lo), np.minimum.accumulate(up[::-1])[::-1]


def _cmd_curve(args) -> None:
    if args.checkpoints is not None and args.steps is None and args.epochs is None:
        args.steps = 0.0  # (the checkpoints give the run's length; _resolve_q_steps wants one)
    q, steps = _resolve_q_steps(args)
    sampler = args.sampler.replace("-", "_")
    relation = _relation(args, sampler)
    if args.accountant == "rdp" and (relation != "add_remove" or sampler != "poisson"):
        raise ValueError("--accountant rdp draws the curve for --sampler poisson with --relation add-remove; "
                         "use --accountant pld")
    checkpoints = _curve_checkpoints(args, q, steps)
    if args.out is not None:
        _check_out(args.out)
    if args.accountant == "rdp":
        from .. import rdp

        lower, upper = None, rdp.epsilon_curve(args.sigma, q, checkpoints, args.delta)
    else:
        lower, upper = _pld_curve(args, q, checkpoints, relation)
    rows = ["step,epoch,epsilon_lower,epsilon_upper"]
    for k, t in enumerate(checkpoints.tolist()):
        lo = "" if lower is None else _fmt(float(lower[k]), "down")
        rows.append(f"{t},{t * q:.6g},{lo},{_fmt(float(upper[k]), 'up')}")
    print("\n".join(rows))
    _warn_wide_checkpoints(lower, upper, args.accuracy, sampler)
    if args.out is not None:
        by_epoch = args.epochs is not None
        x = checkpoints * q if by_epoch else checkpoints
        title = (f"σ = {args.sigma:g}, q = {q:.4g}, δ = {args.delta:g} ({args.accountant}, "
                 f"{relation.replace('_', '-')}{'' if sampler == 'poisson' else ', ' + args.sampler})")
        _plot_curve(args.out, x, "epochs" if by_epoch else "steps", lower, upper, title)


def _warn_wide_checkpoints(lower, upper, accuracy: float, sampler: str) -> None:
    """One line on stderr where checkpoints are wider than the accuracy (the shuffle's own note
    says why it is wide): a curve queries a sampler's checkpoints while its work allowance lasts
    and brackets the rest by their neighbours -- for balls-in-bins, those inside an epoch."""
    import numpy as np

    if lower is None or sampler == "shuffle":
        return
    lo, up = np.asarray(lower, dtype=np.float64), np.asarray(upper, dtype=np.float64)
    with np.errstate(invalid="ignore"):  # (an infinite upper end: wide unless the lower is infinite too)
        wide = int(np.sum((up > lo) & (~np.isfinite(up) | (up - lo > accuracy * (1 + 1e-9) * up))))
    if wide:
        print(f"sgmfast: warning: {wide} of {up.size} checkpoints are wider than --accuracy {accuracy:g}: the curve's "
              "work ran out and they are bracketed by the checkpoints beside them (both ends hold); "
              "'sgmfast epsilon --steps T' answers any one to the accuracy", file=sys.stderr)
