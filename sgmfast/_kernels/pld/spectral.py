"""δ(eps) and eps(δ) read straight off a composed spectrum, without the inverse transform.

A composed tilted PLD is smooth: its spectrum z_f is negligible beyond a band of F frequencies
(at a late checkpoint F ~ 50 of n / 2 ~ 20,000; ``fft_power.power_checkpoints`` cuts the rest
and charges it).  The δ of a window [j0, top] (n = top - j0 + 1 grid points, the composition
folded modulo n) needs, for the first index J above eps, the sums

    A_J = sum_{k=J..top} x_k alpha^(k-J),   B_J = the same with beta,
    alpha = e^{-theta step},  beta = e^{-(theta + 1) step},

of the inverse transform x_k = (1/n) sum_f z_f omega^(k f) (omega = e^{2 pi i / n}, z Hermitian;
x is what ``composition.grid_of`` would have unrolled).  Summing the geometric series,

    A_J = (1/n) [Re z_0 H_0 + sum_{f=1}^{F-1} w_f Re(z_f H_f)],
    H_f = (omega^(J f) - alpha^M omega^(j0 f)) / (1 - alpha omega^f),  M = top - J + 1,
    H_0 = (1 - alpha^M) / (1 - alpha)  (M when theta = 0),

w_f = 2 (1 at the Nyquist frequency, where z and H are real): O(F) per J instead of an O(n log n)
transform and O(n) sums.

Rounding (proof beside the constants below).  Unit phasors are computed from the exact residue
(x f mod n): within U_PHASOR u.  omega^(J f) is then carried by products with the computed
omega^J, re-anchored every ``ANCHOR`` frequencies; the base's own error is the same at every step
and adds up coherently, so the run is within U_RUN u = (ANCHOR U_PHASOR + (ANCHOR - 1) sqrt 5) u.
With 1 - alpha omega^f formed without cancellation, every term is within U_TERM u
|z_f| |1 / (1 - alpha omega^f)| (times w_f) and the sum adds (F + 2) u of the terms:
``spectral_prep`` returns that bound (independent of J).
"""

import math

from .._jit import jit
from ..logmath import EPS64

__all__ = ["spectral_prep", "spectral_sums", "spectral_bound", "loose", "spectral_eps", "spectral_delta"]

# Rounding bounds of one term (u = 2^-53 = EPS64 / 2, the unit round-off).  Assumed: IEEE double
# arithmetic without contraction (fastmath is off, so numba emits no FMA), no underflow (the terms'
# relative bounds need normal numbers: |z_f| far above 1e-290, as a composed PLD's band is), and
# cos, sin, exp, expm1 within 1 ulp (glibc's documented bound on x86-64), i.e. y (1 + d), |d| <= 2u.
#
# (1) ``_phasor(x, f, n)`` vs omega^(x f) = e^{i a}, a = 2 pi r / n, r the residue of x f in
#     (-n/2, n/2], exact in integers, so |a| <= pi.  r / n is one rounding (r, n < 2^53 convert
#     exactly); TWO_PI = 2 pi (1 + d0), |d0| <= 0.352u; the product one rounding: the angle is
#     a (1 + d), |d| <= 2.352u (+ O(u^2)), off by <= 2.352 pi u = 7.39u, and |e^{ia'} - e^{ia}| <=
#     |a' - a|.  cos and sin add <= 2u |cos a'| and 2u |sin a'|, together <= 2u.  So the phasor
#     is within U_PHASOR u = 9.4u of omega^(x f).
# (2) A complex product by the standard formula (numba's: re = ac - bd, im = ad + bc) is
#     fl(x y) = x y (1 + h), |h| <= sqrt 5 u (Brent, Percival, Zimmermann, Math. Comp. 76 (2007)
#     1469-1481; <= 2u with an FMA).  A real times a complex (am qf below) rounds each part once.
# (3) The run.  At f = q ANCHOR + k (0 <= k < ANCHOR) ``spectral_sums`` holds P_k: P_0 = a' (the
#     anchor ``_phasor(J, f, n)``, or exactly 1 at q = 0, where P_1 = 1 b' is exact too), P_k =
#     fl(P_{k-1} b'), b' = ``_phasor(J, 1, n)``.  With a' = A (1 + e_a), b' = B (1 + e_b), |A| =
#     |B| = 1, |e_a|, |e_b| <= U_PHASOR u, A B^k = omega^(J f) exactly (residues), and (2):
#         P_k = A B^k (1 + e_a) (1 + e_b)^k prod_{j <= k} (1 + h_j),
#         |P_k - omega^(J f)| <= (1 + U_PHASOR u)^(k + 1) (1 + sqrt 5 u)^k - 1
#                              <= (ANCHOR U_PHASOR + (ANCHOR - 1) sqrt 5) u (1 + 1e-12) = U_RUN u
#     (k <= ANCHOR - 1).  e_b is the same at every step: it compounds to k e_b, not sqrt(k) e_b --
#     at ANCHOR = 64 that is 602u of U_RUN = 742.5u (tests/test_spectral_rounding.py drives the
#     run to its worst residues and measures ~300u).  The bound 16u + 3u ANCHOR = 208u the module
#     once stated left the base's error out.
# (4) ``_inv_den``: phi = a (1 + d) as in (1), |phi| <= pi.  s = sin(phi' / 2): relative error
#     <= |(phi/2) cot(phi/2)| 2.352u + 2u <= 4.352u (x cot x <= 1 on |x| <= pi/2); g s s with g =
#     exp(-c) (2u), 2 g exact, two products: 12.71u; -expm1(-c) 2u; the sum of the two (both >= 0):
#     re within 13.71u re.  im = -g sin(phi'): the angle moves sin phi by <= 2.352u |phi|, and
#     g |phi| <= (pi / 2) |den| (|den|^2 = (1 - g)^2 + 4 g sin^2(phi / 2) >= 4 g sin^2(phi / 2));
#     g, sin and the product add 5u |im|: im within (3.70u + 5u) |den|.  So den within 22.4u |den|,
#     1 / den within 22.4u (1 + O(u)) |D| (D = 1 / (1 - g omega^f)), and numba's division (Smith's,
#     of 1 + 0i: parts within 4u and 5u) adds 5u: |da - D| <= U_INV_DEN u |D|, U_INV_DEN = 28.
# (5) A term, U = omega^(J f) - alpha^M omega^(j0 f) (|U| <= 2).  am = exp(-fl(ts m)) is within
#     (ts m e^{-ts m} + 2) u <= 2.37u of alpha^M <= 1; am qf within (U_PHASOR + 2.37 + 1) u of
#     alpha^M omega^(j0 f); the difference rounds by <= u |ph - am qf| <= 2u: |u' - U| <= (U_RUN +
#     U_PHASOR + 5.4) u.  u' da: |u' - U| |da| + |U| |da - D| + sqrt 5 u |u'| |da| <= (U_RUN +
#     U_PHASOR + 5.4 + 2 U_INV_DEN + 2 sqrt 5) u |D|; z (u' da) adds sqrt 5 u |z| 2 |D|; 2 Re is
#     exact (at the Nyquist frequency the real product rounds by u instead).  Every term is
#     within U_TERM u w_f |z_f| |D_f| of its exact value (second-order terms are < 1e-12 of it).
# (6) ``spectral_prep`` charges (RTERM + F + 4) EPS64 2 (1.01) w_f |z_f| |da_f| per frequency, i.e.
#     4 RTERM u w_f |z_f| |D_f| for the terms (1.01 covers |D| <= |da| (1 + 28u)): RTERM =
#     U_TERM / 4 (1.0001).  The rest, 4 (F + 4) u w_f |z_f| |D_f| >= 2 (F + 4) u times the term's
#     size bound 2 w_f |z_f| |D_f|, covers the running sum (<= (F - 1) u of the sum of the terms'
#     sizes) and the division by n (u).
ANCHOR = 64
U_PHASOR = 9.4
U_CMUL = math.sqrt(5.0)
U_RUN = (ANCHOR * U_PHASOR + (ANCHOR - 1) * U_CMUL) * (1.0 + 1e-12)  # 742.5 at ANCHOR = 64
U_INV_DEN = 28.0
U_TERM = U_RUN + U_PHASOR + 5.4 + 2.0 * U_INV_DEN + 4.0 * U_CMUL  # 822.2
#: in EPS64 = 2u, on the scale 2 |z_f| |D_f|: the proof needs U_TERM / 4 (1.0001) = 205.6; the charge
#: keeps the 304 it had before the proof was written out (more than needed: every answer as before)
RTERM = max(304.0, U_TERM / 4.0 * 1.0001)
LOOSE = 1e-4  # error bound / value beyond which an answer is left to the grid (``loose``)
TWO_PI = 2.0 * math.pi


@jit
def _phasor(x, f, n):
    """omega^(x f) from the exact residue of x f modulo n, taken in (-n/2, n/2] (x reduced
    first, so that the product stays far inside int64)."""
    r = ((x % n) * f) % n
    if 2 * r > n:
        r -= n
    ang = TWO_PI * (r / n)
    return complex(math.cos(ang), math.sin(ang))


@jit
def _next_phasor(ph, base, x, f, n):
    """omega^(x f) as ``spectral_sums`` carries it (f >= 1): ``ph`` (the previous one, 1 at f = 1)
    times ``base`` = ``_phasor(x, int(1), n)``, re-anchored from the exact residue every ANCHOR
    frequencies (within U_RUN u: the notes above the constants)."""
    if f % ANCHOR == 0:
        return _phasor(x, f, n)
    return ph * base


@jit
def phasor_run(x, n, out):
    """out[f] = omega^(x f) exactly as ``spectral_sums`` computes it at J = x, f = 0..len(out) - 1
    (for the rounding tests)."""
    base = _phasor(x, int(1), n)
    ph = complex(1.0, 0.0)
    if out.shape[0] > 0:
        out[0] = ph
    for f in range(1, out.shape[0]):
        ph = _next_phasor(ph, base, x, f, n)
        out[f] = ph


@jit
def _inv_den(decay_step, f, n):
    """1 / (1 - g omega^f), g = e^{-decay_step} <= 1, f != 0 mod n: the real part as
    (1 - g) + 2 g sin^2(phi / 2), without cancellation."""
    r = f % n
    if 2 * r > n:
        r -= n
    phi = TWO_PI * (r / n)
    g = math.exp(-decay_step)
    s = math.sin(0.5 * phi)
    re = -math.expm1(-decay_step) + 2.0 * g * s * s
    im = -g * math.sin(phi)
    return 1.0 / complex(re, im)


@jit
def spectral_prep(z, n, j0, theta_step, step, qf, da, db):
    """qf[f] = omega^(j0 f), da[f] = 1 / (1 - alpha omega^f), db[f] the same with beta, for the
    sub-spectrum z[0..F-1] of window length n (f >= 1; entry 0 unused).  Returns the rounding
    bounds (RA, RB) of ``spectral_sums`` (absolute, on the sums divided by n)."""
    nf = z.shape[0]
    ra = 0.0
    rb = 0.0
    for f in range(1, nf):
        qf[f] = _phasor(j0, f, n)
        da[f] = _inv_den(theta_step, f, n)
        db[f] = _inv_den(theta_step + step, f, n)
        w = 1.0 if 2 * f == n else 2.0
        az = abs(z[f])
        ra += w * az * abs(da[f])
        rb += w * az * abs(db[f])
    rel = (RTERM + nf + 4.0) * EPS64 * 2.0 * 1.01  # 2: |omega^(J f) - alpha^M ...| <= 2
    return ra * rel / n, rb * rel / n


@jit
def _h0(decay_step, m):
    """sum_{k < m} e^{-decay_step k}."""
    if decay_step <= 0.0:
        return float(m)
    return math.expm1(-decay_step * m) / math.expm1(-decay_step)


@jit
def spectral_sums(z, n, j0, big_j, top, theta_step, step, qf, da, db):
    """(A_J, B_J, H0_A, H0_B) of the module notes for J = big_j (j0 <= J <= top): the computed
    sums and the exact weight sums sum_{m < M} alpha^m, beta^m (within 4u)."""
    nf = z.shape[0]
    m = top - big_j + 1
    am = math.exp(-theta_step * m)
    bm = math.exp(-(theta_step + step) * m)
    ha = _h0(theta_step, m)
    hb = _h0(theta_step + step, m)
    sa = z[0].real * ha
    sb = z[0].real * hb
    base = _phasor(big_j, int(1), n)
    ph = complex(1.0, 0.0)
    for f in range(1, nf):
        ph = _next_phasor(ph, base, big_j, f, n)
        u = ph - am * qf[f]
        v = ph - bm * qf[f]
        ta = z[f] * (u * da[f])
        tb = z[f] * (v * db[f])
        if 2 * f == n:
            # the Nyquist frequency appears once; z and H are real there
            sa += z[f].real * (u * da[f]).real
            sb += z[f].real * (v * db[f]).real
        else:
            sa += 2.0 * ta.real
            sb += 2.0 * tb.real
    return sa / n, sb / n, ha, hb


@jit
def _core(e, big_j, sums, step):
    """(x = e^{e - ell_J}, A - x B, a bound on its error) at eps = e in [ell_{J-1}, ell_J]
    (``spectral_bound``)."""
    sa, sb, ra, rb, ha, hb, e_entry = sums
    base = big_j * step
    x = math.exp(e - base)
    w = max(ha - x * hb, 0.0) + 8.0 * EPS64 * (ha + x * hb)  # ha, hb within 3u
    # the sums' rounding, the per-entry error, and the product x sb and the difference (x within
    # (2 |e - base| + 2) u: its argument's rounding and the exp)
    slack = e_entry * w + ra + x * rb + (6.0 + 2.0 * abs(e - base)) * EPS64 * (abs(sa) + x * abs(sb))
    return x, sa - x * sb, slack


@jit
def loose(e, big_j, sums, step):
    """Whether the error bound of A - x B exceeds LOOSE times its value: the per-entry error is
    charged to every atom above eps, where the grid itself clips each atom's error at the atom
    (an atom is >= 0), so far-tail answers can be tighter on the grid."""
    _, core, slack = _core(e, big_j, sums, step)
    return slack > LOOSE * abs(core)


@jit
def spectral_bound(e, big_j, sums, step, theta, log_scale, p_inf, inf_err, err_l1, upper, floor):
    """δ bound at eps = e in [ell_{J-1}, ell_J] (upper, or lower) from ``sums`` = (A_J, B_J, their
    rounding bounds, the weight sums H0_A, H0_B, the per-entry error): e^{log_scale - theta ell_J}
    (A - e^{e - ell_J} B) plus the grid's charges (as ``query.delta_curve``).  The per-entry
    error enters once, through the non-negative weights e^{-theta (ell_k - ell_J)}
    (1 - e^{e - ell_k}) whose sum is H0_A - e^{e - ell_J} H0_B; each exp is charged the rounding
    of its argument (u times its size) and its own.  Below ``floor``: +-inf."""
    if e < floor:
        return math.inf if upper else -math.inf
    base = big_j * step
    sc = math.exp(log_scale - theta * base)
    x, core, slack = _core(e, big_j, sums, step)
    # exps of arguments rounded within u of their size, then the products
    r_sc = (8.0 + 2.0 * (abs(log_scale) + abs(theta * base))) * EPS64
    fe = _alias(e, theta, log_scale, err_l1)
    if upper:
        return max(sc * (core + slack), 0.0) * (1.0 + r_sc) + p_inf + inf_err + fe
    return max(sc * (core - slack), 0.0) * (1.0 - r_sc) - inf_err - fe


@jit
def _alias(e, theta, log_scale, err_l1):
    """The grid's excess-mass charge at eps = e, e^{log_scale - theta e} err_l1, rounded up."""
    return math.exp(log_scale - theta * e) * err_l1 * (1.0 + (8.0 + 2.0 * (abs(log_scale) + abs(theta * e))) * EPS64)


@jit
def _sums_at(z, n, j0, big_j, top, theta_step, step, qf, da, db, ra, rb, e_entry):
    sa, sb, ha, hb = spectral_sums(z, n, j0, big_j, top, theta_step, step, qf, da, db)
    # frequency 0's term: its product, the running sum over all terms and the division by n
    r0 = (z.shape[0] + 12.0) * EPS64 * abs(z[0].real) / n
    return sa, sb, ra + r0 * ha, rb + r0 * hb, ha, hb, e_entry


@jit
def spectral_delta(eps, z, n, j0, theta, step, log_scale, qf, da, db, ra, rb, e_entry, p_inf, inf_err, err_l1,
                   upper, floor, out, out_loose):
    """Certified δ bound at each eps (upper: capped at 1; lower: at least 0); ``out_loose[i]``
    flags the answers the grid may make tighter (``loose``)."""
    top = j0 + n - 1
    ts = theta * step
    for i in range(eps.shape[0]):
        e = eps[i]
        out_loose[i] = False
        if e < floor:
            out[i] = 1.0 if upper else 0.0
            continue
        # (eps at or past the top point, however far -- eps / step may pass the int64 range -- has
        # no atom above it: the least J with J step > eps is past the top)
        big_j = top + 1 if e >= top * step else _first_above(e, step)
        if big_j < j0:
            big_j = j0
        if big_j > top:  # no atom above eps: the charges only
            out[i] = min(1.0, p_inf + inf_err + _alias(e, theta, log_scale, err_l1)) if upper else 0.0
            continue
        sums = _sums_at(z, n, j0, big_j, top, ts, step, qf, da, db, ra, rb, e_entry)
        b = spectral_bound(e, big_j, sums, step, theta, log_scale, p_inf, inf_err, err_l1, upper, floor)
        out[i] = min(1.0, b) if upper else max(0.0, b)
        out_loose[i] = loose(e, big_j, sums, step)


@jit
def _first_above(e, step):
    """The least grid index J with J step > e."""
    big_j = int(math.floor(e / step)) + 1
    while big_j * step <= e:
        big_j += 1
    while (big_j - 1) * step > e:
        big_j -= 1
    return big_j


@jit
def spectral_eps(target, j_guess, z, n, j0, theta, step, log_scale, qf, da, db, ra, rb, e_entry, p_inf, inf_err,
                 err_l1, upper, floor, max_evals):
    """(eps, ok): upper -- some eps with δ_upper(eps) <= target; lower -- some eps with
    δ_lower(eps) > target; each checked at the value returned.  The bin [ell_{J-1}, ell_J] whose
    bound crosses the target is found from ``j_guess`` by Newton steps on log δ (one evaluation
    of A_J, B_J gives the bound over the whole bin, so its two ends give the slope), kept inside
    the bracket found so far and bisecting when they stall; then bisection inside the bin.
    ok = False (the caller reads the grid instead) where that takes more than ``max_evals``
    evaluations, the crossing is not inside (j0, top] or the answer is ``loose``."""
    top = j0 + n - 1
    ts = theta * step
    lo_j = j0  # the bound at ell_{lo_j} is known > target (the window's bottom: assumed)
    hi_j = top + 1  # ... and at ell_{hi_j} <= target (above the window: assumed)
    big_j = min(max(j_guess, j0 + 1), top)
    known_lo = False
    known_hi = False
    lt = math.log(target)
    for _ in range(max_evals):
        sums = _sums_at(z, n, j0, big_j, top, ts, step, qf, da, db, ra, rb, e_entry)
        e_l = (big_j - 1) * step
        e_r = big_j * step
        d_l = spectral_bound(e_l, big_j, sums, step, theta, log_scale, p_inf, inf_err, err_l1, upper, floor)
        d_r = spectral_bound(e_r, big_j, sums, step, theta, log_scale, p_inf, inf_err, err_l1, upper, floor)
        if d_l > target >= d_r:
            # crossing inside the bin: bisect the closed form, keeping > target at lo
            lo = e_l
            hi = e_r
            for _ in range(64):
                mid = 0.5 * (lo + hi)
                if mid <= lo or mid >= hi:
                    break
                b = spectral_bound(mid, big_j, sums, step, theta, log_scale, p_inf, inf_err, err_l1,
                                   upper, floor)
                if b > target:
                    lo = mid
                else:
                    hi = mid
            ans = hi if upper else lo
            chk = spectral_bound(ans, big_j, sums, step, theta, log_scale, p_inf, inf_err, err_l1,
                                 upper, floor)
            if ((chk <= target) if upper else (chk > target)) and not loose(ans, big_j, sums, step):
                return max(ans, 0.0), True
            return 0.0, False
        if d_r > target:  # crossing above the bin
            lo_j = big_j
            known_lo = True
        else:  # d_l <= target: crossing below the bin
            hi_j = big_j - 1
            known_hi = True
        if hi_j - lo_j < 1:
            return 0.0, False
        # Newton on log δ over bins: slope from the bin's two ends
        nxt = -1
        if d_l > 0.0 and d_r > 0.0 and d_l > d_r:
            slope = math.log(d_r) - math.log(d_l)  # per bin, < 0
            delta_j = (lt - math.log(d_r)) / slope
            if math.isfinite(delta_j):
                delta_j = max(min(delta_j, n + 1.0), -(n + 1.0))  # (an int of a huge float would overflow)
                cand = big_j + int(math.ceil(delta_j)) if delta_j > 0 else big_j + int(math.floor(delta_j))
                nxt = cand
        if not (lo_j < nxt <= hi_j) or nxt == big_j:
            if known_lo and known_hi:
                nxt = (lo_j + hi_j + 1) // 2
            elif known_lo:
                nxt = min(hi_j, big_j + 2 * max(1, big_j - j0 + 1) // 8 + 1)
            else:
                nxt = max(lo_j + 1, big_j - 2 * max(1, top - big_j + 1) // 8 - 1)
        big_j = min(max(nxt, lo_j + 1), hi_j)
    return 0.0, False
