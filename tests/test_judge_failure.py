"""A provider error that ends a judge call is an explicit return value (``JudgeFailure``) holding the
unscored result a run stores, not a result attached to the exception (issue 13, item 7)."""

from __future__ import annotations

import pytest

from seqjudge.errors import ProviderError
from seqjudge.judge.judge import JudgeFailure, JudgeResult, judge_trace, settle_trace
from seqjudge.judge.providers.scripted import ScriptedProvider
from seqjudge.rules.model import RuleSet
from seqjudge.trace import Trace

RULES = RuleSet.model_validate({"rules": [{"type": "require", "tool": "login"}]})
TRACE = Trace.model_validate({"trace_id": "t1", "calls": [{"tool_name": "login"}]})


def _provider() -> ScriptedProvider:
    # A malformed reply (re-asked), then the provider gives out.
    return ScriptedProvider(["not json", ProviderError("overloaded", kind="server", provider="scripted")])


async def test_settle_returns_the_failure_with_the_unscored_result() -> None:
    outcome = await settle_trace(TRACE, RULES, _provider(), max_attempts=3)
    assert isinstance(outcome, JudgeFailure)
    assert outcome.error.kind == "server" and len(outcome.error.attempts) == 1
    unscored = outcome.unscored
    assert isinstance(unscored, JudgeResult) and unscored.status == "unscored"
    assert unscored.reason is not None and "provider error (server)" in unscored.reason
    assert len(unscored.attempts) == 1 and unscored.attempts[0].error_stage == "parse"
    assert not hasattr(outcome.error, "unscored")  # nothing rides on the exception any more


async def test_judge_trace_still_raises_the_provider_error_with_its_attempts() -> None:
    with pytest.raises(ProviderError, match="overloaded") as info:
        await judge_trace(TRACE, RULES, _provider(), max_attempts=3)
    assert info.value.kind == "server" and len(info.value.attempts) == 1


async def test_a_valid_judgement_is_returned_as_the_result() -> None:
    reply = {
        "sequence_correctness_score": 1.0,
        "total_rules_checked": 1,
        "rules_passed": 1,
        "rules_failed": 0,
        "violations": [],
        "missing_prerequisites": [],
        "summary": "ok",
    }
    outcome = await settle_trace(TRACE, RULES, ScriptedProvider([reply]))
    assert isinstance(outcome, JudgeResult) and outcome.status == "scored"
