"""How large an input or a rendered text may grow before seqjudge stops with exit 2, in one place.

Each bound is generous for real traces, rules and prompts and stops a hostile or broken input before it
costs gigabytes (a 1 GB line with no newline, a 160 KB rule file whose aliases stand for 2 GB of text, a
prompt no model accepts). Each can be raised (or lowered, as the tests do) with an environment variable:
a bound is read when it is used, so a variable set for one command applies to that command. An unreadable
value is bad input too, named with the variable, never a silent default.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from seqjudge.errors import InputError


@dataclass(frozen=True)
class Size:
    """A bound: ``what`` it counts (its unit in the plural), its default, the variable that overrides it."""

    what: str
    default: int
    env: str

    def value(self) -> int:
        raw = os.environ.get(self.env)
        if raw is None or raw.strip() == "":
            return self.default
        try:
            value = int(raw.strip().replace("_", ""))
        except ValueError:
            value = 0
        if value < 1:
            raise InputError(
                f"{self.env}={raw!r} is not a positive whole number of {self.what}",
                hint=f"set it to the largest size to accept (the default is {self.default:,}), or unset it",
            )
        return value

    def exceeded(
        self,
        subject: str,
        limit: int,
        *,
        source: str | None = None,
        where: str | None = None,
        stopped: str = "it was not read further",
    ) -> InputError:
        """The error for ``subject`` ("line 3", "the prompt") being larger than ``limit``."""
        return InputError(
            f"{subject} is larger than {limit:,} {self.what}, the limit, so {stopped}",
            source=source,
            where=where,
            hint=f"If it is meant to be this large, raise the limit: {self.env}=N (the default is "
            f"{self.default:,})",
        )


# One trace record: a JSONL line, or a whole trace document. Read in bounded pieces, never whole past this.
RECORD_BYTES = Size("bytes", 256 * 1024 * 1024, "SEQJUDGE_MAX_RECORD_BYTES")
# The text a YAML rule or examples file stands for with its aliases (*name) expanded: every scalar's
# characters, counted once per place it is used.
EXPANDED_CHARS = Size("characters", 10_000_000, "SEQJUDGE_MAX_EXPANDED_CHARS")
# A rendered judge prompt (system, rules and examples, trace): past this no model takes it in (4 M
# characters are about a million tokens).
PROMPT_CHARS = Size("characters", 4_000_000, "SEQJUDGE_MAX_PROMPT_CHARS")
