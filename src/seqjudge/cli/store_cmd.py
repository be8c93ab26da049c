"""`seqjudge runs ...` and `seqjudge review ...`: read the store back; let a person decide doubtful traces."""

from __future__ import annotations

import getpass
import json
import os
import re
import sys
from enum import StrEnum
from pathlib import Path
from typing import IO, Annotated, Any

import typer

from seqjudge.cli.app import app
from seqjudge.cli.options import StoreOpt
from seqjudge.crosscheck import REVIEW_REASONS, RuleDecision, TraceResult, agreement
from seqjudge.errors import InputError
from seqjudge.outputs.streams import open_output
from seqjudge.outputs.textview import MARK, trace_lines
from seqjudge.store import DEFAULT_STORE_PATH, ReviewDetail, ReviewItem, RunInfo, Store, judge_data

runs_app = typer.Typer(help="Stored runs: list them, show one, export one.", no_args_is_help=True)
review_app = typer.Typer(
    help="The human review queue: list, show, resolve, export labels.", no_args_is_help=True
)
app.add_typer(runs_app, name="runs")
app.add_typer(review_app, name="review")

RAW_REPLY_CHARS = 300  # raw judge replies are shortened to this in `review show`


class ListFormat(StrEnum):
    text = "text"
    json = "json"


class ExportFormat(StrEnum):
    jsonl = "jsonl"
    csv = "csv"


class Status(StrEnum):
    open = "open"
    resolved = "resolved"
    all = "all"


class HumanVerdict(StrEnum):
    passed = "pass"
    failed = "fail"


RunArg = Annotated[str, typer.Argument(help="A run id, a unique prefix of one, or `latest`.")]
ListFormatOpt = Annotated[ListFormat, typer.Option("--format", help="text or json.")]


def _open(path: Path) -> Store:
    # Reading commands never create a database: a wrong --store should say so, not show an empty store.
    return Store(path, create=False)


def _when(moment: Any) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S") if moment is not None else "-"


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def _agreement_text(figures: dict[str, Any]) -> str:
    if not figures["decisions"]:
        return "no cross-checked decision"
    kappa = "n/a" if figures["kappa"] is None else f"{figures['kappa']:.2f}"
    return (
        f"{figures['agreed']}/{figures['decisions']} agree "
        f"({_pct(figures['agreed'], figures['decisions'])}), kappa {kappa}"
    )


def _counts_text(info: RunInfo) -> str:
    c = info.counts
    return (
        f"{c['traces']} trace(s): {c['pass']} pass, {c['fail']} fail, {c['review']} review; "
        f"review queue: {c['review_open']} open, {c['review_resolved']} resolved"
    )


# -- runs ---------------------------------------------------------------------------------------------------
@runs_app.command("list")
def runs_list(store: StoreOpt = DEFAULT_STORE_PATH, fmt: ListFormatOpt = ListFormat.text) -> int:
    """List the stored runs, newest first."""
    with _open(store) as db:
        runs = db.list_runs()
    if fmt is ListFormat.json:
        print(json.dumps([r.model_dump(mode="json") for r in runs], ensure_ascii=False, indent=2))
        return 0
    if not runs:
        print(f"no runs stored in {store} yet; `seqjudge run` stores one")
        return 0
    width = max(len(r.id) for r in runs)
    print(f"{'RUN':<{width}}  {'STARTED (UTC)':<19}  {'STATUS':<13}  TRACES  PASS  FAIL  REVIEW  LABEL")
    for r in runs:
        c = r.counts
        print(
            f"{r.id:<{width}}  {_when(r.started_at):<19}  {r.status:<13}  {c['traces']:>6}  {c['pass']:>4}  "
            f"{c['fail']:>4}  {c['review']:>6}  {r.label or ''}".rstrip()
        )
    return 0


@runs_app.command("show")
def runs_show(
    run: RunArg,
    trace: Annotated[str | None, typer.Option("--trace", help="Show one trace's rules instead.")] = None,
    store: StoreOpt = DEFAULT_STORE_PATH,
) -> int:
    """A run's summary: counts, judge-engine agreement, fingerprints; with --trace, one trace's rules."""
    with _open(store) as db:
        run_id = db.resolve_run(run)
        info = db.run_info(run_id)
        if trace is not None:
            stored = db.result(run_id, trace)
            print(f"Run {run_id} · trace {trace}")
            print("\n".join(_result_lines(stored.result)))
            return 0
        results = [s.result for s in db.results(run_id)]
    print("\n".join(_run_lines(info, results)))
    return 0


def _run_lines(info: RunInfo, results: list[TraceResult]) -> list[str]:
    label = f" ({info.label})" if info.label else ""
    lines = [
        f"Run {info.id}{label} · {info.status}",
        f"  started {_when(info.started_at)} UTC, finished {_when(info.finished_at)}",
        f"  {_counts_text(info)}",
    ]
    # Scalar totals only: the nested ones (agreement, reasons) are shown below or by other commands.
    scalars = {k: v for k, v in (info.totals or {}).items() if isinstance(v, int | float) and k != "traces"}
    if scalars:
        lines.append("  totals: " + ", ".join(f"{k} {v}" for k, v in scalars.items()))
    figures = agreement(results)
    lines.append(f"  judge-engine agreement: {_agreement_text(figures['overall'])}")
    for title, key in (("by rule type", "by_type"), ("by rule", "by_rule")):
        if figures[key]:
            lines.append(f"    {title}:")
            width = max(len(k) for k in figures[key])
            lines.extend(f"      {k:<{width}}  {_agreement_text(v)}" for k, v in figures[key].items())
    skipped = sorted({r.judge_skipped for r in results if r.judge is None and r.judge_skipped})
    for why in skipped:
        lines.append(f"  judge skipped: {why}")
    if info.fingerprint:
        lines.append("  fingerprint: " + ", ".join(f"{k}={_short(v)}" for k, v in info.fingerprint.items()))
    seen: dict[str, int] = {}
    tokens = [0, 0]
    for r in results:
        j = judge_data(r.judge)
        if j is None:
            continue
        fp = j.get("fingerprint") or {}
        key = " ".join(
            f"{k}={fp[k]}"
            for k in ("provider", "model", "model_version", "system_fingerprint", "template_version")
            if fp.get(k)
        )
        seen[key] = seen.get(key, 0) + 1
        usage = j.get("usage") or {}
        tokens[0] += int(usage.get("input_tokens", 0))
        tokens[1] += int(usage.get("output_tokens", 0))
    for key, n in seen.items():
        lines.append(f"  judge fingerprint ({n} trace(s)): {key}")
    if seen:
        lines.append(f"  judge tokens: {tokens[0]} in, {tokens[1]} out")
    return lines


def _short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _judge_said(d: RuleDecision, missing: str = "-") -> str:
    """The judge's outcome, or ``missing`` when it was not asked or did not score."""
    return d.judge or missing


def _agree_mark(d: RuleDecision) -> str:
    return {True: "agree", False: "DISAGREE", None: ""}[d.agree]


def _result_lines(result: TraceResult) -> list[str]:
    reasons = ", ".join(result.review_reasons) or "none"
    lines = [f"  verdict {result.verdict}, score {result.score:.2f}; review reasons: {reasons}"]
    lines.append("  judge: " + _judge_status_text(result))
    lines.extend(_rules_table(result.rules))
    return lines


def _rules_table(rules: list[RuleDecision]) -> list[str]:
    if not rules:
        return ["  (no rules)"]
    w = max([len(d.rule_id) for d in rules] + [4])
    t = max([len(d.type) for d in rules] + [4])
    lines = [f"  {'rule':<{w}}  {'type':<{t}}  {'severity':<8}  {'engine':<14}  {'judge':<7}  final"]
    for d in rules:
        lines.append(
            f"  {d.rule_id:<{w}}  {d.type:<{t}}  {d.severity:<8}  {d.engine:<14}  {_judge_said(d):<7}  "
            f"{d.final:<14}  {_agree_mark(d)}".rstrip()
        )
    return lines


def _judge_status_text(result: TraceResult) -> str:
    j = judge_data(result.judge)
    if j is None:
        return f"skipped ({result.judge_skipped})" if result.judge_skipped else "not run"
    fp = j.get("fingerprint") or {}
    who = f"{fp.get('provider', '?')}:{fp.get('model', '?')}"
    n = len(j.get("attempts") or [])
    if j.get("status") == "scored":
        score = (j.get("report") or {}).get("sequence_correctness_score")
        return f"scored by {who} (score {score:.2f}, {n} attempt(s))"
    return f"UNSCORED by {who} after {n} attempt(s): {j.get('reason')}"


@runs_app.command("export")
def runs_export(
    run: RunArg,
    fmt: Annotated[
        ExportFormat,
        typer.Option("--format", help="jsonl (everything, to rebuild reports) or csv (one row per trace)."),
    ] = ExportFormat.jsonl,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")
    ] = None,
    store: StoreOpt = DEFAULT_STORE_PATH,
) -> int:
    """Export a run's results: JSONL holds every trace, result and the run itself; CSV a row per trace."""
    with _open(store) as db:
        run_id = db.resolve_run(run)
        with open_output(output) as out:
            count = db.export(run_id, fmt.value, out)
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
    fmt: ListFormatOpt = ListFormat.text,
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
    if fmt is ListFormat.json:
        print(json.dumps([i.model_dump(mode="json") for i in items], ensure_ascii=False, indent=2))
        return 0
    if not items:
        which = "" if status is Status.all else f"{status.value} "
        why = f" routed for {reason}" if reason else ""
        print(f"no {which}review items{why}")
        return 0
    print("\n".join(_items_table(items)))
    print(f"{len(items)} item(s); `seqjudge review show ITEM` shows one")
    return 0


def _items_table(items: list[ReviewItem]) -> list[str]:
    iw = max([len(str(i.id)) for i in items] + [4])
    rw = max(len(i.run_id) for i in items)
    tw = max([len(i.trace_id) for i in items] + [5])
    lines = [f"{'ITEM':>{iw}}  {'RUN':<{rw}}  {'TRACE':<{tw}}  VERDICT  SCORE  STATUS    REASONS"]
    for i in items:
        lines.append(
            f"{i.id:>{iw}}  {i.run_id:<{rw}}  {i.trace_id:<{tw}}  {i.verdict:<7}  {i.score:5.2f}  "
            f"{i.status:<8}  {', '.join(i.reasons)}"
        )
    return lines


@review_app.command("show")
def review_show(
    item: Annotated[int, typer.Argument(help="The review item number (from `seqjudge review list`).")],
    store: StoreOpt = DEFAULT_STORE_PATH,
) -> int:
    """Everything needed to decide one item: the trace with each rule's engine and judge outcome beside the
    calls it names, the reasons, the disagreement, the judge's explanation and its raw replies."""
    with _open(store) as db:
        detail = db.review_item(item)
    print("\n".join(review_lines(detail)))
    return 0


def _outcomes(d: RuleDecision, judged: bool) -> str:
    """``rule: engine X · judge Y``; without a judge in the run, only the engine's side."""
    text = f"{d.rule_id}: engine {d.engine}"
    if judged:
        text += f" · judge {_judge_said(d, 'none')}"
    return text + (" (DISAGREE)" if d.agree is False else "")


def call_notes(rules: list[RuleDecision], judged: bool = True) -> dict[int, list[str]]:
    """Per call index: each rule that names the call (engine or judge) with both outcomes."""
    notes: dict[int, list[str]] = {}
    for d in rules:
        for i in sorted(set(d.call_indices) | set(d.judge_call_indices)):
            notes.setdefault(i, []).append(_outcomes(d, judged))
    return notes


_NUMBERED = re.compile(r"^\s*(\d+)\. ")


def annotated_trace(detail: ReviewDetail) -> list[str]:
    """``textview.trace_lines`` with its violation marks replaced by each rule's outcomes at that call."""
    notes = call_notes(detail.result.rules, detail.result.judge is not None)
    lines = []
    for line in trace_lines(detail.trace, notes.keys()):
        match = _NUMBERED.match(line)
        if match:
            line = line.removesuffix(f"  {MARK}")
            said = notes.get(int(match.group(1)) - 1)
            if said:
                line += "  ← " + "; ".join(said)
        lines.append(line)
    return lines


def review_lines(detail: ReviewDetail) -> list[str]:
    result = detail.result
    head = f"Review item {detail.id} · run {detail.run_id} · trace {detail.trace_id} · {detail.status}"
    lines = [head, f"  verdict {result.verdict}, score {result.score:.2f}", "", "  Trace:"]
    lines += annotated_trace(detail)
    # Rules that name no call but matter (failed, undecided, disputed): listed under the trace, not lost.
    judged = result.judge is not None
    for d in result.rules:
        if d.call_indices or d.judge_call_indices:
            continue
        if d.final in ("failed", "deferred") or d.agree is False or d.judge == "failed":
            lines.append(f"     (at no call) {_outcomes(d, judged)}")
    lines += ["", "  Reasons: " + ", ".join(detail.reasons), "", "  Rules:"]
    lines += ["  " + line for line in _rules_table(result.rules)]
    if detail.disagreements:
        lines += ["", "  Disagreement:"]
        for d in detail.disagreements:
            engine_at = _calls(d.call_indices)
            judge_at = _calls(d.judge_call_indices)
            lines.append(f"    {d.rule_id}: engine {d.engine}{engine_at}, judge {_judge_said(d)}{judge_at}")
            lines.append(f"      engine: {d.engine_explanation or '-'}")
            lines.append(f"      judge: {d.judge_explanation or '(reported no violation of this rule)'}")
    lines += ["", "  Judge: " + _judge_status_text(result)]
    j = judge_data(result.judge)
    report = (j or {}).get("report")
    if report:
        lines.append(f"    summary: {report.get('summary', '')}")
        for v in report.get("violations", []):
            at = "" if v.get("offending_call_index") is None else f" at call {v['offending_call_index'] + 1}"
            lines.append(f"    {v['rule_id']} {v['violation_type']}{at}: {v['explanation']}")
    if detail.attempts:
        lines += ["", f"  Raw judge replies ({len(detail.attempts)}):"]
        for a in detail.attempts:
            usage = a.usage
            flags = " · cached" if a.cached else ""
            flags += " · re-ask" if a.reasked else ""
            lines.append(
                f"    #{a.n} {a.finish_reason} · {usage.get('input_tokens', 0)} in / "
                f"{usage.get('output_tokens', 0)} out · {a.latency_s:.2f}s{flags}"
            )
            if a.error:
                lines.append(f"      error ({a.error_stage}): {_shorten(a.error)}")
            lines.append(f"      {_shorten(a.raw_reply) or '(empty reply)'}")
    if detail.resolution is not None:
        r = detail.resolution
        rules = ", ".join(f"{k}={v}" for k, v in r.rules.items())
        lines += [
            "",
            f"  Resolved {_when(r.resolved_at)} UTC by {r.reviewer}: {r.verdict}"
            + (f" ({rules})" if rules else "")
            + (f"; note: {r.note}" if r.note else ""),
        ]
    else:
        lines += [
            "",
            f"  Decide: seqjudge review resolve {detail.id} --verdict pass|fail "
            "[--rule RULE=pass|fail ...] [--note TEXT]",
        ]
    return lines


def _calls(indices: list[int]) -> str:
    return f" (call {', '.join(str(i + 1) for i in indices)})" if indices else ""


def _shorten(text: str, limit: int = RAW_REPLY_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + f"… ({len(text)} chars)"


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
