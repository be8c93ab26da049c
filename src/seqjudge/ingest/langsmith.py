"""LangSmith runs, as the SDK's ``list_runs`` / ``read_run(load_child_runs=True)`` or a run export gives them:
objects with ``run_type``, ``inputs``, ``outputs``, ``error``, ``start_time`` / ``end_time``, nested under
``child_runs`` or flat with ``parent_run_id`` and ``trace_id``.

One trace per ``trace_id`` (a nested run without one belongs to its root's trace). A ``tool`` run is a call:
its tool is the run's ``name``; its arguments ``inputs`` (``{"input": "<JSON text>"}`` is decoded; text that
is not JSON stays under ``input``); its result ``outputs.output`` (else ``outputs``); it failed when ``error``
is set. A tool run with no end time, no outputs and no error never finished and is failed "never answered"
(its end is taken as its start, so the other calls still get steps from their overlaps). Calls carry the runs'
start and end times, so they are ordered by start time (``dotted_order`` breaks ties) and overlapping runs
share a step. Chain, llm, retriever and other runs are counted as skipped. Traces are built when the input
ends (a child may come before its parent).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from seqjudge.ingest.base import (
    NO,
    YES,
    Options,
    Record,
    Source,
    decode_arguments,
    items_of,
    kind_of,
    validation_error,
)
from seqjudge.trace import Trace, parse_time

NAME = "langsmith"
SIGNATURE = "LangSmith runs: objects with 'run_type' and 'inputs' (tool runs are calls), nested or flat"


def _is_run(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("run_type"), str) and "inputs" in value


def sniff(record: Any, options: Options | None = None) -> int:
    items = record if isinstance(record, list) else [record]
    return YES if items and all(_is_run(i) for i in items) else NO


@dataclass
class _Trace:
    # (order, call, where it was read, its path): the place without the record's bytes
    calls: list[tuple[tuple[float, str], dict[str, Any], Record, str]] = field(default_factory=list)


def parse(records: Iterable[Record], source: Source, options: Options) -> Iterator[Trace]:
    traces: dict[str, _Trace] = {}
    for record in records:
        for path, run in items_of(record.value()):
            _walk(traces, record, path, run, None, options)
    for trace_id, entry in traces.items():
        yield _build(trace_id, entry)


def _walk(
    traces: dict[str, _Trace],
    record: Record,
    path: str,
    run: Any,
    root: str | None,
    options: Options,
) -> None:
    if not _is_run(run):
        raise record.error(
            f"this is {kind_of(run)}, not a LangSmith run",
            path or None,
            hint="A run has 'run_type', 'name', 'inputs' and times",
        )
    run_id = str(run.get("id") or path)
    # Exports give every run its trace_id; a nested run without one belongs to its root's trace.
    trace_id = str(run.get("trace_id") or root or run_id)
    entry = traces.setdefault(trace_id, _Trace())
    if run["run_type"] == "tool":
        entry.calls.append(_call(record, path, run))
    else:
        options.stats.skip(f"'{run['run_type']}' runs (not tool calls)")
    children = run.get("child_runs") or []
    if not isinstance(children, list):
        raise record.error(f"child_runs is {kind_of(children)}, not a list", f"{path}.child_runs".lstrip("."))
    for j, child in enumerate(children):
        _walk(traces, record, f"{path}.child_runs[{j}]".lstrip("."), child, trace_id, options)


def _call(
    record: Record, path: str, run: dict[str, Any]
) -> tuple[tuple[float, str], dict[str, Any], Record, str]:
    start = _time(record, path, run, "start_time")
    end = _time(record, path, run, "end_time")
    inputs = run.get("inputs")
    if isinstance(inputs, dict) and inputs.keys() == {"input"}:
        arguments, raw = decode_arguments(inputs["input"])
        if raw is not None:
            arguments, raw = {"input": raw}, None
    else:
        arguments, raw = decode_arguments(inputs)
    call: dict[str, Any] = {"tool_name": run.get("name"), "arguments": arguments, "id": str(run.get("id"))}
    if raw is not None:
        call["raw_arguments"] = raw
    if start is not None:
        call["timestamp"] = start
    if end is not None:
        call["end_timestamp"] = end
    outputs = run.get("outputs")
    if outputs is not None:
        call["output"] = outputs.get("output", outputs) if isinstance(outputs, dict) else outputs
    if run.get("error"):
        call["status"], call["error"] = "error", str(run["error"])
    elif end is None and outputs is None:
        call["status"], call["error"] = "error", "never answered: the tool run has no end time and no outputs"
        if start is not None:
            call["end_timestamp"] = start  # so the other calls' overlaps still make steps (see Trace.steps)
    order = (start if start is not None else float("inf"), str(run.get("dotted_order") or ""))
    return order, call, Record(record.source, record.line, b""), path


def _time(record: Record, path: str, run: dict[str, Any], key: str) -> float | None:
    value = run.get(key)
    if value in (None, ""):
        return None
    try:
        return parse_time(value)
    except ValueError as exc:
        raise record.error(
            f"{key} is {json.dumps(value)}: {exc}",
            f"{path}.{key}".lstrip("."),
            hint="LangSmith times are ISO 8601 text",
        ) from None


def _build(trace_id: str, entry: _Trace) -> Trace:
    entry.calls.sort(key=lambda c: c[0])
    data = {"trace_id": trace_id, "calls": [c for _, c, _, _ in entry.calls]}
    try:
        return Trace.model_validate(data)
    except ValidationError as exc:
        loc = tuple(exc.errors(include_url=False)[0].get("loc", ()))
        index = loc[1] if len(loc) >= 2 and isinstance(loc[1], int) else 0
        _, _, record, path = entry.calls[min(index, len(entry.calls) - 1)]
        raise validation_error(exc, record, path, drop=2) from None
