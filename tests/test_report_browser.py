"""The HTML report in a real browser: Debian's Chromium, headless, driven by Playwright's Python package.

Playwright never downloads a browser here: it launches the system's Chromium (``/usr/bin/chromium`` from
the Debian package ``chromium``, or ``$SEQJUDGE_CHROMIUM``) with the flags this machine needs (as root: no
sandbox; no background networking, which the closed network refuses). The test is skipped, saying why,
only when no Chromium is installed; a missing ``playwright`` package is an error (it is a test extra).

The page is opened from a file:// URL, as a user opens a report they were sent; every request the page
makes is recorded and must stay inside the page (file: or data:).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser_support import NEEDS_CHROMIUM, Watched, browser
from report_data import EVIL_ID, INJECTION, build
from seqjudge.cli import run
from seqjudge.store import Store

pytestmark = NEEDS_CHROMIUM
__all__ = ["browser"]  # the fixture, imported


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    data = build(tmp_path_factory.mktemp("store") / "seqjudge.db")
    with Store(data["path"], create=False) as s:
        data["counts"] = s.run_info(data["candidate"]).counts
        data["stored"] = {r.trace_id: r for r in s.results(data["candidate"])}
    out = tmp_path_factory.mktemp("report") / "report.html"
    argv = ["report", data["candidate"], "--compare", "main", "--store", str(data["path"]), "-o", str(out)]
    assert run(argv) == 0
    data["html"] = out
    return data


class Opened(Watched):
    """A page with the report loaded, and everything the page did that a report must never do."""

    def __init__(self, page: Any, url: str) -> None:
        super().__init__(page)
        page.goto(url)
        page.wait_for_selector("#shown")

    def visible_rows(self) -> list[dict[str, str]]:
        return self.page.eval_on_selector_all(
            "#traces-table tbody tr",
            "rows => rows.filter(r => !r.hidden && r.offsetParent !== null)"
            ".map(r => ({verdict: r.dataset.verdict, id: r.cells[0].innerText.trim(), i: r.dataset.i}))",
        )

    def row(self, trace_id: str) -> Any:
        index = self.page.evaluate(
            "id => JSON.parse(document.getElementById('seqjudge-data').textContent)"
            ".traces.findIndex(t => t.id === id)",
            trace_id,
        )
        assert index >= 0
        return self.page.locator(f"#traces-table tbody tr[data-i='{index}']")


@pytest.fixture
def opened(browser: Any, stored: dict[str, Any]) -> Iterator[Opened]:
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    page = context.new_page()
    result = Opened(page, stored["html"].as_uri())
    try:
        yield result
    finally:
        # Whatever the test did: no script error, no CSP violation, no dialog, no request outside the page.
        assert result.problems == [], result.problems
        assert result.dialogs == [], result.dialogs
        assert all(u.startswith(("file:", "data:")) for u in result.requests), result.requests
        context.close()


def test_the_summary_shows_the_runs_figures(opened: Opened, stored: dict[str, Any], tmp_path: Path) -> None:
    page, counts = opened.page, stored["counts"]
    for key in ("traces", "pass", "fail", "review"):
        shown = page.locator(f"[data-count='{key}']")
        assert shown.is_visible()
        assert int(shown.inner_text()) == counts[key], key
    assert page.locator("#shown").inner_text() == f"{counts['traces']} of {counts['traces']} traces"
    assert len(opened.visible_rows()) == counts["traces"]
    assert page.locator("#regression").get_attribute("data-regression") == "yes"
    # The charts are drawn and laid out (a zero-sized SVG would be an invisible plot).
    for chart in page.locator("svg.chart").all()[:3]:
        box = chart.bounding_box()
        assert box is not None and box["width"] > 100 and box["height"] > 10
    page.screenshot(path=str(tmp_path / "summary.png"), full_page=True)
    assert (tmp_path / "summary.png").read_bytes().startswith(b"\x89PNG")


def test_filtering_the_table(opened: Opened, stored: dict[str, Any]) -> None:
    page, counts = opened.page, stored["counts"]
    page.select_option("#f-verdict", "fail")
    rows = opened.visible_rows()
    assert len(rows) == counts["fail"] and {r["verdict"] for r in rows} == {"fail"}
    assert page.locator("#shown").inner_text() == f"{counts['fail']} of {counts['traces']} traces"
    page.select_option("#f-verdict", "review")
    assert {r["verdict"] for r in opened.visible_rows()} == {"review"}
    page.select_option("#f-verdict", "all")
    page.fill("#f-text", "confirm-delete")  # by rule: the traces where it failed
    assert sorted(r["id"] for r in opened.visible_rows()) == ["t1", "t7"]
    page.fill("#f-text", "t4")  # by trace id
    assert [r["id"] for r in opened.visible_rows()] == ["t4"]
    page.fill("#f-text", "no such thing")
    assert opened.visible_rows() == [] and page.locator("#no-match").is_visible()
    page.fill("#f-text", "")
    page.check("#f-changed")  # changed since the baseline
    assert sorted(r["id"] for r in opened.visible_rows()) == ["t1", "t4"]


def test_sorting_by_a_column(opened: Opened, stored: dict[str, Any]) -> None:
    page = opened.page
    header = page.locator("#traces-table thead th[data-col='score']")
    button = header.locator("button")
    button.click()
    assert header.get_attribute("aria-sort") == "ascending"
    # Row ids are read back from the page (the hostile id too: it is shown verbatim, as text).
    scores = [stored["stored"][r["id"]].result.score for r in opened.visible_rows()]
    assert scores == sorted(scores) and scores[0] < scores[-1]
    button.click()
    assert header.get_attribute("aria-sort") == "descending"
    scores = [stored["stored"][r["id"]].result.score for r in opened.visible_rows()]
    assert scores == sorted(scores, reverse=True)
    page.locator("#traces-table thead th[data-col='trace'] button").click()  # text columns sort too
    ids = [r["id"] for r in opened.visible_rows()]
    assert ids == sorted(ids, key=str.lower)


def test_opening_a_trace_shows_its_violations(opened: Opened, stored: dict[str, Any], tmp_path: Path) -> None:
    page = opened.page
    result = stored["stored"]["t1"].result
    assert page.locator("#detail").is_hidden()
    opened.row("t1").click()
    detail = page.locator("#detail")
    detail.wait_for(state="visible")
    assert page.locator("#d-title").inner_text() == "t1"
    # The engine's mark at the offending call (call index 1 -> "2.") and the judge's at its own (index 2).
    engine_mark = page.locator("#call-1 .mark.engine")
    assert engine_mark.is_visible() and engine_mark.inner_text().startswith("← engine: read-before-update")
    judge_mark = page.locator("#call-2 .mark.judge")
    assert judge_mark.is_visible() and judge_mark.inner_text().startswith("← judge: confirm-delete")
    assert page.locator("#call-0 .mark").count() == 0 and page.locator("#call-3 .mark").count() == 0
    # Both explanations, in the violation list.
    [violation] = result.engine.violations
    assert detail.get_by_text(violation.explanation, exact=True).first.is_visible()
    assert detail.get_by_text("the judge failed confirm-delete", exact=True).first.is_visible()
    # The baseline comparison for this trace.
    assert "score 1.00 → 0.00 (−1.00)" in detail.locator(".d-box").inner_text()
    page.screenshot(path=str(tmp_path / "trace.png"))
    assert (tmp_path / "trace.png").stat().st_size > 10_000
    page.keyboard.press("Escape")
    assert detail.is_hidden()


def test_a_hostile_trace_shows_as_text_and_runs_nothing(opened: Opened) -> None:
    page = opened.page
    opened.row(EVIL_ID).click()
    page.locator("#detail").wait_for(state="visible")
    assert page.locator("#d-title").inner_text() == EVIL_ID
    assert INJECTION in page.locator("#call-1").inner_text()
    assert page.locator("#detail").get_by_text("judge says " + INJECTION, exact=False).first.is_visible()
    assert page.locator("img").count() == 0  # no tag came out of the data
    assert page.evaluate("document.scripts.length") == 2
    # opened's teardown asserts that no dialog opened (alert) and no script error happened.


def test_a_link_to_a_trace_opens_it(browser: Any, stored: dict[str, Any]) -> None:
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(stored["html"].as_uri() + "#trace=t7")
        page.locator("#detail").wait_for(state="visible")
        assert page.locator("#d-title").inner_text() == "t7"
        assert page.locator("#call-2 .mark.judge").is_visible()  # judge-only violation at call index 2
    finally:
        context.close()


def test_a_long_trace_shows_a_window_around_its_violation(browser: Any, tmp_path: Path) -> None:
    """200 calls with the violation at call 181: the marked call and its neighbours are shown, the rest
    folded behind a button that unfolds them."""
    from seqjudge.trace import Trace
    from test_store import make_result

    calls = [{"tool_name": "VerifyIdentity"}]
    calls += [{"tool_name": "SearchOrders", "arguments": {"page": i}} for i in range(179)]
    calls += [{"tool_name": "UpdateCustomer"}, {"tool_name": "GetCustomer"}]
    calls += [{"tool_name": "SearchOrders", "arguments": {"page": i}} for i in range(179, 197)]
    trace = Trace.model_validate({"trace_id": "long", "calls": calls})
    result = make_result(trace)
    [violation] = [v for v in result.engine.violations if v.rule_id == "read-before-update"]
    assert violation.offending_call_index == 180 and len(trace.calls) == 200
    path = tmp_path / "s.db"
    with Store(path) as s:
        s.save_result(s.create_run(config={}, fingerprint={}), trace, result)
    out = tmp_path / "long.html"
    assert run(["report", "latest", "--store", str(path), "-o", str(out)]) == 0
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    try:
        page = context.new_page()
        page.goto(out.as_uri() + "#trace=long")
        page.locator("#call-180 .mark.engine").wait_for(state="visible")
        shown = page.locator("ol.timeline li.call").count()
        assert shown < 30  # first, last, and 4 on each side of the violation
        for i in (0, 176, 184, 199):
            assert page.locator(f"#call-{i}").count() == 1
        assert page.locator("#call-100").count() == 0
        assert page.locator("ol.timeline li.gap").count() == 2
        page.locator("ol.timeline li.gap button").first.click()
        assert page.locator("ol.timeline li.call").count() == 200
        assert page.locator("#call-180 .mark.engine").is_visible()
        assert page.locator(".strip button").count() == 200
    finally:
        context.close()


def test_the_page_of_check_opens_a_failing_trace(browser: Any, tmp_path: Path) -> None:
    """`seqjudge check --format html`: the same page without a store; a hostile trace stays text."""
    import json

    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "rules:\n  - {id: verify_first, type: before, first: VerifyIdentity, then: DeleteCustomer}\n",
        encoding="utf-8",
    )
    calls = [{"tool_name": "DeleteCustomer", "output": INJECTION}, {"tool_name": "VerifyIdentity"}]
    records = [{"trace_id": EVIL_ID, "calls": calls}, {"trace_id": "ok", "calls": calls[::-1]}]
    traces = tmp_path / "traces.jsonl"
    traces.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    out = tmp_path / "check.html"
    assert run(["check", str(rules), str(traces), "--format", "html", "-o", str(out)]) == 1
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    try:
        opened = Opened(context.new_page(), out.as_uri())
        page = opened.page
        assert [r["id"] for r in opened.visible_rows()] == [EVIL_ID]  # the passing trace is counted only
        assert page.locator("[data-count='pass']").inner_text() == "1"
        opened.row(EVIL_ID).click()
        page.locator("#detail").wait_for(state="visible")
        assert page.locator("#d-title").inner_text() == EVIL_ID
        assert INJECTION in page.locator("#call-0").inner_text()
        assert page.locator("#call-0 .mark.engine").inner_text().startswith("← engine: verify_first")
        assert page.locator("img").count() == 0 and page.evaluate("document.scripts.length") == 2
        assert opened.problems == [] and opened.dialogs == []
        assert all(u.startswith(("file:", "data:")) for u in opened.requests), opened.requests
    finally:
        context.close()
