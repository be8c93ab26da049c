"""The guard's decisions in the store (migration 4, ``store/guard.py``): numbered per session, read back as
written, secrets scrubbed, joined to a run's traces of the same id."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from seqjudge.store import Store
from test_store import pair

DENY = [
    {
        "rule_id": "verify-first",
        "outcome": "deny",
        "message": "no verify_identity before",
        "suggestion": "verify",
    },
    {"rule_id": "at-most-3", "outcome": "allow", "message": "", "suggestion": None},
]


def test_decisions_are_numbered_per_session_and_read_back(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as db:
        assert (
            db.record_guard_decision("s1", tool="delete_customer", action="deny", rules=DENY, shadow=True)
            == 1
        )
        assert db.record_guard_decision("s2", tool="lookup", action="allow", rules=[], shadow=False) == 1
        assert (
            db.record_guard_decision(
                "s1", tool="verify_identity", action="allow", rules=[], shadow=True, call_id="c2"
            )
            == 2
        )
        first, second = db.guard_decisions("s1")
        assert (first.seq, first.tool, first.action, first.shadow) == (1, "delete_customer", "deny", True)
        assert first.rules == DENY and first.denied_rules == ["verify-first"]
        assert (second.seq, second.call_id) == (2, "c2")
        assert [(d.session_id, d.seq) for d in db.guard_decisions()] == [("s1", 1), ("s1", 2), ("s2", 1)]
        assert db.guard_decisions("nobody") == []


def test_a_bad_action_is_refused_and_the_table_checks_it_too(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as db:
        with pytest.raises(ValueError, match="allow, deny, ask"):
            db.record_guard_decision("s1", tool="t", action="block", rules=[], shadow=True)
        with pytest.raises(sqlite3.IntegrityError), db._tx() as conn:
            conn.execute(
                "INSERT INTO guard_decisions VALUES ('s', 1, 'now', 't', NULL, 'block', '[]', NULL, 1)"
            )
        assert db.guard_decisions() == []


def test_secrets_are_scrubbed_from_stored_decisions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-envsecretvalue0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    rules = [
        {
            "rule_id": "no-leak",
            "outcome": "deny",
            "message": f"send_email called with password=hunter2 and key {key}",
            "suggestion": "token: abc123def456 must not be sent",
        }
    ]
    path = tmp_path / "s.db"
    with Store(path) as db:
        db.record_guard_decision(
            "s1",
            tool="send_email",
            action="deny",
            rules=rules,
            shadow=True,
            degraded=f"internal error: api_key={key}",
        )
    raw = sqlite3.connect(path).execute("SELECT * FROM guard_decisions").fetchall()
    text = repr(raw)
    for secret in ("hunter2", key, "abc123def456"):
        assert secret not in text
    assert "[redacted]" in text and "send_email" in text  # what is not secret stays readable


def test_run_guard_decisions_are_those_of_the_runs_traces_in_run_order(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as db:
        run = db.create_run(config={}, fingerprint={})
        db.save_result(run, *pair("t2", "clean"))
        db.save_result(run, *pair("t1", "clean"))
        db.finish_run(run, totals={})
        db.record_guard_decision("t1", tool="a", action="allow", rules=[], shadow=True)
        db.record_guard_decision("t2", tool="b", action="deny", rules=DENY, shadow=True)
        db.record_guard_decision("elsewhere", tool="c", action="allow", rules=[], shadow=True)
        found = db.run_guard_decisions(run)
    assert list(found) == ["t2", "t1"]  # the run's order; a session that is no trace of it is left out
    assert [d.tool for d in found["t2"]] == ["b"]


def test_a_store_that_cannot_be_written_never_stops_the_agent_and_is_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from seqjudge.guard import Decision
    from seqjudge.guard.shadow import DecisionLog

    with Store(tmp_path / "s.db") as db:
        log = DecisionLog(db, shadow=True)
        assert log.record("s1", "delete_customer", Decision("deny")) == 1
        db.read_only = True  # what the store is when opened where it may not be written
        with caplog.at_level("WARNING", logger="seqjudge.guard"):
            assert log.record("s1", "delete_customer", Decision("deny")) is None
        assert log.unrecorded == 1 and "read-only" in (log.last_error or "")
        assert "was not recorded" in caplog.text and "1 unrecorded" in caplog.text
        db.read_only = False
        assert [d.seq for d in db.guard_decisions("s1")] == [1]
