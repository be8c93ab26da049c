"""What an unexpected exception leaves behind: its traceback in a log file, and one paragraph for the user.

Any exception that is not a ``SeqjudgeError`` (nor an interrupt or a usage error) is a bug in seqjudge, not a
verdict: the CLI exits with ``INTERNAL_ERROR`` (4), never with 1 ("a trace failed"), which a CI step that lets
1 through (``|| test $? -eq 1``) would accept. The traceback goes to a file rather than the terminal, so the
message stays one paragraph; the file is written to the temporary directory (always writable, unlike the
working directory or a store's folder on a full disk), readable by its owner only, and with secrets removed
as the store removes them (key-shaped values, ``user:password@`` in URLs, secret environment values), since a
traceback quotes exception messages, which may hold an argument or a URL.
"""

from __future__ import annotations

import os
import sys
import tempfile
import traceback
from datetime import UTC, datetime
from pathlib import Path

from seqjudge.version import __version__

INTERNAL_ERROR = 4


def write_log(exc: BaseException, argv: list[str]) -> Path | None:
    """The traceback of ``exc`` (and the command line, the version) in a new file; None if none could be
    written (the disk may be the very thing that failed)."""
    try:
        from seqjudge.redact import ENV_SECRET_NAMES, redact_text, scrub_secrets, secret_env_values

        text = "".join(
            [
                f"seqjudge {__version__}, Python {sys.version.split()[0]}, {datetime.now(UTC).isoformat()}\n",
                f"command: seqjudge {' '.join(argv)}\n\n",
                *traceback.format_exception(exc),
            ]
        )
        text = scrub_secrets(redact_text(text), secret_env_values(ENV_SECRET_NAMES))
        fd, name = tempfile.mkstemp(prefix="seqjudge-crash-", suffix=".log")  # mode 0600
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as out:
            out.write(text)
    except Exception:  # a full disk, or the bug again: the message says no log was written
        return None
    return Path(name)


def message(exc: BaseException, log: Path | None, argv: list[str]) -> str:
    """The paragraph the CLI prints: what happened, that it is no verdict, where the details are."""
    kind = type(exc).__name__
    where = (
        f"The traceback is in {log}; please report the bug on seqjudge's issue tracker with that file"
        if log is not None
        else "The traceback could not be written to a file either; please report the bug on seqjudge's issue "
        "tracker with the command that failed"
    )
    # A run stopped by a bug is stored interrupted (seqjudge.runner): say how it is finished.
    resume = (
        " The run is stored as interrupted, with the traces decided before; `seqjudge run --resume RUN` "
        "finishes it once this is fixed."
        if argv[:1] == ["run"]
        else ""
    )
    return (
        f"internal error: seqjudge stopped on an unexpected {kind}. This is a bug in seqjudge, not a verdict "
        f"on your traces.{resume} {where} (exit code {INTERNAL_ERROR})."
    )
