"""A batch-API emulator for ``FakeLLMServer(responder=...)``: OpenAI's Files + Batch API and Anthropic's
Message Batches, enough for the real SDK clients to submit, poll and read results.

    emu = BatchEmulator(answer)          # answer(api, custom_id, body) -> what the model says
    with FakeLLMServer(responder=emu) as srv: ...

``answer`` returns the reply text (a ``dict`` is JSON-encoded), or ``Errored(...)`` / ``Expired()`` for a
request the batch does not answer. It is called once per request when the batch is created, in input
order. Results come back shuffled (``seed``). A batch stays in progress for ``polls_before_end`` retrieves,
then ends. With ``online=True`` the emulator also answers online calls (``POST /v1/chat/completions``,
``POST /v1/messages``) with the same ``answer`` (``custom_id`` None), so an online run and a batch run can
be given identical replies; otherwise those routes fall through to the server's own queue.

Routes: POST /v1/files (multipart), GET /v1/files/{id}/content, POST /v1/batches, GET /v1/batches/{id};
POST /v1/messages/batches, GET /v1/messages/batches/{id}, GET /v1/messages/batches/{id}/results.
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any

from fakes.server import (
    FakeReply,
    RecordedRequest,
    anthropic_error,
    anthropic_message,
    openai_chat,
    openai_error,
)

__all__ = ["BatchEmulator", "Errored", "Expired", "body_text"]

CREATED = 1_760_000_000
CREATED_ISO = "2026-11-30T03:00:00Z"
EXPIRES_ISO = "2026-12-01T03:00:00Z"


@dataclass(frozen=True)
class Errored:
    message: str = "the server had an error while processing your request"
    status: int = 500
    type: str = "api_error"


@dataclass(frozen=True)
class Expired:
    pass


Answer = str | dict[str, Any] | Errored | Expired
AnswerFn = Callable[[str, str | None, dict[str, Any]], Answer]


def body_text(body: dict[str, Any]) -> str:
    """Every text of a Chat Completions or Messages body, joined: what the model was shown."""
    out: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, str):
            out.append(node)
        elif isinstance(node, list):
            for n in node:
                walk(n)
        elif isinstance(node, dict):
            for key in ("content", "text"):
                if key in node:
                    walk(node[key])

    walk(body.get("system"))
    walk(body.get("messages"))
    return "\n".join(out)


@dataclass
class _Batch:
    api: str
    id: str
    custom_ids: list[str]
    lines: list[str]  # result lines (JSONL), already shuffled
    errors: list[str] = field(default_factory=list)  # OpenAI's error-file lines
    polls: int = 0
    input_file_id: str = ""
    counts: dict[str, int] = field(default_factory=dict)


class BatchEmulator:
    def __init__(
        self,
        answer: AnswerFn,
        *,
        polls_before_end: int = 0,
        seed: int = 7,
        online: bool = False,
        openai_model: str = "gpt-4o-2024-08-06",
        anthropic_model: str = "claude-haiku-4-5-20251001",
    ) -> None:
        self.answer = answer
        self.polls_before_end = polls_before_end
        self.online = online
        self.openai_model = openai_model
        self.anthropic_model = anthropic_model
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, _Batch] = {}
        # What was submitted, for assertions: (api, batch id, [(custom_id, body)]) in submission order.
        self.submitted: list[tuple[str, str, list[tuple[str, dict[str, Any]]]]] = []
        self.online_bodies: list[dict[str, Any]] = []
        self.result_orders: dict[str, list[str]] = {}  # batch id -> custom ids in the order served
        self._n = 0

    def _next(self, prefix: str) -> str:
        with self._lock:
            self._n += 1
            return f"{prefix}{self._n:04d}"

    # -- routing -------------------------------------------------------------------------------------------
    def __call__(self, request: RecordedRequest) -> FakeReply | None:
        path = request.path.split("?", 1)[0]
        parts = [p for p in path.split("/") if p]
        m = request.method
        if m == "POST" and path == "/v1/files":
            return self._upload(request)
        if m == "GET" and len(parts) == 4 and parts[:2] == ["v1", "files"] and parts[3] == "content":
            return self._file_content(parts[2])
        if m == "POST" and path == "/v1/batches":
            return self._openai_create(request.body)
        if m == "GET" and len(parts) == 3 and parts[:2] == ["v1", "batches"]:
            return self._openai_retrieve(parts[2])
        if m == "POST" and path == "/v1/messages/batches":
            return self._anthropic_create(request.body, request.headers.get("host", ""))
        if m == "GET" and len(parts) == 4 and parts[:3] == ["v1", "messages", "batches"]:
            return self._anthropic_retrieve(parts[3], request.headers.get("host", ""))
        if (
            m == "GET"
            and len(parts) == 5
            and parts[:3] == ["v1", "messages", "batches"]
            and parts[4] == "results"
        ):
            return self._anthropic_results(parts[3])
        if self.online and m == "POST" and path in ("/v1/chat/completions", "/v1/messages"):
            return self._online(path, request.body)
        return None

    # -- online --------------------------------------------------------------------------------------------
    def _online(self, path: str, body: dict[str, Any]) -> FakeReply:
        self.online_bodies.append(body)
        api = "openai" if path == "/v1/chat/completions" else "anthropic"
        said = self.answer(api, None, body)
        if isinstance(said, Errored | Expired):
            message = said.message if isinstance(said, Errored) else "expired"
            status = said.status if isinstance(said, Errored) else 500
            if api == "openai":
                return openai_error(status, message, type="server_error")
            return anthropic_error(status, "api_error", message)
        if api == "openai":
            return openai_chat(said, model=self.openai_model)
        return anthropic_message(said, model=self.anthropic_model)

    # -- OpenAI --------------------------------------------------------------------------------------------
    def _upload(self, request: RecordedRequest) -> FakeReply:
        raw = request.body if isinstance(request.body, bytes) else json.dumps(request.body).encode()
        head = f"Content-Type: {request.headers.get('content-type', '')}\r\n\r\n".encode()
        message = BytesParser(policy=HTTP).parsebytes(head + raw)
        fields: dict[str, tuple[str | None, bytes]] = {}
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            fields[str(name)] = (part.get_filename(), part.get_payload(decode=True) or b"")
        if "file" not in fields or fields.get("purpose", (None, b""))[1] != b"batch":
            return openai_error(400, "fake: expected a multipart upload with file and purpose=batch")
        filename, content = fields["file"]
        file_id = self._next("file-")
        self.files[file_id] = content
        return FakeReply(
            200,
            {
                "id": file_id,
                "object": "file",
                "bytes": len(content),
                "created_at": CREATED,
                "filename": filename or "upload.jsonl",
                "purpose": "batch",
                "status": "processed",
            },
        )

    def _file_content(self, file_id: str) -> FakeReply:
        if file_id not in self.files:
            return openai_error(404, f"fake: no file {file_id}")
        return FakeReply(200, self.files[file_id], {"content-type": "application/octet-stream"})

    def _openai_create(self, body: dict[str, Any]) -> FakeReply:
        file_id = body.get("input_file_id")
        if file_id not in self.files or body.get("endpoint") != "/v1/chat/completions":
            return openai_error(400, f"fake: bad batch request {body}")
        if body.get("completion_window") != "24h":
            return openai_error(400, "fake: completion_window must be 24h")
        batch_id = self._next("batch_")
        requests = [json.loads(line) for line in self.files[file_id].splitlines() if line.strip()]
        lines: list[str] = []
        errors: list[str] = []
        counts = {"total": len(requests), "completed": 0, "failed": 0}
        submitted = []
        for n, line in enumerate(requests):
            assert set(line) == {"custom_id", "method", "url", "body"}, line
            assert line["method"] == "POST" and line["url"] == "/v1/chat/completions", line
            cid = line["custom_id"]
            submitted.append((cid, line["body"]))
            said = self.answer("openai", cid, line["body"])
            out: dict[str, Any] = {"id": f"batch_req_{n}", "custom_id": cid}
            if isinstance(said, Expired):
                out |= {
                    "response": None,
                    "error": {
                        "code": "batch_expired",
                        "message": "This request could not be executed before the completion window expired.",
                    },
                }
                errors.append(json.dumps(out))
                counts["failed"] += 1
            elif isinstance(said, Errored):
                err_body = openai_error(said.status, said.message, type="server_error").body
                out |= {
                    "response": {"status_code": said.status, "request_id": f"req_{n}", "body": err_body},
                    "error": None,
                }
                errors.append(json.dumps(out))
                counts["failed"] += 1
            else:
                chat = openai_chat(said, model=self.openai_model).body
                out |= {
                    "response": {"status_code": 200, "request_id": f"req_{n}", "body": chat},
                    "error": None,
                }
                lines.append(json.dumps(out))
                counts["completed"] += 1
        self._random.shuffle(lines)
        self._random.shuffle(errors)
        batch = _Batch(
            "openai", batch_id, [c for c, _ in submitted], lines, errors, input_file_id=file_id, counts=counts
        )
        self.batches[batch_id] = batch
        self.submitted.append(("openai", batch_id, submitted))
        return FakeReply(200, self._openai_batch(batch, ended=False))

    def _openai_batch(self, b: _Batch, *, ended: bool) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": b.id,
            "object": "batch",
            "endpoint": "/v1/chat/completions",
            "completion_window": "24h",
            "created_at": CREATED,
            "input_file_id": b.input_file_id,
            "status": "completed" if ended else "in_progress",
            "output_file_id": None,
            "error_file_id": None,
            "errors": None,
            "request_counts": (
                dict(b.counts) if ended else {"total": b.counts["total"], "completed": 0, "failed": 0}
            ),
        }
        if ended:
            data["completed_at"] = CREATED + 60
            if b.lines:
                data["output_file_id"] = self._store_file(b, "out", b.lines)
            if b.errors:
                data["error_file_id"] = self._store_file(b, "err", b.errors)
        return data

    def _store_file(self, b: _Batch, kind: str, lines: list[str]) -> str:
        file_id = f"file-{b.id}-{kind}"
        self.files[file_id] = ("\n".join(lines) + "\n").encode()
        if kind == "out":
            self.result_orders[b.id] = [json.loads(line)["custom_id"] for line in lines]
        return file_id

    def _openai_retrieve(self, batch_id: str) -> FakeReply:
        b = self.batches.get(batch_id)
        if b is None or b.api != "openai":
            return openai_error(404, f"fake: no batch {batch_id}")
        b.polls += 1
        return FakeReply(200, self._openai_batch(b, ended=b.polls > self.polls_before_end))

    # -- Anthropic -----------------------------------------------------------------------------------------
    def _anthropic_create(self, body: dict[str, Any], host: str) -> FakeReply:
        requests = body.get("requests") if isinstance(body, dict) else None
        if not requests:
            return anthropic_error(400, "invalid_request_error", "fake: requests is empty")
        batch_id = self._next("msgbatch_")
        lines: list[str] = []
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        submitted = []
        for item in requests:
            assert set(item) == {"custom_id", "params"}, item
            cid, params = item["custom_id"], item["params"]
            submitted.append((cid, params))
            said = self.answer("anthropic", cid, params)
            if isinstance(said, Expired):
                result: dict[str, Any] = {"type": "expired"}
                counts["expired"] += 1
            elif isinstance(said, Errored):
                result = {
                    "type": "errored",
                    "error": {"type": "error", "error": {"type": said.type, "message": said.message}},
                }
                counts["errored"] += 1
            else:
                message = anthropic_message(said, model=self.anthropic_model).body
                result = {"type": "succeeded", "message": message}
                counts["succeeded"] += 1
            lines.append(json.dumps({"custom_id": cid, "result": result}))
        self._random.shuffle(lines)
        batch = _Batch("anthropic", batch_id, [c for c, _ in submitted], lines, counts=counts)
        self.batches[batch_id] = batch
        self.submitted.append(("anthropic", batch_id, submitted))
        return FakeReply(200, self._anthropic_batch(batch, host, ended=False))

    def _anthropic_batch(self, b: _Batch, host: str, *, ended: bool) -> dict[str, Any]:
        counts = (
            dict(b.counts)
            if ended
            else {"processing": len(b.custom_ids), "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        )
        return {
            "id": b.id,
            "type": "message_batch",
            "processing_status": "ended" if ended else "in_progress",
            "request_counts": counts,
            "created_at": CREATED_ISO,
            "expires_at": EXPIRES_ISO,
            "ended_at": "2026-11-30T03:10:00Z" if ended else None,
            "archived_at": None,
            "cancel_initiated_at": None,
            # The SDK follows this URL for the results: point it back at this server.
            "results_url": f"http://{host}/v1/messages/batches/{b.id}/results" if ended else None,
        }

    def _anthropic_retrieve(self, batch_id: str, host: str) -> FakeReply:
        b = self.batches.get(batch_id)
        if b is None or b.api != "anthropic":
            return anthropic_error(404, "not_found_error", f"fake: no batch {batch_id}")
        b.polls += 1
        return FakeReply(200, self._anthropic_batch(b, host, ended=b.polls > self.polls_before_end))

    def _anthropic_results(self, batch_id: str) -> FakeReply:
        b = self.batches.get(batch_id)
        if b is None or b.polls <= self.polls_before_end:
            return anthropic_error(404, "not_found_error", f"fake: batch {batch_id} has no results yet")
        self.result_orders[b.id] = [json.loads(line)["custom_id"] for line in b.lines]
        payload = ("\n".join(b.lines) + "\n").encode()
        return FakeReply(200, payload, {"content-type": "application/binary"})
