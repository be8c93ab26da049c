"""A response cache keyed on the exact request, so a repeated run returns the same answers without a call.

Hosted models vary even at temperature 0; the cache is what makes a rerun of an unchanged suite repeatable
(and free). The key covers everything that decides the answer: provider, model, endpoint, the sampling the
adapter will send, the rendered prompt (system, static, dynamic), the schema and the re-ask turns. Every
reply is kept, bad ones too, so a rerun replays the same attempts in the same order.

One JSON file per key under ``.seqjudge/cache/<2 hex>/<key>.json``, written to a temporary file and renamed
into place, so a killed run never leaves half a file that a later run would read (an unreadable file is a
miss, never an error).
"""

from __future__ import annotations

import hashlib
import json
import os
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

    def __init__(self, root: str | Path = DEFAULT_CACHE_DIR) -> None:
        self.root = Path(root)
        self.hits = 0
        self.misses = 0
        # A miss is followed by a put of the same request: its key (a hash over the whole prompt) is kept
        # for a while rather than computed twice. Keyed by identity, and by what the adapter will send (an
        # Anthropic provider may switch to tool use in between); the entry holds the objects, so an id is
        # never reused while it is here.
        self._keys: dict[tuple[int, int], tuple[Any, JudgeRequest, dict[str, Any], str]] = {}
        self._dirs: set[Path] = set()  # folders known to exist
        self._written = 0

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

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, provider: Any, request: JudgeRequest) -> ProviderReply | None:
        path = self.path(self.key(provider, request))
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            reply = ProviderReply.model_validate(data["reply"])
        except (OSError, ValueError, KeyError, TypeError, ValidationError):
            # Missing, unreadable or from an older format: a miss, and the next put replaces it.
            self.misses += 1
            return None
        self.hits += 1
        return reply

    def put(self, provider: Any, request: JudgeRequest, reply: ProviderReply) -> Path:
        key = self.key(provider, request)
        path = self.path(key)
        if path.parent not in self._dirs:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._dirs.add(path.parent)
        record = {
            "format": CACHE_FORMAT,
            "key": key,
            "provider": getattr(provider, "name", ""),
            "model": getattr(provider, "model", ""),
            "reply": reply.model_dump(mode="json"),
        }
        data = json.dumps(record, ensure_ascii=False, sort_keys=True).encode("utf-8")
        # A name no other writer uses (process, cache object, counter), created exclusively, written once
        # and renamed into place. No fsync: it blocked the event loop for milliseconds per reply, and a
        # cache needs atomicity (the rename), not durability. After a power loss an entry may be missing or
        # empty: a miss, which costs one call and is rewritten.
        self._written += 1
        tmp = path.parent / f".{key[:8]}-{os.getpid()}-{id(self):x}-{self._written}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return path
