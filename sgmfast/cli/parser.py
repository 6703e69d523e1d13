"""The argument parser of every subcommand (``sgmfast --help``)."""

from __future__ import annotations

import argparse

from .. import __version__
from .._samplers import TABLE
from .common import CURVE_POINTS, TRADEOFF_POINTS, _Parser

#: the samplers and relations as the command line spells them (``sgmfast._samplers`` has the table)
SAMPLERS = tuple(s.cli for s in TABLE.values())
RELATIONS = ("add-remove", "zero-out", "replace-one")


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
    _epsilon_command(sub)
    _calibrate_command(sub)
    _batch_size_command(sub)
    _curve_command(sub)
    _risk_commands(sub)
    _tune_command(sub)
    _figures_command(sub)
    return parser


def _epsilon_command(sub) -> None:
    """epsilon: the certified epsilon of a run."""
    pe = sub.add_parser("epsilon", help="epsilon of T steps at a given delta")
    _add_privacy_args(pe)
    pe.add_argument("--accountant", choices=("pld", "rdp"), default="pld",
                    help="pld: tight, certified upper and lower bound (default); rdp: Rényi DP upper bound")
    pe.add_argument("--accuracy", type=float, default=1e-3,
                    help="PLD only: target relative width of the certified interval (default 1e-3)")
    pe.add_argument("--orders", type=float, nargs="+",
                    help="RDP only: optimise over these orders instead of all real alpha > 1")
    pe.add_argument("--relation", choices=RELATIONS, default=None,
                    help="neighbouring relation (default: the sampler's own -- add-remove; zero-out for shuffle; "
                         "replace-one for fixed-size; replace-one: PLD only; a replacement moves the sum by 2 norms)")
    pe.add_argument("--selected", type=int, default=1,
                    help="balls-in-bins only: each example joins k of the 1/q batches of every epoch (k divides "
                         "1/q; default 1)")
    pe.add_argument("--sampler", choices=SAMPLERS, default="poisson",
                    help="poisson: each example in each batch with probability q (default); balls-in-bins: every "
                         "epoch each example joins one of the 1/q batches at random (random allocation; PLD, "
                         "add-remove, tight); shuffle: every epoch a random permutation cut into 1/q batches of "
                         "a fixed size, as DataLoader(shuffle=True) (PLD, zero-out or replace-one; sound but "
                         "loose: no amplification is proved); fixed-size: batches of exactly q n examples drawn "
                         "without replacement every step (replace-one; PLD or RDP)")


def _calibrate_command(sub) -> None:
    """calibrate: sigma, batch size or epochs for a budget."""
    pc = sub.add_parser("calibrate", help="smallest sigma (or largest batch size / epochs) meeting a budget")
    pc.add_argument("--epsilon", type=float, required=True, help="target epsilon (>= 0)")
    pc.add_argument("--delta", type=float, required=True, help="target delta in (0, 1)")
    pc.add_argument("--solve-for", choices=("sigma", "batch-size", "epochs"), default="sigma")
    pc.add_argument("--sampler", choices=SAMPLERS, default="poisson",
                    help="how batches are drawn (as for 'epsilon'; all but poisson: --solve-for sigma or "
                         "batch-size; balls-in-bins and shuffle: PLD, N // B whole batches per epoch)")
    pc.add_argument("--sigma", type=float, help="noise multiplier (when solving for batch size or epochs)")
    pc.add_argument("--q", type=float, help="Poisson sampling rate in [0, 1]")
    pc.add_argument("--batch-size", type=int, help="expected batch size (with --dataset-size)")
    pc.add_argument("--dataset-size", type=int, help="number of examples")
    pc.add_argument("--steps", type=float, help="number of steps")
    pc.add_argument("--epochs", type=float, help="epochs: steps = ceil(epochs / q)")
    pc.add_argument("--accountant", choices=("pld", "rdp"), default="pld",
                    help="pld: the tight, certified accountant (default; 0.05-0.2 s); rdp: up to ~4 %% more noise")
    pc.add_argument("--accuracy", type=float, default=1e-3, help="PLD accuracy (relative width of the ε interval)")


def _batch_size_command(sub) -> None:
    """batch-size: the candidates compared."""
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
    pb.add_argument("--sampler", choices=SAMPLERS, default="poisson",
                    help="how batches are drawn (as for 'epsilon'; balls-in-bins and shuffle: N // B whole "
                         "batches per epoch, --accountant pld)")


def _curve_command(sub) -> None:
    """curve: epsilon at checkpoints."""
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
    pv.add_argument("--relation", choices=RELATIONS, default=None,
                    help="neighbouring relation (default: the sampler's own; replace-one: PLD only)")
    pv.add_argument("--sampler", choices=SAMPLERS, default="poisson",
                    help="how batches are drawn (as for 'epsilon'; all but poisson: PLD)")
    pv.add_argument("--out", metavar="FILE",
                    help="also draw the curve into FILE (PNG, or any format matplotlib knows by the extension; "
                         "needs matplotlib)")


def _risk_commands(sub) -> None:
    """tradeoff and calibrate-risk: membership-attack risk."""
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


def _tune_command(sub) -> None:
    """tune: a random search."""
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


def _figures_command(sub) -> None:
    """warm-up and figures."""
    sub.add_parser("warm-up", help="compile every kernel now (numba caches them on disk: later first uses are fast)")
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
