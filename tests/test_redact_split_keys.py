"""A key that names a secret once its separators are dropped (``pass_word``, ``Pass-Word``, ``api.Key``) is
redacted in free text as it is in a mapping: the quick screens in front of the pair search must not let it
through because it does not contain the name's first word as written."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from seqjudge.redact import (
    DEFAULT_REDACT,
    json_needs_value_redaction,
    key_matches,
    may_need_redaction,
    redact_text,
    redact_value,
)

SECRET = "hunter2value"


@st.composite
def split_keys(draw: st.DrawFn) -> str:
    """A default name's letters, each in either case, with separators dropped between some of them."""
    name = draw(st.sampled_from(DEFAULT_REDACT)).replace("_", "")
    out = []
    for k, ch in enumerate(name):
        if k and draw(st.booleans()):
            out.append(draw(st.sampled_from(["_", "-", ".", "__"])))
        out.append(ch.upper() if draw(st.booleans()) else ch)
    return "".join(out)


def test_the_case_that_leaked() -> None:
    assert key_matches("pass_word", DEFAULT_REDACT)  # a mapping's key was always redacted
    assert redact_text(f"pass_word={SECRET}") == "pass_word=[redacted]"
    assert redact_text(f'{{"Pass-Word": "{SECRET}"}}') == '{"Pass-Word": "[redacted]"}'
    assert redact_value({"note": f"https://x.test/?pass_word={SECRET}"}, keys=False) == {
        "note": "https://x.test/?pass_word=[redacted]"
    }


@settings(max_examples=300, deadline=None)
@given(split_keys())
def test_a_matching_key_is_redacted_in_free_text_whatever_its_separators(key: str) -> None:
    assert key_matches(key, DEFAULT_REDACT)
    for text in (f"{key}={SECRET}", f"see {key}: {SECRET} here", f'{{"{key}": "{SECRET}"}}'):
        assert may_need_redaction(text)
        assert SECRET not in redact_text(text), text
    note = {"note": f"{key}={SECRET}"}
    assert json_needs_value_redaction(json.dumps(note, ensure_ascii=False))
    assert SECRET not in json.dumps(redact_value(note, keys=False))


def test_ordinary_text_still_passes_the_screens() -> None:
    for text in ("amount=3", "order_id=#W123 status=ok", "the tool returned 4 items"):
        assert not may_need_redaction(text)
        assert redact_text(text) == text
        assert not json_needs_value_redaction(json.dumps({"note": text}))


def test_a_trace_with_a_split_key_is_copied_with_it_redacted() -> None:
    from seqjudge.redact import redact_trace
    from seqjudge.trace import Trace

    trace = Trace.model_validate(
        {
            "calls": [{"tool_name": "login", "arguments": {"pass_word": SECRET}}],
            "context": {"pass\nword": SECRET},
        }
    )
    got = redact_trace(trace)  # the shortcut may keep a trace only when nothing in it would change
    assert got is not trace and SECRET not in got.model_dump_json()
