"""The provider boundary: what the judge sends, what it gets back, and how a model is chosen.

Everything the judge needs from a model goes through ``Provider.complete(JudgeRequest) -> ProviderReply``.
Adapters own the wire format, the SDK client (and with it the *only* layer of transport retries) and the
mapping of every SDK exception to ``ProviderError``; the judge owns prompts, validation and re-asks. Keeping
that line sharp is what stops retries from multiplying and secrets from leaking into messages.
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import re
import time
import warnings
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator

from seqjudge.errors import InputError, ProviderError

# The registry lives in its own module; these names stay importable from here, where callers found them.
from seqjudge.judge.providers.registry import (
    get_provider,
    known_providers,
    parse_model_spec,
    register_provider,
)
from seqjudge.redact import redact_query

__all__ = [
    "FinishReason",
    "JudgeRequest",
    "Provider",
    "ProviderReply",
    "TransportObservable",
    "Usage",
    "WireProvider",
    "canonical_json",
    "get_provider",
    "known_providers",
    "parse_json_object",
    "parse_model_spec",
    "redact",
    "register_provider",
]

FinishReason = Literal["stop", "length", "refusal", "tool_use", "other"]

# OpenAI's json_schema.name and Anthropic's tool name both accept this shape; checking it here turns a 400
# from the provider into an error at construction time.
_SCHEMA_NAME = r"^[A-Za-z0-9_-]{1,64}$"


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)  # built once


def canonical_json(value: Any) -> str:
    """One byte sequence per value: sorted keys, no whitespace, UTF-8 kept (hashes must not see key order)."""
    return _CANONICAL.encode(value)


def canonical_object(parts: dict[str, str]) -> str:
    """``canonical_json`` of an object whose values are given already encoded (``canonical_json`` each):
    the same text, without encoding a large value twice."""
    return "{" + ",".join(f"{canonical_json(k)}:{v}" for k, v in sorted(parts.items())) + "}"


# The prompt is most of a request and is hashed more than once per call (request hash, cache key): the
# encoding of recent requests is kept, by identity. Requests are frozen, and an entry holds its request, so
# an id is never reused while it is here.
_REQUEST_JSON: dict[int, tuple[Any, str]] = {}


_LARGE = 2048
_PART_JSON: dict[str, str] = {}


def _encode_part(value: Any) -> str:
    if isinstance(value, str) and len(value) >= _LARGE:
        # A str caches its own hash, so looking up the same object again costs nothing.
        hit = _PART_JSON.get(value)
        if hit is None:
            hit = _extend_known(value)
            if len(_PART_JSON) >= 16:
                _PART_JSON.pop(next(iter(_PART_JSON)))  # the oldest
            _PART_JSON[value] = hit
        return hit
    return canonical_json(value)


def _extend_known(value: str) -> str:
    """``canonical_json(value)``, reusing the encoding of a large string ``value`` starts with: a request
    body's user message is the run's static prompt followed by one trace's part. A JSON string's text is
    its characters' escapes one after another, so the encoding of a concatenation is the two encodings
    joined (without the quotes in between)."""
    for known, text in reversed(_PART_JSON.items()):
        if value.startswith(known):
            return text[:-1] + canonical_json(value[len(known) :])[1:]
    return canonical_json(value)


def canonical_json_shared(value: Any) -> str:
    """``canonical_json(value)``, with large strings encoded through the cache of recent parts."""
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return canonical_object({k: canonical_json_shared(v) for k, v in value.items()})
        return canonical_json(value)
    if isinstance(value, list | tuple):
        return "[" + ",".join(canonical_json_shared(v) for v in value) + "]"
    return _encode_part(value)


def request_json(request: Any) -> str:
    """``canonical_json(request.model_dump(mode="json"))``, remembered for recent requests."""
    hit = _REQUEST_JSON.get(id(request))
    if hit is not None and hit[0] is request:
        return hit[1]
    # Field by field, so that the large parts every trace of a run shares (the system prompt and the
    # static prefix: the same string objects) are encoded once per run, not once per trace. The result is
    # byte-identical to canonical_json of the whole dump: canonical_object sorts keys the same way.
    text = canonical_object({k: _encode_part(v) for k, v in request.model_dump(mode="json").items()})
    if len(_REQUEST_JSON) >= 512:
        _REQUEST_JSON.pop(next(iter(_REQUEST_JSON)), None)  # the oldest
    _REQUEST_JSON[id(request)] = (request, text)
    return text


class Usage(BaseModel):
    """Token usage of one reply, normalised across providers.

    ``input_tokens`` is *every* prompt token, cached or not (OpenAI's ``prompt_tokens``; Anthropic's
    ``input_tokens + cache_creation_input_tokens + cache_read_input_tokens``). ``cached_input_tokens`` and
    ``cache_write_tokens`` are the parts of it read from / written to the prompt cache, so the uncached part
    is ``input_tokens - cached_input_tokens - cache_write_tokens`` and costs can be priced per kind.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
        )


# ``schema`` is the natural name and the one the judge uses; pydantic only warns that it shadows the
# deprecated ``BaseModel.schema()`` classmethod, which nothing here calls.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message='Field name "schema"', category=UserWarning)

    class JudgeRequest(BaseModel):
        """One judge call, provider-neutral.

        ``static_prompt`` must be byte-identical across the traces of a run (instructions, schema, catalog,
        rules, examples, risk level) and ``dynamic_prompt`` carries the trace: adapters send the static part
        first so the provider's prompt cache can reuse it. ``reask`` holds the extra turns of a re-ask,
        ``[{"role": "assistant", "content": bad_reply}, {"role": "user", "content": what_was_wrong}]``.
        ``temperature``/``seed`` are what the judge would like; adapters drop what their model rejects and
        say so in ``ProviderReply.sampling_sent``.
        """

        model_config = ConfigDict(frozen=True, extra="forbid")

        system: str
        static_prompt: str
        dynamic_prompt: str
        schema: dict[str, Any]  # type: ignore[assignment]  # shadows the deprecated BaseModel.schema()
        schema_name: str = Field(pattern=_SCHEMA_NAME)
        reask: list[dict[str, Any]] = Field(default_factory=list)
        max_tokens: int = Field(default=4096, gt=0)
        temperature: float | None = 0.0
        seed: int | None = None

        @field_validator("reask")
        @classmethod
        def _reask_alternates(cls, turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
            # Both APIs need user/assistant alternation after the first user turn, and the last turn must be
            # the user's correction; catching a malformed re-ask here beats a 400 from the provider.
            for i, turn in enumerate(turns):
                expected = "assistant" if i % 2 == 0 else "user"
                if turn.get("role") != expected or not isinstance(turn.get("content"), str):
                    raise ValueError(
                        f"reask[{i}] must be {{'role': '{expected}', 'content': str}}, got {sorted(turn)}"
                    )
            if turns and turns[-1]["role"] != "user":
                raise ValueError("reask must end with the user turn that says what was wrong")
            return turns

        @property
        def user_text(self) -> str:
            """The static and dynamic prompt as one user message (OpenAI), static first."""
            return "\n\n".join(part for part in (self.static_prompt, self.dynamic_prompt) if part)

        def request_hash(self, provider: str, model: str, sent_params: dict[str, Any]) -> str:
            """sha256 over everything that goes on the wire for this request, and nothing secret.

            ``sent_params`` is what the adapter adds (its exact request body and endpoint); the request's own
            fields are always included, so a caller that only knows the sampling can still key a cache on it.
            """
            # canonical_json({"provider", "model", "request": <fields>, "sent"}), with the request's part
            # encoded once per request (the response cache's key encodes it too).
            return self.request_hash_sent(provider, model, canonical_json(sent_params))

        def request_hash_sent(self, provider: str, model: str, sent_json: str) -> str:
            """``request_hash`` with ``sent_params`` given as their ``canonical_json``."""
            text = canonical_object(
                {
                    "provider": canonical_json(provider),
                    "model": canonical_json(model),
                    "request": request_json(self),
                    "sent": sent_json,
                }
            )
            return hashlib.sha256(text.encode("utf-8")).hexdigest()


class ProviderReply(BaseModel):
    """What came back, normalised. A cut-off (``length``) or a refusal is a reply, not an exception."""

    text: str
    parsed: dict[str, Any] | None = None
    usage: Usage = Field(default_factory=Usage)
    model: str
    finish_reason: FinishReason
    refusal: str | None = None
    fingerprint: str | None = None
    sampling_sent: dict[str, Any] = Field(default_factory=dict)
    sampling_controlled: bool = False
    latency_s: float = 0.0
    request_hash: str = ""
    # Beyond the minimum: who answered, how, and what it cost in transport terms.
    provider: str = ""
    output_mode: Literal["json_schema", "tool", "text"] = "json_schema"
    transport_retries: int = 0
    request_id: str | None = None
    # (token, log-probability) of each output token, when asked for and returned (OpenAI chat ``logprobs``).
    token_logprobs: list[tuple[str, float]] | None = None
    # Bytes of the response that were not UTF-8, read as U+FFFD: the judge takes the reply as invalid.
    invalid_utf8: bool = False


@runtime_checkable
class Provider(Protocol):
    """A model behind one async call. Implementations raise only ``ProviderError`` for transport trouble."""

    name: str
    model: str

    async def complete(self, request: JudgeRequest) -> ProviderReply: ...


# -- helpers shared by adapters ----------------------------------------------------------------------------
_FENCE = re.compile(r"^\s*```(?:json|JSON)?\s*\n(.*)\n\s*```\s*$", re.DOTALL)


def parse_json_object(text: str) -> dict[str, Any] | None:
    """The JSON object in ``text``, or None. Tolerates one surrounding code fence, because OpenAI-compatible
    servers that ignore ``response_format`` often add one; anything else is left to the judge's validation."""
    for candidate in (text, *(m.group(1) for m in [_FENCE.match(text)] if m)):
        try:
            value = json.loads(candidate)
        except (ValueError, RecursionError):  # the judge's validation says what is wrong with it
            continue
        return value if isinstance(value, dict) else None
    return None


_KEYLIKE = re.compile(r"\b(sk-[A-Za-z0-9_\-*.]{4,}|Bearer\s+[A-Za-z0-9_\-.~+/=*]{8,})")
_URL_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")


def redact(text: str, *secrets: str | None) -> str:
    """Remove API keys from text meant for a user: the given secrets verbatim, anything that looks like a
    key (providers echo masked keys in 401 messages), user:password parts of URLs and credentials in their
    query strings (``?key=``: some gateways take the key there)."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted]")
    text = _KEYLIKE.sub("[redacted]", text)
    return redact_query(_URL_USERINFO.sub("[redacted]@", text))


def retry_after_seconds(headers: Any) -> float | None:
    """Seconds a response asks the client to wait: ``retry-after-ms``, ``retry-after`` in seconds, or
    ``retry-after`` as an HTTP date (the SDKs read the same headers in the same order). None when absent."""
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return float(value) / divisor
        except ValueError:
            continue
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(when.timestamp() - time.time(), 0.0)


class TransportObserver(Protocol):
    """Hears of the HTTP traffic of an SDK adapter (see ``WireProvider.observe_transport``)."""

    async def on_request(self, retry_count: int) -> None: ...

    def on_response(self, status: int, retry_after: float | None) -> None: ...


@runtime_checkable
class TransportObservable(Protocol):
    """A provider that can report its HTTP traffic: what a run's limiter (``seqjudge.limits``) hooks into."""

    def observe_transport(self, observer: TransportObserver | None) -> None:
        """Report every HTTP attempt and response status to ``observer`` from the next client on."""
        ...


@runtime_checkable
class WireProvider(Provider, TransportObservable, Protocol):
    """A provider whose calls are HTTP bodies sent through an SDK client: what the batch transports
    (``seqjudge.batch_api``) and a run's limiter (``seqjudge.limits``) use beyond ``complete``. The SDK
    adapters are ones; the scripted provider is not (it has no wire, so no batch API and no transport)."""

    def build_body(self, request: JudgeRequest) -> dict[str, Any]:
        """The exact request body ``complete`` would send (also a batch line's body)."""
        ...

    def reply_from_body(
        self,
        data: dict[str, Any],
        *,
        request: JudgeRequest,
        body: dict[str, Any],
        transport_retries: int = 0,
        request_id: str | None = None,
        body_json: str | None = None,
    ) -> ProviderReply:
        """The provider's reply JSON (from a call or a batch result) normalised."""
        ...

    def hash_request(self, request: JudgeRequest, body: dict[str, Any], body_json: str | None = None) -> str:
        """The hash of everything sent for ``request`` as ``body``."""
        ...

    def sdk_client(self) -> Any:
        """The SDK client of the running event loop, for calls beyond ``complete``."""
        ...

    def provider_error(self, exc: Exception) -> ProviderError | None:
        """An SDK exception as the ``ProviderError`` a user sees; None if it is not the SDK's."""
        ...


def check_options(provider: str, options: dict[str, Any], accepted: set[str]) -> None:
    """Unknown options are errors, never silently dropped (a typo must not change what is sent)."""
    unknown = sorted(set(options) - accepted)
    if unknown:
        raise InputError(
            f"unknown option(s) for the {provider} provider: {', '.join(unknown)}",
            hint=f"accepted: {', '.join(sorted(accepted))}",
        )
