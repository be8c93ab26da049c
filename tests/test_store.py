"""The store, on SQLite and on PostgreSQL: round trips, one result per trace, run references, migrations, WAL,
redaction.

One suite for both backends: ``db`` (and ``store_target``, tests/conftest.py) is a new SQLite file, then a
new database on the test session's PostgreSQL server (tests/pg_server.py). Tests of what only SQLite has (a
file, WAL, a file that is not a database) take ``tmp_path`` instead.

The builders at the top (``RULES``, ``make_trace``, ``judge_result``, ``make_result``) are shared with
test_store_kill.py, test_review_cli.py and test_runs_cli.py.
"""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from pg_server import raw_rows as pg_raw_rows
from pg_server import stored_bytes
from seqjudge import store as store_module
from seqjudge.crosscheck import TraceResult, reconcile
from seqjudge.errors import InputError
from seqjudge.judge.judge import Attempt, Fingerprint, JudgeResult, judge_trace
from seqjudge.judge.providers.base import Usage
from seqjudge.judge.providers.scripted import ScriptedProvider
from seqjudge.judge.schema import JudgeOutput, JudgeViolation
from seqjudge.redact import (
    DEFAULT_REDACT,
    REDACTED,
    key_matches,
    redact_text,
    redact_trace,
    secret_env_values,
)
from seqjudge.rules.engine import check
from seqjudge.rules.load import parse_rules
from seqjudge.store import DuplicateTraceError, Migration, Store, read_export
from seqjudge.trace import Trace

# -- builders ----------------------------------------------------------------------------------------------
RULES = parse_rules(
    {
        "rules": [
            {"id": "verify-first", "type": "require", "tool": "VerifyIdentity", "severity": "critical"},
            {
                "id": "read-before-update",
                "type": "before",
                "first": "GetCustomer",
                "then": "UpdateCustomer",
                "severity": "critical",
            },
            {"id": "email-limit", "type": "max_calls", "tool": "SendEmail", "max": 1, "severity": "warning"},
            {
                "id": "confirm-delete",
                "type": "judge",
                "description": "Confirm with the user before deleting a record.",
                "severity": "warning",
            },
        ]
    }
)
RULE_IDS = [r.rule_id for r in RULES.rules]
SEVERITY = {r.rule_id: r.severity for r in RULES.rules}


def make_trace(trace_id: str, *, good: bool = True, secret: str = "hunter2") -> Trace:
    """Verify, then read and update (or update before reading when not ``good``); secrets in the arguments."""
    order = ["GetCustomer", "UpdateCustomer"] if good else ["UpdateCustomer", "GetCustomer"]
    calls: list[dict[str, Any]] = [
        {
            "tool_name": "VerifyIdentity",
            "arguments": {"customer_id": "C-1001", "password": secret, "x_api_key": "xk-" + secret},
            "output": {"verified": True, "session_token": "tok-" + secret},
        }
    ]
    calls += [{"tool_name": name, "arguments": {"customer_id": "C-1001"}} for name in order]
    calls.append(
        {
            "tool_name": "SendEmail",
            "arguments": {"to": "a@example.com", "max_tokens": 12},
            "output": f"sent; token={secret}",
        }
    )
    return Trace.model_validate(
        {
            "trace_id": trace_id,
            "calls": calls,
            "messages": [{"role": "user", "content": f"my password: {secret}", "at": 0}],
            "context": {"authorization": "Bearer " + secret, "user_role": "standard"},
            "metadata": {"source": "unit", "client_secret": secret},
        }
    )


def judge_result(
    trace_id: str,
    failed: dict[str, int | None] | None = None,
    *,
    status: str = "scored",
    rule_ids: list[str] | None = None,
    raw: str = '{"ok": true}',
    attempts: int = 1,
) -> JudgeResult:
    """A JudgeResult built directly: ``failed`` maps the rules the judge failed to their offending call."""
    rule_ids = list(rule_ids or RULE_IDS)
    failed = dict(failed or {})
    violations = [
        JudgeViolation(
            rule_id=rid,
            rule_description=f"rule {rid}",
            violation_type="out_of_order",
            expected_order="as the rule says",
            actual_order="otherwise",
            offending_call_index=idx,
            severity=SEVERITY[rid],
            explanation=f"the judge failed {rid}",
        )
        for rid, idx in failed.items()
    ]
    critical = any(SEVERITY[r] == "critical" for r in failed)
    passed = len(rule_ids) - len(failed)
    report = JudgeOutput(
        sequence_correctness_score=0.0 if critical else passed / len(rule_ids),
        total_rules_checked=len(rule_ids),
        rules_passed=passed,
        rules_failed=len(failed),
        violations=violations,
        missing_prerequisites=[],
        summary=f"judge summary for {trace_id}",
    )
    tries = [
        Attempt(
            n=n + 1,
            request_hash=f"hash-{trace_id}-{n}",
            raw_text=raw if n == attempts - 1 else "not json",
            error=None if n == attempts - 1 else "parse error: the reply is not valid JSON",
            error_stage=None if n == attempts - 1 else "parse",
            usage=Usage(input_tokens=100, output_tokens=20),
            latency_s=0.25,
            finish_reason="stop",
            max_tokens=4096,
            reasked=n > 0,
        )
        for n in range(attempts)
    ]
    return JudgeResult(
        trace_id=trace_id,
        status=status,  # type: ignore[arg-type]
        report=report if status == "scored" else None,
        reason=None if status == "scored" else "no valid judgement after 1 attempt(s)",
        attempts=tries,
        fingerprint=Fingerprint(
            provider="scripted", model="scripted", template_version="v1", template_hash="t", prompt_hash="p"
        ),
        usage=Usage(input_tokens=100 * attempts, output_tokens=20 * attempts),
        rule_ids=rule_ids,
    )


def make_result(trace: Trace, judge: JudgeResult | None = None, **options: Any) -> TraceResult:
    report = check(trace, RULES)
    skipped = None if judge is not None else "no model configured"
    return reconcile(report, judge, judge_skipped=skipped, **options)


def pair(trace_id: str, kind: str) -> tuple[Trace, TraceResult]:
    """Named situations: clean (all agree, judge passes the judge rule), split (the judge passes a rule the
    engine fails), nojudge (no model: deferred judge rule, not routed), nojudge-failing (no model, an engine
    rule failed), unscored."""
    if kind == "clean":
        trace = make_trace(trace_id)
        return trace, make_result(trace, judge_result(trace_id))
    if kind == "split":
        trace = make_trace(trace_id, good=False)
        return trace, make_result(trace, judge_result(trace_id, {"confirm-delete": 2}, attempts=2))
    if kind == "nojudge":
        trace = make_trace(trace_id)
        return trace, make_result(trace)
    if kind == "nojudge-failing":  # no model, an engine rule failed: queued as with `review: {fails: true}`
        trace = make_trace(trace_id, good=False)
        return trace, make_result(trace, queue_fails=True)
    if kind == "unscored":
        trace = make_trace(trace_id)
        return trace, make_result(trace, judge_result(trace_id, status="unscored", raw="garbage"))
    raise AssertionError(kind)


@pytest.fixture
def db(store_target: str) -> Any:
    with Store(store_target) as s:
        yield s


def raw_rows(where: Store | Path | str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Rows read by a connection of their own: what the store committed. ``where``: a store, a file, a URL."""
    if isinstance(where, Store):
        where = where_of(where)
    return pg_raw_rows(where, sql, params)


def where_of(db: Store) -> str:
    """What opens ``db`` again: its file, or its URL."""
    return db.target.url or str(db.path)


# -- round trips -------------------------------------------------------------------------------------------
def test_save_then_read_back_is_exact(db: Store) -> None:
    run = db.create_run(config={"threshold": 0.85}, fingerprint={"engine": "1"})
    saved = {}
    for i, kind in enumerate(["clean", "split", "nojudge", "unscored"]):
        trace, result = pair(f"t{i}", kind)
        db.save_result(run, trace, result)
        saved[result.trace_id] = (trace, result)
    back = list(db.results(run))
    assert [s.trace_id for s in back] == ["t0", "t1", "t2", "t3"]  # the order they were saved
    for stored in back:
        trace, result = saved[stored.trace_id]
        assert stored.result == result
        assert stored.trace == redact_trace(trace, DEFAULT_REDACT)
        assert stored.trace != trace  # the secrets are gone
    one = db.result(run, "t1")
    assert isinstance(one.result.judge, JudgeResult)
    assert one.result == saved["t1"][1]
    assert one.result.disagreements and one.result.disagreements[0].rule_id == "read-before-update"
    assert db.result(run, "t2").result.judge is None
    assert db.result(run, "t2").result.judge_skipped == "no model configured"


def test_rows_per_rule_attempt_and_review_item(db: Store) -> None:
    run = db.create_run(config={}, fingerprint={})
    for i, kind in enumerate(["clean", "split", "nojudge", "unscored"]):
        db.save_result(run, *pair(f"t{i}", kind))
    rows = raw_rows(
        db,
        "SELECT trace_id, rule_id, engine, judge, final, agree FROM rule_decisions "
        "WHERE trace_id = 't1' ORDER BY position",
    )
    assert rows == [
        ("t1", "verify-first", "passed", "passed", "passed", 1),
        ("t1", "read-before-update", "failed", "passed", "failed", 0),
        ("t1", "email-limit", "passed", "passed", "passed", 1),
        ("t1", "confirm-delete", "deferred", "failed", "failed", None),
    ]
    attempts = raw_rows(
        db,
        "SELECT trace_id, n, request_hash, raw_reply, error_stage, cached, usage "
        "FROM judge_attempts ORDER BY trace_id, position",
    )
    assert [(a[0], a[1], a[4]) for a in attempts] == [
        ("t0", 1, None),
        ("t1", 1, "parse"),
        ("t1", 2, None),
        ("t3", 1, None),
    ]
    assert attempts[1][3] == "not json" and json.loads(attempts[1][6])["input_tokens"] == 100
    status = dict(raw_rows(db, "SELECT trace_id, judge_status FROM results"))
    assert status == {"t0": "scored", "t1": "scored", "t2": "skipped", "t3": "unscored"}
    items = {i.trace_id: i for i in db.review_items()}
    # Neither the clean trace nor the one whose judge rule was deferred for want of a model is routed.
    assert set(items) == {"t1", "t3"}
    assert "judge_engine_disagreement" in items["t1"].reasons
    assert items["t3"].reasons == ["unscored", "judge_rule_undecided"]
    assert all(i.status == "open" for i in items.values())


async def test_attempts_of_a_real_judge_call_are_stored(db: Store) -> None:
    trace = make_trace("real", good=False)
    good = {
        "sequence_correctness_score": 0.0,
        "total_rules_checked": 4,
        "rules_passed": 3,
        "rules_failed": 1,
        "violations": [
            {
                "rule_id": "read-before-update",
                "rule_description": "read first",
                "violation_type": "out_of_order",
                "expected_order": "GetCustomer before UpdateCustomer",
                "actual_order": "UpdateCustomer at 1, GetCustomer at 2",
                "offending_call_index": 1,
                "severity": "critical",
                "explanation": "updated before reading",
            }
        ],
        "missing_prerequisites": [],
        "summary": "one ordering violation",
    }
    provider = ScriptedProvider(["this is not JSON", good])
    judged = await judge_trace(redact_trace(trace), RULES, provider)
    assert judged.status == "scored" and len(judged.attempts) == 2
    result = make_result(trace, judged)
    run = db.create_run(config={}, fingerprint={})
    db.save_result(run, trace, result)
    assert db.result(run, "real").result == result
    stored = db.attempts(run, "real")
    assert [a.error_stage for a in stored] == ["parse", None]
    assert stored[0].raw_reply == "this is not JSON"
    assert stored[1].request_hash == judged.attempts[1].request_hash and stored[1].reasked
    assert json.loads(stored[1].raw_reply)["summary"] == "one ordering violation"
    # The judge never saw the secret, and the prompt it got says so.
    assert "hunter2" not in provider.requests[0].dynamic_prompt


def test_saving_a_trace_twice_is_an_error_and_changes_nothing(db: Store) -> None:
    run = db.create_run(config={}, fingerprint={})
    trace, result = pair("t1", "split")
    db.save_result(run, trace, result)
    assert db.completed_trace_ids(run) == {"t1"}
    with pytest.raises(DuplicateTraceError, match="'t1' is already stored"):
        db.save_result(run, trace, result)
    for table, n in (("results", 1), ("rule_decisions", 4), ("judge_attempts", 2), ("review_items", 1)):
        assert raw_rows(db, f"SELECT COUNT(*) FROM {table}") == [(n,)]
    # The same trace id in another run is fine.
    other = db.create_run(config={}, fingerprint={})
    db.save_result(other, trace, result)
    assert db.completed_trace_ids(other) == {"t1"}


def test_a_failed_save_leaves_nothing(db: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    run = db.create_run(config={}, fingerprint={})

    def boom(*args: Any) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(db, "_insert_attempts", boom)
    with pytest.raises(RuntimeError, match="disk on fire"):
        db.save_result(run, *pair("t1", "split"))
    assert db.completed_trace_ids(run) == set()
    assert raw_rows(db, "SELECT COUNT(*) FROM rule_decisions") == [(0,)]
    monkeypatch.undo()
    db.save_result(run, *pair("t1", "split"))  # nothing half-written blocks the retry
    assert db.completed_trace_ids(run) == {"t1"}


def test_save_to_an_unknown_run_is_an_input_error(db: Store) -> None:
    with pytest.raises(InputError, match="no run 'r-nope'"):
        db.save_result("r-nope", *pair("t1", "clean"))


# -- runs --------------------------------------------------------------------------------------------------
def test_run_lifecycle_and_listing(db: Store) -> None:
    first = db.create_run(config={"rules": "rules.yaml"}, fingerprint={"engine": "1"}, label="nightly")
    assert first.startswith("r") and len(first) == len("r20261130-033012-3f9a")
    info = db.run_info(first)
    assert info.status == "running" and info.finished_at is None and info.label == "nightly"
    assert info.config == {"rules": "rules.yaml", "redact": list(DEFAULT_REDACT)}
    db.save_result(first, *pair("a", "clean"))
    db.save_result(first, *pair("b", "split"))
    db.finish_run(first, totals={"traces": 2, "tokens": 240})
    second = db.create_run(config={}, fingerprint={})
    db.finish_run(second, totals={}, status="interrupted")
    info = db.run_info(first)
    assert info.status == "completed" and info.totals == {"traces": 2, "tokens": 240}
    assert info.finished_at is not None and info.finished_at >= info.started_at
    assert info.counts["traces"] == 2 and info.counts["pass"] == 1
    assert info.counts["pass"] + info.counts["fail"] + info.counts["review"] == 2
    assert info.counts["review_open"] == 1
    assert [r.id for r in db.list_runs()] == [second, first]  # newest first
    assert db.run_info(second).status == "interrupted"
    reopened = db.reopen_run(second)  # --resume
    assert reopened.status == "running" and reopened.finished_at is None and reopened.config["redact"]
    with pytest.raises(ValueError, match="status must be one of"):
        db.finish_run(first, totals={}, status="running")


def test_run_ids_are_unique(db: Store) -> None:
    ids = {db.create_run(config={}, fingerprint={}) for _ in range(50)}
    assert len(ids) == 50


def test_resolve_run_latest_prefix_and_unknown(db: Store) -> None:
    with pytest.raises(InputError, match="`latest` names no run"):
        db.resolve_run("latest")
    a = db.create_run(config={}, fingerprint={})
    b = db.create_run(config={}, fingerprint={})
    assert db.resolve_run("latest") == b
    assert db.resolve_run(a) == a
    # A prefix shared by both runs is ambiguous and says which runs it could be.
    with pytest.raises(InputError, match="ambiguous") as exc:
        db.resolve_run("r")
    assert a in str(exc.value) and b in str(exc.value)
    with pytest.raises(InputError) as exc:
        db.resolve_run("r1999")
    assert "'r1999'" in str(exc.value) and "seqjudge runs list" in str(exc.value)


def test_resolve_run_prefix_is_unique_match(store_target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = iter(["r20260101-000000-aaaa", "r20260101-000000-abcd"])
    monkeypatch.setattr(Store, "new_run_id", staticmethod(lambda moment=None: next(ids)))
    with Store(store_target) as s:
        first = s.create_run(config={}, fingerprint={})
        second = s.create_run(config={}, fingerprint={})
        assert s.resolve_run("r20260101-000000-aa") == first
        assert s.resolve_run("r20260101-000000-ab") == second
        with pytest.raises(InputError, match="ambiguous"):
            s.resolve_run("r20260101-000000-a")
        with pytest.raises(InputError, match="no run"):
            s.resolve_run("R20260101")  # run ids are case-sensitive


# -- schema ------------------------------------------------------------------------------------------------
def test_fresh_store_is_at_the_latest_version_with_foreign_keys(store_target: str) -> None:
    latest = len(store_module.MIGRATIONS)
    with Store(store_target) as s:
        assert s.schema_version == latest
        with pytest.raises(sqlite3.IntegrityError, match="(?i)FOREIGN KEY"), s._tx() as conn:
            conn.execute(
                "INSERT INTO rule_decisions VALUES ('r', 't', 0, 'x', 'require', 'critical', "
                "'passed', NULL, 'passed', NULL)"
            )
    assert raw_rows(store_target, "SELECT version FROM schema_version ORDER BY version") == [
        (v,) for v in range(1, latest + 1)
    ]


def test_a_sqlite_store_is_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "seqjudge.db"
    with Store(path) as s:
        assert s.journal_mode == "wal"
    assert raw_rows(path, "PRAGMA journal_mode") == [("wal",)]  # persistent: the file is in WAL mode


def test_an_old_store_is_upgraded_by_a_new_migration(
    store_target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = store_target
    with Store(path) as s:
        run = s.create_run(config={}, fingerprint={})
        s.save_result(run, *pair("t1", "split"))
    latest = len(store_module.MIGRATIONS)
    new = Migration(
        latest + 1,
        "review items get a priority",
        (
            "ALTER TABLE review_items ADD COLUMN priority INTEGER NOT NULL DEFAULT 0",
            "UPDATE review_items SET priority = 1",
        ),
    )
    monkeypatch.setattr(Store, "migrations", [*store_module.MIGRATIONS, new])
    with Store(path) as s:
        assert s.schema_version == latest + 1
        assert s.result(run, "t1").result.trace_id == "t1"  # old data intact
    assert raw_rows(path, "SELECT version FROM schema_version ORDER BY version") == [
        (v,) for v in range(1, latest + 2)
    ]
    assert raw_rows(path, "SELECT trace_id, priority FROM review_items") == [("t1", 1)]
    with Store(path) as s:  # applied once only
        assert s.schema_version == latest + 1
    # An older seqjudge refuses a store written by a newer one rather than misreading it.
    monkeypatch.setattr(Store, "migrations", store_module.MIGRATIONS[:latest])
    with pytest.raises(InputError, match=f"schema version {latest + 1}, newer than this seqjudge knows"):
        Store(path)


def test_reading_commands_never_create_a_store(tmp_path: Path) -> None:
    path = tmp_path / "missing" / "seqjudge.db"
    with pytest.raises(InputError, match="no seqjudge store here"):
        Store(path, create=False)
    assert not path.exists() and not path.parent.exists()
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database at all, not even close" * 100)
    with pytest.raises(InputError, match="cannot open the seqjudge store"):
        Store(junk)


def test_reading_commands_never_create_a_store_in_a_database(pg_url: str) -> None:
    with pytest.raises(InputError, match="no seqjudge store in this database"):
        Store(pg_url, create=False)
    assert raw_rows(
        pg_url, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'public'"
    ) == [(0,)]


def test_default_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with Store() as s:
        s.create_run(config={}, fingerprint={})
    assert (tmp_path / ".seqjudge" / "seqjudge.db").is_file()


# -- export ------------------------------------------------------------------------------------------------
def test_jsonl_export_rebuilds_every_result_without_the_database(db: Store) -> None:
    run = db.create_run(config={"threshold": 0.85}, fingerprint={"engine": "1"}, label="x")
    originals = {}
    for i, kind in enumerate(["clean", "split", "nojudge", "unscored"]):
        trace, result = pair(f"t{i}", kind)
        db.save_result(run, trace, result)
        originals[result.trace_id] = result
    db.finish_run(run, totals={"traces": 4})
    out = io.StringIO()
    assert db.export(run, "jsonl", out) == 4
    lines = out.getvalue().splitlines()
    assert len(lines) == 4 and all(set(json.loads(line)) >= {"run", "trace", "result"} for line in lines)
    back = list(read_export(io.StringIO(out.getvalue())))
    assert [s.trace_id for _, s in back] == ["t0", "t1", "t2", "t3"]
    for info, stored in back:
        assert info.id == run and info.totals == {"traces": 4} and info.config["threshold"] == 0.85
        assert stored.result == originals[stored.trace_id]
    review = json.loads(lines[1])["review"]
    assert review["status"] == "open" and "judge_engine_disagreement" in review["reasons"]


def test_csv_export_one_row_per_trace(db: Store) -> None:
    import csv

    run = db.create_run(config={}, fingerprint={})
    db.save_result(run, *pair("t0", "clean"))
    db.save_result(run, *pair("t1", "split"))
    out = io.StringIO()
    assert db.export(run, "csv", out) == 2
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert [r["trace_id"] for r in rows] == ["t0", "t1"]
    assert rows[0]["verdict"] == "pass" and rows[0]["rules_failed"] == "" and rows[0]["review_reasons"] == ""
    assert rows[1]["rules_failed"] == "read-before-update;confirm-delete"
    assert rows[1]["disagreements"] == "read-before-update"
    assert "judge_engine_disagreement" in rows[1]["review_reasons"].split(";")
    assert (
        rows[1]["judge_status"] == "scored"
        and rows[1]["tokens_in"] == "200"
        and rows[1]["tokens_out"] == "40"
    )
    assert float(rows[1]["score"]) == 0.0 and rows[1]["review_status"] == "open"


# -- review ------------------------------------------------------------------------------------------------
def test_review_filters_resolution_and_labels(db: Store) -> None:
    run1 = db.create_run(config={}, fingerprint={})
    db.save_result(run1, *pair("t1", "split"))
    db.save_result(run1, *pair("t2", "unscored"))
    run2 = db.create_run(config={}, fingerprint={})
    db.save_result(run2, *pair("t1", "split"))
    assert [i.trace_id for i in db.review_items(reason="judge_rule_undecided")] == ["t2"]
    assert [i.run_id for i in db.review_items(run="latest")] == [run2]
    # Both copies of t1 fail a critical rule: a fail, not a score doubt, so never "below_threshold".
    assert db.review_items(reason="below_threshold") == []
    assert len(db.review_items(reason="judge_engine_disagreement")) == 2
    first = db.review_items(run=run1, reason="judge_engine_disagreement")[0]
    detail = db.review_item(first.id)
    assert detail.trace.trace_id == "t1" and detail.result.engine.trace_id == "t1"
    assert [d.rule_id for d in detail.disagreements] == ["read-before-update"]
    assert [a.raw_reply for a in detail.attempts] == ["not json", '{"ok": true}']
    with pytest.raises(InputError, match="rule 'nope' is not a rule of trace t1"):
        db.resolve_review(first.id, verdict="fail", rules={"nope": "fail"}, reviewer="ana")
    with pytest.raises(InputError, match="not pass or fail"):
        db.resolve_review(first.id, verdict="maybe", reviewer="ana")
    with pytest.raises(InputError, match="no review item 999"):
        db.review_item(999)
    resolved = db.resolve_review(
        first.id, verdict="fail", rules={"read-before-update": "fail"}, note="updated blind", reviewer="ana"
    )
    assert resolved.status == "resolved" and resolved.resolution is not None
    assert resolved.resolution.reviewer == "ana" and resolved.resolution.rules == {
        "read-before-update": "fail"
    }
    assert first.id not in [i.id for i in db.review_items()]
    assert [i.id for i in db.review_items(status="resolved")] == [first.id]
    assert len(db.review_items(status="all")) == 3
    # The same trace resolved the other way in another run: no silent pick (issue 37.8), but an error
    # naming both decisions, who made them and when; one run's labels still export.
    later = db.review_items(run=run2)[0]
    db.resolve_review(later.id, verdict="pass", note="on second thought", reviewer="bo")
    out = io.StringIO()
    with pytest.raises(InputError, match="trace t1 has conflicting resolutions") as err:
        db.export_labels(out)
    assert f"item {first.id} (run {run1}): fail (read-before-update=fail) by ana at " in str(err.value)
    assert f"item {later.id} (run {run2}): pass by bo at " in str(err.value) and out.getvalue() == ""
    assert db.export_labels(out, run=run2) == 1
    assert json.loads(out.getvalue())["labeler"] == "bo"
    # Resolutions that agree are one label keeping every rule label and every reviewer.
    db.resolve_review(first.id, verdict="pass", rules={"verify-first": "pass"}, reviewer="ana")
    out = io.StringIO()
    assert db.export_labels(out) == 1
    assert json.loads(out.getvalue()) == {
        "trace_id": "t1",
        "verdict": "pass",
        "rules": {"verify-first": "pass"},
        "labeler": "bo, ana",
        "note": "on second thought",
    }
    out = io.StringIO()
    assert db.export_labels(out, run=run1) == 1
    assert json.loads(out.getvalue())["labeler"] == "ana"


# -- baselines ---------------------------------------------------------------------------------------------
def test_baselines(db: Store) -> None:
    a = db.create_run(config={}, fingerprint={})
    b = db.create_run(config={}, fingerprint={})
    with pytest.raises(InputError, match="no baseline named 'main'") as exc:
        db.baseline("main")
    assert "baseline save" in str(exc.value)
    db.save_baseline(a, "main")
    assert db.baseline("main") == a
    db.save_baseline("latest", "main")  # moving a name to a newer run
    assert db.baseline("main") == b and db.baselines() == {"main": b}


# -- secrets -----------------------------------------------------------------------------------------------
def test_key_matching_rule() -> None:
    secret = [
        "password",
        "api_key",
        "apiKey",
        "X-Api-Key",
        "x_api_key",
        "xapikey",
        "access_token",
        "refreshToken",
        "Authorization",
        "client_secret",
        "DB_PASSWORD",
        "token_type",
    ]
    kept = ["max_tokens", "input_tokens", "tokenizer", "secretary", "customer_id", "keyboard", "passage"]
    assert [k for k in secret if not key_matches(k, DEFAULT_REDACT)] == []
    assert [k for k in kept if key_matches(k, DEFAULT_REDACT)] == []
    assert key_matches("patient_ssn", ["ssn"]) and not key_matches("lesson", ["ssn"])


def test_redact_text_patterns() -> None:
    assert redact_text("password=hunter2 user=bob") == "password=[redacted] user=bob"
    assert redact_text('{"api_key": "sk-1", "n": 1}') == '{"api_key": "[redacted]", "n": 1}'
    assert redact_text("Authorization: Bearer abc.def rest") == "Authorization: [redacted] rest"
    assert redact_text("GET https://x.io/a?token=abc&page=2") == "GET https://x.io/a?token=[redacted]&page=2"
    assert redact_text("max_tokens=4096") == "max_tokens=4096"
    assert redact_text("ssn: 123-45-6789", ["ssn"]) == "ssn: [redacted]"


def test_which_environment_values_count_as_keys() -> None:
    env = {
        "OPENAI_API_KEY": "sk-abc1234567890",
        "AZURE_OPENAI_KEY": "0123456789abcdef",
        "GITHUB_TOKEN": "ghp_x1y2z3w4v5u6",
        "TOKEN_LEVEL": "critical",  # a plain word: replacing it everywhere would corrupt the store
        "SHORT_SECRET": "ab1",
        "HOME": "/root/abc123456789",  # not named like a secret
    }
    assert set(secret_env_values(environ=env)) == {"sk-abc1234567890", "0123456789abcdef", "ghp_x1y2z3w4v5u6"}


def test_redact_trace_is_a_copy_and_keeps_structure() -> None:
    trace = make_trace("t", secret="s3cr3t-value")
    clean = redact_trace(trace)
    assert "s3cr3t-value" in trace.model_dump_json()  # the original is untouched
    text = clean.model_dump_json()
    assert "s3cr3t-value" not in text
    call = clean.calls[0]
    assert call.tool_name == "VerifyIdentity" and call.arguments["customer_id"] == "C-1001"
    assert call.arguments["password"] == REDACTED and call.arguments["x_api_key"] == REDACTED
    assert call.output == {"verified": True, "session_token": REDACTED}
    assert clean.calls[3].arguments["max_tokens"] == 12
    assert clean.calls[3].output == "sent; token=[redacted]"
    assert clean.messages[0].content == "my password: [redacted]"
    assert clean.context == {"authorization": REDACTED, "user_role": "standard"}
    assert clean.metadata == {"source": "unit", "client_secret": REDACTED}
    assert clean.steps == trace.steps


def test_stored_traces_and_attempts_are_redacted(db: Store) -> None:
    run = db.create_run(config={}, fingerprint={})
    trace = make_trace("t1", secret="pw-Zq81")
    leaky = judge_result("t1", raw='{"summary": "saw \\"password\\": \\"pw-Zq81\\"", "api_key": "pw-Zq81"}')
    db.save_result(run, trace, make_result(trace, leaky))
    assert b"pw-Zq81" not in stored_bytes(where_of(db))
    (stored_trace,) = raw_rows(db, "SELECT trace FROM results")[0]
    data = json.loads(stored_trace)
    assert data["calls"][0]["arguments"]["password"] == REDACTED
    assert data["context"]["authorization"] == REDACTED
    (raw,) = raw_rows(db, "SELECT raw_reply FROM judge_attempts")[0]
    assert json.loads(raw)["api_key"] == REDACTED
    assert db.attempts(run, "t1")[0].raw_reply == raw
    # Token counts are not tokens.
    assert db.result(run, "t1").result.judge.usage.input_tokens == 100


def test_configured_names_replace_the_defaults(db: Store) -> None:
    run = db.create_run(config={"redact": ["ssn", "password"]}, fingerprint={})
    assert db.run_info(run).config["redact"] == ["ssn", "password"]
    trace = Trace.model_validate(
        {
            "trace_id": "t",
            "calls": [
                {
                    "tool_name": "Lookup",
                    "arguments": {
                        "patient_ssn": "123-45-6789",
                        "password": "pw1",
                        "token": "kept-because-not-configured",
                    },
                }
            ],
        }
    )
    db.save_result(run, trace, make_result(trace))
    (stored,) = raw_rows(db, "SELECT trace FROM results")[0]
    args = json.loads(stored)["calls"][0]["arguments"]
    assert args == {"patient_ssn": REDACTED, "password": REDACTED, "token": "kept-because-not-configured"}
    # A reopened store (a resumed run) still redacts with the run's names, read from its config.
    path = where_of(db)
    db.close()
    with Store(path) as again:
        t2 = trace.model_copy(update={"trace_id": "t2"})
        again.save_result(run, t2, make_result(t2))
        assert again.result(run, "t2").trace.calls[0].arguments["patient_ssn"] == REDACTED


def test_an_api_key_in_the_environment_never_reaches_the_file(
    store_target: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "sk-test-9f8e7d6c5b4a39281706"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    with Store(store_target) as s:
        # Everywhere a careless caller could put it, under names that do not look secret.
        run = s.create_run(
            config={"model": "openai:gpt-4o", "options": {"api_key": key, "header": key}},
            fingerprint={"endpoint": f"https://api.example/?k={key}"},
            label=f"run {key}",
        )
        trace = make_trace("t1")
        trace.calls[1].arguments["note"] = f"called with {key}"
        trace.messages[0].content = key
        judged = judge_result("t1", {"confirm-delete": 2}, raw=f"I see {key} in the trace")
        judged.attempts[0].error = f"401: invalid key {key}"
        judged.report.violations[0].explanation = f"key {key} leaked"  # type: ignore[union-attr]
        s.save_result(run, trace, make_result(trace, judged))
        item = s.review_items()[0]
        s.resolve_review(item.id, verdict="fail", note=f"contains {key}", reviewer="ana")
        s.finish_run(run, totals={"note": key})
        assert s.run_info(run).config["options"] == {"api_key": REDACTED, "header": REDACTED}
        assert s.result(run, "t1").trace.calls[1].arguments["note"] == "called with [redacted]"
    everything = stored_bytes(store_target, tmp_path)  # SQLite's run locks live in locks/
    assert b"C-1001" in everything  # the data is there...
    assert key.encode() not in everything  # ...the key is not, in the database or its WAL


def test_a_trace_the_caller_redacted_with_the_runs_names_is_not_redacted_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import seqjudge.store.results as results_module

    calls: list[object] = []
    real = results_module.redact_trace
    monkeypatch.setattr(results_module, "redact_trace", lambda t, n: calls.append(t) or real(t, n))
    with Store(tmp_path / "s.db") as db:
        run_id = db.create_run(config={"redact": ["password"]}, fingerprint={})
        trace = Trace.model_validate(
            {"trace_id": "a", "calls": [{"tool_name": "login", "arguments": {"password": "x"}}]}
        )
        redacted = real(trace, ["password"])
        db.save_result(run_id, redacted, make_result(redacted), redacted_with=["password"])
        assert calls == []  # trusted: same names as the run's
        other = Trace.model_validate(
            {"trace_id": "b", "calls": [{"tool_name": "login", "arguments": {"password": "y"}}]}
        )
        db.save_result(
            run_id, other, make_result(other), redacted_with=["token"]
        )  # other names: redacted here
        assert len(calls) == 1
        stored = db.result(run_id, "b").trace
        assert stored.calls[0].arguments["password"] == "[redacted]"
