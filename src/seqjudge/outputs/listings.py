"""The store read back as text: the runs and review items as tables (or JSON), one run's summary, one trace's
rules, and a review item with everything needed to decide it (`seqjudge runs ...`, `seqjudge review ...`)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import IO, Any

from pydantic import BaseModel

from seqjudge.crosscheck import RuleDecision, TraceResult, agreement
from seqjudge.outputs.textview import MARK, trace_lines
from seqjudge.safetext import terminal
from seqjudge.store import ReviewDetail, ReviewItem, RunInfo, Store, judge_data
from seqjudge.trace import timeline


def models_json(items: Sequence[BaseModel], out: IO[str], **_: Any) -> None:
    """A list of stored records as one JSON array (the ``--format json`` of every listing)."""
    out.write(json.dumps([i.model_dump(mode="json") for i in items], ensure_ascii=False, indent=2) + "\n")


def export_jsonl(db: Store, run_id: str, out: IO[str]) -> int:
    """A run as JSONL, enough to rebuild every report (the store's own interchange format, which
    ``store.read_export`` reads back, so the store writes it)."""
    return db.export(run_id, "jsonl", out)


def export_csv(db: Store, run_id: str, out: IO[str]) -> int:
    """A run as CSV, one row per trace (written by the store, from its queryable columns)."""
    return db.export(run_id, "csv", out)


def baselines_text(rows: Sequence[tuple[str, RunInfo]], out: IO[str]) -> None:
    """The named baselines with their runs."""
    if not rows:
        out.write("no baselines yet; `seqjudge baseline save RUN --name NAME` makes one\n")
        return
    width = max([len(name) for name, _ in rows] + [8])
    out.write(f"{'BASELINE':<{width}}  RUN                   TRACES  PASS  FAIL  REVIEW  LABEL\n")
    for name, info in rows:
        c = info.counts
        out.write(
            f"{name:<{width}}  {info.id:<20}  {c['traces']:>6}  {c['pass']:>4}  {c['fail']:>4}  "
            f"{c['review']:>6}  {info.label or ''}".rstrip()
            + "\n"
        )


def baselines_json(rows: Sequence[tuple[str, RunInfo]], out: IO[str]) -> None:
    data = [
        {"name": name, "run_id": info.id, "label": info.label, "counts": info.counts} for name, info in rows
    ]
    out.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")


def runs_text(runs: Sequence[RunInfo], out: IO[str], *, empty: str) -> None:
    """The runs, a line each, newest first; ``empty`` when there is none."""
    if not runs:
        out.write(empty + "\n")
        return
    width = max(len(r.id) for r in runs)
    out.write(f"{'RUN':<{width}}  {'STARTED (UTC)':<19}  {'STATUS':<13}  TRACES  PASS  FAIL  REVIEW  LABEL\n")
    for r in runs:
        c = r.counts
        out.write(
            f"{r.id:<{width}}  {_when(r.started_at):<19}  {r.status:<13}  {c['traces']:>6}  {c['pass']:>4}  "
            f"{c['fail']:>4}  {c['review']:>6}  {r.label or ''}".rstrip()
            + "\n"
        )


def review_text(items: Sequence[ReviewItem], out: IO[str], *, empty: str) -> None:
    """The review items, a line each; ``empty`` when there is none."""
    if not items:
        out.write(empty + "\n")
        return
    out.write("\n".join(_items_table(items)) + "\n")
    out.write(f"{len(items)} item(s); `seqjudge review show ITEM` shows one\n")


RAW_REPLY_CHARS = 300  # raw judge replies are shortened to this in `review show`


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


def run_lines(info: RunInfo, results: list[TraceResult]) -> list[str]:
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
    for n, row in enumerate((info.totals or {}).get("stages") or []):  # an escalation cascade
        cost = "no price" if row["cost_usd"] is None else f"${row['cost_usd']:.4f}"
        lines.append(
            f"  escalation {n + 1}. {row['model']}: {row['traces']} trace(s), settled {row['settled']}, "
            f"passed on {row['passed_on']}, {cost}"
        )
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
    """The judge's outcome (with its confidence, and ``review``/``advisory`` when it did not gate), or
    ``missing`` when it was not asked or did not score."""
    if not d.judge:
        return missing
    extra = ([f"{d.confidence:.2f}"] if d.confidence is not None else []) + ([d.route] if d.route else [])
    return d.judge + (f" ({', '.join(extra)})" if extra else "")


def _agree_mark(d: RuleDecision) -> str:
    return {True: "agree", False: "DISAGREE", None: ""}[d.agree]


def result_lines(result: TraceResult) -> list[str]:
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
    j = max([len(_judge_said(d)) for d in rules] + [7])
    lines = [f"  {'rule':<{w}}  {'type':<{t}}  {'severity':<8}  {'engine':<14}  {'judge':<{j}}  final"]
    for d in rules:
        lines.append(
            f"  {d.rule_id:<{w}}  {d.type:<{t}}  {d.severity:<8}  {d.engine:<14}  {_judge_said(d):<{j}}  "
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


def _items_table(items: Sequence[ReviewItem]) -> list[str]:
    iw = max([len(str(i.id)) for i in items] + [4])
    rw = max(len(i.run_id) for i in items)
    ids = [terminal(i.trace_id) for i in items]  # one line each, as the terminal shows them
    tw = max([len(t) for t in ids] + [5])
    lines = [f"{'ITEM':>{iw}}  {'RUN':<{rw}}  {'TRACE':<{tw}}  VERDICT  SCORE  STATUS    REASONS"]
    for i, trace_id in zip(items, ids, strict=True):
        lines.append(
            f"{i.id:>{iw}}  {i.run_id:<{rw}}  {trace_id:<{tw}}  {i.verdict:<7}  {i.score:5.2f}  "
            f"{i.status:<8}  {_reasons(i)}"
        )
    return lines


def _reasons(item: ReviewItem) -> str:
    """The reasons, an audit with the probability its trace had of being drawn."""
    p = item.inclusion_probability
    return ", ".join(f"{r} (p={p:g})" if r == "audit" and p is not None else r for r in item.reasons)


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


def annotated_trace(detail: ReviewDetail, *, full: bool = False) -> list[str]:
    """``textview.trace_lines`` with its violation marks replaced by each rule's outcomes at that call, and
    the conversation's messages between the calls where they were said (``trace.timeline``).

    With messages every call is shown: whether a call was confirmed, asked for or explained is in the words
    around it. Messages are cut to ``MESSAGE_CHARS`` unless ``full``."""
    trace = detail.trace
    notes = call_notes(detail.result.rules, detail.result.judge is not None)
    marks = range(len(trace.calls)) if trace.messages else notes.keys()
    calls: dict[int, str] = {}
    lines = []
    for line in trace_lines(trace, marks):
        match = _NUMBERED.match(line)
        if match:
            line = line.removesuffix(f"  {MARK}")
            said = notes.get(int(match.group(1)) - 1)
            if said:
                line += "  ← " + "; ".join(said)
            calls[int(match.group(1)) - 1] = line
        lines.append(line)
    if not trace.messages:
        return lines
    # Messages line up with the calls' text; a trace without calls keeps its "(no calls)" line first.
    first = _NUMBERED.match(calls[0]) if calls else None
    pad = " " * (first.end() if first else 5)
    shown = [
        calls[i] if kind == "call" else pad + _message_text(item, full) for kind, i, item in timeline(trace)
    ]
    return shown if calls else lines + shown


MESSAGE_CHARS = 400  # messages are cut to this in `review show` (--full shows them whole)


def _message_text(message: Any, full: bool) -> str:
    content = message.content
    if content is None:
        text = "(no text)"
    else:
        raw = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False, default=str)
        text = terminal(" ".join(raw.split()))  # the agent's words: no escape codes reach the terminal
        if not full and len(text) > MESSAGE_CHARS:
            text = text[: MESSAGE_CHARS - 1] + f"… ({len(text)} chars; --full shows it whole)"
    return f"[{terminal(str(message.role))}] {text}"


def review_lines(detail: ReviewDetail, *, full: bool = False) -> list[str]:
    result = detail.result
    head = (
        f"Review item {detail.id} · run {detail.run_id} · trace {terminal(detail.trace_id)} · {detail.status}"
    )
    said = f", {len(detail.trace.messages)} message(s) in between" if detail.trace.messages else ""
    lines = [head, f"  verdict {result.verdict}, score {result.score:.2f}", "", f"  Trace (calls{said}):"]
    lines += annotated_trace(detail, full=full)
    # Rules that name no call but matter (failed, undecided, disputed): listed under the trace, not lost.
    judged = result.judge is not None
    for d in result.rules:
        if d.call_indices or d.judge_call_indices:
            continue
        if d.final in ("failed", "deferred") or d.agree is False or d.judge == "failed":
            lines.append(f"     (at no call) {_outcomes(d, judged)}")
    lines += ["", "  Reasons: " + _reasons(detail), "", "  Rules:"]
    lines += ["  " + line for line in _rules_table(result.rules)]
    if detail.disagreements:
        lines += ["", "  Disagreement:"]
        for d in detail.disagreements:
            engine_at = _calls(d.call_indices)
            judge_at = _calls(d.judge_call_indices)
            lines.append(f"    {d.rule_id}: engine {d.engine}{engine_at}, judge {_judge_said(d)}{judge_at}")
            lines.append(f"      engine: {terminal(d.engine_explanation or '-')}")
            lines.append(
                f"      judge: {terminal(d.judge_explanation or '(reported no violation of this rule)')}"
            )
    lines += ["", "  Judge: " + _judge_status_text(result)]
    lines += [f"    {line}" for line in stage_lines(result)]
    j = judge_data(result.judge)
    report = (j or {}).get("report")
    if report:
        lines.append(
            f"    summary: {terminal(str(report.get('summary', '')))}"
        )  # the judge's words: one line
        for v in report.get("violations", []):
            at = "" if v.get("offending_call_index") is None else f" at call {v['offending_call_index'] + 1}"
            lines.append(f"    {v['rule_id']} {v['violation_type']}{at}: {terminal(str(v['explanation']))}")
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
            f"  Resolved {_when(r.resolved_at)} UTC by {terminal(r.reviewer)}: {r.verdict}"
            + (f" ({rules})" if rules else "")
            + (f"; note: {terminal(r.note)}" if r.note else ""),
        ]
    else:
        lines += [
            "",
            f"  Decide: seqjudge review resolve {detail.id} --verdict pass|fail "
            "[--rule RULE=pass|fail ...] [--note TEXT]",
        ]
    return lines


def stage_lines(result: TraceResult) -> list[str]:
    """An escalated trace: which judge answered which rule (its raw replies are listed in that order)."""
    lines = []
    for n, stage in enumerate(result.stages):
        onward = "review or advice" if n == len(result.stages) - 1 else "the next judge"
        lines.append(
            f"escalation {n + 1}. {stage.model} ({stage.status}): asked {', '.join(stage.asked) or '-'}; "
            f"settled {', '.join(stage.settled) or '-'}; "
            f"passed to {onward}: {', '.join(stage.unsettled) or '-'}"
        )
    return lines


def _calls(indices: list[int]) -> str:
    return f" (call {', '.join(str(i + 1) for i in indices)})" if indices else ""


def _shorten(text: str, limit: int = RAW_REPLY_CHARS) -> str:
    flat = terminal(" ".join(text.split()))
    return flat if len(flat) <= limit else flat[: limit - 1] + f"… ({len(text)} chars)"
