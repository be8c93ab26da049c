"""Defaults and names that the command line needs before any command runs.

They live here, in a module that imports nothing, so that building the CLI (``seqjudge --help``) does not
load the modules that own the concepts (the report models, the config, the store, the importers). Those
modules import their value from here; nothing else declares them.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from typing import Literal

# Scores below this go to review (seqjudge.report).
DEFAULT_THRESHOLD = 0.85
# The SQLite store (seqjudge.config, seqjudge.store).
DEFAULT_STORE = ".seqjudge/seqjudge.db"
DEFAULT_STORE_PATH = Path(DEFAULT_STORE)
# What every command's --store reads when the flag is not given (seqjudge.cli.options).
STORE_ENV = "SEQJUDGE_STORE"


# ``scheme:/``: a store named by a URL (a database server, seqjudge.store.target), not a file path. (``C:/x``
# has a one-letter scheme: a Windows drive, a path.)
STORE_URL = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]+):/")


def is_store_url(store: str | Path) -> bool:
    return isinstance(store, str) and bool(STORE_URL.match(store))


def store_dir(store: str | Path) -> Path:
    """This machine's folder for the files beside a store (the response cache, certificates): a SQLite
    store's folder; for a store on a database server, the default store's folder."""
    return DEFAULT_STORE_PATH.parent if is_store_url(store) else Path(store).parent


def store_flag(path: str | Path | None) -> str:
    """`` --store PATH`` to append to a command shown to the user, when that command typed here would open
    another store than ``path`` (a run of `seqjudge run my-suite` is stored in my-suite's folder); else "".
    A URL is shown without its password (libpq reads it from PGPASSWORD or ~/.pgpass).
    """
    if path is None:
        return ""
    default = os.environ.get(STORE_ENV) or DEFAULT_STORE
    if is_store_url(path) or is_store_url(default):
        if str(path) == default:
            return ""
        return f" --store {shlex.quote(mask_url(str(path)))}"
    if os.path.abspath(default) == os.path.abspath(path):
        return ""
    return f" --store {shlex.quote(str(path))}"


# A project's config, found in a folder by `run`, `check`, `calibrate` and `init` (seqjudge.config).
CONFIG_FILE = "seqjudge.yaml"

# Why a trace is routed to a person (seqjudge.crosscheck).
# Each names what put the trace there (docs/review.md lists them with what a reviewer does about each).
ReviewReason = Literal[
    "below_threshold",  # no critical rule failed, but the score is below the threshold
    "high_risk_imperfect",
    "judge_engine_disagreement",
    "unscored",  # the judge's reply was unscored (invalid, refused, or the call failed)
    "judge_rule_undecided",
    "low_confidence",  # a judge rule decision below its certified confidence threshold (seqjudge.judge_gate)
    "uncertified_judge_fail",  # the judge failed a `judge` rule no calibration certificate covers
    "engine_fail",  # a deterministic critical rule failed (queued only with `review: {fails: true}`)
    "judge_fail",  # a certified judge's critical fail stands (queued only with `review: {fails: true}`)
    "audit",  # a sampled auto-pass (seqjudge.audit): its verdict stays pass
]
REVIEW_REASONS: tuple[str, ...] = ReviewReason.__args__  # type: ignore[attr-defined]

# The trace formats of seqjudge.ingest, in its detection order (a test holds them equal to ingest.FORMATS).
TRACE_FORMATS: tuple[str, ...] = (
    "native",
    "claude-code",
    "codex",
    "tau2",
    "openai-log",
    "langsmith",
    "langchain",
    "anthropic",
    "openai",
    "openinference",
    "openllmetry",
    "vercel-ai",
    "otel",
    "assay",
)


# A URL's password (user:password@ in its authority, or a password=... query option: libpq accepts both),
# shown as MASK wherever a store URL is printed, stored or logged (store.target parses the
# URL; this lives here so that store_flag, which builds commands shown to the user, imports nothing).
MASK = "***"
_USERINFO = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*:/+[^/@:\s]*):[^/@\s]*@")
_QUERY_PASSWORD = re.compile(r"(?P<head>[?&]password=)[^&\s]*", re.IGNORECASE)


def mask_url(text: str) -> str:
    """``text`` with the password of every URL in it replaced by ``***``."""
    text = _USERINFO.sub(lambda m: f"{m['head']}:{MASK}@", text)
    return _QUERY_PASSWORD.sub(lambda m: f"{m['head']}{MASK}", text)
