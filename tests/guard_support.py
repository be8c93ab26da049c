"""What the guard's adapter and shadow tests share: a support agent's rule file and its two tools' bodies."""

from __future__ import annotations

from pathlib import Path

RULES = """\
rules:
  - id: verify-before-delete
    type: before
    first: verify_identity
    then: delete_customer
    severity: critical
    description: Delete a customer only after a successful identity verification.
"""
RULE_ID = "verify-before-delete"
# Every attempt counts, a refused one too (the host logs it as a failed call).
ONE_DELETE = """\
  - id: one-delete
    type: max_calls
    tool: delete_customer
    max: 1
    severity: critical
    description: At most one deletion attempt per session.
"""


def write_rules(folder: Path, extra: str = "") -> Path:
    path = folder / "rules.yaml"
    path.write_text(RULES + extra, encoding="utf-8")
    return path


class Tools:
    """The tools' bodies, and what ran: a test asserts the body of a denied call never ran."""

    def __init__(self, *, verify_fails: bool = False) -> None:
        self.ran: list[str] = []
        self.verify_fails = verify_fails

    def verify_identity(self, customer_id: str) -> str:
        self.ran.append(f"verify_identity({customer_id})")
        if self.verify_fails:
            raise RuntimeError("identity service unavailable")
        return f"identity of {customer_id} verified"

    def delete_customer(self, customer_id: str) -> str:
        self.ran.append(f"delete_customer({customer_id})")
        return f"customer {customer_id} deleted"
