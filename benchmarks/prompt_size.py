"""How big the judge prompt is, per suite and judge mode: median and p90 characters and tokens per trace,
and the share of the static (cacheable) part.

    python benchmarks/prompt_size.py [SUITE ...] [--risk-level high] [--rev REV]

Suites default to the tau suites (golden_traces/tau-*). The prompt measured is exactly what `seqjudge
prompt` prints (system prompt, then the user content), rendered as `seqjudge run` renders it: `full` asks
about every rule, `contextual` only about the `judge` rules.

Tokens are estimated as characters / 4 (rounded down), without a tokenizer: no vocabulary download and no
network, and the same rule for every revision, which is what a before/after comparison needs. The static
share is (system + static prefix) / whole prompt: what a provider can serve from its prompt cache.

`--rev REV` measures another git revision too (e.g. `--rev main`): its src/, prompts/ and golden_traces/
are exported with `git archive` to a temporary folder and this script runs again on them, so "before" is that
revision's own code, template and rule files, and both tables print in one run.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from revision import ROOT, export_revision  # noqa: E402

MODES = ("full", "contextual")


def tokens(chars: int) -> int:
    return chars // 4


def p90(values: list[int]) -> int:
    """The nearest-rank 90th percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]


def measure(suite: Path, risk_level: str) -> list[str]:
    # Only APIs that every revision since the judge modes has: this file runs against old trees too.
    from seqjudge import load_rules, load_traces
    from seqjudge.judge.prompt import load_examples, render

    try:
        from seqjudge.rules.catalog import load_catalog  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        from seqjudge.catalog import load_catalog  # type: ignore[no-redef,unused-ignore]

    ruleset = load_rules(suite / "rules.yaml")
    catalog = load_catalog(suite / "catalog.json") if (suite / "catalog.json").is_file() else None
    examples = load_examples()
    traces = list(load_traces(suite / "traces.jsonl"))
    rows = []
    for mode in MODES:
        rule_ids = [r.rule_id for r in ruleset.rules if mode == "full" or r.type == "judge"]
        if not rule_ids:
            continue
        sizes: list[int] = []
        static: list[int] = []
        for trace in traces:
            p = render(
                trace, ruleset, catalog=catalog, examples=examples, risk_level=risk_level, rule_ids=rule_ids
            )
            text = p.text()
            sizes.append(len(text))
            static.append(len(text) - len(p.dynamic))
        med = int(statistics.median(sizes))
        share = sum(static) / sum(sizes)
        rows.append(
            f"{suite.name:<16} {mode:<10} {len(traces):>6} {med:>12,} {p90(sizes):>9,} "
            f"{tokens(med):>11,} {tokens(p90(sizes)):>9,} {static[0]:>11,} {share:>12.0%}"
        )
    return rows


HEADER = (
    f"{'suite':<16} {'mode':<10} {'traces':>6} {'median chars':>12} {'p90 chars':>9} "
    f"{'median tok':>11} {'p90 tok':>9} {'static chars':>11} {'static share':>12}"
)


def run_here(suites: list[Path], risk_level: str) -> None:
    print(HEADER)
    for suite in suites:
        for row in measure(suite, risk_level):
            print(row)


def run_at(rev: str, suites: list[Path], risk_level: str) -> None:
    """This script, on revision ``rev``'s code, template and suites (exported to a temporary folder)."""
    with tempfile.TemporaryDirectory(prefix="seqjudge-rev-") as tmp:
        tree = export_revision(rev, Path(tmp))
        env = {**os.environ, "PYTHONPATH": str(tree / "src")}
        rel = [str(tree / s.resolve().relative_to(ROOT)) for s in suites]
        subprocess.run(
            [sys.executable, __file__, *rel, "--risk-level", risk_level, "--here"],
            check=True,
            env=env,
            cwd=tmp,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("suites", nargs="*", type=Path)
    parser.add_argument("--risk-level", default="high", choices=("low", "medium", "high"))
    parser.add_argument("--rev", help="also measure this git revision (its code, template and suites)")
    parser.add_argument("--here", action="store_true", help=argparse.SUPPRESS)  # set by --rev's child
    args = parser.parse_args()
    suites = args.suites or sorted((ROOT / "golden_traces").glob("tau-*"))
    if args.here:
        run_here(suites, args.risk_level)
        return
    if args.rev:
        print(f"revision {args.rev} (risk level {args.risk_level}):", flush=True)
        run_at(args.rev, suites, args.risk_level)
        print()
    print(f"this checkout (risk level {args.risk_level}):", flush=True)
    run_here(suites, args.risk_level)


if __name__ == "__main__":
    main()
