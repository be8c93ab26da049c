"""The rules as a guard before each tool call (docs/guard.md): one evaluator, the engine's, run per session.

guard = Guard.from_files("rules.yaml")
session = guard.session("s1")
d = session.decide("Edit", {"file_path": "a.py"})   # Decision: allow | deny | ask, and why
session.record("Edit", {"file_path": "a.py"})       # the call ran: the session's state advances
session.finish()                                    # what only the end decides (require, ...)
"""

from __future__ import annotations

from seqjudge.errors import GuardError
from seqjudge.guard.core import Guard, Session, degraded, fail_mode_of
from seqjudge.guard.decision import Decision, RuleDecision

__all__ = ["Decision", "Guard", "GuardError", "RuleDecision", "Session", "degraded", "fail_mode_of"]
