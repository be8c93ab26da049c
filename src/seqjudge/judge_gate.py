"""How a run's `judge` rule decisions gate: by the certificate's thresholds, or as advice only.

With a judge model, each `judge` rule is looked up in the certificates beside the store for the run's model,
prompt template, rule set and confidence source, at the run's risk level:
- certified: the judge's pass stands when its confidence reaches the auto-pass threshold; else the decision
  goes to review (reason ``low_confidence``). Its fail stands, unless an auto-fail threshold was certified
  and the confidence is below it (then review too). A rule the calibration could not certify has no
  auto-pass threshold: every pass of it goes to review.
- advisory (no certificate matches: the model, prompt or rules changed since calibration, or there never was
  one): the judge's decision never gates (its final outcome stays ``deferred``: no verdict, no score, never
  a regression in ``compare``), but it is not unseen: a fail sends its trace to review (reason
  ``uncertified_judge_fail``, verdict ``review``), and the run's summary says so. ``--strict`` makes a
  missing certificate an error.
Without a model nothing here applies (the judge rules are deferred, ``seqjudge.runner``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from seqjudge.certificate import (
    CertifiedRule,
    certificates_dir,
    certified_thresholds,
    rules_hash,
    template_hash,
)
from seqjudge.errors import InputError

Route = Literal["gate", "review", "advisory"]


@dataclass(frozen=True)
class JudgeGate:
    risk_level: str
    certified: Mapping[str, CertifiedRule] = field(default_factory=dict)  # judge rule id -> its thresholds
    advisory: tuple[str, ...] = ()  # judge rule ids with no certified entry
    why: str | None = None  # why those are advisory, in words

    def route(self, rule_id: str, said: str, confidence: float | None) -> Route:
        """What a judge rule decision does: gate (stands), review, or advisory (reported only)."""
        entry = self.certified.get(rule_id)
        if entry is None:
            return "advisory"
        limit = entry.auto_pass if said == "passed" else entry.auto_fail
        if said == "failed" and entry.auto_fail is None:
            return "gate"  # a fail without an auto-fail calibration stands, as it always has (fail closed)
        if limit is None or confidence is None or confidence < limit:
            return "review"
        return "gate"

    def note(self) -> str | None:
        if not self.advisory:
            return None
        return (
            f"judge rule(s) {', '.join(self.advisory)} are advisory: {self.why}; their decisions never "
            "gate, and a trace they fail goes to review (uncertified_judge_fail), not to the verdict "
            "(`seqjudge calibrate DATASET` with this model certifies them; --strict makes this an error)"
        )


def judge_gate(
    model: str, ruleset: Any, *, store: str | Path, risk_level: str, confidence_source: str
) -> JudgeGate:
    """The gate of a run with a judge ``model`` over ``ruleset`` (its `judge` rules) at ``risk_level``."""
    judge_rules = [r.rule_id for r in ruleset.rules if r.type == "judge"]
    folder = certificates_dir(store)
    found = certified_thresholds(
        model, template_hash(), rules_hash(ruleset), folder=folder, confidence_source=confidence_source
    )
    if found is None:
        why = (
            f"no calibration certificate in {folder} matches judge {model}, this prompt template and these "
            f"rules (confidence {confidence_source})"
        )
        return JudgeGate(risk_level, {}, tuple(judge_rules), why)
    certified = {rid: found[(rid, risk_level)] for rid in judge_rules if (rid, risk_level) in found}
    missing = tuple(rid for rid in judge_rules if rid not in certified)
    at_level = f"the matching certificate has no entry at risk level {risk_level}" if missing else None
    return JudgeGate(risk_level, certified, missing, at_level)


def run_gate(cfg: Any, ruleset: Any, provider: Any) -> JudgeGate | None:
    """The gate of a run (a ``RunConfig``) judged by ``provider``; None without a judge or without `judge`
    rules (nothing to gate: they are deferred, or absent)."""
    if provider is None or not any(r.type == "judge" for r in ruleset.rules):
        return None
    model = cfg.model or f"{getattr(provider, 'name', 'custom')}:{getattr(provider, 'model', 'model')}"
    return judge_gate(
        model, ruleset, store=cfg.store, risk_level=cfg.risk_level, confidence_source=cfg.confidence
    )


def gate_data(gate: JudgeGate | None) -> dict[str, Any] | None:
    """The gate as JSON, kept with a batch run so that its collection routes as the submission decided."""
    if gate is None:
        return None
    return {
        "risk_level": gate.risk_level,
        "certified": {rid: entry.model_dump(mode="json") for rid, entry in gate.certified.items()},
        "advisory": list(gate.advisory),
        "why": gate.why,
    }


def gate_from_data(data: Mapping[str, Any] | None) -> JudgeGate | None:
    if not data:
        return None
    return JudgeGate(
        data["risk_level"],
        {rid: CertifiedRule.model_validate(entry) for rid, entry in data["certified"].items()},
        tuple(data["advisory"]),
        data.get("why"),
    )


def require_certificate(gate: JudgeGate | None) -> None:
    """``--strict``: a judge rule without a certificate is an error (exit 2), not advice."""
    if gate is not None and gate.advisory:
        raise InputError(
            f"judge rule(s) {', '.join(gate.advisory)} have no calibration certificate: {gate.why}",
            where="--strict",
            hint="run `seqjudge calibrate DATASET --model MODEL` on a labelled dataset with these rules, or "
            "drop --strict to run them as advice",
        )
