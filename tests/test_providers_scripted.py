"""The scripted provider, the provider-neutral request/reply models and the registry."""

from __future__ import annotations

import subprocess
import sys

import pytest
from pydantic import ValidationError

from seqjudge.errors import InputError, ProviderError
from seqjudge.judge.providers import (
    JudgeRequest,
    Provider,
    ProviderReply,
    Usage,
    get_provider,
    registry,
)
from seqjudge.judge.providers.base import parse_json_object, parse_model_spec, redact, register_provider
from seqjudge.judge.providers.scripted import ScriptedProvider, ScriptExhaustedError

SCHEMA = {
    "type": "object",
    "properties": {"score": {"type": "number"}},
    "required": ["score"],
    "additionalProperties": False,
}


def make_request(**changes: object) -> JudgeRequest:
    fields: dict[str, object] = {
        "system": "judge",
        "static_prompt": "S" * 40,
        "dynamic_prompt": "D" * 20,
        "schema": SCHEMA,
        "schema_name": "judgement",
    }
    fields.update(changes)
    return JudgeRequest.model_validate(fields)


# -- ScriptedProvider --------------------------------------------------------------------------------------
async def test_replies_come_in_order_and_requests_are_recorded() -> None:
    canned = ProviderReply(text="{}", parsed={}, model="m", finish_reason="length")
    provider = ScriptedProvider(
        [{"score": 1.0}, "not json", ProviderError("down", kind="server"), canned], model="fixture"
    )
    first = await provider.complete(make_request())
    assert first.text == '{"score": 1.0}' and first.parsed == {"score": 1.0}
    assert first.model == "fixture" and first.finish_reason == "stop"
    assert first.sampling_sent == {"temperature": 0.0} and first.sampling_controlled is True

    second = await provider.complete(make_request(dynamic_prompt="other"))
    assert second.text == "not json" and second.parsed is None

    with pytest.raises(ProviderError, match="down"):
        await provider.complete(make_request())

    fourth = await provider.complete(make_request())
    assert fourth.finish_reason == "length" and fourth.text == "{}"
    assert fourth.request_hash  # filled in for a reply given without one

    assert len(provider.requests) == 4
    assert provider.requests[1].dynamic_prompt == "other"
    assert provider.remaining == 0


async def test_usage_is_estimated_from_characters() -> None:
    provider = ScriptedProvider(["x" * 41])
    reply = await provider.complete(make_request())
    prompt_chars = len("judge") + len(make_request().user_text)
    assert reply.usage == Usage(input_tokens=prompt_chars // 4, output_tokens=10)


async def test_empty_script_raises_a_clear_error() -> None:
    provider = ScriptedProvider([{"score": 0.0}])
    await provider.complete(make_request())
    with pytest.raises(ScriptExhaustedError) as caught:
        await provider.complete(make_request())
    assert isinstance(caught.value, ProviderError)
    assert "no reply left for call 2" in str(caught.value)
    assert "had 1" in str(caught.value)
    assert len(provider.requests) == 2


async def test_request_hash_matches_the_request() -> None:
    provider = ScriptedProvider(["{}", "{}", "{}"])
    a = await provider.complete(make_request())
    b = await provider.complete(make_request())
    c = await provider.complete(make_request(dynamic_prompt="changed"))
    assert a.request_hash == b.request_hash != c.request_hash


def test_scripted_is_in_the_registry_and_a_provider() -> None:
    provider = get_provider("scripted:any")
    assert isinstance(provider, ScriptedProvider)
    assert provider.model == "any" and provider.name == "scripted"
    assert isinstance(provider, Provider)
    with_replies = get_provider("scripted:x", replies=["{}"], temperature=None)
    assert isinstance(with_replies, ScriptedProvider) and with_replies.remaining == 1


# -- JudgeRequest ------------------------------------------------------------------------------------------
def test_request_is_frozen() -> None:
    request = make_request()
    with pytest.raises(ValidationError):
        request.dynamic_prompt = "changed"  # type: ignore[misc]


def test_user_text_puts_the_static_prompt_first() -> None:
    assert make_request(static_prompt="A", dynamic_prompt="B").user_text == "A\n\nB"
    assert make_request(static_prompt="", dynamic_prompt="B").user_text == "B"


@pytest.mark.parametrize(
    "reask",
    [
        [{"role": "user", "content": "wrong first"}],
        [{"role": "assistant", "content": "bad"}],  # must end with the user's correction
        [{"role": "assistant", "content": None}, {"role": "user", "content": "x"}],
    ],
)
def test_malformed_reask_is_rejected(reask: list[dict[str, object]]) -> None:
    with pytest.raises(ValidationError):
        make_request(reask=reask)


def test_schema_name_must_suit_both_apis() -> None:
    with pytest.raises(ValidationError):
        make_request(schema_name="has spaces")


def test_request_hash_covers_every_field_and_the_wire() -> None:
    base = make_request()
    digest = base.request_hash("openai", "gpt-4o", {"temperature": 0})
    assert digest == make_request().request_hash("openai", "gpt-4o", {"temperature": 0})
    variants = [
        make_request(system="other"),
        make_request(static_prompt="other"),
        make_request(dynamic_prompt="other"),
        make_request(schema={**SCHEMA, "description": "x"}),
        make_request(reask=[{"role": "assistant", "content": "a"}, {"role": "user", "content": "b"}]),
        make_request(max_tokens=10),
    ]
    for variant in variants:
        assert variant.request_hash("openai", "gpt-4o", {"temperature": 0}) != digest
    assert base.request_hash("anthropic", "gpt-4o", {"temperature": 0}) != digest
    assert base.request_hash("openai", "gpt-4o-mini", {"temperature": 0}) != digest
    assert base.request_hash("openai", "gpt-4o", {"temperature": 0.5}) != digest
    # Key order of the schema does not matter: canonical JSON.
    reordered = dict(reversed(list(SCHEMA.items())))
    assert make_request(schema=reordered).request_hash("openai", "gpt-4o", {"temperature": 0}) == digest


# -- registry ----------------------------------------------------------------------------------------------
def test_spec_parsing_keeps_colons_in_the_model() -> None:
    assert parse_model_spec("openai:gpt-4o") == ("openai", "gpt-4o")
    assert parse_model_spec("OpenAI:llama3.1:8b") == ("openai", "llama3.1:8b")
    for bad in ("gpt-4o", "openai:", ":gpt-4o"):
        with pytest.raises(InputError, match="provider:model"):
            parse_model_spec(bad)


def test_unknown_provider_lists_the_known_ones() -> None:
    with pytest.raises(InputError) as caught:
        get_provider("mistral:large")
    message = str(caught.value)
    assert "unknown provider 'mistral'" in message
    assert "anthropic, openai, scripted" in message


def test_unknown_option_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-000000000000")
    with pytest.raises(InputError, match="temprature"):
        get_provider("openai:gpt-4o", temprature=0)


def test_register_a_custom_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))  # keep the global registry clean
    register_provider("echo", lambda model, **options: ScriptedProvider(["{}"], model=model))
    provider = get_provider("echo:m1")
    assert isinstance(provider, ScriptedProvider) and provider.model == "m1"


def test_importing_providers_does_not_import_the_sdks() -> None:
    code = (
        "import sys, seqjudge.judge.providers as p; p.get_provider('scripted:x'); "
        "assert 'openai' not in sys.modules and 'anthropic' not in sys.modules, "
        "[m for m in ('openai', 'anthropic') if m in sys.modules]"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- helpers -----------------------------------------------------------------------------------------------
def test_parse_json_object() -> None:
    assert parse_json_object('{"a": 1}') == {"a": 1}
    assert parse_json_object('```json\n{"a": 1}\n```') == {"a": 1}
    assert parse_json_object("[1, 2]") is None
    assert parse_json_object('Sure! {"a": 1}') is None  # no guessing beyond a fence


def test_redact() -> None:
    key = "sk-proj-abcdefghijklmnop"
    assert key not in redact(f"bad key {key}", key)
    assert "sk-proj-abc" not in redact("Incorrect API key provided: sk-proj-abc*****mnop")
    assert redact("http://user:pass@host:8000/v1") == "http://[redacted]@host:8000/v1"
    assert "tok123456789" not in redact("Authorization: Bearer tok123456789")
