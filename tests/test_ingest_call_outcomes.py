"""Issue 38.4: calls that never completed counted as successful. A Claude Code ``tool_use`` without an ``id``
or a Codex ``function_call`` without a ``call_id`` can never be answered, yet was imported as ok; a native
call with an ``error`` and no ``status`` satisfied ``require``; ``"status": "ok"`` beside an ``error`` was
accepted silently. Now: an unanswerable call is failed "never answered", an error alone means failed, and ok
with an error is exit 2 naming the call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ingest_support import lines, write
from seqjudge.cli import run
from seqjudge.errors import InputError
from seqjudge.ingest import load_traces
from seqjudge.ingest.base import NEVER_ANSWERED_NO_ID
from seqjudge.trace import Trace

RULES = (
    "rules:\n  - {id: tests-first, type: before, first: run_tests, then: deploy}\n"
    "  - {id: verified, type: require, tool: verify_identity}\n"
)


def checked(tmp_path: Path, name: str, text: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, Any]:
    """`check --format json` of one input: its exit code and each trace's failed rule ids, or its error
    message when there is no report."""
    rules = write(tmp_path, "rules.yaml", RULES)
    path = write(tmp_path, name, text)
    code = run(["check", str(rules), str(path), "--format", "json"])
    out, err = capsys.readouterr()
    if code not in (0, 1):
        return code, err
    return code, [sorted(v["rule_id"] for v in r["violations"]) for r in json.loads(out)["reports"]]


def outcomes(path: Path) -> list[tuple[str, str, Any]]:
    (trace,) = load_traces(path)
    return [(c.tool_name, c.status, c.error) for c in trace.calls]


# --- calls nothing can answer ---

CLAUDE_CODE = [
    {"type": "user", "sessionId": "s", "uuid": "1", "message": {"role": "user", "content": "ship it"}},
    {
        "type": "assistant",
        "sessionId": "s",
        "uuid": "2",
        "message": {
            "id": "m1",
            "role": "assistant",
            "content": [
                {"type": "tool_use", "name": "verify_identity", "id": "t0", "input": {}},
                {"type": "tool_use", "name": "run_tests", "input": {}},  # no id: nothing can answer it
            ],
        },
    },
    {
        "type": "user",
        "sessionId": "s",
        "uuid": "3",
        "message": {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t0", "content": "ok"}],
        },
    },
    {
        "type": "assistant",
        "sessionId": "s",
        "uuid": "4",
        "message": {
            "id": "m2",
            "role": "assistant",
            "content": [{"type": "tool_use", "name": "deploy", "id": "t2", "input": {}}],
        },
    },
    {
        "type": "user",
        "sessionId": "s",
        "uuid": "5",
        "message": {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "ok"}],
        },
    },
]


def codex_line(payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": "2025-01-01T00:00:00Z", "type": "response_item", "payload": payload}


CODEX = [
    {"timestamp": "2025-01-01T00:00:00Z", "type": "session_meta", "payload": {"id": "sess"}},
    codex_line({"type": "function_call", "name": "verify_identity", "arguments": "{}", "call_id": "c0"}),
    codex_line({"type": "function_call_output", "call_id": "c0", "output": "ok"}),
    codex_line({"type": "function_call", "name": "run_tests", "arguments": "{}"}),  # no call_id, no id
    codex_line({"type": "function_call", "name": "deploy", "arguments": "{}", "call_id": "c2"}),
    codex_line({"type": "function_call_output", "call_id": "c2", "output": "done"}),
]


@pytest.mark.parametrize(("name", "records"), [("cc.jsonl", CLAUDE_CODE), ("rollout.jsonl", CODEX)])
def test_a_call_without_an_id_is_never_answered_and_fails_what_needs_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, records: list[dict[str, Any]]
) -> None:
    path = write(tmp_path, name, lines(*records))
    assert outcomes(path) == [
        ("verify_identity", "ok", None),
        ("run_tests", "error", NEVER_ANSWERED_NO_ID),
        ("deploy", "ok", None),
    ]
    assert checked(tmp_path, name, lines(*records), capsys) == (1, [["tests-first"]])


def test_other_importers_fail_a_call_without_an_id_the_same_way(tmp_path: Path) -> None:
    chat = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"type": "function", "function": {"name": "run_tests", "arguments": "{}"}}],
        },
    ]
    anthropic = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "name": "run_tests", "input": {}}]},
    ]
    for name, messages in (("chat.json", chat), ("anthropic.json", anthropic)):
        path = write(tmp_path, name, json.dumps({"messages": messages}))
        assert outcomes(path) == [("run_tests", "error", NEVER_ANSWERED_NO_ID)], name


def test_an_answered_inline_call_without_an_id_stays_ok(tmp_path: Path) -> None:
    # A call whose item holds its own outcome (mcp_call) needs no id to be answered.
    item = {"type": "mcp_call", "name": "run_tests", "arguments": "{}", "output": "passed"}
    path = write(tmp_path, "responses.json", json.dumps({"input": [item]}))
    assert outcomes(path) == [("run_tests", "ok", None)]


# --- the native format's error and status ---

FAILED_CHECK = {"tool_name": "verify_identity", "error": "identity check FAILED"}


@pytest.mark.parametrize(
    "call",
    [
        FAILED_CHECK,
        {**FAILED_CHECK, "arguments": {}},
        {**FAILED_CHECK, "timestamp": 1},  # not plain: the model path
        {**FAILED_CHECK, "error": {"code": 7}},
    ],
)
def test_an_error_without_a_status_is_a_failed_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], call: dict[str, Any]
) -> None:
    trace = {"trace_id": "t", "calls": [call, {"tool_name": "run_tests"}, {"tool_name": "deploy"}]}
    # check reads JSONL lines without models where it can; a document and the library read them with models
    assert checked(tmp_path, "t.jsonl", lines(trace), capsys) == (1, [["verified"]])
    assert checked(tmp_path, "t.json", json.dumps([trace]), capsys) == (1, [["verified"]])
    assert outcomes(write(tmp_path, "one.json", json.dumps(trace)))[0][:2] == ("verify_identity", "error")
    assert Trace.model_validate(trace).calls[0].status == "error"


def test_a_null_error_is_no_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    calls = [{"tool_name": n, "error": None} for n in ("verify_identity", "run_tests", "deploy")]
    assert checked(tmp_path, "t.jsonl", lines({"calls": calls}), capsys) == (0, [[]])


@pytest.mark.parametrize(
    ("name", "text", "where"),
    [
        (
            "t.jsonl",
            lines({"calls": [{"tool_name": "a"}, {"tool_name": "b", "status": "ok", "error": "x"}]}),
            "line 1, calls[1]",
        ),
        (
            "t.json",
            json.dumps([{"calls": []}, {"calls": [{"tool_name": "b", "status": "ok", "error": "x"}]}]),
            "[1].calls[0]",
        ),
        ("t.json", json.dumps([{"tool_name": "a"}, {"tool_name": "b", "status": "ok", "error": "x"}]), "[1]"),
        # calls reordered by their timestamps: the path is still the input's
        (
            "t.jsonl",
            lines(
                {
                    "calls": [
                        {"tool_name": "b", "timestamp": 2, "status": "ok", "error": "x"},
                        {"tool_name": "a", "timestamp": 1},
                    ]
                }
            ),
            "line 1, calls[0]",
        ),
    ],
)
def test_ok_with_an_error_is_bad_input_naming_the_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str, where: str
) -> None:
    text = text.replace('"x"', '"token=Sup3rSecret"')
    code, err = checked(tmp_path, name, text, capsys)
    assert code == 2
    assert f'{name}, {where}: this call has "status": "ok" and also an error' in err
    assert "Sup3rSecret" not in err  # the error's text is not quoted
    with pytest.raises(InputError):
        list(load_traces(tmp_path / name))


def test_a_stored_trace_with_ok_and_an_error_still_reads_back() -> None:
    # Runs stored before this change may hold such calls: the model keeps reading them as they were.
    text = json.dumps({"calls": [{"tool_name": "a", "status": "ok", "error": "x"}]})
    call = Trace.model_validate_json(text).calls[0]
    assert (call.status, call.error) == ("ok", "x")
    again = Trace.model_validate_json(Trace.model_validate({"calls": [FAILED_CHECK]}).model_dump_json())
    assert again.calls[0].status == "error"
