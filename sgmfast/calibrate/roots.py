"""The root finders the calibrations share: bisection to a verified boundary, a doubling search in
log space, secant steps on a falling value, an integer boundary checked by the public accountant,
and Brent's zeroin on a Python function.  Each returns a point where the condition was verified
(never an interpolated one)."""

from __future__ import annotations

import math

from .._kernels import roots as _roots


def _boundary(ok, x_ok, x_bad, tol, stop=None):
    """Bisection in x between a point where ``ok`` holds and one where it does not, until they
    are within ``tol`` (or ``stop()`` says the budget is spent); returns the last x where ok held
    (so the answer is verified)."""
    for _ in range(400):
        if abs(x_ok - x_bad) <= tol or (stop is not None and stop()):
            break
        mid = 0.5 * (x_ok + x_bad)
        if ok(mid):
            x_ok = mid
        else:
            x_bad = mid
    return x_ok


def _search_log(ok, x0, private_up: bool, tol, x_min=-745.0, x_max=709.0, stop=None, step=0.25):
    """The boundary of ``ok(x)`` (x = log of the parameter) in [x_min, x_max] near x0, where ok
    holds for large x (``private_up``) or small x: doubling steps (the first ``step``) from x0
    until ok changes, then bisection.  Returns the x where ok held last (an end of the range if ok holds up to it), or
    None if ok holds nowhere on the way to the private end."""
    more = 1.0 if private_up else -1.0  # the direction of more privacy
    clamp = lambda x: min(max(x, x_min), x_max)  # noqa: E731
    x0 = clamp(x0)
    if ok(x0):
        x_ok = x0
        while True:
            x = clamp(x_ok - more * step)
            if x == x_ok:
                return x_ok
            if not ok(x):
                return _boundary(ok, x_ok, x, tol, stop)
            x_ok, step = x, 2.0 * step
    x_bad = x0
    while True:
        x = clamp(x_bad + more * step)
        if x == x_bad:
            return None
        if ok(x):
            return _boundary(ok, x, x_bad, tol, stop)
        x_bad, step = x, 2.0 * step


#: the largest |log(value / target)| the secant of ``_root_log`` takes at either end of its
#: bracket: a bound that stopped at its start values far above the target (91857 for a
#: fixed-size target of 5.24) pinned the secant to the other end, 12 evaluations instead of 10
#: (1.0 took 8 there, but 14 on the smooth e^{-2x} of tests/test_calibrate.py, where 3.0 keeps 12)
SECANT_CAP = 3.0


def _capped(g: float) -> float:
    """g within +-SECANT_CAP where finite (an infinite end makes the step a bisection)."""
    return max(-SECANT_CAP, min(g, SECANT_CAP)) if math.isfinite(g) else g


def _log_gap(v: float, target: float) -> float:
    """log(v / target), with its sign exactly that of v - target (log may round two values
    together): -inf at v <= 0, +inf at v = +inf or NaN."""
    if v <= 0.0:
        return -math.inf
    if not math.isfinite(v):
        return math.inf
    d = math.log(v) - math.log(target)
    return min(d, 0.0) if v <= target else max(d, 1e-300)


def _root_log(value, x0, target, tol, x_min, x_max, step=0.02, rel=0.0, slope=None, seen=None):
    """The least x in [x_min, x_max] (x = log sigma) with value(x) <= target, to ``tol`` -- or,
    with ``rel`` > 0, the first x found with target (1 - rel) <= value(x) <= target -- for a
    value that falls as x grows.  Secant steps on g = log(value / target): extrapolated a little
    past the secant's root (doubling where there is no secant) until a sign change, then
    Illinois regula falsi, probing one ``tol`` past a
    point that lands next to the root.  Every answer comes from an evaluation where
    value <= target held; the search only sets how many evaluations it takes (a few, where
    doubling and bisection take ten) -- for samplers whose every evaluation is a certified
    query of seconds.  ``slope`` (d g / d x < 0, from a cheaper bound's search) sets the first
    step; ``seen`` (a list) collects every (x, g).  None if value <= target nowhere up to x_max."""
    def g(x):
        d = _log_gap(value(x), target)
        if seen is not None:
            seen.append((x, d))
        return d

    clamp = lambda x: min(max(x, x_min), x_max)  # noqa: E731
    x = clamp(x0)
    gx = g(x)
    ok = (x, gx) if gx <= 0 else None  # the least x seen where value <= target
    bad = (x, gx) if gx > 0 else None  # the largest x seen where it is not
    # first step: where an elasticity d log value / d log sigma of -2 would put the root
    h = max(step, min(0.5 * abs(gx), 1.0)) if math.isfinite(gx) else step
    if slope is not None and slope < 0.0 and math.isfinite(gx) and gx != 0.0:
        h = max(min(1.5 * abs(gx / slope), 1.0), tol)  # (past the root the slope predicts)
    while ok is None or bad is None:
        x_prev, g_prev = x, gx
        x = clamp(x_prev + (h if ok is None else -h))
        if x == x_prev:
            return None if ok is None else ok[0]
        gx = g(x)
        if gx <= 0:
            ok = (x, gx)
        else:
            bad = (x, gx)
        if math.isfinite(gx) and math.isfinite(g_prev) and (gx - g_prev) * (x - x_prev) < 0:
            reach = abs(gx * (x - x_prev) / (gx - g_prev))  # to the secant's root, a little past it
            h = min(max(1.5 * reach, tol), 16.0 * h)
        else:
            h *= 2.0
    fa, fb = _capped(bad[1]), _capped(ok[1])  # (SECANT_CAP)
    side = 0
    close = math.log1p(-rel) if rel > 0.0 else 0.0  # (g at value = target (1 - rel))
    for _ in range(100):  # (Illinois converges superlinearly; the cap only guards the loop)
        if ok[0] - bad[0] <= tol or (rel > 0.0 and ok[1] >= close):
            break
        xa, xb = bad[0], ok[0]
        if math.isfinite(fa) and math.isfinite(fb) and fa != fb:
            x = xa - fa * (xb - xa) / (fb - fa)
        else:
            x = 0.5 * (xa + xb)
        x = min(max(x, xa + 0.05 * tol), xb - 0.05 * tol)
        gx = g(x)
        if gx <= 0:
            ok, fb = (x, gx), _capped(gx)
            if side == -1:
                fa *= 0.5
            side = -1
            # the root is likely just below: close the bracket in one step (0.999: at a whole tol
            # the rounded logs left the bracket a hair wider, and one more query ran)
            probe = x - 0.999 * tol
        else:
            bad, fa = (x, gx), _capped(gx)
            if side == 1:
                fb *= 0.5
            side = 1
            probe = x + 0.999 * tol
        if rel > 0.0 and ok[1] >= close:
            break
        span_g = fa - fb if math.isfinite(fa) and math.isfinite(fb) else math.inf
        slope = span_g / (ok[0] - bad[0]) if ok[0] > bad[0] else math.inf
        near = math.isfinite(gx) and 0.0 < slope < math.inf and abs(gx) / slope < tol
        if ok[0] - bad[0] > tol and bad[0] < probe < ok[0] and near:
            gp = g(probe)
            if gp <= 0:
                ok, fb = (probe, gp), _capped(gp)
            else:
                bad, fa = (probe, gp), _capped(gp)
    return ok[0]


def _slope(seen) -> float | None:
    """d g / d x of a finished ``_root_log`` search (its ``seen``): the secant through the
    finite points nearest the root on either side, or None."""
    ok = [p for p in seen if math.isfinite(p[1]) and p[1] <= 0.0]
    bad = [p for p in seen if math.isfinite(p[1]) and p[1] > 0.0]
    if not ok or not bad:
        return None
    (xa, ga), (xb, gb) = max(bad, key=lambda p: p[0]), min(ok, key=lambda p: p[0])
    return (gb - ga) / (xb - xa) if xb > xa and gb < ga else None


def _int_boundary(ok, public_ok, lo: int, hi: int) -> int:
    """The largest integer where ``ok`` holds, by bisection between ``lo`` (ok) and ``hi`` (not
    ok), then stepped down (1, 2, 4, ...) until the public accountant agrees: the fast bound
    searched on and the public one can differ by a hair.  Never below 1."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    step = 1
    while lo > 1 and not public_ok(lo):
        lo = max(1, lo - step)
        step *= 2
    return lo


def _zeroin_py(f, a, fa, b, fb, tol, max_iter=60):
    """Brent's zeroin on a Python function with f(a) f(b) < 0; returns the final bracket."""
    c, fc = a, fa
    d = e = b - a
    for _ in range(max_iter):
        a, fa, b, fb, c, fc, d, e, done = _roots.zeroin_step(a, fa, b, fb, c, fc, d, e, tol, 0.0)
        if done:
            break
        fb = f(b)
    return (b, fb, c, fc) if b < c else (c, fc, b, fb)
