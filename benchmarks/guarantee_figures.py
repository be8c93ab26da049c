"""The closing figures of issue 18 on the three golden suites: per `judge` rule, what `seqjudge calibrate
--alpha A --delta D` can certify with the labels there are, and what more labels would buy.

    python benchmarks/guarantee_figures.py [--alpha 0.05] [--delta 0.05] [--replays DIR] [--json]
    python benchmarks/guarantee_figures.py --simulate [--alpha 0.1 --delta 0.1]

`--simulate` prints what tests/test_guarantee.py checks, with the figures: draws of 400 judge passes from a
population whose error rate among passes at confidence >= t is 0.15 (1 - t); how often the realised error at
the certified threshold exceeds alpha (at most about delta), and the coverage against the oracle's.

No network and no model. Two judges per suite:
- "recorded": the stand-in judge answers of benchmarks/replays/2026-12-01/after (contextual mode, risk level
  high; 20 tau traces per suite, none for customer-support), replayed through the real pipeline (the
  scripted provider, validation, reconciliation). Those answers predate `rule_decisions`, so they state no
  confidence: every decision is taken at confidence 1, i.e. the only threshold is "auto-pass every judge
  pass". That is what the guarantee can say about a judge without a confidence signal.
- "perfect": a judge that agrees with every label, at confidence 1: the best these labels can certify.

Per rule and judge: labelled decisions, the judge's passes and how many of them are labelled fail, then the
guarantee (threshold, Clopper–Pearson upper bound, coverage) or, when the labels cannot support alpha, how
many labelled judge passes it would take; the smallest alpha these labels can certify (the bound with no
error); and the bound the same share of errors would give with twice the labels.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from seqjudge.bounds import clopper_pearson_upper, labels_needed  # noqa: E402
from seqjudge.crosscheck import reconcile  # noqa: E402
from seqjudge.golden import load_dataset  # noqa: E402
from seqjudge.guarantee import LabelledDecision, certify, more_labels  # noqa: E402
from seqjudge.judge.judge import judge_trace  # noqa: E402
from seqjudge.judge.providers.scripted import ScriptedProvider  # noqa: E402
from seqjudge.rules.engine import Engine  # noqa: E402

SUITES = ("customer-support", "tau-retail", "tau-airline")
REPLAYS = ROOT / "benchmarks" / "replays" / "2026-12-01" / "after"


def recorded_decisions(dataset: Any, rule_ids: list[str], replays: Path) -> list[LabelledDecision] | None:
    """The recorded answers for this suite, judged through the pipeline; None when there are none."""
    index = replays / "index.tsv"
    if not index.is_file():
        return None
    keys = {}
    for line in index.read_text().splitlines():
        key, suite, trace_id = line.split("\t")
        if Path(suite).name == dataset.name:
            keys[trace_id] = key
    if not keys:
        return None
    engine = Engine(dataset.ruleset)
    out: list[LabelledDecision] = []
    for trace in dataset.traces:
        key = keys.get(trace.trace_id or "")
        if key is None:
            continue
        answer = json.loads((replays / "answers" / f"{key}.json").read_text())
        judged = asyncio.run(
            judge_trace(
                trace,
                dataset.ruleset,
                ScriptedProvider([answer]),
                catalog=dataset.catalog,
                examples=dataset.examples,
                risk_level="high",
                rule_ids=rule_ids,
                max_attempts=1,
            )
        )
        result = reconcile(engine.check(trace), judged, risk_level="high")
        labels = dataset.labels[trace.trace_id].rules
        for d in result.rules:
            if d.rule_id in rule_ids and d.judge is not None and labels.get(d.rule_id) in ("pass", "fail"):
                out.append(LabelledDecision(d.rule_id, d.judge, 1.0, labels[d.rule_id], trace.trace_id or ""))
    return out


def perfect_decisions(dataset: Any, rule_ids: list[str]) -> list[LabelledDecision]:
    out = []
    for tid, label in dataset.labels.items():
        for rid in rule_ids:
            value = label.rules.get(rid)
            if value in ("pass", "fail"):
                out.append(LabelledDecision(rid, "passed" if value == "pass" else "failed", 1.0, value, tid))
    return out


def figures(decisions: list[LabelledDecision], alpha: float, delta: float) -> dict[str, Any]:
    g = certify(decisions, alpha, delta)
    passes = [d for d in decisions if d.judge == "passed"]
    wrong = sum(1 for d in passes if d.label == "fail")
    rate = wrong / len(passes) if passes else 0.0
    need = labels_needed(alpha, delta, rate)
    return {
        "decisions": len(decisions),
        "judge_passes": len(passes),
        "judge_passes_labelled_fail": wrong,
        "alpha": alpha,
        "delta": delta,
        "threshold": g.threshold,
        "upper_bound": g.upper_bound,
        "auto_pass_coverage": g.auto_pass_coverage,
        "needed_passes": need,
        "more_passes_needed": None if need is None else max(0, need - len(passes)),
        # The bound every judge pass (auto-passed at confidence 1) has now, and with twice the labels.
        "bound_now": clopper_pearson_upper(wrong, len(passes), delta) if passes else 1.0,
        "bound_with_2x_labels": more_labels(g)
        if g.threshold is not None
        else _doubled(wrong, len(passes), delta),
        "smallest_alpha_with_no_error": clopper_pearson_upper(0, len(passes), delta) if passes else 1.0,
    }


def _doubled(wrong: int, n: int, delta: float) -> float | None:
    return clopper_pearson_upper(2 * wrong, 2 * n, delta) if n else None


def simulate(alpha: float, delta: float, draws: int = 300, n: int = 400, seed: int = 20261201) -> None:
    import random
    import statistics

    rng = random.Random(seed)
    exceeded = certified = 0
    coverage: list[float] = []
    for _ in range(draws):
        data = []
        for _ in range(n):
            c = rng.random()
            wrong = rng.random() < 0.3 * (1 - c)
            data.append(LabelledDecision("r", "passed", c, "fail" if wrong else "pass"))
        g = certify(data, alpha, delta)
        if g.threshold is not None:
            certified += 1
            exceeded += 0.15 * (1 - g.threshold) > alpha
            coverage.append(g.auto_pass_coverage or 0.0)
    oracle = max(0.0, 1 - alpha / 0.15)  # the threshold whose error among passes above it is exactly alpha
    print(
        f"alpha {alpha:g}, delta {delta:g}, {draws} draws of {n}: realised error above alpha in {exceeded} "
        f"({exceeded / draws:.1%}); certified in {certified}; median coverage "
        f"{statistics.median(coverage) if coverage else 0:.3f} (the oracle threshold {oracle:.3f} covers "
        f"{1 - oracle:.3f})"
    )


def _f(value: float | None, pct: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:.1%}" if pct else f"{value:.3f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--delta", type=float, default=0.05)
    ap.add_argument("--replays", type=Path, default=REPLAYS)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--simulate", action="store_true")
    args = ap.parse_args()
    if args.simulate:
        simulate(args.alpha, args.delta)
        return 0
    rows = []
    for name in SUITES:
        dataset = load_dataset(ROOT / "golden_traces" / name)
        rule_ids = [r.rule_id for r in dataset.ruleset.rules if r.type == "judge"]
        judges = {"perfect": perfect_decisions(dataset, rule_ids)}
        recorded = recorded_decisions(dataset, rule_ids, args.replays)
        if recorded is not None:
            judges["recorded"] = recorded
        for judge, decisions in judges.items():
            for rid in rule_ids:
                mine = [d for d in decisions if d.rule_id == rid]
                rows.append(
                    {"suite": name, "rule": rid, "judge": judge, **figures(mine, args.alpha, args.delta)}
                )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(
        f"alpha {args.alpha:g}, delta {args.delta:g}: auto-pass is certified when the Clopper-Pearson "
        "upper bound of label-fail among auto-passed judge decisions is <= alpha "
        f"({labels_needed(args.alpha, args.delta)} labelled passes with no error at the least)\n"
    )
    head = (
        f"{'suite':<17} {'rule':<22} {'judge':<8} {'n':>3} {'passes':>6} {'wrong':>5} {'threshold':>9} "
        f"{'bound':>6} {'coverage':>8} {'bound now':>9} {'min alpha':>9} {'need':>5} {'more':>5} "
        f"{'2x labels':>9}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r['suite']:<17} {r['rule']:<22} {r['judge']:<8} {r['decisions']:>3} {r['judge_passes']:>6} "
            f"{r['judge_passes_labelled_fail']:>5} {_f(r['threshold']):>9} {_f(r['upper_bound']):>6} "
            f"{_f(r['auto_pass_coverage'], True):>8} {_f(r['bound_now']):>9} "
            f"{_f(r['smallest_alpha_with_no_error']):>9} {r['needed_passes'] or '-':>5} "
            f"{r['more_passes_needed'] if r['more_passes_needed'] is not None else '-':>5} "
            f"{_f(r['bound_with_2x_labels']):>9}"
        )
    print(
        "\nn: labelled decisions of the rule; passes/wrong: the judge's passes and those labelled fail; "
        "bound now: the upper bound if every judge pass were auto-passed; min alpha: the smallest alpha "
        "these passes could certify with no error; need/more: labelled judge passes needed for alpha at the "
        "error rate seen (and how many more); 2x labels: the bound with twice the labels at the same error "
        "rate."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
