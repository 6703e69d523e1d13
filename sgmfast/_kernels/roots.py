"""Brent's zeroin as a step function, shared by every root solve in the package.

The callers own the function evaluation (a Numba kernel, or Python calling an
accountant), so the iteration is split: ``zeroin_step`` takes the state after the
last evaluation and returns the state with the next point ``b`` to evaluate, or
``done`` when the bracket [b, c] is within the tolerance.  Brent (1973), ch. 4.
"""

from ._jit import jit

__all__ = ["zeroin_step"]


@jit
def zeroin_step(a, fa, b, fb, c, fc, d, e, tol, rel):
    """One iteration of zeroin; start with c = a, fc = fa, d = e = b - a.

    The root stays bracketed by b and c throughout.  Tolerance: rel |b| + tol / 2.
    Returns (a, fa, b, fb, c, fc, d, e, done); when not done, b is the next point and the
    returned fb is stale (the caller evaluates f(b)).
    """
    if (fb > 0.0) == (fc > 0.0):
        c = a
        fc = fa
        d = b - a
        e = d
    if abs(fc) < abs(fb):
        a = b
        b = c
        c = a
        fa = fb
        fb = fc
        fc = fa
    tol1 = rel * abs(b) + 0.5 * tol
    xm = 0.5 * (c - b)
    if abs(xm) <= tol1 or fb == 0.0:
        return a, fa, b, fb, c, fc, d, e, True
    if abs(e) >= tol1 and abs(fa) > abs(fb):
        s = fb / fa
        if a == c:
            p = 2.0 * xm * s
            qq = 1.0 - s
        else:
            qq = fa / fc
            r = fb / fc
            p = s * (2.0 * xm * qq * (qq - r) - (b - a) * (r - 1.0))
            qq = (qq - 1.0) * (r - 1.0) * (s - 1.0)
        if p > 0.0:
            qq = -qq
        p = abs(p)
        if 2.0 * p < min(3.0 * xm * qq - abs(tol1 * qq), abs(e * qq)):
            e = d
            d = p / qq
        else:
            d = xm
            e = d
    else:
        d = xm
        e = d
    a = b
    fa = fb
    if abs(d) > tol1:
        b += d
    else:
        b += tol1 if xm > 0.0 else -tol1
    return a, fa, b, fb, c, fc, d, e, False
