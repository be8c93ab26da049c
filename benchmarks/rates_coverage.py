"""How often each violation-rate interval misses the truth with few labels (issue 36): the table in
docs/rates.md ("How far the interval can be trusted").

    python benchmarks/rates_coverage.py [--draws 1000] [--alpha 0.1] [--size 2000]

A synthetic auto-passed stratum of ``--size`` traces per draw, each violating with the chance of the row
(2%, 10%, 30%), and a judge of known error (``tests/test_rates_simulation.py``'s: it flags 85% of the
violations with a confidence of 0.6-0.95 and 4% of the rest; its passes say 0.01-0.3). People label a
Poisson draw of about n traces (10, 20, 40, 80): uniform, or active (``seqjudge.audit.inclusion_probability``,
the rate set so that the expected labels are n), weighted by 1 / p. For each method: how often its two-sided
``1 - alpha`` interval missed the population's own rate, and its mean width, over ``--draws`` seeded draws
(a draw with fewer than 2 labels gives no interval and is left out; the count is printed).

Methods: ``PPI++ alone`` (ppi-python's normal interval, whatever the labels); ``humans only`` (the exact
Clopper-Pearson interval on Kish's n, ``seqjudge.rates.human_interval``); ``before: PPI++ from 5`` (the rule
`--rates` used before: PPI++ from 5 labelled violations and 5 passes, else humans-only); ``PPI++ t from K``
(PPI++ with Student's t quantile from K of each, else humans-only); ``reported`` (what ``runs show --rates``
reports now: ``seqjudge.rates.stratum_interval``, PPI++ t from ``seqjudge.rates.MIN_EACH``).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
from seqjudge.audit import ACTIVE_FLOOR, ACTIVE_SURE, inclusion_probability  # noqa: E402
from seqjudge.rates import Interval, human_interval, ppi_interval, stratum_interval, t_alpha  # noqa: E402

RATES = (0.02, 0.10, 0.30)
LABELS = (10, 20, 40, 80)
GATES = (8, 15)  # beside MIN_EACH (the reported column), to show what a lower or higher gate does


def population(rng: np.random.Generator, size: int, truth: float) -> tuple[np.ndarray, np.ndarray]:
    """Labels and the judge's chance of a violation (see the module docstring)."""
    y = (rng.random(size) < truth).astype(float)
    flags = np.where(y == 1, rng.random(size) < 0.85, rng.random(size) < 0.04)
    missed = (y == 1) & ~flags
    yhat = np.where(
        flags,
        rng.uniform(0.6, 0.95, size),
        np.where(missed, rng.uniform(0.1, 0.3, size), rng.uniform(0.01, 0.2, size)),
    )
    return y, yhat


def probabilities(yhat: np.ndarray, n: int, draw: str) -> np.ndarray:
    """Inclusion probabilities with about ``n`` expected labels: ``seqjudge.audit.inclusion_probability``
    (checked on the first trace), vectorised, with the rate found by bisection for the active draw."""
    size = len(yhat)
    if draw == "uniform":
        return np.full(size, n / size)
    doubt = np.sqrt(yhat * (1 - yhat))
    reference = math.sqrt(ACTIVE_SURE * (1 - ACTIVE_SURE))

    def active(rate: float) -> np.ndarray:
        return np.minimum(1.0, np.maximum(rate * ACTIVE_FLOOR, rate * doubt / reference))

    lo, hi = 0.0, 1.0
    for _ in range(40):  # the rate whose expected labels are n
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if active(mid).sum() < n else (lo, mid)
    p = active(hi)
    assert math.isclose(p[0], inclusion_probability(hi, float(doubt[0]), "active"))
    return p


def intervals(
    y: np.ndarray, yhat: np.ndarray, pop: np.ndarray, w: np.ndarray, alpha: float
) -> dict[str, Interval | None]:
    """Every method's interval for one draw, by its column's name."""
    labels, calls, population_, weights = list(y), list(yhat), list(pop), list(w)
    human = human_interval([bool(v) for v in y], weights, alpha=alpha)
    ppi = ppi_interval(labels, calls, population_, weights=weights, alpha=alpha)
    ppi_t = ppi_interval(labels, calls, population_, weights=weights, alpha=t_alpha(alpha, len(labels)))
    each = min(int(y.sum()), len(y) - int(y.sum()))
    out = {"PPI++ alone": ppi, "humans only": human}
    out["before: PPI++ from 5"] = ppi if each >= 5 and ppi is not None else human
    for k in GATES:
        out[f"PPI++ t from {k}"] = ppi_t if each >= k and ppi_t is not None else human
    out["reported"] = stratum_interval(labels, calls, population_, weights, alpha=alpha)[0]
    return out


def coverage(
    draws: int, alpha: float, size: int
) -> dict[tuple[str, float, int, str], tuple[float, float, int]]:
    """(draw, rate, n, method) -> (share missed, mean width, draws counted)."""
    out = {}
    for draw in ("uniform", "active"):
        for r_i, rate in enumerate(RATES):
            for n in LABELS:
                rng = np.random.default_rng(36_000 + 1000 * r_i + n + (500 if draw == "active" else 0))
                missed: dict[str, int] = defaultdict(int)
                width: dict[str, float] = defaultdict(float)
                counted: dict[str, int] = defaultdict(int)
                for _ in range(draws):
                    y, yhat = population(rng, size, rate)
                    p = probabilities(yhat, n, draw)
                    picked = rng.random(size) < p
                    if picked.sum() < 2:
                        continue
                    for name, got in intervals(y[picked], yhat[picked], yhat, 1 / p[picked], alpha).items():
                        if got is None:
                            continue
                        counted[name] += 1
                        missed[name] += not (got.lower <= y.mean() <= got.upper)
                        width[name] += got.upper - got.lower
                for name in counted:
                    c = counted[name]
                    out[(draw, rate, n, name)] = (missed[name] / c, width[name] / c, c)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--alpha", type=float, default=0.1)
    parser.add_argument("--size", type=int, default=2000)
    args = parser.parse_args()
    started = time.monotonic()
    table = coverage(args.draws, args.alpha, args.size)
    names = list(intervals(np.array([1.0, 0.0]), np.array([0.5, 0.5]), np.array([0.5, 0.4]), np.ones(2), 0.1))
    print(
        f"missed (mean width) at a nominal {args.alpha:.0%}, {args.draws} draws per row, {args.size} traces"
    )
    print("| draw | rate | labels | " + " | ".join(names) + " |")
    print("|---|---|---|" + "---|" * len(names))
    for draw in ("uniform", "active"):
        for rate in RATES:
            for n in LABELS:
                cells = []
                for name in names:
                    miss, width, _ = table.get((draw, rate, n, name), (math.nan, math.nan, 0))
                    cells.append(f"{miss:.1%} ({width:.1%})")
                print(f"| {draw} | {rate:.0%} | {n} | " + " | ".join(cells) + " |")
    print(f"({time.monotonic() - started:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
