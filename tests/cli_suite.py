"""A tiny suite on disk for CLI tests against the loopback fake server: one `before A -> B` rule, traces,
an API key in the environment, the working directory set to it (the response cache lives in ./.seqjudge)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

RULES = "rules:\n  - {id: a-first, type: before, first: A, then: B}\n"


def trace(trace_id: str, arguments: Any = None) -> dict[str, Any]:
    """A trace that passes ``a-first``: A (with ``arguments``), then B."""
    return {
        "trace_id": trace_id,
        "calls": [{"tool_name": "A", "arguments": arguments or {}}, {"tool_name": "B"}],
    }


def write_suite(
    folder: Path, monkeypatch: pytest.MonkeyPatch, traces: list[Any], *, rules: str = RULES
) -> Path:
    """rules.yaml and t.jsonl (each trace a dict, or a JSON line as it is) in ``folder``, which becomes the
    working directory."""
    monkeypatch.chdir(folder)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-suite-0000")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-suite-0000")
    monkeypatch.delenv("SEQJUDGE_MODEL", raising=False)
    (folder / "rules.yaml").write_text(rules, encoding="utf-8")
    lines = [t if isinstance(t, str) else json.dumps(t) for t in traces]
    (folder / "t.jsonl").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return folder


def passing_reply(summary: str = "fine", checked: int = 1) -> dict[str, Any]:
    """A judge reply that passes every one of ``checked`` rules."""
    return {
        "sequence_correctness_score": 1.0,
        "total_rules_checked": checked,
        "rules_passed": checked,
        "rules_failed": 0,
        "violations": [],
        "missing_prerequisites": [],
        "summary": summary,
    }


def judge_argv(server: Any, *extra: str) -> list[str]:
    """`seqjudge judge rules.yaml t.jsonl` with an OpenAI model served by the loopback fake ``server``."""
    return [
        "judge",
        "rules.yaml",
        "t.jsonl",
        "--model",
        "openai:gpt-4o",
        "--base-url",
        server.openai_base_url,
        *extra,
    ]


def run_argv(server: Any, *extra: str, model: str = "openai:gpt-4o") -> list[str]:
    """`seqjudge run rules.yaml t.jsonl --store s.db` with ``model`` (OpenAI or Anthropic) served by the
    loopback fake ``server``."""
    base = server.openai_base_url if model.startswith("openai") else server.anthropic_base_url
    return ["run", "rules.yaml", "t.jsonl", "--store", "s.db", "--model", model, "--base-url", base, *extra]
