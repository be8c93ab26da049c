"""The review workflow from the command line: list -> show -> resolve -> export labels."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from seqjudge.cli import run
from seqjudge.crosscheck import REVIEW_REASONS
from seqjudge.store import Store
from test_store import RULE_IDS, pair

ROOT = Path(__file__).resolve().parent.parent
LABEL_KEYS = {"trace_id", "verdict", "rules", "labeler", "note"}


@pytest.fixture
def queue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """One run with a disagreement (t1), no judge and a failed engine rule (t2) and an unscored judge (t3)."""
    path = tmp_path / "seqjudge.db"
    monkeypatch.setenv("SEQJUDGE_STORE", str(path))
    with Store(path) as s:
        run_id = s.create_run(config={}, fingerprint={})
        for i, kind in enumerate(["clean", "split", "nojudge-failing", "unscored"]):
            s.save_result(run_id, *pair(f"t{i}", kind))
        items = {i.trace_id: i.id for i in s.review_items()}
    return {"path": path, "run": run_id, "items": items}


def validate_label(line: str) -> dict[str, Any]:
    """A golden-dataset label line (issue: calibrate on golden datasets)."""
    label = json.loads(line)
    assert set(label) == LABEL_KEYS
    assert isinstance(label["trace_id"], str) and label["verdict"] in ("pass", "fail")
    assert isinstance(label["rules"], dict)
    assert all(r in RULE_IDS and v in ("pass", "fail") for r, v in label["rules"].items())
    assert isinstance(label["labeler"], str) and label["labeler"] and isinstance(label["note"], str)
    return label


def test_shipped_labels_have_the_same_shape() -> None:
    # What review export writes must read like the labels the golden datasets ship.
    shipped = ROOT / "golden_traces" / "customer-support" / "labels.jsonl"
    first = json.loads(shipped.read_text(encoding="utf-8").splitlines()[0])
    assert set(first) == LABEL_KEYS


def test_the_whole_workflow(
    queue: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # list
    assert run(["review", "list"]) == 0
    out = capsys.readouterr().out
    listed = [line.split()[2] for line in out.splitlines() if re.match(rf"\s*\d+\s+{queue['run']}\s", line)]
    assert listed == ["t1", "t2", "t3"]
    item = queue["items"]["t1"]

    # show: the numbered trace with each rule's outcomes beside the calls it names
    assert run(["review", "show", str(item)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Review item {item} · run {queue['run']} · trace t1 · open")
    lines = out.splitlines()
    call2 = next(line for line in lines if re.match(r"\s+2\. UpdateCustomer", line))
    assert "read-before-update: engine failed · judge passed (DISAGREE)" in call2
    call1 = next(line for line in lines if re.match(r"\s+1\. VerifyIdentity", line))
    assert "verify-first: engine passed · judge passed" in call1
    assert "password=[redacted]" in call1 and "hunter2" not in out
    assert "← violation" not in out  # replaced by the outcomes
    assert "Reasons: judge_engine_disagreement" in out
    disagreement = out[out.index("Disagreement:") :]
    assert "read-before-update: engine failed (call 2, 3), judge passed" in disagreement
    assert "engine: GetCustomer succeeded only after UpdateCustomer" in disagreement
    assert "confirm-delete out_of_order at call 3: the judge failed confirm-delete" in out
    assert "Raw judge replies (2):" in out and "error (parse)" in out and "not json" in out

    # resolve, with a per-rule label that contradicts the engine (reported, not refused)
    assert (
        run(
            [
                "review",
                "resolve",
                str(item),
                "--verdict",
                "fail",
                "--rule",
                "read-before-update=fail",
                "--rule",
                "verify-first=fail",
                "--note",
                "updated without reading",
                "--reviewer",
                "ana",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    assert f"resolved review item {item} (trace t1): fail by ana" in captured.out
    assert "verify-first: you said fail, the engine said passed" in captured.err
    assert "read-before-update: you said" not in captured.err  # agrees with the engine

    # the queue moved on
    assert run(["review", "list"]) == 0
    assert " t1 " not in capsys.readouterr().out
    assert run(["review", "list", "--status", "resolved", "--format", "json"]) == 0
    resolved = json.loads(capsys.readouterr().out)
    assert [(i["trace_id"], i["resolution"]["verdict"]) for i in resolved] == [("t1", "fail")]
    assert run(["review", "show", str(item)]) == 0
    assert (
        "by ana: fail (read-before-update=fail, verify-first=fail); note: updated without reading"
        in capsys.readouterr().out
    )

    # export labels
    labels = tmp_path / "labels.jsonl"
    assert run(["review", "export", "--labels", str(labels)]) == 0
    assert "wrote 1 label(s)" in capsys.readouterr().err
    (line,) = labels.read_text(encoding="utf-8").splitlines()
    assert validate_label(line) == {
        "trace_id": "t1",
        "verdict": "fail",
        "rules": {"read-before-update": "fail", "verify-first": "fail"},
        "labeler": "ana",
        "note": "updated without reading",
    }


def test_reason_filter(queue: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["review", "list", "--reason", "unscored", "--format", "json"]) == 0
    assert [i["trace_id"] for i in json.loads(capsys.readouterr().out)] == ["t3"]
    assert (
        run(["review", "list", "--reason", "judge_rule_undecided", "--run", "latest", "--format", "json"])
        == 0
    )
    assert [i["trace_id"] for i in json.loads(capsys.readouterr().out)] == ["t3"]
    assert run(["review", "list", "--reason", "high_risk_imperfect"]) == 0
    assert "no open review items routed for high_risk_imperfect" in capsys.readouterr().out
    assert run(["review", "list", "--reason", "bogus"]) == 2
    err = capsys.readouterr().err
    assert "unknown review reason 'bogus'" in err and all(r in err for r in REVIEW_REASONS)


def test_show_an_item_without_a_judge(queue: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["review", "show", str(queue["items"]["t2"])]) == 0
    out = capsys.readouterr().out
    assert "Judge: skipped (no model configured)" in out
    assert "(at no call) confirm-delete: engine deferred\n" in out and "judge none" not in out
    assert "Raw judge replies" not in out and "Disagreement:" not in out


def test_show_of_a_missing_item_names_the_items_there_are(
    queue: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["review", "show", "99"]) == 2
    open_ids = ", ".join(str(i) for i in sorted(queue["items"].values()))
    assert f"the open items are {open_ids} (`seqjudge review list` shows them)" in capsys.readouterr().err
    with Store(tmp_path / "new.db"):
        pass  # a new store, as a README example meets it: item 3 is not there, and it says so
    assert run(["review", "show", "3", "--store", str(tmp_path / "new.db")]) == 2
    assert "the store has no open review item" in capsys.readouterr().err


def test_resolve_errors(queue: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    item = str(queue["items"]["t1"])
    assert run(["review", "resolve", "99", "--verdict", "pass"]) == 2
    assert "no review item 99" in capsys.readouterr().err
    assert run(["review", "resolve", item, "--verdict", "pass", "--rule", "verify-first"]) == 2
    assert "not RULE=pass or RULE=fail" in capsys.readouterr().err
    assert run(["review", "resolve", item, "--verdict", "pass", "--rule", "no-such-rule=pass"]) == 2
    err = capsys.readouterr().err
    assert "'no-such-rule' is not a rule of trace t1" in err and "verify-first" in err
    assert run(["review", "resolve", item, "--verdict", "maybe"]) == 2
    with Store(queue["path"]) as s:
        assert s.review_item(int(item)).status == "open"  # nothing was recorded


def test_resolving_again_replaces_the_decision(
    queue: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    item = str(queue["items"]["t2"])
    assert run(["review", "resolve", item, "--verdict", "fail", "--reviewer", "ana"]) == 0
    assert (
        run(
            [
                "review",
                "resolve",
                item,
                "--verdict",
                "pass",
                "--reviewer",
                "bo",
                "--rule",
                "confirm-delete=pass",
            ]
        )
        == 0
    )
    assert "(replacing fail by ana)" in capsys.readouterr().out
    assert run(["review", "export", "--labels", "-"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    label = validate_label(line)
    assert (label["verdict"], label["labeler"], label["rules"]) == ("pass", "bo", {"confirm-delete": "pass"})
