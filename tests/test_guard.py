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


BLOCK_AND_LIMIT = (
    {"type": "blocklist", "pattern": "drop_table"},
    {"type": "max_calls", "tool": "refund", "max": 1},
)


def test_a_blocklisted_call_that_ran_anyway_does_not_let_the_next_one_through() -> None:
    # Issue 34: the engine reports a rule's first violation; a second blocklisted call was allowed once the
    # first had run (shadow mode, a host that overrode the deny, a guard added mid-session).
    session = _guard(*BLOCK_AND_LIMIT).session("s1")
    assert session.decide("drop_table", {}).action == "deny"
    session.record("drop_table", {})  # it ran anyway
    d = session.decide("drop_table", {})
    assert d.action == "deny"
    assert d.reason.startswith("blocklist:drop_table: drop_table (call 2) is forbidden")
    assert "The session already broke this rule at call 1." in d.reason
    other = session.decide("select", {})
    assert other.action == "allow"
    assert other.rules[0].message.startswith(
        "holds for this call; the session already broke this rule at call 1"
    )
    # The end of the session is the offline verdict, as before: the first violation.
    finished = session.finish()
    assert [r.outcome for r in finished] == ["deny", "allow"]
    assert finished[0].message.startswith("drop_table (call 1) is forbidden")


def test_max_calls_denies_every_call_over_the_limit_after_one_ran() -> None:
    session = _guard(*BLOCK_AND_LIMIT).session("s1")
    session.record("refund", {})
    assert session.decide("refund", {}).action == "deny"
    session.record("refund", {})  # the 2nd ran anyway
    session.record("lookup", {})
    d = session.decide("refund", {})
    assert d.action == "deny"
    assert (
        "refund (call 4) exceeds the limit of 1" in d.reason
        and "already broke this rule at call 2." in d.reason
    )
    session.record("refund", {}, status="error")  # every attempt counts, and each one breaks it again
    d = session.decide("refund", {})
    assert d.action == "deny" and "already broke this rule at calls 2, 4." in d.reason


def test_a_history_given_at_the_start_that_broke_a_rule_still_denies_a_repeat() -> None:
    history = [Call(tool_name="drop_table", arguments={}), Call(tool_name="drop_table", arguments={})]
    session = _guard({"type": "blocklist", "pattern": "drop"}).session("s", history=history)
    d = session.decide("drop_index", {})
    assert d.action == "deny" and "already broke this rule at calls 1, 2." in d.reason
    assert _guard({"type": "blocklist", "pattern": "drop"}).decide(history, "drop_x", {}).action == "deny"


def test_before_never_after_and_sequence_deny_a_repeat_of_what_broke_them() -> None:
    before = _guard(EDIT_AFTER_READ).session("s")
    before.record("Edit", {"file_path": "a.py"})  # no Read before it
    assert before.decide("Edit", {"file_path": "a.py"}).action == "deny"
    before.record("Read", {"file_path": "a.py"})
    assert before.decide("Edit", {"file_path": "a.py"}).action == "allow"  # now it was read

    never = _guard({"type": "never_after", "trigger": "Deploy", "forbidden": "Edit"}).session("s")
    never.record("Deploy", {})
    never.record("Edit", {})
    d = never.decide("Edit", {})
    assert d.action == "deny" and "Edit (call 3)" in d.reason and "at call 2." in d.reason

    sequence = _guard({"type": "sequence", "tools": ["A", "B"]}).session("s")
    sequence.record("B", {})  # before A
    assert sequence.decide("B", {}).action == "deny"
    sequence.record("A", {})
    assert sequence.decide("B", {}).action == "allow"


def test_a_call_set_aside_for_one_rule_is_still_seen_by_another() -> None:
    # `login` broke the blocklist, but it ran: the rule that needs it before `transfer` is met.
    g = _guard(
        {"type": "blocklist", "pattern": "login"}, {"type": "before", "first": "login", "then": "transfer"}
    )
    session = g.session("s")
    session.record("login", {})
    assert session.decide("transfer", {}).action == "allow"
    d = session.decide("login", {})
    assert d.action == "deny" and [r.outcome for r in d.rules] == ["deny", "allow"]


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


def test_a_user_message_keeps_its_place_among_the_calls_when_one_before_it_is_set_aside() -> None:
    from seqjudge.trace import Message

    rule = {"type": "lineage", "tool": "refund", "argument": "order_id", "from": [{"user": True}]}
    # The user names order 7 after two calls; the first (a refund of an order nobody named) broke the rule.
    message = Message(role="user", content="please refund order 7", at=2)
    session = _guard(rule).session("s", messages=[message])
    session.record("refund", {"order_id": 5})
    session.record("lookup", {})
    allowed = session.decide("refund", {"order_id": 7})
    assert allowed.action == "allow", allowed.rules
    assert "already broke this rule at call 1" in allowed.rules[0].message
    denied = session.decide("refund", {"order_id": 9})
    assert denied.action == "deny" and "refund (call 3)" in denied.reason


def test_a_same_rule_broken_in_one_group_then_another_denies_a_repeat_in_the_first() -> None:
    # Found by the parity property: the rule was first found broken in order 1's group; order 2's group,
    # broken earlier, must be read without its offending call too.
    session = _guard(EDIT_AFTER_READ).session("s")
    session.record("Edit", {"file_path": "b.py"})  # breaks the rule for b.py
    session.record("Edit", {"file_path": "a.py"})  # and for a.py
    assert session.decide("Edit", {"file_path": "a.py"}).action == "deny"  # (found broken in a.py's group)
    d = session.decide("Edit", {"file_path": "b.py"})
    assert d.action == "deny" and "Edit (call 3)" in d.reason and "at calls 1, 2." in d.reason


def test_model_mode_asks_about_a_broken_rule_without_the_calls_that_broke_it() -> None:
    from seqjudge.judge.providers.scripted import ScriptedProvider

    rule = {
        "id": "refund-sourced",
        "type": "lineage",
        "tool": "refund",
        "argument": "order_id",
        "from": [{"output": "get_order", "path": "order_id"}],
    }
    verdict = _verdict(True, 1)
    verdict["violations"][0].update(rule_id="refund-sourced", explanation="Order 7 is in no output read.")
    provider = ScriptedProvider([verdict, verdict])  # (asked for the call succeeding, then failing)
    session = _guard(rule, judge="model", provider=provider).session("s")
    session.record("refund", {"order_id": 5})  # from nowhere: breaks the rule
    session.record("get_order", {}, output='{"order_id": 7, "note": "cut sho')  # unreadable: undecided
    d = session.decide("refund", {"order_id": 7})
    assert d.action == "deny" and "Order 7 is in no output read." in d.reason
    assert "already broke this rule at call 1." in d.reason
    asked = provider.requests[0].user_text
    assert '"tool_name":"refund","status":"ok","arguments":{"order_id":7}' in asked  # the proposed call
    assert '"order_id":5' not in asked  # the call set aside


def test_an_error_while_a_broken_rule_catches_up_leaves_its_calls_as_they_were() -> None:
    session = _guard({"type": "max_calls", "tool": "refund", "max": 1}, fail_mode="deny").session("s")
    session.record("refund", {})
    session.record("refund", {})
    assert session.decide("refund", {}).action == "deny"  # the rule is found broken: its own calls
    (aside,) = session.asides.values()
    flagged = aside.flagged

    def fails(calls, i):
        raise RuntimeError("evaluator trouble")

    aside.flagged = fails
    session.record("refund", {})
    assert session.decide("refund", {}).degraded is not None  # the fail mode's decision
    aside.flagged = flagged
    d = session.decide("refund", {})
    assert d.action == "deny" and "refund (call 4)" in d.reason and "at calls 2, 3." in d.reason
    assert aside.calls.index.n == len(aside.kept) == 1
