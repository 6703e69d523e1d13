"""The rounding bound of log A's integer binomial sums (``sgmfast._rdp_margin._rel_error``) in one
loop: the numpy expressions' operations in their order, so the same floats (libm's log and log1p
are numpy's here; scipy's gammaln values come in as a table)."""

import math

from .._jit import jit


@jit
def rel_error(q, s, lo_n, hi_n, lg_hi, log_hi, log2, u, out):
    """out[i] = max over j of E_ij / max(1, top_ij) (``_rel_error``): E_ij = u (20 lg_hi[j] +
    8 hi_n[j] (|log q_i| + |log1p(-q_i)|) + 8 x_ij + 8 log_hi[j] + 16), x_ij = hi_n[j] (hi_n[j] - 1)
    / (2 s_i^2), top_ij = n lq + n (n - 1) / (2 s_i^2) - log 2 at n = clip(0.5 - s_i^2 log q_i,
    lo_n[j], hi_n[j]) (lg_hi = gammaln(hi_n + 1), log_hi = log(hi_n); NaN propagates as in
    numpy's maximum and max)."""
    for i in range(q.shape[0]):
        qi, si = q[i], s[i]
        lq = math.log(qi)
        a = abs(lq) + abs(math.log1p(-qi))
        ss2 = 2.0 * si * si
        vertex = 0.5 - si * si * lq
        best = -math.inf
        for j in range(hi_n.shape[0]):
            lo, h = lo_n[j], hi_n[j]
            n = vertex
            if n == n:  # (np.clip: max with lo, then min with hi; NaN stays)
                n = lo if n < lo else n
                n = h if n > h else n
            least = n * lq + n * (n - 1.0) / ss2 - log2
            x = h * (h - 1.0) / ss2
            e = u * (20.0 * lg_hi[j] + 8.0 * h * a + 8.0 * x + 8.0 * log_hi[j] + 16.0)
            den = least if (least != least or least > 1.0) else 1.0
            r = e / den
            if r != r or best != best:
                best = math.nan
            elif r > best:
                best = r
        out[i] = best
