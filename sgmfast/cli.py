"""Command-line interface: ``sgmfast epsilon ...``.

Bad input gives one line on stderr and exit code 2; numbers go to stdout.
"""

from __future__ import annotations

import argparse
import math
import sys

from . import __version__

EXIT_USAGE = 2


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage dump) and exit code 2."""

    def error(self, message):  # noqa: D401 - argparse API
        raise _UsageError(message)


def _add_privacy_args(p: argparse.ArgumentParser, *, with_sigma: bool = True) -> None:
    if with_sigma:
        p.add_argument("--sigma", type=float, required=True, help="noise multiplier (noise std / clipping norm), > 0")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--q", type=float, help="Poisson sampling rate in (0, 1]")
    g.add_argument("--batch-size", type=int, help="expected batch size (with --dataset-size): q = batch/dataset")
    p.add_argument("--dataset-size", type=int, help="number of examples (with --batch-size or --epochs)")
    h = p.add_mutually_exclusive_group(required=True)
    h.add_argument("--steps", type=float, help="number of steps (integer >= 0)")
    h.add_argument("--epochs", type=float, help="epochs: steps = ceil(epochs / q)")
    p.add_argument("--delta", type=float, required=True, help="target delta in (0, 1)")


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="sgmfast",
        description="Privacy accounting for DP-SGD (Poisson-subsampled Gaussian mechanism).",
    )
    parser.add_argument("--version", action="version", version=f"sgmfast {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    pe = sub.add_parser("epsilon", help="epsilon of T steps at a given delta")
    _add_privacy_args(pe)
    pe.add_argument("--accountant", choices=("pld", "rdp"), default="pld",
                    help="pld: tight, certified upper and lower bound (default); rdp: Rényi DP upper bound")
    pe.add_argument("--accuracy", type=float, default=1e-3,
                    help="PLD only: target relative width of the certified interval (default 1e-3)")
    pe.add_argument("--orders", type=float, nargs="+",
                    help="RDP only: optimise over these orders instead of all real alpha > 1")
    return parser


def _resolve_q_steps(args) -> tuple[float, float]:
    from ._validation import check_positive_int, check_q

    if args.q is not None:
        q = float(check_q(args.q))
    else:
        if args.dataset_size is None:
            raise ValueError("--batch-size needs --dataset-size")
        n = check_positive_int(args.dataset_size, "--dataset-size")
        b = check_positive_int(args.batch_size, "--batch-size")
        if b > n:
            raise ValueError(f"--batch-size must be <= --dataset-size ({n}); got {b}")
        q = b / n
    if args.steps is not None:
        steps = args.steps
    else:
        if not (math.isfinite(args.epochs) and args.epochs >= 0):
            raise ValueError(f"--epochs must be finite and >= 0; got {args.epochs}")
        # Round up: more steps can only increase epsilon.
        steps = float(math.ceil(args.epochs / q - 1e-9))
    return q, steps


def _cmd_epsilon(args) -> None:
    q, steps = _resolve_q_steps(args)
    if args.accountant == "rdp":
        from . import rdp

        eps, order = rdp.epsilon(args.sigma, q, steps, args.delta, orders=args.orders, return_order=True)
        print(f"epsilon: {eps:.6g}")
        print(f"optimal order: {order:.6g}")
    else:
        if args.orders is not None:
            raise ValueError("--orders applies to --accountant rdp only")
        from . import pld

        b = pld.epsilon(args.sigma, q, steps, args.delta, accuracy=args.accuracy)
        print(f"epsilon: {b.upper:.6g}")
        print(f"epsilon lower bound: {b.lower:.6g}")
    print(f"delta: {args.delta:g}")
    print(f"q: {q:.6g}")
    print(f"steps: {int(steps)}")
    print(f"accountant: {args.accountant}")


_COMMANDS = {"epsilon": _cmd_epsilon}


def main(argv=None) -> int:
    """Entry point of the ``sgmfast`` command; returns the exit code."""
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
        _COMMANDS[args.command](args)
    except (_UsageError, ValueError, TypeError) as exc:
        msg = str(exc).replace("\n", " ")
        print(f"sgmfast: error: {msg}", file=sys.stderr)
        return EXIT_USAGE
    except MemoryError as exc:
        print(f"sgmfast: error: out of memory: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
