"""Amplification by subsampling for pure DP (Steinke, "Limits of privacy amplification by
subsampling", DifferentialPrivacy.org), Eqs. (3)-(8)."""

from __future__ import annotations

import numpy as np

from .._validation import as_float_array, check_epsilon, check_q


def _check_p(p):
    return check_q(p, "p")


def amplified_epsilon(epsilon, p):
    """epsilon' = log(1 + p (e^epsilon - 1)): an epsilon-DP mechanism run on a Poisson
    p-subsample is epsilon'-DP (inverse of Eq. (3) of Steinke's "Limits of privacy
    amplification by subsampling").

    Examples
    --------
    >>> from sgmfast.analysis import amplified_epsilon, base_epsilon
    >>> round(amplified_epsilon(1.0, 0.01), 6)
    0.017037
    >>> round(float(base_epsilon(amplified_epsilon(1.0, 0.01), 0.01)), 12)
    1.0
    """
    e = check_epsilon(epsilon)
    pp = _check_p(p)
    out = np.log1p(pp * np.expm1(e))
    return float(out) if np.ndim(out) == 0 else out


def base_epsilon(epsilon, p):
    """epsilon_p = log(1 + (e^epsilon - 1)/p), Eq. (3) of Steinke: the epsilon a base mechanism
    may have so that its p-subsampled version is epsilon-DP (inverse of
    :func:`amplified_epsilon`).

    Examples
    --------
    >>> from sgmfast.analysis import base_epsilon
    >>> round(base_epsilon(0.01, 0.01), 4)   # ~ epsilon/p for small epsilon
    0.6957
    """
    e = check_epsilon(epsilon)
    pp = _check_p(p)
    out = np.log1p(np.expm1(e) / pp)
    return float(out) if np.ndim(out) == 0 else out


def noise_scale_ratio(epsilon, p):
    """p epsilon_p / epsilon, Eq. (7) of Steinke: the standard mechanism's noise scale over
    the subsampled one's (1/(epsilon n) vs 1/(epsilon_p p n)); in [p/(p + epsilon), 1], and
    >= log(1 + c)/c when epsilon <= c p (Eq. (8)). Its limit 1 is returned at epsilon = 0.

    Examples
    --------
    >>> from sgmfast.analysis import noise_scale_ratio, noise_inflation_bound
    >>> r = noise_scale_ratio(0.02, 0.01)          # epsilon = 2 p
    >>> 1 / noise_inflation_bound(2.0) <= r <= 1
    True
    """
    e = check_epsilon(epsilon)
    pp = _check_p(p)
    e, pp = np.broadcast_arrays(e, pp)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(e > 0, pp * np.log1p(np.expm1(e) / pp) / np.where(e > 0, e, 1.0), 1.0)
    return float(r) if np.ndim(r) == 0 else r


def noise_inflation_bound(c):
    """c / log(1 + c), Eq. (8) of Steinke: if epsilon <= c p, the p-subsampled mechanism adds
    at most this many times the noise of the standard one (the infimum of
    :func:`noise_scale_ratio` over epsilon in (0, c p] is its reciprocal).

    Examples
    --------
    >>> from sgmfast.analysis import noise_inflation_bound
    >>> round(noise_inflation_bound(1.0), 4)
    1.4427
    """
    cc = as_float_array(c, "c")
    if not (np.isfinite(cc) & (cc > 0)).all():
        raise ValueError(f"c must be finite and > 0; got {cc[~(np.isfinite(cc) & (cc > 0))].flat[0]!r}")
    out = cc / np.log1p(cc)
    return float(out) if np.ndim(out) == 0 else out
