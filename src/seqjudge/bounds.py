"""Exact binomial confidence bounds (Clopper–Pearson), in plain Python.

scipy is not a dependency, so the beta quantile behind the Clopper–Pearson bound is found by bisection on the
binomial CDF, which is exact to floating point: the upper bound for ``k`` errors in ``n`` decisions at
confidence ``1 - delta`` is the ``p`` with ``P(Binomial(n, p) <= k) = delta`` (the CDF falls as ``p``
rises, so bisection converges), and the lower bound the ``p`` with ``P(Binomial(n, p) >= k) = delta``.
Each bound is one-sided at level ``delta``; a two-sided interval at ``1 - delta`` uses ``delta / 2`` per side.
"""

from __future__ import annotations

import math

_ITERATIONS = 100  # bisection halves [0, 1] this often: far below a float's resolution near any bound
# The float CDF is off by a few ulps; the bounds aim this much inside delta so that the exact CDF at the
# returned bound is never above delta (the bound errs on the safe side, by ~1e-10 relative).
_SAFE = 1.0 - 1e-10


def binom_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), summed in log space (no overflow for large n)."""
    if n < 0:
        raise ValueError(f"n is {n}; it must be at least 0")
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    if p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0
    log_p, log_q = math.log(p), math.log1p(-p)
    log_n = math.lgamma(n + 1)
    terms = [
        log_n - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q
        for i in range(k + 1)
    ]
    top = max(terms)
    return min(1.0, math.exp(top) * math.fsum(math.exp(t - top) for t in terms))


def _check(k: int, n: int, delta: float) -> None:
    if not 0 <= k <= n:
        raise ValueError(f"k={k} errors in n={n} decisions: need 0 <= k <= n")
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta is {delta}; it must be between 0 and 1 (exclusive)")


def _bisect(below: float, above: float, too_low: object) -> float:
    """The boundary in [below, above] where ``too_low(p)`` turns from True to False."""
    lo, hi = below, above
    for _ in range(_ITERATIONS):
        mid = (lo + hi) / 2
        if too_low(mid):  # type: ignore[operator]
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-15:
            break
    return hi


def clopper_pearson_upper(k: int, n: int, delta: float) -> float:
    """One-sided upper ``1 - delta`` bound on the rate behind ``k`` events in ``n`` trials (1.0 when n = 0).

    Rounded up (bisection keeps the end where the CDF is already at or below ``delta``), so the bound is
    never smaller than the exact one."""
    _check(k, n, delta)
    if k >= n:
        return 1.0
    return _bisect(0.0, 1.0, lambda p: binom_cdf(k, n, p) > delta * _SAFE)


def clopper_pearson_lower(k: int, n: int, delta: float) -> float:
    """One-sided lower ``1 - delta`` bound on the rate behind ``k`` events in ``n`` trials (0 when k = 0)."""
    _check(k, n, delta)
    if k == 0:
        return 0.0
    # P(X >= k) = 1 - P(X <= k - 1) rises with p; the bound is where it reaches delta. Rounded down.
    return 1.0 - _bisect(0.0, 1.0, lambda q: 1.0 - binom_cdf(k - 1, n, 1.0 - q) > delta * _SAFE)


def upper_bound_at_most(k: int, n: int, delta: float, alpha: float) -> bool:
    """``clopper_pearson_upper(k, n, delta) <= alpha``, with one CDF evaluation instead of a bisection (the
    CDF falls as p rises, so the bound is at most alpha exactly when the CDF at alpha is at most delta)."""
    _check(k, n, delta)
    return n > 0 and binom_cdf(k, n, alpha) <= delta * _SAFE


def clopper_pearson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Two-sided Clopper–Pearson interval at ``confidence`` (each side ``(1 - confidence) / 2``)."""
    side = (1.0 - confidence) / 2
    if n == 0:
        return (0.0, 1.0)
    return (clopper_pearson_lower(k, n, side), clopper_pearson_upper(k, n, side))


def labels_needed(alpha: float, delta: float, error_rate: float = 0.0, limit: int = 1_000_000) -> int | None:
    """How many decisions it takes for the upper bound to reach ``alpha`` when a share ``error_rate`` of them
    are errors (rounded up to whole errors); None when no number can (``error_rate >= alpha``) or it exceeds
    ``limit``. With no error this is ``ceil(log(delta) / log(1 - alpha))``: 59 for alpha = delta = 0.05."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha is {alpha}; it must be between 0 and 1 (exclusive)")
    if error_rate >= alpha:
        return None

    def enough(n: int) -> bool:
        return upper_bound_at_most(math.ceil(error_rate * n - 1e-9), n, delta, alpha)

    if error_rate <= 0.0:
        n = math.ceil(math.log(delta) / math.log1p(-alpha))
        while n > 1 and enough(n - 1):  # guard against rounding of the closed form
            n -= 1
        while not enough(n):
            n += 1
        return n
    # Errors rounded to whole numbers make the bound zigzag a little in n: doubling then bisection gives a
    # number from which it is at or below alpha, close to the first one (the answer is an estimate anyway).
    hi = 1
    while not enough(hi):
        hi *= 2
        if hi > limit:
            return None
    lo = hi // 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if enough(mid):
            hi = mid
        else:
            lo = mid
    return hi
