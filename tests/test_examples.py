"""Issue 17, point 5: the GitHub Actions example installs seqjudge from where it exists, and its `seqjudge`
commands are ones the CLI accepts, run as the workflow runs them (bash -e) on a bundled suite."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

from shell_commands import clean_env, commands, fenced_blocks, logical_lines, needs_a_model, run_line

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / "examples" / "github-actions" / "seqjudge.yml"
EXAMPLES_README = (ROOT / "examples" / "README.md").read_text(encoding="utf-8")


def steps() -> list[dict[str, str]]:
    doc = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    (job,) = doc["jobs"].values()
    return list(job["steps"])


def test_install_step_installs_from_git_not_from_an_index() -> None:
    (install,) = [s for s in steps() if s.get("name") == "Install seqjudge"]
    argv = shlex.split(install["run"])
    assert argv[:4] == ["python", "-m", "pip", "install"] and len(argv) == 5
    requirement = Requirement(argv[4])  # what pip parses: a direct reference, not a version range
    assert requirement.name == "seqjudge" and not requirement.specifier
    assert requirement.url is not None and requirement.url.startswith("git+https://")
    assert re.search(r"@v\d+\.\d+\.\d+$", requirement.url)  # pinned to a tag
    # The README's installation section shows the same forms.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f'pip install "{argv[4]}"' in readme and "pip install /path/to/seqjudge" in readme


def _actions_expressions(script: str) -> str:
    """`${{ github.sha }}` and the like, replaced by sample values as Actions would before bash runs."""
    return re.sub(r"\$\{\{[^}]*\}\}", "42", script)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A user's repository: a seqjudge.yaml over a bundled suite and a baseline exported as the examples'
    README says (its own commands)."""
    suite = tmp_path / "suite"
    shutil.copytree(ROOT / "golden_traces" / "tau-retail", suite)
    (tmp_path / "seqjudge.yaml").write_text(
        "rules: suite/rules.yaml\ntraces: suite/traces.jsonl\ncatalog: suite/catalog.json\n", encoding="utf-8"
    )
    block = next(b for b in fenced_blocks(EXAMPLES_README, ("sh",)) if "runs export" in b)
    env = clean_env(SEQJUDGE_STORE=".seqjudge/seqjudge.db")
    ran = [run_line(line, tmp_path, env, in_process=False) for line in logical_lines(block)]
    assert [r.code for r in ran if r.code is not None] == [0, 0], [(r.line, r.err) for r in ran]
    assert (tmp_path / "baselines" / "main.jsonl").is_file()
    return tmp_path


def test_the_workflow_commands_run_on_a_bundled_suite(repo: Path) -> None:
    summary = repo / "summary.md"
    env = clean_env(SEQJUDGE_STORE=".seqjudge/seqjudge.db", GITHUB_STEP_SUMMARY=str(summary))
    ran = 0
    for step in steps():
        script = step.get("run", "")
        ours = [a for line in logical_lines(script) for a in commands(line) if a[0] == "seqjudge"]
        if not ours:
            continue
        assert not any(needs_a_model(argv) for argv in ours), ours
        # Actions runs a `run:` script as `bash -e {0}`: every line, stopping at the first failure.
        done = subprocess.run(
            ["bash", "-e", "-c", _actions_expressions(script)],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, (step["name"], done.stdout, done.stderr)
        ran += 1
    assert ran == 2  # `run` (its exit 1 let through) and `compare` (no regression: same traces)
    junit = (repo / "reports" / "seqjudge-junit.xml").read_text(encoding="utf-8")
    assert junit.startswith("<?xml") and "<testsuite" in junit
    assert (
        (repo / "reports" / "seqjudge-comment.md")
        .read_text(encoding="utf-8")
        .startswith("<!-- seqjudge:compare -->")
    )
    assert summary.is_file()
    assert "pr-42-42" in [r["label"] for r in _runs(repo)]


def _runs(repo: Path) -> list[dict[str, object]]:
    done = run_line(
        "seqjudge runs list --format json", repo, clean_env(SEQJUDGE_STORE=".seqjudge/seqjudge.db")
    )
    assert done.code == 0, done.err
    runs: list[dict[str, object]] = json.loads(done.out)
    return runs
