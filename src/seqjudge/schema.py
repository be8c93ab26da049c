"""JSON Schemas of the two files people write by hand, a rule file and ``seqjudge.yaml``, for YAML editors.

Both are generated from the pydantic models that load the files (``rules.model.RuleSet``,
``config.RunConfig``): one source, so an editor completes and checks exactly the keys seqjudge accepts
(unknown keys are errors in both). ``seqjudge schema rules|config`` prints them; ``seqjudge init`` writes
them beside the starter suite, whose files name them in a ``# yaml-language-server: $schema=...`` comment
(a relative path: it works offline and travels with the suite); the repository's copies under ``schemas/``
are held equal to these by ``tests/test_schema.py``. docs/editors.md says how to use them.

The rule file schema describes the ``rules:`` shape (what ``seqjudge init`` and ``seqjudge migrate``
write); the older shapes still load, with a deprecation warning, but an editor would flag them.
"""

from __future__ import annotations

import json
from typing import Any, Literal

SchemaKind = Literal["rules", "config"]
SCHEMA_KINDS: tuple[str, ...] = ("rules", "config")
# The file each schema is written to (by `seqjudge init`, and under schemas/ in the repository).
SCHEMA_FILES: dict[str, str] = {"rules": "rules.schema.json", "config": "seqjudge.schema.json"}
DIALECT = "https://json-schema.org/draft/2020-12/schema"  # what pydantic generates

_TITLES = {
    "rules": (
        "seqjudge rule file",
        "Rules an agent's tool calls must respect (rules.yaml). Every rule type and its exact meaning: the "
        "reference page docs/rules.md. Generated from seqjudge's rule model: `seqjudge schema rules`.",
    ),
    "config": (
        "seqjudge.yaml",
        "A suite's settings (paths relative to this file); command-line flags override them. Generated "
        "from seqjudge's config model: `seqjudge schema config`.",
    ),
}


def schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of a rule file (``rules``) or of seqjudge.yaml (``config``)."""
    if kind == "rules":
        from seqjudge.rules.model import RuleSet

        data = RuleSet.model_json_schema(by_alias=True)
        # ``source`` is where the loader read the file from, never a key a file may hold.
        data["properties"].pop("source", None)
    elif kind == "config":
        from seqjudge.config import RunConfig

        data = RunConfig.model_json_schema(by_alias=True)
    else:  # the CLI offers only the two; a caller in Python gets the same words
        from seqjudge.errors import InputError

        raise InputError(f"no schema {kind!r}", where="arguments", hint="use rules or config")
    title, description = _TITLES[kind]
    return {"$schema": DIALECT, "title": title, "description": description} | {
        k: v for k, v in data.items() if k not in ("title", "description")
    }


def schema_text(kind: str) -> str:
    """The schema as the file is written: indented JSON, keys in the models' order, a final newline."""
    return json.dumps(schema(kind), indent=2, ensure_ascii=False) + "\n"


def modeline(kind: str, folder: str = ".") -> str:
    """The comment that points yaml-language-server (VS Code's YAML extension, ...) at a schema file in
    ``folder`` (relative to the YAML file)."""
    return f"# yaml-language-server: $schema={folder}/{SCHEMA_FILES[kind]}"
