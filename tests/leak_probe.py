"""A trace carrying three probe strings (each holding a secret found nowhere else) and everything a `run`
of it leaves behind, for tests that follow secrets along every path out of the process: the provider
request, the store's tables, the HTML report and the exports."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from fakes.server import FakeLLMServer, openai_chat
from seqjudge.cli import run
from test_redaction_paths import REPLY  # the judge's verdict: the rule failed

RULES = "rules:\n  - {id: a-first, type: before, first: A, then: B}\n"


def probe_trace(trace_id: str, arguments: str, output: str, error: str) -> dict[str, Any]:
    """A failing trace (B before A) with the probes in B's arguments, output and error, and all three in a
    user message."""
    return {
        "trace_id": trace_id,
        "calls": [
            {
                "tool_name": "B",
                "arguments": {"config": arguments},
                "output": output,
                "status": "error",
                "error": error,
            },
            {"tool_name": "A", "arguments": {}},
        ],
        "messages": [{"role": "user", "content": "\n".join((arguments, output, error))}],
    }


def found(secrets: list[str], text: str | bytes) -> list[str]:
    """Which of ``secrets`` occur in ``text``."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return [secret for secret in secrets if secret in text]


def what_a_run_leaves(suite: Path, fake_llm: FakeLLMServer) -> dict[str, str]:
    """`seqjudge run` over the suite in ``suite`` with a store, then `report` and `runs export` in JSONL and
    CSV: the provider request, every stored value and each file, by name."""
    (suite / "seqjudge.yaml").write_text(
        "rules: rules.yaml\ntraces: t.jsonl\nstore: s.db\nmodel: openai:gpt-4o\n"
        f"model_options: {{base_url: '{fake_llm.openai_base_url}'}}\n",
        encoding="utf-8",
    )
    fake_llm.enqueue(openai_chat(REPLY))
    assert run(["run", "seqjudge.yaml"]) == 1
    (request,) = fake_llm.requests
    left = {"request": request.raw.decode("utf-8", "replace")}
    with sqlite3.connect(suite / "s.db") as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        left["store"] = "\n".join(
            str(v) for t in tables for row in conn.execute(f"SELECT * FROM {t}") for v in row
        )
    assert run(["report", "latest", "--store", "s.db", "-o", "report.html"]) == 0
    left["report"] = (suite / "report.html").read_text(encoding="utf-8", errors="replace")
    for fmt in ("jsonl", "csv"):
        assert run(["runs", "export", "latest", "--store", "s.db", "--format", fmt, "-o", f"x.{fmt}"]) == 0
        left[fmt] = (suite / f"x.{fmt}").read_text(encoding="utf-8", errors="replace")
    return left
