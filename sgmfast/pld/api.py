"""The public API of the PLD accountant: ``epsilon``, ``delta`` and ``PLDAccountant``.

Arguments are validated here, before any work; closed forms are answered here without a grid
(steps = 0, q = 1, ``exact``); everything else goes to the ``engine``.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .._executor import CHUNK_PLD, check_executor
from .._accountant import Accountant
from .._types import Bounds, Step
from .._validation import as_float_array, check_accuracy, check_step_scalars, check_checkpoints, check_delta, check_epsilon, check_positive, check_q, check_sigma, check_steps
from .common import RELATIONS, broadcast_groups, within
from . import samplers as _samplers
from . import tradeoff as _tradeoff  # (here, before __init__ binds the name pld.tradeoff to the function)
from .engine import BUDGET, Engine, monotone
from .schedules import make_engine


def _check_relation(relation: str) -> None:
    if relation not in RELATIONS:
        raise ValueError(f"relation must be one of {RELATIONS}; got {relation!r}")


def _check_grid_step(grid_step):
    return None if grid_step is None else float(check_positive(grid_step, "grid_step"))


def _epsilon_group(engine, targets):
    """(lower, upper) of ε at each δ in ``targets`` on one engine, made monotone in δ."""
    lo = np.empty(targets.size)
    up = np.empty(targets.size)
    for i, d in enumerate(targets):
        lo[i], up[i] = engine.epsilon(float(d))[:2]
    return monotone(targets, lo, up)


def _delta_group(engine, eps):
    """(lower, upper, met) of δ at each eps on one engine (already monotone over the array)."""
    return engine.delta_met(np.asarray(eps, dtype=np.float64))


def _epsilon_hinted(sigma, q, steps, target, accuracy, step0, budget=None):
    """(lower, upper, last grid step or None) of ``steps`` SGM steps, the first grid step being
    ``step0`` if given: for calibration loops, where neighbouring sigmas need about the same
    grid.  Arguments must already be validated."""
    eng = Engine([(sigma, q, int(steps))], accuracy, None)
    if budget is not None:
        eng.budget = budget
    return eng.epsilon(target, step0)


def epsilon_upper_at(sigma, q, steps, target, accuracy, step, budget=None):
    """Only the upper bound on epsilon(target), on a given grid step (no accuracy loop): for
    calibration searches. Still a certified upper bound. Arguments must already be validated."""
    return Engine([(sigma, q, int(steps))], accuracy, None).epsilon_upper_at(target, step)


def _with_met(b: Bounds, accuracy: float, eps=None) -> Bounds:
    """``b`` with ``met``: for ε(δ), whether every entry's relative width is <= ``accuracy``.  For
    δ(ε) (``eps`` given) ``met`` is what the engine reported (``Engine.delta_met``: the interval no
    wider than δ's change over a relative change ``accuracy`` of ε, which its two ends alone cannot
    show, or than ``accuracy`` x its upper end), and None where the engine does not report it."""
    if eps is not None:
        return b
    return dataclasses.replace(b, met=bool(np.all(within(b.lower, b.upper, accuracy * (1 + 1e-9)))))


def _broadcast_call(group_fn, sigma, q, steps, x, accuracy, grid_step, relation="add_remove", executor=None,
                    name=""):
    """Broadcast the inputs; the points sharing (sigma, q, steps) go to one engine in one call,
    so its caches are shared and the answers are monotone in the query (no point's bound
    contradicts another's).  With an ``executor``, whole groups go to its tasks (so the answers
    are the serial call's)."""
    if sigma.ndim == q.ndim == steps.ndim == x.ndim == 0:  # one point: the loop below's one engine
        lo, up, *met = group_fn(Engine([(float(sigma), float(q), int(steps))], accuracy, grid_step, relation,
                                       budget=max(BUDGET, 1.0)), x.reshape(1))
        return Bounds(float(lo[0]), float(up[0]), bool(met[0][0]) if met else None)
    shape, flat, groups = broadcast_groups(sigma, q, steps, x)
    lo = np.empty(flat[0].size)
    up = np.empty(flat[0].size)
    met = []  # (what the groups report: δ's rule; ε's is read off the widths, ``_with_met``)
    if check_executor(executor) is not None and len(groups) > 1:
        _on_executor(name, flat, list(groups.values()), accuracy, grid_step, relation, executor, lo, up, met)
    else:
        for (s, qq, t), idx in groups.items():
            # one work budget per call and schedule, shared by its queries (at least a second each)
            engine = Engine([(s, qq, int(t))], accuracy, grid_step, relation,
                            budget=max(BUDGET / len(idx), 1.0))
            lo[idx], up[idx], *m = group_fn(engine, flat[3][idx])
            met.extend(m)
    reported = bool(all(np.all(m) for m in met)) if met else None
    if shape == ():
        return Bounds(float(lo[0]), float(up[0]), reported)
    return Bounds(lo.reshape(shape), up.reshape(shape), reported)


def _on_executor(name, flat, groups, accuracy, grid_step, relation, executor, lo, up, met):
    """Whole groups per task, about CHUNK_PLD points each; each task is the serial call."""
    tasks, cur = [], []
    for idx in groups:
        cur.extend(idx)
        if len(cur) >= CHUNK_PLD:
            tasks.append(cur)
            cur = []
    if cur:
        tasks.append(cur)
    kwargs = dict(accuracy=accuracy, grid_step=grid_step, relation=relation)
    futures = [executor.submit(_task, name, tuple(a[t] for a in flat), kwargs) for t in tasks]
    for t, fut in zip(tasks, futures):
        lo[t], up[t], m = fut.result()
        met.extend([] if m is None else [m])


def _task(name, args, kwargs):
    b = _TASKS[name](*args, **kwargs)
    return np.asarray(b.lower), np.asarray(b.upper), b.met


def epsilon(sigma, q, steps, delta, *, accuracy=1e-3, relation=None, grid_step=None, executor=None,
            sampler="poisson") -> Bounds:
    """Certified bounds on ε(δ) for ``steps`` steps of DP-SGD (by default Poisson sampling: the
    Poisson-subsampled Gaussian mechanism).

    Parameters
    ----------
    sigma : float or array_like
        Noise multiplier (noise std / clipping norm), > 0.
    q : float or array_like
        Poisson sampling rate, in (0, 1].
    steps : int or array_like
        Number of steps T >= 0.
    delta : float or array_like
        Target δ in (0, 1).
    accuracy : float, optional
        Target relative width of the certified interval, ``upper - lower <=
        accuracy * upper``; the loss grid is refined until it is met.
    relation : {"add_remove", "replace_one", "zero_out"}, optional
        Neighbouring relation (default: the sampler's own, ``"add_remove"`` for Poisson and
        balls-in-bins batches, ``"zero_out"`` for the permutation shuffle, ``"replace_one"`` for
        fixed-size ones; :mod:`sgmfast.pld.samplers`). ``"add_remove"``: one record added or removed;
        both directions are composed and the larger ε is reported.
        ``"replace_one"``: one record replaced by another. Sensitivity
        convention: every clipped per-example gradient has norm <= 1 (one
        clipping norm), so a replacement moves the batch sum by up to 2; the
        dominating pair is (1-q)N(0, σ²) + qN(-1, σ²) against
        (1-q)N(0, σ²) + qN(1, σ²) (dp_accounting's REPLACE adjacency), and at
        q = 1 it is the Gaussian mechanism with sensitivity 2. (Passing
        "sensitivity 2" into an add/remove accountant instead is a different,
        looser pair; treating replacement as sensitivity 1 under-reports ε.)
    grid_step : float, optional
        Expert override of the loss-grid step; disables the accuracy loop.
    executor : concurrent.futures.Executor, optional
        Answer the (sigma, q, steps) groups of an array call on it (a process pool started with
        'spawn', or ``dask.distributed.Client(...).get_executor()``); the answers are the serial
        call's.
    sampler : {"poisson", "balls_in_bins", "shuffle", "fixed_size"}, optional
        How batches are drawn (:mod:`sgmfast.pld.samplers`): Poisson sampling at rate q;
        ``"balls_in_bins"``: every epoch each example joins one of the 1/q batches uniformly at
        random (random allocation, :mod:`sgmfast.pld.allocation`; 1/q must be whole);
        ``"shuffle"``: every epoch a random permutation cut into 1/q batches of a fixed size, what
        ``DataLoader(shuffle=True)`` does (:mod:`sgmfast.pld.shuffle`: sound but loose, a
        ``LooseBoundWarning`` says when the interval is wide); batches of exactly q n examples drawn
        without replacement (:mod:`sgmfast.pld.fixed_size`, replace-one).  ``grid_step`` and
        ``executor`` apply to Poisson sampling only.

    Returns
    -------
    Bounds
        ``lower <= ε(δ) <= upper`` (in nats); arrays if any input was an array.

    Notes
    -----
    Pessimistic bound: connect-the-dots discretisation (Doroshenko et al., PETS
    2022); q = 1 uses the exact Gaussian-mechanism formula (Balle & Wang, ICML
    2018, Thm 8) with ``sigma / sqrt(steps)``.  The pipeline is described in
    :mod:`sgmfast.pld`.

    Examples
    --------
    >>> b = epsilon(1.1, 256 / 60000, 14062, 1e-5)
    >>> b.lower <= b.upper and b.upper - b.lower <= 1e-3 * b.upper
    True
    """
    relation = _samplers.resolve(sampler, relation)
    acc = check_accuracy(accuracy)
    s, qq, t, d = check_sigma(sigma), check_q(q), check_steps(steps), check_delta(delta)
    if sampler != "poisson":
        _samplers.poisson_only(grid_step=grid_step, executor=executor)
        return _with_met(_samplers.call("epsilon", sampler, s, qq, t, d, acc, relation), acc)
    return _with_met(_broadcast_call(_epsilon_group, s, qq, t, d, acc, _check_grid_step(grid_step), relation, executor,
                                     "epsilon"), acc)


def delta(sigma, q, steps, epsilon, *, accuracy=1e-3, relation=None, grid_step=None, executor=None,
          sampler="poisson") -> Bounds:
    """Certified bounds on δ(ε) for ``steps`` steps of DP-SGD (by default Poisson sampling).

    Parameters
    ----------
    sigma, q, steps :
        As in :func:`epsilon`.
    epsilon : float or array_like
        ε >= 0 in nats.
    accuracy : float, optional
        The interval is refined until it is no wider than the change of δ
        caused by a relative change ``accuracy`` of ε, or than ``accuracy`` / 1000
        of δ itself (where δ barely changes with ε, as the total variation near 1).
    relation, grid_step, executor, sampler :
        As in :func:`epsilon`.

    Returns
    -------
    Bounds
        ``lower <= δ(ε) <= upper``.

    Examples
    --------
    >>> b = delta(1.0, 0.01, 1000, 1.0)
    >>> 0 <= b.lower <= b.upper <= 1
    True
    """
    relation = _samplers.resolve(sampler, relation)
    acc = check_accuracy(accuracy)
    s, qq, t, e = check_sigma(sigma), check_q(q), check_steps(steps), check_epsilon(epsilon)
    if sampler != "poisson":
        _samplers.poisson_only(grid_step=grid_step, executor=executor)
        return _with_met(_samplers.call("delta", sampler, s, qq, t, e, acc, relation), acc, e)
    return _with_met(_broadcast_call(_delta_group, s, qq, t, e, acc, _check_grid_step(grid_step), relation, executor,
                                     "delta"), acc, e)


#: what an executor task may run (by name, so that tasks pickle)
_TASKS = {"epsilon": epsilon, "delta": delta}


def _scalar(value, name):
    if np.ndim(value):
        raise ValueError(f"{name} must be a single number for a curve; got shape {np.shape(value)}")
    return float(value)


def _curve_call(fn, sigma, q, steps, x, name, accuracy, relation, sampler="poisson") -> Bounds:
    """A curve of one (sigma, q) over checkpoints, validated (x is the checked δ or ε)."""
    from . import curve as _curve  # (here: ``sgmfast epsilon`` does not need it)
    relation = _samplers.resolve(sampler, relation)
    acc = check_accuracy(accuracy)
    s, qq = _scalar(check_sigma(sigma), "sigma"), _scalar(check_q(q), "q")
    t = check_checkpoints(steps)
    xx = _scalar(x, name)
    eps = None if fn is _curve.epsilon_curve else xx
    if sampler != "poisson":
        kind = "epsilon" if eps is None else "delta"
        return _with_met(_samplers.curve(kind, sampler, s, qq, t, xx, acc, relation), acc, eps)
    lo, up = fn(_curve.Run([(s, qq)], t.reshape(-1, 1)), xx, acc, relation)
    return _with_met(Bounds(lo, up), acc, eps)


def epsilon_curve(sigma, q, steps, delta, *, accuracy=1e-3, relation=None, sampler="poisson") -> Bounds:
    """Certified bounds on ε(δ) after each of the checkpoints ``steps`` of one run, in one call.

    Parameters
    ----------
    sigma, q : float
        Noise multiplier and sampling rate, as in :func:`epsilon`.
    steps : array_like of int
        Strictly increasing step counts (for example the steps after each epoch).
    delta : float
        Target δ in (0, 1).
    accuracy, relation, sampler :
        As in :func:`epsilon`; every point is certified and refined to the accuracy like one
        :func:`epsilon` call.  The other samplers answer checkpoint by checkpoint
        (their one-step or epoch distributions are built once and kept).

    Returns
    -------
    Bounds
        Arrays ``lower``, ``upper``, one entry per checkpoint, non-decreasing in the steps.

    Notes
    -----
    The checkpoints share the one-step grids and their transforms (:mod:`sgmfast.pld.curve`):
    each costs one inverse transform per bound, not a whole query (60 MNIST epochs take about
    as long as 20 single calls; bench/README).

    Examples
    --------
    >>> b = epsilon_curve(1.1, 256 / 60000, [234, 2344, 14062], 1e-5)
    >>> bool((b.lower <= b.upper).all() and (b.upper[:-1] <= b.upper[1:]).all())
    True
    """
    from . import curve as _curve
    return _curve_call(_curve.epsilon_curve, sigma, q, steps, check_delta(delta), "delta", accuracy, relation,
                       sampler)


def delta_curve(sigma, q, steps, epsilon, *, accuracy=1e-3, relation=None, sampler="poisson") -> Bounds:
    """Certified bounds on δ(ε) after each of the checkpoints ``steps`` of one run, in one call
    (as :func:`epsilon_curve`; each point refined like one :func:`delta` call).

    Examples
    --------
    >>> b = delta_curve(1.1, 256 / 60000, [234, 2344, 14062], 1.0)
    >>> bool((b.lower <= b.upper).all() and (b.upper[:-1] <= b.upper[1:]).all())
    True
    """
    from . import curve as _curve
    return _curve_call(_curve.delta_curve, sigma, q, steps, check_epsilon(epsilon), "epsilon", accuracy, relation,
                       sampler)


def tradeoff(sigma, q, steps, alpha, *, accuracy=1e-3, relation="add_remove") -> Bounds:
    """Certified bounds on the trade-off curve β(α) (f-DP) of ``steps`` SGM steps.

    β(α) is the least type-II error (missed members) of any membership test whose type-I error
    (false alarms) is at most α, over both orders of the neighbouring pair: an attack's
    true-positive rate at false-positive rate α is at most ``1 - lower``.  Each direction's
    curve is read off its certified privacy-loss distribution, eps over the whole real line
    (:mod:`sgmfast.pld.tradeoff`); at q = 1 it is the Gaussian curve
    β(α) = Φ(Φ⁻¹(1 - α) - μ), μ = sqrt(steps) / sigma.

    Parameters
    ----------
    sigma, q, steps :
        Scalars, as in :func:`epsilon`.
    alpha : float or array_like
        Type-I errors in [0, 1].
    accuracy, relation :
        As in :func:`epsilon` (for the profile's δ bounds).

    Returns
    -------
    Bounds
        ``lower <= β(α) <= upper`` at each α (arrays if ``alpha`` is one).

    Examples
    --------
    >>> b = tradeoff(1.0, 1.0, 1, [0.01, 0.1])    # the Gaussian mechanism, mu = 1
    >>> [round(float(x), 4) for x in b.lower], [round(float(x), 4) for x in b.upper]
    ([0.9076, 0.6109], [0.9076, 0.6109])
    """
    _check_relation(relation)
    acc = check_accuracy(accuracy)
    s, qq = _scalar(check_sigma(sigma), "sigma"), _scalar(check_q(q), "q")
    t = int(_scalar(check_steps(steps), "steps"))
    a = as_float_array(alpha, "alpha")
    if not ((a >= 0.0) & (a <= 1.0)).all():
        raise ValueError(f"alpha (type-I error) must be in [0, 1]; got {a[~((a >= 0.0) & (a <= 1.0))].flat[0]!r}")
    flat = a.reshape(-1)
    goal = max(1e-3 * float(np.min(flat[flat > 0], initial=1.0)), 1e-300)
    lo, up = _tradeoff.bounds(s, qq, t, np.ascontiguousarray(flat), relation, acc, goal)
    if a.ndim == 0:
        return Bounds(float(lo[0]), float(up[0]))
    return Bounds(lo.reshape(a.shape), up.reshape(a.shape))


def attack_tpr(sigma, q, steps, fpr, *, accuracy=1e-3, relation="add_remove") -> Bounds:
    """Certified bounds on the true-positive rate of the best membership-inference attack at
    false-positive rate ``fpr``, over ``steps`` SGM steps.

    The rate is 1 - β(fpr), β the trade-off curve of :func:`tradeoff`: no attack that flags at
    most a fraction ``fpr`` of non-members catches more than ``upper`` of the members (report
    ``upper``; ``lower`` says how tight it is).

    Parameters
    ----------
    sigma, q, steps :
        Scalars, as in :func:`epsilon`.
    fpr : float or array_like
        False-positive rates (type-I errors) in [0, 1].
    accuracy, relation :
        As in :func:`tradeoff`.

    Returns
    -------
    Bounds
        ``lower <= TPR(fpr) <= upper`` at each ``fpr`` (arrays if ``fpr`` is one), with
        ``fpr <= lower`` and ``upper <= 1``.

    Notes
    -----
    ``lower = max(1 - β_upper, fpr)`` and ``upper = min(1 - β_lower, 1)``, each ``1 - x``
    rounded outward.  The clips are facts, not guesses: the test that flags a record at random
    with probability ``fpr`` has TPR = FPR, so the best one has TPR >= FPR (β(α) <= 1 - α), and
    a rate is at most 1.  At q = 1 the curve is the Gaussian one,
    TPR = 1 - Φ(Φ⁻¹(1 - fpr) - μ) with μ = sqrt(steps) / sigma (the curve G_μ of Dong, Roth &
    Su, "Gaussian differential privacy", JRSS B 2022).

    Examples
    --------
    >>> b = attack_tpr(1.0, 1.0, 1, [0.001, 0.01])    # Gaussian, mu = 1: 1 - Φ(Φ⁻¹(1 - fpr) - 1)
    >>> [round(float(x), 4) for x in b.upper]
    [0.0183, 0.0924]
    >>> b = attack_tpr(1.1, 256 / 60000, 14062, 1e-3)  # DP-SGD on MNIST, 60 epochs
    >>> 1e-3 <= b.lower <= b.upper < 0.01
    True
    """
    a = as_float_array(fpr, "fpr")
    if not ((a >= 0.0) & (a <= 1.0)).all():
        raise ValueError(f"fpr (false-positive rate) must be in [0, 1]; got {a[~((a >= 0.0) & (a <= 1.0))].flat[0]!r}")
    b = tradeoff(sigma, q, steps, a, accuracy=accuracy, relation=relation)
    lo, up = _tradeoff.tpr_bounds(a, np.asarray(b.lower), np.asarray(b.upper))
    if a.ndim == 0:
        return Bounds(float(lo), float(up))
    return Bounds(lo, up)


def advantage(sigma, q, steps, *, accuracy=1e-3, relation="add_remove") -> Bounds:
    """Certified bounds on the membership advantage of ``steps`` SGM steps: the largest
    TPR - FPR of any membership-inference attack.

    Parameters
    ----------
    sigma, q, steps :
        As in :func:`epsilon` (arrays broadcast).
    accuracy, relation :
        As in :func:`delta`.

    Returns
    -------
    Bounds
        ``lower <= max_α (1 - α - β(α)) <= upper``, in [0, 1] (arrays if any input was one).

    Notes
    -----
    For a test φ between P and Q, TPR - FPR = E_P φ - E_Q φ, whose largest value over all
    tests is the total variation distance TV(P, Q) = sup_A P(A) - Q(A) (Neyman-Pearson: the
    test φ = 1{p > q}).  So max_α (1 - α - β(α)) = TV, which is the hockey-stick divergence at
    ε = 0, δ(0): the hypothesis-testing reading of (ε, δ)-DP, FPR + e^ε FNR >= 1 - δ for every
    test, at ε = 0 (Kairouz, Oh & Viswanath, ICML 2015; Wasserman & Zhou, JASA 2010).  TV is symmetric, and under ``"add_remove"`` :func:`delta` takes the
    larger of the remove and add directions (each a certified bound on the same number), so
    this is :func:`delta` at ε = 0 and inherits its certificate.  At q = 1 it is the Gaussian
    mechanism's 2Φ(μ/2) - 1, μ = sqrt(steps) / sigma; with sigma = 0 it is 1 - (1 - q)^steps,
    the chance that the record is sampled at all.

    Examples
    --------
    >>> b = advantage(1.0, 1.0, 1)                    # Gaussian, mu = 1: 2 Φ(1/2) - 1
    >>> round(float(b.upper), 4)
    0.3829
    >>> b = advantage(1.1, 256 / 60000, 14062)        # DP-SGD on MNIST, 60 epochs
    >>> round(float(b.lower), 3), round(float(b.upper), 3)
    (0.224, 0.224)
    """
    return delta(sigma, q, steps, 0.0, accuracy=accuracy, relation=relation)


class PLDAccountant(Accountant):
    """Accountant for a schedule of SGM steps, with certified (lower, upper) answers.

    Parameters
    ----------
    accuracy : float, optional
        As in :func:`epsilon`.
    relation : {"add_remove", "replace_one"}
        Neighbouring relation, as in :func:`epsilon`.
    grid_step : float, optional
        Expert override of the loss-grid step.

    Examples
    --------
    >>> acc = PLDAccountant().step(1.1, 256 / 60000, steps=1000)
    >>> b = acc.epsilon(1e-5)
    >>> b.lower <= b.upper
    True
    """

    engine = "pld"

    def __init__(self, *, accuracy=1e-3, relation="add_remove", grid_step=None):
        _check_relation(relation)
        self.accuracy = check_accuracy(accuracy)
        self.relation = relation
        self.grid_step = _check_grid_step(grid_step)
        self.history: list[Step] = []
        self._engine = None

    def _options(self) -> dict:
        return {"accuracy": self.accuracy, "relation": self.relation, "grid_step": self.grid_step}

    def __repr__(self) -> str:
        return f"PLDAccountant(steps={sum(st.count for st in self.history)}, segments={len(self.history)})"

    def step(self, sigma, q, steps=1) -> PLDAccountant:
        """Record ``steps`` steps with noise multiplier ``sigma`` and sampling rate ``q`` (validated
        first); returns the accountant, so calls chain."""
        s, qq, t = check_step_scalars(sigma, q, steps, "PLDAccountant.step takes scalars sigma, q and steps")
        if t > 0:
            self.history.append(Step(s, qq, t))
            self._engine = None
        return self

    def compose(self, other: PLDAccountant) -> PLDAccountant:
        """Append the history of ``other`` (composition of the two mechanisms); returns self."""
        if not isinstance(other, PLDAccountant):
            raise TypeError(f"can only compose with a PLDAccountant; got {type(other).__name__}")
        if other.relation != self.relation:
            raise ValueError(f"cannot compose relation {other.relation!r} with {self.relation!r}")
        self.history.extend(other.history)
        self._engine = None
        return self

    def _schedule(self):
        merged: dict = {}
        for st in self.history:
            key = (st.sigma, st.q)
            merged[key] = merged.get(key, 0) + st.count
        return [(s, q, c) for (s, q), c in merged.items()]

    def _get_engine(self):
        if self._engine is None:
            self._engine = make_engine(self._schedule(), self.accuracy, self.grid_step, self.relation)
        return self._engine

    def epsilon(self, delta) -> Bounds:
        """Certified bounds on ε(δ) for the recorded schedule."""
        d = check_delta(delta)
        if not self.history:
            return Bounds(np.zeros(d.shape), np.zeros(d.shape)) if d.ndim else Bounds(0.0, 0.0)
        lo, up = _epsilon_group(self._get_engine(), np.asarray(d, dtype=np.float64).ravel())
        lo, up = lo.reshape(d.shape), up.reshape(d.shape)
        return _with_met(Bounds(float(lo), float(up)) if d.ndim == 0 else Bounds(lo, up), self.accuracy)

    def _curve(self, fn, x):
        """``fn`` (``curve.epsilon_curve`` or ``delta_curve``) at every recorded segment: on the
        history's run, or an even spread of it (``curve_grids.history_run``) and bounds by
        monotonicity between."""
        from . import curve as _curve
        run, kept = _curve.history_run([(st.sigma, st.q, st.count) for st in self.history])
        lo, up = fn(run, x, self.accuracy, self.relation)
        return _curve.spread_back(kept, lo, up, len(self.history))

    def epsilon_curve(self, delta) -> Bounds:
        """Certified bounds on ε(δ) after each recorded segment (arrays, one entry per ``step``
        call that recorded steps), for about the cost of one :meth:`epsilon`."""
        from . import curve as _curve
        d = _scalar(check_delta(delta), "delta")
        if not self.history:
            return Bounds(np.zeros(0), np.zeros(0))
        lo, up = self._curve(_curve.epsilon_curve, d)
        return _with_met(Bounds(lo, up), self.accuracy)

    def delta_curve(self, epsilon) -> Bounds:
        """Certified bounds on δ(ε) after each recorded segment (as :meth:`epsilon_curve`)."""
        from . import curve as _curve
        e = _scalar(check_epsilon(epsilon), "epsilon")
        if not self.history:
            return Bounds(np.zeros(0), np.zeros(0))
        lo, up = self._curve(_curve.delta_curve, e)
        return _with_met(Bounds(lo, up), self.accuracy, e)

    def delta(self, epsilon) -> Bounds:
        """Certified bounds on δ(ε) for the recorded schedule."""
        e = check_epsilon(epsilon)
        if not self.history:
            return Bounds(np.zeros(e.shape), np.zeros(e.shape)) if e.ndim else Bounds(0.0, 0.0)
        engine = self._get_engine()
        if hasattr(engine, "delta_met"):  # (an ``Engine``; the sandwich of many steps does not report it)
            lo, up, met = engine.delta_met(e.ravel())
            met = bool(met.all())
        else:
            (lo, up), met = engine.delta(e.ravel()), None
        lo, up = lo.reshape(e.shape), up.reshape(e.shape)
        return Bounds(float(lo), float(up), met) if e.ndim == 0 else Bounds(lo, up, met)
