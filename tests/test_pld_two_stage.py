"""The two-stage PLD composition (blocks of ~sqrt(T) steps on a fine grid, the rest on a coarse
grid): its kernels against direct computations, and its certified intervals against the
single-stage engine on a finer grid and against closed forms."""

import math

import numpy as np
import pytest

from sgmfast import pld
from sgmfast._kernels.pld import coarsen as KC
from sgmfast._kernels.pld import fft_power as KF
from sgmfast.pld import common
from sgmfast.pld.grid import estimates, onestep, two_stage
from sgmfast.pld.engine import Engine


def _delta_of(p, ell, eps):
    """δ(eps) = sum p (1 - e^{eps - ell})_+ of an untilted PLD (no +inf mass)."""
    return np.array([np.sum(p * np.clip(-np.expm1(e - ell), 0.0, None)) for e in eps])


def _puts(p, ell, ks):
    """Put function E[(k - u)_+] in u = e^{-ell}: a PLD is optimistic for every composition when
    these lie below (every h(u) = E_Y (1 - e^eps u Y)_+ is a mixture of them: convex, decreasing)."""
    u = np.exp(-ell)
    return np.array([np.sum(p * np.clip(k - u, 0.0, None)) for k in ks])


def _random_atoms(rng, n, spread=3.0):
    x = np.exp(-0.5 * np.linspace(-spread, spread, n) ** 2) * rng.uniform(0.5, 1.5, n)
    x[rng.uniform(size=n) < 0.1] = 0.0
    return x / x.sum()


@pytest.mark.parametrize("theta", [0.0, 0.7, 5.0])
@pytest.mark.parametrize("m", [2, 8, 32])
def test_coarsen_pess_keeps_mass_and_u_mass_and_raises_every_delta(theta, m):
    rng = np.random.default_rng(m)
    step, j0, n = 1e-3, -137, 600
    x = _random_atoms(rng, n)  # tilted masses
    ell = (j0 + np.arange(n)) * step
    big_lo = j0 // m
    nc = (j0 + n - 1) // m - big_lo + 2
    out = np.empty(nc)
    KC.coarsen_pess(x, j0, m, step, theta, big_lo, out)
    ell_c = (big_lo + np.arange(nc)) * (m * step)
    p, pc = x * np.exp(-theta * ell), out * np.exp(-theta * ell_c)  # untilted
    assert pc.sum() == pytest.approx(p.sum(), rel=1e-12) and pc.sum() >= p.sum()
    assert np.sum(pc * np.exp(-ell_c)) == pytest.approx(np.sum(p * np.exp(-ell)), rel=1e-12)
    eps = np.linspace(ell.min() - 0.01, ell.max() + 0.01, 301)
    assert np.all(_delta_of(pc, ell_c, eps) >= _delta_of(p, ell, eps))


@pytest.mark.parametrize("theta", [0.0, 0.7, 5.0])
@pytest.mark.parametrize("m", [2, 8, 32])
def test_coarsen_opt_is_below_in_decreasing_convex_order(theta, m):
    rng = np.random.default_rng(100 + m)
    step, j0, n = 1e-3, 45, 700
    x = _random_atoms(rng, n)
    x[:13] = 0.0  # empty cells at both ends
    x[-40:] = 0.0
    ell = (j0 + np.arange(n)) * step
    big_lo = j0 // m
    nc = (j0 + n - 1) // m - big_lo + 2
    out = np.empty(nc)
    assert KC.coarsen_opt(x, j0, m, step, theta, big_lo, out)
    ell_c = (big_lo + np.arange(nc)) * (m * step)
    p, pc = x * np.exp(-theta * ell), out * np.exp(-theta * ell_c)
    assert pc.sum() <= p.sum() and pc.sum() == pytest.approx(p.sum(), rel=1e-9)
    u = np.exp(-ell)
    ks = np.linspace(u.min() * 0.999, u.max() * 1.001, 400)
    assert np.all(_puts(pc, ell_c, ks) <= _puts(p, ell, ks) * (1 + 1e-12) + 1e-300)
    eps = np.linspace(ell.min() - 0.01, ell.max() + 0.01, 301)
    assert np.all(_delta_of(pc, ell_c, eps) <= _delta_of(p, ell, eps) * (1 + 1e-12))
    # it keeps the fine detail: delta moves by far less than rounding atoms down would
    down = np.zeros(nc)
    np.add.at(down, (j0 + np.arange(n)) // m - big_lo, p)
    gap_minorant = np.max(_delta_of(p, ell, eps) - _delta_of(pc, ell_c, eps))
    gap_down = np.max(_delta_of(p, ell, eps) - _delta_of(down, ell_c, eps))
    assert gap_minorant < 0.5 * gap_down


def test_power_series_within_its_error_bound():
    rng = np.random.default_rng(7)
    t = _random_atoms(rng, 300)
    n = 1024
    f = np.zeros(n)
    f[:300] = t
    spec = np.fft.rfft(f)
    e2 = 1e-14
    c0, nt = 997, 5
    out = np.empty((nt, spec.size), dtype=np.complex128)
    err, z2 = KF.power_series(spec, e2, c0, out)
    w = np.full(spec.size, 2.0)
    w[0] = w[-1] = 1.0
    for j in range(nt):
        ref = spec.astype(np.clongdouble) ** (c0 + j)
        diff = np.abs(out[j] - ref).astype(float)
        assert np.sum(w * diff) <= err[j]
        assert z2[j] == pytest.approx(np.sum(w * np.abs(out[j]) ** 2), rel=1e-12)


def test_block_spectrum_within_its_error_bound():
    rng = np.random.default_rng(8)
    n = 512
    h = n // 2 + 1
    spec_r = np.fft.rfft(np.concatenate([_random_atoms(rng, 50), np.zeros(n - 50)]))
    ks = np.array([0, 1, 2, 3], dtype=np.int64)
    spec_d = np.array([np.fft.rfft(np.concatenate([_random_atoms(rng, 80), np.zeros(n - 80)])) for _ in ks])
    w = np.array([0.99, 9e-3, 4e-5, 1e-7])
    out = np.empty(h, dtype=np.complex128)
    err = KF.block_spectrum(spec_d, np.full(4, 1e-14), spec_r, 1e-14, ks, w, out)
    ref = sum(wj * d.astype(np.clongdouble) * spec_r.astype(np.clongdouble) ** k for wj, d, k in zip(w, spec_d, ks))
    wk = np.full(h, 2.0)
    wk[0] = wk[-1] = 1.0
    assert np.sum(wk * np.abs(out - ref).astype(float)) <= err


# --- the engine -------------------------------------------------------------------------------


def _single_stage(monkeypatch, fn, *args, **kw):
    with monkeypatch.context() as mp:
        mp.setattr(two_stage, "MIN_STEPS", 10**15)
        common.STEP_CACHE.clear()
        return fn(*args, **kw)


@pytest.mark.parametrize(
    "sigma,q,steps,delta",
    [
        (0.6, 1e-4, 10**6, 1e-5),
        (0.8, 1e-3, 40_000, 1e-5),
        (0.8, 1e-5, 10**6, 1e-8),
        (1.1, 256 / 60000, 100_003, 1e-10),  # a prime count: a remainder block
        (0.7, 1e-3, 30_000, 1e-3),
    ],
)
def test_two_stage_intersects_the_single_stage_interval(monkeypatch, sigma, q, steps, delta):
    step = estimates.initial_step([(sigma, q, steps)], 1e-3, 1.0)
    assert two_stage.plan([(sigma, q, steps)], step, False, 1e-18) is not None
    two = pld.epsilon(sigma, q, steps, delta)
    one = _single_stage(monkeypatch, pld.epsilon, sigma, q, steps, delta)
    # both intervals are certified, by different compositions: they must intersect
    assert two.lower <= one.upper and one.lower <= two.upper
    assert two.upper - two.lower <= 1e-3 * two.upper


def test_two_stage_delta_brackets_single_stage(monkeypatch):
    sigma, q, steps = 0.7, 1e-3, 50_000
    eps = np.array([0.5, 1.0, 2.0])
    two = pld.delta(sigma, q, steps, eps)
    one = _single_stage(monkeypatch, pld.delta, sigma, q, steps, eps)
    assert np.all(two.lower <= one.upper) and np.all(one.lower <= two.upper)


def test_two_stage_replace_one_intersects_single_stage(monkeypatch):
    sigma, q, steps = 0.9, 1e-3, 50_000
    two = pld.epsilon(sigma, q, steps, 1e-6, relation="replace_one")
    one = _single_stage(monkeypatch, pld.epsilon, sigma, q, steps, 1e-6, relation="replace_one")
    assert two.lower <= one.upper and one.lower <= two.upper
    assert two.upper - two.lower <= 1e-3 * two.upper


def _gaussian_delta(mu, eps):
    from scipy.special import log_ndtr

    a, b = mu / 2 - eps / mu, -mu / 2 - eps / mu
    return math.exp(log_ndtr(a)) - math.exp(eps + log_ndtr(b))


@pytest.mark.parametrize("sigma,steps,z", [(20.0, 100_000, 3.0), (30.0, 1_000_000, 4.0), (300.0, 1_000_003, 2.0)])
def test_two_stage_brackets_exact_gaussian_composition(monkeypatch, sigma, steps, z):
    # q = 1: the T-fold composition is the Gaussian mechanism with mu = sqrt(T) / sigma
    monkeypatch.setattr(two_stage, "MIN_ONE_STEP_BINS", 0)
    monkeypatch.setattr(two_stage, "MIN_TOTAL_BINS", 0)
    mu = math.sqrt(steps) / sigma
    eps = mu * mu / 2 + z * mu
    exact = _gaussian_delta(mu, eps)
    eng = Engine([(sigma, 1.0, steps)], 1e-3, None)
    assert two_stage.plan(eng.schedule, 1e-4, False, 1e-18) is not None
    lo, up = eng.delta(np.array([eps]))
    assert lo[0] <= exact <= up[0]
    e_lo, e_up, _ = eng.epsilon(exact)
    assert e_lo <= eps * (1 + 1e-9) and eps <= e_up * (1 + 1e-9)
    assert e_up - e_lo <= 1e-3 * e_up


@pytest.mark.parametrize("pess", [True, False])
@pytest.mark.parametrize("n", [1, 2, 3, 5, 190])
def test_block_keeps_the_mass_and_mean_of_n_steps(pess, n):
    # a block is coarsen(P^{*n}) as sum_k w_k D_k * R^{*k}: its tilted mass is ~1 and its mean n
    # times the one-step mean.  The core starts below loss 0 (jc < 0), so the powers' supports
    # start lower the more steps they hold; a window from the fewest steps' support once wrapped
    # the lowest losses of the largest power around to the top (and cut them from the others).
    sigma, q, step, theta, m = 0.564292425386069, 2.6520198399425788e-05, 4.756828460010884e-06, 3.0, 16
    hyb = onestep.hybrid_step(sigma, q, False, step, m, 1e-20, two_stage.CORE_TAIL / 190)
    assert hyb.core.j_lo < 0 and hyb.high is not None
    pieces = two_stage.tilt_pieces(hyb.core.masses(pess), hyb.core.j_lo, hyb.tail(pess), hyb.big_lo, step, m, theta,
                                   pess)
    tr, sc, sr, mc, mr = pieces.tr, pieces.sc, pieces.sr, pieces.mc, pieces.mr
    terms, _, _, _ = two_stage.block(pieces, n, 190, pess, 1e-12)
    big = m * step
    ell_r = (hyb.big_lo + np.arange(tr.size)) * big
    mass = mean = 0.0
    for bj, d, lw, k in terms:
        w = math.exp(lw) * d.sum() * tr.sum() ** k
        mass += w
        mean += w * ((d * (bj + np.arange(d.size)) * big).sum() / d.sum() + k * (tr * ell_r).sum() / tr.sum())
    b = 1.0 / (1.0 + math.exp(sc - sr))
    if pess:
        assert mass == pytest.approx(1.0, abs=1e-5)
    else:  # the optimistic coarsening may drop a little mass (still a lower bound), never add
        # measured losses: 1.1e-4, 8.0e-5, 5.1e-5 at n = 1, 2, 3 (a large atom at the window's
        # edge cell), ~1e-8 at n = 5 and 190
        assert mass >= 1.0 - 2e-4 and mass <= 1.0 + 1e-9
    assert mean / mass == pytest.approx(n * ((1 - b) * mc + b * mr), rel=0.02, abs=4 * big)


def test_remainder_block_against_dp_accounting():
    # T = 35913 = 190 * 189 + 3: a remainder block of 3 steps. dp_accounting's PLD is a
    # pessimistic estimate, so the certified lower bound must not exceed it (the wrapped
    # remainder block above once put it at 0.8016 against dp_accounting's 0.7868).
    dpa = pytest.importorskip("dp_accounting")
    sigma, q, steps, delta = 0.564292425386069, 2.6520198399425788e-05, 35913, 2.8917658108233206e-08
    acc = dpa.pld.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(sigma)), steps)
    theirs = acc.get_epsilon(delta)
    ours = pld.epsilon(sigma, q, steps, delta)
    assert ours.lower <= theirs <= ours.upper * 1.01


@pytest.mark.parametrize("n,theta", [(3, 2.0), (5, 0.0), (4, 6.0)])
def test_pessimistic_block_equals_the_coarsened_direct_composition(n, theta):
    # coarsen(P^{*n}) = sum_k binom(n, k) coarsen(C^{*(n-k)}) * R^{*k}: the block against P^{*n}
    # formed directly (core and upsampled tail on the fine grid, one FFT power in numpy) and
    # coarsened by the same kernel
    sigma, q, step, m = 1.0, 1e-3, 1e-4, 8
    hyb = onestep.hybrid_step(sigma, q, False, step, m, 1e-20, 1e-6)
    pieces = two_stage.tilt_pieces(hyb.core.pess, hyb.core.j_lo, hyb.tail(True), hyb.big_lo, step, m, theta, True)
    tc, tr, sc, sr = pieces.tc, pieces.tr, pieces.sc, pieces.sr
    terms, _, _, _ = two_stage.block(pieces, n, 1, True, 1e-12)
    lm = np.logaddexp(sc, sr)
    lo = min(hyb.core.j_lo, hyb.big_lo * m)
    hi = max(hyb.core.j_lo + tc.size - 1, hyb.big_hi * m)
    one = np.zeros(hi - lo + 1)
    one[hyb.core.j_lo - lo : hyb.core.j_lo - lo + tc.size] += math.exp(sc - lm) * tc
    one[hyb.big_lo * m - lo :: m][: tr.size] += math.exp(sr - lm) * tr
    direct = np.fft.irfft(np.fft.rfft(one, 2 * n * one.size) ** n, 2 * n * one.size)[: n * (one.size - 1) + 1]
    j0 = n * lo
    big_lo = j0 // m
    nc = (j0 + direct.size - 1) // m - big_lo + 2
    ref = np.zeros(nc)
    KC.coarsen_pess(np.maximum(direct, 0.0), j0, m, step, theta, big_lo, ref)
    pad = 8 * n
    blk = np.zeros(nc + 2 * pad)
    for bj, d, lw, k in terms:
        arr = d * math.exp(lw)
        for _ in range(k):
            arr = np.convolve(arr, tr)
        off = bj + k * hyb.big_lo - big_lo + pad
        blk[off : off + arr.size] += arr
    assert not blk[:pad].any() and not blk[pad + nc :].any()
    blk = blk[pad : pad + nc]
    assert blk.sum() == pytest.approx(ref.sum(), rel=1e-9)
    assert np.all(blk >= ref - 1e-13 * ref.max())  # an upper bound entry by entry (round-off aside)
    assert np.abs(blk - ref).max() <= 1e-9 * ref.max()
