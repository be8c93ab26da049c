"""`seqjudge golden validate`'s verdict on a golden dataset, as text or JSON."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from seqjudge.golden import RULES_FILE, Contradiction, GoldenDataset, Problem, errors


@dataclass
class Validation:
    directory: Path
    dataset: GoldenDataset | None  # None when its rules or traces cannot be read
    problems: list[Problem]
    contradictions: list[Contradiction]
    guidelines: dict[str, str] = field(default_factory=dict)  # judge rule id -> its labelling guideline


def validation_json(view: Validation, out: IO[str]) -> None:
    dataset = view.dataset
    json.dump(
        {
            "dataset": str(view.directory),
            "ok": not errors(view.problems),
            "traces": len(dataset.traces) if dataset else None,
            "labels": dict(Counter(lb.verdict for lb in dataset.labels.values())) if dataset else None,
            "problems": [p.as_dict() for p in view.problems],
            "contradictions": [c.as_dict() for c in view.contradictions],
            "guidelines": view.guidelines,
        },
        out,
        indent=2,
    )
    out.write("\n")


def validation_text(view: Validation, out: IO[str]) -> None:
    dataset, directory, contradictions = view.dataset, view.directory, view.contradictions
    w = out.write
    if dataset is not None:
        verdicts = Counter(lb.verdict for lb in dataset.labels.values())
        extras = [p.name for p in (dataset.catalog_path, dataset.examples_path) if p is not None]
        w(
            f"{directory}: {len(dataset.traces)} traces, {len(dataset.labels)} labels "
            f"({verdicts['pass']} pass, {verdicts['fail']} fail), {len(dataset.ruleset.rules)} rules"
            + (f"; {', '.join(extras)}" if extras else "")
            + "\n"
        )
    for rule_id, text in view.guidelines.items():
        w(
            f"labelling guideline of `{rule_id}` (from {RULES_FILE}, word for word what the judge is told):\n"
            + "".join(f"  {line}\n" for line in text.splitlines())
        )
    for p in view.problems:
        w(f"{p.level}: {p.render()}\n")
    for c in contradictions:
        where = f"{dataset.labels_path if dataset else directory}, line {c.line}: " if c.line else ""
        w(f"warning: {where}label contradicts the engine: {c.render()}\n")
    if contradictions:
        w(
            f"{len(contradictions)} label(s) contradict the engine. They are reported, not errors: fix the "
            "label, the trace or the rule, or keep the label and say why in the dataset's README.\n"
        )
    bad = errors(view.problems)
    if bad:
        w(f"{len(bad)} error(s): the dataset cannot be used for calibration until they are fixed.\n")
        return
    w("ok: the dataset can be used for calibration.\n")
