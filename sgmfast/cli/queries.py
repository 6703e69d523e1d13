"""One answer a command: ``epsilon``, ``calibrate``, ``batch-size``, ``tune`` and ``figures``."""

from __future__ import annotations

import math
import sys

from .common import _fmt, _relation, _resolve_q_steps


def _cmd_epsilon(args) -> None:
    q, steps = _resolve_q_steps(args)
    sampler = args.sampler.replace("-", "_")
    relation = None if args.relation is None else args.relation.replace("-", "_")
    if args.selected != 1 and (sampler != "balls_in_bins" or args.accountant != "pld"):
        raise ValueError("--selected applies to --sampler balls-in-bins with --accountant pld only")
    if args.accountant == "rdp":
        from .. import rdp

        from .._samplers import TABLE

        own = TABLE[sampler].relations.get("rdp", (None,))[0]
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
        from .. import pld

        relation = _relation(args, sampler)
        if sampler != "poisson" and not math.isfinite(steps):
            raise ValueError(f"--sampler {args.sampler} needs a finite number of steps")
        from ..pld.samplers import batches_per_epoch

        if args.selected != 1:  # (k of the t batches of every epoch: pld.balls_in_bins' own argument)
            from ..pld import balls_in_bins

            b = balls_in_bins.epsilon(args.sigma, batches_per_epoch(q), int(steps), args.delta,
                                      accuracy=args.accuracy, selected=args.selected)
        else:
            b = pld.epsilon(args.sigma, q, steps, args.delta, accuracy=args.accuracy, relation=relation,
                            sampler=sampler)
        print(f"epsilon: {_fmt(float(b.upper), 'up')}")
        print(f"epsilon lower bound: {_fmt(float(b.lower), 'down')}")
        if args.selected != 1 and b.width > args.accuracy:
            _warn_wide(b, args.accuracy, "with --selected > 1 the lower end is a separate statistic, "
                                         "pld.balls_in_bins' notes; both ends hold")
        elif b.met is False and sampler != "shuffle":  # (the shuffle's note says why it is wide)
            _warn_wide(b, args.accuracy)
        print(f"relation: {relation.replace('_', '-')}")
        print(f"sampler: {args.sampler}")
        if args.selected != 1:
            print(f"selected: {args.selected}")
    print(f"delta: {args.delta:g}")
    print(f"q: {q:.6g}")
    print(f"steps: {int(steps) if math.isfinite(steps) else steps}")
    print(f"accountant: {args.accountant}")


def _warn_wide(b, accuracy: float, why: str = "the work budget ran out before the grid was fine enough; both "
                                               "ends still hold; --accountant rdp gives a Renyi-DP upper bound"):
    """One line on stderr: the certified interval is wider than the accuracy asked for, and why."""
    print(f"sgmfast: warning: the certified interval is {b.width:.3g} wide relative to its upper end, more than "
          f"--accuracy {accuracy:g} ({why})", file=sys.stderr)


def _achieved(accountant, sigma, q, steps, delta, accuracy, sampler="poisson", target=None):
    """(upper, lower) epsilon at the calibrated point; lower is None for RDP.  The upper end is
    the least of this evaluation and the one the calibration verified its answer with (both
    certified: a second evaluation can be looser, e.g. when memory ran short); above ``target``
    ``Unverified``, never a printed number that misses the target."""
    from ..calibrate.public import verified_epsilon

    if accountant == "rdp":
        from .. import rdp

        upper, lower = float(rdp.epsilon(sigma, q, steps, delta, sampler=sampler)), None
    else:
        from .. import pld

        b = pld.epsilon(sigma, q, steps, delta, accuracy=accuracy, sampler=sampler)
        upper, lower = float(b.upper), float(b.lower)
    seen = verified_epsilon(accountant, sigma, q, steps, delta, None if accountant == "rdp" else accuracy, sampler)
    if seen is not None and seen < upper:
        upper = seen
        lower = None if lower is None else min(lower, upper)
    if target is not None and upper > target:
        from .._failures import Unverified

        raise Unverified(f"the calibrated point could not be verified: its certified epsilon is {upper:.6g} "
                           f"> target {target:g} (please report)")
    return upper, lower


def _cmd_calibrate(args) -> None:
    from .. import calibrate as cal
    from ..calibrate.noise import _check_sampler

    sampler = args.sampler.replace("-", "_")
    if args.sampler != "poisson" and args.solve_for == "epochs":
        raise ValueError(f"--sampler {args.sampler} calibrates with --solve-for sigma or batch-size")
    _check_sampler(sampler, args.accountant)
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
            from ..pld.samplers import run_of_batch

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
    upper, lower = _achieved(args.accountant, sigma, q, steps, args.delta, args.accuracy, sampler, args.epsilon)
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
    from ..analysis import plan_batch_size

    plan = plan_batch_size(args.dataset_size, args.epsilon, args.delta, clipping_norm=args.clipping_norm,
                           grad_sq_sum=args.grad_sq_sum, grad_norm=args.grad_norm, dim=args.dim,
                           epochs=args.epochs, steps=args.steps, candidates=args.candidates,
                           accountant=args.accountant, sampler=args.sampler.replace("-", "_"))
    print(plan.to_text())
    print(f"best batch size: {plan.best.batch_size}")


def _cmd_tune(args) -> None:
    from .. import tuning

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
    print(f"runs: {runs.kind}" + ("" if runs.kind != "tnb" else f" shape={runs.shape:g} gamma={runs.gamma:.6g}")
          + f" mean={runs.mean:.6g}")
    print(f"method: {args.method}")


def _cmd_figures(args) -> None:
    from ..figures import write_figures

    res = write_figures(args.out, delta=args.delta, epsilons=args.epsilons, steps=args.steps,
                        n_q=args.n_q, n_eps=args.n_eps, accuracy=args.accuracy,
                        csv_only=args.csv_only, progress=True)
    for p in res.paths:
        print(p)
    print(f"figure 1: {res.seconds_figure1:.1f} s, figure 2: {res.seconds_figure2:.1f} s")


def _cmd_warm_up(args) -> None:
    """One small query of each kind, so that numba compiles (and caches) every kernel the
    commands use; prints each kind as it is done."""
    import warnings

    from .. import calibrate, pld, rdp, tuning

    steps = [
        ("pld epsilon and delta", lambda: (pld.epsilon(1.1, 0.01, 1000, 1e-5), pld.delta(1.1, 0.01, 1000, 1.0))),
        ("rdp epsilon", lambda: rdp.epsilon(1.1, 0.01, 1000, 1e-5)),
        ("calibration", lambda: (calibrate.calibrate_sigma(2.0, 1e-5, 0.01, 1000),
                                 calibrate.calibrate_sigma(2.0, 1e-5, 0.01, 1000, accountant="rdp"))),
        ("curves", lambda: pld.epsilon_curve(1.1, 0.01, [100, 500, 1000], 1e-5)),
        ("trade-off curve", lambda: pld.tradeoff(1.1, 0.01, 1000, [1e-3, 1e-2])),
        ("samplers", lambda: [pld.epsilon(2.0, 0.1, 20, 1e-5, sampler=s) for s in pld.samplers.SAMPLERS]),
        ("tuning", lambda: tuning.epsilon(1.1, 0.01, 1000, 1e-5, tuning.geometric(mean=10))),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for what, run in steps:
            run()
            print(f"compiled: {what}", flush=True)
    print("warm: every command's kernels are in numba's cache")
