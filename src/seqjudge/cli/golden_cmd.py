"""`seqjudge golden validate DIR`: is a golden dataset well formed; do its labels agree with the engine?"""

from __future__ import annotations

import json
import sys
from collections import Counter
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from seqjudge.cli.app import app

golden_app = typer.Typer(
    help="Golden datasets: labelled traces to calibrate the judge on.", no_args_is_help=True
)
app.add_typer(golden_app, name="golden")


class Fmt(StrEnum):
    text = "text"
    json = "json"


@golden_app.command("validate")
def validate_cmd(
    directory: Annotated[
        Path, typer.Argument(help="The dataset folder (rules.yaml, traces.jsonl, labels.jsonl).")
    ],
    fmt: Annotated[Fmt, typer.Option("--format", help="text or json.")] = Fmt.text,
) -> int:
    """Check a golden dataset: every label names a trace, every trace is labelled, every labelled rule
    exists, verdicts are pass or fail and agree with the rule labels. Labels of deterministic rules that
    the engine decides the other way are listed as warnings (they are not errors).

    Exit 0 when the dataset is usable, 2 when it has errors.
    """
    from seqjudge.golden import RULES_FILE, cross_check, errors, guidelines, read_dataset

    dataset, problems = read_dataset(directory)
    contradictions = cross_check(dataset) if dataset is not None else []
    rule_guidelines = guidelines(dataset) if dataset is not None else {}
    bad = errors(problems)
    if fmt == Fmt.json:
        json.dump(
            {
                "dataset": str(directory),
                "ok": not bad,
                "traces": len(dataset.traces) if dataset else None,
                "labels": dict(Counter(lb.verdict for lb in dataset.labels.values())) if dataset else None,
                "problems": [p.as_dict() for p in problems],
                "contradictions": [c.as_dict() for c in contradictions],
                "guidelines": rule_guidelines,
            },
            sys.stdout,
            indent=2,
        )
        sys.stdout.write("\n")
        return 2 if bad else 0
    out = sys.stdout.write
    if dataset is not None:
        verdicts = Counter(lb.verdict for lb in dataset.labels.values())
        extras = [p.name for p in (dataset.catalog_path, dataset.examples_path) if p is not None]
        out(
            f"{directory}: {len(dataset.traces)} traces, {len(dataset.labels)} labels "
            f"({verdicts['pass']} pass, {verdicts['fail']} fail), {len(dataset.ruleset.rules)} rules"
            + (f"; {', '.join(extras)}" if extras else "")
            + "\n"
        )
    for rule_id, text in rule_guidelines.items():
        out(
            f"labelling guideline of `{rule_id}` (from {RULES_FILE}, word for word what the judge is told):\n"
            + "".join(f"  {line}\n" for line in text.splitlines())
        )
    for p in problems:
        out(f"{p.level}: {p.render()}\n")
    for c in contradictions:
        where = f"{dataset.labels_path if dataset else directory}, line {c.line}: " if c.line else ""
        out(f"warning: {where}label contradicts the engine: {c.render()}\n")
    if contradictions:
        out(
            f"{len(contradictions)} label(s) contradict the engine. They are reported, not errors: fix the "
            "label, the trace or the rule, or keep the label and say why in the dataset's README.\n"
        )
    if bad:
        out(f"{len(bad)} error(s): the dataset cannot be used for calibration until they are fixed.\n")
        return 2
    out("ok: the dataset can be used for calibration.\n")
    return 0
