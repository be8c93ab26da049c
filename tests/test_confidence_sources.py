"""Issue 18 part 1, the other two sources: token log-probabilities (the real OpenAI SDK against the loopback
fake server) and agreement across K samples (the scripted provider)."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import pytest

from fakes.server import FakeLLMServer, openai_chat
from seqjudge.config import ModelOptions, RunConfig
from seqjudge.errors import InputError
from seqjudge.judge.confidence import combine_samples, decision_confidences, reordered
from seqjudge.judge.providers.scripted import ScriptedProvider
from seqjudge.runner import run_traces
from seqjudge.store import Store
from test_confidence import WITH_CONFIDENCE
from test_judge_harness import RULES, TRACE, VALID


def tokens_of(text: str, probs: dict[str, float]) -> list[tuple[str, float]]:
    """``text`` as tokens: each rule's decision value split in two tokens (the first carrying the rule's
    probability), everything else in 7-character tokens at probability 1."""
    out: list[tuple[str, float]] = []
    rest = text
    for rule, p in probs.items():
        marker = f'"rule_id": "{rule}", "decision": "'
        head, _, tail = rest.partition(marker)
        value = tail[:6]
        out += [(head + marker, 0.0), (value[:2], math.log(p)), (value[2:], 0.0)]
        rest = tail[6:]
    out += [(rest[i : i + 7], 0.0) for i in range(0, len(rest), 7)]
    return [(t, lp) for t, lp in out if t]


def test_decision_confidences_read_the_decision_tokens() -> None:
    text = json.dumps(WITH_CONFIDENCE)
    probs = {"read_first": 0.8, "one_refund": 0.6, "confirm": 0.95}
    got = decision_confidences(text, tokens_of(text, probs))
    assert got == pytest.approx(probs)
    # Tokens that do not spell the text give nothing, never a confidence read off the wrong tokens.
    assert decision_confidences(text, [("x", 0.0)]) == {}


def logprob_reply(text: str, probs: dict[str, float]) -> Any:
    reply = openai_chat(text)
    reply.body["choices"][0]["logprobs"] = {  # type: ignore[index]
        "content": [
            {"token": t, "logprob": lp, "bytes": list(t.encode()), "top_logprobs": []}
            for t, lp in tokens_of(text, probs)
        ],
        "refusal": None,
    }
    return reply


def run_cfg(tmp_path: Path, **kw: Any) -> RunConfig:
    return RunConfig(
        rules="rules.yaml", traces="traces.jsonl", store=str(tmp_path / "s.db"), cache=False, **kw
    )


def logprobs_run(tmp_path: Path, fake_llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch, reply: Any) -> Any:
    """One trace judged by the real OpenAI SDK against the fake server with --confidence logprobs."""
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    fake_llm.enqueue(reply)
    cfg = run_cfg(
        tmp_path,
        model="openai:gpt-4o",
        confidence="logprobs",
        model_options=ModelOptions(base_url=fake_llm.openai_base_url),
    )
    with Store(cfg.store) as db:
        summary = asyncio.run(run_traces(cfg, RULES, [TRACE], db))
        return db.result(summary.run_id, "t-1").result


def test_logprobs_through_the_real_openai_sdk(
    tmp_path: Path, fake_llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = json.dumps(WITH_CONFIDENCE)
    reply = logprob_reply(text, {"read_first": 0.9, "one_refund": 0.7, "confirm": 0.55})
    stored = logprobs_run(tmp_path, fake_llm, monkeypatch, reply)
    assert fake_llm.requests[0].body["logprobs"] is True
    got = {d.rule_id: d.confidence for d in stored.rules}
    # The stated confidences (0.97, 0.9, 0.62) are not used: the source is the tokens.
    assert got == pytest.approx({"read_first": 0.9, "one_refund": 0.7, "confirm": 0.55})
    assert stored.judge.confidence_source == "logprobs"


def test_logprobs_missing_from_the_reply_means_no_confidence(
    tmp_path: Path, fake_llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A compatible server that ignores the logprobs request: no confidence, never the stated one instead.
    stored = logprobs_run(tmp_path, fake_llm, monkeypatch, openai_chat(json.dumps(WITH_CONFIDENCE)))
    assert all(d.confidence is None for d in stored.rules)


def test_logprobs_on_a_provider_without_them_is_bad_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    cfg = run_cfg(tmp_path, model="anthropic:claude-x", confidence="logprobs")
    with Store(cfg.store) as db, pytest.raises(InputError) as err:
        asyncio.run(run_traces(cfg, RULES, [TRACE], db))
    assert "anthropic provider does not return" in str(err.value)


def with_decisions(failed: set[str], confidence: float = 0.5) -> dict[str, Any]:
    """VALID with ``confirm`` failed or passed, plus matching rule_decisions."""
    out = json.loads(json.dumps(VALID))
    if "confirm" not in failed:
        out["violations"] = [v for v in out["violations"] if v["rule_id"] != "confirm"]
        out["rules_passed"], out["rules_failed"] = 2, 1
    out["rule_decisions"] = [
        {
            "rule_id": r,
            "decision": "failed" if r in {"read_first", *failed} else "passed",
            "confidence": confidence,
        }
        for r in ("read_first", "one_refund", "confirm")
    ]
    return out


def test_samples_agreement_is_the_confidence(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        [with_decisions({"confirm"}), with_decisions(set()), with_decisions({"confirm"})]
    )
    cfg = run_cfg(tmp_path, confidence="samples", samples=3, concurrency=1)
    with Store(cfg.store) as db:
        summary = asyncio.run(run_traces(cfg, RULES, [TRACE], db, provider=provider))
        stored = db.result(summary.run_id, "t-1").result
    by_id = {d.rule_id: d for d in stored.rules}
    assert by_id["confirm"].judge == "failed" and by_id["confirm"].confidence == pytest.approx(2 / 3)
    assert by_id["read_first"].confidence == 1.0 and by_id["one_refund"].confidence == 1.0
    assert stored.judge.confidence_source == "samples" and len(stored.judge.attempts) == 3
    assert stored.judge.usage.input_tokens == sum(a.usage.input_tokens for a in stored.judge.attempts)
    # Every sample at the sampling temperature; the worked examples in another order after the first.
    assert {r.temperature for r in provider.requests} == {0.7}
    assert provider.requests[0].static_prompt != provider.requests[1].static_prompt


def test_an_unscored_sample_agrees_with_nothing() -> None:
    from seqjudge.judge.judge import JudgeResult

    async def judged(reply: Any) -> JudgeResult:
        from seqjudge.judge.judge import judge_trace

        return await judge_trace(TRACE, RULES, ScriptedProvider([reply]), max_attempts=1)

    ok = asyncio.run(judged(with_decisions(set())))
    bad = asyncio.run(judged("not json"))
    out = combine_samples([ok, bad])
    assert out.status == "scored" and out.confidence == {"read_first": 0.5, "one_refund": 0.5, "confirm": 0.5}
    assert combine_samples([bad, bad]).status == "unscored"


def test_reordered_examples_are_seeded_and_sample_zero_is_unchanged() -> None:
    from seqjudge.judge.prompt import load_examples

    shipped = load_examples()
    assert reordered(RULES, None, 0) == (RULES, None)
    _, one = reordered(RULES, None, 1)
    _, again = reordered(RULES, None, 1)
    assert one == again and sorted(map(str, one)) == sorted(map(str, shipped)) and len(shipped) > 1


@pytest.mark.parametrize(
    ("source", "samples", "words"), [("samples", 1, "at least 2"), ("stated", 3, "goes with")]
)
def test_confidence_options_must_fit_together(tmp_path: Path, source: str, samples: int, words: str) -> None:
    cfg = run_cfg(tmp_path, confidence=source, samples=samples)
    with Store(cfg.store) as db, pytest.raises(InputError) as err:
        asyncio.run(run_traces(cfg, RULES, [TRACE], db, provider=ScriptedProvider([])))
    assert words in str(err.value)
