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
* the squarings and products of the bitwise power: a stage z <- z^2 * prod_{bit b} y (the
  product in four running products) takes at most c_b + 4 products (c_b parts with bit b), each
  within 3u (Higham 2002, 3.6), and the squarings that follow raise the stage's error to the
  power 2^b: the relative error is <= (1 + 3u)^N - 1, N = sum_j T_j + 4 (2^B - 1) (B the
  exponents' bit length);
* frequencies where Z_k < e^{-740} are set to 0, error <= Z_k.

Z_k is formed by squaring with its binary exponent kept apart (``frexp``: exact) and rounded
up by 8u per product; a power below 1e-150 is taken as 1e-150 (an upper bound; what it meets
afterwards is <= 1 + 1e-12, so no product underflows).  Every sum of squares is rounded up by
``fft_power._sum_up``.
"""

import math

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


@jit
def mix_power_range(lat, idx, w, bit_ptr, bit_idx, sidx, ss, se2, scnt, n_ops, y, out, k0, k1):
    """out[k] = prod_j (sum_c w[j, c] lat[k, idx[j, c]])^{T_j} for k0 <= k < k1.

    ``lat`` is frequency-major (a frequency's lattice values are contiguous).  The exponents are
    given by their bits: for bit b, the parts bit_idx[bit_ptr[b]:bit_ptr[b + 1]] have it set.
    Sets: lattice points sidx[i, :], factor ss, error bound se2 and total count scnt (module
    notes).  ``n_ops`` = sum T_j + 4 (2^B - 1); ``y`` is scratch of one entry per part.

    Returns (err, z2, vsum): a bound on the rounding and cut-off part of the full-spectrum l1
    error of out, its squared full-spectrum l2 norm, and sum_k V_k^2 rounded up (the caller adds
    (sum_j T_j e2_j) sqrt(vsum) for the input errors)."""
    h = lat.shape[0]
    m = idx.shape[0]
    kk = idx.shape[1]
    nb = bit_ptr.shape[0] - 1
    nset = sidx.shape[0]
    rel = math.expm1(n_ops * math.log1p(3.0 * EPS64))
    ntot = 0.0
    for i in range(nset):
        ntot += scnt[i]
    err = 0.0
    z2 = 0.0
    vsum = 0.0
    for k in range(k0, k1):
        wk = 1.0 if (k == 0 or k == h - 1) else 2.0
        for j in range(m):
            acc = w[j, 0] * lat[k, idx[j, 0]]
            for c in range(1, kk):
                acc = acc + w[j, c] * lat[k, idx[j, c]]
            y[j] = acc
        z = complex(1.0, 0.0)
        for b in range(nb - 1, -1, -1):
            # four independent running products (no chain of dependent multiplications)
            a0 = complex(1.0, 0.0)
            a1 = complex(1.0, 0.0)
            a2 = complex(1.0, 0.0)
            a3 = complex(1.0, 0.0)
            t0 = bit_ptr[b]
            t1 = bit_ptr[b + 1]
            t = t0
            while t + 3 < t1:
                a0 = a0 * y[bit_idx[t]]
                a1 = a1 * y[bit_idx[t + 1]]
                a2 = a2 * y[bit_idx[t + 2]]
                a3 = a3 * y[bit_idx[t + 3]]
                t += 4
            while t < t1:
                a0 = a0 * y[bit_idx[t]]
                t += 1
            z = (z * z) * ((a0 * a1) * (a2 * a3))
        # Z_k: the sets' bounds R^T, product with its exponent kept apart
        mant = 1.0
        expo = 0
        ops = 0
        rmin = math.inf
        for i in range(nset):
            mx = 0.0
            for c in range(kk):
                f = lat[k, sidx[i, c]]
                mx = max(mx, math.sqrt(f.real * f.real + f.imag * f.imag))
            r = ss[i] * mx * (1.0 + 4.0 * EPS64) + se2[i]
            if r < rmin:
                rmin = r
            p, o = _rpow(r, scnt[i])
            ops += o + 1
            mant *= max(p, 1e-150)
            if mant < 1e-150:  # (exact rescaling by a power of two)
                fm, fe = math.frexp(mant)
                mant = fm
                expo += fe
        grow = 1.0 + 8.0 * EPS64 * (ops + 2)
        lz = math.log(mant * grow) + expo * _LOG2 + 4.0 * EPS64 * (1.0 + abs(expo) * _LOG2)
        v = math.exp(lz - math.log(rmin)) if rmin > 0.0 else math.inf
        vsum += wk * v * v
        if lz < -740.0:
            out[k] = 0.0
            err += wk * (math.exp(lz) + 1e-300)
            continue
        out[k] = z
        mag = math.exp(lz)
        err += wk * (rel * mag + 1e-300 * ntot)
        z2 += wk * (z.real * z.real + z.imag * z.imag)
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
