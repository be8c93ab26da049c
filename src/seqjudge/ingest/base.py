"""What every importer shares: the record it reads, the options it obeys, and the pieces that turn a foreign
conversation into a validated native ``Trace`` with errors that name the file and the record.

A *record* is one JSONL line, or a whole JSON document. Importers receive records one at a time, so a JSONL
input is never held in memory whole.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import ValidationError

from seqjudge.errors import InputError
from seqjudge.ingest.stats import IngestStats
from seqjudge.trace import TOO_DEEP, TOO_DEEP_HINT, PlainTrace, Trace

if TYPE_CHECKING:
    from seqjudge.pattern import Pattern

NEVER_ANSWERED = "never answered: no tool result for call id {id}"
# A call without an id: results answer calls by id, so nothing can answer it.
NEVER_ANSWERED_NO_ID = "never answered: the call has no id, so no tool result can answer it"

# What ``sniff`` answers about one record: it is not this format / it reads the same in this and other formats
# (a text-only conversation) / it is this format. Detection settles on the first record that says YES.
NO, MAYBE, YES = 0, 1, 2


@dataclass(frozen=True, slots=True)
class Source:
    """One input file (or stdin). ``name`` is shown in messages; ``label`` prefixes default trace ids."""

    name: str
    label: str


@dataclass(slots=True)
class Options:
    format: str | None = None
    messages_key: str | None = None
    error_pattern: Pattern | None = None
    verbose: bool = False
    # Yield seqjudge.trace.PlainTrace for plain native JSONL records (for callers that only run the engine).
    plain: bool = False
    # Reads a native JSONL file's records in place of native.parse, yielding Done and Batch items in record
    # order (`seqjudge check`'s worker pool); None: native.parse.
    native_lines: NativeLines | None = None
    # A trace with no call whose source holds tool activity is an error unless this is set (--allow-empty).
    allow_empty: bool = False
    stats: IngestStats = field(default_factory=IngestStats)
    # Names the formats a record that fits no other part of its file looks like (set by the registry, which
    # importers must not import: it imports them).
    describe: Callable[[Any], str] = lambda value: ""


_UNSET: Any = object()


@dataclass(slots=True)
class Done:
    """A JSONL record already turned into its caller's result (by an ``Options.native_lines`` hook).

    The loader checks ``trace_id`` for duplicates as it does a trace's, at this record's ``line``.
    """

    trace_id: str
    line: int
    result: Any


@dataclass(slots=True)
class Batch:
    """Consecutive JSONL records already turned into their caller's result, as one item (an
    ``Options.native_lines`` hook's: it costs the loader a few builtins a trace, not an item each).

    The loader checks each of ``trace_ids`` for duplicates at its line (``lines``) as it does a ``Done``'s,
    and counts them as traces; ``result`` is the caller's, for all of them."""

    trace_ids: list[str]
    lines: list[int]
    result: Results


class Results(Protocol):
    """A ``Batch``'s result, whatever its caller makes of it."""

    def first(self, count: int) -> Results:
        """The result of the first ``count`` records alone (the loader yields them before the error of a
        trace id that repeats among the rest)."""
        ...


# The rest of a JSONL file as blocks of whole lines, each with the number of the line before it, once a hook
# has taken the given number of records from its record iterator; None where the file cannot be read so from
# there (records still held back, or a stream not read line by line). The second argument is a block's size.
Blocks = Callable[[int, int], "Iterator[tuple[int, bytes]] | None"]

NativeLines = Callable[[Iterator["Record"], "Source", Options, Blocks], Iterator["Done | Batch"]]


@dataclass(slots=True)
class Record:
    """One JSONL line (``line`` set) or one whole JSON document (``line`` is None).

    ``raw`` keeps the undecoded bytes so that the native importer can hand them straight to pydantic-core;
    ``value()`` decodes them with ``json`` only when an importer needs Python objects.
    """

    source: Source
    line: int | None
    raw: bytes
    _value: Any = field(default=_UNSET, repr=False)

    @property
    def where(self) -> str | None:
        return None if self.line is None else f"line {self.line}"

    def place(self, path: str | None = None) -> str | None:
        """The record's position plus a JSON path inside it, for messages: ``line 4, calls[2].tool_name``."""
        parts = [p for p in (self.where, path.lstrip(".") if path else None) if p]
        return ", ".join(parts) or None

    @property
    def is_undecoded(self) -> bool:
        return self._value is _UNSET

    def value(self) -> Any:
        if self._value is _UNSET:
            self._value = decode_json(self.raw, self.source, self.line)
        return self._value

    def set_value(self, value: Any) -> None:
        self._value = value

    def error(self, problem: str, path: str | None = None, hint: str | None = None) -> InputError:
        return InputError(problem, source=self.source.name, where=self.place(path), hint=hint)

    def default_id(self, index: int | None = None) -> str:
        """``FILE:LINE`` for a JSONL line, ``FILE[INDEX]`` for an item of a list document, else ``FILE``."""
        if self.line is not None:
            return f"{self.source.label}:{self.line}" + ("" if index is None else f"[{index}]")
        if index is not None:
            return f"{self.source.label}[{index}]"
        return self.source.label


def decode_json(raw: bytes, source: Source, line: int | None) -> Any:
    """``json.loads`` with an InputError that gives the line and column of the first bad character."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        text = exc.doc
        pos = exc.pos
        # A value cut off at the end is found only past its last character, often after the line's newline,
        # which named the line after the record ("line 4" for a cut third line): place it at the last
        # character of the text instead, on the line the record is written on.
        content = len(text.rstrip())
        if pos > content:
            pos = content
        line_in = text.count("\n", 0, pos) + 1
        column = pos - (text.rfind("\n", 0, pos) + 1) + 1
        lineno = line_in if line is None else line + line_in - 1
        where = f"line {lineno}, column {column}"
        # Cut off mid-value: nothing after the error, or an object/list that never closes.
        truncated = not text[exc.pos :].strip() or (
            text.lstrip()[:1] in ("{", "[") and not text.rstrip().endswith(("}", "]"))
        )
        if not truncated:
            hint = "Fix the JSON at that position (a JSONL file holds one complete JSON value per line)"
        elif line is None:
            hint = "The file looks truncated (it ends in the middle of a JSON value); re-export or re-copy it"
        else:
            hint = (
                "The line ends in the middle of a JSON value: the file looks truncated, or a record is split "
                "over several lines"
            )
        said = exc.msg + " this position" if exc.msg.endswith(" at") else exc.msg
        raise InputError(f"bad JSON: {said}", source=source.name, where=where, hint=hint) from None
    except UnicodeDecodeError as exc:
        raise InputError(
            f"the text is not valid UTF-8 (byte {exc.start})",
            source=source.name,
            where=None if line is None else f"line {line}",
            hint="Save the file as UTF-8",
        ) from None
    except RecursionError:  # the decoder recurses once a level: Python's limit (~1,000) ends a deeper value
        raise too_deep(source, line) from None
    except ValueError:  # valid JSON, but Python reads no integer of more than 4,300 digits
        raise InputError(
            "a number has more digits than Python reads (4,300)",
            source=source.name,
            where=None if line is None else f"line {line}",
            hint="Write such a value as a JSON string",
        ) from None


def too_deep(source: Source, line: int | None) -> InputError:
    """The error for a record nested too deep to decode or walk (trace.MAX_NESTING is the bound)."""
    return InputError(
        TOO_DEEP, source=source.name, where=None if line is None else f"line {line}", hint=TOO_DEEP_HINT
    )


class Format(Protocol):
    """What each importer module provides; ``seqjudge.ingest.FORMATS`` lists them."""

    NAME: str
    SIGNATURE: str

    def sniff(self, record: Any, options: Options | None = None) -> int:
        """NO, MAYBE or YES (see above) for one decoded record."""
        ...

    def parse(
        self, records: Iterable[Record], source: Source, options: Options
    ) -> Iterator[Trace | PlainTrace]: ...


# --- describing JSON for messages -------------------------------------------------------------------------


def kind_of(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an empty list" if not value else f"a list (first item: {kind_of(value[0])})"
    if isinstance(value, dict):
        keys = ", ".join(list(value)[:8]) + (", ..." if len(value) > 8 else "")
        return f"an object with keys {keys}" if value else "an empty object"
    return type(value).__name__


def at(prefix: str, path: str) -> str:
    """Join two JSON paths: at('[3]', 'messages[2]') -> '[3].messages[2]'."""
    if not prefix or not path:
        return prefix or path
    return prefix + path if path.startswith("[") or path.startswith(".") else f"{prefix}.{path}"


def join_path(prefix: str, loc: Iterable[Any]) -> str:
    """('calls', 3, 'tool_name') -> 'calls[3].tool_name', appended to ``prefix``."""
    text = prefix
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def text_of(content: Any) -> str:
    """Render a tool result or message content as text, for ``--error-pattern`` and for error notes."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) for p in content):
        texts = [p["text"] for p in content if isinstance(p.get("text"), str)]
        if texts or not content:
            return "\n".join(texts)
    return json.dumps(content, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def plain_content(content: Any) -> Any:
    """Message content as text when it is text (a string, or parts that are all text), else as given."""
    if (
        isinstance(content, list)
        and content
        and all(
            isinstance(p, dict) and p.get("type") in ("text", "input_text", "output_text") for p in content
        )
    ):
        return "\n".join(str(p.get("text", "")) for p in content)
    return content


# --- validation errors in plain words ---------------------------------------------------------------------

_HINTS = {
    "tool_name": "Every call needs a non-empty tool_name: the name of the tool that was called",
    "status": 'Use "ok" or "error" (a failed call is "error")',
    "calls": 'Give calls as a JSON list of call objects, e.g. [{"tool_name": "search"}]',
    "timestamp": "Use ISO 8601 text (2024-05-20T10:00:00Z) or epoch seconds",
    "end_timestamp": "Use ISO 8601 text (2024-05-20T10:00:00Z) or epoch seconds",
    "step": "A step is an integer label shared by calls that ran in parallel",
    "arguments": "Give arguments as a JSON object of argument names to values",
    "trace_id": "Give trace_id as a string",
    "id": "Give the call id as a string",
    "role": "Every message has a role, such as user or assistant",
    "at": "A message's at is the number of calls made before it (0 or more)",
}
# The last part of a pydantic error location that names a member of a union, not a key of the input.
_UNION_MEMBERS = {"float", "int", "str", "bool", "none", "list", "dict"}


def _input_loc(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    while loc and isinstance(loc[-1], str) and (loc[-1] in _UNION_MEMBERS or "[" in loc[-1]):
        loc = loc[:-1]
    return loc


def validation_error(exc: ValidationError, record: Record, prefix: str = "", *, drop: int = 0) -> InputError:
    """Turn pydantic's first error into an InputError naming the JSON path; ``drop`` strips leading loc parts
    (used when a shorthand such as a bare list of calls was wrapped into ``{"calls": ...}``)."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    loc = _input_loc(tuple(first.get("loc", ())))[drop:]
    # One problem per place: a value that fits no member of a union is one problem, not one per member.
    places = {_input_loc(tuple(e.get("loc", ()))) for e in errors}
    path = join_path(prefix, loc)
    field_name = next((p for p in reversed(loc) if isinstance(p, str)), "")
    kind = first.get("type", "")
    given = first.get("input")
    message = re.sub(r" or instance of \w+", "", str(first.get("msg", "invalid value")))
    message = message.removeprefix("Value error, ")
    said = message[:1].lower() + message[1:]
    first_place = _input_loc(tuple(first.get("loc", ())))
    union = sum(1 for e in errors if _input_loc(tuple(e.get("loc", ()))) == first_place) > 1
    if kind == "missing":
        path = join_path(prefix, loc[:-1])  # name the object that lacks the key
        problem = f"this object has no {field_name}"
    elif kind == "string_too_short":
        problem = "the value is empty"
    elif kind == "literal_error":
        problem = f"the value is {json.dumps(given)}; {said}"
    elif union:
        problem = f"the value is {kind_of(given)}, which is not allowed here"
    elif kind.endswith("_type") or kind.endswith("_parsing") or kind == "int_from_float":
        problem = f"the value is {kind_of(given)}; {said}"
    elif path and kind != "value_error" and not isinstance(given, dict | list):
        problem = f"the value is {json.dumps(given)}; {said}"
    else:
        problem = message
    if len(places) > 1:
        more = len(places) - 1
        problem += f" (and {more} more problem{'s' if more > 1 else ''} in this record)"
    hint = _HINTS.get(field_name)
    if hint is None and "step" in message:
        hint = "Give the calls of one step adjacent places in execution order, or drop the step labels"
    if hint is None:
        hint = "See the native trace format in docs/traces.md"
    return record.error(problem, path or None, hint=hint)


def apply_error_pattern(trace: Trace, pattern: Pattern | None) -> Trace:
    """Mark ok calls whose output matches ``--error-pattern`` as failed (logs that only say 'Error: ...')."""
    if pattern is None:
        return trace
    for call in trace.calls:
        if call.status == "ok" and call.output is not None and pattern.search(text_of(call.output)):
            call.status = "error"
            if call.error is None:
                call.error = text_of(call.output)
    return trace


# --- building a trace from a conversation -----------------------------------------------------------------


class TraceBuilder:
    """Collect calls, results and messages of one conversation in order, then validate one native Trace.

    Results are matched to calls by id; a result whose id matches no open call is an InputError naming the
    record; a call that never got a result is kept as failed, so a prerequisite that never completed is not
    taken for one that did. A call without an id (and not ``answered`` where it stands) can never get one:
    it is failed too (``NEVER_ANSWERED_NO_ID``). Calls still unanswered when the input ends are failed even
    when the input is a session still running: what has not completed has not satisfied anything yet.
    """

    def __init__(self, record: Record, prefix: str, options: Options) -> None:
        self.record = record
        self.prefix = prefix
        self.options = options
        self.calls: list[dict[str, Any]] = []
        self.messages: list[dict[str, Any]] = []
        self.open: dict[str, int] = {}
        self.unanswerable: list[dict[str, Any]] = []  # calls without an id (the dicts: reordering keeps them)
        self.origins: list[tuple[Record, str]] = []  # where each call is in the input, for late errors
        self.step = -1

    def new_step(self) -> int:
        self.step += 1
        return self.step

    def add_call(
        self,
        tool_name: Any,
        arguments: Any,
        call_id: Any,
        path: str,
        *,
        step: int | None = None,
        answered: bool = False,
        name_field: str = ".name",
        **extra: Any,
    ) -> dict[str, Any]:
        if not isinstance(tool_name, str) or not tool_name:
            if tool_name is None:
                problem = "the tool call has no name"
            elif tool_name == "":
                problem = "the tool call's name is empty"
            else:
                problem = f"the tool call's name is {kind_of(tool_name)}, not text"
            raise self.record.error(
                problem,
                at(self.prefix, path) + name_field,
                hint="Every tool call needs the name of the tool it called",
            )
        call: dict[str, Any] = {"tool_name": tool_name, "arguments": arguments}
        if call_id is not None:
            call_id = str(call_id)
            if call_id in self.open:
                raise self.record.error(
                    f"two unanswered calls share the call id {call_id!r}",
                    at(self.prefix, path),
                    hint="Tool call ids must be unique within a conversation",
                )
            call["id"] = call_id
            if not answered:
                self.open[call_id] = len(self.calls)
        elif not answered:
            self.unanswerable.append(call)
        if step is not None:
            call["step"] = step
        call.update({k: v for k, v in extra.items() if v is not None})
        self.origins.append((self.record, at(self.prefix, path)))
        self.calls.append(call)
        return call

    def add_result(
        self, call_id: Any, output: Any, path: str, *, is_error: bool = False, error: Any = None
    ) -> None:
        key = None if call_id is None else str(call_id)
        index = self.open.pop(key, None) if key is not None else None
        if index is None:
            known = ", ".join(repr(k) for k in self.open) or "none"
            raise self.record.error(
                f"a tool result answers call id {call_id!r}, which matches no earlier unanswered call "
                f"(open call ids: {known})",
                at(self.prefix, path),
                hint="Every tool result must follow the tool call with the same id; check that the "
                "conversation is complete and in order",
            )
        self.set_result(self.calls[index], output, is_error=is_error, error=error)

    def set_result(
        self, call: dict[str, Any], output: Any, *, is_error: bool = False, error: Any = None
    ) -> None:
        call["output"] = output
        pattern = self.options.error_pattern
        if is_error or (pattern is not None and pattern.search(text_of(output))):
            call["status"] = "error"
            call["error"] = error if error is not None else text_of(output)
        elif error is not None:
            call["status"] = "error"
            call["error"] = error

    def add_message(self, role: str, content: Any, **extra: Any) -> None:
        if content is None or content == "" or content == []:
            return
        message = {"role": role, "content": content, "at": len(self.calls)}
        message.update({k: v for k, v in extra.items() if v is not None})
        self.messages.append(message)

    def build(self, trace_id: Any, metadata: dict[str, Any] | None = None) -> Trace:
        for call_id, index in self.open.items():
            call = self.calls[index]
            call["status"] = "error"
            call["error"] = NEVER_ANSWERED.format(id=call_id)
        for call in self.unanswerable:
            if call.get("status") != "error":  # (an importer may have failed it with its own reason)
                call["status"] = "error"
                call["error"] = NEVER_ANSWERED_NO_ID
        self.open = {}
        self.unanswerable = []
        data: dict[str, Any] = {"trace_id": None if trace_id is None else str(trace_id), "calls": self.calls}
        if self.messages:
            data["messages"] = self.messages
        if metadata:
            data["metadata"] = metadata
        try:
            return Trace.model_validate(data)
        except ValidationError as exc:
            loc = tuple(exc.errors(include_url=False)[0].get("loc", ()))
            if len(loc) >= 2 and loc[0] == "calls" and isinstance(loc[1], int) and loc[1] < len(self.origins):
                # Name the call where the input has it, not where the native trace would.
                record, path = self.origins[loc[1]]
                raise validation_error(exc, record, path, drop=2) from None
            raise validation_error(exc, self.record, self.prefix) from None


def decode_arguments(value: Any) -> tuple[dict[str, Any], Any]:
    """Tool arguments as an object, plus the raw value when it was not a JSON object.

    Models sometimes emit arguments that are not valid JSON; the call still happened, so it is kept with
    ``arguments: {}`` and the text under ``raw_arguments`` rather than rejecting the whole file.
    """
    if value is None or value == "":
        return {}, None
    if isinstance(value, dict):
        return value, None
    if isinstance(value, str):
        try:
            decoded = json.loads(value)
        except ValueError:
            return {}, value
        if isinstance(decoded, dict):
            return decoded, None
    return {}, value


# --- conversations (shared by the OpenAI and Anthropic importers) -----------------------------------------


def split_records(value: Any, is_message: Any) -> Iterator[tuple[int | None, Any]]:
    """A record holds one conversation (a message list, or an object holding one) or a list of objects that
    each hold one (tau-bench's results file); yield (index or None, conversation record)."""
    if isinstance(value, list) and value and isinstance(value[0], dict) and not is_message(value[0]):
        yield from enumerate(value)
    else:
        yield None, value


def conversation_traces(
    records: Iterable[Record],
    options: Options,
    is_message: Callable[[Any], bool],
    trace: Callable[[Record, Any, str, str, Options], Trace],
) -> Iterator[Trace]:
    """``trace(record, conversation, prefix, default_id, options)`` for every conversation in the records:
    ``prefix`` is the conversation's JSON path in its record, ``default_id`` its id when it gives none."""
    for record in records:
        for index, conversation in split_records(record.value(), is_message):
            prefix = "" if index is None else f"[{index}]"
            yield trace(record, conversation, prefix, record.default_id(index), options)


def items_of(value: Any) -> Iterator[tuple[str, Any]]:
    """A record's items with their paths: each item of a list (``[i]``), else the record itself (``""``)."""
    if isinstance(value, list):
        for i, item in enumerate(value):
            yield f"[{i}]", item
    else:
        yield "", value


def message_list(
    record: Any, options: Options, is_message: Callable[[Any], bool]
) -> tuple[str, list[Any]] | None:
    """The message list a conversation record holds, as (its key, or "" for a bare list; the list)."""
    if isinstance(record, list):
        return "", record
    if isinstance(record, dict) and not is_message(record):
        key = options.messages_key or "messages"
        if isinstance(record.get(key), list):
            return key, record[key]
    return None


def message_list_trace(
    record: Record,
    conversation: Any,
    prefix: str,
    default_id: str,
    options: Options,
    is_message: Callable[[Any], bool],
    read: Callable[[TraceBuilder, str, Any], object],
) -> Trace:
    """One conversation of messages as a trace: ``read(builder, path, message)`` for each message in order;
    the record's other keys become metadata; fails closed on tool activity that became no call."""
    found = message_list(conversation, options, is_message)
    if found is None:
        raise no_conversation(record, conversation, prefix, options)
    key, messages = found
    builder = TraceBuilder(record, prefix, options)
    for i, message in enumerate(messages):
        read(builder, f"{key}[{i}]", message)
    skip = (key,) if key else ()
    trace = builder.build(record_trace_id(conversation, default_id), record_metadata(conversation, *skip))
    return require_calls(trace, messages, record, prefix, options)


def no_conversation(record: Record, conversation: Any, prefix: str, options: Options) -> InputError:
    """The error for a record whose conversation has no message list where one was expected."""
    key = options.messages_key or "messages"
    return record.error(
        f"this record holds no conversation: it is {kind_of(conversation)}, without a message list under "
        f"'{key}'",
        prefix or None,
        hint="Give a list of messages, or objects holding one under 'messages' (or the key named with "
        "--messages-key)",
    )


def record_metadata(record: Any, *skip: str) -> dict[str, Any]:
    """A conversation record's other keys, kept as the trace's metadata."""
    if not isinstance(record, dict):
        return {}
    return {k: v for k, v in record.items() if k not in skip and k != "trace_id"}


def record_trace_id(record: Any, default: str) -> str:
    """A record's own ``trace_id`` when it has one, else the default (file and line or index)."""
    if isinstance(record, dict):
        given = record.get("trace_id")
        if isinstance(given, str | int) and not isinstance(given, bool) and given != "":
            return str(given)
    return default


# --- failing closed: tool activity that became no call --------------------------------------------------

# Keys and values that mean "a tool was called here" in the formats we know of (and in ones we do not).
_ACTIVITY_KEYS = {"tool_calls", "tool_call_id", "tool_use_id", "function_call", "toolCallId", "tool_call"}
_ACTIVITY_TYPES = {
    "tool_use",
    "tool_result",
    "server_tool_use",
    "mcp_tool_use",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "tool-call",
    "tool-result",
    "tool_call",
    "tool-return",
}
_ACTIVITY_ROLES = {"tool", "function", "ipython"}
_ACTIVITY_LIMIT = 100_000  # JSON nodes looked at; enough to find a marker, bounded on a huge record


def tool_activity(value: Any) -> str | None:
    """Describe the tool activity ``value`` holds ("2 'tool_use' blocks, 1 role 'tool' message"), or None.

    Used only when a trace came out with no call, to tell an agent that called no tool from calls an importer
    could not read.
    """
    found: Counter[str] = Counter()
    stack = [value]
    seen = 0
    while stack and seen < _ACTIVITY_LIMIT:
        item = stack.pop()
        seen += 1
        if isinstance(item, dict):
            for key in _ACTIVITY_KEYS.intersection(item):
                if item[key]:
                    found[f"'{key}' key"] += 1
            kind = item.get("type")
            if isinstance(kind, str) and kind in _ACTIVITY_TYPES:
                found[f"'{kind}' item"] += 1
            if item.get("role") in _ACTIVITY_ROLES:
                found[f"role '{item['role']}' message"] += 1
            stack.extend(v for v in item.values() if isinstance(v, dict | list))
        elif isinstance(item, list):
            stack.extend(v for v in item if isinstance(v, dict | list))
    if not found:
        return None
    return ", ".join(f"{n} {what}{'s' if n > 1 else ''}" for what, n in found.most_common(4))


def require_calls(trace: Trace, source: Any, record: Record, path: str, options: Options) -> Trace:
    """Fail closed: a trace with no call whose ``source`` holds tool activity is an error (--allow-empty
    lets it through, counted)."""
    if trace.calls:
        return trace
    activity = tool_activity(source)
    if activity is None:
        return trace
    if options.allow_empty:
        options.stats.skip("traces with tool activity but no readable call (--allow-empty)")
        return trace
    raise no_calls_error(record, path, activity, options)


def no_calls_error(record: Record, path: str | None, activity: str, options: Options) -> InputError:
    forced = f"the format was forced to {options.format}" if options.format else "the format was detected"
    return record.error(
        f"this trace came out with no tool call, but the input holds tool activity ({activity}); {forced}",
        path or None,
        hint="Check the format (-v says which was chosen and why; --trace-format NAME picks another); pass "
        "--allow-empty to accept traces without calls",
    )


# --- telling OpenAI from Anthropic conversations ------------------------------------------------------------

_ANTHROPIC_BLOCKS = {
    "tool_use",
    "server_tool_use",
    "mcp_tool_use",
    "tool_result",
    "mcp_tool_result",
    "thinking",
    "redacted_thinking",
}
_OPENAI_ROLES = {"tool", "function", "developer"}
_RESPONSES_ITEMS = {
    "reasoning",
    "item_reference",
    "compaction",
    "function_call_output",
    "custom_tool_call_output",
}


def dialect(item: Any) -> str | None:
    """'anthropic' or 'openai' when a message (or Responses item) carries a mark only that API has, else
    None (a text-only message reads the same in both)."""
    if not isinstance(item, dict):
        return None
    kind = item.get("type")
    if isinstance(kind, str) and (kind in _RESPONSES_ITEMS or kind.endswith(("_call", "_call_output"))):
        return "openai"  # a Responses item: function_call, reasoning, web_search_call, ...
    if item.get("role") in _OPENAI_ROLES or item.get("tool_calls") or item.get("function_call"):
        return "openai"
    content = item.get("content")
    if isinstance(content, list):
        for block in content:
            block_type = block.get("type") if isinstance(block, dict) else None
            if not isinstance(block_type, str):
                continue
            if block_type in _ANTHROPIC_BLOCKS or block_type.endswith("_tool_result"):
                return "anthropic"
            if block_type in ("input_text", "output_text", "image_url", "input_image", "refusal"):
                return "openai"
    return None


def conversation_level(items: Iterable[Any], own: str) -> int:
    """YES when the items carry ``own``'s marks, NO when another dialect's (or a non-object), else MAYBE."""
    level = MAYBE
    for item in items:
        if not isinstance(item, dict):
            return NO
        mark = dialect(item)
        if mark is None:
            continue
        if mark != own:
            return NO
        level = YES
    return level


def combine_levels(levels: Iterable[int]) -> int:
    """One record's level from its conversations': NO if any is NO, YES if any is YES, else MAYBE."""
    result = NO
    for level in levels:
        if level == NO:
            return NO
        result = max(result, level)
    return result
