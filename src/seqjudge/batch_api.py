"""The providers' batch APIs behind one small interface: split, submit, poll, read results.

OpenAI Batch API: the requests go up as a JSONL file (``files.create(purpose="batch")``), one line each,
    {"custom_id": ..., "method": "POST", "url": "/v1/chat/completions", "body": <the Chat Completions body>}
then ``batches.create(input_file_id, endpoint="/v1/chat/completions", completion_window="24h")``. An ended
batch (completed, failed, expired, cancelled) has an output file (answered requests) and an error file
(failed or expired ones), both JSONL, in no particular order. At most 50,000 requests and 200 MB a batch.

Anthropic Message Batches: ``messages.batches.create(requests=[{"custom_id": ..., "params": <the Messages
body>}])``; an ``ended`` batch streams one result per request (succeeded | errored | canceled | expired),
unordered. At most 100,000 requests and 256 MB a batch.

The bodies are the online adapters' own (``build_body``), so a batch request is byte for byte what an
online call would have sent, and a result is normalised by the adapter's ``reply_from_body``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from seqjudge.errors import InputError, ProviderError
from seqjudge.judge.providers.base import JudgeRequest, Provider, ProviderReply, WireProvider
from seqjudge.judge.providers.registry import all_profiles, load_object, provider_profile

if TYPE_CHECKING:
    from seqjudge.judge.providers.anthropic import AnthropicProvider

Outcome = Literal["succeeded", "errored", "expired", "canceled"]
T = TypeVar("T")

OPENAI_ENDPOINT = "/v1/chat/completions"
# Under the documented limits (50,000 / 200 MB and 100,000 / 256 MB), with room for the file's envelope.
OPENAI_MAX_REQUESTS = 50_000
OPENAI_MAX_BYTES = 200_000_000
ANTHROPIC_MAX_REQUESTS = 100_000
ANTHROPIC_MAX_BYTES = 256_000_000


@dataclass(frozen=True)
class BatchLine:
    custom_id: str
    body: dict[str, Any]


@dataclass
class Submitted:
    id: str
    status: str
    counts: dict[str, int]
    input_file_id: str | None = None


@dataclass
class Polled:
    status: str
    ended: bool
    counts: dict[str, int]
    detail: dict[str, Any] = field(default_factory=dict)  # what reading the results needs (file ids, errors)


@dataclass
class ResultLine:
    custom_id: str
    outcome: Outcome
    result: dict[str, Any] | None = None  # the chat.completion / message JSON when it succeeded
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "custom_id": self.custom_id,
            "outcome": self.outcome,
            "result": self.result,
            "error": self.error,
        }


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


class BatchAPI:
    """One provider's batch transport; built around the online adapter, whose SDK client it shares."""

    name = ""
    max_requests = 0
    max_bytes = 0

    def __init__(self, provider: WireProvider, wire: dict[str, Any] | None = None) -> None:
        self.provider = provider
        self.wire = dict(wire or {})

    # -- requests --
    def body(self, request: JudgeRequest) -> dict[str, Any]:
        return dict(self.provider.build_body(request))

    def request_hash(self, request: JudgeRequest) -> str:
        return self.provider.hash_request(request, self.body(request))

    def reply(self, result: dict[str, Any], request: JudgeRequest) -> ProviderReply:
        """A batch result, normalised exactly as the online adapter normalises an online answer."""
        return self.provider.reply_from_body(result, request=request, body=self.body(request))

    def line_size(self, line: BatchLine) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def split(self, lines: Iterable[BatchLine]) -> list[list[BatchLine]]:
        """Consecutive chunks within the provider's request and size limits."""
        chunks: list[list[BatchLine]] = []
        current: list[BatchLine] = []
        size = 0
        for line in lines:
            n = self.line_size(line)
            if n > self.max_bytes:
                raise InputError(
                    f"the judge request for {line.custom_id} is {n} bytes, more than a {self.name} batch "
                    f"holds ({self.max_bytes})",
                    hint="lower max_trace_chars, or judge this suite online (without --batch)",
                )
            if current and (len(current) >= self.max_requests or size + n > self.max_bytes):
                chunks.append(current)
                current, size = [], 0
            current.append(line)
            size += n
        if current:
            chunks.append(current)
        return chunks

    # -- calls --
    async def _sdk(self, call: Awaitable[T]) -> T:
        """An SDK call whose exceptions become the adapter's ``ProviderError`` (key redacted)."""
        error: ProviderError | None = None
        try:
            return await call
        except Exception as exc:
            error = self.provider.provider_error(exc)
            if error is None:
                raise
        # Raised outside the except block: no chain back to an SDK exception that may carry the request.
        raise error

    async def submit(self, lines: list[BatchLine], *, label: str) -> Submitted:  # pragma: no cover
        raise NotImplementedError

    async def poll(self, batch_id: str) -> Polled:  # pragma: no cover - abstract
        raise NotImplementedError

    async def results(
        self, batch_id: str, polled: Polled, custom_ids: list[str]
    ) -> list[ResultLine]:  # pragma: no cover - abstract
        raise NotImplementedError


class OpenAIBatches(BatchAPI):
    name = "openai"
    max_requests = OPENAI_MAX_REQUESTS
    max_bytes = OPENAI_MAX_BYTES
    ENDED = frozenset({"completed", "failed", "expired", "cancelled"})

    def _line(self, line: BatchLine) -> bytes:
        return (
            _dumps({"custom_id": line.custom_id, "method": "POST", "url": OPENAI_ENDPOINT, "body": line.body})
            + b"\n"
        )

    def line_size(self, line: BatchLine) -> int:
        return len(self._line(line))

    async def submit(self, lines: list[BatchLine], *, label: str) -> Submitted:
        client = self.provider.sdk_client()
        data = b"".join(self._line(line) for line in lines)
        uploaded = await self._sdk(
            client.files.create(file=(f"{label}.jsonl", data, "application/jsonl"), purpose="batch")
        )
        batch = await self._sdk(
            client.batches.create(
                input_file_id=uploaded.id,
                endpoint=OPENAI_ENDPOINT,
                completion_window="24h",
                metadata={"seqjudge": label},
            )
        )
        return Submitted(batch.id, batch.status, self._counts(batch), input_file_id=uploaded.id)

    @staticmethod
    def _counts(batch: Any) -> dict[str, int]:
        counts = batch.request_counts
        if counts is None:
            return {}
        return {"total": counts.total, "completed": counts.completed, "failed": counts.failed}

    async def poll(self, batch_id: str) -> Polled:
        batch = await self._sdk(self.provider.sdk_client().batches.retrieve(batch_id))
        errors = [e.message or e.code or "" for e in ((batch.errors.data or []) if batch.errors else [])]
        detail = {
            "output_file_id": batch.output_file_id,
            "error_file_id": batch.error_file_id,
            "errors": [e for e in errors if e],
        }
        return Polled(batch.status, batch.status in self.ENDED, self._counts(batch), detail)

    async def _file_lines(self, file_id: str | None) -> list[dict[str, Any]]:
        if not file_id:
            return []
        content = await self._sdk(self.provider.sdk_client().files.content(file_id))
        return [json.loads(line) for line in content.content.splitlines() if line.strip()]

    async def results(self, batch_id: str, polled: Polled, custom_ids: list[str]) -> list[ResultLine]:
        out: dict[str, ResultLine] = {}
        for item in [
            *await self._file_lines(polled.detail.get("output_file_id")),
            *await self._file_lines(polled.detail.get("error_file_id")),
        ]:
            line = self._result(item)
            if line.custom_id in out and out[line.custom_id].outcome == "succeeded":
                continue  # never let an error line hide an answer
            out[line.custom_id] = line
        # Requests with no line at all: what the batch as a whole says happened to them.
        if polled.status == "expired":
            missing: tuple[Outcome, str | None] = ("expired", None)
        elif polled.status == "cancelled":
            missing = ("canceled", None)
        elif polled.status == "failed":
            missing = (
                "errored",
                "the batch failed: " + ("; ".join(polled.detail["errors"]) or "no reason given"),
            )
        else:
            missing = ("errored", f"batch {batch_id} returned no result for this request")
        for cid in custom_ids:
            if cid not in out:
                out[cid] = ResultLine(cid, missing[0], error=missing[1])
        return [out[cid] for cid in custom_ids]

    @staticmethod
    def _result(item: dict[str, Any]) -> ResultLine:
        cid = str(item.get("custom_id"))
        response = item.get("response") or {}
        error = item.get("error") or {}
        body = response.get("body")
        if response.get("status_code") == 200 and isinstance(body, dict) and not error:
            return ResultLine(cid, "succeeded", result=body)
        code = error.get("code")
        if code == "batch_expired":
            return ResultLine(cid, "expired", error=error.get("message"))
        if code == "batch_cancelled":
            return ResultLine(cid, "canceled", error=error.get("message"))
        message = error.get("message")
        if not message and isinstance(body, dict):
            inner = body.get("error")
            message = inner.get("message") if isinstance(inner, dict) else inner
        status = response.get("status_code")
        where = f"HTTP {status}" if status else (code or "error")
        return ResultLine(cid, "errored", error=f"{where}: {message or 'no message'}")


class AnthropicBatches(BatchAPI):
    name = "anthropic"
    max_requests = ANTHROPIC_MAX_REQUESTS
    max_bytes = ANTHROPIC_MAX_BYTES

    provider: AnthropicProvider

    def __init__(self, provider: WireProvider, wire: dict[str, Any] | None = None) -> None:
        # The output mode is fixed at submission: a batch cannot fall back to tool use mid-way as an online
        # call does, so every body of the run (and its reading back) uses the mode it was sent with.
        super().__init__(provider, wire)
        self.wire.setdefault("output_mode", self.provider.output_mode)

    def body(self, request: JudgeRequest) -> dict[str, Any]:
        return dict(self.provider.build_body(request, self.wire["output_mode"]))

    def _item(self, line: BatchLine) -> dict[str, Any]:
        return {"custom_id": line.custom_id, "params": line.body}

    def line_size(self, line: BatchLine) -> int:
        return len(_dumps(self._item(line))) + 1

    async def submit(self, lines: list[BatchLine], *, label: str) -> Submitted:
        batches = self.provider.sdk_client().messages.batches
        batch = await self._sdk(batches.create(requests=[self._item(line) for line in lines]))
        return Submitted(batch.id, batch.processing_status, self._counts(batch))

    @staticmethod
    def _counts(batch: Any) -> dict[str, int]:
        c = batch.request_counts
        return {
            "processing": c.processing,
            "succeeded": c.succeeded,
            "errored": c.errored,
            "canceled": c.canceled,
            "expired": c.expired,
        }

    async def poll(self, batch_id: str) -> Polled:
        batch = await self._sdk(self.provider.sdk_client().messages.batches.retrieve(batch_id))
        return Polled(batch.processing_status, batch.processing_status == "ended", self._counts(batch))

    async def results(self, batch_id: str, polled: Polled, custom_ids: list[str]) -> list[ResultLine]:
        decoder = await self._sdk(self.provider.sdk_client().messages.batches.results(batch_id))
        out: dict[str, ResultLine] = {}

        async def read() -> None:
            async for item in decoder:
                data = item.to_dict(mode="json")
                cid = str(data.get("custom_id"))
                result = data.get("result") or {}
                kind = result.get("type")
                if kind == "succeeded":
                    out[cid] = ResultLine(cid, "succeeded", result=result.get("message"))
                elif kind in ("expired", "canceled"):
                    out[cid] = ResultLine(cid, kind)
                else:
                    inner = (result.get("error") or {}).get("error") or {}
                    message = f"{inner.get('type') or 'error'}: {inner.get('message') or 'no message'}"
                    out[cid] = ResultLine(cid, "errored", error=message)

        await self._sdk(read())
        for cid in custom_ids:
            if cid not in out:
                out[cid] = ResultLine(
                    cid, "errored", error=f"batch {batch_id} returned no result for this request"
                )
        return [out[cid] for cid in custom_ids]


def _with_batches() -> str:
    return ", ".join(f"{p.name}:MODEL" for p in all_profiles() if p.batch) or "none is installed"


def batch_api(provider: Provider, wire: dict[str, Any] | None = None) -> BatchAPI:
    """The batch transport ``provider``'s profile names (openai and anthropic have one)."""
    name = getattr(provider, "name", "")
    profile = provider_profile(name) if name else None
    if profile is None or profile.batch is None or not isinstance(provider, WireProvider):
        raise InputError(
            f"the {name or type(provider).__name__} provider has no batch API",
            where="--batch",
            hint=f"batch runs need a model of a provider with a batch API ({_with_batches()}); judge this "
            "suite online instead",
        )
    transport: type[BatchAPI] = load_object(profile.batch, what=f"the {name} batch transport")
    return transport(provider, wire)
