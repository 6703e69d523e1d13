"""Exact privacy profiles of the (subsampled) Gaussian mechanism in mpmath.

An independent, high-precision reference for the edges of the parameter domain.
It imports only the standard library and mpmath (never sgmfast), so it can be
loaded either as ``from reference import mp_exact`` (with ``tests/`` on
``sys.path``) or as ``import mp_exact`` (with ``tests/reference`` on ``sys.path``).

Units and conventions
---------------------
* eps (epsilon) is in nats; delta is a probability.
* Inputs are Python floats/ints (or mpf); every float is used at its exact
  binary value ``mpf(x)``.  Outputs are ``mpmath.mpf`` and are NEVER rounded
  to 0 by underflow: a value of 1e-5000 is returned as such.  They carry at
  least 40 significant digits whatever the caller's ``mp.dps`` (an mpf keeps
  its own mantissa; ``mpmath.nstr(x, 30)`` prints 30 correct digits), but do
  further arithmetic on them inside ``mp.workdps(50)`` or more.
* Sensitivity 1 unless stated; noise N(0, sigma^2); Poisson rate q.
  mu0 = N(0, s^2), mu1 = N(1, s^2), mu = (1-q) mu0 + q mu1.
  - "remove":  P = mu,  Q = mu0
  - "add":     P = mu0, Q = mu
  - "max":     the larger of remove and add (the add/remove accountant)
  - "replace": P = (1-q) N(0,s^2) + q N(-1,s^2), Q = (1-q) N(0,s^2) + q N(1,s^2)
  delta(eps) = int (P - e^eps Q)_+ (hockey stick);
  eps(delta) = smallest eps >= 0 with delta(eps) <= delta (0 if delta(0) <= delta).

Accuracy
--------
Every delta is computed from a closed form whose terms can cancel (huge sigma,
eps close to the end of the add direction's support).  The working precision is
chosen from the size of the terms relative to the result, and the value is then
recomputed at 20 more digits; it is returned only when both agree to 1e-32
relative (``verified`` mode, the default).  Otherwise the precision grows until
they do.  Results are therefore good to well beyond 30 significant digits.
Inverse functions (epsilon) find the root of log delta(eps) = log delta by a
bracketed, safeguarded Newton iteration (bracket grown and bisected in log
space), to 1e-40 relative in eps.

Closed forms (Sbar = normal survival function, Phi = normal cdf, s = sigma):
  remove (Raisa et al. 2024, eq. 45): h = e^eps - 1 + q, t = s log(h/q),
      delta = q Sbar(t - 1/(2s)) - h Sbar(t + 1/(2s))
  add: for eps < -log(1-q), z' = s^2 log((e^-eps - 1 + q)/q) + 1/2,
      delta = Phi(z'/s) - e^eps [(1-q) Phi(z'/s) + q Phi((z'-1)/s)];  0 otherwise
  replace: the loss log(P/Q)(z) decreases in z and equals eps at
      z* = -s^2 [eps/2 + asinh(sinh(eps/2) (1-q) e^{1/(2 s^2)} / q)]
      (the positive root of a quadratic in u = e^{z/s^2}, written without
      cancellation), and delta = P(Z < z*) - e^eps Q(Z < z*)
      = q Phi((z*+1)/s) - (e^eps - 1)(1-q) Phi(z*/s) - e^eps q Phi((z*-1)/s)
  Gaussian (Balle & Wang 2018), mu = c sqrt(T)/sigma:
      delta = Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu)
"""

import math

import mpmath
from mpmath import mp, mpf

__all__ = [
    "gaussian_delta", "gaussian_epsilon",
    "composed_gaussian_delta", "composed_gaussian_epsilon",
    "one_step_delta", "one_step_epsilon",
    "sgm_delta_no_noise", "sgm_epsilon_no_noise",
    "tv_distance", "DIRECTIONS",
]

DIRECTIONS = ("remove", "add", "replace", "max")

START_DPS = 45        # first working precision
GOOD_DIGITS = 40      # digits that must survive the estimated cancellation
AGREE_REL = mpf("1e-32")
EXTRA_DPS = 20        # second precision used for the agreement check
MAX_DPS = 20000
ROOT_REL = mpf("1e-40")

_ZERO = "zero"        # kernel marker: the exact value is 0


# --------------------------------------------------------------------------
# small helpers (evaluated in the current mp context)
# --------------------------------------------------------------------------
def _Phi(x):
    return mpmath.erfc(-x / mpmath.sqrt(2)) / 2


def _Sbar(x):
    return mpmath.erfc(x / mpmath.sqrt(2)) / 2


def _log10_ratio(big, small):
    """log10(|big| / |small|), >= 0; robust for mpf of any size."""
    if small == 0:
        return float("inf")
    if big == 0:
        return 0.0
    r = float(mpmath.log10(abs(big)) - mpmath.log10(abs(small)))
    return max(r, 0.0)


def _work_dps():
    """Precision of the non-adaptive steps: never below 60 digits, whatever
    the caller's mp.dps (results keep their own mantissa, so they are not
    rounded to a low caller precision on return)."""
    return max(mp.dps, 60)


def _to_mpf(x):
    return x if isinstance(x, mpmath.mpf) else mpf(x)


def _check_direction(direction):
    if direction not in DIRECTIONS:
        raise ValueError("direction must be one of %s, got %r" % (DIRECTIONS, direction))


# --------------------------------------------------------------------------
# kernels: called inside a workdps context with the raw inputs.
# Each returns (value, lost_digits, slope) where slope = e^eps Q(L > eps) > 0,
# so that d delta / d eps = -slope; or (_ZERO, 0, 0) for an exact zero.
# --------------------------------------------------------------------------
def _k_gauss(mu_spec, eps):
    if mu_spec[0] == "mu":
        mu = _to_mpf(mu_spec[1])
    else:                       # ("ratio", c, T, sigma): mu = c sqrt(T)/sigma
        _, c, T, sigma = mu_spec
        mu = _to_mpf(c) * mpmath.sqrt(_to_mpf(T)) / _to_mpf(sigma)
    eps = _to_mpf(eps)
    a = _Phi(mu / 2 - eps / mu)
    slope = mpmath.exp(eps) * _Phi(-mu / 2 - eps / mu)
    v = a - slope
    return v, _log10_ratio(a, v), slope


def _k_remove(q, s, eps):
    q, s, eps = _to_mpf(q), _to_mpf(s), _to_mpf(eps)
    em1 = mpmath.expm1(eps)
    h = em1 + q
    t = s * mpmath.log1p(em1 / q)
    half = 1 / (2 * s)
    a = q * _Sbar(t - half)
    sb = _Sbar(t + half)
    v = a - h * sb
    return v, _log10_ratio(a, v), mpmath.exp(eps) * sb


def _k_add(q, s, eps):
    q, s, eps = _to_mpf(q), _to_mpf(s), _to_mpf(eps)
    # gap = e^-eps - (1 - q) > 0 iff eps < -log(1-q).  Two ways to form it;
    # each has a rounding error ~ 10^-dps times its larger term, so take the
    # one whose larger term is smaller (expm1 form for small eps, where
    # e^-eps and 1-q are both ~1; plain form for large eps, e.g. q = 1)
    em = mpmath.expm1(-eps)
    ex = mpmath.exp(-eps)
    one_q = 1 - q
    if max(-em, q) <= max(ex, one_q):
        gap, size = em + q, max(-em, q)
    else:
        gap, size = ex - one_q, max(ex, one_q)
    if gap == 0:                          # not resolved: more digits
        return None, float(mp.dps), None
    lost_gap = _log10_ratio(size, gap)
    if gap <= 0:
        # exact zero unless the sign of gap is not resolved at this precision
        if lost_gap > mp.dps - 10:
            return None, lost_gap, None
        return _ZERO, 0.0, 0.0
    zs = s * mpmath.log(gap / q) + 1 / (2 * s)   # z'/s
    p0 = _Phi(zs)
    qcdf = (1 - q) * p0 + q * _Phi(zs - 1 / s)
    slope = mpmath.exp(eps) * qcdf
    v = p0 - slope
    return v, _log10_ratio(p0, v) + lost_gap, slope


def _k_replace(q, s, eps):
    q, s, eps = _to_mpf(q), _to_mpf(s), _to_mpf(eps)
    half_eps = eps / 2
    arg = mpmath.sinh(half_eps) * (1 - q) / q
    if arg != 0:
        arg = arg * mpmath.exp(1 / (2 * s * s))
    zs = -s * (half_eps + mpmath.asinh(arg))     # z*/s
    inv_s = 1 / s
    ee = mpmath.exp(eps)
    t1 = q * _Phi(zs + inv_s)
    p0 = _Phi(zs)
    t2 = mpmath.expm1(eps) * (1 - q) * p0
    pm = _Phi(zs - inv_s)
    t3 = ee * q * pm
    v = t1 - t2 - t3
    slope = ee * ((1 - q) * p0 + q * pm)
    return v, _log10_ratio(max(t1, t2, t3), v), slope


# --------------------------------------------------------------------------
# adaptive-precision driver
# --------------------------------------------------------------------------
def _run(kernel, args, verified=True):
    """Evaluate kernel(*args) with enough digits; returns (value, slope).

    The precision is raised until the estimated cancellation leaves at least
    GOOD_DIGITS digits; in verified mode the value is then recomputed with
    EXTRA_DPS more digits and accepted only if both agree to AGREE_REL.
    """
    dps = START_DPS
    while True:
        if dps > MAX_DPS:
            raise ArithmeticError("mp_exact: precision limit reached for %s%r"
                                  % (kernel.__name__, args))
        with mp.workdps(dps):
            v, lost, slope = kernel(*args)
        if v is None:                           # sign of a gap not resolved
            dps = int(dps + lost + GOOD_DIGITS)
            continue
        if v is _ZERO:
            return mpf(0), mpf(0)
        if not v > 0:                           # total cancellation
            dps *= 2
            continue
        if lost > dps - GOOD_DIGITS:
            dps = int(lost + GOOD_DIGITS + 10)
            continue
        if not verified:
            return v, slope
        with mp.workdps(dps + EXTRA_DPS):
            v2, _, slope2 = kernel(*args)
            ok = (v2 is not None and v2 is not _ZERO and v2 > 0
                  and abs(v2 - v) <= AGREE_REL * v2)
        if ok:
            return v2, slope2
        dps *= 2


# --------------------------------------------------------------------------
# delta(eps)
# --------------------------------------------------------------------------
def gaussian_delta(mu, eps, verified=True):
    """delta(eps) of the Gaussian mechanism with mu = c sqrt(T)/sigma (mpf).

    mu = inf (no noise): 1;  mu = 0: 0;  eps = inf: 0 (mu finite).
    """
    mu_m = _to_mpf(mu)
    eps_m = _to_mpf(eps)
    if eps_m < 0:
        raise ValueError("eps must be >= 0")
    if mu_m < 0:
        raise ValueError("mu must be >= 0")
    if mpmath.isinf(mu_m):
        return mpf(1)
    if mu_m == 0 or mpmath.isinf(eps_m):
        return mpf(0)
    return _run(_k_gauss, (("mu", mu), eps), verified)[0]


def composed_gaussian_delta(sigma, steps, eps, sensitivity=1, verified=True):
    """T-fold Gaussian mechanism: mu = sensitivity*sqrt(steps)/sigma, computed
    inside at the working precision (no float rounding of mu)."""
    sigma = _to_mpf(sigma)
    if sigma == 0:
        return mpf(1) if (steps > 0 and sensitivity != 0) else mpf(0)
    if steps == 0 or sensitivity == 0 or mpmath.isinf(sigma):
        return mpf(0)
    if mpmath.isinf(_to_mpf(eps)):
        return mpf(0)
    if _to_mpf(eps) < 0:
        raise ValueError("eps must be >= 0")
    return _run(_k_gauss, (("ratio", sensitivity, steps, sigma), eps), verified)[0]


def _no_noise_one_step(q, eps, direction):
    q = _to_mpf(q)
    eps = _to_mpf(eps)
    if direction in ("remove", "replace"):
        return q
    with mp.workdps(_work_dps()):
        add = mpf(1) if q == 1 else max(mpf(0), -mpmath.expm1(eps + mpmath.log1p(-q)))
    if direction == "add":
        return add
    return max(+q, add)


def one_step_delta(q, sigma, eps, direction="max", verified=True):
    """Exact one-step delta(eps) of the Poisson-subsampled Gaussian mechanism.

    q in [0, 1], sigma >= 0 (sigma = 0: no noise), eps in [0, inf] (nats).
    """
    _check_direction(direction)
    qm, sm, em = _to_mpf(q), _to_mpf(sigma), _to_mpf(eps)
    if not (0 <= qm <= 1) or sm < 0 or em < 0:
        raise ValueError("need 0 <= q <= 1, sigma >= 0, eps >= 0")
    if qm == 0:
        return mpf(0)
    if sm == 0:
        return _no_noise_one_step(q, eps, direction)
    if mpmath.isinf(em) or mpmath.isinf(sm):
        return mpf(0)
    if direction == "max":
        return max(one_step_delta(q, sigma, eps, "remove", verified),
                   one_step_delta(q, sigma, eps, "add", verified))
    kernel = {"remove": _k_remove, "add": _k_add, "replace": _k_replace}[direction]
    return _run(kernel, (q, sigma, eps), verified)[0]


def tv_distance(q, sigma, direction="max"):
    """delta(0), the total-variation distance (the same for add and remove):
    remove/add/max: q erf(1/(2 sqrt(2) s));  replace: q erf(1/(sqrt(2) s))."""
    _check_direction(direction)
    qm, sm = _to_mpf(q), _to_mpf(sigma)
    if sm == 0:
        return qm
    if mpmath.isinf(sm):
        return mpf(0)
    with mp.workdps(_work_dps()):
        k = 1 if direction == "replace" else 2
        r = qm * mpmath.erf(1 / (k * mpmath.sqrt(2) * sm))
    return r


def sgm_delta_no_noise(q, steps, eps, direction="max"):
    """T-fold SGM with sigma = 0.  remove: 1 - (1-q)^T for every eps >= 0
    (P puts 1-(1-q)^T off the all-zero outcome, where Q = point mass has none);
    add: (1 - e^eps (1-q)^T)_+ <= 1 - (1-q)^T; max: 1 - (1-q)^T."""
    if direction not in ("remove", "add", "max"):
        raise ValueError("direction must be remove, add or max")
    qm, em = _to_mpf(q), _to_mpf(eps)
    if em < 0:
        raise ValueError("eps must be >= 0")
    if steps == 0 or qm == 0:
        return mpf(0)
    with mp.workdps(_work_dps()):
        if qm == 1:
            one_minus = mpf(0)
            rem = mpf(1)
        else:
            log1mq = mpmath.log1p(-qm)
            one_minus = mpmath.exp(steps * log1mq)       # (1-q)^T
            rem = -mpmath.expm1(steps * log1mq)          # 1 - (1-q)^T
        if direction == "add" or direction == "max":
            if one_minus == 0:
                add = mpf(1)
            elif mpmath.isinf(em):
                add = mpf(0)
            else:
                add = max(mpf(0), -mpmath.expm1(em + steps * log1mq))
    if direction == "remove":
        return rem
    if direction == "add":
        return add
    return max(rem, add)


# --------------------------------------------------------------------------
# eps(delta)
# --------------------------------------------------------------------------
def _invert(evaluate, target, eps_cap=None):
    """Smallest eps >= 0 with delta(eps) <= target for a decreasing profile.

    evaluate(eps) -> (delta, slope) with d delta/d eps = -slope, at >= 40 digits.
    eps_cap: None, or a function returning (at the current precision) the eps
    at and beyond which delta = 0 (the add direction's -log(1-q)).
    Works on f(eps) = log delta(eps) - log target.
    """
    t = _to_mpf(target)
    dps = _work_dps()
    if eps_cap is not None:
        # the root can lie within ~delta of the cap: carry enough digits
        dps += max(0, int(-mpmath.log10(t)))
    with mp.workdps(dps):
        if eps_cap is not None:
            eps_cap = eps_cap()          # computed at this precision
        logt = mpmath.log(t)
        d0, _ = evaluate(mpf(0))
        if d0 <= t:
            return mpf(0)

        def f(e):
            d, sl = evaluate(e)
            if d == 0:
                return mpmath.ninf, None, d, sl
            return mpmath.log(d) - logt, None, d, sl

        cap_hi = None
        if eps_cap is not None:
            # delta_add(eps) <= 1 - e^eps (1-q) < delta at cap - log1p(delta/2)
            cap_hi = eps_cap - mpmath.log1p(t / 2)
        # bracket in log space: lo has f > 0, hi has f <= 0
        if cap_hi is not None and cap_hi <= 1:
            hi = cap_hi
            fhi = f(hi)
        else:
            hi = mpf(1)
            fhi = f(hi)
        if fhi[0] > 0:
            lo, flo = hi, fhi
            factor = mpf(4)
            while True:
                hi = lo * factor
                if cap_hi is not None and hi >= cap_hi:
                    hi = cap_hi
                    fhi = f(hi)
                    break
                fhi = f(hi)
                if fhi[0] <= 0:
                    break
                lo, flo = hi, fhi
                if hi > mpf("1e300"):
                    return mpmath.inf
        else:
            while True:
                lo = hi / 16
                if lo < mpf("1e-300"):
                    lo = mpf(0)
                    flo = (mpmath.log(d0) - logt, None, d0, None)
                    break
                flo = f(lo)
                if flo[0] > 0:
                    break
                hi, fhi = lo, flo
        # safeguarded Newton on f (as in rtsafe): a Newton step from the latest
        # point when it stays inside the bracket and is less than half the
        # step before; otherwise bisection (geometric when the bracket is wide)
        x, fx = (lo, flo) if flo[0] < -fhi[0] else (hi, fhi)
        dx_old = hi - lo
        root = None
        it = 0
        def tol(x):
            # relative in eps, and relative in the distance to the cap (the
            # add direction's root can sit within ~delta of -log(1-q))
            if eps_cap is not None and eps_cap > x:
                return ROOT_REL * min(x, eps_cap - x)
            return ROOT_REL * x

        for _ in range(3000):
            if hi - lo <= tol(hi):
                break
            xn = None
            if fx[3] is not None and fx[3] > 0 and mpmath.isfinite(fx[0]):
                cand = x + fx[0] * fx[2] / fx[3]   # f' = -slope/delta
                if abs(cand - x) <= tol(x):
                    root = cand if lo <= cand <= hi else x
                    break
                if lo < cand < hi and abs(cand - x) < dx_old / 2:
                    xn = cand
            newton = xn is not None
            if not newton:
                it += 1
                if (cap_hi is not None and it % 2 == 1
                        and (eps_cap - lo) > 4 * (eps_cap - hi)):
                    # geometric in the distance to the cap
                    xn = eps_cap - mpmath.sqrt((eps_cap - lo) * (eps_cap - hi))
                elif lo > 0 and hi / lo > 4:
                    xn = mpmath.sqrt(lo * hi)
                else:
                    xn = (lo + hi) / 2
            dx_old = abs(xn - x)
            fn = f(xn)
            if fn[0] > 0:
                lo, flo = xn, fn
            else:
                hi, fhi = xn, fn
            x, fx = xn, fn
            # a Newton step this small leaves an error far below it (quadratic
            # convergence); the evaluations carry >= 40 digits, so asking for
            # much less than 1e-36 would only chase their noise
            if fn[0] == 0 or (newton and dx_old <= 10000 * tol(xn)):
                root = xn
                break
        if root is None:
            root = x if lo <= x <= hi else (lo + hi) / 2
    return root


def gaussian_epsilon(mu, delta):
    """eps(delta) of the Gaussian mechanism with mu = c sqrt(T)/sigma."""
    mu_m, dm = _to_mpf(mu), _to_mpf(delta)
    if dm >= 1 or mu_m == 0:
        return mpf(0)
    if mpmath.isinf(mu_m) or dm <= 0:
        return mpmath.inf
    return _invert(lambda e: _run(_k_gauss, (("mu", mu), e), False), delta)


def composed_gaussian_epsilon(sigma, steps, delta, sensitivity=1):
    """eps(delta) of the T-fold Gaussian mechanism (mu = c sqrt(T)/sigma)."""
    sm, dm = _to_mpf(sigma), _to_mpf(delta)
    if dm >= 1 or steps == 0 or sensitivity == 0 or mpmath.isinf(sm):
        return mpf(0)
    if sm == 0 or dm <= 0:
        return mpmath.inf
    spec = ("ratio", sensitivity, steps, sigma)
    return _invert(lambda e: _run(_k_gauss, (spec, e), False), delta)


def sgm_epsilon_no_noise(q, steps, delta, direction="max"):
    """eps(delta) for sigma = 0 and T steps (inf when the profile never gets
    down to delta)."""
    qm, dm = _to_mpf(q), _to_mpf(delta)
    if steps == 0 or qm == 0 or dm >= 1:
        return mpf(0)
    rem = sgm_delta_no_noise(q, steps, 0, "remove")
    if direction in ("remove", "max") and dm < rem:
        return mpmath.inf
    if direction == "remove":
        return mpf(0)
    if qm == 1:
        return mpmath.inf
    with mp.workdps(_work_dps()):
        # (1 - e^eps (1-q)^T)_+ <= delta  <=>  eps >= log(1-delta) - T log(1-q)
        e = mpmath.log1p(-dm) - steps * mpmath.log1p(-qm)
    return max(mpf(0), e)


def one_step_epsilon(q, sigma, delta, direction="max"):
    """Exact one-step eps(delta) (nats) of the Poisson-subsampled Gaussian."""
    _check_direction(direction)
    qm, sm, dm = _to_mpf(q), _to_mpf(sigma), _to_mpf(delta)
    if not (0 <= qm <= 1) or sm < 0:
        raise ValueError("need 0 <= q <= 1, sigma >= 0")
    if dm >= 1 or qm == 0 or mpmath.isinf(sm):
        return mpf(0)
    if sm == 0:
        if direction == "max":
            return max(one_step_epsilon(q, sigma, delta, "remove"),
                       one_step_epsilon(q, sigma, delta, "add"))
        d = "remove" if direction == "replace" else direction
        return sgm_epsilon_no_noise(q, 1, delta, d)
    if dm <= 0:
        if direction != "add" or qm == 1:
            return mpmath.inf
        with mp.workdps(_work_dps()):
            return -mpmath.log1p(-qm)
    if direction == "max":
        return max(one_step_epsilon(q, sigma, delta, "remove"),
                   one_step_epsilon(q, sigma, delta, "add"))
    kernel = {"remove": _k_remove, "add": _k_add, "replace": _k_replace}[direction]
    cap = (lambda: -mpmath.log1p(-qm)) if (direction == "add" and qm < 1) else None
    return _invert(lambda e: _run(kernel, (q, sigma, e), False), delta, cap)
