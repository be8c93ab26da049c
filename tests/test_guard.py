"""The guard's Python API (seqjudge.guard): a decision before each call, state per session, the end."""

from __future__ import annotations

import pytest

from seqjudge.guard import Guard, GuardError
from seqjudge.rules.load import parse_rules
from seqjudge.trace import Call


def _guard(*rules: dict, **kwargs) -> Guard:
    return Guard(parse_rules({"rules": list(rules)}), **kwargs)


EDIT_AFTER_READ = {"type": "before", "first": "Read", "then": "Edit", "same": ["file_path"]}


def test_edit_of_a_file_never_read_is_denied_and_one_read_is_allowed() -> None:
    session = _guard(EDIT_AFTER_READ).session("s1")
    d = session.decide("Edit", {"file_path": "a.py"})
    assert d.action == "deny"
    assert d.reason.startswith("before:Read->Edit: ")
    assert "Add a successful call to Read" in d.reason
    session.record("Read", {"file_path": "a.py"})
    assert session.decide("Edit", {"file_path": "a.py"}).action == "allow"
    assert session.decide("Edit", {"file_path": "b.py"}).action == "deny"


def test_decide_does_not_advance_the_state_and_record_does() -> None:
    session = _guard({"type": "max_calls", "tool": "Bash", "max": 1}).session("s1")
    assert session.decide("Bash", {}).action == "allow"
    assert session.decide("Bash", {}).action == "allow"  # the first decide left no call behind
    session.record("Bash", {}, status="error")  # a failed attempt counts for max_calls
    d = session.decide("Bash", {})
    assert d.action == "deny" and "exceeds the limit" in d.reason


def test_a_violation_only_if_the_call_succeeds_is_not_denied() -> None:
    # `then` counts only successful Deploy calls: whether this call violates depends on its outcome.
    rule = {"type": "before", "first": "Test", "then": {"tool": "Deploy", "status": "ok"}}
    d = _guard(rule).session("s").decide("Deploy", {})
    assert d.action == "allow"
    assert "only if the call succeeds" in d.rules[0].message


def test_end_rules_are_pending_and_decided_by_finish() -> None:
    session = _guard({"type": "require", "tool": "Test"}).session("s")
    d = session.decide("Edit", {})
    assert d.action == "allow" and d.rules[0].outcome == "pending"
    assert [r.outcome for r in session.finish()] == ["deny"]
    session.record("Test", {})
    assert [r.outcome for r in session.finish()] == ["allow"]


def test_when_reads_the_sessions_context() -> None:
    g = _guard({"type": "blocklist", "pattern": "delete", "when": {"user_role": "guest"}})
    assert g.session("s", context={"user_role": "guest"}).decide("delete_user", {}).action == "deny"
    admin = g.session("s", context={"user_role": "admin"}).decide("delete_user", {})
    assert admin.action == "allow" and "not applicable" in admin.rules[0].message


def test_judge_rules_are_skipped_by_default_and_asked_in_ask_mode() -> None:
    rule = {"type": "judge", "description": "Refunds need a stated reason", "applies_to": "refund"}
    skipped = _guard(rule).session("s").decide("refund", {})
    assert skipped.action == "allow" and skipped.rules[0].outcome == "skipped"
    asked = _guard(rule, judge="ask").session("s").decide("refund", {})
    assert asked.action == "ask" and "Refunds need a stated reason" in asked.reason
    other = _guard(rule, judge="ask").session("s").decide("lookup", {})
    assert other.action == "allow" and other.rules[0].outcome == "pending"


def test_stateless_decide_reads_the_history() -> None:
    g = _guard(EDIT_AFTER_READ)
    history = [Call(tool_name="Read", arguments={"file_path": "a.py"})]
    assert g.decide(history, "Edit", {"file_path": "a.py"}).action == "allow"
    assert g.decide([], "Edit", {"file_path": "a.py"}).action == "deny"


def test_an_internal_error_is_the_fail_modes_decision_and_says_so() -> None:
    session = _guard(EDIT_AFTER_READ, fail_mode="deny").session("s")
    session.index.steps = None  # type: ignore[assignment]  # an index the evaluators cannot read
    d = session.decide("Edit", {"file_path": "a.py"})
    assert d.action == "deny" and d.degraded is not None and "internal error" in d.degraded


def test_bad_rule_file_is_a_guard_error_naming_the_file(tmp_path) -> None:
    bad = tmp_path / "rules.yaml"
    bad.write_text("rules:\n  - type: before\n    first: Read\n")
    with pytest.raises(GuardError, match="rules.yaml"):
        Guard.from_files(bad)


def test_lint_guard_names_the_rules_only_offline_and_why(tmp_path, capsys) -> None:
    from seqjudge.cli import run

    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "rules:\n"
        "  - {type: before, first: Read, then: Edit, same: [file_path]}\n"
        "  - {type: require, tool: Test}\n"
        "  - {type: before, first: Test, then: {tool: Deploy, status: ok}}\n"
        "  - {type: sequence, tools: [A, B]}\n"
    )
    assert run(["lint", str(rules)]) == 0
    assert "offline" not in capsys.readouterr().out  # only with --guard
    assert run(["lint", "--guard", str(rules)]) == 0
    out = capsys.readouterr().out
    assert "rule 'require:Test' (require) only makes sense offline" in out
    assert "the required call may still come" in out
    assert "rule 'before:Test->Deploy(status=ok)': its then counts calls by outcome" in out
    # Look-back rules, and a sequence (denied when broken, completed or not at the end), are not named.
    assert "before:Read->Edit" not in out and "sequence:A>B" not in out


def test_a_rule_the_history_already_broke_says_so_and_denies_as_the_engine_reports() -> None:
    # The engine reports a blocklist's first forbidden call; a history holding one (made before the guard
    # ran) leaves the next to the offline verdict, and the decision says why it is not denied.
    history = [Call(tool_name="drop_table", arguments={})]
    session = _guard({"type": "blocklist", "pattern": "drop"}).session("s", history=history)
    d = session.decide("drop_index", {})
    assert d.action == "allow"
    assert "already broke this rule at call 1" in d.rules[0].message
    assert [r.outcome for r in session.finish()] == ["deny"]


def test_the_configs_guard_key_is_checked_like_every_other(tmp_path) -> None:
    from seqjudge.config import load_config
    from seqjudge.errors import InputError
    from seqjudge.guard import fail_mode_of

    path = tmp_path / "seqjudge.yaml"
    path.write_text("rules: r.yaml\ntraces: t\nrisk_level: high\nguard: {fail_mode: allow}\n")
    assert fail_mode_of(None, load_config(path)) == "allow"
    assert fail_mode_of("deny", load_config(path)) == "deny"
    path.write_text("rules: r.yaml\ntraces: t\nrisk_level: high\n")
    assert fail_mode_of(None, load_config(path)) == "deny"
    path.write_text("rules: r.yaml\ntraces: t\nguard: {fail_mode: sometimes}\n")
    with pytest.raises(InputError, match="guard.fail_mode"):
        load_config(path)
    path.write_text("rules: r.yaml\ntraces: t\nguard: {mode: deny}\n")
    with pytest.raises(InputError, match="guard.mode: unknown key"):
        load_config(path)


JUDGED = {"type": "judge", "description": "Shell commands must not touch production", "applies_to": "Bash"}


def _verdict(broken: bool, at: int) -> dict:
    """A judge reply on the one judge rule: broken at call ``at``, or not."""
    violations = [
        {
            "rule_id": "judge:shell-commands-must-not-touch-production",
            "rule_description": "no production",
            "violation_type": "criteria_not_met",
            "expected_order": "no production host",
            "actual_order": f"call {at} touches prod",
            "offending_call_index": at,
            "severity": "critical",
            "explanation": "The command deploys to the production cluster.",
        }
    ]
    return {
        "sequence_correctness_score": 0.0 if broken else 1.0,
        "total_rules_checked": 1,
        "rules_passed": 0 if broken else 1,
        "rules_failed": 1 if broken else 0,
        "violations": violations if broken else [],
        "missing_prerequisites": [],
        "summary": "scripted",
    }


def test_model_mode_asks_the_judge_about_the_proposed_call_and_says_how_long_it_took() -> None:
    from seqjudge.errors import ProviderError
    from seqjudge.judge.providers.scripted import ScriptedProvider

    provider = ScriptedProvider(
        [_verdict(True, 1), _verdict(False, 1), ProviderError("down", kind="server", provider="scripted")]
    )
    session = _guard(JUDGED, judge="model", provider=provider).session("s")
    session.record("Read", {"file_path": "deploy.sh"})
    assert session.decide("Read", {"file_path": "x"}).action == "allow"  # not about this call: no model call
    assert len(provider.requests) == 0
    denied = session.decide("Bash", {"command": "kubectl --context prod apply"})
    assert denied.action == "deny" and "production cluster" in denied.reason
    assert "judged by scripted in" in denied.rules[0].message
    assert len(provider.requests) == 1  # a judge rule's deny is not asked again for a failed call
    assert "Bash" in provider.requests[0].user_text  # the proposed call is in what the judge reads
    allowed = session.decide("Bash", {"command": "kubectl --context dev apply"})
    assert allowed.action == "allow" and allowed.rules[0].message.startswith("holds (judged by")
    failed = session.decide("Bash", {"command": "ls"})  # the provider is down: the fail mode decides
    assert failed.degraded is not None and "the judge could not decide" in failed.degraded


def test_model_mode_without_a_model_is_refused() -> None:
    with pytest.raises(GuardError, match="needs a judge"):
        _guard(JUDGED, judge="model")


def test_decisions_from_several_threads_do_not_interleave() -> None:
    from concurrent.futures import ThreadPoolExecutor

    session = _guard(EDIT_AFTER_READ, {"type": "max_calls", "tool": "Read", "max": 500}).session("s")
    for k in range(50):
        session.record("Read", {"file_path": f"f{k}.py"})

    def work(k: int) -> tuple[str, str]:
        read = session.decide("Edit", {"file_path": f"f{k % 50}.py"}).action
        never = session.decide("Edit", {"file_path": f"g{k}.py"}).action
        return read, never

    import sys

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch as often as they can: an unguarded session interleaves
    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            results = list(pool.map(work, range(400)))
    finally:
        sys.setswitchinterval(interval)
    assert set(results) == {("allow", "deny")}
    assert session.index.n == 50  # every tried call was taken back
