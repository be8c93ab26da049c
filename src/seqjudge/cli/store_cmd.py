"""`seqjudge runs ...` and `seqjudge review ...`: read the store back; let a person decide doubtful traces."""

import getpass
import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated

import typer

from seqjudge.cli.app import app
from seqjudge.cli.options import OutputOpt, StoreOpt, format_option
from seqjudge.defaults import DEFAULT_STORE, REVIEW_REASONS
from seqjudge.errors import InputError
from seqjudge.outputs.registry import writer
from seqjudge.outputs.streams import open_output
from seqjudge.safetext import say

if TYPE_CHECKING:
    from seqjudge.store import ItemState, ReviewDetail, Store

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


RunArg = Annotated[str, typer.Argument(help="A run id, a unique prefix of one, a baseline name or `latest`.")]
ListFormatOpt = Annotated[str, format_option("runs")]


def _open(path: str | Path) -> "Store":
    from seqjudge.store import Store

    # Reading commands never create a database: a wrong --store should say so, not show an empty store.
    return Store(path, create=False)


# -- runs ---------------------------------------------------------------------------------------------------
@runs_app.command("list")
def runs_list(store: StoreOpt = DEFAULT_STORE, fmt: ListFormatOpt = "text") -> int:
    """List the stored runs, newest first."""
    with _open(store) as db:
        runs = db.list_runs()
    empty = f"no runs stored in {db.location} yet; `seqjudge run` stores one"  # (a URL without its password)
    writer("runs", fmt)(runs, sys.stdout, empty=empty)
    return 0


@runs_app.command("show")
def runs_show(
    run: RunArg,
    trace: Annotated[str | None, typer.Option("--trace", help="Show one trace's rules instead.")] = None,
    store: StoreOpt = DEFAULT_STORE,
    audit: Annotated[
        bool,
        typer.Option(
            "--audit",
            help="The live false-pass rate its resolved audits measure, with an interval, against α.",
        ),
    ] = False,
    pool: Annotated[
        list[str] | None,
        typer.Option("--with", help="With --audit: pool this run's audits too (repeat for more)."),
    ] = None,
    alpha: Annotated[
        float | None,
        typer.Option(
            "--alpha",
            min=0.0,
            max=1.0,
            help="With --audit: the α to compare with (default: the certificate's).",
        ),
    ] = None,
    delta: Annotated[
        float | None,
        typer.Option(
            "--delta",
            min=0.0001,
            max=0.5,
            help="With --audit or --rates: the interval misses with this chance (default: the certificate's, "
            "or 0.05).",
        ),
    ] = None,
    rates: Annotated[
        bool,
        typer.Option(
            "--rates",
            help="Each rule's violation rate: judge rules' by PPI++ from the judge's calls and the human "
            "labels, with intervals (needs seqjudge[rates]).",
        ),
    ] = False,
    per_rule: Annotated[
        bool,
        typer.Option(
            "--per-rule",
            help="With --rates: each judge rule's interval on its own (default: all hold together).",
        ),
    ] = False,
    fmt: Annotated[str, format_option("audit", help="With --audit or --rates: text or json.")] = "text",
    guard: Annotated[
        bool,
        typer.Option(
            "--guard",
            help="Every runtime guard decision recorded for the run's traces (trace id = session id).",
        ),
    ] = False,
) -> int:
    """A run's summary: counts, judge-engine agreement, fingerprints, and the runtime guard's decisions
    beside the offline verdicts of its guarded sessions; with --trace, one trace's rules; with --audit, the
    false-pass rate its audits measure (exit 1 when it drifted above α); with --rates, how often each rule
    was broken, with intervals; with --guard, every guard decision of the run's sessions."""
    from seqjudge.guard.shadow import compare_run, decision_lines, shadow_lines
    from seqjudge.outputs.listings import result_lines, run_lines

    with _open(store) as db:
        run_id = db.resolve_run(run)
        info = db.run_info(run_id)
        if guard:
            clash = [n for n, given in (("--audit", audit), ("--rates", rates), ("--trace", trace)) if given]
            if clash:
                raise InputError(
                    f"--guard does not take {', '.join(clash)}",
                    where="--guard",
                    hint="--guard lists the guard's decisions of one run; ask for the other views separately",
                )
            say(f"Run {run_id} · guard decisions")
            say("\n".join(decision_lines(db.run_guard_decisions(run_id))))
            return 0
        if rates:
            clash = [n for n, given in (("--audit", audit), ("--trace", trace), ("--with", pool)) if given]
            clash += ["--alpha"] if alpha is not None else []
            if clash:
                raise InputError(
                    f"--rates does not take {', '.join(clash)}",
                    where="--rates",
                    hint="--rates shows one run's rates (with --delta, --per-rule, --format); ask for the "
                    "other views separately",
                )
            from seqjudge.rates import rates_report

            report = rates_report(
                db, run_id, delta=0.05 if delta is None else delta, simultaneous=not per_rule
            )
            writer("rates", fmt)(report)
            return 0
        if audit:
            return show_audit(db, [run_id, *(db.resolve_run(r) for r in pool or [])], alpha, delta, fmt)
        if trace is not None:
            stored = db.result(run_id, trace)
            say(f"Run {run_id} · trace {trace}")
            say("\n".join(result_lines(stored.result)))
            return 0
        results = [s.result for s in db.results(run_id)]
        decisions = db.run_guard_decisions(run_id)
    lines = run_lines(info, results)
    if decisions:  # only where a guard ran in shadow (or recorded) for these sessions
        lines += shadow_lines(compare_run(decisions, results), len(results))
    say("\n".join(lines))
    return 0


def show_audit(db: "Store", run_ids: list[str], alpha: float | None, delta: float | None, fmt: str) -> int:
    from seqjudge.audit import run_audit

    report = run_audit(db, run_ids, alpha=alpha, delta=delta)
    writer("audit", fmt)(report)
    drifted = [f for f in (report.overall, *report.by_rule) if f.drift == "above_alpha"]
    return 1 if drifted else 0


@runs_app.command("plan-labels")
def runs_plan_labels(
    run: RunArg,
    rule: Annotated[str, typer.Option("--rule", help="The judge rule whose rate is to be measured.")],
    width: Annotated[
        float,
        typer.Option("--width", min=0.0001, max=1.0, help="The interval's width wanted (0.04: ±2 points)."),
    ],
    delta: Annotated[
        float, typer.Option("--delta", min=0.0001, max=0.5, help="The interval misses with this chance.")
    ] = 0.05,
    store: StoreOpt = DEFAULT_STORE,
    fmt: Annotated[str, format_option("plan-labels")] = "text",
) -> int:
    """How many human labels give a judge rule's violation rate (`runs show --rates`) an interval that
    narrow, drawn uniformly or actively (`run --audit-draw active`), from the run's own judge confidences."""
    from seqjudge.rates import plan_labels

    with _open(store) as db:
        plan = plan_labels(db, db.resolve_run(run), rule, width=width, delta=delta)
    writer("plan-labels", fmt)(plan)
    return 0


@runs_app.command("export")
def runs_export(
    run: RunArg,
    fmt: Annotated[
        str,
        format_option(
            "export",
            help="jsonl (everything, to rebuild reports) or csv (one row per trace; a cell starting with =, "
            "+, -, @, tab or CR gets a leading ' so a spreadsheet shows it as text, not a formula).",
        ),
    ] = "jsonl",
    output: OutputOpt = None,
    store: StoreOpt = DEFAULT_STORE,
) -> int:
    """Export a run's results: JSONL holds every trace, result and the run itself; CSV a row per trace."""
    with _open(store) as db:
        run_id = db.resolve_run(run)
        with open_output(output, inputs=[store]) as out:
            count = writer("export", fmt)(db, run_id, out)
    if output is not None and str(output) != "-":
        say(f"exported {count} trace(s) of run {run_id} to {output}", err=True)
    return 0


# -- review -------------------------------------------------------------------------------------------------
ReasonOpt = Annotated[
    str | None,
    typer.Option("--reason", help="Only items routed for this reason: " + ", ".join(REVIEW_REASONS)),
]


def _check_reason(reason: str | None) -> None:
    if reason is not None and reason not in REVIEW_REASONS:
        raise InputError(
            f"unknown review reason {reason!r}",
            where="--reason",
            hint="use one of " + ", ".join(REVIEW_REASONS),
        )


def _latest(db: "Store") -> str | None:
    """The newest run's id; None when the store holds no run (an empty queue, not an error, to list)."""
    try:
        return db.resolve_run("latest")
    except InputError:
        return None


@review_app.command("list")
def review_list(
    run: Annotated[
        str | None, typer.Option("--run", help="Only this run: an id, a unique prefix or latest (default).")
    ] = None,
    every_run: Annotated[bool, typer.Option("--all", help="The items of every stored run.")] = False,
    reason: ReasonOpt = None,
    status: Annotated[Status, typer.Option("--status", help="open, resolved or all.")] = Status.open,
    store: StoreOpt = DEFAULT_STORE,
    fmt: ListFormatOpt = "text",
) -> int:
    """List review items (open ones by default) of the latest run, or of --run RUN, or of --all runs,
    oldest first."""
    _check_reason(reason)
    if every_run and run is not None:
        raise InputError(
            "--all and --run both choose the runs",
            where="--all",
            hint="give one of them (or neither: latest)",
        )
    with _open(store) as db:
        run_id = None if every_run else (db.resolve_run(run) if run is not None else _latest(db))
        none_stored = not every_run and run_id is None
        items = [] if none_stored else db.review_items(run=run_id, reason=reason, status=status.value)
    which = "" if status is Status.all else f"{status.value} "
    why = f" routed for {reason}" if reason else ""
    scope = "any run" if every_run else f"run {run_id}"
    empty = (
        f"no runs stored in {db.location} yet" if none_stored else f"no {which}review items{why} in {scope}"
    )
    writer("review", fmt)(items, sys.stdout, empty=empty)
    if run is None and not every_run and run_id is not None:
        # On stderr, so that --format json stays one JSON document.
        say(f"(the latest run, {run_id}; --run RUN for another, --all for every run)", err=True)
    return 0


@review_app.command("show")
def review_show(
    item: Annotated[int, typer.Argument(help="The review item number (from `seqjudge review list`).")],
    full: Annotated[bool, typer.Option("--full", help="Show long messages whole instead of cut.")] = False,
    store: StoreOpt = DEFAULT_STORE,
) -> int:
    """Everything needed to decide one item: the conversation (its messages between the calls, each call
    with every rule's engine and judge outcome), the reasons, the disagreement, the judge's explanation and
    its raw replies."""
    from seqjudge.outputs.listings import review_lines

    with _open(store) as db:
        detail = db.review_item(item)
    say("\n".join(review_lines(detail, full=full)))
    return 0


@review_app.command("resolve")
def review_resolve(
    items: Annotated[
        list[int] | None,
        typer.Argument(help="Review item numbers (one or more); or --all-open.", show_default=False),
    ] = None,
    verdict: Annotated[
        HumanVerdict | None, typer.Option("--verdict", help="The traces' verdict: pass or fail (required).")
    ] = None,
    all_open: Annotated[
        bool,
        typer.Option("--all-open", help="Every open item of the run (--run, default the latest)."),
    ] = False,
    run: Annotated[
        str | None, typer.Option("--run", help="With --all-open: this run (id, prefix or latest).")
    ] = None,
    reason: Annotated[
        str | None,
        typer.Option("--reason", help="With --all-open: only the items routed for this reason."),
    ] = None,
    rule: Annotated[
        list[str] | None, typer.Option("--rule", help="RULE=pass|fail for one rule; repeat for more.")
    ] = None,
    note: Annotated[str, typer.Option("--note", help="Why; kept with the label.")] = "",
    reviewer: Annotated[
        str | None,
        typer.Option("--reviewer", envvar="SEQJUDGE_REVIEWER", help="Who decided (default: the login name)."),
    ] = None,
    adjudicate: Annotated[
        bool,
        typer.Option(
            "--adjudicate",
            help="Decide a disputed item (its independent reviews disagree); --reviewer must be a registered "
            "admin (`seqjudge reviewers add NAME --admin`).",
        ),
    ] = False,
    store: StoreOpt = DEFAULT_STORE,
) -> int:
    """Record a person's decision on one or more items; resolved items become golden-dataset labels.

    `resolve 3 --verdict fail` decides item 3; `resolve 3 4 7 --verdict pass` decides three items alike;
    `resolve --all-open --run RUN --verdict pass --note TEXT` decides every open item of a run (with
    --reason, those routed for one reason). The items are checked first and written together: a bad item
    or rule changes nothing.

    An item of a run with `review: {reviews_per_item: N}` (N > 1) needs N independent reviews: this
    records one, by --reviewer, and the item resolves when they are all in and agree; when they disagree
    it is disputed, and `--adjudicate` by a registered admin decides it. A resolved item needing one review
    is resolved again (a correction); one that needed several is not (refused)."""
    if verdict is None:
        raise InputError("no verdict given", where="--verdict", hint="add --verdict pass or --verdict fail")
    if all_open and items:
        raise InputError(
            "item numbers and --all-open both choose the items",
            where="--all-open",
            hint="give the numbers, or --all-open (with --run and --reason to narrow it)",
        )
    if not all_open and not items:
        raise InputError(
            "no review item given",
            where="ITEMS",
            hint="give item numbers (`seqjudge review resolve 3 4 --verdict pass`) or every open item of a "
            "run (`seqjudge review resolve --all-open --run latest --verdict pass`)",
        )
    if not all_open and (run is not None or reason is not None):
        raise InputError(
            "--run and --reason choose items only with --all-open",
            where="--run" if run is not None else "--reason",
            hint="add --all-open, or drop them and give item numbers",
        )
    _check_reason(reason)
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
        if all_open:
            run_id = db.resolve_run(run or "latest")
            ids = [i.id for i in db.review_items(run=run_id, reason=reason, status="open")]
            if not ids:
                why = f" routed for {reason}" if reason else ""
                say(f"no open review items{why} in run {run_id}: nothing resolved", err=True)
                return 0
        else:
            ids = list(dict.fromkeys(items or []))  # a number given twice is one item
        before = [db.review_item(i) for i in ids]
        db.resolve_reviews(
            ids, verdict=verdict.value, rules=rules, note=note, reviewer=who, adjudicate=adjudicate
        )
        states = [db.item_state(i, who) for i in ids]
    waiting = 0
    for old, state in zip(before, states, strict=True):
        if state.state == "resolved":
            again = (
                f" (replacing {old.resolution.verdict} by {old.resolution.reviewer})"
                if old.resolution
                else ""
            )
            how = "adjudicated" if adjudicate else "resolved"
            say(f"{how} review item {old.id} (trace {old.trace_id}): {verdict.value} by {who}{again}")
        else:
            waiting += 1
            say(_recorded(old, state, verdict.value, who))
        _contradictions(old, rules, several=len(ids) > 1)
    if waiting:
        say(f"recorded {waiting} review(s) of items that need more than one; they are not resolved yet")
        ids = [state.item_id for state in states if state.state == "resolved"]
    if len(ids) > 1:
        overridden = [str(d.id) for d in before if d.verdict == "fail" and verdict.value == "pass"]
        if overridden:
            say(
                f"note: the engine failed the traces of items {', '.join(overridden)}; they are now labelled "
                "pass",
                err=True,
            )
        say(f"resolved {len(ids)} review item(s): {verdict.value} by {who}")
    return 0


def _recorded(item: "ReviewDetail", state: "ItemState", verdict: str, who: str) -> str:
    """What a review of an item that needs several independent reviews did (store.team)."""
    said = f"recorded {who}'s review of item {item.id} (trace {item.trace_id}): {verdict}; "
    if state.state == "disputed":
        return (
            said + "the reviews disagree: the item is disputed until an admin adjudicates it "
            f"(`seqjudge review resolve {item.id} --adjudicate --verdict pass|fail --reviewer ADMIN`)"
        )
    return said + (
        f"{state.reviews_in} of {state.required_reviews} independent reviews in; it resolves when they are "
        "all in and agree"
    )


def _contradictions(item: "ReviewDetail", rules: dict[str, str], *, several: bool) -> None:
    """A per-rule label against the engine's own outcome is kept, and said (calibration reports it)."""
    engine = {d.rule_id: d.engine for d in item.result.rules if d.type != "judge"}
    which = f"item {item.id}: " if several else ""
    for rule_id, outcome in rules.items():
        said = engine.get(rule_id)
        if said in ("passed", "failed") and said[:4] != outcome:
            say(
                f"note: {which}{rule_id}: you said {outcome}, the engine said {said}; calibration will "
                "report this contradiction",
                err=True,
            )


def _login() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return os.environ.get("USER") or "unknown"


@review_app.command("export")
def review_export(
    labels: Annotated[
        Path | None,
        typer.Option("--labels", help="Write the resolved items' labels here (JSONL, - for stdout)."),
    ] = None,
    into: Annotated[
        Path | None,
        typer.Option(
            "--into",
            help="Merge the labels into this golden dataset's labels.jsonl (a trace's label is replaced).",
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Let --labels replace a file whose labels the export would drop.")
    ] = False,
    run: Annotated[str | None, typer.Option("--run", help="Only items of this run.")] = None,
    store: StoreOpt = DEFAULT_STORE,
) -> int:
    """Write resolved items as golden-dataset labels ({trace_id, verdict, rules, labeler, note} per line)."""
    from seqjudge.store.review import dropped_labels, merge_labels, write_labels

    if (labels is None) == (into is None):
        raise InputError(
            "give exactly one of --labels FILE and --into DATASET",
            where="review export",
            hint="--into DATASET merges the labels into a golden dataset's labels.jsonl; "
            "--labels FILE writes only the reviewed traces' labels",
        )
    if into is not None and force:
        # --into never replaces the file's other labels, so a --force there would promise what it cannot do.
        raise InputError(
            "--force has no meaning with --into: the merge keeps every other label of the dataset",
            where="review export",
            hint="drop --force (--labels FILE --force replaces a file with only the reviewed labels)",
        )
    with _open(store) as db:
        found = db.review_labels(run=run)  # before the output is opened: a conflict leaves it as it was
    out: IO[str]
    if into is not None:
        merge = merge_labels(into, found)
        with open_output(merge.path, inputs=[store], option="--into") as out:
            out.write(merge.text)
        replaced = f" ({', '.join(merge.replaced)})" if merge.replaced else ""
        say(
            f"merged {len(found)} label(s) into {merge.path}: "
            f"{len(merge.replaced)} replaced{replaced}, {len(merge.added)} added",
            err=True,
        )
        return 0
    assert labels is not None
    dropped = 0 if force or str(labels) == "-" else dropped_labels(labels, found)
    if dropped:
        raise InputError(
            f"it holds {dropped} label(s) that this export would replace ({len(found)} exported); "
            "nothing was written",
            source=str(labels),
            where="review export --labels",
            hint="merge the labels into a golden dataset with --into DATASET (its other labels are kept), "
            "write them to a new file, or add --force to replace the file",
        )
    with open_output(labels, inputs=[store], option="--labels") as out:
        count = write_labels(out, found)
    where = "stdout" if str(labels) == "-" else str(labels)
    say(f"wrote {count} label(s) to {where}", err=True)
    return 0
