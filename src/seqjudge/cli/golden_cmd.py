"""`seqjudge golden validate DIR`: is a golden dataset well formed; do its labels agree with the engine?"""

import sys
from pathlib import Path
from typing import Annotated

import typer

from seqjudge.cli.app import app
from seqjudge.cli.options import format_option
from seqjudge.outputs.registry import writer

golden_app = typer.Typer(
    help="Golden datasets: labelled traces to calibrate the judge on.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(golden_app, name="golden")


@golden_app.command("validate")
def validate_cmd(
    directory: Annotated[
        Path, typer.Argument(help="The dataset folder (rules.yaml, traces.jsonl, labels.jsonl).")
    ],
    fmt: Annotated[str, format_option("golden")] = "text",
) -> int:
    """Check a golden dataset: every label names a trace, every trace is labelled, every labelled rule
    exists, verdicts are pass or fail and agree with the rule labels. Labels of deterministic rules that
    the engine decides the other way are listed as warnings (they are not errors).

    Exit 0 when the dataset is usable, 2 when it has errors.
    """
    from seqjudge.golden import cross_check, errors, guidelines, read_dataset
    from seqjudge.outputs.datasets import Validation

    dataset, problems = read_dataset(directory)
    contradictions = cross_check(dataset) if dataset is not None else []
    rule_guidelines = guidelines(dataset) if dataset is not None else {}
    bad = errors(problems)
    view = Validation(directory, dataset, problems, contradictions, rule_guidelines)
    writer("golden", fmt)(view, sys.stdout)
    return 2 if bad else 0
