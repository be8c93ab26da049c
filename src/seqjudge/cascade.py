"""Escalation: a cascade of judges, cheapest first (``seqjudge run --model cheap --escalate strong``).

Every stage has its own calibration certificate (``seqjudge calibrate`` certifies each model) and so its
own gate (``seqjudge.judge_gate``). The first stage is asked what a one-judge run asks. A `judge` rule whose
decision its gate would not let stand (a pass below the auto-pass threshold, a fail below a certified
auto-fail threshold, a decision without a confidence, every decision of a stage no certificate matches,
every rule of an unscored reply) is asked again of the next stage, and only those rules: a stronger judge
is paid only for what the cheaper one could not settle. The last stage's answer is routed by its own gate
as a one-judge run's is: to review (``low_confidence``), or advice only when it has no certificate (a fail
of it still goes to review: ``uncertified_judge_fail``).

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

from seqjudge.crosscheck import StageRecord
from seqjudge.errors import InputError
from seqjudge.pricing import Cost, Price, cost_of, price_for

if TYPE_CHECKING:
    from seqjudge.config import RunConfig
    from seqjudge.judge.judge import JudgeResult
    from seqjudge.judge_gate import JudgeGate
    from seqjudge.rules.model import RuleSet


@dataclass
class Stage:
    """One judge of the cascade: its model, the provider that asks it, its price and its gate (None: every
    decision stands, as in a calibration's own runs)."""

    model: str
    provider: Any
    price: Price | None = None
    gate: JudgeGate | None = None

    @property
    def certified(self) -> bool:
        return self.gate is None or bool(self.gate.certified)

    def settles(self, rule_id: str, said: str, confidence: float | None) -> bool:
        return self.gate is None or self.gate.route(rule_id, said, confidence) == "gate"


Ask = Callable[[Stage, list[str]], Awaitable["JudgeResult | None"]]


async def judge_cascade(
    stages: Sequence[Stage], rule_ids: Sequence[str], judge_rules: set[str], ask: Ask
) -> tuple[JudgeResult, list[StageRecord]] | None:
    """Ask the stages in turn (``ask(stage, rule_ids)`` judges the trace; None: the run is stopping) and
    return the merged result and what each stage did; None when the run stops before it is finished."""
    answers: list[JudgeResult] = []
    records: list[StageRecord] = []
    asked = list(rule_ids)
    for stage in stages:
        result = await ask(stage, asked)
        if result is None:
            return None
        settled = settled_rules(result, asked, judge_rules, stage)
        unsettled = [r for r in asked if r in judge_rules and r not in settled]
        answers.append(result)
        records.append(_record(stage, result, asked, settled, unsettled))
        asked = unsettled
        if not asked:
            break
    return merge(answers), records


def settled_rules(
    result: JudgeResult, asked: Sequence[str], judge_rules: set[str], stage: Stage
) -> list[str]:
    """The judge rules of ``asked`` whose decision in ``result`` the stage's gate lets stand."""
    if result.status != "scored":
        return []
    said = result.rule_outcomes()
    confidence = result.rule_confidences()
    return [
        r for r in asked if r in judge_rules and r in said and stage.settles(r, said[r], confidence.get(r))
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
        certified=stage.certified,
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


def merge(answers: Sequence[JudgeResult]) -> JudgeResult:
    """One result from the stages' results, in stage order: each rule answered by the last scored stage
    asked about it (a stage is asked only what the ones before it left unsettled, so that is the stage that
    settled it, or the last one that answered)."""
    scored = [r for r in answers if r.status == "scored" and r.report is not None]
    attempts = [a for r in answers for a in r.attempts]
    usage = answers[0].usage
    for r in answers[1:]:
        usage = usage + r.usage
    rule_ids = list(dict.fromkeys(rid for r in answers for rid in r.rule_ids))
    if not scored:
        return answers[-1].model_copy(update={"attempts": attempts, "usage": usage, "rule_ids": rule_ids})
    by_rule = {rid: result for result in scored for rid in result.rule_ids}
    base = scored[0]
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
    cfg: RunConfig,
    ruleset: RuleSet,
    providers: Sequence[Any],
    prices: Mapping[str, Price],
    first_gate: JudgeGate | None,
) -> list[Stage]:
    """The judges of ``cfg.model`` then ``cfg.escalate`` (``providers`` in that order), each with its price
    from ``prices`` and the gate of its own certificate (``first_gate``: the run's, already looked up; None:
    an ungated run, where every stage's decisions stand)."""
    from seqjudge.judge_gate import judge_gate

    models = [cfg.model or "", *cfg.escalate]
    stages = []
    for n, (model, provider) in enumerate(zip(models, providers, strict=True)):
        price = price_for(model, prices)
        if cfg.max_cost and price is None:
            raise InputError(
                f"--max-cost needs the price of every judge of the cascade, and seqjudge has none for "
                f"{model}",
                where="--escalate",
                hint=f"give it with --prices FILE, e.g. {model}: {{input: 2.5, output: 10}} in USD per "
                "million tokens",
            )
        gate = first_gate
        if n and first_gate is not None:
            gate = judge_gate(
                model, ruleset, store=cfg.store, risk_level=cfg.risk_level, confidence_source=cfg.confidence
            )
        stages.append(Stage(model, provider, price, gate))
    return stages


def stage_notes(stages: Sequence[Stage]) -> list[str]:
    """What the reader of a run's summary must know about its cascade: judges without a certificate."""
    notes = []
    for n, stage in enumerate(stages):
        advisory = stage.gate.advisory if stage.gate is not None else ()
        if advisory:
            last = (
                "the last judge: its decisions on them are advice only, and its fails go to review "
                "(uncertified_judge_fail)"
                if n == len(stages) - 1
                else ("it settles none of them and passes them on")
            )
            notes.append(
                f"escalation judge {n + 1} ({stage.model}) has no certificate for judge rule(s) "
                f"{', '.join(advisory)} with this prompt template and these rules: {last}; `seqjudge "
                f"calibrate DATASET --model {stage.model}` certifies it"
            )
    return notes


@dataclass
class CascadeRouting:
    """The gate of a cascade's merged answer: each judge rule routed by the gate of the stage whose answer
    is final for it (the last scored stage asked about it). A rule whose last stage asked did not answer
    (unscored) goes to review: the earlier answer it falls back on was not good enough to settle it, and no
    other judge's threshold may be applied to it."""

    gates: dict[str, JudgeGate | None]
    unanswered: set[str] = field(default_factory=set)

    def route(self, rule_id: str, said: str, confidence: float | None) -> str:
        if rule_id in self.unanswered:
            return "review"
        gate = self.gates.get(rule_id)
        return "gate" if gate is None else gate.route(rule_id, said, confidence)


def cascade_routing(stages: Sequence[Stage], records: Sequence[StageRecord]) -> CascadeRouting:
    routing = CascadeRouting({})
    for stage, record in zip(stages, records, strict=False):  # a record per stage asked, in order
        if record.status == "scored":
            routing.gates.update(dict.fromkeys(record.asked, stage.gate))
            routing.unanswered.difference_update(record.asked)
        else:
            routing.unanswered.update(r for r in record.asked if r in routing.gates)
    return routing


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
