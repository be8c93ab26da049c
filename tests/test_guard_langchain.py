"""The guard as LangChain v1 middleware (``seqjudge.guard.adapters.langchain``), run by the real agent loop:
``create_agent`` with the tools and the middleware, and langchain_core's own fake chat model
(``GenericFakeChatModel``) scripted to call the tools; the tool node, the middleware chain and the graph are
LangChain's own."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain")

from langchain.agents import create_agent  # noqa: E402
from langchain.agents.middleware import AgentMiddleware  # noqa: E402
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import AIMessage, ToolMessage  # noqa: E402
from langchain_core.tools import ToolException, tool  # noqa: E402

from guard_support import ONE_DELETE, RULE_ID, Tools, write_rules  # noqa: E402
from seqjudge.errors import GuardError  # noqa: E402
from seqjudge.guard import Guard  # noqa: E402
from seqjudge.guard.adapters.langchain import SeqjudgeMiddleware  # noqa: E402
from seqjudge.store import Store  # noqa: E402

DELETE = ("delete_customer", {"customer_id": "c-7"}, "call_delete")
VERIFY = ("verify_identity", {"customer_id": "c-7"}, "call_verify")


class ToolCallingFake(GenericFakeChatModel):
    """The library's fake chat model; ``create_agent`` binds tools to its model, which the fake ignores."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ToolCallingFake:
        return self


def lc_tools(tools: Tools) -> list[Any]:
    @tool
    def verify_identity(customer_id: str) -> str:
        """Verify the customer's identity."""
        return tools.verify_identity(customer_id)

    @tool
    def delete_customer(customer_id: str) -> str:
        """Delete the customer's record."""
        return tools.delete_customer(customer_id)

    return [verify_identity, delete_customer]


def agent_for(middleware: SeqjudgeMiddleware, tools: Tools, *turns: tuple[str, dict, str]) -> Any:
    replies = [AIMessage(content="", tool_calls=[{"name": n, "args": a, "id": i}]) for n, a, i in turns]
    model = ToolCallingFake(messages=iter([*replies, AIMessage(content="done")]))
    return create_agent(model, tools=lc_tools(tools), middleware=[middleware])


def run(
    middleware: SeqjudgeMiddleware, tools: Tools, *turns: tuple[str, dict, str], thread: str = "t-1"
) -> dict:
    agent = agent_for(middleware, tools, *turns)
    return agent.invoke(
        {"messages": [{"role": "user", "content": "Delete customer c-7."}]},
        config={"configurable": {"thread_id": thread}},
    )


def tool_messages(state: dict) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in state["messages"] if isinstance(m, ToolMessage)}


@pytest.fixture
def guard(tmp_path: Path) -> Guard:
    return Guard.from_files(write_rules(tmp_path))


def test_a_delete_before_verify_is_answered_with_an_error_tool_message(guard: Guard) -> None:
    tools = Tools()
    state = run(SeqjudgeMiddleware(guard), tools, DELETE, VERIFY)
    assert tools.ran == ["verify_identity(c-7)"]  # the delete never ran; the agent went on
    told = tool_messages(state)
    assert told["call_delete"].status == "error" and RULE_ID in told["call_delete"].content
    assert told["call_delete"].artifact["seqjudge"]["action"] == "deny"
    assert told["call_verify"].status == "success"
    assert state["messages"][-1].content == "done"


def test_in_the_other_order_both_calls_run(guard: Guard) -> None:
    tools = Tools()
    state = run(SeqjudgeMiddleware(guard), tools, VERIFY, DELETE)
    assert tools.ran == ["verify_identity(c-7)", "delete_customer(c-7)"]
    assert tool_messages(state)["call_delete"].content == "customer c-7 deleted"


def test_the_async_agent_is_guarded_alike(guard: Guard) -> None:
    tools = Tools()
    agent = agent_for(SeqjudgeMiddleware(guard), tools, DELETE, VERIFY)
    state = asyncio.run(
        agent.ainvoke(
            {"messages": [{"role": "user", "content": "go"}]}, config={"configurable": {"thread_id": "a"}}
        )
    )
    assert tools.ran == ["verify_identity(c-7)"]
    assert RULE_ID in tool_messages(state)["call_delete"].content


def test_a_tool_that_raised_is_recorded_failed_and_satisfies_no_prerequisite(guard: Guard) -> None:
    tools = Tools(verify_fails=True)
    middleware = SeqjudgeMiddleware(guard)
    with pytest.raises(RuntimeError, match="identity service unavailable"):  # LangChain re-raises it
        run(middleware, tools, VERIFY)
    run(middleware, tools, DELETE)  # the same thread goes on
    assert tools.ran == ["verify_identity(c-7)"]


def test_sessions_are_the_threads(guard: Guard) -> None:
    tools = Tools()
    middleware = SeqjudgeMiddleware(guard)
    run(middleware, tools, VERIFY, thread="verified")
    run(middleware, tools, DELETE, thread="verified")
    run(middleware, tools, DELETE, thread="other")
    assert tools.ran == ["verify_identity(c-7)", "delete_customer(c-7)"]


def test_a_call_with_no_session_is_refused_not_guarded_on_another_history(guard: Guard) -> None:
    tools = Tools()
    agent = agent_for(SeqjudgeMiddleware(guard), tools, VERIFY)
    with pytest.raises(GuardError, match="thread_id"):
        agent.invoke({"messages": [{"role": "user", "content": "go"}]})
    assert tools.ran == []


def test_shadow_mode_records_the_deny_and_blocks_nothing(guard: Guard, tmp_path: Path) -> None:
    tools = Tools()
    with Store(tmp_path / "s.db") as store:
        state = run(SeqjudgeMiddleware(guard, shadow=True, store=store), tools, DELETE, VERIFY, thread="sh")
        stored = store.guard_decisions("sh")
    assert tools.ran == ["delete_customer(c-7)", "verify_identity(c-7)"]  # shadow never blocks
    assert tool_messages(state)["call_delete"].content == "customer c-7 deleted"
    assert [(d.tool, d.call_id, d.action, d.shadow) for d in stored] == [
        ("delete_customer", "call_delete", "deny", True),
        ("verify_identity", "call_verify", "allow", True),
    ]


def test_a_tool_that_answered_an_error_message_is_recorded_failed(guard: Guard) -> None:
    # handle_tool_error: LangChain turns the tool's ToolException into a ToolMessage of status error.
    ran: list[str] = []

    @tool
    def verify_identity(customer_id: str) -> str:
        """Verify the customer's identity."""
        ran.append("verify_identity")
        raise ToolException("no such customer")

    verify_identity.handle_tool_error = True

    @tool
    def delete_customer(customer_id: str) -> str:
        """Delete the customer's record."""
        ran.append("delete_customer")
        return "deleted"

    replies = [
        AIMessage(content="", tool_calls=[{"name": n, "args": a, "id": i}]) for n, a, i in (VERIFY, DELETE)
    ]
    model = ToolCallingFake(messages=iter([*replies, AIMessage(content="done")]))
    agent = create_agent(
        model, tools=[verify_identity, delete_customer], middleware=[SeqjudgeMiddleware(guard)]
    )
    state = agent.invoke(
        {"messages": [{"role": "user", "content": "go"}]}, config={"configurable": {"thread_id": "x"}}
    )
    told = tool_messages(state)
    assert told["call_verify"].status == "error" and ran == ["verify_identity"]
    assert RULE_ID in told["call_delete"].content


class VerifyFirst(AgentMiddleware):  # type: ignore[type-arg]
    """Outside the guard: holds the delete back until the verification has run and been recorded, so the
    delete is decided after it whatever order the tool node's threads take."""

    def __init__(self) -> None:
        super().__init__()
        self.verified = threading.Event()

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        if request.tool_call["name"] == "delete_customer":
            assert self.verified.wait(timeout=30), "the verification never ran"
            return handler(request)
        try:
            return handler(request)
        finally:
            self.verified.set()


def test_a_verification_in_the_same_turn_is_too_late_even_when_it_finished_first(guard: Guard) -> None:
    # One model turn asks for both: they run in parallel (the importer reads them as one step), so the
    # verification does not precede the delete, offline or in the guard.
    tools = Tools()
    both = AIMessage(content="", tool_calls=[{"name": n, "args": a, "id": i} for n, a, i in (VERIFY, DELETE)])
    model = ToolCallingFake(messages=iter([both, AIMessage(content="done")]))
    agent = create_agent(model, tools=lc_tools(tools), middleware=[VerifyFirst(), SeqjudgeMiddleware(guard)])
    state = agent.invoke(
        {"messages": [{"role": "user", "content": "go"}]}, config={"configurable": {"thread_id": "p"}}
    )
    assert tools.ran == ["verify_identity(c-7)"]
    assert RULE_ID in tool_messages(state)["call_delete"].content
    # A delete of the next turn comes after it.
    later = Tools()
    run(SeqjudgeMiddleware(guard), later, VERIFY, DELETE, thread="q")
    assert later.ran == ["verify_identity(c-7)", "delete_customer(c-7)"]


def test_a_refused_call_is_an_attempt_in_the_history(tmp_path: Path) -> None:
    # The refused delete is in the conversation as a failed call, so offline it is the first of two
    # deletion attempts: the guard counts it too, and refuses the second under the max_calls rule.
    guard = Guard.from_files(write_rules(tmp_path, ONE_DELETE))
    tools = Tools()
    again = ("delete_customer", {"customer_id": "c-7"}, "call_delete_again")
    state = run(SeqjudgeMiddleware(guard), tools, DELETE, VERIFY, again)
    assert tools.ran == ["verify_identity(c-7)"]
    told = tool_messages(state)
    assert RULE_ID in told["call_delete"].content
    assert (
        "one-delete" in told["call_delete_again"].content and RULE_ID not in told["call_delete_again"].content
    )
