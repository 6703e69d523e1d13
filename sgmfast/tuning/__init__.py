"""The privacy cost of hyperparameter tuning: random search over K DP-SGD runs, best one released.

A random search trains K models, each a DP-SGD run with the same (sigma, q, steps) on the same
data, and releases only the best one (by a score computed from the run).  K is drawn from a
distribution fixed in advance, independently of the data: the randomness of K is what makes the
search cost only a little more than one run (a fixed K would cost K runs).  Run counts
(:class:`RunCount`): :func:`poisson`, :func:`truncated_negative_binomial` (with
:func:`logarithmic` and :func:`geometric` as shapes 0 and 1) and :func:`binomial`.

Two upper bounds on the (epsilon, delta) of the whole search; :func:`epsilon` and :func:`delta`
return the smaller one (``method="best"``), or either one:

``"rdp"``
    Papernot & Steinke, "Hyperparameter tuning with Rényi differential privacy", ICLR 2022
    (arXiv 2110.03620 v2): Theorem 2 (truncated negative binomial K) and Theorem 6 (Poisson K),
    from the RDP of one run (:func:`sgmfast.rdp.rdp`, rounded up), over a dense grid of orders
    (any order is a valid choice, so a grid only loses tightness), made non-decreasing in the
    order (Rényi divergences are), then converted like :mod:`sgmfast.rdp`.  Theorem 6 also needs
    the run's delta at eps_hat = log(1 + 1/(lambda - 1)): the certified PLD upper bound.

``"profile"``
    From the certified privacy profile delta_Q(eps) of one run (the PLD accountant's upper
    bounds: read off its pessimistic composed grids, tilted towards the eps the bound reads and
    valid at every eps >= 0, one per direction, built once per query) -- the route of Koskela,
    Redberg & Wang, "Privacy profiles for private selection", ICML 2024.  The paper's own
    theorem could not be consulted when this was written, so the bound below is derived here,
    with its proof; it is not claimed to be theirs.  For DP-SGD it is usually the smaller of the
    two (``bench/README.md``); Poisson K is the exception seen.

For a truncated negative binomial K, ``"best"`` computes the profile bound first and the RDP
bound only where a floor under it is below the profile bound (``_rdp_bound._rdp_epsilon_floor``,
proved there from the run's RDP at 96 orders, monotonicity in the order and the conversion's
form): where the floor is above, the RDP bound is larger, and the answer is the same.

What a search may select on (the premises of both bounds).  Every run is one DP-SGD run with the
given (sigma, q, steps) on the data, independent of the other runs; its other hyperparameters
(learning rate, clipping norm, architecture, ...) may differ from run to run if each run draws
them afresh from one distribution fixed independently of the data (random search: the runs are
i.i.d.; a fixed list of settings tried in order is not, but drawing uniformly from the list
is).  The run released is the one with the best *score*, and the score
must be a function of that run's own output only: of what the run's accounting covers (the
trained model, its checkpoints, the noisy gradients), of its hyperparameters, of public data or
data outside the protected dataset, and of coins independent of the data.  It may not read the
protected data: not the training loss or accuracy, not a validation set whose records the
neighbouring relation covers, not gradient norms or clipping counts -- such a score is a
different function on neighbouring datasets, and no bound here covers it (a score computed by a
DP mechanism on private data would have to be part of the run, whose profile is then not the
one of (sigma, q, steps)).  Ties may be broken at random or by run order.  Only the best run is
released (its output and what is computed from it, e.g. its score): not K, not the other runs
or their scores.

Why the profile bound holds.  Fix neighbouring datasets D, D'; P, P' are the laws of one run's
output y on them (with its hyperparameters h, if they vary), H_e(P || P') = sup_S P(S) -
e^e P'(S) = int (p - e^e p')_+ (p, p' densities for any measure dominating both), and
delta_Q(e) >= max(H_e(P || P'), H_e(P' || P)) for e >= 0 is the run's certified profile (the
accounting of (sigma, q, steps) holds for every h; with h drawn from pi on both datasets,
H_e = int H_e(P_h || P'_h) dpi(h) <= delta_Q(e)).  phi(z) = E[z^K] is the probability
generating function of K.

(a) Ties, on the augmented output.  Give every run an independent V ~ Uniform(0, 1) and order
the augmented outputs z = (y, V) lexicographically by (score(y), V).  The augmented run has the
law P x Leb on D and P' x Leb on D', and the same profile: int int (p(y) - e^e p'(y))_+ dy dv =
H_e(P || P').  No point is an atom of the order -- P x Leb[z' = z] <= Leb[V' = v] = 0 for every
fixed z -- so the best of K runs is unique almost surely, and F(z) = P x Leb[z' <= z] is also
the probability of being strictly below z.  Hence the best of K has the law
    P[best in B] = sum_k P[K = k] k P[Z_1 in B, Z_2 < Z_1, ..., Z_k < Z_1]
                 = sum_k P[K = k] k int_B F^(k-1) d(P x Leb) = int_B phi'(F) d(P x Leb):
density a = phi'(F) p on D, a' = phi'(F') p' on D' (F' the same order's distribution function
under P' x Leb).  K = 0 (Poisson, binomial) releases nothing, with the same probability phi(0)
on both, which adds (1 - e^eps)_+ phi(0) = 0 to the divergence at eps >= 0.  Under P x Leb,
F(Z) is exactly uniform on (0, 1): F(y, v) = G(t-) + v (G(t) - G(t-)) with t = score(y) and G
the score's distribution function (the randomised probability integral transform).  The search
releases y, which is the best z with V dropped, a post-processing: a bound for the release of z
holds for it.  Breaking ties by run order (the first or the last best run) releases the same law
of y: the runs are i.i.d., so given the set of K outputs their order is a uniform random
permutation, and the run picked among the tied ones is uniform among them, as with V.

(b) The score is a function of the run's output.  Then the order on augmented outputs is one
and the same on D and D', which the proof uses twice: the density of the best is phi'(F) p with
F read off P x Leb alone (and phi'(F') p' with the same order under P' x Leb), and for each z
the event {z' <= z} is one fixed set of augmented outputs on both datasets, to which the run's
profile applies in (c).  A score that reads the data is a different set on D and D', and the
inequalities F' >= l(F) below need not hold.

(c) The bound.  For any e2 >= 0, pointwise (an identity, then each part below its positive part
and phi'(F') <= phi'(1) = E[K]):
    a - e^eps a' = phi'(F') (e^e2 p - e^eps p') + p (phi'(F) - e^e2 phi'(F'))
                 <= E[K] (e^e2 p - e^eps p')_+ + p (phi'(F) - e^e2 phi'(F'))_+.
Integrating, for 0 <= e2 <= eps,
    delta_A(eps) <= E[K] e^e2 delta_Q(eps - e2) + E_{z ~ P x Leb}[(phi'(F(z)) - e^e2 phi'(F'(z)))_+].
The profile at any e1 >= 0 bounds F' below: with S = {z' <= z}, P x Leb(S) <= e^e1 P' x Leb(S)
+ d1 gives F(z) <= e^e1 F'(z) + d1, and the complement, the other direction, gives 1 - F'(z) <=
e^e1 (1 - F(z)) + d1 (d1 = delta_Q(e1) covers both), so F' >= l(F) with
l(u) = max(0, e^-e1 (u - d1), 1 - e^e1 (1 - u) - d1).  phi' is non-decreasing (K >= 0) and F(Z)
is uniform, so the second term is at most I(e1, e2) = int_0^1 (phi'(u) - e^e2 phi'(l(u)))_+ du.
l is non-decreasing too, so on each cell [u', u] of a partition of [0, 1] the integrand is at
most phi'(u) - e^e2 phi'(l(u')): the Riemann sum with phi' at each cell's right end and l at its
left end bounds I from above.  Every split (e1, e2) gives a bound, so the search over them only
decides tightness: e1 at the points of the profile's grid (where delta_Q is bounded), e2 first on
that grid, the splits ranked by a sample of the Riemann sum (``_sampled_cells``: no bound), then
on a grid 8x finer near the best and finer still around its best (``_zoom``), each candidate's
total from the full Riemann sum and the profile's upper bounds; the smallest such total is
returned.  D and D' swapped give the same bound (delta_Q covers both directions).

(d) Rounding: every float step errs on the safe side.  The one premise not proved here is that
exp, expm1, log and log1p (math, numpy) are within 8 ulps (``_F`` = 16 u, u = 2^-53) of the true
value; glibc documents 1-2 ulps, numpy's SIMD versions 4.  The steps:
* the cells are [1 - s_{i+1}, 1 - s_i] for the floats s_i of ``_CELLS`` (s_0 = 0, s_N = 1 exactly;
  the widths s_{i+1} - s_i are exact by Sterbenz's lemma, s_{i+1} <= 2 s_i).  1 - s is never
  rounded: phi'(1 - s) is computed from s itself (``RunCount._log_dpgf_gap``: log mu - mu s,
  log(n p) + (n - 1) log1p(-p s), C - (eta + 1) log(gamma + (1 - gamma) s)), with a bound E on the
  float error of that logarithm from a first-order error analysis (each rounded quantity's
  magnitude times its relative error, summed, doubled for the second-order terms and the
  rounding of E; log1p's conditioning near p s = 1 included).  phi'(u_i) is then rounded up as
  exp(L + E)(1 + 4u|x| + 4F), x = fl(L + E): the sum errs by 1.01 u|x| in the exponent, exp by F,
  and the factor covers both with its own two roundings; phi'(l) is rounded down by the mirror
  factor (a subnormal exp, with no relative accuracy, becomes 2^-999 up or 0 down);
* 1 - l(u) = min(1, -expm1(-e1) + e^-e1 (s + d1), e^e1 s + d1) is computed in this form: sums of
  non-negative terms, within F + 3u each, so the factor 1 + 4F makes it an upper bound on the
  exact 1 - l, and the l used a lower bound (phi'(l) too, phi' being non-decreasing).  (Formed
  as 1 - (...) from u = fl(1 - s), both rounded to an absolute 2^-53, it was off by up to ~1e-2
  relative in 1 - u at the first cells and in 1 - l where 1 - l ~ 1e-14: with gamma below an ulp
  of 1 the sum moved by up to 0.5 %, either way);
* e^e2 is rounded down (1 - 2F on exp's result), as I falls when e2 grows;
* the kernel: each cell's exact (h - sigma l)_+ is at most its computed value over 1 - u plus
  u h (fused multiply-add or not), and the products and the 1501-term sum err by at most
  (n + 2) u = 1.7e-13 relative: the relative 1e-9 covers that, 1e-15 of the sum of h (a dot
  product within 1.7e-13 of its value) the u h, and both leave the 2u that the caller's final
  addition needs;
* the splits: ``epsilon`` returns fl(e2*) + eps_Q rounded up (the next float when an exact
  two-sum shows the sum was rounded down), e2* = fl(e2 (1 + 1e-12)), so delta_Q is read at or
  below eps - e2*, e^e2* is charged, and I is read at fl(e2 (1 - 1e-12)) <= e2*; ``delta`` reads
  delta_Q at x = fl(eps - e2) and charges the split e2* = eps - x exactly (e^e2 at the float at
  or above it, I at the float at or below it, from an exact two-sum); E[K] is phi'(1) rounded
  up, and the remaining few roundings (exp, products, sums) are covered by the relative 1e-12.

Sampling K: :meth:`RunCount.sample` draws from exactly the distribution that is accounted.

Examples
--------
>>> from sgmfast import tuning
>>> runs = tuning.geometric(mean=10)
>>> one = tuning.epsilon(1.1, 256 / 60000, 14062, 1e-5, tuning.binomial(1, 1.0))   # K = 1
>>> search = tuning.epsilon(1.1, 256 / 60000, 14062, 1e-5, runs)
>>> round(one, 3), round(search, 3)       # MNIST, 60 epochs: one run, then the search
(2.382, 3.897)
"""


from __future__ import annotations

import math

from .._failures import GridFailure
from .._validation import check_accuracy, check_delta, check_epsilon, check_positive, check_q, check_sigma, check_steps
from ._profile_bound import _Profile, _beside, _profile_delta, _profile_epsilon
from ._rdp_bound import ORDERS, _rdp_delta, _rdp_epsilon, _rdp_epsilon_floor
from .runs import RunCount, binomial, geometric, logarithmic, poisson, truncated_negative_binomial

__all__ = ["RunCount", "poisson", "truncated_negative_binomial", "logarithmic", "geometric", "binomial",
           "epsilon", "delta", "calibrate_sigma", "ORDERS"]

METHODS = ("best", "rdp", "profile")


# ------------------------------------------------------------------------------------------------
# Public API

def _lazy_profile(sigma, q, steps, e_max, goal, accuracy, relation, tilt_at=None):
    """A function returning the run's :class:`_Profile`, computed on first use only."""
    box = []

    def get():
        if not box:
            box.append(_Profile(sigma, q, steps, e_max(), goal, accuracy, relation, tilt_at))
        return box[0]

    return get


def _decade(d: float) -> float:
    """The power of ten at or below d: the profile grid depends on delta only through it, so
    ``epsilon`` at d and ``delta`` at the eps it returns read the same grid."""
    return 10.0 ** math.floor(math.log10(min(max(d, 1e-300), 0.5)))


def _target_profile(sigma, q, steps, dlt, runs, accuracy, relation):
    """The lazy profile for a target delta: up to 4x RDP's eps at 1e-3 delta / E[K], read off the
    PLD grids tilted towards delta / (4 E[K]) (delta taken to its decade), about where the bound
    reads the run's eps (at delta / (E[K] e^e2) for a split e2 of 1 to 2 nats, less I)."""
    d = _decade(dlt) / max(runs.mean, 1.0)

    def e_max():
        from .. import rdp

        return max(4.0 * float(rdp.epsilon(sigma, q, steps, min(0.5, 1e-3 * d))), 1e-3)

    return _lazy_profile(sigma, q, steps, e_max, 1e-4 * d, accuracy, relation, tilt_at=0.25 * d)


def _edge(sigma, q, steps):
    """0 when a run reveals nothing (no step, q = 0, or sigma = inf), 1 when it
    reveals every sampled record (sigma = 0: eps = inf, delta = 1 is the bound), else None."""
    if steps == 0 or q == 0.0 or sigma == math.inf:
        return 0
    return 1 if sigma == 0.0 else None


def _check(sigma, q, steps, runs, method, relation):
    s = float(check_sigma(sigma))
    qq = float(check_q(q))
    t = float(check_steps(steps))
    if not isinstance(runs, RunCount):
        raise TypeError(f"runs must be a RunCount (tuning.poisson(...), tuning.geometric(...), ...); got {runs!r}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
    if relation not in ("add_remove", "replace_one"):
        raise ValueError(f"relation must be 'add_remove' or 'replace_one'; got {relation!r}")
    if method == "rdp" and relation != "add_remove":
        raise ValueError("method='rdp' is for relation='add_remove' (the RDP of one run is)")
    return s, qq, t


def epsilon(sigma, q, steps, delta, runs: RunCount, *, method: str = "best", accuracy: float = 1e-3,
            relation: str = "add_remove") -> float:
    """An upper bound on the epsilon at ``delta`` of a random search over ``runs`` DP-SGD runs.

    The search may release the run with the best score only if the score is a function of that
    run's output (its model and checkpoints, its hyperparameters, public or unprotected data,
    data-independent coins), never of the protected data (training loss, a private validation
    set, gradient norms), and only that run: not K, not the other runs or their scores.  Each
    run draws its other hyperparameters afresh from one data-independent distribution; ties are
    broken at random or by run order (module notes).

    Parameters
    ----------
    sigma, q, steps :
        One run: noise multiplier, Poisson sampling rate, number of steps (scalars).
    delta : float
        Target delta of the whole search, in (0, 1).
    runs : RunCount
        Distribution of the number of runs (:func:`geometric`, :func:`poisson`, ...).
    method : {"best", "rdp", "profile"}
        Which bound (module notes); "best" is the smaller of the two.
    accuracy, relation :
        Passed to the PLD accountant for the run's privacy profile.

    Returns
    -------
    float
        Epsilon (nats), +inf when no bound applies.

    Examples
    --------
    >>> from sgmfast import tuning
    >>> runs = tuning.geometric(mean=10)
    >>> round(tuning.epsilon(1.0, 1.0, 1, 1e-5, runs, method="rdp"), 3)
    8.513
    >>> round(tuning.epsilon(1.0, 1.0, 1, 1e-5, runs), 3)     # the profile bound is smaller here
    7.07
    """
    s, qq, t = _check(sigma, q, steps, runs, method, relation)
    dlt = float(check_delta(delta))
    acc = check_accuracy(accuracy)
    edge = _edge(s, qq, t)
    if edge is not None:
        return 0.0 if edge == 0 else math.inf

    prof = _target_profile(s, qq, t, dlt, runs, acc, relation)
    rdp_ok = method in ("best", "rdp") and relation == "add_remove"
    if method == "best" and rdp_ok and runs.kind == "tnb":
        # the profile bound first (for these K usually the smaller), then the RDP bound only
        # where a floor under it (``_rdp_epsilon_floor``, cheaper) does not exceed that
        floor = _beside("floor", _rdp_epsilon_floor, s, qq, t, dlt, runs)  # (on a helper thread meanwhile)
        out = floor.alongside(lambda: _guarded_profile_epsilon(s, qq, t, dlt, runs, acc, relation, prof, math.inf))
        if not out < math.inf or floor.result() < out:
            out = min(out, _rdp_epsilon(s, qq, t, dlt, runs, prof))
        return out
    out = _rdp_epsilon(s, qq, t, dlt, runs, prof) if rdp_ok else math.inf
    if method in ("best", "profile"):
        out = min(out, _guarded_profile_epsilon(s, qq, t, dlt, runs, acc, relation, prof, out))
    return out


def _guarded_profile_epsilon(s, qq, t, dlt, runs, acc, relation, prof, cap) -> float:
    try:
        return _profile_epsilon(s, qq, t, dlt, runs, acc, relation, prof, cap=cap)
    except (GridFailure, ArithmeticError, MemoryError):
        return math.inf  # no grid for the run's profile (extreme inputs): the RDP bound, or +inf, stands


_epsilon = epsilon  # (``calibrate_sigma``'s argument ``epsilon`` hides the function)


def delta(sigma, q, steps, epsilon, runs: RunCount, *, method: str = "best", accuracy: float = 1e-3,
          relation: str = "add_remove") -> float:
    """An upper bound on the delta at ``epsilon`` of a random search (parameters, and what the
    search may select on, as :func:`epsilon`).

    Examples
    --------
    >>> from sgmfast import tuning
    >>> tuning.delta(1.0, 1.0, 1, 8.514, tuning.geometric(mean=10), method="rdp") <= 1e-5
    True
    """
    s, qq, t = _check(sigma, q, steps, runs, method, relation)
    eps = float(check_epsilon(epsilon))
    acc = check_accuracy(accuracy)
    edge = _edge(s, qq, t)
    if edge is not None:
        return float(edge)
    prof = _lazy_profile(s, qq, t, lambda: max(eps, 1e-3), 1e-12, acc, relation)
    out = 1.0
    if method in ("best", "rdp") and relation == "add_remove":
        out = _rdp_delta(s, qq, t, eps, runs, prof)
    if method in ("best", "profile"):
        try:
            out = min(out, _profile_delta(s, qq, t, eps, runs, prof))
            # again on the grids ``epsilon`` uses near the delta found (so that
            # delta(epsilon(d)) <= d: its e1 may lie far above eps); all are upper bounds
            for d in sorted({_decade(out), _decade(0.9 * out)}) if out < 1.0 else ():
                near = _target_profile(s, qq, t, d, runs, acc, relation)
                out = min(out, _profile_delta(s, qq, t, eps, runs, near))
                if runs.kind == "poisson" and method == "best" and relation == "add_remove":
                    out = min(out, _rdp_delta(s, qq, t, eps, runs, near))  # (Theorem 6 reads the profile)
        except (GridFailure, ArithmeticError, MemoryError):
            pass  # (as in epsilon)
    return out


def calibrate_sigma(epsilon, delta, q, steps, runs: RunCount, *, method: str = "best", accuracy: float = 1e-3,
                    relation: str = "add_remove", rtol: float = 1e-3) -> float:
    """The smallest noise multiplier (within a relative ``rtol``) at which the whole search meets
    (epsilon, delta): ``tuning.epsilon(sigma, ...) <= epsilon`` holds at the returned sigma.

    Examples
    --------
    >>> from sgmfast import tuning
    >>> runs = tuning.geometric(mean=10)
    >>> s = tuning.calibrate_sigma(8.0, 1e-5, 256 / 60000, 14062, runs)
    >>> tuning.epsilon(s, 256 / 60000, 14062, 1e-5, runs) <= 8.0
    True
    """
    from ..calibrate.noise import calibrate_sigma as one_run
    from ..calibrate.roots import _search_log

    eps = float(check_epsilon(epsilon))
    dlt = float(check_delta(delta))
    _check(1.0, q, steps, runs, method, relation)
    tol = float(check_positive(rtol, "rtol"))
    qq, t = float(check_q(q)), float(check_steps(steps))
    if t == 0 or qq == 0.0:
        return 0.0

    def ok(x):
        return epsilon_of(math.exp(x)) <= eps

    def epsilon_of(s):
        return _epsilon(s, qq, t, dlt, runs, method=method, accuracy=accuracy, relation=relation)

    # The search needs more noise than one run: start there; doubling steps, then bisection.
    x = _search_log(ok, math.log(max(float(one_run(eps, dlt, qq, t, accountant="rdp")), 1e-6)), True, tol)
    return math.inf if x is None else math.exp(x)
