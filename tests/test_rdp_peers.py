"""One-sided comparisons with the peers' RDP accountants (run when they are installed)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sgmfast import rdp

pytestmark = pytest.mark.peers

SCENARIOS = [
    (1.0, 0.01, 1000),
    (1.1, 256 / 60000, 14062),
    (0.8, 0.001, 100_000),
    (0.6, 1e-4, 1_000_000),
    (2.0, 0.1, 100),
    (5.0, 0.5, 10),
]


def _dp_rdp():
    pytest.importorskip("dp_accounting")
    from dp_accounting.rdp import rdp_privacy_accountant as m

    return m


@pytest.mark.parametrize("sigma,q,steps", SCENARIOS)
def test_integer_orders_agree_with_dp_accounting(sigma, q, steps):
    m = _dp_rdp()
    orders = np.arange(2.0, 65.0)
    theirs = np.asarray(m._compute_rdp_poisson_subsampled_gaussian(q, sigma, orders)) * steps
    ours = rdp.rdp(sigma, q, steps, orders)
    np.testing.assert_allclose(ours, theirs, rtol=1e-9)


@pytest.mark.parametrize("sigma,q,steps", SCENARIOS)
def test_fractional_orders_never_above_dp_accounting(sigma, q, steps):
    # dp_accounting adds the magnitudes of the fractional series' terms, ignoring their signs,
    # so its values can only be larger; where the negative terms are negligible they agree.
    m = _dp_rdp()
    orders = np.array([1.1, 1.5, 2.5, 4.75, 10.5])
    theirs = np.asarray(m._compute_rdp_poisson_subsampled_gaussian(q, sigma, orders)) * steps
    ours = rdp.rdp(sigma, q, steps, orders)
    assert np.all(ours <= theirs * (1 + 1e-9))


def test_dp_accounting_sign_defect_is_absent_here():
    m = _dp_rdp()
    q, sigma, alpha = 0.1, 2.0, 1.5
    theirs = m._compute_log_a(q, sigma, alpha)
    ours = rdp.log_a(sigma, q, alpha)
    assert ours < theirs  # 1.049e-3 (exact) against their 1.363e-3


@pytest.mark.parametrize("sigma,q,steps", SCENARIOS)
def test_epsilon_never_above_dp_accounting(sigma, q, steps):
    pytest.importorskip("dp_accounting")
    import dp_accounting

    acc = dp_accounting.rdp.RdpAccountant()
    acc.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps)
    theirs = acc.get_epsilon(1e-5)
    ours = rdp.epsilon(sigma, q, steps, 1e-5)
    assert ours <= theirs * (1 + 1e-9)
    # On their own orders our epsilon agrees with theirs where their series is exact.
    their_orders = np.array([o for o in dp_accounting.rdp.rdp_privacy_accountant.DEFAULT_RDP_ORDERS
                             if float(o).is_integer()], dtype=float)
    acc_int = dp_accounting.rdp.RdpAccountant(orders=list(their_orders))
    acc_int.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps)
    assert rdp.epsilon(sigma, q, steps, 1e-5, orders=their_orders) == pytest.approx(
        acc_int.get_epsilon(1e-5), rel=1e-6)


@pytest.mark.parametrize("sigma,q,steps", SCENARIOS)
def test_epsilon_never_above_opacus(sigma, q, steps):
    pytest.importorskip("opacus")
    from opacus.accountants.analysis.rdp import compute_rdp, get_privacy_spent

    orders = [1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64))
    r = compute_rdp(q=q, noise_multiplier=sigma, steps=steps, orders=orders)
    theirs, _ = get_privacy_spent(orders=orders, rdp=r, delta=1e-5)
    assert rdp.epsilon(sigma, q, steps, 1e-5) <= theirs * (1 + 1e-9)
    assert math.isfinite(theirs)
