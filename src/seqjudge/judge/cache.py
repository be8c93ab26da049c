"""A response cache keyed on the exact request, so a repeated run returns the same answers without a call.

Hosted models vary even at temperature 0; the cache is what makes a rerun of an unchanged suite repeatable
(and free). The key covers everything that decides the answer: provider, model, endpoint, the sampling the
adapter will send, the rendered prompt (system, static, dynamic), the schema and the re-ask turns. Every
reply is kept, bad ones too, so a rerun replays the same attempts in the same order.

One JSON file per key under ``.seqjudge/cache/<2 hex>/<key>.json``, written to a temporary file and renamed
into place, so a killed run never leaves half a file that a later run would read.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from seqjudge.judge.providers.base import JudgeRequest, ProviderReply, canonical_json

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
    payload = {
        "format": CACHE_FORMAT,
        "provider": getattr(provider, "name", type(provider).__name__),
        "model": getattr(provider, "model", ""),
        "sent": sent_params(provider, request),
        "request": request.model_dump(mode="json"),
    }
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


class ResponseCache:
    """``get(provider, request)`` -> the stored reply or None; ``put(provider, request, reply)``."""

    def __init__(self, root: str | Path = DEFAULT_CACHE_DIR) -> None:
        self.root = Path(root)
        self.hits = 0
        self.misses = 0

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, provider: Any, request: JudgeRequest) -> ProviderReply | None:
        path = self.path(request_key(provider, request))
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
        key = request_key(provider, request)
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        record = {
            "format": CACHE_FORMAT,
            "key": key,
            "provider": getattr(provider, "name", ""),
            "model": getattr(provider, "model", ""),
            "reply": reply.model_dump(mode="json"),
        }
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{key[:8]}-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(record, handle, ensure_ascii=False, sort_keys=True)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path
