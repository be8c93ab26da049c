"""Shadow mode end to end: an agent guarded in shadow mode (LangChain middleware, the real agent loop) runs
every call and records the guard's decisions with the session id; the sessions are then run offline with
`seqjudge run` as traces of the same ids, and `seqjudge runs show` sets the decisions beside the verdicts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain")

from guard_support import RULES, Tools  # noqa: E402
from seqjudge.cli import run  # noqa: E402
from seqjudge.guard import Guard  # noqa: E402
from seqjudge.guard.adapters.langchain import SeqjudgeMiddleware  # noqa: E402
from seqjudge.store import Store  # noqa: E402
from test_guard_langchain import DELETE, VERIFY, tool_messages  # noqa: E402
from test_guard_langchain import run as run_agent  # noqa: E402

# The shared rule, and one only the end of a session decides.
END_RULES = (
    RULES
    + """\
  - id: must-verify
    type: require
    tool: verify_identity
    severity: critical
    description: Every session verifies the customer's identity.
"""
)
SESSIONS = {"sess-denied": (DELETE, VERIFY), "sess-ok": (VERIFY, DELETE), "sess-never": (DELETE,)}


@pytest.fixture
def shadowed(tmp_path: Path) -> dict[str, Any]:
    """Three sessions run in shadow mode into a store, then run offline (`seqjudge run`) into that store."""
    rules = tmp_path / "rules.yaml"
    rules.write_text(END_RULES, encoding="utf-8")
    store_path = tmp_path / "seqjudge.db"
    tools = Tools()
    with Store(store_path) as store:
        middleware = SeqjudgeMiddleware(Guard.from_files(rules), shadow=True, store=store)
        for session, turns in SESSIONS.items():
            state = run_agent(middleware, tools, *turns, thread=session)
            assert all(m.status == "success" for m in tool_messages(state).values())  # shadow never blocks
    # The sessions as traces (what an importer of the agent's logs gives): trace id = session id.
    traces = tmp_path / "sessions.jsonl"
    traces.write_text(
        "".join(
            json.dumps(
                {"trace_id": s, "calls": [{"tool_name": n, "arguments": a, "id": i} for n, a, i in turns]}
            )
            + "\n"
            for s, turns in SESSIONS.items()
        ),
        encoding="utf-8",
    )
    return {"rules": rules, "traces": traces, "store": store_path, "ran": tools.ran}


def offline_then_show(
    shadowed: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
    *show: str,
    rules: Path | None = None,
    traces: Path | None = None,
) -> tuple[int, str]:
    """`seqjudge run` the sessions as traces into the shadow store (exit 1: some fail), then `runs show latest
    SHOW...`: its exit code and output."""
    store = str(shadowed["store"])
    code = run(["run", str(rules or shadowed["rules"]), str(traces or shadowed["traces"]), "--store", store])
    assert code in (0, 1)
    capsys.readouterr()
    return run(["runs", "show", "latest", *show, "--store", store]), capsys.readouterr().out


def session_rows(out: str) -> dict[str, str]:
    return {line.split()[0]: line for line in out.splitlines() if line.strip().startswith("sess-")}


@pytest.fixture(autouse=True)
def _no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SEQJUDGE_MODEL", raising=False)


def test_every_call_ran_in_shadow_and_every_decision_was_recorded(shadowed: dict[str, Any]) -> None:
    assert len(shadowed["ran"]) == 5  # the two denied deletes ran too
    with Store(shadowed["store"]) as db:
        decisions = {s: db.guard_decisions(s) for s in SESSIONS}
    assert [d.action for d in decisions["sess-denied"]] == ["deny", "allow"]
    assert [d.action for d in decisions["sess-ok"]] == ["allow", "allow"]
    assert [d.action for d in decisions["sess-never"]] == ["deny"]
    assert all(d.shadow for ds in decisions.values() for d in ds)


def test_runs_show_sets_the_shadow_decisions_beside_the_offline_verdicts(
    shadowed: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = offline_then_show(shadowed, capsys)
    assert code == 0
    assert "guard decisions: 3 of 3 trace(s) are guarded sessions" in out
    rows = {k: v.split() for k, v in session_rows(out).items()}
    # SESSION DECISIONS DENIED MODE OFFLINE AGREE WHY
    assert rows["sess-denied"][:6] == ["sess-denied", "2", "1", "shadow", "fail", "yes"]
    assert rows["sess-ok"][:6] == ["sess-ok", "2", "0", "shadow", "pass", "yes"]
    # Never verified: the guard denied the delete, and the require rule only the end decides failed offline.
    assert rows["sess-never"][:6] == ["sess-never", "1", "1", "shadow", "fail", "yes"]
    assert "at end: must-verify" in " ".join(rows["sess-never"])


def test_a_rule_the_guard_never_denied_but_the_offline_run_failed_is_a_disagreement(
    shadowed: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Offline rules that drifted from the guard's: a blocklist the guard never had.
    drifted = tmp_path / "drifted.yaml"
    drifted.write_text(
        END_RULES
        + "  - id: no-deletes\n    type: blocklist\n    pattern: delete_\n    severity: critical\n"
        + "    description: No deletions at all.\n",
        encoding="utf-8",
    )
    code, out = offline_then_show(shadowed, capsys, rules=drifted)
    row = session_rows(out)["sess-ok"]
    assert code == 0 and row.split()[5] == "no" and "offline only: no-deletes" in row


def test_runs_show_guard_lists_every_decision_with_its_rule(
    shadowed: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = offline_then_show(shadowed, capsys, "--guard")
    assert code == 0 and out.count("session sess-") == 3
    denied = [line for line in out.splitlines() if ": deny (shadow)" in line]
    assert len(denied) == 2 and all("verify-before-delete: delete_customer" in line for line in denied)
    assert run(["runs", "show", "latest", "--guard", "--audit", "--store", str(shadowed["store"])]) == 2
    assert "--guard does not take --audit" in capsys.readouterr().err


def test_a_run_with_no_guarded_session_shows_no_guard_table(
    shadowed: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other.jsonl"
    other.write_text(
        json.dumps({"trace_id": "unguarded", "calls": [{"tool_name": "verify_identity"}]}) + "\n"
    )
    code, out = offline_then_show(shadowed, capsys, traces=other)
    assert code == 0 and "Run " in out and "guard decisions" not in out


def test_a_secret_quoted_by_a_rule_message_is_scrubbed_from_the_stored_decision(tmp_path: Path) -> None:
    # A same: rule's message quotes the call's value ("For password=..."): the decision is stored redacted.
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "rules:\n  - {id: login-first, type: before, first: verify_identity, then: delete_customer,"
        " same: [password]}\n",
        encoding="utf-8",
    )
    secret = "hunter2-correct-horse"
    call = ("delete_customer", {"customer_id": "c-7", "password": secret}, "call_delete")
    with Store(tmp_path / "s.db") as store:
        run_agent(
            SeqjudgeMiddleware(Guard.from_files(rules), shadow=True, store=store), Tools(), call, thread="sec"
        )
        (stored,) = store.guard_decisions("sec")
    assert stored.action == "deny" and stored.denied_rules == ["login-first"]
    assert secret.encode() not in (tmp_path / "s.db").read_bytes()  # (closed: the WAL is checkpointed)
    assert 'password="[redacted]"' in stored.rules[0]["message"], stored.rules[0]["message"]
