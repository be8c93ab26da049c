"""`seqjudge prompt` and `seqjudge judge` through ``seqjudge.cli.run``, with the loopback fake server standing
in for OpenAI (via --base-url) and the real SDK client in between."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fakes.server import FakeLLMServer, openai_chat, openai_error
from seqjudge.cli import run
from seqjudge.judge.prompt import render
from seqjudge.rules.catalog import load_catalog
from seqjudge.rules.load import load_rules
from seqjudge.trace import Trace

RULES_YAML = """
rules:
  - {id: verify_first, type: before, first: VerifyIdentity, then: DeleteCustomer}
  - {id: one_email, type: max_calls, tool: SendEmail, max: 1, severity: warning}
"""
GOOD_TRACE = {
    "trace_id": "good",
    "calls": [
        {"tool_name": "VerifyIdentity", "arguments": {"id": "C-1"}},
        {"tool_name": "DeleteCustomer", "arguments": {"id": "C-1"}},
        {"tool_name": "SendEmail", "arguments": {"to": "c1@example.com"}},
    ],
}
BAD_TRACE = {
    "trace_id": "bad",
    "calls": [
        {"tool_name": "DeleteCustomer", "arguments": {"id": "C-2"}},
        {"tool_name": "VerifyIdentity", "arguments": {"id": "C-2"}},
    ],
}
GOOD_OUT: dict[str, Any] = {
    "sequence_correctness_score": 1.0,
    "total_rules_checked": 2,
    "rules_passed": 2,
    "rules_failed": 0,
    "violations": [],
    "missing_prerequisites": [],
    "summary": "Both rules passed.",
}
BAD_OUT: dict[str, Any] = {
    "sequence_correctness_score": 0.0,
    "total_rules_checked": 2,
    "rules_passed": 1,
    "rules_failed": 1,
    "violations": [
        {
            "rule_id": "verify_first",
            "rule_description": "Verify before delete",
            "violation_type": "out_of_order",
            "expected_order": "VerifyIdentity, then DeleteCustomer",
            "actual_order": "DeleteCustomer (call 0), then VerifyIdentity (call 1)",
            "offending_call_index": 0,
            "severity": "critical",
            "explanation": "Deleted before verifying.",
        }
    ],
    "missing_prerequisites": [],
    "summary": "verify_first failed.",
}


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    monkeypatch.chdir(tmp_path)  # the response cache lives under ./.seqjudge/cache
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-cli-0000")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("SEQJUDGE_MODEL", raising=False)
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES_YAML, encoding="utf-8")
    traces = tmp_path / "traces.jsonl"
    traces.write_text("\n".join(json.dumps(t) for t in (GOOD_TRACE, BAD_TRACE)) + "\n", encoding="utf-8")
    good = tmp_path / "good.json"
    good.write_text(json.dumps(GOOD_TRACE), encoding="utf-8")
    catalog = tmp_path / "catalog.json"
    catalog.write_text(
        json.dumps({"tools": [{"name": n} for n in ("VerifyIdentity", "DeleteCustomer", "SendEmail")]}),
        encoding="utf-8",
    )
    return {"rules": rules, "traces": traces, "good": good, "catalog": catalog, "dir": tmp_path}


def judge_args(
    files: dict[str, Path], server: FakeLLMServer, *extra: str, traces: str = "traces"
) -> list[str]:
    return [
        "judge",
        str(files["rules"]),
        str(files[traces]),
        "--model",
        "openai:gpt-4o",
        "--base-url",
        server.openai_base_url,
        *extra,
    ]


# ----------------------------------------------------------------------------------------------- prompt


def test_prompt_prints_exactly_what_the_model_sees(files, capsys) -> None:
    assert run(["prompt", str(files["rules"]), str(files["good"])]) == 0
    out = capsys.readouterr().out
    # The catalog.json beside the rule file is the suite's, read by default (issue 37 point 5).
    catalog = load_catalog(files["catalog"])
    expected = render(Trace.model_validate(GOOD_TRACE), load_rules(files["rules"]), catalog=catalog)
    assert out == expected.text()
    assert out.startswith("=== system ===\nYou are an evaluation judge")
    system, user = out.split("\n=== user ===\n")
    assert user == expected.user + "\n" and expected.static in user and expected.dynamic in user


def test_prompt_options(files, capsys, tmp_path) -> None:
    code = run(
        [
            "prompt",
            str(files["rules"]),
            str(files["traces"]),
            "--trace-id",
            "bad",
            "--risk-level",
            "high",
            "--catalog",
            str(files["catalog"]),
        ]
    )
    captured = capsys.readouterr()
    assert code == 0
    assert '"tool_name":"DeleteCustomer","status":"ok","arguments":{"id":"C-2"}' in captured.out
    assert "Score strictly" in captured.out and "# TOOLS" in captured.out


def test_prompt_notes_which_trace_it_shows(files, capsys) -> None:
    assert run(["prompt", str(files["rules"]), str(files["traces"])]) == 0
    captured = capsys.readouterr()
    assert "2 traces" in captured.err and "--trace-id" in captured.err
    assert '"arguments":{"id":"C-1"}' in captured.out


def test_prompt_rejects_bad_input(files, capsys) -> None:
    assert run(["prompt", str(files["rules"]), str(files["traces"]), "--trace-id", "nope"]) == 2
    err = capsys.readouterr().err
    # names the ids there are, so the next try can pick one
    assert "no trace with id 'nope' among the input's 2 trace(s): good, bad" in err
    partial = files["dir"] / "partial.json"
    partial.write_text(json.dumps({"tools": [{"name": "SendEmail"}]}), encoding="utf-8")
    assert run(["prompt", str(files["rules"]), str(files["good"]), "--catalog", str(partial)]) == 2
    assert "not in the catalog" in capsys.readouterr().err


# ----------------------------------------------------------------------------------------------- judge


def test_judge_prints_both_reports_rule_by_rule(files, fake_llm, capsys) -> None:
    fake_llm.enqueue(openai_chat(GOOD_OUT), openai_chat(BAD_OUT))
    code = run(judge_args(files, fake_llm))
    out = capsys.readouterr().out
    assert code == 1  # the bad trace fails
    assert len(fake_llm.requests) == 2
    assert (
        "PASS     good: engine pass (score 1.00), judge pass (score 1.00, 1 attempt(s), openai:gpt-4o)" in out
    )
    assert "FAIL     bad: engine fail (score 0.00), judge fail" in out
    assert "verify_first  failed          failed      agree" in out
    assert "judge: verify_first out_of_order at call 1: Deleted before verifying." in out
    assert "2 trace(s): 1 pass, 1 fail, 0 review (0 unscored); judge and engine agree on 4 of 4" in out


def test_judge_json_then_a_cached_rerun_makes_no_call(files, fake_llm, capsys) -> None:
    fake_llm.enqueue(openai_chat(GOOD_OUT), openai_chat(BAD_OUT))
    assert run(judge_args(files, fake_llm, "--format", "json")) == 1
    first = json.loads(capsys.readouterr().out)
    assert first["summary"]["traces"] == 2 and first["summary"]["fail"] == 1
    bad = first["results"][1]
    assert bad["trace_id"] == "bad" and bad["engine_verdict"] == "fail" and bad["judge_verdict"] == "fail"
    assert {r["rule_id"]: (r["engine"], r["judge"], r["agree"]) for r in bad["rules"]} == {
        "verify_first": ("failed", "failed", True),
        "one_email": ("passed", "passed", True),
    }
    assert bad["judge"]["fingerprint"]["model_version"] == "gpt-4o-2024-08-06"
    assert len(fake_llm.requests) == 2

    assert run(judge_args(files, fake_llm, "--format", "json")) == 1
    second = json.loads(capsys.readouterr().out)
    assert len(fake_llm.requests) == 2  # zero new calls
    assert second["summary"]["cache"] == {"hits": 2, "misses": 0}
    assert [r["judge"]["report"] for r in second["results"]] == [
        r["judge"]["report"] for r in first["results"]
    ]
    assert all(a["cached"] for r in second["results"] for a in r["judge"]["attempts"])

    fake_llm.enqueue(openai_chat(GOOD_OUT), openai_chat(BAD_OUT))
    assert run(judge_args(files, fake_llm, "--format", "jsonl", "--no-cache")) == 1
    lines = capsys.readouterr().out.strip().split("\n")
    assert len(fake_llm.requests) == 4 and [json.loads(x)["trace_id"] for x in lines] == ["good", "bad"]


def test_judge_exit_0_when_everything_passes_and_model_from_env(files, fake_llm, capsys, monkeypatch) -> None:
    monkeypatch.setenv("SEQJUDGE_MODEL", "openai:gpt-4o")
    fake_llm.enqueue(openai_chat(GOOD_OUT))
    args = ["judge", str(files["rules"]), str(files["good"]), "--base-url", fake_llm.openai_base_url]
    assert run(args) == 0
    assert "PASS     good" in capsys.readouterr().out and len(fake_llm.requests) == 1


def test_a_disagreement_goes_to_review(files, fake_llm, capsys) -> None:
    fake_llm.enqueue(openai_chat({**BAD_OUT, "summary": "judge thinks so"}))
    assert run(judge_args(files, fake_llm, traces="good")) == 1
    out = capsys.readouterr().out
    # the engine decides a deterministic rule; the judge's dissent sends the trace to review
    assert "REVIEW   good: engine pass (score 1.00), judge fail" in out
    assert "verify_first  passed          failed      DISAGREE" in out
    assert "0 pass, 0 fail, 1 review" in out


def test_unscored_traces_exit_1(files, fake_llm, capsys) -> None:
    fake_llm.enqueue(openai_chat("nope"), openai_chat("still no"))
    assert run(judge_args(files, fake_llm, "--max-attempts", "2", traces="good")) == 1
    out = capsys.readouterr().out
    assert "REVIEW   good: engine pass (score 1.00), judge UNSCORED" in out
    assert "no valid judgement after 2 attempt(s)" in out and "0 review (0 unscored)" not in out
    assert "verify_first  passed          unscored" in out and len(fake_llm.requests) == 2


def test_missing_key_exits_2_with_the_sentence_run_prints(files, fake_llm, capsys, monkeypatch) -> None:
    # Issue 17, point 6: one behaviour for a missing key. `judge` cannot do without the judge, so it is
    # bad input (exit 2, as in `calibrate`), said with the reason `run` gives when it defers judge rules.
    monkeypatch.delenv("OPENAI_API_KEY")
    args = judge_args(files, fake_llm)
    del args[args.index("--base-url") : args.index("--base-url") + 2]
    assert run(args) == 2
    err = capsys.readouterr().err
    assert "`seqjudge judge` needs the LLM judge, but model openai:gpt-4o is configured but " in err
    assert "OPENAI_API_KEY is not set" in err and "--base-url" in err
    assert run(["judge", str(files["rules"]), str(files["traces"])]) == 2
    assert "but no model configured" in capsys.readouterr().err
    assert fake_llm.requests == []


def test_a_local_server_needs_no_key(files, fake_llm, capsys, monkeypatch) -> None:
    # --base-url without a key: the SDK gets a placeholder (it insists on some key string), never shown.
    from seqjudge.judge.providers.sdk import NO_KEY_PLACEHOLDER

    monkeypatch.delenv("OPENAI_API_KEY")
    fake_llm.enqueue(openai_chat(GOOD_OUT))
    assert run(judge_args(files, fake_llm, traces="good")) == 0
    assert fake_llm.requests[0].headers["authorization"] == f"Bearer {NO_KEY_PLACEHOLDER}"
    captured = capsys.readouterr()
    assert "PASS" in captured.out and NO_KEY_PLACEHOLDER not in captured.out + captured.err


def test_wrong_base_url_exits_3_and_says_so(files, fake_llm, capsys) -> None:
    args = judge_args(files, fake_llm)
    args[args.index("--base-url") + 1] = fake_llm.base_url  # without /v1: the fake answers 404
    assert run(args) == 3
    err = capsys.readouterr().err
    assert "404" in err and "/v1" in err and "--base-url" in err
    assert len(fake_llm.requests) == 1  # a 404 is not retried


def test_rate_limit_exits_3_and_says_so(files, fake_llm, capsys) -> None:
    fake_llm.enqueue(*[openai_error(429, "slow down", {"retry-after": "0.01"}, type="rate_limit_error")] * 3)
    assert run(judge_args(files, fake_llm)) == 3
    err = capsys.readouterr().err
    assert "rate limit" in err and "wait and run again" in err
    assert len(fake_llm.requests) == 3  # the SDK's retries only


def test_no_model_and_bad_input_exit_2_without_a_call(files, fake_llm, capsys) -> None:
    assert run(["judge", str(files["rules"]), str(files["traces"])]) == 2
    assert "SEQJUDGE_MODEL" in capsys.readouterr().err
    partial = files["dir"] / "partial.json"
    partial.write_text(json.dumps({"tools": [{"name": "SendEmail"}]}), encoding="utf-8")
    fake_llm.enqueue(openai_chat(GOOD_OUT))
    assert run(judge_args(files, fake_llm, "--catalog", str(partial))) == 2
    assert "not in the catalog" in capsys.readouterr().err
    assert fake_llm.requests == []


def test_a_judge_rule_takes_the_judges_outcome(files, fake_llm, capsys) -> None:
    rules = files["dir"] / "words.yaml"
    rules.write_text(RULES_YAML + "  - {id: confirm, type: judge, description: Confirm before deleting.}\n")
    failed = {
        **GOOD_OUT,
        "sequence_correctness_score": 0.0,
        "total_rules_checked": 3,
        "rules_failed": 1,
        "violations": [
            {**BAD_OUT["violations"][0], "rule_id": "confirm", "violation_type": "missing_prerequisite"}
        ],
    }
    fake_llm.enqueue(openai_chat(failed))
    args = judge_args(files, fake_llm, traces="good")
    args[1] = str(rules)
    assert run(args) == 1
    out = capsys.readouterr().out
    assert "FAIL     good: engine pass" in out
    assert "confirm       deferred        failed" in out and "DISAGREE" not in out


# ------------------------------------------------- one reconciliation: `judge` shows what `run` decides

NOT_EXERCISED_RULES = RULES_YAML + "  - {id: lookup_first, type: before, first: LookupOrder, then: Refund}\n"
ALL_PASSED: dict[str, Any] = {
    **GOOD_OUT,
    "total_rules_checked": 3,
    "rules_passed": 3,
    "summary": "Every rule passed.",
}


def _judge_and_run(
    files: dict[str, Path], server: FakeLLMServer, capsys: Any, rules: Path, replies: list[Any]
) -> tuple[dict[str, Any], Any]:
    """The good trace as `judge --format json` shows it and as `run` stores it, each judged (no cache) from
    the same replies."""
    from seqjudge.store import Store

    server.enqueue(*(openai_chat(r) for r in replies))
    args = judge_args(files, server, "--format", "json", "--no-cache", "--max-attempts", "2", traces="good")
    args[1] = str(rules)
    run(args)
    row = json.loads(capsys.readouterr().out)["results"][0]
    server.enqueue(*(openai_chat(r) for r in replies))
    store = files["dir"] / "runs.db"
    code = run(
        [
            "run",
            str(rules),
            str(files["good"]),
            "--model",
            "openai:gpt-4o",
            "--base-url",
            server.openai_base_url,
            "--no-cache",
            "--max-attempts",
            "2",
            "--store",
            str(store),
        ]
    )
    capsys.readouterr()
    assert code in (0, 1)
    with Store(store, create=False) as db:
        (stored,) = list(db.results(db.resolve_run("latest")))
    return row, stored.result


def test_not_exercised_and_judge_passed_is_agreement_in_judge_as_in_run(files, fake_llm, capsys) -> None:
    # Before `judge` went through crosscheck.reconcile it left this pair uncompared (agree None) while `run`
    # counted it as agreement.
    # In a folder of its own: the catalog.json beside rules.yaml lacks LookupOrder and Refund (issue 37, 5).
    (files["dir"] / "other").mkdir()
    rules = files["dir"] / "other" / "unexercised.yaml"
    rules.write_text(NOT_EXERCISED_RULES, encoding="utf-8")
    row, stored = _judge_and_run(files, fake_llm, capsys, rules, [ALL_PASSED])
    shown = {r["rule_id"]: (r["engine"], r["judge"], r["agree"]) for r in row["rules"]}
    assert shown["lookup_first"] == ("not_exercised", "passed", True)
    assert {d.rule_id: (d.engine, d.judge, d.agree) for d in stored.rules} == shown
    assert row["verdict"] == stored.verdict == "pass"


def test_an_unscored_judge_sends_the_trace_to_review_in_judge_as_in_run(files, fake_llm, capsys) -> None:
    # Before, `judge` called such a trace `unscored` while `run` sent it to review for that reason.
    row, stored = _judge_and_run(files, fake_llm, capsys, files["rules"], ["nope", "still no"])
    assert row["verdict"] == stored.verdict == "review"
    assert row["review_reasons"] == stored.review_reasons == ["unscored"]
    assert [(r["rule_id"], r["agree"]) for r in row["rules"]] == [(d.rule_id, d.agree) for d in stored.rules]
