"""`seqjudge check --format html` (issue 17 point 11): `seqjudge report`'s page written straight from `check`,
with no store, its figures equal to `check --format json`'s, inert against hostile traces, bounded in what it
keeps per trace."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

import seqjudge.checkpool as checkpool
import seqjudge.outputs.check_html as check_html
from report_data import EVIL_ID, IMG, INJECTION
from seqjudge.cli import run
from test_report_html import Page

RULES = """
rules:
  - {id: verify_first, type: before, first: VerifyIdentity, then: DeleteCustomer}
  - {id: few_emails, type: max_calls, tool: SendEmail, max: 1, severity: warning}
  - {id: polite, type: judge, description: Apologise before refusing.}
"""
SECRET = "sk-proj-0123456789abcdefghijABCDEFGHIJ"
VOID = {"meta", "link", "br", "img", "input", "hr", "wbr", "col", "area", "base", "source"}


def record(k: int) -> dict[str, Any]:
    """Every third trace fails verify_first; bad6 also calls SendEmail twice (a warning)."""
    if k % 3:
        return {
            "trace_id": f"good{k}",
            "calls": [{"tool_name": "VerifyIdentity"}, {"tool_name": "DeleteCustomer"}],
        }
    calls = [
        {"tool_name": "DeleteCustomer", "output": f"deleted; api_key={SECRET}"},
        {"tool_name": "VerifyIdentity", "output": "ok"},
    ]
    return {"trace_id": f"bad{k}", "calls": calls + [{"tool_name": "SendEmail"}] * (k // 3 % 3)}


def hostile() -> dict[str, Any]:
    return {
        "trace_id": EVIL_ID,
        "calls": [
            {"tool_name": "DeleteCustomer", "output": INJECTION + IMG},
            {"tool_name": "VerifyIdentity", "arguments": {"comment": IMG}},
        ],
    }


@pytest.fixture
def suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    monkeypatch.chdir(tmp_path)  # where a store would be made by default (.seqjudge/seqjudge.db)
    monkeypatch.delenv("SEQJUDGE_STORE", raising=False)
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES, encoding="utf-8")
    traces = tmp_path / "traces.jsonl"
    records = [record(k) for k in range(12)] + [hostile()]
    traces.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return rules, traces


def check(rules: Path, traces: Path, fmt: str, *extra: str) -> tuple[int, str]:
    out = traces.with_name(f"out.{fmt}")
    code = run(["check", str(rules), str(traces), "--format", fmt, "-o", str(out), *extra])
    return code, out.read_text(encoding="utf-8")


class Balanced(HTMLParser):
    """Fails on an end tag that closes anything but the innermost open element (a browser would repair it)."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes <{self.stack[-1:]}>"
        self.stack.pop()


def test_the_page_shows_the_verdicts_check_json_gives(suite: tuple[Path, Path], tmp_path: Path) -> None:
    rules, traces = suite
    code, text = check(rules, traces, "html")
    json_code, doc = check(rules, traces, "json")
    summary = json.loads(doc)["summary"]
    assert code == json_code == 1
    assert text.startswith("<!doctype html>") and Balanced(text).stack == []
    page = Page(text)
    for key in ("traces", "pass", "fail", "review"):
        assert int(page.text_of("data-count", key)) == summary[key]
    failing = [r["trace_id"] for r in json.loads(doc)["reports"] if r["verdict"] != "pass"]
    rows = page.with_attr("data-verdict")
    assert len(rows) == len(failing)
    assert all(r[1]["data-search"].startswith(t.lower()) for r, t in zip(rows, failing, strict=True))
    assert [t["id"] for t in page.data()["traces"]] == failing
    for rule_id, n in summary["violations_by_rule"].items():  # each failed rule, named with its count
        assert any(rule_id in r[2] for r in rows)
        assert f"{rule_id}" in text and f">{n}<" in text
    assert "13 judge-rule decision(s) deferred" in page.text_of("id", "deferred")
    assert "8 passing traces are counted, not listed" in page.text_of("id", "listed")
    # No store: the folder holds the inputs and the two outputs, nothing else (no .seqjudge/ either).
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["out.html", "out.json", "rules.yaml", "traces.jsonl"]


def test_call_outputs_are_shown_and_secrets_redacted(suite: tuple[Path, Path]) -> None:
    # Plain JSONL records: the engine's fast path would drop the outputs; the html writer asks for models.
    rules, traces = suite
    _, text = check(rules, traces, "html")
    detail = next(t for t in Page(text).data()["traces"] if t["id"] == "bad0")
    assert [c["output"] for c in detail["calls"]] == ["deleted; api_key=[redacted]", "ok"]
    assert SECRET not in text
    assert [m["rule"] for m in detail["marks"]] == ["verify_first"]


def test_a_hostile_trace_is_inert(suite: tuple[Path, Path]) -> None:
    rules, traces = suite
    _, text = check(rules, traces, "html")
    assert INJECTION not in text and IMG not in text and EVIL_ID not in text
    page = Page(text)
    names = [tag for tag, _ in page.tags]
    assert names.count("script") == 2 and names.count("img") == 0
    assert "alert(" not in " ".join(body for attrs, body in page.scripts if attrs.get("type") is None)
    # Shown as text: the row's label, and the detail's output and arguments verbatim.
    assert [r for r in page.with_attr("data-verdict") if EVIL_ID in r[2]]
    detail = next(t for t in page.data()["traces"] if t["id"] == EVIL_ID)
    assert detail["calls"][0]["output"] == INJECTION + IMG
    assert json.loads(detail["calls"][1]["args"]) == {"comment": IMG}


def test_only_the_first_failing_traces_are_kept_and_the_page_says_so(
    suite: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    rules, traces = suite
    monkeypatch.setattr(check_html, "LISTED", 2)
    _, text = check(rules, traces, "html")
    page = Page(text)
    assert [t["id"] for t in page.data()["traces"]] == ["bad0", "bad3"]
    assert len(page.with_attr("data-verdict")) == 2
    assert page.text_of("data-count", "not-listed") == "3"  # bad6, bad9 and the hostile trace
    assert page.text_of("data-count", "fail") == "5"  # still counted
    assert "at most 2" in page.text_of("id", "listed")


def test_failures_only_makes_the_same_page(suite: tuple[Path, Path]) -> None:
    # The page lists failing traces only and counts all of them, with or without -q.
    rules, traces = suite
    code, full = check(rules, traces, "html")
    quiet_code, quiet = check(rules, traces, "html", "-q")
    assert code == quiet_code == 1 and quiet == full
    assert 'data-count="pass">8<' in quiet


def test_every_trace_passing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES, encoding="utf-8")
    traces = tmp_path / "traces.jsonl"
    traces.write_text(json.dumps(record(1)) + "\n", encoding="utf-8")
    code, text = check(rules, traces, "html")
    page = Page(text)
    assert code == 0 and page.data()["traces"] == [] and page.text_of("data-count", "pass") == "1"
    assert "none: no trace failed or needs review" in page.text_of("id", "listed")


def test_workers_render_the_same_first_failing_traces(
    suite: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each process renders details only for its own first LISTED failing traces; the page must still hold
    # the input's first LISTED, byte for byte as without workers.
    rules, traces = suite
    traces.write_text("".join(json.dumps(record(k)) + "\n" for k in range(60)), encoding="utf-8")
    monkeypatch.setattr(check_html, "LISTED", 3)
    monkeypatch.setattr(checkpool, "worker_count", lambda: 0)
    _, alone = check(rules, traces, "html")
    monkeypatch.setattr(checkpool, "worker_count", lambda: 2)
    monkeypatch.setattr(checkpool, "INLINE", 2)
    monkeypatch.setattr(checkpool, "CHUNK", 3)
    _, pooled = check(rules, traces, "html")
    assert pooled == alone
    page = Page(pooled)
    assert [t["id"] for t in page.data()["traces"]] == ["bad0", "bad3", "bad6"]
    assert page.text_of("data-count", "not-listed") == "17"


def test_a_suite_of_several_trace_files_is_titled_with_their_names(
    suite: tuple[Path, Path], tmp_path: Path
) -> None:
    # seqjudge.yaml names two trace files: the page and the JUnit suite say which, not "-"
    rules, traces = suite
    more = tmp_path / "more.jsonl"
    more.write_text(json.dumps(record(1)).replace("good1", "more1") + "\n", encoding="utf-8")
    (tmp_path / "seqjudge.yaml").write_text(
        f"rules: {rules.name}\ntraces: [{traces.name}, {more.name}]\n", encoding="utf-8"
    )
    assert run(["check", "--format", "html", "-o", "out.html"]) == 1
    title = Page((tmp_path / "out.html").read_text(encoding="utf-8")).text_of("id", "check-source")
    assert title == f"{traces} {more}"
    assert run(["check", "--format", "junit", "-o", "out.xml"]) == 1
    assert f'name="seqjudge check {traces} {more}"' in (tmp_path / "out.xml").read_text(encoding="utf-8")
