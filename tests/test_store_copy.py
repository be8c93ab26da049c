"""Issue 35: `seqjudge store copy SRC DST` moves a store from SQLite to PostgreSQL and back: every table,
every row, checked by counts and content hashes; a non-empty destination refused unless --force (which
replaces it); review item numbers kept, and new items numbered after them."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from pg_server import raw_rows
from seqjudge.cli import run
from seqjudge.errors import InputError
from seqjudge.store import Store
from seqjudge.store.copy import copy_store
from test_batch_store import put_one_batch
from test_store import pair, where_of

KINDS = ["clean", "split", "nojudge", "unscored"]


def fill(target: str) -> dict[str, object]:
    """Two runs (one with a baseline, resolved review items and a batch), and what they read back as."""
    with Store(target) as s:
        first = s.create_run(config={"label": "one"}, fingerprint={"e": 1}, label="one")
        for i in range(12):
            s.save_result(first, *pair(f"t{i}", KINDS[i % 4]))
        s.finish_run(first, totals={"traces": 12})
        second = s.create_run(config={}, fingerprint={})
        for i in range(5):
            s.save_result(second, *pair(f"u{i}", KINDS[(i + 1) % 4]))
        s.save_baseline(first, "main")
        items = s.review_items(status="open")
        s.resolve_review(items[0].id, verdict="fail", reviewer="ana", note="checked")
        put_one_batch(s, second, "b1")
        # Tables later migrations added (3: the team's record, 4: the guard's decisions) are copied too.
        s.add_reviewer("bo")
        s.decide(items[1].id, "bo", "pass")
        s.record_guard_decision("t1", tool="delete", action="deny", rules=[], shadow=True)
        return snapshot(s)


def snapshot(s: Store) -> dict[str, object]:
    """Everything a user reads back from a store."""
    runs = s.list_runs()
    exports = {}
    for r in runs:
        out = io.StringIO()
        s.export(r.id, "jsonl", out)
        exports[r.id] = out.getvalue()
    return {
        "runs": [r.model_dump() for r in runs],
        "exports": exports,
        "items": [i.model_dump() for i in s.review_items(status="all")],
        "baselines": s.baselines(),
        "batches": {r.id: [b.model_dump() for b in s.batches(r.id)] for r in runs},
        "requests": {r.id: s.batch_requests(r.id) for r in runs},
        "parts": s.prompt_parts({"h"}),
        "decisions": raw_rows(
            where_of(s), "SELECT item_id, reviewer, verdict FROM review_decisions ORDER BY item_id"
        ),
        "reviewers": raw_rows(where_of(s), "SELECT name, admin FROM reviewers ORDER BY name"),
        "guard": [(d.session_id, d.seq, d.tool, d.action) for d in s.guard_decisions()],
    }


def test_sqlite_to_postgresql_and_back_keeps_every_row(tmp_path: Path, pg_url: str) -> None:
    source = str(tmp_path / "a.db")
    before = fill(source)
    report = copy_store(source, pg_url)
    counts = {t.name: t.rows for t in report.tables}
    assert counts["results"] == 17 and counts["runs"] == 2 and counts["batch_requests"] == 1
    # (resolve_review records a decision too, as the CLI path does)
    assert counts["reviewers"] == 1 and counts["review_decisions"] == 2 and counts["guard_decisions"] == 1
    assert report.replaced == 0
    with Store(pg_url) as s:
        assert snapshot(s) == before
        # Review items keep their numbers; a new one is numbered after them.
        top = max(i.id for i in s.review_items(status="all"))
        run_id = s.resolve_run("latest")
        s.save_result(run_id, *pair("u99", "split"))
        assert max(i.id for i in s.review_items(status="all")) == top + 1
        after = snapshot(s)
    back = str(tmp_path / "back.db")
    assert [t.digest for t in copy_store(pg_url, back).tables] != []
    with Store(back) as s:
        assert snapshot(s) == after


def test_a_non_empty_destination_is_refused_unless_forced(
    tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    source = str(tmp_path / "a.db")
    before = fill(source)
    with Store(pg_url) as s:
        s.create_run(config={}, fingerprint={})  # something already there
    assert run(["store", "copy", source, pg_url]) == 2
    assert "not empty" in capsys.readouterr().err
    assert raw_rows(pg_url, "SELECT COUNT(*) FROM runs") == [(1,)]  # untouched
    assert run(["store", "copy", source, pg_url, "--force"]) == 0
    out = capsys.readouterr().out
    assert "were replaced (--force)" in out and "content hashes" in out
    with Store(pg_url) as s:
        assert snapshot(s) == before


def test_bad_input_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = str(tmp_path / "a.db")
    fill(source)
    with pytest.raises(InputError, match="the same store"):
        copy_store(source, source)
    assert run(["store", "copy", str(tmp_path / "missing.db"), str(tmp_path / "b.db")]) == 2
    assert "no seqjudge store here" in capsys.readouterr().err
    assert not (tmp_path / "b.db").exists()
    assert run(["store", "copy", source, "mysql://u:hunter2-pw@h/x"]) == 2
    assert "hunter2" not in capsys.readouterr().err
