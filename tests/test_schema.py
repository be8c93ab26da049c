"""Issue 37, point 12: JSON Schemas of rule files and seqjudge.yaml for YAML editors, made from the models.

`jsonschema` is not a dependency, so the files are validated here by a small validator of the keywords
pydantic generates (type, properties, additionalProperties, required, enum, const, $ref, anyOf, oneOf with a
discriminator, items, bounds): enough to show that the bundled and starter files fit the schema and that the
schema rejects what seqjudge rejects (unknown keys, an unknown rule type). They are loaded by seqjudge's own
loaders too.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from seqjudge.cli import run
from seqjudge.config import load_config
from seqjudge.errors import InputError
from seqjudge.inputs import read_rules
from seqjudge.schema import SCHEMA_FILES, schema, schema_text
from seqjudge.starter import starter_files

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "golden_traces"
RULE_FILES = sorted(GOLDEN.glob("*/rules.yaml"))
MODELINE = re.compile(r"^# yaml-language-server: \$schema=(\S+)$")
TYPES = {
    "object": dict,
    "array": list,
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "null": type(None),
}


def problems(value: Any, node: dict[str, Any], root: dict[str, Any], at: str = "$") -> list[str]:
    """Where ``value`` breaks the schema ``node`` (empty: it fits)."""
    if "$ref" in node:
        return problems(value, root["$defs"][node["$ref"].rsplit("/", 1)[1]], root, at)
    if "discriminator" in node:
        tag = value.get(node["discriminator"]["propertyName"]) if isinstance(value, dict) else None
        target = node["discriminator"]["mapping"].get(tag)
        return (
            [f"{at}: no variant for {tag!r}"]
            if target is None
            else problems(value, {"$ref": target}, root, at)
        )
    for key in ("anyOf", "oneOf"):
        if key in node:
            fits = [problems(value, sub, root, at) for sub in node[key]]
            if not any(not f for f in fits):
                return [f"{at}: fits none of {key}: " + " | ".join("; ".join(f) for f in fits)]
    out: list[str] = []
    kind = node.get("type")
    if kind is not None:
        wanted = TYPES[kind]
        if not isinstance(value, wanted) or (kind in ("integer", "number") and isinstance(value, bool)):
            return [f"{at}: not {kind}"]
    if "const" in node and value != node["const"]:
        out.append(f"{at}: not {node['const']!r}")
    if "enum" in node and value not in node["enum"]:
        out.append(f"{at}: not one of {node['enum']}")
    if "minimum" in node and value < node["minimum"]:
        out.append(f"{at}: below {node['minimum']}")
    if "maximum" in node and value > node["maximum"]:
        out.append(f"{at}: above {node['maximum']}")
    if "minLength" in node and len(value) < node["minLength"]:
        out.append(f"{at}: shorter than {node['minLength']}")
    if isinstance(value, dict):
        props = node.get("properties", {})
        out += [f"{at}: {k!r} is required" for k in node.get("required", []) if k not in value]
        extra = node.get("additionalProperties", True)
        for k, v in value.items():
            if k in props:
                out += problems(v, props[k], root, f"{at}.{k}")
            elif extra is False:
                out.append(f"{at}: unknown key {k!r}")
            elif isinstance(extra, dict):
                out += problems(v, extra, root, f"{at}.{k}")
    if isinstance(value, list) and "items" in node:
        for i, item in enumerate(value):
            out += problems(item, node["items"], root, f"{at}[{i}]")
    return out


def fits(data: Any, kind: str) -> list[str]:
    root = schema(kind)
    return problems(data, root, root)


# -- one source: the committed files are the models' ---------------------------------------------------------
@pytest.mark.parametrize("kind", ["rules", "config"])
def test_committed_schema_is_the_generated_one(kind: str) -> None:
    committed = (ROOT / "schemas" / SCHEMA_FILES[kind]).read_text(encoding="utf-8")
    assert committed == schema_text(kind), "regenerate: make schemas (seqjudge schema rules|config -o ...)"


@pytest.mark.parametrize("kind", ["rules", "config"])
def test_schema_command_prints_it(kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["schema", kind]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert {"title", "description", "properties", "type", "additionalProperties"} <= set(printed)
    assert printed["additionalProperties"] is False  # unknown keys are errors, in the editor too
    assert run(["schema", kind, "-o", str(tmp_path / "s.json")]) == 0
    assert (tmp_path / "s.json").read_text(encoding="utf-8") == schema_text(kind)


def test_rule_schema_has_every_rule_type_and_no_internal_key() -> None:
    from seqjudge.rules.model import RULE_TYPES

    rules = schema("rules")
    assert set(rules["properties"]) == {"rules", "aliases", "catalog"}  # not the loader's `source`
    mapping = rules["properties"]["rules"]["items"]["discriminator"]["mapping"]
    assert set(mapping) == set(RULE_TYPES)


def test_config_schema_has_every_config_key() -> None:
    from seqjudge.config import RunConfig

    assert set(schema("config")["properties"]) == set(RunConfig.model_fields)


# -- the files people edit fit it ----------------------------------------------------------------------------
@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.parent.name)
def test_bundled_rule_files_fit_the_schema(path: Path) -> None:
    assert fits(yaml.safe_load(path.read_text(encoding="utf-8")), "rules") == []
    assert read_rules(path).rules  # and seqjudge loads them


def test_starter_files_name_their_schema_and_fit_it(tmp_path: Path) -> None:
    assert run(["init", str(tmp_path)]) == 0
    for name, kind in (("rules.yaml", "rules"), ("seqjudge.yaml", "config")):
        text = (tmp_path / name).read_text(encoding="utf-8")
        match = MODELINE.match(text.splitlines()[0])
        assert match, f"{name} does not start with the yaml-language-server comment"
        referenced = (tmp_path / match.group(1)).resolve()
        assert referenced.name == SCHEMA_FILES[kind]
        assert referenced.read_text(encoding="utf-8") == schema_text(kind)  # init wrote it beside
        assert fits(yaml.safe_load(text), kind) == []
    assert read_rules(tmp_path / "rules.yaml").rules
    assert load_config(tmp_path / "seqjudge.yaml").rules.endswith("rules.yaml")
    assert set(SCHEMA_FILES.values()) <= set(starter_files())


def test_the_schema_files_beside_the_traces_are_not_read_as_traces(tmp_path: Path) -> None:
    assert run(["init", str(tmp_path)]) == 0
    # The folder form reads every .json beside the rules: the schemas are skipped as the suite's own files.
    assert run(["check", str(tmp_path / "rules.yaml"), str(tmp_path), "-q"]) == 1


# -- and it rejects what seqjudge rejects --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kind", "data", "why"),
    [
        ("rules", {"rules": [{"type": "require", "tool": "a", "tol": "b"}]}, "unknown key 'tol'"),
        ("rules", {"rules": [{"type": "requires", "tool": "a"}]}, "no variant for 'requires'"),
        ("rules", {"rules": [{"type": "max_calls", "tool": "a"}]}, "'max' is required"),
        ("rules", {"rules": [{"type": "require", "tool": "a", "severity": "high"}]}, "not one of"),
        ("rules", {"rule": []}, "unknown key 'rule'"),
        ("config", {"rules": "r.yaml", "traces": "t", "stict": True}, "unknown key 'stict'"),
        ("config", {"rules": "r.yaml", "traces": "t", "threshold": 2}, "above 1.0"),
        ("config", {"traces": "t"}, "'rules' is required"),
    ],
)
def test_the_schema_rejects_what_the_loaders_reject(kind: str, data: Any, why: str, tmp_path: Path) -> None:
    found = fits(data, kind)
    assert any(why in p for p in found), found
    path = tmp_path / "f.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(InputError):  # the loader says so too (exit 2)
        read_rules(path) if kind == "rules" else load_config(path)
