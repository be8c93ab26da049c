"""Render the judge prompt of seed 000 from a trace, a rule set, a catalog, worked examples and a risk level.

The prompt has three parts: ``system``, ``static`` (the same for every trace of a run, so providers can
cache it as a prefix) and ``dynamic`` (the trace, last). Rendering is deterministic: the same inputs give
byte-identical text (sorted keys, no timestamps, no randomness), which the response cache relies on.

The trace is untrusted: its strings are cut to a size cap, it is JSON-encoded one item per line with "<",
">" and line separators escaped, so nothing inside can close the delimiters around it (see the template).
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import math
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import jinja2
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from seqjudge.errors import InputError
from seqjudge.judge.schema import NULLABLE_INDEX_TYPES, JudgeOutput
from seqjudge.report import VIOLATION_TYPES, RiskLevel
from seqjudge.rules.model import ArgsSelector, Operand, RuleSet
from seqjudge.trace import Trace

TEMPLATE_NAME = "sequence_judge.md.j2"
DEFAULT_EXAMPLES = "examples/default.yaml"
MAX_FIELD_CHARS = 2_000
MAX_TRACE_CHARS = 60_000
# Strings of calls in the middle of an over-long trace are first cut to this before calls are elided.
SHORT_FIELD_CHARS = 100
_VERSION_RX = re.compile(r"\{#\s*seqjudge-template-version:\s*([^\s#]+)\s*#\}")


# ----------------------------------------------------------------------------------------------- files


@cache
def prompts_dir() -> Path:
    """The template folder: ``seqjudge/_prompts`` in an installed wheel, ``<repo>/prompts`` in a checkout."""
    packaged = importlib.resources.files("seqjudge") / "_prompts"
    if packaged.is_dir():
        return Path(str(packaged))
    checkout = Path(__file__).resolve().parents[3] / "prompts"
    if checkout.is_dir():
        return checkout
    raise InputError(
        "the judge prompt templates are missing",
        where=str(checkout),
        hint="reinstall seqjudge; a wheel ships them as seqjudge/_prompts",
    )


@lru_cache(maxsize=8)
def _environment(directory: str) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(directory),
        undefined=jinja2.StrictUndefined,  # a missing input is an error, never an empty string in the prompt
        autoescape=False,  # the output is a prompt, not HTML
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def environment() -> jinja2.Environment:
    return _environment(str(prompts_dir()))


def template_info(name: str = TEMPLATE_NAME) -> tuple[jinja2.Template, str, str]:
    """(template, version, sha256 of its source); re-read only when the file changes."""
    path = prompts_dir() / name
    try:
        stat = path.stat()
    except OSError:
        raise InputError(
            "the judge prompt template is missing", where=str(path), hint="reinstall seqjudge"
        ) from None
    version, digest = _source_info(str(path), stat.st_mtime_ns, stat.st_size)
    return environment().get_template(name), version, digest


@lru_cache(maxsize=8)
def _source_info(path: str, _mtime: int, _size: int) -> tuple[str, str]:
    source = Path(path).read_text(encoding="utf-8")
    match = _VERSION_RX.search(source)
    return (match.group(1) if match else "unversioned"), hashlib.sha256(source.encode("utf-8")).hexdigest()


# ------------------------------------------------------------------------------------ data as JSON lines

# JSON never needs a raw "<" or ">" outside strings, and inside strings \u003c / \u003e mean the same; so
# escaped data holds no "<" at all and cannot spell a delimiter. Unicode line separators are escaped too, so
# every data line is exactly one item (json.dumps already escapes the ASCII control characters).
_ESCAPES = (
    ("<", "\\u003c"),
    (">", "\\u003e"),
    ("\u2028", "\\u2028"),
    ("\u2029", "\\u2029"),
    ("\x85", "\\u0085"),
)


# Encoders built once: json.dumps with options builds a new one per call, and a prompt makes dozens of calls.
_DATA_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=str)
_COMPACT_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def data_json(value: Any) -> str:
    """Compact JSON with the escapes above: safe to place between the delimiters. Keys keep their order
    (``cap`` sorts the trace's own dicts; the envelope of each item has a fixed order, kind first)."""
    text = _DATA_JSON.encode(value)
    for raw, escaped in _ESCAPES:  # str.replace is C-fast; str.translate with a dict is not
        if raw in text:
            text = text.replace(raw, escaped)
    return text


def cut_marker(n: int) -> str:
    return f"…[cut {n} chars]"


def cap(value: Any, limit: int) -> Any:
    """Cut every string (and dict key) in ``value`` to ``limit`` characters, with a marker saying how much.
    Dicts come back with sorted keys, so the rendering does not depend on the order a source wrote them in."""
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + cut_marker(len(value) - limit)
    if isinstance(value, bool) or value is None or isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, dict):
        items = sorted(((str(k), v) for k, v in value.items()), key=lambda kv: kv[0])
        return {cap(k, limit): cap(v, limit) for k, v in items}
    if isinstance(value, list | tuple):
        return [cap(v, limit) for v in value]
    return cap(str(value), limit)


def cap_field(value: Any, limit: int) -> Any:
    """``cap``, and a structure whose JSON is still longer than ``limit`` becomes its JSON text, cut once (so
    the marker counts what was really left out)."""
    capped = cap(value, limit)
    if isinstance(capped, dict | list):
        text = _COMPACT_JSON.encode(capped)
        if len(text) > limit:
            # cap() with no limit only normalises: string keys, sorted, non-finite floats as text.
            whole = _COMPACT_JSON.encode(cap(value, sys.maxsize))
            return cap(whole, limit)
    return capped


@dataclass(frozen=True)
class TraceData:
    """The trace as the template shows it."""

    data: str
    nonce: str
    n_calls: int
    n_steps: int
    n_messages: int
    notes: tuple[str, ...]


def _call_item(i: int, step: int, call: Any, limit: int) -> dict[str, Any]:
    item: dict[str, Any] = {
        "kind": "call",
        "index": i,
        "step": step,
        "tool_name": cap(call.tool_name, limit),
        "status": call.status,
        # Each argument on its own: one huge argument must not hide the others.
        "arguments": {cap(k, limit): cap_field(v, limit) for k, v in sorted(call.arguments.items())},
    }
    if call.output is not None:
        item["output"] = cap_field(call.output, limit)
    if call.error is not None:
        item["error"] = cap_field(call.error, limit)
    return item


def _message_item(message: Any, limit: int) -> dict[str, Any]:
    return {
        "kind": "message",
        "at": message.at,
        "role": cap(str(message.role), limit),
        "content": cap_field(message.content, limit),
    }


def _timeline(trace: Trace) -> list[tuple[str, int, Any]]:
    """Calls and messages in the order they happened: a message with ``at = k`` came after k calls."""
    n = len(trace.calls)
    placed: dict[int, list[Any]] = {}
    for m in trace.messages:
        placed.setdefault(n if m.at is None or m.at > n else m.at, []).append(m)
    out: list[tuple[str, int, Any]] = []
    for i, call in enumerate(trace.calls):
        out.extend(("message", i, m) for m in placed.get(i, []))
        out.append(("call", i, call))
    out.extend(("message", n, m) for m in placed.get(n, []))
    return out


def render_trace_data(
    trace: Trace,
    *,
    max_field_chars: int = MAX_FIELD_CHARS,
    max_trace_chars: int = MAX_TRACE_CHARS,
    nonce: bool = True,
) -> TraceData:
    """The trace as JSON lines, capped: long strings cut, then the middle shortened, then elided."""
    steps = trace.steps
    timeline = _timeline(trace)

    def line(kind: str, i: int, obj: Any, limit: int) -> str:
        item = _call_item(i, steps[i], obj, limit) if kind == "call" else _message_item(obj, limit)
        return data_json(item)

    head: list[str] = []
    if trace.context:
        head.append(data_json({"kind": "context", "context": cap_field(trace.context, max_field_chars)}))
    full = [line(k, i, o, max_field_chars) for k, i, o in timeline]
    notes: list[str] = []
    lines = full
    budget = max_trace_chars - sum(len(x) + 1 for x in head)
    if sum(len(x) + 1 for x in full) > budget:
        short_limit = min(SHORT_FIELD_CHARS, max_field_chars)
        short = [line(k, i, o, short_limit) for k, i, o in timeline]
        lines, notes = _fit(timeline, full, short, budget, short_limit)
    body = "\n".join(head + lines)
    # The token is derived from the escaped content, so it is reproducible, yet text inside the trace would
    # have to contain the hash of itself to predict it.
    token = hashlib.sha256(b"seqjudge-trace-data\0" + body.encode("utf-8")).hexdigest()[:24] if nonce else ""
    return TraceData(body, token, len(trace.calls), len(set(steps)), len(trace.messages), tuple(notes))


def _grow(extra: list[int], cost: int, budget: int) -> tuple[int, int]:
    """Alternately take lines from the head and the tail while their extra cost fits the budget."""
    n = len(extra)
    h = t = 0
    moved = True
    while moved:
        moved = False
        for from_head in (True, False):
            if h + t >= n:
                return h, t
            j = h if from_head else n - 1 - t
            if cost + extra[j] <= budget:
                cost += extra[j]
                h, t = (h + 1, t) if from_head else (h, t + 1)
                moved = True
    return h, t


def _fit(
    timeline: list[tuple[str, int, Any]], full: list[str], short: list[str], budget: int, short_limit: int
) -> tuple[list[str], list[str]]:
    """Keep the start and the end of an over-long trace in full; shorten, then elide, the middle."""
    n = len(full)
    short_cost = [len(s) + 1 for s in short]
    if sum(short_cost) <= budget:
        h, t = _grow([len(f) - len(s) for f, s in zip(full, short, strict=True)], sum(short_cost), budget)
        calls = [i for k, i, _ in timeline[h : n - t] if k == "call"]
        note = (
            f"To fit the size limit, the strings of {len(calls)} call(s) and the messages in the middle of "
            "the trace"
            + (f" (calls {calls[0]} to {calls[-1]})" if calls else "")
            + f" are cut to {short_limit} characters."
        )
        return full[:h] + short[h : n - t] + full[n - t :], [note]
    # Even shortened the trace is too long: keep shortened lines from both ends and elide the middle.
    h, t = _grow(short_cost, 200, budget)  # 200: room for the elision line
    middle = timeline[h : n - t]
    calls = [i for k, i, _ in middle if k == "call"]
    messages = len(middle) - len(calls)
    marker: dict[str, Any] = {"kind": "elided", "calls_elided": len(calls), "messages_elided": messages}
    if calls:
        marker["first_index"], marker["last_index"] = calls[0], calls[-1]
    where = f" (indices {calls[0]} to {calls[-1]})" if calls else ""
    note = (
        f"The trace is too long to show in full: {len(calls)} call(s){where} and {messages} message(s) were "
        f"elided from its middle, and the strings of the calls shown are cut to {short_limit} characters. "
        "Judge only what is shown, and say in the summary that calls were elided."
    )
    return short[:h] + [data_json(marker)] + short[n - t :], [note]


# -------------------------------------------------------------------------------------- rules in words


def _name(name: str, aliases: dict[str, list[str]]) -> str:
    return f"`{name}` (an alias: any of its tools)" if name in aliases else f"`{name}`"


def operand_words(op: Operand, aliases: dict[str, list[str]]) -> str:
    """An operand as the judge reads it: "any of `A`, `B`", "`A` whose argument `k` matches ..."."""
    if isinstance(op, str):
        return _name(op, aliases)
    if isinstance(op, ArgsSelector):
        tools = [op.tool] if isinstance(op.tool, str) else op.tool
        base = (
            _name(tools[0], aliases)
            if len(tools) == 1
            else "any of " + ", ".join(_name(t, aliases) for t in tools)
        )
        if not op.args_match:
            return base
        conds = " and ".join(
            f"argument `{k}` matches the regular expression `{v}`" for k, v in sorted(op.args_match.items())
        )
        return f"{base} whose {conds}"
    parts = [operand_words(o, aliases) for o in op]
    return parts[0] if len(parts) == 1 else "any of: " + "; ".join(parts)


def requirement(rule: Any, aliases: dict[str, list[str]]) -> str:
    """What the rule demands, in the engine's exact semantics (see the README), as one paragraph."""
    text: str = rule.requirement(lambda op: operand_words(op, aliases))
    return text


def scope_lines(rule: Any) -> list[str]:
    out: list[str] = []
    same = getattr(rule, "same", None)
    if same:
        args = ", ".join(f"`{a}`" for a in same)
        out.append(
            f"Per value: the rule holds separately for each distinct value of the argument(s) {args}; "
            "only calls carrying that value are considered together, with their positions in the whole "
            "trace. It fails if it fails for any value (name the value in the explanation), and is not "
            "checked if it is exercised for none."
        )
    if rule.when:
        conds = []
        for path, want in sorted(rule.when.items()):
            if isinstance(want, list):
                conds.append(f"`{path}` is one of {json.dumps(want, sort_keys=True, ensure_ascii=False)}")
            else:
                conds.append(f"`{path}` equals {json.dumps(want, sort_keys=True, ensure_ascii=False)}")
        out.append(
            "Applies only when, in the trace's context, "
            + " and ".join(conds)
            + "; otherwise it is not checked."
        )
    return out


def rule_view(rule: Any, aliases: dict[str, list[str]]) -> dict[str, Any]:
    return {
        "id": rule.rule_id,
        "type": rule.type,
        "severity": rule.severity,
        "description": rule.description or rule.describe(),
        "requirement": requirement(rule, aliases),
        "scope": scope_lines(rule),
    }


# ------------------------------------------------------------------------------------- catalog, examples


def catalog_view(catalog: Any) -> list[dict[str, Any]]:
    """A catalog (``rules.catalog.Catalog``, a dict of tools, or ``{"tools": [...]}``) sorted by name."""
    if catalog is None:
        return []
    tools = getattr(catalog, "tools", None)
    if tools is None and isinstance(catalog, dict):
        tools = catalog.get("tools", catalog)
    items: Iterable[Any] = tools.values() if isinstance(tools, dict) else (tools or [])
    out = []
    for spec in items:
        get = spec.get if isinstance(spec, dict) else (lambda k, s=spec: getattr(s, k, None))
        params = get("parameters")
        out.append(
            {
                "name": str(get("name")),
                "kind": get("kind") or "",
                "description": (get("description") or "").strip(),
                "parameters": json.dumps(params, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
                if params
                else "",
            }
        )
    return sorted(out, key=lambda t: t["name"])


def catalog_names(catalog: Any) -> set[str]:
    return {t["name"] for t in catalog_view(catalog)}


class Example(BaseModel):
    """One worked example: a small rule set, a trace and the output the judge should give."""

    model_config = ConfigDict(extra="forbid")

    title: str
    note: str | None = None
    rules: RuleSet
    trace: Trace
    expected: JudgeOutput


class _ExamplesFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    examples: list[Example] = Field(default_factory=list)


def load_examples(path: str | Path | None = None) -> tuple[Example, ...]:
    """Worked examples from a YAML or JSON file (default: the shipped ``examples/default.yaml``)."""
    p = Path(path) if path is not None else prompts_dir() / DEFAULT_EXAMPLES
    try:
        stat = p.stat()
    except OSError as exc:
        raise InputError(
            f"cannot read the examples file ({exc.strerror})",
            source=str(p),
            hint="pass an existing file with --examples",
        ) from None
    # The cached tuple itself: the same object for an unchanged file, so the static prompt memo can hit.
    return _load_examples(str(p), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=16)
def _load_examples(path: str, _mtime: int, _size: int) -> tuple[Example, ...]:
    from seqjudge.judge.validate import semantic_problems

    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(
            f"cannot parse the examples file: {exc}",
            source=path,
            hint="it must be YAML or JSON with a top-level `examples:` list",
        ) from None
    if isinstance(raw, dict):
        for ex in raw.get("examples") or []:
            if isinstance(ex, dict) and isinstance(ex.get("rules"), list):
                ex["rules"] = {
                    "rules": ex["rules"],
                    **({"aliases": ex.pop("aliases")} if "aliases" in ex else {}),
                }
    try:
        parsed = _ExamplesFile.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InputError(
            f"{first['msg']}",
            source=path,
            where=where,
            hint="each example needs title, rules, trace and expected (the judge's JSON)",
        ) from None
    for n, ex in enumerate(parsed.examples):
        rules = {r.rule_id: r.severity for r in ex.rules.rules}
        problems = semantic_problems(ex.expected, rules, len(ex.trace.calls))
        if problems:
            raise InputError(
                "the expected output contradicts its own rules or trace: " + "; ".join(problems),
                source=path,
                where=f"examples.{n}.expected",
                hint="fix the example; the judge learns from it",
            )
    return tuple(parsed.examples)


def example_view(ex: Example) -> dict[str, Any]:
    data = render_trace_data(ex.trace, nonce=False)
    return {
        "title": ex.title,
        "note": (ex.note or "").strip(),
        "rules": [rule_view(r, ex.rules.aliases) for r in ex.rules.rules],
        "trace": data.data,
        "expected": json.dumps(ex.expected.model_dump(mode="json"), ensure_ascii=False, indent=2),
    }


# --------------------------------------------------------------------------------------------- render


@dataclass(frozen=True)
class RenderedPrompt:
    system: str
    static: str
    dynamic: str
    template_version: str
    template_hash: str
    prompt_hash: str
    rule_ids: tuple[str, ...]
    rule_severities: tuple[tuple[str, str], ...]
    n_calls: int
    nonce: str

    @property
    def user(self) -> str:
        """The user content as OpenAI receives it (``JudgeRequest.user_text``): static, then the trace."""
        return "\n\n".join(part for part in (self.static, self.dynamic) if part)

    def text(self) -> str:
        """What ``seqjudge prompt`` prints: the system prompt, then the user content."""
        return f"=== system ===\n{self.system}\n\n=== user ===\n{self.user}\n"


def select_rules(ruleset: RuleSet, rule_ids: Sequence[str] | None) -> list[Any]:
    """The rules the judge is shown: all of them, or those named (in rule-file order)."""
    if rule_ids is None:
        return list(ruleset.rules)
    known = {r.rule_id for r in ruleset.rules}
    unknown = [r for r in rule_ids if r not in known]
    if unknown:
        raise InputError(
            f"unknown rule id(s) for the judge: {', '.join(unknown)}",
            source=ruleset.source,
            hint="use ids from the rule file (`seqjudge lint` lists them)",
        )
    wanted = set(rule_ids)
    return [r for r in ruleset.rules if r.rule_id in wanted]


def render(
    trace: Trace,
    ruleset: RuleSet,
    *,
    catalog: Any = None,
    examples: Any = None,
    risk_level: RiskLevel = "medium",
    rule_ids: Sequence[str] | None = None,
    max_field_chars: int = MAX_FIELD_CHARS,
    max_trace_chars: int = MAX_TRACE_CHARS,
) -> RenderedPrompt:
    """Render the prompt. ``examples``: a path, a list of ``Example``, or None for the shipped examples."""
    if risk_level not in ("low", "medium", "high"):
        raise InputError(f"unknown risk level {risk_level!r}", hint="use low, medium or high")
    rules = select_rules(ruleset, rule_ids)
    if examples is None or isinstance(examples, str | Path):
        examples = load_examples(examples)
    template, version, template_hash = template_info()
    system, static = _static_parts(template, template_hash, ruleset, rules, catalog, examples, risk_level)
    data = render_trace_data(trace, max_field_chars=max_field_chars, max_trace_chars=max_trace_chars)
    # The dynamic block sees only the trace: nothing trace-specific can leak into the cached prefix, and
    # nothing of the prefix is needed after it.
    dynamic = _block(template, "dynamic", {"trace": data})
    prompt_hash = hashlib.sha256("\0".join((system, static, dynamic)).encode("utf-8")).hexdigest()
    return RenderedPrompt(
        system,
        static,
        dynamic,
        version,
        template_hash,
        prompt_hash,
        tuple(r.rule_id for r in rules),
        tuple((r.rule_id, r.severity) for r in rules),
        len(trace.calls),
        data.nonce,
    )


# The system and static parts are the same for every trace of a run; rendering them once per run instead of
# once per trace keeps the harness's own cost per trace small. Keyed on the inputs' identity, with the inputs
# held in the entry so that their ids cannot be reused while it lives.
_STATIC_MEMO: dict[tuple[Any, ...], tuple[tuple[Any, ...], tuple[str, str]]] = {}
_STATIC_MEMO_SIZE = 8


def _static_parts(
    template: jinja2.Template,
    template_hash: str,
    ruleset: RuleSet,
    rules: list[Any],
    catalog: Any,
    examples: Sequence[Example],
    risk_level: str,
) -> tuple[str, str]:
    held = (ruleset, catalog, examples, *rules)
    key = (template_hash, risk_level, *(id(x) for x in held))
    hit = _STATIC_MEMO.get(key)
    if hit is not None and all(a is b for a, b in zip(hit[0], held, strict=True)):
        return hit[1]
    static_vars = {
        "catalog": catalog_view(catalog),
        "rules": [rule_view(r, ruleset.aliases) for r in rules],
        "aliases": [
            {"name": a, "members": ", ".join(f"`{m}`" for m in ruleset.aliases[a])}
            for a in sorted(ruleset.aliases)
        ],
        "examples": [example_view(ex) for ex in examples],
        "risk_level": risk_level,
        "violation_types": list(VIOLATION_TYPES),
        "nullable_types": sorted(NULLABLE_INDEX_TYPES),
    }
    parts = (_block(template, "system", static_vars), _block(template, "static", static_vars))
    if len(_STATIC_MEMO) >= _STATIC_MEMO_SIZE:
        _STATIC_MEMO.pop(next(iter(_STATIC_MEMO)))
    _STATIC_MEMO[key] = (held, parts)
    return parts


def _block(template: jinja2.Template, name: str, variables: dict[str, Any]) -> str:
    # Blocks are sent as separate parts (system text, cached static text, the trace) and joined by the
    # adapters; their edges are trimmed so that the joins alone decide the spacing.
    context = template.new_context(variables)
    return "".join(template.blocks[name](context)).strip("\n")
