"""``seqjudge migrate``: rewrite a v0 ``sequences:`` rule file as shape 1 (``rules:``).

Each v0 sequence ``[A, B, C]`` becomes ``before`` rules for its consecutive pairs (A before B, B before C),
exactly what loading the v0 file yields, so the migrated file loads to the same rules with the same ids.
Other top-level keys (``aliases``, ``catalog``, an existing ``rules:`` list) are kept in their order;
converted rules go where ``sequences:`` was (appended to ``rules:`` when both exist, in file order).
PyYAML does not keep comments, so the header says so rather than dropping them silently.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import yaml

from seqjudge.errors import InputError
from seqjudge.rules.load import SeqjudgeDeprecationWarning, parse_rules, read_document

__all__ = ["NothingToMigrate", "migrate_data", "migrate_text"]


class NothingToMigrate(InputError):
    """The file has no ``sequences:`` key: it is already in the current format."""


def migrate_data(path: str | Path) -> dict[str, Any]:
    """The migrated rule file as data; ``InputError`` if it is bad, ``NothingToMigrate`` if current."""
    doc = read_document(path)
    data = doc.data
    if not isinstance(data, dict) or "sequences" not in data:
        raise NothingToMigrate(
            "has no `sequences:` key, so there is nothing to migrate",
            source=doc.source,
            hint="The file already uses the current format",
        )
    # Validate first (with lines in messages): a broken v0 file must not become a broken v1 file.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeqjudgeDeprecationWarning)
        parse_rules(data, source=doc.source, lines=doc.lines)
    converted = [
        {"type": "before", "first": seq[j], "then": seq[j + 1]}
        for seq in data["sequences"]
        for j in range(len(seq) - 1)
    ]
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key in ("rules", "sequences"):
            merged = out.setdefault("rules", [])
            merged.extend(converted if key == "sequences" else value)
        else:
            out[key] = value
    return out


def migrate_text(path: str | Path, *, fmt: str = "yaml") -> str:
    """The migrated file as YAML (with a header comment) or, with ``fmt="json"``, as JSON."""
    data = migrate_data(path)
    if fmt == "json":
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    header = (
        f"# Migrated from the v0 `sequences:` form of {Path(path).name} by `seqjudge migrate`.\n"
        "# Each sequence [A, B, ...] became `before` rules for its consecutive pairs.\n"
        "# Comments of the original file are not carried over.\n"
    )
    body = yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True, width=100)
    return header + body
