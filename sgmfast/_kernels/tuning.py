"""The second term of the tuning profile bound (``sgmfast.tuning``): a Riemann sum."""

from ._jit import jit


@jit
def excess(hi, lo, width, scale, out):
    """out[k] = sum_i width[i] * max(hi[i] - scale[k] * lo[i], 0): an upper bound on
    int (phi'(u) - e^e2 phi'(l(u)))_+ du when hi, lo are phi' at each cell's right end and phi'(l)
    at its left end (scale = e^e2)."""
    for k in range(scale.shape[0]):
        s = scale[k]
        total = 0.0
        for i in range(hi.shape[0]):
            v = hi[i] if lo[i] == 0.0 else hi[i] - s * lo[i]  # (inf * 0 would be NaN and dropped)
            if v > 0.0:
                total += width[i] * v
        out[k] = total
