"""Composition in the Fourier domain: folding modulo the FFT length, powers of spectra by
exponentiation by squaring, and per-frequency bounds on their round-off (Higham 2002, Thm 24.2
for the transforms; 3.6 for complex products).

The Cauchy-Schwarz weights sum W^2 over up to ~2^23 frequencies.  A recursive sum of N
non-negative terms is within (N - 1) u of its exact value, and that bound is attained in
practice when the terms are nearly equal (a flat spectrum, e.g. a point mass: the partial
sums' roundings then all have one sign; measured 5e-11 low at N = 2^22, where the 1e-12
margins below assumed the sums exact).  Every such sum is therefore rounded up by
``_sum_up``(N), 1 + (N + 3) EPS64 (twice the bound, which also covers the squaring, the
product by the factor and one more addition by a caller); tests/test_rounding_constants_rest.py.
"""

import math

import numpy as np

from .._jit import jit
from ..logmath import EPS64

__all__ = ["fold", "unroll", "sumsq", "power_product", "power_weight_err", "power_range", "power_series", "power_checkpoints",
           "cut_threshold", "live_extent", "charge_cut", "block_spectrum"]


@jit
def fold(t, j_lo, n, out):
    """out[(j_lo + i) mod n] += t_i: circular convolution of folded arrays = folded linear convolution."""
    for i in range(t.shape[0]):
        if t[i] != 0.0:
            out[(j_lo + i) % n] += t[i]


@jit
def unroll(x, shift, e_inf, pess, out):
    """out[1 + i] = x[(i + shift) mod n] with its error bound e_inf added (pessimistic; negative
    round-off clipped to 0 first) or subtracted (optimistic; clipped to 0 after), out[0] = 0:
    the window of an inverse transform in grid order, with the zero the queries put before it."""
    n = x.shape[0]
    out[0] = 0.0
    for i in range(n):
        j = i + shift
        v = x[j - n] if j >= n else x[j]
        out[i + 1] = (max(v, 0.0) + e_inf) if pess else max(v - e_inf, 0.0)


@jit
def sumsq(a):
    """sum of a_i^2, single-threaded (BLAS dot contends for cores with the FFT threads)."""
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i] * a[i]
    return s


@jit
def _sum_up(nterms):
    """Factor rounding up a float sum of ``nterms`` non-negative terms (each a rounded square)
    past its exact value (module notes)."""
    return 1.0 + (nterms + 3.0) * EPS64


@jit
def _cpow(b, c):
    """b^c (c >= 0) by exponentiation by squaring (the order of products the error bounds assume)."""
    acc = complex(1.0, 0.0)
    while c > 0:
        if c & 1:
            acc = acc * b
        c >>= 1
        if c > 0:
            b = b * b
    return acc


@jit
def power_product(spectra, counts, e2, out):
    """out_k = prod_i spectra[i, k]^counts[i] by exponentiation by squaring, with error sums.

    ``spectra`` (m x h) holds the computed half spectra (rfft) of the m folded
    one-step arrays, ``e2[i]`` a bound on the l2 norm (over the full spectrum)
    of the error of spectra[i].  With R_ik = |spectra[i, k]| + e2[i] (a bound
    on the exact and the computed modulus):

    * |prod y^T - prod yhat^T| <= sum_i T_i |e_ik| W_ik, W_ik = R_ik^{T_i - 1}
      prod_{j != i} R_jk^{T_j}; summed over the full spectrum with
      Cauchy-Schwarz this is <= sum_i T_i e2[i] sqrt(sum_k W_ik^2);
    * the squarings and products have relative error <= (1 + 3u)^{N} - 1,
      N = sum T_i (each complex product errs by <= 2.83u, Higham 2002, 3.6);
    * frequencies where prod R^T < e^{-740} are set to 0, error <= prod R^T.

    Returns (err_sum, z2): a bound on sum over the full spectrum of
    |out_k - exact_k| and the squared l2 norm of out over the full spectrum.
    Full-spectrum sums weight k = 1..h-2 (and h-1 when n is odd) twice.
    """
    wsum = np.zeros(spectra.shape[0])
    err, z2 = power_range(spectra, counts, e2, out, int(0), spectra.shape[1], wsum)
    return err + power_weight_err(counts, e2, wsum), z2


@jit
def power_weight_err(counts, e2, wsum):
    """The input-error term sum_i T_i e2[i] sqrt(sum_k W_ik^2) of ``power_product``."""
    err = 0.0
    for i in range(counts.shape[0]):
        err += counts[i] * e2[i] * math.sqrt(wsum[i]) * (1.0 + 1e-12)
    return err


@jit
def power_range(spectra, counts, e2, out, k0, k1, wsum):
    """``power_product`` on the frequencies k0 <= k < k1: fills out[k0:k1], adds each part's
    sum of W_ik^2 (rounded up past its exact value, ``_sum_up``) to wsum and returns (the
    rounding and cut-off part of err_sum, z2)."""
    mcount = spectra.shape[0]
    h = spectra.shape[1]
    ntot = 0.0
    for i in range(mcount):
        ntot += counts[i]
    rel = math.expm1(ntot * math.log1p(3.0 * EPS64))
    err = 0.0
    z2 = 0.0
    logr = np.empty(mcount)
    ws = np.zeros(mcount)
    # one part raised to c >= 2: below r_under, (c - 1) log r < -747 (margin 1e-6 relative in r:
    # 0.01 in the log, far above its rounding), so every exp below is exactly 0 -- the frequency's
    # only effect is out[k] = 0 and err += wk 1e-300, taken without its log and exps
    r_under = math.exp(-747.0 / (counts[0] - 1)) * (1.0 - 1e-6) if mcount == 1 and counts[0] >= 2 else 0.0
    for k in range(k0, k1):
        wk = 1.0 if (k == 0 or k == h - 1) else 2.0
        if mcount == 1 and abs(spectra[0, k]) + e2[0] < r_under:
            out[k] = 0.0
            err += wk * 1e-300
            continue
        lr = 0.0
        for i in range(mcount):
            r = abs(spectra[i, k]) + e2[i]
            logr[i] = math.log(r) if r > 0.0 else -math.inf
            lr += counts[i] * logr[i]
        # bounds rounded up a little: exp/log of these sums err by far less than 1e-12 relative
        # (an exponent below -746 gives exactly 0: not evaluated)
        for i in range(mcount):
            if logr[i] > -math.inf:
                x = lr - logr[i]
                w = math.exp(x + 1e-12 * (1.0 + abs(x))) if x >= -746.0 else 0.0
            else:
                w = 0.0 if counts[i] > 1 else math.exp(lr)
            ws[i] += wk * w * w
        if lr < -740.0:
            out[k] = 0.0
            err += (wk * math.exp(lr) if lr >= -746.0 else 0.0) + wk * 1e-300
            continue
        z = complex(1.0, 0.0)
        for i in range(mcount):
            z = z * _cpow(spectra[i, k], counts[i])
        out[k] = z
        mag = math.exp(lr + 1e-12 * (1.0 + abs(lr)))
        err += wk * (rel * mag + 1e-300 * ntot)
        z2 += wk * (z.real * z.real + z.imag * z.imag)
    up = _sum_up(k1 - k0)
    for i in range(mcount):
        wsum[i] += ws[i] * up
    return err, z2


@jit
def power_series(spec, e2, c0, out):
    """out[j, f] = spec[f]^(c0 + j) for j = 0 .. out.shape[0] - 1 (c0 >= 1): the first by
    squaring, the others by one more product each; error bounds as ``power_product`` with one
    part (at most c0 + j complex products for power c0 + j).  Returns (err, z2): per power,
    a bound on the full-spectrum l1 norm of its error and its squared full-spectrum l2 norm."""
    nt = out.shape[0]
    h = spec.shape[0]
    err = np.zeros(nt)
    z2 = np.zeros(nt)
    wsum = np.zeros(nt)
    rel = np.empty(nt)
    for j in range(nt):
        rel[j] = math.expm1((c0 + j) * math.log1p(3.0 * EPS64))
    for f in range(h):
        wk = 1.0 if (f == 0 or f == h - 1) else 2.0
        s = spec[f]
        r = abs(s) + e2
        lr = math.log(r) if r > 0.0 else -math.inf
        acc = _cpow(s, c0)
        # r^(c0 - 1) rounded up (the 1e-12 margin covers the few products that follow)
        if lr > -math.inf:
            a1 = (c0 - 1) * lr
            w = math.exp(a1 + 1e-12 * (1.0 + abs(a1)))
        else:
            w = 1.0 if c0 == 1 else 0.0
        for j in range(nt):
            mag = w * r * (1.0 + 4.0 * EPS64)  # >= r^(c0 + j)
            wsum[j] += wk * w * w
            if mag < 1e-300:
                out[j, f] = 0.0
                err[j] += wk * (mag + 1e-300)
            else:
                out[j, f] = acc
                err[j] += wk * (rel[j] * mag + 1e-300 * (c0 + j))
                z2[j] += wk * (acc.real * acc.real + acc.imag * acc.imag)
            acc = acc * s
            w = mag
    up = _sum_up(h)
    for j in range(nt):
        err[j] += (c0 + j) * e2 * math.sqrt(wsum[j] * up) * (1.0 + 1e-12)
    return err, z2


@jit
def power_checkpoints(spectra, e2, rows, row_of, ntot, dec, n, k0, f0, f1, acc, lsum, labs, out, err, z2, wsum,
                      log_cut, k_all, band):
    """The composed spectra of a run at K checkpoints, each one product more than the last:
    z_k = z_{k-1} prod_i spectra[i]^rows[row_of[k], i] (z_{-1} = ``acc``), by exponentiation by
    squaring of each distinct increment row, on the half-spectrum frequencies f0 <= f < f1.

    The bounds are those of ``power_product`` with the cumulative counts C_ki: z_k is a product
    of N_k = ``ntot[k]`` computed factors, so its relative rounding is <= (1 + 3u)^N_k - 1 however
    the products were grouped; with R_i = |spectra[i, f]| + e2[i], M_k = prod_i R_i^C_ki and
    W_ik = M_k / R_i, the input errors add sum_i C_ki e2[i] sqrt(sum_f W_ik^2).  M_k = exp(L_k)
    with L_k = sum_i C_ki log R_i summed as the checkpoints go; its rounding is bounded by
    (m + k + 4) 2u sum_i C_ki |log R_i| and the exp/log errors by 1e-12 (1 + |L_k|), both added
    before the exp.

    Cut-off: a frequency whose bound on M_k is <= e^log_cut is left at 0 in ``out`` (which must
    come zeroed) -- an error <= e^log_cut, charged for every frequency a checkpoint reads before
    the loop (so the cut ones need no work).  Once a frequency is cut and no increment row can
    raise the bound again (each row's sum of C log R, with its rounding terms for up to
    ``k_all`` checkpoints, <= 0), every later checkpoint would cut it too: its loop stops and
    ``lsum[f]`` = -inf marks it for the next batch; with one part, a frequency whose modulus bound
    R has R^C <= e^log_cut at the batch's first count C is marked so without a log.  At late
    checkpoints most frequencies are cut (the composed loss is smooth), so the cost follows the
    spectra's bandwidth, not n.

    Checkpoint k reads the sub-spectrum f = 0, dec[k], 2 dec[k], ...: the transform of the parts
    folded modulo n / dec[k] (a shorter window for an earlier checkpoint); its sums (``err[k]``:
    rounding and cut-off part of the full-spectrum l1 error; ``z2[k]``; ``wsum[k, i]``) run over
    that sub-spectrum only, weighted 1 at frequency 0 and at the Nyquist frequency, else 2.
    ``out[k, f]`` is written at the live frequencies checkpoint k reads and ``band[k]`` raised to
    the largest live sub-spectrum index; ``acc``, ``lsum`` and ``labs`` (L and sum C |log R| at
    the last checkpoint) carry the state from one call to the next."""
    m = spectra.shape[0]
    nk = row_of.shape[0]
    c_all = 2.0 * (m + k_all + 4) * EPS64
    rel = _product_rounding(ntot)
    charge_cut(dec, f0, f1, log_cut, err)  # every cut frequency's error, charged up front
    r, logr, rpow, rlog, rabs = _frequency_scratch(m, rows.shape[0])
    thr = cut_threshold(spectra, ntot, log_cut)
    ws = np.zeros((nk, m))  # this call's sums of W^2, added to wsum rounded up (``_sum_up``)
    for f in range(f0, f1):
        if lsum[f] == -math.inf:
            continue  # cut for good at an earlier batch
        if _modulus_bound(spectra, e2, f) <= thr:
            lsum[f] = -math.inf
            continue
        falling = _row_logs(spectra, e2, rows, f, c_all, r, logr, rlog, rabs)
        powers = False  # the rows' complex powers, formed on first use (most frequencies never need them)
        a, lsf, laf = acc[f], lsum[f], labs[f]
        for k in range(nk):
            d = row_of[k]
            lsf += rlog[d]
            laf += rabs[d]
            if falling and lsf * (1.0 - 1e-12) + 1e-12 + c_all * laf <= log_cut:
                lsf = -math.inf  # this and every later checkpoint: cut
                break
            if not powers:
                _row_powers(spectra, rows, f, rpow)
                powers = True
            a = a * rpow[d]
            mk = dec[k]
            if mk != 1 and f % mk != 0:
                continue
            bound = lsf + 2.0 * (m + k0 + k + 4) * EPS64 * laf + 1e-12 * (1.0 + abs(lsf))
            if not bound > log_cut:
                continue  # (charged up front)
            fk = f // mk
            wk = 1.0 if (fk == 0 or 2 * f == n) else 2.0
            mag = math.exp(bound)
            for i in range(m):
                w = mag / r[i] * (1.0 + 4.0 * EPS64)
                ws[k, i] += wk * w * w
            out[k, f] = a
            if fk > band[k]:
                band[k] = fk
            err[k] += wk * (rel[k] * mag + 1e-300 * ntot[k])
            z2[k] += wk * (a.real * a.real + a.imag * a.imag)
        acc[f], lsum[f], labs[f] = a, lsf, laf
    _add_rounded_up(wsum, ws, _sum_up(f1 - f0))


# The pieces of ``power_checkpoints`` below are inlined into it (numba IR inlining): one compiled
# function, as before it was split.  As calls, the two per-frequency ones cost it 15% with two or
# three parts and 80% with one part and a wide live band.  Its per-checkpoint bookkeeping stays
# in its loop: even inlined, a helper there cost 20-35% on the one-part run (reference counting
# of the arrays passed to it, once per checkpoint and frequency).
@jit(inline="always")
def _product_rounding(ntot):
    """(1 + 3u)^N_k - 1 for each checkpoint's count N_k = ntot[k] of computed factors: the
    relative rounding of a product of them, however grouped."""
    rel = np.empty(ntot.shape[0])
    for k in range(ntot.shape[0]):
        rel[k] = math.expm1(ntot[k] * math.log1p(3.0 * EPS64))
    return rel


@jit(inline="always")
def _frequency_scratch(m, nd):
    """``power_checkpoints``' work arrays for one frequency: (R_i, log R_i) for each of the m
    parts and (power, sum C log R, sum C |log R|) for each of the nd increment rows."""
    return np.empty(m), np.empty(m), np.empty(nd, dtype=np.complex128), np.empty(nd), np.empty(nd)


@jit(inline="always")
def _row_logs(spectra, e2, rows, f, c_all, r, logr, rlog, rabs):
    """At frequency f: r[i] = R_i = |spectra[i, f]| + e2[i] and logr[i] = log R_i; for each
    increment row d, rlog[d] = sum_i C_di log R_i and rabs[d] = sum_i C_di |log R_i|.  Returns
    whether no row can raise the bound on M_k (each row's sum with its rounding terms for up
    to ``k_all`` checkpoints, c_all = 2 (m + k_all + 4) u, <= 0): then a cut is for good."""
    m = spectra.shape[0]
    for i in range(m):
        r[i] = abs(spectra[i, f]) + e2[i]
        logr[i] = math.log(r[i]) if r[i] > 0.0 else -math.inf
    falling = True
    for d in range(rows.shape[0]):
        lr = 0.0
        la = 0.0
        for i in range(m):
            c = rows[d, i]
            if c > 0:
                lr += c * logr[i]
                la += c * abs(logr[i])
        rlog[d] = lr
        rabs[d] = la
        if not (lr * (1.0 - 1e-12) + c_all * la <= 0.0):
            falling = False
    return falling


@jit(inline="always")
def _row_powers(spectra, rows, f, rpow):
    """rpow[d] = prod_i spectra[i, f]^rows[d, i] for each increment row d, each power by
    squaring (``_cpow``)."""
    for d2 in range(rows.shape[0]):
        z = complex(1.0, 0.0)
        for i in range(spectra.shape[0]):
            c = rows[d2, i]
            if c > 0:
                z = z * _cpow(spectra[i, f], c)
        rpow[d2] = z


@jit(inline="always")
def _add_rounded_up(wsum, ws, up):
    """wsum += ws * up, elementwise: this call's sums of W^2, rounded up by the factor up."""
    for k in range(ws.shape[0]):
        for i in range(ws.shape[1]):
            wsum[k, i] += ws[k, i] * up


@jit
def _modulus_bound(spectra, e2, f):
    """|spectra[0, f]| + e2[0] rounded up: >= the exact modulus of the one part's spectrum at f."""
    return (abs(spectra[0, f]) + e2[0]) * (1.0 + 4.0 * EPS64)


@jit
def cut_threshold(spectra, ntot, log_cut):
    """With one part: a frequency whose modulus bound R (>= the exact modulus within 4u) is at
    most this has R^C <= e^log_cut at the first checkpoint's count C = ntot[0], hence at every
    later one (the counts only grow): it is cut throughout, no log needed.  -1 otherwise."""
    if spectra.shape[0] != 1 or ntot.shape[0] == 0 or ntot[0] < 1.0:
        return -1.0
    return math.exp(log_cut / ntot[0]) * (1.0 - 4.0 * EPS64)


@jit
def live_extent(spectra, e2, ntot, log_cut):
    """One past the last half-spectrum frequency that ``power_checkpoints`` may keep (all of them
    with more than one part): the composed spectra can be stored that wide."""
    h = spectra.shape[1]
    thr = cut_threshold(spectra, ntot, log_cut)
    if thr < 0.0:
        return h
    # a cheaper test first, on the squared modulus (no square root): r2 = re^2 + im^2 <= sq
    # implies ``_modulus_bound`` <= thr.  The computed r2 is >= |s|^2 (1 - 2u), so |s| <=
    # (thr - e2) (1 - 1e-10) (1 + 2u); the computed modulus adds 2u, the sum and ``_modulus_bound``'s
    # factor 5u more: (|s| + e2)(1 + 9u) <= thr (1 - 1e-10 + 9u) < thr.  The decision is the same
    # as ``_modulus_bound``'s alone, only where the fast test fails is that one evaluated
    room = (thr - e2[0]) * (1.0 - 1e-10)
    sq = room * room if room > 0.0 else -1.0
    for f in range(h - 1, -1, -1):
        s = spectra[0, f]
        if s.real * s.real + s.imag * s.imag <= sq:
            continue
        if _modulus_bound(spectra, e2, f) > thr:
            return f + 1
    return 1


@jit
def charge_cut(dec, f0, f1, log_cut, err):
    """err[k] += e^log_cut (rounded up) for each full-spectrum frequency that checkpoint k reads
    in [f0, f1) (weight 2: a frequency and its conjugate): the bound on a cut one's error."""
    cut = math.exp(log_cut) * (1.0 + 1e-12)
    for k in range(dec.shape[0]):
        d = dec[k]
        first = ((f0 + d - 1) // d) * d
        reads = (f1 - 1 - first) // d + 1 if f1 > first else 0
        err[k] += 2.0 * reads * cut


@jit
def block_spectrum(spec_d, e2_d, spec_r, e2_r, ks, w, out):
    """out_f = sum_j w_j spec_d[j, f] spec_r[f]^ks[j] over half-spectrum frequencies f.

    ``e2_d[j]`` / ``e2_r`` bound the l2 norms (full spectrum) of the errors of spec_d[j] and
    spec_r.  With rd = |spec_d[j, f]| + e2_d[j] and rr = |spec_r[f]| + e2_r (bounds on the
    exact and computed moduli), the error of a term is at most e_d rr^k + rd k rr^(k-1) e_r;
    summed over the full spectrum with Cauchy-Schwarz that is
    e2_d sqrt(sum rr^2k) + k e2_r sqrt(sum (rd rr^(k-1))^2).  The k + 1 complex products err by
    <= 3u each (Higham 2002, 3.6) and the weighted sum by <= (terms + 2) u, relative to
    w_j rd rr^k.  Returns a bound on the full-spectrum l1 norm of the error of ``out``.
    """
    nt = spec_d.shape[0]
    h = spec_d.shape[1]
    ws_d = np.zeros(nt)
    ws_r = np.zeros(nt)
    rnd = 0.0
    for f in range(h):
        wk = 1.0 if (f == 0 or f == h - 1) else 2.0
        sr = spec_r[f]
        rr = abs(sr) + e2_r
        acc = complex(0.0, 0.0)
        for j in range(nt):
            k = ks[j]
            p = spec_d[j, f]
            rd = abs(p) + e2_d[j]
            rrk1 = 1.0
            for _ in range(k):
                p = p * sr
            for _ in range(k - 1):
                rrk1 *= rr
            rrk = rrk1 * rr if k > 0 else 1.0
            ws_d[j] += wk * rrk * rrk
            if k > 0:
                v = rd * rrk1
                ws_r[j] += wk * v * v
            acc += w[j] * p
            rnd += wk * w[j] * rd * rrk * (3.0 * (k + 2) + nt + 2.0) * EPS64
        out[f] = acc
    err = rnd * (1.0 + 1e-12) + 1e-300 * h
    up = _sum_up(h)
    for j in range(nt):
        e = e2_d[j] * math.sqrt(ws_d[j] * up)
        if ks[j] > 0:
            e += ks[j] * e2_r * math.sqrt(ws_r[j] * up)
        err += w[j] * e * (1.0 + 1e-12)
    return err
