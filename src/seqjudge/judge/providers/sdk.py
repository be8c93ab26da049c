"""What the OpenAI and Anthropic adapters share: key, options, one SDK client per event loop, an overall
deadline, the raw POST that skips the SDK's models, transport observation, and the translation of every SDK
exception into a ``ProviderError`` whose message carries no secret."""

from __future__ import annotations

import asyncio
import functools
import importlib
import importlib.util
import json
import os
import sys
import time
import weakref
from typing import Any, ClassVar, NamedTuple, Self

from seqjudge.errors import InputError, ProviderError
from seqjudge.judge.providers.base import (
    JudgeRequest,
    ProviderReply,
    TransportObserver,
    canonical_json,
    canonical_json_shared,
    check_options,
    redact,
    retry_after_seconds,
)
from seqjudge.judge.providers.profile import ProviderProfile


def _timed_out(exc: BaseException) -> bool:
    """Whether an SDK timeout error really is a timeout. The SDKs' aiohttp transport reports every aiohttp
    connection error (refused, reset, a server that hung up) as a connect *timeout*; the cause chain still
    holds the original, and a user told "did not answer within 60 s" about a refused connection would look
    in the wrong place."""
    seen: set[int] = set()
    cause = exc.__cause__ or exc.__context__
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, TimeoutError):
            return True
        if isinstance(cause, OSError) or any(
            c.__name__ == "ClientConnectionError" for c in type(cause).__mro__
        ):
            return False
        cause = cause.__cause__ or cause.__context__
    return True


_DROPPED = ("Reset", "Disconnected", "RemoteProtocol", "BrokenPipe", "IncompleteRead")


def _connection_cause(exc: BaseException) -> tuple[str, bool]:
    """(the root cause of an SDK connection error, named; whether the connection was dropped rather than
    refused). The SDKs' own text says "Request timed out." or "Connection error." whatever happened: a
    reset reported as a timeout sends the user to raise a timeout that was never reached."""
    seen: set[int] = set()
    root: BaseException = exc
    cause = exc.__cause__ or exc.__context__
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        root = cause
        cause = cause.__cause__ or cause.__context__
    names = [c.__name__ for c in type(root).__mro__]
    dropped = isinstance(root, ConnectionResetError | BrokenPipeError) or any(
        part in name for name in names for part in _DROPPED
    )
    text = str(root).strip() or "no detail"
    return f"{type(root).__name__}: {text}", dropped


@functools.cache
def _has_aiohttp() -> bool:
    return importlib.util.find_spec("aiohttp") is not None


# -- scaffolding shared by the SDK adapters ----------------------------------------------------------------
DEFAULT_TIMEOUT_S = 120.0  # per HTTP attempt; the SDKs' own default of 600 s lets one hung call stall a run
DEFAULT_MAX_RETRIES = 2  # the SDKs' default; the judge adds none of its own for transport errors
# OpenAI sleeps at most 120 s for a Retry-After, Anthropic for any value it is told: a whole call (all SDK
# attempts and their sleeps) gets this much beyond its attempts' timeouts before it fails as a timeout.
_RETRY_SLEEP_ALLOWANCE_S = 120.0

SDK_OPTIONS = {
    "api_key_env",
    "base_url",
    "deadline",
    "max_retries",
    "seed",
    "strict_response_validation",
    "temperature",
    "timeout",
}


# What the SDK client is given for a local server (``base_url``) when the key variable is not set: the
# SDKs refuse to build a client without some key string, and a local server usually checks none. It is not
# a secret, but it is still never shown: it stays inside the client like a real key.
NO_KEY_PLACEHOLDER = "seqjudge-no-key"


def read_api_key(provider: str, env_var: str, base_url: str | None = None) -> str:
    """The key from the environment (never from a file or flag, so it cannot land in a config or a log);
    with ``base_url`` and no key set, a placeholder, so that a local server works without inventing one."""
    key = os.environ.get(env_var, "").strip()
    if not key and base_url:
        return NO_KEY_PLACEHOLDER
    if not key:
        raise ProviderError(
            f"no API key for the {provider} provider: set the {env_var} environment variable "
            f"(a local server that needs no key needs only --base-url; another variable can be named "
            f"with the api_key_env option)",
            kind="config",
            provider=provider,
        )
    return key


def _unreadable(exc: BaseException) -> str | None:
    """Why a body could not be read as JSON, when ``exc`` is the JSON decoder's; None for anything else (a
    bug: let it surface). Python's int-string limit (4,300 digits) raises a plain ValueError."""
    if isinstance(exc, json.JSONDecodeError):
        return str(exc)
    if isinstance(exc, UnicodeDecodeError):
        return f"bytes that are not UTF-8: {exc.reason}"
    if isinstance(exc, RecursionError):
        return "its values are nested too deep to read"
    if isinstance(exc, ValueError) and "integer string conversion" in str(exc):
        return "it holds an integer too long to read"
    return None


class RawPost(NamedTuple):
    """A reply read by ``SDKProvider._post_raw``: its JSON, the body's text as sent, the SDK's retries, and
    the response headers."""

    data: dict[str, Any]
    body_json: str
    transport_retries: int
    headers: Any
    invalid_utf8: bool = False  # bytes of the body were not UTF-8 (replaced by U+FFFD to read the rest)


@functools.cache
def _raw_response_type(sdk: Any) -> Any:
    """The response class of the HTTP library the SDK is built on (found through its public default client
    class), which ``client.post(cast_to=...)`` returns unparsed; None when it cannot be found."""
    for cls in getattr(sdk, "DefaultAsyncHttpxClient", object).__mro__:
        library = sys.modules.get(cls.__module__.split(".")[0])
        if library is not None and library is not sdk and hasattr(library, "AsyncClient"):
            return getattr(library, "Response", None)
    return None  # pragma: no cover - an SDK without one: its typed method it is


class SDKProvider:
    """Common ground of the OpenAI and Anthropic adapters: key, options, one SDK client per event loop,
    an overall deadline, and the translation of SDK exceptions into ``ProviderError``.

    Subclasses set ``profile`` (its key variable is the adapter's), ``name``, ``sdk_module``,
    ``client_class``, ``default_base_url`` and ``request_path``, and implement ``_complete``. The SDK is
    imported lazily, on construction, so importing seqjudge never needs it.
    """

    profile: ClassVar[ProviderProfile]
    name = ""
    sdk_module = ""
    client_class = ""  # the SDK's async client, e.g. AsyncOpenAI
    default_base_url = ""  # where the SDK sends requests when no base_url is given
    request_path = ""  # the endpoint a judge call is POSTed to, below the base URL
    request_id_header = ""  # the response header that carries the provider's request id
    extra_options: frozenset[str] = frozenset()

    def __init__(self, model: str, **options: Any) -> None:
        check_options(self.name, options, SDK_OPTIONS | self.extra_options)
        self.model = model
        self.key_env: str = options.get("api_key_env") or self.profile.key_env or ""
        self.base_url: str | None = options.get("base_url")
        try:
            self.timeout = float(options.get("timeout", DEFAULT_TIMEOUT_S))
            self.max_retries = int(options.get("max_retries", DEFAULT_MAX_RETRIES))
            default_deadline = (self.timeout + _RETRY_SLEEP_ALLOWANCE_S) * (self.max_retries + 1)
            self.deadline = float(options.get("deadline", default_deadline))
        except (TypeError, ValueError):
            self.timeout = self.deadline = -1.0
            self.max_retries = -1
        if self.timeout <= 0 or self.deadline <= 0 or self.max_retries < 0:
            raise InputError(
                f"invalid {self.name} options: timeout and deadline must be seconds > 0, max_retries >= 0",
                hint="for example timeout=120, max_retries=2",
            )
        self.strict_response_validation = bool(options.get("strict_response_validation", False))
        self.options = options
        try:
            self._sdk = importlib.import_module(self.sdk_module)
        except ImportError:
            raise ProviderError(
                f"the {self.name} provider needs the {self.sdk_module!r} package: "
                f"pip install {self.sdk_module}",
                kind="config",
                provider=self.name,
            ) from None
        self._api_key = read_api_key(self.name, self.key_env, self.base_url)
        self._sdk_client: Any = None
        self._client_loop: weakref.ref[asyncio.AbstractEventLoop] | None = None
        self._observer: TransportObserver | None = None

    def __repr__(self) -> str:
        # Never the key: reprs end up in logs and test failure output.
        where = f", base_url={redact(self.base_url)!r}" if self.base_url else ""
        return f"{type(self).__name__}(model={self.model!r}{where})"

    # -- client --------------------------------------------------------------------------------------------
    def _build_client(self) -> Any:
        # Both SDKs take the same client options; base_url is left out when not given so the SDK's own
        # default (and its environment variable) applies.
        kwargs: dict[str, Any] = {
            "api_key": self._api_key,
            "timeout": self.timeout,
            "max_retries": self.max_retries,
            "_strict_response_validation": self.strict_response_validation,
        }
        if self.base_url:
            kwargs["base_url"] = self.base_url
        kwargs.update(self._transport_options())
        return getattr(self._sdk, self.client_class)(**kwargs)

    def observe_transport(self, observer: TransportObserver | None) -> None:
        """Tell ``observer`` of every HTTP attempt (before it is sent; SDK retries included) and every
        response status with its Retry-After: how a run's limiter counts retries and hears of 429s that the
        SDK retries without raising. Call before the first request (the next client is built with it)."""
        self._observer = observer
        self._sdk_client = self._client_loop = None

    def _transport_options(self) -> dict[str, Any]:
        """The SDK's HTTP client: its aiohttp transport when aiohttp is installed (the SDKs' own ``aiohttp``
        extra, a dependency of seqjudge), with event hooks when someone observes the transport.

        Why aiohttp: at 64 calls in flight the default transport's connection pool and pure-Python HTTP
        parsing cost about 0.5 ms of CPU a call, a sixth of a judged trace, and a run's event loop is CPU
        bound at that rate (benchmarks/judge_throughput.py). The SDK's timeouts, retries and errors are the
        same over either transport."""
        hooks: dict[str, list[Any]] = {}
        observer = self._observer
        if observer is not None:

            async def on_request(request: Any) -> None:
                await observer.on_request(int(request.headers.get("x-stainless-retry-count") or 0))

            async def on_response(response: Any) -> None:
                observer.on_response(response.status_code, retry_after_seconds(response.headers))

            hooks = {"request": [on_request], "response": [on_response]}
        # The SDK's own default client classes keep its connection limits, timeouts and redirects.
        aiohttp_client = getattr(self._sdk, "DefaultAioHttpClient", None)
        if aiohttp_client is not None and _has_aiohttp():
            try:
                return {"http_client": aiohttp_client(event_hooks=hooks)}
            except RuntimeError:  # an older SDK whose aiohttp extra is not installed: the default transport
                pass
        if not hooks:
            return {}
        return {"http_client": self._sdk.DefaultAsyncHttpxClient(event_hooks=hooks)}

    def reply_from_body(
        self,
        data: dict[str, Any],
        *,
        request: JudgeRequest,
        body: dict[str, Any],
        transport_retries: int = 0,
        request_id: str | None = None,
        body_json: str | None = None,
    ) -> ProviderReply:  # pragma: no cover - abstract
        """Normalise the provider's reply JSON (from a call or a batch result line)."""
        raise NotImplementedError

    async def _complete_raw(self, request: JudgeRequest, body: dict[str, Any]) -> ProviderReply | None:
        """``body`` sent by ``_post_raw`` and its reply normalised; None when the typed method must serve."""
        posted = await self._post_raw(body)
        if posted is None:
            return None
        reply = self.reply_from_body(
            posted.data,
            request=request,
            body=body,
            body_json=posted.body_json,
            transport_retries=posted.transport_retries,
            request_id=posted.headers.get(self.request_id_header),
        )
        reply.invalid_utf8 = posted.invalid_utf8
        return reply

    async def _post_raw(self, body: dict[str, Any]) -> RawPost | None:
        """POST ``body`` to ``request_path`` through the SDK's own client (its retries, timeouts, headers and
        errors) without its parameter transform and response models, which cost about 0.6 ms of CPU a call at
        high concurrency (benchmarks/judge_throughput.py). The body is encoded once: the bytes sent are the
        bytes the request hash covers. None when strict response validation is on (it needs the models) or
        the SDK's HTTP library cannot be found: the adapter then calls the SDK's typed method."""
        raw_type = None if self.strict_response_validation else _raw_response_type(self._sdk)
        if raw_type is None:
            return None
        body_json = canonical_json_shared(body)
        response = await self._client().post(
            self.request_path, content=body_json.encode("utf-8"), cast_to=raw_type
        )
        data, invalid_utf8 = self._decode_body(response.content)
        if not isinstance(data, dict):
            data = self._body(data)  # raises: not a JSON object
        retries = int(response.request.headers.get("x-stainless-retry-count") or 0)
        return RawPost(data, body_json, retries, response.headers, invalid_utf8)

    def _decode_body(self, content: bytes) -> tuple[Any, bool]:
        """A 2xx body's JSON, and whether some of its bytes were not UTF-8.

        Such bytes are read as U+FFFD, so that the reply still reaches the judge, which takes it as an invalid
        reply (re-asked, then unscored: ``ProviderReply.invalid_utf8``). A body that is no JSON Python can
        read - bad JSON, an integer of more than 4,300 digits (Python's int-string limit raises ValueError),
        values nested past the recursion limit - is a malformed reply from the server (``kind="server"``: the
        trace is stored unscored and the run goes on), never a crash."""
        try:
            text, invalid = content.decode("utf-8"), False
        except UnicodeDecodeError:
            text, invalid = content.decode("utf-8", errors="replace"), True
        try:
            return json.loads(text), invalid
        except (ValueError, RecursionError) as exc:
            why = _unreadable(exc)
            if why is None:
                raise
        raise self._unreadable_body(why)

    def _unreadable_body(self, why: str) -> ProviderError:
        return ProviderError(
            f"{self.name} at {self.endpoint} answered with a body that is not valid JSON ({why})",
            kind="server",
            provider=self.name,
        )

    def _body(self, parsed: Any) -> dict[str, Any]:
        """The SDK's parsed reply as a JSON dict; a body that is not a JSON object is a server error (a
        proxy's HTML page, a truncated reply), never an AttributeError that would end a whole run."""
        to_dict = getattr(parsed, "to_dict", None)
        if to_dict is None:
            raise ProviderError(
                f"{self.name} at {self.endpoint} answered with a body that is not a JSON object "
                f"({type(parsed).__name__}: {self._redact(str(parsed))[:80]!r})",
                kind="server",
                provider=self.name,
            )
        data: dict[str, Any] = to_dict(mode="json")
        return data

    def _client(self) -> Any:
        # An httpx client is bound to the event loop it first ran in; a caller that uses asyncio.run() more
        # than once would otherwise get "Event loop is closed" from a pooled connection. A weak reference,
        # not id(): a new loop can reuse a dead loop's id.
        loop = asyncio.get_running_loop()
        if self._sdk_client is None or self._client_loop is None or self._client_loop() is not loop:
            self._sdk_client = self._build_client()
            self._client_loop = weakref.ref(loop)
        return self._sdk_client

    def sdk_client(self) -> Any:
        """The SDK client of this event loop, for calls beyond ``complete`` (the batch APIs)."""
        return self._client()

    def provider_error(self, exc: Exception) -> ProviderError | None:
        """An SDK exception as the ``ProviderError`` a user sees (key redacted); None if not the SDK's."""
        return self._map_error(exc)

    async def aclose(self) -> None:
        if self._sdk_client is not None:
            await self._sdk_client.close()
        self._sdk_client = self._client_loop = None

    # `async with get_provider(...) as provider:` closes the HTTP client in the loop that used it. The
    # aiohttp transport warns ("Unclosed client session") about a client left open when the program ends.
    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @property
    def endpoint(self) -> str:
        return redact(self.base_url) if self.base_url else f"the default {self.name} endpoint"

    # -- request -------------------------------------------------------------------------------------------
    def hash_request(self, request: JudgeRequest, body: dict[str, Any], body_json: str | None = None) -> str:
        """The request's hash over the URL it is sent to and its exact body (``build_body``); ``body_json``
        is ``canonical_json(body)`` when the caller has it already (it is what an adapter sends)."""
        url = f"{self.base_url or self.default_base_url}".rstrip("/") + self.request_path
        if body_json is None:
            body_json = canonical_json_shared(body)
        # canonical_json({"url": url, "body": body}) with the body's text given.
        return request.request_hash_sent(
            self.name, self.model, f'{{"body":{body_json},"url":{canonical_json(url)}}}'
        )

    # -- the call ------------------------------------------------------------------------------------------
    async def complete(self, request: JudgeRequest) -> ProviderReply:
        started = time.perf_counter()
        error: ProviderError | None = None
        try:
            async with asyncio.timeout(self.deadline):
                reply = await self._complete(request)
        except TimeoutError:
            error = ProviderError(
                f"no answer from {self.name} model {self.model} at {self.endpoint} within the deadline of "
                f"{self.deadline:g} s (all SDK retries and Retry-After waits included); raise the deadline "
                f"or timeout option, or lower the load",
                kind="timeout",
                provider=self.name,
            )
        except ProviderError as exc:
            error = exc
        except (ValueError, RecursionError) as exc:  # the SDK's own parse of a 2xx body (strict validation)
            why = _unreadable(exc)
            if why is None:
                raise
            error = self._unreadable_body(why)
        except Exception as exc:
            mapped = self._map_error(exc)
            if mapped is None:
                raise
            error = mapped
        if error is not None:
            # Raised outside the except block on purpose: no __context__ chain back to the SDK exception,
            # whose message and request object can carry what the user must never see (keys, full bodies).
            raise error
        reply.latency_s = time.perf_counter() - started
        return reply

    async def _complete(self, request: JudgeRequest) -> ProviderReply:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- errors --------------------------------------------------------------------------------------------
    def _map_error(self, exc: Exception) -> ProviderError | None:
        """Translate an SDK exception; None for anything that is not the SDK's (a bug: let it surface)."""
        sdk = self._sdk
        base_error = getattr(sdk, "OpenAIError", None) or getattr(sdk, "AnthropicError", None)
        if base_error is None or not isinstance(exc, base_error):
            return None
        detail = self._redact(_error_detail(exc))
        retried = f" after {self.max_retries} SDK retries" if self.max_retries else ""
        where = self.endpoint

        def err(message: str, kind: str, status: int | None = None) -> ProviderError:
            return ProviderError(self._redact(message), kind=kind, provider=self.name, status_code=status)

        if isinstance(exc, sdk.APITimeoutError) and _timed_out(exc):
            return err(
                f"{self.name} at {where} did not answer within {self.timeout:g} s{retried}; "
                f"raise the timeout option or check the server",
                "timeout",
            )
        if isinstance(exc, sdk.APIConnectionError):  # APITimeoutError is one too
            cause, dropped = _connection_cause(exc)
            if dropped:
                return err(
                    f"{self.name} at {where} closed the connection without answering{retried} ({cause}); "
                    f"the server or a proxy in between dropped it: check their logs, or try again later",
                    "connection",
                )
            return err(
                f"could not connect to {self.name} at {where}{retried} ({cause}); check the base_url option "
                f"and that the server is running and reachable",
                "connection",
            )
        if isinstance(exc, sdk.APIResponseValidationError):
            return err(
                f"{self.name} at {where} answered with a body the SDK could not read ({detail}); "
                f"is base_url really a {self.name} API or one compatible with it?",
                "server",
                exc.status_code,
            )
        if isinstance(exc, sdk.APIStatusError):
            return err(*self._status_message(exc.status_code, detail, retried, exc), exc.status_code)
        return err(f"{self.name} client error: {detail}", "config")

    def _status_message(self, status: int, detail: str, retried: str, exc: Exception) -> tuple[str, str]:
        name, model, where = self.name, self.model, self.endpoint
        if status == 401 and self._api_key == NO_KEY_PLACEHOLDER:
            return (
                f"the server at {where} wants an API key (HTTP 401: {detail}), and {self.key_env} is not "
                f"set; set it to the key that server expects",
                "auth",
            )
        if status == 401:
            return (
                f"{name} rejected the API key from {self.key_env} (HTTP 401: {detail}); check that the "
                f"variable holds a valid, active key for {where}",
                "auth",
            )
        if status == 403:
            return (
                f"the API key from {self.key_env} may not use {name} model {model} (HTTP 403: {detail}); "
                f"check the key's project and permissions",
                "auth",
            )
        if status == 429:
            code = getattr(exc, "code", None)
            if code == "insufficient_quota":
                return (
                    f"{name} quota exhausted (HTTP 429: {detail}); check the account's billing",
                    "rate_limit",
                )
            return (
                f"{name} rate limit hit (HTTP 429: {detail}){retried}; lower the concurrency or the "
                f"requests per minute, or try again later",
                "rate_limit",
            )
        if status == 404:
            return (
                f"{name} answered 404 for model {model} at {where} ({detail}); check the model name and the "
                f"base_url (OpenAI-compatible servers usually need the /v1 suffix)",
                "bad_request",
            )
        if status == 408:
            return f"{name} timed out the request (HTTP 408: {detail}){retried}; try again later", "timeout"
        if status >= 500 or status == 409:
            what = "is overloaded" if status == 529 else "had a server error"
            return f"{name} {what} (HTTP {status}: {detail}){retried}; try again later", "server"
        return f"{name} rejected the request for model {model} (HTTP {status}: {detail})", "bad_request"

    def _redact(self, text: str) -> str:
        return redact(text, self._api_key)


def _error_detail(exc: Exception) -> str:
    """The provider's own words for an error, short: body.error.message when there is one."""
    body = getattr(exc, "body", None)
    message: Any = None
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            message = inner.get("message")
        elif isinstance(inner, str):
            message = inner
    elif isinstance(body, str):  # OpenAI's SDK unwraps {"error": "..."} to the bare string
        message = body
    if not message:
        message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    text = " ".join(str(message).split())
    return text if len(text) <= 300 else text[:297] + "..."
