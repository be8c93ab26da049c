"""Malformed trace inputs: each ends `seqjudge convert` with exit 2 and one message naming the file, the line
or record (and the JSON path) and the problem; never a traceback, never a half-written output file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from seqjudge.cli import run


@dataclass
class Case:
    name: str
    filename: str
    text: str | bytes
    where: str  # the line / record / path the message must name
    needles: tuple[str, ...]  # what is wrong, in the message's words
    args: tuple[str, ...] = ()


def chat(*messages: dict[str, object]) -> str:
    return json.dumps({"messages": list(messages)}) + "\n"


def otlp(*spans: dict[str, object]) -> str:
    return json.dumps(
        {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": list(spans)}]}]}
    )


TOOL_SPAN = {
    "traceId": "aaaa",
    "spanId": "s1",
    "name": "execute_tool search",
    "startTimeUnixNano": "1700000000000000000",
    "endTimeUnixNano": "1700000001000000000",
    "attributes": [
        {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
        {"key": "gen_ai.tool.name", "value": {"stringValue": "search"}},
    ],
}

CASES = [
    Case(
        "bad JSON in a JSONL line",
        "t.jsonl",
        '{"calls": []}\n{"calls": [}\n',
        "line 2, column 12",
        ("bad JSON", "Expecting value"),
    ),
    Case(
        "bad JSON in a document",
        "t.json",
        '{\n  "calls": [\n    {"tool_name": "A",}\n  ]\n}\n',
        "line 3, column 23",
        ("bad JSON", "double quotes"),
    ),
    Case(
        "truncated document",
        "t.json",
        '{"calls": [{"tool_name": "A"}, {"tool_na',
        "line 1, column",
        ("bad JSON", "truncated"),
    ),
    Case(
        "truncated last JSONL line",
        "t.jsonl",
        '{"calls": [{"tool_name": "A"}]}\n{"calls": [{"tool',
        "line 2, column",
        ("bad JSON", "truncated"),
    ),
    # Issue 17.16: a cut-off record ending in a newline was reported at the line after it ("line 4").
    Case(
        "cut-off third record of a three-line JSONL file",
        "t.jsonl",
        '{"calls": [{"tool_name": "A"}]}\n{"calls": [{"tool_name": "A"}]}\n{"calls": [{"tool_name": "A"\n',
        "line 3, column 29",
        ("bad JSON", "truncated"),
    ),
    Case(
        "record split over two JSONL lines",
        "t.jsonl",
        '{"calls": []}\n{"calls": [],\n "trace_id": "b"}\n',
        "line 2, column 14",
        ("bad JSON", "split over several lines"),
    ),
    Case(
        "cut-off second value of concatenated documents",
        "t.json",
        '{\n "calls": []\n}\n{\n "trace_id": "b",\n "calls": [\n',
        "line 4:",
        ("the record that starts here is cut off", "truncated"),
    ),
    Case(
        "missing tool_name",
        "t.jsonl",
        '{"calls": [{"tool_name": "A"}, {"name": "B"}]}\n',
        "line 1, calls[1]",
        ("has no tool_name", "non-empty tool_name"),
    ),
    Case(
        "empty tool_name",
        "t.jsonl",
        '{"calls": [{"tool_name": ""}]}\n',
        "line 1, calls[0].tool_name",
        ("is empty",),
    ),
    Case(
        "wrong status",
        "t.json",
        '{"calls": [{"tool_name": "A", "status": "failed"}]}',
        "calls[0].status",
        ('"failed"', "'ok' or 'error'"),
    ),
    Case(
        "calls not a list",
        "t.jsonl",
        '{"calls": {"tool_name": "A"}}\n',
        "line 1, calls",
        ("is an object with keys tool_name", "valid list"),
    ),
    Case(
        "bad timestamp",
        "t.jsonl",
        '{"calls": [{"tool_name": "A", "timestamp": "yesterday"}]}\n',
        "line 1, calls[0].timestamp",
        ("'yesterday'", "neither ISO 8601"),
    ),
    Case(
        "non-adjacent step labels",
        "t.jsonl",
        '{"calls": [{"tool_name": "A", "step": 1}, {"tool_name": "B", "step": 2}, '
        '{"tool_name": "C", "step": 1}]}\n',
        "line 1",
        ("calls[2] has step 1", "adjacent"),
    ),
    Case(
        "duplicate trace ids",
        "t.jsonl",
        '{"trace_id": "x", "calls": []}\n{"trace_id": "x", "calls": []}\n',
        "line 2",
        ("duplicate trace id 'x'", "already used at", "line 1"),
    ),
    Case(
        "tool result with an unknown call id (OpenAI)",
        "c.jsonl",
        chat(
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "call_9", "content": "?"},
        ),
        "line 1, messages[2].tool_call_id",
        ("'call_9'", "matches no earlier unanswered call", "'call_1'"),
    ),
    Case(
        "tool result with an unknown id (Anthropic)",
        "a.json",
        json.dumps(
            {
                "messages": [
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}],
                    },
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": "toolu_2", "content": "x"}],
                    },
                ]
            }
        ),
        "messages[1].content[0].tool_use_id",
        ("'toolu_2'", "matches no earlier unanswered call"),
    ),
    Case(
        "span without a trace id",
        "spans.json",
        otlp(TOOL_SPAN, {k: v for k, v in TOOL_SPAN.items() if k != "traceId"} | {"spanId": "s2"}),
        "resourceSpans[0].scopeSpans[0].spans[1]",
        ("the span has no trace id",),
    ),
    Case(
        "ambiguous record matching no format",
        "x.json",
        '{"events": [{"name": "search"}]}',
        "x.json",
        ("matches no known trace format", "tried native, claude-code, codex, tau2", "keys events"),
    ),
    Case(
        "a bare list holding a number",
        "t.json",
        '["A", "B", 3]',
        "[2]",
        ("is a number", "bare list holds calls"),
    ),
    Case("an empty tool name in a list of names", "t.json", '["A", ""]', "[1]", ("the tool name is empty",)),
    Case(
        "an OpenAI tool call without a name",
        "c.jsonl",
        chat(
            {
                "role": "assistant",
                "tool_calls": [{"id": "c1", "type": "function", "function": {"arguments": "{}"}}],
            }
        ),
        "line 1, messages[0].tool_calls[0].function.name",
        ("the tool call has no name",),
    ),
    Case(
        "two unanswered calls with one id",
        "c.jsonl",
        chat(
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "dup", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                    {"id": "dup", "type": "function", "function": {"name": "g", "arguments": "{}"}},
                ],
            }
        ),
        "messages[0].tool_calls[1]",
        ("two unanswered calls share the call id 'dup'",),
    ),
    Case(
        "a later record of another format",
        "t.jsonl",
        '{"calls": []}\n' + chat({"role": "user", "content": "x"}),
        "line 2",
        ("not a native trace", "no 'calls'", "it looks like anthropic or openai"),
    ),
    Case(
        "an Assay event after its episode ended",
        "e.jsonl",
        '{"type": "episode_start", "episode_id": "e1", "timestamp": 1}\n'
        '{"type": "episode_end", "episode_id": "e1", "timestamp": 2}\n'
        '{"type": "tool_call", "episode_id": "e1", "step_id": "s", "timestamp": 3, "tool_name": "late"}\n',
        "line 3",
        ("duplicate trace id 'e1'", "line 2", "before its episode_end"),
    ),
    Case(
        "a record that differs from the records before it",
        "mixed.jsonl",
        chat({"role": "user", "content": "hi"})
        + json.dumps({"type": "tool_call", "episode_id": "e", "tool_name": "x"})
        + "\n",
        "line 2",
        ("differs from the records before it", "it looks like assay", "from line 1 on reads as"),
    ),
    Case("not UTF-8", "t.jsonl", b'{"calls": [{"tool_name": "caf\xe9"}]}\n', "line 1", ("not valid UTF-8",)),
    Case(
        "a bad error pattern",
        "t.json",
        '["A"]',
        "--error-pattern",
        ("not a valid regular expression",),
        ("--error-pattern", "("),
    ),
    Case(
        "an unknown trace format",
        "t.json",
        '["A"]',
        "--trace-format",
        ("unknown trace format 'csv'",),
        ("--trace-format", "csv"),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_malformed_input_exits_2_with_a_located_message(
    case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / case.filename
    if isinstance(case.text, bytes):
        path.write_bytes(case.text)
    else:
        path.write_text(case.text, encoding="utf-8")
    out = tmp_path / "out.jsonl"
    code = run(["convert", str(path), *case.args, "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    (message,) = [line for line in err.splitlines() if line.startswith("error:")]
    if not case.where.startswith("--"):
        assert str(path) in message
    assert case.where in message
    for needle in case.needles:
        assert needle in message
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == [case.filename]  # no half-written output left behind


def test_missing_input_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = run(["convert", str(tmp_path / "nope.jsonl"), "-o", str(tmp_path / "out.jsonl")])
    err = capsys.readouterr().err
    assert code == 2 and "nope.jsonl: no such file or directory" in err and "Traceback" not in err


def test_output_folder_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "t.json"
    source.write_text('["A"]')
    code = run(["convert", str(source), "-o", str(tmp_path / "no" / "out.jsonl")])
    assert code == 2 and "the output folder does not exist" in capsys.readouterr().err


def test_at_least_twelve_distinct_malformed_inputs() -> None:
    assert len({c.name for c in CASES}) >= 12
