"""Issue 38.3: a secret label after another label ("database:\\n  password: x", "Error: api_key: x") was
taken for that label's value and its own value left in clear, on every path out of the process; a ``?key=``
in a URL (the judge's base URL in a stored run config) was stored as it was."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cli_suite import judge_argv, write_suite
from fakes.server import FakeLLMServer, openai_chat
from leak_probe import RULES, found, probe_trace, what_a_run_leaves
from seqjudge.cli import run
from seqjudge.redact import REDACTED, redact_text, redact_value
from seqjudge.store import Store
from test_redaction_paths import REPLY  # the judge's verdict: the rule failed

# The probe's three strings, each with a value found nowhere else.
PROBES = {
    "hunter2": "database:\n  password: hunter2",
    "K3Y-v4lue": "Error: api_key: K3Y-v4lue",
    "T0K-v4lue": "auth failed: token: T0K-v4lue",
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("database:\n  password: hunter2", "database:\n  password: [redacted]"),
        ("Error: api_key: KEY", "Error: api_key: [redacted]"),
        ("auth failed: token: TOK", "auth failed: token: [redacted]"),
        # any depth, YAML-like and single-line chains
        ("db:\n  creds:\n    password: deep", "db:\n  creds:\n    password: [redacted]"),
        ("a: b: c: password: x", "a: b: c: password: [redacted]"),
        ("Error: api_key: KEY, retry: 3", "Error: api_key: [redacted], retry: 3"),
        # a secret label's own value is another label: its secrecy passes down
        ("api_key: token: TOK", "api_key: token: [redacted]"),
        ("secret:\n  value: s3cr3t", "secret:\n  value: [redacted]"),
        # quoted strings taken for keys are looked inside
        ('for key="pass_word=abcd1234": x', 'for key="pass_word=[redacted]": x'),
        ('{"error": "api_key: KEY"}', '{"error": "api_key: [redacted]"}'),
        # a value with a colon under a secret key is still replaced whole
        ("password=abc:def", "password=[redacted]"),
        ("time: 12:30 ok", "time: 12:30 ok"),
    ],
)
def test_a_secret_label_after_another_label_is_redacted(text: str, expected: str) -> None:
    assert redact_text(text) == expected


LABELS = st.sampled_from(["Error", "database", "auth failed", "db", "config", "retry", "x.y", '"quoted"'])


@settings(max_examples=300, deadline=None)
@given(
    labels=st.lists(LABELS, max_size=5),
    secret=st.sampled_from(["password", "api_key", "token", "Authorization", "client_secret", "pass_word"]),
    joins=st.lists(st.sampled_from([": ", ":\n  ", ": ", "="]), min_size=6, max_size=6),
    tail=st.sampled_from(["", "\nnext: 1", ", retry: 3", " ok"]),
)
def test_a_secret_under_any_chain_of_labels_is_redacted(
    labels: list[str], secret: str, joins: list[str], tail: str
) -> None:
    chain = "".join(f"{label}{join}" for label, join in zip(labels, joins, strict=False))
    text = f"{chain}{secret}{joins[-1]}Hid3Me9{tail}"
    assert "Hid3Me9" not in redact_text(text), text


def test_url_query_parameters_named_like_credentials_are_redacted() -> None:
    url = "https://h.example/v1?key=AbC123&api-version=2024&sig=S1g&access_token=At&apikey=Ak&page=2"
    assert redact_text(url) == (
        "https://h.example/v1?key=[redacted]&api-version=2024&sig=[redacted]"
        "&access_token=[redacted]&apikey=[redacted]&page=2"
    )
    # only as a query parameter: a plain "key" is not a secret name (sort keys, primary keys...)
    assert redact_text("sort key=name at https://h.example/") == "sort key=name at https://h.example/"
    assert redact_value({"key": "name"}) == {"key": "name"}


def test_the_base_url_of_a_stored_run_config_loses_its_key(tmp_path: Path) -> None:
    base_url = "https://proxy.example/v1?key=Gk3yV4lue9&sig=S1gV4lue9"
    with Store(tmp_path / "s.db") as store:
        store.create_run(config={"model_options": {"base_url": base_url}}, fingerprint={"base_url": base_url})
    with sqlite3.connect(tmp_path / "s.db") as conn:
        (config, fingerprint) = conn.execute("SELECT config, fingerprint FROM runs").fetchone()
    for text in (config, fingerprint):
        assert "Gk3yV4lue9" not in text and "S1gV4lue9" not in text
    assert json.loads(config)["model_options"]["base_url"] == (
        f"https://proxy.example/v1?key={REDACTED}&sig={REDACTED}"
    )


TRACE = probe_trace("nested", *PROBES.values())


def leaked(text: str | bytes) -> list[str]:
    return found(list(PROBES), text)


@pytest.fixture
def suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return write_suite(tmp_path, monkeypatch, [TRACE], rules=RULES)


def test_the_prompt_and_the_provider_request_carry_no_nested_secret(
    suite: Path, fake_llm: FakeLLMServer, capsys
) -> None:
    assert run(["prompt", "rules.yaml", "t.jsonl"]) == 0
    out = capsys.readouterr().out
    assert "password: [redacted]" in out and leaked(out) == []
    fake_llm.enqueue(openai_chat(REPLY))
    assert run(judge_argv(fake_llm)) == 1
    (request,) = fake_llm.requests
    assert b"[redacted]" in request.raw and leaked(request.raw) == []
    assert leaked(capsys.readouterr().out) == []


def test_the_store_html_report_and_exports_hold_no_nested_secret(
    suite: Path, fake_llm: FakeLLMServer, capsys
) -> None:
    left = what_a_run_leaves(suite, fake_llm)
    assert "api_key: [redacted]" in left["store"]
    assert {path: leaked(text) for path, text in left.items()} == dict.fromkeys(left, [])
    capsys.readouterr()


def test_a_base_url_key_stays_out_of_provider_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    from seqjudge.cli.judge_cmd import _explain
    from seqjudge.errors import ProviderError
    from seqjudge.judge.providers import get_provider
    from seqjudge.judge.providers.base import redact

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-suite-0000")
    base_url = "https://gw.example/v1?api-version=1&key=Gk3yV4lue9"
    assert redact(f"could not connect to {base_url}") == (
        f"could not connect to https://gw.example/v1?api-version=1&key={REDACTED}"
    )
    provider = get_provider("openai:gpt-4o", base_url=base_url)
    explained = _explain(ProviderError("refused", kind="connection"), "openai:gpt-4o", base_url, done=0)
    for text in (repr(provider), provider.endpoint, str(explained)):  # type: ignore[attr-defined]
        assert "Gk3yV4lue9" not in text and "api-version=1" in text
