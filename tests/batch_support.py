"""What the batch tests of both providers share: a small suite, a judge that answers per trace, the real
SDK providers pointed at the loopback fake with its batch emulator, and store comparisons."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fakes.batches import Answer, BatchEmulator, Errored, Expired, body_text
from fakes.server import FakeLLMServer
from seqjudge.batch import collect_run, submit_run
from seqjudge.config import RunConfig
from seqjudge.judge.providers import get_provider, provider_profile
from seqjudge.rules.model import RuleSet
from seqjudge.store import Store
from seqjudge.trace import Trace

__all__ = ["Errored", "Expired"]

RULES_DATA: dict[str, Any] = {
    "rules": [
        {"id": "verify_first", "type": "before", "first": "VerifyIdentity", "then": "DeleteCustomer"},
        {"id": "one_email", "type": "max_calls", "tool": "SendEmail", "max": 1, "severity": "warning"},
    ]
}
RULES = RuleSet.model_validate(RULES_DATA)
MODELS = {"openai": "openai:gpt-4o", "anthropic": "anthropic:claude-haiku-4-5"}
REF = re.compile(r'"case_ref":"(C-\d+)"')


def _key_env(api: str) -> str:
    profile = provider_profile(api)
    assert profile is not None and profile.key_env is not None
    return profile.key_env


def make_trace(i: int) -> Trace:
    """Even traces verify first (pass); odd ones delete first (verify_first fails, critical)."""
    verify = {"tool_name": "VerifyIdentity", "arguments": {"case_ref": f"C-{i}"}}
    delete = {"tool_name": "DeleteCustomer", "arguments": {"case_ref": f"C-{i}"}}
    email = {"tool_name": "SendEmail", "arguments": {"case_ref": f"C-{i}", "to": f"c{i}@example.com"}}
    calls = [verify, delete, email] if i % 2 == 0 else [delete, verify, email]
    return Trace.model_validate({"trace_id": f"t{i}", "calls": calls})


def suite(n: int) -> list[Trace]:
    return [make_trace(i) for i in range(n)]


def judgement(ref: str) -> dict[str, Any]:
    """The correct judgement of ``make_trace`` number ``ref``; its summary names the trace."""
    i = int(ref.split("-")[1])
    if i % 2 == 0:
        return {
            "sequence_correctness_score": 1.0,
            "total_rules_checked": 2,
            "rules_passed": 2,
            "rules_failed": 0,
            "violations": [],
            "missing_prerequisites": [],
            "summary": f"{ref}: every rule passed.",
        }
    return {
        "sequence_correctness_score": 0.0,
        "total_rules_checked": 2,
        "rules_passed": 1,
        "rules_failed": 1,
        "violations": [
            {
                "rule_id": "verify_first",
                "rule_description": "VerifyIdentity must succeed before DeleteCustomer is called",
                "violation_type": "out_of_order",
                "expected_order": "VerifyIdentity, then DeleteCustomer",
                "actual_order": "DeleteCustomer (call 0), then VerifyIdentity (call 1)",
                "offending_call_index": 0,
                "severity": "critical",
                "explanation": f"{ref}: the customer was deleted before being verified.",
            }
        ],
        "missing_prerequisites": [],
        "summary": f"{ref}: verify_first failed.",
    }


def ref_of(body: dict[str, Any]) -> str:
    match = REF.search(body_text(body))
    assert match, "every judge request carries its trace"
    return match.group(1)


def is_reask(body: dict[str, Any]) -> bool:
    return any(m.get("role") == "assistant" for m in body.get("messages", []))


@dataclass
class Judge:
    """Answers per trace: ``script[ref]`` is a list of answers, one per request for that trace (the last
    one repeats); traces without a script get their correct judgement. ``calls`` counts requests per ref."""

    script: dict[str, list[Answer]] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)

    def __call__(self, api: str, custom_id: str | None, body: dict[str, Any]) -> Answer:
        ref = ref_of(body)
        n = self.calls.get(ref, 0)
        self.calls[ref] = n + 1
        answers = self.script.get(ref)
        if not answers:
            return judgement(ref)
        return answers[min(n, len(answers) - 1)]


@dataclass
class Env:
    api: str
    server: FakeLLMServer
    emulator: BatchEmulator
    judge: Judge
    provider: Any
    cfg: RunConfig
    store: Store

    def submit(self, traces: list[Trace], **kw: Any) -> Any:
        return asyncio.run(self._submit(traces, **kw))

    async def _submit(self, traces: list[Trace], **kw: Any) -> Any:
        try:
            return await submit_run(self.cfg, RULES, traces, self.store, provider=self.provider, **kw)
        finally:
            await self.provider.aclose()

    def collect(self, run_id: str, **kw: Any) -> Any:
        return asyncio.run(self._collect(run_id, **kw))

    async def _collect(self, run_id: str, **kw: Any) -> Any:
        try:
            return await collect_run(self.store, run_id, provider=self.provider, **kw)
        finally:
            await self.provider.aclose()

    def batch_paths(self) -> list[str]:
        return [p for p in self.server.paths() if "batches" in p or "files" in p]


@contextmanager
def batch_env(
    api: str,
    tmp_path: Path,
    monkeypatch: Any,
    *,
    script: dict[str, list[Answer]] | None = None,
    polls_before_end: int = 0,
    **cfg_updates: Any,
) -> Iterator[Env]:
    monkeypatch.setenv(_key_env(api), "sk-test-batch-key-000")
    judge = Judge(dict(script or {}))
    emulator = BatchEmulator(judge, polls_before_end=polls_before_end, online=True)
    with FakeLLMServer(responder=emulator) as server, Store(tmp_path / "seqjudge.db") as store:
        base_url = server.openai_base_url if api == "openai" else server.anthropic_base_url
        provider = get_provider(
            MODELS[api], base_url=base_url, strict_response_validation=True, max_retries=0
        )
        cfg = RunConfig(rules="rules.yaml", traces="traces.jsonl", model=MODELS[api], store=str(store.path))
        cfg = cfg.model_copy(
            update={
                "model_options": cfg.model_options.model_copy(update={"base_url": base_url}),
                **cfg_updates,
            }
        )
        yield Env(api, server, emulator, judge, provider, cfg, store)


def comparable(data: Any) -> Any:
    """A stored result's JSON without what legitimately differs between two runs (latencies)."""
    if isinstance(data, dict):
        return {k: comparable(v) for k, v in data.items() if k != "latency_s"}
    if isinstance(data, list):
        return [comparable(v) for v in data]
    return data


def stored_results(store: Store, run_id: str) -> dict[str, Any]:
    return {s.trace_id: comparable(s.result.model_dump(mode="json")) for s in store.results(run_id)}


def write_suite(tmp_path: Path, traces: list[Trace]) -> tuple[Path, Path]:
    import yaml

    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump(RULES_DATA), encoding="utf-8")
    lines = tmp_path / "traces.jsonl"
    lines.write_text("".join(json.dumps(t.model_dump(mode="json")) + "\n" for t in traces), encoding="utf-8")
    return rules, lines


# -- scenarios both providers pass (each test file runs them against its own API) ----------------------------
def scenario_submit_then_collect_shuffled(api: str, tmp_path: Path, monkeypatch: Any) -> None:
    """Submit leaves the run batch_pending; status polls; collect joins shuffled results by custom_id."""
    from seqjudge.batch import poll_batches

    with batch_env(api, tmp_path, monkeypatch, polls_before_end=1) as env:
        traces = suite(6)
        sub = env.submit(traces)
        assert env.store.run_info(sub.run_id).status == "batch_pending"
        assert sub.submitted == 6 and sub.stored == 0 and len(sub.batch_ids) == 1
        assert not list(env.store.results(sub.run_id))
        polled = asyncio.run(poll_batches(env.store, sub.run_id, provider=env.provider))
        assert [(b.id, b.state) for b in polled] == [(sub.batch_ids[0], "submitted")]
        assert polled[0].status == ("in_progress" if api == "openai" else "in_progress")
        first = env.collect(sub.run_id)  # the batch ends on this poll
        assert first.status == "completed" and first.recorded == 6 and first.stored == 6
        served = env.emulator.result_orders[sub.batch_ids[0]]
        submitted = [cid for cid, _ in env.emulator.submitted[0][2]]
        assert sorted(served) == sorted(submitted) and served != submitted  # shuffled, all there
        info = env.store.run_info(sub.run_id)
        assert info.status == "completed" and info.counts["traces"] == 6
        for stored in env.store.results(sub.run_id):
            judge = stored.result.judge
            ref = f"C-{stored.trace_id[1:]}"
            assert judge.status == "scored" and judge.report.summary.startswith(f"{ref}:"), stored.trace_id
            assert [a.error_stage for a in judge.attempts] == [None]
        verdicts = {s.trace_id: s.result.verdict for s in env.store.results(sub.run_id)}
        assert verdicts == {f"t{i}": "pass" if i % 2 == 0 else "fail" for i in range(6)}
        assert env.judge.calls == {f"C-{i}": 1 for i in range(6)}  # nothing online, nothing twice


def scenario_malformed_reasked_online(api: str, tmp_path: Path, monkeypatch: Any) -> None:
    with batch_env(api, tmp_path, monkeypatch, script={"C-2": ["this is not JSON", judgement("C-2")]}) as env:
        sub = env.submit(suite(4))
        done = env.collect(sub.run_id)
        assert done.status == "completed" and done.reasked_online == 1
        judge = env.store.result(sub.run_id, "t2").result.judge
        assert judge.status == "scored"
        assert [(a.n, a.error_stage, a.reasked) for a in judge.attempts] == [
            (1, "parse", False),
            (2, None, True),
        ]
        assert judge.fingerprint.attempts_used == 2
        # The one online call is the re-ask: the original prompt, the bad reply, what was wrong.
        assert len(env.emulator.online_bodies) == 1
        reask = env.emulator.online_bodies[0]
        assert ref_of(reask) == "C-2" and is_reask(reask)
        assert "this is not JSON" in body_text(reask) and "not valid JSON" in body_text(reask)
        attempts = env.store.attempts(sub.run_id, "t2")
        assert [a.error_stage for a in attempts] == ["parse", None]


def scenario_malformed_reasked_in_batch(api: str, tmp_path: Path, monkeypatch: Any) -> None:
    script = {"C-1": ['{"sequence_correctness_score": "high"}', judgement("C-1")]}
    with batch_env(api, tmp_path, monkeypatch, script=script) as env:
        sub = env.submit(suite(3))
        first = env.collect(sub.run_id, reask="batch")
        assert first.status == "batch_pending" and first.stored == 2 and first.reasked_online == 0
        assert len(first.follow_up_batches) == 1
        follow = env.store.batches(sub.run_id)[-1]
        assert (follow.round, follow.purpose, follow.request_count) == (1, "reask", 1)
        _, _, lines = env.emulator.submitted[-1]
        assert len(lines) == 1 and is_reask(lines[0][1]) and ref_of(lines[0][1]) == "C-1"
        done = env.collect(sub.run_id, reask="batch")
        assert done.status == "completed" and done.stored == 1
        judge = env.store.result(sub.run_id, "t1").result.judge
        assert judge.status == "scored"
        assert [(a.error_stage, a.reasked) for a in judge.attempts] == [("schema", False), (None, True)]
        assert env.emulator.online_bodies == []


def scenario_errored_retried_then_unscored(api: str, tmp_path: Path, monkeypatch: Any) -> None:
    script: dict[str, list[Answer]] = {
        "C-0": [Errored("overloaded, try later")],  # fails twice: unscored
        "C-1": [Expired(), judgement("C-1")],  # expires once, then answered
    }
    with batch_env(api, tmp_path, monkeypatch, script=script) as env:
        sub = env.submit(suite(3))
        first = env.collect(sub.run_id)
        assert first.stored == 1 and first.status == "batch_pending"
        retry = env.store.batches(sub.run_id)[-1]
        assert (retry.round, retry.purpose, retry.request_count) == (1, "retry", 2)
        # The retry is the same request under the same custom_id.
        first_lines = dict(env.emulator.submitted[0][2])
        for cid, body in env.emulator.submitted[-1][2]:
            assert first_lines[cid] == body
        done = env.collect(sub.run_id)
        assert done.status == "completed" and done.stored == 2
        lost = env.store.result(sub.run_id, "t0").result
        assert lost.judge.status == "unscored" and lost.judge.attempts == []
        assert "follow-up batch" in lost.judge.reason and "overloaded, try later" in lost.judge.reason
        assert lost.review_reasons == ["unscored"] and lost.verdict == "review"
        late = env.store.result(sub.run_id, "t1").result
        assert late.judge.status == "scored" and late.verdict == "fail"
        assert env.judge.calls == {"C-0": 2, "C-1": 2, "C-2": 1}
        assert env.emulator.online_bodies == []
        totals = env.store.run_info(sub.run_id).totals
        assert totals["judge"] == {"scored": 2, "unscored": 1} and totals["traces"] == 3


def scenario_same_as_online(api: str, tmp_path: Path, monkeypatch: Any) -> None:
    """The same suite with the same replies, online and through the batch API: the same stored results."""
    from seqjudge.runner import run_traces

    script = {"C-3": ["```json\n{not json at all\n```", judgement("C-3")]}
    traces = suite(6)
    with batch_env(api, tmp_path, monkeypatch, script=script, cache=False) as env:
        online_cfg = env.cfg.model_copy(update={"concurrency": 2})

        async def online() -> Any:
            try:
                return await run_traces(online_cfg, RULES, traces, env.store, provider=env.provider)
            finally:
                await env.provider.aclose()

        online_run = asyncio.run(online()).run_id
        env.judge.calls.clear()
        sub = env.submit(traces)
        assert env.collect(sub.run_id).status == "completed"
        online_results = stored_results(env.store, online_run)
        batch_results = stored_results(env.store, sub.run_id)
        assert set(batch_results) == {f"t{i}" for i in range(6)}
        for tid in online_results:
            assert batch_results[tid] == online_results[tid], tid
        assert batch_results["t3"]["judge"]["attempts"][0]["error_stage"] == "parse"
        # The rows beside the results are the same too: rule decisions, attempts, review items.
        for tid in online_results:
            a, b = env.store.attempts(online_run, tid), env.store.attempts(sub.run_id, tid)
            assert [x.model_dump(exclude={"latency_s"}) for x in a] == [
                x.model_dump(exclude={"latency_s"}) for x in b
            ]
        reviews = {
            run: sorted((i.trace_id, tuple(i.reasons)) for i in env.store.review_items(run=run))
            for run in (online_run, sub.run_id)
        }
        assert reviews[online_run] == reviews[sub.run_id]
        on, ba = env.store.run_info(online_run), env.store.run_info(sub.run_id)
        assert on.fingerprint == ba.fingerprint and on.counts == ba.counts and on.status == ba.status
        for key in ("traces", "pass", "fail", "review", "review_reasons", "judge", "tokens", "agreement"):
            assert on.totals[key] == ba.totals[key], key


def scenario_collect_is_resume_safe(api: str, tmp_path: Path, monkeypatch: Any) -> None:
    script = {"C-1": ["not json", judgement("C-1")]}
    with batch_env(api, tmp_path, monkeypatch, script=script) as env:
        sub = env.submit(suite(4))
        real_save = env.store.save_result
        saved: list[str] = []

        def dies_after_two(run_id: str, trace: Any, result: Any, **options: Any) -> None:
            if len(saved) == 2:
                raise KeyboardInterrupt  # the process is killed here
            real_save(run_id, trace, result, **options)
            saved.append(result.trace_id)

        monkeypatch.setattr(env.store, "save_result", dies_after_two)
        try:
            env.collect(sub.run_id)
        except KeyboardInterrupt:
            pass
        else:  # pragma: no cover - the kill must happen
            raise AssertionError("collect was not interrupted")
        monkeypatch.setattr(env.store, "save_result", real_save)
        assert len(list(env.store.results(sub.run_id))) == 2
        reads = [p for p in env.server.paths() if p.endswith("/content") or p.endswith("/results")]
        done = env.collect(sub.run_id)
        assert done.status == "completed" and done.recorded == 0  # results were kept: not fetched again
        assert [p for p in env.server.paths() if p.endswith("/content") or p.endswith("/results")] == reads
        again = env.collect(sub.run_id)
        assert (again.status, again.recorded, again.stored) == ("completed", 0, 0)
        ids = [s.trace_id for s in env.store.results(sub.run_id)]
        assert sorted(ids) == ["t0", "t1", "t2", "t3"]  # exactly one result per trace
        judge = env.store.result(sub.run_id, "t1").result.judge
        assert [a.error_stage for a in judge.attempts] == ["parse", None]
        assert len(env.store.batches(sub.run_id)) == 1  # no batch submitted twice


def scenario_cache_makes_reruns_free(api: str, tmp_path: Path, monkeypatch: Any) -> None:
    """Collected answers fill the response cache: an unchanged rerun, batch or online, calls nothing."""
    from seqjudge.runner import run_traces

    with batch_env(api, tmp_path, monkeypatch) as env:
        sub = env.submit(suite(3))
        env.collect(sub.run_id)
        before = len(env.server.requests)
        again = env.submit(suite(3))
        assert again.status == "completed" and again.batch_ids == [] and again.stored == 3
        assert env.store.run_info(again.run_id).status == "completed"

        async def online() -> Any:
            try:
                return await run_traces(env.cfg, RULES, suite(3), env.store, provider=env.provider)
            finally:
                await env.provider.aclose()

        rerun = asyncio.run(online())
        assert rerun.traces == 3 and len(env.server.requests) == before  # zero model calls
        assert (
            stored_results(env.store, again.run_id).keys() == stored_results(env.store, rerun.run_id).keys()
        )
        cached = env.store.result(again.run_id, "t0").result.judge.attempts
        assert [a.cached for a in cached] == [True]


def scenario_cli(api: str, tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    """`seqjudge run --batch`, `seqjudge batch status`, `seqjudge batch collect --wait` end to end."""
    from seqjudge.cli import run

    script = {"C-1": ["not json", judgement("C-1")]}
    with batch_env(api, tmp_path, monkeypatch, script=script, polls_before_end=1) as env:
        rules, traces = write_suite(tmp_path, suite(3))
        db = str(tmp_path / "cli.db")
        base = env.cfg.model_options.base_url
        code = run(
            [
                "run",
                str(rules),
                str(traces),
                "--model",
                MODELS[api],
                "--base-url",
                base,
                "--store",
                db,
                "--batch",
            ]
        )
        out = capsys.readouterr().out
        assert code == 0, out
        run_id = re.search(r"^run (\S+):", out, re.M).group(1)  # type: ignore[union-attr]
        batch_id = env.emulator.submitted[0][1]
        assert f"batch {batch_id}: 3 request(s)" in out and "batch_pending" in out
        assert run(["batch", "status", run_id, "--store", db]) == 0
        out = capsys.readouterr().out
        assert f"run {run_id}: batch_pending" in out
        assert re.search(rf"{batch_id}\s+0\s+first\s+in_progress\s+submitted\s+3", out), out
        assert run(["batch", "status", "latest", "--store", db, "--format", "json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert data["status"] == "batch_pending" and data["batches"][0]["id"] == batch_id
        code = run(["batch", "collect", run_id, "--store", db, "--wait", "--poll-interval", "0"])
        out = capsys.readouterr().out
        assert code == 1, out  # t1 fails verify_first: not every trace passed
        assert "3 result(s) recorded" in out and "1 re-asked online" in out
        assert f"run {run_id}: 3 trace(s) decided: 2 pass, 1 fail, 0 review" in out
        assert run(["batch", "collect", run_id, "--store", db, "--format", "json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert (data["status"], data["stored"], data["recorded"]) == ("completed", 0, 0)
        assert run(["runs", "list", "--store", db, "--format", "json"]) == 0
        assert json.loads(capsys.readouterr().out)[0]["status"] == "completed"
        # A batch run is not resumed online: its traces are out in a batch.
        code = run(
            [
                "run",
                str(rules),
                str(traces),
                "--model",
                MODELS[api],
                "--store",
                db,
                "--batch",
                "--resume",
                run_id,
            ]
        )
        assert code == 2 and "--resume" in capsys.readouterr().err
