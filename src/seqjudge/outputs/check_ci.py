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
from seqjudge.outputs.textview import Calls, Totals, violation_text
from seqjudge.report import Report
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


class JunitOutput(CheckOutput):
    def render(self, trace: Trace | PlainTrace, data: dict[str, Any], origin: Origin | None) -> bytes:
        """The trace's test cases: ``ci_outputs.run_cases`` of ``check_result``, each indented at level 2 and
        serialised as ElementTree does, made from the report data (no models: they cost more than checking
        the trace)."""
        # Every group has a case, in the order the rules name them; only its rules not passed can fail,
        # skip or fill it (with no judge, no rule's decision disagrees), so the passed ones are left out.
        results = data["rules"]
        grouped: dict[str, list[Decided]] = {
            group or DEFAULT_GROUP: [] for group in dict.fromkeys([r.get("group") for r in results])
        }
        rules = {r["rule_id"]: r for r in results if r["outcome"] != "passed"}  # their results, by id
        if len(grouped) == 1:  # a rule file without groups: one case for them all
            for decided in grouped.values():
                decided += [(rule_id, r["outcome"], r["severity"], None) for rule_id, r in rules.items()]
        else:
            for rule_id, r in rules.items():
                grouped[r.get("group") or DEFAULT_GROUP].append((rule_id, r["outcome"], r["severity"], None))
        verdict = data["verdict"]
        # With no judge a result's review reasons are its score's (``check_result``).
        reasons = score_reasons(data["sequence_correctness_score"], self.threshold, self.risk_level)
        trace_id = data["trace_id"]
        classname = _attr(trace_id)
        calls: Calls | None = None
        parts: list[bytes] = []
        plans = case_plans(grouped, verdict, reasons)
        failures = skipped = 0
        for plan in plans:
            body = b""
            if plan.blocks:
                if calls is None:
                    calls = Calls(trace)  # each call's text made once for all the trace's blocks
                body = _text(_blocks(calls, trace_id, data["violations"], rules, plan.blocks))
            if plan.state == "failure":
                failures += 1
                children = [_element("failure", plan.message, body, "critical")]
            else:
                skipped += plan.state == "skipped"
                children = [_element("skipped", plan.message)] if plan.state == "skipped" else []
                if body:
                    children.append(b"<system-out>" + body + b"</system-out>")
            parts.append(
                f'    <testcase classname="{classname}" name="{_attr(plan.group)}" time="0"'.encode()
            )
            if children:
                parts += [b">\n      ", b"\n      ".join(children), b"\n    </testcase>\n"]
            else:
                parts.append(b" />\n")
        # The counts ahead of the cases, for ``line`` (it would otherwise search kilobytes for the tags).
        counts = f"{len(plans)} {failures} {skipped}\n".encode()
        return counts + b"".join(parts)

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
) -> str:
    """``ci_outputs.failed_blocks`` of the rules ``ids`` for a result with no judge, from the report data: a
    rule's violations, or the rule's own block when it failed without one (a judge rule's violations are
    the judge's: none here)."""
    located: dict[str, list[dict[str, Any]]] = {}
    for v in violations:
        located.setdefault(v["rule_id"], []).append(v)
    blocks = []
    for rule_id in ids:
        rule = rules[rule_id]
        found = (
            [violation_text(calls, trace_id, v, rule) for v in located.get(rule_id, ())]
            if rule["type"] != "judge"
            else []
        )
        if not found and rule["outcome"] == "failed":
            why = rule.get("explanation", "")
            found.append(
                unlocated_block(calls, trace_id, rule_id, rule["type"], rule.get("call_indices", []), why)
            )
        blocks += found
    return "\n\n".join(blocks)


# The characters ``xml_text`` replaces that UTF-8 writes as one byte: C0 controls but tab, line feed and
# carriage return (U+FFFE and U+FFFF are looked for in the text). ``_XML_BAD_TABLE`` maps each of them to 0
# and every other byte to 1: a translated text holds a 0 byte exactly when it held one of them.
_XML_BAD_BYTES = bytes(b for b in range(0x20) if b not in (0x09, 0x0A, 0x0D))
_XML_BAD_TABLE = bytes(0 if b in _XML_BAD_BYTES else 1 for b in range(256))
# ElementTree's escapes, "&" first: of text, and of attribute values, where a line break or tab is a
# character reference so that it survives parsing.
_TEXT_ESCAPES = ((b"&", b"&amp;"), (b"<", b"&lt;"), (b">", b"&gt;"))
_ATTR_ESCAPES: tuple[tuple[str, str], ...] = (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ('"', "&quot;"))
_ATTR_ESCAPES += (("\r", "&#13;"), ("\n", "&#10;"), ("\t", "&#09;"))


def _text(text: str) -> bytes:
    """``text`` as ElementTree writes an element's text (after ``xml_text``), in UTF-8. The FAIL blocks are
    kilobytes: what XML cannot hold is looked for and markup escaped in the bytes, several times faster
    than the pattern and replacements over the text (UTF-8 holds no ASCII byte inside a character)."""
    out = text.encode("utf-8")
    if b"\0" in out.translate(_XML_BAD_TABLE) or "\ufffe" in text or "\uffff" in text:
        out = xml_text(text).encode("utf-8")
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
