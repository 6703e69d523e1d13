"""A pair on the loss grid, subsampled: its first measure mixed with its second.

For a pair (P, Q) and a rate p in (0, 1], the remove direction of the subsampled pair is
((1 - p) Q + p P, Q) and the add direction (Q, (1 - p) Q + p P).  Atom by atom (an atom: a
first-measure mass m at loss ell, its second-measure mass m e^{-ell}):

* remove (first measure P): the atom goes to loss log(1 - p + p e^{ell}) with first-measure mass
  m ((1 - p) e^{-ell} + p) and the same second-measure mass; an atom at +inf keeps its loss with
  mass p m; the second measure's mass where P has none (1 - sum m e^{-ell}, or 0 where the atoms
  hold more) becomes an atom at log(1 - p) of mass (1 - p) times it.  (For e^eps < 1 - p the new
  δ is p sum m + (1 - p) - e^eps, with 1 - sum m e^{-ell} >= 0; less of that atom only lowers it,
  which the lower side may do and the upper side's rounding of the sum never does.)
* add (first measure Q): the atom goes to loss -log(1 - p + p e^{-ell}) with the same first-measure
  mass; an atom at +inf goes to -log(1 - p).

With δ(eps) = sum m (1 - e^{eps - ell})_+ the subsampled pair's δ is a non-decreasing function of
the pair's own δ at one point (remove: p δ(log((e^eps - 1 + p) / p)) where e^eps > 1 - p, else
p δ(-inf) + 1 - p - e^eps; add: (1 - e^eps (1 - p)) δ(log(e^eps p / (1 - e^eps (1 - p)))) where
that factor is positive, else 0), so a pair above (below) another at every eps stays above
(below) after it: the pessimistic (optimistic) masses of a pair subsample to pessimistic
(optimistic) masses of the subsampled pair.  The new losses leave the grid; they go back onto it
as stage 1 does (``discretise``): connect-the-dots for the upper masses (both measures kept, the
split rounded up), and for the lower ones one atom per bin -- the atoms landing in a bin merged
(post-processing), its loss offset rounded down -- for ``discretise.optimistic_step``.

Rounding.  Each new loss ell' is within 8 u (|ell| + |ell'| + 2) of its exact value (a log or
log1p of a product of an exp or expm1, and a sum with ell, u the unit round-off), each mass within
6 u relative; the upper side moves losses up by 1e-13 (|ell| + |ell'| + 2) and masses up by 1e-12
relative, the lower side both down.  A
bin's merged offset is -log of a mass-weighted mean of numbers in (e^{-step}, 1] (c terms: within
(c + 4) u relative), taken down by (c + 8) 4u, and never below 0, which the exact mean of offsets
>= 0 is not either.  Tests: tests/test_allocation_partial.py.
"""

import math

import numpy as np

from .._jit import jit

__all__ = ["moved_loss", "subsample_upper", "subsample_lower"]

_MOVE = 1e-13  # (loss moved by this times |ell| + 2: covers 8 u (|ell| + 2))
_MASS = 1e-12  # (masses scaled by 1 +- this: covers 6 u)
U = 2.0 ** -53


@jit
def moved_loss(ell, p, add):
    """The subsampled loss of an atom at ``ell`` (module notes), to a few ulps."""
    if add:
        ell = -ell
    if ell > 0.0:  # (ell + log(p + (1 - p) e^{-ell}): no overflow)
        out = ell + math.log(p + (1.0 - p) * math.exp(-ell))
    else:
        out = math.log1p(p * math.expm1(ell))
    return -out if add else out


@jit
def _ctd(ell, ell_in, m, j_lo, step, em, out):
    """Connect-the-dots of first-measure mass ``m`` at loss ``ell`` (moved up by 1e-13 (|ell| +
    |ell_in| + 2), ``ell_in`` the loss it was computed from) onto the grid (j_lo, out.size): both
    measures kept, the split towards the upper point rounded up; below the grid onto its lowest
    point (moved up); returns what lies above the top point (for +inf)."""
    n = out.shape[0]
    ell = ell + _MOVE * (abs(ell) + abs(ell_in) + 2.0)
    m = m * (1.0 + _MASS)
    x = ell / step - j_lo
    if x <= 0.0:
        out[0] += m
        return 0.0
    if x > n - 1:
        return m
    a = min(int(math.floor(x)), n - 2)
    d = ell - (j_lo + a) * step  # (>= 0 up to the product's rounding: the fraction is rounded up)
    f = -math.expm1(-max(d, 0.0)) / em + 1e-12
    if f > 1.0:
        f = 1.0
    out[a] += m * (1.0 - f)
    out[a + 1] += m * f
    return 0.0


@jit
def subsample_upper(pess, p_inf, j_lo, step, p, add, j_out, step_out, out):
    """Upper masses on the grid (j_out, out.size) of spacing ``step_out`` of the pair with
    pessimistic masses ``pess`` on the grid (j_lo, pess.size) of spacing ``step`` and ``p_inf`` at
    +inf, subsampled at rate ``p`` (module notes), into ``out`` (zeroed here); returns the mass at
    +inf."""
    n = pess.shape[0]
    for i in range(out.shape[0]):
        out[i] = 0.0
    em = -math.expm1(-step_out)
    inf = 0.0
    second = 0.0  # (the second measure's mass on the grid, rounded down)
    for i in range(n):
        m = pess[i]
        if m <= 0.0:
            continue
        ell = (j_lo + i) * step
        if add:
            inf += _ctd(moved_loss(ell, p, add), ell, m, j_out, step_out, em, out)
        else:
            e = math.exp(-ell)
            second += m * e * (1.0 - 4 * U)
            inf += _ctd(moved_loss(ell, p, add), ell, m * ((1.0 - p) * e + p), j_out, step_out, em, out)
    if add:
        if p_inf > 0.0:
            if p < 1.0:
                inf += _ctd(-math.log1p(-p), 0.0, p_inf, j_out, step_out, em, out)
            else:
                inf += p_inf
    else:
        inf += p * p_inf * (1.0 + _MASS)
        rest = 1.0 - second * (1.0 - (n + 4.0) * U)  # (the second measure's mass off the grid, rounded up)
        if rest > 0.0 and p < 1.0:
            inf += _ctd(math.log1p(-p), 0.0, (1.0 - p) * rest, j_out, step_out, em, out)
    return inf


@jit
def _put_lower(ell2, m, j_lo, step, u_sum, mass, count):
    """An atom (loss ``ell2``, taken down already; mass ``m``) into its bin's merge; returns the mass
    at or above the top point (moved down to it); below the grid it is dropped."""
    n = mass.shape[0]
    x = ell2 / step - j_lo
    if x < 0.0:
        return 0.0
    b = int(math.floor(x))
    if b >= n - 1:
        return m
    d = ell2 - (j_lo + b) * step
    if d < 0.0:  # (the product's rounding: the bin below, the offset taken down)
        if b == 0:
            return 0.0
        b -= 1
        d = ell2 - (j_lo + b) * step
    d = min(d, step * (1.0 - 1e-9))
    u_sum[b] += m * math.exp(-d)
    mass[b] += m
    count[b] += 1.0
    return 0.0


@jit
def subsample_lower(frac, amass, top, j_lo, step, p, add, j_out, step_out, out_frac, out_mass):
    """Lower atoms on the grid (j_out, out_frac.size) of spacing ``step_out`` -- per bin a loss
    offset above its lower point (``out_frac``, -1 where empty) and a first-measure mass
    (``out_mass``) -- of the pair whose optimistic atoms on the grid (j_lo, frac.size) of spacing
    ``step`` are (``frac``, ``amass``) and ``top`` at the top point, subsampled at rate ``p`` (module
    notes; its +inf mass, none here, would be dropped); returns the mass at the top point."""
    n = frac.shape[0]
    n_out = out_frac.shape[0]
    u_sum = np.zeros(n_out)  # (per bin: sum of mass * e^{-offset}, the atoms' count)
    count = np.zeros(n_out)
    for i in range(n_out):
        out_frac[i] = -1.0
        out_mass[i] = 0.0
    new_top = 0.0
    second = 0.0  # (the second measure's mass on the grid, rounded up)
    for i in range(n):
        if i < n - 1:
            if not (frac[i] >= 0.0 and amass[i] > 0.0):
                continue
            ell, m = (j_lo + i) * step + frac[i], amass[i]
        else:
            if not top > 0.0:
                continue
            ell, m = (j_lo + n - 1) * step, top
        ell2 = moved_loss(ell, p, add)
        ell2 -= _MOVE * (abs(ell2) + abs(ell) + 2.0)
        if not add:
            e = math.exp(-ell)
            second += m * e * (1.0 + 4 * U)
            m = m * ((1.0 - p) * e + p)
        new_top += _put_lower(ell2, m * (1.0 - _MASS), j_out, step_out, u_sum, out_mass, count)
    if not add and p < 1.0:  # (the second measure's mass off the grid, rounded down: at log(1 - p))
        rest = 1.0 - second * (1.0 + (n + 4.0) * U)
        if rest > 0.0:
            ell2 = math.log1p(-p)
            ell2 -= _MOVE * (abs(ell2) + 2.0)
            new_top += _put_lower(ell2, (1.0 - p) * rest * (1.0 - _MASS), j_out, step_out, u_sum, out_mass, count)
    for b in range(n_out - 1):
        m = out_mass[b]
        if m > 0.0:
            d = -math.log(u_sum[b] / m) - (count[b] + 8.0) * 4.0 * U
            out_frac[b] = d if d > 0.0 else 0.0
            out_mass[b] = m * (1.0 - 4.0 * (count[b] + 4.0) * U)
    return new_top
