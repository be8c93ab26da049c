"""The workbench in a real browser (Debian's Chromium through Playwright, as the report's browser test):
two reviewers decide one item blind from the keyboard and disagree, the admin adjudicates, and the
exported label is the adjudicated one, and once it replaces the trace's label in a calibrated golden
dataset `calibrate --check` says the labels changed; hostile trace content never runs. uvicorn serves the app
in-process on 127.0.0.1 at a free port."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import redirect_stdout
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from browser_support import NEEDS_CHROMIUM, Watched, browser
from seqjudge.cli import run
from seqjudge.serve.app import create_app
from seqjudge.store import Store
from seqjudge.trace import Trace
from serve_support import build_team, serving

pytestmark = NEEDS_CHROMIUM
__all__ = ["browser"]  # the fixture, imported


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    data = build_team(tmp_path_factory.mktemp("store") / "seqjudge.db")
    with Store(data["path"], create=False) as db, serving(create_app(db)) as url:
        data["url"] = url
        data["db"] = db
        yield data


class Reviewer(Watched):
    """One signed-in browser context, recording what a page must never do."""

    def __init__(self, browser: Any, served: dict[str, Any], name: str) -> None:
        self.context = browser.new_context(viewport={"width": 1360, "height": 900})
        super().__init__(self.context.new_page())
        self.url = served["url"]
        self.page.goto(f"{self.url}/queue?run={served['double']}")
        assert "/login" in self.page.url  # no session: the sign-in page
        self.page.fill("#token", served["tokens"][name])
        self.page.keyboard.press("Enter")
        self.page.wait_for_selector("#queue-table")
        assert self.page.inner_text("#viewer") == name

    def close(self) -> None:
        assert self.problems == [], self.problems
        assert self.dialogs == [], self.dialogs
        assert all(u.startswith(self.url) for u in self.requests), self.requests
        self.context.close()

    def keys(self, *keys: str) -> None:
        self.page.wait_for_selector("body[data-keys=ready]", state="attached")  # the script is listening
        for key in keys:
            self.page.keyboard.press(key)

    def adjudicate(self, item: int, keys: tuple[str, ...], note: str) -> None:
        """Set the rules with ``keys``, write ``note`` and submit (the admin's side); the item is resolved."""
        self.keys(*keys, "n")
        self.page.keyboard.type(note)
        with self.page.expect_navigation():
            self.keys("Control+Enter")
        self.page.goto(f"{self.url}/items/{item}")
        assert self.page.inner_text("#item-state") == "resolved"

    def focused_rule(self) -> str:
        return str(self.page.get_attribute("body", "data-focused-rule"))


def _label(path: Path, trace_id: str) -> dict[str, Any]:
    out = io.StringIO()
    with redirect_stdout(out):
        assert run(["review", "export", "--labels", "-", "--store", str(path)]) == 0
    return next(x for x in map(json.loads, out.getvalue().splitlines()) if x["trace_id"] == trace_id)


def test_two_reviewers_blind_then_the_admin_adjudicates(browser: Any, served: dict[str, Any]) -> None:
    first, second = served["double_items"][:2]
    undecided = ["read-before-update", "confirm-delete"]  # the judge disputes one, the other is the judge's

    ana = Reviewer(browser, served, "ana")
    ana.keys("j", "j", "k")  # the queue: the first item marked again
    assert ana.page.get_attribute("body", "data-marked-item") == str(first)
    with ana.page.expect_navigation():
        ana.keys("Enter")
    ana.page.wait_for_selector("#decision")
    assert ana.focused_rule() == undecided[0]  # the first rule left to decide has the focus
    ana.keys("f")
    assert ana.focused_rule() == undecided[1]  # the preset rule between them is skipped
    ana.keys("ArrowUp")
    assert ana.focused_rule() == "email-limit"  # the arrows visit every rule
    ana.keys("ArrowDown", "f", "n")
    ana.page.keyboard.type("ana: confirmation missing")
    with ana.page.expect_navigation():
        ana.keys("Control+Enter")
    assert f"/items/{second}?" in ana.page.url  # the next item opened
    assert ana.page.inner_text("#item-id") == str(second)
    ana.keys("k")
    ana.page.wait_for_selector(f"#item-id:text('{first}')")
    ana.close()

    bo = Reviewer(browser, served, "bo")
    bo.page.goto(f"{bo.url}/items/{first}")
    assert "confirmation missing" not in bo.page.content()
    assert "hidden until your decision is in" in bo.page.inner_text("#history")
    bo.keys("p", "p")
    with bo.page.expect_navigation():
        bo.keys("Enter")
    assert f"/items/{second}" in bo.page.url
    bo.page.goto(f"{bo.url}/items/{first}")
    assert bo.page.inner_text("#item-state") == "disputed"
    bo.close()

    chief = Reviewer(browser, served, "chief")
    chief.page.click("a[href='/adjudicate']")
    chief.page.click(f"#disputed a[href^='/items/{first}?']")
    side = chief.page.inner_text("#side-by-side")
    assert "confirmation missing" in side and "bo" in side and "ana" in side
    chief.adjudicate(first, ("f", "f"), "adjudicated: the delete was not confirmed")
    chief.close()

    label = _label(served["path"], "d-0")
    assert label["verdict"] == "fail"
    assert label["rules"]["confirm-delete"] == "fail" and label["rules"]["read-before-update"] == "fail"
    assert "adjudicated: the delete was not confirmed" in label["note"]


def test_hostile_trace_content_never_runs(browser: Any, served: dict[str, Any]) -> None:
    from report_data import EVIL_ID

    chief = Reviewer(browser, served, "chief")
    evil = next(i.id for i in served["db"].review_items(status="all") if i.trace_id == EVIL_ID)
    for item in (evil, served["hostile_item"]):
        chief.page.goto(f"{chief.url}/items/{item}")
        for summary in chief.page.locator("#timeline summary").all():
            summary.click()  # unfolded: the hostile values are on screen
        assert chief.page.locator("#timeline img, #timeline svg, #timeline script").count() == 0
        assert chief.page.evaluate("document.scripts.length") == 1
    chief.page.hover("#timeline")
    chief.close()  # no dialog, no script error, no request off this server


def test_a_thousand_call_trace_opens_folded_and_usable(browser: Any, served: dict[str, Any]) -> None:
    from test_store import make_result

    db = served["db"]
    calls = [
        {"tool_name": "GetCustomer", "arguments": {"n": i}, "output": {"row": "x" * 100}} for i in range(1000)
    ]
    trace = Trace.model_validate({"trace_id": "long", "calls": calls})
    run_id = db.create_run(config={"review": {"fails": True}}, fingerprint={})
    db.save_result(run_id, trace, make_result(trace, queue_fails=True))
    db.finish_run(run_id, totals={})
    [item] = db.review_items(run=run_id)
    ana = Reviewer(browser, served, "ana")
    ana.page.goto(f"{ana.url}/items/{item.id}")
    assert ana.page.locator("#timeline li.call").count() == 1000
    assert ana.page.locator("#timeline details[open]").count() == 0  # folded
    ana.page.locator("#call-1000 summary").first.click()
    assert ana.page.locator("#call-1000 details[open] pre").first.inner_text().startswith("{")
    assert ana.page.locator(".rule-row[data-rule=read-before-update]").count() == 0  # never exercised
    assert ana.focused_rule() == "confirm-delete"  # the judge rule no judge decided: the one left to set
    ana.keys("f")  # the keys work on the long page
    assert ana.page.get_attribute(".rule-row[data-rule=confirm-delete]", "data-set") == "fail"
    ana.close()


@pytest.fixture
def calibrated(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A golden dataset with a calibration certificate, and a run of one of its traces (t00, labelled pass)
    whose item needs two reviews: the judge ran on it but did not score, so its judge rule is undecided."""
    from calibrate_helpers import ByTraceProvider
    from seqjudge.calibrate_guarantee import GuaranteeSettings
    from seqjudge.calibrate_runs import calibrate_golden
    from seqjudge.crosscheck import reconcile
    from seqjudge.golden import load_dataset
    from seqjudge.rules.engine import check
    from test_calibrate_guarantee import make_dataset, replies
    from test_store import judge_result

    suite = make_dataset(tmp_path / "suite")
    path = tmp_path / "seqjudge.db"
    dataset = load_dataset(suite)
    calibrating = partial(
        calibrate_golden,
        suite,
        provider=ByTraceProvider(dataset.traces, replies(dataset), model="conf"),
        store=path,
        risk_level="high",
        guarantee=GuaranteeSettings(alpha=0.05, delta=0.05),
    )
    with ThreadPoolExecutor(1) as pool:  # Playwright's loop runs in this thread; calibration runs its own
        pool.submit(calibrating).result()
    trace = next(t for t in dataset.traces if t.trace_id == "t00")
    unscored = judge_result("t00", status="unscored", rule_ids=["confirm-before-delete"], raw="garbage")
    with Store(path, create=False) as db:
        run_id = db.create_run(config={"review": {"reviews_per_item": 2}}, fingerprint={}, label="double")
        db.save_result(run_id, trace, reconcile(check(trace, dataset.ruleset), unscored))
        db.finish_run(run_id, totals={"traces": 1})
        tokens = {"ana": db.add_reviewer("ana"), "bo": db.add_reviewer("bo")}
        tokens["chief"] = db.add_reviewer("chief", admin=True)
        [item] = db.review_items(run=run_id)
        with serving(create_app(db)) as url:
            data = {"url": url, "double": run_id, "item": item.id, "tokens": tokens}
            yield {**data, "suite": suite, "path": path}


def _check(data: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    store = ["--store", str(data["path"])]
    code = run(["calibrate", str(data["suite"]), "--check", "--model", "scripted:conf", *store])
    return code, capsys.readouterr().out


def test_the_adjudicated_label_exported_into_the_dataset_makes_its_certificate_stale(
    browser: Any, calibrated: dict[str, Any], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Issue 32's whole flow ending in calibration: the certificate holds until the admin's adjudication,
    exported by `review export`, replaces the trace's label in the dataset; then `calibrate --check` says the
    labelled dataset changed (exit 1)."""
    code, out = _check(calibrated, capsys)
    assert code == 0 and "holds" in out, out
    item = calibrated["item"]

    ana = Reviewer(browser, calibrated, "ana")
    ana.page.goto(f"{ana.url}/items/{item}")
    assert ana.focused_rule() == "confirm-before-delete"
    ana.keys("f")
    with ana.page.expect_navigation():
        ana.keys("Enter")
    ana.close()
    bo = Reviewer(browser, calibrated, "bo")
    bo.page.goto(f"{bo.url}/items/{item}")
    assert "hidden until your decision is in" in bo.page.inner_text("#history")  # blind: ana's fail unseen
    bo.keys("p")
    with bo.page.expect_navigation():
        bo.keys("Enter")
    bo.page.goto(f"{bo.url}/items/{item}")
    assert bo.page.inner_text("#item-state") == "disputed"
    bo.close()
    chief = Reviewer(browser, calibrated, "chief")
    chief.page.goto(f"{chief.url}/items/{item}")
    chief.adjudicate(item, ("f",), "adjudicated: deleted unconfirmed")
    chief.close()

    code, out = _check(calibrated, capsys)  # the store's decisions alone do not touch the dataset
    assert code == 0 and "holds" in out, out
    labels = calibrated["suite"] / "labels.jsonl"
    before = labels.read_text().splitlines()
    export = ["review", "export", "--run", calibrated["double"], "--into", str(calibrated["suite"])]
    capsys.readouterr()
    assert run([*export, "--store", str(calibrated["path"])]) == 0
    assert "1 replaced (t00), 0 added" in capsys.readouterr().err
    after = labels.read_text().splitlines()
    changed = [n for n, (old, new) in enumerate(zip(before, after, strict=True)) if old != new]
    assert [json.loads(before[n])["trace_id"] for n in changed] == ["t00"]  # the others kept, in order
    assert json.loads(after[changed[0]]) == {  # the adjudication, not either reviewer's decision
        "trace_id": "t00",
        "verdict": "fail",
        "rules": {"confirm-before-delete": "fail", "email-limit": "pass", "lookup-required": "pass"},
        "labeler": "chief",
        "note": "adjudicated: deleted unconfirmed",
    }
    assert run(["golden", "validate", str(calibrated["suite"])]) == 0

    code, out = _check(calibrated, capsys)
    assert code == 1, out
    assert "calibration certificate" in out and "stale" in out and "the labelled dataset changed" in out
