"""Issue 17, point 7: the README's commands work as written, and so do the reference pages' (issue 37, 11).

Every fenced shell block of README.md, then of each page of docs/ in PAGES' order, is run line by line, in
order (as bash would, see shell_commands); a line a page repeats word for word from one before it is run
once. They run in a folder that holds
what the commands name (the repository's golden suites, and `rules.yaml`, `traces.jsonl`, `tools.json`,
`seqjudge.yaml`, ... made from them and from the README's own examples). Lines that need a model, or data
from outside the repository, or run other programs (make, pip) are skipped, each with its reason; every
other line must end with exit 0 or 1 (1: some trace failed, as the README says) and print no error. The
README's Python blocks that need no external service are executed too, the pytest snippet under pytest.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from seqjudge.starter import RULES as STARTER_RULES
from seqjudge.starter import TRACES as STARTER_TRACES
from shell_commands import BIN, Outcome, clean_env, fenced_blocks, logical_lines, run_line

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
# The reference pages the README links to, in the order their commands build on each other (a run before
# its review items, a baseline before a comparison). tests/test_readme.py::test_every_page_is_run holds it.
PAGES = (
    "check",
    "traces",
    "rules",
    "judge",
    "run",
    "calibration",
    "ci",
    "rates",
    "spark",
    "editors",
    "guard",
)
DOCS = {name: (ROOT / "docs" / f"{name}.md").read_text(encoding="utf-8") for name in PAGES}
SKIP_REASONS = {
    "no seqjudge command",
    "asks the LLM judge",
    "uses a provider's batch API",
    "calibrates the judge's own scores",
    "reads data outside the repository",
    "sets the environment",
}
SEED_JARGON = re.compile(r"\bseed[- ]?\d{3}\b", re.IGNORECASE)


def block_after(marker: str, language: str) -> str:
    """The first fenced ``language`` block after ``marker`` in the README."""
    start = README.index(marker)
    return fenced_blocks(README[start:], (language,))[0]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Outcome]]:
    work = tmp_path_factory.mktemp("readme")
    shutil.copytree(ROOT / "golden_traces", work / "golden_traces")
    retail = work / "golden_traces" / "tau-retail"
    shutil.copy(retail / "rules.yaml", work / "rules.yaml")
    shutil.copy(retail / "catalog.json", work / "tools.json")
    # traces.jsonl: the README's own example trace (t1, which `prompt --trace-id t1` names) and the suite's
    example = json.loads(block_after("## Traces", "json"))
    traces = json.dumps(example) + "\n" + (retail / "traces.jsonl").read_text(encoding="utf-8")
    (work / "traces.jsonl").write_text(traces, encoding="utf-8")
    (work / "big.jsonl").write_text(traces, encoding="utf-8")
    (work / "traces").mkdir()
    # traces/: t1 in its own JSON file (for `traces/*.json`) beside the suite's traces; more.jsonl: suite
    suite_traces = (retail / "traces.jsonl").read_text(encoding="utf-8")
    (work / "traces" / "traces.jsonl").write_text(suite_traces, encoding="utf-8")
    (work / "traces" / "t1.json").write_text(json.dumps(example), encoding="utf-8")
    (work / "more.jsonl").write_text(suite_traces, encoding="utf-8")
    (work / "old_eval.yaml").write_text("sequences:\n  - [get_order_details, cancel_pending_order]\n")
    # seqjudge.yaml: the README's config example without its `model:` line (there is no key here, and a
    # model asked for without its key is exit 2: these lines run the engine only, as with `model:` omitted)
    config = re.sub(r"(?m)^model:.*\n", "", block_after("A project config keeps", "yaml"))
    assert "model:" not in config
    (work / "seqjudge.yaml").write_text(config, encoding="utf-8")
    labels = (retail / "labels.jsonl").read_text(encoding="utf-8").splitlines()
    scores = [
        {"trace_id": rec["trace_id"], "score": 0.2 if rec["verdict"] == "fail" else 0.9}
        for rec in map(json.loads, labels)
    ]
    (work / "scores.jsonl").write_text("".join(json.dumps(s) + "\n" for s in scores), encoding="utf-8")
    (work / ".venv" / "bin").mkdir(parents=True)
    (work / ".venv" / "bin" / "seqjudge").symlink_to(BIN / "seqjudge")
    results = []
    seen: set[str] = set()
    for page in (README, *DOCS.values()):
        for block in fenced_blocks(page, ("sh",)):
            for line in logical_lines(block):
                if line not in seen:
                    seen.add(line)
                    results.append(run_line(line, work))
    return work, results


def test_every_page_is_run() -> None:
    """Every page of docs/ is in PAGES (a new page's commands are run too), and the README links to each."""
    assert sorted(p.stem for p in (ROOT / "docs").glob("*.md") if p.stem in PAGES) == sorted(PAGES)
    unrun = [p.name for p in (ROOT / "docs").glob("*.md") if p.stem not in PAGES and "```sh" in p.read_text()]
    assert unrun == [], f"pages with shell blocks that tests/test_readme.py does not run: {unrun}"
    for name in PAGES:
        assert f"(docs/{name}.md)" in README, name
    assert "(benchmarks/README.md)" in README


def test_every_runnable_readme_command_works(outcomes: tuple[Path, list[Outcome]]) -> None:
    _, results = outcomes
    ran = [r for r in results if r.code is not None]
    for r in ran:
        assert r.code in (0, 1) and "error:" not in r.err and "Traceback" not in r.err, (r.line, r.err)
    skipped = {r.why for r in results if r.code is None}
    assert skipped <= SKIP_REASONS | {f"runs {w}" for w in ("make", "pip", "python", "source")}, skipped
    # The README's commands that need no model: every `check`, `lint`, `migrate`, `prompt`, `run`,
    # `runs`, `review`, `golden`, `calibrate --scores`, `baseline`, `compare`, `report`, `init` line.
    assert len(ran) >= 25, [r.line for r in ran]
    names = {r.line.split()[1] for r in ran if r.line.startswith("seqjudge ")}
    assert names >= {"check", "lint", "migrate", "prompt", "run", "runs", "review", "golden", "calibrate"}
    assert names >= {"compare", "report", "init"}
    # nothing a user reads says "seed 000"
    for r in ran:
        assert not SEED_JARGON.search(r.out + r.err), r.line


def test_the_ci_recipe_saves_its_baseline(outcomes: tuple[Path, list[Outcome]]) -> None:
    work, results = outcomes
    (recipe,) = [r for r in results if "baseline save" in r.line]
    assert "--label main" in recipe.line and recipe.code == 0
    listed = run_line("seqjudge baseline list", work)
    assert listed.code == 0 and re.search(r"\bmain\b", listed.out), listed.out + listed.err
    (compare,) = [r for r in results if r.line.startswith("seqjudge compare main latest")]
    assert compare.code == 0 and (work / "seqjudge.xml").is_file() and (work / "comment.md").is_file()
    assert (work / "report.html").is_file()


def test_the_old_ci_recipe_would_not_have_saved(outcomes: tuple[Path, list[Outcome]]) -> None:
    # The form the README used to print: `run` exits 1 on any failing trace, so `&&` never saves.
    work, _ = outcomes
    old = "seqjudge run seqjudge.yaml --label old && seqjudge baseline save latest --name old"
    done = run_line(old, work)
    assert done.code == 1
    listed = run_line("seqjudge baseline list", work)
    assert listed.code == 0 and not re.search(r"\bold\b", listed.out)


def test_the_python_examples_run(outcomes: tuple[Path, list[Outcome]]) -> None:
    work, _ = outcomes
    (library,) = [b for b in fenced_blocks(README, ("python",)) if "load_traces" in b]
    done = subprocess.run(
        [sys.executable, "-c", library], cwd=work, env=clean_env(), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].split()[0] in ("pass", "fail", "review")


def test_the_pytest_snippet_imports_what_it_uses(tmp_path: Path) -> None:
    (snippet,) = [b for b in fenced_blocks(README, ("python",)) if "seqjudge.testing" in b]
    tree = ast.parse(snippet)
    imported = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert {"pytest", "assert_sequence"} <= imported
    # Executed as the user would: their fixture in conftest.py, the snippet as a test module.
    (tmp_path / "rules.yaml").write_text(STARTER_RULES, encoding="utf-8")
    trace = json.dumps(STARTER_TRACES[0])
    (tmp_path / "conftest.py").write_text(
        f"import json\nimport pytest\n\n@pytest.fixture\ndef my_agent_trace():\n"
        f"    return json.loads({trace!r})\n",
        encoding="utf-8",
    )
    (tmp_path / "test_snippet.py").write_text(snippet, encoding="utf-8")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            "test_snippet.py",
        ],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and "2 passed" in done.stdout, done.stdout + done.stderr


def _strings_people_read(path: Path) -> list[tuple[int, str]]:
    """String constants of a module that are not docstrings (messages, help, output), with their lines."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_no_seed_jargon_in_what_users_read() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted((ROOT / "src").rglob("*.py"))
        for line, text in _strings_people_read(path)
        if SEED_JARGON.search(text)
    ]
    docs = ["README.md", "examples/README.md", "prompts/examples/default.yaml", "benchmarks/README.md"]
    for doc in docs + [f"docs/{name}.md" for name in PAGES]:
        text = (ROOT / doc).read_text(encoding="utf-8")
        found += [f"{doc}: {m.group(0)}" for m in SEED_JARGON.finditer(text)]
    assert found == []
