"""The store's side of batch runs: migration 2 (run status batch_pending, batch tables) on an existing
store, and the batch records' write-once and resume rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from seqjudge import store as store_module
from seqjudge.errors import InputError
from seqjudge.store import Store
from test_store import pair, raw_rows


def test_a_version_1_store_is_migrated_without_losing_a_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "seqjudge.db"
    with monkeypatch.context() as m:
        m.setattr(Store, "migrations", store_module.MIGRATIONS[:1])
        with Store(path) as s:
            old = s.create_run(config={"rules": "r.yaml"}, fingerprint={"engine": "1"}, label="old")
            s.save_result(old, *pair("t1", "split"))
            s.finish_run(old, totals={"traces": 1})
            new = s.create_run(config={}, fingerprint={})
            s.save_result(new, *pair("t2", "clean"))
            s.save_baseline(old, "main")
            assert s.schema_version == 1
    rows_before = raw_rows(
        path, "SELECT rowid, id, label, status, started_at, config FROM runs ORDER BY rowid"
    )
    with Store(path) as s:
        assert s.schema_version == len(store_module.MIGRATIONS) >= 2
        assert [r.id for r in s.list_runs()] == [new, old]
        assert s.result(old, "t1").result.trace_id == "t1" and s.baseline("main") == old
        assert s.review_items(run=old, status=None)[0].trace_id == "t1"
        s.mark_batch_pending(new)  # the new status is allowed
        assert s.run_info(new).status == "batch_pending"
    after = raw_rows(path, "SELECT rowid, id, label, status, started_at, config FROM runs ORDER BY rowid")
    assert [r for r in after if r[1] == old] == [r for r in rows_before if r[1] == old]  # rowid kept
    # Foreign keys are on again and still point at the rebuilt table: deleting a run cascades.
    assert raw_rows(path, "PRAGMA foreign_key_check") == []
    with Store(path) as s, s._tx() as conn:
        conn.execute("DELETE FROM runs WHERE id = ?", (old,))
    assert raw_rows(path, "SELECT COUNT(*) FROM results WHERE run_id = ?", (old,)) == [(0,)]
    assert raw_rows(path, "SELECT COUNT(*) FROM results WHERE run_id = ?", (new,)) == [(1,)]


def test_a_pending_batch_run_is_not_resumed_online(store_target: str) -> None:
    with Store(store_target) as s:
        run = s.create_run(config={}, fingerprint={})
        s.mark_batch_pending(run)
        with pytest.raises(InputError, match="waiting for provider batches") as err:
            s.reopen_run(run)
        assert f"seqjudge batch collect {run}" in str(err.value)
        assert s.run_info(run).status == "batch_pending"
        s.finish_run(run, totals={})
        assert s.reopen_run(run).status == "running"


def put_one_batch(s: Store, run: str, trace_id: str = "t1") -> None:
    """One batch trace (its prompt part ``h``) and one submitted batch ``b1`` of one request ``sj-1``."""
    trace, _ = pair(trace_id, "clean")
    row = {
        "trace_id": trace_id,
        "custom_id": "sj-1",
        "trace": trace,
        "engine": {"trace_id": trace_id},
        "prompt": {"prompt_hash": "p"},
        "request": {"system": {"part": "h"}},
    }
    s.put_batch_traces(run, [row], {"h": "the system prompt"})
    request = {
        "custom_id": "sj-1",
        "trace_id": trace_id,
        "purpose": "first",
        "attempt": 1,
        "prompt_hash": "p",
        "request_hash": "r",
        "session": {"request": "base"},
    }
    batch = {"id": "b1", "provider": "openai", "model": "m", "round": 0, "purpose": "first", "status": "new"}
    s.add_batch(run, batch, [request])


def test_batch_results_are_recorded_once(store_target: str) -> None:
    with Store(store_target) as s:
        run = s.create_run(config={}, fingerprint={})
        put_one_batch(s, run)
        assert s.prompt_parts({"h", "missing"}) == {"h": "the system prompt"}
        ok = [{"custom_id": "sj-1", "outcome": "succeeded", "result": {"choices": []}, "error": None}]
        assert s.record_batch_results("b1", ok, status="completed", counts={"total": 1}) == 1
        bad = [{"custom_id": "sj-1", "outcome": "errored", "result": None, "error": "late"}]
        assert s.record_batch_results("b1", bad, status="completed", counts={}) == 0  # written once
        (req,) = s.batch_requests(run)
        assert (req.outcome, req.result, req.handled) == ("succeeded", {"choices": []}, False)
        assert s.batches(run)[0].state == "collected" and s.batches(run)[0].counts == {"total": 1}
        s.mark_handled([("b1", "sj-1")])
        assert s.batch_requests(run) == [] and s.batch_requests(run, handled=True)[0].custom_id == "sj-1"
        assert s.batch_traces(run)["t1"].trace.trace_id == "t1"
