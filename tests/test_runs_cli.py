"""`seqjudge runs list | show | export` over a store built with the Store API."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path
from typing import Any

import pytest

from seqjudge.cli import run
from seqjudge.crosscheck import agreement
from seqjudge.store import Store, read_export
from test_store import pair

KINDS = ["clean", "split", "nojudge", "unscored"]


@pytest.fixture
def stored(tmp_path: Path) -> dict[str, Any]:
    """Two runs: ``old`` (4 traces, finished) and ``new`` (2 traces, interrupted), newest last."""
    path = tmp_path / "seqjudge.db"
    with Store(path) as s:
        old = s.create_run(config={"rules": "rules.yaml"}, fingerprint={"engine": "0.1.0"}, label="baseline")
        results = {}
        for i, kind in enumerate(KINDS):
            trace, result = pair(f"t{i}", kind)
            s.save_result(old, trace, result)
            results[result.trace_id] = result
        s.finish_run(old, totals={"traces": 4})
        new = s.create_run(config={}, fingerprint={"engine": "0.1.0"})
        s.save_result(new, *pair("t0", "clean"))
        s.save_result(new, *pair("t1", "split"))
        s.finish_run(new, totals={"traces": 2}, status="interrupted")
    return {"path": path, "old": old, "new": new, "results": results}


def test_list_text_and_json(stored: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["runs", "list", "--store", str(stored["path"])]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:3] == ["RUN", "STARTED", "(UTC)"]
    assert out[1].startswith(stored["new"]) and "interrupted" in out[1]  # newest first
    assert out[2].startswith(stored["old"]) and out[2].endswith("baseline")
    # TRACES PASS FAIL REVIEW columns of the old run.
    assert out[2].split()[4:8] == ["4", "2", "1", "1"]  # t2: no model, the engine passes it
    assert run(["runs", "list", "--store", str(stored["path"]), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in data] == [stored["new"], stored["old"]]
    assert data[1]["counts"]["traces"] == 4 and data[1]["totals"] == {"traces": 4}
    assert data[1]["config"]["redact"] == ["password", "api_key", "token", "authorization", "secret"]


def test_list_reads_the_store_from_the_environment(
    stored: dict[str, Any], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEQJUDGE_STORE", str(stored["path"]))
    assert run(["runs", "list", "--format", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 2


def test_list_without_a_store_is_bad_input_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere" / "seqjudge.db"
    assert run(["runs", "list", "--store", str(missing)]) == 2
    assert "no seqjudge store here" in capsys.readouterr().err
    assert not missing.parent.exists()
    empty = tmp_path / "empty.db"
    Store(empty).close()
    assert run(["runs", "list", "--store", str(empty)]) == 0
    assert "no runs stored" in capsys.readouterr().out


def test_show_summary_with_agreement_and_fingerprints(
    stored: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    # The shortest prefix that names the old run alone: both runs may be made in the same second, and their
    # ids then share more than the time (a fixed cut, such as all but two characters, was now and then
    # ambiguous, which `runs show` rightly refuses).
    prefix = stored["old"][: len(os.path.commonprefix([stored["old"], stored["new"]])) + 1]
    assert run(["runs", "show", prefix, "--store", str(stored["path"])]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Run {stored['old']} (baseline) · completed")
    assert "4 trace(s): 2 pass, 1 fail, 1 review; review queue: 2 open, 0 resolved" in out
    figures = agreement(stored["results"].values())["overall"]
    assert (figures["agreed"], figures["decisions"]) == (5, 6)
    assert f"judge-engine agreement: 5/6 agree (83.3%), kappa {figures['kappa']:.2f}" in out
    assert "read-before-update  1/2 agree (50.0%)" in out
    assert "fingerprint: engine=0.1.0" in out
    assert "judge fingerprint (3 trace(s)): provider=scripted model=scripted" in out
    assert "judge skipped: no model configured" in out


def test_show_one_trace_and_latest(stored: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["runs", "show", "latest", "--trace", "t1", "--store", str(stored["path"])]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Run {stored['new']} · trace t1")  # latest is the newer run
    rows = {line.split()[0]: line.split() for line in out.splitlines()[4:]}
    assert rows["read-before-update"][3:] == ["failed", "passed", "failed", "DISAGREE"]
    assert rows["verify-first"][3:] == ["passed", "passed", "passed", "agree"]
    assert rows["confirm-delete"][3:] == ["deferred", "failed", "failed"]
    assert "review reasons: judge_engine_disagreement" in out
    assert run(["runs", "show", "latest", "--trace", "t9", "--store", str(stored["path"])]) == 2
    assert "no trace 't9'" in capsys.readouterr().err


def test_unknown_run_names_the_ref_and_how_to_list(
    stored: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["runs", "show", "r1999", "--store", str(stored["path"])]) == 2
    err = capsys.readouterr().err
    assert "no run 'r1999'" in err and "seqjudge runs list" in err


def test_export_jsonl_to_a_file_rebuilds_the_run(
    stored: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "out.jsonl"
    assert (
        run(
            [
                "runs",
                "export",
                stored["old"],
                "--format",
                "jsonl",
                "-o",
                str(target),
                "--store",
                str(stored["path"]),
            ]
        )
        == 0
    )
    assert "exported 4 trace(s)" in capsys.readouterr().err
    with target.open(encoding="utf-8") as handle:
        back = list(read_export(handle))
    assert [s.trace_id for _, s in back] == ["t0", "t1", "t2", "t3"]
    for info, s in back:
        assert info.id == stored["old"]
        assert s.result == stored["results"][s.trace_id]
    assert "hunter2" not in target.read_text(encoding="utf-8")


def test_export_csv_latest_to_stdout(stored: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["runs", "export", "latest", "--format", "csv", "--store", str(stored["path"])]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(r["trace_id"], r["verdict"], r["judge_status"]) for r in rows] == [
        ("t0", "pass", "scored"),
        ("t1", "fail", "scored"),
    ]
    assert rows[1]["rules_failed"] == "read-before-update;confirm-delete"
    assert rows[1]["review_reasons"] == "judge_engine_disagreement"
    assert rows[1]["tokens_in"] == "200"


def test_export_and_show_take_a_baseline_name_as_compare_does(
    stored: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    store = ["--store", str(stored["path"])]
    assert run(["baseline", "save", stored["old"], "--name", "main", *store]) == 0
    capsys.readouterr()
    assert run(["runs", "export", "main", "--format", "csv", *store]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["trace_id"] for r in rows] == ["t0", "t1", "t2", "t3"]  # the baseline's run, not latest
    assert run(["runs", "show", "main", *store]) == 0
    assert stored["old"] in capsys.readouterr().out
    assert run(["runs", "show", "nomain", *store]) == 2
    assert "a baseline name" in capsys.readouterr().err  # the hint says what a RUN may be


def test_export_rejects_an_unknown_format(stored: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["runs", "export", "latest", "--format", "xml", "--store", str(stored["path"])]) == 2


def test_a_run_stored_with_the_environment_variable_is_listed_with_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before cli/options.py, `run` ignored SEQJUDGE_STORE and wrote ./.seqjudge/seqjudge.db, so `runs list`
    # with the same variable found no run.
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SEQJUDGE_MODEL", raising=False)
    store = tmp_path / "elsewhere" / "runs.db"
    monkeypatch.setenv("SEQJUDGE_STORE", str(store))
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - {id: r1, type: require, tool: A}\n", encoding="utf-8")
    traces = tmp_path / "traces.jsonl"
    traces.write_text(json.dumps({"trace_id": "t1", "calls": [{"tool_name": "A"}]}) + "\n", encoding="utf-8")
    assert run(["run", str(rules), str(traces), "--label", "from-env"]) == 0
    capsys.readouterr()
    assert not (tmp_path / ".seqjudge" / "seqjudge.db").exists()
    assert run(["runs", "list", "--format", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [r["label"] for r in listed] == ["from-env"]
