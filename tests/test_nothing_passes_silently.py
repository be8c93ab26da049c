"""Issue 37 ("Nothing passes silently, second pass"), points 1-4: a pass that checked nothing.

1. A judge that was asked for (--model, `model:` in seqjudge.yaml, SEQJUDGE_MODEL, --escalate) and cannot
   run is exit 2, not an engine-only green run; with no model at all the engine still runs alone (exit 0).
2. `check` counts and names every deferred `judge` rule, `applies_to` or not.
3. The pytest helper fails on a trace that exercised no rule, and its `strict` means the CLI's --strict.
4. `compare` says "not applicable" for a paired judge test over no judge-decided pair, and warns when a run
   is compared with itself.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seqjudge.cli import run

ROOT = Path(__file__).resolve().parents[1]
MISSING_KEY = "model openai:gpt-4o is configured but OPENAI_API_KEY is not set"
PASSING = {"trace_id": "t1", "calls": [{"tool_name": "A"}, {"tool_name": "B"}]}
RULES = "rules:\n  - {id: a-first, type: before, first: A, then: B}\n"


@pytest.fixture
def suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A suite whose one trace passes its one exact rule, in the working directory, with no key or model."""
    for key in ("SEQJUDGE_MODEL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "SEQJUDGE_STORE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rules.yaml").write_text(RULES, encoding="utf-8")
    (tmp_path / "t.jsonl").write_text(json.dumps(PASSING) + "\n", encoding="utf-8")
    return tmp_path


# -- 1. a requested judge that cannot run -------------------------------------------------------------------


def test_run_without_a_model_still_passes_on_the_engine_alone(
    suite: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["run", "rules.yaml", "t.jsonl", "--store", "s.db"]) == 0
    assert "judge skipped: no model configured" in capsys.readouterr().out


@pytest.mark.parametrize("strict", [[], ["--strict"]])
def test_a_model_flag_without_its_key_is_exit_2(
    suite: Path, capsys: pytest.CaptureFixture[str], strict: list[str]
) -> None:
    code = run(["run", "rules.yaml", "t.jsonl", "--store", "s.db", "--model", "openai:gpt-4o", *strict])
    err = capsys.readouterr().err
    assert code == 2 and MISSING_KEY in err and "Traceback" not in err
    assert not (suite / "s.db").exists()  # refused before a run was stored


def test_a_model_from_seqjudge_yaml_without_its_key_is_exit_2(
    suite: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (suite / "seqjudge.yaml").write_text(
        "rules: rules.yaml\ntraces: t.jsonl\nstore: s.db\nmodel: openai:gpt-4o\n", encoding="utf-8"
    )
    assert run(["run", "seqjudge.yaml"]) == 2
    assert MISSING_KEY in capsys.readouterr().err


def test_a_model_from_seqjudge_model_without_its_key_is_exit_2_in_run_and_demo(
    suite: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEQJUDGE_MODEL", "openai:gpt-4o")
    assert run(["run", "rules.yaml", "t.jsonl", "--store", "s.db"]) == 2
    assert MISSING_KEY in capsys.readouterr().err
    assert run(["demo", str(ROOT / "golden_traces"), "--store", "demo.db"]) == 2
    assert MISSING_KEY in capsys.readouterr().err


def test_a_batch_run_without_its_key_is_exit_2_and_a_dry_run_needs_none(
    suite: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["run", "rules.yaml", "t.jsonl", "--store", "s.db", "--model", "openai:gpt-4o"]
    assert run([*base, "--batch"]) == 2  # was exit 3, a provider error, for a missing key
    assert MISSING_KEY in capsys.readouterr().err
    assert run([*base, "--dry-run"]) == 0  # estimates call nothing and store nothing
    assert not (suite / "s.db").exists()


def test_escalate_without_a_runnable_judge_is_exit_2(suite: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["run", "rules.yaml", "t.jsonl", "--store", "s.db"]
    # no model at all: the cascade has no first judge (today: the engine ran alone and passed)
    assert run([*base, "--escalate", "anthropic:claude-sonnet-4-5"]) == 2
    err = capsys.readouterr().err
    assert "--escalate" in err and "no model is configured" in err
    # a first judge without its key
    assert run([*base, "--model", "openai:gpt-4o", "--escalate", "anthropic:claude-sonnet-4-5"]) == 2
    assert MISSING_KEY in capsys.readouterr().err


# -- 2. check names every deferred judge rule, applies_to or not ---------------------------------------------


JUDGE_RULES = (
    "rules:\n"
    "  - {id: a-first, type: before, first: A, then: B}\n"
    "  - {id: polite, type: judge, description: The agent stays polite.}\n"
    "  - {id: b-confirmed, type: judge, description: B is confirmed first., applies_to: B}\n"
    "  - {id: c-sane, type: judge, description: C is sane., applies_to: C}\n"
)


def test_check_counts_the_starter_suites_deferred_judge_rule(
    suite: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["init", "starter"]) == 0
    capsys.readouterr()
    run(["check", "starter/rules.yaml", "starter/traces.jsonl", "--format", "json"])
    summary = json.loads(capsys.readouterr().out)["summary"]
    assert summary["deferred_rules"] == {"confirm-before-write": 2}  # its judge rule has applies_to
    run(["check", "starter/rules.yaml", "starter/traces.jsonl"])
    (line,) = [x for x in capsys.readouterr().out.splitlines() if "deferred" in x]
    assert (
        line.startswith("2 judge-rule decision(s) deferred") and "confirm-before-write on 2 trace(s)" in line
    )


def test_check_counts_judge_rules_with_and_without_applies_to(
    suite: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (suite / "rules.yaml").write_text(JUDGE_RULES, encoding="utf-8")
    for fmt in ("json", "text"):
        assert run(["check", "rules.yaml", "t.jsonl", "--format", fmt]) == 0
    out_json, out_text = capsys.readouterr().out.split("\n}\n", 1)
    # c-sane's tool C is never called: not exercised on the trace, so not deferred either
    assert json.loads(out_json + "\n}")["summary"]["deferred_rules"] == {"polite": 1, "b-confirmed": 1}
    assert "2 judge-rule decision(s) deferred" in out_text
    assert "polite on 1 trace(s)" in out_text and "b-confirmed on 1 trace(s)" in out_text


# -- 3. the pytest helper passes on nothing no more ----------------------------------------------------------


HELPER_RULES = {"rules": [{"id": "a-first", "type": "before", "first": "A", "then": "B"}]}


def test_assert_sequence_fails_on_a_trace_that_no_rule_checked() -> None:
    from seqjudge.testing import assert_sequence, assert_sequences

    unchecked = r"no rule was checked on this trace \(a-first: not_exercised\)"
    with pytest.raises(AssertionError, match=unchecked):
        assert_sequence(["totally_unrelated_tool"], HELPER_RULES)
    # an empty trace fails even where a rule passes it (a max_calls rule holds on no call at all)
    capped = {"rules": [{"id": "c-once", "type": "max_calls", "tool": "C", "max": 1}]}
    for rules in (HELPER_RULES, capped):
        with pytest.raises(AssertionError, match=r"the trace has no call"):
            assert_sequence([], rules)
    for empty, rules in ((["totally_unrelated_tool"], HELPER_RULES), ([], HELPER_RULES), ([], capped)):
        assert assert_sequence(empty, rules, allow_unexercised=True).verdict == "pass"
    with pytest.raises(AssertionError, match="1 of 2 trace"):
        assert_sequences([["A", "B"], []], HELPER_RULES)
    with pytest.raises(AssertionError, match="no trace to check"):
        assert_sequences([], HELPER_RULES)
    assert assert_sequences([], HELPER_RULES, allow_unexercised=True) == []
    # a judge rule the engine defers checks nothing either: there is no judge here
    judge_only = {"rules": [{"id": "polite", "type": "judge", "description": "The agent is polite."}]}
    with pytest.raises(AssertionError, match="polite: deferred"):
        assert_sequence(["A"], judge_only)


def test_strict_means_what_the_command_lines_strict_means(tmp_path: Path) -> None:
    from seqjudge.testing import assert_sequence, assert_sequences

    with pytest.raises(AssertionError) as info:
        assert_sequence(["totally_unrelated_tool"], HELPER_RULES, strict=True, allow_unexercised=True)
    message = str(info.value)
    assert "--strict: 1 rule(s) exercised on no trace, 2 referenced tool(s) called in no trace" in message
    assert "tool 'A' (rule a-first): no trace calls it" in message
    # over several traces, as `check --strict` over a file: a rule exercised on one of them is exercised
    two = {"rules": [*HELPER_RULES["rules"], {"id": "c-once", "type": "max_calls", "tool": "C", "max": 1}]}
    assert len(assert_sequences([["A", "B"], ["C"]], two, strict=True)) == 2
    with pytest.raises(AssertionError, match=r"1 referenced tool\(s\) called in no trace\n.*tool 'C'"):
        assert_sequence(["A", "B"], two, strict=True)
    # the rule file's catalog, as on the command line: a call outside it fails under strict
    (tmp_path / "catalog.json").write_text(json.dumps({"tools": [{"name": "A"}, {"name": "B"}]}))
    (tmp_path / "rules.yaml").write_text("catalog: catalog.json\n" + RULES, encoding="utf-8")
    assert assert_sequence(["A", "B", "Z"], tmp_path / "rules.yaml").verdict == "pass"
    with pytest.raises(AssertionError, match=r"1 trace\(s\) calling tools outside the catalog"):
        assert_sequence(["A", "B", "Z"], tmp_path / "rules.yaml", strict=True)


def test_strict_still_fails_on_warnings_unless_told_not_to() -> None:
    from seqjudge.testing import assert_sequence

    rules = {"rules": [{"id": "one-c", "type": "max_calls", "tool": "C", "max": 1, "severity": "warning"}]}
    chatty = ["C", "C"]
    assert assert_sequence(chatty, rules, threshold=0.0).verdict == "pass"
    with pytest.raises(AssertionError, match="WARN"):
        assert_sequence(chatty, rules, threshold=0.0, strict=True)
    assert (
        assert_sequence(chatty, rules, threshold=0.0, strict=True, fail_on_warnings=False).verdict == "pass"
    )
    with pytest.raises(AssertionError, match="WARN"):
        assert_sequence(chatty, rules, threshold=0.0, fail_on_warnings=True)


# -- 4. compare: no green judge test without a judge decision; a run compared with itself warns -------------


NO_JUDGE_DECISION_RULES = (
    "rules:\n"
    "  - {id: a-first, type: before, first: A, then: B}\n"
    "  - {id: c-confirmed, type: judge, description: C is confirmed first., applies_to: C}\n"
)


def test_compare_says_not_applicable_when_no_judge_rule_was_decided(
    suite: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (suite / "rules.yaml").write_text(NO_JUDGE_DECISION_RULES, encoding="utf-8")
    traces = [
        {**PASSING, "trace_id": f"t{i}"} for i in range(3)
    ]  # none calls C: the judge rule decides nothing
    (suite / "t.jsonl").write_text("".join(json.dumps(t) + "\n" for t in traces), encoding="utf-8")
    store = ["--store", "s.db"]
    assert run(["run", "rules.yaml", "t.jsonl", *store, "--label", "main"]) == 0
    assert run(["baseline", "save", "latest", "--name", "main", *store]) == 0
    assert run(["run", "rules.yaml", "t.jsonl", *store, "--label", "change"]) == 0
    capsys.readouterr()
    args = ["compare", "main", "latest", *store]
    assert run([*args, "--markdown", "comment.md"]) == 0
    out, err = capsys.readouterr()
    (line,) = [x for x in out.splitlines() if "judge_paired" in x]
    assert line.lstrip().startswith(
        "n/a   judge_paired: not applicable: no trace has its judge rules decided"
    )
    assert "3 with no judge rule exercised" in line and "McNemar" not in line
    assert "same run" not in err
    markdown = (suite / "comment.md").read_text(encoding="utf-8")
    (md_line,) = [x for x in markdown.splitlines() if "`judge_paired`" in x]
    assert md_line.startswith("- ➖ ") and "not applicable" in md_line
    assert run([*args, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (decision,) = [d for d in data["decisions"] if d["rule"] == "judge_paired"]
    assert decision["applies"] is False and decision["fired"] is False
    assert data["judge"]["paired"] == 0 and data["judge"]["unexercised"] == 3
    assert run(["report", "latest", "--compare", "main", "-o", "report.html", *store]) == 0
    page = (suite / "report.html").read_text(encoding="utf-8")
    assert '<span class="badge neutral">n/a</span> <code>judge_paired</code> not applicable' in page


def test_compare_warns_when_a_run_is_compared_with_itself(
    suite: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = ["--store", "s.db"]
    assert run(["run", "rules.yaml", "t.jsonl", *store]) == 0
    assert run(["baseline", "save", "latest", "--name", "main", *store]) == 0
    capsys.readouterr()
    for refs in (["main", "main"], ["main", "latest"]):
        assert run(["compare", *refs, *store]) == 0
        err = capsys.readouterr().err
        assert "warning: the baseline 'main' and the candidate" in err and "are the same run" in err
