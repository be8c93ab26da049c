"""Which rules and traces a result was made from: a calibration is shown beside a run only when both were made
from the same suite (the same rules and the same traces), never beside a run of another dataset.

A ``Suite`` is the dataset's name, a hash of its rules and a hash of its trace ids. A run records the rules'
hash in its fingerprint (``rules_hash``); its trace ids are in the store. `seqjudge calibrate` writes the
suite into its JSON (``suite``) and into its PNG as a text chunk (``SUITE_KEY``), so the plot carries where
it came from wherever it is copied.

This module imports nothing heavy: the report and the CLI read provenance without loading the models.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

SUITE_KEY = "seqjudge-suite"  # the PNG text chunk's keyword, and the key in calibrate's JSON
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def rules_hash(ruleset: Any) -> str:
    """The rules' content, not where the file was: the same rules loaded from two paths hash alike."""
    data = ruleset.model_dump(mode="json", exclude={"source", "catalog"})
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode("utf-8")).hexdigest()


def traces_hash(trace_ids: Iterable[str]) -> str:
    """The set of trace ids (order and repeats do not matter: a resumed run stores each trace once)."""
    return hashlib.sha256("\n".join(sorted(set(trace_ids))).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Suite:
    name: str
    rules: str  # rules_hash
    traces: str  # traces_hash
    count: int  # how many traces

    def same(self, other: Suite) -> bool:
        return self.rules == other.rules and self.traces == other.traces

    def describe(self) -> str:
        return f"{self.name} ({self.count} traces, rules {self.rules[:12]})"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, value: Any) -> Suite | None:
        """The suite a file recorded; None when it recorded none or something else."""
        if not isinstance(value, dict):
            return None
        name, rules, traces, count = (value.get(k) for k in ("name", "rules", "traces", "count"))
        if not (isinstance(name, str) and isinstance(rules, str) and isinstance(traces, str)):
            return None
        if not isinstance(count, int) or isinstance(count, bool):
            return None
        return cls(name, rules, traces, count)


def png_suite(data: bytes) -> Suite | None:
    """The suite recorded in a PNG's ``SUITE_KEY`` text chunk (None for a PNG without one)."""
    text = png_text(data).get(SUITE_KEY)
    if text is None:
        return None
    try:
        return Suite.from_dict(json.loads(text))
    except ValueError:
        return None


def png_text(data: bytes) -> dict[str, str]:
    """The ``tEXt`` chunks of a PNG (keyword -> text); {} for data that is not a PNG or is cut short."""
    if not data.startswith(_PNG_MAGIC):
        return {}
    out: dict[str, str] = {}
    at = len(_PNG_MAGIC)
    while at + 8 <= len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind = data[at + 4 : at + 8]
        body = data[at + 8 : at + 8 + length]
        if len(body) < length or kind == b"IEND":
            break
        if kind == b"tEXt" and b"\0" in body:
            key, _, value = body.partition(b"\0")
            out[key.decode("latin-1")] = value.decode("latin-1")
        at += 12 + length
    return out
