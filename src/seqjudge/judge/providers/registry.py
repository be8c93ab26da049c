"""Finding a provider by name: the built-in profiles, those registered in Python, and those a separately
installed package declares in the ``seqjudge.providers`` entry-point group.

Lookups are lazy: a built-in adapter module is imported when its profile is first asked for (never its SDK,
which loads when a provider is built), and entry points are read only for a name that is not built in or
registered, so a broken third-party package cannot break ``seqjudge check``.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from seqjudge.errors import InputError, ProviderError
from seqjudge.judge.providers.profile import ProviderProfile

if TYPE_CHECKING:
    from seqjudge.judge.providers.base import Provider

__all__ = [
    "ENTRY_POINT_GROUP",
    "all_profiles",
    "get_provider",
    "judge_unavailable",
    "key_variables",
    "known_providers",
    "load_object",
    "parse_model_spec",
    "provider_profile",
    "register_profile",
    "register_provider",
    "require_judge",
    "skipped_judge",
]

ENTRY_POINT_GROUP = "seqjudge.providers"

ProviderFactory = Callable[..., "Provider"]

# name -> its profile, or "module:PROFILE" of a built-in one not imported yet. Built-ins and providers
# registered in Python come first; an entry point cannot replace them.
_REGISTRY: dict[str, str | ProviderProfile] = {
    "anthropic": "seqjudge.judge.providers.anthropic:PROFILE",
    "openai": "seqjudge.judge.providers.openai:PROFILE",
    "scripted": "seqjudge.judge.providers.scripted:PROFILE",
}


def register_profile(profile: ProviderProfile) -> None:
    """Add (or replace) a provider for this process."""
    _REGISTRY[profile.name.lower()] = profile


def register_provider(name: str, factory: str | ProviderFactory) -> None:
    """Add a provider known only by its factory (``(model=..., **options) -> Provider`` or a lazy
    ``"module:attr"``); it has no key variable, limits, prices or batch transport."""
    register_profile(ProviderProfile(name=name.lower(), factory=factory))


def _entry_points() -> Iterator[importlib.metadata.EntryPoint]:
    yield from importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)


def known_providers() -> list[str]:
    return sorted({*_REGISTRY, *(ep.name.lower() for ep in _entry_points())})


def provider_profile(name: str) -> ProviderProfile | None:
    """The profile of provider ``name``, or None when no provider has that name."""
    name = name.lower()
    target = _REGISTRY.get(name)
    if isinstance(target, str):
        profile = load_object(target, what=f"the {name} provider")
        _REGISTRY[name] = target = _as_profile(name, profile, target)
    if target is not None:
        return target
    for ep in _entry_points():
        if ep.name.lower() == name:
            loaded = load_object(ep.value, what=f"the {name} provider (entry point of {_dist(ep)})")
            return _as_profile(name, loaded, f"{ep.value} (entry point of {_dist(ep)})")
    return None


def all_profiles() -> list[ProviderProfile]:
    """Every provider's profile (importing the adapters' modules, not their SDKs)."""
    out = []
    for name in known_providers():
        try:
            profile = provider_profile(name)
        except ProviderError:
            continue  # a third-party provider that cannot load has nothing to contribute to the tables
        if profile is not None:
            out.append(profile)
    return out


def key_variables() -> str:
    """Which variable holds which provider's key, for hints: "OPENAI_API_KEY for openai, ..."."""
    return ", ".join(f"{p.key_env} for {p.name}" for p in all_profiles() if p.key_env)


def judge_unavailable(model: str | None, base_url: str | None = None) -> str | None:
    """Why the judge cannot run, in a sentence for the user (None when it can).

    The one test of "is there a judge" that `run`, `judge`, `calibrate` and `demo` share: no model, a
    provider that cannot load, or a missing key. With ``base_url`` (a local OpenAI-compatible server) a
    missing key is no reason: the adapter sends a placeholder (``sdk.read_api_key``)."""
    if not model:
        return (
            "no model configured (give --model provider:model, `model:` in seqjudge.yaml, or SEQJUDGE_MODEL)"
        )
    try:
        profile = provider_profile(model.split(":", 1)[0])
    except ProviderError as exc:  # an installed provider that cannot load
        return f"model {model} is configured but its provider cannot be used: {exc}"
    env = profile.key_env if profile is not None else None
    if env and not base_url and not os.environ.get(env, "").strip():
        return f"model {model} is configured but {env} is not set"
    return None


# How to make a configured judge runnable, for the messages of every command that refuses one.
KEY_HINT = "set the provider's key in the environment, or give --base-url for a local server that needs none"


def skipped_judge(
    model: str | None, base_url: str | None = None, *, escalate: Sequence[str] = ()
) -> str | None:
    """Why `run` goes without the judge (None when ``model`` can run): only because none was asked for.

    A judge that was asked for - a model from --model, `model:` in seqjudge.yaml or SEQJUDGE_MODEL, or an
    --escalate cascade - and cannot run (no key, a provider that cannot load) is an ``InputError`` (exit 2),
    with or without --strict: its run would check the exact rules only and pass, and a CI secret that a fork's
    pull request is not given would turn the build green. With no model at all the engine runs alone and the
    summary names the `judge` rules it left deferred (`make demo` on a fresh clone)."""
    why = judge_unavailable(model, base_url)
    if model and why:
        raise InputError(
            f"the LLM judge was asked for and cannot run: {why}",
            hint=f"{KEY_HINT} (in CI: the secret, which a pull request from a fork is not given); to run the "
            "engine alone, configure no model (no --model, no `model:` in seqjudge.yaml, no SEQJUDGE_MODEL)",
        )
    if not model and escalate:
        raise InputError(
            f"{', '.join(escalate)} would be the later judges of a cascade whose first judge is the run's "
            "model, and no model is configured",
            where="--escalate",
            hint="give the first judge with --model provider:model, `model:` in seqjudge.yaml or "
            "SEQJUDGE_MODEL",
        )
    return why


def require_judge(model: str | None, base_url: str | None, *, needs: str, hint: str = "") -> str:
    """``model``, or ``InputError`` (exit 2) when ``judge_unavailable``: for commands that cannot do without
    the judge (`judge`, `calibrate`). `run` instead decides what the engine can and defers the judge rules."""
    why = judge_unavailable(model, base_url)
    if why is None and model:
        return model
    todo = KEY_HINT if model else "`seqjudge check` and `seqjudge run` need no model"
    raise InputError(f"{needs} needs the LLM judge, but {why}", where="--model", hint=hint or todo)


def _dist(ep: importlib.metadata.EntryPoint) -> str:
    return ep.dist.name if ep.dist is not None else "an installed package"


def _as_profile(name: str, value: Any, where: str) -> ProviderProfile:
    if isinstance(value, ProviderProfile):
        return value
    if callable(value):  # a bare factory is a provider with nothing else known about it
        return ProviderProfile(name=name, factory=value)
    raise ProviderError(
        f"the {name} provider ({where}) is a {type(value).__name__}, not a ProviderProfile or a factory",
        kind="config",
        provider=name,
    )


def load_object(target: str, *, what: str) -> Any:
    """``"module:attribute"`` imported; a missing module (an optional SDK, an uninstalled package) is a
    ``ProviderError(kind="config")`` that says what to install."""
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ProviderError(
            f"{what} cannot be loaded ({exc.msg}); install what it needs (e.g. pip install {exc.name})",
            kind="config",
            provider=what,
        ) from None
    try:
        return getattr(module, attr) if attr else module
    except AttributeError:
        raise ProviderError(
            f"{what} cannot be loaded: {module_name} has no attribute {attr!r}", kind="config", provider=what
        ) from None


def parse_model_spec(spec: str) -> tuple[str, str]:
    """``"provider:model"`` -> (provider, model). Only the first colon splits: Ollama models have colons."""
    provider, sep, model = spec.partition(":")
    provider = provider.strip().lower()
    model = model.strip()
    if not sep or not provider or not model:
        raise InputError(
            f"model {spec!r} is not of the form provider:model",
            where="--model",
            hint=f"for example openai:gpt-4o or anthropic:claude-sonnet-4-5 "
            f"(providers: {', '.join(known_providers())})",
        )
    return provider, model


def check_base_url(url: str) -> None:
    """Refuse a base URL that carries credentials (``https://user:password@host/v1``), naming it without them.

    Refused rather than stripped: the SDKs would not send them as a server expects (aiohttp even raises on
    them), dropping them silently would turn into a puzzling 401, and a URL holding a password would be
    written into the run's stored config and into connection messages. A key belongs in the environment."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        userinfo = parts.username is not None or parts.password is not None
    except ValueError:  # e.g. a bad port or bracket; what is wrong with it is the SDK's to say
        return
    if not userinfo:
        return
    host = parts.hostname or ""
    shown = f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "") + parts.path
    raise InputError(
        f"the base URL {shown} carries a user name or password (written as user:password@ before the host), "
        "which seqjudge does not send and will not store",
        where="--base-url",
        hint="Give the URL without them and put the key in the environment (the provider's key variable, or "
        "the one named by api_key_env); a gateway that needs basic auth can be reached through a local proxy",
    )


def get_provider(spec: str, **options: Any) -> Provider:
    """Build the provider named by ``spec``, e.g. ``openai:gpt-4o`` or ``anthropic:claude-sonnet-4-5``.

    Options (``None`` means "not given"): ``base_url``, ``timeout`` (seconds per HTTP attempt),
    ``max_retries`` (the SDK's transport retries, default 2), ``deadline`` (seconds for a whole call, SDK
    retries included), ``api_key_env`` (the environment variable holding the key), ``temperature``, ``seed``,
    ``strict_response_validation``; Anthropic also ``output_mode`` (auto | json_schema | tool). Keys are read
    from the environment only. A missing key raises ``ProviderError(kind="config")`` naming the variable.
    The SDK providers hold an HTTP client: use them as ``async with get_provider(...) as provider:``, or
    ``await provider.aclose()`` when done.
    """
    provider, model = parse_model_spec(spec)
    if options.get("base_url") is not None:
        check_base_url(options["base_url"])
    profile = provider_profile(provider)
    if profile is None:
        raise InputError(
            f"unknown provider {provider!r} in model {spec!r}",
            where="--model",
            hint=f"known providers: {', '.join(known_providers())}",
        )
    factory = profile.factory
    if isinstance(factory, str):
        factory = load_object(factory, what=f"the {provider} provider")
    built: Provider = factory(model=model, **{k: v for k, v in options.items() if v is not None})
    return built
