"""`seqjudge runs ...` and `seqjudge review ...`: read the store back; let a person decide doubtful traces."""

from __future__ import annotations

import getpass
import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated

import typer

from seqjudge.cli.app import app
from seqjudge.cli.options import OutputOpt, StoreOpt, format_option
from seqjudge.defaults import DEFAULT_STORE_PATH, REVIEW_REASONS
from seqjudge.errors import InputError
from seqjudge.outputs.registry import writer
from seqjudge.outputs.streams import open_output

if TYPE_CHECKING:
    from seqjudge.store import Store

runs_app = typer.Typer(
    help="Stored runs: list them, show one, export one.", no_args_is_help=True, rich_markup_mode=None
)
review_app = typer.Typer(
    help="The human review queue: list, show, resolve, export labels.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(runs_app, name="runs")
app.add_typer(review_app, name="review")


class Status(StrEnum):
    open = "open"
    resolved = "resolved"
    all = "all"


class HumanVerdict(StrEnum):
    passed = "pass"
    failed = "fail"


RunArg = Annotated[str, typer.Argument(help="A run id, a unique prefix of one, or `latest`.")]
ListFormatOpt = Annotated[str, format_option("runs")]


def _open(path: Path) -> Store:
    from seqjudge.store import Store

    # Reading commands never create a database: a wrong --store should say so, not show an empty store.
    return Store(path, create=False)


# -- runs ---------------------------------------------------------------------------------------------------
@runs_app.command("list")
def runs_list(store: StoreOpt = DEFAULT_STORE_PATH, fmt: ListFormatOpt = "text") -> int:
    """List the stored runs, newest first."""
    with _open(store) as db:
        runs = db.list_runs()
    writer("runs", fmt)(runs, sys.stdout, empty=f"no runs stored in {store} yet; `seqjudge run` stores one")
    return 0


@runs_app.command("show")
def runs_show(
    run: RunArg,
    trace: Annotated[str | None, typer.Option("--trace", help="Show one trace's rules instead.")] = None,
    store: StoreOpt = DEFAULT_STORE_PATH,
) -> int:
    """A run's summary: counts, judge-engine agreement, fingerprints; with --trace, one trace's rules."""
    from seqjudge.outputs.listings import result_lines, run_lines

    with _open(store) as db:
        run_id = db.resolve_run(run)
        info = db.run_info(run_id)
        if trace is not None:
            stored = db.result(run_id, trace)
            print(f"Run {run_id} · trace {trace}")
            print("\n".join(result_lines(stored.result)))
            return 0
        results = [s.result for s in db.results(run_id)]
    print("\n".join(run_lines(info, results)))
    return 0


@runs_app.command("export")
def runs_export(
    run: RunArg,
    fmt: Annotated[
        str,
        format_option("export", help="jsonl (everything, to rebuild reports) or csv (one row per trace)."),
    ] = "jsonl",
    output: OutputOpt = None,
    store: StoreOpt = DEFAULT_STORE_PATH,
) -> int:
    """Export a run's results: JSONL holds every trace, result and the run itself; CSV a row per trace."""
    with _open(store) as db:
        run_id = db.resolve_run(run)
        with open_output(output) as out:
            count = writer("export", fmt)(db, run_id, out)
    if output is not None and str(output) != "-":
        print(f"exported {count} trace(s) of run {run_id} to {output}", file=sys.stderr)
    return 0


# -- review -------------------------------------------------------------------------------------------------
@review_app.command("list")
def review_list(
    run: Annotated[str | None, typer.Option("--run", help="Only this run (id, prefix or latest).")] = None,
    reason: Annotated[
        str | None,
        typer.Option("--reason", help="Only items routed for this reason: " + ", ".join(REVIEW_REASONS)),
    ] = None,
    status: Annotated[Status, typer.Option("--status", help="open, resolved or all.")] = Status.open,
    store: StoreOpt = DEFAULT_STORE_PATH,
    fmt: ListFormatOpt = "text",
) -> int:
    """List review items (open ones by default), oldest first."""
    if reason is not None and reason not in REVIEW_REASONS:
        raise InputError(
            f"unknown review reason {reason!r}",
            where="--reason",
            hint="use one of " + ", ".join(REVIEW_REASONS),
        )
    with _open(store) as db:
        items = db.review_items(run=run, reason=reason, status=status.value)
    which = "" if status is Status.all else f"{status.value} "
    why = f" routed for {reason}" if reason else ""
    writer("review", fmt)(items, sys.stdout, empty=f"no {which}review items{why}")
    return 0


@review_app.command("show")
def review_show(
    item: Annotated[int, typer.Argument(help="The review item number (from `seqjudge review list`).")],
    store: StoreOpt = DEFAULT_STORE_PATH,
) -> int:
    """Everything needed to decide one item: the trace with each rule's engine and judge outcome beside the
    calls it names, the reasons, the disagreement, the judge's explanation and its raw replies."""
    from seqjudge.outputs.listings import review_lines

    with _open(store) as db:
        detail = db.review_item(item)
    print("\n".join(review_lines(detail)))
    return 0


@review_app.command("resolve")
def review_resolve(
    item: Annotated[int, typer.Argument(help="The review item number.")],
    verdict: Annotated[HumanVerdict, typer.Option("--verdict", help="The trace's verdict: pass or fail.")],
    rule: Annotated[
        list[str] | None, typer.Option("--rule", help="RULE=pass|fail for one rule; repeat for more.")
    ] = None,
    note: Annotated[str, typer.Option("--note", help="Why; kept with the label.")] = "",
    reviewer: Annotated[
        str | None,
        typer.Option("--reviewer", envvar="SEQJUDGE_REVIEWER", help="Who decided (default: the login name)."),
    ] = None,
    store: StoreOpt = DEFAULT_STORE_PATH,
) -> int:
    """Record a person's decision on an item; resolved items become golden-dataset labels."""
    rules: dict[str, str] = {}
    for entry in rule or []:
        rule_id, sep, outcome = entry.rpartition("=")
        if not sep or not rule_id or outcome not in ("pass", "fail"):
            raise InputError(
                f"{entry!r} is not RULE=pass or RULE=fail",
                where="--rule",
                hint="for example --rule read-before-update=fail",
            )
        rules[rule_id] = outcome
    who = reviewer or _login()
    with _open(store) as db:
        before = db.review_item(item)
        resolved = db.resolve_review(item, verdict=verdict.value, rules=rules, note=note, reviewer=who)
    again = (
        f" (replacing {before.resolution.verdict} by {before.resolution.reviewer})"
        if before.resolution
        else ""
    )
    print(f"resolved review item {resolved.id} (trace {resolved.trace_id}): {verdict.value} by {who}{again}")
    engine = {d.rule_id: d.engine for d in before.result.rules if d.type != "judge"}
    for rule_id, outcome in rules.items():
        said = engine.get(rule_id)
        if said in ("passed", "failed") and said[:4] != outcome:
            print(
                f"note: {rule_id}: you said {outcome}, the engine said {said}; calibration will report this "
                "contradiction",
                file=sys.stderr,
            )
    return 0


def _login() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return os.environ.get("USER") or "unknown"


@review_app.command("export")
def review_export(
    labels: Annotated[
        Path, typer.Option("--labels", help="Write golden-dataset labels here (JSONL, - for stdout).")
    ],
    run: Annotated[str | None, typer.Option("--run", help="Only items of this run.")] = None,
    store: StoreOpt = DEFAULT_STORE_PATH,
) -> int:
    """Write resolved items as golden-dataset labels ({trace_id, verdict, rules, labeler, note} per line)."""
    with _open(store) as db:
        out: IO[str]
        with open_output(labels) as out:
            count = db.export_labels(out, run=run)
    where = "stdout" if str(labels) == "-" else str(labels)
    print(f"wrote {count} label(s) to {where}", file=sys.stderr)
    return 0
