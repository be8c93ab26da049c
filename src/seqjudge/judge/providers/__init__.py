"""Model providers for the judge: ``get_provider("openai:gpt-4o")`` and friends.

Only the provider-neutral pieces are imported here; each adapter (and its SDK) loads when first asked for.
A provider is its ``ProviderProfile`` (``profile.py``): the built-in ones are in their adapter modules, and a
separately installed package adds one through the ``seqjudge.providers`` entry-point group
(``registry.py``).
"""

from seqjudge.judge.providers.base import (
    FinishReason,
    JudgeRequest,
    Provider,
    ProviderReply,
    Usage,
    WireProvider,
    get_provider,
    known_providers,
    parse_model_spec,
    register_provider,
)
from seqjudge.judge.providers.profile import ProviderProfile
from seqjudge.judge.providers.registry import provider_profile, register_profile

__all__ = [
    "FinishReason",
    "JudgeRequest",
    "Provider",
    "ProviderProfile",
    "ProviderReply",
    "Usage",
    "WireProvider",
    "get_provider",
    "known_providers",
    "parse_model_spec",
    "provider_profile",
    "register_profile",
    "register_provider",
]
