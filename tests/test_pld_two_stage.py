"""The two-stage PLD composition (blocks of ~sqrt(T) steps on a fine grid, the rest on a coarse
grid): its kernels against direct computations, and its certified intervals against the
single-stage engine on a finer grid and against closed forms."""

import math

import numpy as np
import pytest

from sgmfast import pld
from sgmfast._kernels import pld as K


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
    K.coarsen_pess(x, j0, m, step, theta, big_lo, out)
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
    assert K.coarsen_opt(x, j0, m, step, theta, big_lo, out)
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
    err, z2 = K.power_series(spec, e2, c0, out)
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
    err = K.block_spectrum(spec_d, np.full(4, 1e-14), spec_r, 1e-14, ks, w, out)
    ref = sum(wj * d.astype(np.clongdouble) * spec_r.astype(np.clongdouble) ** k for wj, d, k in zip(w, spec_d, ks))
    wk = np.full(h, 2.0)
    wk[0] = wk[-1] = 1.0
    assert np.sum(wk * np.abs(out - ref).astype(float)) <= err


# --- the engine -------------------------------------------------------------------------------


def _single_stage(monkeypatch, fn, *args, **kw):
    with monkeypatch.context() as mp:
        mp.setattr(pld, "_TWO_STAGE_MIN", 10**15)
        pld._STEP_CACHE.clear()
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
    step = pld._initial_step([(sigma, q, steps)], 1e-3, 1.0)
    assert pld._two_stage_plan([(sigma, q, steps)], step, False, 1e-18) is not None
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
    monkeypatch.setattr(pld, "_TWO_STAGE_ONE", 0)
    monkeypatch.setattr(pld, "_TWO_STAGE_BINS", 0)
    mu = math.sqrt(steps) / sigma
    eps = mu * mu / 2 + z * mu
    exact = _gaussian_delta(mu, eps)
    eng = pld._Engine([(sigma, 1.0, steps)], 1e-3, None)
    assert pld._two_stage_plan(eng.schedule, 1e-4, False, 1e-18) is not None
    lo, up = eng.delta(np.array([eps]))
    assert lo[0] <= exact <= up[0]
    e_lo, e_up = eng.epsilon(exact)
    assert e_lo <= eps * (1 + 1e-9) and eps <= e_up * (1 + 1e-9)
    assert e_up - e_lo <= 1e-3 * e_up
