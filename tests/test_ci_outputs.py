"""CI outputs parsed back: JUnit by an XML parser, GitHub annotations by GitHub's escaping rules, the
markdown tables; `seqjudge report-ci` and `seqjudge compare` writing them."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from seqjudge.cli import run as cli
from seqjudge.compare import compare
from seqjudge.crosscheck import reconcile
from seqjudge.errors import InputError
from seqjudge.outputs.ci_outputs import (
    MARKER_COMPARE,
    MARKER_RUN,
    annotation,
    append_step_summary,
    escape_data,
    escape_property,
    github_compare,
    github_run,
    junit_compare,
    junit_run,
    markdown_compare,
    markdown_run,
    write_junit,
)
from seqjudge.rules.engine import check
from seqjudge.rules.load import parse_rules
from seqjudge.store import Store
from seqjudge.trace import Trace
from test_compare import make_pair, make_run, results, stored_run


# -- parsing helpers (what a CI system does) -----------------------------------------------------------------
def parse_junit(path: Path) -> ET.Element:
    return ET.parse(path).getroot()


def cases(root: ET.Element) -> dict[tuple[str, str], ET.Element]:
    return {(c.get("classname", ""), c.get("name", "")): c for c in root.iter("testcase")}


def state(case: ET.Element) -> str:
    for tag in ("failure", "error", "skipped"):
        if case.find(tag) is not None:
            return tag
    return "passed"


_UNESCAPE = {"%25": "%", "%0D": "\r", "%0A": "\n", "%3A": ":", "%2C": ","}


def _unescape(text: str) -> str:
    return re.sub("%(25|0D|0A|3A|2C)", lambda m: _UNESCAPE[m.group(0)], text)


def parse_annotation(line: str) -> tuple[str, dict[str, str], str]:
    """A workflow command as the runner reads it: ``::level k=v,k=v::message``."""
    match = re.fullmatch(r"::(error|warning|notice)(?: ([^:]*))?::(.*)", line)
    assert match, line
    props = {}
    if match.group(2):
        for item in match.group(2).split(","):
            key, _, value = item.partition("=")
            props[key] = _unescape(value)
    return match.group(1), props, _unescape(match.group(3))


def table_rows(markdown: str, header_start: str) -> list[list[str]]:
    """The rows of the markdown table whose header line starts with ``header_start``."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]])
    return rows


# -- JUnit ---------------------------------------------------------------------------------------------------
def test_junit_run_one_case_per_trace_and_group(tmp_path: Path) -> None:
    pairs = make_run(6, bad=[1], chatty=[2], judge_fail=[3])
    target = tmp_path / "out" / "junit.xml"
    write_junit(junit_run(pairs, name="seqjudge run r1"), target)
    root = parse_junit(target)
    suite = root.find("testsuite")
    assert suite is not None and suite.get("name") == "seqjudge run r1"
    found = cases(root)
    assert len(found) == 12 == int(suite.get("tests", 0))  # 6 traces x 2 groups
    assert {name for _, name in found} == {"identity", "messaging"}
    states = {key: state(case) for key, case in found.items()}
    assert [k for k, s in states.items() if s == "failure"] == [("t01", "identity"), ("t03", "messaging")]
    assert [k for k, s in states.items() if s == "skipped"] == [("t02", "messaging")]
    assert (suite.get("failures"), suite.get("skipped"), suite.get("errors")) == ("2", "1", "0")
    engine_fail = found[("t01", "identity")].find("failure")
    assert engine_fail is not None and engine_fail.get("type") == "critical"
    assert engine_fail.get("message") == "1 critical rule(s) failed: read-before-update"
    text = engine_fail.text or ""
    assert "❌ FAIL: t01 · read-before-update [identity]" in text
    assert "2. UpdateCustomer(customer_id=C-1)  ← violation" in text and "Suggestion:" in text
    # A judge rule's failure carries the judge's violation, marked at the call it named.
    judge_fail = found[("t03", "messaging")].find("failure")
    assert judge_fail is not None
    assert "confirm-delete" in (judge_fail.get("message") or "")
    assert "5. DeleteCustomer(customer_id=C-1)  ← violation" in (judge_fail.text or "")
    assert "the agent deleted the customer without asking the user" in (judge_fail.text or "")
    review = found[("t02", "messaging")].find("skipped")
    assert review is not None
    assert review.get("message") == "needs human review (below_threshold): email-limit"
    out = found[("t02", "messaging")].find("system-out")
    assert out is not None and "⚠️  WARN: t02 · email-limit" in (out.text or "")


def test_junit_without_groups_uses_rules_and_survives_control_characters(tmp_path: Path) -> None:
    rules = parse_rules({"rules": [{"id": "no-admin", "type": "blocklist", "pattern": "admin_"}]})
    trace = Trace.model_validate(
        {
            "trace_id": "t\x01odd",
            "calls": [{"tool_name": "admin_reset", "arguments": {"note": "bell\x07 esc\x1b"}}],
        }
    )
    result = reconcile(check(trace, rules))
    target = tmp_path / "junit.xml"
    write_junit(junit_run([(trace, result)]), target)
    root = parse_junit(target)  # would raise on a raw control character
    (case,) = list(root.iter("testcase"))
    assert case.get("name") == "rules" and case.get("classname") == "t\ufffdodd"
    failure = case.find("failure")
    assert failure is not None and "← violation" in (failure.text or "")


def test_junit_unwritable_path_is_bad_input(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(InputError, match="cannot write the JUnit file"):
        write_junit(junit_run(make_run(1)), blocker / "junit.xml")


def test_junit_compare_failures_are_what_the_gate_counts(tmp_path: Path) -> None:
    base = make_run(20, bad=[9], judge_fail=[0, 1], skip=[19])
    # t05 regresses on an engine rule; t09 still fails (known); t02/t03 flip pass->fail on the judge rule
    # and t00/t01 back: judge noise; t18 is missing from the candidate, t19 is new.
    cand = make_run(20, bad=[5, 9], judge_fail=[2, 3], skip=[18])
    comparison = compare(results(base), results(cand), allow_missing=True)  # t18: reported only
    assert [d.rule for d in comparison.fired] == ["deterministic"]
    target = tmp_path / "compare.xml"
    write_junit(junit_compare(comparison, cand), target)
    root = parse_junit(target)
    found = cases(root)
    # 19 candidate traces x 2 groups, the missing trace, the gate.
    assert len(found) == 19 * 2 + 1 + 1
    failures = sorted(k for k, c in found.items() if state(c) == "failure")
    assert failures == [("seqjudge.compare", "regression gate"), ("t05", "identity")]
    regression = found[("t05", "identity")].find("failure")
    assert regression is not None and regression.get("type") == "regression"
    assert "← violation" in (regression.text or "")
    assert regression.get("message") == "regression against baseline: read-before-update newly failed"
    known = found[("t09", "identity")].find("skipped")
    assert known is not None and known.get("message") == (
        "known failure, also failing in the baseline: read-before-update"
    )
    noise = found[("t02", "messaging")]
    assert state(noise) == "passed"
    assert "within judge noise" in (noise.findtext("system-out") or "")
    assert state(found[("t18", "trace")]) == "skipped"
    new = found[("t19", "identity")]
    assert state(new) == "passed"  # new and passing: nothing to say
    gate = found[("seqjudge.compare", "regression gate")].find("failure")
    assert gate is not None and gate.get("message") == "regression: deterministic"
    assert "FIRED deterministic" in (gate.text or "") and "ok judge_paired: within judge noise" in (
        gate.text or ""
    )


def test_junit_compare_judge_regression_fails_the_flipped_cases(tmp_path: Path) -> None:
    base, cand = make_run(30), make_run(30, judge_fail=range(10))
    comparison = compare(results(base), results(cand))
    target = tmp_path / "j.xml"
    write_junit(junit_compare(comparison, cand), target)
    found = cases(parse_junit(target))
    failed = sorted(k for k, c in found.items() if state(c) == "failure")
    assert failed == [("seqjudge.compare", "regression gate")] + [
        (f"t{i:02d}", "messaging") for i in range(10)
    ]


def test_junit_compare_rules_new_in_the_candidate_are_not_known_failures(tmp_path: Path) -> None:
    extra = parse_rules(
        {
            "rules": [
                {
                    "id": "read-before-update",
                    "type": "before",
                    "first": "GetCustomer",
                    "then": "UpdateCustomer",
                },
                {"id": "no-delete", "type": "blocklist", "pattern": "Delete"},
            ]
        }
    )
    cand = [make_pair(f"t{i:02d}", rules=extra) for i in range(3)]
    comparison = compare(results(make_run(3)), results(cand))
    assert not comparison.regression and comparison.rules_only_in_candidate == ["no-delete"]
    target = tmp_path / "j.xml"
    write_junit(junit_compare(comparison, cand), target)
    case = cases(parse_junit(target))[("t00", "rules")]
    skipped = case.find("skipped")
    assert (
        skipped is not None
        and skipped.get("message") == "rule(s) not in the baseline, not compared: no-delete"
    )
    assert "❌ FAIL: t00 · no-delete" in (case.findtext("system-out") or "")


# -- GitHub --------------------------------------------------------------------------------------------------
def test_annotation_escaping_follows_github() -> None:
    assert escape_data("50% done\r\nnext") == "50%25 done%0D%0Anext"
    assert escape_property("a: b, c%\n") == "a%3A b%2C c%25%0A"
    line = annotation("error", "100% broken:\nline two, still", title="rule: x, y")
    assert "\n" not in line
    assert line == "::error title=rule%3A x%2C y::100%25 broken:%0Aline two, still"
    assert parse_annotation(line) == ("error", {"title": "rule: x, y"}, "100% broken:\nline two, still")
    with pytest.raises(ValueError):
        annotation("fatal", "x")


def test_github_run_annotations_parse_back() -> None:
    pairs = make_run(5, bad=[1], chatty=[2])
    lines = github_run(pairs, name="seqjudge run r1")
    parsed = [parse_annotation(line) for line in lines]
    assert [p[0] for p in parsed] == ["error", "warning", "notice"]
    level, props, message = parsed[0]
    assert props["title"] == "seqjudge: t01 failed read-before-update"
    assert "❌ FAIL: t01 · read-before-update" in message and "  ← violation\n" in message
    assert parsed[1][1]["title"] == "seqjudge: t02 needs review"
    assert parsed[1][2].startswith("t02 needs human review: below_threshold")
    assert parsed[2] == ("notice", {"title": "seqjudge run r1"}, "5 trace(s): 3 pass, 1 fail, 1 review")


def test_github_annotations_are_capped_with_a_notice() -> None:
    lines = github_run(make_run(14, bad=range(14)))
    levels = [parse_annotation(line)[0] for line in lines]
    assert levels == ["error"] * 10 + ["notice", "notice"]
    assert parse_annotation(lines[10])[2].startswith("4 more failed trace(s) not annotated")


def test_github_compare_annotations() -> None:
    base, cand = make_run(30), make_run(30, bad=[4], judge_fail=range(10, 20))
    comparison = compare(results(base), results(cand), max_drop=0.1)
    parsed = [parse_annotation(line) for line in github_compare(comparison, cand)]
    titles = [p[1]["title"] for p in parsed if p[0] == "error"]
    assert titles[0] == "seqjudge regression: read-before-update on t04"
    assert "seqjudge regression: judge_paired" in titles and "seqjudge regression: max_drop" in titles
    assert len([t for t in titles if "confirm-delete" in t]) == 9  # 10 errors at most, then a notice
    notice = parsed[-1]
    assert notice[0] == "notice" and notice[2].startswith("REGRESSION against baseline: deterministic:")


def test_step_summary_is_appended_only_when_set(tmp_path: Path) -> None:
    target = tmp_path / "summary.md"
    target.write_text("earlier step\n")
    assert append_step_summary("# hello", {"GITHUB_STEP_SUMMARY": str(target)}) == target
    assert target.read_text() == "earlier step\n# hello\n\n"
    assert append_step_summary("# hello", {}) is None


# -- markdown ------------------------------------------------------------------------------------------------
def test_markdown_compare_has_counts_decision_and_regressions_table() -> None:
    base = make_run(30, judge_fail=[29])
    cand = make_run(30, bad=[4], chatty=[6], judge_fail=[29, 7])
    comparison = compare(results(base), results(cand))
    md = markdown_compare(comparison, cand)
    assert md.startswith(
        MARKER_COMPARE + "\n## ❌ regression: seqjudge `candidate` against baseline `baseline`"
    )
    counts = {row[0]: row[1:] for row in table_rows(md, "| | baseline")}
    assert counts["pass"] == ["29", "26", "-3"] and counts["fail"] == ["1", "3", "+2"]
    assert counts["pass rate (matched traces)"] == ["96.7%", "86.7%", "-10.0 pts"]
    assert "- ❌ **engine rules** (`deterministic`): the engine is exact" in md
    assert "- ✅ **judge rules (paired test)** (`judge_paired`): within judge noise" in md
    assert "- ➖ **pass-rate drop** (`max_drop`): not set" in md
    regressions = table_rows(md, "| trace | verdict")
    assert regressions == [
        ["`t04`", "pass → fail", "1.00 → 0.00", "`read-before-update`", "yes (engine)"],
        ["`t07`", "pass → fail", "1.00 → 0.00", "`confirm-delete`", "no: judge noise"],
        ["`t06`", "pass → review", "1.00 → 0.75", "`email-limit`", "yes (engine)"],
    ]
    top = {row[0]: row for row in table_rows(md, "| rule | decided by")}
    assert top["`confirm-delete`"][1:6] == ["judge", "critical", "1 → 2", "1", "0"]
    assert top["`read-before-update`"][1] == "engine (before)"
    assert "<summary>First regression in full: t04</summary>" in md and "← violation" in md


def test_markdown_compare_without_regression() -> None:
    pairs = make_run(4)
    md = markdown_compare(compare(results(pairs), results(pairs)), pairs)
    assert "## ✅ no regression" in md and "### Regressions" not in md and "<details>" not in md


def test_markdown_run_and_pipes_in_ids() -> None:
    pairs = make_run(4, bad=[0]) + [make_pair("odd|id", good=False)]
    md = markdown_run(pairs, name="seqjudge run r1")
    assert md.startswith(MARKER_RUN + "\n## ❌ seqjudge: seqjudge run r1")
    assert table_rows(md, "| traces | pass")[0][:4] == ["5", "3", "2", "0"]
    top = table_rows(md, "| rule | type")
    assert top[0][:4] == ["`read-before-update`", "before", "critical", "2"]
    failing = table_rows(md, "| trace | verdict")
    assert [row[0] for row in failing] == ["`t00`", "`odd\\|id`"]  # the pipe does not split the cell
    assert "<summary>First failing trace in full: t00</summary>" in md


# -- CLI -----------------------------------------------------------------------------------------------------
@pytest.fixture
def db(tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "seqjudge.db"
    with Store(path) as s:
        base = stored_run(s, make_run(8), label="main")
        cand = stored_run(s, make_run(8, bad=[2], chatty=[3]), label="pr")
    return {"path": str(path), "base": base, "cand": cand}


def test_report_ci_writes_every_output(
    db: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = tmp_path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    junit, md = tmp_path / "r.xml", tmp_path / "r.md"
    args = [
        "report-ci",
        "latest",
        "--store",
        db["path"],
        "--junit",
        str(junit),
        "--markdown",
        str(md),
        "--github",
    ]
    assert cli(args) == 1  # a trace failed, one needs review
    out = capsys.readouterr().out.splitlines()
    annotations = [parse_annotation(line) for line in out if line.startswith("::")]
    assert [a[0] for a in annotations] == ["error", "warning", "notice"]
    assert out[-2] == f"seqjudge run {db['cand']}: 8 trace(s): 6 pass, 1 fail, 1 review"
    assert out[-1] == f"wrote JUnit {junit}, markdown {md}"
    assert len(list(parse_junit(junit).iter("testcase"))) == 16
    assert md.read_text() == summary.read_text().rstrip("\n") + "\n"
    assert cli(["report-ci", db["base"], "--store", db["path"], "--format", "json"]) == 0
    assert (
        capsys.readouterr().out.strip()
        == f'{{"run": "{db["base"]}", "traces": 8, "pass": 8, "fail": 0, "review": 0}}'
    )


def test_compare_cli_writes_junit_markdown_and_github(
    db: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    junit, md = tmp_path / "c.xml", tmp_path / "pr-comment.md"
    args = [
        "compare",
        db["base"],
        "latest",
        "--store",
        db["path"],
        "--junit",
        str(junit),
        "--markdown",
        str(md),
    ]
    assert cli([*args, "--github"]) == 1
    out = capsys.readouterr().out
    errors = [parse_annotation(line) for line in out.splitlines() if line.startswith("::error")]
    assert [e[1]["title"] for e in errors] == [
        "seqjudge regression: read-before-update on t02",
        "seqjudge regression: email-limit on t03",
    ]
    root = parse_junit(junit)
    assert root.get("failures") == "3"  # two regressed trace groups and the gate
    text = md.read_text()
    assert text.startswith(MARKER_COMPARE) and "| `t02` | pass → fail |" in text
    # Markdown to stdout.
    assert cli(["compare", db["base"], db["base"], "--store", db["path"], "--markdown", "-"]) == 0
    assert "## ✅ no regression" in capsys.readouterr().out


# -- the documented workflow ---------------------------------------------------------------------------------
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _seqjudge_commands(script: str) -> list[list[str]]:
    """Each `seqjudge ...` command of a shell script, continuation lines joined, split like a shell."""
    from shell_commands import commands, logical_lines

    return [argv for line in logical_lines(script) for argv in commands(line) if argv[0] == "seqjudge"]


def _options_exist(words: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    subcommand = [
        w
        for w in words[1:3]
        if not w.startswith("-")
        and w in ("run", "compare", "runs", "export", "baseline", "save", "report-ci")
    ]
    assert cli([*subcommand, "--help"]) == 0
    usage = capsys.readouterr().out
    for word in words:
        if word.startswith("--"):
            assert word in usage, (
                f"{' '.join(words)}: {word} is not an option of seqjudge {' '.join(subcommand)}"
            )


def test_the_example_workflow_runs_and_compares(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import yaml

    monkeypatch.setenv("COLUMNS", "200")  # help text unwrapped, whatever the terminal

    workflow = yaml.safe_load((EXAMPLES / "github-actions" / "seqjudge.yml").read_text())
    steps = workflow["jobs"]["tool-call-order"]["steps"]
    scripts = [step["run"] for step in steps if "run" in step]
    commands = [c for script in scripts for c in _seqjudge_commands(script)]
    assert [c[1] for c in commands] == ["run", "compare"]
    compare_cmd = commands[1]
    assert compare_cmd[2:4] == ["baselines/main.jsonl", "latest"]
    assert "--github" in compare_cmd and "--junit" in compare_cmd
    junit_path = compare_cmd[compare_cmd.index("--junit") + 1]
    upload = next(step for step in steps if str(step.get("uses", "")).startswith("actions/upload-artifact"))
    assert upload["with"]["path"] == junit_path
    for words in commands:
        _options_exist(words, capsys)
    # The README's commands exist too.
    readme = (EXAMPLES / "README.md").read_text()
    blocks = re.findall(r"```(?:sh|yaml)\n(.*?)```", readme, flags=re.S)
    documented = [
        c
        for block in blocks
        for c in _seqjudge_commands(re.sub(r"^\s*(- run: \|?|run: )", "", block, flags=re.M))
    ]
    assert {c[1] for c in documented} >= {"run", "compare", "runs", "baseline"}
    for words in documented:
        _options_exist(words, capsys)
