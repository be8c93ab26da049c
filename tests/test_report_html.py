"""`seqjudge report`: one self-contained HTML page, inert against hostile traces, figures equal to the store.

The page is parsed with the standard library's HTML parser, the way a browser tokenises it: what the tests
see as tags and attributes is what a browser would build. The browser itself is test_report_browser.py.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import struct
import zlib
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from report_data import BASELINE, CANDIDATE, COST, EVIL_ID, IMG, INJECTION, build
from seqjudge.cli import run
from seqjudge.crosscheck import agreement
from seqjudge.outputs.html.render import fixed, json_for_script
from seqjudge.outputs.html.svg import Segment, hbars
from seqjudge.outputs.html.view import score_bin
from seqjudge.store import Store

URL_ATTRS = {"src", "href", "srcset", "action", "formaction", "poster", "data", "xlink:href", "background"}


class Page(HTMLParser):
    """Every start tag with its attributes, the text of each <script>, and the text under ids of interest."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._script: dict[str, str | None] | None = None
        self._buffer: list[str] = []
        self._stack: list[tuple[str, dict[str, str | None], list[str]]] = []
        self.texts: list[tuple[str, dict[str, str | None], str]] = []  # (tag, attrs, text) of closed elements
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        if tag == "script":
            self._script, self._buffer = attributes, []
        if tag not in ("meta", "link", "br", "img", "input", "rect", "line", "polyline"):
            self._stack.append((tag, attributes, []))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        if tag == "script" and self._script is not None:
            self.scripts.append((self._script, "".join(self._buffer)))
            self._script = None
        while self._stack:
            name, attributes, parts = self._stack.pop()
            text = "".join(parts)
            self.texts.append((name, attributes, text))
            if self._stack:
                self._stack[-1][2].append(text)
            if name == tag:
                break

    def handle_data(self, data: str) -> None:
        if self._script is not None:
            self._buffer.append(data)
        if self._stack:
            self._stack[-1][2].append(data)

    def with_attr(self, name: str, value: str | None = None) -> list[tuple[str, dict[str, str | None], str]]:
        return [t for t in self.texts if name in t[1] and (value is None or t[1][name] == value)]

    def text_of(self, name: str, value: str) -> str:
        found = self.with_attr(name, value)
        assert len(found) == 1, f"{len(found)} elements with {name}={value!r}"
        return " ".join(found[0][2].split())

    def data(self) -> dict[str, Any]:
        blocks = [text for attrs, text in self.scripts if attrs.get("type") == "application/json"]
        assert len(blocks) == 1
        return json.loads(blocks[0])


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return build(tmp_path_factory.mktemp("store") / "seqjudge.db")


def report(stored: dict[str, Any], tmp_path: Path, *args: str, run_ref: str | None = None) -> str:
    out = tmp_path / "report.html"
    argv = ["report", run_ref or stored["candidate"], *args, "--store", str(stored["path"]), "-o", str(out)]
    assert run(argv) == 0
    return out.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def page_text(stored: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> str:
    return report(stored, tmp_path_factory.mktemp("out"), "--compare", "main")


@pytest.fixture(scope="module")
def page(page_text: str) -> Page:
    return Page(page_text)


# -- self-contained ------------------------------------------------------------------------------------------
def test_the_page_loads_nothing_from_anywhere(page: Page) -> None:
    names = Counter(tag for tag, _ in page.tags)
    assert not {"link", "iframe", "object", "embed", "base", "frame"} & set(names)
    for tag, attrs in page.tags:
        for name, value in attrs.items():
            if name in URL_ATTRS and value is not None:
                assert re.match(r"(?i)\s*(data:|#)", value), (
                    f"<{tag} {name}={value!r}> points outside the page"
                )
    scripts = [attrs for attrs, _ in page.scripts]
    assert len(scripts) == 2 and all("src" not in a for a in scripts)
    assert [a.get("type") for a in scripts] == ["application/json", None]
    [csp] = [
        a["content"] for t, a in page.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"
    ]
    assert csp is not None and "default-src 'none'" in csp and "img-src data:" in csp
    # The policy names the page's own script by its hash (and allows no other script).
    code = next(text for attrs, text in page.scripts if attrs.get("type") is None)
    digest = base64.b64encode(hashlib.sha256(code.encode("utf-8")).digest()).decode()
    assert f"script-src 'sha256-{digest}';" in csp
    assert "<style>" in "".join(f"<{t}>" for t, _ in page.tags)


def test_no_event_handler_attribute_anywhere(page: Page) -> None:
    # The page's own behaviour is wired with addEventListener; any on* attribute would be injected.
    for tag, attrs in page.tags:
        assert not [a for a in attrs if a.startswith("on")], (tag, attrs)


# -- the embedded data ---------------------------------------------------------------------------------------
def test_the_embedded_json_parses_and_holds_every_trace(
    page: Page, page_text: str, stored: dict[str, Any]
) -> None:
    data = page.data()
    assert data["run"] == stored["candidate"] and data["compare"] is True
    with Store(stored["path"], create=False) as s:
        back = list(s.results(stored["candidate"]))
    assert [t["id"] for t in data["traces"]] == [r.trace_id for r in back]
    by_id = {t["id"]: t for t in data["traces"]}
    for r in back:
        t = by_id[r.trace_id]
        assert len(t["calls"]) == len(r.trace.calls) and t["verdict"] == r.result.verdict
        assert [c["tool"] for c in t["calls"]] == [c.tool_name for c in r.trace.calls]
        engine = [(m["rule"], m["call"]) for m in t["marks"] if m["source"] == "engine"]
        assert engine == [(v.rule_id, v.offending_call_index) for v in r.result.engine.violations]
    # t1: the engine fails read-before-update at call index 1, the judge fails confirm-delete at index 2.
    marks = {(m["source"], m["rule"], m["call"]) for m in by_id["t1"]["marks"]}
    assert marks == {("engine", "read-before-update", 1), ("judge", "confirm-delete", 2)}
    rules = {r["id"]: r for r in by_id["t1"]["rules"]}
    assert rules["read-before-update"]["agree"] is False and rules["read-before-update"]["engine_explanation"]
    assert rules["confirm-delete"]["judge_explanation"] == "the judge failed confirm-delete"
    opening = '<script type="application/json" id="seqjudge-data">'
    block = page_text.split(opening, 1)[1].split("</script>", 1)[0]
    assert "<" not in block and ">" not in block and "&" not in block


def test_json_for_script_cannot_close_its_block() -> None:
    value = {"a": "</script><script>x()</script>", "b": "<!-- -->", "c": "&amp; \u2028 \u2029", "</": 1}
    text = str(json_for_script(value))
    assert not set("<>&") & set(text) and "\u2028" not in text and "\u2029" not in text
    assert json.loads(text) == value


# -- hostile traces ------------------------------------------------------------------------------------------
def test_an_injection_trace_is_inert(page: Page, page_text: str) -> None:
    # Nowhere raw: not the script-breaking text, not the image tag, not the id with its tag inside.
    assert INJECTION not in page_text and IMG not in page_text and EVIL_ID not in page_text
    assert "alert(" not in " ".join(text for attrs, text in page.scripts if attrs.get("type") is None)
    names = Counter(tag for tag, _ in page.tags)
    assert names["script"] == 2 and names["img"] == 0
    # ...and shown as what it is: text. The id is the row's button label and a data attribute, verbatim.
    rows = page.with_attr("data-verdict")
    evil = [r for r in rows if EVIL_ID in r[2]]
    assert (
        len(evil) == 1
        and evil[0][1]["data-search"]
        == " ".join([EVIL_ID, "read-before-update", "read-before-update", "email-limit"]).lower()
    )
    detail = next(t for t in page.data()["traces"] if t["id"] == EVIL_ID)
    assert INJECTION + IMG in json.dumps(detail["calls"][1]["output"], ensure_ascii=False).replace("\\", "")
    assert IMG.replace('"', '\\"') in detail["calls"][2]["args"]
    assert any(m["content"] == INJECTION for m in detail["messages"])
    assert any(INJECTION in m["explanation"] for m in detail["marks"] if m["source"] == "judge")


def test_svg_labels_are_escaped() -> None:
    chart = str(hbars([('<script>alert(1)</script>"', [Segment("fail", 2)])], title="<b>t</b>"))
    assert "<script>" not in chart and "<b>" not in chart
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&quot;" in chart


# -- figures equal the store ---------------------------------------------------------------------------------
def test_counts_equal_the_store(page: Page, stored: dict[str, Any]) -> None:
    with Store(stored["path"], create=False) as s:
        counts = s.run_info(stored["candidate"]).counts
        results = [r.result for r in s.results(stored["candidate"])]
    for key in ("traces", "pass", "fail", "review"):
        assert int(page.text_of("data-count", key)) == counts[key], key
    rows = page.with_attr("data-verdict")
    assert len(rows) == counts["traces"]
    assert Counter(r[1]["data-verdict"] for r in rows) == Counter(
        {k: counts[k] for k in ("pass", "fail", "review") if counts[k]}
    )
    overall = agreement(results)["overall"]
    assert (
        page.text_of("data-figure", "agreement") == f"{100 * overall['agreed'] / overall['decisions']:.1f}%"
    )
    assert page.text_of("data-figure", "kappa") == fixed(overall["kappa"])
    # The score histogram counts every trace once (its bar totals add up to the run).
    histogram = next(
        t for t in page.texts if t[0] == "svg" and "Score distribution" in (t[1].get("aria-label") or "")
    )
    assert f"of {counts['traces']} trace(s)" in (histogram[1]["aria-label"] or "")


def test_tokens_cost_and_why_the_judge_was_skipped(page: Page) -> None:
    assert page.text_of("data-figure", "tokens").startswith("1,234 in (200 cached), 321 out")
    assert page.text_of("data-figure", "cost") == f"${COST:.4f}"
    # t2 ran without a judge: its reason is shown, with how many traces it concerns.
    assert page.text_of("data-figure", "judge-skipped") == "no model configured (1 trace)"


def test_score_bins_keep_a_perfect_score_apart() -> None:
    assert [score_bin(v) for v in (0.0, 0.09, 0.1, 0.85, 0.999, 1.0)] == [0, 0, 1, 8, 9, 10]


# -- --compare -----------------------------------------------------------------------------------------------
def test_compare_shows_the_deltas(page: Page) -> None:
    # Matched: t0..t4 (t5 only in the baseline; t6, t7 and the hostile trace only in this run).
    assert page.text_of("data-delta", "matched") == "5"
    # t1 pass->fail, t4 pass->review; t2 (no model: the engine's verdict) stays pass.
    assert page.text_of("data-delta", "worse") == "2"
    assert page.text_of("data-delta", "better") == "0"
    assert page.text_of("data-delta", "new") == "2" and page.text_of("data-delta", "fixed") == "0"
    assert page.text_of("data-delta", "mean-score") == "-0.200"
    cells = {a["data-transition"]: int(text) for _, a, text in page.with_attr("data-transition")}
    assert cells["pass-pass"] == 3 and cells["pass-review"] == 1 and cells["pass-fail"] == 1
    assert sum(cells.values()) == 5
    [(_, banner, text)] = page.with_attr("id", "regression")
    assert banner["data-regression"] == "yes" and "deterministic" in text
    changed = {r[1]["data-i"] for r in page.with_attr("data-changed", "1")}
    ids = [t["id"] for t in page.data()["traces"]]
    assert {ids[int(i)] for i in changed} == {"t1", "t4"}
    assert "Only in the baseline (1): t5." in page.text_of("id", "missing")
    t1 = next(t for t in page.data()["traces"] if t["id"] == "t1")
    assert t1["delta"]["before"] == "pass" and t1["delta"]["score_delta"] == -1.0
    assert sorted(t1["delta"]["new"]) == ["confirm-delete", "read-before-update"]
    delta_cells = [
        " ".join(text.split())
        for tag, a, text in page.texts
        if tag == "td" and "delta" in (a.get("class") or "")
    ]
    assert "-1.00" in delta_cells


def test_compare_against_a_run_id_or_an_export_gives_the_same_deltas(
    stored: dict[str, Any], tmp_path: Path
) -> None:
    export = tmp_path / "baseline.jsonl"
    with Store(stored["path"], create=False) as s, export.open("w", encoding="utf-8") as out:
        s.export(stored["baseline"], "jsonl", out)
    by_name = Page(report(stored, tmp_path, "--compare", "main"))
    by_prefix = Page(report(stored, tmp_path, "--compare", stored["baseline"][:-1]))
    by_file = Page(report(stored, tmp_path, "--compare", str(export)))
    for p in (by_prefix, by_file):
        for key in ("matched", "worse", "better", "new", "fixed", "mean-score"):
            assert p.text_of("data-delta", key) == by_name.text_of("data-delta", key)


def test_without_compare_there_is_no_delta(stored: dict[str, Any], tmp_path: Path) -> None:
    p = Page(report(stored, tmp_path))
    assert not p.with_attr("data-delta") and not p.with_attr("data-changed")
    assert p.data()["compare"] is False and all(t["delta"] is None for t in p.data()["traces"])


def test_a_baseline_sharing_no_trace_says_so(tmp_path: Path) -> None:
    from test_store import pair

    path = tmp_path / "s.db"
    with Store(path) as s:
        a = s.create_run(config={}, fingerprint={})
        s.save_result(a, *pair("x1", "clean"))
        b = s.create_run(config={}, fingerprint={})
        s.save_result(b, *pair("y1", "split"))
    out = tmp_path / "r.html"
    assert run(["report", b, "--compare", a, "--store", str(path), "-o", str(out)]) == 0
    p = Page(out.read_text(encoding="utf-8"))
    [(_, banner, text)] = p.with_attr("id", "regression")
    assert banner["data-regression"] == "unknown" and "share no trace id" in text
    assert p.text_of("data-delta", "matched") == "0"


# -- inputs ------------------------------------------------------------------------------------------------
def test_a_run_from_a_jsonl_export_needs_no_store(stored: dict[str, Any], tmp_path: Path) -> None:
    export = tmp_path / "run.jsonl"
    with Store(stored["path"], create=False) as s:
        buffer = io.StringIO()
        s.export(stored["candidate"], "jsonl", buffer)
    export.write_text(buffer.getvalue(), encoding="utf-8")
    out = tmp_path / "r.html"
    assert run(["report", str(export), "-o", str(out), "--store", str(tmp_path / "none.db")]) == 0
    assert not (tmp_path / "none.db").exists()
    p = Page(out.read_text(encoding="utf-8"))
    assert int(p.text_of("data-count", "traces")) == len(CANDIDATE) + 2


def test_bad_references_are_input_errors_and_write_nothing(
    stored: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.html"
    assert run(["report", "r1999", "--store", str(stored["path"]), "-o", str(out)]) == 2
    assert "no run 'r1999'" in capsys.readouterr().err
    assert run(["report", "latest", "--compare", "nope", "--store", str(stored["path"]), "-o", str(out)]) == 2
    assert "no run 'nope'" in capsys.readouterr().err
    missing = tmp_path / "no" / "seqjudge.db"
    assert run(["report", "latest", "--store", str(missing), "-o", str(out)]) == 2
    assert "no seqjudge store here" in capsys.readouterr().err
    assert not out.exists() and not missing.parent.exists()


def test_stdout_output(stored: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["report", stored["candidate"], "--store", str(stored["path"]), "-o", "-"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("<!doctype html>") and out.rstrip().endswith("</html>")


# -- calibration -------------------------------------------------------------------------------------------
def tiny_png() -> bytes:
    """A valid 1x1 PNG, built by hand (no imaging library needed)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00"))
        + chunk(b"IEND", b"")
    )


def test_a_calibration_plot_is_embedded(stored: dict[str, Any], tmp_path: Path) -> None:
    folder = tmp_path / "withcal"
    folder.mkdir()
    path = folder / "seqjudge.db"
    path.write_bytes(stored["path"].read_bytes())
    png = tiny_png()
    (folder / "calibration.png").write_bytes(png)
    out = tmp_path / "r.html"
    # Beside the store, a plot that does not say which rules and traces it was made from is not shown
    # (test_calibration_provenance.py: one of this run's own suite is); given with --calibration, it is.
    assert run(["report", stored["candidate"], "--store", str(path), "-o", str(out)]) == 0
    assert not [a for t, a in Page(out.read_text(encoding="utf-8")).tags if t == "img"]
    argv = ["report", stored["candidate"], "--store", str(path), "-o", str(out)]
    assert run([*argv, "--calibration", str(folder / "calibration.png")]) == 0
    p = Page(out.read_text(encoding="utf-8"))
    [img] = [a for t, a in p.tags if t == "img"]
    assert img["src"] == "data:image/png;base64," + base64.b64encode(png).decode()
    # Without one, no calibration section at all.
    assert not [a for t, a in Page(report(stored, tmp_path)).tags if a.get("id") == "calibration"]


def test_calibration_figures_from_json(stored: dict[str, Any], tmp_path: Path) -> None:
    from seqjudge.calibrate import Settings, calibrate

    scores = {f"t{i}": (0.3 if i % 3 == 0 else 0.95) - 0.01 * (i % 5) for i in range(30)}
    labels = {t: "fail" if i % 3 == 0 else "pass" for i, t in enumerate(scores)}
    figures = calibrate(scores, labels, Settings(resamples=50))
    path = tmp_path / "cal.json"
    path.write_text(figures.model_dump_json(), encoding="utf-8")
    p = Page(report(stored, tmp_path, "--calibration", str(path)))
    text = p.text_of("id", "calibration")
    assert f"Chosen threshold {figures.selection.threshold:.4f}" in text
    assert any(t == "polyline" for t, _ in p.tags)  # the sweep drawn as lines


def test_a_bad_calibration_file_given_is_an_input_error(
    stored: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "cal.png"
    bad.write_bytes(b"not an image")
    out = tmp_path / "r.html"
    argv = ["report", "latest", "--calibration", str(bad), "--store", str(stored["path"]), "-o", str(out)]
    assert run(argv) == 2
    assert "neither a PNG image nor a JSON object" in capsys.readouterr().err and not out.exists()


def test_baseline_fixture_is_what_the_tests_assume() -> None:
    # Guards the figures above: the baseline is all clean but t5, the candidate has the kinds named.
    assert set(BASELINE) & set(CANDIDATE) == {"t0", "t1", "t2", "t3", "t4"}


def test_a_run_still_running_with_no_result_yet_renders(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with Store(path) as s:
        run_id = s.create_run(config={}, fingerprint={})  # running: no totals, no results
    out = tmp_path / "r.html"
    assert run(["report", run_id, "--store", str(path), "-o", str(out)]) == 0
    p = Page(out.read_text(encoding="utf-8"))
    assert p.text_of("data-count", "traces") == "0" and p.data()["traces"] == []
    assert "running" in p.text_of("class", "meta") and not p.with_attr("data-verdict")
