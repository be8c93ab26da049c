"""Issue 17, points 5, 8 and 14: the first commands a newcomer types work as written.

`seqjudge init` writes a suite that `run` and `check` take with no further arguments; the demo says where
the `seqjudge` command is and shows, as its failing example, a trace a person labelled fail.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from seqjudge.cli import run
from seqjudge.rules.load import load_rules

ROOT = Path(__file__).resolve().parents[1]
STARTER = {"seqjudge.yaml", "rules.yaml", "catalog.json", "traces.jsonl"}
STARTER |= {"rules.schema.json", "seqjudge.schema.json"}  # the editors' schemas the YAML files name
COMMON_TYPES = {"require", "before", "blocklist", "max_calls", "eventually", "never_after", "after"}
COMMON_TYPES |= {"sequence", "lineage", "judge"}


@pytest.fixture(autouse=True)
def no_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key in ("SEQJUDGE_MODEL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "SEQJUDGE_STORE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.chdir(tmp_path)


# -- point 8: seqjudge init ---------------------------------------------------------------------------------
def test_init_then_run_and_check_with_no_arguments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["init"]) == 0
    assert {p.name for p in tmp_path.iterdir()} == STARTER
    assert "Next: `seqjudge run`" in capsys.readouterr().out
    # run: one sample trace passes, the other fails on purpose (exit 1: some trace failed)
    assert run(["run"]) == 1
    out = capsys.readouterr().out
    assert "2 trace(s) decided: 1 pass, 1 fail, 0 review" in out
    assert "judge rules deferred (no model): confirm-before-write;" in out
    assert "`seqjudge runs show r" in out and "--store" not in out  # the default store needs no flag
    # check reads the same suite, and every rule of the starter file does what its comment says
    assert run(["check", "--format", "jsonl"]) == 1
    reports = {r["trace_id"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
    outcomes = {t: {x["rule_id"]: x["outcome"] for x in r["rules"]} for t, r in reports.items()}
    assert reports["cancel-done-right"]["verdict"] == "pass"
    assert reports["refund-without-checks"]["verdict"] == "fail"
    failed = {rule for rule, outcome in outcomes["refund-without-checks"].items() if outcome == "failed"}
    assert failed == {
        "identity-verified",
        "verify-before-write",
        "read-order-before-write",
        "one-email",
        "order-id-from-a-source",  # B-200: neither looked up nor given by the customer
    }
    assert "failed" not in outcomes["cancel-done-right"].values()
    ruleset = load_rules(tmp_path / "rules.yaml")
    assert {r.type for r in ruleset.rules} == COMMON_TYPES  # one rule of each common type
    for rule in ruleset.rules:  # each is exercised by a sample (the judge rule waits for a model)
        seen = {outcomes[t][rule.rule_id] for t in outcomes}
        assert seen & {"passed", "failed"} or (rule.type == "judge" and seen == {"deferred"}), rule.rule_id
    # the catalog covers every tool the rules name: lint's one warning says the judge rule is uncalibrated
    assert run(["lint", "rules.yaml", "--catalog", "catalog.json"]) == 0
    out = capsys.readouterr().out
    assert "0 errors, 1 warning" in out and "have no calibration certificate" in out


def test_init_into_a_new_folder_then_run_and_check_it_from_outside(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["init", "suites/mine"]) == 0
    assert "cd suites/mine && seqjudge run" in capsys.readouterr().out
    assert run(["run", "suites/mine"]) == 1
    out = capsys.readouterr().out
    assert "1 pass, 1 fail" in out
    assert (tmp_path / "suites/mine/.seqjudge/seqjudge.db").is_file()  # the config's store, beside it
    # the commands the summary suggests work as typed from here: they name that store
    shown = re.search(r"`(seqjudge runs show [^`]+)`", out)
    assert shown is not None and shown.group(1).endswith(
        " --store " + str(tmp_path / "suites/mine/.seqjudge/seqjudge.db")
    )
    assert run(shown.group(1).split()[1:]) == 0
    assert not (tmp_path / ".seqjudge").exists()  # and did not make an empty store here
    assert run(["check", "suites/mine"]) == 1
    assert "2 trace(s): 1 pass, 1 fail, 0 review" in capsys.readouterr().out


def test_init_refuses_to_overwrite_unless_forced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "rules.yaml").write_text("mine\n", encoding="utf-8")
    assert run(["init"]) == 2
    err = capsys.readouterr().err
    assert "rules.yaml already exists; nothing was written" in err and "--force" in err
    assert {p.name for p in tmp_path.iterdir()} == {"rules.yaml"}  # not even the other files
    assert (tmp_path / "rules.yaml").read_text(encoding="utf-8") == "mine\n"
    assert run(["init", "--force"]) == 0
    assert {p.name for p in tmp_path.iterdir()} == STARTER
    assert "type: require" in (tmp_path / "rules.yaml").read_text(encoding="utf-8")


def test_run_and_check_without_a_config_say_what_to_do(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["run"]) == 2
    assert "no seqjudge.yaml in this folder" in capsys.readouterr().err
    assert run(["check"]) == 2
    err = capsys.readouterr().err
    assert "no seqjudge.yaml in this folder" in err and "seqjudge init" in err


# -- point 14: the demo's failing example is a real failure -------------------------------------------------
def test_demo_shows_a_trace_a_person_labelled_fail(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert run(["demo", str(ROOT / "golden_traces"), "--store", str(tmp_path / "demo.db")]) == 0
    out = capsys.readouterr().out
    shown = re.findall(r"One trace a person labelled fail, in full:\n\n\s+❌ FAIL: (\S+) · (\S+)", out)
    assert len(shown) == 3, out
    labels = {}
    for suite in ("customer-support", "tau-airline", "tau-retail"):
        for line in (
            (ROOT / "golden_traces" / suite / "labels.jsonl").read_text(encoding="utf-8").splitlines()
        ):
            record = json.loads(line)
            labels[record["trace_id"]] = record
    for trace_id, rule_id in shown:
        assert labels[trace_id]["verdict"] == "fail", trace_id
        assert labels[trace_id].get("rules", {}).get(rule_id, "fail") == "fail", (trace_id, rule_id)


# -- point 5: where the command is ---------------------------------------------------------------------------
def test_demo_ends_by_saying_where_seqjudge_is_and_how_to_type_it(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "seqjudge"
    assert script.is_file()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SEQJUDGE_", "OPENAI_", "ANTHROPIC_"))}
    env["PATH"] = "/usr/bin:/bin"  # as after `make demo`: .venv/bin is not on the shell's PATH
    done = subprocess.run(
        [str(script), "demo", str(ROOT / "golden_traces"), "--store", str(tmp_path / "d.db")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=True,
    )
    last = done.stdout.strip().splitlines()[-2:]
    assert last[0].startswith(f"seqjudge is installed at {script};") and "not on this shell's PATH" in last[0]
    assert f"source {script.parent / 'activate'}" in last[0]
    assert last[1].startswith(f"Next: `{script} init my-suite`")
    env["PATH"] = f"{script.parent}:/usr/bin:/bin"
    done = subprocess.run(
        [str(script), "demo", str(ROOT / "golden_traces" / "tau-retail"), "--store", str(tmp_path / "d.db")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=True,
    )
    assert done.stdout.strip().splitlines()[-2] == f"seqjudge is on your PATH ({script})."


def test_check_in_a_suite_folder_uses_the_configs_threshold_as_run_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["init"]) == 0
    extra = {
        "trace_id": "two-emails",
        "calls": [
            {"tool_name": "find_customer", "arguments": {"email": "cy@example.com"}},
            {"tool_name": "verify_identity", "arguments": {"customer_id": "C-3", "answer": "Oslo"}},
            {"tool_name": "send_email", "arguments": {"customer_id": "C-3", "subject": "Hello"}},
            {"tool_name": "send_email", "arguments": {"customer_id": "C-3", "subject": "Hello again"}},
        ],
    }
    with (tmp_path / "traces.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps(extra) + "\n")
    config = tmp_path / "seqjudge.yaml"
    config.write_text(config.read_text(encoding="utf-8").replace("threshold: 0.85", "threshold: 0.7"))
    capsys.readouterr()
    # 3 of 4 checked rules pass (one-email, a warning, fails): 0.75, review at 0.85 but a pass at 0.7
    assert run(["check", "--format", "jsonl"]) == 1
    verdicts = {r["trace_id"]: r["verdict"] for r in map(json.loads, capsys.readouterr().out.splitlines())}
    assert verdicts["two-emails"] == "pass"
    assert run(["run", "--format", "json"]) == 1
    assert json.loads(capsys.readouterr().out)["pass"] == 2  # run agrees
    assert run(["check", "--format", "jsonl", "--threshold", "0.85"]) == 1  # a flag still wins
    flagged = {r["trace_id"]: r["verdict"] for r in map(json.loads, capsys.readouterr().out.splitlines())}
    assert flagged["two-emails"] == "review"
