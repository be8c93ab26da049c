"""What CI systems read: JUnit XML, GitHub workflow annotations and job summary, a pull-request comment.

Two subjects: one run (``seqjudge report-ci``) and a comparison (``seqjudge compare``). Both take the
traces as ``(Trace, TraceResult)`` pairs, since the actionable message (``textview.violation_block``) shows
the calls.

JUnit: one test case per trace and rule group (the ``tests:`` id of a shape-2 rule file, else ``rules``),
named ``classname=<trace id>``, ``name=<group>``. What a test case's state means:

- one run: ``failure`` when a critical rule of the group failed (what makes the verdict ``fail``), with
  the actionable blocks; ``skipped`` when the trace needs human review and the group holds the doubt (a
  failed warning rule, an undecided judge rule, a judge-engine disagreement, or an unscored judge, which
  touches every group); otherwise passed, failed warnings in ``system-out``.
- a comparison: ``failure`` only where the gate failed, so the JUnit report and the exit code agree: a
  rule of the group newly failed and it counts (an engine rule always; a judge rule when the paired judge
  test fired). Failures the baseline shares ("known failure"), rules the baseline lacks (a changed rule
  file) and traces it lacks are ``skipped`` with a message; judge flips within noise pass with a note.
  One more test case, ``seqjudge.compare`` / ``regression gate``, fails with every fired decision, so a
  regression that no single trace carries (``--max-drop``, missing traces) still shows.
"""

from __future__ import annotations

import io
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from seqjudge.errors import InputError
from seqjudge.outputs.streams import write_bytes
from seqjudge.outputs.textview import Calls, trace_lines, violation_block
from seqjudge.report import Violation
from seqjudge.safetext import md_code, md_fence, md_text, terminal
from seqjudge.trace import PlainTrace, Trace

if TYPE_CHECKING:  # (the comparison, the store and the reconciliation's models are for `report-ci`, not
    # for `check`'s formats, which make their cases from the report data)
    from seqjudge.compare import Comparison, Decision
    from seqjudge.crosscheck import RuleDecision, TraceResult

Pair = tuple[Trace, "TraceResult"]
DEFAULT_GROUP = "rules"
MAX_ANNOTATIONS = 10  # GitHub shows at most 10 error (and 10 warning) annotations per step
MAX_ROWS = 25  # rows of a markdown table before "and N more"
MARKER_RUN = "<!-- seqjudge:report-ci -->"  # lets a workflow find and update its own comment
MARKER_COMPARE = "<!-- seqjudge:compare -->"

# Characters XML 1.0 cannot hold (control characters that a tool output may carry).
_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")  # lone surrogates too


# -- actionable messages ------------------------------------------------------------------------------------
def group_of(result: TraceResult) -> dict[str, str]:
    """Rule id -> its group (the rule file's ``tests:`` id), ``rules`` when it has none."""
    return {r.rule_id: r.group or DEFAULT_GROUP for r in result.engine.rules}


def groups(result: TraceResult) -> dict[str, list[RuleDecision]]:
    """The trace's rule decisions by group, groups in the rule file's order."""
    where = group_of(result)
    out: dict[str, list[RuleDecision]] = {}
    for d in result.rules:
        out.setdefault(where.get(d.rule_id, DEFAULT_GROUP), []).append(d)
    return out


def _judge_violations(result: TraceResult, rule_id: str) -> list[Violation]:
    from seqjudge.store import judge_data  # here: `check --format junit` (no judge) does not load the store

    report = (judge_data(result.judge) or {}).get("report") or {}
    found = []
    for raw in report.get("violations") or []:
        if raw.get("rule_id") != rule_id:
            continue
        try:
            found.append(Violation.model_validate({**raw, "suggestion": raw.get("suggestion", "")}))
        except ValueError:
            continue  # a judge reply is validated when stored; an odd old one is shown by the fallback
    return found


def rule_blocks(trace: Trace | PlainTrace | Calls, result: TraceResult, rule_id: str) -> list[str]:
    """The actionable block(s) of one failed rule: the engine's violations, or for a rule the judge decided,
    the judge's (the engine cannot locate those). A rule failed without a located violation still gets a
    block, so no failure is reported without its trace."""
    decision = next((d for d in result.rules if d.rule_id == rule_id), None)
    if decision is not None and decision.type == "judge":
        violations = _judge_violations(result, rule_id)
    else:
        violations = [v for v in result.engine.violations if v.rule_id == rule_id]
    blocks = [violation_block(trace, result.engine, v) for v in violations]
    if not blocks and decision is not None and decision.final == "failed":
        why = decision.judge_explanation or decision.engine_explanation
        indices = decision.judge_call_indices or decision.call_indices
        blocks.append(unlocated_block(trace, result.trace_id, rule_id, decision.type, indices, why))
    return blocks


def unlocated_block(
    trace: Trace | PlainTrace | Calls,
    trace_id: str,
    rule_id: str,
    kind: str,
    indices: Sequence[int],
    why: str,
) -> str:
    """The block of a rule failed without a located violation: its calls and why."""
    lines = [f"❌ FAIL: {terminal(trace_id)} · {terminal(rule_id)}", "", f"   Rule: {kind}", "", "   Trace:"]
    lines += trace_lines(trace, indices)
    lines += ["", f"   Why: {terminal(why) if why else '(no explanation given)'}"]
    return "\n".join(lines)


def failed_blocks(
    trace: Trace | PlainTrace | Calls, result: TraceResult, rule_ids: Sequence[str] | None = None
) -> list[str]:
    ids = [d.rule_id for d in result.rules if d.final == "failed"] if rule_ids is None else rule_ids
    calls = trace if isinstance(trace, Calls) else Calls(trace)  # each call's text made once for all blocks
    return [block for rule_id in ids for block in rule_blocks(calls, result, rule_id)]


# -- JUnit ---------------------------------------------------------------------------------------------------
def xml_text(text: str) -> str:
    """``text`` with the characters XML 1.0 cannot hold replaced."""
    return _XML_BAD.sub("\ufffd", text)


_xml = xml_text


def _case(suite: ET.Element, classname: str, name: str) -> ET.Element:
    return ET.SubElement(suite, "testcase", {"classname": _xml(classname), "name": _xml(name), "time": "0"})


def _child(case: ET.Element, tag: str, message: str, text: str = "", kind: str | None = None) -> None:
    attrs = {"message": _xml(message)}
    if kind:
        attrs["type"] = kind
    element = ET.SubElement(case, tag, attrs)
    if text:
        element.text = _xml(text)


def _system_out(case: ET.Element, text: str) -> None:
    if text:
        ET.SubElement(case, "system-out").text = _xml(text)


def _finish_suite(suite: ET.Element) -> ET.ElementTree:
    cases = suite.findall("testcase")
    counts = {
        "tests": len(cases),
        "failures": sum(1 for c in cases if c.find("failure") is not None),
        "errors": 0,
        "skipped": sum(1 for c in cases if c.find("skipped") is not None),
    }
    for key, value in counts.items():
        suite.set(key, str(value))
    root = ET.Element("testsuites", {"name": "seqjudge", **{k: str(v) for k, v in counts.items()}})
    root.append(suite)
    ET.indent(root)
    return ET.ElementTree(root)


def junit_run(pairs: Sequence[Pair], *, name: str = "seqjudge") -> ET.ElementTree:
    """One run as JUnit: a test case per trace and rule group (see the module docstring)."""
    suite = ET.Element("testsuite", {"name": _xml(name)})
    for trace, result in pairs:
        suite.extend(run_cases(trace, result))
    return _finish_suite(suite)


def run_cases(trace: Trace | PlainTrace, result: TraceResult) -> list[ET.Element]:
    """One trace's test cases of a run, a case per rule group (``case_plans``)."""
    grouped = {
        group: [(d.rule_id, d.final, d.severity, d.agree) for d in decisions]
        for group, decisions in groups(result).items()
    }
    cases = []
    for plan in case_plans(grouped, result.verdict, result.review_reasons):
        case = ET.Element(
            "testcase", {"classname": _xml(result.trace_id), "name": _xml(plan.group), "time": "0"}
        )
        cases.append(case)
        if plan.state == "failure":
            text = "\n\n".join(failed_blocks(trace, result, plan.blocks))
            _child(case, "failure", plan.message, text, "critical")
            continue
        if plan.state == "skipped":
            _child(case, "skipped", plan.message)
        if plan.blocks:
            _system_out(case, "\n\n".join(failed_blocks(trace, result, plan.blocks)))
    return cases


# A rule's decision as a run's test case reads it: (rule id, final outcome, severity, judge-engine agreement).
Decided = tuple[str, str, str, bool | None]


@dataclass(frozen=True, slots=True)
class CasePlan:
    """What one test case of a run holds: ``failure`` (the blocks of ``blocks`` as its text), ``skipped``
    (then ``blocks`` in ``system-out``) or passed (None; ``blocks`` in ``system-out``)."""

    group: str
    state: Literal["failure", "skipped"] | None
    message: str
    blocks: list[str]  # rule ids whose FAIL blocks the case shows


def case_plans(
    grouped: Mapping[str, Sequence[Decided]], verdict: str, reasons: Sequence[str]
) -> list[CasePlan]:
    """A trace's test cases of a run, one per rule group (see the module docstring): what ``run_cases``
    builds as elements and ``seqjudge check --format junit`` writes as text."""
    plans = []
    unscored = "unscored" in reasons
    for group, decisions in grouped.items():
        critical = [r for r, final, severity, _ in decisions if final == "failed" and severity == "critical"]
        warnings = [r for r, final, severity, _ in decisions if final == "failed" and severity == "warning"]
        if critical:
            message = f"{len(critical)} critical rule(s) failed: {', '.join(critical)}"
            plans.append(CasePlan(group, "failure", message, critical + warnings))
            continue
        # In doubt: a failed warning rule, an undecided judge rule, a judge-engine disagreement.
        doubts = [
            r
            for r, final, severity, agree in decisions
            if (final == "failed" and severity == "warning") or final == "deferred" or agree is False
        ]
        if verdict == "review" and (unscored or doubts):
            message = f"needs human review ({', '.join(reasons)})"
            if doubts:
                message += f": {', '.join(doubts)}"
            plans.append(CasePlan(group, "skipped", message, warnings))
        else:
            plans.append(CasePlan(group, None, "", warnings))
    return plans


def junit_compare(
    comparison: Comparison, candidate: Sequence[Pair], *, name: str | None = None
) -> ET.ElementTree:
    """A comparison as JUnit: failures are exactly what the gate counts (see the module docstring)."""
    title = name or f"seqjudge compare {comparison.baseline.name} -> {comparison.candidate.name}"
    suite = ET.Element("testsuite", {"name": _xml(title)})
    judge_counts = comparison.decision("judge_paired").fired
    changes = {c.trace_id: c for c in comparison.changes}
    new_traces = set(comparison.only_in_candidate)
    judge_rules = {r.rule_id for r in comparison.rules if r.decided_by == "judge"}
    uncompared = set(comparison.rules_only_in_candidate)  # a changed rule file: no baseline to compare with
    for trace, result in candidate:
        change = changes.get(result.trace_id)
        new = set(change.new_violations) if change else set()
        for group, decisions in groups(result).items():
            case = _case(suite, result.trace_id, group)
            failed = [d.rule_id for d in decisions if d.final == "failed"]
            if result.trace_id in new_traces:
                if failed:
                    _child(case, "skipped", f"not in the baseline; fails {', '.join(failed)}")
                continue
            counted = [r for r in failed if r in new and (r not in judge_rules or judge_counts)]
            noise = [r for r in failed if r in new and r in judge_rules and not judge_counts]
            fresh = [r for r in failed if r in uncompared]
            known = [r for r in failed if r not in new and r not in uncompared]
            if counted:
                _child(
                    case,
                    "failure",
                    f"regression against {comparison.baseline.name}: {', '.join(counted)} newly failed",
                    "\n\n".join(failed_blocks(trace, result, counted)),
                    "regression",
                )
                continue
            critical_known = [r for r in known if _severity(decisions, r) == "critical"]
            skips = []
            if critical_known:
                skips.append(f"known failure, also failing in the baseline: {', '.join(critical_known)}")
            if fresh:
                skips.append(f"rule(s) not in the baseline, not compared: {', '.join(fresh)}")
            if skips:
                _child(case, "skipped", "; ".join(skips))
            notes = []
            if noise:
                notes.append(
                    f"judge rule(s) {', '.join(noise)} newly failed here, within judge noise over the run "
                    "(see the regression gate)"
                )
            if known or fresh:
                notes.append("\n\n".join(failed_blocks(trace, result, known + fresh)))
            _system_out(case, "\n\n".join(notes))
    missing_fired = comparison.decision("missing").fired
    for trace_id in comparison.only_in_baseline:
        case = _case(suite, trace_id, "trace")
        message = f"missing from the candidate {comparison.candidate.name}"
        if missing_fired:
            _child(case, "failure", message, kind="missing")
        else:
            _child(case, "skipped", message)
    gate = _case(suite, "seqjudge.compare", "regression gate")
    summary = "\n".join(f"{'FIRED' if d.fired else 'ok'} {d.rule}: {d.reason}" for d in comparison.decisions)
    if comparison.regression:
        _child(
            gate,
            "failure",
            "regression: " + ", ".join(d.rule for d in comparison.fired),
            summary,
            "regression",
        )
    else:
        _system_out(gate, summary)
    return _finish_suite(suite)


def _severity(decisions: list[RuleDecision], rule_id: str) -> str:
    return next((d.severity for d in decisions if d.rule_id == rule_id), "critical")


def write_junit(tree: ET.ElementTree, path: Path, *, inputs: Iterable[Path | str | None] = ()) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(
            f"cannot write the JUnit file ({exc.strerror})", source=str(path), hint="choose a writable path"
        ) from None
    data = io.BytesIO()
    tree.write(data, encoding="utf-8", xml_declaration=True)
    write_bytes(data.getvalue(), path, inputs=inputs, option="--junit")


# -- GitHub --------------------------------------------------------------------------------------------------
def escape_data(text: str) -> str:
    """A workflow command's message, escaped as GitHub's toolkit does (``%``, CR, LF)."""
    # and no other control character: the log would show an escape code as it is (colours, a title)
    return terminal(text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def escape_property(text: str) -> str:
    """A workflow command's property value (``title=``): also ``:`` and ``,``, which end a property."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(level: str, message: str, *, title: str | None = None) -> str:
    """``::error title=...::message`` (level: error, warning or notice)."""
    if level not in ("error", "warning", "notice"):
        raise ValueError(f"unknown annotation level {level!r}")
    props = f" title={escape_property(title)}" if title else ""
    return f"::{level}{props}::{escape_data(message)}"


def _capped(level: str, items: list[tuple[str, str]], what: str) -> list[str]:
    lines = [annotation(level, message, title=title) for title, message in items[:MAX_ANNOTATIONS]]
    if len(items) > MAX_ANNOTATIONS:
        lines.append(
            annotation(
                "notice",
                f"{len(items) - MAX_ANNOTATIONS} more {what} not annotated (GitHub shows {MAX_ANNOTATIONS} "
                "per step); the job summary and the JUnit file list them all",
                title="seqjudge",
            )
        )
    return lines


def github_run(pairs: Sequence[Pair], *, name: str = "seqjudge") -> list[str]:
    """Annotations for one run: an error per failed trace, a warning per trace in review, a closing notice."""
    errors: list[tuple[str, str]] = []
    warnings: list[tuple[str, str]] = []
    counts = {"pass": 0, "fail": 0, "review": 0}
    for trace, result in pairs:
        counts[result.verdict] += 1
        failed = [d.rule_id for d in result.rules if d.final == "failed"]
        if result.verdict == "fail":
            blocks = failed_blocks(trace, result)
            errors.append((f"seqjudge: {result.trace_id} failed {', '.join(failed)}", "\n\n".join(blocks)))
        elif result.verdict == "review":
            message = f"{result.trace_id} needs human review: {', '.join(result.review_reasons)}"
            if failed:
                message += "\n\n" + "\n\n".join(failed_blocks(trace, result))
            warnings.append((f"seqjudge: {result.trace_id} needs review", message))
    lines = _capped("error", errors, "failed trace(s)") + _capped("warning", warnings, "trace(s) in review")
    total = sum(counts.values())
    lines.append(
        annotation(
            "notice",
            f"{total} trace(s): {counts['pass']} pass, {counts['fail']} fail, {counts['review']} review",
            title=name,
        )
    )
    return lines


def github_compare(comparison: Comparison, candidate: Sequence[Pair]) -> list[str]:
    """Annotations for a comparison: an error per counted regression (trace and rule) and per fired
    decision that no trace carries; a closing notice with the decision."""
    pairs = {result.trace_id: (trace, result) for trace, result in candidate}
    judge_fired = comparison.decision("judge_paired").fired
    errors: list[tuple[str, str]] = []
    for change in comparison.changes:
        counted = [r for r in change.new_violations if r in change.deterministic_regressions or judge_fired]
        pair = pairs.get(change.trace_id)
        for rule_id in counted:
            blocks = rule_blocks(*pair, rule_id) if pair else []
            errors.append(
                (
                    f"seqjudge regression: {rule_id} on {change.trace_id}",
                    "\n\n".join(blocks) or f"{rule_id} newly failed on {change.trace_id}",
                )
            )
    lines = _capped("error", errors, "regression(s)")
    for d in comparison.fired:
        if d.rule in ("judge_paired", "max_drop", "missing"):
            lines.append(annotation("error", d.reason, title=f"seqjudge regression: {d.rule}"))
    head = "REGRESSION" if comparison.regression else "no regression"
    why = (
        "; ".join(f"{d.rule}: {d.reason}" for d in comparison.fired)
        or comparison.decision("judge_paired").reason
    )
    lines.append(
        annotation(
            "notice",
            f"{head} against {comparison.baseline.name}: {why}",
            title=f"seqjudge compare {comparison.baseline.name} -> {comparison.candidate.name}",
        )
    )
    return lines


def append_step_summary(markdown: str, env: Mapping[str, str] | None = None) -> Path | None:
    """Append to ``$GITHUB_STEP_SUMMARY`` when set (GitHub renders it on the run's page); returns the path."""
    target = (env if env is not None else os.environ).get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    path = Path(target)
    try:
        with path.open("a", encoding="utf-8") as handle:
            handle.write(markdown.rstrip("\n") + "\n\n")
    except OSError as exc:
        raise InputError(
            f"cannot append the job summary ({exc.strerror})",
            source=str(path),
            hint="GITHUB_STEP_SUMMARY names a file GitHub creates; unset it outside Actions",
        ) from None
    return path


# -- markdown ------------------------------------------------------------------------------------------------
_code = md_code  # inline code that survives a table cell (seqjudge.safetext)
_cell = md_text  # plain text that survives a table cell or an HTML element


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _points(a: float | None, b: float | None) -> str:
    return "" if a is None or b is None else f"{100 * (b - a):+.1f} pts"


def _details(summary: str, body: str) -> list[str]:
    fence = md_fence(body)  # longer than any backtick run inside: the block stays one block
    return [
        "<details>",
        f"<summary>{md_text(summary)}</summary>",
        "",
        f"{fence}text",
        body,
        fence,
        "</details>",
        "",
    ]


def markdown_run(pairs: Sequence[Pair], *, name: str = "seqjudge run") -> str:
    """A pull-request comment (and job summary) for one run."""
    from seqjudge.crosscheck import agreement

    digest = RunDigest()
    for trace, r in pairs:
        failed = [(d.rule_id, d.type, d.severity) for d in r.rules if d.final == "failed"]
        digest.add(r.trace_id, r.verdict, r.score, failed, r.review_reasons, partial(blocks_text, trace, r))
    return digest.markdown(name, agreement([r for _, r in pairs])["overall"]["rate"])


def blocks_text(trace: Trace | PlainTrace | Calls, result: TraceResult) -> str:
    return "\n\n".join(failed_blocks(trace, result))


class RunDigest:
    """What the pull-request comment of a run shows, gathered one trace at a time: counts, the traces each
    rule failed on (how many, the first three), the first ``MAX_ROWS`` traces that did not pass and the
    first failing trace's blocks. Bounded whatever the number of traces (``check --format markdown``
    streams through it)."""

    def __init__(self) -> None:
        self.counts = {"pass": 0, "fail": 0, "review": 0}
        self.total = 0
        self.score_sum = 0.0
        self.failing: dict[str, list[str]] = {}  # rule id -> the first three traces it failed on
        self.failing_n: dict[str, int] = {}
        self.info: dict[str, tuple[str, str]] = {}  # rule id -> (type, severity)
        self.not_passed: list[str] = []  # table rows
        self.not_passed_n = 0
        self.first: tuple[str, str] | None = None  # (trace id, blocks) of the first failing trace

    def add(
        self,
        trace_id: str,
        verdict: str,
        score: float,
        failed: Sequence[tuple[str, str, str]],
        reasons: Sequence[str],
        blocks: Callable[[], str] | str,
    ) -> None:
        """One trace's result: its verdict and score, each failed rule as (id, type, severity), its review
        reasons, and its FAIL blocks (or a function making them, called only for the first failing trace)."""
        self.counts[verdict] += 1
        self.total += 1
        self.score_sum += score
        for rule_id, kind, severity in failed:
            self.info.setdefault(rule_id, (kind, severity))
            self.failing_n[rule_id] = self.failing_n.get(rule_id, 0) + 1
            ids = self.failing.setdefault(rule_id, [])
            if len(ids) < 3:
                ids.append(trace_id)
        if verdict == "pass":
            return
        self.not_passed_n += 1
        if len(self.not_passed) < MAX_ROWS:
            self.not_passed.append(
                f"| {_code(trace_id)} | {verdict} | {score:.2f} | "
                f"{', '.join(_code(f[0]) for f in failed) or '–'} | {', '.join(reasons) or '–'} |"
            )
        if self.first is None and failed:
            self.first = (trace_id, blocks if isinstance(blocks, str) else blocks())

    def markdown(self, name: str, agree: float | None) -> str:
        counts, total = self.counts, self.total
        rate = counts["pass"] / total if total else None
        icon = "✅" if counts["fail"] == counts["review"] == 0 else "❌" if counts["fail"] else "⚠️"
        lines = [MARKER_RUN, f"## {icon} seqjudge: {_cell(name)}", ""]
        lines += [
            "| traces | pass | fail | review | pass rate | mean score | judge–engine agreement |",
            "|---:|---:|---:|---:|---:|---:|---:|",
            f"| {total} | {counts['pass']} | {counts['fail']} | {counts['review']} | {_pct(rate)} | "
            f"{(self.score_sum / total if total else 1.0):.3f} | {_pct(agree)} |",
            "",
        ]
        if self.failing:
            lines += [
                "### Top violations",
                "",
                "| rule | type | severity | traces failing | e.g. |",
                "|---|---|---|---:|---|",
            ]
            ranked = sorted(self.failing_n.items(), key=lambda kv: (-kv[1], kv[0]))
            for rule_id, n in ranked[:MAX_ROWS]:
                kind, severity = self.info[rule_id]
                lines.append(
                    f"| {_code(rule_id)} | {kind} | {severity} | {n} | "
                    f"{', '.join(_code(t) for t in self.failing[rule_id])} |"
                )
            lines.append("")
        if self.not_passed_n:
            lines += [
                "### Traces that did not pass",
                "",
                "| trace | verdict | score | failed rules | review reasons |",
            ]
            lines.append("|---|---|---:|---|---|")
            lines += self.not_passed
            if self.not_passed_n > MAX_ROWS:
                lines.append(f"\n…and {self.not_passed_n - MAX_ROWS} more.")
            lines.append("")
            if self.first is not None:
                lines += _details(f"First failing trace in full: {self.first[0]}", self.first[1])
        else:
            lines += ["Every trace passed.", ""]
        return "\n".join(lines).rstrip("\n") + "\n"


_DECISION_TITLES = {
    "deterministic": "engine rules",
    "judge_paired": "judge rules (paired test)",
    "max_drop": "pass-rate drop",
    "missing": "missing traces",
}


def _decider(decided_by: str, rule_type: str) -> str:
    return decided_by if decided_by == rule_type else f"{decided_by} ({rule_type})"


def _decision_line(d: Decision) -> str:
    mark = "❌" if d.fired else ("✅" if d.applies else "➖")
    # The reason names traces and rules: text, not markup (a trace id could hold a heading or an <img>).
    return f"- {mark} **{_DECISION_TITLES[d.rule]}** (`{d.rule}`): {md_text(d.reason)}"


def markdown_compare(comparison: Comparison, candidate: Sequence[Pair] = ()) -> str:
    """A pull-request comment (and job summary) for a comparison: counts, the decision and why, the
    regressions table, top violations, and the first regression in full."""
    c = comparison
    b_side, c_side = c.baseline, c.candidate
    head = "❌ regression" if c.regression else "✅ no regression"
    lines = [
        MARKER_COMPARE,
        f"## {head}: seqjudge {_code(c_side.name)} against baseline {_code(b_side.name)}",
        "",
        f"| | baseline {_code(b_side.name)} | candidate {_code(c_side.name)} | change |",
        "|---|---:|---:|---:|",
        f"| traces | {b_side.traces} | {c_side.traces} | {c.matched} matched |",
    ]
    for key in ("pass", "fail", "review"):
        delta = c_side.counts[key] - b_side.counts[key]
        lines.append(f"| {key} | {b_side.counts[key]} | {c_side.counts[key]} | {delta:+d} |")
    pr = c.pass_rate
    lines.append(
        f"| pass rate (matched traces) | {_pct(pr['baseline'])} | {_pct(pr['candidate'])} | "
        f"{_points(pr['baseline'], pr['candidate'])} |"
    )
    s = c.score
    low, high = s.interval
    lines.append(
        f"| mean score (matched) | {s.baseline_mean:.3f} | {s.candidate_mean:.3f} | {s.mean_change:+.3f} "
        f"[{low:+.3f}, {high:+.3f}] |"
    )
    lines.append(
        f"| judge–engine agreement | {_pct(b_side.agreement)} | {_pct(c_side.agreement)} | "
        f"{_points(b_side.agreement, c_side.agreement)} |"
    )
    lines += ["", "### Decision", ""]
    lines += [_decision_line(d) for d in c.decisions]
    lines.append("")
    judge_fired = c.decision("judge_paired").fired
    regressed = [
        ch for ch in c.changes if ch.new_violations or (ch.baseline == "pass" and ch.candidate != "pass")
    ]
    if regressed:
        lines += [
            f"### Regressions ({len(regressed)} trace(s) got worse)",
            "",
            "| trace | verdict | score | new violations | counts |",
            "|---|---|---|---|---|",
        ]
        for ch in regressed[:MAX_ROWS]:
            new = ", ".join(_code(r) for r in ch.new_violations) or (
                "review: " + ", ".join(ch.review_reasons) if ch.review_reasons else "–"
            )
            if ch.deterministic_regressions:
                counts = "yes (engine)"
            elif ch.new_violations and judge_fired:
                counts = "yes (judge)"
            elif ch.new_violations:
                counts = "no: judge noise"
            else:
                counts = "no"
            lines.append(
                f"| {_code(ch.trace_id)} | {ch.baseline} → {ch.candidate} | {ch.baseline_score:.2f} → "
                f"{ch.candidate_score:.2f} | {new} | {counts} |"
            )
        if len(regressed) > MAX_ROWS:
            lines.append(f"\n…and {len(regressed) - MAX_ROWS} more.")
        lines.append("")
    moved = [r for r in c.rules if r.new or r.fixed or r.candidate_failed]
    if moved:
        lines += [
            "### Top violations",
            "",
            "| rule | decided by | severity | failing (baseline → candidate) | new | fixed | McNemar p |",
            "|---|---|---|---|---:|---:|---:|",
        ]
        for r in moved[:MAX_ROWS]:
            p = "" if r.p_value is None else f"{r.p_value:.3g}"
            lines.append(
                f"| {_code(r.rule_id)} | {_decider(r.decided_by, r.type)} | {r.severity} | "
                f"{r.baseline_failed} → {r.candidate_failed} | {len(r.new)} | {len(r.fixed)} | {p} |"
            )
        lines.append("")
    if c.better:
        lines += [
            f"Fixed ({len(c.better)} trace(s) now pass): {', '.join(_code(t) for t in c.better[:10])}",
            "",
        ]
    if c.only_in_baseline or c.only_in_candidate:
        lines.append(
            f"Missing traces: {len(c.only_in_baseline)} only in the baseline"
            + (f" ({', '.join(_code(t) for t in c.only_in_baseline[:10])})" if c.only_in_baseline else "")
            + f", {len(c.only_in_candidate)} only in the candidate"
            + (f" ({', '.join(_code(t) for t in c.only_in_candidate[:10])})" if c.only_in_candidate else "")
            + "."
        )
        lines.append("")
    if c.rules_only_in_baseline or c.rules_only_in_candidate:
        lines.append(
            "Rules on one side only (not compared): "
            + ", ".join(_code(r) for r in c.rules_only_in_baseline + c.rules_only_in_candidate)
        )
        lines.append("")
    pairs = {r.trace_id: (t, r) for t, r in candidate}
    first = next(
        (
            ch
            for ch in c.changes
            if ch.trace_id in pairs and (ch.deterministic_regressions or (judge_fired and ch.new_violations))
        ),
        None,
    )
    if first is not None:
        rules = first.deterministic_regressions or first.new_violations
        body = "\n\n".join(failed_blocks(*pairs[first.trace_id], rules))
        lines += _details(f"First regression in full: {first.trace_id}", body)
    return "\n".join(lines).rstrip("\n") + "\n"
