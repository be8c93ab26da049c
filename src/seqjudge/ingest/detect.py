"""Choosing a file's trace format from all of its records, not from the first one alone.

Every format answers ``sniff(record)`` with NO, MAYBE or YES. A record that reads the same in several formats
(a text-only conversation is OpenAI and Anthropic alike) says MAYBE; one with a mark only one format has (a
``tool_use`` block) says YES. Records are held back while all of them are MAYBE, then the first YES settles
the format, which every record held back must fit. The hold is bounded (``HOLD_RECORDS`` records or
``HOLD_BYTES`` bytes of them; past that, the first format all of them fit is taken), so a huge file is never
read twice nor held in memory. After the choice each later record is sniffed again as it streams by and must
fit too; the first one that does not is an error naming it. Native records are the exception: the native
importer validates every record anyway and names one that is not native (``Options.describe``), so they are
not decoded twice for a sniff.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from typing import Any

from seqjudge.errors import InputError
from seqjudge.ingest.base import MAYBE, NO, YES, Format, Options, Record, Source, kind_of
from seqjudge.safetext import say as show_line

HOLD_RECORDS = 1000
HOLD_BYTES = 32 << 20


def choose(
    formats: Mapping[str, Format], first: Record, rest: Iterator[Record], source: Source, options: Options
) -> tuple[str, Iterator[Record]]:
    """The format of a file, and its records from the first on (checked against that format as they go)."""
    held: list[Record] = []
    size = 0
    candidates = list(formats)
    chosen: str | None = None
    reason = ""
    for record in itertools.chain([first], rest):
        value = record.value()
        levels: dict[str, int] = {}
        for name in candidates:
            levels[name] = formats[name].sniff(value, options)
            if levels[name] == YES:
                # The first format sure of the record is chosen whatever the later ones say, so they are
                # not asked (nor imported: a native file loads no other importer).
                break
        fits = [name for name in levels if levels[name] >= MAYBE]
        if not fits:
            if not held:
                raise record.error(
                    f"the first record matches no known trace format (tried {', '.join(formats)}): it is "
                    f"{kind_of(value)}",
                    hint=_guess_hint(value, options, formats),
                )
            raise _disagree(record, value, held, candidates, formats, options)
        held.append(record)
        size += len(record.raw)
        sure = [name for name in fits if levels[name] == YES]
        if sure:
            chosen = sure[0]
            reason = f"it looks like {formats[chosen].SIGNATURE}"
            if len(held) > 1:
                reason += f" from {_where(record)}; the {len(held) - 1} record(s) before it read the same"
            break
        candidates = fits
        if len(held) >= HOLD_RECORDS or size >= HOLD_BYTES:
            break
    if not held:
        raise AssertionError("choose() is called with a first record")
    if chosen is None:
        chosen = candidates[0]
        reason = (
            f"{len(held)} record(s) read the same as {', '.join(candidates)}; "
            f"{chosen} was taken: {formats[chosen].SIGNATURE}"
        )
    passed = [name for name in formats if name != chosen]
    tried = passed[: list(formats).index(chosen)]
    why = f"auto-detected: {reason}" + (f" (not {', '.join(tried)})" if tried else "")
    say(options, source, chosen, why)
    fmt = formats[chosen]
    records: Iterator[Record] = iter(held)
    if chosen != "native":
        records = _agreeing(records, rest, chosen, fmt, formats, options, held[0])
    else:
        records = itertools.chain(records, rest)
    return chosen, records


def _agreeing(
    held: Iterator[Record],
    rest: Iterator[Record],
    name: str,
    fmt: Format,
    formats: Mapping[str, Format],
    options: Options,
    first: Record,
) -> Iterator[Record]:
    yield from held
    # A format may name byte strings only a differing record can hold (another API's block types): a record
    # without any of them fits, and is not walked a second time (the importer decodes it anyway).
    marks: tuple[bytes, ...] | None = getattr(fmt, "FOREIGN_MARKS", None)
    for record in rest:
        if marks is not None and not any(mark in record.raw for mark in marks):
            yield record
            continue
        value = record.value()
        if fmt.sniff(value, options) == NO:
            raise _disagree(record, value, [first], [name], formats, options)
        yield record


def _disagree(
    record: Record,
    value: Any,
    before: list[Record],
    candidates: list[str],
    formats: Mapping[str, Format],
    options: Options,
) -> InputError:
    looks = [name for name, fmt in formats.items() if fmt.sniff(value, options) >= MAYBE]
    what = f"it looks like {' or '.join(looks)}" if looks else f"it is {kind_of(value)} and matches no format"
    return record.error(
        f"this record differs from the records before it: {what}, but the file from {_where(before[0])} on "
        f"reads as {' or '.join(candidates)}",
        hint="A file holds traces of one format: split it, or fix the record",
    )


def _where(record: Record) -> str:
    return f"line {record.line}" if record.line is not None else "the document"


def describe(formats: Mapping[str, Format], own: str, value: Any) -> str:
    """Name the other formats a stray record matches, to explain a file that mixes formats."""
    matches = [name for name, fmt in formats.items() if name != own and fmt.sniff(value) == YES]
    if not matches:
        matches = [name for name, fmt in formats.items() if name != own and fmt.sniff(value) == MAYBE]
    return f" (it looks like {' or '.join(matches)})" if matches else " (and matches no other format)"


def _guess_hint(value: Any, options: Options, formats: Mapping[str, Format]) -> str:
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
    return f"Name the format with --trace-format ({', '.join(formats)}); docs/traces.md describes each"


def say(options: Options, source: Source, name: str, why: str) -> None:
    if options.verbose:
        show_line(f"seqjudge: {source.name}: format {name} ({why})", err=True)
