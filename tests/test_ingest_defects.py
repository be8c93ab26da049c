"""Issue 14's eight defects, one test (or more) each; every input is written here from the documented shapes.

Each test failed on the code before the fix (checked by running it against main's src with PYTHONPATH).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from ingest_support import lines, write
from seqjudge.cli import run
from seqjudge.errors import InputError
from seqjudge.ingest import load_traces
from seqjudge.trace import Trace


def calls(trace: Trace) -> list[tuple[str, str, int]]:
    return [(c.tool_name, c.status, s) for c, s in zip(trace.calls, trace.steps, strict=True)]


# --- 1. the format is chosen from every record, not the first -------------------------------------------


def test_anthropic_request_bodies_whose_first_has_no_tool_block_are_read_as_anthropic(tmp_path: Path) -> None:
    body = {"model": "claude-sonnet-4-5", "max_tokens": 512}
    path = write(
        tmp_path,
        "requests.jsonl",
        lines(
            body | {"messages": [{"role": "user", "content": "Hello"}]},
            body
            | {
                "messages": [
                    {"role": "user", "content": "Weather in Paris?"},
                    {
                        "role": "assistant",
                        "content": [
                            {"type": "text", "text": "Checking."},
                            {
                                "type": "tool_use",
                                "id": "toolu_01",
                                "name": "get_weather",
                                "input": {"city": "Paris"},
                            },
                        ],
                    },
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "sunny"}],
                    },
                ]
            },
        ),
    )
    first, second = load_traces(path)
    assert first.calls == []
    assert calls(second) == [("get_weather", "ok", 0)]
    assert second.calls[0].arguments == {"city": "Paris"} and second.calls[0].output == "sunny"


# --- 2. OpenTelemetry results do not depend on span order ------------------------------------------------


def _span(
    span_id: str, parent: str | None, name: str, start: int, end: int, **attributes: Any
) -> dict[str, Any]:
    return {
        "traceId": "7f3a",
        "spanId": span_id,
        "parentSpanId": parent or "",
        "name": name,
        "startTimeUnixNano": str(1_700_000_000_000_000_000 + start * 1_000_000_000),
        "endTimeUnixNano": str(1_700_000_000_000_000_000 + end * 1_000_000_000),
        "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attributes.items()],
        "status": {},
    }


ROOT = _span("r", None, "invoke_agent support", 0, 10, **{"gen_ai.operation.name": "invoke_agent"})
TOOLS = [
    _span(
        "a",
        "r",
        "execute_tool find_order",
        1,
        2,
        **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "find_order"},
    ),
    _span(
        "b",
        "r",
        "execute_tool refund",
        3,
        4,
        **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "refund"},
    ),
]


def test_a_flat_span_export_root_first_gives_one_whole_trace(tmp_path: Path) -> None:
    path = write(tmp_path, "spans.jsonl", lines(ROOT, *TOOLS))  # start-time order: the root comes first
    (trace,) = load_traces(path)
    assert calls(trace) == [("find_order", "ok", 0), ("refund", "ok", 1)]


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
def test_every_span_order_gives_the_same_trace(order: tuple[int, ...], tmp_path: Path) -> None:
    spans = [ROOT, *TOOLS]
    path = write(tmp_path, "spans.jsonl", lines(*(spans[i] for i in order)))
    (trace,) = load_traces(path)
    assert [c.tool_name for c in trace.calls] == ["find_order", "refund"] and trace.trace_id == "7f3a"


def test_spans_of_one_trace_split_over_export_batches_in_any_order(tmp_path: Path) -> None:
    def batch(*spans: dict[str, Any]) -> dict[str, Any]:
        return {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": list(spans)}]}]}

    path = write(tmp_path, "export.jsonl", lines(batch(TOOLS[1]), batch(ROOT), batch(TOOLS[0])))
    (trace,) = load_traces(path)
    assert [c.tool_name for c in trace.calls] == ["find_order", "refund"]


def test_spans_held_past_the_memory_bound_give_the_same_traces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from seqjudge.ingest import holding

    path = write(
        tmp_path, "spans.jsonl", lines(TOOLS[1], ROOT, TOOLS[0], *(t | {"traceId": "other"} for t in TOOLS))
    )
    in_memory = [t.model_dump(mode="json") for t in load_traces(path)]
    monkeypatch.setattr(holding, "LIMIT", 10)  # every call goes to the temporary file
    spilled = [t.model_dump(mode="json") for t in load_traces(path)]
    assert spilled == in_memory and [len(t["calls"]) for t in spilled] == [2, 2]


# --- 3. an export with no GenAI tool span is not "0 traces, exit 0" -------------------------------------


def test_an_openinference_export_is_read_not_silently_empty(tmp_path: Path) -> None:
    tool = _span(
        "t",
        "r",
        "lookup",
        1,
        2,
        **{"openinference.span.kind": "TOOL", "tool.name": "lookup", "input.value": '{"q": "x"}'},
    )
    chain = _span("r", None, "agent", 0, 3, **{"openinference.span.kind": "AGENT"})
    path = write(tmp_path, "phoenix.jsonl", lines(chain, tool))
    (trace,) = load_traces(path)
    assert calls(trace) == [("lookup", "ok", 0)] and trace.calls[0].arguments == {"q": "x"}


def test_an_export_with_no_agent_span_is_exit_2_saying_what_was_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    http = _span("h", None, "GET /orders", 0, 1, **{"http.request.method": "GET"})
    path = write(tmp_path, "http.jsonl", lines(http, http | {"spanId": "h2"}))
    assert run(["convert", str(path), "-o", str(tmp_path / "out.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "no trace came out of this file (2 record(s) read as" in err
    assert "skipped 2 spans no agent convention marks" in err and "--allow-empty" in err
    assert run(["convert", str(path), "--allow-empty", "-o", str(tmp_path / "out.jsonl")]) == 0
    assert (tmp_path / "out.jsonl").read_text() == ""


# --- 4. arguments and results recorded outside gen_ai.tool.call.* ----------------------------------------


def test_tool_arguments_and_results_in_span_events(tmp_path: Path) -> None:
    span = _span(
        "s",
        None,
        "execute_tool search",
        1,
        2,
        **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"},
    )
    span["events"] = [
        {
            "name": "gen_ai.tool.message",
            "timeUnixNano": "1700000001000000000",
            "attributes": [
                {"key": "role", "value": {"stringValue": "tool"}},
                {"key": "content", "value": {"stringValue": '{"query": "flights"}'}},
                {"key": "id", "value": {"stringValue": "tooluse_1"}},
            ],
        },
        {
            "name": "gen_ai.choice",
            "timeUnixNano": "1700000002000000000",
            "attributes": [{"key": "message", "value": {"stringValue": "3 flights"}}],
        },
    ]
    (trace,) = load_traces(write(tmp_path, "strands.jsonl", lines(span)))
    assert trace.calls[0].arguments == {"query": "flights"} and trace.calls[0].output == "3 flights"


def test_pydantic_ai_tool_arguments_and_tool_response(tmp_path: Path) -> None:
    span = _span(
        "s",
        None,
        "running tool",
        1,
        2,
        **{
            "gen_ai.tool.name": "roll_die",
            "gen_ai.tool.call.id": "call_9",
            "tool_arguments": '{"sides": 6}',
            "tool_response": "4",
        },
    )
    (trace,) = load_traces(write(tmp_path, "pydantic.jsonl", lines(span)))
    assert (trace.calls[0].tool_name, trace.calls[0].id) == ("roll_die", "call_9")
    assert trace.calls[0].arguments == {"sides": 6} and trace.calls[0].output == "4"


# --- 5. Assay: Assay's own call order, final_output once -------------------------------------------------


def test_assay_calls_follow_step_idx_and_call_index_not_event_position(tmp_path: Path) -> None:
    ep = {"episode_id": "ep"}
    path = write(
        tmp_path,
        "assay.jsonl",
        lines(
            ep | {"type": "episode_start", "timestamp": 1000, "input": {"prompt": "Tidy up"}},
            ep | {"type": "step", "step_id": "s0", "idx": 0, "timestamp": 1100, "content": "list"},
            ep | {"type": "step", "step_id": "s1", "idx": 1, "timestamp": 1200, "content": "approve"},
            ep | {"type": "step", "step_id": "s2", "idx": 2, "timestamp": 1300, "content": "Done."},
            ep
            | {
                "type": "tool_call",
                "step_id": "s0",
                "call_index": 0,
                "timestamp": 1110,
                "tool_name": "list",
                "result": "a",
            },
            ep
            | {
                "type": "tool_call",
                "step_id": "s2",
                "call_index": 0,
                "timestamp": 1310,
                "tool_name": "delete",
                "result": "ok",
            },
            # written last by Assay's MCP importer: the call nobody answered, though its step came second
            ep
            | {
                "type": "tool_call",
                "step_id": "s1",
                "call_index": 0,
                "timestamp": 1400,
                "tool_name": "approve",
            },
            ep | {"type": "episode_end", "timestamp": 1500, "outcome": "pass", "final_output": "Done."},
        ),
    )
    (trace,) = load_traces(path)
    assert [c.tool_name for c in trace.calls] == ["list", "approve", "delete"]
    assert trace.steps == [0, 1, 2]
    assert [m.content for m in trace.messages].count("Done.") == 1


# --- 6. Anthropic server tools answered inside one message are sequential -------------------------------


def test_server_tool_calls_answered_in_the_same_message_are_separate_steps(tmp_path: Path) -> None:
    message = {
        "role": "assistant",
        "content": [
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "a"}},
            {
                "type": "web_search_tool_result",
                "tool_use_id": "srvtoolu_1",
                "content": [{"type": "web_search_result", "url": "https://a.example", "title": "A"}],
            },
            {"type": "server_tool_use", "id": "srvtoolu_2", "name": "web_search", "input": {"query": "b"}},
            {
                "type": "web_search_tool_result",
                "tool_use_id": "srvtoolu_2",
                "content": {"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"},
            },
            {"type": "text", "text": "Found it."},
        ],
    }
    path = write(
        tmp_path, "server.json", json.dumps({"messages": [{"role": "user", "content": "Search"}, message]})
    )
    (trace,) = load_traces(path)
    assert calls(trace) == [("web_search", "ok", 0), ("web_search", "error", 1)]


# --- 7. concatenated JSON objects -------------------------------------------------------------------------


def test_console_span_exporter_output_is_read(tmp_path: Path) -> None:
    def console(span_id: str, parent: str | None, name: str, start: str, attributes: dict[str, Any]) -> str:
        span = {
            "name": name,
            "context": {
                "trace_id": "0x5b8aa5a2d2c872e8321cf37308d69df2",
                "span_id": span_id,
                "trace_state": "[]",
            },
            "kind": "SpanKind.INTERNAL",
            "parent_id": parent,
            "start_time": start,
            "end_time": start.replace(":01.", ":02."),
            "status": {"status_code": "UNSET"},
            "attributes": attributes,
            "events": [],
            "links": [],
            "resource": {"attributes": {"service.name": "agent"}, "schema_url": ""},
        }
        return json.dumps(span, indent=4)  # the exporter pretty-prints each span, one after another

    text = "\n".join(
        [
            console(
                "0x01",
                None,
                "invoke_agent",
                "2025-05-20T10:00:01.000000Z",
                {"gen_ai.operation.name": "invoke_agent"},
            ),
            console(
                "0x02",
                "0x01",
                "execute_tool ls",
                "2025-05-20T10:00:01.500000Z",
                {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "ls"},
            ),
        ]
    )
    (trace,) = load_traces(write(tmp_path, "console.json", text + "\n"))
    assert [c.tool_name for c in trace.calls] == ["ls"]


def test_jq_style_pretty_objects_of_native_traces(tmp_path: Path) -> None:
    text = (
        json.dumps({"trace_id": "a", "calls": ["x"]}, indent=2)
        + "\n"
        + json.dumps({"trace_id": "b", "calls": []}, indent=2)
    )
    with pytest.raises(InputError, match="not a native trace|calls"):
        list(load_traces(write(tmp_path, "bad.json", text.replace('["x"]', "[1]"))))
    text = (
        json.dumps({"trace_id": "a", "calls": [{"tool_name": "x"}]}, indent=2)
        + "\n"
        + json.dumps({"trace_id": "b", "calls": [{"tool_name": "y"}]}, indent=2)
    )
    first, second = load_traces(write(tmp_path, "jq.json", text))
    assert (first.trace_id, second.trace_id) == ("a", "b") and second.calls[0].tool_name == "y"


# --- 8. an ellipsis survives the error renderer -----------------------------------------------------------


def test_error_text_ending_in_an_ellipsis_keeps_it() -> None:
    error = InputError(
        "it is an object with keys a, b, c, d, e, f, g, h, ...", source="x.json", hint="Fix it."
    )
    assert str(error) == "x.json: it is an object with keys a, b, c, d, e, f, g, h, ... Fix it."
    assert str(InputError("plain problem", hint="plain hint")) == "plain problem. plain hint."
