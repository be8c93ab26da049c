"""`seqjudge check`'s worker chunks as the main process handles them: the file past its first records read in
blocks of whole lines (not a line at a time), each chunk's results coming back as one batch (ids, lines,
the parts joined in shared memory for the writers that only write them), and everything the single-process
path says kept: bytes in every format, --failures-only, line numbers across blank lines, duplicate ids
inside one chunk, record counts."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

import seqjudge.checkpool as checkpool
from seqjudge.checkpool import Checks
from seqjudge.cli import run
from seqjudge.ingest import files
from seqjudge.ingest.base import Source
from seqjudge.outputs.registry import names

RULES = {
    "rules": [
        {"id": "auth_first", "type": "before", "first": "auth", "then": "cancel_order", "same": ["order_id"]},
        {"id": "few", "type": "max_calls", "tool": "get_order", "max": 1, "severity": "warning"},
        {"id": "order", "type": "sequence", "tools": ["auth", "get_order", "cancel_order"]},
    ]
}


def record(n: int) -> dict[str, Any]:
    calls: list[dict[str, Any]] = [{"tool_name": "auth"}] if n % 4 else []
    calls += [{"tool_name": "get_order", "arguments": {"order_id": n % 3}}] * (1 + n % 2)
    calls.append({"tool_name": "cancel_order", "arguments": {"order_id": n % 5}})
    if n % 3 == 0:  # a trace that passes
        calls = [
            {"tool_name": tool, "arguments": {"order_id": 1}}
            for tool in ["auth", "get_order", "cancel_order"]
        ]
    trace: dict[str, Any] = {"calls": calls}
    if n % 7:  # the rest are named by their file and line: blank lines must not shift them
        trace["trace_id"] = f"t{n}"
    return trace


def write(path: Path, lines: list[str], *, last_newline: bool = True) -> Path:
    path.write_text("\n".join(lines) + ("\n" if last_newline else ""), encoding="utf-8")
    return path


def with_blanks(n: int) -> list[str]:
    lines: list[str] = []
    for k in range(n):
        lines.append(json.dumps(record(k)))
        if k % 9 == 4:
            lines += ["", "   "]  # blank lines: skipped, but counted in every later line number
    return lines


def check(rules: Path, traces: Path, fmt: str, *extra: str) -> tuple[int, bytes]:
    """The exit code and what `check` streamed to stdout: a file (-o) is renamed into place only when the
    check got to the end, and the reports written before a bad record are what these tests compare."""
    import contextlib
    import io

    buffer = io.BytesIO()
    stdout = io.TextIOWrapper(buffer, encoding="utf-8", newline="")
    with contextlib.redirect_stdout(stdout):
        code = run(["check", str(rules), str(traces), "--format", fmt, *extra])
    stdout.flush()
    return code, buffer.getvalue()


@pytest.fixture
def rules(tmp_path: Path) -> Path:
    path = tmp_path / "rules.json"
    path.write_text(json.dumps(RULES), encoding="utf-8")
    return path


def pooled(monkeypatch: pytest.MonkeyPatch, chunk: int = 400) -> None:
    """Workers on any machine after 3 records checked inline, chunks of ``chunk`` bytes."""
    monkeypatch.setattr(checkpool, "worker_count", lambda: 2)
    monkeypatch.setattr(checkpool, "INLINE", 3)
    monkeypatch.setattr(checkpool, "CHUNK", chunk)


@pytest.mark.parametrize("slot", [checkpool.SLOT, 300])  # output in shared memory / too large: the pipe
@pytest.mark.parametrize("fmt", names("check"))
def test_every_format_with_and_without_failures_only_as_in_one_process(
    tmp_path: Path, rules: Path, monkeypatch: pytest.MonkeyPatch, fmt: str, slot: int
) -> None:
    traces = write(tmp_path / "traces.jsonl", with_blanks(60), last_newline=False)
    results = {}
    for extra in [(), ("--failures-only",)]:
        with monkeypatch.context() as m:
            m.setattr(checkpool, "worker_count", lambda: 0)
            alone = check(rules, traces, fmt, *extra)
        with monkeypatch.context() as m:
            pooled(m)
            m.setattr(checkpool, "SLOT", slot)
            results[extra] = check(rules, traces, fmt, *extra)
        assert results[extra] == alone
    if fmt not in ("sarif", "html"):  # (these show failures only anyway) the flag left passing traces out
        assert results[()][1] != results[("--failures-only",)][1]


def test_the_main_process_reads_the_rest_of_the_file_in_blocks_not_records(
    tmp_path: Path, rules: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    traces = write(tmp_path / "traces.jsonl", with_blanks(80))
    made: list[int] = []
    following = files.following

    def spy(source: Source, lines: Any, line: int) -> Any:
        made.append(line)
        return following(source, lines, line)

    with monkeypatch.context() as m:
        m.setattr(checkpool, "worker_count", lambda: 0)
        alone = check(rules, traces, "jsonl", "-v")
        err_alone = capsys.readouterr().err
    pooled(monkeypatch)
    monkeypatch.setattr(files, "following", spy)  # this process's calls (a forked worker's are not seen)
    assert check(rules, traces, "jsonl", "-v") == alone
    err = capsys.readouterr().err
    # The file's reader splits lines after its first two records; nothing else here does.
    assert made == [2]
    read = "read 80 record(s) from 1 file(s) (native): 80 trace(s)"
    assert read in err and read in err_alone


def test_a_duplicate_id_inside_one_chunk_ends_as_in_one_process(
    tmp_path: Path, rules: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = with_blanks(40)
    at = lines.index(json.dumps(record(30)))
    lines.insert(at + 2, json.dumps({"trace_id": "t29", "calls": []}))  # t29 again, two lines on
    traces = write(tmp_path / "traces.jsonl", lines)
    with monkeypatch.context() as m:
        m.setattr(checkpool, "worker_count", lambda: 0)
        alone = check(rules, traces, "jsonl"), capsys.readouterr().err
    for fmt in ["jsonl", "json", "text", "junit"]:
        pooled(monkeypatch, chunk=10_000)  # the whole file past the first records in one chunk
        result = check(rules, traces, fmt), capsys.readouterr().err
        with monkeypatch.context() as m:
            m.setattr(checkpool, "worker_count", lambda: 0)
            assert result == (check(rules, traces, fmt), capsys.readouterr().err)
    code, out = alone[0]
    assert code == 2 and out.count(b"\n") == 32  # t0..t31 written, the duplicate and nothing after it
    assert f"duplicate trace id 't29': it was already used at {traces}, line " in alone[1]
    assert f"{traces}, line {at + 3}:" in alone[1]


def test_blocks_hold_the_lines_a_line_by_line_reading_yields() -> None:
    rng = random.Random(3)
    for _ in range(40):
        lines = [
            rng.choice([b"", b"  ", b"\t", b"{}", b'{"a": 1}', b"x" * rng.randint(1, 300)])
            for _ in range(rng.randint(3, 40))
        ]
        lines[0] = lines[1] = b'{"calls": []}'  # JSONL from the first two lines
        data = b"\n".join(lines) + rng.choice([b"", b"\n"])
        size = rng.randint(1, 120)
        source = Source("f.jsonl", "f.jsonl")
        whole = [(r.line, r.raw) for r in files._split(_Stream(data), source, force_jsonl=True)]
        stream = _Stream(data)
        reader = files.Reader(source, Path("f.jsonl"))
        reader._stream = stream  # the file, in memory
        records = files._split(stream, source, force_jsonl=True, reader=reader)
        head = [next(records) for _ in range(2)]
        blocks = reader.blocks(head[-1].line or 0, size)
        assert blocks is not None
        got = [(r.line, r.raw) for r in head]
        for after, block in blocks:
            assert block.endswith(b"\n") or not stream.read(1)  # whole lines, but for the file's last
            got += [(r.line, r.raw) for r in files.following(source, iter(block.splitlines(True)), after)]
        assert got == whole


class _Stream:
    """An in-memory file read as a BufferedReader is: by lines, and by size."""

    def __init__(self, data: bytes) -> None:
        import io

        self._io = io.BufferedReader(io.BytesIO(data))  # type: ignore[arg-type]

    def __iter__(self) -> Any:
        return iter(self._io)

    def read(self, size: int = -1) -> bytes:
        return self._io.read(size)

    def readline(self, size: int = -1) -> bytes:
        return self._io.readline(size)


def test_a_chunk_cut_before_a_repeated_id_keeps_the_output_of_the_traces_before_it() -> None:
    from array import array
    from itertools import accumulate

    parts = [b"a\n", b"", b"ccc\n", b"dd\n"]  # the second left out (--failures-only)
    joined = Checks(
        ["fail", "pass", "review", "fail"],
        None,
        b"".join(parts),
        array("Q", accumulate(map(len, parts))).tobytes(),
    )
    assert bytes(joined.first(3).joined) == b"a\nccc\n" and joined.first(3).verdicts == [
        "fail",
        "pass",
        "review",
    ]
    assert bytes(joined.first(0).joined) == b""
    each = Checks(["fail", "pass"], [b"a\n", b"b\n"], b"", b"")
    assert each.first(1).parts == [b"a\n"]


def test_bytes_to_a_text_stream_without_a_buffer_may_end_inside_a_character() -> None:
    """A writer may hand its bytes over in any blocks (a joined chunk, a file copied 1 MB at a time)."""
    import io

    from seqjudge.outputs.streams import byte_writer

    out = io.StringIO()
    write = byte_writer(out)
    data = "naïve ✓\n".encode()
    for cut in [data[:3], memoryview(data)[3:9], data[9:]]:  # inside "ï", then inside "✓"
        write(cut)
    assert out.getvalue() == "naïve ✓\n"
