"""`seqjudge check --format sarif`: the violations as one SARIF 2.1.0 log, for code-scanning tools.

One result per violation: ``ruleId`` the rule's id, ``level`` from its severity (critical -> error, warning ->
warning), the message the FAIL block's Why (with what was expected and what happened). Its location is the
trace's file and the line its record starts on when it was read from a JSONL file; for other inputs, the
file when the traces came from one file (a folder or stdin names no single file); the trace and the call
(0-based, as in every machine output) always go in a logical location, ``TRACE_ID/calls[N]``. Every rule
of the rule set is described once in ``tool.driver.rules``. The log is written as it goes: the tool and its
rules first, then each trace's results as they come, then the invocation and the summary. What the engine
could not decide (deferred ``judge`` rules, traces routed to review) is counted in the run's properties
and named in a notification, never left out silently.
"""

from __future__ import annotations

import json
import re
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import IO, Any

from seqjudge.checkpool import Checked, Origin
from seqjudge.outputs.check import CheckOutput, deferred_note
from seqjudge.outputs.textview import Totals
from seqjudge.rules.model import RuleSet
from seqjudge.safetext import json_bytes
from seqjudge.trace import PlainTrace, Trace

SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
LEVELS = {"critical": "error", "warning": "warning"}
# A JSONL trace without its own id is named after where it was read: FILE:LINE, or FILE:LINE[INDEX] for
# one of several conversations on that line (ingest.base.Record.default_id).
_DEFAULT_ID = re.compile(r"^(?P<file>.+):(?P<line>\d+)(\[\d+\])?$")


def _version() -> str:
    try:
        return version("seqjudge")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree that was never installed
        return "unknown"


def _uri(path: str) -> str:
    p = Path(path)
    return p.as_uri() if p.is_absolute() else p.as_posix()


class SarifOutput(CheckOutput):
    def __init__(self, out: IO[str], **settings: Any) -> None:
        super().__init__(out, **settings)
        ruleset: RuleSet = settings["ruleset"]
        source: str = settings["source"]
        # Every rule of the rule set is described once, up front, so that a worker knows each ruleIndex.
        self.rules = [
            {
                "id": r.rule_id,
                "shortDescription": {"text": r.description or r.describe()},
                "defaultConfiguration": {"level": LEVELS[r.severity]},
                "properties": {"type": r.type},
            }
            for r in ruleset.rules
        ]
        self.index = {r["id"]: n for n, r in enumerate(self.rules)}
        self.one_file = source != "-" and Path(source).is_file()
        self.folder = source != "-" and Path(source).is_dir()
        self._files: dict[Path, bool] = {}  # one stat per file, not per violation

    def _is_file(self, path: Path) -> bool:
        if path not in self._files:
            self._files[path] = path.is_file()
        return self._files[path]

    def _physical(self, trace_id: str, origin: Origin | None) -> dict[str, Any] | None:
        """The trace's file and line: where its record starts when it was read from a JSONL file, else the
        file alone when the traces came from one (or the line its default id gives); None when unknown."""
        if self.source == "-":
            return None
        file: Path | None = None
        line = None
        if origin is not None:
            file, line = Path(origin[0]), origin[1]
        else:
            root = Path(self.source)
            file = root if self.one_file else None
            found = _DEFAULT_ID.match(trace_id)
            if found is not None:
                # Default ids are FILE:LINE with FILE relative to a folder argument, or the file's own name.
                named = (
                    root / found["file"] if self.folder else (root if found["file"] == root.name else None)
                )
                if named is not None and self._is_file(named):
                    file, line = named, int(found["line"])
        if file is None:
            return None
        physical: dict[str, Any] = {"artifactLocation": {"uri": _uri(str(file))}}
        if line is not None:
            physical["region"] = {"startLine": line}
        return physical

    def render(self, trace: Trace | PlainTrace, data: dict[str, Any], origin: Origin | None) -> bytes:
        """The trace's results, one JSON object a line, each ending in a comma (``line`` strips the last)."""
        if not data["violations"]:
            return b""
        trace_id = data["trace_id"]
        physical = self._physical(trace_id, origin)
        parts = []
        for v in data["violations"]:
            call = v["offending_call_index"]
            where = f"{trace_id}/calls[{call}]" if call is not None else trace_id
            location: dict[str, Any] = {
                "logicalLocations": [{"name": where, "fullyQualifiedName": where, "kind": "member"}]
            }
            if physical is not None:
                location["physicalLocation"] = physical
            result = {
                "ruleId": v["rule_id"],
                "ruleIndex": self.index[v["rule_id"]],
                "level": LEVELS[v["severity"]],
                "message": {
                    "text": f"{trace_id}: {v['explanation']} Expected: {v['expected_order']}. "
                    f"Actual: {v['actual_order']}."
                },
                "locations": [location],
                "properties": {
                    "traceId": trace_id,
                    "callIndex": call,
                    "violationType": v["violation_type"],
                    "verdict": data["verdict"],
                },
            }
            parts.append(b",\n        " + json_bytes(result))
        return b"".join(parts)

    def start(self) -> None:
        super().start()
        head = {
            "$schema": SCHEMA,
            "version": "2.1.0",
            "runs": [{"tool": {"driver": {"name": "seqjudge", "version": _version(), "rules": self.rules}}}],
        }
        text = json.dumps(head, ensure_ascii=False, indent=2)
        # Open the run's object after its tool: results stream in, the rest follows them in finish.
        self._write(text[: text.rindex("}\n  ]")].rstrip().encode() + b',\n      "results": [')
        self._first = True

    def line(self, checked: Checked) -> None:
        if checked.line:
            self._write(checked.line[1:] if self._first else checked.line)  # no comma before the first
            self._first = False

    def finish(self, totals: Totals) -> None:
        deferred = deferred_note(totals)
        notes = [{"level": "note", "message": {"text": deferred}}] if deferred else []
        if totals.verdicts["review"]:
            notes.append(
                {
                    "level": "note",
                    "message": {"text": f"{totals.verdicts['review']} trace(s) routed to review."},
                }
            )
        tail = {
            "invocations": [{"executionSuccessful": True, "toolExecutionNotifications": notes}],
            "properties": {"summary": totals.as_dict()},
        }
        body = json.dumps(tail, ensure_ascii=False, indent=2)[1:-1].strip("\n").replace("\n", "\n    ")
        self._write(("\n      ],\n    " + body + "\n    }\n  ]\n}\n").encode())
