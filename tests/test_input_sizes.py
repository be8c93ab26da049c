"""Issue 38.6: no record is read whole past a limit (``SEQJUDGE_MAX_RECORD_BYTES``), a YAML file's aliases
cannot stand for more text than ``SEQJUDGE_MAX_EXPANDED_CHARS``, and a rendered prompt is bounded by
``SEQJUDGE_MAX_PROMPT_CHARS``: each stops with exit 2 naming the limit and how to raise it. The limits are
set small here, so that small inputs show the bounded behaviour."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seqjudge import checkpool
from seqjudge.cli import run

RULES = "rules:\n  - id: r\n    type: require\n    tool: a\n"


def lines(first: int, count: int) -> str:
    return "".join(
        json.dumps({"trace_id": f"t{i}", "calls": [{"tool_name": "a"}]}) + "\n"
        for i in range(first, first + count)
    )


@pytest.fixture
def rules(tmp_path: Path) -> Path:
    path = tmp_path / "rules.yaml"
    path.write_text(RULES, encoding="utf-8")
    return path


def test_a_file_of_nul_bytes_without_a_newline_stops_at_the_limit(
    tmp_path: Path, rules: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SEQJUDGE_MAX_RECORD_BYTES", "1000")
    nul = tmp_path / "nul.json"
    nul.write_bytes(b"\0" * 5000)
    assert run(["check", str(rules), str(nul)]) == 2
    err = capsys.readouterr().err
    assert "line 1 is larger than 1,000 bytes" in err and "SEQJUDGE_MAX_RECORD_BYTES" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("command", ["check", "convert"])
def test_a_long_jsonl_line_stops_at_the_limit_naming_its_line(
    tmp_path: Path,
    rules: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: str,
) -> None:
    monkeypatch.setenv("SEQJUDGE_MAX_RECORD_BYTES", "1000")
    traces = tmp_path / "traces.jsonl"
    long = json.dumps({"trace_id": "long", "calls": [{"tool_name": "a", "output": "x" * 5000}]}) + "\n"
    traces.write_text(lines(0, 2) + long + lines(2, 1), encoding="utf-8")
    if command == "check":
        argv = ["check", str(rules), str(traces), "--workers", "0"]
    else:
        argv = ["convert", str(traces), "-o", str(tmp_path / "out.jsonl")]
    assert run(argv) == 2
    err = capsys.readouterr().err
    assert "line 3" in err and "1,000 bytes" in err and "SEQJUDGE_MAX_RECORD_BYTES=N" in err
    monkeypatch.setenv("SEQJUDGE_MAX_RECORD_BYTES", "100000")  # raised: the same file reads
    assert run(argv) in (0, 1)


def test_a_long_line_read_in_blocks_for_the_workers_stops_too(
    tmp_path: Path, rules: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SEQJUDGE_MAX_RECORD_BYTES", "3000")
    monkeypatch.setattr(checkpool, "INLINE", 2)
    monkeypatch.setattr(checkpool, "CHUNK", 500)
    traces = tmp_path / "traces.jsonl"
    long = json.dumps({"trace_id": "long", "calls": [{"tool_name": "a", "output": "x" * 9000}]}) + "\n"
    traces.write_text(lines(0, 40) + long + lines(40, 1), encoding="utf-8")
    assert run(["check", str(rules), str(traces), "--workers", "2"]) == 2
    err = capsys.readouterr().err
    assert "line 41" in err and "3,000 bytes" in err and "SEQJUDGE_MAX_RECORD_BYTES" in err


def test_a_multi_line_document_is_bounded_as_a_whole(
    tmp_path: Path, rules: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SEQJUDGE_MAX_RECORD_BYTES", "1000")
    doc = tmp_path / "trace.json"
    calls = [{"tool_name": "a", "output": "x" * 50} for _ in range(100)]
    doc.write_text(json.dumps({"trace_id": "t", "calls": calls}, indent=2), encoding="utf-8")
    assert run(["check", str(rules), str(doc)]) == 2
    err = capsys.readouterr().err
    assert "the document is larger than 1,000 bytes" in err and "SEQJUDGE_MAX_RECORD_BYTES" in err


def test_an_unreadable_limit_is_bad_input(
    tmp_path: Path, rules: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SEQJUDGE_MAX_RECORD_BYTES", "lots")
    traces = tmp_path / "traces.jsonl"
    traces.write_text(lines(0, 1), encoding="utf-8")
    assert run(["check", str(rules), str(traces)]) == 2
    assert "SEQJUDGE_MAX_RECORD_BYTES='lots' is not a positive whole number" in capsys.readouterr().err


def aliased_rules(description_chars: int, uses: int) -> str:
    """One long description anchored once and reused ``uses`` times: a small file, a large text."""
    head = f"rules:\n  - id: j\n    type: judge\n    description: &d {'y' * description_chars}\n"
    rule = "  - id: j{i}\n    type: judge\n    description: *d\n"
    return head + "".join(rule.format(i=i) for i in range(uses))


def test_aliases_that_stand_for_too_much_text_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The probe: 100 KB through 20,000 aliases, 2 GB of text in a 160 KB file; here 2,000 through 20.
    monkeypatch.setenv("SEQJUDGE_MAX_EXPANDED_CHARS", "30000")
    path = tmp_path / "rules.yaml"
    path.write_text(aliased_rules(2_000, 20), encoding="utf-8")
    assert path.stat().st_size < 3_500
    assert run(["lint", str(path)]) == 2
    err = capsys.readouterr().err
    assert "larger than 30,000 characters" in err and "SEQJUDGE_MAX_EXPANDED_CHARS=N" in err
    assert str(path) in err and "line " in err
    monkeypatch.setenv("SEQJUDGE_MAX_EXPANDED_CHARS", "100000")  # within the limit: it loads
    assert run(["lint", str(path)]) in (0, 1)


def test_a_prompt_larger_than_its_limit_stops_rendering(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(aliased_rules(2_000, 20), encoding="utf-8")  # 40,000 characters of descriptions
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"trace_id": "t", "calls": [{"tool_name": "a"}]}), encoding="utf-8")
    assert run(["prompt", str(path), str(trace)]) == 0
    capsys.readouterr()
    monkeypatch.setenv("SEQJUDGE_MAX_PROMPT_CHARS", "20000")
    assert run(["prompt", str(path), str(trace)]) == 2
    captured = capsys.readouterr()
    assert "the rendered judge prompt is larger than 20,000 characters" in captured.err
    assert "SEQJUDGE_MAX_PROMPT_CHARS=N" in captured.err and captured.out == ""
