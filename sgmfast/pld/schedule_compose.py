"""The lattice mixtures' compositions (module notes of ``schedule_mix``): the lattice points' tilted
grids and spectra, the mixture spectra's product with its round-off bound, and the saddle point."""

from __future__ import annotations

import math

import numpy as np

from .._kernels.pld import fft_power as kf
from .._kernels.pld import schedule_parts as ks
from .._kernels.pld import tilt as kt
from .._work import charge, charge_fft
from .common import SPLIT_MIN, Grid, GridTooLarge, _nbytes, dot, irfft, split_pool, two_cores
from .grid.composition import Composite, TiltedStep, fft_const, grid_of
from .grid.estimates import tilted_stats
from .grid.onestep import one_step
from .grid.tilting import VAR_GROWTH, saddle_search
from .grid.windows import CHERNOFF_K, choose_window

from .schedule_mix import PER_PRODUCT_FREQ, PER_SET_POINT_FREQ, U


#: most memory for a composition's table of lattice spectra (points x frequencies, complex): past it
#: the composition is refused (a 96-point rate lattice on a 10^6-bin window asked for 0.77 GB)
TABLE_BYTES = 512 << 20
#: most memory for the lattice spectra held at once: a larger table is composed in chunks of its
#: points (``_chunks``), whose products are joined (``_Joined``).  (346 noise levels on 67
#: points of an 873,000-bin window held 468 MB and peaked at 1.5 GB.)
CHUNK_BYTES = 128 << 20
#: most memory for a lattice's tilted one-step arrays (older tilts leave)
TILT_BYTES = 128 << 20
#: most memory an engine's older lattices keep when it makes a new one (``lattice_in``)
KEEP_BYTES = 128 << 20


class _Lattice:
    """One-step grids of one direction, grid step and tail cut, for lattice points (sigma, q),
    tilted and transformed on demand (cached per tilt, rounding and FFT length); ``layout``
    maps a part's point index to its (sigma, q)."""

    def __init__(self, add, step, tau, table_bytes: int = TABLE_BYTES):
        self.add, self.step, self.tau = add, step, tau
        self.table_bytes = table_bytes  # (``compose_mix`` refuses a larger table of its spectra)
        self.layout = None
        self._one: dict = {}
        self._tilted: dict = {}
        self._tilt_bytes = 0

    def on(self, layout) -> _Lattice:
        self.layout = layout
        return self

    def _key(self, g):
        return self.layout.sigmas[g], self.layout.qs[g]

    def one(self, g):
        key = self._key(g)
        o = self._one.get(key)
        if o is None:
            o = self._one[key] = one_step(key[0], key[1], self.add, self.step, self.tau)
        return o

    def tilted(self, g, theta, pess) -> TiltedStep:
        key = (self._key(g), theta, pess)
        ts = self._tilted.get(key)
        if ts is None:
            if self._tilt_bytes > TILT_BYTES or len(self._tilted) > 4 * len(self._one) + 64:  # (older tilts leave)
                self._tilted.clear()
                self._tilt_bytes = 0
            ts = self._tilted[key] = TiltedStep(self.one(g), self.step, theta, pess)
            self._tilt_bytes += ts.part.t.nbytes
        return ts

    def nbytes(self) -> int:
        """The bytes of the one-step and tilted arrays this lattice holds."""
        return sum(_nbytes(o) for o in self._one.values()) + self._tilt_bytes

    def moments(self, parts, theta):
        """(mean, variance) of the tilted composed loss of the parts (heuristic: tilts)."""
        idx, w, k = kparts(parts)
        used = np.unique(idx)
        st = np.empty((used.size, 3))
        for j, g in enumerate(used):
            one = self.one(int(g))
            st[j] = tilted_stats(one.pess, one.j_lo, self.step, theta)
        row = np.searchsorted(used, idx)
        ls, m, v = st[row, 0], st[row, 1], st[row, 2]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            la = np.log(w) + ls
            mx = la.max(axis=1, keepdims=True)
            wt = np.exp(la - mx)
            wt = np.nan_to_num(wt / wt.sum(axis=1, keepdims=True))
        mean = (wt * m).sum(axis=1)
        var = (wt * (v + m ** 2)).sum(axis=1) - mean ** 2
        return dot(k, mean), dot(k, np.maximum(var, 0.0))


def kparts(parts):
    """(idx, w, k) of mixture parts: k copies of sum_c w[:, c] [idx[:, c]], from either form --
    (idx, w, k) itself, or the two-point (ia, ib, p, k) of ``schedule_mix`` (weights p and
    1 - p; the second 0 where p = 1)."""
    if len(parts) == 3:
        return parts
    ia, ib, p, k = parts
    return np.column_stack((ia, ib)), np.column_stack((p, np.where(p < 1.0, 1.0 - p, 0.0))), k


def lattice_in(cache: dict, key, make):
    """The lattice ``cache[key]``, made by ``make()`` if absent; before making one, the oldest
    leave while there are more than four or they hold more than ``KEEP_BYTES`` (a finer round's
    lattice takes the place of the last round's)."""
    lat = cache.get(key)
    if lat is None:
        while cache and (len(cache) > 4 or sum(v.nbytes() for v in cache.values()) > KEEP_BYTES):
            cache.pop(next(iter(cache)))
        lat = cache[key] = make()
    return lat


def _mix_weights(w, s, pess):
    """(wt, s_mix): the mixture's normaliser and the tilted weights of its arrays, rounded the safe
    way: the represented measure is e^{s_mix} (sum_c wt_c t_c) e^{-theta ell} = sum_c (wt_c
    e^{s_mix - s_c}) A_c.  The base weights ``w`` may be off the exact ones by 2u relative (a
    product or 1 - p): the margin covers it.  A part of one point of weight exactly 1 is that
    point's own array (normaliser s, weight 1: exact)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        lw = np.log(w)
        live = w > 0.0
        s_mix = np.logaddexp.reduce(np.where(live, lw + s, -np.inf), axis=1)
        e = lw + s - s_mix[:, None]
        marg = 4 * U * (np.where(live, np.abs(lw) + np.abs(s), 0.0).sum(axis=1) + np.abs(s_mix) + 4.0)
        one = (live.sum(axis=1) == 1) & (np.where(live, w, 0.0).sum(axis=1) == 1.0)
        marg = np.where(one, 0.0, marg)
        sign = 1.0 if pess else -1.0
        wt = np.where(live, np.exp(e + sign * marg[:, None]), 0.0)
        wt = np.where(one[:, None], live.astype(np.float64), wt)
    return np.nan_to_num(wt), s_mix


def _mix_mgf(ts, used, idx, wt, kf64, step):
    """The composite's log-MGF table (Chernoff bounds on the window's outside mass)."""
    row = np.searchsorted(used, idx)
    with np.errstate(divide="ignore"):
        lw = np.where(wt > 0.0, np.log(wt), -np.inf)[:, :, None]

    def mgf(sd, lower=True):
        base = 2.0 ** (CHERNOFF_K / 2.0) / (sd if sd > 0.0 else step)
        lams = np.concatenate((base, -base)) if lower else base
        tab = np.empty((used.size, lams.size))
        for j, g in enumerate(used):
            part = ts[int(g)].part
            kt.log_mgf_multi(part.t, part.j_lo, step, lams, tab[j])
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            v = np.logaddexp.reduce(lw + tab[row], axis=1)  # (points of weight 0 add exp(-inf) = 0)
            v = v + 1e-12 * (1.0 + np.abs(v))
            # (the sum of m products within (m + 2) u of the sum of their moduli, Higham 3.1)
            total = kf64 @ v + (kf64.size + 2) * U * (kf64 @ np.abs(v))
        return lams, total

    return mgf


def _mix_composite(lat, parts, ts, used, theta, pess):
    """(Composite, wt) of the mixture parts (idx, w, k): moments, scale, rounding, +inf mass,
    support."""
    idx, w, k = parts
    live = w > 0.0
    row = np.searchsorted(used, idx)

    def field(name):
        return np.array([getattr(ts[int(g)], name) for g in used], dtype=np.float64)[row]

    wt, s_mix = _mix_weights(w, field("s"), pess)
    rho = np.where(live, field("rho"), 0.0).max(axis=1)
    m, v = field("mu"), field("v")
    mu = (wt * m).sum(axis=1)
    var = (wt * (v + m ** 2)).sum(axis=1) - mu ** 2
    if pess:
        p_inf = np.where(live, w * field("p_inf"), 0.0).sum(axis=1) * (1 + 8 * U)
        with np.errstate(divide="ignore"):
            log_keep = dot(k, np.log1p(-np.minimum(p_inf, 1.0)))
        p_inf_all = -math.expm1(log_keep) * (1 + 1e-12)
    else:
        p_inf_all = 0.0
    lo = field("lo").min(axis=1)
    hi = field("hi").max(axis=1)
    kf64 = k.astype(np.float64)
    c = Composite(parts=[], step=lat.step, n_steps=int(k.sum()), mean=dot(kf64, mu),
                  var=dot(kf64, np.maximum(var, 0.0)), log_scale=dot(kf64, s_mix),
                  rho_n=dot(kf64, rho), p_inf=p_inf_all, sup_lo=int(np.dot(k, lo.astype(np.int64))),
                  sup_hi=int(np.dot(k, hi.astype(np.int64))), mgf=_mix_mgf(ts, used, idx, wt, kf64, lat.step))
    return c, wt


def compose_mix(lat: _Lattice, parts, theta: float, pess: bool, eps_lo: float) -> Grid:
    """The composition of the mixture parts (``kparts``: (idx, w, k) or (ia, ib, p, k)) on the
    lattice's grid, tilted by theta, pessimistic or optimistic, with every bound of
    ``composition`` charged; its bounds hold for every eps >= eps_lo."""
    idx, w, k = parts = kparts(parts)
    used = np.unique(idx)
    ts = {int(g): lat.tilted(int(g), theta, pess) for g in used}
    c, wt = _mix_composite(lat, parts, ts, used, theta, pess)
    eps_lo = min(eps_lo, c.sup_hi * lat.step)
    win = choose_window(c, theta, pess, eps_lo, lat.tau)
    n = win.n
    if (n // 2 + 1) * len(used) * 16 > lat.table_bytes:  # (before any spectrum: the engines keep what they have)
        raise GridTooLarge(f"{len(used)} lattice spectra of {n // 2 + 1} frequencies exceed {lat.table_bytes >> 20} MB")
    jdx = np.searchsorted(used, idx)  # (each point's row in ``used``)
    chunks = _chunks(jdx, max(idx.shape[1], CHUNK_BYTES // (16 * (n // 2 + 1))))
    if len(chunks) == 1:
        err, z = _chunk_power([ts[int(g)].part for g in used], jdx, wt, k, n)
    else:
        acc = _Joined(n // 2 + 1)
        for rows, sel in chunks:
            acc.add(*_chunk_power([ts[int(g)].part for g in used[rows]], np.searchsorted(rows, jdx[sel]), wt[sel],
                                  k[sel], n, True))
        err, z = acc.result()
    charge_fft(n)
    x = irfft(z, n)
    return grid_of(c, win, theta, pess, eps_lo, x, err[0], err[1])


def _chunks(jdx, per: int):
    """[(rows, parts)]: the parts (rows of ``jdx``, their points' rows) in chunks whose points
    number at most ``per`` each, in the order of their least point (all in one chunk, in their
    order, where they fit); ``rows`` sorted."""
    rows = np.unique(jdx)
    if rows.size <= per:
        return [(rows, np.arange(jdx.shape[0]))]
    out, cur, pts = [], [], set()
    for j in np.argsort(jdx.min(axis=1), kind="stable"):
        new = pts | set(jdx[j].tolist())
        if cur and len(new) > per:
            out.append((np.array(sorted(pts)), np.array(cur)))
            cur, new = [], set(jdx[j].tolist())
        cur.append(j)
        pts = new
    out.append((np.array(sorted(pts)), np.array(cur)))
    return out


def _chunk_power(arrays, jdx, wt, k, n, per_freq: bool = False):
    """``_mix_power`` of parts (rows ``jdx`` of the tilted one-step ``arrays``, weights wt, counts
    k): the table of the arrays' spectra is made here, and dropped on return."""
    lre = np.empty((len(arrays), n // 2 + 1))  # (point-major: ``schedule_parts``)
    lim = np.empty((len(arrays), n // 2 + 1))
    e2, nrm = np.empty(len(arrays)), np.empty(len(arrays))
    c_n = fft_const(n)
    for j, part in enumerate(arrays):
        sp, nrm[j] = part.spectrum(n, 1.0)  # (l2 norm of the full spectrum, rounded up)
        e2[j] = c_n * nrm[j]
        lre[j], lim[j] = sp.real, sp.imag
    # each part's spectrum error: the lattice spectra's, weighted, plus the combination's
    # rounding (2Ku of the l2 norm, ``schedule_parts``) and 4u absolute
    kk = jdx.shape[1]
    pe2 = ((wt * e2[jdx]).sum(axis=1) + 2 * kk * U * (wt * nrm[jdx]).sum(axis=1) + 4 * U) * (1 + 1e-9)
    return _mix_power(lre, lim, jdx, wt, pe2, k, n, per_freq)


class _Joined:
    """The product of chunks' products (``_mix_power(per_freq=True)``) and its error bound, as in
    ``schedule_parts`` for one table, with the chunks telescoped.  With C chunks, Z^c_k chunk c's
    bound on its exact and computed moduli (the latter before its (1 + rel_c)), Z_k = prod_c Z^c_k
    and G = prod_c (1 + rel_c), per frequency

        |prod_c z_c - fl(prod_c z'_c)| <= sum_c |z_c - z'_c| prod_{c' != c} Z^{c'}_k G
                                          + ((1 + 3u)^(C - 1) - 1) Z_k G + C 1e-300,

    and chunk c errs by at most rel_c Z^c_k + 1e-300 T_c (rounding; a cut-off frequency, Z^c_k <
    e^-740, by Z^c_k) plus its parts' input errors sum_j T_j |e_jk| Z^c_k / Rmin^c_k.  So the
    full-spectrum l1 error is at most sum_k w_k [Z_k G (sum_c rel_c + (1 + 3u)^(C - 1) - 1)
    + ((1e-300 T + C e^-740) e^M + C 1e-300) G] + (sum_j T_j e2_j) G (sum_k w_k (Z_k / Rmin_k)^2)^(1/2),
    Rmin_k the least R of all chunks, M >= sum_c max_k max(log Z^c_k, 0) (prod_{c' != c} Z^{c'}_k
    <= e^M).  It keeps three arrays: the product, log Z_k rounded up, and Rmin_k."""

    def __init__(self, h: int):
        self.z = np.ones(h, dtype=np.complex128)
        self.lz = np.zeros(h)
        self.rmin = np.full(h, np.inf)
        self.rel = self.m = self.t = self.s_in = 0.0
        self.g = 1.0
        self.c = 0

    def add(self, z, lz, rmin, n_ops, s_in, t):
        rel = math.expm1(n_ops * math.log1p(3.0 * U)) * (1.0 + 1e-12)
        self.z *= z
        s = self.lz + lz
        s += 4.0 * U * (np.abs(self.lz) + np.abs(lz))  # (>= the exact sum)
        self.lz = s
        np.minimum(self.rmin, rmin, out=self.rmin)
        self.rel += rel
        self.g *= (1.0 + rel) * (1.0 + 4.0 * U)
        self.m += max(float(lz.max()), 0.0) * (1.0 + 4.0 * U)
        self.t += t
        self.s_in += s_in
        self.c += 1

    def result(self):
        h, c = self.z.size, self.c
        w = np.full(h, 2.0)
        w[0] = w[-1] = 1.0
        up = kf._sum_up(h) * (1.0 + 1e-12)
        with np.errstate(over="ignore"):
            zk = np.exp(self.lz) * (1.0 + 8.0 * U)
        rel = (self.rel + math.expm1((c - 1) * math.log1p(3.0 * U))) * (1.0 + 1e-12)
        floor = ((1e-300 * self.t + c * math.exp(-740.0)) * math.exp(min(self.m, 700.0)) + c * 1e-300) * self.g
        floor = floor if self.m <= 700.0 else math.inf
        err = (dot(w, zk) * self.g * rel + floor * 2.0 * h) * up
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            v = np.where(self.rmin > 0.0, zk / self.rmin, np.inf)
            err += self.s_in * self.g * math.sqrt(dot(w, v * v) * up) * (1.0 + 1e-12)
        z = self.z
        z2 = dot(w, z.real * z.real + z.imag * z.imag) * up
        return (err, z2), z


def _mix_power(lre, lim, jdx, wt, pe2, k, n, per_freq: bool = False):
    """((error bound, sum |z|^2), z): the product of the mixture spectra (kernel
    ``schedule_parts.mix_power_range``), in two halves of the frequencies from SPLIT_MIN (the same
    sums on any machine), the upper on a second thread where there are two cores.  ``per_freq``:
    (z, log Z_k, least R_k, n_ops, sum_j T_j e2_j, sum_j T_j) for ``_Joined``."""
    sidx, ss, set_e2, scnt = _sets(jdx, wt, pe2, k)
    nbits = int(k.max()).bit_length()
    members = [np.nonzero((k >> b) & 1)[0] for b in range(nbits)]
    bit_ptr = np.concatenate(([0], np.cumsum([mm.size for mm in members]))).astype(np.int64)
    bit_idx = np.concatenate(members).astype(np.int64)
    n_ops = float(k.sum()) + 4.0 * (2.0 ** nbits - 1.0) + 4.0
    z = np.empty(n // 2 + 1, dtype=np.complex128)
    kk = jdx.shape[1]
    charge((PER_PRODUCT_FREQ * bit_idx.size + PER_SET_POINT_FREQ * (kk + 2) * ss.size) * z.size)
    jdx, wt = np.ascontiguousarray(jdx), np.ascontiguousarray(wt)
    args = (lre, lim, jdx, wt, bit_ptr, bit_idx, sidx, ss, set_e2, scnt, n_ops)
    h = z.size
    lz, rm = (np.empty(h), np.empty(h)) if per_freq else (np.empty(0), np.empty(0))
    if h < SPLIT_MIN:
        err, z2, vsum = ks.mix_power_range(*args, z, 0, h, lz, rm)
    else:  # (two halves, the upper on the helper thread where there are two cores: the same sums on one)
        upper = (*args, z, h // 2, h, lz, rm)
        fut = split_pool().submit(ks.mix_power_range, *upper) if two_cores() else None
        err, z2, vsum = ks.mix_power_range(*args, z, 0, h // 2, lz, rm)
        e_hi, z2_hi, v_hi = fut.result() if fut is not None else ks.mix_power_range(*upper)
        err, z2, vsum = err + e_hi, z2 + z2_hi, vsum + v_hi
    s_in = dot(k.astype(np.float64), pe2)
    if per_freq:
        return z, lz, rm, n_ops, s_in, float(k.sum())
    err += s_in * math.sqrt(vsum) * (1 + 1e-12)
    return (err, z2), z


def _sets(jdx, wt, pe2, k):
    """The parts grouped by their lattice points: (sidx, s, e2, count) with s >= (sum_c w_c)
    (1 + 2Ku) (``schedule_parts``; 4Ku here) and e2 >= pe2 over the set's parts, count their
    summed copies."""
    sidx, inv = np.unique(jdx, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    ss = np.zeros(sidx.shape[0])
    np.maximum.at(ss, inv, wt.sum(axis=1) * (1 + 4 * jdx.shape[1] * U))
    e2 = np.zeros(sidx.shape[0])
    np.maximum.at(e2, inv, pe2)
    cnt = np.zeros(sidx.shape[0], dtype=np.int64)
    np.add.at(cnt, inv, k)
    return np.ascontiguousarray(sidx, dtype=np.int64), ss, e2, cnt


def saddle(lat: _Lattice, parts, eps_c: float, growth: float = VAR_GROWTH, bracket: bool = False) -> float:
    """theta >= 0 with the composed tilted mean near eps_c, the tilted variance (the FFT window)
    grown at most ``growth``-fold: ``tilting.saddle_search`` on the parts' moments (heuristic:
    any tilt is sound)."""
    return saddle_search(lambda theta: lat.moments(parts, theta), eps_c, growth, bracket)
