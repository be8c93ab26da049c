"""Alerts: post a Slack-compatible JSON message when the pass rate or the judge-engine agreement falls below
a level (``--alert-below RATE --alert-webhook URL``).

The message is ``{"text": ..., "blocks": [...]}``: Slack incoming webhooks render the blocks, and any
endpoint that only reads ``text`` (Mattermost, Discord's Slack-compatible URL, a custom receiver) still
gets the whole message. Posting is best effort by design: results are written before the alert is sent,
and a failure to post is reported on stderr; only ``--alert-fail-hard`` turns it into exit 3
(infrastructure). A webhook URL is a secret (it authorises posting), so messages name only its host.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TextIO
from urllib.parse import urlsplit

from seqjudge.crosscheck import TraceResult, agreement
from seqjudge.errors import InputError, SeqjudgeError

TIMEOUT_S = 10.0


class AlertDeliveryError(SeqjudgeError):
    """The alert could not be posted (exit 3, infrastructure) — raised only with ``--alert-fail-hard``."""

    exit_code = 3


@dataclass
class Alert:
    """What fell below the level; empty ``breaches`` means nothing to send."""

    subject: str  # "run r2026…" or "compare main -> latest"
    level: float
    pass_rate: float | None
    agreement: float | None
    traces: int
    breaches: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)  # extra lines (the comparison's decision)

    @property
    def triggered(self) -> bool:
        return bool(self.breaches)


def check_level(rate: float | None) -> None:
    if rate is not None and not 0.0 <= rate <= 1.0:
        raise InputError(
            f"--alert-below is {rate}",
            where="--alert-below",
            hint="give a rate between 0 and 1, e.g. 0.9 to alert under 90% of traces passing",
        )


def check_webhook(url: str | None, level: float | None) -> None:
    """Refuse a webhook that could never be used: not http(s), or no level to alert below."""
    if url is None:
        return
    if level is None:
        raise InputError(
            "--alert-webhook is given without --alert-below",
            where="--alert-webhook",
            hint="say when to alert, e.g. --alert-below 0.9",
        )
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InputError(
            f"the webhook is not an http(s) URL (scheme {parts.scheme or 'none'!r})",
            where="--alert-webhook",
            hint="give the incoming-webhook URL, e.g. https://hooks.slack.com/services/…",
        )


def host_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or '?'}" + (f":{parts.port}" if parts.port else "")


def evaluate(
    results: Sequence[TraceResult], level: float, *, subject: str, details: Sequence[str] = ()
) -> Alert:
    """Compare the pass rate and the judge-engine agreement rate (when any decision was cross-checked)
    with ``level``."""
    n = len(results)
    pass_rate = sum(1 for r in results if r.verdict == "pass") / n if n else None
    rate = agreement(results)["overall"]["rate"]
    alert = Alert(
        subject=subject, level=level, pass_rate=pass_rate, agreement=rate, traces=n, details=list(details)
    )
    if pass_rate is not None and pass_rate < level:
        alert.breaches.append(f"pass rate {pass_rate:.1%} is below {level:.1%}")
    if rate is not None and rate < level:
        alert.breaches.append(f"judge-engine agreement {rate:.1%} is below {level:.1%}")
    return alert


def _rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def payload(alert: Alert) -> dict[str, object]:
    """The Slack-compatible message: ``text`` (the fallback every receiver shows) and ``blocks``."""
    text = f":rotating_light: seqjudge alert for {alert.subject}: " + "; ".join(alert.breaches)
    fields = [
        {"type": "mrkdwn", "text": f"*Pass rate*\n{_rate(alert.pass_rate)}"},
        {"type": "mrkdwn", "text": f"*Judge-engine agreement*\n{_rate(alert.agreement)}"},
        {"type": "mrkdwn", "text": f"*Traces*\n{alert.traces}"},
        {"type": "mrkdwn", "text": f"*Alert below*\n{alert.level:.1%}"},
    ]
    blocks: list[dict[str, object]] = [
        {"type": "header", "text": {"type": "plain_text", "text": f"seqjudge alert: {alert.subject}"[:150]}},
        {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(f"• {b}" for b in alert.breaches)}},
        {"type": "section", "fields": fields},
    ]
    if alert.details:
        # Slack limits a section's text to 3000 characters.
        blocks.append(
            {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(alert.details)[:2900]}}
        )
    return {"text": text, "blocks": blocks}


def post(url: str, body: dict[str, object], *, timeout: float = TIMEOUT_S) -> None:
    """POST the JSON; raises ``AlertDeliveryError`` naming only the host on any failure."""
    data = json.dumps(body, ensure_ascii=False).encode("utf-8")
    request = urllib.request.Request(
        url, data=data, method="POST", headers={"Content-Type": "application/json; charset=utf-8"}
    )
    where = host_of(url)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - http(s) checked
            status = response.status
    except urllib.error.HTTPError as exc:
        raise AlertDeliveryError(f"the alert webhook at {where} answered HTTP {exc.code}") from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise AlertDeliveryError(f"the alert webhook at {where} could not be reached ({reason})") from None
    if not 200 <= status < 300:
        raise AlertDeliveryError(f"the alert webhook at {where} answered HTTP {status}")


def send(alert: Alert, url: str | None, *, fail_hard: bool = False, err: TextIO | None = None) -> bool:
    """Report a triggered alert on stderr and post it when a webhook is set. Returns True when nothing
    failed. A failed post is a warning unless ``fail_hard`` (then ``AlertDeliveryError``, exit 3)."""
    import sys

    from seqjudge.safetext import shown

    stream = err if err is not None else sys.stderr
    if not alert.triggered:
        return True
    print(shown(f"alert: {alert.subject}: " + "; ".join(alert.breaches)), file=stream)
    if url is None:
        return True
    try:
        post(url, payload(alert))
    except AlertDeliveryError as exc:
        if fail_hard:
            raise
        print(shown(f"warning: {exc}; the results above are complete"), file=stream)
        return False
    print(f"alert posted to {host_of(url)}", file=stream)
    return True
