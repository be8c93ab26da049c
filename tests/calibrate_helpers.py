"""Scripted judges for calibration tests: replies per trace, built from the labels, with chosen noise."""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from seqjudge.certificate import (
    CertifiedRule,
    certificates_dir,
    new_certificate,
    rules_hash,
    save_certificate,
    template_hash,
)
from seqjudge.golden import GoldenDataset
from seqjudge.judge.prompt import render_trace_data
from seqjudge.judge.providers.base import JudgeRequest, ProviderReply
from seqjudge.judge.providers.scripted import ScriptedProvider
from seqjudge.redact import redact_trace
from seqjudge.rules.engine import Engine
from seqjudge.trace import Trace


def judge_output(
    trace: Trace, ruleset: Any, failed: Iterable[str], decided: Iterable[str], engine_report: Any = None
) -> dict[str, Any]:
    """A valid judge JSON object: ``failed`` rules violated, ``decided`` (plus failed) rules checked."""
    rules = {r.rule_id: r for r in ruleset.rules}
    failed = [r for r in rules if r in set(failed)]
    checked = set(decided) | set(failed)
    engine_violations = {v.rule_id: v for v in (engine_report.violations if engine_report else [])}
    violations = []
    for rule_id in failed:
        rule = rules[rule_id]
        seen = engine_violations.get(rule_id)
        violations.append(
            {
                "rule_id": rule_id,
                "rule_description": rule.description or rule_id,
                "violation_type": seen.violation_type if seen else "missing_call",
                "expected_order": "as the rule says",
                "actual_order": "not so",
                "offending_call_index": seen.offending_call_index if seen else None,
                "severity": rule.severity,
                "explanation": f"scripted: {rule_id} failed",
            }
        )
    critical = any(rules[r].severity == "critical" for r in failed)
    passed = len(checked) - len(failed)
    score = 0.0 if critical else (passed / len(checked) if checked else 1.0)
    return {
        "sequence_correctness_score": score,
        "total_rules_checked": len(checked),
        "rules_passed": passed,
        "rules_failed": len(failed),
        "violations": violations,
        "missing_prerequisites": [],
        "summary": f"scripted judgement of {trace.trace_id}",
    }


def label_replies(
    dataset: GoldenDataset, flips: Mapping[str, Iterable[str]] | None = None
) -> dict[str, dict]:
    """Per trace, what a judge that agrees with the human labels would answer, with ``flips`` (trace id ->
    rule ids) turned the other way: deliberate noise. Rules the label leaves out are answered as the
    engine decides them."""
    engine = Engine(dataset.ruleset)
    flips = {k: set(v) for k, v in (flips or {}).items()}
    out = {}
    for trace in dataset.traces:
        report = engine.check(trace)
        label = dataset.labels[trace.trace_id].rules
        decided = {
            r.rule_id: r.outcome == "failed" for r in report.rules if r.outcome in ("passed", "failed")
        }
        decided.update({rid: value == "fail" for rid, value in label.items()})
        for rid in flips.get(trace.trace_id, ()):
            decided[rid] = not decided.get(rid, False)
        failed = [rid for rid, bad in decided.items() if bad]
        out[trace.trace_id] = judge_output(trace, dataset.ruleset, failed, decided, report)
    return out


class ByTraceProvider(ScriptedProvider):
    """A ScriptedProvider that answers by trace, whatever order the calls come in.

    The trace is recognised by the prompt's delimiter token (derived from the trace's content). ``script``:
    trace id -> a list of replies, taken in turn (so repeats can answer differently), or one reply given
    every time."""

    def __init__(
        self, traces: Iterable[Trace], script: Mapping[str, Any], model: str = "by-trace", **options: Any
    ) -> None:
        super().__init__([], model=model, **options)
        self.by_token = {render_trace_data(redact_trace(t)).nonce: t.trace_id for t in traces}
        self.script = {k: deque(v) if isinstance(v, list) else v for k, v in script.items()}
        self.calls: Counter[str] = Counter()

    async def complete(self, request: JudgeRequest) -> ProviderReply:
        trace_id = next(t for token, t in self.by_token.items() if token in request.dynamic_prompt)
        self.calls[trace_id] += 1
        answers = self.script[trace_id]
        self.add(answers.popleft() if isinstance(answers, deque) else answers)
        return await super().complete(request)


def save_test_certificate(
    store: Path,
    ruleset: Any,
    entries: list[CertifiedRule],
    *,
    model: str = "scripted:scripted",
    dataset: str = "test",
    alpha: float = 0.05,
    delta: float = 0.05,
) -> None:
    """A certificate of ``entries`` for this prompt template and ``ruleset``, beside the store ``store`` (the
    dataset hash is a placeholder: runs match a certificate by model, template and rules)."""
    cert = new_certificate(
        model=model,
        template_hash=template_hash(),
        rules_hash=rules_hash(ruleset),
        dataset_hash="d" * 64,
        dataset=dataset,
        alpha=alpha,
        delta=delta,
        rules=entries,
    )
    save_certificate(cert, certificates_dir(store))
