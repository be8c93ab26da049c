"""The guard in LangChain v1 agents (extra ``langchain``): an ``AgentMiddleware`` whose ``wrap_tool_call``
asks the guard before each tool call and records each call that ran.

    guard = Guard.from_files("rules.yaml")
    agent = create_agent(model, tools=[lookup, delete_customer], middleware=[SeqjudgeMiddleware(guard)])
    agent.invoke({"messages": [...]}, config={"configurable": {"thread_id": "support-42"}})

Why ``wrap_tool_call`` of ``create_agent``'s middleware, not a LangGraph node or a ``before_model`` hook: it
runs around each single tool call (the model may ask for several in one turn), it can answer the call
itself without running the tool, and it sees the tool's result and whether it failed, so one hook both
decides and records. The same middleware serves ``invoke`` and ``ainvoke`` (``awrap_tool_call``).

A deny (or an ``ask``: the adapter has no person to ask) is answered with a ``ToolMessage`` of status
``error`` carrying the rule, its message and its suggestion: the tool does not run, the model reads why and
the agent goes on. Its ``artifact`` holds the decision (``{"seqjudge": {...}}``). In shadow mode every call
runs and every decision is recorded in the store with the session id.

Sessions: the LangGraph ``thread_id`` of the run's config by default (one conversation, one session), or
``session_id`` (a string, or a function of the ``ToolCallRequest``). A call with neither is refused with an
error rather than guarded on some other conversation's history.

History: a call that ran is recorded with status ``error`` when the tool raised (the exception goes on as
LangChain would raise it) or answered a ``ToolMessage`` of status ``error``, else ``ok``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any

from seqjudge.errors import GuardError
from seqjudge.guard.adapters._sessions import ContextOf, GuardedSessions, blocked_message

try:
    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.messages import ToolMessage
except ImportError as exc:  # pragma: no cover - the extra is installed wherever this module is used
    raise GuardError(
        "the LangChain adapter needs the `langchain` package: pip install 'seqjudge[langchain]'"
    ) from exc

if TYPE_CHECKING:
    from langgraph.prebuilt.tool_node import ToolCallRequest
    from langgraph.types import Command

    from seqjudge.guard import Decision, Guard, RuleDecision
    from seqjudge.guard.shadow import DecisionLog
    from seqjudge.store import Store

SessionOf = str | Callable[["ToolCallRequest"], str]


class SeqjudgeMiddleware(AgentMiddleware):  # type: ignore[type-arg]
    """The guard around each tool call of a ``create_agent`` agent (see the module's docs)."""

    def __init__(
        self,
        guard: Guard,
        *,
        session_id: SessionOf | None = None,
        shadow: bool = False,
        store: Store | None = None,
        log: DecisionLog | None = None,
        context: Mapping[str, Any] | ContextOf | None = None,
    ) -> None:
        super().__init__()
        if log is None and store is not None:
            from seqjudge.guard.shadow import DecisionLog

            log = DecisionLog(store, shadow=shadow)
        self.sessions = GuardedSessions(guard, shadow=shadow, log=log, context=context)
        self.session_id = session_id

    def _session_of(self, request: ToolCallRequest) -> str:
        found: Any
        if self.session_id is not None:
            found = self.session_id(request) if callable(self.session_id) else self.session_id
        else:
            config = getattr(request.runtime, "config", None) or {}
            found = (config.get("configurable") or {}).get("thread_id")
            if found is None:
                raise GuardError(
                    "the seqjudge guard cannot tell which session this tool call belongs to: run the agent "
                    "with config={'configurable': {'thread_id': ...}}, or give "
                    "SeqjudgeMiddleware(guard, session_id=...)"
                )
        if not isinstance(found, str) or not found:
            raise GuardError(f"the session id is {found!r}: a session id is a non-empty string")
        return found

    def _decide(self, request: ToolCallRequest) -> tuple[str, Decision]:
        call = request.tool_call
        session = self._session_of(request)
        return session, self.sessions.decide(
            session, call["name"], dict(call.get("args") or {}), call_id=call.get("id"), turn=_turn(request)
        )

    def _refusal(self, request: ToolCallRequest, decision: Decision) -> ToolMessage:
        call = request.tool_call
        return ToolMessage(
            content=blocked_message(decision),
            tool_call_id=call.get("id") or "",
            name=call["name"],
            status="error",
            artifact={
                "seqjudge": {
                    "action": decision.action,
                    "reason": decision.reason,
                    "degraded": decision.degraded,
                }
            },
        )

    def _ran(
        self, session: str, request: ToolCallRequest, result: Any, *, raised: BaseException | None = None
    ) -> None:
        call = request.tool_call
        failed = raised is not None or (isinstance(result, ToolMessage) and result.status == "error")
        output = str(raised) if raised is not None else getattr(result, "content", None)
        self.sessions.ran(
            session,
            call["name"],
            dict(call.get("args") or {}),
            status="error" if failed else "ok",
            output=output,
            call_id=call.get("id"),
            turn=_turn(request),
        )

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]]
    ) -> ToolMessage | Command[Any]:
        session, decision = self._decide(request)
        if self.sessions.blocks(decision):
            return self._refusal(request, decision)
        try:
            result = handler(request)
        except Exception as exc:
            self._ran(session, request, None, raised=exc)
            raise
        self._ran(session, request, result)
        return result

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        session, decision = self._decide(request)
        if self.sessions.blocks(decision):
            return self._refusal(request, decision)
        try:
            result = await handler(request)
        except Exception as exc:
            self._ran(session, request, None, raised=exc)
            raise
        self._ran(session, request, result)
        return result

    def finish(self, session_id: str) -> list[RuleDecision]:
        """The rules only the session's end decides; call it when the conversation is over."""
        return self.sessions.finish(session_id)


def _turn(request: ToolCallRequest) -> Hashable | None:
    """The model turn that asked for the call: the AI message holding its tool call (its id, else the ids
    of the calls it holds, as the importer groups them into one step); None when the state shows none."""
    call_id = request.tool_call.get("id")
    state = request.state
    messages = state.get("messages") if isinstance(state, Mapping) else getattr(state, "messages", None)
    for message in reversed(messages or []):
        calls = getattr(message, "tool_calls", None) or []
        ids = tuple(c.get("id") for c in calls)
        if call_id in ids:
            return ("message", message.id) if getattr(message, "id", None) else ("calls", ids)
    return None
