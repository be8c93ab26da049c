"""`seqjudge reviewers add/list/disable` and `seqjudge review resolve` on items that need several reviews."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seqjudge.cli import run
from seqjudge.store import Store
from test_store import pair


def test_add_prints_the_token_once_and_list_never_shows_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = str(tmp_path / "seqjudge.db")
    assert run(["reviewers", "add", "ana", "--admin", "--store", store]) == 0
    out, err = capsys.readouterr()
    token = out.strip()
    assert len(token) == 43 and "shown once" in err and "ana" in err and token not in err
    with Store(store) as s:
        found = s.reviewer_for_token(token)
        assert found is not None and (found.name, found.admin) == ("ana", True)
    assert run(["reviewers", "add", "bo", "--store", store]) == 0
    capsys.readouterr()
    assert run(["reviewers", "list", "--store", store]) == 0
    listed = capsys.readouterr().out
    assert token not in listed
    assert [line.split()[:2] for line in listed.splitlines()] == [["ana", "admin"], ["bo", "reviewer"]]
    assert run(["reviewers", "list", "--format", "json", "--store", store]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [(r["name"], r["admin"], r["disabled_at"]) for r in data] == [
        ("ana", True, None),
        ("bo", False, None),
    ]
    assert all(set(r) == {"name", "admin", "created_at", "disabled_at"} for r in data)


def test_reviewers_errors_are_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = str(tmp_path / "seqjudge.db")
    assert run(["reviewers", "list", "--store", store]) == 2  # a wrong --store is said, not an empty list
    assert "no seqjudge store here" in capsys.readouterr().err
    assert run(["reviewers", "add", "ana", "--store", store]) == 0
    capsys.readouterr()
    assert run(["reviewers", "add", "ana", "--store", store]) == 2
    assert "already a reviewer named 'ana'" in capsys.readouterr().err
    assert run(["reviewers", "add", "a,b", "--store", store]) == 2
    assert "cannot be a reviewer's name" in capsys.readouterr().err
    assert run(["reviewers", "disable", "zed", "--store", store]) == 2
    assert "no reviewer named 'zed'" in capsys.readouterr().err
    assert run(["reviewers", "disable", "ana", "--store", store]) == 0
    assert "disabled ana" in capsys.readouterr().out
    assert run(["reviewers", "list", "--store", store]) == 0
    assert "disabled" in capsys.readouterr().out


def test_resolve_counts_as_one_review_and_adjudicate_needs_an_admin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "seqjudge.db"
    with Store(store) as s:
        run_id = s.create_run(config={"review": {"reviews_per_item": 2}}, fingerprint={})
        s.save_result(run_id, *pair("t1", "split"))
        [item] = [i.id for i in s.review_items(run=run_id)]
        s.add_reviewer("chief", admin=True)
        s.add_reviewer("bo")
    base = ["review", "resolve", str(item), "--store", str(store)]
    assert run([*base, "--verdict", "fail", "--reviewer", "ana"]) == 0
    out = capsys.readouterr().out
    assert f"recorded ana's review of item {item} (trace t1): fail; 1 of 2 independent reviews in" in out
    assert run([*base, "--verdict", "pass", "--reviewer", "bo"]) == 0
    assert "the item is disputed until an admin adjudicates it" in capsys.readouterr().out
    assert run([*base, "--verdict", "pass", "--reviewer", "bo", "--adjudicate"]) == 2
    assert "'bo' is not an admin" in capsys.readouterr().err
    assert run([*base, "--verdict", "pass", "--reviewer", "chief", "--adjudicate"]) == 0
    assert f"adjudicated review item {item} (trace t1): pass by chief" in capsys.readouterr().out
    assert run([*base, "--verdict", "fail", "--reviewer", "ana"]) == 2
    assert "was resolved meanwhile: pass by chief" in capsys.readouterr().err
    labels = tmp_path / "labels.jsonl"
    assert run(["review", "export", "--labels", str(labels), "--store", str(store)]) == 0
    [label] = [json.loads(line) for line in labels.read_text().splitlines()]
    assert (label["verdict"], label["labeler"]) == ("pass", "chief")
    with Store(store) as s:
        assert [(d.reviewer, d.kind, d.verdict) for d in s.decision_history(item)] == [
            ("ana", "review", "fail"),
            ("bo", "review", "pass"),
            ("chief", "adjudication", "pass"),
        ]
