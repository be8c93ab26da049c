"""Failing closed: what ingest reads, makes and skips is counted and printed; a trace with no call where the
input holds tool activity, or an input with no trace, is exit 2 unless --allow-empty; a file whose records
disagree names the first that differs; detection looks past the first record, within a bound."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingest_support import lines, write
from seqjudge.cli import run
from seqjudge.errors import InputError
from seqjudge.ingest import IngestStats, detect, load_traces

RULES = "rules:\n  - id: r1\n    type: before\n    first: search\n    then: book\n"


CHAT = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Book it"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{}"}}],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "found"},
]


def test_convert_prints_records_traces_calls_and_skips_by_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "chat.jsonl", lines({"messages": CHAT}, {"messages": CHAT[:2]}))
    assert run(["convert", str(path), "-o", str(tmp_path / "out.jsonl")]) == 0
    err = capsys.readouterr().err
    assert "read 2 record(s) from 1 file(s) (openai): 2 trace(s), 1 call(s); skipped 2 system messages" in err


def test_check_verbose_prints_the_same_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rules = write(tmp_path, "rules.yaml", RULES)
    path = write(tmp_path, "chat.jsonl", lines({"messages": CHAT}))
    run(["check", str(rules), str(path), "-v"])
    err = capsys.readouterr().err
    assert "read 1 record(s) from 1 file(s) (openai): 1 trace(s), 1 call(s); skipped 1 system messages" in err
    run(["check", str(rules), str(path)])
    assert "read 1 record(s)" not in capsys.readouterr().err  # only with -v


def test_stats_are_filled_for_library_callers(tmp_path: Path) -> None:
    stats = IngestStats()
    path = write(tmp_path, "chat.jsonl", lines({"messages": CHAT}))
    list(load_traces(path, stats=stats))
    assert (stats.files, stats.records, stats.traces, stats.calls) == (1, 1, 1, 1)
    assert dict(stats.skipped) == {"system messages (instructions, not conversation)": 1}


def test_tool_activity_that_became_no_call_is_exit_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "chat.jsonl", lines({"messages": CHAT}))
    out = tmp_path / "out.jsonl"
    assert run(["convert", str(path), "--trace-format", "anthropic", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "line 1: this trace came out with no tool call, but the input holds tool activity" in err
    assert "the format was forced to anthropic" in err and not out.exists()
    assert run(["convert", str(path), "--trace-format", "anthropic", "--allow-empty", "-o", str(out)]) == 0
    assert "1 traces with tool activity but no readable call (--allow-empty)" in capsys.readouterr().err


def test_model_spans_that_asked_for_tools_with_no_tool_span_fail_closed(tmp_path: Path) -> None:
    span = {
        "traceId": "t1",
        "spanId": "s1",
        "name": "chat gpt-4o",
        "startTimeUnixNano": "1700000000000000000",
        "attributes": {
            "gen_ai.operation.name": "chat",
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "search",
        },
    }
    path = write(tmp_path, "spans.jsonl", lines(span))
    with pytest.raises(InputError, match="trace t1: 1 model span.s. with tool-call attributes"):
        list(load_traces(path))
    (trace,) = load_traces(path, allow_empty=True)
    assert trace.calls == []


def test_a_text_only_agent_run_is_a_trace_without_calls_not_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "chat.jsonl", lines({"messages": [{"role": "user", "content": "hi"}]}))
    (trace,) = load_traces(path)
    assert trace.calls == []


def test_detection_holds_ambiguous_records_only_up_to_its_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text_only = {"messages": [{"role": "user", "content": "hi"}]}
    openai = {"messages": CHAT}
    path = write(tmp_path, "mixed.jsonl", lines(text_only, text_only, text_only, openai))
    traces = list(load_traces(path, verbose=True))
    assert [len(t.calls) for t in traces] == [0, 0, 0, 1]
    assert "format openai (auto-detected" in capsys.readouterr().err
    # past the bound the first format every held record fits is taken (anthropic: text reads the same);
    # the later OpenAI record then differs from it and is named
    monkeypatch.setattr(detect, "HOLD_RECORDS", 2)
    with pytest.raises(
        InputError, match="line 4: this record differs from the records before it: it looks like"
    ):
        list(load_traces(path))


@pytest.mark.parametrize(
    ("command", "accepted"),
    [
        (["prompt", "{rules}", "{traces}", "--judge-mode", "full"], 0),
        # The scripted provider holds no reply: exit 3 shows the trace got past ingest to the model.
        (["judge", "{rules}", "{traces}", "--model", "scripted:pass"], 3),
        (["run", "{rules}", "{traces}", "--store", "{store}"], 0),
    ],
    ids=["prompt", "judge", "run"],
)
def test_every_command_that_reads_traces_fails_closed_and_takes_allow_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str], accepted: int
) -> None:
    rules = write(tmp_path, "rules.yaml", RULES)
    path = write(tmp_path, "chat.jsonl", lines({"messages": CHAT}))
    argv = [a.format(rules=rules, traces=path, store=tmp_path / "s.db") for a in command]
    argv += ["--trace-format", "anthropic"]  # read as Anthropic, the OpenAI tool calls become no call
    assert run(argv) == 2
    assert "no tool call, but the input holds tool activity" in capsys.readouterr().err
    assert run([*argv, "--allow-empty"]) == accepted  # the trace without calls goes on to the command
    assert "no tool call, but the input holds tool activity" not in capsys.readouterr().err
