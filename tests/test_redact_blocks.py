"""Secrets that redaction let through on every path out of the process (issue-less defects found by the last
session and by the property test below):

- the children of a secret-named parent written as text (``secret:\\n  user: a\\n  pin: x``): only the
  first line under it was redacted; likewise a ``- item`` list or a ``|`` block scalar under it, and a
  ``{...}`` / ``[...]`` value of which only the opening bracket was replaced;
- a ``?key=`` / ``&sig=`` query parameter in text without ``://`` (``GET /v1/items?key=...``): the
  screen that spares clean text the work looked for a URL, so the pair was never looked at;
- found by the property test below: ``password => "x"`` and ``api_key := x`` (the operator's second
  character was taken for the value), ``<password>x</password>`` and ``--password x``.

Every check below failed on the code before the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cli_suite import write_suite
from fakes.server import FakeLLMServer
from leak_probe import RULES, found, probe_trace, what_a_run_leaves
from seqjudge.cli import run
from seqjudge.redact import (
    DEFAULT_REDACT,
    json_needs_value_redaction,
    may_need_redaction,
    redact_text,
    redact_trace,
    redact_value,
)
from seqjudge.trace import Trace


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # every child under the parent, the sibling after the block left alone
        (
            "secret:\n  user: a\n  pin: x\n  code: y\nnext: keep",
            "secret:\n  user: [redacted]\n  pin: [redacted]\n  code: [redacted]\nnext: keep",
        ),
        (
            "  api_key:\n    id: 1\n\n    value: 'v'\r\n  other: keep",
            "  api_key:\n    id: [redacted]\n\n    value: '[redacted]'\r\n  other: keep",
        ),
        (
            "- token:\n    a: 1\n    b: 2\n- name: keep",
            "- token:\n    a: [redacted]\n    b: [redacted]\n- name: keep",
        ),
        ("Error: api_key:\n  K1\n  K2\nretry: 3", "Error: api_key:\n  [redacted]\n  [redacted]\nretry: 3"),
        # lists and block scalars under it
        ("secret:\n  - a1\n  - b2\nnext: keep", "secret:\n  - [redacted]\n  - [redacted]\nnext: keep"),
        ("secret:\n- a1\n- b2\nnext: keep", "secret:\n- [redacted]\n- [redacted]\nnext: keep"),
        (
            "password: |\n  line: one\n  two\nnext: keep",
            "password: |\n  [redacted]\n  [redacted]\nnext: keep",
        ),
        # YAML anchors, tags (Ansible's vault) and comments on the key's line
        ("secret: &creds\n  user: a\nnext: keep", "secret: &creds\n  user: [redacted]\nnext: keep"),
        ("password: !vault |\n  6162\n  6364\nn: 1", "password: !vault |\n  [redacted]\n  [redacted]\nn: 1"),
        ("token: # rotated\n  a: b1\nn: 1", "token: # rotated\n  a: [redacted]\nn: 1"),
        ("password: &pw hunter2\nn: 1", "password: &pw [redacted]\nn: 1"),
        # an object or a list as the value: all of it, as a secret key's dict is
        ('{"secret": {"user": "a", "pin": "x}"}, "n": 1}', '{"secret": "[redacted]", "n": 1}'),
        ("secret: {user: a, pin: x}, next: keep", "secret: [redacted], next: keep"),
        ("password=[a1, b2] page=2", "password=[redacted] page=2"),
        ('{\\"token\\": {\\"a\\": \\"x\\"}}', '{\\"token\\": \\"[redacted]\\"}'),
        ("secret: {never closed, pin: x", "secret: [redacted]"),
        # unchanged: a secret label followed by an unindented line is the pair it always was
        ("secret:\n  value: s3cr3t", "secret:\n  value: [redacted]"),
        ("The password:\nhunter2 is it", "The password:\n[redacted] is it"),
    ],
)
def test_everything_under_a_secret_parent_is_redacted(text: str, expected: str) -> None:
    assert redact_text(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Ruby's, Perl's and PHP's => and Go's :=: the operator's second character was taken for the value
        ('{:password => "hunter2"}', '{:password => "[redacted]"}'),
        ("api_key := abc123", "api_key := [redacted]"),
        ("secret=(a1 b2) next", "secret=[redacted] next"),
        # XML elements, children included; an unclosed one to the end of its line
        ("<password>hunter2</password>", "<password>[redacted]</password>"),
        ('<s:ApiKey a="1">k1</s:ApiKey><x>keep</x>', '<s:ApiKey a="1">[redacted]</s:ApiKey><x>keep</x>'),
        ("<secret><user>a</user><pin>b</pin></secret>ok", "<secret>[redacted]</secret>ok"),
        ("<token>truncated\nnext", "<token>[redacted]\nnext"),
        ("usage: login <user> <password>\nok <token/>", "usage: login <user> <password>\nok <token/>"),
        # a command line's long option
        ("mysql -u root --password hunter2 db", "mysql -u root --password [redacted] db"),
        ('cmd --api-key "k 1" --page 2', 'cmd --api-key "[redacted]" --page 2'),
        ("a--token x and --password -v", "a--token x and --password -v"),
    ],
)
def test_other_shapes_of_a_secret_pair_are_redacted(text: str, expected: str) -> None:
    assert redact_text(text) == expected
    if text != expected:  # the store's shortcut may only skip what redaction would not change
        assert json_needs_value_redaction(json.dumps({"output": text}))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("GET /v1/items?key=Gk3y9&page=2", "GET /v1/items?key=[redacted]&page=2"),
        ("POST /hook?page=2&sig=S1g9 failed", "POST /hook?page=2&sig=[redacted] failed"),
        ("retry items?pwd=hunter2&a=1", "retry items?pwd=[redacted]&a=1"),
        ("/v1/items?api_key=abc&page=2", "/v1/items?api_key=[redacted]&page=2"),
        # ordinary words stay: a name only counts as a query parameter's
        ("sort key=name, Q&A: what? key=x", "sort key=name, Q&A: what? key=x"),
        ("tom&jerry=1 ?page=2", "tom&jerry=1 ?page=2"),
    ],
)
def test_a_query_parameter_without_a_url_is_redacted(text: str, expected: str) -> None:
    assert redact_text(text) == expected
    # the shortcuts around the walk (store, terminal) must see it too
    assert json_needs_value_redaction(json.dumps({"output": text})) == (text != expected)
    assert redact_value({"output": text}, keys=False) == {"output": expected}
    if text != expected:
        assert may_need_redaction(text)


# The property: a secret value written in any of the text shapes people paste into tool outputs, under any
# configured name, never survives redaction - on the text itself, the trace (prompt, check output and store),
# and the store's and the terminal's shortcuts that decide whether to redact at all.
SECRET_NAMES = st.sampled_from(
    ["password", "api_key", "Api-Key", "apiKey", "token", "access_token", "client_secret", "Authorization"]
)
QUERY_NAMES = st.sampled_from(
    ["key", "sig", "signature", "pwd", "apikey", "x-api-key", "token", "credential"]
)
LABELS = st.sampled_from(["user", "host", "value", "pin", "id", "db_name", "note"])
SECRET = st.text(alphabet="abcdefghijkmnpqrstuvwxyzABCDEFGH23456789", min_size=5, max_size=12).map(
    lambda s: f"Qz{s}"
)
PROSE = st.sampled_from(["", "tool said:\n", "Error: ", "config dump\n", "ok. "])
INDENTS = st.sampled_from(["", "  ", "    "])


@st.composite
def secret_texts(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A text with secrets embedded, and the secrets."""
    name, one, two = draw(SECRET_NAMES), draw(SECRET), draw(SECRET)
    indent, step = draw(INDENTS), draw(st.sampled_from(["  ", "    ", "\t"]))
    labels = draw(st.lists(LABELS, min_size=2, max_size=4, unique=True))
    shape = draw(
        st.sampled_from(["block", "list", "scalar", "flow", "json", "query", "chain", "arrow", "xml", "flag"])
    )
    if shape == "block":
        values = [draw(st.sampled_from([one, two, f'"{one}"', f"'{two}'"])) for _ in labels]
        body = "".join(
            f"\n{indent}{step}{label}: {value}" for label, value in zip(labels, values, strict=True)
        )
        head = draw(st.sampled_from(["", " &anchor", " # comment", " !tag"]))
        text, secrets = f"{indent}{name}:{head}{body}", [v.strip("'\"") for v in values]
    elif shape == "list":
        text, secrets = f"{indent}{name}:\n{indent}{step}- {one}\n{indent}{step}- {two}", [one, two]
    elif shape == "scalar":
        text, secrets = (
            f"{indent}{name}: |-\n{indent}{step}{one}\n{indent}{step}{labels[0]}: {two}",
            [one, two],
        )
    elif shape == "flow":
        text, secrets = f"{name}: {{{labels[0]}: {one}, {labels[1]}: [{two}]}}", [one, two]
    elif shape == "json":
        text = json.dumps({"r": {name: {labels[0]: one, labels[1]: [two, {"x": one}]}}, "n": 1})
        secrets = [one, two]
    elif shape == "query":
        text = f"GET /v1/items?page=2&{draw(QUERY_NAMES)}={one}&{draw(QUERY_NAMES)}={two}#top"
        secrets = [one, two]
    elif shape == "arrow":
        text, secrets = f"{{{labels[0]} => 1, {name} {draw(st.sampled_from(['=>', ':=']))} '{one}'}}", [one]
    elif shape == "xml":
        text = f"<r><{labels[0]}>v</{labels[0]}><{name}><{labels[1]}>{one}</{labels[1]}>{two}</{name}></r>"
        secrets = [one, two]
    elif shape == "flag":
        text, secrets = f"run --{labels[0]} 1 --{name} {one} --verbose", [one]
    else:
        text, secrets = f"{labels[0]}: {labels[1]}: {name}: {one}", [one]
    tail = draw(st.sampled_from(["", "\nnext: Vis1ble", "\n\nVis1ble done"]))
    return f"{draw(PROSE)}{text}{tail}", secrets


@settings(max_examples=400, deadline=None)
@given(case=secret_texts())
def test_no_embedded_secret_survives_any_redaction_path(case: tuple[str, list[str]]) -> None:
    text, secrets = case
    redacted = redact_text(text)
    assert not [s for s in secrets if s in redacted], (text, redacted)
    if "Vis1ble" in text:
        assert "Vis1ble" in redacted  # what follows the block is not part of it
    assert may_need_redaction(text)
    assert json_needs_value_redaction(json.dumps({"output": text}, ensure_ascii=False), DEFAULT_REDACT)
    trace = Trace.model_validate(
        {
            "trace_id": "t",
            "calls": [{"tool_name": "Read", "arguments": {"q": text}, "output": text, "error": text}],
            "messages": [{"role": "user", "content": text}],
        }
    )
    dumped = redact_trace(trace).model_dump_json()
    assert not [s for s in secrets if json.dumps(s)[1:-1] in dumped], (text, dumped)


# End to end, as tests/test_redact_nested_labels.py does for labels: the shapes above in a trace reach the
# prompt, the provider request, the store, the HTML report and the exports without their secrets.
PROBES = {
    "Qu3ryKey9": "GET /v1/items?key=Qu3ryKey9&page=2",
    "Fl0wPin9": '{"secret": {"pin": "Fl0wPin9"}}',
    "Bl0ckPin9": "secret:\n  user: admin\n  pin: Bl0ckPin9",
}


def test_prompt_store_report_and_exports_hold_none_of_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_llm: FakeLLMServer, capsys
) -> None:
    suite = write_suite(tmp_path, monkeypatch, [probe_trace("blocks", *PROBES.values())], rules=RULES)
    assert run(["prompt", "rules.yaml", "t.jsonl"]) == 0
    out = capsys.readouterr().out
    assert "pin: [redacted]" in out and found(list(PROBES), out) == []
    left = what_a_run_leaves(suite, fake_llm)
    assert "user: [redacted]" in left["store"]
    assert {path: found(list(PROBES), text) for path, text in left.items()} == dict.fromkeys(left, [])
    capsys.readouterr()
