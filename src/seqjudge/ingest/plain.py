"""Recognise a plain native JSONL record and hand it to the engine without building pydantic models.

Most JSONL traces are the simplest native shape: ``trace_id``, ``calls`` of ``tool_name`` / ``arguments`` /
``status`` (perhaps ``output``, ``error``, ``id``), ``context``. Validating one into twenty ``Call`` models
took longer than checking it, so ``seqjudge check`` asks ``plain_trace`` first. The test is strict: it
accepts a record only when ``Trace`` would take every key and value exactly as given (the keys named above,
each of the type the model declares, no coercion). Anything else - timestamps, steps, messages, other keys,
a wrong type - returns None and goes through ``Trace`` as before, so every error message, default and
ordering rule stays in one place.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from seqjudge.ingest.base import text_of
from seqjudge.trace import PlainTrace

if TYPE_CHECKING:
    from seqjudge.pattern import Pattern

_TRACE_KEYS = frozenset({"trace_id", "calls", "context", "metadata"})
_CALL_KEYS = frozenset({"tool_name", "arguments", "status", "output", "error", "id"})
_ABSENT: Any = object()


def plain_trace(value: Any, error_pattern: Pattern | None) -> PlainTrace | None:
    """The record as a PlainTrace, or None when it is not plainly a valid native trace.

    ``error_pattern`` marks ok calls whose output matches as failed, as ``apply_error_pattern`` does.
    """
    # `type(...) is` rather than isinstance: json.loads makes exactly these types, and a subclass is not
    # worth reasoning about here (it takes the model path).
    if type(value) is not dict or "calls" not in value or not value.keys() <= _TRACE_KEYS:
        return None
    calls = value["calls"]
    trace_id = value.get("trace_id")
    if type(calls) is not list or (trace_id is not None and type(trace_id) is not str):
        return None
    context: Any = value.get("context", None)
    if context is None:
        if "context" in value:
            return None  # null is not an object: the model says so
        context = {}
    elif type(context) is not dict:
        return None
    metadata = value.get("metadata", {})
    if type(metadata) is not dict:
        return None
    names: list[str] = []
    ok: list[bool] = []
    args: list[dict[str, Any]] = []
    for call in calls:
        # Most calls hold exactly tool_name, arguments and status: read by subscript (no method call) and
        # checked inline. Anything else (a key absent, another key, a value of another type, not an object)
        # is read by `_call`, the general rule.
        try:
            name = call["tool_name"]
            arguments = call["arguments"]
            status = call["status"]
        except (KeyError, TypeError):
            got = _call(call, error_pattern) if type(call) is dict else None
            if got is None:
                return None
            name, good, arguments = got
        else:
            if type(name) is not str or not name or type(arguments) is not dict or len(call) != 3:
                got = _call(call, error_pattern)
                if got is None:
                    return None
                name, good, arguments = got
            elif status == "ok":
                good = True  # no output to match the error pattern against
            elif status == "error":
                good = False
            else:
                return None
        names.append(name)
        ok.append(good)
        args.append(arguments)
    plain = PlainTrace(trace_id, context, names, ok, args, metadata)
    plain.raw_calls = calls  # the outputs stay where they are, for lineage rules
    return plain


def _call(call: dict[str, Any], error_pattern: Pattern | None) -> tuple[str, bool, dict[str, Any]] | None:
    """A call's (name, success, arguments) as ``Trace`` reads them, or None when it is not plainly valid."""
    name = call.get("tool_name")
    if type(name) is not str or not name:
        return None
    arguments = call.get("arguments", _ABSENT)
    if type(arguments) is not dict:
        if arguments is not _ABSENT:
            return None  # null is not an object, nor is anything else
        arguments = {}
        known = 1
    else:
        known = 2
    status = call.get("status", _ABSENT)
    if status == "ok" or status is _ABSENT:
        good = True
    elif status == "error":
        good = False
    else:
        return None
    if status is not _ABSENT:
        known += 1
    # Every key but these is read only by the model: a call with more keys than were found above must
    # hold only the other keys the model takes (id, output, error) to stay plain.
    if len(call) != known:
        if not call.keys() <= _CALL_KEYS:
            return None
        call_id = call.get("id")
        if call_id is not None and type(call_id) is not str:
            return None
        if good and call.get("error") is not None:
            if status is not _ABSENT:
                return None  # "ok" with an error: the model path refuses it (``native.check_outcomes``)
            good = False  # an error and no status: failed, as ``Trace`` reads it
    if good and error_pattern is not None:
        output = call.get("output")
        if output is not None and error_pattern.search(text_of(output)):
            good = False
    return name, good, arguments
