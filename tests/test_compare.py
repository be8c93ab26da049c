"""`compare`: deterministic regressions always count, judge changes only beyond noise (McNemar exact +
paired bootstrap), --max-drop, missing traces; `seqjudge baseline` and `seqjudge compare` exit codes.

The builders at the top (``RULES``, ``make_pair``, ``make_run``, ``stored_run``) are shared with
test_ci_outputs.py and test_alerts.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from seqjudge.cli import run as cli
from seqjudge.compare import bootstrap_interval, compare, mcnemar_exact, noise_floor
from seqjudge.crosscheck import TraceResult, reconcile
from seqjudge.errors import InputError
from seqjudge.judge.judge import Fingerprint, JudgeResult
from seqjudge.judge.schema import JudgeOutput, JudgeViolation
from seqjudge.rules.engine import check
from seqjudge.rules.load import parse_rules
from seqjudge.rules.model import RuleSet
from seqjudge.store import Store
from seqjudge.trace import Trace

# -- builders ----------------------------------------------------------------------------------------------
# Shape 2 (`tests:`): two rule groups, so JUnit has a test case per trace and group.
RULES = parse_rules(
    {
        "tests": [
            {
                "id": "identity",
                "metric": "sequence_valid",
                "rules": [
                    {"id": "verify-first", "type": "require", "tool": "VerifyIdentity"},
                    {
                        "id": "read-before-update",
                        "type": "before",
                        "first": "GetCustomer",
                        "then": "UpdateCustomer",
                    },
                ],
            },
            {
                "id": "messaging",
                "rules": [
                    {
                        "id": "email-limit",
                        "type": "max_calls",
                        "tool": "SendEmail",
                        "max": 1,
                        "severity": "warning",
                    },
                    {
                        "id": "confirm-delete",
                        "type": "judge",
                        "description": "Confirm with the user before deleting a record.",
                    },
                ],
            },
        ]
    }
)
JUDGE_RULE = "confirm-delete"


def make_trace(trace_id: str, *, good: bool = True, emails: int = 1) -> Trace:
    """Verify, read, update (update before read when not ``good``), then ``emails`` e-mails."""
    order = ["GetCustomer", "UpdateCustomer"] if good else ["UpdateCustomer", "GetCustomer"]
    calls: list[dict[str, Any]] = [{"tool_name": "VerifyIdentity", "arguments": {"customer_id": "C-1"}}]
    calls += [{"tool_name": name, "arguments": {"customer_id": "C-1"}} for name in order]
    calls += [{"tool_name": "SendEmail", "arguments": {"to": "a@example.com"}}] * emails
    calls.append({"tool_name": "DeleteCustomer", "arguments": {"customer_id": "C-1"}})
    return Trace.model_validate({"trace_id": trace_id, "calls": calls})


def judge_result(trace_id: str, confirm_fails: bool, rules: RuleSet = RULES) -> JudgeResult:
    """The judge, asked about the judge rule only (contextual mode): it fails it or not."""
    violations = []
    if confirm_fails:
        violations.append(
            JudgeViolation(
                rule_id=JUDGE_RULE,
                rule_description="Confirm with the user before deleting a record.",
                violation_type="missing_prerequisite",
                expected_order="the user confirms, then DeleteCustomer",
                actual_order="DeleteCustomer without a confirmation",
                offending_call_index=4,
                severity="critical",
                explanation="the agent deleted the customer without asking the user",
            )
        )
    return JudgeResult(
        trace_id=trace_id,
        status="scored",
        report=JudgeOutput(
            sequence_correctness_score=0.0 if confirm_fails else 1.0,
            total_rules_checked=1,
            rules_passed=0 if confirm_fails else 1,
            rules_failed=1 if confirm_fails else 0,
            violations=violations,
            missing_prerequisites=[],
            summary="judged",
        ),
        fingerprint=Fingerprint(
            provider="scripted", model="scripted", template_version="v1", template_hash="t", prompt_hash="p"
        ),
        rule_ids=[JUDGE_RULE],
    )


def make_pair(
    trace_id: str,
    *,
    good: bool = True,
    emails: int = 1,
    confirm: str | None = "pass",
    rules: RuleSet = RULES,
) -> tuple[Trace, TraceResult]:
    """``confirm``: the judge's outcome of the judge rule; None: no judge ran (the rule is deferred)."""
    trace = make_trace(trace_id, good=good, emails=emails)
    judge = None if confirm is None else judge_result(trace_id, confirm == "fail", rules)
    result = reconcile(check(trace, rules), judge, judge_skipped=None if judge else "no model configured")
    return trace, result


def make_run(
    n: int,
    *,
    bad: Iterable[int] = (),
    judge_fail: Iterable[int] = (),
    chatty: Iterable[int] = (),
    judged: bool = True,
    skip: Iterable[int] = (),
) -> list[tuple[Trace, TraceResult]]:
    """``n`` traces t00..: ``bad`` update before reading (an engine failure), ``judge_fail`` the judge fails
    the judge rule, ``chatty`` send two e-mails (a warning), ``skip`` are left out."""
    bad, judge_fail, chatty, skip = set(bad), set(judge_fail), set(chatty), set(skip)
    out = []
    for i in range(n):
        if i in skip:
            continue
        confirm = None if not judged else ("fail" if i in judge_fail else "pass")
        out.append(make_pair(f"t{i:02d}", good=i not in bad, emails=2 if i in chatty else 1, confirm=confirm))
    return out


def results(pairs: list[tuple[Trace, TraceResult]]) -> list[TraceResult]:
    return [r for _, r in pairs]


def stored_run(db: Store, pairs: list[tuple[Trace, TraceResult]], label: str | None = None) -> str:
    run_id = db.create_run(config={"rules": "rules.yaml"}, fingerprint={"model": "scripted"}, label=label)
    for trace, result in pairs:
        db.save_result(run_id, trace, result)
    db.finish_run(run_id, totals={"traces": len(pairs)})
    return run_id


# -- statistics ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("b", "c", "p"),
    [
        (0, 0, 1.0),  # no discordant pair
        (1, 0, 1.0),  # 2 * 1/2
        (2, 2, 1.0),  # 2 * (1 + 4 + 6) / 16 > 1
        (5, 1, 0.21875),  # 2 * (1 + 6) / 64
        (8, 2, 0.109375),  # 2 * (1 + 10 + 45) / 1024
        (10, 1, 0.01171875),  # 2 * (1 + 11) / 2048
        (6, 0, 0.03125),  # 2 / 64
        (12, 0, 0.00048828125),  # 2 / 4096
    ],
)
def test_mcnemar_exact_against_hand_computed_values(b: int, c: int, p: float) -> None:
    assert mcnemar_exact(b, c) == pytest.approx(p, abs=1e-15)
    assert mcnemar_exact(c, b) == mcnemar_exact(b, c)  # two-sided


def test_mcnemar_large_counts_stay_exact() -> None:
    # 2 * sum_{i<=400} C(1000, i) / 2^1000: far in the tail, but not rounded to 0 or to nonsense.
    p = mcnemar_exact(600, 400)
    assert 0.0 < p < 1e-9
    assert mcnemar_exact(510, 490) > 0.5
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 2)


def test_bootstrap_is_reproducible_with_a_seed() -> None:
    deltas = [((i * 37) % 61) / 61 - 0.6 for i in range(60)]  # many distinct values
    first = bootstrap_interval(deltas, seed=7)
    assert bootstrap_interval(deltas, seed=7) == first  # the same seed, the same interval
    assert bootstrap_interval(deltas, seed=8) != first  # another seed draws other resamples
    mean = sum(deltas) / len(deltas)
    low, high = first
    assert low < mean < high and low >= -1.0 and high <= 1.0
    wide = bootstrap_interval(deltas, level=0.99, seed=7)
    assert wide[0] <= low and high <= wide[1]
    assert bootstrap_interval([0.25] * 10) == (0.25, 0.25)  # nothing varies
    with pytest.raises(ValueError):
        bootstrap_interval([])


def test_compare_seed_makes_the_report_reproducible() -> None:
    base = make_run(40, judge_fail=range(0, 4))
    cand = make_run(40, judge_fail=range(3, 9))
    one = compare(results(base), results(cand), seed=3)
    two = compare(results(base), results(cand), seed=3)
    assert one.model_dump() == two.model_dump()
    assert one.score.seed == 3 and one.score.resamples == 2000


# -- decisions -----------------------------------------------------------------------------------------------
def test_identical_runs_are_no_regression() -> None:
    base = make_run(20, judge_fail=[3], chatty=[5])
    c = compare(results(base), results(make_run(20, judge_fail=[3], chatty=[5])))
    assert not c.regression and c.fired == []
    assert c.changes == [] and c.worse == [] and c.better == []
    assert c.matched == 20 and c.score.mean_change == 0.0 and c.score.interval == (0.0, 0.0)
    assert c.decision("judge_paired").reason.startswith("no judge-rule outcome changed")


def test_a_pure_deterministic_regression_counts_on_one_trace() -> None:
    base = make_run(60)
    cand = make_run(60, bad=[7])
    c = compare(results(base), results(cand))
    assert c.regression
    assert [d.rule for d in c.fired] == ["deterministic"]
    reason = c.decision("deterministic").reason
    assert "read-before-update (before, critical) newly failed on 1 trace(s): t07" in reason
    assert "engine is exact" in reason
    assert c.worse == ["t07"]
    change = c.changes[0]
    assert (change.trace_id, change.baseline, change.candidate) == ("t07", "pass", "fail")
    assert change.new_violations == ["read-before-update"] == change.deterministic_regressions
    assert change.delta == -1.0
    rule = next(r for r in c.rules if r.rule_id == "read-before-update")
    assert (rule.decided_by, rule.baseline_failed, rule.candidate_failed, rule.new) == (
        "engine",
        0,
        1,
        ["t07"],
    )
    # One trace in sixty is not significant to any statistic: the engine needs none.
    assert c.score.interval[1] == 0.0


def test_a_warning_rule_regression_also_counts_and_fixes_are_reported() -> None:
    c = compare(results(make_run(10, bad=[1])), results(make_run(10, chatty=[2])))
    assert c.regression and "email-limit (max_calls, warning)" in c.decision("deterministic").reason
    assert c.better == ["t01"] and c.worse == ["t02"]  # t02 drops to review (score 3/4)
    fixed = next(r for r in c.rules if r.rule_id == "read-before-update")
    assert fixed.fixed == ["t01"] and fixed.new == []
    assert next(ch for ch in c.changes if ch.trace_id == "t02").review_reasons == ["below_threshold"]


def test_judge_noise_is_not_a_regression() -> None:
    # 60 traces; 5 fail the judge rule on both runs; 2 flip pass->fail and 2 fail->pass: judge noise.
    base = make_run(60, judge_fail=[10, 11, 12, 13, 14, 0, 1])
    cand = make_run(60, judge_fail=[10, 11, 12, 13, 14, 2, 3])
    c = compare(results(base), results(cand))
    assert not c.regression
    judge = c.judge
    assert judge is not None
    assert (judge.paired, judge.pass_to_fail, judge.fail_to_pass, judge.p_value) == (60, 2, 2, 1.0)
    assert not judge.mcnemar_worse and not judge.bootstrap_worse
    low, high = judge.interval or (0, 0)
    assert low < 0 < high
    assert c.decision("judge_paired").reason.startswith("within judge noise")
    assert sorted(c.worse) == ["t02", "t03"] and sorted(c.better) == ["t00", "t01"]
    # The per-rule view shows the flips and their (insignificant) p-value.
    rule = next(r for r in c.rules if r.rule_id == JUDGE_RULE)
    assert (rule.decided_by, len(rule.new), len(rule.fixed), rule.p_value) == ("judge", 2, 2, 1.0)


def test_a_real_judge_regression_is_one() -> None:
    base = make_run(60, judge_fail=[50, 51])
    cand = make_run(60, judge_fail=[50, 51, *range(12)])  # 12 flip pass->fail, none back
    c = compare(results(base), results(cand))
    assert c.regression and [d.rule for d in c.fired] == ["judge_paired"]
    judge = c.judge
    assert judge is not None
    assert (judge.pass_to_fail, judge.fail_to_pass) == (12, 0)
    assert judge.p_value == pytest.approx(2 / 4096)
    assert judge.mcnemar_worse and judge.bootstrap_worse
    assert judge.mean_change == pytest.approx(-12 / 60)
    reason = c.decision("judge_paired").reason
    assert reason.startswith("the judge rules got worse beyond judge noise")
    assert "12 pass->fail and 0 fail->pass of 60" in reason and "McNemar exact p = 0.0004883" in reason
    assert not c.decision("deterministic").fired


def test_the_two_judge_tests_must_agree() -> None:
    # 5 flips one way, none back: the percentile bootstrap already excludes 0, McNemar (p = 1/16) does not.
    c = compare(results(make_run(60)), results(make_run(60, judge_fail=range(5))))
    judge = c.judge
    assert judge is not None and judge.bootstrap_worse and not judge.mcnemar_worse
    assert not c.regression
    assert "the tests do not agree" in c.decision("judge_paired").reason


def test_undecided_judge_rules_are_left_out_of_the_paired_test() -> None:
    c = compare(results(make_run(10, judged=False)), results(make_run(10, judge_fail=[1])))
    assert not c.regression
    d = c.decision("judge_paired")
    assert not d.applies and "10 undecided" in d.reason
    # deferred -> failed is still reported as a new failure of the rule.
    assert next(r for r in c.rules if r.rule_id == JUDGE_RULE).new == ["t01"]


def test_max_drop_on_the_pass_rate() -> None:
    base = make_run(60)
    cand = make_run(60, judge_fail=range(4))  # 4 of 60 fail now: 6.7 points, within judge noise
    loose = compare(results(base), results(cand))
    assert not loose.regression and not loose.decision("max_drop").applies
    assert (
        "pass rate on the 60 trace(s) both hold 100.0% -> 93.3% (-6.7 points)"
        in loose.decision("max_drop").reason
    )
    strict = compare(results(base), results(cand), max_drop=0.05)
    assert strict.regression and [d.rule for d in strict.fired] == ["max_drop"]
    assert "exceeds --max-drop 0.05" in strict.decision("max_drop").reason
    assert not compare(results(base), results(cand), max_drop=0.10).regression
    # 3 of 60 is exactly 5 points: not more than --max-drop 0.05 (no floating-point surprise).
    assert not compare(results(base), results(make_run(60, judge_fail=range(3))), max_drop=0.05).regression


def test_missing_traces_count_unless_allowed() -> None:
    # Issue 38: what the candidate never checked cannot pass the gate; --allow-missing only reports it.
    base = make_run(10, skip=[9])
    cand = make_run(12, skip=[0, 1])
    c = compare(results(base), results(cand))
    assert c.only_in_baseline == ["t00", "t01"] and c.only_in_candidate == ["t09", "t10", "t11"]
    assert c.matched == 7 and c.regression and [d.rule for d in c.fired] == ["missing"]
    assert "2 baseline trace(s) missing from the candidate: t00, t01" in c.decision("missing").reason
    soft = compare(results(base), results(cand), allow_missing=True)
    assert not soft.regression
    assert soft.decision("missing").reason.endswith("t00, t01 (--allow-missing)")


@pytest.mark.parametrize("status", ["interrupted", "stopped", "running"])
def test_a_candidate_run_that_did_not_complete_counts_unless_allowed(status: str) -> None:
    base = make_run(5)
    c = compare(results(base), results(make_run(5)), candidate_status=status, names=("main", "latest"))
    assert c.regression and [d.rule for d in c.fired] == ["missing"]
    assert f"the candidate run latest is {status}, not completed" in c.decision("missing").reason
    assert not compare(
        results(base), results(make_run(5)), candidate_status=status, allow_missing=True
    ).regression
    assert not compare(results(base), results(make_run(5)), candidate_status="completed").regression


def test_rules_on_one_side_only_are_listed_not_counted() -> None:
    extra = parse_rules(
        {
            "rules": [
                *[r.model_dump(exclude_none=True, exclude={"group"}) for r in RULES.rules],
                {"id": "no-delete", "type": "blocklist", "pattern": "Delete"},
            ]
        }
    )
    cand = [make_pair(f"t{i:02d}", rules=extra) for i in range(5)]
    c = compare(results(make_run(5)), results(cand))
    assert c.rules_only_in_candidate == ["no-delete"]
    assert not c.decision("deterministic").fired  # a new rule failing everywhere is not a regression


def test_noise_floor_from_a_repeat_run() -> None:
    base = make_run(60)
    cand = make_run(60, judge_fail=range(12))  # net flip rate 12/60 = 20%
    calm = noise_floor("repeat", results(base), results(make_run(60, judge_fail=range(6))))
    assert (calm.paired, calm.discordant, calm.rate) == (60, 6, 0.1)
    c = compare(results(base), results(cand), noise=calm)
    assert c.regression and c.judge is not None and c.judge.above_noise is True
    assert "net flip rate 20.0% > the repeat runs' disagreement 10.0%" in c.decision("judge_paired").reason
    noisy = noise_floor("repeat", results(base), results(make_run(60, judge_fail=range(15))))
    c2 = compare(results(base), results(cand), noise=noisy)
    assert not c2.regression and c2.judge is not None and c2.judge.above_noise is False
    with pytest.raises(InputError, match="shares no judged trace"):
        noise_floor("repeat", results(base), results(make_run(60, judged=False)))


def test_bad_inputs_are_input_errors() -> None:
    pairs = make_run(3)
    with pytest.raises(InputError, match="share no trace id"):
        compare(results(pairs), results(make_run(6, skip=[0, 1, 2])))
    with pytest.raises(InputError, match="appears twice"):
        compare(results(pairs + pairs[:1]), results(pairs))
    with pytest.raises(InputError, match="alpha"):
        compare(results(pairs), results(pairs), alpha=1.5)
    with pytest.raises(InputError, match="max drop"):
        compare(results(pairs), results(pairs), max_drop=-0.1)


def test_changes_are_sorted_worst_first_with_score_deltas() -> None:
    c = compare(results(make_run(6)), results(make_run(6, bad=[4], chatty=[1])))
    assert [(ch.trace_id, round(ch.delta, 3)) for ch in c.changes] == [("t04", -1.0), ("t01", -0.25)]
    assert c.score.mean_change == pytest.approx((-1.0 - 0.25) / 6)  # 3 of 4 rules passed on t01


# -- CLI -----------------------------------------------------------------------------------------------------
@pytest.fixture
def store(tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "seqjudge.db"
    with Store(path) as db:
        base = stored_run(db, make_run(30, judge_fail=[20]), label="main")
        same = stored_run(db, make_run(30, judge_fail=[21]), label="pr-noise")
        down = stored_run(db, make_run(30, judge_fail=[20, 0]), label="pr-judge-down")
        worse = stored_run(db, make_run(30, bad=[3], judge_fail=[20]), label="pr-bad")
    return {"path": path, "base": base, "same": same, "down": down, "worse": worse}


def test_baseline_save_and_list(store: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    db = str(store["path"])
    assert cli(["baseline", "save", store["base"], "--name", "main", "--store", db]) == 0
    assert f"baseline 'main' is run {store['base']}: 30 trace(s)" in capsys.readouterr().out
    assert cli(["baseline", "save", "latest", "--name", "main", "--store", db]) == 0  # moves it
    assert f"(it was {store['base']})" in capsys.readouterr().out
    assert cli(["baseline", "list", "--store", db, "--format", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(b["name"], b["run_id"], b["label"]) for b in listed] == [("main", store["worse"], "pr-bad")]
    assert cli(["baseline", "list", "--store", db]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("BASELINE") and out[1].split()[:3] == ["main", store["worse"], "30"]
    assert cli(["baseline", "save", "r1999", "--name", "x", "--store", db]) == 2
    assert "no run 'r1999'" in capsys.readouterr().err


def test_cli_compare_exit_codes(store: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    db = str(store["path"])
    assert cli(["baseline", "save", store["base"], "--name", "main", "--store", db]) == 0
    capsys.readouterr()
    # Judge noise: one flip each way -> exit 0.
    assert cli(["compare", "main", store["same"], "--store", db]) == 0
    out = capsys.readouterr().out
    assert "Decision: no regression" in out and "ok    judge_paired: within judge noise" in out
    # A deterministic regression in `latest` -> exit 1, with the reason and the actionable block.
    assert cli(["compare", "main", "latest", "--store", db]) == 1
    out = capsys.readouterr().out
    assert f"candidate latest [run {store['worse']}, label 'pr-bad'], 30 traces" in out
    assert "Decision: REGRESSION (deterministic)" in out
    assert "FIRED deterministic: the engine is exact" in out and "read-before-update" in out
    assert "← violation" in out and "Worse (1): t03 pass->fail" in out
    # Bad references -> exit 2.
    assert cli(["compare", "nope", "latest", "--store", db]) == 2
    assert "no run 'nope'" in capsys.readouterr().err
    assert cli(["compare", "missing.jsonl", "latest", "--store", db]) == 2
    assert "missing.jsonl: no such file" in capsys.readouterr().err
    assert cli(["compare", "main", "latest", "--store", str(Path(db).with_name("none.db"))]) == 2
    assert "no seqjudge store here" in capsys.readouterr().err


def test_cli_compare_json_and_max_drop(store: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    db = str(store["path"])
    args = ["compare", store["base"], store["down"], "--store", db, "--format", "json"]
    assert cli(args) == 0  # one judge flip: noise
    assert json.loads(capsys.readouterr().out)["regression"] is False
    assert cli([*args, "--max-drop", "0.02"]) == 1  # but 3.3 points off the pass rate
    data = json.loads(capsys.readouterr().out)
    assert data["regression"] is True
    assert [d["rule"] for d in data["decisions"] if d["fired"]] == ["max_drop"]
    assert data["baseline"]["run_id"] == store["base"] and data["baseline"]["label"] == "main"
    assert data["judge"]["pass_to_fail"] == 1 and data["judge"]["fail_to_pass"] == 0
    assert data["pass_rate"] == {"baseline": 29 / 30, "candidate": 28 / 30}


def test_cli_compare_exported_files_without_a_store(
    store: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(store["path"])
    base_file, cand_file = tmp_path / "base.jsonl", tmp_path / "cand.jsonl"
    assert cli(["runs", "export", store["base"], "-o", str(base_file), "--store", db]) == 0
    assert cli(["runs", "export", store["worse"], "-o", str(cand_file), "--store", db]) == 0
    capsys.readouterr()
    nowhere = str(tmp_path / "no-store.db")
    assert cli(["compare", str(base_file), str(cand_file), "--store", nowhere]) == 1
    out = capsys.readouterr().out
    assert "Decision: REGRESSION (deterministic)" in out
    assert not Path(nowhere).exists()
    # A file that is not an export is bad input, naming the file and the line.
    junk = tmp_path / "junk.jsonl"
    junk.write_text('{"not": "an export"}\n')
    assert cli(["compare", str(junk), str(cand_file)]) == 2
    assert f"{junk}, line 1: not a seqjudge JSONL export line" in capsys.readouterr().err


def test_cli_compare_repeat_run_sets_the_noise_floor(
    store: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(store["path"])
    assert cli(["compare", store["base"], store["same"], "--repeat", store["same"], "--store", db]) == 0
    out = capsys.readouterr().out
    assert "the repeat runs' disagreement 6.7%" in out  # 2 of 30 traces differ between the two runs
