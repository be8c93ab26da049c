"""seqjudge: did an agent call its tools in an order that respects the rules?

Public API: ``load_rules(path)``, ``load_traces(path)``, ``check(trace, rules) -> Report``.
"""

from __future__ import annotations

from collections.abc import Iterator
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seqjudge.version import __version__

if TYPE_CHECKING:
    from seqjudge.report import Report
    from seqjudge.rules.model import RuleSet
    from seqjudge.trace import Call, Message, Trace

# The models load on first use (PEP 562), so that `import seqjudge.cli` and `seqjudge --help` do not pay
# for pydantic and the rule model; `from seqjudge import Trace` works as before.
_LAZY = {
    "Call": "seqjudge.trace",
    "Message": "seqjudge.trace",
    "Trace": "seqjudge.trace",
    "Report": "seqjudge.report",
    "RuleSet": "seqjudge.rules.model",
}

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


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'seqjudge' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


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
