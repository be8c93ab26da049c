"""What seqjudge knows about a provider, in one object: how to build it, where its key is, its default rate
limits, its list prices, which of its models take sampling parameters, its batch transport and its hints.

Each adapter module defines its ``PROFILE``; the registry (``seqjudge.judge.providers.base``) finds the
built-in ones by name and others through the ``seqjudge.providers`` entry-point group, so a separately
installed package adds a provider with one entry point:

    [project.entry-points."seqjudge.providers"]
    myprov = "myprov.judge:PROFILE"        # a ProviderProfile (or a bare factory: model=..., **options)

Nothing here imports an SDK: a profile is read by ``seqjudge run --dry-run`` and the pricing code too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = ["PriceRow", "ProviderProfile"]

# USD per million tokens: input, cached input, output, and the cache write (None: the input price).
PriceRow = tuple[float, float, float, float | None]


@dataclass(frozen=True)
class ProviderProfile:
    """One provider. ``factory`` builds it (``(model=..., **options) -> Provider``), given as the object
    or as ``"module:attribute"`` so the module (and its SDK) loads only when the provider is used."""

    name: str
    factory: str | Callable[..., Any]
    # The environment variable that holds the API key (None: the provider needs none).
    key_env: str | None = None
    # Requests and tokens per minute when a run names none; 0 = unlimited.
    default_rpm: int = 0
    default_tpm: int = 0
    # List prices by bare model name (``gpt-4o``), USD per million tokens.
    prices: Mapping[str, PriceRow] = field(default_factory=lambda: MappingProxyType({}))
    # Whether the provider takes temperature/seed at all, and the model-name prefixes that do not.
    takes_sampling: bool = True
    no_sampling_prefixes: tuple[str, ...] = ()
    # "module:attribute" of its batch transport (a seqjudge.batch_api.BatchAPI subclass), if it has one.
    batch: str | None = None

    def takes_sampling_for(self, model: str) -> bool:
        """Whether ``model`` accepts temperature/seed. Matching is by prefix of the last path segment, so
        dated snapshots, ``-mini`` variants and ``org/model`` names of gateways match their family; a
        fine-tune (``ft:BASE:org::id``) is its base model."""
        if not self.takes_sampling:
            return False
        name = model.lower().rsplit("/", 1)[-1]
        if name.startswith("ft:"):
            name = name[3:]
        return not name.startswith(self.no_sampling_prefixes)
