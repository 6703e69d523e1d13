"""RDP of the Poisson-subsampled Gaussian mechanism, and its conversion to (epsilon, delta).

Notation (sensitivity 1): mu0 = N(0, s^2), mu1 = N(1, s^2), mu = (1 - q) mu0 + q mu1,
A_alpha = E_{z ~ mu0}[(mu(z)/mu0(z))^alpha]; one step is (alpha, log(A_alpha)/(alpha - 1))-RDP
(Mironov, Talwar & Zhang 2019, "Renyi differential privacy of the sampled Gaussian
mechanism", arXiv:1908.10530, Theorems 4 and 5).

Modules: ``log_a`` (below), ``conversion`` (a schedule's RDP to (epsilon, delta)), ``orders``
(the search for the best order), ``fractional`` (its fractional orders from tabulated
quadrature nodes), ``chord`` (its fractional orders without quadrature) and ``prefix`` (the
total RDP of every prefix of a schedule, for the accountant's curve). Three evaluations of log A_alpha live in ``log_a``:

* ``log_a_int`` -- integer alpha: the finite binomial sum (MTZ Sec. 3.3, Case I) written for
  A - 1 with ``expm1`` so log A = log1p(A - 1) keeps full relative precision for tiny q.
* ``log_a_quad`` -- any real alpha > 1: A - 1 as the integral of a non-negative integrand,
  by the trapezoidal rule on the real line (see its docstring). This is the engine for
  fractional orders.
* ``log_a_series`` -- fractional alpha: the two-sided series of MTZ Sec. 3.3, Case II, summed
  with signs in log space. It computes A itself (a sum of O(1) terms), so it cannot resolve
  log A below ~1e-16 absolute; it is kept as an independent cross-check and returns +inf
  when it does not converge.

Where the quadrature would be expensive (small sigma: ~order / sigma^2 nodes, or a schedule of
many distinct steps), fractional orders are bounded without it, by the smaller of the chord
between the integer orders around them (log A_alpha is convex in alpha, Hoelder, and
log A_1 = 0) and the closed form ``log_a_jensen`` (``chord.interpolated_min``, and
``fixed_size.rdp_curve`` for fixed-size batches).

Status values: kernels return NaN or +inf rather than raising; +inf is the conservative
answer for an upper bound.
"""

from .log_a import (  # noqa: F401
    ALPHA_MAX,
    QUAD_CHEAP,
    _INV_FACT,
    _LOG_FACT,
    _LOG_FACT_MAX,
    _MAX_NODES,
    _SERIES_MAX,
    _SERIES_TERMS,
    _TAIL_NATS,
    _TRAP_LOG_ERR,
    _h1,
    _h2,
    _log_a_int_lower,
    _log_a_quad_logspace,
    _log_erfc_half,
    _log_g,
    _log_h1,
    _log_h2,
    _log_ratio,
    _quad_lower_end,
    log_a,
    log_a_jensen,
    log_a_closed_form_bound,
    log_a_int,
    log_a_quad,
    log_a_series,
    quad_setup,
    trap_step,
)
from .conversion import (  # noqa: F401
    _from_rdp,
    _objective,
    best_of_orders,
    bh_log_delta,
    eps_from_rdp,
    log_delta_from_rdp,
    rdp_curve,
    schedule_rdp,
)
from .fractional import (  # noqa: F401
    _brent_min,
    _log_a_derivs,
    _newton_min,
    _node_cap,
    _objective_nodes,
    _quad_cheap,
    log_a_from_nodes,
    prepare_nodes,
)
from .orders import (  # noqa: F401
    DEFAULT_GRID,
    LOW_GRID,
    PARALLEL_MIN_POINTS,
    _objective_above,
    _optimise_order,
    _optimise_points,
    _scan,
    optimise_order,
    optimise_points,
    optimise_points_serial,
)
