"""Issue 38.5: hostile text in every sink. A tool name, trace id, judge reply, reviewer, note or environment
value holding OSC 52 (a clipboard write) or OSC 0 (a window title) reaches no terminal raw; a six-backtick run
in a tool name does not end the markdown fence it is shown in (no injected heading or raw HTML); a trace id
that reads as a spreadsheet formula is exported to CSV as text."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from cli_suite import judge_argv, passing_reply
from fakes.server import FakeLLMServer, openai_chat
from markdown_support import outside_fences
from seqjudge.cli import run
from seqjudge.safetext import csv_cell, md_fence, printable_ascii, say, shown
from seqjudge.store import Store
from test_store import judge_result, make_result, make_trace

OSC52 = "\x1b]52;c;aGk=\x07"  # writes "hi" to the clipboard
OSC0 = "\x1b]0;pwned\x07"  # sets the window title
HOSTILE_TOOL = "B" + OSC52
HOSTILE_ID = "t" + OSC0
FENCE_BREAK = "B\n``````\n# injected\n<img src=x onerror=alert(1)>"


def raw_escapes(text: str) -> list[str]:
    """The characters a terminal would act on: controls other than the newline, and format characters."""
    return [ch for ch in text if ch != "\n" and not ch.isprintable()]


def rules_for(tool: str) -> str:
    return f"rules:\n  - {{id: a-first, type: before, first: A, then: {json.dumps(tool)}}}\n"


def write_traces(path: Path, *traces: dict[str, Any]) -> None:
    path.write_text("".join(json.dumps(t) + "\n" for t in traces), encoding="utf-8")


def out_of_order(trace_id: str, tool: str) -> dict[str, Any]:
    return {
        "trace_id": trace_id,
        "calls": [{"tool_name": tool, "arguments": {"q": OSC0}}, {"tool_name": "A"}],
    }


# -- the functions -------------------------------------------------------------------------------------------
def test_shown_keeps_lines_and_escapes_every_other_control() -> None:
    assert shown("plain\nlines ✓") == "plain\nlines ✓"
    assert shown(f"a{OSC52}\r\tb\nc\u202e") == "a\\x1b]52;c;aGk=\\x07\\r\\tb\nc\\u202e"


def test_say_escapes_what_it_prints(capsys: pytest.CaptureFixture[str]) -> None:
    say(f"out {OSC0}")
    say(f"err {OSC52}", err=True)
    got = capsys.readouterr()
    assert got.out == "out \\x1b]0;pwned\\x07\n" and got.err == "err \\x1b]52;c;aGk=\\x07\n"


def test_printable_ascii_is_the_fast_path_only_for_plain_text() -> None:
    assert printable_ascii("IssueRefund (call 3) ran before VerifyIdentity.")
    assert not printable_ascii("a\x1bb") and not printable_ascii("a\x7f") and not printable_ascii("a\nb")
    assert not printable_ascii("✓")  # not ASCII: ``terminal`` decides


def test_md_fence_is_longer_than_any_backtick_run() -> None:
    assert md_fence("no ticks") == "```"
    assert md_fence("a ``` b") == "````"
    assert md_fence("x ``````` y ``") == "````````"


@pytest.mark.parametrize("lead", ["=", "+", "-", "@", "\t", "\r"])
def test_csv_cell_neutralises_formula_leads(lead: str) -> None:
    assert csv_cell(lead + "HYPERLINK(1)") == "'" + lead + "HYPERLINK(1)"


def test_csv_cell_leaves_other_values() -> None:
    assert csv_cell("t-1=x") == "t-1=x" and csv_cell(3) == 3 and csv_cell("") == ""


# -- terminal ------------------------------------------------------------------------------------------------
def test_check_text_escapes_the_engine_words(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "rules.yaml").write_text(rules_for(HOSTILE_TOOL), encoding="utf-8")
    write_traces(tmp_path / "t.jsonl", out_of_order(HOSTILE_ID, HOSTILE_TOOL))
    assert run(["check", str(tmp_path / "rules.yaml"), str(tmp_path / "t.jsonl")]) == 1
    out = capsys.readouterr().out
    assert raw_escapes(out) == [], out
    for head in ("Expected:", "Actual:", "Why:", "Suggestion:"):
        line = next(line for line in out.splitlines() if line.strip().startswith(head))
        assert "B\\x1b]52;c;aGk=\\x07" in line, line


def test_check_text_escapes_a_rule_id_in_its_block_and_tally(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules = f"rules:\n  - {{id: {json.dumps('a' + OSC0)}, type: before, first: A, then: B}}\n"
    (tmp_path / "rules.yaml").write_text(rules, encoding="utf-8")
    write_traces(tmp_path / "t.jsonl", out_of_order("t1", "B"))
    assert run(["check", str(tmp_path / "rules.yaml"), str(tmp_path / "t.jsonl")]) == 1
    out = capsys.readouterr().out
    assert raw_escapes(out) == [], out
    assert any(line.startswith("  a\\x1b]0;pwned\\x07 ") for line in out.splitlines())  # the tally


@pytest.fixture
def hostile_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A run whose one trace (hostile id) the judge split on, with a hostile summary and raw reply."""
    path = tmp_path / "seqjudge.db"
    monkeypatch.setenv("SEQJUDGE_STORE", str(path))
    trace = make_trace(HOSTILE_ID, good=False)
    judged = judge_result(HOSTILE_ID, {"confirm-delete": 2}, raw=f"reply {OSC52}")
    assert judged.report is not None
    judged = judged.model_copy(
        update={"report": judged.report.model_copy(update={"summary": f"fine {OSC52}\nPASS forged"})}
    )
    with Store(path) as s:
        run_id = s.create_run(config={}, fingerprint={})
        s.save_result(run_id, trace, make_result(trace, judged))
        item = s.review_items()[0].id
    return {"run": run_id, "item": item}


def test_review_and_runs_views_escape_stored_text(
    hostile_store: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    item = str(hostile_store["item"])
    assert run(["review", "list"]) == 0
    listed = capsys.readouterr()
    assert raw_escapes(listed.out + listed.err) == [] and "t\\x1b]0;pwned\\x07" in listed.out

    assert run(["review", "show", item]) == 0
    out = capsys.readouterr().out
    assert raw_escapes(out) == [], out
    summary = next(line for line in out.splitlines() if line.strip().startswith("summary:"))
    assert summary.endswith("fine \\x1b]52;c;aGk=\\x07\\nPASS forged")  # one line, the newline shown

    argv = ["review", "resolve", item, "--verdict", "fail", "--reviewer", f"eve{OSC0}", "--note", f"n{OSC52}"]
    assert run(argv) == 0
    said = capsys.readouterr()
    assert raw_escapes(said.out + said.err) == [] and "eve\\x1b]0;pwned\\x07" in said.out
    assert run(["review", "show", item]) == 0
    resolved = next(line for line in capsys.readouterr().out.splitlines() if "Resolved" in line)
    assert "by eve\\x1b]0;pwned\\x07" in resolved and "note: n\\x1b]52;c;aGk=\\x07" in resolved

    assert run(["runs", "show", "latest", "--trace", HOSTILE_ID]) == 0
    out = capsys.readouterr().out
    assert raw_escapes(out) == [] and out.startswith(
        f"Run {hostile_store['run']} · trace t\\x1b]0;pwned\\x07"
    )


def test_prompt_escapes_its_note_and_body(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "rules.yaml").write_text(rules_for(HOSTILE_TOOL), encoding="utf-8")
    write_traces(tmp_path / "t.jsonl", out_of_order(HOSTILE_ID, HOSTILE_TOOL), out_of_order("t2", "B"))
    assert run(["prompt", str(tmp_path / "rules.yaml"), str(tmp_path / "t.jsonl")]) == 0
    got = capsys.readouterr()
    assert "showing the first (t\\x1b]0;pwned\\x07)" in got.err and raw_escapes(got.err) == []
    assert "B\\x1b]52;c;aGk=\\x07" in got.out and raw_escapes(got.out) == []


def test_judge_text_escapes_the_judge_summary(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fake_llm: FakeLLMServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from cli_suite import write_suite

    write_suite(
        tmp_path, monkeypatch, [{"trace_id": HOSTILE_ID, "calls": [{"tool_name": "A"}, {"tool_name": "B"}]}]
    )
    fake_llm.enqueue(openai_chat(passing_reply(f"ok {OSC52}\nPASS forged")))
    assert run(judge_argv(fake_llm)) == 0
    out = capsys.readouterr().out
    assert raw_escapes(out) == [], out
    assert "    judge summary: ok \\x1b]52;c;aGk=\\x07\\nPASS forged" in out.splitlines()
    assert out.startswith("PASS     t\\x1b]0;pwned\\x07: engine pass")


def test_run_summary_escapes_the_model_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SEQJUDGE_MODEL", f"openai:gpt{OSC0}")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    (tmp_path / "rules.yaml").write_text(rules_for("B"), encoding="utf-8")
    write_traces(tmp_path / "t.jsonl", {"trace_id": "t1", "calls": [{"tool_name": "A"}, {"tool_name": "B"}]})
    # A model asked for without its key stops the run (exit 2); its message shows the value escaped.
    assert run(["run", "rules.yaml", "t.jsonl", "--store", str(tmp_path / "s.db")]) == 2
    got = capsys.readouterr()
    assert "model openai:gpt\\x1b]0;pwned\\x07 is configured" in got.err
    assert raw_escapes(got.out + got.err) == []


# -- markdown ------------------------------------------------------------------------------------------------
def assert_no_injection(md: str) -> None:
    assert "injected" in md  # the hostile name is shown ...
    outside = outside_fences(md)
    assert not any(line.startswith("# injected") for line in outside), md  # ... but is no heading
    # ... nor raw HTML (a code span shows HTML as text)
    assert not any("<img" in re.sub(r"`[^`]*`", "", line) for line in outside), md


def test_check_markdown_keeps_a_backtick_run_inside_its_fence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "rules.yaml").write_text(rules_for(FENCE_BREAK), encoding="utf-8")
    write_traces(tmp_path / "t.jsonl", out_of_order("t1", FENCE_BREAK))
    args = ["check", str(tmp_path / "rules.yaml"), str(tmp_path / "t.jsonl"), "--format", "markdown"]
    assert run(args) == 1
    assert_no_injection(capsys.readouterr().out)


HOSTILE_MD_ID = "t1\n# injected id <img src=y>"


@pytest.fixture
def two_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A baseline where a trace (its id hostile too) passes and a candidate where it fails on the
    fence-breaking tool."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SEQJUDGE_MODEL", raising=False)
    store = str(tmp_path / "s.db")
    (tmp_path / "rules.yaml").write_text(rules_for(FENCE_BREAK), encoding="utf-8")
    good = {"trace_id": HOSTILE_MD_ID, "calls": [{"tool_name": "A"}, {"tool_name": FENCE_BREAK}]}
    write_traces(tmp_path / "base.jsonl", good)
    write_traces(tmp_path / "cand.jsonl", out_of_order(HOSTILE_MD_ID, FENCE_BREAK))
    assert run(["run", "rules.yaml", "base.jsonl", "--store", store, "--label", "base"]) == 0
    assert run(["run", "rules.yaml", "cand.jsonl", "--store", store]) == 1
    with Store(Path(store)) as s:
        base, cand = sorted(s.list_runs(), key=lambda r: r.started_at)
    return {"store": store, "base": base.id, "cand": cand.id}


@pytest.mark.parametrize("command", ["report-ci", "compare"])
def test_ci_markdown_and_step_summary_keep_the_fence(
    command: str,
    two_runs: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    summary = tmp_path / "step.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    md = tmp_path / "comment.md"
    runs = [two_runs["cand"]] if command == "report-ci" else [two_runs["base"], two_runs["cand"]]
    assert run([command, *runs, "--store", two_runs["store"], "--markdown", str(md), "--github"]) == 1
    assert raw_escapes(capsys.readouterr().out) == []  # the annotations too
    assert_no_injection(md.read_text(encoding="utf-8"))
    assert_no_injection(summary.read_text(encoding="utf-8"))


# -- CSV -----------------------------------------------------------------------------------------------------
def test_csv_export_neutralises_formula_ids(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ids = ['=HYPERLINK("http://x","y")', "+1", "@SUM(A1)", "-2", "\tT", "plain-id"]
    path = tmp_path / "s.db"
    with Store(path) as s:
        run_id = s.create_run(config={}, fingerprint={})
        for trace_id in ids:
            trace = make_trace(trace_id)
            s.save_result(run_id, trace, make_result(trace))
    assert run(["runs", "export", run_id, "--format", "csv", "--store", str(path), "-o", "-"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["trace_id"] for r in rows] == ["'" + t for t in ids[:-1]] + ["plain-id"]
