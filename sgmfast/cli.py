"""Command-line interface: ``sgmfast epsilon ...``.

Bad input gives one line on stderr and exit code 2; numbers go to stdout.

Start-up time matters here (a command is often one query): each subcommand imports what it
needs when it runs, and the process ends without the interpreter's teardown (``main``).
"""

from __future__ import annotations

import argparse
import math
import os
import sys

from . import __version__

EXIT_USAGE = 2

#: ``curve --steps T`` without ``--every``/``--points``: this many evenly spaced checkpoints
CURVE_POINTS = 50
#: ``curve`` asks the PLD accountant for at most this many checkpoints per call, so that a long
#: curve can show progress (a call costs about one epsilon plus ~3 ms per checkpoint on two
#: cores; 1,000 checkpoints in 4 or 8 calls took no longer than in one)
CURVE_CHUNK = 200
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


def _add_privacy_args(p: argparse.ArgumentParser, *, with_sigma: bool = True, with_delta: bool = True):
    """Add --sigma, --q/--batch-size/--dataset-size, --steps/--epochs, --delta; returns the
    (required, mutually exclusive) group of --steps and --epochs."""
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
    if with_delta:
        p.add_argument("--delta", type=float, required=True, help="target delta in (0, 1)")
    return h


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
    pe.add_argument("--relation", choices=("add-remove", "replace-one"), default=None,
                    help="neighbouring relation (default: the sampler's own -- add-remove, replace-one for "
                         "fixed-size; replace-one: PLD only; a replacement moves the sum by 2 norms)")
    pe.add_argument("--sampler", choices=("poisson", "shuffle", "fixed-size"), default="poisson",
                    help="poisson: each example in each batch with probability q (default); shuffle: "
                         "shuffled batches, each example in exactly one of the 1/q batches of every epoch "
                         "(random allocation; PLD, add-remove); fixed-size: batches of exactly q n examples "
                         "drawn without replacement every step (replace-one; PLD or RDP)")
    pc = sub.add_parser("calibrate", help="smallest sigma (or largest batch size / epochs) meeting a budget")
    pc.add_argument("--epsilon", type=float, required=True, help="target epsilon (>= 0)")
    pc.add_argument("--delta", type=float, required=True, help="target delta in (0, 1)")
    pc.add_argument("--solve-for", choices=("sigma", "batch-size", "epochs"), default="sigma")
    pc.add_argument("--sampler", choices=("poisson", "shuffle", "fixed-size"), default="poisson",
                    help="how batches are drawn (as for 'epsilon'; shuffle and fixed-size: --solve-for sigma or "
                         "batch-size; shuffle: PLD, N // B whole batches per epoch)")
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
    pb.add_argument("--sampler", choices=("poisson", "shuffle", "fixed-size"), default="poisson",
                    help="how batches are drawn (as for 'epsilon'; shuffle: N // B whole batches per epoch; "
                         "shuffle needs --accountant pld)")
    pv = sub.add_parser(
        "curve", help="epsilon after each checkpoint of a run, as CSV (and a plot with --out)",
        description="Prints CSV: step,epoch,epsilon_lower,epsilon_upper (epoch = step * q; upper bounds "
                    "rounded up, lower bounds down; with --accountant rdp the lower column is empty).")
    hv = _add_privacy_args(pv)
    hv.add_argument("--checkpoints", type=float, nargs="+", metavar="T",
                    help="explicit checkpoints: strictly increasing step counts")
    gv = pv.add_mutually_exclusive_group()
    gv.add_argument("--every", type=int, metavar="K",
                    help="a checkpoint every K steps (and one at the last step)")
    gv.add_argument("--points", type=int, metavar="P",
                    help=f"P evenly spaced checkpoints ending at the last step (default with --steps: {CURVE_POINTS}; "
                         "default with --epochs: one per epoch)")
    pv.add_argument("--accountant", choices=("pld", "rdp"), default="pld",
                    help="pld: certified upper and lower bounds (default); rdp: Rényi DP upper bound only")
    pv.add_argument("--accuracy", type=float, default=1e-3,
                    help="PLD only: target relative width of each certified interval (default 1e-3)")
    pv.add_argument("--relation", choices=("add-remove", "replace-one"), default=None,
                    help="neighbouring relation (default: the sampler's own; replace-one: PLD only)")
    pv.add_argument("--sampler", choices=("poisson", "shuffle", "fixed-size"), default="poisson",
                    help="how batches are drawn (as for 'epsilon'; shuffle and fixed-size: PLD)")
    pv.add_argument("--out", metavar="FILE",
                    help="also draw the curve into FILE (PNG, or any format matplotlib knows by the extension; "
                         "needs matplotlib)")
    pt = sub.add_parser(
        "tradeoff", help="membership-attack risk: the certified trade-off curve beta(alpha) as CSV (plot with --out)",
        description="Prints CSV: fpr,beta_lower,beta_upper,tpr_lower,tpr_upper -- the best membership-inference "
                    "attack's true-positive rate at each false-positive rate is at most tpr_upper (bounds rounded "
                    "outward).")
    _add_privacy_args(pt, with_delta=False)
    gt = pt.add_mutually_exclusive_group()
    gt.add_argument("--fpr", type=float, nargs="+", metavar="A", help="false-positive rates in [0, 1]")
    gt.add_argument("--points", type=int, metavar="P",
                    help=f"P log-spaced false-positive rates from 1e-6 to 1 (default {TRADEOFF_POINTS})")
    pt.add_argument("--accuracy", type=float, default=1e-3, help="PLD accuracy (default 1e-3)")
    pt.add_argument("--relation", choices=("add-remove", "replace-one"), default="add-remove",
                    help="neighbouring relation")
    pt.add_argument("--out", metavar="FILE", help="also draw TPR against FPR (log-log, with its band) into FILE")
    pr = sub.add_parser("calibrate-risk",
                        help="smallest sigma at which no membership attack has TPR above --max-tpr at --fpr")
    _add_privacy_args(pr, with_sigma=False, with_delta=False)
    pr.add_argument("--max-tpr", type=float, required=True, help="largest true-positive rate allowed, in (0, 1]")
    pr.add_argument("--fpr", type=float, required=True, help="at this false-positive rate, in [0, 1)")
    pr.add_argument("--accuracy", type=float, default=1e-3, help="PLD accuracy (default 1e-3)")
    pr.add_argument("--relation", choices=("add-remove", "replace-one"), default="add-remove",
                    help="neighbouring relation")
    pu = sub.add_parser("tune", help="epsilon of a random search: K runs (K random), the best one released",
                        description="Prints the epsilon of the whole search (an upper bound: the smaller of "
                                    "Papernot & Steinke's RDP bound and sgmfast's privacy-profile bound, or the one "
                                    "--method names) and the run-count parameters to sample K with.")
    _add_privacy_args(pu)
    pu.add_argument("--runs", choices=("geometric", "logarithmic", "tnb", "poisson", "binomial"), required=True,
                    help="distribution of the number of runs K")
    pu.add_argument("--mean", type=float, help="E[K] (geometric, logarithmic, tnb, poisson)")
    pu.add_argument("--shape", type=float, help="tnb only: eta > -1 (0 logarithmic, 1 geometric)")
    pu.add_argument("--n", type=int, help="binomial only: number of trials")
    pu.add_argument("--p", type=float, help="binomial only: success probability")
    pu.add_argument("--method", choices=("best", "rdp", "profile"), default="best", help="which bound (default best)")
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
    sampler = args.sampler.replace("-", "_")
    relation = None if args.relation is None else args.relation.replace("-", "_")
    if args.accountant == "rdp":
        from . import rdp

        own = {"poisson": "add_remove", "fixed_size": "replace_one"}.get(sampler)
        if own is None or relation not in (None, own):
            raise ValueError("--accountant rdp accounts for --sampler poisson (add-remove) and fixed-size "
                             f"(replace-one); use --accountant pld for --sampler {args.sampler} with "
                             f"--relation {(relation or 'add_remove').replace('_', '-')}")
        eps, order = rdp.epsilon(args.sigma, q, steps, args.delta, orders=args.orders, return_order=True,
                                 sampler=sampler)
        print(f"epsilon: {_fmt(eps, 'up')}")
        print(f"optimal order: {order:.6g}")
        if sampler != "poisson":
            print(f"relation: {own.replace('_', '-')}")
            print(f"sampler: {args.sampler}")
    else:
        if args.orders is not None:
            raise ValueError("--orders applies to --accountant rdp only")
        from . import pld
        from .pld.samplers import resolve

        try:
            relation = resolve(sampler, relation)
        except ValueError:
            own = resolve(sampler, None).replace("_", "-")
            raise ValueError(f"--sampler {args.sampler} is analysed under --relation {own} only") from None
        if sampler != "poisson" and not math.isfinite(steps):
            raise ValueError(f"--sampler {args.sampler} needs a finite number of steps")
        b = pld.epsilon(args.sigma, q, steps, args.delta, accuracy=args.accuracy, relation=relation, sampler=sampler)
        print(f"epsilon: {_fmt(float(b.upper), 'up')}")
        print(f"epsilon lower bound: {_fmt(float(b.lower), 'down')}")
        print(f"relation: {relation.replace('_', '-')}")
        print(f"sampler: {args.sampler}")
    print(f"delta: {args.delta:g}")
    print(f"q: {q:.6g}")
    print(f"steps: {int(steps) if math.isfinite(steps) else steps}")
    print(f"accountant: {args.accountant}")


def _achieved(accountant, sigma, q, steps, delta, accuracy, sampler="poisson"):
    """(upper, lower) epsilon at the calibrated point; lower is None for RDP."""
    if accountant == "rdp":
        from . import rdp

        return rdp.epsilon(sigma, q, steps, delta, sampler=sampler), None
    from . import pld

    b = pld.epsilon(sigma, q, steps, delta, accuracy=accuracy, sampler=sampler)
    return float(b.upper), float(b.lower)


def _cmd_calibrate(args) -> None:
    from . import calibrate as cal

    sampler = args.sampler.replace("-", "_")
    if args.sampler != "poisson" and args.solve_for == "epochs":
        raise ValueError(f"--sampler {args.sampler} calibrates with --solve-for sigma or batch-size")
    cal.check_sampler(sampler, args.accountant)
    if args.solve_for == "sigma":
        if args.sigma is not None:
            raise ValueError("--sigma is what --solve-for sigma computes; leave it out")
        q, steps = _resolve_q_steps(args)
        sigma = cal.calibrate_sigma(args.epsilon, args.delta, q, steps, accountant=args.accountant,
                                    accuracy=args.accuracy, sampler=sampler)
    elif args.solve_for == "batch-size":
        if args.sigma is None or args.dataset_size is None:
            raise ValueError("--solve-for batch-size needs --sigma and --dataset-size")
        if args.q is not None or args.batch_size is not None:
            raise ValueError("--solve-for batch-size computes the batch size; leave out --q/--batch-size")
        if (args.steps is None) == (args.epochs is None):
            raise ValueError("--solve-for batch-size needs exactly one of --steps and --epochs")
        b = cal.calibrate_batch_size(args.epsilon, args.delta, args.sigma, args.dataset_size, steps=args.steps,
                                     epochs=args.epochs, accountant=args.accountant, accuracy=args.accuracy,
                                     sampler=sampler)
        sigma = args.sigma
        if b > 0:
            from .pld.samplers import run_of_batch

            q, steps = run_of_batch(sampler, b, args.dataset_size, args.steps, args.epochs)
        else:  # (batch size 0: no batch meets the target; an empty batch takes no steps)
            q, steps = 0.0, (args.steps if args.steps is not None else 0.0)
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
    upper, lower = _achieved(args.accountant, sigma, q, steps, args.delta, args.accuracy, sampler)
    # sigma is printed rounded up: a larger noise multiplier is still private.
    print(f"sigma: {_fmt(float(sigma), 'up')}")
    print(f"epsilon: {_fmt(upper, 'up')}")
    if lower is not None:
        print(f"epsilon lower bound: {_fmt(lower, 'down')}")
    print(f"delta: {args.delta:g}")
    print(f"q: {q:.6g}")
    print(f"steps: {int(steps) if math.isfinite(steps) else steps}")
    print(f"accountant: {args.accountant}")
    if args.sampler != "poisson":
        print(f"sampler: {args.sampler}")


def _cmd_batch_size(args) -> None:
    from .analysis import plan_batch_size

    plan = plan_batch_size(args.dataset_size, args.epsilon, args.delta, clipping_norm=args.clipping_norm,
                           grad_sq_sum=args.grad_sq_sum, grad_norm=args.grad_norm, dim=args.dim,
                           epochs=args.epochs, steps=args.steps, candidates=args.candidates,
                           accountant=args.accountant, sampler=args.sampler.replace("-", "_"))
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


def _curve_checkpoints(args, q: float, steps: float):
    """The checkpoints of ``curve``: step counts, int64, strictly increasing."""
    import numpy as np

    from ._validation import check_checkpoints, check_positive_int, check_steps

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
    with a progress bar on a terminal."""
    import numpy as np

    from . import pld
    from ._progress import Progress

    chunks = np.array_split(checkpoints, -(-checkpoints.size // CURVE_CHUNK))
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


def _cmd_curve(args) -> None:
    if args.checkpoints is not None and args.steps is None and args.epochs is None:
        args.steps = 0.0  # (the checkpoints give the run's length; _resolve_q_steps wants one)
    q, steps = _resolve_q_steps(args)
    sampler = args.sampler.replace("-", "_")
    from .pld.samplers import resolve

    try:
        relation = resolve(sampler, None if args.relation is None else args.relation.replace("-", "_"))
    except ValueError:
        own = resolve(sampler, None).replace("_", "-")
        raise ValueError(f"--sampler {args.sampler} is analysed under --relation {own} only") from None
    if args.accountant == "rdp" and (relation != "add_remove" or sampler != "poisson"):
        raise ValueError("--accountant rdp draws the curve for --sampler poisson with --relation add-remove; "
                         "use --accountant pld")
    checkpoints = _curve_checkpoints(args, q, steps)
    if args.out is not None:
        _check_out(args.out)
    if args.accountant == "rdp":
        from . import rdp

        lower, upper = None, rdp.epsilon_curve(args.sigma, q, checkpoints, args.delta)
    else:
        lower, upper = _pld_curve(args, q, checkpoints, relation)
    rows = ["step,epoch,epsilon_lower,epsilon_upper"]
    for k, t in enumerate(checkpoints.tolist()):
        lo = "" if lower is None else _fmt(float(lower[k]), "down")
        rows.append(f"{t},{t * q:.6g},{lo},{_fmt(float(upper[k]), 'up')}")
    print("\n".join(rows))
    if args.out is not None:
        by_epoch = args.epochs is not None
        x = checkpoints * q if by_epoch else checkpoints
        title = (f"σ = {args.sigma:g}, q = {q:.4g}, δ = {args.delta:g} ({args.accountant}, "
                 f"{relation.replace('_', '-')}{'' if sampler == 'poisson' else ', ' + args.sampler})")
        _plot_curve(args.out, x, "epochs" if by_epoch else "steps", lower, upper, title)


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
    from . import pld
    from .pld.tradeoff import tpr_bounds

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


def _cmd_calibrate_risk(args) -> None:
    from . import calibrate

    q, steps = _resolve_q_steps(args)
    sigma = calibrate.calibrate_sigma_to_risk(args.max_tpr, args.fpr, q, steps, accuracy=args.accuracy,
                                              relation=args.relation.replace("-", "_"))
    print(f"sigma: {_fmt(float(sigma), 'up')}")  # rounded up: more noise is still private


def _cmd_tune(args) -> None:
    from . import tuning

    q, steps = _resolve_q_steps(args)
    if args.runs == "binomial":
        if args.n is None or args.p is None:
            raise ValueError("--runs binomial needs --n and --p")
        runs = tuning.binomial(args.n, args.p)
    else:
        if args.mean is None:
            raise ValueError(f"--runs {args.runs} needs --mean")
        if args.runs == "poisson":
            runs = tuning.poisson(args.mean)
        elif args.runs == "tnb":
            if args.shape is None:
                raise ValueError("--runs tnb needs --shape")
            runs = tuning.truncated_negative_binomial(args.shape, mean=args.mean)
        else:
            runs = getattr(tuning, args.runs)(mean=args.mean)
    eps = tuning.epsilon(args.sigma, q, steps, args.delta, runs, method=args.method)
    print(f"epsilon: {_fmt(eps, 'up')}")
    print(f"delta: {args.delta:g}")
    print(f"runs: {runs.kind}" + ("" if runs.kind != "tnb" else f" shape={runs.shape:g} gamma={runs.gamma!r}")
          + f" mean={runs.mean:.6g}")
    print(f"method: {args.method}")


_COMMANDS = {"tune": _cmd_tune, "tradeoff": _cmd_tradeoff, "calibrate-risk": _cmd_calibrate_risk, "epsilon": _cmd_epsilon, "calibrate": _cmd_calibrate, "batch-size": _cmd_batch_size,
             "curve": _cmd_curve, "figures": _cmd_figures}


def _run(argv) -> int:
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


def _exit_now(code: int) -> None:
    """End the process once stdout and stderr are flushed, skipping the interpreter's teardown.

    Tearing down numba's loaded kernels and the imported modules took 0.2-0.35 s after a PLD
    query (0.1 s after a bare ``import numba, scipy.special``): a fifth of a cold
    ``sgmfast epsilon``. Nothing is lost: output files are closed by then, numba writes its
    cache when it compiles, and the worker threads left are idle.
    """
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # (``| head``: the reader has gone; nothing to tell it)
        pass
    except OSError as exc:
        print(f"sgmfast: error: writing the output: {exc}", file=sys.stderr)
        code = 1
    try:
        sys.stderr.flush()
    except OSError:
        pass
    os._exit(code)


def main(argv=None) -> int:
    """Entry point of the ``sgmfast`` command; returns the exit code.

    ``argv`` None (the console script, ``python -m sgmfast.cli``): the arguments are
    ``sys.argv`` and the process ends here (:func:`_exit_now`) instead of returning. Pass a
    list to run a command in-process and get its exit code.
    """
    if argv is not None:
        return _run(argv)
    try:
        code = _run(None)
    except BrokenPipeError:
        code = 1
    _exit_now(code)
    return code  # pragma: no cover - not reached


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
