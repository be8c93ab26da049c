"""Foreign formats: OpenAI chat and Responses, Anthropic, OpenTelemetry GenAI spans and Assay JSONL, each read
from fixtures written from the providers' documented shapes; auto-detection, --trace-format and --error-
pattern; and `seqjudge convert` writing native JSONL that reads back the same.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seqjudge.cli import run
from seqjudge.errors import InputError
from seqjudge.ingest import FORMATS, load_traces
from seqjudge.trace import Trace

FIXTURES = Path(__file__).parent / "fixtures" / "ingest"


def load(name: str, **options: object) -> list[Trace]:
    return list(load_traces(FIXTURES / name, **options))  # type: ignore[arg-type]


def summary(trace: Trace) -> list[tuple[str, str, int]]:
    """(tool, status, step ordinal) per call."""
    return [(c.tool_name, c.status, s) for c, s in zip(trace.calls, trace.steps, strict=True)]


def messages(trace: Trace) -> list[tuple[str, int | None]]:
    return [(m.role, m.at) for m in trace.messages]


# --- OpenAI chat ------------------------------------------------------------------------------------------


def test_openai_chat_parallel_calls_share_a_step_and_results_match_by_id() -> None:
    parallel, unanswered, text_only, empty = load("openai/chat.jsonl")
    assert parallel.trace_id == "chat-parallel"
    assert summary(parallel) == [("get_order", "ok", 0), ("get_weather", "ok", 0), ("cancel_order", "ok", 1)]
    # call_b was answered first; the results still land on the right calls
    assert parallel.calls[1].output == "18C, cloudy"
    assert parallel.calls[0].arguments == {"order_id": "#W1"}
    assert parallel.calls[0].id == "call_a"
    assert parallel.calls[2].arguments == {"order_id": "#W1", "reason": "no longer needed"}
    assert parallel.metadata == {"model": "gpt-4o"}
    # the system prompt is not conversation; content parts become text
    assert [(m.role, m.at) for m in parallel.messages] == [
        ("user", 0),
        ("assistant", 2),
        ("user", 2),
        ("assistant", 2),
        ("assistant", 3),
    ]
    assert parallel.messages[-1].content == "Sorry, it has already shipped."
    assert summary(unanswered) == [("get_order", "ok", 0), ("refund_order", "error", 1)]
    assert unanswered.calls[1].error == "never answered: no tool result for call id call_y"
    assert text_only.calls == [] and messages(text_only) == [("user", 0), ("assistant", 0)]
    assert empty.calls == [] and empty.messages == [] and empty.trace_id == "chat-empty"


def test_openai_error_pattern_marks_text_failures() -> None:
    (parallel, *_rest) = load("openai/chat.jsonl", error_pattern="^Error")
    assert parallel.calls[2].status == "error"
    assert parallel.calls[2].error == "Error: order #W1 is already shipped"
    assert parallel.calls[0].status == "ok"


def test_openai_bare_conversation_keeps_invalid_argument_text() -> None:
    (trace,) = load("openai/conversation.json", error_pattern="^Error")
    assert trace.trace_id == "conversation.json"
    assert summary(trace) == [("search_flights", "ok", 0), ("book_flight", "error", 1)]
    # the model wrote broken JSON arguments: the call is kept, its text too
    assert trace.calls[1].arguments == {}
    assert trace.calls[1].model_extra == {"raw_arguments": '{"flight": "HAT1"'}
    assert messages(trace) == [("user", 0)]


def test_openai_responses_items() -> None:
    (trace,) = load("openai/responses.json", error_pattern="^Error")
    assert summary(trace) == [
        ("get_weather", "ok", 0),
        ("get_weather", "error", 0),
        ("send_email", "error", 1),
    ]
    assert [c.arguments for c in trace.calls[:2]] == [{"city": "Paris"}, {"city": "Rome"}]
    assert trace.calls[2].error == "never answered: no tool result for call id call_s"
    assert messages(trace) == [("user", 0), ("assistant", 2)]
    assert trace.messages[0].content == "What is the weather in Paris and in Rome?"
    assert trace.metadata == {"id": "resp_123", "model": "gpt-4.1"}


def test_openai_records_under_messages_key() -> None:
    first, second = load("openai/records.json", messages_key="traj")
    assert first.trace_id == "records.json[0]" and second.trace_id == "records.json[1]"
    assert summary(first) == [("get_user_details", "ok", 0)]
    assert first.metadata == {"task_id": 7, "reward": 1.0}
    assert second.calls == [] and second.metadata == {"task_id": 8, "reward": 0.0}


def test_messages_key_is_suggested_when_missing() -> None:
    with pytest.raises(InputError, match="pass --messages-key traj"):
        load("openai/records.json")


# --- Anthropic -------------------------------------------------------------------------------------------


def test_anthropic_request_body() -> None:
    (trace,) = load("anthropic/conversation.json")
    assert summary(trace) == [
        ("get_weather", "ok", 0),
        ("get_weather", "error", 0),
        ("send_email", "error", 1),
    ]
    assert trace.calls[1].error == "service unavailable"  # is_error, content given as text blocks
    assert trace.calls[2].error == "never answered: no tool result for call id toolu_03"
    assert trace.calls[0].arguments == {"city": "Paris"} and trace.calls[0].id == "toolu_01"
    # thinking is not conversation text; text blocks are
    assert [(m.role, m.at, m.content) for m in trace.messages] == [
        ("user", 0, "Check the weather in Paris and in Rome, then email me."),
        ("assistant", 0, "Looking both up."),
        ("assistant", 2, "Paris is 18C; Rome failed. Emailing you now."),
    ]
    assert trace.metadata["model"] == "claude-sonnet-4-5"


def test_anthropic_jsonl_text_only_and_empty_conversations() -> None:
    tools, text_only, empty = load("anthropic/conversations.jsonl", error_pattern="^Error")
    assert summary(tools) == [("get_order", "ok", 0), ("cancel_order", "error", 1)]
    assert tools.calls[1].error == "Error: already shipped"
    assert messages(tools) == [("user", 0), ("user", 1), ("assistant", 2)]
    assert text_only.calls == [] and messages(text_only) == [("user", 0), ("assistant", 0)]
    assert empty.calls == [] and empty.messages == []


# --- OpenTelemetry ----------------------------------------------------------------------------------------


def test_otel_export_one_trace_per_trace_id_ordered_by_start_time() -> None:
    agent, no_tools = load("otel/export.json")
    assert agent.trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"
    # spans are stored out of order; get_order and get_weather overlap (1.0-2.0 s and 1.5-2.5 s)
    assert summary(agent) == [("get_order", "ok", 0), ("get_weather", "ok", 0), ("cancel_order", "error", 1)]
    assert agent.calls[2].error == "order already shipped"
    assert agent.calls[0].arguments == {"order_id": "#W1"}
    assert agent.calls[0].output == '{"status": "pending"}'
    assert agent.calls[0].id == "call_1"
    assert agent.calls[0].timestamp == pytest.approx(1700000001.0)
    assert agent.calls[0].end_timestamp == pytest.approx(1700000002.0)
    assert agent.metadata == {"resource": {"service.name": "support-agent"}}
    # an agent run without tool calls is still a trace; the plain HTTP trace is not an agent run
    assert no_tools.trace_id == "5c0e1b2a3d4f5e6a7b8c9d0e1f2a3b4c" and no_tools.calls == []


def test_otel_flat_span_lines_with_error_status_and_error_pattern() -> None:
    first, second = load("otel/spans.jsonl", error_pattern="^Error")
    assert first.trace_id == "trace-1"
    assert summary(first) == [("search", "ok", 0), ("summarize", "error", 1)]
    assert first.calls[0].arguments == {"q": "weather"}
    assert summary(second) == [("lookup", "error", 0)] and second.calls[0].error == "lookup failed"
    (plain, _) = load("otel/spans.jsonl")
    assert plain.calls[1].status == "ok"


# --- Assay ------------------------------------------------------------------------------------------------


def test_assay_episodes_grouped_with_steps_and_inline_errors() -> None:
    ep2, ep1 = load("assay/episodes.jsonl", error_pattern="^Error")  # ep-2 ends first
    assert ep1.trace_id == "ep-1" and ep2.trace_id == "ep-2"
    assert summary(ep1) == [
        ("list_files", "ok", 0),
        ("disk_usage", "ok", 0),
        ("delete_file", "error", 1),
        ("delete_file", "error", 2),
    ]
    assert ep1.calls[2].error == "permission denied"
    assert ep1.calls[0].arguments == {"path": "/tmp"} and ep1.calls[0].output == ["a.tmp", "b.tmp"]
    assert ep1.calls[0].timestamp == pytest.approx(1700000001.1)  # milliseconds -> epoch seconds
    assert ep1.metadata == {"test_id": "cleanup", "outcome": "fail"}
    assert [(m.role, m.at) for m in ep1.messages] == [("user", 0), ("assistant", 0), ("assistant", 4)]
    assert ep2.calls == [] and [m.content for m in ep2.messages] == ["Say hello", "Hello!"]


def test_assay_documented_shape_with_separate_results() -> None:
    (trace,) = load("assay/documented.jsonl")
    assert trace.trace_id == "documented.jsonl"
    assert [(c.tool_name, c.status) for c in trace.calls] == [
        ("get_customer", "ok"),
        ("update_customer", "error"),
    ]
    assert trace.calls[0].output == {"name": "Alice", "email": "alice@example.com"}
    assert trace.calls[1].error == "never answered: no tool result for call id call_002"


# --- detection --------------------------------------------------------------------------------------------

DETECTED = {
    "openai/chat.jsonl": "openai",
    "openai/conversation.json": "openai",
    "openai/responses.json": "openai",
    "anthropic/conversation.json": "anthropic",
    "anthropic/conversations.jsonl": "anthropic",
    "anthropic/proxy_requests.jsonl": "anthropic",
    "otel/export.json": "otel",
    "otel/spans.jsonl": "otel",
    "assay/episodes.jsonl": "assay",
    "assay/documented.jsonl": "assay",
    "native/traces.jsonl": "native",
    "native/names.json": "native",
    "tau2/results.json": "tau2",
    "openinference/export.json": "openinference",
    "openllmetry/batches.jsonl": "openllmetry",
    "vercel-ai/export.json": "vercel-ai",
    "openai-log/chat_pairs.jsonl": "openai-log",
    "openai-log/responses.json": "openai-log",
    "langchain/threads.json": "langchain",
    "langchain/dumpd.jsonl": "langchain",
    "langsmith/runs.jsonl": "langsmith",
    "langsmith/tree.json": "langsmith",
    "claude-code/session.jsonl": "claude-code",
    "codex/rollout-2025-09-10T08-15-00-0199a1b2.jsonl": "codex",
}


@pytest.mark.parametrize("name", sorted(DETECTED))
def test_auto_detection_and_verbose_reason(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    load(name, verbose=True)
    err = capsys.readouterr().err
    assert f"format {DETECTED[name]} (auto-detected" in err
    assert str(FIXTURES / name) in err


def test_every_registered_format_has_a_fixture() -> None:
    assert set(DETECTED.values()) == set(FORMATS)


def test_detection_names_formats_it_passed_over(capsys: pytest.CaptureFixture[str]) -> None:
    load("otel/export.json", verbose=True)
    before = list(FORMATS)[: list(FORMATS).index("otel")]
    assert before[0] == "native" and "tau2" in before
    assert f"(not {', '.join(before)})" in capsys.readouterr().err


def test_trace_format_forces_a_format(capsys: pytest.CaptureFixture[str]) -> None:
    # Anthropic reads the string contents but knows no 'tool_calls': the calls would be lost, so it fails
    # closed, naming what it found - unless the user accepts traces without calls
    with pytest.raises(
        InputError, match=r"no tool call, but the input holds tool activity \(.*'tool_calls' key"
    ):
        load("openai/chat.jsonl", format="anthropic", verbose=True)
    assert "format anthropic (forced with --trace-format)" in capsys.readouterr().err
    traces = load("openai/chat.jsonl", format="anthropic", allow_empty=True)
    assert [len(t.calls) for t in traces] == [0, 0, 0, 0]
    with pytest.raises(InputError, match="not a native trace"):
        load("openai/chat.jsonl", format="native")


def test_forcing_a_format_that_does_not_fit_is_an_input_error() -> None:
    with pytest.raises(InputError, match="not an Assay event"):
        load("otel/spans.jsonl", format="assay")


def test_directory_of_mixed_formats_detects_each_file(capsys: pytest.CaptureFixture[str]) -> None:
    traces = list(load_traces(FIXTURES / "otel", verbose=True))
    assert [t.trace_id for t in traces] == [
        "4bf92f3577b34da6a3ce929d0e0e4736",
        "5c0e1b2a3d4f5e6a7b8c9d0e1f2a3b4c",
        "trace-1",
        "trace-2",
    ]
    assert capsys.readouterr().err.count("format otel") == 2


# --- convert ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, options",
    [
        ("openai/chat.jsonl", ["--error-pattern", "^Error"]),
        ("openai/responses.json", []),
        ("openai/records.json", ["--messages-key", "traj"]),
        ("anthropic/conversation.json", []),
        ("otel/export.json", []),
        ("assay/episodes.jsonl", ["--trace-format", "assay", "-v"]),
    ],
)
def test_convert_writes_native_jsonl_that_reads_back_the_same(
    name: str, options: list[str], tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    assert run(["convert", str(FIXTURES / name), *options, "-o", str(out)]) == 0
    lines = out.read_text(encoding="utf-8").splitlines()
    assert all(isinstance(json.loads(line)["calls"], list) for line in lines)
    back = list(load_traces(out, verbose=False))
    kwargs = {"error_pattern": "^Error"} if "--error-pattern" in options else {}
    if "--messages-key" in options:
        kwargs["messages_key"] = "traj"
    original = load(name, **kwargs)
    assert [t.model_dump(mode="json") for t in back] == [t.model_dump(mode="json") for t in original]
    assert [t.steps for t in back] == [t.steps for t in original]


def test_convert_omits_defaults_the_importer_did_not_set(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    assert run(["convert", str(FIXTURES / "openai/chat.jsonl"), "-o", str(out)]) == 0
    text_only = json.loads(out.read_text().splitlines()[2])
    assert text_only == {
        "trace_id": "chat-text-only",
        "calls": [],
        "messages": [
            {"role": "user", "content": "Hello", "at": 0},
            {"role": "assistant", "content": "Hi! How can I help?", "at": 0},
        ],
    }


def test_anthropic_proxy_requests_of_one_conversation_are_one_trace(tmp_path: Path) -> None:
    # A logging proxy's requests: each resends the conversation so far (one is a retry of the one before);
    # a second conversation is interleaved with the first.
    name = "anthropic/proxy_requests.jsonl"
    refund, other = load(name)
    assert summary(refund) == [("get_order", "ok", 0), ("refund_order", "ok", 1)]
    assert refund.trace_id == "proxy_requests.jsonl:1"  # where the conversation began
    assert refund.metadata["model"] == "claude-sonnet-4-5"
    assert summary(other) == [("get_order", "ok", 0)] and other.trace_id == "proxy_requests.jsonl:2"
    # so a rule every conversation meets passes, rather than failing on each shorter request
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - {type: require, tool: get_order}\n")
    assert run(["check", str(rules), str(FIXTURES / name)]) == 0


def test_an_openai_records_id_is_metadata_not_the_trace_id(tmp_path: Path) -> None:
    # documented in docs/traces.md: trace_id names a trace, `id` does not
    call = {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}
    record = {"id": "resp_1", "output": [call]}
    path = tmp_path / "responses.jsonl"
    path.write_text(json.dumps(record) + "\n" + json.dumps({**record, "trace_id": "mine"}) + "\n")
    unnamed, named = load_traces(path)
    assert unnamed.trace_id == "responses.jsonl:1" and unnamed.metadata["id"] == "resp_1"
    assert named.trace_id == "mine"
    readme = " ".join((Path(__file__).parents[1] / "docs" / "traces.md").read_text(encoding="utf-8").split())
    said = "an `openai` or `anthropic` record's is its `trace_id` key, else `FILE:LINE`. Their `id` key"
    assert said in readme
