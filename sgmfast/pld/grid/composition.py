"""Stage 3: the T-fold composition in one transform, with its round-off and wrap-around bounds.

Every (tilted) one-step array is folded modulo the FFT length n and transformed once; the
composed spectrum prod_i F_i^{T_i} is formed by exponentiation by squaring of each coefficient
(kernels: ``sgmfast._kernels.pld.fft_power``), and one inverse transform gives the composed
tilted PLD on a window [J0, J0 + n) of grid indices (``windows.choose_window``).

Soundness.  FFT round-off is bounded per output entry -- Higham's bound for each transform
(2002, Thm 24.2, with a conservative constant for pocketfft's mixed radices), propagated through
the power with Cauchy-Schwarz over the decaying spectrum, plus the squarings and the inverse --
and added to every pessimistic entry, subtracted from every optimistic one.  The relative
rounding of the tilted input entries (rho per step) is composed as (1 +- rho)^T.  The mass
outside the window is charged as ``windows`` says.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..._failures import GridFailure, WorkLimit
from ..._kernels.pld import fft_power as kf
from ..._kernels.pld import tilt as kt
from ..common import SPLIT_MIN, Grid, charge_fft, irfft, rfft, scratch, split_pool, two_cores
from .estimates import tilted_moments
from .lattice_shift import moved_down, shifts
from .onestep import one_step
from .queries import delta_bound
from .windows import choose_window


def fft_const(n: int) -> float:
    """Relative l2 error bound of one real FFT of length n (Higham 2002, Thm 24.2).

    Higham: a radix-2 FFT has relative l2 error <= log2(n) eta / (1 - log2(n) eta),
    eta = mu + gamma_4 (sqrt 2 + mu) ~ 6.7u.  We use the conservative constant
    (25 log2 n + 5) u to cover the mixed-radix real transforms of pocketfft.
    """
    return (25.0 * math.log2(max(n, 2)) + 5.0) * (np.finfo(np.float64).eps / 2)


def entry_error(err_sum: float, z2: float, n: int) -> float:
    """A bound on every entry's error of the inverse transform (length n) of a composed half
    spectrum whose full-spectrum l1 error is at most ``err_sum`` and squared l2 norm ``z2``: the
    spectrum's errors through the (1/n)-normalised inverse, plus the inverse's own round-off."""
    return err_sum / n + fft_const(n) * math.sqrt(z2 / n) * 1.01


def spectrum_of(t, j_lo, n, c_n, out=None):
    """(half spectrum of array t from grid point j_lo folded modulo n, bound on its l2 error over
    the full spectrum); written into ``out`` if given.  (The folded array is a scratch array.)"""
    f = scratch("fold", n)
    f[:] = 0.0
    kf.fold(t, j_lo, n, f)
    # Parseval: |F f|_2 = sqrt(n) |f|_2
    charge_fft(n)
    return rfft(f, out=out), c_n * math.sqrt(n * kf.sumsq(f)) * 1.01


class ArrayPart:
    """A tilted array t from grid point j_lo, composed ``count`` times."""

    __slots__ = ("j_lo", "t", "count")

    def __init__(self, j_lo, t, count):
        self.j_lo, self.t, self.count = j_lo, t, count

    @property
    def sup(self):
        return self.j_lo, self.j_lo + self.t.size - 1

    def log_mgf(self, step, lams):
        out = np.empty(lams.size)
        kt.log_mgf_multi(self.t, self.j_lo, step, lams, out)
        return out

    def spectrum(self, n, c_n, out=None):
        return spectrum_of(self.t, self.j_lo, n, c_n, out)


@dataclass
class Composite:
    """What one transform composes: ``parts`` (``ArrayPart`` or ``two_stage.BlockPart``, each
    with its count) on the grid of spacing ``step``; ``n_steps`` SGM steps in all (for the
    window goals); ``mean``/``var`` of the composed tilted loss (window heuristics);
    ``log_scale`` the summed log normalisers; ``rho_n`` the relative rounding of the tilted
    entries summed over the count; ``p_inf`` the untilted +inf mass; [sup_lo, sup_hi] the
    support; ``err_rel`` (optimistic only) the tilted l1 mass, relative to e^{log_scale}, the
    arrays may carry in excess of an optimistic PLD; ``mgf`` optionally supplies the Chernoff
    table (curves share the parts' tables across checkpoints)."""

    parts: list
    step: float
    n_steps: int
    mean: float
    var: float
    log_scale: float
    rho_n: float
    p_inf: float
    sup_lo: int
    sup_hi: int
    err_rel: float = 0.0
    mgf: object = None  # optional: sd, lower -> the log-MGF table of ``windows.log_mgf_table`` (shared tables)


class TiltedStep:
    """One step of a direction on the grid (a ``onestep.OneStep``: an SGM step, or one epoch of
    ``allocation``), tilted by theta: the ``ArrayPart`` (count 1) and its per-step
    contributions to a ``Composite`` (log normaliser, tilted mean and variance, relative
    rounding, +inf mass, support)."""

    __slots__ = ("part", "s", "mu", "v", "rho", "p_inf", "lo", "hi")

    def __init__(self, one, step, theta, pess, p=None):
        p = one.masses(pess) if p is None else p  # (``p``: other masses on the same points, ``lattice_shift``)
        t = np.empty(p.size)
        s, mu, v, rho, dropped = kt.tilt(p, one.j_lo, 0.0, step, theta, pess, t)
        if not (math.isfinite(s) and math.isfinite(mu) and math.isfinite(v)):
            raise FloatingPointError("non-finite tilted one-step masses")
        self.part = ArrayPart(one.j_lo, t, 1)
        self.s, self.mu, self.v, self.rho = s, mu, v, rho
        self.p_inf = (one.p_inf + dropped) * (1 + 1e-12) if pess else 0.0
        self.lo, self.hi = one.j_lo, one.j_lo + p.size - 1


def composite(steps, counts, step: float, pess: bool) -> Composite:
    """The ``Composite`` of ``counts[i]`` copies of each ``TiltedStep`` (zero counts left out)."""
    parts = []
    mean = var = log_scale = rho_n = 0.0
    p_inf_log = 0.0  # log of the finite mass product (1 - p_inf) ^ T
    sup_lo = sup_hi = 0
    for ts, count in zip(steps, counts):
        count = int(count)
        if count <= 0:
            continue
        parts.append(ArrayPart(ts.part.j_lo, ts.part.t, count))
        mean += count * ts.mu
        var += count * ts.v
        log_scale += count * ts.s
        rho_n += count * ts.rho
        p_inf_log += count * math.log1p(-min(ts.p_inf, 1.0)) if ts.p_inf < 1.0 else -math.inf
        sup_lo += count * ts.lo
        sup_hi += count * ts.hi
    p_inf = -math.expm1(p_inf_log) * (1 + 1e-12) if pess else 0.0
    n_steps = sum(p.count for p in parts)
    return Composite(parts, step, n_steps, mean, var, log_scale, rho_n, p_inf, sup_lo, sup_hi)


def compose_one_stage(schedule, add, step: float, theta: float, pess: bool, eps_lo: float, tau: float,
                      finish=None, coarse: bool = False) -> Grid:
    """Tilted composition of a schedule [(sigma, q, count)] of SGM steps, by one FFT power (a
    single step: the tilted array itself, no transform); ``finish``: see ``compose_steps``;
    ``coarse``: the one-step grids' far tails coarser (``onestep.one_step``).  Optimistic: each
    step whose bulk one bin holds is shifted onto a knot and the composition moved back down
    (``lattice_shift``; then always a ``Grid``)."""
    ones = [one_step(sigma, q, add, step, tau, coarse) for sigma, q, _ in schedule]
    counts = [count for _, _, count in schedule]
    ds = shifts(ones, counts, step, pess)
    steps = [TiltedStep(one, step, theta, pess, None if pess else one.opt_by(d)) for one, d in zip(ones, ds)]
    total = shift_total(counts, ds)
    g = compose_steps(steps, counts, step, theta, pess, eps_lo, tau, None if total > 0.0 else finish)
    return moved_down(g, total)


def shift_total(counts, ds) -> float:
    """sum count_i d_i, rounded up (the products' and the sum's rounding: ``lattice_shift``)."""
    return math.fsum(c * d for c, d in zip(counts, ds)) * (1 + 1e-12)


def compose_steps(steps, counts, step: float, theta: float, pess: bool, eps_lo: float, tau: float,
                  finish=None) -> Grid:
    """Tilted composition of ``counts[i]`` copies of each ``TiltedStep`` by one FFT power (a
    single step: the tilted array itself, no transform).  ``finish(c, theta, pess, eps_lo, tau)``
    composes the ``Composite`` (default ``compose_parts``; ``banded.compose_banded`` may return a
    ``spectral.SpectralGrid``, read by ``spectral.read_eps`` / ``read_delta``)."""
    c = composite(steps, counts, step, pess)
    if len(c.parts) == 1 and c.parts[0].count == 1:
        part = c.parts[0]
        grow = math.expm1(c.rho_n * (1 + 1e-9))
        ls = c.log_scale + (math.log1p(grow) if pess else math.log1p(-min(grow, 0.5)))
        return Grid(step, theta, pess, part.j_lo, part.t, ls, 0.0, c.p_inf, 0.0, 0.0)
    return (finish or compose_parts)(c, theta, pess, eps_lo, tau)


def part_spectra(parts, n: int, out=None):
    """(half spectra of the parts folded modulo n, bounds on their l2 errors over the full
    spectrum); the spectra in ``out`` (len(parts), n // 2 + 1) if given."""
    c_n = fft_const(n)
    spectra = np.empty((len(parts), n // 2 + 1), dtype=np.complex128) if out is None else out
    e2 = np.empty(len(parts))
    for i, part in enumerate(parts):
        if isinstance(part, ArrayPart):  # (transformed in place)
            e2[i] = part.spectrum(n, c_n, spectra[i])[1]
        else:
            spectra[i], e2[i] = part.spectrum(n, c_n)
    return spectra, e2


def compose_parts(c: Composite, theta: float, pess: bool, eps_lo: float, tau: float) -> Grid:
    """The composition of ``c.parts`` by one FFT power, its bounds charged (module notes); the
    bounds of the returned grid hold for every eps >= eps_lo."""
    # above the support's top only the +inf mass counts: a window there says nothing more
    eps_lo = min(eps_lo, c.sup_hi * c.step)
    win = choose_window(c, theta, pess, eps_lo, tau)
    n = win.n
    spectra, e2 = part_spectra(c.parts, n)
    counts = np.array([p.count for p in c.parts], dtype=np.int64)
    z = np.empty(n // 2 + 1, dtype=np.complex128)
    err_sum, z2 = _power_product(spectra, counts, e2, z)
    charge_fft(n)
    x = irfft(z, n)
    return grid_of(c, win, theta, pess, eps_lo, x, err_sum, z2)


def grid_of(c: Composite, win, theta: float, pess: bool, eps_lo: float, x, err_sum: float, z2: float) -> Grid:
    """The grid from the inverse transform x of a composed spectrum on the window ``win``, given
    a bound ``err_sum`` on the spectrum's full-spectrum l1 error and its squared l2 norm ``z2``:
    every entry's error bound added (pessimistic) or subtracted (optimistic), the input rounding
    composed, the mass outside the window charged (``charges``)."""
    n = win.n
    e_inf = entry_error(err_sum, z2, n)
    if not (np.isfinite(x).all() and math.isfinite(e_inf)):
        raise FloatingPointError("non-finite values in the FFT composition of the PLD")
    # entry i <-> grid index j0 + i, after the zero the queries put first (``Grid.padded``)
    padded = np.empty(n + 1)
    kf.unroll(x, win.j0 % n, e_inf, pess, padded)
    ls, err, p_inf, inf_err, floor = charges(c, win, theta, pess, eps_lo)
    return Grid(c.step, theta, pess, win.j0, padded[1:], ls, err, p_inf, inf_err, 0.0, floor=floor, padded=padded)


def charges(c: Composite, win, theta: float, pess: bool, eps_lo: float):
    """(log_scale, err, p_inf, inf_err, floor) of the ``Grid`` of ``c`` composed on the window
    ``win``: the input rounding composed, the mass outside the window charged."""
    # input rounding: every tilted mass within a factor (1 +- rho): composed within (1 +- rho)^N
    grow = math.expm1(c.rho_n * (1 + 1e-9))
    if pess:
        ls = c.log_scale + math.log1p(grow)
        # mass above the window (untilted <= e^{S - theta b} * tilted) goes to +inf
        top = (win.j0 + win.n) * c.step
        p_inf = min(1.0, c.p_inf + math.exp(ls - theta * top) * win.tail_up)
        floor = win.j0 * c.step if win.j0 > c.sup_lo else -math.inf
        return ls, 0.0, p_inf, 0.0, floor
    ls = c.log_scale + math.log1p(-min(grow, 0.5))
    # wrapped mass: at most tail_hi + tail_lo (tilted), its effect on delta(eps) <= e^{S - theta eps} * that
    alias = win.tail_alias * (1 + 2 * grow) * math.exp(c.log_scale - ls)
    # the alias bound holds for eps >= eps_lo: below it the lower bound is 0
    floor = eps_lo if alias > 0 or win.wrap_up > 0 else -math.inf
    # excess mass carried in (any eps: untilted <= e^{S - theta eps} times tilted at losses >= eps)
    alias += c.err_rel * (1 + 2 * grow) * math.exp(c.log_scale - ls) * (1 + 1e-9)
    return ls, alias, 0.0, win.wrap_up, floor


def _power_product(spectra, counts, e2, z):
    """``kf.power_product``, the upper half of the frequencies on a second thread.  One thread:
    ``power_product``'s own two calls, made from here, so that a first run compiles
    ``power_range`` alone and not also ``power_product`` (which links in its own copy)."""
    h = spectra.shape[1]
    if h < SPLIT_MIN:
        wsum = np.zeros(spectra.shape[0])
        err, z2 = kf.power_range(spectra, counts, e2, z, 0, h, wsum)
        return err + kf.power_weight_err(counts, e2, wsum), z2
    # (two halves, the upper on the helper thread where there are two cores: the same sums on one)
    m = h // 2
    w_hi = np.zeros(spectra.shape[0])
    w_lo = np.zeros(spectra.shape[0])
    fut = split_pool().submit(kf.power_range, spectra, counts, e2, z, m, h, w_hi) if two_cores() else None
    err_lo, z2_lo = kf.power_range(spectra, counts, e2, z, 0, m, w_lo)
    err_hi, z2_hi = fut.result() if fut is not None else kf.power_range(spectra, counts, e2, z, m, h, w_hi)
    return err_lo + err_hi + kf.power_weight_err(counts, e2, w_lo + w_hi), z2_lo + z2_hi


# --- arrays composed with themselves (balls-in-bins and fixed-size batches) -------------------------
def _moments(parts, step: float, theta: float):
    """Count-weighted tilted mean and variance of the parts [(OneStep, count)]."""
    m = v = 0.0
    for one, count in parts:
        mi, vi = tilted_moments(one.pess, one.j_lo, step, theta)
        m, v = m + count * mi, v + count * vi
    return m, v


def parts_theta(parts, step: float, eps_c: float) -> float:
    """A tilt that puts the composed tilted mean of the parts [(OneStep, count)] near eps_c, its
    variance growth bounded (a heuristic: it only sets tightness)."""
    m, v = _moments(parts, step, 0.0)
    if m >= eps_c or not v > 0:
        return 0.0
    # the tilted mean grows with theta: Newton steps, kept inside the bracket [theta, hi) where
    # it is below / above the target (a far, light tail can make it jump: then bisection)
    theta, hi = 0.0, 300.0 / max(eps_c, 1e-9)
    for _ in range(60):
        new = min(theta + (eps_c - m) / v, 2 * theta + 1.0)
        if not theta < new < hi:
            new = 0.5 * (theta + hi)
        m2, v2 = _moments(parts, step, new)
        if not (math.isfinite(m2) and math.isfinite(v2) and v2 > 0) or m2 > eps_c + 0.05 * math.sqrt(v2):
            hi = new
        else:
            theta, m, v = new, m2, v2
        if abs(m - eps_c) < 0.05 * math.sqrt(v) or hi - theta < 1e-3 * hi:
            break
    return theta


def repeat_theta(one, step: float, count: int, eps_c: float) -> float:
    """``parts_theta`` of ``count`` copies of one array."""
    return parts_theta([(one, count)], step, eps_c)


def compose_copies(parts, step: float, eps_c: float, tail: float, pess: bool,
                   eps_lo: float | None = None, theta: float | None = None, finish=None) -> Grid:
    """The parts [(OneStep, count)] composed (every copy of every array), upper (``pess``) or
    lower, tilted by theta (default: towards eps_c, ``parts_theta``); its bounds hold for
    eps >= eps_lo (default eps_c / 2).  A tilt whose transform fails is halved, then dropped (a
    work limit is no failure of the tilt: it goes on, the transforms not done again).
    ``finish``: as in ``compose_steps``."""
    if theta is None:  # (one copy of one array: no transform, no tilt)
        theta = parts_theta(parts, step, eps_c) if sum(c for _, c in parts) > 1 else 0.0
    eps_lo = 0.5 * eps_c if eps_lo is None else eps_lo
    for th in (theta, 0.5 * theta, 0.0):
        try:
            return compose_steps([TiltedStep(one, step, th, pess) for one, _ in parts], [c for _, c in parts],
                                 step, th, pess, eps_lo, tail, finish)
        except WorkLimit:
            raise
        except (GridFailure, ArithmeticError):
            if th == 0.0:
                raise


def compose_repeated(one, count: int, step: float, eps_c: float, tail: float, pess: bool,
                     eps_lo: float | None = None, theta: float | None = None) -> Grid:
    """``count`` copies of one ``OneStep`` composed (``compose_copies``)."""
    return compose_copies([(one, count)], step, eps_c, tail, pess, eps_lo, theta)


def recentred(run, centre: list, good=None, tries: int = 3, close: float = 0.05):
    """(lo, up) = run(eps_c) for the tilt target eps_c = centre[0], composed again at the
    interval's midpoint (kept in ``centre`` for the next grid) while that lies more than ``close``
    (relative) from eps_c and ``good(lo, up)`` (if given) does not hold yet: a tilt far from the
    answer leaves both bounds at the tilted transform's round-off floor, however fine the grid.
    (Any tilt gives certified bounds.)"""
    for _ in range(tries):
        eps_c = centre[0]
        lo, up = run(eps_c)
        mid = 0.5 * (lo + up)
        if not (math.isfinite(mid) and mid > 0) or abs(mid - eps_c) <= close * mid:
            break
        centre[0] = mid
        if good is not None and good(lo, up):
            break
    return lo, up


def eps_groups(eps: np.ndarray, most: int = 32) -> list:
    """Indices of eps in up to ``most`` groups of nearby values (one tilt each)."""
    return np.array_split(np.argsort(eps), min(most, eps.size))


def copies_delta(parts, step: float, eps: np.ndarray, groups, tail: float, pess: bool, scale: float = 1.0) -> np.ndarray:
    """The δ bound at every eps of the parts [(OneStep, count)] composed: one composition per
    group of nearby eps, tilted towards ``scale`` times the group's median and valid from its
    least eps; groups whose tilt is the same (untilted ones, mostly) share one composition."""
    by_theta: dict = {}
    several = sum(c for _, c in parts) > 1
    for g in groups:
        th = parts_theta(parts, step, scale * float(np.median(eps[g]))) if several else 0.0
        by_theta.setdefault(th, []).append(g)
    out = np.empty(eps.size)
    for th, gs in by_theta.items():
        sel = np.concatenate(gs)
        e = eps[sel]
        grid = compose_copies(parts, step, scale * float(np.median(e)), tail, pess, float(e.min()), theta=th)
        out[sel] = delta_bound(grid, e)
    return out


def repeated_delta(one, count: int, step: float, eps: np.ndarray, groups, tail: float, pess: bool,
                   scale: float = 1.0) -> np.ndarray:
    """``copies_delta`` of ``count`` copies of one array."""
    return copies_delta([(one, count)], step, eps, groups, tail, pess, scale)

