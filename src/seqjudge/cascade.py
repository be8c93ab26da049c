"""Escalation: a cascade of judges, cheapest first (``seqjudge run --model cheap --escalate strong``).

Every stage has its own calibration certificate (``seqjudge calibrate`` certifies each model). The first
stage is asked what a one-judge run asks. A `judge` rule it cannot auto-decide under its certified
thresholds (a pass below its auto-pass threshold, a fail below its auto-fail one, any decision without a
confidence, every decision of a stage no certificate matches, every rule of an unscored reply) is asked
again of the next stage, and only those rules: a stronger judge is paid only for what the cheaper one could
not settle. What the last stage cannot settle goes to review like any decision under its threshold.

Deterministic rules are the engine's and are cross-checked by the first stage only: escalating them would
buy nothing the engine does not already know.

The stages' answers become one ``JudgeResult``: each rule's violations and confidence from the stage that
settled it (else from the last stage asked), every attempt of every stage (so the store keeps every raw
reply), and the tokens of all. ``StageRecord`` says per stage what was asked, what it settled and what that
cost; the run summary adds them up.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from seqjudge.crosscheck import StageRecord, TraceResult
from seqjudge.errors import InputError
from seqjudge.pricing import Cost, Price, cost_of, price_for

if TYPE_CHECKING:
    from seqjudge.config import RunConfig
    from seqjudge.judge.judge import JudgeResult
    from seqjudge.rules.model import RuleSet

ESCALATION_EXHAUSTED = "escalation_exhausted"
# rule id -> (auto-pass threshold, auto-fail threshold) of one stage at the run's risk level; None: that side
# is not certified (never auto-decided).
StageThresholds = Mapping[str, tuple[float | None, float | None]]


@dataclass
class Stage:
    """One judge of the cascade: its model, the provider that asks it, its price and its certificate's
    thresholds (None: no certificate matches this model, prompt and rules)."""

    model: str
    provider: Any
    price: Price | None = None
    thresholds: StageThresholds | None = None


def auto_decided(
    said: str, confidence: float | None, entry: tuple[float | None, float | None] | None
) -> bool:
    """Whether a stage settles a decision by itself: its side is certified and its confidence reaches it."""
    if entry is None or confidence is None:
        return False
    threshold = entry[0] if said == "passed" else entry[1]
    return threshold is not None and confidence >= threshold


Ask = Callable[[Stage, list[str]], Awaitable["JudgeResult | None"]]


async def judge_cascade(
    stages: Sequence[Stage], rule_ids: Sequence[str], judge_rules: set[str], ask: Ask
) -> tuple[JudgeResult, list[StageRecord]] | None:
    """Ask the stages in turn (``ask(stage, rule_ids)`` judges the trace; None: the run is stopping) and
    return the merged result and what each stage did; None when the run stops before it is finished."""
    answers: list[tuple[Stage, JudgeResult, list[str]]] = []
    records: list[StageRecord] = []
    asked = list(rule_ids)
    for stage in stages:
        result = await ask(stage, asked)
        if result is None:
            return None
        settled = settled_rules(result, asked, judge_rules, stage.thresholds)
        unsettled = [r for r in asked if r in judge_rules and r not in settled]
        answers.append((stage, result, settled))
        records.append(_record(stage, result, asked, settled, unsettled))
        asked = unsettled
        if not asked:
            break
    return merge([(result, settled) for _, result, settled in answers]), records


def settled_rules(
    result: JudgeResult, asked: Sequence[str], judge_rules: set[str], thresholds: StageThresholds | None
) -> list[str]:
    if result.status != "scored" or thresholds is None:
        return []
    said = result.rule_outcomes()
    confidence = result.rule_confidences()
    return [
        r
        for r in asked
        if r in judge_rules and r in said and auto_decided(said[r], confidence.get(r), thresholds.get(r))
    ]


def _record(
    stage: Stage, result: JudgeResult, asked: list[str], settled: list[str], unsettled: list[str]
) -> StageRecord:
    usage = result.usage
    record = StageRecord(
        model=stage.model,
        asked=list(asked),
        settled=settled,
        unsettled=unsettled,
        status=result.status,
        certified=stage.thresholds is not None,
        input_tokens=usage.input_tokens,
        cached_input_tokens=usage.cached_input_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        output_tokens=usage.output_tokens,
    )
    if stage.price is not None:
        record.cost_usd = round(stage_cost(record, stage.price).total, 8)
    return record


def stage_cost(record: StageRecord, price: Price | None) -> Cost:
    """What a stage's tokens cost at ``price`` (nothing known without one)."""
    return cost_of(record, price) if price is not None else Cost()


def merge(answers: Sequence[tuple[JudgeResult, list[str]]]) -> JudgeResult:
    """One result from the stages' (result, settled rules), in stage order: each rule answered by the stage
    that settled it, else by the last scored stage asked about it."""
    scored = [(r, s) for r, s in answers if r.status == "scored" and r.report is not None]
    attempts = [a for r, _ in answers for a in r.attempts]
    usage = answers[0][0].usage
    for r, _ in answers[1:]:
        usage = usage + r.usage
    rule_ids = list(dict.fromkeys(rid for r, _ in answers for rid in r.rule_ids))
    if not scored:
        last = answers[-1][0]
        return last.model_copy(update={"attempts": attempts, "usage": usage, "rule_ids": rule_ids})
    # A stage is asked only what the stages before it left unsettled: the last stage asked has the answer.
    by_rule = {rid: result for result, _ in scored for rid in result.rule_ids}
    base = scored[0][0]
    assert base.report is not None
    violations = [
        v for rid, r in by_rule.items() for v in (r.report.violations if r.report else []) if v.rule_id == rid
    ]
    confidence = {rid: c for rid, r in by_rule.items() if (c := r.rule_confidences().get(rid)) is not None}
    failed = {v.rule_id for v in violations}
    report = base.report.model_copy(
        update={
            "violations": violations,
            "total_rules_checked": len(by_rule),
            "rules_failed": len(failed),
            "rules_passed": len(by_rule) - len(failed),
        }
    )
    return base.model_copy(
        update={
            "report": report,
            "attempts": attempts,
            "usage": usage,
            "rule_ids": rule_ids,
            "confidence": confidence,
        }
    )


# -- building a cascade and adding up what it did -----------------------------------------------------------
def build_stages(
    cfg: RunConfig, ruleset: RuleSet, providers: Sequence[Any], prices: Mapping[str, Price]
) -> list[Stage]:
    """The judges of ``cfg.model`` then ``cfg.escalate`` (``providers`` in that order), each with its price
    from ``prices`` and its certificate's thresholds."""
    models = [cfg.model or "", *cfg.escalate]
    stages = []
    for model, provider in zip(models, providers, strict=True):
        price = price_for(model, prices)
        if cfg.max_cost and price is None:
            raise InputError(
                f"--max-cost needs the price of every judge of the cascade, and seqjudge has none for "
                f"{model}",
                where="--escalate",
                hint=f"give it with --prices FILE, e.g. {model}: {{input: 2.5, output: 10}} in USD per "
                "million tokens",
            )
        stages.append(Stage(model, provider, price, stage_thresholds(cfg, ruleset, model)))
    return stages


def stage_thresholds(cfg: RunConfig, ruleset: RuleSet, model: str) -> StageThresholds | None:
    """Per judge rule, the (auto-pass, auto-fail) thresholds the certificate of ``model`` gives at the run's
    risk level; None when no certificate matches this model, prompt template and rules."""
    from seqjudge.certificate import certificates_dir, certified_thresholds, rules_hash, template_hash

    found = certified_thresholds(
        model,
        template_hash(),
        rules_hash(ruleset),
        folder=certificates_dir(cfg.store),
        confidence_source=cfg.confidence,
    )
    if found is None:
        return None
    return {rid: (e.auto_pass, e.auto_fail) for (rid, level), e in found.items() if level == cfg.risk_level}


def stage_notes(stages: Sequence[Stage]) -> list[str]:
    """What the reader of a run's summary must know about its cascade: judges without a certificate."""
    return [
        f"escalation judge {n + 1} ({stage.model}) has no certificate for this prompt template and these "
        "rules: it settles nothing and passes every judge rule on; `seqjudge calibrate DATASET --model "
        f"{stage.model}` certifies it"
        for n, stage in enumerate(stages)
        if stage.thresholds is None
    ]


def attach(result: TraceResult, records: list[StageRecord]) -> TraceResult:
    """``result`` with its cascade's records, routed to review when a judge rule was left unsettled by the
    last judge (reason ``escalation_exhausted``): no judge could auto-decide it under its certificate."""
    left = records[-1].unsettled if records else []
    if not left:
        return result.model_copy(update={"stages": records})
    reasons = [*result.review_reasons, ESCALATION_EXHAUSTED]
    verdict = "review" if result.verdict == "pass" else result.verdict
    return result.model_copy(update={"stages": records, "review_reasons": reasons, "verdict": verdict})


@dataclass
class StageTally:
    """A run's cascade, judge by judge: traces asked, judge-rule decisions settled and passed on (to the
    next judge; the last one's to review), tokens and cost."""

    prices: dict[str, Price | None]
    figures: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add(self, records: Sequence[StageRecord]) -> Cost:
        """Count one trace's stages; returns what they cost, each judge at its own price."""
        total = Cost()
        for rec in records:
            fig = self.figures.setdefault(
                rec.model,
                {
                    "traces": 0,
                    "settled": 0,
                    "passed_on": 0,
                    "input_tokens": 0,
                    "output_tokens": 0,
                    "cost": Cost(),
                },
            )
            fig["traces"] += 1
            fig["settled"] += len(rec.settled)
            fig["passed_on"] += len(rec.unsettled)
            fig["input_tokens"] += rec.input_tokens
            fig["output_tokens"] += rec.output_tokens
            cost = stage_cost(rec, self.prices.get(rec.model))
            fig["cost"] = fig["cost"] + cost
            total = total + cost
        return total

    def totals(self) -> list[dict[str, Any]]:
        out = []
        for model, price in self.prices.items():
            fig = dict(self.figures.get(model, {}))
            cost = fig.pop("cost", Cost())
            out.append(
                {
                    "model": model,
                    "traces": fig.get("traces", 0),
                    "settled": fig.get("settled", 0),
                    "passed_on": fig.get("passed_on", 0),
                    "input_tokens": fig.get("input_tokens", 0),
                    "output_tokens": fig.get("output_tokens", 0),
                    "cost_usd": None if price is None else round(cost.total, 6),
                }
            )
        return out
