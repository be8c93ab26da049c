"""Formats agents and tracers write, read from fixtures written from each format's public documentation:
tau2-bench results, OpenInference, OpenLLMetry and Vercel AI SDK spans, logged OpenAI response objects,
LangChain messages, LangSmith runs, Claude Code sessions and Codex CLI rollouts. Each covers the shapes that
matter for ordering verdicts: parallel calls, failed calls, calls never answered, out-of-order arrival."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seqjudge.cli import run
from seqjudge.ingest import IngestStats, load_traces
from seqjudge.trace import Trace

FIXTURES = Path(__file__).parent / "fixtures" / "ingest"


def load(name: str, **options: object) -> list[Trace]:
    return list(load_traces(FIXTURES / name, **options))  # type: ignore[arg-type]


def calls(trace: Trace) -> list[tuple[str, str, int]]:
    return [(c.tool_name, c.status, s) for c, s in zip(trace.calls, trace.steps, strict=True)]


# --- tau2-bench ---------------------------------------------------------------------------------------------


def test_tau2_results_parallel_failed_unanswered_and_user_tools() -> None:
    stats = IngestStats()
    airline, telecom = load("tau2/results.json", stats=stats)
    assert airline.trace_id == "9b1c-sim-1"
    # two calls from one assistant message share a step, answered out of order by id
    assert calls(airline) == [
        ("get_user_details", "ok", 0),
        ("get_reservation_details", "ok", 0),
        ("cancel_reservation", "error", 1),
        ("cancel_reservation", "ok", 2),
    ]
    assert airline.calls[1].output == '{"reservation_id": "ABC123", "status": "active"}'
    assert airline.calls[2].error == "Error: Reservation ABC999 not found"
    assert airline.metadata == {
        "task_id": "airline_12",
        "trial": 0,
        "termination_reason": "user_stop",
        "reward": 1.0,
    }
    # max_steps came before the last call was answered; the simulated user's own tool is not the agent's
    assert calls(telecom) == [("check_network_status", "error", 0)]
    assert telecom.calls[0].error == "never answered: no tool result for call id call_e"
    assert stats.skipped["tool calls and results of the simulated user (requestor 'user')"] == 2


# --- OpenTelemetry conventions ---------------------------------------------------------------------------


def test_openinference_tool_spans_out_of_order_parallel_and_failed() -> None:
    stats = IngestStats()
    (trace,) = load("openinference/export.json", stats=stats)
    assert calls(trace) == [("get_weather", "ok", 0), ("get_forecast", "ok", 0), ("get_weather", "error", 1)]
    assert trace.calls[1].arguments == {"city": "Paris", "days": 2} and trace.calls[1].id == "call_f1"
    assert trace.calls[0].output == "sunny, 21 C"
    assert trace.calls[2].error == "unknown city: Atlantis"
    assert stats.skipped["agent spans that are not tool calls (model, agent, chain spans)"] == 2


def test_openllmetry_tool_spans_across_batches_with_python_arguments() -> None:
    (trace,) = load("openllmetry/batches.jsonl")
    assert calls(trace) == [("search_docs", "ok", 0), ("create_ticket", "error", 1)]
    assert trace.calls[0].arguments == {"query": "refund policy", "limit": 3}
    assert trace.calls[1].arguments == {"priority": "high", "args": ["ACME-42"]}
    assert trace.calls[1].error == "TicketServiceDown: 503"


def test_vercel_ai_tool_calls_parallel_and_failed() -> None:
    (trace,) = load("vercel-ai/export.json")
    assert calls(trace) == [("getPrice", "ok", 0), ("checkStock", "error", 0)]
    assert trace.calls[0].id == "call_p1" and trace.calls[0].arguments == {"sku": "MUG-BLUE"}
    assert trace.calls[1].error == "Stock service timed out"


@pytest.mark.parametrize("name", ["openinference", "openllmetry", "vercel-ai", "otel"])
def test_every_span_format_can_be_forced_and_reads_every_convention(name: str) -> None:
    for fixture in ("openinference/export.json", "openllmetry/batches.jsonl", "vercel-ai/export.json"):
        assert [len(t.calls) for t in load(fixture, format=name)] == [len(t.calls) for t in load(fixture)]


# --- logged OpenAI responses ----------------------------------------------------------------------------


def test_chat_completion_pairs_join_into_conversations_across_interleaved_records() -> None:
    booking, cancel = load("openai-log/chat_pairs.jsonl", error_pattern="^Error")
    assert booking.trace_id == "chatcmpl-A1"
    # parallel calls of the first response, answered (out of order) in the second request
    assert calls(booking) == [("search_flights", "ok", 0), ("get_user", "ok", 0), ("book_flight", "error", 1)]
    assert booking.calls[1].output == '{"email": "kim@example.com"}'
    assert [(m.role, m.at) for m in booking.messages] == [("user", 0), ("assistant", 3)]
    # the other conversation's call is never answered by a later request
    assert calls(cancel) == [("cancel_order", "error", 0)]
    assert cancel.calls[0].error == "never answered: no tool result for call id call_9"


def test_responses_objects_chained_by_previous_response_id() -> None:
    weather, lone = load("openai-log/responses.json")
    assert weather.trace_id == "resp_1"
    assert calls(weather) == [("get_weather", "ok", 0), ("get_weather", "ok", 0), ("send_summary", "ok", 1)]
    assert [c.output for c in weather.calls] == ["22 C", "18 C", "sent"]
    assert calls(lone) == [("delete_account", "error", 0)] and "never answered" in str(lone.calls[0].error)


# --- LangChain and LangSmith ------------------------------------------------------------------------------


def test_langchain_messages_parallel_failed_unanswered_and_invalid_calls() -> None:
    stats = IngestStats()
    thread, text_only = load("langchain/threads.json", stats=stats)
    assert calls(thread) == [
        ("lookup_order", "ok", 0),
        ("get_balance", "ok", 0),
        ("issue_refund", "error", 1),
        ("escalate", "error", 2),
        ("notify", "error", 3),
    ]
    assert thread.calls[1].output == "20.00"  # answered by tool_call_id, out of order
    assert thread.calls[2].error == "RefundError: order is older than 90 days"  # status: "error"
    assert thread.calls[3].error == "never answered: no tool result for call id call_es"
    assert str(thread.calls[4].error).startswith("invalid tool call, never run: Function notify arguments")
    assert thread.metadata == {"thread_id": "thread-7"}
    assert text_only.calls == [] and [m.role for m in text_only.messages] == ["user", "assistant"]
    assert stats.skipped["system messages (not conversation)"] == 1


def test_langchain_dumpd_form() -> None:
    (trace,) = load("langchain/dumpd.jsonl")
    assert calls(trace) == [("check_health", "ok", 0), ("restart", "ok", 1)]
    assert trace.messages[-1].content == "Done, the web server is back."


def test_langsmith_flat_runs_out_of_order_with_parallel_failed_and_unfinished_tools() -> None:
    stats = IngestStats()
    (trace,) = load("langsmith/runs.jsonl", stats=stats)
    assert trace.trace_id == "0b1c9f3e-0000-4000-8000-000000000001"
    assert calls(trace) == [
        ("search_web", "ok", 0),
        ("read_page", "ok", 0),
        ("write_file", "error", 1),
        ("send_email", "error", 2),
    ]
    assert trace.calls[0].arguments == {"query": "langsmith pricing"}
    assert trace.calls[2].arguments == {"input": "report.md"}
    assert trace.calls[2].error == "PermissionError: [Errno 13] Permission denied: 'report.md'"
    assert str(trace.calls[3].error).startswith("never answered")
    assert stats.skipped["'llm' runs (not tool calls)"] == 1


def test_langsmith_nested_child_runs() -> None:
    (trace,) = load("langsmith/tree.json")
    assert calls(trace) == [("get_time", "ok", 0), ("set_alarm", "ok", 1)]
    assert trace.calls[0].output == "09:00"


# --- Claude Code and Codex CLI ---------------------------------------------------------------------------


def test_claude_code_turn_split_over_lines_is_one_step() -> None:
    stats = IngestStats()
    (session,) = load("claude-code/session.jsonl", stats=stats)
    assert session.trace_id == "3f1e6a2b-8c4d-4e5f-9a0b-1c2d3e4f5a6b"
    # Read and Grep were two lines of one assistant turn (message msg_01A): one step, answered out of order
    assert calls(session) == [
        ("Read", "ok", 0),
        ("Grep", "ok", 0),
        ("Bash", "error", 1),
        ("Edit", "error", 2),
    ]
    assert session.calls[0].arguments == {"file_path": "/home/dev/shop/tests/test_checkout.py"}
    assert session.calls[1].output == "shop/cart.py:12: def checkout(cart):"
    assert session.calls[2].error == "FAILED tests/test_checkout.py::test_checkout - AssertionError"
    assert session.calls[3].error == "never answered: no tool result for call id toolu_01E1"
    assert stats.skipped["sub-agent (sidechain) lines"] == 1
    assert stats.skipped["'summary' lines (no conversation message)"] == 1


def test_codex_rollout_shell_exit_codes_patches_and_an_unanswered_call() -> None:
    stats = IngestStats()
    (rollout,) = load("codex/rollout-2025-09-10T08-15-00-0199a1b2.jsonl", stats=stats)
    assert rollout.trace_id == "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
    assert calls(rollout) == [
        ("shell", "error", 0),
        ("shell", "ok", 0),
        ("apply_patch", "ok", 1),
        ("shell", "ok", 2),
        ("shell", "error", 3),
    ]
    assert rollout.calls[0].arguments == {
        "command": ["bash", "-lc", "ruff check ."],
        "workdir": "/home/dev/api",
    }
    assert rollout.calls[0].error == "exit code 1"
    assert rollout.calls[4].error == "never answered: no tool result for call id call_tests"
    assert rollout.metadata == {"cwd": "/home/dev/api", "cli_version": "0.36.0"}
    assert stats.skipped["'event_msg' lines (not response items)"] == 1


def _with_line(name: str, line: dict[str, object], after: int, tmp_path: Path) -> Path:
    """The fixture ``name`` with ``line`` written after its line ``after`` (a record a newer tool writes)."""
    lines = (FIXTURES / name).read_text().splitlines()
    lines.insert(after, json.dumps(line))
    path = tmp_path / Path(name).name
    path.write_text("\n".join(lines) + "\n")
    return path


def test_codex_line_type_newer_than_the_importer_is_skipped_and_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    future = {"timestamp": "2025-09-10T08:15:02.500Z", "type": "future_synthetic_record", "payload": {"x": 1}}
    path = _with_line("codex/rollout-2025-09-10T08-15-00-0199a1b2.jsonl", future, 2, tmp_path)
    stats = IngestStats()
    (rollout,) = list(load_traces(path, stats=stats))
    assert len(rollout.calls) == 5  # the rest of the file read as before
    reason = "'future_synthetic_record' lines (a line type this importer does not know)"
    assert stats.skipped[reason] == 1
    # detected, not refused as "matches no format"; -v names what was skipped
    assert run(["convert", str(path), "-v", "-o", str(tmp_path / "out.jsonl")]) == 0
    err = capsys.readouterr().err
    assert "format codex" in err and "1 " + reason in err
    # alone, an unknown envelope line decides nothing: a file of only such lines is still refused
    alone = tmp_path / "alone.jsonl"
    alone.write_text(json.dumps({"type": "x", "payload": {}}) + "\n")
    assert run(["convert", str(alone), "-o", str(tmp_path / "o2.jsonl")]) == 2


def test_claude_code_line_type_newer_than_the_importer_is_skipped_and_counted(tmp_path: Path) -> None:
    future = {
        "type": "future_synthetic_record",
        "sessionId": "3f1e6a2b-8c4d-4e5f-9a0b-1c2d3e4f5a6b",
        "uuid": "00000000-0000-4000-8000-0000000000ff",
        "timestamp": "2025-08-01T10:00:01.500Z",
    }
    path = _with_line("claude-code/session.jsonl", future, 2, tmp_path)
    stats = IngestStats()
    (session,) = list(load_traces(path, stats=stats))
    assert len(session.calls) == 4
    assert stats.skipped["'future_synthetic_record' lines (a line type this importer does not know)"] == 1


# --- convert, for every new format -----------------------------------------------------------------------

NEW = sorted(
    p.relative_to(FIXTURES).as_posix()
    for d in (
        "tau2",
        "openinference",
        "openllmetry",
        "vercel-ai",
        "openai-log",
        "langchain",
        "langsmith",
        "claude-code",
        "codex",
    )
    for p in (FIXTURES / d).iterdir()
)


@pytest.mark.parametrize("name", NEW)
def test_convert_reads_back_the_same(name: str, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    fmt = name.split("/")[0]
    assert run(["convert", str(FIXTURES / name), "--trace-format", fmt, "-o", str(out)]) == 0
    back = list(load_traces(out))
    assert [t.model_dump(mode="json") for t in back] == [t.model_dump(mode="json") for t in load(name)]
    assert any(json.loads(line)["calls"] for line in out.read_text().splitlines())
