"""The store's shortcut around redaction: ``json_needs_value_redaction`` may only say False when walking the
value would change nothing, and ``json_holds_secret`` must see a secret however JSON escapes it."""

from __future__ import annotations

import json
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from seqjudge.redact import (
    _FOLD,
    DEFAULT_REDACT,
    _fold,
    _redacted_copy,
    json_holds_secret,
    json_needs_value_redaction,
    redact_trace,
    redact_value,
    scrub_secrets,
)
from seqjudge.trace import Trace


def dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def test_fold_covers_every_character_re_matches_to_an_ascii_letter_or_digit() -> None:
    # Derived from `re` itself: every character a case-insensitive pattern takes for an ASCII letter or
    # digit must fold to it, or a plain find would miss what redact_text's filter sees.
    everything = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    for target in "abcdefghijklmnopqrstuvwxyz0123456789":
        for m in re.finditer(re.escape(target), everything, re.IGNORECASE):
            assert _fold(m.group()) == target, (hex(ord(m.group())), target)
    assert all(len(_fold(chr(c))) == 1 for c in _FOLD)


def test_fold_keeps_positions() -> None:
    text = "İstanbul ſecret K ı ß Ω " * 3
    assert len(_fold(text)) == len(text)


def test_says_false_for_a_result_without_secrets() -> None:
    value = {
        "rule_id": "external-api-budget",
        "explanation": "ExternalAPI called 7 times; at most 5 allowed.",
        "usage": {"input_tokens": 3000, "output_tokens": 120},
    }
    assert not json_needs_value_redaction(dumps(value))
    assert redact_value(value, DEFAULT_REDACT, keys=False) == value


def test_says_true_where_a_pair_hides_in_a_string() -> None:
    for text in (
        "called with api_key=sk-abc123",
        'payload {"password": "hunter2"}',
        "Authorization: Bearer abc",
        "pass_word=hunter2 and an API",  # the key is not the word the filter finds; the pair still counts
        "ſecret: x",  # case-insensitive regex matching takes the long s for an s
    ):
        assert json_needs_value_redaction(dumps({"explanation": text})), text
        assert json_needs_value_redaction(dumps([{"deep": [text]}])), text


def test_a_name_in_a_key_alone_does_not_count() -> None:
    # keys=False: keys are never redacted, so a key named like a secret does not force the walk.
    assert not json_needs_value_redaction(dumps({"api_key": 1, "max_tokens": 2, "note": "x: y"}))


ALPHABET = st.sampled_from(
    [
        "api",
        "API",
        "key",
        "_",
        "token",
        "pass",
        "word",
        "secret",
        "ſ",
        "ı",
        "K",
        "İ",
        "auth",
        "orization",
        ":",
        "=",
        " ",
        '"',
        "'",
        "\\",
        "\n",
        "\t",
        "x",
        "Bearer ",
        "sk-1",
        "é",
        "{",
        "}",
        ",",
    ]
)
TEXT = st.lists(ALPHABET, max_size=12).map("".join)
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=600, deadline=None)
@given(VALUES)
def test_false_is_a_guarantee(value: object) -> None:
    if not json_needs_value_redaction(dumps(value)):
        assert redact_value(value, DEFAULT_REDACT, keys=False) == value


@settings(max_examples=300, deadline=None)
@given(VALUES, st.text(min_size=1, max_size=12))
def test_a_secret_is_seen_however_it_is_escaped(value: object, secret: str) -> None:
    holder = {"v": value, "s": f"before {secret} after", secret: 1}
    assert json_holds_secret(dumps(holder), [secret])
    if not json_holds_secret(dumps(value), [secret]):
        assert scrub_secrets(value, [secret]) == value


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.tuples(TEXT.filter(bool), st.dictionaries(TEXT, VALUES, max_size=3), VALUES), max_size=3),
    st.dictionaries(TEXT, VALUES, max_size=2),
)
def test_redact_trace_returns_the_trace_itself_only_when_the_walk_changes_nothing(
    calls: list[tuple[str, dict[str, object], object]], context: dict[str, object]
) -> None:
    # A trace that needs nothing redacted is not copied (a million-call trace tripled `run`'s memory), and
    # the shortcut never skips a redaction: what comes back always equals the walk's copy.
    trace = Trace.model_validate(
        {
            "calls": [{"tool_name": n, "arguments": a, "output": o} for n, a, o in calls],
            "context": context,
        }
    )
    walked = _redacted_copy(trace, tuple(DEFAULT_REDACT))  # the walk, without the shortcut
    got = redact_trace(trace)
    assert got == walked
    if got is trace:
        assert walked == trace


def test_a_clean_trace_is_not_copied_and_a_secret_one_is() -> None:
    clean = Trace.model_validate({"calls": [{"tool_name": "get_order", "arguments": {"order_id": "#1"}}]})
    assert redact_trace(clean) is clean
    for arguments in ({"password": "hunter2"}, {"note": "token=abc"}, {"q": "sk-" + "a" * 24}):
        secret = Trace.model_validate({"calls": [{"tool_name": "login", "arguments": arguments}]})
        redacted = redact_trace(secret)
        assert redacted is not secret and redacted != secret
