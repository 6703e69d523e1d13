"""Composition of mixtures of a few lattice spectra (``sgmfast.pld.schedule_mix``, ``schedule_product``).

Part j of a composition is the mixture y_j = sum_c w[j, c] F[idx[j, c]] of K lattice spectra
(half spectra of folded, tilted one-step arrays; K = 2 for the noise-level and rate chords, 4 for
their products), composed T_j times.  Its spectrum is formed on the fly, frequency by frequency,
so that many parts cost no transform and no memory of their own.  The product prod_j y_j^{T_j}
is taken bit by bit of the exponents (z <- z^2 prod_{j: bit b of T_j} y_j, from the top bit
down): popcount(T_j) products per part instead of a power each.

Error bounds, as in ``fft_power.power_product`` (whose notes apply).  Parts are grouped in sets
(parts with the same K lattice points); for a set, R = s max_c |F_c| + e2 bounds the exact and
the computed modulus of each of its parts (s >= (sum_c w_c)(1 + 2Ku) over the set, covering the
combination's rounding: each real and imaginary part is a K-term dot product, within K u of
sum_c w_c |F_c|; e2 >= each part's spectrum error bound, the l2 norm over the full spectrum of
the error of its computed spectrum, which bounds every single frequency's).  With Z_k =
prod_sets R^{T_set} and any R in place of a part's modulus:

* |prod y^T - prod yhat^T| <= sum_j T_j |e_jk| W_jk, W_jk = Z_k / R_{set(j),k} <= Z_k /
  min_sets R =: V_k; summed over the full spectrum with Cauchy-Schwarz this is <=
  (sum_j T_j e2_j) sqrt(sum_k V_k^2);
* the squarings and products of the bitwise power: a stage z <- z^2 * prod_{bit b} y takes at
  most c_b + 1 products (c_b parts with bit b; frequencies in blocks of ``_BLOCK``, a part's
  points read once a block), each within 3u (Higham 2002, 3.6), and the squarings that follow raise the stage's error to the
  power 2^b: the relative error is <= (1 + 3u)^N - 1, N = sum_j T_j + 4 (2^B - 1) (B the
  exponents' bit length);
* frequencies where Z_k < e^{-740} are set to 0, error <= Z_k.

Z_k is formed by squaring with its binary exponent kept apart (``frexp``: exact) and rounded
up by 8u per product; a power below 1e-150 is taken as 1e-150 (an upper bound; what it meets
afterwards is <= 1 + 1e-12, so no product underflows).  Every sum of squares is rounded up by
``fft_power._sum_up``.
"""

import math

import numpy as np

from .._jit import jit
from ..logmath import EPS64
from .fft_power import _sum_up

__all__ = ["mix_power_range", "merge_cuts", "lower_weights_min"]

_LOG2 = math.log(2.0)


@jit
def _rpow(r, c):
    """r^c (c >= 1) by squaring, and the number of products it took."""
    acc = 1.0
    ops = 0
    while c > 0:
        if c & 1:
            acc = acc * r
            ops += 1
        c >>= 1
        if c > 0:
            r = r * r
            ops += 1
    return acc, ops


#: frequencies formed together: a part's points and weights are read once per block, and its
#: points' values for the block are contiguous (the tables are point-major)
_BLOCK = 32


@jit
def _mix_block(lre, lim, idx, w, bit_ptr, bit_idx, kb, nf, zr, zi):
    """(zr + i zi)[f] = prod_j y_j(kb + f)^{T_j} for f < nf, by the bits of the exponents from the
    top down (z <- z^2, then times each y_j whose T_j has the bit: at most c_b + 1 products a
    stage), y_j = sum_c w[j, c] (lre + i lim)[idx[j, c]] summed in the order of c, and each
    product (a + ib)(c + id) = (ac - bd) + i(ad + bc)."""
    kk = idx.shape[1]
    for f in range(nf):
        zr[f] = 1.0
        zi[f] = 0.0
    for b in range(bit_ptr.shape[0] - 2, -1, -1):
        for f in range(nf):
            a, c = zr[f], zi[f]
            zr[f] = a * a - c * c
            zi[f] = a * c + c * a
        for t in range(bit_ptr[b], bit_ptr[b + 1]):
            j = bit_idx[t]
            if kk == 4:
                w0, w1, w2, w3 = w[j, 0], w[j, 1], w[j, 2], w[j, 3]
                r0, r1, r2, r3 = lre[idx[j, 0], kb:kb + nf], lre[idx[j, 1], kb:kb + nf], \
                    lre[idx[j, 2], kb:kb + nf], lre[idx[j, 3], kb:kb + nf]
                m0, m1, m2, m3 = lim[idx[j, 0], kb:kb + nf], lim[idx[j, 1], kb:kb + nf], \
                    lim[idx[j, 2], kb:kb + nf], lim[idx[j, 3], kb:kb + nf]
                for f in range(nf):
                    yr = ((w0 * r0[f] + w1 * r1[f]) + w2 * r2[f]) + w3 * r3[f]
                    yi = ((w0 * m0[f] + w1 * m1[f]) + w2 * m2[f]) + w3 * m3[f]
                    a, c = zr[f], zi[f]
                    zr[f] = a * yr - c * yi
                    zi[f] = a * yi + c * yr
            elif kk == 2:
                w0, w1 = w[j, 0], w[j, 1]
                r0, r1 = lre[idx[j, 0], kb:kb + nf], lre[idx[j, 1], kb:kb + nf]
                m0, m1 = lim[idx[j, 0], kb:kb + nf], lim[idx[j, 1], kb:kb + nf]
                for f in range(nf):
                    yr = w0 * r0[f] + w1 * r1[f]
                    yi = w0 * m0[f] + w1 * m1[f]
                    a, c = zr[f], zi[f]
                    zr[f] = a * yr - c * yi
                    zi[f] = a * yi + c * yr
            else:
                for f in range(nf):
                    yr = 0.0
                    yi = 0.0
                    for cc in range(kk):
                        yr += w[j, cc] * lre[idx[j, cc], kb + f]
                        yi += w[j, cc] * lim[idx[j, cc], kb + f]
                    a, c = zr[f], zi[f]
                    zr[f] = a * yr - c * yi
                    zi[f] = a * yi + c * yr


@jit
def _set_bounds(lre, lim, sidx, ss, se2, scnt, kb, nf, mant, expo, ops, rmin):
    """For f < nf: Z_{kb + f} = mant[f] 2^expo[f] (before rounding: ops[f] products), the sets'
    bounds R^T with the exponent kept apart (module notes), and rmin[f] the least R."""
    for f in range(nf):
        mant[f] = 1.0
        expo[f] = 0
        ops[f] = 0
        rmin[f] = math.inf
    for i in range(sidx.shape[0]):
        for f in range(nf):
            mx = 0.0
            for c in range(sidx.shape[1]):
                re = lre[sidx[i, c], kb + f]
                im = lim[sidx[i, c], kb + f]
                mx = max(mx, math.sqrt(re * re + im * im))
            r = ss[i] * mx * (1.0 + 4.0 * EPS64) + se2[i]
            if r < rmin[f]:
                rmin[f] = r
            p, o = _rpow(r, scnt[i])
            ops[f] += o + 1
            mant[f] *= max(p, 1e-150)
            if mant[f] < 1e-150:  # (exact rescaling by a power of two)
                fm, fe = math.frexp(mant[f])
                mant[f] = fm
                expo[f] += fe


@jit
def mix_power_range(lre, lim, idx, w, bit_ptr, bit_idx, sidx, ss, se2, scnt, n_ops, out, k0, k1, lz_out, rm_out):
    """out[k] = prod_j (sum_c w[j, c] lat[idx[j, c], k])^{T_j} for k0 <= k < k1, lat = lre + i lim.

    The tables are point-major (a point's values over the frequencies are contiguous).  The
    exponents are given by their bits: for bit b, the parts bit_idx[bit_ptr[b]:bit_ptr[b + 1]]
    have it set.  Sets: lattice points sidx[i, :], factor ss, error bound se2 and total count scnt
    (module notes).  ``n_ops`` = sum T_j + 4 (2^B - 1).

    Returns (err, z2, vsum): a bound on the rounding and cut-off part of the full-spectrum l1
    error of out, its squared full-spectrum l2 norm, and sum_k V_k^2 rounded up (the caller adds
    (sum_j T_j e2_j) sqrt(vsum) for the input errors).  Where ``lz_out`` and ``rm_out`` have
    entries (else size 0), lz_out[k] >= log Z_k and rm_out[k] = the least R at k (products of
    compositions in chunks: ``schedule_compose._Joined``)."""
    h = lre.shape[1]
    rel = math.expm1(n_ops * math.log1p(3.0 * EPS64))
    ntot = 0.0
    for i in range(sidx.shape[0]):
        ntot += scnt[i]
    err = 0.0
    z2 = 0.0
    vsum = 0.0
    zr = np.empty(_BLOCK)
    zi = np.empty(_BLOCK)
    mant = np.empty(_BLOCK)
    rmin = np.empty(_BLOCK)
    expo = np.empty(_BLOCK, dtype=np.int64)
    ops = np.empty(_BLOCK, dtype=np.int64)
    for kb in range(k0, k1, _BLOCK):
        nf = min(_BLOCK, k1 - kb)
        _mix_block(lre, lim, idx, w, bit_ptr, bit_idx, kb, nf, zr, zi)
        _set_bounds(lre, lim, sidx, ss, se2, scnt, kb, nf, mant, expo, ops, rmin)
        for f in range(nf):
            k = kb + f
            wk = 1.0 if (k == 0 or k == h - 1) else 2.0
            grow = 1.0 + 8.0 * EPS64 * (ops[f] + 2)
            lz = math.log(mant[f] * grow) + expo[f] * _LOG2 + 4.0 * EPS64 * (1.0 + abs(expo[f]) * _LOG2)
            v = math.exp(lz - math.log(rmin[f])) if rmin[f] > 0.0 else math.inf
            vsum += wk * v * v
            if lz_out.shape[0] > 0:
                lz_out[k] = lz
                rm_out[k] = rmin[f]
            if lz < -740.0:
                out[k] = 0.0
                err += wk * (math.exp(lz) + 1e-300)
                continue
            out[k] = complex(zr[f], zi[f])
            mag = math.exp(lz)
            err += wk * (rel * mag + 1e-300 * ntot)
            z2 += wk * (zr[f] * zr[f] + zi[f] * zi[f])
    return err, z2, vsum * _sum_up(k1 - k0) * (1.0 + 4.0 * EPS64)


@jit
def merge_cuts(c_k, c_lam, c_log, cap, upper, cuts):
    """The groups of ``schedule_mix._merge`` for one cap: fills cuts[0..m] (group g is
    [cuts[g], cuts[g + 1]) of the sorted steps) and returns (m, the total weight moved).  c_*
    are prefix sums (with a leading 0) of the multiplicities, weights and log weights (upper:
    log(1 - lam); lower: log lam)."""
    n = c_k.shape[0] - 1
    m = 0
    total = 0.0
    start = 0
    cuts[0] = 0
    while start < n:
        end = start + 1
        while end < n and _moved(c_k, c_lam, c_log, start, end + 1, upper) <= cap:
            end += 1
        total += max(_moved(c_k, c_lam, c_log, start, end, upper), 0.0)
        m += 1
        cuts[m] = end
        start = end
    return m, total


@jit
def _moved(c_k, c_lam, c_log, a, b, upper):
    k = c_k[b] - c_k[a]
    sl = c_lam[b] - c_lam[a]
    lg = c_log[b] - c_log[a]
    if upper:
        p = -math.expm1(lg / k) if lg > -math.inf else 1.0
        return k * p - sl
    p = math.exp(lg / k) if lg > -math.inf else 0.0
    return sl - k * p


@jit
def lower_weights_min(y, span, slopes, allow, out):
    """out[i] = min(out[i], min over breakpoints k of (F_{slopes[k]}(y[i]) + allow[k])), F_s(y) a
    lower bound on (e^{s y} - 1) / (e^{s span} - 1) (y / span at s = 0): expm1 and exp within a
    few u, rounded down by 1e-10 relative."""
    for i in range(y.shape[0]):
        best = out[i]
        yi = y[i]
        for k in range(slopes.shape[0]):
            s = slopes[k]
            sd = s * span
            if abs(sd) < 1e-9:  # (F_s is within |s span| of y / span relative)
                f = yi / span * (1.0 - abs(sd))
            elif sd < 600.0:
                f = math.expm1(s * yi) / math.expm1(sd)
            else:
                f = math.exp(s * (yi - span)) * (-math.expm1(-s * yi)) / (-math.expm1(-sd))
            if not f >= 0.0:  # (NaN: no information)
                f = 0.0
            v = f * (1.0 - 1e-10) + allow[k]
            if v < best:
                best = v
        out[i] = best


@jit
def merge_groups(lam, cnt, starts, tols, upper, out_grp, out_p, out_k):
    """``schedule_mix._merge`` of every group of steps at once: group g is the steps [starts[g],
    starts[g + 1]), sorted by weight (upper: increasing; lower: decreasing), its share of weight
    to move ``tols[g]``.  Fills, for each merged part, its group, weight p and count k (upper:
    1 - geomean(1 - lam) rounded up; lower: geomean(lam) rounded down: ``group_weight``) and
    returns how many.  The cuts are ``merge_cuts``' for the largest cap, halved until the moved
    weight fits (``schedule_mix`` notes: a Poisson-binomial count between two binomials)."""
    m = 0
    n_max = 0
    for g in range(starts.shape[0] - 1):
        n_max = max(n_max, starts[g + 1] - starts[g])
    # (one set of scratch arrays for every group: 10^5 groups of one step made 10^5 sets)
    c_k_all, c_lam_all, c_log_all = np.zeros(n_max + 1), np.zeros(n_max + 1), np.zeros(n_max + 1)
    logs, cuts_all = np.empty(n_max), np.empty(n_max + 1, dtype=np.int64)
    for g in range(starts.shape[0] - 1):
        a, b = starts[g], starts[g + 1]
        n = b - a
        c_k, c_lam, c_log, cuts = c_k_all[: n + 1], c_lam_all[: n + 1], c_log_all[: n + 1], cuts_all[: n + 1]
        for i in range(n):
            x, c = lam[a + i], cnt[a + i]
            if upper:
                logs[i] = math.log1p(-x) if x < 1.0 else -math.inf
            else:
                logs[i] = math.log(x) if x > 0.0 else -math.inf
            c_k[i + 1] = c_k[i] + c
            c_lam[i + 1] = c_lam[i] + c * x
            c_log[i + 1] = c_log[i] + c * logs[i]
        budget = tols[g] * (c_k[n] - c_lam[n] if upper else c_lam[n])
        cap = budget
        parts = 0
        for _ in range(40):
            parts, total = merge_cuts(c_k, c_lam, c_log, cap, upper, cuts)
            if total <= budget or cap < 1e-12 * budget:
                break
            cap *= 0.5
        for j in range(parts):
            k = 0.0
            lg = 0.0
            for i in range(cuts[j], cuts[j + 1]):
                k += cnt[a + i]
                lg += cnt[a + i] * logs[i]
            out_grp[m], out_p[m], out_k[m] = g, group_weight(lg, k, cuts[j + 1] - cuts[j], upper), round(k)
            m += 1
    return m


@jit
def group_weight(lg, k, terms, upper):
    """The weight of a group of ``terms`` steps, k copies in all, whose summed log weights (upper:
    sum cnt log(1 - lam); lower: sum cnt log lam) are ``lg``: 1 - exp(lg / k) rounded up, or
    exp(lg / k) rounded down.  A sum of same-signed logs errs by at most (terms + 2) u relative in
    any order (each log1p / log within u); 2 terms + 8 covers it and the division."""
    u = 0.5 * EPS64
    if not lg > -math.inf:
        return 1.0 if upper else 0.0
    r = (2.0 * terms + 8.0) * u
    if upper:
        return min(1.0, -math.expm1(lg / k * (1.0 + r)) * (1.0 + 4.0 * u))
    return max(0.0, math.exp(lg / k * (1.0 + r)) * (1.0 - 4.0 * u))
