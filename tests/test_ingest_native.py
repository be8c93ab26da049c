"""The native trace format: every input shape, default ids, ordering, steps, stdin, directories, duplicate
ids, streaming, and the real tau traces loading as they are.
"""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import pytest

from seqjudge.cli import run
from seqjudge.errors import InputError
from seqjudge.ingest import load_traces
from seqjudge.trace import Trace

FIXTURES = Path(__file__).parent / "fixtures" / "ingest" / "native"


def tau_dir() -> Path:
    """The shared tau data: $SEQJUDGE_TAU_DATA, else ../shared/data/tau beside the repository."""
    given = os.environ.get("SEQJUDGE_TAU_DATA")
    return Path(given) if given else Path(__file__).resolve().parents[2] / "shared" / "data" / "tau"


def names(trace: Trace) -> list[str]:
    return [c.tool_name for c in trace.calls]


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# --- shapes and default ids -------------------------------------------------------------------------------


def test_single_object_keeps_every_field_and_is_named_after_the_file() -> None:
    (trace,) = load_traces(FIXTURES / "single.json")
    assert trace.trace_id == "single.json"
    assert names(trace) == ["get_user", "cancel_order"]
    assert [c.status for c in trace.calls] == ["ok", "error"]
    assert trace.calls[0].output == {"name": "Ann"}
    assert trace.calls[1].model_extra == {"span_kind": "tool"}
    assert trace.context == {"user": {"tier": "gold"}}
    assert trace.metadata == {"source": "hand-written"}
    assert trace.model_extra == {"run_by": "ci"}
    assert trace.messages[0].at == 0


def test_list_of_traces_defaults_ids_to_file_and_index() -> None:
    traces = list(load_traces(FIXTURES / "list.json"))
    assert [t.trace_id for t in traces] == ["first", "list.json[1]", "list.json[2]"]
    assert [names(t) for t in traces] == [["A", "B"], ["C"], []]


def test_bare_list_of_calls_is_one_trace() -> None:
    (trace,) = load_traces(FIXTURES / "calls.json")
    assert trace.trace_id == "calls.json"
    assert names(trace) == ["search", "open"]
    assert trace.calls[1].status == "error"
    assert trace.calls[0].arguments == {"q": "x"}


def test_bare_list_of_tool_names_is_one_trace() -> None:
    (trace,) = load_traces(FIXTURES / "names.json")
    assert names(trace) == ["authenticate", "get_order", "cancel_order"]
    assert all(c.arguments == {} and c.status == "ok" for c in trace.calls)


def test_jsonl_ids_are_file_and_line_and_shorthands_work_per_line() -> None:
    traces = list(load_traces(FIXTURES / "traces.jsonl"))
    # line 2 is blank: line numbers are the file's own
    assert [t.trace_id for t in traces] == ["t-1", "traces.jsonl:3", "traces.jsonl:4", "traces.jsonl:5"]
    assert names(traces[2]) == ["A", "C"]
    assert names(traces[3]) == ["A", "B"]


def test_single_line_jsonl_keeps_the_line_number(tmp_path: Path) -> None:
    path = write(tmp_path, "one.jsonl", '{"calls": [{"tool_name": "A"}]}\n')
    assert [t.trace_id for t in load_traces(path)] == ["one.jsonl:1"]


def test_pretty_printed_json_is_one_document(tmp_path: Path) -> None:
    text = json.dumps({"calls": [{"tool_name": "A"}, {"tool_name": "B"}]}, indent=2)
    (trace,) = load_traces(write(tmp_path, "pretty.json", text))
    assert trace.trace_id == "pretty.json" and names(trace) == ["A", "B"]


def test_json_file_with_one_object_per_line_is_read_as_jsonl(tmp_path: Path) -> None:
    path = write(tmp_path, "lines.json", '{"calls": ["A"]}\n{"calls": [{"tool_name": "B"}]}\n')
    with pytest.raises(InputError):
        # "A" is a string where a call object belongs: the error proves line 1 was read on its own
        list(load_traces(path))
    path.write_text('{"calls": [{"tool_name": "A"}]}\n{"calls": [{"tool_name": "B"}]}\n')
    assert [t.trace_id for t in load_traces(path)] == ["lines.json:1", "lines.json:2"]


def test_empty_list_document_and_empty_file_hold_no_traces_only_with_allow_empty(tmp_path: Path) -> None:
    empty, blank = write(tmp_path, "empty.json", "[]"), write(tmp_path, "blank.jsonl", "\n\n")
    assert list(load_traces(empty, allow_empty=True)) == []
    assert list(load_traces(blank, allow_empty=True)) == []
    # fail closed: an input that yields no trace is an error unless the user says it may be empty
    with pytest.raises(InputError, match="no trace came out of this file .1 record.s. read as native"):
        list(load_traces(empty))
    with pytest.raises(InputError, match="no traces in .*blank.jsonl: the input is empty.*--allow-empty"):
        list(load_traces(blank))


def test_empty_calls_is_a_valid_trace(tmp_path: Path) -> None:
    (trace,) = load_traces(write(tmp_path, "t.json", '{"trace_id": "e", "calls": []}'))
    assert trace.calls == [] and trace.steps == []


# --- order and steps --------------------------------------------------------------------------------------


def test_calls_are_ordered_by_timestamp_and_overlaps_share_a_step() -> None:
    (trace,) = load_traces(FIXTURES / "timed.json")
    assert names(trace) == ["first", "second", "third", "fourth"]
    # 'second' starts (10:00:01) before 'first' ends (10:00:02): they ran in parallel
    assert trace.steps == [0, 0, 1, 2]


def test_equal_timestamps_keep_list_order(tmp_path: Path) -> None:
    calls = [{"tool_name": n, "timestamp": t} for n, t in [("b", 5), ("a", 1), ("c", 5), ("d", 5)]]
    (trace,) = load_traces(write(tmp_path, "t.json", json.dumps({"calls": calls})))
    assert names(trace) == ["a", "b", "c", "d"]


def test_without_every_timestamp_list_order_wins(tmp_path: Path) -> None:
    calls = [{"tool_name": "b", "timestamp": 5}, {"tool_name": "a"}]
    (trace,) = load_traces(write(tmp_path, "t.json", json.dumps({"calls": calls})))
    assert names(trace) == ["b", "a"]


def test_step_labels_group_calls_and_need_not_be_consecutive() -> None:
    traces = list(load_traces(FIXTURES / "traces.jsonl"))
    assert traces[1].steps == [0, 0, 1]


def test_without_steps_or_end_times_every_call_is_its_own_step(tmp_path: Path) -> None:
    calls = [{"tool_name": n, "timestamp": i} for i, n in enumerate("abc")]
    (trace,) = load_traces(write(tmp_path, "t.json", json.dumps({"calls": calls})))
    assert trace.steps == [0, 1, 2]


def test_error_pattern_marks_matching_outputs_failed() -> None:
    traces = list(load_traces(FIXTURES / "traces.jsonl", error_pattern="^Error"))
    assert [c.status for c in traces[3].calls] == ["error", "ok"]
    assert traces[3].calls[0].error == "Error: boom"
    untouched = list(load_traces(FIXTURES / "traces.jsonl"))
    assert [c.status for c in untouched[3].calls] == ["ok", "ok"]


# --- stdin and directories --------------------------------------------------------------------------------


def test_stdin_text_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"calls": [{"tool_name": "A"}]}\n["B", "C"]\n'))
    traces = list(load_traces("-"))
    assert [t.trace_id for t in traces] == ["<stdin>:1", "<stdin>:2"]
    assert names(traces[1]) == ["B", "C"]


def test_stdin_binary_buffer_single_document(monkeypatch: pytest.MonkeyPatch) -> None:
    class Stdin:
        buffer = io.BytesIO(json.dumps({"calls": [{"tool_name": "Z"}]}, indent=1).encode())

    monkeypatch.setattr(sys, "stdin", Stdin())
    (trace,) = load_traces("-")
    assert trace.trace_id == "<stdin>" and names(trace) == ["Z"]


def test_directory_is_read_recursively_in_sorted_order(tmp_path: Path) -> None:
    write(tmp_path, "b.jsonl", '{"calls": [{"tool_name": "B1"}]}\n{"calls": [{"tool_name": "B2"}]}\n')
    write(tmp_path, "a.json", '["A"]')
    write(tmp_path, "sub/c.json", '{"trace_id": "c", "calls": [{"tool_name": "C"}]}')
    write(tmp_path, "notes.txt", "not a trace")
    traces = list(load_traces(tmp_path))
    assert [t.trace_id for t in traces] == ["a.json", "b.jsonl:1", "b.jsonl:2", "c"]
    assert [names(t) for t in traces] == [["A"], ["B1"], ["B2"], ["C"]]


def test_directory_files_in_subfolders_get_distinct_default_ids(tmp_path: Path) -> None:
    write(tmp_path, "x/t.json", '["A"]')
    write(tmp_path, "y/t.json", '["B"]')
    assert [t.trace_id for t in load_traces(tmp_path)] == ["x/t.json", "y/t.json"]


def test_directory_without_trace_files_is_an_error(tmp_path: Path) -> None:
    write(tmp_path, "readme.md", "hi")
    with pytest.raises(InputError, match="no .json or .jsonl files"):
        load_traces(tmp_path)


def test_missing_path_is_an_error_at_call_time(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        load_traces(tmp_path / "nope.jsonl")


# --- duplicate ids ----------------------------------------------------------------------------------------


def test_duplicate_ids_in_one_file_name_both_lines(tmp_path: Path) -> None:
    path = write(
        tmp_path, "d.jsonl", '{"trace_id": "x", "calls": []}\n["A"]\n{"trace_id": "x", "calls": []}\n'
    )
    with pytest.raises(InputError) as caught:
        list(load_traces(path))
    text = str(caught.value)
    assert "duplicate trace id 'x'" in text
    assert f"{path}, line 1" in text and text.startswith(f"{path}, line 3:")


def test_duplicate_ids_across_files_of_a_directory(tmp_path: Path) -> None:
    write(tmp_path, "a.json", '{"trace_id": "same", "calls": []}')
    write(tmp_path, "b.json", '[{"trace_id": "other", "calls": []}, {"trace_id": "same", "calls": []}]')
    with pytest.raises(InputError) as caught:
        list(load_traces(tmp_path))
    text = str(caught.value)
    assert str(tmp_path / "a.json") in text and str(tmp_path / "b.json") in text and "trace #2" in text


def test_a_default_id_that_collides_with_a_given_one_is_a_duplicate(tmp_path: Path) -> None:
    path = write(tmp_path, "c.jsonl", '{"trace_id": "c.jsonl:2", "calls": []}\n["A"]\n')
    with pytest.raises(InputError, match="duplicate trace id 'c.jsonl:2'"):
        list(load_traces(path))


# --- streaming --------------------------------------------------------------------------------------------


def test_jsonl_is_read_one_line_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    consumed: list[int] = []

    def produce():  # type: ignore[no-untyped-def]
        for i in range(1_000_000):
            consumed.append(i)
            yield json.dumps({"calls": [{"tool_name": f"t{i}"}]}).encode() + b"\n"

    class Lines:
        lines = produce()

        def readline(self, size: int = -1) -> bytes:  # lines are read at most a limit's bytes at a time
            return next(self.lines, b"")

        def read(self) -> bytes:
            raise AssertionError("a JSONL input must never be read whole")

    class Stdin:
        buffer = Lines()

    monkeypatch.setattr(sys, "stdin", Stdin())
    traces = load_traces("-")
    first = [next(traces) for _ in range(3)]
    assert [names(t) for t in first] == [["t0"], ["t1"], ["t2"]]
    assert len(consumed) <= 4  # the reader looks one line ahead to tell JSONL from a document


def test_traces_before_a_bad_line_are_yielded_first(tmp_path: Path) -> None:
    path = write(tmp_path, "t.jsonl", '["A"]\n["B"]\n{"calls": [{"tool_name": ""}]}\n')
    traces = load_traces(path)
    assert names(next(traces)) == ["A"] and names(next(traces)) == ["B"]
    with pytest.raises(InputError, match="line 3"):
        next(traces)


# --- arguments of load_traces -----------------------------------------------------------------------------


def test_unknown_format_and_bad_regex_are_input_errors() -> None:
    with pytest.raises(
        InputError,
        match="unknown trace format 'csv'.*native, claude-code, codex, tau2, openai-log, .*, otel, assay",
    ):
        load_traces(FIXTURES / "names.json", format="csv")
    with pytest.raises(InputError, match="not a valid regular expression"):
        load_traces(FIXTURES / "names.json", error_pattern="(")


def test_verbose_says_which_format_and_why(capsys: pytest.CaptureFixture[str]) -> None:
    list(load_traces(FIXTURES / "traces.jsonl", verbose=True))
    list(load_traces(FIXTURES / "single.json", verbose=True))
    err = capsys.readouterr().err
    assert "traces.jsonl: format native (auto-detected: it looks like a native trace" in err
    assert "single.json: format native (auto-detected: the document validates as native" in err


# --- convert: native round trip ---------------------------------------------------------------------------


def test_convert_round_trips_native_keeping_exactly_the_input_keys(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    assert run(["convert", str(FIXTURES / "single.json"), "-o", str(out)]) == 0
    (line,) = out.read_text().splitlines()
    data = json.loads(line)
    original = json.loads((FIXTURES / "single.json").read_text())
    assert data == {"trace_id": "single.json", **original}
    (again,) = load_traces(out)
    (before,) = load_traces(FIXTURES / "single.json")
    assert again.model_dump() == before.model_dump()


def test_convert_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["convert", str(FIXTURES / "names.json"), "-o", "-"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out) == {
        "trace_id": "names.json",
        "calls": [{"tool_name": "authenticate"}, {"tool_name": "get_order"}, {"tool_name": "cancel_order"}],
    }
    assert "converted 1 trace(s), 3 call(s)" in captured.err


# --- the real tau traces ----------------------------------------------------------------------------------


def test_tau_traces_load_as_they_are() -> None:
    path = tau_dir() / "traces.jsonl"
    assert path.is_file(), f"the shared tau data is missing at {path} (set SEQJUDGE_TAU_DATA)"
    traces = list(load_traces(path))
    assert len(traces) == 484
    assert len({t.trace_id for t in traces}) == 484
    assert sum(len(t.calls) for t in traces) == 3504
    assert sum(c.status == "error" for t in traces for c in t.calls) == 130
    assert sum(len(t.messages) for t in traces) == 6130
    raw_first = json.loads(path.open(encoding="utf-8").readline())
    assert traces[0].model_dump(mode="json", exclude_unset=True) == raw_first
