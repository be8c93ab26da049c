"""Finding trace files and reading them as records: one JSON value a line (JSONL), one whole document, or
JSON values written one after another (OpenTelemetry's ConsoleSpanExporter, ``jq`` without ``-c``).

A file whose first line is a complete JSON value and which has more lines (or ends in .jsonl) is JSONL and is
read one line at a time, so memory stays flat however long it is; otherwise it is one document, read whole.
A document that turns out to hold several JSON values one after another becomes one record per value, each
named by the line it starts on.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from seqjudge.errors import InputError
from seqjudge.ingest.base import Record, Source

TRACE_SUFFIXES = (".json", ".jsonl")


def sources(path: str | Path) -> list[tuple[Source, Path | None]]:
    if str(path) == "-":
        return [(Source(name="<stdin>", label="<stdin>"), None)]
    root = Path(path)
    if root.is_dir():
        files = sorted(
            (p for p in root.rglob("*") if p.suffix in TRACE_SUFFIXES and p.is_file()),
            key=lambda p: p.relative_to(root).as_posix(),
        )
        if not files:
            raise InputError(
                "the directory holds no .json or .jsonl files",
                source=str(path),
                hint="Point at a trace file, or a directory of trace files",
            )
        return [(Source(name=str(p), label=p.relative_to(root).as_posix()), p) for p in files]
    if not root.exists():
        raise InputError(
            "no such file or directory",
            source=str(path),
            hint="Check the path (use - to read traces from stdin)",
        )
    return [(Source(name=str(path), label=root.name), root)]


def _open(source: Source, file: Path | None) -> IO[bytes]:
    if file is None:
        buffer = getattr(sys.stdin, "buffer", None)
        if buffer is not None:
            return buffer  # type: ignore[no-any-return]
        return _TextAsBytes(sys.stdin)  # type: ignore[return-value]
    try:
        return file.open("rb")
    except OSError as exc:
        raise InputError(
            f"cannot read the file ({exc.strerror or exc})",
            source=source.name,
            hint="Check that the path exists and is readable",
        ) from None


class _TextAsBytes:
    """A text stream (as tests substitute for stdin) read as UTF-8 byte lines."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream

    def __iter__(self) -> Iterator[bytes]:
        for line in self.stream:
            yield line.encode("utf-8")

    def read(self) -> bytes:
        return self.stream.read().encode("utf-8")

    def close(self) -> None:
        pass


def records(source: Source, file: Path | None) -> Iterator[Record]:
    stream = _open(source, file)
    try:
        yield from _split(stream, source, force_jsonl=file is not None and file.suffix == ".jsonl")
    except OSError as exc:
        raise InputError(f"reading failed ({exc})", source=source.name) from None
    finally:
        if file is not None:
            stream.close()


def _split(stream: IO[bytes], source: Source, *, force_jsonl: bool) -> Iterator[Record]:
    """JSONL (one record a line) or one whole document, decided by the first non-blank line."""
    lines = iter(stream)
    head: list[bytes] = []
    lineno = 0
    first: bytes | None = None
    for raw in lines:
        lineno += 1
        head.append(raw)
        if not raw.isspace():  # no copy of the line, unlike strip(); iteration yields no empty line
            first = raw
            break
    if first is None:
        return
    first_line = lineno
    # Look for a second line before parsing anything: a one-line file is one document, validated once
    # from its bytes later (parsing it here too would double the cost of a large trace).
    second: bytes | None = None
    between: list[bytes] = []
    for raw in lines:
        lineno += 1
        if not raw.isspace():  # no copy of the line, unlike strip(); iteration yields no empty line
            second = raw
            break
        between.append(raw)
    if second is None and not force_jsonl:
        yield Record(source, None, b"".join(head) + b"".join(between))
        return
    try:
        first_value: Any = json.loads(first)
        complete = True
    except ValueError:
        complete = False
    if not complete and not force_jsonl:
        assert second is not None
        rest = stream.read()
        yield Record(source, None, b"".join(head) + b"".join(between) + second + rest)
        return
    record = Record(source, first_line, first)
    if complete:
        record.set_value(first_value)
    yield record
    if second is None:
        return
    yield Record(source, lineno, second)
    for raw in lines:
        lineno += 1
        if not raw.isspace():  # no copy of the line, unlike strip(); iteration yields no empty line
            yield Record(source, lineno, raw)


def document_records(record: Record) -> list[Record]:
    """A whole-document record as the JSON values it holds: itself, or one record per value when several
    values follow one another. A document that is not JSON at all raises the decoder's located error."""
    try:
        record.value()
    except InputError:
        parts = _concatenated(record)
        if parts is None:
            raise
        return parts
    return [record]


def _concatenated(record: Record) -> list[Record] | None:
    """Split ``{...}\\n{...}`` into records; None when the text is not such a sequence (or is one value)."""
    try:
        text = record.raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    decoder = json.JSONDecoder()
    parts: list[Record] = []
    position, line = 0, 1
    end = len(text)
    while True:
        start = position
        while position < end and text[position] in " \t\r\n":
            position += 1
        line += text.count("\n", start, position)
        if position == end:
            break
        try:
            value: Any
            value, stop = decoder.raw_decode(text, position)
        except json.JSONDecodeError as exc:
            if parts and not text[exc.pos :].strip():
                # A later value cut off at the end: the whole-document error would say "Extra data" at
                # the value's start; say what happened, at the line the cut record starts on.
                raise InputError(
                    f"bad JSON: the record that starts here is cut off ({exc.msg} at the end of the file)",
                    source=record.source.name,
                    where=f"line {line + (record.line or 1) - 1}",
                    hint="The file looks truncated (it ends in the middle of a JSON value); re-export or "
                    "re-copy it",
                ) from None
            return None
        part = Record(record.source, line, text[position:stop].encode("utf-8"))
        part.set_value(value)
        parts.append(part)
        line += text.count("\n", position, stop)
        position = stop
    return parts if len(parts) > 1 else None
