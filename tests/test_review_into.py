"""`review export` must lose no label: `--into DATASET` merges the reviewed labels into a golden dataset's
labels.jsonl, and `--labels FILE` refuses to replace a file whose labels the export would drop."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from seqjudge.cli import run
from test_calibrate import RULES
from test_review_cli import queue  # noqa: F401 (the fixture)

# Spaced oddly and with a CRLF line end: kept lines must come back byte for byte, not re-serialized.
T0 = b'{"trace_id":  "t0", "verdict": "pass", "labeler": "old"}\r\n'
T1 = b'{"trace_id": "t1", "verdict": "pass", "labeler": "old"}\n'
T9 = b'{"verdict": "pass", "trace_id": "t9", "labeler": "old"}'  # the last line, without a line end


def dataset(root: Path, trace_ids: list[str]) -> Path:
    root.mkdir()
    (root / "rules.yaml").write_text(RULES)
    calls = [{"tool_name": "Lookup", "arguments": {}}, {"tool_name": "Delete", "arguments": {}}]
    traces = "".join(json.dumps({"trace_id": t, "calls": calls}) + "\n" for t in trace_ids)
    (root / "traces.jsonl").write_text(traces)
    (root / "labels.jsonl").write_bytes(T0 + T1 + T9)
    return root


def resolve(queue: dict[str, Any], *trace_ids: str) -> None:  # noqa: F811
    for trace_id in trace_ids:
        item = str(queue["items"][trace_id])
        assert run(["review", "resolve", item, "--verdict", "fail", "--reviewer", "ana"]) == 0


def test_into_replaces_the_reviewed_label_in_place_adds_an_unlabelled_trace_and_keeps_the_rest(
    queue: dict[str, Any],  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    suite = dataset(tmp_path / "suite", ["t0", "t1", "t2", "t9"])  # t2 has no label yet
    resolve(queue, "t1", "t2")
    capsys.readouterr()
    assert run(["review", "export", "--into", str(suite)]) == 0
    assert "1 replaced (t1), 1 added" in capsys.readouterr().err
    lines = (suite / "labels.jsonl").read_bytes().splitlines(keepends=True)
    assert lines[0] == T0 and lines[2] == T9 + b"\n"  # kept as they were, in their order
    assert [json.loads(line)["trace_id"] for line in lines] == ["t0", "t1", "t9", "t2"]
    assert json.loads(lines[1])["labeler"] == "ana" and json.loads(lines[1])["verdict"] == "fail"
    assert json.loads(lines[3])["labeler"] == "ana"
    assert run(["golden", "validate", str(suite)]) == 0  # every trace labelled once


def refused_into(suite: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """`review export --into suite`'s message, checking that it exits 2 and leaves the labels as they were."""
    capsys.readouterr()
    assert run(["review", "export", "--into", str(suite)]) == 2
    assert (suite / "labels.jsonl").read_bytes() == T0 + T1 + T9
    return capsys.readouterr().err


def test_into_refuses_labels_for_traces_the_dataset_does_not_hold_and_writes_nothing(
    queue: dict[str, Any],  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    suite = dataset(tmp_path / "suite", ["t0", "t1", "t9"])
    resolve(queue, "t1", "t2")
    err = refused_into(suite, capsys)
    assert "traces that" in err and "t2" in err and "nothing was written" in err


def test_into_refuses_a_label_naming_a_rule_the_dataset_does_not_have(
    queue: dict[str, Any],  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    suite = dataset(tmp_path / "suite", ["t0", "t1", "t9"])
    item = str(queue["items"]["t1"])
    assert run(["review", "resolve", item, "--verdict", "fail", "--rule", "verify-first=fail"]) == 0
    assert "does not have: verify-first" in refused_into(suite, capsys)


def test_labels_refuses_to_drop_a_files_labels_unless_forced(
    queue: dict[str, Any],  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    resolve(queue, "t1")
    labels = tmp_path / "labels.jsonl"
    labels.write_bytes(T0 + T1 + T9)
    capsys.readouterr()
    assert run(["review", "export", "--labels", str(labels)]) == 2
    err = capsys.readouterr().err
    assert "2 label(s) that this export would replace" in err and "--into DATASET" in err and "--force" in err
    assert labels.read_bytes() == T0 + T1 + T9

    assert run(["review", "export", "--labels", str(labels), "--force"]) == 0
    (line,) = labels.read_text().splitlines()
    assert json.loads(line)["trace_id"] == "t1"
    # Exporting again over the file it wrote drops nothing: no refusal. A new or empty file: as before.
    assert run(["review", "export", "--labels", str(labels)]) == 0
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert run(["review", "export", "--labels", str(empty)]) == 0
    assert run(["review", "export", "--labels", str(tmp_path / "new.jsonl")]) == 0
    assert len(empty.read_text().splitlines()) == 1


@pytest.mark.parametrize("given", [[], ["--labels", "-", "--into", "suite"]])
def test_exactly_one_of_labels_and_into(
    queue: dict[str, Any],  # noqa: F811
    given: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run(["review", "export", *given]) == 2
    assert "give exactly one of --labels FILE and --into DATASET" in capsys.readouterr().err


def test_force_with_into_is_refused(
    queue: dict[str, Any],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run(["review", "export", "--into", "suite", "--force"]) == 2
    assert "--force has no meaning with --into" in capsys.readouterr().err
