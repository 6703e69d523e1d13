"""Rounding constants of the tuning bounds (the premises of the rounding charge, module notes of
:mod:`sgmfast.tuning`, (d))."""

#: Relative round-up of every RDP value and of the derived terms (their float error is a few ulps)
_REL = 1e-12
#: Unit roundoff of float64 (half an ulp of 1)
_U = 2.0 ** -53
#: Relative error assumed of one call of exp, expm1, log or log1p (math or numpy): 8 ulps = 16 u.
#: glibc documents 1-2 ulps for these, numpy's SIMD versions 4; the one premise of the rounding
#: charge (module notes, (d)) that is not proved here
_F = 16.0 * _U
#: Relative round-up of the computed 1 - l(u) (each of its forms is within _F + 3 u; module notes)
_GAP = 4.0 * _F
#: Below this, exp's result may be subnormal (no relative accuracy): phi' is then taken as 0
#: (rounding down) or as twice this (rounding up)
_TINY = 2.0 ** -1000
