"""Tool catalogs: the tools an agent may call, read from the formats people already have.

Accepted (JSON or YAML):
- tau's ``{"tools": [{name, kind, description, parameters, returns}]}`` (parameters: name -> spec);
- an OpenAI tools list ``[{type: function, function: {name, description, parameters}}]`` (chat completions)
  or the flat ``[{type: function, name, description, parameters}]`` (responses API);
- an Anthropic tools list ``[{name, description, input_schema}]``.
Each list may also stand under ``{"tools": ...}``. ``parameters`` is normalised to the JSON schema's
``properties`` (argument name -> schema) whatever the source, so that later code sees one shape.
Other keys of a vendor's tool entry (``strict``, ``cache_control``, ...) are vendor settings and are ignored;
the catalog's own structure is strict: a missing name, a wrong type or a repeated name is an error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from seqjudge.errors import InputError
from seqjudge.rules.load import InputProblems, LineMap, describe, fmt_loc, read_document, suggest

Kind = Literal["read", "write", "generic"]
KINDS: tuple[str, ...] = ("read", "write", "generic")


class ToolSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    kind: Kind | None = None
    description: str | None = None
    parameters: dict[str, Any] = Field(default_factory=dict)


class Catalog(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tools: dict[str, ToolSpec]
    source: str | None = None

    def names(self) -> list[str]:
        return list(self.tools)

    def __contains__(self, name: object) -> bool:
        return name in self.tools

    def closest(self, name: str) -> str | None:
        """The catalog name a misspelt tool name most likely meant."""
        return suggest(name, self.names())


class _CatalogParser:
    def __init__(self, source: str, lines: LineMap) -> None:
        self.source = source
        self.lines = lines
        self.problems: list[InputError] = []

    def add(self, loc: tuple[str | int, ...], problem: str, hint: str) -> None:
        text = fmt_loc(loc)
        line = self.lines.line(loc)
        where = (f"line {line} ({text})" if text else f"line {line}") if line else (text or "top level")
        hint = hint[:1].upper() + hint[1:]
        self.problems.append(InputError(problem, source=self.source, where=where, hint=hint))

    def parse(self, data: Any) -> dict[str, ToolSpec]:
        loc: tuple[str | int, ...] = ()
        items = data
        if isinstance(data, dict):
            hint = 'a catalog is {"tools": [...]} or a list of tool definitions'
            extra = [k for k in data if k != "tools"]
            for key in extra:
                guess = suggest(key, ["tools"])
                problem = f"unexpected key {key!r} in the catalog" + (
                    f" (did you mean {guess!r}?)" if guess else ""
                )
                self.add((key,), problem, hint)
            if "tools" not in data:
                self.add((), "the catalog has no 'tools' key", hint)
            if extra or "tools" not in data:
                return {}
            items, loc = data["tools"], ("tools",)
        if not isinstance(items, list):
            self.add(
                loc,
                f"the catalog's tools must be a list, got {describe(items)}",
                'write {"tools": [{"name": ..., "description": ..., "parameters": {...}}]}',
            )
            return {}
        if not items:
            self.add(loc, "the catalog lists no tools", "add the tools the agent may call")
            return {}
        tools: dict[str, ToolSpec] = {}
        first_at: dict[str, int] = {}
        for i, item in enumerate(items):
            spec = self.tool(item, loc + (i,))
            if spec is None:
                continue
            if spec.name in tools:
                self.add(
                    loc + (i, "name"),
                    f"tool {spec.name!r} is listed twice (first as entry {first_at[spec.name]})",
                    "keep one definition per tool name",
                )
                continue
            tools[spec.name] = spec
            first_at[spec.name] = i
        return tools

    def tool(self, item: Any, loc: tuple[str | int, ...]) -> ToolSpec | None:
        if not isinstance(item, dict):
            self.add(
                loc,
                f"a tool must be a mapping with a name, got {describe(item)}",
                'write {"name": "get_user", "description": "...", "parameters": {...}}',
            )
            return None
        body, body_loc = item, loc
        if "function" in item:  # OpenAI chat completions: {type: function, function: {...}}
            body, body_loc = item["function"], loc + ("function",)
            if item.get("type", "function") != "function":
                self.add(
                    loc + ("type",),
                    f"an OpenAI tool must have type 'function', got {describe(item['type'])}",
                    "only function tools name callable tools",
                )
                return None
            if not isinstance(body, dict):
                self.add(
                    body_loc,
                    f"'function' must be a mapping, got {describe(body)}",
                    'write "function": {"name": ..., "parameters": {...}}',
                )
                return None
        name = body.get("name")
        if not isinstance(name, str) or not name.strip():
            got = "no 'name'" if "name" not in body else describe(name)
            self.add(
                body_loc + (("name",) if "name" in body else ()),
                f"a tool needs a non-empty name, got {got}",
                "give every tool its name exactly as the agent calls it",
            )
            return None
        kind = body.get("kind")
        if kind is not None and kind not in KINDS:
            guess = suggest(kind, KINDS)
            extra = f" (did you mean {guess!r}?)" if guess else ""
            self.add(
                body_loc + ("kind",),
                f"tool {name!r}: kind must be read, write or generic, got {describe(kind)}{extra}",
                "use read, write or generic, or remove the key",
            )
            return None
        description = body.get("description")
        if description is not None and not isinstance(description, str):
            self.add(
                body_loc + ("description",),
                f"tool {name!r}: description must be text, got {describe(description)}",
                "write the description as a string",
            )
            return None
        schema_key = "input_schema" if "input_schema" in body else "parameters"
        params = body.get(schema_key)
        if params is None:
            params = {}
        if not isinstance(params, dict):
            self.add(
                body_loc + (schema_key,),
                f"tool {name!r}: {schema_key} must be a mapping, got {describe(params)}",
                "give a JSON schema object or a mapping of argument name to description",
            )
            return None
        return ToolSpec(name=name, kind=kind, description=description, parameters=_properties(params))


def _properties(params: dict[str, Any]) -> dict[str, Any]:
    """A JSON schema object's properties; tau's mapping of argument -> spec is already that."""
    if params.get("type") == "object" or "properties" in params:
        props = params.get("properties") or {}
        return dict(props) if isinstance(props, dict) else {}
    return dict(params)


def load_catalog(path: str | Path) -> Catalog:
    """Read a tool catalog (tau, OpenAI or Anthropic format); every problem is an ``InputError``."""
    doc = read_document(path, what="catalog")
    parser = _CatalogParser(doc.source, doc.lines)
    tools = parser.parse(doc.data)
    if parser.problems:
        raise InputProblems(parser.problems, source=doc.source)
    return Catalog(tools=tools, source=doc.source)
