"""Provider profiles and the registry (issue 13, item 5): everything known about a provider is in its
profile, and a separately installed package adds a provider through the ``seqjudge.providers`` entry-point
group - proven here with a real distribution (a ``*.dist-info`` with ``entry_points.txt``) on sys.path."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from seqjudge.batch_api import AnthropicBatches, OpenAIBatches, batch_api
from seqjudge.cli import run
from seqjudge.errors import InputError, ProviderError
from seqjudge.judge.providers import (
    ProviderProfile,
    WireProvider,
    get_provider,
    known_providers,
    provider_profile,
    registry,
)
from seqjudge.judge.providers.anthropic import AnthropicProvider
from seqjudge.judge.providers.openai import OpenAIProvider, is_reasoning_model
from seqjudge.judge.providers.scripted import ScriptedProvider
from seqjudge.limits import default_limits
from seqjudge.pricing import price_for, shipped_prices
from seqjudge.runner import judge_unavailable

PACKAGE = '''
"""A judge provider shipped by another package."""

from seqjudge.judge.providers import ProviderProfile
from seqjudge.judge.providers.scripted import ScriptedProvider

REPLY = {
    "sequence_correctness_score": 1.0,
    "total_rules_checked": 1,
    "rules_passed": 1,
    "rules_failed": 0,
    "violations": [],
    "missing_prerequisites": [],
    "summary": "login was called",
}


class EchoProvider(ScriptedProvider):
    name = "echoprov"

    def __init__(self, model, **options):
        super().__init__([REPLY] * 5, model=model, **options)


PROFILE = ProviderProfile(
    name="echoprov",
    factory=EchoProvider,
    key_env="ECHOPROV_KEY",
    default_rpm=7,
    default_tpm=700,
    prices={"m1": (1.0, 0.5, 2.0, None)},
)
'''


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The package ``echoprov-judge`` installed the way pip leaves it: its module and a dist-info."""
    site = tmp_path / "site"
    (site / "echoprov_judge").mkdir(parents=True)
    (site / "echoprov_judge" / "__init__.py").write_text(textwrap.dedent(PACKAGE), encoding="utf-8")
    info = site / "echoprov_judge-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: echoprov-judge\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[seqjudge.providers]\nechoprov = echoprov_judge:PROFILE\n")
    monkeypatch.syspath_prepend(str(site))
    return site


def test_a_provider_registered_only_by_entry_point_is_found(installed: Path) -> None:
    assert "echoprov" not in registry._REGISTRY  # not registered in Python: found through the entry point
    assert "echoprov" in known_providers()
    profile = provider_profile("echoprov")
    assert profile is not None and profile.key_env == "ECHOPROV_KEY"
    assert default_limits("echoprov") == (7, 700)
    price = price_for("echoprov:m1", shipped_prices())
    assert price is not None and price.output == 2.0
    provider = get_provider("echoprov:m1")
    assert type(provider).__name__ == "EchoProvider" and provider.model == "m1"


def test_seqjudge_run_judges_with_an_entry_point_provider(
    installed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - {type: require, tool: login}\n")
    traces = tmp_path / "traces.jsonl"
    traces.write_text(json.dumps({"trace_id": "t1", "calls": [{"tool_name": "login"}]}) + "\n")
    args = ["run", str(rules), str(traces), "--store", str(tmp_path / "s.db"), "--format", "json"]
    monkeypatch.delenv("SEQJUDGE_MODEL", raising=False)

    # The profile's key variable is honoured: without it the judge is skipped, and says why.
    monkeypatch.delenv("ECHOPROV_KEY", raising=False)
    assert judge_unavailable("echoprov:m1") == "model echoprov:m1 is configured but ECHOPROV_KEY is not set"

    monkeypatch.setenv("ECHOPROV_KEY", "k")
    assert run([*args, "--model", "echoprov:m1"]) == 0
    totals = json.loads(capsys.readouterr().out)
    assert totals["traces"] == 1 and totals["pass"] == 1
    assert totals["judge_skipped"] is None and totals["judge"] == {"scored": 1}
    assert totals["calls"]["calls"] == 1
    # Priced from the profile's table.
    assert totals["cost"]["price_per_million"]["output"] == 2.0


def test_an_entry_point_that_is_not_a_profile_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    (site / "badprov.py").parent.mkdir(parents=True)
    (site / "badprov.py").write_text("PROFILE = 42\n")
    info = site / "badprov-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: badprov\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[seqjudge.providers]\nbadprov = badprov:PROFILE\n")
    monkeypatch.syspath_prepend(str(site))
    with pytest.raises(ProviderError, match=r"badprov provider .*entry point of badprov.* is a int"):
        get_provider("badprov:x")
    # A run that names it is told why the judge cannot run, without a traceback.
    assert "badprov:x is configured but its provider cannot be used" in (judge_unavailable("badprov:x") or "")
    # A provider that cannot load takes nothing else down.
    assert "badprov:x" not in shipped_prices() and default_limits("openai") == (5_000, 450_000)


def test_an_unknown_provider_is_bad_input() -> None:
    with pytest.raises(InputError, match="unknown provider 'nosuch'"):
        get_provider("nosuch:m")


def test_the_built_in_profiles_hold_what_was_spread_over_six_files() -> None:
    openai = provider_profile("openai")
    anthropic = provider_profile("anthropic")
    scripted = provider_profile("scripted")
    assert openai is not None and anthropic is not None and scripted is not None
    assert (openai.key_env, anthropic.key_env, scripted.key_env) == (
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        None,
    )
    assert default_limits("openai") == (5_000, 450_000) and default_limits("anthropic") == (1_000, 450_000)
    assert default_limits("scripted") == (0, 0)
    prices = shipped_prices()
    assert prices["openai:gpt-4o"].input == 2.50 and prices["anthropic:claude-haiku-4-5"].cache_write == 1.25
    shipped = {f"openai:{m}" for m in openai.prices} | {f"anthropic:{m}" for m in anthropic.prices}
    assert set(prices) == shipped
    assert is_reasoning_model("o3-mini") and not openai.takes_sampling_for("o3-mini")
    assert openai.takes_sampling_for("gpt-4o") and not anthropic.takes_sampling_for("claude-sonnet-4-5")


def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-000000000000")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0000000000")


def test_the_batch_transport_comes_from_the_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    _key(monkeypatch)
    openai: Any = get_provider("openai:gpt-4o")
    anthropic: Any = get_provider("anthropic:claude-haiku-4-5")
    assert isinstance(openai, OpenAIProvider) and isinstance(anthropic, AnthropicProvider)
    assert type(batch_api(openai)) is OpenAIBatches and type(batch_api(anthropic)) is AnthropicBatches
    with pytest.raises(InputError, match="scripted provider has no batch API") as info:
        batch_api(ScriptedProvider([]))
    assert "anthropic:MODEL, openai:MODEL" in str(info.value)


def test_the_sdk_adapters_fill_the_wire_contract_and_the_scripted_provider_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _key(monkeypatch)
    assert isinstance(get_provider("openai:gpt-4o"), WireProvider)
    assert isinstance(get_provider("anthropic:claude-haiku-4-5"), WireProvider)
    assert not isinstance(ScriptedProvider([]), WireProvider)


def test_a_profile_registered_in_python_wins_over_nothing_and_can_be_looked_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    registry.register_profile(
        ProviderProfile(name="Local", factory=lambda model, **o: ScriptedProvider([], model=model))
    )
    assert "local" in known_providers()
    assert get_provider("local:m").model == "m"
