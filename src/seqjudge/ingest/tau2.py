"""tau2-bench results: ``{"info", "tasks", "simulations": [...]}`` as ``tau2 run`` saves them, or the
simulation runs themselves (one object, a list, or JSONL of them).

One trace per simulation run, its id the run's ``id``. Its ``messages`` are tau2's own: an ``assistant``
message's ``tool_calls`` are ``{id, name, arguments}`` (arguments an object), issued together and so one step;
a ``tool`` message answers one by ``id`` and failed when ``error`` is true. Calls whose ``requestor`` is
``user`` are the simulated user's own tools (the telecom domain's phone), not the agent's: they and their
results are counted as skipped. ``task_id``, ``trial``, ``termination_reason`` and the reward go to metadata.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from seqjudge.ingest.base import (
    NO,
    YES,
    Options,
    Record,
    Source,
    TraceBuilder,
    at,
    decode_arguments,
    kind_of,
    plain_content,
    require_calls,
)
from seqjudge.trace import Trace

NAME = "tau2"
SIGNATURE = "tau2-bench results: 'simulations' whose messages carry tool_calls {id, name, arguments}"
_USER_TOOLS = "tool calls and results of the simulated user (requestor 'user')"


def _is_run(value: Any) -> bool:
    if not isinstance(value, dict) or not isinstance(value.get("messages"), list):
        return False
    if "task_id" in value and "termination_reason" in value:
        return True
    return any(isinstance(m, dict) and "requestor" in m for m in value["messages"])


def _runs(value: Any) -> list[tuple[str, Any]] | None:
    """The simulation runs a record holds, with their JSON paths; None when it holds none."""
    if isinstance(value, dict) and isinstance(value.get("simulations"), list):
        return [(f"simulations[{i}]", run) for i, run in enumerate(value["simulations"])]
    if _is_run(value):
        return [("", value)]
    if isinstance(value, list) and value and all(_is_run(v) for v in value):
        return [(f"[{i}]", run) for i, run in enumerate(value)]
    return None


def sniff(record: Any, options: Options | None = None) -> int:
    return YES if _runs(record) is not None else NO


def parse(records: Iterable[Record], source: Source, options: Options) -> Iterator[Trace]:
    for record in records:
        runs = _runs(record.value())
        if runs is None:
            raise record.error(
                f"this is {kind_of(record.value())}, not tau2-bench results",
                hint="tau2-bench results have 'simulations', each with 'messages'",
            )
        for path, run in runs:
            yield _trace(record, path, run, options)


def _trace(record: Record, prefix: str, run: Any, options: Options) -> Trace:
    if not isinstance(run, dict) or not isinstance(run.get("messages"), list):
        raise record.error(
            f"this simulation run is {kind_of(run)}, without a 'messages' list",
            prefix or None,
            hint="Each tau2-bench simulation run has 'messages'",
        )
    b = TraceBuilder(record, prefix, options)
    user_calls: set[str] = set()
    for i, message in enumerate(run["messages"]):
        path = f"messages[{i}]"
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise record.error(
                f"this message is {kind_of(message)}, with no role",
                at(prefix, path),
                hint="tau2 messages have a role",
            )
        role = message["role"]
        if role == "tool":
            call_id = str(message.get("id"))
            if message.get("requestor") == "user" or call_id in user_calls:
                options.stats.skip(_USER_TOOLS)
                continue
            failed = bool(message.get("error"))
            b.add_result(message.get("id"), message.get("content"), f"{path}.id", is_error=failed)
            continue
        if role == "system":
            options.stats.skip("system messages (instructions, not conversation)")
            continue
        b.add_message(role, plain_content(message.get("content")))
        calls = message.get("tool_calls") or []
        if not isinstance(calls, list):
            raise record.error(
                f"tool_calls is {kind_of(calls)}, not a list", at(prefix, path) + ".tool_calls"
            )
        step = None
        for j, call in enumerate(calls):
            call_path = f"{path}.tool_calls[{j}]"
            if not isinstance(call, dict):
                raise record.error(f"this tool call is {kind_of(call)}", at(prefix, call_path))
            if role == "user" or call.get("requestor") == "user":
                user_calls.add(str(call.get("id")))
                options.stats.skip(_USER_TOOLS)
                continue
            if step is None:
                step = b.new_step()
            arguments, raw = decode_arguments(call.get("arguments"))
            b.add_call(call.get("name"), arguments, call.get("id"), call_path, step=step, raw_arguments=raw)
    metadata = {k: run[k] for k in ("task_id", "trial", "termination_reason") if run.get(k) is not None}
    reward = run.get("reward_info")
    if isinstance(reward, dict) and reward.get("reward") is not None:
        metadata["reward"] = reward["reward"]
    default = record.default_id() + (f".{prefix}" if prefix else "")
    trace = b.build(run.get("id") or default, metadata)
    agent = [m for m in run["messages"] if isinstance(m, dict) and m.get("role") == "assistant"]
    return require_calls(trace, agent, record, prefix, options)
