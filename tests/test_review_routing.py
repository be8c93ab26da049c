"""Issue 32.1: nothing a judge finds is dropped (a judge fail no certificate vouches for sends its trace to
review, in every output of a run); issue 37.8: each review item's reason says what put it there, whether
fails that stand are queued is a setting, and the summary, the HTML and `review list` count alike."""

from __future__ import annotations

import asyncio
import csv
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from seqjudge import load_rules
from seqjudge.cli import run
from seqjudge.config import RunConfig
from seqjudge.errors import InputError
from seqjudge.ingest import load_traces
from seqjudge.judge.providers import ProviderProfile, registry
from seqjudge.judge.providers.scripted import ScriptedProvider
from seqjudge.runner import run_traces
from seqjudge.store import Store
from test_judge_gate import JUDGE_RULE, SUITE, judge_decision, replies, suite_traces

GOLDEN = SUITE.parent
UNSCORED = "cs-001-unscored"


@pytest.fixture
def judged_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    """`seqjudge run` over a slice of the customer-support suite with a scripted judge and no certificate:
    the judge fails the judge rule on four traces (as the human labels do) and replies garbage on one."""
    ruleset = load_rules(SUITE / "rules.yaml")
    traces = suite_traces()
    # Last, a copy of a trace the judge passes, to which it replies garbage however often it is asked.
    traces.append(traces[0].model_copy(update={"trace_id": UNSCORED}))
    script: list[Any] = [*replies(ruleset), *["not json"] * 10]
    monkeypatch.setitem(
        registry._REGISTRY,
        "routep",
        ProviderProfile(
            name="routep", factory=lambda model, **o: ScriptedProvider(list(script), model=model)
        ),
    )
    path = tmp_path / "traces.jsonl"
    path.write_text("".join(json.dumps(t.model_dump(mode="json")) + "\n" for t in traces))
    store = tmp_path / "s.db"
    common = ["--model", "routep:m", "--store", str(store), "--no-cache", "--concurrency", "1"]
    assert run(["run", str(SUITE / "rules.yaml"), str(path), *common]) == 1
    text = capsys.readouterr().out
    assert run(["run", str(SUITE / "rules.yaml"), str(path), *common, "--format", "json"]) == 1
    totals = json.loads(capsys.readouterr().out)
    with Store(store) as db:
        stored = [s.result for s in db.results(totals["run_id"])]
        items = db.review_items(run=totals["run_id"])
    judge_failed = {r.trace_id for r in stored if judge_decision(r).judge == "failed"}
    return {
        "store": store,
        "text": text,
        "totals": totals,
        "stored": {r.trace_id: r for r in stored},
        "items": {i.trace_id: i for i in items},
        "judge_failed": judge_failed,
        "tmp": tmp_path,
    }


def test_an_uncertified_judge_fail_is_review_with_an_item_never_pass(judged_run: dict[str, Any]) -> None:
    stored, items, failed = judged_run["stored"], judged_run["items"], judged_run["judge_failed"]
    assert len(failed) == 4
    # On main 3 of these 4 ended `pass`, score 1.0, with no review item (the judge rule was "advisory").
    engine_passed = [t for t in failed if stored[t].engine.verdict == "pass"]
    assert engine_passed
    for trace_id in failed:
        res = stored[trace_id]
        assert res.verdict != "pass" and "uncertified_judge_fail" in res.review_reasons
        assert "uncertified_judge_fail" in items[trace_id].reasons
        d = judge_decision(res)
        assert (d.final, d.route) == ("deferred", "advisory")  # still advice: in no score
    for trace_id in engine_passed:
        assert stored[trace_id].verdict == "review" and stored[trace_id].score == 1.0
    # A judge pass without a certificate sends nothing: only the fails are routed for it.
    assert all("uncertified_judge_fail" not in r.review_reasons for t, r in stored.items() if t not in failed)
    # text and JSON summaries
    assert f"uncertified_judge_fail {len(failed)}" in judged_run["text"]
    assert f"not to the verdict: {JUDGE_RULE} on {len(failed)} trace(s)" in judged_run["text"]
    totals = judged_run["totals"]
    assert totals["review_reasons"]["uncertified_judge_fail"] == len(failed)
    assert totals["review_items"] == len(items)


def test_an_unscored_reply_on_a_trace_with_judge_rules_is_a_review_item(judged_run: dict[str, Any]) -> None:
    res = judged_run["stored"][UNSCORED]
    assert res.judge.status == "unscored" and res.verdict == "review"
    assert "unscored" in judged_run["items"][UNSCORED].reasons


def test_every_output_of_the_run_says_review(judged_run: dict[str, Any]) -> None:
    store, tmp, failed = str(judged_run["store"]), judged_run["tmp"], judged_run["judge_failed"]
    # JUnit (report-ci): each such trace is a skipped case that names the reason and the rule.
    assert run(["report-ci", "latest", "--store", store, "--junit", str(tmp / "j.xml")]) == 1
    cases = {c.get("classname"): c for c in ET.parse(tmp / "j.xml").iter("testcase")}
    for trace_id in failed:
        if judged_run["stored"][trace_id].verdict == "review":
            skipped = cases[trace_id].find("skipped")
            assert skipped is not None and "uncertified_judge_fail" in skipped.get("message", "")
            assert JUDGE_RULE in skipped.get("message", "")
    # HTML report: the row's verdict, and the review count beside the queue's.
    assert run(["report", "latest", "--store", store, "-o", str(tmp / "r.html")]) == 0
    html = (tmp / "r.html").read_text(encoding="utf-8")
    for trace_id in failed:
        verdict = judged_run["stored"][trace_id].verdict
        assert f'data-verdict="{verdict}" data-search="{trace_id}' in html
    assert "uncertified_judge_fail" in html
    # Export (CSV and JSONL).
    assert (
        run(["runs", "export", "latest", "--store", store, "--format", "csv", "-o", str(tmp / "e.csv")]) == 0
    )
    with (tmp / "e.csv").open(encoding="utf-8") as f:
        rows = {r["trace_id"]: r for r in csv.DictReader(f)}
    out = tmp / "e.jsonl"
    assert run(["runs", "export", "latest", "--store", store, "--format", "jsonl", "-o", str(out)]) == 0
    exported = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    results = {r["trace_id"]: r for r in (e.get("result") or {} for e in exported) if "trace_id" in r}
    for trace_id in failed:
        verdict = judged_run["stored"][trace_id].verdict
        assert rows[trace_id]["verdict"] == verdict != "pass"
        assert "uncertified_judge_fail" in rows[trace_id]["review_reasons"].split(";")
        assert rows[trace_id]["review_status"] == "open"
        assert results[trace_id]["verdict"] == verdict
        assert "uncertified_judge_fail" in results[trace_id]["review_reasons"]


def test_compare_an_uncertified_judge_fail_never_turns_the_gate_red() -> None:
    """Advice is seen (review) but gates nothing: not the judge test, not --max-drop's pass rate."""
    from seqjudge.compare import compare
    from seqjudge.crosscheck import gating_verdict, reconcile
    from test_compare import make_run
    from test_judge_gate import _Advisory

    def advisory(pairs: list[Any]) -> list[Any]:
        return [reconcile(r.engine, r.judge, gate=_Advisory()) for _, r in pairs]

    base = advisory(make_run(20))
    cand = advisory(make_run(20, judge_fail=range(10)))
    assert sum(r.verdict == "review" for r in cand) == 10  # seen: ten traces in review
    assert all(gating_verdict(r) == "pass" for r in cand)
    out = compare(base, cand, max_drop=0.0)
    assert not out.regression and out.pass_rate["candidate"] == out.pass_rate["baseline"]
    assert not any(d.fired for d in out.decisions)


def test_lint_says_when_judge_rules_have_no_certificate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from calibrate_helpers import save_test_certificate
    from seqjudge.certificate import CertifiedRule

    rules = str(SUITE / "rules.yaml")
    assert run(["lint", rules, "--store", str(tmp_path / "s.db")]) == 0  # a warning, not an error
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if "no calibration certificate" in line)
    assert line.startswith("warning:") and JUDGE_RULE in line and "uncertified_judge_fail" in line
    assert "goes to review" in line and "never to the verdict" in line and "seqjudge calibrate" in line
    entry = CertifiedRule(rule_id=JUDGE_RULE, risk_level="medium", auto_pass=0.9, alpha=0.05, delta=0.05)
    save_test_certificate(tmp_path / "s.db", load_rules(SUITE / "rules.yaml"), [entry], dataset="cs")
    assert run(["lint", rules, "--store", str(tmp_path / "s.db")]) == 0
    assert "no calibration certificate" not in capsys.readouterr().out
    # A suite without judge rules needs no certificate.
    plain = tmp_path / "plain.yaml"
    plain.write_text("rules:\n  - id: a-before-b\n    type: before\n    first: A\n    then: B\n")
    assert run(["lint", str(plain), "--store", str(tmp_path / "none.db")]) == 0
    assert "certificate" not in capsys.readouterr().out


# -- issue 37.8: the queue's words ------------------------------------------------------------------------
def test_a_fail_that_stands_is_no_below_threshold_and_is_queued_only_when_asked(tmp_path: Path) -> None:
    def decided(**review: Any) -> tuple[Any, list[Any]]:
        cfg = RunConfig(
            rules=str(SUITE / "rules.yaml"),
            traces=str(SUITE / "traces.jsonl"),
            store=str(tmp_path / "s.db"),
            **({"review": review} if review else {}),
        )
        with Store(cfg.store) as db:
            summary = asyncio.run(
                run_traces(cfg, load_rules(cfg.rules), load_traces(cfg.traces), db, provider=None)
            )
            return summary, [s.result for s in db.results(summary.run_id)]

    summary, results = decided()
    fails = [r for r in results if r.verdict == "fail"]
    assert fails and all(r.review_reasons == [] for r in fails)  # decided: not queued, and not "below"
    assert all(r.review_reasons for r in results if r.verdict == "review")
    assert "below_threshold" not in {x for r in fails for x in r.review_reasons}
    summary, results = decided(fails=True)
    fails = [r for r in results if r.verdict == "fail"]
    assert all(r.review_reasons == ["engine_fail"] for r in fails)
    assert summary.reasons["engine_fail"] == summary.verdicts["fail"] == len(fails)
    assert summary.queued == summary.verdicts["fail"] + summary.verdicts["review"]
    with pytest.raises(ValueError, match="extra"):
        RunConfig(rules="r", traces="t", review={"engine_fail": True})  # unknown keys are errors


def test_the_summary_the_html_and_review_list_count_alike_on_the_demo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("SEQJUDGE_MODEL", raising=False)
    store = str(tmp_path / "s.db")
    assert run(["demo", str(GOLDEN), "--store", store]) == 0
    out = capsys.readouterr().out
    suites = re.findall(r"== (\S+): \d+ rules, (\d+) traces: (\d+) pass, (\d+) fail, (\d+) review", out)
    runs = re.findall(r"stored as (\S+):", out)
    assert len(suites) == len(runs) == 3
    for text, (name, _, _, _, review), run_id in zip(out.split("== ")[1:], suites, runs, strict=True):
        said = re.search(r"routed to review: (.*) \((\d+) review items?\)", text)
        items = int(said.group(2)) if said else 0
        assert "below_threshold" not in (said.group(1) if said else "") or int(review) > 0
        assert run(["review", "list", "--run", run_id, "--store", store, "--format", "json"]) == 0
        listed = json.loads(capsys.readouterr().out)
        assert run(["report", run_id, "--store", store, "-o", str(tmp_path / f"{name}.html")]) == 0
        capsys.readouterr()
        html = (tmp_path / f"{name}.html").read_text(encoding="utf-8")
        card = int(re.search(r'data-count="review">(\d+)<', html).group(1))  # type: ignore[union-attr]
        queue = int(re.search(r"(\d+) open, \d+ resolved in the queue", html).group(1))  # type: ignore[union-attr]
        # With no judge, the queue holds exactly the traces in review: every count says the same.
        assert items == len(listed) == queue == card == int(review), name


def test_review_export_refuses_two_conflicting_resolutions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_store import pair

    path = tmp_path / "s.db"
    monkeypatch.setenv("SEQJUDGE_STORE", str(path))
    with Store(path) as db:
        for verdict, reviewer in (("fail", "ana"), ("pass", "bo")):
            run_id = db.create_run(config={}, fingerprint={})
            db.save_result(run_id, *pair("t1", "split"))
            item = db.review_items(run=run_id)[0]
            db.resolve_review(
                item.id, verdict=verdict, rules={"read-before-update": verdict}, reviewer=reviewer
            )
    labels = tmp_path / "labels.jsonl"
    assert run(["review", "export", "--labels", str(labels)]) == 2
    err = capsys.readouterr().err
    assert "trace t1 has conflicting resolutions" in err and "by ana at" in err and "by bo at" in err
    assert "Traceback" not in err and not labels.exists()  # nothing written, nothing silently dropped
    with Store(path) as db, pytest.raises(InputError):
        db.review_labels()
