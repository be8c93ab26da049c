"""`seqjudge run` at volume, through the real OpenAI SDK against the loopback fake server: the concurrency cap
as the server sees it, a 429 that slows the whole run, the dry run, the budget and its resume, cost, the
cached rerun, a run under random faults, and a CLI run killed with SIGKILL and resumed.

No assertion here is about speed: counts, causality (a request that may only start after a pause arrives
after it) and generous bounds.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from fakes.server import (
    FakeLLMServer,
    FakeReply,
    RecordedRequest,
    anthropic_error,
    anthropic_message,
    openai_chat,
    openai_error,
)
from seqjudge.cli import run
from seqjudge.cli.progress import RunProgress
from seqjudge.config import ModelOptions, RunConfig
from seqjudge.errors import InputError, ProviderError
from seqjudge.ingest import load_traces
from seqjudge.judge.providers.base import ProviderReply, Usage
from seqjudge.pricing import Price, cost_of, load_prices, price_for, shipped_prices
from seqjudge.rules.load import load_rules
from seqjudge.runner import RunSummary, run_traces
from seqjudge.store import Store

RULES_YAML = """\
rules:
  - id: read-first
    type: before
    first: GetOrder
    then: Refund
    severity: critical
  - id: confirm
    type: judge
    description: Confirm with the user before refunding.
"""
# Valid for any trace and rule set: no rule checked, no violation, score 1.0.
VALID: dict[str, Any] = {
    "sequence_correctness_score": 1.0,
    "total_rules_checked": 0,
    "rules_passed": 0,
    "rules_failed": 0,
    "violations": [],
    "missing_prerequisites": [],
    "summary": "No rule is violated.",
}
CASE = re.compile(r"CASE-\d{4}")


def write_suite(root: Path, n: int) -> tuple[Path, Path, list[str]]:
    """RULES, TRACES and the trace ids; every trace carries its own case number into the prompt."""
    root.mkdir(parents=True, exist_ok=True)
    rules = root / "rules.yaml"
    rules.write_text(RULES_YAML, encoding="utf-8")
    traces = root / "traces.jsonl"
    ids = [f"t{i:04d}" for i in range(n)]
    with traces.open("w", encoding="utf-8") as out:
        for i, trace_id in enumerate(ids):
            case = f"CASE-{i:04d}"
            calls = [
                {"tool_name": "GetOrder", "arguments": {"case": case}},
                {"tool_name": "Refund", "arguments": {"case": case}},
            ]
            out.write(json.dumps({"trace_id": trace_id, "calls": calls}) + "\n")
    return rules, traces, ids


def cli_args(rules: Path, traces: Path, base_url: str, model: str = "openai:gpt-4o") -> list[str]:
    return ["run", str(rules), str(traces), "--model", model, "--base-url", base_url]


def case_of(request: RecordedRequest) -> str | None:
    match = CASE.search(json.dumps(request.body))
    return match.group(0) if match else None


def config(rules: Path, traces: Path, srv: FakeLLMServer, tmp_path: Path, **fields: Any) -> RunConfig:
    options = fields.pop("model_options", {})
    return RunConfig(
        rules=str(rules),
        traces=str(traces),
        model="openai:gpt-4o",
        model_options=ModelOptions(base_url=srv.openai_base_url, **options),
        store=str(tmp_path / "db" / "seqjudge.db"),
        **{"rpm": 0, "tpm": 0, **fields},
    )


def go(cfg: RunConfig, **kwargs: Any) -> RunSummary:
    with Store(cfg.store) as db:
        return asyncio.run(run_traces(cfg, load_rules(cfg.rules), load_traces(cfg.traces), db, **kwargs))


def stored_ids(db_path: str | Path, run_id: str | None = None) -> list[str]:
    conn = sqlite3.connect(db_path)
    try:
        sql = "SELECT trace_id FROM results" + (" WHERE run_id = ?" if run_id else "")
        return [r[0] for r in conn.execute(sql, (run_id,) if run_id else ())]
    finally:
        conn.close()


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    monkeypatch.delenv("SEQJUDGE_MODEL", raising=False)
    monkeypatch.chdir(tmp_path)


# -- concurrency -------------------------------------------------------------------------------------------
def test_the_server_never_sees_more_than_concurrency_calls_at_once(tmp_path: Path) -> None:
    lock = threading.Lock()
    state = {"inside": 0, "most": 0}

    def responder(request: RecordedRequest) -> FakeReply:
        with lock:
            state["inside"] += 1
            state["most"] = max(state["most"], state["inside"])
        time.sleep(0.05)
        with lock:
            state["inside"] -= 1
        return openai_chat(VALID)

    rules, traces, ids = write_suite(tmp_path / "suite", 40)
    with FakeLLMServer(responder=responder) as srv:
        summary = go(config(rules, traces, srv, tmp_path, concurrency=4, cache=False))
        assert len(srv.requests) == 40
    assert state["most"] == 4  # the cap is reached (the pool is used) and never passed
    assert summary.calls["max_in_flight"] == 4 and summary.calls["calls"] == 40
    assert summary.traces == 40 and summary.judge_status["scored"] == 40


def test_traces_stream_through_a_bounded_window(tmp_path: Path) -> None:
    """With every provider call held, the runner reads at most 2 x concurrency traces ahead: memory stays
    flat however long the suite."""
    rules, traces, _ = write_suite(tmp_path / "suite", 100)
    read: list[str] = []
    release = asyncio.Event()

    class Held:
        name = "held"
        model = "held-1"

        async def complete(self, request: Any) -> ProviderReply:
            await release.wait()
            return ProviderReply(text=json.dumps(VALID), model=self.model, finish_reason="stop")

    def counted() -> Any:
        for trace in load_traces(traces):
            read.append(trace.trace_id)
            yield trace

    async def scenario() -> RunSummary:
        cfg = RunConfig(rules=str(rules), traces=str(traces), store=str(tmp_path / "s.db"), concurrency=3)
        with Store(cfg.store) as db:
            task = asyncio.create_task(run_traces(cfg, load_rules(cfg.rules), counted(), db, provider=Held()))
            for _ in range(50):
                await asyncio.sleep(0.01)
            assert len(read) <= 2 * 3 + 1  # the window, plus the one waiting for a place in it
            release.set()
            return await task

    summary = asyncio.run(scenario())
    assert summary.traces == 100 and summary.calls["max_in_flight"] == 3


# -- a 429 slows the whole run -----------------------------------------------------------------------------
@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
def test_a_429_with_retry_after_pauses_every_new_call(
    tmp_path: Path, vendor: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pause = 0.3
    lock = threading.Lock()
    seen: list[tuple[float, int]] = []  # (arrival, x-stainless-retry-count)
    when: dict[str, float] = {}

    def responder(request: RecordedRequest) -> FakeReply:
        with lock:
            seen.append((time.monotonic(), int(request.headers.get("x-stainless-retry-count", "0"))))
            first = len(seen) == 1
            if first:
                when["429"] = time.monotonic()
        retry_after = {"retry-after": str(pause)}
        if vendor == "anthropic":
            if first:
                return anthropic_error(429, "rate_limit_error", "slow down", retry_after)
            time.sleep(0.05)
            return anthropic_message(VALID)
        if first:
            return openai_error(429, "slow down", retry_after, type="rate_limit_error")
        time.sleep(0.05)
        return openai_chat(VALID)

    rules, traces, _ = write_suite(tmp_path / "suite", 12)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    with FakeLLMServer(responder=responder) as srv:
        cfg = config(rules, traces, srv, tmp_path, concurrency=4, cache=False)
        if vendor == "anthropic":
            options = ModelOptions(base_url=srv.anthropic_base_url)
            cfg = cfg.model_copy(update={"model": "anthropic:claude-haiku-4-5", "model_options": options})
        summary = go(cfg)
    assert summary.judge_status["scored"] == 12 and summary.calls["rate_limited"] == 1
    # The first four requests left together, before anyone heard of the 429. Every call that started
    # afterwards, and the SDK's own retry of the rate-limited one, arrived only once the pause was over;
    # without the shared pause the next calls would have followed the 50 ms replies at once.
    later = seen[4:]
    assert len(later) == 9 and sum(1 for _, retry in later if retry) == 1
    assert all(arrived >= when["429"] + pause for arrived, _ in later)


def test_limits_come_from_flags_or_the_config_else_the_providers_defaults(tmp_path: Path) -> None:
    from seqjudge.inputs import build_config
    from seqjudge.runner import run_limits

    rules, traces, _ = write_suite(tmp_path / "suite", 1)
    cfg = build_config([str(rules), str(traces)], {"rpm": None, "tpm": None})
    assert run_limits(cfg, "openai") == (5_000, 450_000) and run_limits(cfg, "scripted") == (0, 0)
    cfg = build_config([str(rules), str(traces)], {"rpm": 0, "tpm": 1_000})
    assert run_limits(cfg, "anthropic") == (0, 1_000)  # 0 = unlimited
    config_file = tmp_path / "seqjudge.yaml"
    config_file.write_text(f"rules: {rules}\ntraces: {traces}\nrpm: 60\nmax_cost: 2.5\nprices: p.yaml\n")
    cfg = build_config([str(config_file)], {"rpm": None})
    assert run_limits(cfg, "openai") == (60, 450_000) and cfg.max_cost == 2.5
    assert cfg.prices == str(tmp_path / "p.yaml")  # relative to the config file


# -- dry run -----------------------------------------------------------------------------------------------
def test_dry_run_renders_and_prices_every_prompt_and_calls_nothing(
    tmp_path: Path, fake_llm: FakeLLMServer, capsys: pytest.CaptureFixture[str]
) -> None:
    rules, traces, _ = write_suite(tmp_path / "suite", 5)
    store = tmp_path / "db" / "seqjudge.db"
    args = [*cli_args(rules, traces, fake_llm.openai_base_url), "--store", str(store), "--dry-run"]
    assert run(args) == 0
    out = capsys.readouterr().out
    assert "dry run: 5 trace(s), 5 judge call(s)" in out and "no model was called" in out
    assert run([*args, "--format", "json"]) == 0
    est = json.loads(capsys.readouterr().out)
    assert fake_llm.requests == [] and not store.exists()
    assert est["calls"] == 5 and est["input_tokens"] > 5 * est["static_tokens_per_call"] > 0
    price = shipped_prices()["openai:gpt-4o"]
    expected = (est["input_tokens"] * price.input + est["output_tokens"] * price.output) / 1e6
    assert est["cost_usd"] == pytest.approx(expected, abs=1e-6)
    assert est["cost_usd_with_prompt_cache"] < est["cost_usd"]


def test_dry_run_without_a_model_says_the_judge_is_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules, traces, _ = write_suite(tmp_path / "suite", 2)
    assert run(["run", str(rules), str(traces), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "judge skipped: no model configured" in out
    # no judge call is announced for a judge that will not run
    assert "dry run: 2 trace(s), no judge call\n" in out and "judge call(s)" not in out
    assert run(["run", str(rules), str(traces), "--dry-run", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["calls"] == 0


# -- cost --------------------------------------------------------------------------------------------------
def test_cost_counts_each_kind_of_token_at_its_price() -> None:
    price = Price(input=2.0, cached_input=0.5, cache_write=2.5, output=8.0)
    usage = Usage(
        input_tokens=1_000_000, cached_input_tokens=400_000, cache_write_tokens=100_000, output_tokens=200_000
    )
    cost = cost_of(usage, price)
    parts = (cost.input, cost.cached_input, cost.cache_write, cost.output)
    assert parts == pytest.approx((1.0, 0.2, 0.25, 1.6))
    assert cost.total == pytest.approx(3.05)
    assert cost_of(usage, price, scale=0.5).total == pytest.approx(1.525)  # the batch APIs' half price
    bare = Price(input=1.0, output=1.0)  # no cache prices: cached tokens cost the input price
    assert cost_of(usage, bare).total == pytest.approx(1.2)


def test_prices_are_found_by_name_or_family_and_can_be_overridden(tmp_path: Path) -> None:
    assert price_for("openai:gpt-4o-2024-08-06") == shipped_prices()["openai:gpt-4o"]
    assert price_for("openai:gpt-4o-mini-2024-07-18") == shipped_prices()["openai:gpt-4o-mini"]
    sonnet = shipped_prices()["anthropic:claude-sonnet-4-5"]
    assert price_for("anthropic:claude-sonnet-4-5-20250929") == sonnet
    assert price_for("anthropic:gpt-4o") is None  # another provider's model of the same name
    assert price_for("openai:my-finetune") is None and price_for(None) is None
    # Nothing is guessed from a family: a newer or different model has no price until one is given.
    assert price_for("openai:gpt-4o-audio-preview") is None
    assert price_for("anthropic:claude-sonnet-4-6") is None
    yaml_file = tmp_path / "prices.yaml"
    yaml_file.write_text(
        "prices:\n  openai:gpt-4o: {input: 1, output: 2}\n  local-llm: {input: 0, output: 0}\n"
    )
    table = load_prices(yaml_file)
    assert price_for("openai:gpt-4o", table) == Price(input=1, output=2)
    assert price_for("openai:local-llm", table) == Price(input=0, output=0)
    json_file = tmp_path / "prices.json"
    json_file.write_text(json.dumps({"openai:gpt-4o": {"input": 3, "output": 4, "cached_input": 1}}))
    assert price_for("openai:gpt-4o", load_prices(json_file)).cached_input == 1  # type: ignore[union-attr]
    bad = tmp_path / "bad.yaml"
    bad.write_text("openai:gpt-4o: {input: -1, output: 2}\n")
    with pytest.raises(InputError, match="openai:gpt-4o"):
        load_prices(bad)
    with pytest.raises(InputError, match="cannot read"):
        load_prices(tmp_path / "missing.yaml")


def test_run_totals_hold_tokens_and_cost_per_trace_and_per_run(tmp_path: Path) -> None:
    rules, traces, _ = write_suite(tmp_path / "suite", 6)
    reply = openai_chat(VALID, prompt_tokens=2_000, cached_tokens=1_500, completion_tokens=300)
    with FakeLLMServer(responder=lambda r: reply) as srv:
        prices = {"openai:gpt-4o": {"input": 2.0, "cached_input": 1.0, "output": 10.0}}
        summary = go(config(rules, traces, srv, tmp_path, cache=False, prices=prices))
    per_trace = (500 * 2.0 + 1_500 * 1.0 + 300 * 10.0) / 1e6
    with Store(tmp_path / "db" / "seqjudge.db") as db:
        totals = db.run_info(summary.run_id).totals
    assert totals is not None
    cost = totals["cost"]
    assert cost["usd"] == pytest.approx(6 * per_trace) and cost["per_trace_usd"] == pytest.approx(per_trace)
    assert cost["cached_input_usd"] == pytest.approx(6 * 1_500 / 1e6)
    assert totals["tokens"] == {"input": 12_000, "cached_input": 9_000, "cache_write": 0, "output": 1_800}
    assert totals["calls"]["calls"] == 6


# -- the budget --------------------------------------------------------------------------------------------
def test_max_cost_stops_the_run_and_resume_finishes_it_without_paying_twice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    n = 10
    rules, traces, ids = write_suite(tmp_path / "suite", n)
    prices = tmp_path / "prices.yaml"
    prices.write_text("openai:gpt-4o: {input: 10, output: 10}\n")  # USD per million
    reply = openai_chat(VALID, prompt_tokens=10_000, completion_tokens=1_000)  # $0.11 a call
    store = tmp_path / "db" / "seqjudge.db"
    with FakeLLMServer(responder=lambda r: reply) as srv:
        args = cli_args(rules, traces, srv.openai_base_url)
        args += ["--store", str(store), "--prices", str(prices), "--concurrency", "1", "--max-cost", "0.5"]
        assert run(args) == 1  # stopped: not every trace was judged
        out = capsys.readouterr().out
        with Store(store) as db:
            run_id = db.resolve_run("latest")
            info = db.run_info(run_id)
        first = stored_ids(store)
        assert info.status == "stopped" and 0 < len(first) < n
        assert f"`seqjudge run --resume {run_id} --store {store}` finishes it" in out  # typed here, it works
        assert info.totals is not None and info.totals["cost"]["usd"] <= 0.5 + 0.11  # one call's misestimate
        calls_before = len(srv.requests)
        assert calls_before == len(first)

        # Resume with no arguments: the run's own config (suite, model, base URL, prices), minus the cap.
        assert run(["run", "--resume", run_id, "--store", str(store), "--max-cost", "0"]) == 0
        out = capsys.readouterr().out
        assert "STOPPED" not in out and f"({len(first)} already stored, not judged again)" in out
        assert len(srv.requests) == n  # each trace paid for exactly once
        with Store(store) as db:
            info = db.run_info(run_id)
    assert info.status == "completed"
    assert sorted(stored_ids(store)) == ids
    assert info.totals is not None and info.totals["traces"] == n  # totals cover the whole run
    assert info.totals["cost"]["usd"] == pytest.approx(n * 0.11)


def test_max_cost_without_a_price_is_refused_before_any_call(
    tmp_path: Path, fake_llm: FakeLLMServer, capsys: pytest.CaptureFixture[str]
) -> None:
    rules, traces, _ = write_suite(tmp_path / "suite", 2)
    args = cli_args(rules, traces, fake_llm.openai_base_url, "openai:my-finetune")
    assert run([*args, "--max-cost", "1", "--store", str(tmp_path / "s.db")]) == 2
    assert "--prices" in capsys.readouterr().err and fake_llm.requests == []


# -- reruns are free ---------------------------------------------------------------------------------------
def test_a_rerun_of_an_unchanged_suite_makes_zero_model_calls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules, traces, ids = write_suite(tmp_path / "suite", 8)
    store = tmp_path / "db" / "seqjudge.db"
    with FakeLLMServer(responder=lambda r: openai_chat(VALID)) as srv:
        args = cli_args(rules, traces, srv.openai_base_url)
        args += ["--store", str(store), "--format", "json"]
        assert run(args) == 0
        first = json.loads(capsys.readouterr().out)
        assert len(srv.requests) == 8 and first["calls"]["calls"] == 8
        assert run(args) == 0
        second = json.loads(capsys.readouterr().out)
        assert len(srv.requests) == 8  # not one more HTTP request
    assert second["calls"]["calls"] == 0 and second["calls"]["cache_hits"] == 8
    assert second["pass"] == 8 and second["cost"]["usd"] == 0.0
    assert (tmp_path / "db" / "cache").is_dir()  # the cache lives beside the store


# -- faults ------------------------------------------------------------------------------------------------
class FaultyServer:
    """Random faults, seeded: 429 (Retry-After 0.01 s), 500, dropped connections, replies slower than the
    client's timeout, bodies that are not JSON, and judge output that is not valid (re-asked)."""

    KINDS = ("ok", "429", "500", "drop", "slow", "garbage", "bad_judgement")
    WEIGHTS = (55, 9, 9, 7, 7, 6, 7)

    def __init__(self, seed: int, clean_first: int = 12) -> None:
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.count = 0
        self.clean_first = clean_first
        self.faults: Counter[str] = Counter()

    def __call__(self, request: RecordedRequest) -> FakeReply:
        with self.lock:
            self.count += 1
            kind = "ok" if self.count <= self.clean_first else self.rng.choices(self.KINDS, self.WEIGHTS)[0]
            self.faults[kind] += 1
        if kind == "429":
            return openai_error(429, "rate limited", {"retry-after": "0.01"}, type="rate_limit_error")
        if kind == "500":
            return openai_error(500, "internal error", type="server_error")
        if kind == "drop":
            return FakeReply(drop=True)
        if kind == "slow":
            return openai_chat(VALID, delay=0.6)
        if kind == "garbage":
            return FakeReply(200, "<html>502 Bad Gateway</html>")
        if kind == "bad_judgement":
            return openai_chat("I think the trace is fine.")
        return openai_chat(VALID)


def test_under_random_faults_every_trace_ends_judged_or_unscored_with_its_reason(tmp_path: Path) -> None:
    n = 200
    rules, traces, ids = write_suite(tmp_path / "suite", n)
    faults = FaultyServer(seed=20261130)
    with FakeLLMServer(responder=faults) as srv:
        cfg = config(
            rules,
            traces,
            srv,
            tmp_path,
            concurrency=16,
            cache=False,
            max_attempts=2,
            model_options={"timeout": 0.25, "max_retries": 1},
        )
        summary = go(cfg)
    assert all(faults.faults[k] > 0 for k in FaultyServer.KINDS), faults.faults  # every fault happened
    assert summary.status == "completed"
    with Store(cfg.store) as db:
        stored = list(db.results(summary.run_id))
        info = db.run_info(summary.run_id)
    # Nothing lost, nothing twice: one stored result per trace.
    assert sorted(s.trace_id for s in stored) == ids
    status = Counter(s.result.judge.status for s in stored)
    assert status["scored"] + status["unscored"] == n and status["unscored"] > 0 and status["scored"] > 0
    for s in stored:
        judge = s.result.judge
        if judge.status == "unscored":
            assert judge.reason and judge.report is None and "unscored" in s.result.review_reasons
    # The counts add up, in the summary and in the stored totals.
    assert summary.traces == n and sum(summary.judge_status.values()) == n
    assert dict(summary.judge_status) == dict(status)
    assert info.totals is not None and info.totals["traces"] == n and info.totals["judge"] == dict(status)
    assert summary.calls["rate_limited"] == faults.faults["429"]


def test_a_wrong_endpoint_stops_the_run_at_once_and_keeps_it_resumable(tmp_path: Path) -> None:
    rules, traces, _ = write_suite(tmp_path / "suite", 20)
    with FakeLLMServer() as srv:
        closed = srv.openai_base_url  # the port is closed once the server stops
    cfg = RunConfig(
        rules=str(rules),
        traces=str(traces),
        model="openai:gpt-4o",
        model_options=ModelOptions(base_url=closed, max_retries=0, timeout=2),
        store=str(tmp_path / "s.db"),
    )
    with pytest.raises(ProviderError) as err:
        go(cfg)
    assert err.value.kind == "connection"
    with Store(cfg.store) as db:
        info = db.run_info(db.resolve_run("latest"))
    assert info.status == "interrupted" and stored_ids(cfg.store) == []


# -- progress ----------------------------------------------------------------------------------------------
def test_progress_is_quiet_off_a_terminal_and_counts_on_one(capsys: pytest.CaptureFixture[str]) -> None:
    summary = RunSummary(run_id="r", judged=True, judge_skipped=None, price=Price(input=1, output=1))
    summary.verdicts.update({"pass": 3, "fail": 1})
    summary.judge_status.update({"scored": 3, "unscored": 1})
    with RunProgress(10) as bar:  # stdout is captured, not a terminal
        assert not bar.enabled
        bar.update(summary)
    assert capsys.readouterr().out == ""
    with RunProgress(10, enabled=True, already=2) as bar:
        bar.update(summary)
        task = bar._progress.tasks[0]  # type: ignore[union-attr]
        assert task.completed == 4 and task.total == 10
        assert task.fields["failures"] == "1 failed, 1 unscored" and task.fields["cost"] == "$0.00"


# -- kill and resume at the CLI ----------------------------------------------------------------------------
CLI = "import sys; from seqjudge.cli import main; sys.argv[0] = 'seqjudge'; main()"


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL (POSIX)")
def test_a_run_killed_mid_way_resumes_without_asking_about_a_stored_trace_again(tmp_path: Path) -> None:
    n = 30
    rules, traces, ids = write_suite(tmp_path / "suite", n)
    store = tmp_path / "db" / "seqjudge.db"
    lock = threading.Lock()
    asked: list[str | None] = []

    def responder(request: RecordedRequest) -> FakeReply:
        with lock:
            asked.append(case_of(request))
        return openai_chat(VALID, delay=0.1)

    with FakeLLMServer(responder=responder) as srv:
        args = cli_args(rules, traces, srv.openai_base_url)
        args += ["--store", str(store), "--no-cache", "--concurrency", "2"]
        env = {**os.environ, "OPENAI_API_KEY": "test"}
        child = subprocess.Popen(
            [sys.executable, "-c", CLI, *args],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if child.poll() is not None:
                    raise AssertionError(f"the run ended before the kill: {child.stderr.read()!r}")  # type: ignore[union-attr]
                if store.exists() and len(_try_ids(store)) >= 6:
                    break
                time.sleep(0.02)
            else:
                raise AssertionError("no results were stored in time")
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=30)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        assert child.returncode == -signal.SIGKILL
        before = set(stored_ids(store))
        asked_before = len(asked)
        assert 6 <= len(before) < n

        assert run(["run", "--resume", "latest", "--store", str(store)]) == 0
        again = asked[asked_before:]
    cases_before = {f"CASE-{int(t[1:]):04d}" for t in before}
    assert not cases_before & set(again)  # no stored trace was asked about again
    after = stored_ids(store)
    assert sorted(after) == ids and len(after) == len(set(after)) == n  # exactly one result per trace
    with Store(store) as db:
        info = db.run_info(db.resolve_run("latest"))
    assert info.status == "completed" and info.totals is not None and info.totals["traces"] == n


def _try_ids(store: Path) -> list[str]:
    try:
        return stored_ids(store)
    except sqlite3.Error:  # the child is creating the schema
        return []
