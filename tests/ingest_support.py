"""Helpers the ingest tests share: write an input file, and JSONL text from records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def lines(*records: Any) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)
