"""Issue 17, point 6: no key means engine verdicts, not a flood.

Without a model, `run` (and so `make demo`) gives the verdicts `check` gives, names the deferred `judge`
rules in one line per suite and makes no review item for them; a missing key is one behaviour, said in one
sentence, across `run`, `judge` and `calibrate`; and `--base-url` to a local server needs no key.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fakes.server import FakeLLMServer, openai_chat
from seqjudge.cli import run
from seqjudge.judge.providers.sdk import NO_KEY_PLACEHOLDER
from seqjudge.store import Store
from test_judge_cli import GOOD_OUT, GOOD_TRACE, RULES_YAML

ROOT = Path(__file__).resolve().parents[1]
SUITES = ("customer-support", "tau-airline", "tau-retail")
MISSING_KEY = "model openai:gpt-4o is configured but OPENAI_API_KEY is not set"


@pytest.fixture(autouse=True)
def no_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key in ("SEQJUDGE_MODEL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "SEQJUDGE_STORE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.chdir(tmp_path)


def check_verdicts(suite: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    run(["check", str(suite / "rules.yaml"), str(suite / "traces.jsonl"), "--format", "jsonl"])
    return {r["trace_id"]: r["verdict"] for r in map(json.loads, capsys.readouterr().out.splitlines())}


@pytest.mark.parametrize("name", SUITES)
def test_run_without_a_model_gives_checks_verdicts(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = ROOT / "golden_traces" / name
    expected = check_verdicts(suite, capsys)
    store = tmp_path / "s.db"
    run(["run", str(suite / "rules.yaml"), str(suite / "traces.jsonl"), "--store", str(store)])
    out = capsys.readouterr().out
    deferred = [line for line in out.splitlines() if "deferred (no model)" in line]
    assert len(deferred) == 1 and deferred[0].startswith("judge rules deferred (no model): ")
    assert "confirm-before-" in deferred[0] and "no model configured" in deferred[0]
    with Store(store) as db:
        results = {s.trace_id: s.result for s in db.results(db.resolve_run("latest"))}
        items = db.review_items()
    assert {t: r.verdict for t, r in results.items()} == expected
    assert "pass" in expected.values()  # the suites hold passing traces: the old flood showed none
    assert all("judge_rule_undecided" not in i.reasons for i in items)
    assert {i.trace_id for i in items} == {t for t, r in results.items() if r.review_reasons}


def test_demo_without_a_key_shows_passes_and_one_deferred_line_per_suite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "demo.db"
    for _ in range(2):  # "960 open items after two demos"
        assert run(["demo", str(ROOT / "golden_traces"), "--store", str(store)]) == 0
    out = capsys.readouterr().out
    heads = [line for line in out.splitlines() if line.startswith("== ")]
    assert len(heads) == 2 * len(SUITES)
    assert all(" 0 pass," not in head for head in heads), heads
    assert out.count("judge rules deferred (no model): ") == 2 * len(SUITES)
    with Store(store) as db:
        items = db.review_items()
    assert all("judge_rule_undecided" not in i.reasons for i in items)


def test_a_missing_key_is_one_sentence_in_run_judge_and_calibrate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = ROOT / "golden_traces" / "customer-support"
    rules, traces = str(suite / "rules.yaml"), str(suite / "traces.jsonl")
    store = ["--store", str(tmp_path / "s.db")]
    # run, judge and calibrate: a judge asked for that cannot run is bad input (exit 2), the same reason
    # (issue 37: `run` used to decide the exact rules alone and could pass, a green build with no judge)
    assert run(["run", rules, traces, "--model", "openai:gpt-4o", *store]) == 2
    assert MISSING_KEY in capsys.readouterr().err
    assert run(["judge", rules, traces, "--model", "openai:gpt-4o"]) == 2
    assert MISSING_KEY in capsys.readouterr().err
    assert run(["calibrate", str(suite), "--model", "openai:gpt-4o", *store]) == 2
    assert MISSING_KEY in capsys.readouterr().err


def test_run_against_a_local_server_needs_no_key(
    tmp_path: Path, fake_llm: FakeLLMServer, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "rules.yaml").write_text(RULES_YAML, encoding="utf-8")
    (tmp_path / "traces.jsonl").write_text(json.dumps(GOOD_TRACE) + "\n", encoding="utf-8")
    fake_llm.enqueue(openai_chat(GOOD_OUT))
    code = run(
        [
            "run",
            "rules.yaml",
            "traces.jsonl",
            "--model",
            "openai:llama3.1",
            "--base-url",
            fake_llm.openai_base_url,
            "--store",
            str(tmp_path / "s.db"),
            "--format",
            "json",
        ]
    )
    captured = capsys.readouterr()
    totals = json.loads(captured.out)
    assert code == 0 and totals["judge_skipped"] is None and totals["judge"] == {"scored": 1}
    assert [r.headers["authorization"] for r in fake_llm.requests] == [f"Bearer {NO_KEY_PLACEHOLDER}"]
    assert NO_KEY_PLACEHOLDER not in captured.out + captured.err
    assert NO_KEY_PLACEHOLDER.encode() not in (tmp_path / "s.db").read_bytes()


def test_calibrate_with_a_local_server_in_the_config_needs_no_key(
    tmp_path: Path, fake_llm: FakeLLMServer, capsys: pytest.CaptureFixture[str]
) -> None:
    from test_calibrate import tiny_dataset

    root = tiny_dataset(tmp_path / "ds")
    (root / "seqjudge.yaml").write_text(
        "rules: rules.yaml\ntraces: traces.jsonl\nmodel: openai:llama3.1\n"
        f"model_options: {{base_url: '{fake_llm.openai_base_url}', max_retries: 0}}\n"
        f"store: {tmp_path / 's.db'}\nmax_attempts: 1\n",
        encoding="utf-8",
    )
    run(["calibrate", str(root)])  # the fake has no scripted replies: every trace ends unscored
    err = capsys.readouterr().err
    assert "needs the LLM judge" not in err and "is not set" not in err
    assert fake_llm.requests and {r.headers["authorization"] for r in fake_llm.requests} == {
        f"Bearer {NO_KEY_PLACEHOLDER}"
    }


async def test_anthropic_against_a_local_server_needs_no_key(
    fake_llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fakes.server import anthropic_message
    from test_providers_anthropic import GOOD, make_provider, make_request

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    provider = make_provider(fake_llm)  # base_url given, no key: built all the same
    assert NO_KEY_PLACEHOLDER not in repr(provider)
    fake_llm.enqueue(anthropic_message(json.dumps(GOOD)))
    reply = await provider.complete(make_request())
    await provider.aclose()
    assert reply.parsed == GOOD
    sent = fake_llm.requests[0].headers
    assert NO_KEY_PLACEHOLDER in (sent.get("x-api-key", "") + sent.get("authorization", ""))


def test_a_server_that_wants_a_key_says_which_variable_to_set(
    tmp_path: Path, fake_llm: FakeLLMServer, capsys: pytest.CaptureFixture[str]
) -> None:
    from fakes.server import openai_error

    (tmp_path / "rules.yaml").write_text(RULES_YAML, encoding="utf-8")
    (tmp_path / "traces.jsonl").write_text(json.dumps(GOOD_TRACE) + "\n", encoding="utf-8")
    fake_llm.enqueue(openai_error(401, "missing key", type="invalid_request_error"))
    args = [
        "judge",
        "rules.yaml",
        "traces.jsonl",
        "--model",
        "openai:m",
        "--base-url",
        fake_llm.openai_base_url,
    ]
    assert run(args) == 3
    err = capsys.readouterr().err
    assert "wants an API key (HTTP 401" in err and "OPENAI_API_KEY is not set" in err
    assert NO_KEY_PLACEHOLDER not in err
