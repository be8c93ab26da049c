"""Issue 38.2: an output file is written atomically only when it is a regular file (or a new one); devices,
pipes and symbolic links are written through; an output that is one of the inputs is refused."""

from __future__ import annotations

import errno
import os
import stat
import threading
from pathlib import Path

import pytest

from seqjudge.cli import run

TRACE = '{"trace_id":"t1","calls":[{"tool_name":"a"}]}\n'
RULES = "rules:\n  - id: r\n    type: require\n    tool: a\n"


@pytest.fixture
def suite(tmp_path: Path) -> tuple[Path, Path]:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES, encoding="utf-8")
    traces = tmp_path / "traces.jsonl"
    traces.write_text(TRACE, encoding="utf-8")
    return rules, traces


def test_check_refuses_to_write_over_its_own_input(
    suite: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    rules, traces = suite
    assert run(["check", str(rules), str(traces), "-o", str(traces)]) == 2
    err = capsys.readouterr().err
    assert "the output is also an input" in err and "--output" in err and "Traceback" not in err
    assert traces.read_text(encoding="utf-8") == TRACE  # not truncated
    assert run(["check", str(rules), str(traces), "-o", str(rules)]) == 2
    assert rules.read_text(encoding="utf-8") == RULES


def test_an_output_that_links_to_an_input_or_lies_in_an_input_folder_is_refused(
    suite: tuple[Path, Path], tmp_path: Path
) -> None:
    rules, traces = suite
    link = tmp_path / "link.jsonl"
    link.symlink_to(traces)
    assert run(["convert", str(traces), "-o", str(link)]) == 2
    assert traces.read_text(encoding="utf-8") == TRACE
    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "a.jsonl").write_text(TRACE, encoding="utf-8")
    assert run(["convert", str(folder), "-o", str(folder / "out.jsonl")]) == 2
    assert not (folder / "out.jsonl").exists()


def test_convert_writes_through_a_symlink_and_keeps_it(suite: tuple[Path, Path], tmp_path: Path) -> None:
    _, traces = suite
    target = tmp_path / "target.jsonl"
    target.write_text("old\n", encoding="utf-8")
    link = tmp_path / "out.jsonl"
    link.symlink_to(target)
    assert run(["convert", str(traces), "-o", str(link)]) == 0
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text(encoding="utf-8") == TRACE


def test_convert_writes_through_a_named_pipe_and_leaves_it_a_pipe(
    suite: tuple[Path, Path], tmp_path: Path
) -> None:
    # As a device (/dev/null) is: renamed over, the machine's /dev/null became a regular file.
    _, traces = suite
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    read: list[bytes] = []
    reader = threading.Thread(target=lambda: read.append(pipe.read_bytes()))
    reader.start()
    code = run(["convert", str(traces), "-o", str(pipe)])
    if reader.is_alive():  # nothing may have opened the pipe to write: open it so the reader ends
        # Without blocking: the reader may end between the check and this open, and a blocking open of a
        # FIFO with no reader waits forever (seen once in a fresh clone's `make test`).
        try:
            os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))
        except OSError as exc:  # ENXIO: no reader any more, which is what we wanted
            if exc.errno != errno.ENXIO:
                raise
    reader.join(10)
    assert code == 0
    assert stat.S_ISFIFO(os.lstat(pipe).st_mode)
    assert read == [TRACE.encode()]


def test_check_output_is_replaced_only_when_the_check_got_to_the_end(
    suite: tuple[Path, Path], tmp_path: Path
) -> None:
    rules, traces = suite
    out = tmp_path / "report.txt"
    out.write_text("the last report\n", encoding="utf-8")
    out.chmod(0o640)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n", encoding="utf-8")
    assert run(["check", str(rules), str(bad), "-o", str(out)]) == 2
    assert out.read_text(encoding="utf-8") == "the last report\n"
    assert run(["check", str(rules), str(traces), "-o", str(out)]) == 0
    assert "PASS" in out.read_text(encoding="utf-8")
    assert stat.S_IMODE(out.stat().st_mode) == 0o640  # the file's mode is kept
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".part")] == []
