"""How a batch run's requests are kept: their ``custom_id`` and their JSON in the store.

A custom_id is a hash of what decides the request (trace, rules, template, model, rendered prompt), so the
same suite gets the same ids in any run and a result can always be joined back to its trace. Requests are
stored as JSON with the parts every request of a run repeats (system prompt, static prompt, output schema)
replaced by a reference into ``prompt_parts``, so a 50,000-trace run stores its static prompt once.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from seqjudge.judge.judge import SessionState
from seqjudge.judge.prompt import RenderedPrompt
from seqjudge.judge.providers.base import JudgeRequest, canonical_json
from seqjudge.trace import Trace

CUSTOM_ID_PREFIX = "sj-"
CUSTOM_ID_LENGTH = 64  # both APIs' limit; ids match ^[A-Za-z0-9_-]{1,64}$
_PACKED = ("system", "static_prompt", "schema")  # request fields every trace of a run repeats


# -- identity ----------------------------------------------------------------------------------------------
def custom_id(
    *,
    trace_id: str,
    trace: Trace,
    rules: Iterable[Any],
    template_version: str,
    template_hash: str,
    provider: str,
    model: str,
    prompt_hash: str = "",
) -> str:
    """The request's id in a batch: a hash of the trace (id and content), the rules it is judged on, the
    prompt template, the model and the rendered prompt. The same inputs give the same id in any run, so
    results can be re-joined; any change to them gives another."""
    payload = {
        "trace_id": trace_id,
        "trace": trace.model_dump(mode="json"),
        "rules": [r.model_dump(mode="json") if hasattr(r, "model_dump") else r for r in rules],
        "template": [template_version, template_hash],
        "model": f"{provider}:{model}",
        "prompt": prompt_hash,
    }
    digest = hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()
    return CUSTOM_ID_PREFIX + digest[: CUSTOM_ID_LENGTH - len(CUSTOM_ID_PREFIX)]


# -- packing: what every request of a run repeats is stored once ------------------------------------------
def _part_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def pack_request(request: JudgeRequest, parts: dict[str, str]) -> dict[str, Any]:
    data = request.model_dump(mode="json")
    for key in _PACKED:
        # json.dumps, not canonical_json: the schema's key order is part of the body sent.
        text = data[key] if isinstance(data[key], str) else json.dumps(data[key], ensure_ascii=False)
        digest = _part_hash(text)
        parts[digest] = text
        data[key] = {"part": digest}
    return data


def unpack_request(data: dict[str, Any], parts: dict[str, str]) -> JudgeRequest:
    data = dict(data)
    for key in _PACKED:
        ref = data[key]
        if isinstance(ref, dict) and set(ref) == {"part"}:
            text = parts[ref["part"]]
            data[key] = text if key != "schema" else json.loads(text)
    return JudgeRequest.model_validate(data)


def packed_parts(data: dict[str, Any]) -> set[str]:
    return {data[k]["part"] for k in _PACKED if isinstance(data.get(k), dict) and "part" in data[k]}


def pack_session(state: SessionState, base: JudgeRequest, parts: dict[str, str]) -> dict[str, Any]:
    data = state.model_dump(mode="json", exclude={"request"})
    data["request"] = "base" if state.request == base else pack_request(state.request, parts)
    return data


def prompt_meta(prompt: RenderedPrompt) -> dict[str, Any]:
    """A rendered prompt without its texts (those are the request's)."""
    return {
        "template_version": prompt.template_version,
        "template_hash": prompt.template_hash,
        "prompt_hash": prompt.prompt_hash,
        "rule_ids": list(prompt.rule_ids),
        "rule_severities": [list(p) for p in prompt.rule_severities],
        "n_calls": prompt.n_calls,
        "nonce": prompt.nonce,
    }


def rendered_prompt(meta: dict[str, Any], base: JudgeRequest) -> RenderedPrompt:
    return RenderedPrompt(
        system=base.system,
        static=base.static_prompt,
        dynamic=base.dynamic_prompt,
        template_version=meta["template_version"],
        template_hash=meta["template_hash"],
        prompt_hash=meta["prompt_hash"],
        rule_ids=tuple(meta["rule_ids"]),
        rule_severities=tuple((rid, sev) for rid, sev in meta["rule_severities"]),
        n_calls=meta["n_calls"],
        nonce=meta["nonce"],
    )
