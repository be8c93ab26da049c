"""`check`'s redaction screen (``Checker._redacted``) is cheaper, not weaker (issue 19 point 2).

It screens the trace id and the texts of the rules that quote trace values (``same:`` and blocklist rules),
remembering the texts that screened clean; ``may_need_redaction`` picks one search or one find per literal
by length. A secret must be redacted whatever came before it, wherever in the report it is quoted.
"""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from seqjudge.checkpool import Checker
from seqjudge.redact import (
    _SCREEN_SHORT,
    DEFAULT_REDACT,
    REDACTED,
    _screen_literals,
    _split_name_in,
    may_need_redaction,
    redact_text,
    redact_value,
)
from seqjudge.report import report_line
from seqjudge.rules.engine import Engine
from seqjudge.rules.model import RuleSet
from seqjudge.trace import PlainTrace

SECRET = "ghp_0123456789abcdefghijklmnopqrstuvwxyz"
PIECES = [
    *("password", "Pass_Word", "API-key", "apiKey", "token", "secret", "authorization", "Bearer abc123xyz9"),
    *("sk-", "://u:p@", "AKIA", "eyJ", "x", "7", " ", "_", "-", "é", "K", "\u212a", "=", ":", "\n", "ſ"),
]
TEXTS = st.one_of(
    st.lists(st.sampled_from(PIECES), max_size=12).map("".join),
    st.text(max_size=2 * _SCREEN_SHORT),
)


def reference(text: str, names: tuple[str, ...]) -> bool:
    """The screen as it was written before: one find per literal, then the user patterns, then the split
    names."""
    literals, user, _ = _screen_literals(names)
    low = text.lower()
    return (
        any(word in low for word in literals)
        or (user is not None and user.search(text) is not None)
        or _split_name_in(text, names)
    )


@settings(max_examples=500, deadline=None)
@given(text=TEXTS, names=st.sampled_from([DEFAULT_REDACT, ("pass_word", "value:acme-[0-9]+", "x")]))
def test_the_screen_answers_as_the_finds_did(text: str, names: tuple[str, ...]) -> None:
    for probe in (text, text * 8):  # short texts take the one search, long ones the finds
        assert may_need_redaction(probe, names) == reference(probe, names)
        if not may_need_redaction(probe, names):
            assert redact_text(probe, names) == probe


RULES = RuleSet.model_validate(
    {
        "rules": [
            {"type": "require", "tool": "a"},
            {"type": "before", "first": "get", "then": "cancel", "same": ["key"]},
            {"type": "max_calls", "tool": "cancel", "max": 1, "same": ["key"]},
            {"type": "blocklist", "pattern": "admin_"},
        ]
    }
)


def trace(trace_id: str, key: str, tool: str = "cancel") -> PlainTrace:
    return PlainTrace(trace_id, {}, ["a", tool], [True, True], [{}, {"key": key}], {})


def shown(checker: Checker, t: PlainTrace) -> bytes:
    return report_line(checker.data(t))


def test_a_secret_in_a_same_value_is_redacted_after_many_clean_traces() -> None:
    checker = Checker(Engine(RULES), 0.8, "medium")
    for n in range(50):
        line = shown(checker, trace(f"t{n}", f"k{n}"))
        assert REDACTED.encode() not in line
    assert checker._clean  # the constant texts were remembered
    for n in range(3):  # the same secret again and again: never remembered as clean
        line = shown(checker, trace(f"s{n}", SECRET))
        assert SECRET.encode() not in line and REDACTED.encode() in line


def test_a_secret_in_a_blocked_tools_name_or_the_trace_id_is_redacted() -> None:
    checker = Checker(Engine(RULES), 0.8, "medium")
    shown(checker, trace("t", "k"))
    line = shown(checker, trace("t2", "k", tool=f"admin_-{SECRET}"))
    assert SECRET.encode() not in line and REDACTED.encode() in line
    line = shown(checker, trace(f"id {SECRET}", "k"))
    assert SECRET.encode() not in line


def test_the_screen_reads_every_entry_when_the_rules_are_not_in_the_engines_order() -> None:
    engine = Engine(RULES)
    checker = Checker(engine, 0.8, "medium")
    data: dict[str, Any] = engine.check_data(trace("t", SECRET), explain="all")
    data["rules"].reverse()
    data["violations"] = []
    quoted = [r for r in data["rules"] if SECRET in (r.get("explanation") or "")]
    assert quoted  # the same: rules quote the value in their explanations
    assert SECRET not in str(checker._redacted(data))
    assert checker._redacted(data) == redact_value(data, keys=False)


@settings(max_examples=200, deadline=None)
@given(
    keys=st.lists(st.sampled_from(["k1", "k2", SECRET, f"token={SECRET}", "pass_word=abcd1234"]), max_size=8)
)
def test_the_remembered_texts_never_let_a_secret_through(keys: list[str]) -> None:
    checker = Checker(Engine(RULES), 0.8, "medium")
    for n, key in enumerate(keys):
        data = checker.data(trace(f"t{n}", key))
        fresh = Checker(Engine(RULES), 0.8, "medium").data(trace(f"t{n}", key))
        assert data == fresh  # what a checker with nothing remembered shows
        assert not re.search(r"ghp_0123|abcd1234", str(data))
