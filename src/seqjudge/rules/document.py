"""Reading a YAML or JSON file into plain data, with the line of every value.

``read_document`` turns every way a file can fail to read (missing, unreadable, not UTF-8, bad syntax,
a repeated key, more than one YAML document, empty) into an ``InputError`` naming the file and, where it
can, the line. Repeated keys are errors because both loaders silently keep the last one. The ``LineMap``
kept beside the data lets later messages name the line of a path such as ``rules[2].first``.

Rule files and tool catalogs are both read here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from seqjudge.errors import InputError
from seqjudge.sizes import EXPANDED_CHARS

__all__ = ["Document", "LineMap", "Loc", "read_document"]

Loc = tuple[str | int, ...]


class LineMap:
    """Maps a path inside the loaded data (``('rules', 2, 'first')``) to its 1-based line in the file.

    Built from the node tree of ``yaml.compose``; JSON files are composed the same way when PyYAML can
    read them (nearly always), else there are no lines and messages give the path alone.
    """

    def __init__(self, root: yaml.Node | None = None) -> None:
        self.root = root

    def line(self, loc: Loc, *, key: bool = False) -> int | None:
        """The line of the value at ``loc`` (of its key if ``key``), or of its nearest existing parent."""
        node = self.root
        if node is None:
            return None
        for i, seg in enumerate(loc):
            last = i == len(loc) - 1
            if isinstance(node, yaml.MappingNode):
                for k, v in node.value:
                    if isinstance(k, yaml.ScalarNode) and k.value == str(seg):
                        if last and key:
                            return int(k.start_mark.line) + 1
                        node = v
                        break
                else:
                    break
            elif isinstance(node, yaml.SequenceNode) and isinstance(seg, int) and 0 <= seg < len(node.value):
                node = node.value[seg]
            else:
                break
        return int(node.start_mark.line) + 1


@dataclass
class Document:
    """A file's data, its ``LineMap`` and the name messages give the file."""

    data: Any
    lines: LineMap
    source: str


def _find_duplicate_key(root: yaml.Node | None) -> tuple[str, int, int] | None:
    """(key, line, first line) of the first mapping that repeats a key: loaders keep the last silently."""
    if root is None:
        return None
    stack = [root]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            firsts: dict[str, int] = {}
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.tag != "tag:yaml.org,2002:merge":
                    if k.value in firsts:
                        return k.value, k.start_mark.line + 1, firsts[k.value]
                    firsts[k.value] = k.start_mark.line + 1
                stack.append(v)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(reversed(node.value))
    return None


# YAML aliases share one node wherever they are used, so a small file can stand for an enormous value
# ("a billion laughs"): 738 bytes became 80 MB of judge prompt per trace. The value a file stands for is
# counted with every alias expanded, and refused past this many nodes (a real rule file has thousands), or
# past ``sizes.EXPANDED_CHARS`` characters of text: a few nodes can stand for gigabytes too (a 100 KB
# description reused through 20,000 aliases).
MAX_EXPANDED_NODES = 100_000
_ALIAS_HINT = "Write the values out, or use fewer nested aliases (anchors &name reused as *name)"


def _alias_problem(root: yaml.Node | None, source: str) -> InputError | None:
    """The error when aliases make the document expand past ``MAX_EXPANDED_NODES`` nodes or
    ``EXPANDED_CHARS`` characters, or refer to themselves; None otherwise. Each distinct node is sized
    once, so this costs the file's own size."""
    if root is None:
        return None
    max_chars = EXPANDED_CHARS.value()
    size: dict[int, int] = {}
    chars: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in size:
            continue
        kids: list[yaml.Node] = []
        if isinstance(node, yaml.MappingNode):
            kids = [n for pair in node.value for n in pair]
        elif isinstance(node, yaml.SequenceNode):
            kids = list(node.value)
        where = f"line {node.start_mark.line + 1}"
        if not children_done:
            if id(node) in open_nodes:
                return InputError(
                    "an alias refers to a value that contains it",
                    source=source,
                    where=where,
                    hint=_ALIAS_HINT,
                )
            open_nodes.add(id(node))
            stack.append((node, True))
            stack.extend((k, False) for k in kids if id(k) not in size)
            continue
        open_nodes.discard(id(node))
        total = 1 + sum(size[id(k)] for k in kids)
        if total > MAX_EXPANDED_NODES:
            return InputError(
                f"with its aliases (*name) expanded, this value holds more than {MAX_EXPANDED_NODES:,} "
                "values",
                source=source,
                where=where,
                hint=_ALIAS_HINT,
            )
        text = len(node.value) if isinstance(node, yaml.ScalarNode) else sum(chars[id(k)] for k in kids)
        if text > max_chars:
            return EXPANDED_CHARS.exceeded(
                "with its aliases (*name) expanded, this value's text", max_chars, source=source, where=where
            )
        size[id(node)] = total
        chars[id(node)] = text
    return None


class _DuplicateJSONKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateJSONKey(k)
        out[k] = v
    return out


def _compose(text: str) -> yaml.Node | None:
    loader = yaml.SafeLoader(text)
    try:
        return loader.get_single_node()
    finally:
        loader.dispose()


def read_document(path: str | Path, *, what: str = "rule file") -> Document:
    """Read a YAML or JSON file into plain data plus a ``LineMap``; every failure is an ``InputError``.

    ``.json`` is read as JSON; any other suffix as YAML, which also reads JSON.
    """
    p = Path(path)
    source = str(path)
    try:
        text = p.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError(
            f"no such {what}", source=source, hint="Check the path and the current directory"
        ) from None
    except IsADirectoryError:
        raise InputError(
            f"is a directory, not a {what}", source=source, hint="Give the path of the file"
        ) from None
    except PermissionError:
        raise InputError(
            f"cannot read the {what}: permission denied", source=source, hint="Check the file's permissions"
        ) from None
    except UnicodeDecodeError as exc:
        raise InputError(
            f"the {what} is not UTF-8 text (byte {exc.start} cannot be decoded)",
            source=source,
            hint="Save the file as UTF-8",
        ) from None
    except OSError as exc:
        raise InputError(
            f"cannot read the {what}: {exc.strerror or exc}", source=source, hint="Check the path"
        ) from None
    if not text.strip():
        raise InputError(f"the {what} is empty", source=source, hint=_empty_hint(what))
    if p.suffix.lower() == ".json":
        return _read_json(text, source, what)
    return _read_yaml(text, source, what)


def _empty_hint(what: str) -> str:
    if what == "catalog":
        return 'Write {"tools": [...]} or a list of tool definitions'
    return "Write `rules:` followed by a list of rules"


def _read_json(text: str, source: str, what: str) -> Document:
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"invalid JSON: {exc.msg}",
            source=source,
            where=f"line {exc.lineno}, column {exc.colno}",
            hint="Fix the JSON syntax there (a missing comma, quote or bracket is the usual cause)",
        ) from None
    except _DuplicateJSONKey as exc:
        where = None
        try:
            dup = _find_duplicate_key(_compose(text.replace("\t", " ")))
        except yaml.YAMLError:
            dup = None
        if dup is not None:
            where = f"line {dup[1]}"
            hint = f"The key {exc.key!r} was first given on line {dup[2]}; keep one of them"
        else:
            hint = f"Keep one {exc.key!r} per object"
        raise InputError(f"duplicate key {exc.key!r}", source=source, where=where, hint=hint) from None
    try:
        # In valid JSON a raw tab can only be whitespace (inside strings it must be escaped), and PyYAML
        # rejects tabs where JSON allows them: spaces keep every line and column where it was.
        root = _compose(text.replace("\t", " "))
    except yaml.YAMLError:
        root = None  # valid JSON that PyYAML cannot read (rare): messages fall back to paths
    return Document(data, LineMap(root), source)


def _read_yaml(text: str, source: str, what: str) -> Document:
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        dup = _find_duplicate_key(node)
        if dup is not None:
            raise InputError(
                f"duplicate key {dup[0]!r}",
                source=source,
                where=f"line {dup[1]}",
                hint=f"The key {dup[0]!r} was first given on line {dup[2]}; keep one of them",
            )
        aliased = _alias_problem(node, source)
        if aliased is not None:
            raise aliased
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else None
        problem = exc.problem or exc.context or "cannot be parsed"
        if exc.context and exc.problem:
            problem = f"{exc.problem} ({exc.context})"
        if "expected a single document" in str(exc.context or ""):
            problem = "the file holds more than one YAML document"
            hint = "Remove the '---' separator: one file holds one rule set"
        else:
            hint = "Check the indentation, quoting and brackets there (a ': ' inside a value needs quotes)"
        raise InputError(f"invalid YAML: {problem}", source=source, where=where, hint=hint) from None
    except yaml.YAMLError as exc:
        raise InputError(f"invalid YAML: {exc}", source=source, hint="Check the file's syntax") from None
    finally:
        loader.dispose()
    if data is None:
        raise InputError(f"the {what} is empty", source=source, hint=_empty_hint(what))
    return Document(data, LineMap(node), source)
