"""What every command shares: the exit code of bad input, the one-line parser errors, numbers printed
with their guarantee kept (``_fmt``), the run from --q/--batch-size and --steps/--epochs, and the
defaults of the curve commands."""

from __future__ import annotations

import argparse
import math

from .._samplers import TABLE


EXIT_USAGE = 2

#: samplers (command-line spelling) whose epoch is 1/q whole batches
EPOCH_SAMPLERS = tuple(s.cli for s in TABLE.values() if s.per_epoch)


#: ``curve --steps T`` without ``--every``/``--points``: this many evenly spaced checkpoints
CURVE_POINTS = 50


#: ``tradeoff`` without ``--fpr``: this many log-spaced false-positive rates in [1e-6, 1]
TRADEOFF_POINTS = 50


#: more checkpoints than this is a mistake (14,062 steps of MNIST, one per step, take ~40 s)
CURVE_MAX_CHECKPOINTS = 1_000_000


def _fmt(x: float, direction: str = "near", digits: int = 6) -> str:
    """Format to ``digits`` significant digits, rounding an upper bound up and a lower bound
    down, so that the printed number keeps the guarantee of the computed one."""
    if not math.isfinite(x) or x == 0.0:
        return f"{x:g}"
    if direction == "near":
        return f"{x:.{digits}g}"
    exp = math.floor(math.log10(abs(x))) - digits + 1
    scale = 10.0 ** exp
    m = x / scale
    m = math.ceil(m - 1e-9) if direction == "up" else math.floor(m + 1e-9)
    r = m * scale
    # Guard against the decimal-binary round trip going the wrong way.
    while (direction == "up" and float(f"{r:.{digits}g}") < x) or (direction == "down" and float(f"{r:.{digits}g}") > x):
        m += 1 if direction == "up" else -1
        r = m * scale
    return f"{r:.{digits}g}"


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage dump) and exit code 2."""

    def error(self, message):  # noqa: D401 - argparse API
        raise _UsageError(message)


def _resolve_q_steps(args) -> tuple[float, float]:
    from .._validation import check_positive_int, check_q

    if args.q is not None:
        if args.batch_size is not None:
            raise ValueError("give --q or --batch-size, not both")
        q = float(check_q(args.q))
    elif args.batch_size is None:
        raise ValueError("give --q or --batch-size with --dataset-size")
    else:
        if args.dataset_size is None:
            raise ValueError("--batch-size needs --dataset-size")
        n = check_positive_int(args.dataset_size, "--dataset-size")
        b = check_positive_int(args.batch_size, "--batch-size")
        if b > n:
            raise ValueError(f"--batch-size must be <= --dataset-size ({n}); got {b}")
        q = b / n
        if getattr(args, "sampler", "poisson") in EPOCH_SAMPLERS:
            q = 1.0 / (n // b)  # whole batches per epoch (the partial last one dropped)
    if args.steps is not None:
        steps = args.steps
    elif args.epochs is None:
        raise ValueError("give --steps or --epochs")
    else:
        if not (math.isfinite(args.epochs) and args.epochs >= 0):
            raise ValueError(f"--epochs must be finite and >= 0; got {args.epochs}")
        # Round up: more steps can only increase epsilon (q = 0: no step samples anything, and
        # how many there are does not matter)
        steps = float(math.ceil(args.epochs / q - 1e-9)) if q > 0.0 else 0.0
    return q, steps


def _relation(args, sampler: str) -> str:
    """The relation of --relation (or the sampler's own), a one-line error naming the ones the
    sampler is analysed under when it is not one of them."""
    from .._samplers import resolve

    try:
        return resolve(sampler, None if args.relation is None else args.relation.replace("-", "_"))
    except ValueError:
        own = " or ".join(r.replace("_", "-") for r in TABLE[sampler].relations["pld"])
        raise ValueError(f"--sampler {args.sampler} is analysed under --relation {own} only") from None
