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
left end bounds I from above.  Both terms are minimised over a grid of (e1, e2); D and D'
swapped give the same bound (delta_Q covers both directions).

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
(2.382, 3.938)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._failures import GridFailure
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
#: Unit roundoff of float64 (half an ulp of 1)
_U = 2.0 ** -53
#: Relative error assumed of one call of exp, expm1, log or log1p (math or numpy): 8 ulps = 16 u.
#: glibc documents 1-2 ulps for these, numpy's SIMD versions 4; the one premise of the rounding
#: charge (module notes, (d)) that is not proved here
_F = 16.0 * _U
#: Relative round-up of the computed 1 - l(u) (each of its forms is within _F + 3 u; module notes)
_GAP = 4.0 * _F
#: Below this, exp's result may be subnormal (no relative accuracy): phi' is then taken as 0
#: (rounding down) or as twice this (rounding up)
_TINY = 2.0 ** -1000
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

    def _log_dpgf_gap(self, t):
        """``(L, E)``: L = log phi'(1 - t) computed from t = 1 - x itself (float array in [0, 1],
        taken as exact: 1 - t is never formed), and E >= |L - log phi'(1 - t)|, the error of the
        float evaluation (module notes, (d)).

        E is a first-order error analysis written out: each rounded quantity's magnitude times its
        relative error (u = ``_U`` per arithmetic operation, ``_F`` per exp/expm1/log/log1p call),
        summed, then doubled -- the doubling covers the second-order terms (all below 1e-10 of the
        first-order ones here) and the rounding of E itself (a few u of E).
        """
        t = np.asarray(t, dtype=np.float64)
        u, f = _U, _F
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if self.kind == "poisson":
                # L = log mu - mu t: log mu within f |log mu|, mu t within u mu t, the difference u |L|
                a = math.log(self.mu)
                b = self.mu * t
                big = a - b
                err = 2.0 * (f * abs(a) + u * b + u * np.abs(big))
                return big, err
            if self.kind == "binomial":
                a = math.log(self.n * self.p)  # n p within u (n < 2^53 is exact): log within 1.01 u + f |a|
                if self.n == 1:
                    return np.full(t.shape, a), np.full(t.shape, 2.0 * (1.01 * u + f * abs(a)))
                z = self.p * t  # p t (1 + theta), |theta| <= u
                lam = np.log1p(-z)
                big = a + (self.n - 1) * lam
                # |log1p(-z) - log1p(-p t)| <= |z - p t| / min(1 - zeta) over zeta between them
                # <= 1.01 u z / (1 - z (1 + 1.01 u)); m below is that denominator to within a
                # factor 1 + 2u (the doubling covers it)
                m = 1.0 - z * (1.0 + 4.0 * u)
                ratio = np.where(m > 0.0, z / np.where(m > 0.0, m, 1.0), np.inf)
                err = 2.0 * (1.01 * u + f * abs(a)
                             + (self.n - 1) * (1.01 * u * ratio + (f + 2.0 * u) * np.abs(lam)) + u * np.abs(big))
                # p t = 1 exactly (p = t = 1, the only way z can be 1): phi'(0) = 0 = e^L exactly
                err = np.where(z == 1.0, 0.0, err)
                return big, err
            const, e_const = self._tnb_const()
            g, c = self.gamma, 1.0 - self.gamma
            # a = g + c t: c = 1 - g within u, c t within u, the sum of two non-negative terms within
            # u: a within 3.01 u relative (1.01 u + f |log a| after the log); eta + 1 within u and the
            # product within u: (eta + 1) log a within (eta + 1)(3.1 u + (1.02 f + 2.1 u) |log a|);
            # (the tiny term: c t below the normal range errs by 2^-1075 absolute, relative to a >= g)
            a = g + c * t
            lam = np.log(a)
            big = const - (self.shape + 1.0) * lam
            tiny = 2.0 ** -1074 / a
            err = e_const + 2.0 * ((self.shape + 1.0) * (3.1 * u + (1.02 * f + 2.1 * u) * np.abs(lam) + tiny)
                                   + u * np.abs(big))
            return big, err

    def _tnb_const(self):
        """(C, E_C): log phi'(x) = C - (eta + 1) log(1 - (1 - gamma) x) for the truncated negative
        binomial, and E_C >= the float error of C (doubled first-order analysis, as above)."""
        u, f = _U, _F
        eta, g = self.shape, self.gamma
        c = 1.0 - g  # within u: log c within 1.01 u + f |log c|
        lc = math.log(c)
        if eta == 0.0:
            # C = log c - log(-log g): -log g within f, its log within 1.01 f + f |log(-log g)|
            lg = math.log(-math.log(g))
            const = lc - lg
            err = 2.0 * (1.01 * u + f * abs(lc) + 1.01 * f + f * abs(lg) + u * abs(const))
            return const, err
        # C = log c + log(eta / expm1(x)), x = -eta log g: x within 1.01 (f + u) relative; expm1's
        # logarithmic derivative e^xi / |expm1(xi)| is at most 1 + 1/|xi|, so log expm1(x) moves by
        # at most 1.03 (f + u)(|x| + 1.01); then f for expm1 itself, u for the division, f |log of
        # the ratio| for the log and u |C| for the sum
        x = -eta * math.log(g)
        lr = math.log(eta / math.expm1(x))
        const = lc + lr
        err = 2.0 * (1.01 * u + f * abs(lc) + 1.03 * (f + u) * (abs(x) + 1.01) + 1.01 * f + 1.01 * u
                     + f * abs(lr) + u * abs(const))
        return const, err

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

def _exp_up(big, err):
    """Floats >= e^L for every L within ``err`` of ``big`` (arrays; module notes, (d)).

    e^(big + err) is e^x with x = fl(big + err) off by at most 1.01 u |x| in the exponent, and
    exp(x) is within _F of e^x: the factor 1 + 4 u |x| + 4 _F covers both and its own two
    roundings ((1 + 4u|x| + 4F - u)(1 - u) >= (1 + 1.02u|x|)(1 + 1.01F)).  Subnormal results
    carry no relative accuracy: they become 2 _TINY."""
    with np.errstate(over="ignore", invalid="ignore"):
        x = big + err
        e = np.exp(x) * (1.0 + 4.0 * _U * np.abs(x) + 4.0 * _F)
    e = np.where(x == -np.inf, 0.0, e)  # (phi' = 0 exactly: 0 * inf above)
    e = np.where(e < _TINY, 2.0 * _TINY, e)
    return np.where(np.isnan(x), np.inf, e)  # (-inf + inf: nothing known)


def _exp_down(big, err):
    """Floats <= e^L for every L within ``err`` of ``big``: the mirror of :func:`_exp_up`;
    subnormal results become 0."""
    with np.errstate(over="ignore", invalid="ignore"):
        x = big - err
        e = np.exp(x) * np.maximum(1.0 - 4.0 * _U * np.abs(x) - 4.0 * _F, 0.0)
    return np.where((e < _TINY) | np.isnan(x), 0.0, e)


def _mean_up(runs: RunCount) -> float:
    """A float >= E[K] = phi'(1)."""
    return float(_exp_up(*runs._log_dpgf_gap(np.zeros(1)))[0])


def _two_diff(a, b):
    """(r, err) with r = fl(a - b) and a - b = r + err exactly (Knuth's two-sum; finite inputs)."""
    r = a - b
    bv = a - r
    av = r + bv
    return r, (a - av) + (bv - b)


def _sum_up(a, b):
    """fl(a + b), or the next float up when that was rounded down: a float >= a + b (a, b >= 0;
    inf stays inf)."""
    with np.errstate(invalid="ignore"):
        r, err = _two_diff(a, -b)
        return np.where(np.isfinite(r) & (err > 0.0), np.nextafter(r, np.inf), r)


def _excess(runs: RunCount, e1: float, d1: float, e2: np.ndarray) -> np.ndarray:
    """Upper bounds on I(e1, e2) = int_0^1 (phi'(u) - e^e2 phi'(l(u)))_+ du for each e2 (module
    notes: (c) the Riemann sum, (d) its rounding)."""
    s = _CELLS  # 1 - u at the cell edges, increasing; cell i is [1 - s[i+1], 1 - s[i]] exactly
    # phi' at each cell's right end u_i = 1 - s_i, from s_i itself, rounded up
    hi = _exp_up(*runs._log_dpgf_gap(s[:-1]))
    # 1 - l(u) at each cell's left end, as sums of non-negative terms (no cancellation, each form
    # within _F + 3u), rounded up: the l used is at most the true l, and phi'(l) too
    # (e1 <= _E_CAP, so e^e1 is finite; s >= 1e-14 here, so e^-e1 (s + d1) >= 2.6e-275 and
    # e^e1 s are normal numbers, where the relative error bounds hold)
    sl = s[1:]
    gap = np.minimum(-math.expm1(-e1) + math.exp(-e1) * (sl + d1), math.exp(e1) * sl + d1)
    gap = np.minimum(gap * (1.0 + _GAP), 1.0)
    lo = _exp_down(*runs._log_dpgf_gap(gap))  # phi'(l) at each cell's left end, rounded down
    width = np.diff(s)  # exact: s[i+1] <= 2 s[i] (Sterbenz), and s[1] - 0
    from ._kernels.tuning import excess

    # e^e2 rounded down (exp within _F; the product's rounding is covered by 2 _F - _F)
    scale = np.exp(np.asarray(e2, dtype=np.float64)) * (1.0 - 2.0 * _F)
    out = np.empty(scale.size)
    excess(hi, lo, width, scale, out)
    # the kernel's arithmetic: each cell's exact (hi - scale lo)_+ is at most its computed value
    # over 1 - u plus u hi; the products and the 1501-term sum err by at most (n + 2) u = 1.7e-13
    # relative: the relative 1e-9 covers the first part, 1e-15 of the sum of hi (dot product
    # within 1.7e-13) the u hi part, and both leave >= 2u of slack for the caller's last addition
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
    big, err = runs._log_dpgf_gap(np.zeros(1))
    log_m = float(big[0] + err[0])  # >= log E[K] (its rounding: within the 1e-12 below)

    def at(j):
        """(best eps, (e2, target)) over e2 for e1 = e[j]."""
        rest = dlt - _excess(runs, float(prof.e[j]), float(prof.d[j]), e2 * (1.0 - _REL))
        ok = rest > 0.0
        if not ok.any():
            return math.inf, None
        # the split is e2* = fl(e2 (1 + _REL)): I is read at fl(e2 (1 - _REL)) <= e2*, and t <=
        # (delta - I) / (E[K] e^e2*) -- the 1e-12 covers exp's _F, three roundings and the
        # exponent's (u |e2* + log E[K]| <= 2e-13 while E[K] < e^1000)
        t = rest[ok] * np.exp(-e2[ok] * (1.0 + _REL) - log_m) * (1.0 - 1e-12)
        # eps = e2* + eps_Q(t), the sum rounded up: delta_Q is read at or below eps - e2*
        tot = _sum_up(e2[ok] * (1.0 + _REL), np.where(t >= 1.0, 0.0, prof.epsilon_at(t)))
        k = int(np.argmin(tot))
        return float(tot[k]), (float(e2[ok][k] * (1.0 + _REL)), float(t[k]))

    best, best_t = _coarse_fine(at, prof.e.size)
    if best_t is not None and best_t[1] < 1.0:
        # the grid's eps_Q at the best target, sharpened by one PLD query
        e_q = float(pld.epsilon(sigma, q, steps, best_t[1], accuracy=_REFINE, relation=relation).upper)
        best = min(best, float(_sum_up(best_t[0], e_q)))
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
    # delta_Q is read at x = fl(eps - e2_grid): the split charged is e2* = eps - x exactly (an
    # exact two-sum gives its float neighbours), rounded up in e^e2 ... and down in I (which
    # falls as e2 grows); e2* = e2_grid but for the rounding of x
    x = eps - e2_grid
    d_rest = prof.delta_at(x)
    r, err = _two_diff(eps, x)
    e2 = np.maximum(np.maximum(e2_grid * (1.0 + _REL), np.where(err > 0.0, np.nextafter(r, np.inf), r)), 0.0)
    e2_in = np.minimum(e2_grid * (1.0 - _REL), np.where(err < 0.0, np.nextafter(r, -np.inf), r))
    # E[K] rounded up; the 1 + _REL covers exp's _F and the products (and the final sum, with the
    # slack ``_excess`` leaves)
    m = _mean_up(runs) * (1.0 + _REL)

    def at(j):
        excess = _excess(runs, float(prof.e[j]), float(prof.d[j]), e2_in)
        tot = m * np.exp(e2) * d_rest + excess
        ks = np.argsort(tot)[:SHARPEN]
        return float(tot[ks[0]]), [(float(x[k]), float(e2[k]), float(excess[k])) for k in ks]

    best, args = _coarse_fine(at, prof.e.size)
    best = min(best, 1.0)
    # delta_Q at the best few splits by one sharper PLD query each instead of the grid's (the
    # grid's best split need not be the one ``epsilon`` sharpened: SHARPEN of them make the
    # round trip delta(epsilon(d)) <= d hold to the query's accuracy)
    if args is not None:
        xs = np.array([max(a[0], 0.0) for a in args])  # (the same x: the same split e2*)
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
        except (GridFailure, ArithmeticError, MemoryError):
            pass  # no grid for the run's profile (extreme inputs): the RDP bound, or +inf, stands
    return out


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
                out = min(out, _profile_delta(s, qq, t, eps, runs, _target_profile(s, qq, t, d, runs, acc, relation)))
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
