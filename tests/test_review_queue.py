"""A review queue a person can work through (issue 17, point 12): `review show` gives the conversation with
the calls, `review list` shows the latest run unless told otherwise, many items can be resolved at once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from seqjudge.cli import run
from seqjudge.errors import InputError
from seqjudge.outputs.listings import MESSAGE_CHARS
from seqjudge.store import Store
from seqjudge.trace import Trace, timeline
from test_store import judge_result, make_result

LONG = "Before I delete anything, here is what will happen. " * 20


def conversation(trace_id: str) -> Trace:
    """A deletion whose confirmation is only in the messages: asked after the lookup, given before delete."""
    return Trace.model_validate(
        {
            "trace_id": trace_id,
            "calls": [
                {"tool_name": "VerifyIdentity", "arguments": {"customer_id": "C-7"}},
                {"tool_name": "GetCustomer", "arguments": {"customer_id": "C-7"}},
                {"tool_name": "UpdateCustomer", "arguments": {"customer_id": "C-7"}},
                {"tool_name": "SendEmail", "arguments": {"to": "c7@example.com"}},
            ],
            "messages": [
                {"role": "user", "content": "Please close my account.", "at": 0},
                {"role": "assistant", "content": "Shall I close account C-7? \x1b[2J(yes/no)", "at": 2},
                {"role": "user", "content": "yes, go ahead", "at": 2},
                {"role": "assistant", "content": LONG, "at": 4},
                {"role": "assistant", "content": [{"type": "text", "text": "Anything else?"}]},
            ],
        }
    )


def disputed(trace: Trace) -> Any:
    """The judge fails a rule the engine passes: a disagreement, which always goes to review."""
    return make_result(trace, judge_result(str(trace.trace_id), {"read-before-update": 2}))


@pytest.fixture
def two_runs(store_target: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Two runs of three disputed traces each; the second is the latest (in a SQLite file, then in a
    PostgreSQL database: the CLI reads SEQJUDGE_STORE)."""
    path = store_target
    monkeypatch.setenv("SEQJUDGE_STORE", str(path))
    runs: dict[str, Any] = {}
    with Store(path) as s:
        for name in ("first", "second"):
            run_id = s.create_run(config={}, fingerprint={})
            for i in range(3):
                trace = conversation(f"{name}-{i}")
                s.save_result(run_id, trace, disputed(trace))
            runs[name] = run_id
            runs[name + "_items"] = [i.id for i in s.review_items(run=run_id)]
    assert len(runs["first_items"]) == len(runs["second_items"]) == 3
    runs["path"] = path
    return runs


def listed(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    assert run(["review", "list", "--format", "json", *argv]) == 0
    return [item["trace_id"] for item in json.loads(capsys.readouterr().out)]


def open_ids(path: str | Path) -> set[int]:
    with Store(path) as s:
        return {i.id for i in s.review_items(status="open")}


# -- review show: the conversation ---------------------------------------------------------------------------
def test_show_puts_the_messages_between_the_calls(
    two_runs: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["review", "show", str(two_runs["second_items"][0])]) == 0
    out = capsys.readouterr().out
    assert "Trace (calls, 5 message(s) in between):" in out
    order = [
        "[user] Please close my account.",
        "1. VerifyIdentity(customer_id=C-7)",
        "2. GetCustomer(customer_id=C-7)",
        "[assistant] Shall I close account C-7?",
        "[user] yes, go ahead",
        "3. UpdateCustomer(customer_id=C-7)",
        "4. SendEmail(to=c7@example.com)",
        "[assistant] Before I delete anything",
        '[assistant] [{"type": "text", "text": "Anything else?"}]',  # no `at`: after the last call
    ]
    positions = [out.index(text) for text in order]
    assert positions == sorted(positions)
    # The rules' outcomes stay beside the calls they name.
    call3 = next(line for line in out.splitlines() if "3. UpdateCustomer" in line)
    assert "read-before-update: engine passed · judge failed (DISAGREE)" in call3
    # The agent's words cannot drive the terminal, and a long message is cut and says how to see it all.
    assert "\x1b" not in out and "\\x1b[2J(yes/no)" in out
    long_line = next(line for line in out.splitlines() if "[assistant] Before I delete" in line)
    assert f"({len(LONG.strip())} chars; --full shows it whole)" in long_line
    assert len(long_line.split("] ", 1)[1]) < MESSAGE_CHARS + 60


def test_show_full_prints_long_messages_whole(
    two_runs: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["review", "show", "--full", str(two_runs["second_items"][0])]) == 0
    out = capsys.readouterr().out
    assert LONG.strip() in out and "--full shows it whole" not in out


def test_the_stored_trace_keeps_the_messages_in_order(two_runs: dict[str, Any]) -> None:
    # What review show reads is what the run stored: every message, with its place among the calls.
    with Store(two_runs["path"]) as s:
        detail = s.review_item(two_runs["first_items"][0])
    kinds = [(kind, i) for kind, i, _ in timeline(detail.trace)]
    assert kinds == [
        ("message", 0),
        ("call", 0),
        ("call", 1),
        ("message", 2),
        ("message", 2),
        ("call", 2),
        ("call", 3),
        ("message", 4),
        ("message", 4),
    ]


# -- review list: the latest run by default ------------------------------------------------------------------
def test_list_shows_the_latest_run_unless_told(
    two_runs: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    second = ["second-0", "second-1", "second-2"]
    first = ["first-0", "first-1", "first-2"]
    assert run(["review", "list"]) == 0
    captured = capsys.readouterr()
    assert "second-0" in captured.out and "first-0" not in captured.out
    assert f"the latest run, {two_runs['second']}" in captured.err
    assert listed(capsys) == second
    assert listed(capsys, "--run", two_runs["first"]) == first
    assert listed(capsys, "--run", two_runs["first"][:-1]) == first  # a unique prefix
    assert listed(capsys, "--all") == first + second
    assert run(["review", "list", "--all", "--run", "latest"]) == 2
    assert "--all and --run both choose the runs" in capsys.readouterr().err


def test_list_on_a_store_without_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "empty.db"
    Store(path).close()
    assert run(["review", "list", "--store", str(path)]) == 0
    assert f"no runs stored in {path} yet" in capsys.readouterr().out


# -- review resolve: several items at once ---------------------------------------------------------------
def test_resolve_several_items_by_number(
    two_runs: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    a, b, _ = two_runs["second_items"]
    argv = ["review", "resolve", str(a), str(b), "--verdict", "fail", "--note", "no confirmation"]
    assert run([*argv, "--reviewer", "ana"]) == 0
    out = capsys.readouterr().out
    assert f"resolved review item {a} " in out and f"resolved review item {b} " in out
    assert "resolved 2 review item(s): fail by ana" in out
    with Store(two_runs["path"]) as s:
        for item in (a, b):
            resolution = s.review_item(item).resolution
            assert resolution is not None
            assert (resolution.verdict, resolution.note, resolution.reviewer) == (
                "fail",
                "no confirmation",
                "ana",
            )
    assert open_ids(two_runs["path"]) == set(two_runs["first_items"]) | {two_runs["second_items"][2]}


def test_resolve_every_open_item_of_a_run(
    two_runs: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["review", "resolve", "--all-open", "--run", two_runs["first"], "--verdict", "pass"]
    assert run([*argv, "--reviewer", "bo", "--note", "checked by hand"]) == 0
    assert "resolved 3 review item(s): pass by bo" in capsys.readouterr().out
    assert open_ids(two_runs["path"]) == set(two_runs["second_items"])  # the other run is untouched
    # Default run: the latest; a reason narrows it; nothing left to resolve is said, not an error.
    assert run(["review", "resolve", "--all-open", "--reason", "unscored", "--verdict", "pass"]) == 0
    assert "no open review items routed for unscored in run" in capsys.readouterr().err
    assert open_ids(two_runs["path"]) == set(two_runs["second_items"])
    reason = "judge_engine_disagreement"
    assert run(["review", "resolve", "--all-open", "--reason", reason, "--verdict", "fail"]) == 0
    assert open_ids(two_runs["path"]) == set()


def test_a_bad_item_or_rule_resolves_nothing(
    two_runs: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    before = open_ids(two_runs["path"])
    a, b, _ = two_runs["second_items"]
    assert run(["review", "resolve", str(a), "999", "--verdict", "pass"]) == 2
    assert "no review item 999" in capsys.readouterr().err
    assert run(["review", "resolve", str(a), str(b), "--verdict", "pass", "--rule", "nope=pass"]) == 2
    assert "'nope' is not a rule of trace second-0" in capsys.readouterr().err
    assert open_ids(two_runs["path"]) == before
    with Store(two_runs["path"]) as s, pytest.raises(InputError):
        s.resolve_reviews([a, 999], verdict="pass", reviewer="ana")
    assert open_ids(two_runs["path"]) == before


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--verdict", "pass"], "no review item given"),
        (["1", "--all-open", "--verdict", "pass"], "item numbers and --all-open both choose the items"),
        (
            ["1", "--run", "latest", "--verdict", "pass"],
            "--run and --reason choose items only with --all-open",
        ),
        (["1"], "no verdict given"),
        (["--all-open", "--reason", "bogus", "--verdict", "pass"], "unknown review reason 'bogus'"),
    ],
)
def test_resolve_says_what_is_missing(
    two_runs: dict[str, Any], capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    before = open_ids(two_runs["path"])
    assert run(["review", "resolve", *argv]) == 2
    assert says in capsys.readouterr().err
    assert open_ids(two_runs["path"]) == before
