"""The guard inside agent frameworks (docs/guard-adapters.md): each adapter asks the guard before
a tool call, blocks a denied one in the framework's own way (the model is told the rule and the suggestion),
and records every call that ran, so that the session's history is the one the offline engine would read.

- ``seqjudge.guard.adapters.openai_agents``: OpenAI Agents SDK tool input/output guardrails (extra
  ``openai-agents``);
- ``seqjudge.guard.adapters.langchain``: a LangChain v1 ``AgentMiddleware`` around tool calls (extra
  ``langchain``).

Each framework is imported by its own module only, so importing this package needs neither. The state both
keep per session, shadow mode and the decision log are ``GuardedSessions`` (``_sessions.py``): one place.
"""

from __future__ import annotations

from seqjudge.guard.adapters._sessions import GuardedSessions

__all__ = ["GuardedSessions"]
