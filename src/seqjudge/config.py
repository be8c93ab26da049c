"""The project config file (`seqjudge.yaml`): a suite's settings in one place; command-line flags override it.

Relative paths are resolved against the config file's folder. Unknown keys are errors.

``thresholds: {low, medium, high}`` (written by ``seqjudge calibrate --write``) gives a calibrated threshold
per risk level: a run at risk level L uses ``thresholds.L`` when it is set, else ``threshold``; a
``--threshold`` flag wins over both.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Discriminator, Field, StrictInt, Tag, ValidationError

from seqjudge.defaults import DEFAULT_STORE, is_store_url
from seqjudge.errors import InputError
from seqjudge.redact import DEFAULT_REDACT
from seqjudge.report import DEFAULT_THRESHOLD, RiskLevel

JudgeMode = Literal["full", "contextual"]
JUDGE_MODES: tuple[str, ...] = JudgeMode.__args__  # type: ignore[attr-defined]
# Where a judged rule decision's confidence comes from (``seqjudge run --confidence``): the reply's own
# ``rule_decisions``, agreement across ``samples`` judge calls, or the tokens' log-probabilities.
ConfidenceSource = Literal["stated", "samples", "logprobs"]
CONFIDENCE_SOURCES: tuple[str, ...] = ConfidenceSource.__args__  # type: ignore[attr-defined]
DEFAULT_AUDIT_SEED = 18  # fixed, so two runs of one suite audit the same traces; stored with the run


class ModelOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    base_url: str | None = None
    timeout: float | None = Field(default=None, gt=0)
    max_retries: int | None = Field(default=None, ge=0)
    temperature: float | None = 0.0
    seed: int | None = None
    max_tokens: int = Field(default=4096, ge=256)


class Thresholds(BaseModel):
    """A threshold per risk level, as `seqjudge calibrate --write` recommends them. For a run at risk level
    L, ``thresholds.L`` (when set) replaces ``threshold``; a ``--threshold`` flag still wins."""

    model_config = ConfigDict(extra="forbid")

    low: float | None = Field(default=None, ge=0.0, le=1.0)
    medium: float | None = Field(default=None, ge=0.0, le=1.0)
    high: float | None = Field(default=None, ge=0.0, le=1.0)


# The tags of the config's discriminated unions: pydantic puts them in an error's place, no key is named so.
NUMBER_TAG, PER_LEVEL_TAG = "number", "per_level"
UNION_TAGS = (NUMBER_TAG, PER_LEVEL_TAG)


class ReviewsPerLevel(BaseModel):
    """``review.reviews_per_item`` per risk level: ``{high: 2, default: 1}``."""

    model_config = ConfigDict(extra="forbid")

    low: StrictInt | None = Field(default=None, ge=1)
    medium: StrictInt | None = Field(default=None, ge=1)
    high: StrictInt | None = Field(default=None, ge=1)
    default: StrictInt = Field(default=1, ge=1)

    def for_level(self, risk_level: str) -> int:
        named: int | None = (
            getattr(self, risk_level, None) if risk_level in ("low", "medium", "high") else None
        )
        return self.default if named is None else named


class ReviewOptions(BaseModel):
    """What goes to the review queue beyond what is in doubt (docs/review.md).

    ``fails``: whether a trace whose fail verdict stands (a deterministic critical rule failed, reason
    ``engine_fail``; or a certified judge's critical fail, ``judge_fail``) is queued too. Off by default:
    such a fail is already decided, reported as ``fail`` in every output and by the exit code, and no
    person's resolution can change it; queued, it buried the traces a person must decide (34 of the demo's
    38 items). Turn it on to have people see, and label, every fail (a new rule's false positives)."""

    model_config = ConfigDict(extra="forbid")

    fails: bool = False
    # Independent reviews an item needs before it resolves (docs/review.md, "Team review"): a number, or
    # per risk level ({high: 2, default: 1}; a level not named takes `default`, itself 1 unless given). The
    # run's risk level chooses; the number is fixed on each item when it is queued.
    reviews_per_item: Annotated[
        Annotated[Annotated[StrictInt, Field(ge=1)], Tag(NUMBER_TAG)]
        | Annotated[ReviewsPerLevel, Tag(PER_LEVEL_TAG)],
        # A mapping is read as the per-level form and anything else as a number, so that an error names the
        # one meant (a union reports both: "should be a valid integer" for a misspelt level).
        Discriminator(lambda v: PER_LEVEL_TAG if isinstance(v, dict | ReviewsPerLevel) else NUMBER_TAG),
    ] = 1

    def required_reviews(self, risk_level: str) -> int:
        """The independent reviews an item of a run at this risk level needs."""
        if isinstance(self.reviews_per_item, int):
            return self.reviews_per_item
        return self.reviews_per_item.for_level(risk_level)


class GuardOptions(BaseModel):
    """The runtime guard (docs/guard.md). ``fail_mode``: what a guard that cannot decide (a bad rule file, an
    unreadable transcript, an internal error) answers; unset, it denies at ``risk_level: high`` and allows
    (with a warning) otherwise."""

    model_config = ConfigDict(extra="forbid")

    fail_mode: Literal["deny", "allow"] | None = None


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rules: str
    traces: str | list[str]  # one path (file, folder, -) or several, read in order
    catalog: str | None = None
    examples: str | None = None
    model: str | None = None
    # An escalation cascade (seqjudge.cascade): what `model` cannot auto-decide goes to these, in order.
    escalate: list[str] = Field(default_factory=list)
    model_options: ModelOptions = Field(default_factory=ModelOptions)
    risk_level: RiskLevel = "medium"
    threshold: float = Field(default=DEFAULT_THRESHOLD, ge=0.0, le=1.0)
    thresholds: Thresholds | None = None
    store: str = DEFAULT_STORE
    judge_mode: JudgeMode = "full"
    confidence: ConfidenceSource = "stated"
    samples: int = Field(default=1, ge=1)  # judge calls per trace; K > 1 with confidence "samples"
    max_attempts: int = Field(default=3, ge=1)
    concurrency: int = Field(default=8, ge=1)
    # Requests / tokens per minute; None = the provider's default (its profile's), 0 = off.
    rpm: int | None = Field(default=None, ge=0)
    tpm: int | None = Field(default=None, ge=0)
    # Stop starting judge calls once this many USD are spent or reserved (None or 0 = no budget).
    max_cost: float | None = Field(default=None, ge=0)
    # Price overrides (seqjudge.pricing): a YAML/JSON file, or an inline mapping model -> price.
    prices: str | dict[str, Any] | None = None
    cache: bool = True
    redact: list[str] = Field(default_factory=lambda: list(DEFAULT_REDACT))
    trace_format: str | None = None
    messages_key: str | None = None
    error_pattern: str | None = None
    # Accept an input that yields no trace, or traces without calls where it holds tool activity.
    allow_empty: bool = False
    # Exit 2 when the input left something unchecked (rules.coverage): a rule exercised on no trace, ...
    strict: bool = False
    label: str | None = None
    # Audit sampling (seqjudge.audit): the share of auto-passed traces sent to review, and the draw's seed.
    audit_rate: float = Field(default=0.0, ge=0.0, le=1.0)
    audit_seed: int = DEFAULT_AUDIT_SEED
    # uniform, or active: more likely where the judge was unsure (seqjudge.audit.inclusion_probability).
    audit_draw: Literal["uniform", "active"] = "uniform"
    review: ReviewOptions = Field(default_factory=ReviewOptions)
    guard: GuardOptions = Field(default_factory=GuardOptions)

    def traces_named(self) -> str:
        """The trace path(s), for messages."""
        return self.traces if isinstance(self.traces, str) else ", ".join(self.traces)

    def threshold_for(self, risk_level: RiskLevel | None = None) -> float:
        """The threshold of a run at ``risk_level`` (default: the config's): ``thresholds`` first."""
        value = getattr(self.thresholds, risk_level or self.risk_level, None) if self.thresholds else None
        return self.threshold if value is None else value

    def resolved(self, base: Path) -> RunConfig:
        """Paths made absolute against ``base`` (the config file's folder)."""

        def fix(p: str | None) -> str | None:
            if p is None or p == "-" or os.path.isabs(p):
                return p
            if is_store_url(p):  # a store on a database server (only `store:` may be one)
                return p
            return str(base / p)

        return self.model_copy(
            update={
                "rules": fix(self.rules),
                "traces": fix(self.traces)
                if isinstance(self.traces, str)
                else [str(fix(t)) for t in self.traces],
                "catalog": fix(self.catalog),
                "examples": fix(self.examples),
                "store": fix(self.store),
                "prices": fix(self.prices) if isinstance(self.prices, str) else self.prices,
            }
        )


def load_config(path: str | Path) -> RunConfig:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(
            f"cannot read the config file ({exc.strerror})", source=str(p), hint="check the path"
        ) from None
    try:
        data: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else None
        raise InputError(
            f"not valid YAML ({getattr(exc, 'problem', exc)})",
            source=str(p),
            where=where,
            hint="fix the syntax",
        ) from None
    if not isinstance(data, dict):
        raise InputError(
            "a config file is a mapping (rules:, traces:, model:, ...)",
            source=str(p),
            hint="see docs/run.md (the `seqjudge run` reference)",
        )
    try:
        cfg = RunConfig.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        place, keys = _keys_at(err["loc"])
        loc = ".".join(place) or "(top level)"
        problem = "unknown key" if err["type"] == "extra_forbidden" else err["msg"].lower()
        inside = f" of {'.'.join(place[:-1])}" if len(place) > 1 else ""
        raise InputError(
            f"{loc}: {problem}", source=str(p), where=loc, hint=f"the keys{inside} are: {', '.join(keys)}"
        ) from None
    return cfg.resolved(p.resolve().parent)


def _keys_at(loc: tuple[int | str, ...]) -> tuple[list[str], list[str]]:
    """A validation error's place as the config's keys (without the tags pydantic adds for a union's
    member) and the keys of the mapping it is in: a nested error names its own mapping's keys."""
    model: type[BaseModel] | None = RunConfig
    keys = list(RunConfig.model_fields)
    path: list[str] = []
    for part in loc:
        if model is not None and part in UNION_TAGS and part not in model.model_fields:
            continue  # a union member's tag, not a key
        if model is not None:
            keys = list(model.model_fields)
        path.append(str(part))
        field = model.model_fields.get(str(part)) if model is not None else None
        model = _model_in(field.annotation) if field is not None else None
    return path, keys


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The config model a field holds (directly, or as one member of a union), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def judge_rule_ids(ruleset: Any, mode: str) -> list[str]:
    """The rules the judge is asked about: every rule (``full``: the exact rules are cross-checked), or only
    the `judge` rules (``contextual``: the engine decides the exact rules, the judge what needs reading).
    A rule the engine leaves undetermined on one trace (``deferred``) is asked about on that trace too:
    ``asked_on``."""
    if mode not in JUDGE_MODES:
        raise InputError(f"judge mode is {mode!r}", where="--judge-mode", hint="use full or contextual")
    return [r.rule_id for r in ruleset.rules if mode == "full" or r.type == "judge"]


def asked_on(rule_ids: list[str], engine_rules: Any) -> list[str]:
    """The rules a judge is asked about on one trace: ``rule_ids`` (the run's, ``judge_rule_ids``), and any
    rule the engine could not settle on this trace (a lineage value in an output it could not read)."""
    extra = [r.rule_id for r in engine_rules if r.outcome == "deferred" and r.rule_id not in rule_ids]
    return rule_ids + extra if extra else rule_ids
