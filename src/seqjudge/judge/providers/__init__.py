"""Model providers for the judge: ``get_provider("openai:gpt-4o")`` and friends.

Only the provider-neutral pieces are imported here; each adapter (and its SDK) loads when first asked for.
"""

from seqjudge.judge.providers.base import (
    FinishReason,
    JudgeRequest,
    Provider,
    ProviderReply,
    Usage,
    get_provider,
    known_providers,
    parse_model_spec,
    register_provider,
)

__all__ = [
    "FinishReason",
    "JudgeRequest",
    "Provider",
    "ProviderReply",
    "Usage",
    "get_provider",
    "known_providers",
    "parse_model_spec",
    "register_provider",
]
