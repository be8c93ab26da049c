"""Options that several commands share, each declared once: the store, the output format, the output file,
the risk level. (The trace-reading options are in ``trace_options``.)

``--store`` reads ``SEQJUDGE_STORE`` in every command, so a run stored with the variable set is found by
``runs list`` with the same variable. ``--format`` offers exactly the formats the output registry has for
the command's view (``seqjudge.outputs.registry``): one vocabulary, no per-command enum.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from seqjudge.defaults import STORE_ENV
from seqjudge.outputs.registry import names


def _store_option(help: str) -> Any:
    return typer.Option("--store", envvar=STORE_ENV, show_envvar=True, help=help)


# Commands that read or write the store: the flag, else SEQJUDGE_STORE, else .seqjudge/seqjudge.db. A str,
# not a Path: a Path would fold a postgresql:// URL's `//` into one slash (seqjudge.store.target).
_STORE_HELP = "The seqjudge database: a SQLite file, or postgresql://USER@HOST:PORT/DATABASE."
StoreOpt = Annotated[str, _store_option(_STORE_HELP)]
# The guard hook records its decisions only where a store is named (or with --shadow, which needs one).
GuardStoreOpt = Annotated[
    str | None,
    _store_option(
        "Record each decision in this seqjudge database (runs show lists them); with --shadow, default "
        ".seqjudge/seqjudge.db."
    ),
]
# Commands whose config file may name the store (run, calibrate): None means "the config's".
ConfigStoreOpt = Annotated[
    str | None, _store_option(_STORE_HELP[:-1] + "; default: the config's, else .seqjudge/seqjudge.db.")
]


def format_option(view: str, *, help: str | None = None) -> Any:
    """``--format`` for a command showing ``view``: its choices are the registry's formats of that view."""
    choices = names(view)

    def parse(value: str) -> str:
        if value not in choices:
            raise typer.BadParameter(f"{value!r} is not one of {', '.join(choices)}")
        return value

    return typer.Option(
        "--format",
        parser=parse,
        metavar="[" + "|".join(choices) + "]",
        help=help or f"Output format: {', '.join(choices)}.",
        show_default=True,
    )


OutputOpt = Annotated[Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")]


class Risk(StrEnum):
    low = "low"
    medium = "medium"
    high = "high"


# -- a suite's inputs (seqjudge.inputs loads them) --
RulesArg = Annotated[Path, typer.Argument(help="Rule file (YAML or JSON, any supported shape).")]
TracesArg = Annotated[
    list[str],
    typer.Argument(
        help="Trace files or directories (several may be given, e.g. traces/*.json), or - for stdin; the "
        "suite's own files (rules.yaml, catalog.json, labels.jsonl, ...) are skipped with a note.",
        show_default=False,
    ),
]
CatalogOpt = Annotated[
    Path | None,
    typer.Option(
        "--catalog",
        help="Tool catalog; unknown tool names are errors (default: the config's, else the rule file's "
        "catalog:, else a catalog.json beside the rule file).",
    ),
]
ExamplesOpt = Annotated[
    Path | None,
    typer.Option(
        "--examples",
        help="Worked examples for the judge (YAML); default: the shipped prompts/examples/default.yaml.",
    ),
]
ThresholdOpt = Annotated[
    float, typer.Option("--threshold", min=0.0, max=1.0, help="Scores below this are routed to review.")
]
RiskOpt = Annotated[Risk, typer.Option("--risk-level", help="high: any score below 1.0 goes to review.")]


class Explain(StrEnum):
    """``report.Explain``'s choices (declared here as ``Risk`` is, so the CLI starts without pydantic)."""

    not_passed = "not-passed"
    all = "all"


ExplainOpt = Annotated[
    Explain,
    typer.Option(
        "--explain",
        help="Which rules a report explains (explanation, call indices, details): not-passed (the lean "
        "default: every rule's outcome, the rest only for rules that did not pass) or all.",
    ),
]
# Commands with a config (run, calibrate): None means "the config's".
ConfigThresholdOpt = Annotated[
    float | None,
    typer.Option(
        "--threshold",
        min=0.0,
        max=1.0,
        help="Scores below this are routed to review (default: the config's).",
    ),
]
ConfigRiskOpt = Annotated[
    Risk | None,
    typer.Option("--risk-level", help="high: any score below 1.0 goes to review (default: the config's)."),
]

# -- the judge's model --
ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        help="provider:model, e.g. openai:gpt-4o or anthropic:claude-sonnet-5-5 (default: SEQJUDGE_MODEL).",
    ),
]
BaseUrlOpt = Annotated[
    str | None,
    typer.Option("--base-url", help="API base URL (an OpenAI-compatible server: vLLM, Ollama, a gateway)."),
]
MaxAttemptsOpt = Annotated[
    int, typer.Option("--max-attempts", min=1, max=10, help="Model answers per trace, re-asks included.")
]
ConfigMaxAttemptsOpt = Annotated[
    int | None,
    typer.Option(
        "--max-attempts", min=1, help="Model answers per trace, re-asks included (default: the config's)."
    ),
]
# Not reading is all it does: the fresh replies are still cached (judge.cache.ResponseCache(read=False)).
NoCacheOpt = Annotated[
    bool,
    typer.Option(
        "--no-cache",
        help="Ask the model afresh instead of reusing cached replies; the fresh replies are still cached.",
    ),
]
# None: the config's ``strict`` (when a seqjudge.yaml is found), else off; the flag wins both ways.
StrictOpt = Annotated[
    bool | None,
    typer.Option(
        "--strict/--no-strict",
        help="Exit 2 when a rule was exercised on no trace, a tool a rule names is called in no trace (and "
        "not in the catalog), or a trace calls tools that neither the catalog nor a rule names; `run`: also "
        "when no calibration certificate matches the judge (use it in CI). Default: `strict:` of the "
        "suite's seqjudge.yaml, else off; --no-strict overrides a config's `strict: true`.",
        show_default=False,
    ),
]


class JudgeMode(StrEnum):
    full = "full"
    contextual = "contextual"


JudgeModeOpt = Annotated[
    JudgeMode | None,
    typer.Option(
        "--judge-mode", help="full (every rule) or contextual (only `judge` rules); default: the config's."
    ),
]
ConcurrencyOpt = Annotated[int | None, typer.Option("--concurrency", min=1, help="Judge calls at once.")]


# -- the judge's confidence and its certificate (issue 18) --
class AuditDrawChoice(StrEnum):
    """`run --audit-draw`: how audits are drawn (seqjudge.audit.inclusion_probability)."""

    uniform = "uniform"
    active = "active"


class Confidence(StrEnum):
    stated = "stated"
    samples = "samples"
    logprobs = "logprobs"


ConfidenceOpt = Annotated[
    Confidence | None,
    typer.Option(
        "--confidence",
        help="Where each judged rule decision's confidence comes from: stated (the model says it), samples "
        "(agreement across --samples K calls) or logprobs (token log-probabilities, OpenAI chat); default: "
        "the config's (stated).",
    ),
]
SamplesOpt = Annotated[
    int | None,
    typer.Option("--samples", min=1, help="Judge calls per trace, examples reordered each time (default 1)."),
]
