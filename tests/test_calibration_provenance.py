"""`calibrate --plot` without matplotlib, and a calibration shown only beside runs of its own rules and traces
(issue 17, point 13)."""

from __future__ import annotations

import json
import struct
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest

from seqjudge.cli import run
from seqjudge.provenance import SUITE_KEY, Suite, png_suite, png_text
from test_calibrate import _scores_file, tiny_dataset

SCORES = {"a": 0.9, "b": 0.1, "c": 0.6, "d": 0.7}


def calibrate(root: Path, tmp_path: Path, *extra: str) -> int:
    scores = _scores_file(tmp_path / "scores.jsonl", SCORES)
    return run(["calibrate", str(root), "--scores", str(scores), "--resamples", "100", *extra])


def without_matplotlib(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every import of matplotlib fail, as on an install without the `plot` extra."""
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.backends", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, name, None)  # None in sys.modules: `import` raises ImportError


def png_with_text(text: dict[str, str] | None = None) -> bytes:
    """A valid 1x1 PNG with optional tEXt chunks, built by hand."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    texts = b"".join(chunk(b"tEXt", k.encode() + b"\0" + v.encode()) for k, v in (text or {}).items())
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + texts
        + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00"))
        + chunk(b"IEND", b"")
    )


def other_rules(root: Path) -> None:
    """The same dataset with one rule changed (SendEmail may be called twice)."""
    rules = root / "rules.yaml"
    text = rules.read_text()
    assert "max: 1" in text
    rules.write_text(text.replace("max: 1", "max: 2"))


# -- calibrate --plot without matplotlib ------------------------------------------------------------------
def test_plot_without_matplotlib_still_writes_the_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    without_matplotlib(monkeypatch)
    with pytest.raises(ImportError):
        import matplotlib.figure  # noqa: F401 - the import hook is in place
    root = tiny_dataset(tmp_path / "ds")
    figures, plot = tmp_path / "cal.json", tmp_path / "cal.png"
    assert calibrate(root, tmp_path, "-o", str(figures), "--plot", str(plot)) == 0
    captured = capsys.readouterr()
    assert json.loads(figures.read_text())["calibration"]["selection"]["threshold"] == 0.7
    assert "threshold" in captured.out and f"figures: {figures}" in captured.out  # the summary as usual
    assert not plot.exists() and f"plot: {plot}" not in captured.out
    assert "the calibration plot needs matplotlib, which is not installed" in captured.err
    assert "pip install 'seqjudge[plot]'" in captured.err
    assert f"plot: not written to {plot}" in captured.err


def test_plot_without_matplotlib_and_figures_on_stdout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    without_matplotlib(monkeypatch)
    root = tiny_dataset(tmp_path / "ds")
    assert calibrate(root, tmp_path, "-o", "-", "--plot", str(tmp_path / "cal.png")) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["suite"]["name"] == "ds"  # stdout stays one JSON document
    assert "seqjudge[plot]" in captured.err


# -- what a calibration was made from -----------------------------------------------------------------------
def test_calibrate_records_its_suite_in_the_json_and_the_png(tmp_path: Path) -> None:
    root = tiny_dataset(tmp_path / "ds")
    figures, plot = tmp_path / "cal.json", tmp_path / "cal.png"
    assert calibrate(root, tmp_path, "-o", str(figures), "--plot", str(plot)) == 0
    suite = Suite.from_dict(json.loads(figures.read_text())["suite"])
    assert suite is not None and (suite.name, suite.count) == ("ds", 4)
    assert png_suite(plot.read_bytes()) == suite  # matplotlib wrote it as a text chunk
    # Other rules, same traces: another suite.
    other = tiny_dataset(tmp_path / "ds2")
    other_rules(other)
    assert calibrate(other, tmp_path, "-o", str(figures)) == 0
    changed = Suite.from_dict(json.loads(figures.read_text())["suite"])
    assert changed is not None and changed.traces == suite.traces and not changed.same(suite)


def test_png_text_reads_only_well_formed_chunks() -> None:
    assert png_text(png_with_text({"a": "1", SUITE_KEY: "{}"})) == {"a": "1", SUITE_KEY: "{}"}
    assert png_text(b"not a png") == {}
    assert png_text(png_with_text({"a": "1"})[:40]) == {}  # cut inside the chunk
    assert png_suite(png_with_text({SUITE_KEY: "not json"})) is None
    assert png_suite(png_with_text({SUITE_KEY: json.dumps({"name": "x"})})) is None


@pytest.fixture
def suites(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A run of dataset `ds` in a store, a plot of `ds` and a plot of `other` (other rules)."""
    monkeypatch.delenv("SEQJUDGE_MODEL", raising=False)
    root = tiny_dataset(tmp_path / "ds")
    other = tiny_dataset(tmp_path / "other")
    other_rules(other)
    store = tmp_path / "store" / "seqjudge.db"
    code = run(["run", str(root / "rules.yaml"), str(root / "traces.jsonl"), "--store", str(store)])
    assert code in (0, 1)
    plots = {}
    for name, dataset in (("ds", root), ("other", other)):
        plots[name] = tmp_path / f"{name}.png"
        assert calibrate(dataset, tmp_path, "--plot", str(plots[name])) == 0
    return {"store": store, "plots": plots}


def report(store: Path, tmp_path: Path, *extra: str) -> tuple[int, str]:
    out = tmp_path / "report.html"
    out.unlink(missing_ok=True)
    code = run(["report", "latest", "--store", str(store), "-o", str(out), *extra])
    return code, out.read_text(encoding="utf-8") if out.exists() else ""


def report_beside(suites: dict[str, Any], tmp_path: Path, png: bytes) -> tuple[Path, int, str]:
    """The report of the latest run with ``png`` as calibration.png beside its store."""
    beside = suites["store"].parent / "calibration.png"
    beside.write_bytes(png)
    return (beside, *report(suites["store"], tmp_path))


def test_the_report_embeds_a_plot_of_the_same_rules_and_traces(
    suites: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, code, page = report_beside(suites, tmp_path, suites["plots"]["ds"].read_bytes())
    assert code == 0 and 'id="calibration"' in page and "data:image/png;base64," in page
    assert "made from the dataset ds: the same rules and traces as this run" in page


def test_the_report_skips_a_plot_of_another_suite(
    suites: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    beside, code, page = report_beside(suites, tmp_path, suites["plots"]["other"].read_bytes())
    assert code == 0 and 'id="calibration"' not in page
    err = capsys.readouterr().err
    assert f"skipped {beside}: it was made from the dataset other (4 traces" in err
    # Given explicitly, a plot of another suite is refused rather than shown beside the wrong run.
    code, page = report(suites["store"], tmp_path, "--calibration", str(suites["plots"]["other"]))
    assert code == 2 and page == ""
    assert "the calibration does not belong to this run" in capsys.readouterr().err


def test_a_plot_that_records_no_suite(
    suites: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    beside, code, page = report_beside(suites, tmp_path, png_with_text())
    assert code == 0 and 'id="calibration"' not in page  # found by looking: not shown
    assert f"skipped {beside}: it records no dataset" in capsys.readouterr().err
    code, page = report(suites["store"], tmp_path, "--calibration", str(beside))
    assert code == 0 and 'id="calibration"' in page  # given: shown, and said to be unchecked
    assert "it records no dataset (made by an older seqjudge or another tool), so it is not checked" in page
