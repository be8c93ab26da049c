"""`check --format text|junit` render each trace from its report data, without models or the JSON encoder
(issue 19 point 1: every format within 1.3x of jsonl). The shortcuts write exactly what the general paths
they skip write: the encoder's arguments, the set-based call window, and ElementTree's JUnit test cases of
``ci_outputs.run_cases`` (the ones `seqjudge report-ci` writes) for the reconciled result."""

from __future__ import annotations

import io
import json
import os
import random
import threading
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from seqjudge import checkpool
from seqjudge.checkpool import Checker
from seqjudge.cli import run
from seqjudge.ingest import load_traces
from seqjudge.ingest.plain import plain_trace
from seqjudge.outputs import check_ci
from seqjudge.outputs.check_ci import JunitOutput, _xml, check_result
from seqjudge.outputs.ci_outputs import run_cases, xml_text
from seqjudge.outputs.streams import open_output
from seqjudge.outputs.textview import (
    INDENT,
    MARK,
    SCREEN_WHOLE,
    SHORT_TRACE,
    WINDOW,
    Calls,
    Palette,
    Totals,
    _args_text,
    _dump,
    report_bytes,
    rule_result,
    trace_lines,
    verdict_line,
    violation_words,
)
from seqjudge.outputs.textview import PLAIN as PLAIN_PALETTE
from seqjudge.redact import may_need_redaction
from seqjudge.rules.engine import Engine
from seqjudge.rules.load import load_rules
from seqjudge.safetext import terminal
from seqjudge.trace import PlainTrace

# -- a call's arguments -----------------------------------------------------------------------------------
VALUES = st.one_of(
    st.text(max_size=70),
    st.sampled_from(["sk-" + "a" * 24, 'a"b\\c', "x\x01y", "tab\there", "ünï", "\u2028", "\x1b[31m"]),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.booleans(),
    st.none(),
    st.floats(),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
KEYS = st.one_of(st.text(max_size=10), st.sampled_from(["password", "api_key", "q", 'we"ird', "k\\"]))
ARGS = st.dictionaries(KEYS, VALUES, max_size=4)
# The usual arguments (plain keys, short strings and integers), with the odd bool or float among them.
PLAIN = st.dictionaries(
    st.from_regex(r"[a-z_]{1,8}", fullmatch=True),
    st.one_of(st.from_regex(r"[a-zA-Z0-9 .:/@-]{0,40}", fullmatch=True), st.integers(), st.booleans()),
    max_size=3,
)
CALLS = st.one_of(
    st.lists(st.tuples(st.sampled_from(["Get", "Put"]), PLAIN, st.booleans()), max_size=12),
    st.lists(st.tuples(st.sampled_from(["Get", "a\x1bb", "é\u202e"]), ARGS, st.booleans()), max_size=12),
)


def encoder_line(trace: PlainTrace, i: int, indent: str) -> str:
    """A call's line as the text views wrote it with the JSON encoder for every call (before the shortcut):
    the trace screened once for secrets, each call's arguments redacted when the screen may match."""
    dumps = [_dump(a) for a in trace.args]
    clean = len(trace.args) <= SCREEN_WHOLE and not may_need_redaction("\n".join(dumps))
    args = _args_text(trace.args[i], dumped=dumps[i] if clean else None)
    note = "" if trace.ok[i] else " [failed]"
    return f"{indent}{i + 1:>{len(str(len(trace.names)))}}. {terminal(trace.names[i] + args)}{note}"


@settings(max_examples=300, deadline=None)
@given(CALLS)
def test_call_lines_are_the_encoders_whatever_the_arguments(calls: list[tuple[str, Any, bool]]) -> None:
    trace = PlainTrace("t", {}, [c[0] for c in calls], [c[2] for c in calls], [c[1] for c in calls])
    shown = Calls(trace)
    for i in range(len(calls)):
        assert shown.line(i, "  ") == encoder_line(trace, i, "  ")
        # The block indent's lines are made at once, from keys and values screened one by one (those found
        # clean before, in other examples, not again): still the encoder's, redacted where it redacts.
        assert shown.line(i, INDENT) == encoder_line(trace, i, INDENT)


def test_a_secret_among_remembered_keys_and_values_is_still_redacted() -> None:
    clean = [{"q": "pass", "id": "word"}, {"q": "x"}]
    Calls(PlainTrace("t", {}, ["A", "B"], [True, True], clean))  # "pass", "word", "q", "id" remembered
    odd = [{"q": "pass", "pass_word": "hunter2"}, {"id": "word", "q": "token=abc"}, {"api_key": "k1"}]
    trace = PlainTrace("u", {}, ["A", "B", "C"], [True] * 3, odd)
    text = "\n".join(trace_lines(trace, [0]))
    assert "hunter2" not in text and "abc" not in text and "k1" not in text
    assert [Calls(trace).line(i, INDENT) for i in range(3)] == [
        encoder_line(trace, i, INDENT) for i in range(3)
    ]


def test_arguments_that_need_redaction_are_redacted_in_the_text() -> None:
    trace = PlainTrace("t", {}, ["Login", "Get"], [True, True], [{"password": "hunter2"}, {"q": "x"}])
    lines = trace_lines(trace, [0])
    assert "hunter2" not in "\n".join(lines) and "password=[redacted]" in lines[0]
    assert lines == [encoder_line(trace, 0, "     ") + "  ← violation", encoder_line(trace, 1, "     ")]


# Values that equal (or print like) ones the call texts remember: an int's text is kept by value, a pair of
# keys' order by the keys, a printable name by itself. Mostly values the direct way takes, so that a trace
# often takes it whole.
LOOKALIKES = st.one_of(
    st.sampled_from([0, 1, 2, True, False, "1", "True", "0", 10**25, -(10**25)]),
    st.sampled_from([1.0, -0.0, None, "sk-" + "a" * 24]),
)
PAIR_KEYS = st.one_of(
    st.sampled_from([("q", "key"), ("key", "q"), ("r", "q")]),
    st.sampled_from([("q", "pass_word"), ("api_key", "q"), ("q", 'k"y')]),
)
NAMES = st.sampled_from(["Get", "Put", "Get\x1b[2J", "G\u202eet", "x" * 70])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(NAMES, PAIR_KEYS, LOOKALIKES, LOOKALIKES, st.booleans()), min_size=1, max_size=14))
def test_remembered_numbers_pairs_and_names_never_show_another_value(
    calls: list[tuple[str, tuple[str, str], Any, Any, bool]],
) -> None:
    # Each trace twice, the second time after the first has filled the caches: True after 1, a pair of
    # keys in the other order or with a secret key, a name that is not printable after printable ones.
    trace = PlainTrace(
        "t", {}, [c[0] for c in calls], [c[4] for c in calls], [{a: x, b: y} for _, (a, b), x, y, _ in calls]
    )
    for _ in range(2):
        shown = Calls(trace)
        for i in range(len(calls)):
            assert shown.line(i, INDENT) == encoder_line(trace, i, INDENT)


def test_a_bool_never_takes_the_text_of_the_int_it_equals() -> None:
    Calls(PlainTrace("t", {}, ["A"], [True], [{"q": 1, "r": 0}]))  # 1 and 0 remembered
    trace = PlainTrace("u", {}, ["A", "B"], [True, True], [{"q": True, "r": False}, {"q": 0, "r": True}])
    shown = Calls(trace)
    assert [shown.line(i, INDENT) for i in range(2)] == [encoder_line(trace, i, INDENT) for i in range(2)]
    assert shown.line(0, INDENT).endswith("A(q=true, r=false)")


# -- the call window --------------------------------------------------------------------------------------
def set_window(n: int, marks: set[int], indent: str = "     ") -> list[str]:
    """The window as the calls it shows, a set, and a line per gap (what trace_lines wrote before it was
    made of runs of calls)."""
    if n == 0:
        return [indent + "(no calls)"]
    if n <= SHORT_TRACE or not marks:
        shown = set(range(min(n, SHORT_TRACE))) if not marks else set(range(n))
    else:
        shown = set()
        for m in marks:
            shown.update(range(max(0, m - WINDOW), min(n, m + WINDOW + 1)))
    width = len(str(n))
    lines, previous = [], -1
    for i in sorted(shown):
        if i != previous + 1:
            lines.append(f"{indent}{'…':>{width}}")
        lines.append(f"{indent}{i + 1:>{width}}. T{i}" + ("  ← violation" if i in marks else ""))
        previous = i
    if previous != n - 1:
        lines.append(f"{indent}{'…':>{width}}  ({n} calls in all)")
    return lines


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 60), st.sets(st.integers(0, 80), max_size=6))
def test_the_window_shows_the_calls_around_each_mark(n: int, marks: set[int]) -> None:
    trace = PlainTrace("t", {}, [f"T{i}" for i in range(n)], [True] * n, [{} for _ in range(n)])
    calls = Calls(trace)
    assert trace_lines(calls, marks) == set_window(n, marks)
    assert trace_lines(calls, sorted(marks, reverse=True)) == set_window(n, marks)  # cached, any order


def reference_window(trace: PlainTrace, mark: int | None) -> str:
    """A violation's call list as ``set_window`` shows it, with each call's line as the encoder writes it
    (``encoder_line``): what ``Calls.window`` and ``Calls.window_bytes`` cut from the whole list at once."""
    n = len(trace.names)
    if n == 0:
        return INDENT + "(no calls)"
    if mark is None:
        shown = set(range(min(n, SHORT_TRACE)))
    elif n <= SHORT_TRACE:
        shown = set(range(n))
    else:
        shown = set(range(max(0, mark - WINDOW), min(n, mark + WINDOW + 1)))
    width = len(str(n))
    lines, previous = [], -1
    for i in sorted(shown):
        if i != previous + 1:
            lines.append(f"{INDENT}{'…':>{width}}")
        lines.append(encoder_line(trace, i, INDENT) + ("  ← violation" if i == mark else ""))
        previous = i
    if previous != n - 1:
        lines.append(f"{INDENT}{'…':>{width}}  ({n} calls in all)")
    return "\n".join(lines)


# Calls whose arguments are all plain (strings, integers): the call list made at once, then cut.
PLAIN_CALLS = st.lists(
    st.tuples(
        st.sampled_from(["Get", "Put", "ünï", "a\x1bb"]),
        st.dictionaries(
            st.from_regex(r"[a-z_]{1,8}", fullmatch=True),
            st.one_of(st.from_regex(r"[a-zA-Z0-9 .:/@ü→-]{0,70}", fullmatch=True), st.integers()),
            max_size=3,
        ),
        st.booleans(),
    ),
    max_size=14,
)


@settings(max_examples=200, deadline=None)
@given(st.one_of(PLAIN_CALLS, CALLS), st.integers(1, 3))
def test_a_violations_window_is_cut_from_the_call_list_as_the_lines_show_it(
    some: list[tuple[str, Any, bool]], times: int
) -> None:
    # Long lists too (the short ones are shown whole), ASCII or not (the UTF-8 cut has its own line ends).
    calls = some * times
    trace = PlainTrace("t", {}, [c[0] for c in calls], [c[2] for c in calls], [c[1] for c in calls])
    n = len(calls)
    for mark in [None, -3, *range(n), n, n + 5]:
        expected = reference_window(trace, mark)
        shown = Calls(trace)
        assert shown.window_bytes(mark, PLAIN_PALETTE) == expected.encode()
        assert shown.window(mark, MARK) == expected
        # Both from one Calls, either first: they share the call list made once.
        assert shown.window_bytes(mark, PLAIN_PALETTE).decode() == shown.window(mark, MARK)


# -- JUnit straight from check ----------------------------------------------------------------------------
HOSTILE_RULES = """
tests:
  - id: 'g<&>"1'
    metric: sequence_valid
    rules:
      - {id: verify_first, type: before, first: VerifyIdentity, then: DeleteCustomer}
      - {id: 'q"uote&<x>', type: max_calls, tool: SendEmail, max: 1, severity: warning}
  - id: judged
    metric: sequence_valid
    rules:
      - {id: polite, type: judge, description: Apologise before refusing.}
      - {id: nodrop, type: blocklist, pattern: "drop_"}
      - {id: needauth, type: require, tool: Auth}
      - {id: warnreq, type: require, tool: Audit, severity: warning}
  - id: seq
    metric: sequence_valid
    rules:
      - {type: sequence, tools: [A, B, C]}
      - {type: eventually, tool: C, within: 3, severity: warning}
      - {type: never_after, trigger: DeleteCustomer, forbidden: SendEmail, same: [cid]}
"""
TOOLS = ["VerifyIdentity", "DeleteCustomer", "SendEmail", "Auth", "Audit", "A", "B", "C", "drop_\x1b[31mx"]
TOOLS += ["to\tol\nx", "amp&<lt>\"q'", "uni\u2028é", "nel\x85x", "bidi\u202ex", "cr\rx", "\ufffe"]
ODD_VALUES: list[Any] = ["c1", "c2", 7, 1.5, True, None, "https://u:pw@h/x", "sk-" + "a" * 24, "x\x01y"]
ODD_VALUES += ['a"b\\c', {"in": [1, "z"]}, "tab\there", "ünï", 1e300]


def hostile_records(n: int = 90) -> list[dict[str, Any]]:
    rng = random.Random(5)
    records = []
    for k in range(n):
        calls = []
        for _ in range(rng.choice([0, 1, 2, 3, 5, 12, 13, 30, 210])):
            keys = rng.sample(["cid", "password", "q", 'we"ird', "url", "n"], rng.randint(0, 3))
            call: dict[str, Any] = {
                "tool_name": rng.choice(TOOLS),
                "arguments": {key: rng.choice(ODD_VALUES) for key in keys},
            }
            if rng.random() < 0.2:
                call["status"] = "error"
            calls.append(call)
        trace_id = rng.choice([f"t{k}", f"t{k}<&>\"'", f"t{k}\x1b[0m", f"t{k}\nnl", f"t{k}\ttab\r", f"t{k}é"])
        records.append({"trace_id": trace_id, "calls": calls})
    return records


# The same rules in one group: each trace is one test case, its blocks the report's violations in order.
ONE_GROUP = "rules:\n" + "\n".join(
    line[4:] for line in HOSTILE_RULES.splitlines() if line.startswith("      - ")
)


def hostile_suite(tmp_path: Path, text: str = HOSTILE_RULES) -> tuple[Path, Path]:
    rules = tmp_path / "rules.yaml"
    rules.write_text(text, encoding="utf-8")
    traces = tmp_path / "traces.jsonl"
    traces.write_text("".join(json.dumps(r) + "\n" for r in hostile_records()), encoding="utf-8")
    return rules, traces


def elementtree_cases(trace: Any, data: dict[str, Any], threshold: float, risk_level: str) -> bytes:
    """A trace's part of `check --format junit` as it was written through the models and ElementTree."""
    parts = []
    for case in run_cases(trace, check_result(data, threshold, risk_level)):
        ET.indent(case, level=2)
        parts.append("    " + ET.tostring(case, encoding="unicode") + "\n")
    return "".join(parts).encode("utf-8")


@pytest.mark.parametrize("suite", [HOSTILE_RULES, ONE_GROUP], ids=["groups", "one-group"])
@pytest.mark.parametrize(("threshold", "risk_level"), [(0.85, "medium"), (0.99, "medium"), (0.85, "high")])
def test_junit_cases_are_elementtrees_of_the_reconciled_result(
    tmp_path: Path, threshold: float, risk_level: str, suite: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules, traces = hostile_suite(tmp_path, suite)
    ruleset = load_rules(rules)
    checker = Checker(Engine(ruleset), threshold, risk_level)  # type: ignore[arg-type]
    shown = JunitOutput(
        io.StringIO(), source="x", ruleset=ruleset, threshold=threshold, risk_level=risk_level
    )
    # Blocks go the general way (rule by rule) or, for one case whose rules' violations come in the
    # blocks' order, straight from the violations: both are checked here.
    general = []
    blocks = JunitOutput._blocks
    monkeypatch.setattr(JunitOutput, "_blocks", lambda *a: general.append(a) or blocks(*a))
    with_blocks = 0
    states = set()
    for record, trace in zip(hostile_records(), load_traces(str(traces)), strict=True):
        data = checker.data(trace)
        expected = elementtree_cases(trace, data, threshold, risk_level)
        # The part is the cases after their counts (tests, failures, skipped) for the head, between NULs.
        counts = [expected.count(tag) for tag in (b"<testcase ", b"<failure ", b"<skipped ")]
        head = b"\0" + " ".join(map(str, counts)).encode() + b"\0"
        assert shown.render(trace, data, None) == head + expected
        plain = plain_trace(record, None)  # how `check` reads the record
        assert plain is not None and shown.render(plain, checker.data(plain), None) == head + expected
        states.update(tag for tag in (b"<failure ", b"<skipped ", b"<system-out>", b" />") if tag in expected)
        with_blocks += b"FAIL: " in expected or b"WARN: " in expected
    # The suite reaches every kind of case: failed, in review, passed with warnings, passed clean.
    assert states == {b"<failure ", b"<skipped ", b"<system-out>", b" />"}
    # Rendered twice a trace: with several cases every case with blocks goes the general way.
    if suite == ONE_GROUP:
        assert 0 < len(general) < 2 * with_blocks
    else:
        assert len(general) >= 2 * with_blocks


def test_junit_file_from_check_parses_and_counts_its_cases(tmp_path: Path) -> None:
    rules, traces = hostile_suite(tmp_path)
    out = tmp_path / "out.xml"
    assert run(["check", str(rules), str(traces), "--format", "junit", "-o", str(out), "--workers", "0"]) == 1
    root = ET.parse(out).getroot()  # control characters replaced, quotes and markup escaped
    [suite] = root
    cases = suite.findall("testcase")
    assert len(cases) == 3 * 90 == int(root.get("tests", ""))
    assert int(root.get("failures", "")) == sum(1 for c in cases if c.find("failure") is not None) > 0
    assert int(root.get("skipped", "")) == sum(1 for c in cases if c.find("skipped") is not None) > 0
    # Each trace id reads back as it was, but for what XML cannot hold (ESC, U+FFFE) replaced.
    assert {c.get("classname") for c in cases} == {xml_text(r["trace_id"]) for r in hostile_records()}


def test_junit_suite_name_is_quoted_as_elementtree_quotes_it(tmp_path: Path) -> None:
    # A file name holding both quotes, markup and a tab: the suite's name attribute reads back as the
    # command's source, and its bytes are ElementTree's (double quotes, &quot;), as the cases' attributes.
    rules, plain = hostile_suite(tmp_path)
    traces = tmp_path / 'it\'s "a" <b>&\tc.jsonl'
    plain.rename(traces)
    out = tmp_path / "out.xml"
    assert run(["check", str(rules), str(traces), "--format", "junit", "-o", str(out), "--workers", "0"]) == 1
    written = out.read_bytes()
    root = ET.fromstring(written)
    [suite] = root
    assert suite.get("name") == f"seqjudge check {traces}"
    attribute = ET.tostring(ET.Element("testsuite", {"name": f"seqjudge check {traces}"}), encoding="utf-8")
    assert attribute.split(b"<testsuite ")[-1].split(b" />")[0] in written.split(b"\n")[2]


@pytest.mark.parametrize("failures_only", [[], ["--failures-only"]])
@pytest.mark.parametrize("suite", [HOSTILE_RULES, ONE_GROUP], ids=["groups", "one-group"])
def test_junit_from_joined_worker_chunks_is_the_single_process_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suite: str, failures_only: list[str]
) -> None:
    rules, traces = hostile_suite(tmp_path, suite)
    ruleset = load_rules(rules)
    assert JunitOutput(io.StringIO(), source="x", ruleset=ruleset).joins()  # workers join their chunks
    argv = ["check", str(rules), str(traces), "--format", "junit", *failures_only]
    with monkeypatch.context() as m:
        m.setattr(checkpool, "INLINE", 2)
        m.setattr(checkpool, "CHUNK", 2000)  # bytes: a few records a chunk, so many chunks
        assert run([*argv, "-o", str(tmp_path / "pooled.xml"), "--workers", "2"]) == 1
    assert run([*argv, "-o", str(tmp_path / "alone.xml"), "--workers", "0"]) == 1
    pooled = (tmp_path / "pooled.xml").read_bytes()
    assert pooled == (tmp_path / "alone.xml").read_bytes()
    root = ET.fromstring(pooled)
    cases = root.findall("testsuite/testcase")
    assert int(root.get("tests", "")) == len(cases) > 0
    assert int(root.get("failures", "")) == sum(c.find("failure") is not None for c in cases) > 0
    assert int(root.get("skipped", "")) == sum(c.find("skipped") is not None for c in cases)
    assert b"\0" not in pooled


@pytest.mark.parametrize("records", [3, 90], ids=["one-digit-counts", "longer-head"])
@pytest.mark.parametrize("workers", ["0", "2"])
def test_junit_into_a_file_is_the_file_it_writes_to_stdout(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    records: int,
    workers: str,
) -> None:
    # Into an -o file the cases are written after room for the shortest head and moved along by what the
    # head takes more (none with one-digit counts); to stdout they wait in a temporary file. Same bytes.
    rules, traces = hostile_suite(tmp_path)
    traces.write_text("".join(json.dumps(r) + "\n" for r in hostile_records(records)), encoding="utf-8")
    argv = ["check", str(rules), str(traces), "--format", "junit", "--workers", workers]
    monkeypatch.setattr(checkpool, "INLINE", 2)
    monkeypatch.setattr(checkpool, "CHUNK", 2000)
    monkeypatch.setattr(check_ci, "_MOVE", 4096)  # a move in many steps, each overlapping the one before
    assert run([*argv, "-o", str(tmp_path / "out.xml")]) == 1
    capsys.readouterr()
    assert run(argv) == 1
    printed = capsys.readouterr().out.encode("utf-8")
    written = (tmp_path / "out.xml").read_bytes()
    assert written == printed
    root = ET.fromstring(written)
    assert int(root.get("tests", "")) == len(root.findall("testsuite/testcase")) == 3 * records
    assert b"\0" not in written


def test_junit_moves_its_cases_past_what_the_file_held_before(tmp_path: Path) -> None:
    rules, _ = hostile_suite(tmp_path, ONE_GROUP)
    ruleset = load_rules(rules)
    parts = [b"\x001 1 0\x00<c%d/>\n" % k for k in range(12)]  # 12 cases: two digits, the head moves
    alone = JunitOutput(io.StringIO(), source="x", ruleset=ruleset)
    alone.start()
    for part in parts:
        alone.write(part)
    alone.finish(Totals())
    expected = alone.out.getvalue().encode()  # type: ignore[attr-defined]
    with (tmp_path / "out.xml").open("w+", encoding="utf-8") as file:
        file.write("before\n")
        out = JunitOutput(file, source="x", ruleset=ruleset)
        out.start()
        assert out._file is not None  # the cases go into the file itself
        for part in parts:
            out.write(part)
        out.finish(Totals())
        file.write("after\n")  # the stream is left at the file's end
    assert (tmp_path / "out.xml").read_bytes() == b"before\n" + expected + b"after\n"
    assert b'tests="12" failures="12"' in expected


def test_junit_into_a_file_only_writable_waits_in_a_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A file we may not read back (open_output falls back to "w"): the cases cannot be moved in it.
    rules, traces = hostile_suite(tmp_path)
    opened = Path.open

    def no_reading(path: Path, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if mode == "w+":
            raise PermissionError(13, "Permission denied")
        return opened(path, mode, *args, **kwargs)

    argv = ["check", str(rules), str(traces), "--format", "junit", "--workers", "0", "-o"]
    assert run([*argv, str(tmp_path / "moved.xml")]) == 1
    monkeypatch.setattr(Path, "open", no_reading)
    assert run([*argv, str(tmp_path / "copied.xml")]) == 1
    assert (tmp_path / "copied.xml").read_bytes() == (tmp_path / "moved.xml").read_bytes()


def test_junit_without_positioned_writes_waits_in_a_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Where os has no pread/pwrite (Windows), the cases cannot be moved: the temporary file's way.
    rules, traces = hostile_suite(tmp_path)
    argv = ["check", str(rules), str(traces), "--format", "junit", "--workers", "0", "-o"]
    assert run([*argv, str(tmp_path / "moved.xml")]) == 1
    monkeypatch.delattr(os, "pwrite")
    with (tmp_path / "probe.xml").open("w+", encoding="utf-8") as file:
        assert check_ci._rewritable(file) is None
    assert run([*argv, str(tmp_path / "copied.xml")]) == 1
    assert (tmp_path / "copied.xml").read_bytes() == (tmp_path / "moved.xml").read_bytes()


def test_junit_into_a_named_pipe_is_the_file_and_the_pipe_is_only_written(tmp_path: Path) -> None:
    # A pipe is opened to write alone (opened to read too, it would keep this writer blocked rather than
    # ended once its reader goes away): the cases wait in a temporary file, as for stdout.
    rules, traces = hostile_suite(tmp_path)
    argv = ["check", str(rules), str(traces), "--format", "junit", "--workers", "0", "-o"]
    assert run([*argv, str(tmp_path / "file.xml")]) == 1
    with open_output(tmp_path / "new.xml") as out:
        assert out.buffer.readable()  # type: ignore[attr-defined]
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    read: list[bytes] = []
    reader = threading.Thread(target=lambda: read.append(pipe.read_bytes()))
    reader.start()
    with open_output(pipe) as out:
        assert not out.buffer.readable()  # type: ignore[attr-defined]
    reader.join(10)
    reader = threading.Thread(target=lambda: read.append(pipe.read_bytes()))
    reader.start()
    assert run([*argv, str(pipe)]) == 1
    reader.join(10)
    assert read == [b"", (tmp_path / "file.xml").read_bytes()]


@pytest.mark.parametrize("workers", ["0", "2"])
def test_junit_run_that_fails_midway_leaves_no_half_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: str
) -> None:
    # A bad record after cases were written: exit 2, and the file holds nothing, as before its cases went
    # into it (never a hole where the head would have gone, nor cases without their suite).
    rules, traces = hostile_suite(tmp_path)
    lines = traces.read_text(encoding="utf-8").splitlines(keepends=True)
    traces.write_text("".join(lines[:60]) + "{not json\n" + "".join(lines[60:]), encoding="utf-8")
    monkeypatch.setattr(checkpool, "INLINE", 2)
    monkeypatch.setattr(checkpool, "CHUNK", 2000)
    out = tmp_path / "out.xml"
    argv = ["check", str(rules), str(traces), "--format", "junit", "--workers", workers, "-o", str(out)]
    assert run(argv) == 2
    assert not out.exists()  # written beside its name, and never renamed into place


def test_junit_run_that_fails_midway_says_its_own_error_when_the_file_cannot_be_put_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rules, traces = hostile_suite(tmp_path)
    lines = traces.read_text(encoding="utf-8").splitlines(keepends=True)
    traces.write_text("".join(lines[:60]) + "{not json\n" + "".join(lines[60:]), encoding="utf-8")

    def unwritable(self: JunitOutput) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(JunitOutput, "abandon", unwritable)
    argv = ["check", str(rules), str(traces), "--format", "junit", "--workers", "0"]
    assert run([*argv, "-o", str(tmp_path / "out.xml")]) == 2
    err = capsys.readouterr().err
    assert "line 61" in err and "No space" not in err


# What XML cannot hold (C0 controls, U+FFFE, U+FFFF), the neighbours of U+FFFE in UTF-8 (U+F000 to U+FFFD
# share its lead byte), markup, and anything else but lone surrogates (no UTF-8 for them).
XML_TEXT = st.text(
    alphabet=st.one_of(
        st.characters(blacklist_categories=("Cs",)),
        st.sampled_from("\ufffe\uffff\ufffd\uf000\uefff&<>\"'\x00\x1b\x0b\t\r\n·❌"),
    )
)


@settings(max_examples=400, deadline=None)
@given(XML_TEXT)
@example("a\ufffe b")
@example("\uffff<&>")
@example("\uf000\ufffd")
@example("tab\tcr\rnl\n")
def test_a_block_is_escaped_as_elementtree_escapes_it(text: str) -> None:
    element = ET.Element("failure")
    element.text = xml_text(text)
    written = ET.tostring(element, encoding="unicode").encode("utf-8")
    expected = written[len(b"<failure>") : -len(b"</failure>")] if text else b""
    assert _xml(text) == expected


def test_junit_write_sums_framed_counts_and_refuses_a_part_without_them(tmp_path: Path) -> None:
    rules, _ = hostile_suite(tmp_path, ONE_GROUP)
    out = JunitOutput(io.StringIO(), source="x", ruleset=load_rules(rules))
    out.start()
    out.write(b"\x002 1 0\x00<a/>\x001 0 1\x00<b/>")
    out.write(b"")  # a chunk whose traces --failures-only all left out
    assert out._counts == {"tests": 3, "failures": 1, "errors": 0, "skipped": 1}
    for broken in (b"<c/>", b"\x001 0\x00<c/>", b"\x001 0 0\x00<c/>\x00", b"\x001 x 0\x00<c/>"):
        with pytest.raises(RuntimeError, match="without its counts"):
            out.write(broken)
    assert out._counts["tests"] == 3  # nothing counted from a broken part
    out._body.close()


# -- text's blocks ----------------------------------------------------------------------------------------
COLOURED = Palette(fail="\x1b[1;31m❌ FAIL\x1b[0m", warn="W", mark="\x1b[31m← v\x1b[0m")


def plain_records(n: int = 60) -> list[dict[str, Any]]:
    """Traces whose calls all have the usual arguments (``Calls`` makes their list at once, the windows are
    cut from it), some names not ASCII or not printable, some arguments too long to show whole."""
    rng = random.Random(7)
    names = ["VerifyIdentity", "DeleteCustomer", "SendEmail", "A", "B", "C", "ünï", "a\x1bb", "drop_x"]
    records = []
    for k in range(n):
        calls = [
            {
                "tool_name": rng.choice(names),
                "arguments": {"q": rng.randint(0, 99), "key": rng.choice(["k1", "ü→", "x" * 70])},
                "status": "error" if rng.random() < 0.1 else "ok",
            }
            for _ in range(rng.choice([0, 1, 5, 12, 13, 20, 30, 45]))
        ]
        records.append({"trace_id": rng.choice([f"p{k}", f"p{k}\x1b", f"p{k}é"]), "calls": calls})
    return records


@pytest.mark.parametrize("palette", [PLAIN_PALETTE, COLOURED], ids=["plain", "coloured"])
def test_text_blocks_are_the_violation_words_around_the_window(palette: Palette, tmp_path: Path) -> None:
    # ``_blocks`` cuts the windows and says the words itself (no call per violation): what it writes must
    # be what ``violation_words`` and ``Calls.window_bytes``, the general pieces junit uses too, put
    # together, for hostile traces (empty, short, long, past SCREEN_WHOLE, escapes, non-ASCII) and for
    # violations whose call is None or out of range or whose rule is missing from the report.
    rules, _ = hostile_suite(tmp_path)
    checker = Checker(Engine(load_rules(rules)), 0.85, "medium")
    seen = cut = 0
    for record in hostile_records() + plain_records():
        trace = plain_trace(record, None)
        assert trace is not None
        cut += Calls(trace).encoded() is not None and len(trace.names) > SHORT_TRACE
        data = checker.data(trace)
        odd = [
            {**v, "offending_call_index": call} for v in data["violations"][:1] for call in (None, -1, 999)
        ]
        odd += [{**v, "rule_id": "gone", "suggestion": None} for v in data["violations"][:1]]
        for violations in (data["violations"], data["violations"] + odd):
            report = {**data, "violations": violations}
            calls = Calls(trace)
            expected = b""
            for v in violations:
                rule = next((r for r in reversed(data["rules"]) if r["rule_id"] == v["rule_id"]), None)
                before, after = violation_words(v, rule)
                head = palette.fail_head if v["severity"] == "critical" else palette.warn_head
                window = calls.window_bytes(v["offending_call_index"], palette)
                assert window.decode() == calls.window(v["offending_call_index"], palette.mark)
                expected += b"%s%s \xc2\xb7 %s%s%s\n\n" % (
                    head,
                    terminal(str(data["trace_id"])).encode(),
                    before.encode(),
                    window,
                    after.encode(),
                )
            line = verdict_line(
                data["verdict"],
                data["trace_id"],
                data["sequence_correctness_score"],
                data["rules_passed"],
                data["total_rules_checked"],
                len(violations),
                palette,
            )
            assert report_bytes(trace, report, palette) == expected + line.encode() + b"\n"
            seen += len(violations)
    assert seen > 200 and cut > 20


def test_rule_result_is_found_wherever_the_last_report_had_it() -> None:
    # Reports of one run list their rules in one order, so a rule is first looked for where it was found
    # last; a report in another order, a shorter one or one without the rule must still be answered right.
    a, b, c = ({"rule_id": r, "type": "before"} for r in ("a", "b", "c"))
    assert rule_result([a, b, c], "c") is c
    assert rule_result([c, a, b], "c") is c  # where "c" was is "b" now
    assert rule_result([c], "c") is c and rule_result([a], "c") is None  # shorter; without it
    assert rule_result([a, b, c, {"rule_id": "c", "type": "after"}], "c")["type"] == "after"  # (the last)
