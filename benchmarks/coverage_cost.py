"""What the fail-closed coverage bookkeeping (seqjudge.rules.coverage) costs a checked trace.

    python benchmarks/coverage_cost.py [--traces 10000] [--repeats 5]

On the engine benchmark's (b) workload (20-call traces, 20 rules, generated as in benchmarks/engine.py),
times in CPU seconds, alternating within each repeat: the engine's work a trace (``Engine.check_data`` and
``report_line``, what `seqjudge check --format jsonl` does per trace), and the bookkeeping `check` and `run`
now add to it (the exercised rule ids, the called tools, ``Coverage.add``). Prints medians per trace and
their ratio.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine import make_calls, rules_20  # noqa: E402  (the sibling benchmark's generators)

from seqjudge.report import report_line  # noqa: E402
from seqjudge.rules.coverage import Coverage, called, exercised_ids  # noqa: E402
from seqjudge.rules.engine import Engine  # noqa: E402
from seqjudge.rules.load import parse_rules  # noqa: E402
from seqjudge.trace import Trace  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    rng = random.Random(7)
    ruleset = parse_rules(rules_20())
    engine = Engine(ruleset)
    traces = [
        Trace.model_validate({"trace_id": f"t{i}", "calls": make_calls(20, rng)}) for i in range(args.traces)
    ]
    reports = [engine.check_data(t) for t in traces]

    def engine_work() -> None:
        for t in traces:
            report_line(engine.check_data(t))

    def bookkeeping() -> None:
        coverage = Coverage.of(ruleset)
        for t, data in zip(traces, reports, strict=True):
            coverage.add(t.trace_id, exercised_ids(data["rules"]), called(t))

    timings: dict[str, list[float]] = {"engine": [], "coverage": []}
    work: dict[str, Callable[[], None]] = {"engine": engine_work, "coverage": bookkeeping}
    for _ in range(args.repeats):
        for name, fn in work.items():
            start = time.process_time()
            fn()
            timings[name].append(time.process_time() - start)
    medians = {name: statistics.median(values) / args.traces * 1e6 for name, values in timings.items()}
    print(f"{args.traces} traces of 20 calls, 20 rules; CPU, median of {args.repeats}")
    print(f"engine (check_data + report_line): {medians['engine']:.1f} us a trace")
    print(f"coverage bookkeeping:              {medians['coverage']:.1f} us a trace")
    print(f"ratio: {medians['coverage'] / medians['engine']:.3f}")


if __name__ == "__main__":
    main()
