"""Alerts: a local webhook (stdlib HTTP server on 127.0.0.1) receives the Slack-compatible JSON; failures to
post are reported without losing the results, and exit 3 only with --alert-fail-hard."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from seqjudge.cli import run as cli
from seqjudge.errors import InputError
from seqjudge.outputs import alerts
from seqjudge.store import Store
from test_compare import make_run, results, stored_run


class Webhook:
    """A loopback webhook that records every POST and answers ``status``."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.received: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                length = int(self.headers.get("Content-Length", 0))
                hook.received.append(json.loads(self.rfile.read(length)))
                hook.headers.append(dict(self.headers))
                self.send_response(hook.status)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:  # keep the test output clean
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/services/T000/B000/SECRET-TOKEN"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Webhook:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    with Webhook() as hook:
        yield hook


@pytest.fixture
def db(tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "seqjudge.db"
    with Store(path) as s:
        base = stored_run(s, make_run(10), label="main")
        cand = stored_run(s, make_run(10, bad=[0, 1, 2]), label="pr")
    return {"path": str(path), "base": base, "cand": cand}


def test_evaluate_checks_pass_rate_and_agreement() -> None:
    low = alerts.evaluate(results(make_run(10, bad=[0, 1, 2])), 0.8, subject="run r1")
    assert low.triggered and low.pass_rate == 0.7
    assert low.breaches == ["pass rate 70.0% is below 80.0%"]
    assert low.agreement is None  # the contextual judge cross-checks no engine rule: nothing to compare
    fine = alerts.evaluate(results(make_run(10, bad=[0])), 0.8, subject="run r1")
    assert not fine.triggered


def test_payload_is_slack_compatible() -> None:
    alert = alerts.evaluate(results(make_run(4, bad=[0, 1])), 0.9, subject="run r1", details=["a", "b"])
    body = alerts.payload(alert)
    assert body["text"] == ":rotating_light: seqjudge alert for run r1: pass rate 50.0% is below 90.0%"
    blocks = body["blocks"]
    assert isinstance(blocks, list)
    assert [b["type"] for b in blocks] == ["header", "section", "section", "section"]
    assert blocks[0]["text"] == {"type": "plain_text", "text": "seqjudge alert: run r1"}
    assert {"type": "mrkdwn", "text": "*Pass rate*\n50.0%"} in blocks[2]["fields"]
    assert blocks[3]["text"]["text"] == "a\nb"
    json.dumps(body)  # serialisable as it is


def test_report_ci_posts_to_the_webhook(
    db: dict[str, Any], webhook: Webhook, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [
        "report-ci",
        "latest",
        "--store",
        db["path"],
        "--alert-below",
        "0.9",
        "--alert-webhook",
        webhook.url,
    ]
    assert cli(args) == 1  # the run's own verdicts: 3 traces failed
    (message,) = webhook.received
    assert message["text"].endswith(f"run {db['cand']}: pass rate 70.0% is below 90.0%")
    assert message["blocks"][1]["text"]["text"] == "• pass rate 70.0% is below 90.0%"
    assert webhook.headers[0]["Content-Type"].startswith("application/json")
    err = capsys.readouterr().err
    assert f"alert posted to http://127.0.0.1:{webhook.server.server_port}" in err
    assert "SECRET-TOKEN" not in err  # a webhook URL is a secret: only its host is shown
    # Above the level: nothing is posted.
    assert (
        cli(
            [
                "report-ci",
                db["base"],
                "--store",
                db["path"],
                "--alert-below",
                "0.9",
                "--alert-webhook",
                webhook.url,
            ]
        )
        == 0
    )
    assert len(webhook.received) == 1


def test_compare_posts_with_the_decision(
    db: dict[str, Any], webhook: Webhook, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["compare", db["base"], db["cand"], "--store", db["path"], "--alert-below", "0.8"]
    assert cli([*args, "--alert-webhook", webhook.url]) == 1
    (message,) = webhook.received
    assert f"compare {db['base']} -> {db['cand']}" in message["text"]
    assert message["blocks"][-1]["text"]["text"].startswith("FIRED deterministic: the engine is exact")
    assert "Decision: REGRESSION (deterministic)" in capsys.readouterr().out


def test_the_webhook_url_can_come_from_the_environment(
    db: dict[str, Any], webhook: Webhook, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEQJUDGE_ALERT_WEBHOOK", webhook.url)
    assert cli(["report-ci", "latest", "--store", db["path"], "--alert-below", "0.9"]) == 1
    assert len(webhook.received) == 1


def test_a_failed_post_is_reported_and_the_results_are_kept(
    db: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    with Webhook(status=500) as hook:
        base_args = ["compare", db["base"], db["base"], "--store", db["path"], "--alert-below", "1.01"]
        # --alert-below 1.01 is bad input (not a rate).
        assert cli([*base_args, "--alert-webhook", hook.url]) == 2
        assert "--alert-below: --alert-below is 1.01" in capsys.readouterr().err
        args = [
            "report-ci",
            db["cand"],
            "--store",
            db["path"],
            "--alert-below",
            "0.9",
            "--alert-webhook",
            hook.url,
        ]
        assert cli(args) == 1  # the verdicts, not the alert, decide
        captured = capsys.readouterr()
        assert "7 pass, 3 fail, 0 review" in captured.out
        assert (
            f"warning: the alert webhook at http://127.0.0.1:{hook.server.server_port} answered HTTP 500"
            in captured.err
        )
        # Asked to fail hard on a run without regression: exit 3 (infrastructure), results still printed.
        same = ["compare", db["cand"], db["cand"], "--store", db["path"], "--alert-below", "0.9"]
        assert cli([*same, "--alert-webhook", hook.url, "--alert-fail-hard"]) == 3
        captured = capsys.readouterr()
        assert "Decision: no regression" in captured.out and "error: the alert webhook" in captured.err
        # With a regression to report, the regression's exit code wins and the failure is still said.
        worse = ["compare", db["base"], db["cand"], "--store", db["path"], "--alert-below", "0.9"]
        assert cli([*worse, "--alert-webhook", hook.url, "--alert-fail-hard"]) == 1
        assert "exiting 1 for the regression" in capsys.readouterr().err
        assert len(hook.received) == 3


def test_an_unreachable_webhook_is_a_delivery_error() -> None:
    with Webhook() as hook:
        url = hook.url
    # The server is closed: nothing listens on the port any more.
    with pytest.raises(alerts.AlertDeliveryError, match="could not be reached") as info:
        alerts.post(url, {"text": "x"}, timeout=2)
    assert info.value.exit_code == 3 and "SECRET" not in str(info.value)
    err = io.StringIO()
    alert = alerts.evaluate(results(make_run(2, bad=[0])), 0.9, subject="run r1")
    assert alerts.send(alert, url, err=err) is False
    assert "warning: the alert webhook" in err.getvalue()


def test_webhook_options_are_checked() -> None:
    with pytest.raises(InputError, match="without --alert-below"):
        alerts.check_webhook("https://hooks.example.com/x", None)
    with pytest.raises(InputError, match="not an http"):
        alerts.check_webhook("ftp://hooks.example.com/x", 0.9)
    alerts.check_webhook("https://hooks.example.com/x", 0.9)
    with pytest.raises(InputError):
        alerts.check_level(-0.1)


def test_alert_without_a_webhook_is_printed(db: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["report-ci", "latest", "--store", db["path"], "--alert-below", "0.9"]) == 1
    assert f"alert: run {db['cand']}: pass rate 70.0% is below 90.0%" in capsys.readouterr().err


def test_an_unset_webhook_secret_is_no_webhook(
    db: dict[str, Any], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # In Actions, `${{ secrets.X }}` of a secret that is not set is an empty string.
    monkeypatch.setenv("SEQJUDGE_ALERT_WEBHOOK", "")
    assert cli(["report-ci", "latest", "--store", db["path"], "--alert-below", "0.9"]) == 1
    assert (
        cli(["report-ci", "latest", "--store", db["path"], "--alert-below", "0.9", "--alert-webhook", ""])
        == 1
    )
    err = capsys.readouterr().err
    assert err.count("alert: run") == 2 and "alert posted" not in err and "error" not in err
