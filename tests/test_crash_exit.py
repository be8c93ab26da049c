"""Issue 38: a crash never reads as a verdict. An unexpected exception exits 4 with one paragraph naming a log
file that holds the traceback (secrets removed); a store on a full disk exits 3 with a message, the run left
not completed; a --base-url with a password is refused (exit 2) without echoing it; `compare` fails on a
candidate that did not complete or lacks baseline traces unless --allow-missing; a lone surrogate does not
crash `check --format html`."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import seqjudge
from cli_suite import write_suite
from fakes.server import FakeLLMServer
from seqjudge.cli import run
from seqjudge.cli.app import app
from seqjudge.crashlog import INTERNAL_ERROR
from seqjudge.store import Store

SEQJUDGE = str(Path(sys.executable).with_name("seqjudge"))
SECRET = "sk-live-crashlog-0123456789abcdef"


def line(trace_id: str, first: str = "A", arguments: object = None) -> str:
    then = "B" if first == "A" else "A"
    call = {"tool_name": first, "arguments": arguments or {}}
    return json.dumps({"trace_id": trace_id, "calls": [call, {"tool_name": then}]})


@pytest.fixture
def suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where crash logs go, for this test only
    return write_suite(tmp_path, monkeypatch, [])


@pytest.fixture
def buggy_command() -> Iterator[str]:
    """A command with a bug in it (the CLI's handling of it is what is tested, not the bug)."""

    def explode(url: str) -> None:
        {}["missing " + url]  # noqa: B018 - a KeyError, as a bug raises one

    app.command("explode-for-test")(explode)
    (info,) = [c for c in app.registered_commands if c.callback is explode]
    yield "explode-for-test"
    app.registered_commands.remove(info)  # others may have registered after it (commands import lazily)


def test_an_unexpected_exception_exits_4_with_a_log(
    suite: Path, buggy_command: str, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    code = run([buggy_command, f"https://user:hunter2pass@example.test/{SECRET}"])
    err = capsys.readouterr().err
    assert code == INTERNAL_ERROR == 4
    assert err.startswith("internal error:") and err.count("\n") == 1  # one paragraph
    assert "KeyError" in err and "not a verdict" in err and "Traceback" not in err
    (log,) = suite.glob("seqjudge-crash-*.log")
    assert str(log) in err
    text = log.read_text(encoding="utf-8")
    assert "Traceback (most recent call last)" in text and "KeyError" in text and "explode" in text
    assert SECRET not in text and "hunter2pass" not in text and SECRET not in err
    assert os.stat(log).st_mode & 0o077 == 0  # the owner's only


class _BuggyProvider:
    """A provider plugin with a bug: its call raises what no provider may (not a ProviderError)."""

    name = "buggy"

    def __init__(self, model: str, **options: object) -> None:
        self.model = model

    async def complete(self, request: object) -> object:
        raise KeyError("a bug in a provider plugin")


@pytest.fixture
def buggy_provider() -> Iterator[str]:
    from seqjudge.judge.providers import registry

    registry.register_provider("buggy", _BuggyProvider)
    yield "buggy:model"
    registry._REGISTRY.pop("buggy")


def test_a_run_stopped_by_a_bug_exits_4_and_is_stored_interrupted(
    suite: Path, buggy_provider: str, capsys
) -> None:
    (suite / "t.jsonl").write_text(line("t1") + "\n", encoding="utf-8")
    code = run(["run", "rules.yaml", "t.jsonl", "--store", "s.db", "--model", buggy_provider])
    err = capsys.readouterr().err
    assert code == 4, err
    assert "internal error" in err and "stored as interrupted" in err and "--resume" in err
    with Store(suite / "s.db") as db:
        assert db.run_info(db.resolve_run("latest")).status == "interrupted"


def _limit_file_size() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))


def test_a_store_on_a_full_disk_exits_3_and_the_run_is_not_completed(suite: Path) -> None:
    (suite / "t.jsonl").write_text(line("first") + "\n", encoding="utf-8")
    assert run(["run", "rules.yaml", "t.jsonl", "--store", "s.db"]) == 0
    big = [line(f"t{i}", arguments={"blob": "x" * 3_000}) for i in range(300)]
    (suite / "big.jsonl").write_text("\n".join(big) + "\n", encoding="utf-8")
    # A real write failure: the file-size limit makes the disk "full" for SQLite's files (EFBIG).
    done = subprocess.run(
        [SEQJUDGE, "run", "rules.yaml", "big.jsonl", "--store", "s.db"],
        cwd=suite,
        env={**os.environ, "PYTHONPATH": str(Path(seqjudge.__file__).parents[1])},  # this seqjudge
        capture_output=True,
        text=True,
        preexec_fn=_limit_file_size,
        check=False,
    )
    assert done.returncode == 3, done.stderr
    assert "s.db: the seqjudge store failed" in done.stderr and "Free disk space" in done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    with Store(suite / "s.db") as db:
        assert db.run_info(db.resolve_run("latest")).status != "completed"


@pytest.mark.parametrize("command", ["run", "judge"])
def test_a_base_url_with_a_password_is_refused_without_echoing_it(
    suite: Path, fake_llm: FakeLLMServer, command: str, capsys
) -> None:
    (suite / "t.jsonl").write_text(line("t1") + "\n", encoding="utf-8")
    url = fake_llm.openai_base_url.replace("http://", "http://agent:hunter2pass@")
    code = run([command, "rules.yaml", "t.jsonl", "--model", "openai:gpt-4o", "--base-url", url])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "--base-url" in err and "user name or password" in err
    assert "hunter2pass" not in err and "agent" not in err.split("Give the URL")[0]
    assert fake_llm.requests == []
    for path in suite.rglob("*"):
        if path.is_file():
            assert b"hunter2pass" not in path.read_bytes(), path


def test_compare_fails_on_a_candidate_that_did_not_complete(suite: Path, capsys) -> None:
    traces = [line(f"t{i}") for i in range(4)]
    (suite / "t.jsonl").write_text("\n".join(traces) + "\n", encoding="utf-8")
    assert run(["run", "rules.yaml", "t.jsonl", "--store", "s.db"]) == 0
    assert run(["baseline", "save", "latest", "--name", "main", "--store", "s.db"]) == 0
    # The candidate stops at its third trace (bad input): two traces stored, status stopped.
    deep: object = 1
    for _ in range(200):
        deep = [deep]
    bad = [traces[0], traces[1], line("t2", arguments={"x": deep}), traces[3]]
    (suite / "t.jsonl").write_text("\n".join(bad) + "\n", encoding="utf-8")
    assert run(["run", "rules.yaml", "t.jsonl", "--store", "s.db"]) == 2
    capsys.readouterr()
    assert run(["compare", "main", "latest", "--store", "s.db"]) == 1
    out = capsys.readouterr().out
    assert "is stopped, not completed" in out and "2 baseline trace(s) missing" in out
    assert run(["compare", "main", "latest", "--store", "s.db", "--fail-on-missing"]) == 1  # the default
    assert run(["compare", "main", "latest", "--store", "s.db", "--allow-missing"]) == 0
    capsys.readouterr()
    assert run(["compare", "main", "latest", "--store", "s.db", "--allow-missing", "--fail-on-missing"]) == 2


def test_compare_fails_on_missing_traces_of_a_completed_run(suite: Path, capsys) -> None:
    (suite / "t.jsonl").write_text("\n".join(line(f"t{i}") for i in range(4)) + "\n", encoding="utf-8")
    assert run(["run", "rules.yaml", "t.jsonl", "--store", "s.db"]) == 0
    assert run(["baseline", "save", "latest", "--name", "main", "--store", "s.db"]) == 0
    (suite / "t.jsonl").write_text("\n".join(line(f"t{i}") for i in range(2)) + "\n", encoding="utf-8")
    assert run(["run", "rules.yaml", "t.jsonl", "--store", "s.db"]) == 0
    capsys.readouterr()
    assert run(["compare", "main", "latest", "--store", "s.db"]) == 1
    assert "2 baseline trace(s) missing from the candidate: t2, t3" in capsys.readouterr().out
    assert run(["compare", "main", "latest", "--store", "s.db", "--allow-missing"]) == 0


@pytest.mark.parametrize(
    "record",
    [
        '{"trace_id": "s\\udcff", "calls": [{"tool_name": "B"}, {"tool_name": "A"}]}',
        '{"trace_id": "s1", "calls": [{"tool_name": "B", "arguments": {"k\\udcff": "v\\udcff"}}, '
        '{"tool_name": "A", "output": "\\udcff"}], "messages": [{"role": "user", "content": "\\udcff"}]}',
    ],
    ids=["trace-id", "values"],
)
def test_a_lone_surrogate_does_not_crash_the_html_page(suite: Path, record: str, capsys) -> None:
    (suite / "t.jsonl").write_text(record + "\n", encoding="utf-8")
    assert run(["check", "rules.yaml", "t.jsonl", "--format", "html", "-o", "page.html"]) == 1  # a verdict
    assert "internal error" not in capsys.readouterr().err
    page = (suite / "page.html").read_text(encoding="utf-8")  # valid UTF-8 throughout
    assert "\\\\udcff" in page  # shown as text, escaped once more inside the page's JSON


@pytest.mark.parametrize("lines", [1, 2], ids=["one-line-file", "jsonl"])
@pytest.mark.parametrize("command", ["check", "run", "convert"])
def test_a_trace_with_a_5000_digit_integer_is_bad_input(
    suite: Path, command: str, lines: int, capsys
) -> None:
    # Valid JSON that Python's int-string limit (4,300 digits) will not read: exit 2 naming the line.
    huge = '{"trace_id": "big", "calls": [{"tool_name": "A", "arguments": {"n": 1' + "0" * 5_000 + "}}]}"
    records = [huge] if lines == 1 else [line("first"), huge]
    (suite / "t.jsonl").write_text("\n".join(records) + "\n", encoding="utf-8")
    argv = {
        "check": ["check", "rules.yaml", "t.jsonl"],
        "run": ["run", "rules.yaml", "t.jsonl", "--store", "s.db"],
        "convert": ["convert", "t.jsonl", "-o", "out.jsonl"],
    }[command]
    assert run(argv) == 2
    err = capsys.readouterr().err
    assert f"t.jsonl, line {lines}: a number has more digits than Python reads" in err, err


@pytest.mark.parametrize("fmt", ["text", "jsonl", "json", "junit", "markdown", "sarif"])
def test_a_lone_surrogate_in_a_trace_id_gives_a_verdict_in_every_format(
    suite: Path, fmt: str, capsys
) -> None:
    record = '{"trace_id": "s\\udcff", "calls": [{"tool_name": "B"}, {"tool_name": "A"}]}'
    (suite / "t.jsonl").write_text(record + "\n", encoding="utf-8")
    assert run(["check", "rules.yaml", "t.jsonl", "--format", fmt, "-o", "out"]) == 1  # a verdict, no crash
    assert "internal error" not in capsys.readouterr().err
    text = (suite / "out").read_text(encoding="utf-8")  # valid UTF-8 throughout
    if fmt == "jsonl":
        assert json.loads(text)["trace_id"] == "s\udcff"  # the id as the input wrote it
    elif fmt == "json":
        assert json.loads(text)["reports"][0]["trace_id"] == "s\udcff"
