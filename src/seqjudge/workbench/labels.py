"""Labels close the loop: per judge rule of a golden dataset, the labels that exist against what the
calibration guarantee needs at α, δ, the resolved review items not in the dataset yet, and whether the
certificate is stale (the same check as `seqjudge calibrate --check`).

The counts are the calibration's own: the labelled decisions are ``calibrate_guarantee.labelled_decisions``
of the first stored run that judged the dataset as a new calibration run would (``matching_runs``), and the
figures are ``guarantee.certify``'s: "31 of 59 labelled passes" is its ``candidates`` with a confidence
against its ``needed`` (or, once certified, ``bounds.labels_needed`` with no error: the least there can be).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from seqjudge.bounds import labels_needed
from seqjudge.guarantee import DEFAULT_ALPHA, DEFAULT_DELTA, LabelledDecision, certify


class RuleLabels(BaseModel):
    rule_id: str
    passes: int  # labelled decisions the judge passed with a confidence: what the guarantee tests
    fails: int  # labelled decisions the judge failed
    unlabelled: int  # judge decisions on traces with no label for this rule
    needed: int | None  # labelled passes the guarantee needs at the error rate seen; None: more cannot do
    certified: bool  # the labels certify an auto-pass threshold at α, δ now
    reason: str | None = None  # why not, in the calibration's words
    pending_passes: int = 0  # from resolved review items not in the dataset yet: counted once added
    pending_fails: int = 0

    def summary(self, alpha: float, delta: float) -> str:
        at = f"α = δ = {alpha:g}" if alpha == delta else f"α = {alpha:g}, δ = {delta:g}"
        if self.needed is None:
            return (
                f"{self.passes} labelled passes; no number of labels certifies {at} at the judge's error rate"
            )
        return f"{self.passes} of {self.needed} labelled passes for {at}"


class LabelStatus(BaseModel):
    dataset: str
    model: str
    risk_level: str
    alpha: float
    delta: float
    run_id: str | None  # the stored run whose judge decisions are counted; None: the dataset is not judged
    rules: list[RuleLabels]
    certificate_created: str | None  # when the certificate compared with was made; None: there is none
    stale: bool  # calibrate --check would fail: no certificate, or something changed since it
    changes: list[str] = Field(default_factory=list)
    pending_items: int = 0  # resolved review items of matching runs whose trace the dataset lacks
    recalibrate: str  # the command that recalibrates


def label_status(
    directory: str | Path,
    store: str | Path,
    *,
    model: str | None = None,
    risk_level: str | None = None,
    alpha: float | None = None,
    delta: float | None = None,
) -> LabelStatus:
    """The labels per judge rule of the dataset in ``directory`` against the guarantee at α, δ (given, else
    the certificate's, else 0.05), with ``store`` holding its judged runs and the review queue."""
    from seqjudge.calibrate_guarantee import labelled_decisions
    from seqjudge.calibrate_runs import certificate_status, dataset_config, matching_runs
    from seqjudge.certificate import rules_hash
    from seqjudge.golden import Label, load_dataset
    from seqjudge.store import Store

    dataset = load_dataset(directory)
    cfg = dataset_config(dataset, model=model, risk_level=risk_level, store=str(store))
    cert, changes, _ = certificate_status(directory, model=cfg.model, store=store)
    alpha = alpha if alpha is not None else (cert.alpha if cert is not None else DEFAULT_ALPHA)
    delta = delta if delta is not None else (cert.delta if cert is not None else DEFAULT_DELTA)
    rule_ids = [r.rule_id for r in dataset.ruleset.rules if r.type == "judge"]
    with Store(store, create=False) as db:
        runs = matching_runs(db, dataset, cfg, independent_only=False)
        results = [s.result for s in db.results(runs[0])] if runs else []
        decisions, unlabelled = labelled_decisions(results, dataset.labels, rule_ids)
        mine = rules_hash(dataset.ruleset)
        same = {
            r.id
            for r in db.list_runs()
            if r.fingerprint.get("rules_hash") == mine and r.config.get("model") == cfg.model
        }
        pending_results: list[Any] = []
        pending_labels: dict[str, Label] = {}
        for item in db.review_items(status="resolved"):
            if item.run_id in same and item.trace_id not in dataset.labels and item.resolution is not None:
                pending_results.append(db.result(item.run_id, item.trace_id).result)
                res = item.resolution
                pending_labels[item.trace_id] = Label(item.trace_id, res.verdict, dict(res.rules))
        pending, _ = labelled_decisions(pending_results, pending_labels, rule_ids)
    rules = [
        _rule(rule_id, decisions, pending, unlabelled.get(rule_id, 0), alpha, delta) for rule_id in rule_ids
    ]
    command = f"seqjudge calibrate {directory} --alpha {alpha:g} --delta {delta:g}"
    command += f" --model {cfg.model} --risk-level {cfg.risk_level} --store {store}"
    return LabelStatus(
        dataset=str(directory),
        model=cfg.model or "",
        risk_level=cfg.risk_level,
        alpha=alpha,
        delta=delta,
        run_id=runs[0] if runs else None,
        rules=rules,
        certificate_created=cert.created if cert is not None else None,
        stale=cert is None or bool(changes),
        changes=changes,
        pending_items=len(pending_labels),
        recalibrate=command,
    )


def _rule(
    rule_id: str,
    decisions: list[LabelledDecision],
    pending: list[LabelledDecision],
    unlabelled: int,
    alpha: float,
    delta: float,
) -> RuleLabels:
    mine = [d for d in decisions if d.rule_id == rule_id]
    g = certify(mine, alpha, delta)
    certified = g.threshold is not None
    waiting = [d for d in pending if d.rule_id == rule_id]
    return RuleLabels(
        rule_id=rule_id,
        passes=g.candidates - g.no_confidence,
        fails=sum(1 for d in mine if d.judge == "failed"),
        unlabelled=unlabelled,
        needed=labels_needed(alpha, delta) if certified else g.needed,
        certified=certified,
        reason=g.reason,
        pending_passes=sum(1 for d in waiting if d.judge == "passed" and d.confidence is not None),
        pending_fails=sum(1 for d in waiting if d.judge == "failed"),
    )
