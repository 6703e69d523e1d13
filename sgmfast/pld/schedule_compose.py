"""The lattice mixtures' compositions (module notes of ``schedule_mix``): the lattice points' tilted
grids and spectra, the mixture spectra's product with its round-off bound, and the saddle point."""

from __future__ import annotations

import math

import numpy as np

from .._kernels.pld import fft_power as kf
from .._kernels.pld import schedule_parts as ks
from .._kernels.pld import tilt as kt
from .._work import PER_BIN_MOMENTS, charge, charge_fft
from .common import SPLIT_MIN, Grid, GridTooLarge, dot, irfft, rfft, split_pool, two_cores
from .grid.composition import Composite, TiltedStep, fft_const, grid_of
from .grid.onestep import one_step
from .grid.tilting import VAR_GROWTH, saddle_search
from .grid.windows import CHERNOFF_K, choose_window

from .schedule_mix import PER_PART_FREQ, U


#: most memory for a composition's table of lattice spectra (frequencies x points, complex): past it
#: the composition is refused (a 96-point rate lattice on a 10^6-bin window asked for 0.77 GB)
TABLE_BYTES = 512 << 20


class _Lattice:
    """One-step grids of one direction, grid step and tail cut, for lattice points (sigma, q),
    tilted and transformed on demand (cached per tilt, rounding and FFT length); ``layout``
    maps a part's point index to its (sigma, q)."""

    def __init__(self, add, step, tau):
        self.add, self.step, self.tau = add, step, tau
        self.layout = None
        self._one: dict = {}
        self._tilted: dict = {}

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
            if len(self._tilted) > 4 * len(self._one) + 64:  # (bounded: older tilts leave)
                self._tilted.clear()
            ts = self._tilted[key] = TiltedStep(self.one(g), self.step, theta, pess)
        return ts

    def spectrum(self, g, theta, pess, n):
        """(half spectrum, bound on its full-spectrum l2 error, full-spectrum l2 norm)."""
        part = self.tilted(g, theta, pess).part
        f = np.zeros(n)
        kf.fold(part.t, part.j_lo, n, f)
        charge_fft(n)
        norm = math.sqrt(n * kf.sumsq(f)) * 1.01
        return rfft(f), fft_const(n) * norm, norm

    def moments(self, parts, theta):
        """(mean, variance) of the tilted composed loss of the parts (heuristic: tilts)."""
        ia, ib, p, k = parts
        used = np.unique(np.concatenate((ia, ib)))
        st = {}
        for g in used:
            one = self.one(int(g))
            charge(PER_BIN_MOMENTS * one.pess.size)
            st[int(g)] = kt.tilted_stats(one.pess, one.j_lo, self.step, theta)
        ls_a = np.array([st[int(g)][0] for g in ia])
        ls_b = np.array([st[int(g)][0] for g in ib])
        m_a, v_a = (np.array([st[int(g)][j] for g in ia]) for j in (1, 2))
        m_b, v_b = (np.array([st[int(g)][j] for g in ib]) for j in (1, 2))
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            la = np.log(p) + ls_a
            lb = np.where(p < 1.0, np.log1p(-p) + ls_b, -np.inf)
            mx = np.maximum(la, lb)
            wa = np.exp(la - mx)
            wb = np.exp(lb - mx)
            tot = wa + wb
            wa, wb = wa / tot, wb / tot
        wa, wb = np.nan_to_num(wa), np.nan_to_num(wb)
        mean = wa * m_a + wb * m_b
        var = wa * (v_a + m_a ** 2) + wb * (v_b + m_b ** 2) - mean ** 2
        return dot(k, mean), dot(k, np.maximum(var, 0.0))


def _mix_weights(p, s_a, s_b, pess):
    """(wa, wb, s_mix): the mixture's normaliser and the tilted weights of its two arrays, rounded
    the safe way: the represented measure is e^{s} (wa t_a + wb t_b) e^{-theta ell} =
    (wa e^{s - s_a}) A + (wb e^{s - s_b}) B."""
    with np.errstate(divide="ignore", invalid="ignore"):
        log_p = np.log(p)
        log_q = np.where(p < 1.0, np.log1p(-p), -np.inf)
        s_mix = np.where(p < 1.0, np.logaddexp(log_p + s_a, log_q + s_b), s_a)
        ea = log_p + s_a - s_mix
        eb = log_q + s_b - s_mix
        marg = 4 * U * (np.abs(log_p) + np.abs(s_a) + np.abs(s_b) + np.abs(s_mix) + np.abs(log_q) + 4.0)
        marg = np.where(p < 1.0, marg, 0.0)
        sign = 1.0 if pess else -1.0
        wa = np.where(p < 1.0, np.exp(ea + sign * marg), 1.0)
        wb = np.where(p < 1.0, np.exp(eb + sign * marg), 0.0)
    return wa, np.nan_to_num(wb), s_mix


def _mix_mgf(ts, used, ia, ib, wa, wb, kf64, step):
    """The composite's log-MGF table (Chernoff bounds on the window's outside mass)."""

    def mgf(sd, lower=True):
        base = 2.0 ** (CHERNOFF_K / 2.0) / (sd if sd > 0.0 else step)
        lams = np.concatenate((base, -base)) if lower else base
        tab = {}
        for g in used:
            part = ts[int(g)].part
            out = np.empty(lams.size)
            kt.log_mgf_multi(part.t, part.j_lo, step, lams, out)
            tab[int(g)] = out
        total = np.zeros(lams.size)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            for i in range(ia.size):
                a = np.log(wa[i]) + tab[int(ia[i])]
                v = np.logaddexp(a, np.log(wb[i]) + tab[int(ib[i])]) if wb[i] > 0.0 else a
                total += kf64[i] * (v + 1e-12 * (1.0 + np.abs(v)))
        return lams, total

    return mgf


def _mix_composite(lat, parts, ts, used, theta, pess):
    """(Composite, wa, wb) of the mixture parts: moments, scale, rounding, +inf mass, support."""
    ia, ib, p, k = parts

    def field(name, idx):
        return np.array([getattr(ts[int(g)], name) for g in idx], dtype=np.float64)

    s_a, s_b = field("s", ia), field("s", ib)
    wa, wb, s_mix = _mix_weights(p, s_a, s_b, pess)
    rho = np.maximum(field("rho", ia), np.where(p < 1.0, field("rho", ib), 0.0))
    mu = wa * field("mu", ia) + wb * field("mu", ib)
    var = wa * (field("v", ia) + field("mu", ia) ** 2) + wb * (field("v", ib) + field("mu", ib) ** 2) - mu ** 2
    if pess:
        p_inf = (p * field("p_inf", ia) + np.where(p < 1.0, (1.0 - p) * field("p_inf", ib), 0.0)) * (1 + 8 * U)
        with np.errstate(divide="ignore"):
            log_keep = dot(k, np.log1p(-np.minimum(p_inf, 1.0)))
        p_inf_all = -math.expm1(log_keep) * (1 + 1e-12)
    else:
        p_inf_all = 0.0
    lo = np.minimum(field("lo", ia), field("lo", ib))
    hi = np.maximum(field("hi", ia), field("hi", ib))
    kf64 = k.astype(np.float64)
    c = Composite(parts=[], step=lat.step, n_steps=int(k.sum()), mean=dot(kf64, mu),
                  var=dot(kf64, np.maximum(var, 0.0)), log_scale=dot(kf64, s_mix),
                  rho_n=dot(kf64, rho), p_inf=p_inf_all, sup_lo=int(np.dot(k, lo.astype(np.int64))),
                  sup_hi=int(np.dot(k, hi.astype(np.int64))), mgf=_mix_mgf(ts, used, ia, ib, wa, wb, kf64, lat.step))
    return c, wa, wb


def compose_mix(lat: _Lattice, parts, theta: float, pess: bool, eps_lo: float) -> Grid:
    """The composition of the mixture parts (ia, ib, p, k) on the lattice's grid, tilted by theta,
    pessimistic or optimistic, with every bound of ``composition`` charged; its bounds hold for
    every eps >= eps_lo."""
    ia, ib, p, k = parts
    used = np.unique(np.concatenate((ia, ib)))
    ts = {int(g): lat.tilted(int(g), theta, pess) for g in used}
    c, wa, wb = _mix_composite(lat, parts, ts, used, theta, pess)
    eps_lo = min(eps_lo, c.sup_hi * lat.step)
    win = choose_window(c, theta, pess, eps_lo, lat.tau)
    n = win.n
    if (n // 2 + 1) * len(used) * 16 > TABLE_BYTES:  # (before any spectrum: the engines keep what they have)
        raise GridTooLarge(f"{len(used)} lattice spectra of {n // 2 + 1} frequencies exceed {TABLE_BYTES >> 20} MB")
    index = {int(g): j for j, g in enumerate(used)}
    specs = [lat.spectrum(int(g), theta, pess, n) for g in used]
    table = np.empty((n // 2 + 1, len(used)), dtype=np.complex128)  # (frequency-major)
    for j, sp in enumerate(specs):
        table[:, j] = sp[0]
    e2 = np.array([sp[1] for sp in specs])
    nrm = np.array([sp[2] for sp in specs])
    ja = np.array([index[int(g)] for g in ia], dtype=np.int64)
    jb = np.array([index[int(g)] for g in ib], dtype=np.int64)
    # each part's spectrum error: the lattice spectra's, weighted, plus the combination's
    # rounding (4u of the l2 norm) and 4u absolute
    pe2 = (wa * e2[ja] + wb * e2[jb] + 4 * U * (wa * nrm[ja] + wb * nrm[jb]) + 4 * U) * (1 + 1e-9)
    err, z = _mix_power(table, ja, jb, wa, wb, pe2, k, n)
    charge_fft(n)
    x = irfft(z, n)
    return grid_of(c, win, theta, pess, eps_lo, x, err[0], err[1])


def _mix_power(table, ja, jb, wa, wb, pe2, k, n):
    """((error bound, sum |z|^2), z): the product of the mixture spectra (kernel
    ``schedule_parts.mix_power_range``), in two halves of the frequencies from SPLIT_MIN (the same
    sums on any machine), the upper on a second thread where there are two cores."""
    pa, pb, ps, pair_e2, pcnt = _pairs(ja, jb, wa, wb, pe2, k)
    nbits = int(k.max()).bit_length()
    members = [np.nonzero((k >> b) & 1)[0] for b in range(nbits)]
    bit_ptr = np.concatenate(([0], np.cumsum([mm.size for mm in members]))).astype(np.int64)
    bit_idx = np.concatenate(members).astype(np.int64)
    n_ops = float(k.sum()) + 4.0 * (2.0 ** nbits - 1.0) + 4.0
    z = np.empty(n // 2 + 1, dtype=np.complex128)
    charge(PER_PART_FREQ * (bit_idx.size + ja.size + 4 * pa.size) * z.size)
    args = (table, ja, jb, wa, wb, bit_ptr, bit_idx, pa, pb, ps, pair_e2, pcnt, n_ops)
    h = z.size
    if h < SPLIT_MIN:
        err, z2, vsum = ks.mix_power_range(*args, np.empty(ja.size, dtype=np.complex128), z, 0, h)
    else:  # (two halves, the upper on the helper thread where there are two cores: the same sums on one)
        upper = (*args, np.empty(ja.size, dtype=np.complex128), z, h // 2, h)
        fut = split_pool().submit(ks.mix_power_range, *upper) if two_cores() else None
        err, z2, vsum = ks.mix_power_range(*args, np.empty(ja.size, dtype=np.complex128), z, 0, h // 2)
        e_hi, z2_hi, v_hi = fut.result() if fut is not None else ks.mix_power_range(*upper)
        err, z2, vsum = err + e_hi, z2 + z2_hi, vsum + v_hi
    err += dot(k.astype(np.float64), pe2) * math.sqrt(vsum) * (1 + 1e-12)
    return (err, z2), z


def _pairs(ja, jb, wa, wb, pe2, k):
    """The parts grouped by their two lattice points: (pa, pb, s, e2, count) with s >= (wa + wb)
    (1 + 4u) and e2 >= pe2 over the pair's parts, count their summed copies."""
    keys = ja * (int(max(ja.max(), jb.max())) + 1) + jb
    uniq, inv = np.unique(keys, return_inverse=True)
    npair = uniq.size
    pa = np.zeros(npair, dtype=np.int64)
    pb = np.zeros(npair, dtype=np.int64)
    pa[inv], pb[inv] = ja, jb
    ps = np.zeros(npair)
    np.maximum.at(ps, inv, (wa + wb) * (1 + 8 * U))
    e2 = np.zeros(npair)
    np.maximum.at(e2, inv, pe2)
    cnt = np.zeros(npair, dtype=np.int64)
    np.add.at(cnt, inv, k)
    return pa, pb, ps, e2, cnt


def saddle(lat: _Lattice, parts, eps_c: float, growth: float = VAR_GROWTH, bracket: bool = False) -> float:
    """theta >= 0 with the composed tilted mean near eps_c, the tilted variance (the FFT window)
    grown at most ``growth``-fold: ``tilting.saddle_search`` on the parts' moments (heuristic:
    any tilt is sound)."""
    return saddle_search(lambda theta: lat.moments(parts, theta), eps_c, growth, bracket)
