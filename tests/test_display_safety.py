"""Issue 15.8: trace text never reaches a terminal with its control characters, nor a markdown table
(the PR comment) with a newline, pipe or raw HTML that breaks out of its cell."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from seqjudge.cli import run
from seqjudge.outputs.ci_outputs import markdown_run
from seqjudge.safetext import md_code, md_text, terminal
from test_store import make_result, make_trace

HOSTILE_ID = "t\x1b[2J\x1b[32mPASS\x1b[0m\u202e|x\n| injected | row |\n<img src=x onerror=alert(1)>"


def test_terminal_text_is_one_line_without_control_characters() -> None:
    shown = terminal(HOSTILE_ID)
    assert "\x1b" not in shown and "\n" not in shown and "\u202e" not in shown
    assert shown.isprintable() and "\\x1b[2J" in shown and "\\u202e" in shown
    assert terminal("plain id-1 ✓") == "plain id-1 ✓"


def test_check_text_output_neutralises_escape_sequences(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "rules.yaml").write_text("rules:\n  - {id: a-first, type: before, first: A, then: B}\n")
    trace = {
        "trace_id": HOSTILE_ID,
        "calls": [{"tool_name": "B", "arguments": {"q": "\x1b]0;title\x07\x1b[31m"}}],
    }
    (tmp_path / "t.jsonl").write_text(json.dumps(trace) + "\n")
    assert run(["check", str(tmp_path / "rules.yaml"), str(tmp_path / "t.jsonl")]) == 1
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert "| injected | row |" not in out.splitlines()  # the newline did not start a line of its own


def test_markdown_table_cells_hold_hostile_ids() -> None:
    trace = make_trace("x", good=False).model_copy(update={"trace_id": HOSTILE_ID})
    md = markdown_run([(trace, make_result(trace))])
    # a code span and a fenced block show HTML as text; anywhere else it would be markup
    outside_code = re.sub(r"`[^`\n]*`", "", re.sub(r"```text\n.*?\n```", "", md, flags=re.S))
    assert "<img" not in outside_code and "&lt;img" in md  # the <summary> of the full trace escapes it
    assert "\x1b" not in md
    rows = [line for line in md.splitlines() if line.startswith("| ") and "injected" in line]
    assert rows, md
    for row in rows:
        # the hostile id stays inside one cell of its row: the pipes it holds are escaped
        assert row.replace("\\|", "").count("|") == 6, row
    assert all(not line.startswith("| injected") for line in md.splitlines())


def test_cell_helpers() -> None:
    assert md_code("a`b|c\nd") == "`a'b\\|c\\nd`"
    assert md_text("<b>|x\n") == "&lt;b&gt;\\|x\\n"
