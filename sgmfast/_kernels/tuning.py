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


@jit
def excess_rows(hi, lo, width, scale, out):
    """:func:`excess` for each row of ``lo`` (one e1 per row): out[j, k] = sum_i width[i] *
    max(hi[i] - scale[k] * lo[j, i], 0), the same operations in the same order (each out[j, k]
    sums over i = 0, 1, ... as ``excess`` does), with k innermost so that the loop vectorises."""
    m = scale.shape[0]
    for j in range(lo.shape[0]):
        acc = out[j]
        acc[:] = 0.0
        for i in range(hi.shape[0]):
            h, low, w = hi[i], lo[j, i], width[i]
            if low == 0.0:  # (inf * 0 would be NaN and dropped)
                if h > 0.0:
                    c = w * h
                    for k in range(m):
                        acc[k] += c
                continue
            for k in range(m):
                v = h - scale[k] * low
                acc[k] += w * v if v > 0.0 else 0.0
