"""Scores for a calibration: judged runs of a golden dataset (stored ones reused), or an external scores file.

Reuse: a stored run counts as a judgement of the dataset when it is *completed*, was made with the same
rules and traces files, model, judge mode, confidence source and sampling options, no judge decision in it
was routed by a certificate (``seqjudge.judge_gate``: calibration runs are ungated), and, trace by trace,
the judge was sent exactly the prompt it would be sent now (the stored ``prompt_hash`` equals a fresh
render's, which covers the template, rules, catalog, examples, risk level, redaction and the trace itself)
under the same template hash. Then its scores are used and no model is called.

Repeats (``--repeats K``): each repeat is one stored run made with ``run_traces``. With K = 1 the response
cache is used as ``seqjudge run`` uses it. With K > 1 every new repeat runs with the response cache off, so
that each is a real, independent model call; reruns of the calibration are still free, because they reuse
the stored runs. For the same reason a stored run whose replies came from the cache (any attempt marked
``cached``) replays another run's answers and is reused only when K = 1.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from seqjudge.calibrate import Calibration, Settings, Stability, calibrate, stability, writable
from seqjudge.calibrate_guarantee import GuaranteeReport, GuaranteeSettings
from seqjudge.config import RunConfig, judge_rule_ids
from seqjudge.crosscheck import TraceResult
from seqjudge.defaults import CONFIG_FILE
from seqjudge.errors import InputError
from seqjudge.golden import GoldenDataset
from seqjudge.provenance import Suite, rules_hash, traces_hash

SCORES_HINT = 'a scores file is JSONL, one {"trace_id": ..., "score": 0.0 to 1.0} per labelled trace'


@dataclass
class JudgedRepeats:
    """One mapping trace id -> TraceResult per repeat, and where each came from."""

    run_ids: list[str]
    reused: list[str]
    results: list[dict[str, TraceResult]]
    excluded: dict[str, str] = field(default_factory=dict)  # trace id -> why it has no score

    def scores(self) -> dict[str, float]:
        """Per trace, the majority score over the repeats in which the judge scored it."""
        from seqjudge.calibrate import majority_score

        out: dict[str, float] = {}
        self.excluded = {}
        for trace_id in self.results[0]:
            got = [r[trace_id].score for r in self.results if trace_id in r and _scored(r[trace_id])]
            if got:
                out[trace_id] = majority_score(got)
            else:
                self.excluded[trace_id] = (
                    "the judge did not score it (unscored: it goes to review whatever the threshold)"
                )
        return out


def _scored(result: TraceResult) -> bool:
    judge = result.judge
    status = judge.get("status") if isinstance(judge, dict) else getattr(judge, "status", None)
    return status == "scored"


def expected_prompts(dataset: GoldenDataset, cfg: RunConfig) -> dict[str, tuple[str, str]]:
    """trace id -> (template hash, prompt hash) of the prompt a judged run would send now."""
    from seqjudge.judge.prompt import render
    from seqjudge.redact import redact_trace

    rule_ids = judge_rule_ids(dataset.ruleset, cfg.judge_mode)
    out: dict[str, tuple[str, str]] = {}
    if not rule_ids:
        return out
    for trace in dataset.traces:
        prompt = render(
            redact_trace(trace, cfg.redact),
            dataset.ruleset,
            catalog=dataset.catalog,
            examples=dataset.examples,
            risk_level=cfg.risk_level,
            rule_ids=rule_ids,
        )
        out[trace.trace_id or ""] = (prompt.template_hash, prompt.prompt_hash)
    return out


_SAME_CONFIG = ("rules", "traces", "model", "judge_mode", "risk_level", "confidence", "samples")
_SAME_OPTIONS = ("temperature", "seed", "base_url")


def matching_runs(store: Any, dataset: GoldenDataset, cfg: RunConfig, *, independent_only: bool) -> list[str]:
    """Stored runs (newest first) that judged every trace of the dataset exactly as a new run would."""
    wanted = cfg.model_dump(mode="json")
    expected: dict[str, tuple[str, str]] | None = None
    found: list[str] = []
    for info in store.list_runs():
        config = info.config
        if info.status != "completed" or any(config.get(k) != wanted[k] for k in _SAME_CONFIG):
            continue
        options = config.get("model_options") or {}
        if any(options.get(k) != wanted["model_options"][k] for k in _SAME_OPTIONS):
            continue
        if expected is None:
            expected = expected_prompts(dataset, cfg)
        if _same_prompts(store, info.id, expected, independent_only):
            found.append(info.id)
    return found


def _same_prompts(
    store: Any, run_id: str, expected: dict[str, tuple[str, str]], independent_only: bool
) -> bool:
    seen: set[str] = set()
    for stored in store.results(run_id):
        judge = stored.result.judge
        if stored.trace_id not in expected:
            continue
        fingerprint = getattr(judge, "fingerprint", None)
        if fingerprint is None:
            return False
        if (fingerprint.template_hash, fingerprint.prompt_hash) != expected[stored.trace_id]:
            return False
        if independent_only and any(a.cached for a in judge.attempts):
            return False
        if any(d.route is not None for d in stored.result.rules):
            return False  # a gated run's scores leave out (or route) judge decisions: not the judge's own
        seen.add(stored.trace_id)
    return seen == set(expected)


async def judge_repeats(
    dataset: GoldenDataset,
    cfg: RunConfig,
    store: Any,
    repeats: int = 1,
    *,
    provider: Any = None,
    reuse: bool = True,
    say: Any = None,
) -> JudgedRepeats:
    """K judged runs of the dataset: matching stored runs first, new runs (``run_traces``) for the rest.

    ``provider``: a Provider instance for the new runs (else one is built from ``cfg.model``). A missing
    model or key raises ``InputError`` only when a new run is needed."""
    from seqjudge.judge.providers.registry import require_judge
    from seqjudge.runner import run_traces

    if repeats < 1:
        raise InputError(f"--repeats is {repeats}", where="--repeats", hint="judge each trace at least once")
    scores_hint = 'or calibrate scores you already have with --scores FILE (JSONL of {"trace_id", "score"})'
    if not cfg.model:
        require_judge(
            None,
            None,
            needs="calibration",
            hint="give --model provider:model (e.g. openai:gpt-4o), set `model:` in the dataset's "
            f"seqjudge.yaml or SEQJUDGE_MODEL; {scores_hint}",
        )
    reused = matching_runs(store, dataset, cfg, independent_only=repeats > 1)[:repeats] if reuse else []
    run_ids = list(reused)
    if len(run_ids) < repeats and provider is None:
        require_judge(
            cfg.model,
            cfg.model_options.base_url,
            needs=f"calibration ({repeats - len(run_ids)} new judged run(s))",
            hint="set the provider's key in the environment, or give a local server's base_url; or reuse "
            f"stored runs made with the same model and prompts; {scores_hint}",
        )
    while len(run_ids) < repeats:
        n = len(run_ids) + 1
        run_cfg = cfg.model_copy(
            update={
                # K > 1: every repeat a real call (see the module docstring).
                "cache": cfg.cache and repeats == 1,
                "label": cfg.label or f"calibrate:{dataset.name} repeat {n}/{repeats}",
            }
        )
        if say is not None:
            say(f"judging {len(dataset.traces)} traces with {cfg.model} (repeat {n} of {repeats})")
        summary = await run_traces(
            run_cfg,
            dataset.ruleset,
            dataset.traces,
            store,
            provider=provider,
            catalog=dataset.catalog,
            examples=dataset.examples,
            gated=False,  # the calibration measures the judge itself: no certificate applies yet
        )
        run_ids.append(summary.run_id)
    results = [{s.trace_id: s.result for s in store.results(run_id)} for run_id in run_ids]
    return JudgedRepeats(run_ids=run_ids, reused=reused, results=results)


RULES_HINT = (
    'optional "rules": {"RULE_ID": {"decision": "passed" | "failed", "confidence": 0.0 to 1.0}} per `judge` '
    "rule the judge decided, for the guarantee (calibrate --alpha)"
)


def read_scores(
    path: str | Path,
    dataset: GoldenDataset,
    rule_decisions: dict[str, dict[str, tuple[str, float]]] | None = None,
) -> dict[str, float]:
    """An external scores file: exactly one score in [0, 1] per labelled trace. ``rule_decisions``, when
    given, is filled with each line's optional ``rules`` (trace id -> rule id -> (decision, confidence))."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(
            f"cannot read the scores ({exc.strerror})", source=str(p), hint=SCORES_HINT
        ) from None
    scores: dict[str, float] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        where = f"line {number}"
        try:
            record = json.loads(raw)
        except ValueError as exc:
            raise InputError(
                f"not valid JSON ({exc})", source=str(p), where=where, hint=SCORES_HINT
            ) from None
        tid = record.get("trace_id") if isinstance(record, dict) else None
        score = record.get("score") if isinstance(record, dict) else None
        if not isinstance(tid, str) or isinstance(score, bool) or not isinstance(score, int | float):
            raise InputError(
                "expected a trace_id and a numeric score", source=str(p), where=where, hint=SCORES_HINT
            )
        if not 0.0 <= float(score) <= 1.0:
            raise InputError(
                f"trace {tid}: score {score} is outside 0 to 1", source=str(p), where=where, hint=SCORES_HINT
            )
        if tid not in dataset.labels:
            raise InputError(
                f"trace {tid} is not a trace of the dataset",
                source=str(p),
                where=where,
                hint="score the dataset's traces",
            )
        if tid in scores:
            raise InputError(f"trace {tid} is scored twice", source=str(p), where=where, hint=SCORES_HINT)
        scores[tid] = float(score)
        extra = sorted(set(record) - {"trace_id", "score", "rules"})
        if extra:
            raise InputError(
                f"unknown key(s) {', '.join(extra)}",
                source=str(p),
                where=where,
                hint=f"{SCORES_HINT}; {RULES_HINT}",
            )
        if "rules" in record and rule_decisions is not None:
            rule_decisions[tid] = _rule_scores(record["rules"], dataset, str(p), where)
    missing = [t for t in dataset.labels if t not in scores]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise InputError(
            f"{len(missing)} labelled trace(s) have no score: {shown}",
            source=str(p),
            hint="a calibration on part of the dataset would not say what it left out: score every trace",
        )
    return scores


def _rule_scores(raw: Any, dataset: GoldenDataset, source: str, where: str) -> dict[str, tuple[str, float]]:
    judge_rules = {r.rule_id for r in dataset.ruleset.rules if r.type == "judge"}
    if not isinstance(raw, dict):
        raise InputError("rules must be an object", source=source, where=f"{where}, rules", hint=RULES_HINT)
    out: dict[str, tuple[str, float]] = {}
    for rid, entry in raw.items():
        at = f"{where}, rules.{rid}"
        if rid not in judge_rules:
            raise InputError(
                f"{rid!r} is not a `judge` rule of the dataset", source=source, where=at, hint=RULES_HINT
            )
        decision = entry.get("decision") if isinstance(entry, dict) else None
        confidence = entry.get("confidence") if isinstance(entry, dict) else None
        if (
            decision not in ("passed", "failed")
            or isinstance(confidence, bool)
            or not isinstance(confidence, int | float)
            or not 0.0 <= confidence <= 1.0
            or set(entry) - {"decision", "confidence"}
        ):
            raise InputError(
                "expected exactly a decision (passed or failed) and a confidence between 0 and 1",
                source=source,
                where=at,
                hint=RULES_HINT,
            )
        out[rid] = (decision, float(confidence))
    return out


# -- the whole calibration of a golden dataset -------------------------------------------------------------
class CalibrationReport(BaseModel):
    """Everything `seqjudge calibrate` says, as data (``-o OUT.json`` is ``model_dump(mode="json")``)."""

    dataset: str
    name: str
    source: dict[str, Any]
    excluded: dict[str, str] = Field(default_factory=dict)
    calibration: Calibration
    stability: Stability | None = None
    agreement: dict[str, Any] | None = None
    contradictions: list[dict[str, Any]] = Field(default_factory=list)
    dataset_warnings: list[str] = Field(default_factory=list)
    written: str | None = None
    guarantee: GuaranteeReport | None = None
    # The rules and traces it was made from (provenance.Suite): the HTML report shows a calibration only
    # beside runs of the same suite.
    suite: dict[str, Any] | None = None


def dataset_config(dataset: GoldenDataset, **overrides: Any) -> RunConfig:
    """The run config of a calibration: the dataset's ``seqjudge.yaml`` when it has one, then ``overrides``
    (non-None), then ``SEQJUDGE_MODEL`` for a model still missing. The rules and traces are always the
    dataset's own files; the store is the config's only when the file names one."""

    import yaml

    from seqjudge.config import DEFAULT_STORE, load_config
    from seqjudge.inputs import model_or_env

    path = dataset.root / CONFIG_FILE
    files = {"rules": str(dataset.rules_path.resolve()), "traces": str(dataset.traces_path.resolve())}
    if path.is_file():
        cfg = load_config(path)
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        if "store" not in raw:
            cfg = cfg.model_copy(update={"store": DEFAULT_STORE})
        cfg = cfg.model_copy(update=files)
    else:
        cfg = RunConfig(rules=files["rules"], traces=files["traces"])
    update = {k: v for k, v in overrides.items() if v is not None}
    cfg = cfg.model_copy(update=update)
    if cfg.model is None:
        cfg = cfg.model_copy(update={"model": model_or_env(None)})
    return cfg


def calibrate_golden(
    directory: str | Path,
    *,
    settings: Settings | None = None,
    repeats: int = 1,
    model: str | None = None,
    provider: Any = None,
    risk_level: str | None = None,
    judge_mode: str | None = None,
    store: str | Path | None = None,
    concurrency: int | None = None,
    scores_file: str | Path | None = None,
    explicit_objective: bool = False,
    reuse: bool = True,
    say: Any = None,
    guarantee: GuaranteeSettings | None = None,
    confidence: str | None = None,
    samples: int | None = None,
) -> CalibrationReport:
    """Calibrate the judge on a golden dataset (the Python entry point of `seqjudge calibrate`).

    ``provider``: a Provider instance to judge with (tests and embedding programs); without one it is built
    from the model. ``explicit_objective``: the objective of ``settings`` was asked for, so the risk level
    ``risk_level`` (default medium) uses it instead of its default objective. ``guarantee``: also certify
    confidence thresholds per judge rule (``seqjudge.calibrate_guarantee``) and, when a judge was run,
    write the certificate beside the store."""
    import asyncio

    from seqjudge.crosscheck import agreement
    from seqjudge.golden import cross_check, load_dataset, read_dataset
    from seqjudge.store import Store

    settings = settings or Settings()
    dataset, problems = read_dataset(directory)
    if dataset is None or any(p.level == "error" for p in problems):
        load_dataset(directory)  # raises the InputError that lists every error
    assert dataset is not None
    contradictions = cross_check(dataset)
    labels = dataset.verdicts()
    if provider is not None and model is None:
        model = f"{getattr(provider, 'name', 'custom')}:{getattr(provider, 'model', 'model')}"
    cfg = dataset_config(
        dataset,
        model=model,
        risk_level=risk_level,
        judge_mode=judge_mode,
        store=str(store) if store is not None else None,
        concurrency=concurrency,
        confidence=confidence,
        samples=samples,
    )
    judged: JudgedRepeats | None = None
    if scores_file is not None:
        external_rules: dict[str, dict[str, tuple[str, float]]] = {}
        scores = read_scores(scores_file, dataset, external_rules)
        source: dict[str, Any] = {"kind": "scores", "file": str(scores_file), "repeats": 1}
        excluded: dict[str, str] = {}
    else:
        with Store(cfg.store) as db:
            judged = asyncio.run(
                judge_repeats(dataset, cfg, db, repeats, provider=provider, reuse=reuse, say=say)
            )
        scores = judged.scores()
        excluded = dict(judged.excluded)
        source = {
            "kind": "judge",
            "model": cfg.model,
            "judge_mode": cfg.judge_mode,
            "risk_level": cfg.risk_level,
            "repeats": repeats,
            "store": cfg.store,
            "runs": judged.run_ids,
            "reused": judged.reused,
        }
    if not scores:
        reasons = sorted(set(excluded.values()))
        raise InputError(
            "no trace of the dataset has a judge score" + (f" ({reasons[0]})" if reasons else ""),
            source=str(directory),
            hint="check the judge mode (contextual mode judges only `judge` rules) and the runs' errors "
            "(`seqjudge runs show RUN`)",
        )
    level = cfg.risk_level
    try:
        calibration = calibrate(
            scores,
            {t: labels[t] for t in scores},
            settings,
            risk_objectives={level: settings.objective} if explicit_objective else None,
        )
    except ValueError as exc:
        raise InputError(
            str(exc), source=str(directory), hint="a calibration needs labelled traces of both kinds"
        ) from None
    stability_figures = agreement_figures = None
    if judged is not None:
        # Per trace, every repeat's score and verdict beside the majority score (None: not scored).
        for entry in calibration.scores:
            got = [r.get(entry["trace_id"]) for r in judged.results]
            entry["repeats"] = [x.score if x is not None and _scored(x) else None for x in got]
            entry["verdicts"] = [x.verdict if x is not None else None for x in got]
        if repeats > 1:
            stability_figures = stability(judged.results)
        agreement_figures = agreement(r for repeat in judged.results for r in repeat.values())
    return CalibrationReport(
        dataset=str(directory),
        name=dataset.name,
        source=source,
        excluded=excluded,
        calibration=calibration,
        stability=stability_figures,
        agreement=agreement_figures,
        contradictions=[c.as_dict() for c in contradictions],
        dataset_warnings=[p.render() for p in problems if p.level == "warning"],
        guarantee=_guarantee(dataset, cfg, judged, guarantee, external_rules if scores_file else None)
        if guarantee is not None
        else None,
        suite=dataset_suite(dataset).as_dict(),
    )


def dataset_files(dataset: GoldenDataset) -> list[Path]:
    """The files a certificate's dataset hash covers: rules, traces, labels, and catalog/examples if any."""
    files = [dataset.rules_path, dataset.traces_path, dataset.labels_path]
    return files + [p for p in (dataset.catalog_path, dataset.examples_path) if p is not None]


def _guarantee(
    dataset: GoldenDataset,
    cfg: RunConfig,
    judged: JudgedRepeats | None,
    settings: GuaranteeSettings,
    external: dict[str, dict[str, tuple[str, float]]] | None = None,
) -> GuaranteeReport:
    """The guarantee per judge rule from the first judged run (or the scores file's ``rules``), and its
    certificate when a judge ran."""
    from seqjudge.calibrate_guarantee import (
        external_decisions,
        guarantee_report,
        labelled_decisions,
        make_certificate,
    )
    from seqjudge.certificate import certificates_dir, save_certificate, template_hash

    rule_ids = [r.rule_id for r in dataset.ruleset.rules if r.type == "judge"]
    if external is not None:
        decisions, unlabelled = external_decisions(external, dataset.labels)
    else:
        results = list(judged.results[0].values()) if judged is not None else []
        decisions, unlabelled = labelled_decisions(results, dataset.labels, rule_ids)
    report, certified = guarantee_report(
        decisions,
        rule_ids,
        settings,
        risk_level=cfg.risk_level,
        confidence_source=cfg.confidence,
        unlabelled=unlabelled,
    )
    if judged is None:
        report.note = (
            "external scores: no certificate is written (it needs the judge model and seqjudge's prompt; "
            "judge the dataset with --model to certify)"
            + ("" if decisions else '; the scores file has no "rules" decisions, so no rule can be certified')
        )
        return report
    if not rule_ids:
        report.note = "the rules have no `judge` rule: nothing to certify, no certificate written"
        return report
    cert = make_certificate(
        certified,
        settings,
        model=cfg.model or "",
        template_hash=template_hash(),
        ruleset=dataset.ruleset,
        dataset_files=dataset_files(dataset),
        dataset=dataset.name,
        confidence_source=cfg.confidence,
        samples=cfg.samples,
    )
    report.certificate = str(save_certificate(cert, certificates_dir(cfg.store)))
    return report


def dataset_suite(dataset: GoldenDataset) -> Suite:
    ids = [str(t.trace_id) for t in dataset.traces]
    return Suite(dataset.name, rules_hash(dataset.ruleset), traces_hash(ids), len(set(ids)))


THRESHOLDS_COMMENT = "# Thresholds per risk level, written by `seqjudge calibrate --write`"


def write_thresholds(report: CalibrationReport, root: str | Path) -> Path:
    """Write ``thresholds: {low, medium, high}`` into ``ROOT/seqjudge.yaml``: the block is replaced (or
    added) in place, so every other line and comment of the file is kept; a new file names the dataset's
    rules, traces and catalog. The result is loaded back with ``load_config`` before it is kept."""
    from datetime import UTC, datetime

    from seqjudge.config import load_config

    root = Path(root)
    path = root / CONFIG_FILE
    observed = [s["score"] for s in report.calibration.scores]
    values = {
        lvl: writable(report.calibration.recommendations[lvl].threshold, observed)
        for lvl in ("low", "medium", "high")
    }
    source = report.source
    origin = (
        f"judge {source.get('model')}, {source.get('repeats')} repeat(s)"
        if source["kind"] == "judge"
        else f"scores from {source.get('file')}"
    )
    block = [
        f"{THRESHOLDS_COMMENT} on {datetime.now(UTC):%Y-%m-%d}",
        f"# from {report.calibration.traces} labelled traces ({origin}); see `seqjudge calibrate --help`.",
        "thresholds:",
        *(f"  {lvl}: {values[lvl]!r}" for lvl in ("low", "medium", "high")),
    ]
    old = path.read_text(encoding="utf-8") if path.is_file() else None
    if old is None:
        head = [
            f"# seqjudge run configuration for the golden dataset {root.name}.",
            "rules: rules.yaml",
            "traces: traces.jsonl",
        ]
        if (root / "catalog.json").is_file():
            head.append("catalog: catalog.json")
        lines = [*head, *block]
    else:
        lines = _replace_block(old.splitlines(), block)
    try:
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        load_config(path)
    except InputError:
        if old is None:
            path.unlink(missing_ok=True)
        else:
            path.write_text(old, encoding="utf-8")
        raise
    except OSError as exc:
        raise InputError(
            f"cannot write the config ({exc.strerror})",
            source=str(path),
            hint="check the folder's permissions",
        ) from None
    return path


def _replace_block(lines: list[str], block: list[str]) -> list[str]:
    """``lines`` with the top-level ``thresholds:`` block (and the comment lines this writer put above it)
    replaced by ``block``, or with ``block`` appended."""
    start = next((i for i, line in enumerate(lines) if line.startswith("thresholds:")), None)
    if start is None:
        return [*lines, *block]
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or lines[end][:1] in (" ", "\t")):
        end += 1
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1  # keep the blank lines that separate it from what follows
    first = start
    if (
        first >= 2
        and lines[first - 2].startswith(THRESHOLDS_COMMENT)
        and lines[first - 1].startswith("# from ")
    ):
        first -= 2
    return [*lines[:first], *block, *lines[end:]]


def certificate_status(
    directory: str | Path, *, model: str | None = None, store: str | Path | None = None
) -> tuple[Any, list[str], str]:
    """`seqjudge calibrate --check`: (the certificate, what changed since it, the folder looked in)."""
    from seqjudge.certificate import certificates_dir, rules_hash, staleness, template_hash
    from seqjudge.golden import load_dataset

    dataset = load_dataset(directory)
    cfg = dataset_config(dataset, model=model, store=str(store) if store is not None else None)
    if not cfg.model:
        raise InputError(
            "--check compares the certificate with the judge model, and no model is configured",
            where="--model",
            hint="give --model provider:model, set `model:` in the dataset's seqjudge.yaml or SEQJUDGE_MODEL",
        )
    folder = certificates_dir(cfg.store)
    cert, changes = staleness(
        folder,
        dataset=dataset.name,
        model=cfg.model,
        template=template_hash(),
        rules=rules_hash(dataset.ruleset),
        data=dataset_hash_of(dataset),
    )
    return cert, changes, str(folder)


def dataset_hash_of(dataset: GoldenDataset) -> str:
    from seqjudge.certificate import dataset_hash

    return dataset_hash(dataset_files(dataset))
