"""The project's own small error hierarchy.

Every failure a user can cause or meet is one of these, raised where the cause is known and turned into an
exit code and a one-paragraph message in one place (``seqjudge.cli``). Nothing here may carry a secret.

Exit codes: 1 a verdict (a trace failed or needs review), 2 bad input (``InputError``), 3 infrastructure (a
provider, the store's disk, an alert endpoint), 4 an internal error: any other exception is a bug in
seqjudge, never a verdict, so it must not read as 1 (``|| test $? -eq 1`` in CI) nor as 0.
"""

from __future__ import annotations

from typing import Any


class SeqjudgeError(Exception):
    """Base class; ``exit_code`` is what the CLI exits with."""

    exit_code = 1


class InputError(SeqjudgeError):
    """Bad input from the user: a trace, rule file, catalog, config or argument (exit 2).

    ``source`` names the file (or ``<stdin>``), ``where`` the line and/or JSON path inside it, ``problem``
    what was wrong and ``hint`` how to fix it. ``str()`` renders the one-paragraph message.
    """

    exit_code = 2

    def __init__(
        self, problem: str, *, source: str | None = None, where: str | None = None, hint: str | None = None
    ) -> None:
        self.problem = problem
        self.source = source
        self.where = where
        self.hint = hint
        super().__init__(self.render())

    def render(self) -> str:
        place = ""
        if self.source and self.where:
            place = f"{self.source}, {self.where}: "
        elif self.source:
            place = f"{self.source}: "
        elif self.where:
            place = f"{self.where}: "
        text = place + _sentence(self.problem)
        if self.hint:
            text += " " + _sentence(self.hint)
        return text


def _sentence(text: str) -> str:
    """End ``text`` with a full stop, unless it already ends with one or with an ellipsis ("a, ...")."""
    return text if text.endswith(".") else text + "."


class ProviderError(SeqjudgeError):
    """The model provider could not be reached or refused every attempt (exit 3).

    ``kind`` is one of: auth, connection, rate_limit, timeout, bad_request, server, config.
    """

    exit_code = 3

    def __init__(
        self,
        message: str,
        *,
        kind: str = "server",
        provider: str | None = None,
        status_code: int | None = None,
    ) -> None:
        self.kind = kind
        self.provider = provider
        self.status_code = status_code
        # The judge's attempts recorded before this error ended a judge call (seqjudge.judge.judge.Attempt).
        self.attempts: list[Any] = []
        super().__init__(message)


class InfrastructureError(SeqjudgeError):
    """What seqjudge runs on cannot run it (Spark's Python workers cannot import it, ...): exit 3."""

    exit_code = 3


class StoreError(InfrastructureError):
    """The store's database failed under a write: a full disk, an I/O error, a read-only file or a lock held
    too long (exit 3). ``path`` is the store's file."""

    exit_code = 3

    def __init__(self, problem: str, *, path: str, remedy: str | None = None) -> None:
        self.path = path
        remedy = remedy or (
            "Free disk space (or fix the file's permissions, or end the other process holding it)"
        )
        super().__init__(
            f"{path}: the seqjudge store failed ({problem}); what this command had not stored by then is not "
            f"stored. {remedy}, then run the command again (`seqjudge run --resume RUN` finishes a run)."
        )


class JudgeOutputError(SeqjudgeError):
    """A judge reply that failed parsing, the schema or a semantic check; the harness re-asks with it."""

    exit_code = 1


class GuardError(SeqjudgeError):
    """The guard (``seqjudge.guard``) cannot decide: its rule or config file is bad, or it was asked
    something it cannot answer (exit 2). A host turns it into its fail mode's decision (``Guard.degraded``);
    ``cause`` is the error it stands for, whose message (never a secret: rules and paths only) it carries."""

    exit_code = 2

    def __init__(self, message: str, *, cause: BaseException | None = None) -> None:
        self.cause = cause
        super().__init__(message)
