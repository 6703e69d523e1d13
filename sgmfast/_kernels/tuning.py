"""The second term of the tuning profile bound (``sgmfast.tuning``): a Riemann sum."""

import math

import numpy as np

from ._jit import jit


@jit
def excess(hi, lo, width, scale, out):
    """out[k] = sum_i width[i] * max(hi[i] - scale[k] * lo[i], 0): an upper bound on
    int (phi'(u) - e^e2 phi'(l(u)))_+ du when hi, lo are phi' at each cell's right end and phi'(l)
    at its left end (scale = e^e2)."""
    for k in range(scale.shape[0]):
        s = scale[k]
        total = 0.0
        for i in range(hi.shape[0]):
            v = hi[i] if lo[i] == 0.0 else hi[i] - s * lo[i]  # (inf * 0 would be NaN and dropped)
            if v > 0.0:
                total += width[i] * v
        out[k] = total


@jit
def excess_rows(hi, lo, width, scale, out):
    """:func:`excess` for each row of ``lo`` (one e1 per row): out[j, k] = sum_i width[i] *
    max(hi[i] - scale[k] * lo[j, i], 0), the same operations in the same order (each out[j, k]
    sums over i = 0, 1, ... as ``excess`` does), with k innermost so that the loop vectorises."""
    m = scale.shape[0]
    for j in range(lo.shape[0]):
        acc = out[j]
        acc[:] = 0.0
        for i in range(hi.shape[0]):
            h, low, w = hi[i], lo[j, i], width[i]
            if low == 0.0:  # (inf * 0 would be NaN and dropped)
                if h > 0.0:
                    c = w * h
                    for k in range(m):
                        acc[k] += c
                continue
            for k in range(m):
                v = h - scale[k] * low
                acc[k] += w * v if v > 0.0 else 0.0


# --- the split totals of the profile bound in one call (``tuning._profile_bound``) -------------
#: kinds of K for :func:`dpgf_gap` (``par`` holds each kind's constants, computed by the caller
#: with the expressions of ``RunCount._log_dpgf_gap``, so that every rounding is the same)
KIND_POISSON, KIND_ONE, KIND_BINOMIAL, KIND_TNB = 0, 1, 2, 3


@jit
def dpgf_gap(kind, par, u, t):
    """``RunCount._log_dpgf_gap`` at one t: (L, E), operation for operation (the same roundings)."""
    if kind == 0:  # Poisson: par = (log mu, mu, f |log mu|)
        b = par[1] * t
        big = par[0] - b
        return big, 2.0 * (par[2] + u * b + u * abs(big))
    if kind == 1:  # one binomial trial: par = (a, E)
        return par[0], par[1]
    if kind == 2:  # binomial: par = (a, p, n - 1, 1.01 u + f |a|, 1.01 u, f + 2 u, 1 + 4 u)
        z = par[1] * t
        lam = math.log1p(-z)
        big = par[0] + par[2] * lam
        m = 1.0 - z * par[6]
        ratio = z / m if m > 0.0 else math.inf
        err = 2.0 * (par[3] + par[2] * (par[4] * ratio + par[5] * abs(lam)) + u * abs(big))
        return big, (0.0 if z == 1.0 else err)
    # truncated negative binomial: par = (gamma, 1 - gamma, C, E_C, eta + 1, 3.1 u, 1.02 f + 2.1 u, 2^-1074)
    a = par[0] + par[1] * t
    lam = math.log(a)
    big = par[2] - par[4] * lam
    tiny = par[7] / a
    return big, par[3] + 2.0 * (par[4] * (par[5] + par[6] * abs(lam) + tiny) + u * abs(big))


@jit
def _np_min(a, b):
    """np.minimum(a, b) (NaN propagates)."""
    if a != a or b != b:
        return a + b
    return a if a <= b else b


@jit
def _np_max0(v):
    """np.maximum(v, 0.0) (NaN propagates)."""
    return v if (v != v or v >= 0.0) else 0.0


@jit
def phi_low(kind, par, u, down, tiny, gap_up, sl, e1s, d1s, lo):
    """The lower integrands of ``_profile_bound._excess_rows``: for each row r (e1s[r], d1s[r]) the
    gap 1 - l at each cell's left end ``sl`` rounded up (``gap_up`` = 1 + _GAP), then phi'(l)
    rounded down (``dpgf_gap``, then ``_exp_down``: ``down`` = (4 u, 4 f), ``tiny`` = _TINY), into
    lo[r]: the numpy expressions' operations in their order (bit for bit the same floats where exp,
    expm1 and log are libm's)."""
    nc = sl.shape[0]
    for r in range(e1s.shape[0]):
        e1, d1 = e1s[r], d1s[r]
        c0 = -math.expm1(-e1)
        c1 = math.exp(-e1)
        c2 = math.exp(e1)
        for i in range(nc):
            s = sl[i]
            g = _np_min(c0 + c1 * (s + d1), c2 * s + d1)
            g = _np_min(g * gap_up, 1.0)
            big, err = dpgf_gap(kind, par, u, g)
            x = big - err
            e = math.exp(x) * _np_max0(1.0 - down[0] * abs(x) - down[1])
            lo[r, i] = 0.0 if (e < tiny or x != x) else e


@jit
def excess_scaled(hi, lo, width, scale, rel, add, out):
    """:func:`excess_rows`, then out * ``rel`` + ``add``."""
    excess_rows(hi, lo, width, scale, out)
    for r in range(out.shape[0]):
        for k in range(out.shape[1]):
            out[r, k] = out[r, k] * rel + add


@jit
def _first_at_or_below(neg_df, v):
    """np.searchsorted(neg_df, v, side="left") (numpy's order: NaN after every number)."""
    lo, hi = 0, neg_df.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        a = neg_df[mid]
        if a < v or (v != v and a == a):
            lo = mid + 1
        else:
            hi = mid
    return lo


@jit
def split_totals(excess, e2_up, share, dlt, ef, neg_df, tot, t):
    """``_profile_bound._split_totals`` after its excess rows: t = (dlt - excess) share, the total
    e2* + eps_Q(t) (``_Profile.epsilon_at``: the lookup's first point whose delta is <= t) rounded
    up (``_sum_up``), inf where nothing is left of dlt."""
    n = ef.shape[0]
    for r in range(excess.shape[0]):
        for k in range(excess.shape[1]):
            rest = dlt - excess[r, k]
            tk = rest * share[k]
            t[r, k] = tk
            if not rest > 0.0:
                tot[r, k] = math.inf
                continue
            if tk >= 1.0:
                b = 0.0
            else:
                j = _first_at_or_below(neg_df, -tk)
                b = ef[min(j, n - 1)] if j < n else math.inf
            a = e2_up[k]
            # _sum_up(a, b): the two-sum of a - (-b), the next float up where it was rounded down
            nb = -b
            s = a - nb
            bv = a - s
            av = s + bv
            err = (a - av) + (bv - nb)
            tot[r, k] = np.nextafter(s, math.inf) if (math.isfinite(s) and err > 0.0) else s
