"""Anthropic Messages adapter: native structured output, forced tool use as the fallback.

Wire shape (``build_body``):
    {"model", "max_tokens",
     "system": [{"type": "text", "text": system},
                {"type": "text", "text": static_prompt, "cache_control": {"type": "ephemeral"}}],
     "messages": [{"role": "user", "content": [{"type": "text", "text": dynamic_prompt}]}, *reask],
     + mode json_schema: "output_config": {"format": {"type": "json_schema",
                                                        "schema": transform_schema(schema)}}
     + mode tool:        "tools": [{"name": schema_name, "description", "input_schema": schema}],
                         "tool_choice": {"type": "tool", "name": schema_name}}
The one cache breakpoint sits after the static part, so everything a run repeats (instructions, schema,
catalog, rules, examples) is cached and only the trace is new input. No temperature/top_p/top_k: the 2.x
SDK and the API version it sends reject them, so sampling is never controlled here and the reply says so.

``output_mode="auto"`` (default) starts native and, if the model or server answers 400 about
``output_config``/structured output, switches this provider to forced tool use for good (one extra call,
once). ``transform_schema`` is the SDK's own rewrite for native mode: it moves bounds the API does not
enforce into descriptions, so the judge's own validation must (and does) re-check them.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from seqjudge.errors import InputError
from seqjudge.judge.providers.base import (
    FinishReason,
    JudgeRequest,
    ProviderReply,
    Usage,
    parse_json_object,
)
from seqjudge.judge.providers.profile import ProviderProfile
from seqjudge.judge.providers.sdk import SDKProvider

__all__ = ["PROFILE", "AnthropicProvider"]

PROFILE = ProviderProfile(
    name="anthropic",
    factory="seqjudge.judge.providers.anthropic:AnthropicProvider",
    key_env="ANTHROPIC_API_KEY",
    # The published limits of a tier-2 account for Claude Sonnet, checked in 2025 (--rpm/--tpm to change).
    default_rpm=1_000,
    default_tpm=450_000,
    # USD per million tokens: input, cache read (0.1x input), output, 5-minute cache write (1.25x input).
    prices={
        "claude-opus-4-5": (5.00, 0.50, 25.00, 6.25),
        "claude-opus-4-1": (15.00, 1.50, 75.00, 18.75),
        "claude-sonnet-4-5": (3.00, 0.30, 15.00, 3.75),
        "claude-sonnet-4": (3.00, 0.30, 15.00, 3.75),
        "claude-haiku-4-5": (1.00, 0.10, 5.00, 1.25),
        "claude-3-5-haiku": (0.80, 0.08, 4.00, 1.00),
    },
    # The 2.x SDK and the API version it sends reject temperature/top_p/top_k on every model.
    takes_sampling=False,
    batch="seqjudge.batch_api:AnthropicBatches",
)

OutputMode = Literal["json_schema", "tool"]

_FINISH: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "refusal",
    "tool_use": "tool_use",
}

# What a 400 says when this model or server does not know native structured output.
_NATIVE_UNSUPPORTED = ("output_config", "output_format", "structured output", "json_schema")

_TOOL_DESCRIPTION = "Record the judgement. Call this exactly once, with the complete result as its input."
_EMPTY_TURN = "(empty reply)"  # the API rejects empty content in any but a final assistant turn


class AnthropicProvider(SDKProvider):
    profile = PROFILE
    name = PROFILE.name
    sdk_module = "anthropic"
    client_class = "AsyncAnthropic"
    default_base_url = "https://api.anthropic.com"
    request_path = "/v1/messages"
    request_id_header = "request-id"
    extra_options = frozenset({"output_mode"})

    def __init__(self, model: str, **options: Any) -> None:
        super().__init__(model, **options)
        mode = options.get("output_mode", "auto")
        if mode not in ("auto", "json_schema", "tool"):
            raise InputError(
                f"invalid output_mode {mode!r} for the anthropic provider",
                hint="use auto, json_schema or tool",
            )
        self.auto_fallback = mode == "auto"
        self.output_mode: OutputMode = "tool" if mode == "tool" else "json_schema"
        # temperature/seed options are accepted (one config for every provider) but never sent; every reply
        # carries sampling_controlled=False so a score's fingerprint shows it.

    # -- request -------------------------------------------------------------------------------------------
    def build_body(self, request: JudgeRequest, mode: OutputMode | None = None) -> dict[str, Any]:
        """The exact Messages body; also the ``params`` of a Message Batches request."""
        mode = mode or self.output_mode
        system: list[dict[str, Any]] = [
            {"type": "text", "text": text} for text in (request.system, request.static_prompt) if text
        ]
        if system:
            system[-1]["cache_control"] = {"type": "ephemeral"}
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": [{"type": "text", "text": request.dynamic_prompt or _EMPTY_TURN}]}
        ]
        messages.extend({"role": t["role"], "content": t["content"] or _EMPTY_TURN} for t in request.reask)
        body: dict[str, Any] = {"model": self.model, "max_tokens": request.max_tokens}
        if system:
            body["system"] = system
        body["messages"] = messages
        if mode == "json_schema":
            schema = self._sdk.transform_schema(request.schema)
            body["output_config"] = {"format": {"type": "json_schema", "schema": schema}}
        else:
            # Plain (non-strict) tool: a server that lacks native structured output may lack strict tools
            # too, and input_schema takes the full JSON schema, bounds included.
            body["tools"] = [
                {
                    "name": request.schema_name,
                    "description": _TOOL_DESCRIPTION,
                    "input_schema": request.schema,
                }
            ]
            body["tool_choice"] = {"type": "tool", "name": request.schema_name}
        return body

    # -- call ----------------------------------------------------------------------------------------------
    async def _complete(self, request: JudgeRequest) -> ProviderReply:
        mode = self.output_mode
        try:
            return await self._send(request, mode)
        except Exception as exc:
            if not (mode == "json_schema" and self.auto_fallback and self._native_unsupported(exc)):
                raise
        self.output_mode = "tool"  # remember: every later call goes straight to tool use
        return await self._send(request, "tool")

    async def _send(self, request: JudgeRequest, mode: OutputMode) -> ProviderReply:
        body = self.build_body(request, mode)
        reply = await self._complete_raw(request, body)
        if reply is not None:
            return reply
        # Strict response validation: the SDK's typed method and its models.
        raw = await self._client().messages.with_raw_response.create(**body)
        message = await raw.parse()
        return self.reply_from_body(
            self._body(message),
            request=request,
            body=body,
            transport_retries=raw.retries_taken,
            request_id=raw.headers.get(self.request_id_header),
        )

    def _native_unsupported(self, exc: Exception) -> bool:
        if not isinstance(exc, self._sdk.BadRequestError):
            return False
        text = f"{getattr(exc, 'api_message', None) or ''} {exc}".lower()
        return any(marker in text for marker in _NATIVE_UNSUPPORTED)

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
        """Normalise a Message JSON object (from the SDK or a Message Batches result)."""
        blocks = data.get("content") or []
        text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
        tool_uses = [b for b in blocks if b.get("type") == "tool_use"]
        stop_reason = str(data.get("stop_reason"))
        finish = _FINISH.get(stop_reason, "other")
        mode: Literal["json_schema", "tool", "text"] = "tool" if "tools" in body else "json_schema"
        parsed: dict[str, Any] | None
        ours = next((b for b in tool_uses if b.get("name") == request.schema_name), None)
        if mode == "tool" and ours is not None and isinstance(ours.get("input"), dict):
            parsed = ours["input"]
            text = json.dumps(parsed, ensure_ascii=False)
            if finish == "tool_use":
                finish = "stop"  # forced tool use *is* the answer, not a detour
        else:
            parsed = parse_json_object(text) if text else None
        refusal = None
        if finish == "refusal":
            details = data.get("stop_details") or {}
            refusal = details.get("explanation") or text or "the model refused to answer"
        return ProviderReply(
            text=text,
            parsed=parsed,
            usage=_usage(data.get("usage") or {}),
            model=str(data.get("model") or self.model),
            finish_reason=finish,
            refusal=refusal,
            fingerprint=None,  # Anthropic returns no backend fingerprint; the dated model id stands in
            sampling_sent={},
            sampling_controlled=False,
            request_hash=self.hash_request(request, body, body_json),
            provider=self.name,
            output_mode=mode,
            transport_retries=transport_retries,
            request_id=request_id,
        )


def _usage(usage: dict[str, Any]) -> Usage:
    # Anthropic's input_tokens excludes cache reads and writes; Usage.input_tokens counts every prompt token.
    read = int(usage.get("cache_read_input_tokens") or 0)
    write = int(usage.get("cache_creation_input_tokens") or 0)
    return Usage(
        input_tokens=int(usage.get("input_tokens") or 0) + read + write,
        output_tokens=int(usage.get("output_tokens") or 0),
        cached_input_tokens=read,
        cache_write_tokens=write,
    )
