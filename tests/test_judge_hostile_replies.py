"""Issue 38: a judge reply that cannot be read - an integer too long for Python to convert (more than 4,300
digits), a body that is not UTF-8, JSON nested past the decoder's limit - is an invalid reply: re-asked, then
stored unscored. Never a crash that leaves the run interrupted. Real SDK clients against the loopback fake."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_suite import passing_reply, run_argv, trace, write_suite
from fakes.server import FakeLLMServer, FakeReply, anthropic_message, openai_chat
from seqjudge.cli import run
from seqjudge.store import Store

VALID = json.dumps(passing_reply())
HUGE = "1" + "0" * 5_000  # past sys.get_int_max_str_digits() (4,300): int("1000...") raises ValueError
# The reply text with the huge integer where the score goes, and where a count goes.
HUGE_SCORE = VALID.replace('"sequence_correctness_score": 1.0', f'"sequence_correctness_score": {HUGE}')
HUGE_COUNT = VALID.replace('"total_rules_checked": 1', f'"total_rules_checked": {HUGE}')
DEEP = '{"summary": ' + "[" * 5_000 + "]" * 5_000 + "}"


@pytest.fixture
def suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return write_suite(tmp_path, monkeypatch, [trace("t1")])


def stored(suite: Path) -> tuple[str, list[str | None], str]:
    with Store(suite / "s.db") as db:
        run_id = db.resolve_run("latest")
        stages = [a.error_stage for a in db.attempts(run_id, "t1")]
        (result,) = list(db.results(run_id))
        return db.run_info(run_id).status, stages, result.result.judge.status  # type: ignore[union-attr]


@pytest.mark.parametrize("bad", [HUGE_SCORE, HUGE_COUNT, DEEP], ids=["huge-score", "huge-count", "deep"])
def test_an_unreadable_reply_text_is_reasked(suite: Path, fake_llm: FakeLLMServer, bad: str, capsys) -> None:
    fake_llm.enqueue(openai_chat(bad), openai_chat(VALID))
    assert run(run_argv(fake_llm, "--no-cache")) == 0, capsys.readouterr()
    status, stages, judged = stored(suite)
    assert status == "completed" and stages == ["parse", None] and judged == "scored"
    reask = fake_llm.requests[1].body["messages"][-1]["content"]
    assert "not valid JSON" in reask


def test_unreadable_replies_every_time_leave_the_trace_unscored(
    suite: Path, fake_llm: FakeLLMServer, capsys
) -> None:
    fake_llm.enqueue(*(openai_chat(HUGE_SCORE) for _ in range(3)))
    code = run(run_argv(fake_llm, "--no-cache"))
    err = capsys.readouterr().err
    assert code == 1 and "internal error" not in err and "Traceback" not in err
    status, stages, judged = stored(suite)
    assert status == "completed" and stages == ["parse"] * 3 and judged == "unscored"


def test_a_huge_integer_in_the_response_body_is_a_malformed_reply(
    suite: Path, fake_llm: FakeLLMServer, capsys
) -> None:
    # Not in the model's text but in the HTTP body the SDK decodes (a usage count): the SDK's own decoding
    # fails; that is a malformed response from the provider, never a crash.
    body = openai_chat(VALID).body
    raw = json.dumps(body).replace('"prompt_tokens": 100', f'"prompt_tokens": {HUGE}').encode()
    fake_llm.enqueue(*(FakeReply(200, raw, {"content-type": "application/json"}) for _ in range(4)))
    code = run(run_argv(fake_llm, "--no-cache"))
    err = capsys.readouterr().err
    assert code == 1 and "internal error" not in err and "Traceback" not in err, err
    status, _, judged = stored(suite)
    assert status == "completed" and judged == "unscored"
    with Store(suite / "s.db") as db:
        (result,) = list(db.results(db.resolve_run("latest")))
        reason = result.result.judge.reason  # type: ignore[union-attr]
        assert reason is not None and "integer too long to read" in reason


@pytest.mark.parametrize("model", ["openai:gpt-4o", "anthropic:claude-sonnet-4-5"])
def test_a_body_that_is_not_utf8_is_an_invalid_reply(
    suite: Path, fake_llm: FakeLLMServer, model: str, capsys
) -> None:
    good = openai_chat(VALID) if model.startswith("openai") else anthropic_message(VALID)
    bad = json.dumps(good.body).encode().replace(b"fine", b"fi\xff\xfene")  # inside the model's text
    assert b"\xff" in bad
    fake_llm.enqueue(FakeReply(200, bad, {"content-type": "application/json"}), good)
    code = run(run_argv(fake_llm, "--no-cache", model=model))
    err = capsys.readouterr().err
    assert code == 0 and "internal error" not in err and "Traceback" not in err, err
    status, stages, judged = stored(suite)
    assert status == "completed" and stages == ["parse", None] and judged == "scored"
    reask = json.dumps(fake_llm.requests[1].body)
    assert "not UTF-8" in reask


@pytest.mark.parametrize("model", ["openai:gpt-4o", "anthropic:claude-sonnet-4-5"])
def test_a_body_not_utf8_every_time_leaves_the_trace_unscored(
    suite: Path, fake_llm: FakeLLMServer, model: str, capsys
) -> None:
    good = openai_chat(VALID) if model.startswith("openai") else anthropic_message(VALID)
    bad = json.dumps(good.body).encode().replace(b"fine", b"fi\xffne")
    fake_llm.enqueue(*(FakeReply(200, bad, {"content-type": "application/json"}) for _ in range(3)))
    assert run(run_argv(fake_llm, "--no-cache", model=model)) == 1
    status, stages, judged = stored(suite)
    assert status == "completed" and stages == ["parse"] * 3 and judged == "unscored"


async def test_strict_response_validation_reads_a_huge_integer_as_a_malformed_body(
    fake_llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With strict_response_validation the SDK parses the body itself: its ValueError is the same malformed
    # reply (a ProviderError the run stores unscored), not an exception that ends the run.
    from seqjudge.errors import ProviderError
    from seqjudge.judge.providers.base import JudgeRequest
    from seqjudge.judge.providers.registry import get_provider

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-suite-0000")
    raw = json.dumps(openai_chat(VALID).body).replace('"prompt_tokens": 100', f'"prompt_tokens": {HUGE}')
    fake_llm.enqueue(FakeReply(200, raw.encode(), {"content-type": "application/json"}))
    provider = get_provider(
        "openai:gpt-4o", base_url=fake_llm.openai_base_url, strict_response_validation=True, max_retries=0
    )
    request = JudgeRequest(
        system="s", static_prompt="a", dynamic_prompt="b", schema={"type": "object"}, schema_name="judgement"
    )
    try:
        with pytest.raises(ProviderError, match="integer too long to read") as info:
            await provider.complete(request)
    finally:
        await provider.aclose()  # type: ignore[attr-defined]
    assert info.value.kind == "server"
