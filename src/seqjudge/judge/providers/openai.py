"""OpenAI Chat Completions adapter (also any OpenAI-compatible server: vLLM, Ollama, LM Studio, gateways).

Wire shape (``build_body``):
    {"model", "messages": [system, user(static_prompt + "\\n\\n" + dynamic_prompt), *reask],
     "response_format": {"type": "json_schema", "json_schema": {"name", "schema", "strict": true}},
     "max_tokens" | "max_completion_tokens", "temperature"?, "seed"?}
The static part leads the user message so OpenAI's automatic prefix cache (>= 1024 tokens) can reuse it
across traces. Known reasoning models reject ``temperature``/``seed`` and ``max_tokens``: for them the
sampling is left out (and recorded as not controlled) and ``max_completion_tokens`` is sent. Unknown model
names get temperature 0 and a seed, which is what OpenAI-compatible servers expect.
"""

from __future__ import annotations

from typing import Any

from seqjudge.judge.providers.base import (
    FinishReason,
    JudgeRequest,
    ProviderReply,
    Usage,
    parse_json_object,
)
from seqjudge.judge.providers.profile import ProviderProfile
from seqjudge.judge.providers.sdk import SDKProvider

__all__ = ["DEFAULT_SEED", "PROFILE", "OpenAIProvider", "is_reasoning_model"]

PROFILE = ProviderProfile(
    name="openai",
    factory="seqjudge.judge.providers.openai:OpenAIProvider",
    key_env="OPENAI_API_KEY",
    # The published limits of a tier-2 account for gpt-4o, checked in 2025; accounts differ (--rpm/--tpm).
    default_rpm=5_000,
    default_tpm=450_000,
    # USD per million tokens: input, cached input (the automatic prefix cache), output; list prices, 2025.
    prices={
        "gpt-4o": (2.50, 1.25, 10.00, None),
        "gpt-4o-mini": (0.15, 0.075, 0.60, None),
        "gpt-4.1": (2.00, 0.50, 8.00, None),
        "gpt-4.1-mini": (0.40, 0.10, 1.60, None),
        "gpt-4.1-nano": (0.10, 0.025, 0.40, None),
        "gpt-5": (1.25, 0.125, 10.00, None),
        "gpt-5-mini": (0.25, 0.025, 2.00, None),
        "gpt-5-nano": (0.05, 0.005, 0.40, None),
        "o3": (2.00, 0.50, 8.00, None),
        "o4-mini": (1.10, 0.275, 4.40, None),
    },
    # Reasoning families reject temperature/seed (and max_tokens). Omitting a parameter never causes an
    # error, sending a rejected one always does.
    no_sampling_prefixes=("o1", "o3", "o4", "gpt-5", "gpt-6", "codex-"),
    batch="seqjudge.batch_api:OpenAIBatches",
)

# Sent when the request names no seed. Not 0: some compatible servers test ``if seed:`` and treat 0 as unset.
DEFAULT_SEED = 1

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}


def is_reasoning_model(model: str) -> bool:
    return not PROFILE.takes_sampling_for(model)


class OpenAIProvider(SDKProvider):
    profile = PROFILE
    name = PROFILE.name
    sdk_module = "openai"
    client_class = "AsyncOpenAI"
    default_base_url = "https://api.openai.com/v1"
    request_path = "/chat/completions"
    request_id_header = "x-request-id"
    # logprobs=True: ask for each output token's log-probability (``--confidence logprobs``).
    extra_options = frozenset({"logprobs"})

    def __init__(self, model: str, **options: Any) -> None:
        super().__init__(model, **options)
        self.logprobs = bool(options.get("logprobs", False))
        self.reasoning = is_reasoning_model(model)
        self._temperature_override = options.get("temperature")
        self._seed_override = options.get("seed")

    # -- request -------------------------------------------------------------------------------------------
    def sampling(self, request: JudgeRequest) -> dict[str, Any]:
        """What will be sent of temperature/seed for this model (options given to the provider win)."""
        if self.reasoning:
            return {}
        sent: dict[str, Any] = {}
        temperature = (
            self._temperature_override if self._temperature_override is not None else request.temperature
        )
        if temperature is not None:
            sent["temperature"] = temperature
        seed = self._seed_override if self._seed_override is not None else request.seed
        sent["seed"] = seed if seed is not None else DEFAULT_SEED
        return sent

    def build_body(self, request: JudgeRequest) -> dict[str, Any]:
        """The exact Chat Completions body; also the ``body`` of a Batch API line."""
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        messages.append({"role": "user", "content": request.user_text})
        messages.extend({"role": turn["role"], "content": turn["content"]} for turn in request.reask)
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": request.schema_name, "schema": request.schema, "strict": True},
            },
        }
        body["max_completion_tokens" if self.reasoning else "max_tokens"] = request.max_tokens
        body.update(self.sampling(request))
        if self.logprobs:
            body["logprobs"] = True
        return body

    # -- call ----------------------------------------------------------------------------------------------
    async def _complete(self, request: JudgeRequest) -> ProviderReply:
        body = self.build_body(request)
        reply = await self._complete_raw(request, body)
        if reply is not None:
            return reply
        # Strict response validation: the SDK's typed method and its models.
        client = self._client()
        raw = await client.chat.completions.with_raw_response.create(**body)
        completion = raw.parse()
        return self.reply_from_body(
            self._body(completion),
            request=request,
            body=body,
            transport_retries=raw.retries_taken,
            request_id=raw.headers.get(self.request_id_header),
        )

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
        """Normalise a chat.completion JSON object (from the SDK or a Batch API output line)."""
        choices = data.get("choices") or []
        choice = choices[0] if choices else {}
        message = choice.get("message") or {}
        text = message.get("content") or ""
        refusal = message.get("refusal")
        finish = _FINISH.get(str(choice.get("finish_reason")), "other")
        if refusal:
            finish = "refusal"
        elif finish == "refusal":
            refusal = "the provider's content filter withheld the reply"
        sampling: dict[str, Any] = {k: body[k] for k in ("temperature", "seed") if k in body}
        return ProviderReply(
            text=text,
            parsed=parse_json_object(text) if text else None,
            usage=_usage(data.get("usage") or {}),
            model=str(data.get("model") or self.model),
            finish_reason=finish,
            refusal=refusal,
            fingerprint=data.get("system_fingerprint"),
            sampling_sent=sampling,
            sampling_controlled="temperature" in sampling,
            request_hash=self.hash_request(request, body, body_json),
            provider=self.name,
            output_mode="json_schema",
            transport_retries=transport_retries,
            request_id=request_id,
            token_logprobs=_token_logprobs(choice.get("logprobs")),
        )


def _token_logprobs(logprobs: Any) -> list[tuple[str, float]] | None:
    """``choices[0].logprobs.content`` as (token, logprob) pairs; None when absent or malformed."""
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(content, list):
        return None
    out: list[tuple[str, float]] = []
    for item in content:
        token = item.get("token") if isinstance(item, dict) else None
        value = item.get("logprob") if isinstance(item, dict) else None
        if not isinstance(token, str) or isinstance(value, bool) or not isinstance(value, int | float):
            return None
        out.append((token, float(value)))
    return out


def _usage(usage: dict[str, Any]) -> Usage:
    details = usage.get("prompt_tokens_details") or {}
    return Usage(
        input_tokens=int(usage.get("prompt_tokens") or 0),
        output_tokens=int(usage.get("completion_tokens") or 0),
        cached_input_tokens=int(details.get("cached_tokens") or 0),
        cache_write_tokens=int(details.get("cache_write_tokens") or 0),
    )
