"""Exact privacy profile of one best-of-K Gaussian search: a lower bound for ``sgmfast.tuning``.

The search: draw K from a run-count distribution fixed in advance, run the Gaussian mechanism K
times independently, release the output with the largest score, the score being the output
itself.  One run is T steps of the Gaussian mechanism with sensitivity 1 and noise sigma, which
is exactly mu-GDP with mu = sqrt(T) / sigma: on neighbouring datasets its sufficient statistic
(the sum of the T noisy answers, divided by sigma sqrt(T)) is N(mu, 1) against N(0, 1), and
given that statistic the rest of the output has the same law on both, so scoring and releasing
the statistic is the whole story (any score that is a function of the statistic is a function
of the output).  This is ``sgmfast.tuning`` with q = 1: a run with (sigma, q = 1, steps = T).

The released value's law, with Phi the normal distribution function and phi(z) = E[z^K] the
probability generating function of K: P[max <= x] = phi(Phi(x - m)) (m = mu or 0; K = 0 releases
nothing, with the same probability phi(0) on both datasets, which adds nothing to the divergence
at eps >= 0), density a_m(x) = phi'(Phi(x - m)) N(x - m).  The hockey-stick divergence

    delta_fwd(eps) = int (a_mu - e^eps a_0)_+,   delta_bwd(eps) = int (a_0 - e^eps a_mu)_+

is computed exactly, without quadrature: the log likelihood ratio
f(x) = log a_mu(x) - log a_0(x) = mu x - mu^2/2 + L(Sbar(x - mu)) - L(Sbar(x)), L(s) = log
phi'(1 - s), is not monotone (the phi' factor pulls the other way), so the set {f > eps} (or
{f < -eps}) is a union of intervals; their end points are the roots of f = +-eps.  As
f' >= mu - max|L'| N(x) (N the normal density), f is increasing wherever N(x) < mu / max|L'|,
i.e. for |x| > x0; the roots are found by scanning f on a grid of spacing 0.01 on
[-x0 - 1, x0 + 1] and at +-(x0 + 1 + 2^k), k < 13, outside (where f is monotone, a bracket is
all a root needs; the scan checks that f - level has the signs of the monotone tails at both
ends), and each sign change is refined by the Illinois method to 1e-35.  Each interval's mass
is a difference of the head phi(Phi(x - m)) - phi(0) or of the tail 1 - phi(1 - Sbar(x - m)),
written in cancellation-free closed forms (expm1, log1p).  eps(delta) is the root in eps of
log max(delta_fwd, delta_bwd)(eps) = log delta (Illinois on a bracket, 1e-35).

Self-checks (the script exits with status 1 if one fails):
* K = 1 (phi(z) = z) through the same code against the closed form of mu-GDP,
  Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2), at every mu and eps = 0.5, 1, 2, 4: 1e-30;
* the masses: every third row's delta_fwd and delta_bwd again by tanh-sinh quadrature of the
  density difference between the roots (each piece scaled to O(1)): 1e-25 relative;
* the scan: a grid 4x finer (spacing 0.0025) on every (mu, run count) gives the same deltas at
  each row's eps to 1e-30 relative;
* each eps(delta) row gives back its delta to 1e-30 relative.

Run counts (the parametrisations of ``sgmfast.tuning``, evaluated at the float value written in
the table): Poisson(mean), geometric (truncated negative binomial with shape 1, gamma = 1/mean)
and logarithmic (shape 0, gamma solved here for the mean and rounded to a float; the exact mean
at that float is written), means 2, 10 and 50.  sigma in {0.7, 1, 2}, steps in {1, 4, 16}:
mu in {0.5, 1, 2, 4} and 1/0.7, 2/0.7, 4/0.7.  Rows: delta -> eps at delta 1e-3 and 1e-6,
eps -> delta at eps 1 and 4 (delta = max of the two directions; both are written).

Needs only mpmath (never imports sgmfast).  Run ``python tests/reference/make_tuning_best_of_k.py``
(about 3 min on one core); it rewrites ``tuning_best_of_k.csv`` beside it.
"""

import csv
import sys
from pathlib import Path

import mpmath as mp
from mpmath import mpf

DPS = 40
SIGMAS = (0.7, 1.0, 2.0)
STEPS = (1, 4, 16)
MEANS = (2, 10, 50)
DELTAS = (1e-3, 1e-6)
EPSILONS = (1.0, 4.0)
H_DENSE, CHECK_REFINE = mpf("0.01"), 4


class RunCount:
    """phi'(v) in log form through s = 1 - v (log_dpgf_gap), and the tail 1 - phi(1 - s)."""

    def __init__(self, kind, param, shape=None):
        self.kind, self.param, self.shape = kind, param, shape
        if kind == "poisson":
            self.m = mpf(param)
        elif kind == "tnb":
            self.eta, self.g = mpf(shape), mpf(param)
            self.c = 1 - self.g
        elif kind != "one":
            raise ValueError(kind)

    def mean(self):
        if self.kind == "poisson":
            return self.m
        if self.kind == "one":
            return mpf(1)
        eta, g = self.eta, self.g
        if eta == 0:
            return (1 / g - 1) / mp.log(1 / g)
        return eta * (1 - g) / (g * (1 - g ** eta))

    def log_dpgf_gap(self, s):
        """log phi'(1 - s) up to an additive constant (only differences of it are used)."""
        if self.kind == "poisson":
            return -self.m * s
        if self.kind == "one":
            return mpf(0)
        return -(self.eta + 1) * mp.log(self.g + self.c * s)

    def max_slope(self):
        """max |d/ds log phi'(1 - s)| over s in [0, 1] (at s = 0)."""
        if self.kind == "poisson":
            return self.m
        if self.kind == "one":
            return mpf(1)  # (0; any positive value serves)
        return (self.eta + 1) * self.c / self.g

    def tail(self, s):
        """1 - phi(1 - s) for s in [0, 1]: P[max > x] when s = Sbar(x - m), cancellation-free."""
        if s == 0:
            return mpf(0)
        if self.kind == "poisson":
            return -mp.expm1(-self.m * s)
        if self.kind == "one":
            return s
        eta, g = self.eta, self.g
        r = mp.log1p(self.c * s / g)
        if eta == 0:
            return r / mp.log(1 / g)
        return -mp.expm1(-eta * r) * g ** (-eta) / (g ** (-eta) - 1)

    def head(self, v):
        """phi(v) - phi(0) for v in [0, 1]: P[max <= x] (K >= 1) when v = Phi(x - m),
        cancellation-free."""
        if v == 0:
            return mpf(0)
        if self.kind == "poisson":
            return mp.exp(-self.m) * mp.expm1(self.m * v)
        if self.kind == "one":
            return v
        eta, g = self.eta, self.g
        r = mp.log1p(-self.c * v)
        if eta == 0:
            return r / mp.log(g)
        return mp.expm1(-eta * r) / (g ** (-eta) - 1)

    def dpgf(self, v):
        """phi'(v) itself (for the quadrature check)."""
        if self.kind == "poisson":
            return self.m * mp.exp(self.m * (v - 1))
        if self.kind == "one":
            return mpf(1)
        eta, g, c = self.eta, self.g, self.c
        const = c / mp.log(1 / g) if eta == 0 else eta * c / (g ** (-eta) - 1)
        return const * (1 - c * v) ** (-(eta + 1))


def sbar(z):
    return mp.erfc(z / mp.sqrt(2)) / 2


class Pair:
    """The best-of-K release under N(mu, 1) (a) and N(0, 1) (a')."""

    def __init__(self, mu, runs, h_dense=H_DENSE):
        self.mu, self.runs = mpf(mu), runs
        mu = self.mu
        # f' = mu + |L'(Sbar(x - mu))| N(x - mu) - |L'(Sbar(x))| N(x) >= mu - max|L'| N(x), with
        # L(s) = log phi'(1 - s): f is increasing where N(x) < mu / max|L'|, i.e. |x| above the
        # square root below; x0 is it plus a margin of 1.  A fine grid on [-x0, x0], a coarse one
        # (+-(x0 + 2^k)) outside, where f is monotone and a bracket is all a root needs
        x0 = mp.sqrt(2 * max(mp.log(runs.max_slope() / (mu * mp.sqrt(2 * mp.pi))), 1)) + 1
        n = int(mp.ceil(2 * x0 / h_dense))
        dense = [-x0 + 2 * x0 * k / n for k in range(n + 1)]
        far = [x0 + mpf(2) ** k for k in range(13)]
        self.xs = [-x for x in far[::-1]] + dense + far
        self.fs = [self.f(x) for x in self.xs]
        self.ff = [float(v) for v in self.fs]  # for a fast scan; mpf where a float compare is close

    def f(self, x):
        mu, r = self.mu, self.runs
        return mu * x - mu ** 2 / 2 + r.log_dpgf_gap(sbar(x - mu)) - r.log_dpgf_gap(sbar(x))

    def roots(self, level):
        """Sign changes of f - level on the grid, refined; with the sign of f - level right of
        each root, and the sign at the far left."""
        out = []
        xs, fs = self.xs, self.fs
        lf = float(level)
        close = 1e-9 * (1.0 + abs(lf))
        above = [(v > lf) if abs(v - lf) > close else (fs[i] > level) for i, v in enumerate(self.ff)]
        for i in range(len(xs) - 1):
            if above[i] != above[i + 1]:
                if fs[i + 1] == level:
                    x = xs[i + 1]
                else:
                    x = bracket_root(lambda t: self.f(t) - level, xs[i], xs[i + 1], fs[i] - level, fs[i + 1] - level)
                out.append(x)
        left_pos = above[0]
        if not above[-1] or left_pos:
            raise RuntimeError("grid does not reach the monotone tails")
        return out, left_pos

    def mass(self, m, x1, x2):
        """P[max in (x1, x2)] under N(m, 1) (x1 = -inf, x2 = +inf allowed; the continuous part):
        from the head phi(Phi(x - m)) - phi(0) left of m, from the tail 1 - phi(1 - Sbar(x - m))
        right of it, so that a mass far in either tail keeps its digits."""
        r = self.runs

        def head(x):
            return mpf(0) if x == -mp.inf else r.head(mp.ncdf(x - m))

        def tail(x):
            return mpf(0) if x == mp.inf else r.tail(sbar(x - m))

        if x2 <= m:
            return head(x2) - head(x1)
        if x1 >= m:
            return tail(x1) - tail(x2)
        return r.tail(mpf(1)) - head(x1) - tail(x2)

    def intervals(self, level, above):
        """The intervals where f > level (above) or f < level (not above)."""
        roots, left_pos = self.roots(level)
        pts = [-mp.inf] + roots + [mp.inf]
        sign = left_pos
        out = []
        for i in range(len(pts) - 1):
            if sign == above:
                out.append((pts[i], pts[i + 1]))
            sign = not sign
        return out

    def deltas(self, eps):
        eps = mpf(eps)
        e = mp.exp(eps)
        fwd = sum((self.mass(self.mu, a, b) - e * self.mass(0, a, b) for a, b in self.intervals(eps, True)), mpf(0))
        bwd = sum((self.mass(0, a, b) - e * self.mass(self.mu, a, b) for a, b in self.intervals(-eps, False)),
                  mpf(0))
        return fwd, bwd

    def delta(self, eps):
        return max(self.deltas(eps))

    def epsilon(self, target):
        target = mpf(target)
        if self.delta(0) <= target:
            return mpf(0)
        hi = mpf(1)
        while self.delta(hi) > target:
            hi *= 2
        lo = hi / 2 if hi > 1 else mpf(0)
        g = lambda e: mp.log(self.delta(e)) - mp.log(target)  # noqa: E731 (decreasing)
        return bracket_root(g, lo, hi, g(lo), g(hi))

    def quad_deltas(self, eps):
        """delta_fwd, delta_bwd again by tanh-sinh quadrature of the densities between the roots,
        each piece scaled to O(1) (mpmath's quad stops at an absolute error of its precision),
        with breakpoints at the finite ends' own scale 1/(|x| + 1) towards an infinite end."""
        eps = mpf(eps)
        e = mp.exp(eps)
        r, mu = self.runs, self.mu

        def dens(x, m):
            return r.dpgf(1 - sbar(x - m)) * mp.npdf(x - m)

        def piece(a, b, first, second):
            scale = self.mass(first, a, b) + e * self.mass(second, a, b)
            if scale == 0:
                return mpf(0)
            if a == -mp.inf and b == mp.inf:
                pts = [a, -10, 0, 10 + mu, b]
            elif a == -mp.inf:
                pts = [a] + [b - k / (abs(b) + 1) for k in (64, 8, 1, mpf(1) / 8)] + [b]
            elif b == mp.inf:
                pts = [a] + [a + k / (abs(a) + 1) for k in (mpf(1) / 8, 1, 8, 64)] + [b]
            else:
                pts = [a, (a + b) / 2, b]
            return scale * mp.quad(lambda x: (dens(x, first) - e * dens(x, second)) / scale, pts)

        fwd = sum((piece(a, b, mu, 0) for a, b in self.intervals(eps, True)), mpf(0))
        bwd = sum((piece(a, b, 0, mu) for a, b in self.intervals(-eps, False)), mpf(0))
        scale_f = sum((self.mass(mu, a, b) + e * self.mass(0, a, b) for a, b in self.intervals(eps, True)), mpf(0))
        scale_b = sum((self.mass(0, a, b) + e * self.mass(mu, a, b) for a, b in self.intervals(-eps, False)), mpf(0))
        return fwd, bwd, scale_f, scale_b


def bracket_root(g, a, b, ga, gb):
    """The root of g in [a, b] (g(a), g(b) of opposite signs) by the Illinois method, to 1e-35
    relative (the bracket is kept, so it cannot fail to converge)."""
    tol = mpf(10) ** (5 - DPS)
    if ga == 0:
        return a
    for _ in range(500):
        c = (a * gb - b * ga) / (gb - ga)
        if not min(a, b) <= c <= max(a, b):
            c = (a + b) / 2
        gc = g(c)
        if gc == 0:
            return c
        if (gc > 0) == (gb > 0):
            ga /= 2
        else:
            a, ga = b, gb
        b, gb = c, gc
        if abs(b - a) <= tol * (1 + abs(b)):
            return b
    raise RuntimeError("no convergence")


def gdp_delta(mu, eps):
    mu, eps = mpf(mu), mpf(eps)
    return mp.ncdf(-eps / mu + mu / 2) - mp.exp(eps) * mp.ncdf(-eps / mu - mu / 2)


def logarithmic_gamma(mean):
    """The float gamma whose logarithmic distribution has (about) this mean."""
    y = mp.findroot(lambda lg: (mp.exp(lg) - 1) / lg - mean, mp.log(mean * mp.log(mean) + 2))  # lg = log(1/gamma)
    return float(mp.exp(-y))


def fmt(x):
    return mp.nstr(x, 25) if x != 0 else "0.0"


def main():
    mp.mp.dps = DPS
    failures = []

    # self-check 1: K = 1 against the closed form of mu-GDP
    for sigma in SIGMAS:
        for steps in STEPS:
            mu = mp.sqrt(steps) / mpf(sigma)
            pair = Pair(mu, RunCount("one", None))
            for eps in (0.5, 1.0, 2.0, 4.0):
                got, ref = pair.delta(eps), gdp_delta(mu, eps)
                if abs(got - ref) > mpf("1e-30") * ref:
                    failures.append(f"K = 1, mu = {mu}, eps = {eps}: {got} vs GDP {ref}")

    runs_list = []
    for mean in MEANS:
        runs_list.append(("poisson", float(mean), "", RunCount("poisson", float(mean))))
        runs_list.append(("geometric", 1.0 / mean, 1.0, RunCount("tnb", 1.0 / mean, 1.0)))
        g = logarithmic_gamma(mean)
        runs_list.append(("logarithmic", g, 0.0, RunCount("tnb", g, 0.0)))

    rows, row_id, worst_quad, worst_grid, n_quad = [], 0, mpf(0), mpf(0), 0
    for sigma in SIGMAS:
        for steps in STEPS:
            mu = mp.sqrt(steps) / mpf(sigma)
            for name, param, shape, runs in runs_list:
                pair = Pair(mu, runs)
                fine = None
                points = [("epsilon", d, pair.epsilon(d)) for d in DELTAS] + [("delta", e, mpf(e)) for e in EPSILONS]
                for query, given, eps in points:
                    fwd, bwd = pair.deltas(eps)
                    # self-check 2: quadrature of the densities (every third row: 1 s each)
                    qf, qb, _, _ = pair.quad_deltas(eps) if row_id % 3 == 0 else (fwd, bwd, 0, 0)
                    n_quad += row_id % 3 == 0
                    for a, b in ((fwd, qf), (bwd, qb)):
                        if a > 0:
                            err = abs(a - b) / a
                            worst_quad = max(worst_quad, err)
                            if err > mpf("1e-25"):
                                failures.append(f"quadrature: sigma {sigma} steps {steps} {name} {param}"
                                                f" eps {eps}: {a} vs {b}")
                    # self-check 3: a 4x finer scan finds the same intervals
                    if fine is None:
                        fine = Pair(mu, runs, H_DENSE / CHECK_REFINE)
                    ff, fb = fine.deltas(eps)
                    err = max(abs(ff - fwd) / max(fwd, mpf("1e-300")), abs(fb - bwd) / max(bwd, mpf("1e-300")))
                    worst_grid = max(worst_grid, err)
                    if err > mpf("1e-30"):
                        failures.append(f"finer scan: sigma {sigma} steps {steps} {name} {param} eps {eps}: {err}")
                    d = max(fwd, bwd)
                    if query == "epsilon" and abs(d - mpf(given)) > mpf("1e-30") * mpf(given):
                        failures.append(f"eps root: {d} vs {given}")
                    # (the given value as the float it is, the computed one to 25 digits)
                    rows.append([row_id, repr(sigma), steps, fmt(mu), name, repr(param),
                                 repr(shape) if shape != "" else "", fmt(runs.mean()), query,
                                 repr(given) if query == "delta" else fmt(eps),
                                 repr(given) if query == "epsilon" else fmt(d), fmt(fwd), fmt(bwd)])
                    row_id += 1
                print(f"sigma {sigma} steps {steps} {name} {param:.6g}: eps@1e-3 {mp.nstr(points[0][2], 8)}", flush=True)

    out = Path(__file__).with_name("tuning_best_of_k.csv")
    with open(out, "w", newline="") as fh:
        fh.write(f"# generated by tests/reference/make_tuning_best_of_k.py (mpmath {mp.__version__}, dps {DPS});"
                 f" worst relative quadrature check ({n_quad} rows) {mp.nstr(worst_quad, 2)},"
                 f" finer scan {mp.nstr(worst_grid, 2)}\n")
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["row_id", "sigma", "steps", "mu", "runs", "param", "shape", "mean", "query", "epsilon", "delta",
                    "delta_fwd", "delta_bwd"])
        w.writerows(rows)
    print(f"{len(rows)} rows; worst quadrature {mp.nstr(worst_quad, 3)},"
          f" finer scan {mp.nstr(worst_grid, 3)}")
    if failures:
        print("\n".join(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
