"""An in-process provider that answers from a script: for users' own tests and for seqjudge's.

    provider = ScriptedProvider([{"score": 1.0, ...}, "not json", ProviderError("down", kind="server")])

Each ``complete()`` takes the next reply: a ``str`` is the reply text, a ``dict`` is JSON-encoded, an
``Exception`` is raised, a ``ProviderReply`` is returned as given (its ``request_hash`` filled in when
empty). Every request is kept in ``.requests``. An exhausted script raises ``ScriptExhaustedError`` (a
``ProviderError``), so a test that expected fewer calls fails loudly instead of hanging or passing.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable
from typing import Any

from seqjudge.errors import ProviderError
from seqjudge.judge.providers.base import JudgeRequest, ProviderReply, Usage, check_options, parse_json_object
from seqjudge.judge.providers.profile import ProviderProfile

__all__ = ["PROFILE", "ScriptExhaustedError", "ScriptedProvider", "ScriptedReply"]

ScriptedReply = str | dict[str, Any] | Exception | ProviderReply


# The registry passes the options of real providers too; accepted (so one config drives any provider) and
# meaningless for a script.
_ACCEPTED = {"temperature", "seed", "base_url", "timeout", "max_retries", "deadline", "api_key_env"}
_ACCEPTED |= {"strict_response_validation", "output_mode"}


class ScriptExhaustedError(ProviderError):
    """More calls than scripted replies."""


class ScriptedProvider:
    name = "scripted"

    def __init__(
        self, replies: Iterable[ScriptedReply] = (), model: str = "scripted", **options: Any
    ) -> None:
        check_options(self.name, options, _ACCEPTED)
        self.model = model
        self._queue: deque[ScriptedReply] = deque(replies)
        self._scripted = len(self._queue)
        self.requests: list[JudgeRequest] = []

    def __repr__(self) -> str:
        return f"ScriptedProvider(model={self.model!r}, remaining={len(self._queue)})"

    def add(self, *replies: ScriptedReply) -> None:
        self._queue.extend(replies)
        self._scripted += len(replies)

    @property
    def remaining(self) -> int:
        return len(self._queue)

    async def complete(self, request: JudgeRequest) -> ProviderReply:
        self.requests.append(request)
        if not self._queue:
            raise ScriptExhaustedError(
                f"scripted provider: no reply left for call {len(self.requests)} "
                f"(the script had {self._scripted}); add more replies",
                kind="config",
                provider=self.name,
            )
        reply = self._queue.popleft()
        sampling = {
            k: v for k, v in (("temperature", request.temperature), ("seed", request.seed)) if v is not None
        }
        request_hash = request.request_hash(self.name, self.model, sampling)
        if isinstance(reply, Exception):
            raise reply
        if isinstance(reply, ProviderReply):
            return reply if reply.request_hash else reply.model_copy(update={"request_hash": request_hash})
        text = json.dumps(reply) if isinstance(reply, dict) else str(reply)
        prompt_chars = (
            len(request.system) + len(request.user_text) + sum(len(t["content"]) for t in request.reask)
        )
        return ProviderReply(
            text=text,
            parsed=parse_json_object(text),
            # Rough (4 characters a token), so cost and token reports have something to add up in tests.
            usage=Usage(input_tokens=prompt_chars // 4, output_tokens=len(text) // 4),
            model=self.model,
            finish_reason="stop",
            fingerprint="scripted",
            sampling_sent=sampling,
            # An in-process script is deterministic by construction.
            sampling_controlled=True,
            latency_s=0.0,
            request_hash=request_hash,
            provider=self.name,
            output_mode="text",
        )


# In-process: no key, no limits, no prices, no batch transport.
PROFILE = ProviderProfile(name="scripted", factory=ScriptedProvider)
