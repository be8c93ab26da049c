"""`seqjudge calibrate --alpha A --delta D`: the guarantee per judge rule, and the certificate it writes.

The labelled decisions are the judge's decisions on each `judge` rule of each labelled trace of the first
judged run (repeats are runs of the same traces, not new traces: pooling them would count a trace K times),
with the rule's label from labels.jsonl (``rules: {id: pass|fail}``). A decision whose trace has no label
for that rule is left out and counted (``unlabelled``). ``seqjudge.guarantee`` does the statistics.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from seqjudge.certificate import (
    Certificate,
    CertifiedRule,
    dataset_hash,
    new_certificate,
    rules_hash,
)
from seqjudge.guarantee import (
    DEFAULT_ALPHA,
    DEFAULT_DELTA,
    LabelledDecision,
    RuleGuarantee,
    certify,
    certify_rules,
)

# The alphas at which the text and the plot show each rule's auto-pass coverage.
COVERAGE_ALPHAS: tuple[float, ...] = (0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3)


class GuaranteeSettings(BaseModel):
    alpha: float = DEFAULT_ALPHA
    delta: float = DEFAULT_DELTA
    auto_fail: bool = False


class RuleFigures(BaseModel):
    """One rule at one risk level: the JSON of the issue (``guarantee``, ``auto_fail``) and the coverage
    the same labels would give at other alphas."""

    rule_id: str
    risk_level: str
    guarantee: dict[str, Any]
    auto_fail: dict[str, Any] | None = None
    unlabelled: int = 0
    coverage_by_alpha: dict[str, float | None] = Field(default_factory=dict)


class GuaranteeReport(BaseModel):
    alpha: float
    delta: float
    risk_level: str
    confidence_source: str
    rules: list[RuleFigures]
    certificate: str | None = None  # the file written, when one was
    note: str | None = None


def labelled_decisions(
    results: Iterable[Any], labels: Mapping[str, Any], rule_ids: Sequence[str]
) -> tuple[list[LabelledDecision], dict[str, int]]:
    """The judge's decisions on ``rule_ids`` with their labels, and per rule how many had no label."""
    wanted = set(rule_ids)
    out: list[LabelledDecision] = []
    unlabelled: dict[str, int] = {}
    for result in results:
        label = labels.get(result.trace_id)
        for d in result.rules:
            if d.rule_id not in wanted or d.judge is None:
                continue
            verdict = (label.rules if label is not None else {}).get(d.rule_id)
            if verdict not in ("pass", "fail"):
                unlabelled[d.rule_id] = unlabelled.get(d.rule_id, 0) + 1
                continue
            out.append(LabelledDecision(d.rule_id, d.judge, d.confidence, verdict, result.trace_id))
    return out, unlabelled


def external_decisions(
    rules: Mapping[str, Mapping[str, tuple[str, float]]], labels: Mapping[str, Any]
) -> tuple[list[LabelledDecision], dict[str, int]]:
    """A scores file's ``rules`` (trace id -> rule id -> (decision, confidence)) with their labels."""
    out: list[LabelledDecision] = []
    unlabelled: dict[str, int] = {}
    for tid, decided in rules.items():
        label = labels[tid].rules if tid in labels else {}
        for rid, (decision, confidence) in decided.items():
            verdict = label.get(rid)
            if verdict not in ("pass", "fail"):
                unlabelled[rid] = unlabelled.get(rid, 0) + 1
                continue
            out.append(LabelledDecision(rid, decision, confidence, verdict, tid))  # type: ignore[arg-type]
    return out, unlabelled


def guarantee_report(
    decisions: Sequence[LabelledDecision],
    rule_ids: Sequence[str],
    settings: GuaranteeSettings,
    *,
    risk_level: str,
    confidence_source: str,
    unlabelled: Mapping[str, int] | None = None,
) -> tuple[GuaranteeReport, list[RuleGuarantee]]:
    certified = certify_rules(
        decisions,
        risk_level,
        settings.alpha,
        settings.delta,
        auto_fail=settings.auto_fail,
        rule_ids=rule_ids,
    )
    figures: list[RuleFigures] = []
    for rg in certified:
        mine = [d for d in decisions if d.rule_id == rg.rule_id]
        coverage = {f"{a:g}": certify(mine, a, settings.delta).auto_pass_coverage for a in COVERAGE_ALPHAS}
        figures.append(
            RuleFigures(
                rule_id=rg.rule_id,
                risk_level=risk_level,
                guarantee=rg.guarantee.public(),
                auto_fail=rg.auto_fail.public() if rg.auto_fail is not None else None,
                unlabelled=(unlabelled or {}).get(rg.rule_id, 0),
                coverage_by_alpha=coverage,
            )
        )
    report = GuaranteeReport(
        alpha=settings.alpha,
        delta=settings.delta,
        risk_level=risk_level,
        confidence_source=confidence_source,
        rules=figures,
    )
    return report, certified


def make_certificate(
    certified: Sequence[RuleGuarantee],
    settings: GuaranteeSettings,
    *,
    model: str,
    template_hash: str,
    ruleset: Any,
    dataset_files: Iterable[Path],
    dataset: str,
    confidence_source: str,
    samples: int,
) -> Certificate:
    entries = [
        CertifiedRule(
            rule_id=rg.rule_id,
            risk_level=rg.risk_level,
            auto_pass=rg.guarantee.threshold,
            auto_fail=rg.auto_fail.threshold if rg.auto_fail is not None else None,
            alpha=settings.alpha,
            delta=settings.delta,
            upper_bound=rg.guarantee.upper_bound,
            n_auto_passed=rg.guarantee.n_auto_passed,
            auto_pass_coverage=rg.guarantee.auto_pass_coverage,
            needed=rg.guarantee.needed,
        )
        for rg in certified
    ]
    return new_certificate(
        model=model,
        template_hash=template_hash,
        rules_hash=rules_hash(ruleset),
        dataset_hash=dataset_hash(dataset_files),
        dataset=dataset,
        confidence_source=confidence_source,
        samples=samples,
        alpha=settings.alpha,
        delta=settings.delta,
        rules=entries,
    )
