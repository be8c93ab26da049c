"""A response cache keyed on the exact request, so a repeated run returns the same answers without a call.

Hosted models vary even at temperature 0; the cache is what makes a rerun of an unchanged suite repeatable
(and free). The key covers everything that decides the answer: provider, model, endpoint, the sampling the
adapter will send, the rendered prompt (system, static, dynamic), the schema and the re-ask turns. Only a
reply that passed validation is kept, and a re-ask is never answered from the cache (``cache_reply``): a
bad reply cached would be replayed after the provider recovered, and a re-ask identical to the previous
one would be answered with the very reply it corrects. ``read=False`` (``--no-cache``) never answers from
the cache but still writes fresh entries, which supersede older ones for the same request.

The replies live in one append-only log, ``.seqjudge/cache/replies.jsonl``, a line per reply:
``<key>\t<json>\n``. Appends take an exclusive ``flock`` and are one write each, so concurrent runs never
interleave lines; a line cut short by a crash has no newline or does not parse, and is a miss, never an
error. The log is indexed once per cache object (key -> offset; replies are read back only on a hit), and
re-scanned past what was seen when a key is missing, to find what another process appended since. One file
per reply cost an ``open`` and often a ``mkdir`` per judged trace, the largest single cost of a judge run.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import warnings
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from seqjudge.judge.providers.base import (
    JudgeRequest,
    ProviderReply,
    canonical_json,
    canonical_object,
    request_json,
)

DEFAULT_CACHE_DIR = Path(".seqjudge") / "cache"
CACHE_FORMAT = 1


def sent_params(provider: Any, request: JudgeRequest) -> dict[str, Any]:
    """What the adapter will put on the wire beyond the request itself: its sampling and its endpoint."""
    sampling = getattr(provider, "sampling", None)
    params: dict[str, Any] = {}
    if callable(sampling):
        params["sampling"] = sampling(request)
    for attr in ("base_url", "output_mode"):
        value = getattr(provider, attr, None)
        if isinstance(value, str):
            params[attr] = value
    return params


def request_key(provider: Any, request: JudgeRequest) -> str:
    # canonical_json of {format, provider, model, sent, request}, the request's part encoded once.
    text = canonical_object(
        {
            "format": canonical_json(CACHE_FORMAT),
            "provider": canonical_json(getattr(provider, "name", type(provider).__name__)),
            "model": canonical_json(getattr(provider, "model", "")),
            "sent": canonical_json(sent_params(provider, request)),
            "request": request_json(request),
        }
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class ResponseCache:
    """``get(provider, request)`` -> the stored reply or None; ``put(provider, request, reply)``."""

    LOG_NAME = "replies.jsonl"

    def __init__(self, root: str | Path = DEFAULT_CACHE_DIR, *, read: bool = True) -> None:
        self.root = Path(root)
        self.read = read
        self.log = self.root / self.LOG_NAME
        self.hits = 0
        self.misses = 0
        # A miss is followed by a put of the same request: its key (a hash over the whole prompt) is kept
        # for a while rather than computed twice. Keyed by identity, and by what the adapter will send (an
        # Anthropic provider may switch to tool use in between); the entry holds the objects, so an id is
        # never reused while it is here.
        self._keys: dict[tuple[int, int], tuple[Any, JudgeRequest, dict[str, Any], str]] = {}
        self._index: dict[str, tuple[int, int]] = {}  # key -> (offset, length) of its line in the log
        self._scanned = 0  # bytes of the log already indexed
        self._fd: int | None = None

    def key(self, provider: Any, request: JudgeRequest) -> str:
        sent = sent_params(provider, request)
        memo = self._keys.get((id(provider), id(request)))
        if memo is not None and memo[0] is provider and memo[1] is request and memo[2] == sent:
            return memo[3]
        key = request_key(provider, request)
        if len(self._keys) >= 1024:
            del self._keys[next(iter(self._keys))]  # the oldest
        self._keys[(id(provider), id(request))] = (provider, request, sent, key)
        return key

    def _scan(self) -> None:
        """Index the log's complete lines past what was already seen."""
        try:
            with self.log.open("rb") as handle:
                handle.seek(self._scanned)
                offset = self._scanned
                for line in handle:
                    if not line.endswith(b"\n"):
                        break  # an append still in progress, or cut short by a crash: not yet an entry
                    tab = line.find(b"\t")
                    if tab == 64:
                        self._index[line[:tab].decode("ascii", "replace")] = (offset, len(line))
                    offset += len(line)
                self._scanned = offset
        except OSError:
            return

    def get(self, provider: Any, request: JudgeRequest) -> ProviderReply | None:
        if not self.read or request.reask:
            self.misses += 1
            return None
        key = self.key(provider, request)
        where = self._index.get(key)
        if where is None:
            self._scan()
            where = self._index.get(key)
        reply = self._read(key, where) if where is not None else None
        if reply is None:
            self.misses += 1
            return None
        self.hits += 1
        return reply

    def _read(self, key: str, where: tuple[int, int]) -> ProviderReply | None:
        offset, length = where
        try:
            with self.log.open("rb") as handle:
                handle.seek(offset)
                line = handle.read(length)
            data = json.loads(line[65:])
            if data.get("format") != CACHE_FORMAT or data.get("key") != key:
                return None
            return ProviderReply.model_validate(data["reply"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError, ValidationError):
            # Unreadable, cut short or from an older format: a miss, and the next put supersedes it.
            return None

    def put(self, provider: Any, request: JudgeRequest, reply: ProviderReply) -> Path:
        key = self.key(provider, request)
        record = {
            "format": CACHE_FORMAT,
            "key": key,
            "provider": getattr(provider, "name", ""),
            "model": getattr(provider, "model", ""),
            "reply": reply.model_dump(mode="json"),
        }
        text = json.dumps(record, ensure_ascii=False, sort_keys=True)
        line = f"{key}\t{text}\n".encode()
        if self._fd is None:
            self.root.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.log, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        fd = self._fd
        # No fsync: it blocked the event loop for milliseconds per reply, and a cache needs whole lines,
        # not durability. After a power loss the last entries may be missing: misses, which cost one call.
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            end = os.lseek(fd, 0, os.SEEK_END)
            if end and os.pread(fd, 1, end - 1) != b"\n":
                os.write(fd, b"\n")  # close a line a crashed writer left open, so ours starts clean
                end += 1
            os.write(fd, line)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
        self._index[key] = (end, len(line))
        return self.log

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __del__(self) -> None:  # the log's descriptor, when the cache object goes
        self.close()


def cache_reply(
    cache: ResponseCache | None, provider: Any, request: JudgeRequest, reply: ProviderReply
) -> None:
    """Keep ``reply`` (already validated by the caller) as the answer to ``request``. Re-asks are not kept:
    they are never read back. A cache that cannot be written costs money later, never the answer now."""
    if cache is None or request.reask:
        return
    try:
        cache.put(provider, request, reply)
    except OSError as exc:
        warnings.warn(f"could not write the response cache ({exc})", stacklevel=2)
