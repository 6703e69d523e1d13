"""Balls-in-bins at small sigma, where one coordinate's heavy tail sets delta (``pld.samplers.
epoch_tail``): certified ends against an independent reference.

Reference (t = 3, one epoch, remove direction): delta(eps) = E_Q[(S / 3 - e^eps)_+] with S = W_1 +
W_2 + W_3 iid, log W ~ N(-s^2/2, s^2) under Q; W_3 is integrated in closed form (the log-normal
call E[(W - K)_+] = Phi(s - b) - K Phi(-b), b = (log K + s^2/2) / s) and W_1, W_2 by scipy's adaptive
quad, nested, each split at its kink.  (The trapezoid rule on z in [-12, 12] this used before was
5e-5 relative off at 2,401 points: too coarse once the intervals were 6e-6 wide -- at sigma 0.55,
δ 1e-8 it read 9.99914e-09 at the lower end for 1.000124e-08 at 19,201 points.)
The remove direction is the larger here, so an upper end must have delta_remove(upper) <= delta
and a lower end delta_remove(lower) >= delta.
"""

import math

import numpy as np
import pytest
from scipy import integrate
from scipy.special import ndtr
from scipy.stats import norm

from sgmfast.pld import allocation


def _delta_remove_t3(sigma: float, eps: float) -> float:
    s = 1.0 / sigma
    c3 = 3.0 * math.exp(eps)

    def call(k):  # E[(W - k)_+], the log-normal call
        if k <= 0.0:
            return 1.0 - k
        b = (math.log(k) + 0.5 * s * s) / s
        return float(ndtr(s - b) - k * ndtr(-b))

    def outer(f, kink):  # E[f(W)] by adaptive quadrature over z, split where f has its kink
        g = lambda z: f(math.exp(s * z - 0.5 * s * s)) * math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)  # noqa: E731
        zk = min(max((math.log(kink) + 0.5 * s * s) / s, -40.0), 40.0) if kink > 0.0 else -40.0
        return sum(integrate.quad(g, a, b, epsabs=0.0, epsrel=1e-9, limit=200)[0] for a, b in ((-40.0, zk), (zk, 40.0)))

    return outer(lambda w1: outer(lambda w2: call(c3 - w1 - w2), max(c3 - w1, 1e-300)), c3) / 3.0


@pytest.mark.parametrize("sigma, delta", [(0.5, 1e-5), (0.6, 1e-6), (0.45, 1e-3), (0.55, 1e-8), (0.7, 1e-10)])
def test_three_steps_small_sigma_bracket_the_quadrature(sigma, delta):
    b = allocation.epsilon(sigma, 3, 3, delta)
    assert _delta_remove_t3(sigma, b.lower) >= delta  # the lower end is below the true eps
    if b.upper < math.inf:
        assert _delta_remove_t3(sigma, b.upper) <= delta
    # the lower end is the tail's (it was the sum statistic's, 8.06 at sigma 0.5, before the
    # closed-form tail: the lattice could not reach W ~ e^9)
    assert _delta_remove_t3(sigma, b.lower / 0.97) < delta  # (within 3 % of the true eps)
    # and the upper end within 1 %: the add direction, which the lattice cannot resolve here (S
    # near 0), is bounded in closed form (``epoch_add``) far below it -- it was the Gaussian
    # mechanism's, 9.997 at sigma 0.5, before
    assert b.upper < math.inf and _delta_remove_t3(sigma, 0.99 * b.upper) > delta


def _delta_add_t2(sigma: float, eps: float) -> float:
    """The add direction's exact δ(eps) of one epoch with t = 2: E_Q[(1 - e^eps S/2)_+], S = W_1 +
    W_2, W_2 integrated in closed form (the log-normal put), W_1 by quadrature."""
    from scipy import integrate

    s = 1.0 / sigma

    def put(k):  # E[(k - W)_+]
        if k <= 0:
            return 0.0
        d1 = (-math.log(k) + 0.5 * s * s) / s
        return k * norm.cdf(-(d1 - s)) - norm.cdf(-d1)

    return integrate.quad(lambda z: norm.pdf(z) * put(2 * math.exp(-eps) - math.exp(s * z - 0.5 * s * s)), -40, 40,
                          limit=400, epsabs=1e-300, epsrel=1e-10)[0] * math.exp(eps) / 2


@pytest.mark.parametrize("sigma, eps", [(0.5, 2.0), (0.5, 6.0), (0.8, 1.0), (0.8, 4.0), (1.5, 0.5), (3.0, 0.2)])
def test_add_direction_closed_form_is_above_the_exact_t2(sigma, eps):
    from sgmfast.pld.samplers import epoch_add

    exact = _delta_add_t2(sigma, eps)
    assert float(epoch_add.delta_upper(sigma, 2, 1, np.array([eps]))[0]) >= exact
    # and the eps form agrees with the delta form
    if exact > 1e-300:
        assert epoch_add.eps_upper(sigma, 2, 1, exact) >= eps * (1 - 1e-9)


def test_add_cap_does_not_stop_the_refinement(monkeypatch):
    """(With the closed-form add bound folded into each level's upper end, a finite but stuck
    upper end stopped the refinement after two levels: sigma 1.1, t 2, 200 epochs, δ 1e-12 gave
    [118.78, 173.2], the Gaussian mechanism's end; finer levels resolve the add direction.  With
    the lattice laws' cells charged too, the default budget of work ends before the level that
    resolves it here: the refinement is given twice the budget.)"""
    from sgmfast.pld.samplers import balls_in_bins as bb

    monkeypatch.setattr(bb, "BUDGET", 2 * bb.BUDGET)
    b = allocation.epsilon(1.0960928185548735, 2, 400, 1e-12)
    assert b.upper - b.lower <= 1e-3 * b.upper


def test_heavy_tail_lower_end_is_tilted():
    """sigma 0.7, t 20, one epoch: delta is set by S ~ 40 t, where the lattice's Q-masses lie far
    below the untilted power's flat round-off floor; the lower end read [3.6226, 3.6845] with that
    floor.  pld-accounting 2.0 certifies [3.66682, 3.69510] here (bench/README): the intervals
    must overlap, and ours is to be the narrower."""
    b = allocation.epsilon(0.7, 20, 20, 1e-5)
    assert b.lower <= 3.69510 and b.upper >= 3.66682
    assert b.upper - b.lower <= 3e-3 * b.upper


def test_heavy_tail_mass_above_the_cap_is_on_finite_losses():
    """sigma 0.45, t 1065, 10 epochs, δ 5.9e-9 (the domain sweep's): the lattice's size cut the
    cap's room, and the 6.1e-10 an epoch of P-mass above the cap, at +inf, passed δ / 10: the upper
    end was the Gaussian mechanism's 64.03 for a lower end of 11.96.  On ``over_ladder``'s finite
    losses (and two coordinates above the top on the grid, ``epoch_tail._two_above``) it is
    within 0.5 % of the lower end, and δ(ε) at it agrees (its own lattice: to 1e-3 of δ)."""
    b = allocation.epsilon(0.45, 1065, 10650, 5.9e-9)
    assert 11.9 < b.lower <= b.upper < 12.1 and b.upper - b.lower <= 5e-3 * b.upper
    d = allocation.delta(0.45, 1065, 10650, b.upper)
    assert d.lower <= 5.9e-9 and d.upper <= 5.9e-9 * (1 + 1e-3)


def test_others_sum_beyond_the_lattice_is_at_finite_losses():
    """sigma 0.42, t 10^4, 200 epochs, δ 1e-12 (inside issue #31's range; no bench row reached it):
    "one coordinate above W_max with the others' sum beyond the lattice" was charged at +inf,
    3.6e-14 of P-mass an epoch, 7e-12 over 200 -- above δ, so the upper end was the Gaussian's
    802.8 for a lower end of 25.24.  The stand-in for the others' sum there (the lattice sum of t
    coordinates, each at most W_max) is at most t W_max: placed there, with the example's coordinate
    in closed form, the interval was [25.243, 25.417]; with three coordinates above the top on the
    grid too (and so a lower top), [25.2934, 25.3110]."""
    b = allocation.epsilon(0.42, 10000, 200 * 10000, 1e-12)
    assert 25.0 < b.lower <= b.upper < 1.01 * b.lower


def test_a_lower_law_of_zeros_leaves_the_upper_end():
    """A lattice coarser than E[W] = 1 could have a lower law of zeros (every cell's minorant
    atom lost; since the lower law's offset lattice, ``w_lower``, that lattice keeps its cells, so
    the zeros are put in by hand here): its composition fails, and took the level's upper end with
    it.  The lower end is then 0 (always a lower bound), the upper the level's own."""
    from sgmfast.pld.samplers import balls_in_bins as bb

    ep = bb.Epoch(0.43, 20, 1.5, 3000.0, 3400.0, 1e-14)  # (not the cached one: its lower law is changed)
    ep.lo = np.zeros_like(ep.lo)
    lo, up = bb.eps_bounds(ep, 0.05, 5, 5, 20.0, 1e-14, 1e-6, math.inf)
    assert lo == 0.0 and up > 0.0
    eps = np.array([5.0, 20.0])
    d_up, d_lo = bb.delta_bounds(ep, 0.05, 5, 5, eps, bb.eps_groups(eps), 1e-14, np.full(2, np.inf))
    assert np.all(d_lo <= d_up) and np.all(d_up > 0.0)


def test_heavy_tail_many_epochs_keeps_its_resolution():
    """sigma 0.434, t 201, 145 epochs, δ 6.5e-9 (a random point of issue #31's range): the top
    that two coordinates above it, charged at +inf, needed (5.8e5) made the level-0 lattice
    spacing 1.1 (E[W] = 1), whose lower law was 0 and whose add direction read S near 0 at loss
    +inf: [12.57, 541.6] (the sum statistic's and the Gaussian's).  With two coordinates above the
    top on the grid (``epoch_tail._two_above``) the top follows the spacing: [82.09, 82.33]."""
    b = allocation.epsilon(0.4341, 201, 145 * 201, 6.49e-9)
    assert 80.0 < b.lower <= b.upper < 84.0 and b.upper - b.lower <= 5e-3 * b.upper


def test_two_epochs_heavy_tail_takes_a_stronger_tilt():
    """sigma 0.641, t 912, 2 epochs, δ 1.11e-5 (a random point of the range): the composition
    tilted towards the answer charged the mass above its window, [1.1989, 1.2202] (1.75 %) on
    every level (pld-accounting 2.0: [1.1788, 1.2222]); a second tilt, towards twice the answer,
    resolves it.  δ(ε) takes it too, and confirms both ends as far as it promises to resolve them:
    its lower end at ε is at least its upper end at ε (1 + accuracy), so at the ε interval's ends
    moved out by that, its upper end is below δ and its lower end above.  (At the ends themselves it
    read 1.1100003e-5 and 1.11003e-5 once ``epoch_sums`` made the ε interval narrower.)"""
    peer_lo, peer_up = 1.1788, 1.2222  # (pld-accounting 2.0's interval, rounded outwards: bench/README)
    b = allocation.epsilon(0.6409, 912, 1824, 1.11e-5)
    assert peer_lo <= b.lower <= b.upper <= peer_up and b.upper - b.lower <= 1e-3 * b.upper
    assert allocation.delta(0.6409, 912, 1824, b.upper * (1 + 1e-3)).upper <= 1.11e-5
    assert allocation.delta(0.6409, 912, 1824, b.lower / (1 + 1e-3)).lower >= 1.11e-5


def test_lower_power_skips_its_tilts_only_where_the_floor_is_small():
    from sgmfast.pld.samplers.epoch_power import _any_power, _lower_power

    h, t = 0.05, 8
    x = np.arange(400) * h
    w = np.exp(-x) * h
    w /= w.sum() * (1 + 1e-9)
    o, y, e = _any_power(w, t, 4000, h, None, False)
    o0, flat = _lower_power(w, t, 4000, h, 1.0, lost=1.0)  # (any floor is below 1: no tilt)
    assert o0 == o and np.array_equal(flat, np.maximum(y - e, 0.0))
    o1, tilted = _lower_power(w, t, 4000, h, 1.0, lost=0.0)
    assert o1 == o and np.all(tilted >= flat) and np.any(tilted > flat)


def test_three_steps_small_sigma_meet_the_accuracy():
    """The coordinate that holds the example above the lattice, with the others' sum bounded from
    both sides (``epoch_sums``; Chernoff rungs before it): sigma 0.5 and 0.7 at t = 3 were 1.7e-3
    wide when the lower end took the others' sum as 0."""
    for sigma, delta in ((0.5, 1e-5), (0.7, 1e-10)):
        b = allocation.epsilon(sigma, 3, 3, delta)
        assert b.upper - b.lower <= 1e-3 * b.upper


def _cut_sum_sf(sigma: float, w_max: float, r: float) -> float:
    """P(W_1 + W_2 > r, both <= w_max) for iid log W ~ N(-s^2/2, s^2), by quadrature over W_1."""
    from scipy import integrate

    s = 1.0 / sigma

    def sf(w):  # (upper tails: no cancellation between two CDFs near 1)
        return norm.sf((math.log(w) + 0.5 * s * s) / s) if w > 0 else 1.0

    top = (math.log(w_max) + 0.5 * s * s) / s
    s_max = sf(w_max)
    return integrate.quad(lambda z: norm.pdf(z) * max(0.0, sf(r - math.exp(s * z - 0.5 * s * s)) - s_max),
                          -40, top, limit=800, epsabs=1e-300, epsrel=1e-8)[0]


@pytest.mark.parametrize("sigma", [0.4, 0.5, 0.8])
def test_rungs_bound_the_others_sum_from_above(sigma):
    """The upper rungs (plain and truncated Chernoff on the lattice's majorant) leave at least
    the exact P(R > r_{k-1}) at or above r_k (t = 3: R the sum of two cut coordinates)."""
    from sgmfast.pld.samplers import balls_in_bins as bb

    h, w_max, cap = bb._lattice(sigma, 3, 1e-3, 1e-12, 0)
    ep = bb.epoch(sigma, 3, h, w_max, cap, 1e-12)
    r, weight = ep.tail_rungs(False)
    above = np.cumsum(weight[::-1])[::-1]  # P(R* >= r_k)
    for k in range(1, r.size):
        if r[k - 1] < 2 * ep.w_max:
            assert above[k] >= _cut_sum_sf(sigma, ep.w_max, float(r[k - 1])) * (1 - 1e-9)


@pytest.mark.parametrize("t", [3, 10, 30])
def test_chernoff_over_bounds_the_exact_masses_above_the_cap(t):
    """``epoch_chernoff._chernoff_over``: (E_Q[S / t; S > cap], Q(S > cap)) for S the sum of t iid
    lattice variables, against the exact t-fold convolution.  The P-bound was M' M^(t-1) e^{-lam
    cap} / t -- t times too small (E[S e^{lam S}] = t M' M^(t-1)): below the exact P-mass at t =
    10, cap 18 (1.7e-2 for 2.0e-2), which left an epoch's mass above the lattice under-charged."""
    from sgmfast.pld.samplers.epoch_chernoff import _chernoff_over

    w = np.array([0.35, 0.4, 0.15, 0.07, 0.03])
    c = np.array([1.0])
    for _ in range(t):
        c = np.convolve(c, w)
    s = np.arange(c.size, dtype=float)
    for cap in (1.3 * t, 1.8 * t, 2.5 * t):
        above = s > cap
        p, q = _chernoff_over(w, 1.0, t, cap)
        assert p >= float(np.sum(c[above] * s[above] / t)) and q >= float(np.sum(c[above]))


@pytest.mark.parametrize("sigma,t", [(0.5, 4), (0.6, 12), (0.8, 30)])
def test_mass_above_the_cap_bounds_the_exact_lattice_masses(sigma, t):
    """``epoch_tail.over_cap`` (plain Chernoff, truncated coordinates, one coordinate above a
    truncation point) against the exact t-fold convolution of the lattice law ``Epoch`` builds:
    the P-mass E_Q[S / t; S > cap] and the Q-mass above caps just past w_max."""
    from sgmfast.pld.samplers.epoch_tail import over_cap

    s, h, K = 1.0 / sigma, 0.25, 400
    wu, c, x, _, _, _ = _exact_sums(sigma, h, K, t)
    for extra in (0.5 * t, 2.0 * t, 6.0 * t):
        cap = K * h + extra
        above = x > cap
        for need in (math.inf, 0.0):  # (0: also by conditioning on one coordinate, ``_given_one``)
            p, q = over_cap(wu, h, t, cap, K * h, s, need)
            assert p >= float(np.sum(c[above] * x[above] / t)) and q >= float(np.sum(c[above]))


def _lattice_law(sigma, h, K):
    from sgmfast.pld.samplers.epoch_tail import upper_law

    return upper_law(1.0 / sigma, h, K)


def _exact_sums(sigma, h, K, t):
    """(wu, c, x, wc, H, m1): the lattice law wu (K cells of h), the exact law c of the sum of t
    of them at the points x, and the coarse majorant (wc, H) with its mean m1."""
    from sgmfast.pld.samplers.epoch_chernoff import coarse_majorant

    wu = _lattice_law(sigma, h, K)
    c = np.array([1.0])
    for _ in range(t):
        c = np.convolve(c, wu)
    wc, H = coarse_majorant(wu, h)
    return wu, c, np.arange(c.size) * h, wc, H, float(wc @ (np.arange(wc.size) * H))


@pytest.mark.parametrize("sigma,t", [(0.4, 3), (0.5, 6), (0.7, 20)])
def test_given_one_bounds_and_resolves_the_heavy_tail_above_the_cap(sigma, t):
    """``epoch_tail._given_one`` (condition on one coordinate, bound the others' sum's tail) against
    the exact t-fold convolution of the lattice law: an upper bound on the P- and Q-masses above
    caps from just past W_max to twice it, and -- for a heavy tail, where the split at W_max of
    ``over_cap`` charged every coordinate as if at the top (20-400x the exact mass here) -- within
    a factor 8 of the P-mass just past W_max (40 at twice it, where two coordinates must be large)
    (sigma 0.4, t 10^4: 3.7e-6 of P-mass above the lattice by the split, 4.8e-7 by this)."""
    from sgmfast.pld.samplers.epoch_tail import _given_one

    h, K = 0.25, 800
    wu, c, x, wc, H, m1 = _exact_sums(sigma, h, K, t)
    for cap in (K * h + 2.0 * t, 1.3 * K * h, 2.0 * K * h):
        above = x > cap
        exact_p, exact_q = float(np.sum(c[above] * x[above] / t)), float(np.sum(c[above]))
        p, q = _given_one(wu, h, t, cap, wc, H, m1, 1.0 / sigma)
        assert p >= exact_p and q >= exact_q
        assert p <= (8.0 if cap < 1.5 * K * h else 40.0) * exact_p  # (measured: 1.5-4.2x, 10-19x)


@pytest.mark.parametrize("sigma,shift,w", [(0.45, 1.0, 2e3), (0.6, 0.0, 50.0), (1.0, 1.0, 20.0)])
def test_two_above_bins_dominate_the_exact_law(sigma, shift, w):
    """``two_tail_bins``: the mass of {X > w, Y > w} (log X ~ N(-s^2/2 + shift s^2, s^2), log Y
    unshifted) on the loss grid by log((2 max(X, Y) + r) / t), against scipy's normal laws:
    its survival at every grid point is at least the exact one of that loss (itself at least the
    loss log((X + Y + r) / t) of the event), and the masses sum to P(X > w) P(Y > w)."""
    from sgmfast._kernels.pld import allocation_tail as kt

    s, t, r, step, j_lo, n = 1.0 / sigma, 50.0, 60.0, 0.03, 0, 180
    out = np.zeros(n)
    beyond = kt.two_tail_bins(s, shift, w, t, r, 1.0, step, j_lo, n, out)

    def sf(b, sh):  # P(X > b) for log X ~ N(-s^2/2 + sh s^2, s^2)
        return float(norm.sf(math.log(b), -0.5 * s * s + sh * s * s, s))

    pa, pb = sf(w, shift), sf(w, 0.0)
    assert math.isclose(float(out.sum()) + beyond, pa * pb, rel_tol=1e-9)
    for j in range(n):  # survival above ell_{j-1}: what the bins from j up and beyond hold
        b = max(w, 0.5 * (t * math.exp((j_lo + j - 1) * step) - r))
        # P(X > w, Y > w, max > b) = P(X > b) P(Y > w) + P(X > w) P(Y > b) - P(X > b) P(Y > b)
        exact = sf(b, shift) * pb + pa * sf(b, 0.0) - sf(b, shift) * sf(b, 0.0)
        assert float(out[j:].sum()) + beyond >= exact * (1 - 1e-12)


@pytest.mark.parametrize("sigma,shift,w", [(0.4, 1.0, 300.0), (0.45, 0.0, 2e3), (0.6, 1.0, 50.0), (1.0, 0.0, 20.0)])
def test_three_above_bins_dominate_the_exact_law(sigma, shift, w):
    """``three_tail_bins``: the mass of {X > w, Y > w, Y' > w} (log X ~ N(-s^2/2 + shift s^2, s^2),
    log Y, log Y' unshifted) on the loss grid by log((3 max + r) / t), against scipy's normal laws:
    its survival at every grid point is at least the exact one of that loss (itself at least the
    loss log((X + Y + Y' + r) / t) of the event), and the masses sum to P(X > w) P(Y > w)^2."""
    from sgmfast._kernels.pld import allocation_tail as kt

    s, t, r, step, j_lo, n = 1.0 / sigma, 50.0, 60.0, 0.03, 0, 250
    out = np.zeros(n)
    beyond = kt.three_tail_bins(s, shift, w, t, r, 1.0, step, j_lo, n, out)

    def sf(b, sh):  # P(X > b) for log X ~ N(-s^2/2 + sh s^2, s^2)
        return float(norm.sf(math.log(b), -0.5 * s * s + sh * s * s, s))

    pa, pb = sf(w, shift), sf(w, 0.0)
    assert math.isclose(float(out.sum()) + beyond, pa * pb * pb, rel_tol=1e-9)
    for j in range(n):  # survival above ell_{j-1}: what the bins from j up and beyond hold
        b = max(w, (t * math.exp((j_lo + j - 1) * step) - r) / 3.0)
        # P(all above w, max > b) = P(X > b) P(Y > w)^2 + P(w < X <= b) P(Y > b) (P(Y > w) + P(w < Y <= b))
        # (sums of products: no cancellation at survivals far below P(all above w))
        sa, sb = sf(b, shift), sf(b, 0.0)
        exact = sa * pb * pb + (pa - sa) * sb * (pb + (pb - sb))
        assert float(out[j:].sum()) + beyond >= exact * (1 - 1e-12) - 1e-300


@pytest.mark.parametrize("sigma,t", [(0.4, 3), (0.5, 6), (0.7, 20)])
def test_ladder_above_the_cap_dominates_the_exact_lattice_law(sigma, t):
    """``epoch_tail.over_ladder``: its atoms' survival is at least the exact t-fold convolution's
    P-mass (and its Q-masses' the Q-mass) above every y past the cap (so the loss log(S/t) placed at
    the atoms only grows),
    the atoms sum to the mass above the cap, lie at or below the lattice's largest sum, and
    ``place_ladder`` puts each at a grid loss at least its own."""
    from sgmfast.pld.samplers.epoch_tail import over_cap, over_ladder, place_ladder

    s, h, K = 1.0 / sigma, 0.25, 800
    wu, c, x, _, _, _ = _exact_sums(sigma, h, K, t)
    cap = K * h + 2.0 * t
    p_cap, q_cap = over_cap(wu, h, t, cap, K * h, s, 0.0)
    xs, ms, qs = over_ladder(wu, h, t, cap, K * h, s, p_cap, 0.0, q_cap)
    assert math.isclose(float(ms.sum()), p_cap, rel_tol=1e-12) and xs[-1] <= t * K * h * (1 + 1e-12)
    assert math.isclose(float(qs.sum()), q_cap, rel_tol=1e-12) and np.all(qs >= 0)
    assert np.all(np.diff(xs) > 0) and np.all(ms >= 0) and xs[0] > cap
    pmass = c * x / t
    for y in np.concatenate((np.linspace(cap, 3 * cap, 200), xs, xs * (1 - 1e-9))):
        assert float(ms[xs > y].sum()) >= float(pmass[x > y].sum()) * (1 - 1e-12)
        assert float(qs[xs > y].sum()) >= float(c[x > y].sum()) * (1 - 1e-12)  # (the Q-masses likewise)
    step, j_lo = 0.013, -20
    pess = np.zeros(int(math.log(xs[-1] / t) / step) - j_lo - 5)  # (the top atom above the grid)
    beyond = place_ladder((xs, ms), t, step, j_lo, pess)
    assert math.isclose(float(pess.sum()) + beyond, p_cap, rel_tol=1e-9) and beyond >= ms[-1]
    for i in np.flatnonzero(pess):
        placed = xs[np.ceil(np.log(xs * (1 + 1e-12) / t) / step).astype(int) - j_lo == i]
        assert (i + j_lo) * step >= math.log(float(placed.max()) / t)


@pytest.mark.parametrize("sigma,t1", [(0.4, 2), (0.5, 5), (0.8, 12)])
def test_sum_tails_bound_the_exact_tails_of_the_cut_sum(sigma, t1):
    """``epoch_tail._sum_tails``: P(R > r) for R the sum of t1 lattice variables cut at W_max,
    against the exact convolution, at r below and above W_max (where "two above M, or one with
    the others above r - W_max" is the bound that counts)."""
    from sgmfast.pld.samplers.epoch_tail import _sum_tails

    h, K = 0.25, 600
    _, c, x, wc, H, m1 = _exact_sums(sigma, h, K, t1)
    rs = np.geomspace(2.0 * t1, t1 * K * h * 0.999, 40)
    tails = _sum_tails(wc, H, t1, rs, m1, 1.0 / sigma, K * h)
    exact = np.array([float(np.sum(c[x > r])) for r in rs])
    assert np.all(tails >= exact)


def _psi_exact_two(a: float, s: float) -> float:
    """E(a - W_1 - W_2)_+ for two iid W = e^Y, Y ~ N(-s^2/2, s^2), by quadrature: the inner
    expectation over W_2 in closed form, x Phi((log x + s^2/2) / s) - Phi((log x - s^2/2) / s)."""
    from scipy import integrate

    def inner(x):
        return x * norm.cdf((math.log(x) + 0.5 * s * s) / s) - norm.cdf((math.log(x) - 0.5 * s * s) / s) if x > 0 else 0.0

    def f(y):  # over y = log W_1
        w = math.exp(y)
        return norm.pdf(y, -0.5 * s * s, s) * inner(a - w) if w < a else 0.0

    val, _ = integrate.quad(f, -0.5 * s * s - 40 * s, math.log(a), epsabs=0.0, epsrel=1e-11, limit=400)
    return val


@pytest.mark.parametrize("sigma", [0.5, 0.6, 0.8])
def test_small_sums_dominate_the_exact_law_in_decreasing_convex_order(sigma):
    """``epoch_add.small_sums`` re-places the lattice's smallest sums (t = 2 here): the measure
    it gives has Psi*(a) = E(a - S*)_+ at least the exact E(a - S)_+ (quadrature) at every a up
    to past its last point -- what makes every add-direction δ an upper bound -- with no more than
    a 1e-250 atom left at S = 0 (the lattice had P(W < h)^2-ish there)."""
    from sgmfast.pld.samplers import epoch_add

    s, t, h = 1.0 / sigma, 2, 0.05
    ep = allocation.Epoch(sigma, t, h, 400.0, 820.0, 1e-15)
    up = np.zeros(ep.C)  # (the upper lattice whole: the epoch keeps its non-zero entries)
    up[ep.up_o:ep.up_o + ep.up.size] = ep.up
    k0, atom, xs, ms = epoch_add.small_sums(up, ep.h, s, t)
    assert ms[0] <= 1e-250 < up[0]
    k = np.arange(up.size) * ep.h
    rest = up.copy()
    rest[:k0], rest[k0] = 0.0, atom
    for a in np.geomspace(1e-3, (k0 + 3) * ep.h, 25):
        psi_star = float(np.sum(ms * np.maximum(a - xs, 0.0)) + np.sum(rest * np.maximum(a - k, 0.0)))
        assert psi_star >= _psi_exact_two(float(a), s) * (1 - 1e-7)


def test_cap_room_grows_with_the_tail_and_the_budget():
    """``epoch_tail.cap_room``: room above W_max for the cap where the P-mass above it would pass
    1000 budgets -- a heavy tail at a small budget (sigma 0.631, t 140, 1e-19: its upper end was
    +inf on every lattice without it) -- and none for a light tail or a generous budget."""
    from sgmfast.pld.samplers import epoch_tail

    def room(sigma, t, tail):
        s = 1.0 / sigma
        w_max = epoch_tail.least_top(s, t, tail)
        return epoch_tail.cap_room(s, t, w_max, math.expm1(s * s), tail)

    assert room(0.631, 140, 1e-19) > 1.0
    assert room(2.0, 140, 1e-19) == 1.0
    assert room(0.631, 140, 1e-19) >= room(0.631, 140, 1e-9)


@pytest.mark.parametrize("s, shift, t, r, step", [(2.5, 1.0, 1e4, 1.2e4, 0.01), (2.0, 0.0, 3.0, 2.5, 0.05),
                                                   (1.6, 1.0, 100.0, 90.0, 0.002), (2.2, 1.0, 2.0, 0.0, 0.02)])
def test_tail_bins_bracket_the_tails_delta_by_quadrature(s, shift, t, r, step):
    """``tail_bins``' two sides against the δ functional of the mass they bin, by quadrature:
    E[(1 - e^{eps} t / (W + r))_+; W > w_max] (log W ~ N((shift - 1/2) s^2, s^2), every eps).
    The upper's connect-the-dots masses (and its +inf mass) give at least that; the lower's atoms
    (mass out[j] at mean e^{-(loss - ell_j)} = out_u[j] / out[j]) at most that; and the two are
    a small fraction of a step apart (rounding each bin to a grid point set them a step apart)."""
    from scipy import integrate

    from sgmfast._kernels.pld import allocation_tail as kt

    w_max = math.exp(0.5 * s * s + 2.0 * s)
    j_lo = math.floor(math.log((w_max + r) / t) / step) - 3
    n = int(8.0 * s / step)
    up, lo, lo_u = np.zeros(n), np.zeros(n), np.zeros(n)
    p_inf = kt.tail_bins(s, shift, w_max, t, r, 1.0, step, j_lo, n, True, up, np.zeros(0), math.inf)
    kt.tail_bins(s, shift, w_max, t, r, 1.0, step, j_lo, n, False, lo, lo_u, math.inf)
    ell = (j_lo + np.arange(n)) * step
    mean_u = np.where(lo > 0, lo_u / np.where(lo > 0, lo, 1.0), 1.0)
    mu = (shift - 0.5) * s * s
    z_max = (math.log(w_max) - mu) / s
    top = ell[-1]
    for eps in ell[n // 8:3 * n // 4:max(1, n // 12)] + 0.3 * step:  # (below the top, whose +inf mass is its own)
        def f(z, eps=eps):
            loss = math.log((math.exp(mu + s * z) + r) / t)
            return norm.pdf(z) * max(0.0, 1.0 - math.exp(eps - loss))

        z_top = (math.log(t * math.exp(top) - r) - mu) / s
        exact_in = integrate.quad(f, z_max, z_top, limit=500, epsabs=1e-300, epsrel=1e-11)[0]
        exact_all = exact_in + integrate.quad(f, z_top, 40.0, limit=500, epsabs=1e-300, epsrel=1e-11)[0]
        upper = float(np.sum(up * np.maximum(0.0, 1.0 - np.exp(eps - ell)))) + p_inf
        lower = float(np.sum(lo * np.maximum(0.0, 1.0 - np.exp(eps - ell) * mean_u)))
        assert upper >= exact_all * (1 - 1e-9), (eps, upper, exact_all)
        assert lower <= exact_all * (1 + 1e-9), (eps, lower, exact_all)
        # and close to second order: rounding each bin's loss to a grid point (up for the upper,
        # down for the lower, as before) leaves them about step x (the functional's derivative in
        # a shift of every loss, E[e^{eps - loss}; loss > eps]) apart
        def g(z, eps=eps):
            loss = math.log((math.exp(mu + s * z) + r) / t)
            return norm.pdf(z) * (math.exp(eps - loss) if loss > eps else 0.0)

        slope = integrate.quad(g, z_max, 40.0, limit=500, epsabs=1e-300, epsrel=1e-11)[0]
        assert upper - lower <= 0.1 * step * slope, (eps, lower, upper, step * slope)



@pytest.mark.parametrize("s, shift, t, r, step", [(2.5, 1.0, 1e4, 1.2e4, 0.01), (0.105, 0.0, 24.0, 24.0, 1e-4),
                                                   (1.0, 1.0, 5319.0, 5300.0, 3e-4)])
def test_tail_bins_stopped_early_only_move_mass_against_each_bound(s, shift, t, r, step):
    """``tail_bins`` with ``z_stop`` (``epoch_tail._sweeps``): the upper's masses below the stop
    are the unstopped ones and the rest goes to +inf, so its δ at every eps is at least the
    unstopped one's and the total is kept; the lower only loses mass (each bin's mass and mean
    at most the unstopped ones), and the mass it drops is the survival past the stop."""
    from sgmfast._kernels.pld import allocation_tail as kt

    w_max = math.exp(0.5 * s * s + 2.0 * s)
    j_lo = math.floor(math.log((w_max + r) / t) / step) - 3
    n = int(min(40.0 * s, 8.0) / step)
    z_stop = (math.log(w_max) - (shift - 0.5) * s * s) / s + 3.0
    up0, up1, lo0, lu0, lo1, lu1 = (np.zeros(n) for _ in range(6))
    inf0 = kt.tail_bins(s, shift, w_max, t, r, 1.0, step, j_lo, n, True, up0, np.zeros(0), math.inf)
    inf1 = kt.tail_bins(s, shift, w_max, t, r, 1.0, step, j_lo, n, True, up1, np.zeros(0), z_stop)
    kt.tail_bins(s, shift, w_max, t, r, 1.0, step, j_lo, n, False, lo0, lu0, math.inf)
    kt.tail_bins(s, shift, w_max, t, r, 1.0, step, j_lo, n, False, lo1, lu1, z_stop)
    assert inf1 > inf0 and math.isclose(up1.sum() + inf1, up0.sum() + inf0, rel_tol=1e-9)
    ell = (j_lo + np.arange(n)) * step
    for eps in ell[::max(1, n // 50)]:
        d0 = float(np.sum(up0 * np.maximum(0.0, 1.0 - np.exp(eps - ell)))) + inf0
        d1 = float(np.sum(up1 * np.maximum(0.0, 1.0 - np.exp(eps - ell)))) + inf1
        assert d1 >= d0 * (1 - 1e-12)
    assert np.all(lo1 <= lo0) and np.all(lu1 <= lu0)
    dropped = lo0.sum() - lo1.sum()
    assert dropped <= float(norm.sf(z_stop)) * (1 + 1e-6) + 1e-300 and dropped > 0


def test_sweeps_charge_no_negative_work():
    """``epoch_tail._sweeps`` charges a pass a bin swept, and at least one bin a sweep: a sweep whose
    stop lies below its start (a weight above the floor whose whole tail is below it) used to
    subtract its span from the work meter (MNIST's query charged -0.004 units there)."""
    from sgmfast._work import metered
    from sgmfast.pld.samplers import epoch_tail

    s, w_max, t, step, n = 0.9, 30.0, 234, 1e-3, 2000
    j_lo = math.floor(math.log((w_max + 200.0) / t) / step) - 10
    r, w = np.array([200.0, 230.0]), np.array([1e-6, 1e-3])
    with metered() as meter:
        beyond = epoch_tail._sweeps(s, w_max, t, r, w, np.array([1.0, 0.0]), step, j_lo, n, True,
                                    np.zeros(n), np.zeros(0), 1e-7)
    assert meter.units > 0.0 and beyond > 0.0

def test_log_ndtr_pairs_are_log_ndtr_bit_for_bit():
    """``tail_bins`` carries ``log_ndtr_pair`` from one boundary to the next: the same values as
    ``log_ndtr`` at x and -x, and ``log_ndtr_diff_pairs`` as ``log_ndtr_diff``."""
    from sgmfast._kernels import logmath as lm

    rng = np.random.default_rng(3)
    xs = np.concatenate([rng.uniform(-45.0, 45.0, 4000), [0.0, -0.0, 30.0, -30.0, 29.9, -29.9, np.inf, -np.inf]])
    for x in xs:
        assert lm.log_ndtr_pair(x) == (lm.log_ndtr(x), lm.log_ndtr(-x))
    for _ in range(4000):
        a, b = np.sort(rng.uniform(-45.0, 45.0, 2))
        b = a + abs(b - a) * 1e-3 if rng.random() < 0.3 else b
        assert lm.log_ndtr_diff_pairs(a, b, lm.log_ndtr_pair(a), lm.log_ndtr_pair(b)) == lm.log_ndtr_diff(a, b)


@pytest.mark.parametrize("sigma, delta", [(1.2, 1e-12), (1.0, 1e-12), (1.0, 1e-9)])
def test_few_steps_tiny_delta_take_the_lower_top(sigma, delta):
    """One epoch of t = 3 at sigma 1-1.2 and δ down to 1e-12: the lattice topped at 1000 t cannot
    resolve the masses that set δ ([4.288, 5.676] at sigma 1.2, δ 1e-12); level 0 also evaluates
    the lattice topped lower (``epoch_grid.second_top``), above which the tail is in closed form.  Against the
    quadrature: bracketed, and within 2e-3."""
    b = allocation.epsilon(sigma, 3, 3, delta)
    assert _delta_remove_t3(sigma, b.lower) >= delta * (1 - 1e-4)
    assert _delta_remove_t3(sigma, b.upper) <= delta * (1 + 1e-4)
    assert b.upper - b.lower <= 2e-3 * b.upper


def _add_law_whole(up, h, s, t, tail):
    """``epoch_add.add_law`` on the whole lattice, as it was written before the epochs kept only
    their non-zero entries: the reference for the windowed one."""
    from sgmfast.pld.samplers import epoch_add

    small = epoch_add.small_sums(up, h, s, t)
    if small is None:
        i_top = int(np.searchsorted(np.cumsum(up), tail, side="right"))
        return up, None, min(max(i_top, 1), up.size - 1) * h
    k0, atom, xs, ms = small
    out = up.copy()
    out[:k0], out[k0] = 0.0, atom
    cum = np.cumsum(ms)
    i = int(np.searchsorted(cum, tail, side="right"))
    if i < xs.size:
        return out, small, float(xs[max(i, 1)]) if xs.size > 1 else k0 * h
    rest = float(cum[-1]) + np.cumsum(out[k0:])
    return out, small, (k0 + min(int(np.searchsorted(rest, tail, side="right")), rest.size - 1)) * h


@pytest.mark.parametrize("first,size,C,tail", [(0, 300, 400, 1e-9), (3, 40, 400, 1e-9), (50, 200, 400, 1e-9),
                                               (70, 100, 400, 0.9), (0, 0, 400, 1e-9), (2, 10, 12, 1e-3),
                                               (100, 50, 1000, 2.0)])
def test_add_law_of_the_kept_entries_is_the_whole_lattices(first, size, C, tail):
    """The add direction's law from an epoch's non-zero entries (offset, entries) is the one of
    the whole lattice, entry for entry, with the same top -- windows below, across and above the
    smallest sums ``small_sums`` re-places, none at all, the whole mass below ``tail``."""
    from sgmfast.pld.samplers import epoch_add

    sigma, t, h = 0.6, 5, 0.05
    rng = np.random.default_rng(first * 7919 + size)
    up = rng.random(size) * np.exp(-0.01 * np.arange(size))
    up /= max(up.sum(), 1.0)
    whole = np.zeros(C)
    whole[first:first + size] = up
    ref, ref_small, ref_top = _add_law_whole(whole, h, 1.0 / sigma, t, tail)
    o, out, small, top = epoch_add.add_law(up, first, C, h, 1.0 / sigma, t, tail)
    got = np.zeros(C)
    got[o:o + out.size] = out
    assert np.array_equal(got, ref) and top == ref_top and (small is None) == (ref_small is None)


@pytest.mark.parametrize("sigma", [0.7, 1.0, 2.0])
def test_windows_lower_tail_bound_is_above_the_quadrature(sigma):
    """``Windows.below`` (Chernoff on the lattice majorant, the cut mass at the top) bounds
    Q(W_1 + W_2 < y) from above: checked against a quadrature of the lognormal's own CDF and
    density, W = e^{(2y - 1) / (2 sigma^2)} (log W ~ N(-s^2/2, s^2), s = 1/sigma)."""
    from sgmfast.pld.samplers import epoch_power as ep
    from sgmfast.pld.samplers import epoch_tail as et

    s, h, K = 1.0 / sigma, 0.01, 4000
    w_top = K * h
    wins = ep.Windows(et.upper_law(s, h, K), h, 3, K + 1)
    q_top = float(norm.sf((math.log(w_top) + 0.5 * s * s) / s)) * (1 + 1e-6)
    dist = norm(loc=-0.5 * s * s, scale=s)

    def cdf2(y):  # Q(W_1 + W_2 < y) = int_0^y F(y - w) f(w) dw
        f = lambda w: dist.cdf(math.log(y - w)) * dist.pdf(math.log(w)) / w if 0 < w < y else 0.0
        return integrate.quad(f, 0.0, y, limit=200, epsabs=0.0, epsrel=1e-10)[0]

    ys = np.array([0.05, 0.1, 0.2, 0.4, 0.8, 1.2])
    bounds = wins.below(2, ys, q_top, w_top)
    for y, b in zip(ys, bounds):
        assert b >= cdf2(float(y)) * (1 - 1e-8)
    assert bounds[0] < 0.05  # (and it says something in the lower tail)


def test_add_direction_truncated_mass_follows_the_others_sum():
    """``epoch_add.place_out``: the truncated Q-mass goes to the losses of W_max + R over a law of
    R stochastically below R's, keeping its total; with W_max below the add grid's top sum, most of it
    lands at negative losses, not at the grid's top (sigma 0.9968, t 2026, 3 epochs, δ 2.6e-9: the
    upper end 0.2793 for a lower 0.2761 before)."""
    from sgmfast.pld.samplers import epoch_add
    from sgmfast.pld.samplers import epoch_power as ep
    from sgmfast.pld.samplers import epoch_tail as et

    s, h, K, t = 1.0 / 0.9968, 0.02, 18000, 2026
    w_max = K * h
    wins = ep.Windows(et.upper_law(s, h, K), h, t, 200000)
    step, j_lo, n = 1e-3, -600, 900  # (losses -0.6 .. 0.3)
    pess = np.zeros(n)
    q_out = 2.3e-7
    beyond = epoch_add.place_out(q_out, w_max, wins, t, step, j_lo, n, pess)
    assert pess.sum() + beyond == pytest.approx(q_out, rel=1e-9)
    assert pess.sum() + beyond >= q_out
    losses = (j_lo + np.arange(n)) * step
    assert pess[losses < 0].sum() > 0.99 * q_out
    assert beyond < 1e-20
