"""Render the judge prompt of seed 000 from a trace, a rule set, a catalog, worked examples and a risk level.

The prompt has three parts: ``system``, ``static`` (the same for every trace of a run, so providers can
cache it as a prefix) and ``dynamic`` (the trace, last). Rendering is deterministic: the same inputs give
byte-identical text (sorted keys, no timestamps, no randomness), which the response cache relies on.

The trace itself is rendered by ``seqjudge.judge.trace_data`` (untrusted data, capped, escaped).
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import jinja2
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from seqjudge.errors import InputError
from seqjudge.judge.schema import NULLABLE_INDEX_TYPES, JudgeOutput
from seqjudge.judge.trace_data import MAX_FIELD_CHARS as MAX_FIELD_CHARS
from seqjudge.judge.trace_data import MAX_TRACE_CHARS as MAX_TRACE_CHARS
from seqjudge.judge.trace_data import SHORT_OUTPUT_CHARS, Evidence, evidence_of
from seqjudge.judge.trace_data import render_trace_data as render_trace_data
from seqjudge.report import VIOLATION_TYPES, RiskLevel
from seqjudge.rules.base import Wording
from seqjudge.rules.model import ArgsSelector, Operand, RuleSet
from seqjudge.rules.select import compile_operand, expand_name, operand_names
from seqjudge.sizes import PROMPT_CHARS
from seqjudge.trace import Trace

TEMPLATE_NAME = "sequence_judge.md.j2"
DEFAULT_EXAMPLES = "examples/default.yaml"
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


def _spelled(op: Operand, aliases: dict[str, list[str]]) -> str:
    """An operand of plain names as the tools it stands for (aliases expanded), else in words."""
    plain = [op] if isinstance(op, str) else op
    if isinstance(plain, list) and all(isinstance(n, str) for n in plain):
        tools = list(dict.fromkeys(t for n in plain for t in expand_name(str(n), aliases)))
        return ", ".join(f"`{t}`" for t in tools) if len(tools) > 1 else f"`{tools[0]}`"
    return operand_words(op, aliases)


def requirement(rule: Any, aliases: dict[str, list[str]]) -> str:
    """What the rule demands, in the engine's exact semantics (see the README), as one paragraph."""
    say = Wording(lambda op: operand_words(op, aliases), lambda op: _spelled(op, aliases))
    text: str = rule.requirement(say)
    return text


def scope_lines(rule: Any) -> list[str]:
    out: list[str] = []
    same = getattr(rule, "same", None)
    if same:
        args = ", ".join(f"`{a}`" for a in same)
        # What "per value" means is said once, above the rules (PER_VALUE).
        out.append(f"Per value of {args}.")
    if rule.when:
        conds = []
        for path, want in sorted(rule.when.items()):
            if isinstance(want, list):
                conds.append(f"`{path}` is one of {json.dumps(want, sort_keys=True, ensure_ascii=False)}")
            else:
                conds.append(f"`{path}` equals {json.dumps(want, sort_keys=True, ensure_ascii=False)}")
        out.append(
            "Applies only when, in the trace's context (a `metadata.` path: in its metadata), "
            + " and ".join(conds)
            + "; otherwise it is not checked."
        )
    return out


PER_VALUE = (
    '"Per value of `a`": the rule holds separately for each distinct value of the argument(s) named; only '
    "calls carrying that value are considered together, with their positions in the whole trace. It fails "
    "if it fails for any value (name the value in the explanation). Not checked if it is exercised for no "
    "value; a limit (`max_calls`) is always checked."
)


def rule_view(rule: Any, aliases: dict[str, list[str]]) -> dict[str, Any]:
    return {
        "id": rule.rule_id,
        "type": rule.type,
        "severity": rule.severity,
        "description": (rule.description or rule.describe()).strip(),
        "requirement": requirement(rule, aliases),
        "scope": scope_lines(rule),
        "criteria": criteria_text(rule),
    }


def guideline(rule: Any, aliases: dict[str, list[str]]) -> str:
    """A `judge` rule's labelling guideline: its Requirement and criteria, word for word as the prompt has
    them."""
    text = criteria_text(rule)
    return f"Requirement: {requirement(rule, aliases)}" + (f"\n{text}" if text else "")


def criteria_text(rule: Any) -> str:
    """A `judge` rule's criteria and labelled cases as the judge reads them. The same text is the labelling
    guideline of a golden dataset (``seqjudge golden validate`` prints it): one source for both."""
    criteria = getattr(rule, "criteria", None)
    lines: list[str] = []
    if criteria is not None:
        # A rule with applies_to is decided call by call; one without it, on the whole trace.
        subject = "A call" if getattr(rule, "applies_to", None) is not None else "The trace"
        lines.append(f"{subject} passes when all of these hold:")
        lines.extend(f"- {c.strip()}" for c in criteria.pass_)
        lines.append("It fails when any of these holds:")
        lines.extend(f"- {c.strip()}" for c in criteria.fail)
    examples = getattr(rule, "examples", None) or []
    if examples:
        lines.append("Labelled cases:")
        lines.extend(f"- {ex.label}: {' '.join(ex.case.split())}" for ex in examples)
    return "\n".join(lines)


def rule_tools(rules: Sequence[Any], aliases: dict[str, list[str]]) -> set[str] | None:
    """The tools the rules name, aliases expanded; None when some rule may concern any tool (a judge rule
    without ``applies_to``, a blocklist pattern)."""
    from seqjudge.judge.validate import rule_tool_names

    names: set[str] = set()
    for r in rules:
        if r.type == "blocklist" or (r.type == "judge" and r.applies_to is None):
            return None
        names.update(rule_tool_names(r, aliases))
    return names


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
        # No parameter schemas: the calls show their arguments, and no rule reads a schema.
        out.append(
            {
                "name": str(get("name")),
                "kind": get("kind") or "",
                "description": (get("description") or "").strip(),
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
    from seqjudge.rules.document import read_document

    # The rule files' reader: located syntax errors, and aliases bounded before they reach the prompt.
    raw = read_document(path, what="examples file").data
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
        # An examples file written before rule_decisions existed shows none, rather than a null to imitate.
        "expected": json.dumps(
            ex.expected.model_dump(
                mode="json", exclude={"rule_decisions"} if ex.expected.rule_decisions is None else None
            ),
            ensure_ascii=False,
        ),
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
    # Per judge rule with `applies_to`: the indices of the calls it is about (its violations name one).
    rule_calls: tuple[tuple[str, tuple[int, ...]], ...] = ()

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
    system, static, evidence = _static_parts(
        template, template_hash, ruleset, rules, catalog, examples, risk_level
    )
    data = render_trace_data(
        trace, max_field_chars=max_field_chars, max_trace_chars=max_trace_chars, evidence=evidence
    )
    # The dynamic block sees only the trace: nothing trace-specific can leak into the cached prefix, and
    # nothing of the prefix is needed after it.
    dynamic = _block(template, "dynamic", {"trace": data}, ruleset.source, len(system) + len(static))
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
        _rule_calls(trace, rules, ruleset.aliases),
    )


def _rule_calls(
    trace: Trace, rules: Sequence[Any], aliases: dict[str, list[str]]
) -> tuple[tuple[str, tuple[int, ...]], ...]:
    out = []
    for r in rules:
        if r.type == "judge" and r.applies_to is not None:
            # The engine's own selector: the calls it counts are the calls the judge decides.
            about = compile_operand(r.applies_to, aliases)
            out.append((r.rule_id, tuple(i for i, c in enumerate(trace.calls) if about.matches(c))))
    return tuple(out)


# The system and static parts are the same for every trace of a run; rendering them once per run instead of
# once per trace keeps the harness's own cost per trace small. Keyed on the inputs' identity, with the inputs
# held in the entry so that their ids cannot be reused while it lives.
_STATIC_MEMO: dict[tuple[Any, ...], tuple[tuple[Any, ...], tuple[str, str, Evidence]]] = {}
_STATIC_MEMO_SIZE = 8


def _static_parts(
    template: jinja2.Template,
    template_hash: str,
    ruleset: RuleSet,
    rules: list[Any],
    catalog: Any,
    examples: Sequence[Example],
    risk_level: str,
) -> tuple[str, str, Evidence]:
    held = (ruleset, catalog, examples, *rules)
    key = (template_hash, risk_level, *(id(x) for x in held))
    hit = _STATIC_MEMO.get(key)
    if hit is not None and all(a is b for a, b in zip(hit[0], held, strict=True)):
        return hit[1]
    aliases = ruleset.aliases
    evidence = evidence_of(rules, aliases)
    tools = rule_tools(rules, aliases)
    named = {n for r in rules for n in _named_aliases(r, aliases)}
    exact = [r for r in rules if r.type != "judge"]
    types = list(VIOLATION_TYPES) if exact else ["criteria_not_met"]
    static_vars = {
        # Only the tools the rules are about: the rest of a catalog tells the judge nothing it needs. Exact
        # rules need a tool's name and kind only; what a tool does matters to a judge rule about it.
        "catalog": [
            {**t, "summary": _first_sentence(t["description"])}
            | {"described": evidence.outputs is None or t["name"] in evidence.outputs}
            for t in catalog_view(catalog)
            if tools is None or t["name"] in tools
        ],
        "rules": [rule_view(r, aliases) for r in rules],
        "aliases": [{"name": a, "members": ", ".join(f"`{m}`" for m in aliases[a])} for a in sorted(named)],
        # The worked examples teach the exact rules' semantics; a prompt of judge rules alone has the
        # rules' own labelled examples instead.
        "examples": [example_view(ex) for ex in examples] if exact else [],
        "has_exact": bool(exact),
        "per_value": PER_VALUE if any(getattr(r, "same", None) for r in rules) else "",
        "has_judge": len(exact) < len(rules),
        "evidence": evidence,
        "short_output_chars": SHORT_OUTPUT_CHARS,
        "risk_level": risk_level,
        "violation_types": types,
        # criteria_not_met may be null only for a judge rule about no tool in particular.
        "nullable_types": [
            t
            for t in sorted(NULLABLE_INDEX_TYPES)
            if t in types and (t != "criteria_not_met" or evidence.outputs is None)
        ],
    }
    system = _block(template, "system", static_vars, ruleset.source, 0)
    parts = (system, _block(template, "static", static_vars, ruleset.source, len(system)), evidence)
    if len(_STATIC_MEMO) >= _STATIC_MEMO_SIZE:
        _STATIC_MEMO.pop(next(iter(_STATIC_MEMO)))
    _STATIC_MEMO[key] = (held, parts)
    return parts


_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def _first_sentence(text: str) -> str:
    """What a tool does, in its description's first sentence; the rest (usage notes, return values) is for
    the agent that calls it, not for a judge of one rule about it."""
    return " ".join(_SENTENCE_END.split(text.strip(), maxsplit=1)[0].split())


def _named_aliases(rule: Any, aliases: dict[str, list[str]]) -> list[str]:
    """The aliases a rule's text names (and the aliases they name in turn)."""
    spelled = getattr(rule, "applies_to", None)  # shown with its tools spelled out: it names no alias
    stack = [name for op in rule.operands() if op is not spelled for name in operand_names(op)]
    out: list[str] = []
    while stack:
        name = stack.pop()
        if name in aliases and name not in out:
            out.append(name)
            stack.extend(aliases[name])
    return out


def _block(
    template: jinja2.Template,
    name: str,
    variables: dict[str, Any],
    source: str | None = None,
    before: int = 0,
) -> str:
    """A block of the template, rendered. Blocks are sent as separate parts (system text, cached static
    text, the trace) and joined by the adapters; their edges are trimmed so that the joins alone decide the
    spacing. ``before``: the characters of the blocks rendered before it, which count against
    ``PROMPT_CHARS`` with it: a prompt stops growing at the limit (exit 2), not at a MemoryError."""
    context = template.new_context(variables)
    limit = PROMPT_CHARS.value()
    size = before
    pieces = []
    for piece in template.blocks[name](context):
        size += len(piece)
        if size > limit:
            raise PROMPT_CHARS.exceeded(
                "the rendered judge prompt", limit, source=source, stopped="it was not rendered further"
            )
        pieces.append(piece)
    return "".join(pieces).strip("\n")
