"""Golden datasets: labelled traces that the judge is calibrated on, read, validated and cross-checked.

A golden dataset is a folder holding ``rules.yaml``, ``traces.jsonl``, ``labels.jsonl`` and optionally
``catalog.json`` (or the rule file's ``catalog:``) and the judge's worked examples (``examples.yaml``,
``examples.yml`` or ``examples.json``). ``labels.jsonl`` has one line per trace:
``{"trace_id", "verdict": "pass" | "fail", "rules"?: {rule_id: "pass" | "fail"}, "labeler"?, "note"?}``.

Two kinds of findings, kept apart on purpose:

- ``Problem``: the dataset is malformed or inconsistent (a label for no trace, an unlabelled trace, an unknown
  rule id, a verdict that is not pass or fail, a ``pass`` verdict with a critical rule labelled ``fail``...).
  Each names the file and line. Errors make ``seqjudge golden validate`` exit 2 and stop a calibration.
- ``Contradiction``: a label of a deterministic rule that the engine decides the other way. Labels come from
  people, so the engine is a cross-check, not the source: a contradiction is reported (the label, the trace
  or the rule may be wrong, or the rule language may not say what the policy means), never silently
  accepted, and it is not an error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from seqjudge.errors import InputError
from seqjudge.rules.model import RuleSet
from seqjudge.trace import Trace

RULES_FILE = "rules.yaml"
TRACES_FILE = "traces.jsonl"
LABELS_FILE = "labels.jsonl"
CATALOG_FILE = "catalog.json"
EXAMPLES_FILES = ("examples.yaml", "examples.yml", "examples.json")
VERDICTS = ("pass", "fail")
LABEL_KEYS = ("trace_id", "verdict", "rules", "labeler", "note")
LABEL_HINT = 'each line is {"trace_id", "verdict": "pass"|"fail", "rules"?: {rule_id: "pass"|"fail"}, ...}'


@dataclass(frozen=True)
class Problem:
    """One located finding: ``file`` (path as given), ``line`` (1-based, when there is one)."""

    file: str
    line: int | None
    message: str
    hint: str | None = None
    level: Literal["error", "warning"] = "error"

    def render(self) -> str:
        place = self.file + (f", line {self.line}" if self.line is not None else "")
        text = f"{place}: {self.message.rstrip('.')}."
        if self.hint:
            text += f" {self.hint[:1].upper()}{self.hint[1:].rstrip('.')}."
        return text

    def as_dict(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "file": self.file,
            "line": self.line,
            "message": self.message,
            "hint": self.hint,
        }


@dataclass(frozen=True)
class Contradiction:
    """A human label of a deterministic rule that the engine decides the other way."""

    trace_id: str
    rule_id: str
    rule_type: str
    label: str  # pass | fail
    engine: str  # the engine's outcome: passed, failed, not_exercised, not_applicable
    explanation: str  # the engine's explanation
    line: int | None = None  # the label's line in labels.jsonl

    def render(self) -> str:
        return (
            f"trace {self.trace_id}, rule {self.rule_id} ({self.rule_type}): labelled {self.label}, "
            f"the engine says {self.engine}: {self.explanation.strip()}"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "trace_id": self.trace_id,
            "rule_id": self.rule_id,
            "rule_type": self.rule_type,
            "label": self.label,
            "engine": self.engine,
            "explanation": self.explanation,
            "line": self.line,
        }


@dataclass
class Label:
    trace_id: str
    verdict: str
    rules: dict[str, str] = field(default_factory=dict)
    labeler: str | None = None
    note: str | None = None
    line: int = 0


@dataclass
class GoldenDataset:
    """A loaded dataset. ``traces`` keep the file's order; ``labels`` are keyed by trace id."""

    root: Path
    ruleset: RuleSet
    traces: list[Trace]
    labels: dict[str, Label]
    catalog: Any = None
    examples: Any = None  # a tuple of seqjudge.judge.prompt.Example, or None for the shipped examples
    catalog_path: Path | None = None
    examples_path: Path | None = None

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def rules_path(self) -> Path:
        return self.root / RULES_FILE

    @property
    def traces_path(self) -> Path:
        return self.root / TRACES_FILE

    @property
    def labels_path(self) -> Path:
        return self.root / LABELS_FILE

    def verdicts(self) -> dict[str, str]:
        """trace id -> the human verdict (pass | fail)."""
        return {tid: label.verdict for tid, label in self.labels.items()}


# -- reading -----------------------------------------------------------------------------------------------
def _error_problems(exc: InputError, fallback: str) -> list[Problem]:
    """An InputError (possibly several, ``InputProblems``) as located problems."""
    many = getattr(exc, "problems", None) or [exc]
    out = []
    for p in many:
        line = None
        where = p.where or ""
        if where.startswith("line "):
            head = where[5:].split(",", 1)[0].split(" ", 1)[0]
            line = int(head) if head.isdigit() else None
        message = p.problem if line is not None or not where else f"{where}: {p.problem}"
        out.append(Problem(p.source or fallback, line, message, p.hint))
    return out


def _trace_lines(path: Path) -> dict[str, int]:
    """trace id -> its line in a JSONL trace file (a light pass: only for locating messages)."""
    lines: dict[str, int] = {}
    try:
        with path.open(encoding="utf-8") as handle:
            for number, text in enumerate(handle, 1):
                if not text.strip():
                    continue
                try:
                    record = json.loads(text)
                except ValueError:
                    continue
                if isinstance(record, dict) and isinstance(record.get("trace_id"), str):
                    lines.setdefault(record["trace_id"], number)
    except OSError:
        pass
    return lines


def _read_labels(path: Path) -> tuple[list[Label], list[Problem]]:
    labels: list[Label] = []
    problems: list[Problem] = []
    src = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        return [], [
            Problem(
                src,
                None,
                f"cannot read the labels ({exc.strerror})",
                "a golden dataset needs labels.jsonl: one human label per trace",
            )
        ]
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except ValueError as exc:
            problems.append(Problem(src, number, f"not valid JSON ({exc})", LABEL_HINT))
            continue
        if not isinstance(record, dict):
            problems.append(Problem(src, number, "a label is a JSON object", LABEL_HINT))
            continue
        bad = False
        unknown = sorted(set(record) - set(LABEL_KEYS))
        if unknown:
            problems.append(
                Problem(
                    src,
                    number,
                    f"unknown key(s) {', '.join(unknown)}",
                    f"the keys are: {', '.join(LABEL_KEYS)}",
                )
            )
            bad = True
        trace_id = record.get("trace_id")
        if not isinstance(trace_id, str) or not trace_id:
            problems.append(Problem(src, number, "trace_id is missing or not a non-empty string", LABEL_HINT))
            continue
        verdict = record.get("verdict")
        if verdict not in VERDICTS:
            problems.append(
                Problem(
                    src,
                    number,
                    f"trace {trace_id}: verdict is {json.dumps(verdict)}, not pass or fail",
                    "a human verdict is pass or fail (a doubtful trace is resolved before it is a label)",
                )
            )
            bad = True
        rules = record.get("rules") or {}
        if not isinstance(rules, dict):
            problems.append(
                Problem(
                    src,
                    number,
                    f"trace {trace_id}: rules is not a mapping",
                    "write rules as {rule_id: pass|fail}",
                )
            )
            rules, bad = {}, True
        for rule_id, value in rules.items():
            if value not in VERDICTS:
                problems.append(
                    Problem(
                        src,
                        number,
                        f"trace {trace_id}: rule {rule_id} is labelled {json.dumps(value)}, not pass or fail",
                        "label a rule pass or fail, or leave it out when the trace does not decide it",
                    )
                )
                bad = True
        for key in ("labeler", "note"):
            if record.get(key) is not None and not isinstance(record[key], str):
                problems.append(Problem(src, number, f"trace {trace_id}: {key} is not text", LABEL_HINT))
                bad = True
        labels.append(
            Label(
                trace_id=trace_id,
                verdict=str(verdict) if not bad or verdict in VERDICTS else "invalid",
                rules={str(k): str(v) for k, v in rules.items()},
                labeler=record.get("labeler") if isinstance(record.get("labeler"), str) else None,
                note=record.get("note") if isinstance(record.get("note"), str) else None,
                line=number,
            )
        )
    if not labels and not problems:
        problems.append(Problem(src, None, "the labels file is empty", "write one label line per trace"))
    return labels, problems


def read_dataset(directory: str | Path) -> tuple[GoldenDataset | None, list[Problem]]:
    """Read everything that can be read and return the dataset (None when rules or traces are unusable)
    and every problem found, in file order: rules, catalog, examples, traces, labels."""
    root = Path(directory)
    if not root.is_dir():
        return None, [
            Problem(
                str(root),
                None,
                "not a folder",
                "a golden dataset is a folder with rules.yaml, traces.jsonl and labels.jsonl",
            )
        ]
    problems: list[Problem] = []
    ruleset: RuleSet | None = None
    rules_path = root / RULES_FILE
    if not rules_path.is_file():
        problems.append(
            Problem(str(rules_path), None, "missing", "a golden dataset needs its rules in rules.yaml")
        )
    else:
        from seqjudge.inputs import read_rules

        try:
            ruleset = read_rules(rules_path, warn=None)
        except InputError as exc:
            problems.extend(_error_problems(exc, str(rules_path)))

    catalog = catalog_path = None
    from seqjudge import inputs

    named = inputs.catalog_path(ruleset) if ruleset is not None else None
    candidate = named or root / CATALOG_FILE
    if candidate.is_file():
        catalog_path = candidate
        try:
            catalog = inputs.read_catalog(candidate)
        except InputError as exc:
            problems.extend(_error_problems(exc, str(candidate)))
        if catalog is not None and ruleset is not None:
            for p in inputs.unknown_tools(ruleset, catalog):
                problems.append(
                    Problem(str(rules_path), None, f"{p.rule_id or p.where}: {p.message}", p.hint)
                )
    elif ruleset is not None and ruleset.catalog:
        problems.append(
            Problem(
                str(rules_path),
                None,
                f"the catalog {ruleset.catalog} does not exist",
                "fix the rule file's catalog: or add the file",
            )
        )

    examples = examples_path = None
    for name in EXAMPLES_FILES:
        if (root / name).is_file():
            examples_path = root / name
            try:
                examples = inputs.read_examples(examples_path)
            except InputError as exc:
                problems.extend(_error_problems(exc, str(examples_path)))
            break

    traces: list[Trace] | None = None
    traces_path = root / TRACES_FILE
    if not traces_path.is_file():
        problems.append(
            Problem(str(traces_path), None, "missing", "a golden dataset needs its traces in traces.jsonl")
        )
    else:
        from seqjudge.ingest import load_traces

        try:
            traces = list(load_traces(traces_path))
        except InputError as exc:
            problems.extend(_error_problems(exc, str(traces_path)))
        if traces is not None:
            for n, t in enumerate(traces, 1):
                if not t.trace_id:
                    problems.append(
                        Problem(
                            str(traces_path),
                            None,
                            f"trace #{n} has no trace_id",
                            "labels name traces by id: give every trace a trace_id",
                        )
                    )
            if not traces:
                problems.append(Problem(str(traces_path), None, "no traces", "add the labelled traces"))

    labels, label_problems = _read_labels(root / LABELS_FILE)
    problems.extend(label_problems)
    if ruleset is None or traces is None:
        return None, problems

    problems.extend(_label_problems(root, ruleset, traces, labels))
    by_id: dict[str, Label] = {}
    for label in labels:
        by_id.setdefault(label.trace_id, label)
    dataset = GoldenDataset(
        root=root,
        ruleset=ruleset,
        traces=traces,
        labels=by_id,
        catalog=catalog,
        examples=examples,
        catalog_path=catalog_path,
        examples_path=examples_path,
    )
    return dataset, problems


def _label_problems(root: Path, ruleset: RuleSet, traces: list[Trace], labels: list[Label]) -> list[Problem]:
    src = str(root / LABELS_FILE)
    rules = {r.rule_id: r for r in ruleset.rules}
    trace_ids = {t.trace_id for t in traces if t.trace_id}
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    for label in labels:
        tid, line = label.trace_id, label.line
        if tid in seen:
            problems.append(
                Problem(
                    src,
                    line,
                    f"trace {tid} is labelled twice (first on line {seen[tid]})",
                    "keep one label per trace",
                )
            )
            continue
        seen[tid] = line
        if tid not in trace_ids:
            problems.append(
                Problem(
                    src,
                    line,
                    f"the label names trace {tid}, which is not in traces.jsonl",
                    "fix the trace_id or remove the label",
                )
            )
        unknown = [r for r in label.rules if r not in rules]
        for rule_id in unknown:
            problems.append(
                Problem(
                    src,
                    line,
                    f"trace {tid}: rule {rule_id} is not a rule of rules.yaml",
                    f"the rule ids are: {', '.join(rules)}",
                )
            )
        critical_fails = [
            r
            for r, v in label.rules.items()
            if v == "fail" and r in rules and rules[r].severity == "critical"
        ]
        if label.verdict == "pass" and critical_fails:
            problems.append(
                Problem(
                    src,
                    line,
                    f"trace {tid}: the verdict is pass but critical rule {critical_fails[0]} is "
                    "labelled fail",
                    "a failed critical rule fails the trace: fix the verdict or the rule label",
                )
            )
        if label.verdict == "fail" and label.rules and not critical_fails:
            problems.append(
                Problem(
                    src,
                    line,
                    f"trace {tid}: the verdict is fail but no critical rule is labelled fail",
                    "label the rule that fails it, or say in the note why the trace fails",
                    level="warning",
                )
            )
    lines = _trace_lines(root / TRACES_FILE)
    for t in traces:
        if t.trace_id and t.trace_id not in seen:
            problems.append(
                Problem(
                    str(root / TRACES_FILE),
                    lines.get(t.trace_id),
                    f"trace {t.trace_id} has no label",
                    "add a line for it to labels.jsonl",
                )
            )
    return problems


def validate(directory: str | Path) -> list[Problem]:
    """Every problem of the dataset (errors, and warnings that do not stop a calibration)."""
    return read_dataset(directory)[1]


def errors(problems: list[Problem]) -> list[Problem]:
    return [p for p in problems if p.level == "error"]


def load_dataset(directory: str | Path) -> GoldenDataset:
    """The dataset, or an ``InputError`` listing every error (exit 2)."""
    dataset, problems = read_dataset(directory)
    bad = errors(problems)
    if dataset is None or bad:
        from seqjudge.rules.load import InputProblems

        raise InputProblems(
            [
                InputError(p.message, source=p.file, where=f"line {p.line}" if p.line else None, hint=p.hint)
                for p in bad
            ],
            source=str(directory),
        )
    return dataset


def guidelines(dataset: GoldenDataset) -> dict[str, str]:
    """rule id -> the labelling guideline of each `judge` rule: the text the judge's prompt gives it, so that
    labellers and the judge apply one definition."""
    from seqjudge.judge.prompt import guideline

    rs = dataset.ruleset
    return {r.rule_id: guideline(r, rs.aliases) for r in rs.rules if r.type == "judge"}


def cross_check(dataset: GoldenDataset) -> list[Contradiction]:
    """Every label of a deterministic rule that the engine decides the other way.

    Binary, as the judge-engine cross-check is: a rule is failed or it is not. A ``fail`` label against an
    engine outcome other than ``failed`` (passed, not exercised, not applicable) contradicts it, and so does
    a ``pass`` label against ``failed``. ``judge`` rules are the judge's to decide; the engine only knows
    when one with ``applies_to`` is not exercised, so a ``fail`` label there contradicts it.
    """
    from seqjudge.rules.engine import Engine

    engine = Engine(dataset.ruleset)
    found: list[Contradiction] = []
    for trace in dataset.traces:
        label = dataset.labels.get(trace.trace_id or "")
        if label is None or not label.rules:
            continue
        report = engine.check(trace)
        for result in report.rules:
            said = label.rules.get(result.rule_id)
            if said is None or result.outcome == "deferred" or (result.type == "judge" and said != "fail"):
                continue
            if (said == "fail") != (result.outcome == "failed"):
                found.append(
                    Contradiction(
                        trace_id=report.trace_id,
                        rule_id=result.rule_id,
                        rule_type=result.type,
                        label=said,
                        engine=result.outcome,
                        explanation=result.explanation,
                        line=label.line,
                    )
                )
    return found
