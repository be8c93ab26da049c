"""Escalation (issue 18, part 3): `--model cheap --escalate strong`. Judge rules the first judge cannot
auto-decide under its certificate go to the next, only those; what the last cannot settle goes to review; the
summary says what each stage settled and what it cost."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from calibrate_helpers import judge_output, save_test_certificate
from fakes.server import FakeLLMServer, FakeReply, RecordedRequest, openai_chat
from seqjudge.certificate import (
    CertifiedRule,
    certificates_dir,
)
from seqjudge.cli import run
from seqjudge.config import RunConfig
from seqjudge.judge.prompt import render_trace_data
from seqjudge.judge.providers.base import JudgeRequest, ProviderReply
from seqjudge.judge.providers.scripted import ScriptedProvider
from seqjudge.redact import redact_trace
from seqjudge.rules.load import parse_rules
from seqjudge.rules.model import RuleSet
from seqjudge.runner import run_traces
from seqjudge.store import Store
from seqjudge.trace import Trace

READ, CONFIRM, POLITE = "d-read-first", "j-confirm-x1", "j-polite-x2"
RULES = {
    "rules": [
        {"id": READ, "type": "before", "first": "Read", "then": "Write", "severity": "critical"},
        {"id": CONFIRM, "type": "judge", "severity": "critical", "description": "Confirm before writing."},
        {"id": POLITE, "type": "judge", "severity": "warning", "description": "Stay polite."},
    ]
}
CHEAP, STRONG = "scripted:cheap", "scripted:strong"
PRICES = {CHEAP: {"input": 0.1, "output": 0.4}, STRONG: {"input": 5.0, "output": 20.0}}


def ruleset() -> RuleSet:
    return parse_rules(RULES, source="<test>")


def traces(n: int) -> list[Trace]:
    def calls(i: int) -> list[dict[str, Any]]:  # distinct content: the judge tells traces apart by it
        return [{"tool_name": "Read", "arguments": {"record": i}}, {"tool_name": "Write"}]

    return [Trace.model_validate({"trace_id": f"t{i}", "calls": calls(i)}) for i in range(n)]


def reply(trace: Trace, asked: list[str], said: Mapping[str, tuple[str, float]]) -> dict[str, Any]:
    """A valid judge reply about ``asked``, each rule ``said[rule] = (decision, confidence)``."""
    failed = [r for r in asked if said[r][0] == "failed"]
    out = judge_output(trace, ruleset(), failed, asked)
    out["rule_decisions"] = [{"rule_id": r, "decision": said[r][0], "confidence": said[r][1]} for r in asked]
    return out


Script = Mapping[str, Mapping[str, tuple[str, float]] | str]


class Judge(ScriptedProvider):
    """Answers each trace as ``script[trace_id][rule] = (decision, confidence)`` says, about exactly the rules
    the prompt asks (a string instead: that text, as a broken reply), and remembers what it was asked."""

    def __init__(self, items: Iterable[Trace], script: Script, model: str):
        super().__init__([], model=model)
        self.traces = {render_trace_data(redact_trace(t)).nonce: t for t in items}
        self.script = script
        self.asked: dict[str, list[str]] = {}

    async def complete(self, request: JudgeRequest) -> ProviderReply:
        trace = next(t for token, t in self.traces.items() if token in request.dynamic_prompt)
        asked = [r for r in (READ, CONFIRM, POLITE) if r in request.static_prompt]
        self.asked[trace.trace_id] = asked
        said = self.script[trace.trace_id]
        self.add(said if isinstance(said, str) else reply(trace, asked, said))
        return await super().complete(request)


def certify(
    store: Path,
    model: str,
    auto_pass: Mapping[str, float | None],
    auto_fail: Mapping[str, float | None] | None = None,
) -> None:
    entries = [
        CertifiedRule(
            rule_id=rid,
            risk_level="medium",
            auto_pass=t,
            auto_fail=(auto_fail or {}).get(rid),
            alpha=0.05,
            delta=0.05,
        )
        for rid, t in auto_pass.items()
    ]
    save_test_certificate(store, ruleset(), entries, model=model)


def run_cascade(
    tmp_path: Path, cheap: Judge, strong: Judge, items: list[Trace], **kw: Any
) -> tuple[Any, dict[str, Any]]:
    cfg = RunConfig(
        rules="-",
        traces="-",
        store=str(tmp_path / "s.db"),
        model=CHEAP,
        escalate=[STRONG],
        concurrency=2,
        cache=False,
        prices=PRICES,
        **kw,
    )
    with Store(cfg.store) as db:
        summary = asyncio.run(run_traces(cfg, ruleset(), items, db, provider=cheap, escalation=[strong]))
        stored = {s.trace_id: s.result for s in db.results(summary.run_id)}
    return summary, stored


def test_only_what_the_cheap_judge_cannot_settle_goes_to_the_strong_one(tmp_path: Path) -> None:
    items = traces(4)
    certify(tmp_path / "s.db", CHEAP, {CONFIRM: 0.9, POLITE: 0.9})
    certify(tmp_path / "s.db", STRONG, {CONFIRM: 0.8, POLITE: 0.8}, auto_fail={CONFIRM: 0.85})
    cheap_says = {
        "t0": {READ: ("passed", 0.99), CONFIRM: ("passed", 0.95), POLITE: ("passed", 0.97)},  # settled
        "t1": {READ: ("passed", 0.99), CONFIRM: ("passed", 0.6), POLITE: ("passed", 0.97)},  # confirm up
        "t2": {READ: ("passed", 0.99), CONFIRM: ("passed", 0.5), POLITE: ("passed", 0.5)},  # both up
        "t3": {READ: ("passed", 0.99), CONFIRM: ("passed", 0.5), POLITE: ("passed", 0.95)},  # confirm up
    }
    strong_says = {
        "t1": {CONFIRM: ("failed", 0.9)},  # the strong judge finds the violation, confidently
        "t2": {CONFIRM: ("passed", 0.85), POLITE: ("passed", 0.9)},
        "t3": {CONFIRM: ("passed", 0.7)},  # still unsure: review
    }
    cheap, strong = Judge(items, cheap_says, "cheap"), Judge(items, strong_says, "strong")
    summary, stored = run_cascade(tmp_path, cheap, strong, items)

    assert set(cheap.asked) == {"t0", "t1", "t2", "t3"}
    assert all(asked == [READ, CONFIRM, POLITE] for asked in cheap.asked.values())
    # The strong judge is asked only about the judge rules left unsettled, never the engine's rule.
    assert strong.asked == {"t1": [CONFIRM], "t2": [CONFIRM, POLITE], "t3": [CONFIRM]}

    t0, t1, t2, t3 = (stored[f"t{i}"] for i in range(4))
    assert t0.verdict == "pass" and [s.model for s in t0.stages] == [CHEAP]
    final = {d.rule_id: (d.final, d.confidence) for d in t1.rules}
    assert final[CONFIRM] == ("failed", 0.9) and final[POLITE] == ("passed", 0.97)  # each from its settler
    assert t1.verdict == "fail" and [s.settled for s in t1.stages] == [[POLITE], [CONFIRM]]
    assert t2.verdict == "pass" and t2.stages[1].settled == [CONFIRM, POLITE]
    # The last judge's answer is routed by its own certificate: below it, review (low_confidence).
    assert t3.verdict == "review" and t3.review_reasons == ["low_confidence"]
    assert {d.rule_id: d.route for d in t3.rules}[CONFIRM] == "review"
    assert t3.stages[1].unsettled == [CONFIRM]
    # Every stage's raw replies are kept with the trace.
    assert len(t2.judge.attempts) == 2 and t2.judge.usage.input_tokens == sum(
        s.input_tokens for s in t2.stages
    )

    rows = {row["model"]: row for row in summary.totals()["stages"]}
    assert rows[CHEAP]["traces"] == 4 and rows[CHEAP]["settled"] == 2 + 1 + 0 + 1  # t0 both, t1/t3 polite
    assert rows[CHEAP]["passed_on"] == 4 and rows[STRONG]["traces"] == 3
    assert rows[STRONG]["settled"] == 3 and rows[STRONG]["passed_on"] == 1
    # Each judge's tokens at its own price; the run's cost is their sum.
    cheap_cost = sum(
        s.input_tokens * 0.1e-6 + s.output_tokens * 0.4e-6
        for r in stored.values()
        for s in r.stages
        if s.model == CHEAP
    )
    strong_cost = sum(
        s.input_tokens * 5e-6 + s.output_tokens * 20e-6
        for r in stored.values()
        for s in r.stages
        if s.model == STRONG
    )
    assert rows[CHEAP]["cost_usd"] == pytest.approx(cheap_cost, abs=1e-6)
    assert rows[STRONG]["cost_usd"] == pytest.approx(strong_cost, abs=1e-6)
    assert summary.totals()["cost"]["usd"] == pytest.approx(cheap_cost + strong_cost, abs=1e-6)
    assert summary.reasons["low_confidence"] == 1
    from seqjudge.outputs.listings import review_lines

    with Store(tmp_path / "s.db") as db:
        [item] = db.review_items(reason="low_confidence")
        shown = "\n".join(review_lines(db.review_item(item.id)))
    assert f"escalation 1. {CHEAP} (scored): asked {READ}, {CONFIRM}, {POLITE}; settled {POLITE}" in shown
    assert f"escalation 2. {STRONG} (scored): asked {CONFIRM}; settled -; passed to review" in shown
    assert "Raw judge replies (2)" in shown


def test_an_uncertified_judge_settles_nothing_and_the_summary_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    items = traces(2)
    certify(tmp_path / "s.db", STRONG, {CONFIRM: 0.8, POLITE: 0.8})  # none for the cheap judge
    sure = {READ: ("passed", 0.99), CONFIRM: ("passed", 0.99), POLITE: ("passed", 0.99)}
    cheap = Judge(items, {t.trace_id: sure for t in items}, "cheap")
    strong = Judge(items, {t.trace_id: sure for t in items}, "strong")
    summary, stored = run_cascade(tmp_path, cheap, strong, items)
    assert strong.asked == {"t0": [CONFIRM, POLITE], "t1": [CONFIRM, POLITE]}
    assert all(r.verdict == "pass" and r.stages[0].certified is False for r in stored.values())
    assert any("(scripted:cheap) has no certificate" in n and "passes them on" in n for n in summary.notes)
    assert not any("are advisory" in n for n in summary.notes)  # the one-judge note would mislead here
    from seqjudge.outputs.summary import run_text

    run_text(summary)
    out = capsys.readouterr().out
    assert "1. scripted:cheap: asked about 2 trace(s), settled 0, passed 4 to scripted:strong" in out
    assert "2. scripted:strong: asked about 2 trace(s), settled 4, passed 0 to review" in out


def test_fails_gate_as_in_a_one_judge_run_and_an_unscored_stage_passes_everything_on(
    tmp_path: Path,
) -> None:
    items = traces(3)
    certify(tmp_path / "s.db", CHEAP, {CONFIRM: 0.9, POLITE: 0.9}, auto_fail={CONFIRM: 0.8})
    certify(tmp_path / "s.db", STRONG, {CONFIRM: 0.8, POLITE: 0.8})
    cheap_says: Script = {
        # confirm: a fail under the certified auto-fail 0.8 goes on; polite has no auto-fail: its fail stands.
        "t0": {READ: ("passed", 0.99), CONFIRM: ("failed", 0.7), POLITE: ("failed", 0.99)},
        "t1": "not json at all",  # never validates: unscored after one attempt
        "t2": {READ: ("passed", 0.99), CONFIRM: ("failed", 0.85), POLITE: ("passed", 0.95)},  # both stand
    }
    strong_says = {
        "t0": {CONFIRM: ("passed", 0.9)},
        "t1": {CONFIRM: ("passed", 0.9), POLITE: ("passed", 0.9)},
    }
    cheap, strong = Judge(items, cheap_says, "cheap"), Judge(items, strong_says, "strong")
    _, stored = run_cascade(tmp_path, cheap, strong, items, max_attempts=1)
    t0, t1, t2 = stored["t0"], stored["t1"], stored["t2"]
    assert t0.stages[0].settled == [POLITE] and strong.asked["t0"] == [CONFIRM]
    assert {d.rule_id: d.final for d in t0.rules} == {READ: "passed", CONFIRM: "passed", POLITE: "failed"}
    assert "t2" not in strong.asked and t2.verdict == "fail" and t2.stages[0].settled == [CONFIRM, POLITE]
    # An unscored first answer settles nothing: the strong judge gets every judge rule.
    assert t1.stages[0].status == "unscored" and strong.asked["t1"] == [CONFIRM, POLITE]
    assert t1.verdict == "pass" and t1.judge.status == "scored"


def cli_run(tmp_path: Path, items: list[Trace]) -> list[str]:
    """`seqjudge run RULES TRACES --store ... --model openai:gpt-4o-mini` over ``items``, files written."""
    rules, trace_file = tmp_path / "rules.json", tmp_path / "t.jsonl"
    rules.write_text(json.dumps(RULES))
    trace_file.write_text("".join(t.model_dump_json() + "\n" for t in items))
    store = str(tmp_path / "s.db")
    return ["run", str(rules), str(trace_file), "--store", store, "--model", "openai:gpt-4o-mini"]


def test_an_escalation_model_without_its_key_is_an_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")
    code = run([*cli_run(tmp_path, traces(1)), "--escalate", "anthropic:claude-sonnet-4-5"])
    err = capsys.readouterr().err
    assert code == 2 and "--escalate" in err and "ANTHROPIC_API_KEY is not set" in err
    assert "Traceback" not in err and "sk-test" not in err


def test_the_cascade_through_the_openai_sdk_with_two_models(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-cascade-0123456789")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    items = traces(3)
    store = tmp_path / "s.db"
    small, large = "openai:judge-small", "openai:judge-large"
    certify(store, small, {CONFIRM: 0.9, POLITE: 0.9})
    certify(store, large, {CONFIRM: 0.8, POLITE: 0.8})
    sure = {READ: ("passed", 0.99), CONFIRM: ("passed", 0.95), POLITE: ("passed", 0.95)}
    says: dict[str, dict[str, Any]] = {
        "judge-small": {
            "t0": sure,
            "t1": {**sure, CONFIRM: ("passed", 0.4)},
            "t2": {**sure, POLITE: ("passed", 0.3)},
        },
        "judge-large": {"t1": {CONFIRM: ("passed", 0.9)}, "t2": {POLITE: ("passed", 0.5)}},
    }
    nonces = {render_trace_data(redact_trace(t)).nonce: t for t in items}
    asked: list[tuple[str, str, list[str]]] = []

    def respond(request: RecordedRequest) -> FakeReply:
        model, text = request.body["model"], json.dumps(request.body["messages"])
        trace = next(t for token, t in nonces.items() if token in text)
        rules = [r for r in (READ, CONFIRM, POLITE) if r in text]
        asked.append((model, trace.trace_id, rules))
        said = says[model][trace.trace_id]
        return openai_chat(reply(trace, rules, said), model=model, prompt_tokens=1000, completion_tokens=100)

    rules_file, trace_file, prices = tmp_path / "rules.json", tmp_path / "t.jsonl", tmp_path / "prices.json"
    rules_file.write_text(json.dumps(RULES))
    trace_file.write_text("".join(t.model_dump_json() + "\n" for t in items))
    prices.write_text(
        json.dumps({small: {"input": 0.1, "output": 0.4}, large: {"input": 5.0, "output": 20.0}})
    )
    with FakeLLMServer(responder=respond) as server:
        code = run(
            [
                "run",
                str(rules_file),
                str(trace_file),
                "--store",
                str(store),
                "--model",
                small,
                "--escalate",
                large,
                "--base-url",
                server.openai_base_url,
                "--prices",
                str(prices),
                "--no-cache",
                "--format",
                "json",
            ]
        )
        paths = set(server.paths())
    out = capsys.readouterr().out
    assert code == 1  # t2: the large judge was not sure of polite either: review
    assert paths == {"/v1/chat/completions"}
    assert sorted(a for a in asked if a[0] == "judge-small") == [
        ("judge-small", f"t{i}", [READ, CONFIRM, POLITE]) for i in range(3)
    ]
    assert sorted(a for a in asked if a[0] == "judge-large") == [
        ("judge-large", "t1", [CONFIRM]),
        ("judge-large", "t2", [POLITE]),
    ]
    totals = json.loads(out)
    stages = {row["model"]: row for row in totals["stages"]}
    assert (stages[small]["traces"], stages[small]["settled"], stages[small]["passed_on"]) == (3, 4, 2)
    assert (stages[large]["traces"], stages[large]["settled"], stages[large]["passed_on"]) == (2, 1, 1)
    # The SDK's usage, each model at its price: 3 x (1000 in, 100 out) small, 2 x the same large.
    assert stages[small]["cost_usd"] == pytest.approx(3 * (1000 * 0.1 + 100 * 0.4) / 1e6)
    assert stages[large]["cost_usd"] == pytest.approx(2 * (1000 * 5.0 + 100 * 20.0) / 1e6)
    assert totals["cost"]["usd"] == pytest.approx(stages[small]["cost_usd"] + stages[large]["cost_usd"])
    assert totals["calls"]["calls"] == 5 and totals["review_reasons"] == {"low_confidence": 1}
    assert "sk-test-cascade" not in out
    with Store(store) as db:
        info = db.run_info(db.resolve_run("latest"))
        assert info.config["escalate"] == [large] and info.fingerprint["escalate"] == [large]
    assert run(["runs", "show", "latest", "--store", str(store)]) == 0
    shown = capsys.readouterr().out
    assert "escalation 1. openai:judge-small: 3 trace(s), settled 4, passed on 2, $0.0004" in shown
    assert "escalation 2. openai:judge-large: 2 trace(s), settled 1, passed on 1, $0.0140" in shown


def test_calibrate_certifies_each_stage_then_run_uses_each_certificate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from seqjudge.certificate import load_certificates
    from seqjudge.golden import load_dataset
    from seqjudge.judge.providers import ProviderProfile, registry
    from test_calibrate_guarantee import PLAN, make_dataset, replies

    suite = make_dataset(tmp_path / "suite")
    dataset = load_dataset(suite)
    script = replies(dataset)
    made: dict[str, Any] = {}

    def factory(model: str, **options: Any) -> Any:
        from calibrate_helpers import ByTraceProvider

        made[model] = ByTraceProvider(dataset.traces, script, model=model, **options)
        return made[model]

    monkeypatch.setitem(registry._REGISTRY, "conf", ProviderProfile(name="conf", factory=factory))
    store = tmp_path / "db" / "seqjudge.db"
    base = [
        "calibrate",
        str(suite),
        "--model",
        "conf:small",
        "--escalate",
        "conf:large",
        "--store",
        str(store),
    ]
    assert run([*base, "-o", str(tmp_path / "cal.json")]) == 0
    out = capsys.readouterr().out
    assert "escalation stage 1 of 2: conf:small" in out and "escalation stage 2 of 2: conf:large" in out
    certs = {c.model: c for c in load_certificates(store.parent / "certificates")}
    assert set(certs) == {"conf:small", "conf:large"}
    assert all(c.rules[0].auto_pass == 0.95 for c in certs.values())
    for tag in ("conf-small", "conf-large"):
        assert json.loads((tmp_path / f"cal.{tag}.json").read_text())["guarantee"]["rules"][0]["rule_id"]
    assert run([*base, "--check"]) == 0
    assert (
        run(
            [
                "calibrate",
                str(suite),
                "--check",
                "--model",
                "conf:small",
                "--escalate",
                "conf:new",
                "--store",
                str(store),
            ]
        )
        == 1
    )
    assert "the judge model changed" in capsys.readouterr().out
    assert run([*base, "--write"]) == 2

    # The run: the small judge settles its 0.95 passes, the rest go to the large one and then to review.
    code = run(
        [
            "run",
            str(suite / "rules.yaml"),
            str(suite / "traces.jsonl"),
            "--model",
            "conf:small",
            "--escalate",
            "conf:large",
            "--store",
            str(store),
            "--format",
            "json",
            "--no-cache",
        ]
    )
    totals = json.loads(capsys.readouterr().out)
    assert code == 1
    rows = {row["model"]: row for row in totals["stages"]}
    # No auto-fail was certified: the judge's 4 fails stand, as in a one-judge run; its 11 passes at 0.55
    # are below both certificates: the large judge, then review.
    unsure = sum(1 for _, said, conf in PLAN if said == "passed" and conf < 0.95)
    assert rows["conf:small"]["settled"] == 65 + 4 and rows["conf:small"]["passed_on"] == unsure == 11
    assert rows["conf:large"]["traces"] == unsure and rows["conf:large"]["settled"] == 0
    assert totals["review_reasons"]["low_confidence"] == unsure


def test_strict_wants_every_judge_certified_and_batch_or_dry_run_say_what_they_cannot_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from seqjudge.errors import InputError

    items = traces(1)
    certify(tmp_path / "s.db", CHEAP, {CONFIRM: 0.9, POLITE: 0.9})  # the strong judge has none
    sure = {READ: ("passed", 0.99), CONFIRM: ("passed", 0.99), POLITE: ("passed", 0.99)}
    cheap, strong = Judge(items, {"t0": sure}, "cheap"), Judge(items, {"t0": sure}, "strong")
    cfg = RunConfig(rules="-", traces="-", store=str(tmp_path / "s.db"), model=CHEAP, escalate=[STRONG])
    with Store(cfg.store) as db, pytest.raises(InputError, match="no calibration certificate") as caught:
        asyncio.run(run_traces(cfg, ruleset(), items, db, provider=cheap, escalation=[strong], strict=True))
    assert "scripted:strong" in str(caught.value) and cheap.requests == []

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")
    args = [*cli_run(tmp_path, items), "--escalate", "openai:gpt-4o"]
    assert run([*args, "--batch"]) == 2
    assert "--batch cannot escalate" in capsys.readouterr().err
    assert run([*args, "--dry-run"]) == 0
    assert "not estimated: escalation to openai:gpt-4o" in capsys.readouterr().out


def test_when_the_next_judge_does_not_answer_the_earlier_answer_is_not_held_to_its_threshold(
    tmp_path: Path,
) -> None:
    items = traces(1)
    certify(tmp_path / "s.db", CHEAP, {CONFIRM: 0.9, POLITE: 0.9})
    certify(tmp_path / "s.db", STRONG, {CONFIRM: 0.5, POLITE: 0.5})  # a laxer threshold than 0.6 below
    cheap_says: Script = {"t0": {READ: ("passed", 0.99), CONFIRM: ("passed", 0.6), POLITE: ("passed", 0.95)}}
    cheap, strong = Judge(items, cheap_says, "cheap"), Judge(items, {"t0": "no json"}, "strong")
    _, stored = run_cascade(tmp_path, cheap, strong, items, max_attempts=1)
    t0 = stored["t0"]
    assert [s.status for s in t0.stages] == ["scored", "unscored"] and strong.asked == {"t0": [CONFIRM]}
    # The cheap judge's 0.6 would clear the strong judge's 0.5, but the strong judge never said it: review.
    assert t0.verdict == "review" and t0.review_reasons == ["low_confidence"]
    assert {d.rule_id: (d.final, d.route) for d in t0.rules}[CONFIRM] == ("deferred", "review")
    assert len(t0.judge.attempts) == 2 and t0.judge.attempts[1].error_stage == "parse"


def test_a_fatal_error_of_a_later_judge_stops_the_whole_run_and_resume_finishes_it(tmp_path: Path) -> None:
    from seqjudge.errors import ProviderError

    items = traces(4)
    certify(tmp_path / "s.db", CHEAP, {CONFIRM: 0.9, POLITE: 0.9})
    certify(tmp_path / "s.db", STRONG, {CONFIRM: 0.8, POLITE: 0.8})
    sure = {READ: ("passed", 0.99), CONFIRM: ("passed", 0.99), POLITE: ("passed", 0.99)}
    unsure = {**sure, CONFIRM: ("passed", 0.5)}
    script: Script = {"t0": sure, "t1": unsure, "t2": sure, "t3": sure}
    cheap = Judge(items, script, "cheap")
    broken = ScriptedProvider([ProviderError("bad key", kind="auth", provider="scripted")], model="strong")
    cfg = RunConfig(
        rules="-", traces="-", store=str(tmp_path / "s.db"), model=CHEAP, escalate=[STRONG], concurrency=1
    )
    with Store(cfg.store) as db:
        with pytest.raises(ProviderError, match="bad key"):
            asyncio.run(run_traces(cfg, ruleset(), items, db, provider=cheap, escalation=[broken]))
        run_id = db.resolve_run("latest")
        assert db.run_info(run_id).status == "interrupted"
        assert db.completed_trace_ids(run_id) == {
            "t0"
        }  # t1 needed the strong judge; nothing after it started
        strong = Judge(items, {"t1": {CONFIRM: ("passed", 0.9)}}, "strong")
        # A stricter certificate in place of the strong judge's does not change how the run started routes.
        folder = certificates_dir(tmp_path / "s.db")
        for path in folder.glob("*.json"):
            if f'"model": "{STRONG}"' in path.read_text():
                path.unlink()
        certify(tmp_path / "s.db", STRONG, {CONFIRM: 0.95, POLITE: 0.95})
        summary = asyncio.run(
            run_traces(
                cfg,
                ruleset(),
                items,
                db,
                provider=Judge(items, script, "cheap"),
                escalation=[strong],
                run_id=run_id,
            )
        )
        assert db.completed_trace_ids(run_id) == {"t0", "t1", "t2", "t3"} and summary.status == "completed"
        assert strong.asked == {"t1": [CONFIRM]} and summary.skipped_stored == 1
        t1 = db.result(run_id, "t1").result
        assert t1.verdict == "pass" and t1.stages[1].settled == [CONFIRM]  # 0.9 >= 0.8, the run's threshold
