"""How often the audit interval of `seqjudge runs show --audit` misses the true false-pass rate (simulation).

    python benchmarks/audit_coverage.py [--truth 0.04] [--size 1500] [--delta 0.1] [--draws 400]

Seeded populations of ``size`` auto-passed traces per run with a known false-pass rate ``truth``, audited
at one rate (one run) or two pooled rates (two runs, Horvitz–Thompson weights and Kish's effective n), as
``seqjudge.audit.estimate`` does it. Prints per setting the share of draws whose two-sided ``1 - delta``
interval missed the truth (below the lower bound, above the upper one) and the mean width.
"""

from __future__ import annotations

import argparse
import random

from seqjudge.audit import Draw, estimate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--truth", type=float, default=0.04)
    parser.add_argument("--size", type=int, default=1500)
    parser.add_argument("--delta", type=float, default=0.1)
    parser.add_argument("--draws", type=int, default=400)
    args = parser.parse_args()
    print(f"truth {args.truth:g}, {args.size} auto-passed traces a run, nominal miss rate {args.delta:g}")
    for rates in ((0.1,), (0.05,), (0.05, 0.3)):
        rng = random.Random(20261201)
        low = high = 0
        width = 0.0
        for _ in range(args.draws):
            draws = [
                Draw(rate, rng.random() < args.truth)
                for rate in rates
                for _ in range(args.size)
                if rng.random() < rate
            ]
            fig = estimate(draws, alpha=None, delta=args.delta, scope="trace")
            assert fig.lower is not None and fig.upper is not None
            low += args.truth < fig.lower
            high += args.truth > fig.upper
            width += fig.upper - fig.lower
        print(
            f"rates {', '.join(f'{r:g}' for r in rates):<10} missed {(low + high) / args.draws:.1%} "
            f"(truth below {low}, above {high} of {args.draws}), mean width {width / args.draws:.3f}"
        )


if __name__ == "__main__":
    main()
