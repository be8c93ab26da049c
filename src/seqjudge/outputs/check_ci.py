"""`seqjudge check --format junit|markdown`: the CI files `seqjudge report-ci` writes for a stored run,
written straight from `check` with no store in between, and streamed like every `check` format.

Both reuse ``ci_outputs``: a trace's JUnit test cases are ``ci_outputs.run_cases`` of its result, and the
markdown is ``ci_outputs.RunDigest``'s. A trace's result is its engine report reconciled with no judge
(``check_result``), keeping `check`'s own verdict: a judge rule `check` cannot decide is counted and named
in the output (the deferred note), not turned into a review. The JUnit cases are written from the report
data, not through those models and ElementTree (which cost twice the check of a failing trace): the same
``ci_outputs.case_plans`` decides each case, and the bytes are ElementTree's (tests/test_check_render.py).

JUnit's counts sit in the opening tags, before the test cases, so the cases are written as they come after
room for the head: in the output file itself when it is a file that may be read back (moved along in
``finish`` when the head needs more room), else in a temporary file copied after the head in ``finish``.
Memory stays flat, the disk holds the cases once. Each trace's part carries its counts ahead of its cases,
between NUL bytes (no output holds one: ``xml_text`` replaces it, ``terminal`` escapes it), so a worker may
join its chunk's parts (``CheckOutput.joins``) and ``write`` takes the counts out of the joined bytes at
once: no call per trace in this process.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from itertools import accumulate, groupby
from operator import itemgetter
from typing import IO, TYPE_CHECKING, Any

from seqjudge.checkpool import Checked, Origin
from seqjudge.errors import InputError
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
    cut_window,
    rule_result,
    violation_words,
    window_ends,
    window_text,
)
from seqjudge.report import score_reasons
from seqjudge.safetext import json_bytes, terminal
from seqjudge.trace import PlainTrace, Trace

if TYPE_CHECKING:
    from seqjudge.crosscheck import TraceResult

NO_JUDGE = "seqjudge check runs no judge"


def check_result(data: dict[str, Any], threshold: float, risk_level: str) -> TraceResult:
    """The trace's result as `check` decides it: the engine's report, reconciled without a judge."""
    # Here, not at the top: the junit cases are made from the report data, and `check --format junit`
    # starts sooner without the reconciliation's models (markdown's first failing trace comes here).
    from seqjudge.crosscheck import reconcile
    from seqjudge.report import Report

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
    score's (for a trace in review: a critical fail is no score doubt, ``reconcile``)."""
    failed = [(r["rule_id"], r["type"], r["severity"]) for r in data["rules"] if r["outcome"] == "failed"]
    score = data["sequence_correctness_score"]
    reasons = score_reasons(score, threshold, risk_level) if data["verdict"] == "review" else []
    return failed, list(reasons)


@dataclass(slots=True)  # (not frozen: a frozen one sets each field through object.__setattr__)
class _Case:
    """A test case as ``JunitOutput.render`` writes it, but for the trace id and the FAIL blocks: what follows
    the class name (the trace id) when the case shows no block, and around its blocks when it does. The
    blocks go into the trace's parts as they are made, not joined into a body first and copied around."""

    empty: bytes  # the rest of the case when it shows no block
    opening: bytes  # the rest of the case up to its blocks (the failure's or the output's text)
    closing: bytes  # the rest of the case after its blocks
    blocks: list[str]  # the rules whose FAIL blocks the case shows
    at: tuple[int, ...]  # where their entries sit in the report's rules


@dataclass(slots=True)
class _Plan:
    """A trace's test cases, kept by what decides them (``JunitOutput.render``)."""

    counts: bytes  # the cases, failures and skipped cases, between NULs, for ``write``
    cases: list[_Case]
    # The rules of the only case's blocks when they are the report's violations in order: each rule's
    # violations together (the engine lists them by rule), none a judge's. None: more cases, or none.
    order: tuple[str, ...] | None


# What decides the cases (``case_plans``), read from each rule's entry: the rules in order (each a rule of
# the writer's rule set, with its group and severity) and whether each failed, was deferred or neither.
_RULE_ID = itemgetter("rule_id")
_OUTCOME = itemgetter("outcome")
_DECIDING = {"failed": "failed", "deferred": "deferred"}.get
_FIRST = itemgetter(0)
# What a violation's block says but for its trace id and window (``textview.violation_words``, and its
# severity's word): its rule's group and type are the rule set's, the same for every report of a run.
_VIOLATION = itemgetter(
    "rule_id", "severity", "violation_type", "expected_order", "actual_order", "explanation", "suggestion"
)
_CASE_START = b'    <testcase classname="'
_OPEN = b">\n      "
_CLOSE = b"\n    </testcase>\n"
_EMPTY = b" />\n"


class JunitOutput(CheckOutput):
    def __init__(self, out: IO[str], **settings: Any) -> None:
        super().__init__(out, **settings)
        # A trace's test cases and their counts, by what decides them (``render``): the same few sets of
        # failed rules again and again. And a violation's block, escaped, but for its trace id and window
        # (``_VIOLATION``): the same rules say the same words again and again over a run. Both bounded:
        # cleared when full. Forked workers inherit what is here.
        self._plans: dict[tuple[Any, ...], _Plan] = {}
        self._deciding: dict[tuple[Any, ...], _Plan] = {}  # the plans by what decides them (``_planned``)
        self._pieces: dict[tuple[Any, ...], _Pieces] = {}
        # The rules of a trace's violations, each run of one rule's once, by the violations' rules: the
        # same few sequences again and again (``render``). Bounded: cleared when full.
        self._ran: dict[tuple[str, ...], tuple[str, ...]] = {}
        self._file: IO[bytes] | None = None  # the output file the cases go into (``start``), if any

    def render(self, trace: Trace | PlainTrace, data: dict[str, Any], origin: Origin | None) -> bytes:
        """The trace's test cases: ``ci_outputs.run_cases`` of ``check_result``, each indented at level 2 and
        serialised as ElementTree does, made from the report data (no models: they cost more than checking
        the trace)."""
        results = data["rules"]
        score = data["sequence_correctness_score"]
        # The review reasons are the score's, with no judge: all ``score_reasons`` reads of it is here. The
        # outcomes as they are: telling apart those that decide nothing (passed, not exercised...) costs a
        # pass more a trace than the few more keys cost (``_planned`` finds their plan by what decides it).
        key = (
            *map(_RULE_ID, results),
            *map(_OUTCOME, results),
            data["verdict"],
            score < self.threshold,
            score < 1.0,
        )
        plan = self._plans.get(key)
        if plan is None:
            plan = self._planned(key, results, score)
        trace_id = data["trace_id"]
        # Nothing to escape (``_attr``'s test, inline: a call costs more than it): ``_attr`` and ``terminal``
        # leave it. Four ``in`` tests cost less than a set of the id's characters.
        if (
            type(trace_id) is str
            and trace_id.isprintable()
            and not ("&" in trace_id or "<" in trace_id or ">" in trace_id or '"' in trace_id)
        ):
            classname = trace_id.encode()
            tid = classname + _DOT
        else:
            classname = _attr(trace_id).encode()
            tid = _markup(f"{terminal(str(trace_id))} · ".encode())
        parts = [plan.counts]  # ahead of the cases, for ``write`` (it would otherwise search the cases' tags)
        listed: _Listed | None = None
        violations = data["violations"]
        for case in plan.cases:
            if not case.blocks:
                parts += (_CASE_START, classname, case.empty)
                continue
            if listed is None:
                listed = _Listed(Calls(trace))  # each call's text made once for all the trace's blocks
            parts += (_CASE_START, classname, case.opening)
            shown = len(parts)
            # The general way's blocks are the violations in order when each rule's come together, in the
            # blocks' order (``_Plan.order``).
            runs = None
            if plan.order is not None:
                rule_ids = tuple(map(_RULE_ID, violations))
                runs = self._ran.get(rule_ids) or self._runs(rule_ids)
            if runs is not None and runs == plan.order:
                self._located(parts, listed, tid, violations, results)
            else:
                self._blocks(parts, listed, trace_id, tid, violations, results, case)
            if len(parts) > shown:
                parts.append(case.closing)
            else:  # no block after all
                parts[-1] = case.empty
        return b"".join(parts)

    def _runs(self, rule_ids: tuple[str, ...]) -> tuple[str, ...]:
        """The first of each run of equal ids in ``rule_ids``, kept in ``_ran`` (``groupby``'s objects cost
        more than a lookup of the ids)."""
        if len(self._ran) >= 4096:
            self._ran.clear()
        runs = self._ran[rule_ids] = tuple(map(_FIRST, groupby(rule_ids)))
        return runs

    def _planned(self, key: tuple[Any, ...], results: list[dict[str, Any]], score: float) -> _Plan:
        """``render``'s cases for its ``key``, kept: made with ``case_plans`` unless another key's outcomes
        decided the same (``_deciding``)."""
        verdict = key[-3]
        deciding = (
            tuple(map(_RULE_ID, results)),
            tuple(map(_DECIDING, map(_OUTCOME, results))),
            *key[-3:],
        )
        if len(self._plans) >= 4096:
            self._plans.clear()
        made = self._deciding.get(deciding)
        if made is None:
            made = self._deciding[deciding] = self._cases(results, verdict, score)
        self._plans[key] = made
        return made

    def _cases(self, results: list[dict[str, Any]], verdict: str, score: float) -> _Plan:
        """The cases of a trace whose report's rules are ``results``, made with ``case_plans``."""
        if len(self._deciding) >= 4096:
            self._deciding.clear()
        grouped: dict[str, list[Decided]] = {}
        at: dict[str, int] = {}
        for i, r in enumerate(results):
            group = r["group"] or DEFAULT_GROUP
            decisions = grouped.get(group)
            if decisions is None:
                decisions = grouped[group] = []
            outcome = r["outcome"]
            if outcome == "failed" or outcome == "deferred":
                decisions.append((r["rule_id"], outcome, r["severity"], None))
                at[r["rule_id"]] = i
        reasons = score_reasons(score, self.threshold, self.risk_level)
        cases = []
        failures = skipped = 0
        for plan in case_plans(grouped, verdict, reasons):
            name = f'" name="{_attr(plan.group)}" time="0"'.encode()
            if plan.state == "failure":
                failures += 1
                child = name + _OPEN + _element("failure", plan.message, kind="critical")[: -len(b" />")]
                empty, opening, closing = child + b" />" + _CLOSE, child + b">", b"</failure>" + _CLOSE
            elif plan.state == "skipped":
                skipped += 1
                child = name + _OPEN + _element("skipped", plan.message)
                empty, opening = child + _CLOSE, child + b"\n      <system-out>"
                closing = b"</system-out>" + _CLOSE
            else:
                empty, opening = name + _EMPTY, name + _OPEN + b"<system-out>"
                closing = b"</system-out>" + _CLOSE
            where = tuple(at[rule_id] for rule_id in plan.blocks)
            cases.append(_Case(empty, opening, closing, plan.blocks, where))
        order = None
        if len(cases) == 1 and all(results[i]["type"] != "judge" for i in cases[0].at):
            order = tuple(cases[0].blocks)
        return _Plan(f"\0{len(cases)} {failures} {skipped}\0".encode(), cases, order)

    def _located(
        self,
        parts: list[bytes],
        listed: _Listed,
        tid: bytes,
        violations: list[dict[str, Any]],
        results: list[dict[str, Any]],
    ) -> None:
        """The FAIL blocks of ``violations``, in order (``violation_text``'s, as an element's text in UTF-8:
        ``_xml``), each after the one before and a blank line, added to ``parts``; ``tid``: the trace id's
        part of a head.

        A block is put together from escaped pieces: the trace id's, made once a trace, the offending call's
        window, once a trace (``_Listed``), and the rest, the rule's and the engine's words, once a run
        (``_pieces``)."""
        fail, warn = _FAIL + tid, _WARN + tid
        windows = listed.windows
        known = self._pieces
        pieces = None
        for v in violations:
            call = v["offending_call_index"]
            window = windows.get(call)
            if window is None:
                window = listed.window(call)
            pieces = known.get(_VIOLATION(v))
            if pieces is None:
                pieces = self._violation_pieces(v, results)
            critical, before, after, _ = pieces
            parts += (fail if critical else warn, before, window, after)
        if pieces is not None:
            parts[-1] = pieces[3]  # the last block's, with no blank line after it

    def _blocks(
        self,
        parts: list[bytes],
        listed: _Listed,
        trace_id: str,
        tid: bytes,
        violations: list[dict[str, Any]],
        results: list[dict[str, Any]],
        case: _Case,
    ) -> None:
        """``ci_outputs.failed_blocks`` of ``case``'s rules for a result with no judge, from the report data,
        as an element's text in UTF-8 (``_xml``), added to ``parts``: a rule's violations (``_located``'s
        blocks), or the rule's own block when it failed without one (a judge rule's violations are the
        judge's: none here)."""
        located: dict[str, list[dict[str, Any]]] = {}
        for v in violations:
            found = located.get(v["rule_id"])
            if found is None:
                located[v["rule_id"]] = [v]
            else:
                found.append(v)
        shown = len(parts)
        for rule_id, i in zip(case.blocks, case.at, strict=True):
            rule = results[i]
            kind = rule["type"]
            located_here = located.get(rule_id, ()) if kind != "judge" else ()
            if located_here:
                self._located(parts, listed, tid, located_here, results)  # type: ignore[arg-type]
                parts.append(_BETWEEN)
            elif rule["outcome"] == "failed":
                why = rule.get("explanation", "")
                indices = rule.get("call_indices", [])
                block = unlocated_block(listed.calls, trace_id, rule_id, kind, indices, why)
                parts += (_xml(block), _BETWEEN)
        if len(parts) > shown:
            parts.pop()  # the last block's separator

    def _violation_pieces(self, v: dict[str, Any], results: list[dict[str, Any]]) -> _Pieces:
        """``textview.violation_words`` of ``v`` as escaped UTF-8, kept in ``_pieces``."""
        before, after = violation_words(v, rule_result(results, v["rule_id"]))
        tail = _xml(after)
        made = (v["severity"] == "critical", _xml(before), tail + _BETWEEN, tail)
        if len(self._pieces) >= 8192:
            self._pieces.clear()
        self._pieces[_VIOLATION(v)] = made
        return made

    def start(self) -> None:
        super().start()
        self._counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        # The cases go straight into an output file this process may read back, after room for the head
        # with one-digit counts; ``finish`` moves them along by what the head takes more. Moving them within
        # the file costs less than copying them in from a temporary file, which wrote them twice (93 MB:
        # 13 ms against 40 ms into a new file, 120-220 ms over an old one, here), and the run's end waits
        # for it. Elsewhere (stdout, a pipe) the cases wait in a temporary file.
        self._file = _rewritable(self.out)
        if self._file is not None:
            self._at = self._file.tell()
            self._room = len(self._head(self._counts))
            self._file.seek(self._at + self._room)
            self._body = self._file
        else:
            # A large buffer: a trace's cases are kilobytes, and a write call each is a syscall every other
            # trace.
            self._body = tempfile.TemporaryFile(buffering=BUFFER)  # noqa: SIM115 - closed in finish

    def write(self, parts: bytes | memoryview) -> None:
        """One or several traces' parts, joined: each one's counts, summed, and its cases, kept for
        ``finish``."""
        # NUL, counts, NUL, cases, for each part. The NULs are found with ``find`` (memchr), a part at a
        # time: ``split`` on one byte steps through the cases byte by byte, five times the whole loop here.
        data = parts if isinstance(parts, bytes) else parts.tobytes()
        find = data.find
        view = memoryview(data)
        end = len(data)
        numbers: list[bytes] = []
        cases: list[memoryview] = []
        at = 0
        while at < end:
            close = find(b"\0", at + 1)
            if data[at] != 0 or close < 0:
                break
            numbers.append(data[at + 1 : close])
            at = find(b"\0", close + 1)
            if at < 0:
                at = end
            cases.append(view[close + 1 : at])
        counted = b" ".join(numbers).split()
        if at < end or len(counted) != len(numbers) * 3 or not all(map(bytes.isdigit, counted)):
            # Never a miscount in the file's totals: a part without its framing is a bug, said at once.
            raise RuntimeError("seqjudge bug: a junit part came without its counts; please report it")
        counts = self._counts
        counts["tests"] += sum(map(int, counted[0::3]))
        counts["failures"] += sum(map(int, counted[1::3]))
        counts["skipped"] += sum(map(int, counted[2::3]))
        self._body.writelines(cases)

    def _head(self, counts: dict[str, int]) -> bytes:
        """The file's head, up to the first case, with these counts."""
        attributes = " ".join(f'{k}="{v}"' for k, v in counts.items())
        # Quoted as ElementTree quotes an attribute (``_attr``), as the cases' are: xml.sax's quoteattr picks
        # single quotes for a value with a double one, and importing it loads urllib and ssl at start-up.
        name = _attr(f"seqjudge check {self.title}")
        return (
            f"<?xml version='1.0' encoding='utf-8'?>\n<testsuites name=\"seqjudge\" {attributes}>\n"
            f'  <testsuite name="{name}" {attributes}>\n'.encode()
        )

    def finish(self, totals: Totals) -> None:
        head = self._head(self._counts)
        if self._file is not None:
            file = self._file
            file.flush()
            end = file.tell()
            more = len(head) - self._room  # the room was for the shortest head: never less than 0
            if more:
                _move(file, self._at + self._room, end, more)
                end += more
            file.seek(self._at)
            file.write(head)
            file.seek(end)
        else:
            self._write(head)
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

    def abandon(self) -> None:
        # The run ended early: no head was written, so the cases written after its room go again, and the
        # file ends where it began, as when the cases waited in a temporary file.
        if self._file is not None and not self._file.closed:
            self._file.seek(self._at)
            self._file.truncate()


def _rewritable(out: IO[str]) -> IO[bytes] | None:
    """``out``'s bytes when it is a regular file open to read as well as to write (``open_output``'s
    files): what was written may be moved. None for stdout, a pipe, a device, a test's StringIO, and where
    there is no positioned read and write (``_move``'s: not on Windows)."""
    buffer = getattr(out, "buffer", None)
    try:
        if buffer is None or not (buffer.seekable() and buffer.readable() and hasattr(os, "pwrite")):
            return None
        return buffer if stat.S_ISREG(os.fstat(buffer.fileno()).st_mode) else None  # type: ignore[no-any-return]
    except (OSError, ValueError):  # no descriptor (io.UnsupportedOperation is an OSError), or closed
        return None


def _move(file: IO[bytes], start: int, end: int, by: int) -> None:
    """Move the bytes of ``file`` from ``start`` to ``end`` ``by`` bytes on, the last first, so that none is
    overwritten before it is read."""
    fd = file.fileno()
    at = end
    while at > start:
        size = min(_MOVE, at - start)
        at -= size
        data = memoryview(os.pread(fd, size, at))
        if len(data) != size:  # never a file with a hole in it
            raise InputError(
                f"the output file ended at byte {at + len(data)} while its test cases were moved",
                source=str(file.name),
                hint="let nothing else write to the output file while seqjudge check runs",
            )
        written = 0
        while written < size:  # (a regular file takes it all at once but for a full disk, which raises)
            written += os.pwrite(fd, data[written:], at + by + written)


_MOVE = 1 << 20  # bytes moved a call


# A violation's block but for its trace id and window: whether it is critical (its head says FAIL, else
# WARN), what comes before the window, and after it: with the blank line before the next block, and without.
_Pieces = tuple[bool, bytes, bytes, bytes]
_DOT = " · ".encode()


class _Listed:
    """A trace's numbered call list (``Calls.lines``) as escaped UTF-8 (``_markup``), made once: a violation's
    window (``window_text``) is then cut from it around the mark (``textview.cut_window``, as the text view
    cuts its own), not lines joined, encoded and escaped again for each window. For traces whose lines
    ``Calls`` makes at once (``Calls.encoded``; the others take ``window_text``'s way). The lines
    hold no line break (``terminal`` shows one as ``\\n``), and of what ``xml_text`` replaces nothing:
    ``terminal`` has shown them printable."""

    __slots__ = ("calls", "n", "body", "gap", "tail", "windows")

    def __init__(self, calls: Calls) -> None:
        self.calls = calls
        self.n = n = calls.n
        self.body: tuple[bytes, list[int]] | None = None
        # Each offending call's window, made once a trace: several rules' violations often share one.
        self.windows: dict[int | None, bytes] = {}
        encoded = calls.encoded()
        if encoded is not None:
            self.gap, self.tail = window_ends(n)
            text = _markup(encoded[0])
            if text is encoded[0]:  # nothing to escape, the usual case: the same lines' ends
                self.body = encoded
            else:
                lines = text[1:].split(b"\n")
                # Where each line's newline is, then the end (``cut_window``'s ``ends``).
                self.body = (text, list(accumulate((len(line) + 1 for line in lines), initial=0)))

    def window(self, call: int | None) -> bytes:
        """``window_text`` of ``call``, escaped (``_markup``), kept in ``windows``."""
        body, n = self.body, self.n
        if body is None or not (call is None or 0 <= call < n):
            window = _markup(window_text(self.calls, call).encode())
        else:
            window = cut_window(body[0], body[1], call, n, _MARK, self.gap, self.tail)
        self.windows[call] = window
        return window


_MARK = f"  {PLAIN.mark}".encode()
_BETWEEN = b"\n\n"
_FAIL = f"{PLAIN.fail}: ".encode()
_WARN = f"{PLAIN.warn}: ".encode()


# The bytes of the characters ``xml_text`` replaces: C0 controls but tab, line feed and carriage return, and
# the lead byte 0xEF of U+FFFE and U+FFFF (EF BF BE, EF BF BF; the lead of U+F000 to U+FFFF alike, which a
# block seldom holds: they take the exact way). ``_XML_BAD_TABLE`` maps each of them to 0 and every other
# byte to 1: a translated text holds a 0 byte when it may hold one of the characters, and surely not
# otherwise (a search for the three-byte sequences costs twice the translation).
_XML_BAD_BYTES = bytes(b for b in range(0x20) if b not in (0x09, 0x0A, 0x0D)) + b"\xef"
_XML_BAD_TABLE = bytes(0 if b in _XML_BAD_BYTES else 1 for b in range(256))
# ElementTree's escapes, "&" first: of text, and of attribute values, where a line break or tab is a
# character reference so that it survives parsing. A text's escape is looked for by its byte's value: ``in``
# with a one-byte bytes first tries it as an integer, and raises and clears a TypeError each time.
_TEXT_ESCAPES = ((ord("&"), b"&", b"&amp;"), (ord("<"), b"<", b"&lt;"), (ord(">"), b">", b"&gt;"))
_ATTR_ESCAPES: tuple[tuple[str, str], ...] = (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ('"', "&quot;"))
_ATTR_ESCAPES += (("\r", "&#13;"), ("\n", "&#10;"), ("\t", "&#09;"))


def _xml(text: str) -> bytes:
    """``text`` as ElementTree writes it as an element's text (after ``xml_text``), in UTF-8. What XML
    cannot hold is looked for and markup escaped in the bytes, several times faster than the pattern and
    replacements over the text on a kilobyte block (UTF-8 holds no ASCII byte inside a character)."""
    out = text.encode("utf-8")
    if 0 in out.translate(_XML_BAD_TABLE):  # (a byte's value: see ``_TEXT_ESCAPES``)
        out = xml_text(text).encode("utf-8")
    return _markup(out)


def _markup(out: bytes) -> bytes:
    """UTF-8 text with its markup escaped as ElementTree escapes an element's text."""
    for byte, char, reference in _TEXT_ESCAPES:
        if byte in out:
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
        return json_bytes([data["trace_id"], data["verdict"], score, failed, reasons, blocks]) + b"\n"

    def start(self) -> None:
        super().start()
        self.digest = RunDigest()

    def line(self, checked: Checked) -> None:
        trace_id, verdict, score, failed, reasons, blocks = json.loads(checked.line)
        self.digest.add(trace_id, verdict, score, [tuple(f) for f in failed], reasons, blocks)

    def finish(self, totals: Totals) -> None:
        text = self.digest.markdown(f"seqjudge check {self.title}", None)
        note = deferred_note(totals)
        self.out.write(text + (f"\n{note}\n" if note else ""))
