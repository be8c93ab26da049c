"""The batch-run scenarios both providers' batch APIs must pass, driven through the real SDKs against the
loopback fake's batch emulator once per API (provider-specific checks stay in test_batch_<api>.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

import batch_support as bs

APIS = pytest.mark.parametrize("api", ["openai", "anthropic"])


@APIS
def test_submit_and_collect_join_shuffled_results(
    api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bs.scenario_submit_then_collect_shuffled(api, tmp_path, monkeypatch)


@APIS
def test_malformed_reply_is_reasked_online(api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bs.scenario_malformed_reasked_online(api, tmp_path, monkeypatch)


@APIS
def test_malformed_reply_is_reasked_in_a_follow_up_batch(
    api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bs.scenario_malformed_reasked_in_batch(api, tmp_path, monkeypatch)


@APIS
def test_errored_and_expired_requests_are_retried_once(
    api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bs.scenario_errored_retried_then_unscored(api, tmp_path, monkeypatch)


@APIS
def test_collected_run_equals_an_online_run(
    api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bs.scenario_same_as_online(api, tmp_path, monkeypatch)


@APIS
def test_collect_is_resume_safe(api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bs.scenario_collect_is_resume_safe(api, tmp_path, monkeypatch)


@APIS
def test_collected_answers_make_reruns_free(
    api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bs.scenario_cache_makes_reruns_free(api, tmp_path, monkeypatch)


@APIS
def test_cli_run_batch_status_collect(
    api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bs.scenario_cli(api, tmp_path, monkeypatch, capsys)
