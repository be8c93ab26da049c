"""Read traces wherever agents write them: native JSON/JSONL; OpenAI and Anthropic messages and logged
responses; LangChain messages and LangSmith runs; OpenTelemetry spans (GenAI, OpenInference, OpenLLMetry,
Vercel AI SDK); Claude Code sessions, Codex CLI rollouts, tau2-bench results and Assay JSONL.

``load_traces(path)`` takes a file, a directory (its .json/.jsonl files, recursively, in sorted order) or
``-`` for stdin, picks each file's format from its records (``ingest.detect``; or uses ``format=``) and yields
native ``Trace`` objects one at a time. It fails closed: a file that yields no trace, or a trace with no call
where the input holds tool activity, is an ``InputError`` unless ``allow_empty=True``; and what it read, made
and skipped is counted in ``stats`` (``ingest.stats``).

The registry: each format is a module with ``NAME``, ``SIGNATURE`` (what it looks like, for messages),
``sniff(record, options=None) -> NO | MAYBE | YES`` and ``parse(records, source, options)`` yielding traces.
Adding a format means writing that module and adding it to ``_IMPORTERS`` below (a module may also set
``DUPLICATE_HINT``, the advice given when one of its trace ids repeats); a span convention is a module with
``NAME``, ``SIGNATURE``, ``marks`` and ``tool`` added to ``_IMPORTERS`` and ``_CONVENTIONS``. Detection
prefers the earlier of two formats that both say YES, so the most specific come first. An importer is
imported when a file first needs it (``FORMATS[name]``), so a native file loads none of the others. One
shortcut: a whole JSON document is first offered to pydantic as native trace(s) straight from its bytes, so
a large native file is parsed once, not once to detect and again to read.

``load_checkable`` is the same for callers that only run the engine (``seqjudge check``): plain native JSONL
records come as ``PlainTrace`` columns instead of models, and a hook may read native JSONL files itself (the
check command's worker pool); format detection, errors and the duplicate-id check are shared.

Reading files into records is ``ingest.files``.
"""

from __future__ import annotations

import itertools
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from functools import partial
from importlib import import_module
from pathlib import Path
from typing import cast

from seqjudge.errors import InputError
from seqjudge.ingest import detect, files, native
from seqjudge.ingest.base import Batch, Blocks, Done, Format, NativeLines, Options, Record, Source, too_deep
from seqjudge.ingest.files import TRACE_SUFFIXES
from seqjudge.ingest.stats import IngestStats
from seqjudge.pattern import PatternError, compile_user_pattern
from seqjudge.safetext import say
from seqjudge.trace import PlainTrace, Trace, check_nesting

# Every format's name and its module in this package, in detection order.
_IMPORTERS: dict[str, str] = {
    "native": "native",
    "claude-code": "claude_code",
    "codex": "codex",
    "tau2": "tau2",
    "openai-log": "openai_log",
    "langsmith": "langsmith",
    "langchain": "langchain",
    "anthropic": "anthropic",
    "openai": "openai",
    "openinference": "openinference",
    "openllmetry": "openllmetry",
    "vercel-ai": "vercel_ai",
    "otel": "otel",
    "assay": "assay",
}
# Span conventions, most specific first; every span format reads them all (spans.SpanFormat).
_CONVENTIONS = ("openinference", "openllmetry", "vercel-ai", "otel")


class _Formats(Mapping[str, Format]):
    """The registry: each format's name, in detection order, and its importer, imported on first use.

    Names and order need no import (``--trace-format`` checks, messages); a native file, the common case,
    loads no other importer, which kept `seqjudge check` of one small trace waiting on every adapter."""

    def __init__(self) -> None:
        self._loaded: dict[str, Format] = {}

    def __getitem__(self, name: str) -> Format:
        fmt = self._loaded.get(name)
        if fmt is None:
            module = _IMPORTERS[name]  # KeyError for an unknown name, as a dict's
            if name in _CONVENTIONS:
                self._load_spans()
            else:
                self._loaded[name] = cast(Format, import_module(f"{__name__}.{module}"))
            fmt = self._loaded[name]
        return fmt

    def _load_spans(self) -> None:
        from seqjudge.ingest import spans

        conventions = tuple(
            cast(spans.Convention, import_module(f"{__name__}.{_IMPORTERS[n]}")) for n in _CONVENTIONS
        )
        for convention in conventions:
            self._loaded[convention.NAME] = spans.SpanFormat(convention, conventions)

    def __iter__(self) -> Iterator[str]:
        return iter(_IMPORTERS)

    def __len__(self) -> int:
        return len(_IMPORTERS)

    def __contains__(self, name: object) -> bool:
        return name in _IMPORTERS


FORMATS: Mapping[str, Format] = _Formats()

__all__ = ["FORMATS", "IngestStats", "load_checkable", "load_traces"]


def load_traces(
    path: str | Path | Sequence[str | Path],
    *,
    format: str | None = None,
    messages_key: str | None = None,
    error_pattern: str | None = None,
    verbose: bool = False,
    allow_empty: bool = False,
    stats: IngestStats | None = None,
    notes: bool = True,
) -> Iterator[Trace]:
    """Iterate over the traces in ``path`` (a file, a folder, ``-``, or several of them in order); bad input
    raises ``InputError`` naming the file and record.

    Arguments are checked now (an unknown format, a bad regex, a missing path), the files when iterated.
    ``stats``, when given, is filled in as the traces are read. ``notes``: say on stderr which files of a
    folder were skipped as not traces (a second pass over the same input, such as a count, passes False).
    """
    prepared = _prepare(path, format, messages_key, error_pattern, verbose, allow_empty, stats, notes)
    # Without options.plain the importers yield Trace only.
    return cast(Iterator[Trace], _load(*prepared))


def load_checkable(
    path: str | Path | Sequence[str | Path],
    *,
    format: str | None = None,
    messages_key: str | None = None,
    error_pattern: str | None = None,
    verbose: bool = False,
    native_lines: NativeLines | None = None,
    allow_empty: bool = False,
    stats: IngestStats | None = None,
    plain: bool = True,
) -> Generator[Trace | PlainTrace | Done | Batch, None, None]:
    """``load_traces`` for callers that only run the engine: a plain native JSONL record comes as a
    PlainTrace (its columns, without models); everything else, errors included, is exactly as there.

    ``native_lines``, if given, reads each native JSONL file instead (see ``Options``); the loader still
    picks the format and checks trace ids for duplicates. ``plain=False``: every record as a Trace (for an
    output that shows what only the models hold).
    """
    inputs, options = _prepare(path, format, messages_key, error_pattern, verbose, allow_empty, stats)
    options.plain = plain
    options.native_lines = native_lines
    return _load(inputs, options)


def _prepare(
    path: str | Path | Sequence[str | Path],
    format: str | None,
    messages_key: str | None,
    error_pattern: str | None,
    verbose: bool,
    allow_empty: bool,
    stats: IngestStats | None,
    notes: bool = True,
) -> tuple[files.Inputs, Options]:
    options = Options(
        format=format,
        messages_key=messages_key,
        verbose=verbose,
        allow_empty=allow_empty,
        stats=stats if stats is not None else IngestStats(),
    )
    options.describe = partial(detect.describe, FORMATS, native.NAME)
    if format is not None and format not in FORMATS:
        raise InputError(
            f"unknown trace format {format!r}",
            where="--trace-format",
            hint=f"Choose one of: {', '.join(FORMATS)}",
        )
    if error_pattern is not None:
        # Time-limited (seqjudge.pattern): a backtracking pattern over a call's output stops with exit 2
        # naming it and the input, not a hang.
        named = path if isinstance(path, str | Path) else ", ".join(map(str, path))
        try:
            options.error_pattern = compile_user_pattern(
                error_pattern, given="--error-pattern", source=str(named)
            )
        except PatternError as exc:
            raise InputError(
                f"the error pattern {error_pattern!r} is not a valid regular expression ({exc})",
                where="--error-pattern",
                hint="Write a Python regular expression, e.g. '^Error'",
            ) from None
    inputs = files.sources(path)
    note = inputs.note()
    if note is not None:
        # Not an error: a suite folder holds its rules, catalog and labels beside the traces.
        options.stats.skip("files that are not traces", len(inputs.skipped))
        if notes:
            say(f"seqjudge: note: {note}", err=True)
    if not inputs.files and not allow_empty:
        raise InputError(
            f"no traces in {inputs.named()}: no {' or '.join(TRACE_SUFFIXES)} files there"
            + (", only files that are not traces (noted above)" if inputs.skipped else ""),
            hint="Point at trace files or folders of them (several may be given), or pass --allow-empty to "
            "accept an input without traces",
        )
    return inputs, options


_DUPLICATE_HINT = "Give every trace a distinct trace_id (ids must be unique within one input)"
_DOCUMENT = 1 << 39  # marks a trace's ordinal in a document rather than a line number


def _load(inputs: files.Inputs, options: Options) -> Generator[Trace | PlainTrace | Done | Batch, None, None]:
    # The duplicate-id index is the only thing kept per trace: id -> where it was, packed in one int (file
    # number, then line or ordinal), so memory grows by about a hundred bytes a trace, not by the records.
    seen: dict[str, int] = {}
    stats = options.stats
    sources = inputs.files
    for number, (source, file) in enumerate(sources):
        stats.files += 1
        tracker = _Tracker(stats, files.records(source, file))
        records = tracker.follow()
        first = next(records, None)
        if first is None:
            if options.verbose:
                say(f"seqjudge: {source.name}: empty, no traces", err=True)
            continue
        skipped = stats.skipped.copy()
        fmt, traces = _parse(first, records, source, options, tracker.blocks)
        base = number << 40
        made = count = 0
        for trace in _bounded(traces, source, tracker, fmt is not native):
            if isinstance(trace, Batch):
                # A hook's run of records: their ids checked at once when none repeats (the usual case),
                # else one by one below, for the message and line of the first that does.
                fresh = dict(zip(trace.trace_ids, map(base.__add__, trace.lines), strict=True))
                if len(fresh) == len(trace.trace_ids) and seen.keys().isdisjoint(fresh):
                    seen.update(fresh)
                    count += len(fresh)
                    made = count
                    stats.traces += len(fresh)
                    stats.uncounted += len(fresh)
                    yield trace
                    continue
                for at, (trace_id, at_line) in enumerate(zip(trace.trace_ids, trace.lines, strict=True)):
                    if trace_id in seen:
                        if at:  # the results before it are written, as one by one
                            stats.traces += at
                            stats.uncounted += at
                            yield Batch(trace.trace_ids[:at], trace.lines[:at], trace.result.first(at))
                        raise _duplicate(seen, sources, trace_id, source, at_line, count + at + 1, fmt)
                    seen[trace_id] = base + at_line
                raise AssertionError("a batch's repeated trace id was not found one by one")
            count += 1
            trace_id = trace.trace_id if isinstance(trace.trace_id, str) else str(trace.trace_id)
            # A hook reads ahead of what it yields: its items carry their own line.
            line = trace.line if isinstance(trace, Done) else tracker.line
            if trace_id in seen:
                raise _duplicate(seen, sources, trace_id, source, line, count, fmt)
            seen[trace_id] = base + (line if line is not None else _DOCUMENT + count)
            made = count
            stats.traces += 1
            if isinstance(trace, Done):
                stats.uncounted += 1
            else:
                stats.calls += len(trace.calls) if isinstance(trace, Trace) else len(trace.names)
            yield trace
        if made == 0 and not options.allow_empty:
            raise InputError(
                f"no trace came out of this file ({tracker.count} record(s) read as {fmt.NAME}; "
                f"{stats.skipped_text(skipped)})",
                source=source.name,
                hint="Check the format (-v says which was chosen and why; --trace-format NAME picks "
                "another); pass --allow-empty to accept an input without traces",
            )
    if stats.traces == 0 and not options.allow_empty:
        raise InputError(
            f"no traces in {inputs.named()}: "
            + ("every file is empty" if len(sources) > 1 else "the input is empty"),
            hint="Point at a file with traces, or pass --allow-empty to accept an empty input",
        )


def _bounded(
    traces: Iterable[Trace | PlainTrace | Done | Batch], source: Source, tracker: _Tracker, check: bool
) -> Iterator[Trace | PlainTrace | Done | Batch]:
    """``traces``, each within trace.MAX_NESTING (``check``: the native importer checks its own, for the
    worker pool and Spark that read records without this loader). Every importer walks what it reads
    recursively somewhere, so a value too deep for that is refused here too, naming the record read last."""
    try:
        for trace in traces:
            if check and type(trace) is Trace:
                check_nesting(trace, source.name, None if tracker.line is None else f"line {tracker.line}")
            yield trace
    except RecursionError:
        raise too_deep(source, tracker.line) from None


def _duplicate(
    seen: dict[str, int],
    sources: list[tuple[Source, Path | None]],
    trace_id: str,
    source: Source,
    line: int | None,
    count: int,
    fmt: Format,
) -> InputError:
    """The error for ``trace_id``, seen before, repeated by the ``count``-th trace of ``source``."""
    return InputError(
        f"duplicate trace id {trace_id!r}: it was already used at {_place(sources, seen[trace_id])}",
        source=source.name,
        where=_where(line, count),
        hint=getattr(fmt, "DUPLICATE_HINT", _DUPLICATE_HINT),
    )


def _where(line: int | None, count: int) -> str:
    """The line that completed a trace (JSONL), else its ordinal in the document."""
    return f"line {line}" if line is not None else f"trace #{count}"


def _place(sources: list[tuple[Source, Path | None]], packed: int) -> str:
    number, rest = divmod(packed, 1 << 40)
    line, count = (None, rest - _DOCUMENT) if rest >= _DOCUMENT else (rest, 0)
    return f"{sources[number][0].name}, {_where(line, count)}"


def _parse(
    first: Record, rest: Iterator[Record], source: Source, options: Options, blocks: Blocks
) -> tuple[Format, Iterable[Trace | PlainTrace | Done | Batch]]:
    """Choose the format (forced, or from the records) and start parsing with it."""

    def parse(fmt: Format, records: Iterator[Record]) -> Iterable[Trace | PlainTrace | Done | Batch]:
        if fmt is native and first.line is not None and options.native_lines is not None:
            return options.native_lines(records, source, options, blocks)
        return fmt.parse(records, source, options)

    if first.line is None:
        if options.format in (None, native.NAME):
            fast = native.fast_document(first, options)
            if fast is not None:
                why = "forced with --trace-format" if options.format else "auto-detected: the document "
                detect.say(
                    options, source, native.NAME, why + ("" if options.format else "validates as native")
                )
                options.stats.formats[native.NAME] += 1
                return native, iter(fast)  # type: ignore[return-value]
        parts = files.document_records(first)
        options.stats.records += len(parts) - 1
        first, rest = parts[0], iter(parts[1:])
    records: Iterator[Record]
    if options.format is not None:
        detect.say(options, source, options.format, "forced with --trace-format")
        name, records = options.format, itertools.chain([first], rest)
    else:
        name, records = detect.choose(FORMATS, first, rest, source, options)
    options.stats.formats[name] += 1
    fmt = FORMATS[name]
    return fmt, parse(fmt, records)


class _Tracker:
    """Remember the line an importer read last, to say where a (duplicate) trace came from; count records."""

    def __init__(self, stats: IngestStats, reader: files.Reader) -> None:
        self.line: int | None = None
        self.count = 0
        self.stats = stats
        self.reader = reader

    def follow(self) -> Iterator[Record]:
        for record in self.reader:
            self.line = record.line
            self.count += 1
            self.stats.records += 1
            yield record

    def blocks(self, taken: int, size: int) -> Iterator[tuple[int, bytes]] | None:
        """The file's lines after the records read so far, in blocks (``files.Reader.blocks``), for a hook
        that has taken ``taken`` records: only when that is every record read (detection holds none back).
        The records in them are the hook's to count (``stats.records``): the lines are not split here."""
        if taken != self.count or self.line is None:
            return None
        return self.reader.blocks(self.line, size)
