"""Finding trace files and reading them as records: one JSON value a line (JSONL), one whole document, or
JSON values written one after another (OpenTelemetry's ConsoleSpanExporter, ``jq`` without ``-c``).

A file whose first line is a complete JSON value and which has more lines (or ends in .jsonl) is JSONL and is
read one line at a time, so memory stays flat however long it is; otherwise it is one document, read whole.
A document that turns out to hold several JSON values one after another becomes one record per value, each
named by the line it starts on.

No record is read whole past ``sizes.RECORD_BYTES``: lines are read at most that many bytes at a time, and a
line (or a document) that goes on past it stops the read with exit 2 naming the file, the line and the
limit. A gigabyte without a newline costs the limit in memory, not the gigabyte.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from seqjudge.errors import InputError
from seqjudge.ingest.base import Record, Source
from seqjudge.safetext import listing
from seqjudge.schema import SCHEMA_FILES
from seqjudge.sizes import RECORD_BYTES

TRACE_SUFFIXES = (".json", ".jsonl")

# Files a suite folder holds beside its traces (`golden_traces/NAME/`, a project root): skipped with a note
# naming them, so that `seqjudge check rules.yaml suite/` or `suite/*` reads the traces alone. Any other
# file with a trace suffix is read as traces and fails closed when it is not one.
KNOWN_FILES = {
    "rules.yaml": "rule file",
    "rules.yml": "rule file",
    "rules.json": "rule file",
    "catalog.json": "tool catalog",
    "catalog.yaml": "tool catalog",
    "catalog.yml": "tool catalog",
    "labels.jsonl": "golden labels",
    "labels.json": "golden labels",
    "seqjudge.yaml": "project config",
    "seqjudge.yml": "project config",
    "examples.yaml": "judge examples",
    "scores.jsonl": "calibration scores",
    "calibration.json": "calibration results",
    **{name: "editor schema" for name in SCHEMA_FILES.values()},  # what `seqjudge init` writes beside
}
_NAMED = 8  # skipped files of each kind named in the note; the rest are counted
_OTHER = "other"


def _listing(names: list[str]) -> str:
    return listing(names, _NAMED)


@dataclass
class Inputs:
    """The trace files of one or more paths, and the files passed over (path, what it is)."""

    given: list[str]
    files: list[tuple[Source, Path | None]]
    skipped: list[tuple[str, str]]

    def named(self) -> str:
        """The paths as given, for messages (stdin named as such)."""
        return ", ".join("stdin (-)" if p == "-" else p for p in self.given)

    def note(self) -> str | None:
        """One line naming the files passed over, or None: the suite's own files with what they are, then
        the other files (not .json/.jsonl), at most ``_NAMED`` of each named."""
        if not self.skipped:
            return None
        known = [f"{path} ({what})" for path, what in self.skipped if what != _OTHER]
        other = [path for path, what in self.skipped if what == _OTHER]
        parts = [_listing(known)] if known else []
        if other:
            parts.append(f"{len(other)} not {' or '.join(TRACE_SUFFIXES)}: {_listing(other)}")
        return f"skipped {len(self.skipped)} file(s) that are not traces: " + "; ".join(parts)


def sources(paths: str | Path | Sequence[str | Path]) -> Inputs:
    """The files to read, in the order given (a folder's files sorted by their path inside it)."""
    given = [paths] if isinstance(paths, (str, Path)) else list(paths)
    if not given:
        raise InputError("no trace path given", hint="Give a trace file, a directory of them, or - for stdin")
    if sum(str(p) == "-" for p in given) > 1:
        raise InputError("stdin (-) is given more than once", where="arguments", hint="Give - once")
    found = Inputs([str(p) for p in given], [], [])
    for path in given:
        _add(Path(path) if str(path) != "-" else None, str(path), found)
    return found


def _add(root: Path | None, name: str, found: Inputs) -> None:
    if root is None:
        found.files.append((Source(name="<stdin>", label="<stdin>"), None))
        return
    if root.is_dir():
        listed = sorted(
            (p for p in root.rglob("*") if p.is_file()), key=lambda p: p.relative_to(root).as_posix()
        )
        for p in listed:
            label = p.relative_to(root).as_posix()
            what = KNOWN_FILES.get(p.name.lower())
            if what is None and p.suffix in TRACE_SUFFIXES:
                found.files.append((Source(name=str(p), label=label), p))
            else:
                # Named as the user wrote the folder, so the note reads like the command line.
                found.skipped.append((f"{name.rstrip('/')}/{label}", what or _OTHER))
        return
    if not root.exists():
        raise InputError(
            "no such file or directory",
            source=name,
            hint="Check the path (use - to read traces from stdin)",
        )
    what = KNOWN_FILES.get(root.name.lower())
    if what is not None:
        found.skipped.append((name, what))
        return
    found.files.append((Source(name=name, label=root.name), root))


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

    def readline(self, size: int = -1) -> bytes:
        return self.stream.readline(size).encode("utf-8")  # (characters, not bytes: a test's stand-in)

    def read(self, size: int = -1) -> bytes:
        return self.stream.read(size).encode("utf-8")

    def close(self) -> None:
        pass


class Reader:
    """A trace file's records, read when iterated (once). A JSONL file is read a line at a time; once its
    first two records are handed out, the lines after the record handed out last may be read in blocks of
    whole lines instead (``blocks``), for a caller that passes them on unsplit (``check``'s workers)."""

    def __init__(self, source: Source, file: Path | None) -> None:
        self.source = source
        self.file = file
        self._stream: IO[bytes] | None = None
        self._lines = False  # the stream stands just after the last record handed out

    def __iter__(self) -> Iterator[Record]:
        stream = self._stream = _open(self.source, self.file)
        file = self.file
        try:
            yield from _split(
                stream, self.source, force_jsonl=file is not None and file.suffix == ".jsonl", reader=self
            )
        except OSError as exc:
            raise _unreadable(self.source, exc) from None
        finally:
            self._lines = False
            if file is not None:
                stream.close()

    def blocks(self, after: int, size: int) -> Iterator[tuple[int, bytes]] | None:
        """The lines after line ``after`` (the last record handed out) in blocks of about ``size`` bytes, each
        ending at the end of a line, with the number of the line before it; None when the stream is not
        read line by line (a document, or only the first record handed out)."""
        if not self._lines or self._stream is None or self.file is None:
            return None
        return self._blocks(self._stream, after, size)

    def _blocks(self, stream: IO[bytes], line: int, size: int) -> Iterator[tuple[int, bytes]]:
        try:
            while True:
                block = stream.read(size)
                if not block:
                    return
                if block[-1] != 10:  # b"\n": the line it ends in, whole
                    limit = RECORD_BYTES.value()
                    end = stream.readline(limit + 1)
                    if len(end) > limit and end[-1] != 10:
                        raise _too_large(self.source, line + _newlines(block) + 1, limit)
                    block += end
                yield line, block
                line += _newlines(block)
        except OSError as exc:
            raise _unreadable(self.source, exc) from None


def _newlines(block: bytes) -> int:
    """``block.count(b"\\n")``, in a quarter of its time on lines of 1.6 KB (a tenth of its instructions):
    ``find`` skips to each newline with memchr, ``count`` steps through every byte."""
    count = 0
    at = block.find(b"\n")
    while at >= 0:
        count += 1
        at = block.find(b"\n", at + 1)
    return count


def records(source: Source, file: Path | None) -> Reader:
    return Reader(source, file)


def _unreadable(source: Source, exc: OSError) -> InputError:
    return InputError(f"reading failed ({exc})", source=source.name)


def _too_large(source: Source, line: int | None, limit: int) -> InputError:
    subject = f"line {line}" if line is not None else "the document"
    return RECORD_BYTES.exceeded(subject, limit, source=source.name, where=f"line {line}" if line else None)


def bounded_lines(stream: IO[bytes], source: Source, limit: int) -> Iterator[bytes]:
    """The lines of ``stream`` as iterating it gives them, each read at most ``limit`` bytes at a time: a
    longer line is an error naming it, found before more than ``limit + 1`` of its bytes are held."""
    read = stream.readline
    line = 0
    while raw := read(limit + 1):
        line += 1
        if len(raw) > limit and raw[-1] != 10:  # b"\n"
            raise _too_large(source, line, limit)
        yield raw


def following(source: Source, lines: Iterable[bytes], line: int) -> Iterator[Record]:
    """The records of JSONL ``lines`` that come after line ``line``: one a line that is not blank."""
    for raw in lines:
        line += 1
        if not raw.isspace():  # no copy of the line, unlike strip(); iteration yields no empty line
            yield Record(source, line, raw)


def _split(
    stream: IO[bytes], source: Source, *, force_jsonl: bool, reader: Reader | None = None
) -> Iterator[Record]:
    """JSONL (one record a line) or one whole document, decided by the first non-blank line."""
    limit = RECORD_BYTES.value()
    lines = bounded_lines(stream, source, limit)
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
        whole = b"".join(head) + b"".join(between)
        if len(whole) > limit:
            raise _too_large(source, None, limit)
        yield Record(source, None, whole)
        return
    decoded = True
    try:
        first_value: Any = json.loads(first)
        complete = True
    except (json.JSONDecodeError, UnicodeDecodeError):
        complete = False
    except (ValueError, RecursionError):  # complete, but too deep or too long a number: refused when read
        complete, decoded = True, False
    if not complete and not force_jsonl:
        assert second is not None
        start = b"".join(head) + b"".join(between) + second
        rest = stream.read(max(limit + 1 - len(start), 0))
        if len(start) + len(rest) > limit:
            raise _too_large(source, None, limit)
        yield Record(source, None, start + rest)
        return
    record = Record(source, first_line, first)
    if decoded and complete:
        record.set_value(first_value)
    yield record
    if second is None:
        return
    if reader is not None:
        reader._lines = True  # from here on, the stream stands after each record handed out
    yield Record(source, lineno, second)
    yield from following(source, lines, lineno)


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
        except (ValueError, RecursionError):  # too deep or too long a number: the document's error stands
            return None
        part = Record(record.source, line, text[position:stop].encode("utf-8"))
        part.set_value(value)
        parts.append(part)
        line += text.count("\n", position, stop)
        position = stop
    return parts if len(parts) > 1 else None
