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
    From the certified privacy profile delta_Q(eps) of one run (:func:`sgmfast.pld.delta` upper
    bounds) -- the route of Koskela, Redberg & Wang, "Privacy profiles for private selection",
    ICML 2024.  The paper's own theorem could not be consulted when this was written, so the
    bound below is derived here, with its proof; it is not claimed to be theirs.  For DP-SGD it
    is usually the smaller of the two (``bench/README.md``); Poisson K is the exception seen.

Why the profile bound holds.  Let p, p' be the output densities of one run on neighbouring
datasets, F, F' the distribution functions of the score, and phi(z) = E[z^K] the run count's
probability generating function.  The released best run has density a = p phi'(F) (ties broken
by independent randomness, so the score has no atoms), a' = p' phi'(F').  Write
W = log phi'(F) - log phi'(F').  For any e2 >= 0, pointwise,
p e^W - e^eps p' <= (e^e2 p - e^eps p')_+ + p (e^W - e^e2)_+; multiplying by phi'(F') <= phi'(1)
= E[K] and integrating,

    delta_A(eps) <= E[K] e^e2 delta_Q(eps - e2) + E_{y~p}[(phi'(F(y)) - e^e2 phi'(F'(y)))_+].

Under p, U = F(y) is uniform; the profile at e1 bounds F' from below at every threshold:
F' >= l(F) with l(u) = max(0, e^-e1 (u - d1), 1 - e^e1 (1 - u) - d1), d1 = delta_Q(e1) of either
direction (the events {score <= t} and {score > t}).  phi' is non-decreasing, so the second term
is at most I = int_0^1 (phi'(u) - e^e2 phi'(l(u)))_+ du, bounded above here by a Riemann sum
that takes phi' at the right end of each cell and l at the left, with a relative 1e-9 for its
float rounding.  Both terms are minimised over a grid of (e1, e2).

Sampling K: :meth:`RunCount.sample` draws from exactly the distribution that is accounted.

Examples
--------
>>> from sgmfast import tuning
>>> runs = tuning.geometric(mean=10)
>>> one = tuning.epsilon(1.1, 256 / 60000, 14062, 1e-5, tuning.binomial(1, 1.0))   # K = 1
>>> search = tuning.epsilon(1.1, 256 / 60000, 14062, 1e-5, runs)
>>> round(one, 3), round(search, 3)       # MNIST, 60 epochs: one run, then the search
(2.382, 3.938)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._validation import (as_float_array, check_accuracy, check_delta, check_epsilon, check_positive,
                          check_positive_int, check_q, check_sigma, check_steps)

__all__ = ["RunCount", "poisson", "truncated_negative_binomial", "logarithmic", "geometric", "binomial",
           "epsilon", "delta", "calibrate_sigma", "ORDERS"]

#: Rényi orders of the ``"rdp"`` bound (lambda and lambda_hat of Papernot & Steinke)
ORDERS = 1.0 + np.geomspace(1e-3, 1e4, 120)
#: Factors on (order - 1) around a centre order (``_orders``)
_SPREAD = np.geomspace(1.0 / 30.0, 30.0, 60)
#: Orders always tried (cheap ones: log A costs little below ~64)
_LOW = 1.0 + np.geomspace(1e-3, 63.0, 24)
#: Orders added between the neighbours of the best order (and of the best lambda_hat)
_FINE = 40
#: Relative round-up of every RDP value and of the derived terms (their float error is a few ulps)
_REL = 1e-12
#: Cells of the Riemann sum for I (geometric in 1 - u near u = 1, where phi' is largest)
_CELLS = np.concatenate([[0.0], np.geomspace(1e-14, 1.0, 1500)])
#: Points of the run's privacy profile on [0, e_max] that the profile bound reads
_PROFILE_POINTS = 256
#: Largest e1, e2 and grid eps of the profile bound (e^600 is finite; a run whose eps is beyond
#: this gets the RDP bound or +inf)
_E_CAP = 600.0
#: Accuracy of the one PLD query that sharpens the best grid candidate
_REFINE = 1e-3
METHODS = ("best", "rdp", "profile")


@dataclass(frozen=True)
class RunCount:
    """The distribution of the number K of training runs of a random search.

    Make one with :func:`poisson`, :func:`truncated_negative_binomial`, :func:`logarithmic`,
    :func:`geometric` or :func:`binomial`.  ``kind`` is ``"poisson"`` (``mu``),
    ``"tnb"`` (``shape`` eta > -1 and ``gamma`` in (0, 1); Papernot & Steinke, Definition 1) or
    ``"binomial"`` (``n``, ``p``).
    """

    kind: str
    mu: float = math.nan
    shape: float = math.nan
    gamma: float = math.nan
    n: int = 0
    p: float = math.nan

    @property
    def mean(self) -> float:
        """E[K]."""
        if self.kind == "poisson":
            return self.mu
        if self.kind == "binomial":
            return self.n * self.p
        return _tnb_mean(self.shape, self.gamma)

    def log_dpgf(self, x):
        """log phi'(x) for x in [0, 1] (array), phi(x) = E[x^K]."""
        x = np.asarray(x, dtype=np.float64)
        if self.kind == "poisson":
            return math.log(self.mu) + self.mu * (x - 1.0)
        if self.kind == "binomial":
            if self.n == 1:
                return np.full(x.shape, math.log(self.p))
            with np.errstate(divide="ignore"):
                return math.log(self.n * self.p) + (self.n - 1) * np.log1p(-self.p * (1.0 - x))
        eta, g = self.shape, self.gamma
        c = 1.0 - g
        if eta == 0.0:
            const = math.log(c) - math.log(-math.log(g))
        else:
            const = math.log(c) + math.log(eta / math.expm1(-eta * math.log(g)))
        # 1 - c x written as gamma + c (1 - x): exact near x = 1 even when gamma is below an ulp of 1
        return const - (eta + 1.0) * np.log(g + c * (1.0 - x))

    def sample(self, rng=None) -> int:
        """Draw K (numpy ``Generator`` or seed; by inversion for the truncated negative binomial)."""
        rng = np.random.default_rng(rng)
        if self.kind == "poisson":
            return int(rng.poisson(self.mu))
        if self.kind == "binomial":
            return int(rng.binomial(self.n, self.p))
        u = rng.random()
        eta, g = self.shape, self.gamma
        k = 1
        pk = math.exp(float(self.log_dpgf(0.0)))  # P[K = 1] = phi'(0)
        cdf = pk
        while u > cdf and pk > 0.0:
            pk *= (1.0 - g) * (k + eta) / (k + 1)
            k += 1
            cdf += pk
        return k


def _tnb_mean(eta: float, gamma: float) -> float:
    if eta == 0.0:
        return (1.0 / gamma - 1.0) / math.log(1.0 / gamma)
    return eta * (1.0 - gamma) / (gamma * -math.expm1(eta * math.log(gamma)))


def poisson(mean: float) -> RunCount:
    """K ~ Poisson(mean) (K = 0 releases nothing); ``mean`` >= 1 (Papernot & Steinke, Theorem 6)."""
    mu = float(check_positive(mean, "mean"))
    if not 1.0 <= mu < math.inf:
        raise ValueError(f"mean (of the Poisson number of runs) must be finite and >= 1; got {mean!r}")
    return RunCount("poisson", mu=mu)


def truncated_negative_binomial(shape: float, *, gamma: float | None = None, mean: float | None = None) -> RunCount:
    """K with P[K = k] proportional to (1 - gamma)^k prod_{l<k} (l + shape)/(l + 1), k >= 1.

    Give ``gamma`` in (0, 1), or ``mean`` > 1 (gamma is then solved for, and the returned
    object carries the gamma to sample with).  ``shape`` > -1: 0 is the logarithmic
    distribution, 1 the geometric; smaller shapes cost less privacy, larger ones concentrate K.
    """
    eta = float(as_float_array(shape, "shape"))
    if not -1.0 < eta < math.inf:
        raise ValueError(f"shape (eta) must be > -1 and finite; got {shape!r}")
    if (gamma is None) == (mean is None):
        raise ValueError("give exactly one of gamma and mean")
    if gamma is not None:
        g = float(as_float_array(gamma, "gamma"))
        if not 0.0 < g < 1.0:
            raise ValueError(f"gamma must be in (0, 1); got {gamma!r}")
        return RunCount("tnb", shape=eta, gamma=g)
    m = float(as_float_array(mean, "mean"))
    if not 1.0 < m < 1e12:
        raise ValueError(f"mean (number of runs) must be in (1, 1e12); got {mean!r}")
    lo, hi = 1e-300, 1.0 - 1e-16  # mean decreases in gamma
    for _ in range(200):
        mid = math.sqrt(lo * hi) if hi < 0.5 else 0.5 * (lo + hi)
        if _tnb_mean(eta, mid) > m:
            lo = mid
        else:
            hi = mid
    return RunCount("tnb", shape=eta, gamma=hi)


def logarithmic(*, gamma: float | None = None, mean: float | None = None) -> RunCount:
    """The truncated negative binomial with shape 0."""
    return truncated_negative_binomial(0.0, gamma=gamma, mean=mean)


def geometric(*, gamma: float | None = None, mean: float | None = None) -> RunCount:
    """K ~ Geometric(gamma) on {1, 2, ...}: the truncated negative binomial with shape 1."""
    return truncated_negative_binomial(1.0, gamma=gamma, mean=mean)


def binomial(n: int, p: float) -> RunCount:
    """K ~ Binomial(n, p) (Koskela et al.'s concentrated choice); ``binomial(1, 1.0)`` is one run."""
    nn = check_positive_int(n, "n")
    pp = float(as_float_array(p, "p"))
    if not 0.0 < pp <= 1.0:
        raise ValueError(f"p must be in (0, 1]; got {p!r}")
    return RunCount("binomial", n=nn, p=pp)


# ------------------------------------------------------------------------------------------------
# The RDP bound (Papernot & Steinke 2022)

def _tuned_rdp(lam, base, runs: RunCount, prof) -> np.ndarray:
    """RDP of the search at orders ``lam`` (increasing) from one run's RDP ``base`` there (inf
    where no theorem applies), made non-decreasing."""
    if runs.kind == "tnb":
        eta, g = runs.shape, runs.gamma
        c = (1.0 + eta) * float(np.min((1.0 - 1.0 / lam) * base + math.log(1.0 / g) / lam))  # Theorem 2
        out = base + c + math.log(runs.mean) / (lam - 1.0)
    elif runs.kind == "poisson":
        eps_hat = np.log1p(1.0 / (lam - 1.0)) * (1.0 - _REL)  # Theorem 6: e^eps_hat <= 1 + 1/(lambda - 1)
        d_hat = prof().delta_at(eps_hat)
        out = base + runs.mu * d_hat + math.log(runs.mu) / (lam - 1.0)
    else:
        return np.full(lam.shape, math.inf)
    out = out * (1.0 + _REL) + 1e-300
    return np.minimum.accumulate(out[::-1])[::-1]  # D_lambda is non-decreasing in lambda


def _rdp_best(sigma, q, steps, runs, prof, target, mode):
    """Best (value, order) of the converted tuned RDP (mode 0: eps at log delta ``target``, 1: log
    delta at eps ``target``): ``ORDERS``, then a finer grid around the best order and around the
    best lambda_hat of Theorem 2 (every order is a valid choice; the grid only costs tightness)."""
    from . import rdp
    from ._kernels import rdp as _k

    if runs.kind == "binomial":
        return math.inf, math.nan
    lam = _orders(sigma, q, steps, runs, target, mode)
    base = rdp.rdp(sigma, q, steps, lam)
    curve = _tuned_rdp(lam, base, runs, prof)
    _, a = _k.best_of_orders(curve, lam, target, mode)
    extra = [_around(lam, float(a))] if math.isfinite(a) else []
    if runs.kind == "tnb":
        j = int(np.argmin((1.0 - 1.0 / lam) * base + math.log(1.0 / runs.gamma) / lam))
        extra.append(_around(lam, float(lam[j])))
    if extra:
        new = np.concatenate(extra)
        lam = np.concatenate([lam, new])
        base = np.concatenate([base, rdp.rdp(sigma, q, steps, new)])
        order = np.argsort(lam)
        lam, base = lam[order], base[order]
        curve = _tuned_rdp(lam, base, runs, prof)
    v, a = _k.best_of_orders(curve, lam, target, mode)
    return float(v), float(a)


def _orders(sigma, q, steps, runs, target, mode):
    """The orders to try: ``ORDERS`` scaled around the run's own best order for the target and,
    for Theorem 2, around its best order at delta = gamma (where lambda_hat's term is smallest).
    log A at large orders is slow for small sigma (seconds each at sigma = 0.01), so the grid
    stays near where the optimum can be."""
    from . import rdp

    if mode == 0:
        centres = [rdp.epsilon(sigma, q, steps, math.exp(target), return_order=True)[1]]
    else:
        centres = [rdp.delta(sigma, q, steps, target, return_order=True)[1]]
    if runs.kind == "tnb":
        centres.append(rdp.epsilon(sigma, q, steps, min(runs.gamma, 0.5), return_order=True)[1])
    grids = [1.0 + (c - 1.0) * _SPREAD for c in centres if math.isfinite(c) and c > 1.0]
    lam = np.unique(np.concatenate(grids + [_LOW]))
    lam = lam[(lam >= ORDERS[0]) & (lam <= ORDERS[-1])]
    return lam


def _around(lam, a):
    """_FINE orders strictly between the grid neighbours of order a."""
    j = int(np.searchsorted(lam, a))
    lo, hi = lam[max(j - 1, 0)], lam[min(j + 1, lam.size - 1)]
    return np.geomspace(lo - 1.0, hi - 1.0, _FINE + 2)[1:-1] + 1.0


def _rdp_epsilon(sigma, q, steps, dlt, runs, prof) -> float:
    return _rdp_best(sigma, q, steps, runs, prof, math.log(dlt), 0)[0]


def _rdp_delta(sigma, q, steps, eps, runs, prof) -> float:
    v = _rdp_best(sigma, q, steps, runs, prof, eps, 1)[0]
    return 1.0 if not v < 0.0 else math.exp(v)


# ------------------------------------------------------------------------------------------------
# The profile bound (module notes)

def _excess(runs: RunCount, e1: float, d1: float, e2: np.ndarray) -> np.ndarray:
    """Upper bounds on I(e1, e2) = int_0^1 (phi'(u) - e^e2 phi'(l(u)))_+ du for each e2."""
    s = _CELLS  # 1 - u at the cell edges, increasing
    u = 1.0 - s
    # (e1 <= _E_CAP, so e^e1 is finite)
    ell = np.maximum.reduce([np.zeros_like(u), math.exp(-e1) * (u - d1), 1.0 - math.exp(e1) * s - d1])
    ell = np.clip(ell, 0.0, 1.0)
    hi = np.exp(runs.log_dpgf(u[:-1]))  # right end of [u_{i+1}, u_i] for phi' ...
    lo = np.exp(runs.log_dpgf(ell[1:]))  # ... left end for l
    width = np.diff(s)
    from ._kernels.tuning import excess

    scale = np.exp(np.asarray(e2, dtype=np.float64))
    out = np.empty(scale.size)
    excess(hi, lo, width, scale, out)
    # each cell's float error is a few ulps of phi' there: 1e-15 of the whole sum of phi' covers it
    return out * (1.0 + 1e-9) + 1e-15 * float(hi @ width)


class _Profile:
    """The run's certified privacy profile on a grid: ``d[j]`` >= delta_Q(e[j]) (either direction),
    made non-increasing (the true profile is), so that delta_Q(x) <= d[j] for every x >= e[j]."""

    def __init__(self, sigma, q, steps, e_max, goal, accuracy, relation):
        from .pld.tradeoff import profile_upper

        self.relation = relation
        self.e = np.linspace(0.0, min(e_max, _E_CAP), _PROFILE_POINTS)
        d = profile_upper(sigma, q, int(steps), self.e, relation, accuracy, goal)
        self.d = np.minimum(np.minimum.accumulate(d), 1.0)

    def delta_at(self, x):
        """Upper bounds on delta_Q(x) (array x >= 0): the value at the grid point at or below x."""
        j = np.searchsorted(self.e, np.asarray(x, dtype=np.float64), side="right") - 1
        return np.where(j >= 0, self.d[np.maximum(j, 0)], 1.0)

    def epsilon_at(self, t):
        """Upper bounds on eps_Q(t) (array t): the first grid point whose delta is <= t, else inf."""
        t = np.asarray(t, dtype=np.float64)
        j = np.searchsorted(-self.d, -t, side="left")  # first j with d[j] <= t (d non-increasing)
        return np.where(j < self.e.size, self.e[np.minimum(j, self.e.size - 1)], math.inf)


def _coarse_fine(at, n: int, every: int = 8):
    """min over j of at(j) (a (value, info) pair): every ``every``-th j, then all j near the best."""
    best, info, jb = math.inf, None, 0
    for j in range(0, n, every):
        v, i = at(j)
        if v < best:
            best, info, jb = v, i, j
    for j in range(max(jb - every + 1, 0), min(jb + every, n)):
        if j % every:
            v, i = at(j)
            if v < best:
                best, info = v, i
    return best, info


def _profile_epsilon(sigma, q, steps, dlt, runs, accuracy, relation, prof) -> float:
    from . import pld

    prof = prof()
    e2 = prof.e
    log_m = float(runs.log_dpgf(1.0))  # log E[K]

    def at(j):
        """(best eps, (e2, target)) over e2 for e1 = e[j]."""
        rest = dlt - _excess(runs, float(prof.e[j]), float(prof.d[j]), e2 * (1.0 - _REL))
        ok = rest > 0.0
        if not ok.any():
            return math.inf, None
        t = rest[ok] * np.exp(-e2[ok] * (1.0 + _REL) - log_m) * (1.0 - 1e-12)
        tot = e2[ok] * (1.0 + _REL) + np.where(t >= 1.0, 0.0, prof.epsilon_at(t))
        k = int(np.argmin(tot))
        return float(tot[k]), (float(e2[ok][k] * (1.0 + _REL)), float(t[k]))

    best, best_t = _coarse_fine(at, prof.e.size)
    if best_t is not None and best_t[1] < 1.0:
        # the grid's eps_Q at the best target, sharpened by one PLD query
        e_q = float(pld.epsilon(sigma, q, steps, best_t[1], accuracy=_REFINE, relation=relation).upper)
        best = min(best, best_t[0] + e_q)
    return best


#: splits of eps whose delta_Q ``_profile_delta`` sharpens by a PLD query
SHARPEN = 4


def _profile_delta(sigma, q, steps, eps, runs, prof) -> float:
    from . import pld

    prof = prof()
    # e2 such that eps - e2 is a grid point, and the grid points themselves (the e2 that
    # ``epsilon`` tries: so that delta(epsilon(d)) <= d can hold)
    e2_grid = np.unique(np.concatenate([eps - prof.e[(prof.e <= eps) & (prof.e >= eps - _E_CAP)],
                                        prof.e[prof.e <= eps]]))
    if e2_grid.size == 0:
        return 1.0
    d_rest = prof.delta_at(eps - e2_grid)
    e2 = np.maximum(e2_grid * (1.0 + _REL), 0.0)  # rounded up in e^e2 ...
    e2_in = e2_grid * (1.0 - _REL)  # ... and down in I (which falls as e2 grows)
    m = runs.mean * (1.0 + _REL)

    def at(j):
        excess = _excess(runs, float(prof.e[j]), float(prof.d[j]), e2_in)
        tot = m * np.exp(e2) * d_rest + excess
        ks = np.argsort(tot)[:SHARPEN]
        return float(tot[ks[0]]), [(float(e2_grid[k]), float(e2[k]), float(excess[k])) for k in ks]

    best, args = _coarse_fine(at, prof.e.size)
    best = min(best, 1.0)
    # delta_Q at the best few splits by one sharper PLD query each instead of the grid's (the
    # grid's best split need not be the one ``epsilon`` sharpened: SHARPEN of them make the
    # round trip delta(epsilon(d)) <= d hold to the query's accuracy)
    if args is not None:
        xs = np.array([max(eps - a[0], 0.0) for a in args])
        d_q = pld.delta(sigma, q, steps, xs, accuracy=_REFINE, relation=prof.relation).upper
        best = min(best, min(m * math.exp(a[1]) * float(d) + a[2] for a, d in zip(args, d_q)))
    return best


# ------------------------------------------------------------------------------------------------
# Public API

def _lazy_profile(sigma, q, steps, e_max, goal, accuracy, relation):
    """A function returning the run's :class:`_Profile`, computed on first use only."""
    box = []

    def get():
        if not box:
            box.append(_Profile(sigma, q, steps, e_max(), goal, accuracy, relation))
        return box[0]

    return get


def _decade(d: float) -> float:
    """The power of ten at or below d: the profile grid depends on delta only through it, so
    ``epsilon`` at d and ``delta`` at the eps it returns read the same grid."""
    return 10.0 ** math.floor(math.log10(min(max(d, 1e-300), 0.5)))


def _target_profile(sigma, q, steps, dlt, runs, accuracy, relation):
    """The lazy profile for a target delta: up to 4x RDP's eps at 1e-3 delta / E[K], the PLD tail
    cut at 1e-4 delta / E[K] (delta taken to its decade)."""
    d = _decade(dlt) / max(runs.mean, 1.0)

    def e_max():
        from . import rdp

        return max(4.0 * float(rdp.epsilon(sigma, q, steps, min(0.5, 1e-3 * d))), 1e-3)

    return _lazy_profile(sigma, q, steps, e_max, 1e-4 * d, accuracy, relation)


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
    7.085
    """
    s, qq, t = _check(sigma, q, steps, runs, method, relation)
    dlt = float(check_delta(delta))
    acc = check_accuracy(accuracy)
    edge = _edge(s, qq, t)
    if edge is not None:
        return 0.0 if edge == 0 else math.inf

    prof = _target_profile(s, qq, t, dlt, runs, acc, relation)
    out = math.inf
    if method in ("best", "rdp") and relation == "add_remove":
        out = _rdp_epsilon(s, qq, t, dlt, runs, prof)
    if method in ("best", "profile"):
        try:
            out = min(out, _profile_epsilon(s, qq, t, dlt, runs, acc, relation, prof))
        except (ValueError, ArithmeticError, MemoryError):
            pass  # no grid for the run's profile (extreme inputs): the RDP bound, or +inf, stands
    return out


def delta(sigma, q, steps, epsilon, runs: RunCount, *, method: str = "best", accuracy: float = 1e-3,
          relation: str = "add_remove") -> float:
    """An upper bound on the delta at ``epsilon`` of a random search (parameters as :func:`epsilon`).

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
                out = min(out, _profile_delta(s, qq, t, eps, runs, _target_profile(s, qq, t, d, runs, acc, relation)))
        except (ValueError, ArithmeticError, MemoryError):
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
    from .calibrate.noise import _search_log, calibrate_sigma as one_run

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
        return globals()["epsilon"](s, qq, t, dlt, runs, method=method, accuracy=accuracy, relation=relation)

    # The search needs more noise than one run: start there; doubling steps, then bisection.
    x = _search_log(ok, math.log(max(float(one_run(eps, dlt, qq, t, accountant="rdp")), 1e-6)), True, tol)
    return math.inf if x is None else math.exp(x)
