"""The guard in the OpenAI Agents SDK (extra ``openai-agents``): a tool input guardrail that asks the guard
before each function tool runs, and a tool output guardrail that records each call that ran.

    rails = SeqjudgeGuardrails(Guard.from_files("rules.yaml"), session_id="support-42")
    agent = Agent(name="support", tools=rails.protect(verify_identity, delete_customer))
    await Runner.run(agent, "...")

A deny is ``reject_content`` by default: the tool body does not run, the model gets the rule, its message and
its suggestion as the tool's result, and the run goes on (``on_deny="raise"`` halts the run with the SDK's
``ToolInputGuardrailTripwireTriggered`` instead). An ``ask`` is handled as a deny (the model is told the call
needs approval): the SDK's own approval flow is ``needs_approval`` on the tool. In shadow mode every call runs
and every decision is recorded in the store with the session id.

History. The SDK gives a guardrail the proposed call, not the run's past calls, so the adapter keeps its
own record per session: the output guardrail records each call whose body ran. Whether the body failed is
not in what the output guardrail is given, so ``protect`` also wraps each tool's failure formatter
(``failure_error_function``; the SDK's default message is kept) to mark the call failed: a failed call must
not satisfy a rule's prerequisite. A default timeout message marks it failed too. Tools given the guardrails
by hand (``tool_input_guardrails=[rails.input]``, ``tool_output_guardrails=[rails.output]``) also need
``failure_error_function=rails.on_error``, or a failure is recorded as ok.

Sessions. ``session_id`` is one id (one adapter per agent session), or a function of the SDK's
``ToolContext`` (its ``.context`` is the run context the application passed to ``Runner.run``), so one
adapter can guard many sessions.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from seqjudge.errors import GuardError
from seqjudge.guard.adapters._sessions import ContextOf, GuardedSessions, blocked_message

if TYPE_CHECKING:
    from agents import FunctionTool, ToolContext, ToolGuardrailFunctionOutput
    from agents.tool_guardrails import ToolInputGuardrailData, ToolOutputGuardrailData

    from seqjudge.guard import Decision, Guard, RuleDecision
    from seqjudge.guard.shadow import DecisionLog
    from seqjudge.store import Store

SessionOf = str | Callable[["ToolContext[Any]"], str]
ON_DENY = ("reject", "raise")


def _sdk() -> Any:
    try:
        import agents
    except ImportError as exc:
        raise GuardError(
            "the OpenAI Agents SDK adapter needs the `openai-agents` package: "
            "pip install 'seqjudge[openai-agents]'"
        ) from exc
    return agents


class SeqjudgeGuardrails:
    """The guard as an OpenAI Agents SDK tool input guardrail (``.input``) and the recorder of the calls that
    ran (``.output``); ``protect(*tools)`` attaches both to function tools."""

    def __init__(
        self,
        guard: Guard,
        *,
        session_id: SessionOf,
        on_deny: Literal["reject", "raise"] = "reject",
        shadow: bool = False,
        store: Store | None = None,
        log: DecisionLog | None = None,
        context: Mapping[str, Any] | ContextOf | None = None,
    ) -> None:
        if on_deny not in ON_DENY:
            raise GuardError(f"on_deny is one of {', '.join(ON_DENY)}, not {on_deny!r}")
        agents = _sdk()
        if log is None and store is not None:
            from seqjudge.guard.shadow import DecisionLog

            log = DecisionLog(store, shadow=shadow)
        self.sessions = GuardedSessions(guard, shadow=shadow, log=log, context=context)
        self.session_id = session_id
        self.on_deny = on_deny
        self.input = agents.ToolInputGuardrail(guardrail_function=self._before, name="seqjudge_guard")
        self.output = agents.ToolOutputGuardrail(guardrail_function=self._after, name="seqjudge_record")
        self._timeouts: dict[str, float] = {}  # tool name -> its timeout, to tell a timed-out call
        self._failed: set[str] = set()  # call ids whose body raised (marked by on_error)

    # -- the guardrails ------------------------------------------------------------------------------------
    def _session_of(self, context: ToolContext[Any]) -> str:
        found = self.session_id(context) if callable(self.session_id) else self.session_id
        if not isinstance(found, str) or not found:
            raise GuardError(f"session_id gave {found!r}: a session id is a non-empty string")
        return found

    def _before(self, data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        agents = _sdk()
        ctx = data.context
        decision = self.sessions.decide(
            self._session_of(ctx),
            ctx.tool_name,
            _arguments(ctx.tool_arguments),
            call_id=ctx.tool_call_id,
            turn=_Turn.of(ctx),
        )
        info = _info(decision, shadow=self.sessions.shadow)
        if not self.sessions.blocks(decision):
            return agents.ToolGuardrailFunctionOutput.allow(output_info=info)
        if self.on_deny == "raise":
            return agents.ToolGuardrailFunctionOutput.raise_exception(output_info=info)
        return agents.ToolGuardrailFunctionOutput.reject_content(blocked_message(decision), output_info=info)

    def _after(self, data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        ctx = data.context
        failed = ctx.tool_call_id in self._failed or self._timed_out(ctx.tool_name, data.output)
        self._failed.discard(ctx.tool_call_id)
        self.sessions.ran(
            self._session_of(ctx),
            ctx.tool_name,
            _arguments(ctx.tool_arguments),
            status="error" if failed else "ok",
            output=data.output,
            call_id=ctx.tool_call_id,
            turn=_Turn.of(ctx),
        )
        return _sdk().ToolGuardrailFunctionOutput.allow()

    def _timed_out(self, tool: str, output: Any) -> bool:
        seconds = self._timeouts.get(tool)
        if seconds is None:
            return False
        from agents.tool import default_tool_timeout_error_message

        return output == default_tool_timeout_error_message(tool_name=tool, timeout_seconds=seconds)

    def on_error(self, context: Any, error: Exception) -> str:
        """A ``failure_error_function`` that marks the call failed and answers the SDK's default message."""
        return self._on_error(context, error, None)

    def _on_error(self, context: Any, error: Exception, previous: Callable[..., Any] | None) -> Any:
        call_id = getattr(context, "tool_call_id", None)
        if isinstance(call_id, str):
            self._failed.add(call_id)
        if previous is None:
            from agents.tool import default_tool_error_function

            return default_tool_error_function(context, error)
        return previous(context, error)

    # -- attaching them ------------------------------------------------------------------------------------
    def protect(self, *tools: FunctionTool) -> list[FunctionTool]:
        """Give each function tool the guardrails and a failure formatter that marks failed calls (the one
        it had still answers); the same tools, as a list for ``Agent(tools=...)``."""
        agents = _sdk()
        from agents.tool import (
            resolve_function_tool_failure_error_function,
            set_function_tool_failure_error_function,
        )

        for tool in tools:
            if not isinstance(tool, agents.FunctionTool):
                raise GuardError(
                    f"{tool!r} is not a function tool: the SDK runs tool guardrails on function tools only"
                )
            if self.input in (tool.tool_input_guardrails or []):
                continue  # protected already
            tool.tool_input_guardrails = [*(tool.tool_input_guardrails or []), self.input]
            tool.tool_output_guardrails = [*(tool.tool_output_guardrails or []), self.output]
            previous = resolve_function_tool_failure_error_function(tool)
            if previous is None:
                # The tool re-raises its errors (failure_error_function=None): mark the call, then re-raise.
                set_function_tool_failure_error_function(tool, _reraise(self))
            else:
                set_function_tool_failure_error_function(tool, _marking(self, previous))
            if tool.timeout_seconds is not None:
                self._timeouts[tool.name] = tool.timeout_seconds
        return list(tools)

    def finish(self, session_id: str) -> list[RuleDecision]:
        """The rules only the session's end decides; call it when the agent session is over."""
        return self.sessions.finish(session_id)


def _marking(rails: SeqjudgeGuardrails, previous: Callable[..., Any]) -> Callable[[Any, Exception], Any]:
    def on_error(context: Any, error: Exception) -> Any:
        return rails._on_error(context, error, previous)

    return on_error


def _reraise(rails: SeqjudgeGuardrails) -> Callable[[Any, Exception], str]:
    def on_error(context: Any, error: Exception) -> str:
        call_id = getattr(context, "tool_call_id", None)
        session = rails._session_of(context)
        rails.sessions.ran(
            session,
            str(getattr(context, "tool_name", "")),
            _arguments(getattr(context, "tool_arguments", "")),
            status="error",
            output=str(error),
            call_id=call_id if isinstance(call_id, str) else None,
        )
        raise error

    return on_error


class _Turn:
    """The model turn that asked for a call: the run's usage record (shared by every tool context of a run)
    and the number of model requests it counts, which grows by one per model response and not while the
    turn's tools run. Held, not just its id, so no later run's record can take its identity."""

    __slots__ = ("requests", "usage")

    def __init__(self, usage: object, requests: int) -> None:
        self.usage = usage
        self.requests = requests

    @classmethod
    def of(cls, context: Any) -> _Turn | None:
        usage = getattr(context, "usage", None)
        requests = getattr(usage, "requests", None)
        return None if usage is None or not isinstance(requests, int) else cls(usage, requests)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Turn) and other.usage is self.usage and other.requests == self.requests

    def __hash__(self) -> int:
        return hash((id(self.usage), self.requests))


def _arguments(text: str) -> dict[str, Any]:
    """The call's JSON arguments; ``{}`` when they are not a JSON object (the SDK then refuses the call
    itself, so its body never runs)."""
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _info(decision: Decision, *, shadow: bool) -> dict[str, Any]:
    """What the guardrail result carries (``result.tool_input_guardrail_results[i].output.output_info``)."""
    return {
        "action": decision.action,
        "shadow": shadow,
        "reason": decision.reason,
        "degraded": decision.degraded,
        "rules": [
            {"rule_id": r.rule_id, "outcome": r.outcome} for r in decision.rules if r.outcome != "allow"
        ],
    }
