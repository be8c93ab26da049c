"""What the guard answers: a decision on one proposed call, and each rule's part in it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Action = Literal["allow", "deny", "ask"]
Outcome = Literal["allow", "deny", "pending", "ask", "skipped"]
JudgeMode = Literal["skip", "ask", "model"]
FailMode = Literal["deny", "allow"]
JUDGE_MODES: tuple[str, ...] = JudgeMode.__args__  # type: ignore[attr-defined]
FAIL_MODES: tuple[str, ...] = FailMode.__args__  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True)
class RuleDecision:
    """One rule on one proposed call: ``deny`` (the call would make a violation certain), ``allow``,
    ``pending`` (decided only when the session ends), ``ask`` (a ``judge`` rule handed to the host's
    approval flow) or ``skipped`` (a ``judge`` rule the guard does not decide)."""

    rule_id: str
    outcome: Outcome
    message: str
    suggestion: str | None = None

    def reason(self) -> str:
        """``rule id: message. suggestion``, as a host shows a deny."""
        text = f"{self.rule_id}: {self.message}"
        if self.suggestion:
            text += f" {self.suggestion}"
        return text


@dataclass(frozen=True, slots=True)
class Decision:
    """The guard's answer on one proposed call. ``reason`` is what a host shows for a deny or an ask (each
    deciding rule's id, message and suggestion); ``degraded`` says the guard could not decide and what its
    fail mode made of it (None: it decided)."""

    action: Action
    rules: list[RuleDecision] = field(default_factory=list)
    reason: str = ""
    degraded: str | None = None

    @classmethod
    def of(cls, rules: list[RuleDecision]) -> Decision:
        """Deny if any rule denies, else ask if any asks, else allow; the reason names the rules that
        decided it."""
        for action in ("deny", "ask"):
            deciding = [r for r in rules if r.outcome == action]
            if deciding:
                return cls(action, rules, " ".join(r.reason() for r in deciding))  # type: ignore[arg-type]
        return cls("allow", rules, "")
