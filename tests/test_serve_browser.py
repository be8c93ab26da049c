"""The workbench in a real browser (Debian's Chromium through Playwright, as the report's browser test):
two reviewers decide one item blind from the keyboard and disagree, the admin adjudicates, and the
exported label is the adjudicated one; hostile trace content never runs. uvicorn serves the app in-process
on 127.0.0.1 at a free port."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from contextlib import redirect_stdout
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
    chief.keys("f", "f", "n")
    chief.page.keyboard.type("adjudicated: the delete was not confirmed")
    with chief.page.expect_navigation():
        chief.keys("Control+Enter")
    chief.page.goto(f"{chief.url}/items/{first}")
    assert chief.page.inner_text("#item-state") == "resolved"
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
