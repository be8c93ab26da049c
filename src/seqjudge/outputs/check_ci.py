"""`seqjudge check --format junit|markdown`: the CI files `seqjudge report-ci` writes for a stored run,
written straight from `check` with no store in between, and streamed like every `check` format.

Both reuse ``ci_outputs``: a trace's JUnit test cases are ``ci_outputs.run_cases`` of its result, and the
markdown is ``ci_outputs.RunDigest``'s. A trace's result is its engine report reconciled with no judge
(``check_result``), keeping `check`'s own verdict: a judge rule `check` cannot decide is counted and named
in the output (the deferred note), not turned into a review. The JUnit cases are written from the report
data, not through those models and ElementTree (which cost twice the check of a failing trace): the same
``ci_outputs.case_plans`` decides each case, and the bytes are ElementTree's (tests/test_check_render.py).

JUnit's counts sit in the opening tags, before the test cases, so the cases go to a temporary file as they
come and are copied after the head in ``finish``: memory stays flat, the disk holds the cases once.
"""

from __future__ import annotations

import json
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from operator import itemgetter
from typing import IO, Any
from xml.sax.saxutils import quoteattr

from pydantic_core import to_json

from seqjudge.checkpool import Checked, Origin
from seqjudge.crosscheck import TraceResult, reconcile, score_reasons
from seqjudge.outputs.check import CheckOutput, deferred_note
from seqjudge.outputs.ci_outputs import (
    DEFAULT_GROUP,
    Decided,
    RunDigest,
    blocks_text,
    case_plans,
    unlocated_block,
    xml_text,
)
from seqjudge.outputs.streams import BUFFER
from seqjudge.outputs.textview import (
    PLAIN,
    Calls,
    Totals,
    ViolationKey,
    violation_key,
    violation_parts,
    window_text,
)
from seqjudge.report import Report
from seqjudge.safetext import terminal
from seqjudge.trace import PlainTrace, Trace

NO_JUDGE = "seqjudge check runs no judge"


def check_result(data: dict[str, Any], threshold: float, risk_level: str) -> TraceResult:
    """The trace's result as `check` decides it: the engine's report, reconciled without a judge."""
    report = Report.model_validate(data)
    result = reconcile(
        report,
        None,
        threshold=threshold,
        risk_level=risk_level,  # type: ignore[arg-type]
        judge_skipped=NO_JUDGE,
    )
    reasons = [r for r in result.review_reasons if r != "judge_rule_undecided"]
    return result.model_copy(update={"verdict": report.verdict, "review_reasons": reasons})


def failed_and_reasons(
    data: dict[str, Any], threshold: float, risk_level: str
) -> tuple[list[tuple[str, str, str]], list[str]]:
    """``check_result``'s failed rules as (id, type, severity) and review reasons, read from the report data
    without reconciling: with no judge a rule's final outcome is the engine's and the reasons are the
    score's (for a trace that did not pass)."""
    failed = [(r["rule_id"], r["type"], r["severity"]) for r in data["rules"] if r["outcome"] == "failed"]
    score = data["sequence_correctness_score"]
    reasons = score_reasons(score, threshold, risk_level) if data["verdict"] != "pass" else []
    return failed, list(reasons)


@dataclass(frozen=True, slots=True)
class _Case:
    """A test case as ``JunitOutput.render`` writes it, but for the trace id and the FAIL blocks."""

    name: bytes  # what follows the class name in the opening tag: the group's name and the time
    state: str | None  # case_plans's
    child: bytes  # the failure element's opening tag, without its end; the whole skipped element
    blocks: list[str]  # the rules whose FAIL blocks the case shows


# The outcomes a case plan reads (``case_plans``; with no judge no rule's decision disagrees): every other
# rule passes its case.
_DECIDES = frozenset(("failed", "deferred"))
_GROUP = itemgetter("group")
_DECIDED = itemgetter("rule_id", "outcome", "severity", "group")
_CASE_START = b'    <testcase classname="'
_OPEN = b">\n      "
_CLOSE = b"\n    </testcase>\n"
_EMPTY = b" />\n"


class JunitOutput(CheckOutput):
    def __init__(self, out: IO[str], **settings: Any) -> None:
        super().__init__(out, **settings)
        # A trace's test cases and their counts, by what decides them (``render``): the same few sets of
        # failed rules again and again. Bounded: cleared when full. Forked workers inherit what is here.
        self._plans: dict[tuple[Any, ...], tuple[bytes, list[_Case]]] = {}

    def render(self, trace: Trace | PlainTrace, data: dict[str, Any], origin: Origin | None) -> bytes:
        """The trace's test cases: ``ci_outputs.run_cases`` of ``check_result``, each indented at level 2 and
        serialised as ElementTree does, made from the report data (no models: they cost more than checking
        the trace)."""
        results = data["rules"]
        # What decides the cases (``case_plans``): every rule's group, in order (each group has a case), the
        # rules failed or deferred, the verdict and, with no judge, the score's review reasons.
        decided = [r for r in results if r["outcome"] in _DECIDES]
        reasons = score_reasons(data["sequence_correctness_score"], self.threshold, self.risk_level)
        key = (tuple(map(_GROUP, results)), tuple(map(_DECIDED, decided)), data["verdict"], tuple(reasons))
        planned = self._plans.get(key)
        if planned is None:
            planned = self._planned(key)
        counts, cases = planned
        trace_id = data["trace_id"]
        parts = [counts]  # ahead of the cases, for ``line`` (it would otherwise search the cases' tags)
        classname = _attr(trace_id).encode()
        calls: Calls | None = None
        for case in cases:
            parts += (_CASE_START, classname, case.name)
            body = b""
            if case.blocks:
                if calls is None:
                    calls = Calls(trace)  # each call's text made once for all the trace's blocks
                rules = {r["rule_id"]: r for r in decided}
                body = _blocks(calls, trace_id, data["violations"], rules, case.blocks)
            if case.state == "failure":
                parts += (_OPEN, case.child, b">" + body + b"</failure>" if body else b" />", _CLOSE)
            elif case.state == "skipped":
                parts += (_OPEN, case.child)
                if body:
                    parts += (b"\n      <system-out>", body, b"</system-out>")
                parts.append(_CLOSE)
            elif body:
                parts += (_OPEN, b"<system-out>", body, b"</system-out>", _CLOSE)
            else:
                parts.append(_EMPTY)
        return b"".join(parts)

    def _planned(self, key: tuple[Any, ...]) -> tuple[bytes, list[_Case]]:
        """``render``'s cases for its ``key``, made with ``case_plans`` and kept."""
        groups, decided, verdict, reasons = key
        grouped: dict[str, list[Decided]] = {group or DEFAULT_GROUP: [] for group in dict.fromkeys(groups)}
        for rule_id, outcome, severity, group in decided:
            grouped[group or DEFAULT_GROUP].append((rule_id, outcome, severity, None))
        cases = []
        for plan in case_plans(grouped, verdict, reasons):
            child = b""
            if plan.state == "failure":
                child = _element("failure", plan.message, kind="critical")[: -len(b" />")]
            elif plan.state == "skipped":
                child = _element("skipped", plan.message)
            name = f'" name="{_attr(plan.group)}" time="0"'.encode()
            cases.append(_Case(name, plan.state, child, plan.blocks))
        failures = sum(case.state == "failure" for case in cases)
        skipped = sum(case.state == "skipped" for case in cases)
        if len(self._plans) >= 4096:
            self._plans.clear()
        planned = self._plans[key] = (f"{len(cases)} {failures} {skipped}\n".encode(), cases)
        return planned

    def start(self) -> None:
        super().start()
        # A large buffer: a trace's cases are kilobytes, and a write call each is a syscall every other trace.
        self._body: IO[bytes] = tempfile.TemporaryFile(buffering=BUFFER)  # noqa: SIM115 - closed in finish
        self._counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}

    def line(self, checked: Checked) -> None:
        part = checked.line
        end = part.index(b"\n")
        tests, failures, skipped = part[:end].split()
        self._counts["tests"] += int(tests)
        self._counts["failures"] += int(failures)
        self._counts["skipped"] += int(skipped)
        self._body.write(memoryview(part)[end + 1 :])

    def finish(self, totals: Totals) -> None:
        counts = " ".join(f'{k}="{v}"' for k, v in self._counts.items())
        name = quoteattr(xml_text(f"seqjudge check {self.source}"))
        self._write(
            f"<?xml version='1.0' encoding='utf-8'?>\n<testsuites name=\"seqjudge\" {counts}>\n"
            f"  <testsuite name={name} {counts}>\n".encode()
        )
        self._body.seek(0)
        while chunk := self._body.read(1 << 20):
            self._write(chunk)
        self._body.close()
        note = deferred_note(totals)
        if note:  # what no test case shows is still said
            out = ET.Element("system-out")
            out.text = xml_text(note)
            self._write(b"    " + ET.tostring(out, encoding="utf-8", xml_declaration=False) + b"\n")
        self._write(b"  </testsuite>\n</testsuites>\n")


def _blocks(
    calls: Calls,
    trace_id: str,
    violations: list[dict[str, Any]],
    rules: dict[str, dict[str, Any]],
    ids: list[str],
) -> bytes:
    """``ci_outputs.failed_blocks`` of the rules ``ids`` for a result with no judge, from the report data, as
    an element's text in UTF-8 (``_xml``): a rule's violations (``violation_text``'s blocks), or the rule's
    own block when it failed without one (a judge rule's violations are the judge's: none here).

    A violation's block is put together from escaped UTF-8 pieces: the trace id's, made once a trace, each
    offending call's window, once a trace, and the rest, the rule's and the engine's words, which the same
    rules say again and again over a run: made once (``_VIOLATIONS``). The windows are call lines that
    ``terminal`` has shown printable: of what ``xml_text`` replaces they hold nothing, only markup to
    escape."""
    located: dict[str, list[dict[str, Any]]] = {}
    for v in violations:
        found = located.get(v["rule_id"])
        if found is None:
            located[v["rule_id"]] = [v]
        else:
            found.append(v)
    tid = _markup(f"{terminal(str(trace_id))} · ".encode())
    windows: dict[int | None, bytes] = {}
    parts: list[bytes] = []
    known = _VIOLATIONS
    for rule_id in ids:
        rule = rules[rule_id]
        kind = rule["type"]
        shown = located.get(rule_id, ()) if kind != "judge" else ()
        for v in shown:
            call = v["offending_call_index"]
            window = windows.get(call)
            if window is None:
                window = windows[call] = _markup(window_text(calls, call).encode())
            key = violation_key(v, rule)
            pieces = known.get(key)
            if pieces is None:
                pieces = _violation_pieces(key)
            before, after = pieces
            parts += (_FAIL if v["severity"] == "critical" else _WARN, tid, before, window, after, _BETWEEN)
        if not shown and rule["outcome"] == "failed":
            why = rule.get("explanation", "")
            block = unlocated_block(calls, trace_id, rule_id, kind, rule.get("call_indices", []), why)
            parts += (_xml(block), _BETWEEN)
    if parts:
        parts.pop()  # the last block's separator
    return b"".join(parts)


_BETWEEN = b"\n\n"
_FAIL = f"{PLAIN.fail}: ".encode()
_WARN = f"{PLAIN.warn}: ".encode()


def _violation_pieces(key: ViolationKey) -> tuple[bytes, bytes]:
    """``textview.violation_parts`` as escaped UTF-8, kept in ``_VIOLATIONS``."""
    parts = violation_parts(key)
    made = (_xml(parts[0]), _xml(parts[1]))
    if len(_VIOLATIONS) >= 8192:
        _VIOLATIONS.clear()
    _VIOLATIONS[key] = made
    return made


# ``_violation_pieces`` by key (``textview.violation_key``). Bounded: cleared when full.
_VIOLATIONS: dict[ViolationKey, tuple[bytes, bytes]] = {}


# The bytes of the characters ``xml_text`` replaces: C0 controls but tab, line feed and carriage return, and
# the lead byte 0xEF of U+FFFE and U+FFFF (EF BF BE, EF BF BF; the lead of U+F000 to U+FFFF alike, which a
# block seldom holds: they take the exact way). ``_XML_BAD_TABLE`` maps each of them to 0 and every other
# byte to 1: a translated text holds a 0 byte when it may hold one of the characters, and surely not
# otherwise (a search for the three-byte sequences costs twice the translation).
_XML_BAD_BYTES = bytes(b for b in range(0x20) if b not in (0x09, 0x0A, 0x0D)) + b"\xef"
_XML_BAD_TABLE = bytes(0 if b in _XML_BAD_BYTES else 1 for b in range(256))
# ElementTree's escapes, "&" first: of text, and of attribute values, where a line break or tab is a
# character reference so that it survives parsing.
_TEXT_ESCAPES = ((b"&", b"&amp;"), (b"<", b"&lt;"), (b">", b"&gt;"))
_ATTR_ESCAPES: tuple[tuple[str, str], ...] = (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ('"', "&quot;"))
_ATTR_ESCAPES += (("\r", "&#13;"), ("\n", "&#10;"), ("\t", "&#09;"))


def _xml(text: str) -> bytes:
    """``text`` as ElementTree writes it as an element's text (after ``xml_text``), in UTF-8. What XML
    cannot hold is looked for and markup escaped in the bytes, several times faster than the pattern and
    replacements over the text on a kilobyte block (UTF-8 holds no ASCII byte inside a character)."""
    out = text.encode("utf-8")
    if b"\0" in out.translate(_XML_BAD_TABLE):
        out = xml_text(text).encode("utf-8")
    return _markup(out)


def _markup(out: bytes) -> bytes:
    """UTF-8 text with its markup escaped as ElementTree escapes an element's text."""
    for char, reference in _TEXT_ESCAPES:
        if char in out:
            out = out.replace(char, reference)
    return out


def _attr(text: str) -> str:
    """An attribute value as ElementTree writes it (after ``xml_text``)."""
    # Printable: nothing for xml_text (C0 controls, U+FFFE and U+FFFF are not) and no tab or line break.
    if text.isprintable() and not ("&" in text or "<" in text or ">" in text or '"' in text):
        return text
    known = _ATTRS.get(text)
    if known is not None:
        return known
    escaped = xml_text(text)
    for char, reference in _ATTR_ESCAPES:
        if char in escaped:
            escaped = escaped.replace(char, reference)
    if len(_ATTRS) >= 4096:
        _ATTRS.clear()
    _ATTRS[text] = escaped
    return escaped


# Attribute values escaped: a case's message names the rules that failed, and the same ones fail again and
# again. Bounded: cleared when full.
_ATTRS: dict[str, str] = {}


def _element(tag: str, message: str, text: bytes = b"", kind: str | None = None) -> bytes:
    """``ci_outputs._child``'s element as ElementTree writes it; ``text``: already ``_text``."""
    attrs = f'<{tag} message="{_attr(message)}"' + (f' type="{_attr(kind)}"' if kind else "")
    return attrs.encode() + (b">" + text + f"</{tag}>".encode() if text else b" />")


class MarkdownOutput(CheckOutput):
    """The pull-request comment of the checked traces (judge–engine agreement: none, no judge ran).

    The comment shows the blocks of the first failing trace only, so each process renders them for the
    first failing trace it checks, and no other: every process checks its traces in input order (this
    one its first records, then any chunk a worker did not finish; a worker its chunks as they were
    queued), so the first failing trace of the input is the first failing trace of whichever process
    checked it. (Workers forked after this process rendered its blocks inherit the flag set: fine, the
    first failing trace was this process's, earlier in the input than anything they check.)"""

    def __init__(self, out: IO[str], **settings: Any) -> None:
        super().__init__(out, **settings)
        self._rendered_blocks = False  # in this process (a forked worker starts from False)

    def render(self, trace: Trace | PlainTrace, data: dict[str, Any], origin: Origin | None) -> bytes:
        # The reconciled result is needed only for the blocks.
        failed, reasons = failed_and_reasons(data, self.threshold, self.risk_level)
        score = data["sequence_correctness_score"]
        blocks = ""
        if failed and not self._rendered_blocks:
            blocks = blocks_text(trace, check_result(data, self.threshold, self.risk_level))
            self._rendered_blocks = True
        return to_json([data["trace_id"], data["verdict"], score, failed, reasons, blocks]) + b"\n"

    def start(self) -> None:
        super().start()
        self.digest = RunDigest()

    def line(self, checked: Checked) -> None:
        trace_id, verdict, score, failed, reasons, blocks = json.loads(checked.line)
        self.digest.add(trace_id, verdict, score, [tuple(f) for f in failed], reasons, blocks)

    def finish(self, totals: Totals) -> None:
        text = self.digest.markdown(f"seqjudge check {self.source}", None)
        note = deferred_note(totals)
        self.out.write(text + (f"\n{note}\n" if note else ""))
