"""One step of the SGM on the loss grid: pessimistic and optimistic masses.

The PESSIMISTIC discretisation (δ never below the truth) is the "connect-the-dots" PLD of
Doroshenko, Ghazi, Kamath, Kumar & Manurangsi, "Connect the dots: tighter discrete
approximations of privacy loss distributions", PETS 2022 (Algorithm 1 / Theorem 3.3): the P-mass
of each loss bin [ell_j, ell_{j+1}] is split between the two grid points so that both its P-mass
and its Q-mass (= E_P[e^{-L}] over the bin) are preserved.  Because (1 - e^{eps} u)_+ is convex
in u = e^{-ell}, this is a mean-preserving spread in u, so by Jensen every δ(eps) can only grow;
convex order in u is kept by products of independent variables, i.e. by composition.

The OPTIMISTIC discretisation (δ never above the truth) uses the converse order: each bin is
first collapsed to its conditional u-mean (a contraction), and the atoms are then put on the
grid by the convex-order minorant of their call function (``_minorant_to_grid``) or, where that
does not apply, merged onto the grid point between adjacent atoms (``_contract_to_grid``;
merging is again a contraction); whatever cannot be merged is rounded *down* in loss (u up),
which lowers every δ(eps) since (s - u)_+ is non-increasing in u.  Every function
h(u) = E_Y[(1 - e^{eps} u Y)_+] is convex and non-increasing, so the inequality survives
composition with any other PLD.

Rounding: the pessimistic masses are inflated by the bins' error bounds plus ``MASS_SLACK`` and
the split moved up by a bound on its rounding error, the optimistic masses deflated and atoms
moved down.
"""

import math

import numpy as np

from .._jit import jit
from ..logmath import EPS64, NEG_INF
from .bins import MASS_SLACK, mass_slack

__all__ = ["discretise_direction", "optimistic_step"]


@jit
def discretise_direction(sigma, q, step, k_lo, lm0, ls, le, j_lo, j_hi, add, lp_low, lp_high, err0, pess, frac, amass):
    """One direction of one SGM step on the grid points j_lo..j_hi (inclusive), from ``step_bins``
    (or, for the replace-one pair, ``replace_bins`` read with add=True).

    Fills ``pess`` (connect-the-dots masses, length n = j_hi - j_lo + 1) and the optimistic
    atoms ``frac``/``amass`` (see ``optimistic_step``); returns (p_inf, top): the
    pessimistic +inf mass (P-mass above the top grid point) and the optimistic mass moved
    down onto the top point.  Pessimistic: mass below the grid moves up to the lowest point,
    mass above goes to +inf.  Optimistic: mass below is dropped, mass above moves down to
    the top point.  Bin i (loss [ell_i, ell_i + step]) is remove-loss bin k = j_lo + i
    (remove) or k = -(j_lo + i) - 1 (add) of the arrays starting at ``k_lo``.

    Per bin: fp = pessimistic fraction of the mass sent up to point i+1 (rounded up);
    frac = loss offset of the optimistic atom above point i (rounded down), -1 if empty;
    amass = the bin's P-mass deflated by the slack (0 for an empty bin).
    """
    n = j_hi - j_lo + 1
    for i in range(n):
        pess[i] = 0.0
        frac[i] = -1.0
        amass[i] = 0.0
    # tails: lp_low / lp_high are the log P-masses below / above the grid
    p_inf = math.exp(lp_high) * (1.0 + mass_slack(lp_high))
    pess[0] += math.exp(lp_low) * (1.0 + mass_slack(lp_low))
    top = math.exp(lp_high) * (1.0 - mass_slack(lp_high))
    em = -math.expm1(-step)  # e^{-ell_j} - e^{-ell_{j+1}}, relative to e^{-ell_j}
    # err0: the edges' rounding in loss units is <= 8u err0 (see the caller)
    for i in range(n - 1):
        ell = (j_lo + i) * step
        k = -(j_lo + i) - 1 if add else j_lo + i
        l0 = lm0[k - k_lo]
        if l0 == NEG_INF:
            continue
        s = ls[k - k_lo]
        # r = log(e^{ell_j} * Q/P), in [-step, 0] in exact arithmetic
        if add:
            lp = l0
            r = ell + s
        else:
            lp = l0 + s
            r = ell - s
        m = math.exp(lp)
        # relative mass error: the bin's log-error bound (it also bounds the error of s), plus
        # the exp; MASS_SLACK on top
        slack = MASS_SLACK + le[k - k_lo] + 4.0 * EPS64 * (abs(lp) + 1.0)
        if r > 0.0:
            r = 0.0
        if r < -step:
            r = -step
        # bound on the error of r = ell +- s: that of s (within the bin's log-error bound), the
        # rounding of the edges (<= 8u err0 in loss) and of ell and r
        err_r = le[k - k_lo] + 8.0 * EPS64 * (abs(ell) + abs(s) + err0 + 1.0)
        fp = min(1.0, -math.expm1(r) / em + err_r / em)
        mp = m * (1.0 + slack)
        pess[i] += mp * (1.0 - fp)
        pess[i + 1] += mp * fp
        # optimistic atom at the conditional u-mean, moved down by the error bound
        pos = -r - err_r
        frac[i] = pos if pos > 0.0 else 0.0
        amass[i] = m * (1.0 - slack)
    return p_inf, top


@jit
def optimistic_step(step, frac, amass, top, opt):
    """The optimistic one-step masses from the atoms of ``discretise_direction``: the convex-order
    minorant where it applies, else merging by contractions; ``top`` goes onto the top point."""
    n = opt.shape[0]
    for i in range(n):
        opt[i] = 0.0
    opt[n - 1] += top
    if not _minorant_to_grid(step, n, frac, amass, opt):
        _contract_to_grid(step, n, frac, amass, opt)


@jit
def _minorant_to_grid(step, n, frac, amass, opt):
    """Optimistic grid masses as the convex-order minorant of the bin atoms; False if it does not apply.

    In u = e^{-ell} the masses nu_i on the grid are dominated in convex order
    by the distribution mu of the bin atoms (a mean-preserving *contraction* of
    mu) iff the call function C_nu(k) = E_nu[(u - k)_+] lies below C_mu with the
    same mean.  C_nu is piecewise linear with knots at the grid points; start
    from the chord interpolation of C_mu at the knots (the connect-the-dots
    masses, which lie *above* C_mu) and lower each knot value by D_i.  The
    chord of a bin exceeds C_mu by at most G = m f (1 - f) w (bin mass m,
    fraction f of its u-mean towards the next point, u-width w), so a lowering
    of max(G_{i-1}, G_i) at each knot puts every segment below C_mu; the two end
    knots are pinned (D = 0, keeping the mean) and their neighbours lowered by
    the one-sided amount E|x - u| over the end bin.  Knots whose resulting mass
    is negative are removed (lower convex hull: their negative mass is
    interpolated onto the neighbouring knots, preserving mass and mean), which
    only lowers C_nu further.  All quantities are local masses, so tails keep
    their relative precision.  The variance lost is O(m w^2) per bin, versus
    the first-order shift of rounding atoms down.
    """
    if n < 8 or step > 300.0:  # (e^step must stay far inside the float range)
        return False
    ed = math.exp(-step)
    eu = math.exp(step)
    em = -math.expm1(-step)
    f = np.zeros(n)
    m = np.zeros(n)
    for i in range(n - 1):
        w = amass[i]
        if w > 0.0:
            m[i] = w
            f[i] = min(1.0, max(0.0, -math.expm1(-frac[i]) / em))
    # a_i = D_i / w_i (w_i: u-width of the bin between points i and i+1; w_i / w_{i-1} = e^{-step})
    a = np.zeros(n)
    for i in range(1, n - 1):
        gl = m[i - 1] * f[i - 1] * (1.0 - f[i - 1]) * eu
        gr = m[i] * f[i] * (1.0 - f[i])
        a[i] = max(gl, gr)
    # bottom end: point 0 pinned
    end = m[0] * (1.0 - f[0]) * eu
    g1 = m[1] * f[1] * (1.0 - f[1])
    a[1] = end
    if end < g1:
        # bin 1 is covered one-sidedly by point 2: D_2 >= m_1 (1 - f_1) w_1
        a[2] = max(a[2], m[1] * (1.0 - f[1]) * eu)
    # top end: point n-1 pinned
    k = n - 2
    end = m[k] * f[k]
    gk = m[k - 1] * f[k - 1] * (1.0 - f[k - 1]) * eu
    if k - 1 <= 2:
        return False
    a[k] = end
    if end < gk:
        a[k - 1] = max(a[k - 1], m[k - 1] * f[k - 1])
    nu = np.zeros(n)
    for i in range(n - 1):
        nu[i] += m[i] * (1.0 - f[i])
        nu[i + 1] += m[i] * f[i]
    nu[0] -= a[1] * ed
    for i in range(1, n - 1):
        nu[i] += a[i] * (1.0 + ed) - a[i + 1] * ed - a[i - 1]
    # the pinned end knots get exactly zero (a[1] and a[n-2] equal their end terms); avoid rounding residue
    nu[0] = 0.0
    nu[n - 1] = 0.0
    if not _lower_hull(nu, step):
        return False
    if nu[0] < 0.0 or nu[n - 1] < 0.0:
        return False
    for i in range(n):
        if nu[i] < 0.0:
            return False
    for i in range(n):
        opt[i] += nu[i] * (1.0 - 1e-12)
    return True


@jit
def _lower_hull(nu, step):
    """Remove the knots with negative mass (lower convex hull of the call function): each one's
    mass is interpolated onto its neighbouring knots, preserving mass and u-mean, which only
    lowers the call function further.  False where two knots lie too far apart in loss for
    the u-distances to be represented (the caller then merges by contractions)."""
    n = nu.shape[0]
    stack = np.empty(n, dtype=np.int64)
    top = 0
    stack[0] = 0
    for i in range(1, n):
        stack[top + 1] = i
        top += 1
        # resolve a negative knot just below the top (its right neighbour is i)
        while top >= 2 and nu[stack[top - 1]] < 0.0:
            j = stack[top - 1]
            left = stack[top - 2]
            right = stack[top]
            # u-distances: u_left - u_j and u_j - u_right (u_i proportional to e^{-i step})
            da = math.expm1((j - left) * step)
            db = -math.expm1(-(right - j) * step)
            if da == math.inf:
                return False  # knots ~700 nats apart (huge empty stretches): merge by contractions
            # relative to u_j: u_left - u_j = u_j (e^{(j-left) step} - 1), u_j - u_right = u_j (1 - e^{-(right-j) step})
            v = nu[j]
            nu[left] += v * db / (da + db)
            nu[right] += v * da / (da + db)
            nu[j] = 0.0
            stack[top - 1] = right
            top -= 1
    return True


@jit
def _contract_to_grid(step, n, frac, amass, opt_out):
    """Merge the optimistic atoms onto grid points by contractions (sweep from high loss down).

    Atom i sits at loss offset frac[i] in [0, step] above grid point i.  A carry
    atom above grid point g and an atom below g are merged in the proportions that
    put their u-mean exactly on g; the u-weight ratio is computed with expm1 and
    biased so that any rounding error leaves the merged mass at or below g in loss.

    The merges conserve mass in exact arithmetic only (deposits c_m + beta, alpha + w and the
    remainders round either way: measured 4.2 u above the atoms' total on a Poisson step,
    tests/test_rounding_constants_rest.py).  So the deposits are made apart and scaled by
    f = min(1, M / D) (1 - 8 EPS64) before they join ``opt_out``, M and D the atoms' and the
    deposits' totals by compensated sums (each within 2 u + O(n u^2) of the exact one): the
    division and the products add u each, so what joins is at most the atoms' exact mass.
    """
    opt = np.zeros(n)
    has_carry = False
    c_idx = 0
    c_pos = 0.0
    c_m = 0.0
    for i in range(n - 2, -1, -1):
        w = amass[i]
        if w <= 0.0:
            continue
        a = frac[i]
        if a <= 0.0:
            opt[i] += w
            continue
        if a >= step:
            opt[i + 1] += w
            continue
        if not has_carry:
            has_carry = True
            c_idx = i
            c_pos = a
            c_m = w
            continue
        # carry at loss (c_idx*step + c_pos), atom at (i*step + a), target grid point g = i+1
        g = i + 1
        d_c = (c_idx - g) * step + c_pos  # carry loss above g (> 0)
        d_a = step - a  # g above atom (> 0)
        # u_g - u_c = e^{-g}(1 - e^{-d_c}); u_a - u_g = e^{-g}(e^{d_a} - 1)
        ratio = -math.expm1(-d_c) / math.expm1(d_a)  # atom mass per unit carry mass
        beta = c_m * ratio * (1.0 - 1e-12)
        if beta <= w:
            opt[g] += c_m + beta
            w -= beta
            has_carry = False
            if w > 0.0:
                has_carry = True
                c_idx = i
                c_pos = a
                c_m = w
        else:
            alpha = min(c_m, w / ratio * (1.0 + 1e-12))
            opt[g] += alpha + w
            c_m -= alpha
            if c_m <= 0.0:
                has_carry = False
    if has_carry:
        c_m = _absorb_last_carry(step, n, c_idx, c_pos, c_m, opt)
        if c_m > 0.0:
            opt[c_idx] += c_m
    atoms = _compensated_sum(amass[: n - 1], bool(True))
    dep = _compensated_sum(opt, bool(False))
    f = 1.0 - 8.0 * EPS64
    if dep > 0.0 and atoms < dep:
        f *= atoms / dep
    for k in range(n):
        opt_out[k] += opt[k] * f


#: grid points above the last carry that ``_absorb_last_carry`` may take mass from
ABSORB_REACH = 16


@jit
def _absorb_last_carry(step, n, c_idx, c_pos, c_m, opt):
    """Merge the sweep's last carry (mass c_m at loss offset c_pos in (0, step) above grid point
    c_idx) onto grid point g = c_idx + 1 with mass already deposited on points p > g (a merge of
    deposits, each itself a merge of atoms: again a contraction); returns the carry left, which the
    caller rounds down.  Rounding the whole carry down lost c_m (step - c_pos) of u-mean, first order
    in the step: where the loss has a hard lower end with mass beside it (the remove direction's
    log(1 - q)) a whole step's worth at 2e-3 of the step per step (q 0.004, sigma 1, step 2e-4:
    the lower eps 2.3e-3 below the truth at T 10^4).

    With u_x - u_g = e^{-g step} expm1(step - c_pos) and u_g - u_p = e^{-g step} (-expm1(-(p - g)
    step)), the merged mean is at or above g in loss iff the partner's share beta >= c_m R, R the
    ratio of the two; the kernel takes beta = c_m R_float (1 + 1e-12) (or, where point p holds
    less, all of it with the carry's share alpha = opt[p] / R_float (1 - 1e-12)), with the margin of
    ``_contract_to_grid``'s merges (R_float within ~6u).  Placing a mean that lies at or above g in
    loss on g rounds it down: allowed."""
    g = c_idx + 1
    if g >= n - 1:
        return c_m
    up = math.expm1(step - c_pos)
    for p in range(g + 1, min(n, g + 1 + ABSORB_REACH)):
        avail = opt[p]
        if avail <= 0.0:
            continue
        ratio = up / -math.expm1(-(p - g) * step)  # (partner mass per unit carry mass)
        beta = c_m * ratio * (1.0 + 1e-12)
        if beta <= avail:
            opt[p] = avail - beta
            opt[g] += c_m + beta
            return 0.0
        alpha = min(c_m, avail / ratio * (1.0 - 1e-12))
        opt[p] = 0.0
        opt[g] += alpha + avail
        c_m -= alpha
        if c_m <= 0.0:
            return 0.0
    return c_m


@jit
def _compensated_sum(a, positive_only):
    """Neumaier's compensated sum of a (of its positive entries if ``positive_only``): within
    2 u |sum| + O(n u^2) sum |a_i| of the exact sum (non-negative terms here)."""
    s = 0.0
    c = 0.0
    for k in range(a.shape[0]):
        x = a[k]
        if positive_only and not x > 0.0:
            continue
        t = s + x
        if abs(s) >= abs(x):
            c += (s - t) + x
        else:
            c += (x - t) + s
        s = t
    return s + c
