"""Command-line interface: ``sgmfast epsilon ...``.

Bad input gives one line on stderr and exit code 2; numbers go to stdout.
"""

from __future__ import annotations

import argparse
import math
import sys

from . import __version__

EXIT_USAGE = 2


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


def _add_privacy_args(p: argparse.ArgumentParser, *, with_sigma: bool = True) -> None:
    if with_sigma:
        p.add_argument("--sigma", type=float, required=True,
                       help="noise multiplier (noise std / clipping norm), >= 0 (0: no noise; inf allowed)")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--q", type=float, help="Poisson sampling rate in [0, 1]")
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
    pe.add_argument("--relation", choices=("add-remove", "replace-one"), default="add-remove",
                    help="neighbouring relation (replace-one: PLD only; a replacement moves the sum by 2 norms)")
    pc = sub.add_parser("calibrate", help="smallest sigma (or largest batch size / epochs) meeting a budget")
    pc.add_argument("--epsilon", type=float, required=True, help="target epsilon (>= 0)")
    pc.add_argument("--delta", type=float, required=True, help="target delta in (0, 1)")
    pc.add_argument("--solve-for", choices=("sigma", "batch-size", "epochs"), default="sigma")
    pc.add_argument("--sigma", type=float, help="noise multiplier (when solving for batch size or epochs)")
    pc.add_argument("--q", type=float, help="Poisson sampling rate in [0, 1]")
    pc.add_argument("--batch-size", type=int, help="expected batch size (with --dataset-size)")
    pc.add_argument("--dataset-size", type=int, help="number of examples")
    pc.add_argument("--steps", type=float, help="number of steps")
    pc.add_argument("--epochs", type=float, help="epochs: steps = ceil(epochs / q)")
    pc.add_argument("--accountant", choices=("pld", "rdp"), default="pld",
                    help="pld: the tight, certified accountant (default; 0.05-0.2 s); rdp: up to ~4 %% more noise")
    pc.add_argument("--accuracy", type=float, default=1e-3, help="PLD accuracy (relative width of the ε interval)")
    pb = sub.add_parser("batch-size", help="compare batch sizes: sigma, sigma/q and gradient variance per candidate")
    pb.add_argument("--dataset-size", type=int, required=True, help="number of examples N")
    pb.add_argument("--epsilon", type=float, required=True, help="target epsilon of the whole run")
    pb.add_argument("--delta", type=float, required=True, help="target delta")
    hb = pb.add_mutually_exclusive_group(required=True)
    hb.add_argument("--epochs", type=int, help="fixed number of epochs (steps = ceil(epochs N / B))")
    hb.add_argument("--steps", type=int, help="fixed number of steps")
    gb = pb.add_mutually_exclusive_group(required=True)
    gb.add_argument("--grad-sq-sum", type=float, help="sum over examples of a squared gradient coordinate")
    gb.add_argument("--grad-norm", type=float, help="typical per-example gradient norm (with --dim)")
    pb.add_argument("--dim", type=int, default=1, help="number of parameters (with --grad-norm)")
    pb.add_argument("--clipping-norm", type=float, default=1.0, help="clipping norm C (default 1)")
    pb.add_argument("--candidates", type=int, nargs="+", help="batch sizes to compare (default powers of 2)")
    pb.add_argument("--accountant", choices=("pld", "rdp"), default="pld",
                    help="pld (default, tight) or rdp (faster, looser)")
    pf = sub.add_parser("figures", help="Figures 1 and 2 of Räisä et al. (ICML 2024) as PNG and CSV")
    pf.add_argument("--out", default="figures", help="output directory (default ./figures)")
    pf.add_argument("--delta", type=float, default=1e-5, help="target delta (default 1e-5)")
    pf.add_argument("--epsilons", type=float, nargs="+", default=[0.125, 0.25, 0.5, 1.0, 2.0, 4.0],
                    help="Figure 1 panels (default 0.125 0.25 0.5 1 2 4)")
    pf.add_argument("--steps", type=int, nargs="+", default=[1, 10, 100, 1000],
                    help="Figure 1 curves (default 1 10 100 1000)")
    pf.add_argument("--n-q", type=int, default=100, help="q grid size of both figures (default 100)")
    pf.add_argument("--n-eps", type=int, default=1000, help="Figure 2 epsilon grid size (default 1000)")
    pf.add_argument("--accuracy", type=float, default=1e-3, help="PLD accuracy of the Figure 1 calibrations")
    pf.add_argument("--csv-only", action="store_true", help="write the data only (no matplotlib needed)")
    return parser


def _resolve_q_steps(args) -> tuple[float, float]:
    from ._validation import check_positive_int, check_q

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


def _cmd_epsilon(args) -> None:
    q, steps = _resolve_q_steps(args)
    relation = args.relation.replace("-", "_")
    if args.accountant == "rdp":
        from . import rdp

        if relation != "add_remove":
            raise ValueError("--relation replace-one needs --accountant pld (the RDP bound is for add/remove)")
        eps, order = rdp.epsilon(args.sigma, q, steps, args.delta, orders=args.orders, return_order=True)
        print(f"epsilon: {_fmt(eps, 'up')}")
        print(f"optimal order: {order:.6g}")
    else:
        if args.orders is not None:
            raise ValueError("--orders applies to --accountant rdp only")
        from . import pld

        b = pld.epsilon(args.sigma, q, steps, args.delta, accuracy=args.accuracy, relation=relation)
        print(f"epsilon: {_fmt(float(b.upper), 'up')}")
        print(f"epsilon lower bound: {_fmt(float(b.lower), 'down')}")
        print(f"relation: {args.relation}")
    print(f"delta: {args.delta:g}")
    print(f"q: {q:.6g}")
    print(f"steps: {int(steps) if math.isfinite(steps) else steps}")
    print(f"accountant: {args.accountant}")


def _achieved(accountant, sigma, q, steps, delta, accuracy):
    """(upper, lower) epsilon at the calibrated point; lower is None for RDP."""
    if accountant == "rdp":
        from . import rdp

        return rdp.epsilon(sigma, q, steps, delta), None
    from . import pld

    b = pld.epsilon(sigma, q, steps, delta, accuracy=accuracy)
    return float(b.upper), float(b.lower)


def _cmd_calibrate(args) -> None:
    from . import calibrate as cal

    if args.solve_for == "sigma":
        if args.sigma is not None:
            raise ValueError("--sigma is what --solve-for sigma computes; leave it out")
        q, steps = _resolve_q_steps(args)
        sigma = cal.calibrate_sigma(args.epsilon, args.delta, q, steps, accountant=args.accountant,
                                    accuracy=args.accuracy)
    elif args.solve_for == "batch-size":
        if args.sigma is None or args.dataset_size is None:
            raise ValueError("--solve-for batch-size needs --sigma and --dataset-size")
        if args.q is not None or args.batch_size is not None:
            raise ValueError("--solve-for batch-size computes the batch size; leave out --q/--batch-size")
        if (args.steps is None) == (args.epochs is None):
            raise ValueError("--solve-for batch-size needs exactly one of --steps and --epochs")
        b = cal.calibrate_batch_size(args.epsilon, args.delta, args.sigma, args.dataset_size, steps=args.steps,
                                     epochs=args.epochs, accountant=args.accountant, accuracy=args.accuracy)
        sigma, q = args.sigma, b / args.dataset_size
        if args.steps is not None:
            steps = args.steps
        else:  # (batch size 0: no batch meets the target; an empty batch takes no steps)
            steps = float(math.ceil(args.epochs * args.dataset_size / b - 1e-9)) if b > 0 else 0.0
        print(f"batch size: {b}")
    else:
        if args.sigma is None:
            raise ValueError("--solve-for epochs needs --sigma")
        if args.steps is not None or args.epochs is not None:
            raise ValueError("--solve-for epochs computes the number of steps; leave out --steps/--epochs")
        args.steps = 0.0
        q, _ = _resolve_q_steps(args)
        sigma = args.sigma
        steps = float(cal.calibrate_steps(args.epsilon, args.delta, sigma, q, accountant=args.accountant,
                                          accuracy=args.accuracy))
        print(f"epochs: {steps * q:.6g}" if steps < math.inf else "epochs: inf")
    if math.isinf(steps):  # every number of steps meets the target: nothing more to evaluate
        print(f"sigma: {_fmt(float(sigma), 'up')}")
        print(f"delta: {args.delta:g}")
        print(f"q: {q:.6g}")
        print("steps: inf")
        print(f"accountant: {args.accountant}")
        return
    upper, lower = _achieved(args.accountant, sigma, q, steps, args.delta, args.accuracy)
    # sigma is printed rounded up: a larger noise multiplier is still private.
    print(f"sigma: {_fmt(float(sigma), 'up')}")
    print(f"epsilon: {_fmt(upper, 'up')}")
    if lower is not None:
        print(f"epsilon lower bound: {_fmt(lower, 'down')}")
    print(f"delta: {args.delta:g}")
    print(f"q: {q:.6g}")
    print(f"steps: {int(steps) if math.isfinite(steps) else steps}")
    print(f"accountant: {args.accountant}")


def _cmd_batch_size(args) -> None:
    from .analysis import plan_batch_size

    plan = plan_batch_size(args.dataset_size, args.epsilon, args.delta, clipping_norm=args.clipping_norm,
                           grad_sq_sum=args.grad_sq_sum, grad_norm=args.grad_norm, dim=args.dim,
                           epochs=args.epochs, steps=args.steps, candidates=args.candidates,
                           accountant=args.accountant)
    print(plan.to_text())
    print(f"best batch size: {plan.best.batch_size}")


def _cmd_figures(args) -> None:
    from .figures import write_figures

    res = write_figures(args.out, delta=args.delta, epsilons=args.epsilons, steps=args.steps,
                        n_q=args.n_q, n_eps=args.n_eps, accuracy=args.accuracy,
                        csv_only=args.csv_only, progress=True)
    for p in res.paths:
        print(p)
    print(f"figure 1: {res.seconds_figure1:.1f} s, figure 2: {res.seconds_figure2:.1f} s")


_COMMANDS = {"epsilon": _cmd_epsilon, "calibrate": _cmd_calibrate, "batch-size": _cmd_batch_size,
             "figures": _cmd_figures}


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
