"""Read traces wherever agents write them: native JSON/JSONL, OpenAI and Anthropic messages, OpenTelemetry
GenAI spans and Assay JSONL.

``load_traces(path)`` takes a file, a directory (its .json/.jsonl files, recursively, in sorted order) or
``-`` for stdin, picks each file's format from its first record (or uses ``format=``) and yields native
``Trace`` objects one at a time.

The registry: each format is a module with ``NAME``, ``SIGNATURE`` (what it looks like, for messages),
``sniff(first_record, options=None) -> bool`` and ``parse(records, source, options) -> Iterator[Trace]``.
Adding a format means writing that module and adding it to ``FORMATS`` below (a module may also set
``DUPLICATE_HINT``, the advice given when one of its trace ids repeats). Detection tries them in order, most
specific first; OpenAI comes after Anthropic because a text-only conversation reads the same in both. One
shortcut: a whole JSON document is first offered to pydantic as native trace(s) straight from its bytes, so a
large native file is parsed once, not once to detect and again to read.

``load_checkable`` is the same for callers that only run the engine (``seqjudge check``): plain native JSONL
records come as ``PlainTrace`` columns instead of models, and a hook may read native JSONL files itself (the
check command's worker pool); format detection, errors and the duplicate-id check are shared.

Reading: a file whose first line is a complete JSON value and which has more lines (or ends in .jsonl) is
JSONL and is read one line at a time, so memory stays flat however long it is; otherwise it is one JSON
document, parsed whole.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Generator, Iterable, Iterator
from pathlib import Path
from typing import IO, Any, cast

from seqjudge.errors import InputError
from seqjudge.ingest import anthropic, assay, native, openai, otel
from seqjudge.ingest.base import Done, Format, NativeLines, Options, Record, Source, kind_of
from seqjudge.trace import PlainTrace, Trace

FORMATS: dict[str, Format] = {m.NAME: m for m in (native, anthropic, openai, otel, assay)}  # type: ignore[misc]
TRACE_SUFFIXES = (".json", ".jsonl")

__all__ = ["FORMATS", "load_checkable", "load_traces"]


def load_traces(
    path: str | Path,
    *,
    format: str | None = None,
    messages_key: str | None = None,
    error_pattern: str | None = None,
    verbose: bool = False,
) -> Iterator[Trace]:
    """Iterate over the traces in ``path``; bad input raises ``InputError`` naming the file and record.

    Arguments are checked now (an unknown format, a bad regex, a missing path), the files when iterated.
    """
    # Without options.plain the importers yield Trace only.
    return cast(Iterator[Trace], _load(*_prepare(path, format, messages_key, error_pattern, verbose)))


def load_checkable(
    path: str | Path,
    *,
    format: str | None = None,
    messages_key: str | None = None,
    error_pattern: str | None = None,
    verbose: bool = False,
    native_lines: NativeLines | None = None,
) -> Generator[Trace | PlainTrace | Done, None, None]:
    """``load_traces`` for callers that only run the engine: a plain native JSONL record comes as a
    PlainTrace (its columns, without models); everything else, errors included, is exactly as there.

    ``native_lines``, if given, reads each native JSONL file instead (see ``Options``); the loader still
    picks the format and checks trace ids for duplicates.
    """
    sources, options = _prepare(path, format, messages_key, error_pattern, verbose)
    options.plain = True
    options.native_lines = native_lines
    return _load(sources, options)


def _prepare(
    path: str | Path, format: str | None, messages_key: str | None, error_pattern: str | None, verbose: bool
) -> tuple[list[tuple[Source, Path | None]], Options]:
    options = Options(format=format, messages_key=messages_key, verbose=verbose)
    if format is not None and format not in FORMATS:
        raise InputError(
            f"unknown trace format {format!r}",
            where="--trace-format",
            hint=f"Choose one of: {', '.join(FORMATS)}",
        )
    if error_pattern is not None:
        try:
            options.error_pattern = re.compile(error_pattern)
        except re.error as exc:
            raise InputError(
                f"the error pattern {error_pattern!r} is not a valid regular expression ({exc})",
                where="--error-pattern",
                hint="Write a Python regular expression, e.g. '^Error'",
            ) from None
    return _sources(path), options


_DUPLICATE_HINT = "Give every trace a distinct trace_id (ids must be unique within one input)"
_DOCUMENT = 1 << 39  # marks a trace's ordinal in a document rather than a line number


def _load(
    sources: list[tuple[Source, Path | None]], options: Options
) -> Generator[Trace | PlainTrace | Done, None, None]:
    # The duplicate-id index is the only thing kept per trace: id -> where it was, packed in one int (file
    # number, then line or ordinal), so memory grows by about a hundred bytes a trace, not by the records.
    seen: dict[str, int] = {}
    for number, (source, file) in enumerate(sources):
        tracker = _Tracker()
        records = tracker.follow(_records(source, file))
        first = next(records, None)
        if first is None:
            if options.verbose:
                print(f"seqjudge: {source.name}: empty, no traces", file=sys.stderr)
            continue
        fmt, traces = _parse(first, records, source, options)
        base = number << 40
        for count, trace in enumerate(traces, start=1):
            trace_id = trace.trace_id if isinstance(trace.trace_id, str) else str(trace.trace_id)
            # A hook reads ahead of what it yields: its items carry their own line.
            line = trace.line if isinstance(trace, Done) else tracker.line
            if trace_id in seen:
                earlier = _place(sources, seen[trace_id])
                raise InputError(
                    f"duplicate trace id {trace_id!r}: it was already used at {earlier}",
                    source=source.name,
                    where=_where(line, count),
                    hint=getattr(fmt, "DUPLICATE_HINT", _DUPLICATE_HINT),
                )
            seen[trace_id] = base + (line if line is not None else _DOCUMENT + count)
            yield trace


def _where(line: int | None, count: int) -> str:
    """The line that completed a trace (JSONL), else its ordinal in the document."""
    return f"line {line}" if line is not None else f"trace #{count}"


def _place(sources: list[tuple[Source, Path | None]], packed: int) -> str:
    number, rest = divmod(packed, 1 << 40)
    line, count = (None, rest - _DOCUMENT) if rest >= _DOCUMENT else (rest, 0)
    return f"{sources[number][0].name}, {_where(line, count)}"


def _parse(
    first: Record, rest: Iterator[Record], source: Source, options: Options
) -> tuple[Format, Iterable[Trace | PlainTrace | Done]]:
    """Choose the format (forced, or from the first record) and start parsing with it."""

    def chained() -> Iterator[Record]:
        yield first
        yield from rest

    def parse(fmt: Format) -> Iterable[Trace | PlainTrace | Done]:
        if fmt is native and first.line is not None and options.native_lines is not None:
            return options.native_lines(chained(), source, options)
        return fmt.parse(chained(), source, options)

    if options.format is not None:
        _say(options, source, options.format, "forced with --trace-format")
        fmt = FORMATS[options.format]
        return fmt, parse(fmt)
    if first.line is None:
        fast = native.fast_document(first, options)
        if fast is not None:
            _say(options, source, native.NAME, "auto-detected: the document validates as native trace(s)")
            return native, iter(fast)  # type: ignore[return-value]
    value = first.value()
    tried: list[str] = []
    for name, fmt in FORMATS.items():
        if fmt.sniff(value, options):
            why = f"auto-detected from the first record, {kind_of(value)}: it looks like {fmt.SIGNATURE}"
            if tried:
                why += f" (not {', '.join(tried)})"
            _say(options, source, name, why)
            return fmt, parse(fmt)
        tried.append(name)
    raise first.error(
        f"the first record matches no known trace format (tried {', '.join(tried)}): it is {kind_of(value)}",
        hint=_guess_hint(value, options),
    )


def _guess_hint(value: Any, options: Options) -> str:
    """Point at --messages-key when a record holds a conversation under a key we were not told about."""
    record = value[0] if isinstance(value, list) and value and isinstance(value[0], dict) else value
    if isinstance(record, dict):
        for key, inner in record.items():
            if (
                key != options.messages_key
                and isinstance(inner, list)
                and inner
                and isinstance(inner[0], dict)
                and "role" in inner[0]
            ):
                return f"The records hold a message list under {key!r}: pass --messages-key {key}"
    return f"Name the format with --trace-format ({', '.join(FORMATS)}); the README describes each"


def _say(options: Options, source: Source, name: str, why: str) -> None:
    if options.verbose:
        print(f"seqjudge: {source.name}: format {name} ({why})", file=sys.stderr)


class _Tracker:
    """Remember the line an importer read last, to say where a (duplicate) trace came from."""

    def __init__(self) -> None:
        self.line: int | None = None

    def follow(self, records: Iterator[Record]) -> Iterator[Record]:
        for record in records:
            self.line = record.line
            yield record


# --- finding and reading files ----------------------------------------------------------------------------


def _sources(path: str | Path) -> list[tuple[Source, Path | None]]:
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


def _records(source: Source, file: Path | None) -> Iterator[Record]:
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
