"""Numba kernels: pure functions on float64 scalars and arrays.

Nothing in this sub-package imports from the rest of sgmfast. Kernels never
raise: they signal trouble by returning NaN, +inf or a status code, and the
Python layer above decides what the user sees.
"""
