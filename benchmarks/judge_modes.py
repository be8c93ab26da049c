"""Tokens each judge mode sends on the same suite: `full` (every rule, so every deterministic rule is a
cross-check) against `contextual` (only the `judge` rules the engine cannot decide).

    python benchmarks/judge_modes.py [golden_traces/customer-support ...]

Tokens are estimated as characters / 4 from the exact rendered prompts (system, static prefix, trace);
the static prefix is what a provider can serve from its prompt cache after the first trace.
"""

from __future__ import annotations

import sys
from pathlib import Path

from seqjudge import load_rules, load_traces
from seqjudge.judge.prompt import render
from seqjudge.rules.catalog import load_catalog

ROOT = Path(__file__).resolve().parents[1]


def tokens(text: str) -> int:
    return len(text) // 4


def measure(suite: Path) -> None:
    ruleset = load_rules(suite / "rules.yaml")
    catalog = load_catalog(suite / "catalog.json") if (suite / "catalog.json").is_file() else None
    traces = list(load_traces(suite / "traces.jsonl"))
    modes = {
        "full": [r.rule_id for r in ruleset.rules],
        "contextual": [r.rule_id for r in ruleset.rules if r.type == "judge"],
    }
    print(
        f"{suite.name}: {len(traces)} traces, {len(ruleset.rules)} rules "
        f"({len(modes['contextual'])} judge rule(s))"
    )
    figures = {}
    for mode, rule_ids in modes.items():
        if not rule_ids:
            print(f"  {mode:<10} no rule to ask the judge about: 0 calls")
            continue
        static = dynamic = 0
        for trace in traces:
            p = render(trace, ruleset, catalog=catalog, rule_ids=rule_ids)
            static += tokens(p.system) + tokens(p.static)
            dynamic += tokens(p.dynamic)
        figures[mode] = static + dynamic
        print(
            f"  {mode:<10} {static + dynamic:>9,} input tokens ({static:,} in the cacheable prefix, "
            f"{dynamic:,} trace); {(static + dynamic) / len(traces):,.0f} per trace"
        )
    if len(figures) == 2:
        print(f"  contextual sends {figures['contextual'] / figures['full']:.0%} of full's input tokens")


def main() -> None:
    suites = [Path(a) for a in sys.argv[1:]] or sorted(
        p for p in (ROOT / "golden_traces").iterdir() if (p / "rules.yaml").is_file()
    )
    for suite in suites:
        measure(suite)


if __name__ == "__main__":
    main()
