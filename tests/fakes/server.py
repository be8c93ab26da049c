"""A loopback fake of the OpenAI and Anthropic HTTP APIs for contract tests.

Both SDKs now send through ``httpx2``, which ``respx`` and ``pytest-httpx`` do not intercept, so the tests
point the *real* clients at a real socket instead: a stdlib ``ThreadingHTTPServer`` on 127.0.0.1 with an
ephemeral port, a scripted queue of replies and a log of every request. That exercises the SDKs' own
retry, timeout, header and response-validation code, which is exactly what a mock would hide.

Design notes for later users (batch APIs, throughput benchmarks):
- Replies come from ``responder`` first (a callable that sees the recorded request and returns a
  ``FakeReply`` or ``None``), then from the FIFO queue. A responder can serve any method and path, so
  ``/v1/files``, ``/v1/batches`` and ``/v1/messages/batches`` need no change here.
- Without a responder, only the routes in ``routes`` are served from the queue; any other path is a 404
  naming the path, so a wrong base URL (a missing or doubled ``/v1``) fails loudly instead of being answered.
- The server speaks HTTP/1.1 with keep-alive, so a benchmark measures the harness and not TCP set-up.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NamedTuple

__all__ = [
    "FakeLLMServer",
    "FakeReply",
    "RecordedRequest",
    "anthropic_error",
    "anthropic_message",
    "openai_chat",
    "openai_error",
    "openai_tool_calls",
]

DEFAULT_ROUTES: tuple[tuple[str, str], ...] = (
    ("POST", "/v1/chat/completions"),
    ("POST", "/v1/messages"),
)


@dataclass
class FakeReply:
    """One scripted answer. ``drop=True`` closes the connection without writing anything; ``reset=True``
    aborts it with a TCP reset (RST), as a crashed server or a proxy cutting the connection does."""

    status: int = 200
    body: dict[str, Any] | list[Any] | str | bytes = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    drop: bool = False
    reset: bool = False

    def encoded(self) -> tuple[bytes, str]:
        if isinstance(self.body, bytes):
            return self.body, "application/octet-stream"
        if isinstance(self.body, str):
            return self.body.encode("utf-8"), "text/plain; charset=utf-8"
        return json.dumps(self.body).encode("utf-8"), "application/json"


class RecordedRequest(NamedTuple):
    """What the server received. ``headers`` has lower-case names; ``body`` is parsed JSON when it parses,
    else the raw bytes (multipart uploads, JSONL)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes = b""  # the body's bytes as they came


Responder = Callable[[RecordedRequest], FakeReply | None]


class FakeLLMServer:
    """Context manager: ``with FakeLLMServer() as srv: srv.enqueue(openai_chat("{}")) ...``."""

    def __init__(
        self,
        *,
        responder: Responder | None = None,
        routes: Iterable[tuple[str, str]] = DEFAULT_ROUTES,
    ) -> None:
        self.responder = responder
        self.routes = set(routes)
        self.requests: list[RecordedRequest] = []
        self._queue: deque[FakeReply] = deque()
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------------
    def start(self) -> FakeLLMServer:
        handler = _make_handler(self)
        self._httpd = _Server(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        # A short poll interval: shutdown() waits up to one interval, and tests start a server each.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-llm", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- addresses -------------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("FakeLLMServer is not started")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        # The OpenAI SDK appends "chat/completions" to a base URL that already ends in /v1.
        return f"{self.base_url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        # The Anthropic SDK appends "/v1/messages" itself.
        return self.base_url

    # -- script ----------------------------------------------------------------------------------------
    def enqueue(self, *replies: FakeReply) -> None:
        with self._lock:
            self._queue.extend(replies)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def paths(self) -> list[str]:
        return [r.path for r in self.requests]

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _next_reply(self, request: RecordedRequest) -> FakeReply:
        if self.responder is not None:
            reply = self.responder(request)
            if reply is not None:
                return reply
        route = (request.method, request.path.split("?", 1)[0])
        if route not in self.routes:
            return FakeReply(404, {"error": f"fake server: no route for {route[0]} {route[1]}"})
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        return FakeReply(500, {"error": "fake server: no scripted reply"})


class _Server(ThreadingHTTPServer):
    # The stdlib's listen backlog of 5 drops connections when a client opens dozens at once (a benchmark at
    # concurrency 64), and the client then waits a second for the SYN to be retried.
    request_queue_size = 256


def _make_handler(server: FakeLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in separate writes; with Nagle's algorithm on, the body waits for the
        # client's delayed ACK (~40 ms a reply), which a throughput benchmark would measure instead of us.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:  # stdlib signature
            pass  # keep pytest output clean

        def _serve(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body: Any = json.loads(raw) if raw else None
            except ValueError:
                body = raw
            headers = {k.lower(): v for k, v in self.headers.items()}
            request = RecordedRequest(self.command, self.path, headers, body, raw)
            server._record(request)

            if "authorization" not in headers and "x-api-key" not in headers:
                reply = FakeReply(401, {"error": "fake server: no Authorization: Bearer or x-api-key header"})
            else:
                reply = server._next_reply(request)

            if reply.delay:
                time.sleep(reply.delay)
            if reply.reset:
                # Linger 0: close() sends RST instead of FIN, so the client reads "connection reset".
                self.close_connection = True
                with _suppress_socket_errors():
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.connection.close()
                return
            if reply.drop:
                # Close the socket without a status line: the client sees a protocol/connection error.
                self.close_connection = True
                with _suppress_socket_errors():
                    self.connection.shutdown(socket.SHUT_RDWR)
                return
            payload, content_type = reply.encoded()
            with _suppress_socket_errors():
                self.send_response(reply.status)
                sent = {k.lower() for k in reply.headers}
                if "content-type" not in sent:
                    self.send_header("Content-Type", content_type)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                self.wfile.flush()

        do_GET = do_POST = do_DELETE = do_PUT = _serve

    return Handler


class _suppress_socket_errors:
    """A client that timed out has gone away; writing to it must not spray tracebacks into the test log."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> bool:
        return exc_type is not None and issubclass(exc_type, (BrokenPipeError, ConnectionError, OSError))


# -- reply constructors ------------------------------------------------------------------------------------
def openai_chat(
    content: str | dict[str, Any] | None,
    *,
    finish_reason: str = "stop",
    refusal: str | None = None,
    model: str = "gpt-4o-2024-08-06",
    prompt_tokens: int = 100,
    completion_tokens: int = 20,
    cached_tokens: int = 0,
    fingerprint: str | None = "fp_test",
    headers: dict[str, str] | None = None,
    delay: float = 0.0,
) -> FakeReply:
    """A Chat Completions body the strict client accepts; a dict ``content`` is JSON-encoded."""
    text = json.dumps(content) if isinstance(content, dict) else content
    body = {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_760_000_000,
        "model": model,
        "system_fingerprint": fingerprint,
        "choices": [
            {
                "index": 0,
                "finish_reason": finish_reason,
                "logprobs": None,
                "message": {"role": "assistant", "content": text, "refusal": refusal},
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached_tokens},
        },
    }
    return FakeReply(200, body, dict(headers or {}), delay=delay)


def openai_tool_calls(*calls: tuple[str, dict[str, Any], str], model: str = "gpt-4o-2024-08-06") -> FakeReply:
    """A Chat Completions reply asking for tool calls, each ``(name, arguments, call_id)``: what an agent
    framework's model turn that calls tools looks like to the strict client."""
    body = {
        "id": "chatcmpl-fake-tools",
        "object": "chat.completion",
        "created": 1_760_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "logprobs": None,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "refusal": None,
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": json.dumps(args)},
                        }
                        for name, args, call_id in calls
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }
    return FakeReply(200, body)


def anthropic_message(
    text: str | dict[str, Any] | None = None,
    *,
    tool_input: dict[str, Any] | None = None,
    tool_name: str = "judgement",
    stop_reason: str | None = None,
    model: str = "claude-sonnet-4-5-20250929",
    input_tokens: int = 100,
    output_tokens: int = 20,
    cache_read: int = 0,
    cache_write: int = 0,
    refusal_explanation: str | None = None,
    headers: dict[str, str] | None = None,
    delay: float = 0.0,
) -> FakeReply:
    """A Messages body the strict client accepts.

    ``stop_reason=None`` means "what the API would say": ``tool_use`` when ``tool_input`` is given, else
    ``end_turn``. ``refusal_explanation`` adds ``stop_details`` as the API does for ``stop_reason="refusal"``.
    """
    content: list[dict[str, Any]] = []
    if text is not None:
        content.append({"type": "text", "text": json.dumps(text) if isinstance(text, dict) else text})
    if tool_input is not None:
        content.append({"type": "tool_use", "id": "toolu_fake", "name": tool_name, "input": tool_input})
    if stop_reason is None:
        stop_reason = "tool_use" if tool_input is not None else "end_turn"
    body: dict[str, Any] = {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": cache_write,
            "cache_read_input_tokens": cache_read,
        },
    }
    if refusal_explanation is not None:
        body["stop_details"] = {"type": "refusal", "category": None, "explanation": refusal_explanation}
    return FakeReply(200, body, dict(headers or {}), delay=delay)


def openai_error(
    status: int,
    message: str,
    headers: dict[str, str] | None = None,
    *,
    type: str = "invalid_request_error",  # mirrors the wire field
    code: str | None = None,
) -> FakeReply:
    body = {"error": {"message": message, "type": type, "param": None, "code": code}}
    return FakeReply(status, body, dict(headers or {}))


def anthropic_error(
    status: int,
    type: str,  # mirrors the wire field
    message: str,
    headers: dict[str, str] | None = None,
) -> FakeReply:
    body = {"type": "error", "error": {"type": type, "message": message}}
    return FakeReply(status, body, dict(headers or {}))
