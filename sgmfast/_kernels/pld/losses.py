"""The privacy-loss functions of one SGM step and their inverses.

Add/remove pair (Mironov et al. 2019; Zhu, Dong & Wang 2022): remove P = (1-q)N(0, s^2) + qN(1, s^2),
Q = N(0, s^2), loss ell_rem(z) = log(1 - q + q e^{(2z-1)/(2s^2)}), increasing in z; add: the pair
swapped, loss -ell_rem(z).  Replace-one pair: P = (1-q)N(0, s^2) + qN(-1, s^2) against
Q = (1-q)N(0, s^2) + qN(1, s^2) -- a record whose clipped contribution (norm <= 1) is replaced by
another shifts the sum by up to 2, split as -1 / +1 around the other records' sum; the loss
log(P/Q)(z) is decreasing in z and symmetric (z -> -z swaps P and Q), so one direction describes it.
"""

import math

from .._jit import jit
from ..logmath import NEG_INF, log_add, log_expm1, log_normal_pdf

__all__ = ["remove_loss", "replace_loss", "replace_z", "loss_moments", "z_of_loss_with"]


@jit
def remove_loss(z, sigma, q):
    """ell_rem(z) = log(1 - q + q exp((2z - 1)/(2 sigma^2))), without overflow."""
    x = (2.0 * z - 1.0) / (2.0 * sigma * sigma)
    if q >= 1.0:
        return x
    return log_add(math.log1p(-q), math.log(q) + x)


@jit
def _z_of_loss(x, sigma, q):
    """Inverse of the remove loss: z with ell_rem(z) = x; -inf when x <= log(1 - q)."""
    return z_of_loss_with(x, sigma * sigma, q, math.log1p(-q) if q < 1.0 else NEG_INF, math.log(q))


@jit
def z_of_loss_with(x, s2, q, l1q, log_q):
    """``_z_of_loss`` with its constants given (s2 = sigma^2, l1q = log1p(-q), log_q = log(q)),
    for loops over many x: log(e^x - (1 - q)), -inf at or below the remove loss's lower end
    log(1 - q), then z = s2 (that - log q) + 1/2."""
    if q >= 1.0:
        ld = x
    elif x <= l1q:
        return NEG_INF
    else:
        ld = l1q + log_expm1(x - l1q)
    if ld == NEG_INF:
        return NEG_INF
    return s2 * (ld - log_q) + 0.5


@jit
def replace_loss(z, sigma, q):
    """log(P/Q)(z) of the replace-one pair, without overflow."""
    s2 = sigma * sigma
    lq = math.log(q)
    if q >= 1.0:
        return -2.0 * z / s2
    l1q = math.log1p(-q)
    return log_add(l1q, lq - (2.0 * z + 1.0) / (2.0 * s2)) - log_add(l1q, lq + (2.0 * z - 1.0) / (2.0 * s2))


@jit
def replace_z(ell, sigma, q):
    """The z with replace_loss(z) = ell: z = s^2 log u, u the positive root of
    e^ell q c u^2 + (1 - q)(e^ell - 1) u - q c = 0, c = e^{-1/(2 s^2)}, in a form free of
    cancellation and overflow on either side of ell = 0."""
    s2 = sigma * sigma
    a = 1.0 - q
    l2qc = math.log(2.0 * q) - 0.5 / s2  # log(2 q c)
    if ell >= 0.0:
        e = -math.expm1(-ell)  # 1 - e^{-ell}
        rad = math.sqrt(a * a * e * e + math.exp(2.0 * l2qc - ell))
        lu = l2qc - ell - math.log(a * e + rad)
    else:
        e = -math.expm1(ell)  # 1 - e^{ell}
        rad = math.sqrt(a * a * e * e + math.exp(2.0 * l2qc + ell))
        lu = math.log(a * e + rad) - ell - l2qc
    return s2 * lu


@jit
def loss_moments(sigma, q, kind, npts):
    """Mean and variance of the one-step loss under P by the trapezoid rule in z, for the
    remove (kind 0), add (1) or replace-one (2) pair.

    Only used to choose the grid step and the FFT window (never for a bound).
    """
    shift = -1.0 if kind == 2 else 0.0  # the replace-one P is centred at 0 and -1
    lo = shift - 14.0 * sigma
    hi = shift + 1.0 + 14.0 * sigma
    h = (hi - lo) / (npts - 1)
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    for i in range(npts):
        z = lo + i * h
        wt = 0.5 if (i == 0 or i == npts - 1) else 1.0
        d0 = math.exp(log_normal_pdf(z / sigma))
        if kind == 1:
            dens = d0
            l = -remove_loss(z, sigma, q)
        else:
            d1 = math.exp(log_normal_pdf((z - 1.0 - 2.0 * shift) / sigma))  # N(1) or N(-1)
            dens = (1.0 - q) * d0 + q * d1
            l = replace_loss(z, sigma, q) if kind == 2 else remove_loss(z, sigma, q)
        s0 += wt * dens
        s1 += wt * dens * l
        s2 += wt * dens * l * l
    m = s1 / s0
    v = s2 / s0 - m * m
    return m, max(v, 0.0)
