"""A run's rules in words, for the item page: each rule's requirement and, for a `judge` rule, its criteria
and labelled cases, word for word as the judge's prompt has them (``judge.prompt.guideline``: one source).

The run recorded its rule file's path (config ``rules``) and the rules' hash (fingerprint ``rules_hash``).
The file is read again here; when it is gone the page says so, and when it changed since the run the text
is shown with that warning (the reviewer must know the words may not be the ones the judge read).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from seqjudge.errors import InputError, SeqjudgeError


@dataclass(frozen=True)
class RuleTexts:
    texts: dict[str, str] = field(default_factory=dict)  # rule id -> its words
    note: str | None = None  # why there are none, or why they may differ from what the run used


def rule_texts(config: dict[str, Any], fingerprint: dict[str, Any]) -> RuleTexts:
    from seqjudge.inputs import read_rules
    from seqjudge.judge.prompt import guideline
    from seqjudge.provenance import rules_hash

    path = config.get("rules")
    if not isinstance(path, str) or path in ("", "-"):
        return RuleTexts(note="the run recorded no rule file, so its rules' words cannot be shown")
    try:
        ruleset = read_rules(path, warn=None)
    except (SeqjudgeError, OSError) as exc:
        why = exc.problem if isinstance(exc, InputError) else str(exc)
        return RuleTexts(
            note=f"the rules' words cannot be shown: the run's rule file {path} cannot be read here ({why})"
        )
    texts = {rule.rule_id: guideline(rule, ruleset.aliases) for rule in ruleset.rules}
    note = None
    recorded = fingerprint.get("rules_hash")
    if isinstance(recorded, str) and recorded != rules_hash(ruleset):
        note = f"the rule file {path} changed since this run: these are its words now, not the run's"
    return RuleTexts(texts, note)
