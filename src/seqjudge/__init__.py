"""seqjudge: did an agent call its tools in an order that respects the rules?

Public API: ``load_rules(path)``, ``load_traces(path)``, ``check(trace, rules) -> Report``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from seqjudge.report import Report
from seqjudge.rules.model import RuleSet
from seqjudge.trace import Call, Message, Trace
from seqjudge.version import __version__

__all__ = [
    "Call",
    "Message",
    "Report",
    "RuleSet",
    "Trace",
    "__version__",
    "check",
    "load_rules",
    "load_traces",
]


def load_rules(path: str | Path) -> RuleSet:
    """Load a rule file of any supported shape (YAML or JSON)."""
    from seqjudge.rules.load import load_rules as _load

    return _load(path)


def load_traces(path: str | Path, **options: Any) -> Iterator[Trace]:
    """Iterate over the traces in a file, a directory or ``-`` (stdin), in any supported format."""
    from seqjudge.ingest import load_traces as _load

    return _load(path, **options)


def check(trace: Trace, rules: RuleSet, **options: Any) -> Report:
    """Evaluate every rule on one trace with the deterministic engine."""
    from seqjudge.rules.engine import check as _check

    return _check(trace, rules, **options)
