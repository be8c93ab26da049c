"""Issue 15.2: one redaction policy, by name and by value shape, on every path out of the process:
the provider request (real OpenAI SDK against the loopback fake), `prompt`, `check` text and JSON, the
store, the HTML report and the exports. A `value:REGEX` entry in `redact:` adds a pattern."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from cli_suite import judge_argv, write_suite
from fakes.server import FakeLLMServer, openai_chat
from seqjudge.cli import run
from seqjudge.redact import redact_text

RULES = "rules:\n  - {id: a-first, type: before, first: A, then: B, same: [ref]}\n"
# Key-shaped values under ordinary names, and one plain value under a secret name.
SECRETS = {
    "openai": "sk-proj-Zq8vN2rT5yW1xK4mP7sL0aB3",
    "bearer": "eyTok3nValue9abcdefgh",
    "urlpass": "hunter2pass",
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "github": "ghp_0123456789abcdefghijklmnopqrstuvwxyz",
    "slack": "xoxb-123456789012-abcdefghij",
    "named": "plain-but-named-password",
    "custom": "acme-1f2e3d4c",
}
TRACE = {
    "trace_id": "leaky",
    "calls": [
        {
            "tool_name": "B",
            "arguments": {
                "ref": "r1",
                "note": f"use {SECRETS['openai']} then",
                "header": f"Bearer {SECRETS['bearer']}",
                "url": f"https://bob:{SECRETS['urlpass']}@db.example.com/x",
                "cfg": f"aws {SECRETS['aws']} gh {SECRETS['github']}",
                "chat": SECRETS["slack"],
                "password": SECRETS["named"],
                "tag": SECRETS["custom"],
            },
        },
        {"tool_name": "A", "arguments": {"ref": "r1"}},
    ],
    "messages": [{"role": "user", "content": f"my key is {SECRETS['openai']}"}],
}
REPLY = {
    "sequence_correctness_score": 0.0,
    "total_rules_checked": 1,
    "rules_passed": 0,
    "rules_failed": 1,
    "violations": [
        {
            "rule_id": "a-first",
            "rule_description": "",
            "violation_type": "out_of_order",
            "expected_order": "A before B",
            "actual_order": "B first",
            "offending_call_index": 0,
            "severity": "critical",
            "explanation": "B before A",
        }
    ],
    "missing_prerequisites": [],
    "summary": "failed",
}


def leaked(text: str | bytes, *, custom: bool = False) -> list[str]:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return [k for k, v in SECRETS.items() if v in text and (custom or k != "custom")]


@pytest.fixture
def suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return write_suite(tmp_path, monkeypatch, [TRACE], rules=RULES)


def test_value_patterns_keep_the_shape_around_the_secret() -> None:
    assert redact_text("https://bob:pw12345@h.example/x") == "https://[redacted]@h.example/x"
    assert redact_text("auth Bearer abc123def456") == "auth Bearer [redacted]"
    assert redact_text("bearer instruments and max_tokens=5") == "bearer instruments and max_tokens=5"
    assert redact_text("id sk-ant-api03-abcdefghijklmnopqrstuv") == "id [redacted]"
    assert redact_text("tag acme-1f2e3d4c", ("value:acme-[0-9a-f]{8}",)) == "tag [redacted]"


def test_check_text_and_json_show_no_secret(suite: Path, capsys) -> None:
    assert run(["check", "rules.yaml", "t.jsonl"]) == 1
    out = capsys.readouterr().out
    assert "[redacted]" in out and leaked(out) == []
    for fmt in ("json", "jsonl"):
        assert run(["check", "rules.yaml", "t.jsonl", "--format", fmt]) == 1
        assert leaked(capsys.readouterr().out) == []


def test_prompt_and_the_provider_request_carry_no_secret(
    suite: Path, fake_llm: FakeLLMServer, capsys
) -> None:
    assert run(["prompt", "rules.yaml", "t.jsonl"]) == 0
    out = capsys.readouterr().out
    assert "[redacted]" in out and leaked(out) == []
    fake_llm.enqueue(openai_chat(REPLY))
    argv = judge_argv(fake_llm)
    assert run(argv) == 1
    (request,) = fake_llm.requests
    assert leaked(request.raw) == [] and b"[redacted]" in request.raw
    assert leaked(capsys.readouterr().out) == []


def test_store_html_report_and_exports_hold_no_secret(suite: Path, fake_llm: FakeLLMServer, capsys) -> None:
    (suite / "seqjudge.yaml").write_text(
        "rules: rules.yaml\ntraces: t.jsonl\nstore: s.db\nmodel: openai:gpt-4o\n"
        f"model_options: {{base_url: '{fake_llm.openai_base_url}'}}\n"
        'redact: [password, api_key, token, authorization, secret, "value:acme-[0-9a-f]{8}"]\n',
        encoding="utf-8",
    )
    fake_llm.enqueue(openai_chat(REPLY))
    assert run(["run", "seqjudge.yaml"]) == 1
    (request,) = fake_llm.requests
    assert leaked(request.raw, custom=True) == []
    with sqlite3.connect(suite / "s.db") as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        rows = [str(v) for t in tables for row in conn.execute(f"SELECT * FROM {t}") for v in row]
    assert "https://[redacted]@db.example.com/x" in "\n".join(rows)
    assert rows and leaked("\n".join(rows), custom=True) == []
    assert run(["report", "latest", "--store", "s.db", "-o", "report.html"]) == 0
    assert leaked((suite / "report.html").read_bytes(), custom=True) == []
    for fmt in ("jsonl", "csv"):
        assert run(["runs", "export", "latest", "--store", "s.db", "--format", fmt, "-o", f"x.{fmt}"]) == 0
        assert leaked((suite / f"x.{fmt}").read_bytes(), custom=True) == []
    capsys.readouterr()


def test_a_secret_quoted_by_a_report_through_same_is_redacted(tmp_path: Path, monkeypatch, capsys) -> None:
    rules = "rules:\n  - {id: d-first, type: before, first: A, then: B, same: [key]}\n"
    calls = [{"tool_name": "B", "arguments": {"key": SECRETS["github"]}}]
    write_suite(tmp_path, monkeypatch, [{"trace_id": "g", "calls": calls}], rules=rules)
    for fmt in ("text", "json", "jsonl"):
        assert run(["check", "rules.yaml", "t.jsonl", "--format", fmt]) == 1
        out = capsys.readouterr().out
        assert leaked(out) == [] and "[redacted]" in out, fmt
