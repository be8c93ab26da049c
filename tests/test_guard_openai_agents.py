"""The guard as OpenAI Agents SDK tool guardrails (``seqjudge.guard.adapters.openai_agents``), run by the real
SDK: a real ``Agent`` and ``Runner.run`` whose model is the SDK's own Chat Completions model on the real
``AsyncOpenAI`` client, pointed at a loopback fake server that scripts the model's tool calls."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

agents = pytest.importorskip("agents")

from agents import (  # noqa: E402
    Agent,
    OpenAIChatCompletionsModel,
    RunConfig,
    Runner,
    ToolGuardrailFunctionOutput,
    function_tool,
    tool_input_guardrail,
    tool_output_guardrail,
)
from agents.exceptions import ToolInputGuardrailTripwireTriggered  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402

from fakes.server import FakeLLMServer, openai_chat, openai_tool_calls  # noqa: E402
from guard_support import ONE_DELETE, RULE_ID, Tools, write_rules  # noqa: E402
from seqjudge.guard import Guard  # noqa: E402
from seqjudge.guard.adapters.openai_agents import SeqjudgeGuardrails  # noqa: E402
from seqjudge.store import Store  # noqa: E402

DELETE = ("delete_customer", {"customer_id": "c-7"}, "call_delete")
VERIFY = ("verify_identity", {"customer_id": "c-7"}, "call_verify")


def sdk_tools(tools: Tools) -> list[Any]:
    @function_tool
    def verify_identity(customer_id: str) -> str:
        """Verify the customer's identity."""
        return tools.verify_identity(customer_id)

    @function_tool
    def delete_customer(customer_id: str) -> str:
        """Delete the customer's record."""
        return tools.delete_customer(customer_id)

    return [verify_identity, delete_customer]


def run_agent(
    server: FakeLLMServer, rails: SeqjudgeGuardrails, tools: Tools, *turns: tuple[str, dict, str]
) -> Any:
    """One agent run whose model asks for ``turns`` (a tool call a turn), then answers "done"."""
    server.enqueue(*(openai_tool_calls(t) for t in turns), openai_chat("done"))
    model = OpenAIChatCompletionsModel(
        model="gpt-4o",
        openai_client=AsyncOpenAI(api_key="test", base_url=server.openai_base_url, max_retries=0),
    )
    agent = Agent(name="support", instructions="Help.", model=model, tools=rails.protect(*sdk_tools(tools)))
    # Tracing off: the SDK would otherwise export spans to OpenAI's servers.
    return asyncio.run(Runner.run(agent, "Delete customer c-7.", run_config=RunConfig(tracing_disabled=True)))


def tool_outputs(server: FakeLLMServer) -> dict[str, str]:
    """What the model was told each tool call returned, by call id (from the requests it was sent)."""
    out: dict[str, str] = {}
    for request in server.requests:
        for message in request.body.get("messages", []):
            if message.get("role") == "tool":
                out[message["tool_call_id"]] = message["content"]
    return out


@pytest.fixture
def guard(tmp_path: Path) -> Guard:
    return Guard.from_files(write_rules(tmp_path))


def test_a_delete_before_verify_is_rejected_and_its_body_never_runs(
    fake_llm: FakeLLMServer, guard: Guard
) -> None:
    tools = Tools()
    rails = SeqjudgeGuardrails(guard, session_id="s-1")
    result = run_agent(fake_llm, rails, tools, DELETE, VERIFY)
    assert tools.ran == ["verify_identity(c-7)"]  # the delete's body never ran; the run went on
    assert result.final_output == "done"
    told = tool_outputs(fake_llm)
    assert RULE_ID in told["call_delete"] and "denied" in told["call_delete"]  # the model sees why
    assert told["call_verify"] == "identity of c-7 verified"
    (first, second) = result.tool_input_guardrail_results
    assert first.output.behavior["type"] == "reject_content" and first.output.output_info["action"] == "deny"
    assert second.output.behavior["type"] == "allow"


def test_in_the_other_order_both_calls_run(fake_llm: FakeLLMServer, guard: Guard) -> None:
    tools = Tools()
    rails = SeqjudgeGuardrails(guard, session_id="s-2")
    result = run_agent(fake_llm, rails, tools, VERIFY, DELETE)
    assert tools.ran == ["verify_identity(c-7)", "delete_customer(c-7)"]
    assert tool_outputs(fake_llm)["call_delete"] == "customer c-7 deleted"
    assert [r.output.behavior["type"] for r in result.tool_input_guardrail_results] == ["allow", "allow"]


def test_a_verification_that_failed_does_not_let_the_delete_through(
    fake_llm: FakeLLMServer, guard: Guard
) -> None:
    # The output guardrail alone cannot see that a tool raised (the SDK hands it the error text): protect()
    # marks the failed call, so it is recorded as failed and satisfies no prerequisite.
    tools = Tools(verify_fails=True)
    rails = SeqjudgeGuardrails(guard, session_id="s-3")
    run_agent(fake_llm, rails, tools, VERIFY, DELETE)
    assert tools.ran == ["verify_identity(c-7)"]
    told = tool_outputs(fake_llm)
    assert told["call_verify"] == "An error occurred while running the tool."  # the SDK's own message kept
    assert RULE_ID in told["call_delete"]


def test_history_is_kept_per_session_across_runs(fake_llm: FakeLLMServer, guard: Guard) -> None:
    tools = Tools()
    rails = SeqjudgeGuardrails(guard, session_id=lambda ctx: ctx.context["session"])

    def run(session: str, *turns: tuple[str, dict, str]) -> None:
        fake_llm.enqueue(*(openai_tool_calls(t) for t in turns), openai_chat("done"))
        model = OpenAIChatCompletionsModel(
            model="gpt-4o", openai_client=AsyncOpenAI(api_key="test", base_url=fake_llm.openai_base_url)
        )
        agent = Agent(name="support", model=model, tools=rails.protect(*sdk_tools(tools)))
        asyncio.run(
            Runner.run(agent, "go", context={"session": session}, run_config=RunConfig(tracing_disabled=True))
        )

    run("a", VERIFY)  # session a verified in its first run...
    run("a", DELETE)  # ...so its delete in a later run is allowed
    run("b", DELETE)  # session b never verified
    assert tools.ran == ["verify_identity(c-7)", "delete_customer(c-7)"]


def test_on_deny_raise_halts_the_run(fake_llm: FakeLLMServer, guard: Guard) -> None:
    tools = Tools()
    rails = SeqjudgeGuardrails(guard, session_id="s-4", on_deny="raise")
    with pytest.raises(ToolInputGuardrailTripwireTriggered) as caught:
        run_agent(fake_llm, rails, tools, DELETE)
    assert tools.ran == []
    assert caught.value.output.output_info["action"] == "deny"


def test_shadow_mode_records_the_deny_and_blocks_nothing(
    fake_llm: FakeLLMServer, guard: Guard, tmp_path: Path
) -> None:
    tools = Tools()
    with Store(tmp_path / "s.db") as store:
        rails = SeqjudgeGuardrails(guard, session_id="s-5", shadow=True, store=store)
        result = run_agent(fake_llm, rails, tools, DELETE, VERIFY)
        stored = store.guard_decisions("s-5")
    assert tools.ran == ["delete_customer(c-7)", "verify_identity(c-7)"]  # shadow never blocks
    assert all(r.output.behavior["type"] == "allow" for r in result.tool_input_guardrail_results)
    assert [(d.tool, d.call_id, d.action, d.shadow) for d in stored] == [
        ("delete_customer", "call_delete", "deny", True),
        ("verify_identity", "call_verify", "allow", True),
    ]
    assert stored[0].denied_rules == [RULE_ID]


def test_shadow_mode_without_a_store_is_refused(guard: Guard) -> None:
    with pytest.raises(ValueError, match="give it a store"):
        SeqjudgeGuardrails(guard, session_id="s", shadow=True)


def test_requests_reached_only_the_loopback_server(fake_llm: FakeLLMServer, guard: Guard) -> None:
    run_agent(fake_llm, SeqjudgeGuardrails(guard, session_id="s-6"), Tools(), VERIFY)
    assert fake_llm.paths() == ["/v1/chat/completions", "/v1/chat/completions"]
    assert json.loads(json.dumps(fake_llm.requests[0].body))["model"] == "gpt-4o"


def test_a_verification_that_timed_out_does_not_let_the_delete_through(
    fake_llm: FakeLLMServer, guard: Guard
) -> None:
    # The SDK answers a timed-out call with its timeout message as the output (no exception, no failure
    # formatter): the adapter knows the tool's timeout and records the call failed.
    ran: list[str] = []

    @function_tool(timeout=0.05)
    async def verify_identity(customer_id: str) -> str:
        """Verify the customer's identity."""
        ran.append("verify_identity")
        await asyncio.Event().wait()  # never answers
        return "verified"

    @function_tool
    def delete_customer(customer_id: str) -> str:
        """Delete the customer's record."""
        ran.append("delete_customer")
        return "deleted"

    fake_llm.enqueue(openai_tool_calls(VERIFY), openai_tool_calls(DELETE), openai_chat("done"))
    rails = SeqjudgeGuardrails(guard, session_id="s-7")
    model = OpenAIChatCompletionsModel(
        model="gpt-4o", openai_client=AsyncOpenAI(api_key="test", base_url=fake_llm.openai_base_url)
    )
    agent = Agent(name="support", model=model, tools=rails.protect(verify_identity, delete_customer))
    asyncio.run(Runner.run(agent, "go", run_config=RunConfig(tracing_disabled=True)))
    told = tool_outputs(fake_llm)
    assert "timed out" in told["call_verify"] and ran == ["verify_identity"]
    assert RULE_ID in told["call_delete"]


def test_a_verification_in_the_same_turn_is_too_late_even_when_it_finished_first(
    fake_llm: FakeLLMServer, guard: Guard
) -> None:
    # One model response asks for both: the SDK runs them at once (the importer reads them as one step), so
    # the verification does not precede the delete. A gate before the guard on the delete holds it back
    # until the verification has run and been recorded, whatever order the SDK's tasks take.
    tools = Tools()
    verify_identity, delete_customer = sdk_tools(tools)
    recorded = asyncio.Event()

    @tool_input_guardrail
    async def after_verification(data: Any) -> ToolGuardrailFunctionOutput:
        await asyncio.wait_for(recorded.wait(), timeout=30)
        return ToolGuardrailFunctionOutput.allow()

    @tool_output_guardrail
    def verification_recorded(data: Any) -> ToolGuardrailFunctionOutput:
        recorded.set()
        return ToolGuardrailFunctionOutput.allow()

    delete_customer.tool_input_guardrails = [after_verification]  # before the guard's, which protect appends
    rails = SeqjudgeGuardrails(guard, session_id="s-8")
    rails.protect(verify_identity, delete_customer)
    verify_identity.tool_output_guardrails.append(verification_recorded)  # after the guard's recording
    fake_llm.enqueue(openai_tool_calls(VERIFY, DELETE), openai_chat("done"))
    model = OpenAIChatCompletionsModel(
        model="gpt-4o", openai_client=AsyncOpenAI(api_key="test", base_url=fake_llm.openai_base_url)
    )
    agent = Agent(name="support", model=model, tools=[verify_identity, delete_customer])
    asyncio.run(Runner.run(agent, "go", run_config=RunConfig(tracing_disabled=True)))
    assert tools.ran == ["verify_identity(c-7)"]
    assert RULE_ID in tool_outputs(fake_llm)["call_delete"]


def test_a_refused_call_is_an_attempt_in_the_history(fake_llm: FakeLLMServer, tmp_path: Path) -> None:
    # The model asked for the refused delete and was answered: a failed attempt, which max_calls counts.
    guard = Guard.from_files(write_rules(tmp_path, ONE_DELETE))
    tools = Tools()
    again = ("delete_customer", {"customer_id": "c-7"}, "call_delete_again")
    run_agent(fake_llm, SeqjudgeGuardrails(guard, session_id="s-9"), tools, DELETE, VERIFY, again)
    assert tools.ran == ["verify_identity(c-7)"]
    told = tool_outputs(fake_llm)
    assert RULE_ID in told["call_delete"]
    assert "one-delete" in told["call_delete_again"] and RULE_ID not in told["call_delete_again"]
