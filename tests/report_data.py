"""A store with a baseline run and a candidate run, for the HTML report tests (plain and in a browser).

Built with the Store API and the builders of test_store.py (four rules: verify-first, read-before-update,
email-limit and the judge rule confirm-delete). The candidate run holds every kind of trace the report
must show: passes, a critical failure the judge disputes, judge-only violations, review for an undecided
judge rule and for an unscored judge, a trace not in the baseline, and a hostile trace whose tool output,
arguments, message, judge explanation and id all try to inject HTML and script.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from seqjudge.store import Store
from seqjudge.trace import Trace
from test_store import judge_result, make_result, make_trace, pair

INJECTION = "</script><script>alert(1)</script>"
IMG = '<img src=x onerror="alert(2)">'
EVIL_ID = 'evil-"><img src=x onerror=alert(3)></script>'

# trace id -> kind in each run (see test_store.pair); None: not in that run.
BASELINE = {"t0": "clean", "t1": "clean", "t2": "clean", "t3": "clean", "t4": "clean", "t5": "split"}
CANDIDATE = {"t0": "clean", "t1": "split", "t2": "nojudge", "t3": "clean", "t4": "unscored", "t6": "clean"}
TOTALS_TOKENS = {"input": 1234, "cached_input": 200, "output": 321}
COST = 0.0123


def hostile_pair() -> tuple[Trace, Any]:
    """A trace whose content attacks the page, and a judge that fails a rule at its poisoned call."""
    trace = make_trace(EVIL_ID, good=False)
    data = trace.model_dump(mode="json")
    data["calls"][1]["output"] = {"note": INJECTION + IMG}
    data["calls"][2]["arguments"]["comment"] = IMG
    data["messages"].append({"role": "assistant", "content": INJECTION, "at": 2})
    trace = Trace.model_validate(data)
    judge = judge_result(EVIL_ID, {"email-limit": 3})
    judge.report.violations[0].explanation = "judge says " + INJECTION + IMG  # type: ignore[union-attr]
    return trace, make_result(trace, judge)


def judge_only_pair(trace_id: str) -> tuple[Trace, Any]:
    """A good trace the judge fails on the judge rule (a judge-only violation, marked at call 3)."""
    trace = make_trace(trace_id)
    return trace, make_result(trace, judge_result(trace_id, {"confirm-delete": 2}))


def build(path: Path | str) -> dict[str, Any]:
    """Write both runs to the store at ``path``; returns the run ids and what was saved."""
    saved: dict[str, Any] = {}
    with Store(path) as s:
        base = s.create_run(
            config={"rules": "rules.yaml", "threshold": 0.85, "model": "scripted:scripted"},
            fingerprint={"model": "scripted:scripted", "engine": "seqjudge-engine/1"},
            label="main",
        )
        for trace_id, kind in BASELINE.items():
            s.save_result(base, *pair(trace_id, kind))
        s.finish_run(base, totals={"traces": len(BASELINE)})
        s.save_baseline(base, "main")
        cand = s.create_run(
            config={"rules": "rules.yaml", "threshold": 0.85, "model": "scripted:scripted"},
            fingerprint={"model": "scripted:scripted", "engine": "seqjudge-engine/1"},
            label="prompt-v2",
        )
        for trace_id, kind in CANDIDATE.items():
            trace, result = pair(trace_id, kind)
            s.save_result(cand, trace, result)
            saved[trace_id] = result
        trace, result = judge_only_pair("t7")
        s.save_result(cand, trace, result)
        saved["t7"] = result
        trace, result = hostile_pair()
        s.save_result(cand, trace, result)
        saved[EVIL_ID] = result
        s.finish_run(
            cand,
            totals={
                "traces": len(saved),
                "tokens": TOTALS_TOKENS,
                "cost_usd": COST,
                "judge_skipped": None,
            },
        )
        info = s.run_info(cand)
    return {"path": path, "baseline": base, "candidate": cand, "results": saved, "info": info}
