"""How many runs a random search trains: the distribution of K (:class:`RunCount`) and the
distributions it is made from."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .._validation import as_float_array, check_positive, check_positive_int
from ._rounding import _F, _U


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
            const, e_const = self._tnb_const
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

    @cached_property
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
    if not _tnb_mean(eta, lo) > m:  # (shape near -1: the mean grows like gamma^(-1 - shape))
        raise ValueError(f"mean {m:g} is out of reach for shape {eta:g}: its largest mean is "
                         f"{_tnb_mean(eta, lo):.6g} (at gamma 1e-300); raise shape or lower mean")
    for _ in range(200):
        # (the geometric midpoint; in logs where lo * hi would underflow -- it reached 0, and log(0)
        # raised, at shape -0.989, mean 66)
        if hi >= 0.5:
            mid = 0.5 * (lo + hi)
        else:
            mid = math.sqrt(lo * hi) if lo * hi > 1e-290 else math.exp(0.5 * (math.log(lo) + math.log(hi)))
        if _tnb_mean(eta, mid) > m:
            if mid == lo:
                break  # (a fixed point: every later step is this one; ~65 steps instead of 200)
            lo = mid
        else:
            if mid == hi:
                break
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
