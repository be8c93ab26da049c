"""The Clopper–Pearson bounds against exact binomial sums (rational arithmetic), and the label count."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from seqjudge.bounds import (
    binom_cdf,
    clopper_pearson_interval,
    clopper_pearson_lower,
    clopper_pearson_upper,
    labels_needed,
)


def exact_cdf(k: int, n: int, p: Fraction) -> Fraction:
    return sum((math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1)), Fraction(0))


@pytest.mark.parametrize(("k", "n", "p"), [(0, 10, "1/10"), (3, 20, "1/4"), (7, 50, "3/20"), (40, 60, "2/3")])
def test_cdf_matches_the_exact_sum(k: int, n: int, p: str) -> None:
    assert binom_cdf(k, n, float(Fraction(p))) == pytest.approx(
        float(exact_cdf(k, n, Fraction(p))), rel=1e-12
    )


@pytest.mark.parametrize(("k", "n"), [(0, 1), (0, 59), (1, 30), (3, 100), (10, 40), (29, 30)])
@pytest.mark.parametrize("delta", [0.05, 0.01, 0.2])
def test_upper_bound_is_where_the_exact_cdf_reaches_delta(k: int, n: int, delta: float) -> None:
    u = clopper_pearson_upper(k, n, delta)
    # The exact CDF at the bound is delta, and just below the bound it is still above delta.
    at = exact_cdf(k, n, Fraction(u))
    assert float(at) == pytest.approx(delta, abs=1e-9)
    assert at <= delta
    assert exact_cdf(k, n, Fraction(u - 1e-9)) > delta


@pytest.mark.parametrize(("k", "n"), [(1, 1), (1, 59), (3, 100), (10, 40), (30, 30)])
def test_lower_bound_is_where_the_exact_upper_tail_reaches_delta(k: int, n: int) -> None:
    lo = clopper_pearson_lower(k, n, 0.05)
    tail = 1 - exact_cdf(k - 1, n, Fraction(lo))
    assert float(tail) == pytest.approx(0.05, abs=1e-9)
    assert tail <= 0.05


def test_edges() -> None:
    assert clopper_pearson_upper(5, 5, 0.05) == 1.0
    assert clopper_pearson_lower(0, 5, 0.05) == 0.0
    # No errors in n: the bound is 1 - delta ** (1 / n) in closed form.
    assert clopper_pearson_upper(0, 59, 0.05) == pytest.approx(1 - 0.05 ** (1 / 59), rel=1e-9)
    assert clopper_pearson_interval(0, 0) == (0.0, 1.0)
    lo, hi = clopper_pearson_interval(3, 100, 0.9)
    assert lo == pytest.approx(clopper_pearson_lower(3, 100, 0.05)) and hi == pytest.approx(
        clopper_pearson_upper(3, 100, 0.05)
    )
    with pytest.raises(ValueError):
        clopper_pearson_upper(6, 5, 0.05)
    with pytest.raises(ValueError):
        clopper_pearson_upper(0, 5, 1.0)


def test_labels_needed() -> None:
    assert labels_needed(0.05, 0.05) == 59  # the figure
    assert clopper_pearson_upper(0, 59, 0.05) <= 0.05 < clopper_pearson_upper(0, 58, 0.05)
    assert labels_needed(0.01, 0.05) == 299
    need = labels_needed(0.05, 0.05, 0.01)
    assert need is not None and need > 59
    assert clopper_pearson_upper(math.ceil(0.01 * need), need, 0.05) <= 0.05
    assert labels_needed(0.05, 0.05, 0.05) is None  # an error rate at alpha can never be certified
