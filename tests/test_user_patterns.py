"""Issue 38.6: every pattern a user gives (``--error-pattern``, ``redact: ["value:..."]``) goes through the
time-limited matcher: a backtracking pattern stops with exit 2 naming the pattern and the input, never a
hang, and never a silent "no match"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seqjudge.cli import run
from seqjudge.errors import InputError
from seqjudge.redact import REDACTED, redact_text, redact_value

RULES = "rules:\n  - id: r\n    type: require\n    tool: a\n"
SLOW = "a" * 60 + "!"  # (a|aa)+$ backtracks through fib(60) ways of splitting it with Python's re


def write_suite(tmp_path: Path, output: str) -> tuple[Path, Path]:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES, encoding="utf-8")
    traces = tmp_path / "traces.jsonl"
    trace = {"trace_id": "t1", "calls": [{"tool_name": "a", "output": output}]}
    traces.write_text(json.dumps(trace) + "\n", encoding="utf-8")
    return rules, traces


@pytest.mark.parametrize("command", ["check", "convert"])
def test_a_backtracking_error_pattern_is_stopped_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    rules, traces = write_suite(tmp_path, SLOW)
    if command == "check":
        argv = ["check", str(rules), str(traces), "--workers", "0"]
    else:
        argv = ["convert", str(traces), "-o", str(tmp_path / "out.jsonl")]
    assert run([*argv, "--error-pattern", "(a|aa)+$"]) == 2
    err = capsys.readouterr().err
    assert "--error-pattern" in err and "'(a|aa)+$'" in err and str(traces) in err
    assert "took longer than" in err and "Traceback" not in err


def test_the_probe_pattern_over_a_41_character_output_finishes(tmp_path: Path) -> None:
    rules, traces = write_suite(tmp_path, "a" * 40 + "!")
    argv = ["check", str(rules), str(traces), "--workers", "0", "--error-pattern", r"^(\w+\s?)*$"]
    assert run(argv) == 0  # no match: the call stays ok
    rules, traces = write_suite(tmp_path, "error happened here and there and everywhere")
    assert run([*argv[:-1], r"^(\w+\s?)*$"]) == 1  # a match marks the call failed (require: tool a ok)


def test_a_backtracking_redact_pattern_is_stopped_and_named() -> None:
    names = ("value:(a|aa)+$",)
    with pytest.raises(InputError, match=r"took longer than") as caught:
        redact_text(SLOW, names)
    assert caught.value.where == "redact" and "(a|aa)+$" in str(caught.value)
    with pytest.raises(InputError, match=r"took longer than"):
        redact_value({"output": SLOW}, names)


def test_a_redact_pattern_still_redacts() -> None:
    names = ("value:acme-[0-9a-f]{8}",)
    assert redact_text("key acme-0123abcd here " + "x" * 100, names) == f"key {REDACTED} here " + "x" * 100
