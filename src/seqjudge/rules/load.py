"""Rule files: read YAML or JSON, recognise its shape, validate every rule, and say where each problem is.

The public entry points live here; the work is done by one module per job:

- ``rules.document``: reading the file (YAML or JSON, repeated keys) and the ``LineMap`` from a path inside
  the data to its line;
- ``rules.shapes``: the four rule-file shapes (``rules:``, ``tests:``, a dependency spec, v0 ``sequences:``)
  read into one list of rules with unique ids;
- ``rules.messages``: validating each rule and turning pydantic's errors into plain-words problems;
- ``rules.problems``: the shared words of problems (``describe``, ``fmt_loc``, did-you-mean ``suggest``)
  and ``InputProblems``, which carries every problem found in one file.

Every problem becomes an ``InputError`` naming the file, the line and the path inside it (``rules[2].first``),
what was wrong and how to fix it. We collect every problem we can find before raising, so that one run
of ``seqjudge lint`` shows them all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from seqjudge.rules.document import Document, LineMap, read_document
from seqjudge.rules.model import RuleSet
from seqjudge.rules.problems import InputProblems, describe, fmt_loc, suggest
from seqjudge.rules.shapes import SeqjudgeDeprecationWarning, ShapeParser

__all__ = [
    "Document",
    "InputProblems",
    "LineMap",
    "SeqjudgeDeprecationWarning",
    "describe",
    "fmt_loc",
    "load_rules",
    "load_rules_located",
    "parse_rules",
    "read_document",
    "suggest",
]


def _parse(data: Any, source: str, lines: LineMap | None) -> tuple[RuleSet, dict[str, str]]:
    parser = ShapeParser(source, lines)
    parser.parse(data)
    rules, locations = parser.build()
    if parser.problems:
        raise InputProblems(parser.problems, source=source)
    ruleset = RuleSet(
        rules=rules,  # type: ignore[arg-type]
        aliases=parser.aliases,
        catalog=parser.catalog,
        source=None if source == "<memory>" else source,
    )
    return ruleset, locations


def parse_rules(data: Any, source: str = "<memory>", lines: LineMap | None = None) -> RuleSet:
    """Validate already-loaded rule data of any shape. ``lines`` (a ``LineMap``) adds line numbers."""
    return _parse(data, source, lines)[0]


def load_rules_located(path: str | Path) -> tuple[RuleSet, dict[str, str]]:
    """``load_rules`` plus where each rule (by id) and alias (``aliases.NAME``) is written, for lint."""
    doc = read_document(path)
    ruleset, locations = _parse(doc.data, doc.source, doc.lines)
    if ruleset.catalog and not Path(ruleset.catalog).is_absolute():
        # The catalog is named relative to the rule file, wherever seqjudge runs from.
        ruleset.catalog = str(Path(path).parent / ruleset.catalog)
    return ruleset, locations


def load_rules(path: str | Path) -> RuleSet:
    """Load a rule file of any supported shape (YAML or JSON); every problem is an ``InputError``."""
    return load_rules_located(path)[0]
