"""Audit sampling: a seeded random share of auto-passed traces goes to a person, so that the live false-pass
rate is measured, not assumed.

Sampling. With ``--audit-rate p`` every auto-passed trace (verdict ``pass``, nothing routing it to review) is
drawn independently with probability ``p`` (Poisson sampling). The draw is a hash of the seed and the trace
id, not a random generator's next number, so it does not depend on the order traces finish in, on the
concurrency, or on a resume: the same seed, rate and trace give the same decision. An audited trace keeps
its ``pass`` verdict (the audit measures the gate, it does not move it) and gains the review reason
``audit`` and its inclusion probability.

Estimation. A resolved audit is a labelled draw from the auto-passed population; a reviewer's ``fail`` is a
false pass. Within one run every draw has the same probability and the estimate is the plain share, with an
exact Clopper–Pearson interval. Pooling runs audited at different rates weights each draw by ``1 / p``
(Horvitz–Thompson, in its ratio form: the Hájek estimator), and the interval is Clopper–Pearson on Kish's
effective sample size, with the counts rounded the conservative way for each bound. Open audits are
counted and named, never read as passes: the estimate assumes they would resolve like the resolved ones.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel

from seqjudge.bounds import clopper_pearson_interval
from seqjudge.crosscheck import TraceResult

if TYPE_CHECKING:
    from seqjudge.store import Store

AUDIT_REASON = "audit"
DEFAULT_DELTA = 0.05

Drift = Literal["above_alpha", "within_alpha", "undetermined", "no_alpha", "no_data"]


def audit_draw(trace_id: str, seed: int) -> float:
    """A number in [0, 1) fixed by the seed and the trace id (uniform over seeds and ids)."""
    digest = hashlib.sha256(f"seqjudge-audit:{seed}:{trace_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def auto_passed(result: TraceResult) -> bool:
    """Whether the gate let the trace through with nobody looking at it."""
    return result.verdict == "pass" and all(r == AUDIT_REASON for r in result.review_reasons)


AuditDraw = Literal["uniform", "active"]
# The active draw (``--audit-draw active``): a trace's inclusion probability is ``rate`` scaled by how unsure
# the judge was of its least certain pass, sqrt(c (1 - c)) for confidence c, against a pass at ACTIVE_SURE
# (drawn at ``rate`` exactly); never below ACTIVE_FLOOR times ``rate``, so that every auto-passed trace can
# be drawn and the weighted estimates stay unbiased; at most 1. sqrt(c (1 - c)) is the standard deviation of
# the judge's error if its confidence is calibrated: labels are put where they reduce the variance most
# (Zrnic and Candès, active statistical inference, 2024).
ACTIVE_SURE = 0.95
ACTIVE_FLOOR = 0.25


def judge_doubt(result: TraceResult) -> float | None:
    """sqrt(c (1 - c)) for the least confidence c of the trace's judge passes; None: no confidence given."""
    sure = [d.confidence for d in result.rules if d.judge == "passed" and d.confidence is not None]
    if not sure:
        return None
    c = min(sure)
    return math.sqrt(c * (1 - c))


def inclusion_probability(rate: float, doubt: float | None, draw: AuditDraw = "uniform") -> float:
    """The chance an auto-passed trace is audited: ``rate`` (uniform), or scaled by ``doubt`` (active; a
    trace without a confidence is drawn at ``rate``)."""
    if draw == "uniform" or doubt is None or rate <= 0:
        return rate
    reference = math.sqrt(ACTIVE_SURE * (1 - ACTIVE_SURE))
    return min(1.0, max(rate * ACTIVE_FLOOR, rate * doubt / reference))


def apply_audit(result: TraceResult, rate: float, seed: int, draw: AuditDraw = "uniform") -> TraceResult:
    """``result`` routed to review for an audit when it auto-passed and its draw falls under its inclusion
    probability (stored with it: the estimates weigh each audit by 1 / it)."""
    if rate <= 0 or not auto_passed(result) or AUDIT_REASON in result.review_reasons:
        return result
    p = inclusion_probability(rate, judge_doubt(result), draw)
    if audit_draw(result.trace_id, seed) >= p:
        return result
    return result.model_copy(
        update={"review_reasons": [*result.review_reasons, AUDIT_REASON], "audit_probability": p}
    )


# -- estimation ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Draw:
    """One audited decision: its inclusion probability and what the reviewer said (None: not yet)."""

    probability: float
    false_pass: bool | None


class AuditFigure(BaseModel):
    """The live false-pass rate of one population (every auto-passed trace, or one rule's decisions)."""

    scope: str  # "trace" or a rule id
    audited: int
    resolved: int
    open: int
    unlabelled: int = 0  # resolved, but the reviewer's answer does not say this rule's outcome
    false_passes: int
    estimate: float | None
    lower: float | None
    upper: float | None
    effective_n: float | None
    alpha: float | None
    drift: Drift


def estimate(
    draws: Sequence[Draw], *, alpha: float | None, delta: float = DEFAULT_DELTA, scope: str
) -> AuditFigure:
    """The false-pass rate among auto-passed items, from resolved draws, with a two-sided ``1 - delta``
    interval; ``drift`` compares the interval with ``alpha`` (above: the lower bound exceeds it)."""
    resolved = [d for d in draws if d.false_pass is not None]
    open_ = len(draws) - len(resolved)
    fails = sum(1 for d in resolved if d.false_pass)
    if not resolved:
        return AuditFigure(
            scope=scope,
            audited=len(draws),
            resolved=0,
            open=open_,
            false_passes=0,
            estimate=None,
            lower=None,
            upper=None,
            effective_n=None,
            alpha=alpha,
            drift="no_data",
        )
    weights = [1.0 / d.probability for d in resolved]
    total = sum(weights)
    share = sum(w for w, d in zip(weights, resolved, strict=True) if d.false_pass) / total
    n_eff = total * total / sum(w * w for w in weights)
    if math.isclose(n_eff, len(resolved)):  # one rate: the exact counts
        lower, upper = clopper_pearson_interval(fails, len(resolved), 1 - delta)
    else:
        k_eff = share * n_eff
        # Fewer trials and more failures widen the upper bound; more trials and fewer failures lower the
        # lower one: each bound is taken on the rounding that makes it more cautious.
        n_low, k_high = math.floor(n_eff), min(math.ceil(k_eff), math.floor(n_eff))
        upper = clopper_pearson_interval(k_high, n_low, 1 - delta)[1]
        lower = clopper_pearson_interval(math.floor(k_eff), math.ceil(n_eff), 1 - delta)[0]
    return AuditFigure(
        scope=scope,
        audited=len(draws),
        resolved=len(resolved),
        open=open_,
        false_passes=fails,
        estimate=share,
        lower=lower,
        upper=upper,
        effective_n=n_eff,
        alpha=alpha,
        drift=drift(lower, upper, alpha),
    )


def drift(lower: float, upper: float, alpha: float | None) -> Drift:
    if alpha is None:
        return "no_alpha"
    if lower > alpha:
        return "above_alpha"
    if upper <= alpha:
        return "within_alpha"
    return "undetermined"


class AuditReport(BaseModel):
    runs: list[str]
    alpha_source: str = ""  # where α came from: the run's certificate, --alpha, or why there is none
    rates: dict[str, list[float]]  # run id -> the inclusion probabilities its audits were drawn with
    auto_passed: int  # traces of these runs that auto-passed (the audited ones included)
    delta: float
    overall: AuditFigure
    by_rule: list[AuditFigure]


def audit_report(
    db: Store,
    run_ids: Sequence[str],
    *,
    alpha: float | None = None,
    rule_alpha: dict[str, float] | None = None,
    delta: float = DEFAULT_DELTA,
) -> AuditReport:
    """The audit figures of ``run_ids`` pooled: the trace-level false-pass rate, and each judge rule's over
    its auto-passed decisions (the judge's pass that gated; a rule's false pass is the reviewer failing
    that rule; a bare ``fail`` verdict leaves it unlabelled)."""
    resolutions = {
        (item.run_id, item.trace_id): item.resolution
        for run_id in run_ids
        for item in db.review_items(run=run_id, reason=AUDIT_REASON, status="all")
    }
    overall: list[Draw] = []
    by_rule: dict[str, list[Draw]] = {}
    unlabelled: dict[str, int] = {}
    rates: dict[str, list[float]] = {}
    population = 0
    for run_id in run_ids:
        seen: set[float] = set()
        for stored in db.results(run_id):
            result = stored.result
            if not auto_passed(result):
                continue
            population += 1
            if AUDIT_REASON not in result.review_reasons or result.audit_probability is None:
                continue
            p = result.audit_probability
            seen.add(p)
            res = resolutions.get((run_id, result.trace_id))
            overall.append(Draw(p, None if res is None else res.verdict == "fail"))
            for d in result.rules:
                if d.type != "judge" or d.judge != "passed" or d.final != "passed":
                    continue  # not an auto-passed judge decision (advice only, or no judge)
                said = rule_label(res.verdict, res.rules.get(d.rule_id)) if res is not None else None
                if res is not None and said is None:
                    unlabelled[d.rule_id] = unlabelled.get(d.rule_id, 0) + 1
                    continue
                by_rule.setdefault(d.rule_id, []).append(Draw(p, said))
        rates[run_id] = sorted(seen)
    rule_alpha = rule_alpha or {}
    figures = []
    for rule_id in sorted(set(by_rule) | set(unlabelled)):
        fig = estimate(
            by_rule.get(rule_id, []), alpha=rule_alpha.get(rule_id, alpha), delta=delta, scope=rule_id
        )
        figures.append(fig.model_copy(update={"unlabelled": unlabelled.get(rule_id, 0)}))
    return AuditReport(
        runs=list(run_ids),
        rates=rates,
        auto_passed=population,
        delta=delta,
        overall=estimate(overall, alpha=alpha, delta=delta, scope="trace"),
        by_rule=figures,
    )


def rule_label(verdict: str, rule: str | None) -> bool | None:
    """A rule's false pass from a resolution: its own label, else ``pass`` when the whole trace passed."""
    if rule is not None:
        return rule == "fail"
    return False if verdict == "pass" else None


class CertifiedAlpha(BaseModel):
    """What the run's judge was certified at: α overall and per judge rule (at the run's risk level), δ."""

    alpha: float
    delta: float
    by_rule: dict[str, float]
    certificate: str  # model, created, dataset: which one


def certified_alpha(db: Store, run_id: str) -> tuple[CertifiedAlpha | None, str]:
    """The certificate the run's (first) judge model, prompt template and rules match, or None and why."""
    from seqjudge.certificate import certificates_dir, find_certificates, rules_hash, template_hash
    from seqjudge.errors import SeqjudgeError
    from seqjudge.inputs import read_rules

    config = db.run_info(run_id).config
    model = config.get("model")
    if not model:
        return None, "the run had no judge model"
    try:
        if config.get("rules") in (None, "-"):
            raise KeyError("rules")
        ruleset = read_rules(config["rules"], warn=None)
    except (SeqjudgeError, KeyError, OSError):
        return None, f"the run's rule file ({config.get('rules')}) cannot be read to match a certificate"
    template = template_hash()
    for stored in db.results(run_id):  # the template the run's judge used, if it changed since
        fingerprint = getattr(stored.result.judge, "fingerprint", None)
        if fingerprint is not None:
            template = fingerprint.template_hash
            break
    found = find_certificates(
        model,
        template,
        rules_hash(ruleset),
        folder=certificates_dir(db.location),
        confidence_source=config.get("confidence"),
    )
    if not found:
        return None, f"no certificate matches {model} with the run's prompt template and rules"
    cert = found[0]
    level = config.get("risk_level", "medium")
    by_rule = {r.rule_id: r.alpha for r in cert.rules if r.risk_level == level}
    name = f"{cert.model}, {cert.dataset}, {cert.created}"
    return CertifiedAlpha(alpha=cert.alpha, delta=cert.delta, by_rule=by_rule, certificate=name), ""


def run_audit(
    db: Store, run_ids: Sequence[str], *, alpha: float | None = None, delta: float | None = None
) -> AuditReport:
    """The live false-pass figures of ``run_ids``' resolved audits against α: the one given, else the first
    run's certificate's (per judge rule too), saying which in ``alpha_source``. `runs show --audit` and the
    workbench's run page show this one report."""
    rule_alpha: dict[str, float] = {}
    if alpha is not None:
        source = f"α {alpha:g} from --alpha"
    else:
        cert, why = certified_alpha(db, run_ids[0])
        if cert is None:
            source = f"no α: {why} (give --alpha)"
        else:
            alpha, rule_alpha = cert.alpha, cert.by_rule
            delta = cert.delta if delta is None else delta
            source = f"α {alpha:g} from the certificate ({cert.certificate})"
    report = audit_report(
        db,
        list(dict.fromkeys(run_ids)),
        alpha=alpha,
        rule_alpha=rule_alpha,
        delta=DEFAULT_DELTA if delta is None else delta,
    )
    report.alpha_source = source
    return report
