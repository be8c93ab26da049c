"""What a judge run costs: a small price table, user overrides, and cost from token usage.

Prices change, and the table is only as current as the seqjudge release that ships it (the providers'
published list prices when it was written, 2025, kept in each provider's profile; newer models are not in
it). Override or extend it with a
YAML or JSON file, ``--prices FILE`` or ``prices: FILE`` in seqjudge.yaml (an inline mapping there works
too):

    prices:                       # the wrapper key is optional
      openai:gpt-4o: {input: 2.50, cached_input: 1.25, output: 10.00}
      my-vllm-model: {input: 0, output: 0}

Prices are USD per million tokens. ``cached_input`` is what a prompt-cache read costs (default: the input
price), ``cache_write`` what writing the cache costs (Anthropic; default: the input price). A model is
found by its exact name (with or without the ``provider:`` prefix), else without a date suffix, so a dated
snapshot (``gpt-4o-2024-08-06``, ``claude-haiku-4-5-20251001``) takes its model's price. Nothing is guessed
from a family name (``gpt-4o-audio-preview`` is not ``gpt-4o``): a model without a price has no cost figure,
and ``--max-cost`` refuses to run with it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from seqjudge.errors import InputError
from seqjudge.judge.providers.registry import all_profiles

__all__ = [
    "Cost",
    "Price",
    "cost_of",
    "estimate_cost",
    "load_prices",
    "price_for",
    "shipped_prices",
]

PER = 1_000_000


class Price(BaseModel):
    """USD per million tokens."""

    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached_input: float | None = Field(default=None, ge=0)
    cache_write: float | None = Field(default=None, ge=0)

    def describe(self) -> str:
        cached = f", ${self.cached_input:g}/M cached input" if self.cached_input is not None else ""
        return f"${self.input:g}/M input{cached}, ${self.output:g}/M output"


def shipped_prices() -> dict[str, Price]:
    """The list prices the providers' profiles carry, as ``provider:model`` -> price."""
    return {
        f"{profile.name}:{model}": Price(input=inp, cached_input=cached, output=out, cache_write=write)
        for profile in all_profiles()
        for model, (inp, cached, out, write) in profile.prices.items()
    }


def load_prices(source: str | Path | Mapping[str, Any] | None = None) -> dict[str, Price]:
    """The shipped table (every provider's, installed ones too) updated with ``source`` (a YAML/JSON file,
    or a mapping model -> price)."""
    table = shipped_prices()
    if source is None:
        return table
    where = "<prices>"
    data: Any = source
    if isinstance(source, str | Path):
        where = str(source)
        try:
            text = Path(source).read_text(encoding="utf-8")
        except OSError as exc:
            raise InputError(
                f"cannot read the price file ({exc.strerror})",
                source=where,
                where="--prices",
                hint="give a YAML or JSON file of model: {input, cached_input, output} in USD per million",
            ) from None
        try:
            data = json.loads(text) if where.endswith(".json") else yaml.safe_load(text)
        except (ValueError, yaml.YAMLError) as exc:
            raise InputError(f"not valid YAML or JSON ({exc})", source=where, hint="fix the syntax") from None
    if isinstance(data, Mapping) and set(data) == {"prices"}:
        data = data["prices"]
    if not isinstance(data, Mapping):
        raise InputError(
            "prices are a mapping of model names to {input, cached_input, output}",
            source=where,
            hint="e.g. openai:gpt-4o: {input: 2.5, cached_input: 1.25, output: 10}",
        )
    for name, value in data.items():
        try:
            table[str(name)] = value if isinstance(value, Price) else Price.model_validate(value)
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(x) for x in err["loc"]) or "(price)"
            raise InputError(
                f"the price of {name}: {loc}: {err['msg'].lower()}",
                source=where,
                where=str(name),
                hint="each price has input and output (and optionally cached_input, cache_write), "
                "USD per million tokens",
            ) from None
    return table


_DATED = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8})$")


def price_for(model: str | None, table: Mapping[str, Price] | None = None) -> Price | None:
    """The price of ``provider:model`` (or a bare model name): its exact name, else without a date suffix;
    ``provider:name`` entries first, then bare ``name`` ones."""
    if not model:
        return None
    table = shipped_prices() if table is None else table
    provider, _, bare = model.partition(":")
    if not bare:
        provider, bare = "", model
    for name in dict.fromkeys((bare, _DATED.sub("", bare))):
        for key in (f"{provider}:{name}", name) if provider else (name,):
            if key in table:
                return table[key]
    return None


@dataclass(frozen=True)
class Cost:
    """USD, by kind of token."""

    input: float = 0.0
    cached_input: float = 0.0
    cache_write: float = 0.0
    output: float = 0.0

    @property
    def total(self) -> float:
        return self.input + self.cached_input + self.cache_write + self.output

    def __add__(self, other: Cost) -> Cost:
        return Cost(
            self.input + other.input,
            self.cached_input + other.cached_input,
            self.cache_write + other.cache_write,
            self.output + other.output,
        )


def cost_of(usage: Any, price: Price, *, scale: float = 1.0) -> Cost:
    """The cost of a ``Usage`` (``input_tokens`` counts every prompt token, cached ones included).

    ``scale`` multiplies everything (0.5 for the batch APIs' half price)."""
    cached = usage.cached_input_tokens
    written = usage.cache_write_tokens
    uncached = max(usage.input_tokens - cached - written, 0)
    cached_price = price.input if price.cached_input is None else price.cached_input
    write_price = price.input if price.cache_write is None else price.cache_write
    return Cost(
        input=uncached * price.input * scale / PER,
        cached_input=cached * cached_price * scale / PER,
        cache_write=written * write_price * scale / PER,
        output=usage.output_tokens * price.output * scale / PER,
    )


def estimate_cost(
    input_tokens: int, output_tokens: int, price: Price, *, cached_input_tokens: int = 0
) -> float:
    """USD for a call not made yet (nothing cached unless said)."""
    cached_price = price.input if price.cached_input is None else price.cached_input
    uncached = max(input_tokens - cached_input_tokens, 0)
    return (uncached * price.input + cached_input_tokens * cached_price + output_tokens * price.output) / PER
