"""What the store gives back (runs, stored results, judge attempts, review items, batch records) and its
error for a trace stored twice in a run."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from seqjudge.crosscheck import RuleDecision, TraceResult
from seqjudge.errors import InputError
from seqjudge.trace import Trace


class RunInfo(BaseModel):
    id: str
    label: str | None = None
    status: Literal["running", "completed", "stopped", "interrupted", "batch_pending"]
    started_at: datetime
    finished_at: datetime | None = None
    config: dict[str, Any] = Field(default_factory=dict)
    fingerprint: dict[str, Any] = Field(default_factory=dict)
    totals: dict[str, Any] | None = None
    counts: dict[str, int] = Field(default_factory=dict)  # traces, pass, fail, review; review_open/resolved


class StoredResult(BaseModel):
    run_id: str
    trace_id: str
    saved_at: datetime
    trace: Trace
    result: TraceResult


class AttemptRecord(BaseModel):
    """One stored judge attempt (``seqjudge.judge.judge.Attempt`` as written)."""

    n: int
    request_hash: str
    raw_reply: str
    error: str | None = None
    error_stage: str | None = None
    usage: dict[str, Any] = Field(default_factory=dict)
    latency_s: float = 0.0
    finish_reason: str
    max_tokens: int | None = None
    reasked: bool = False
    cached: bool = False


class Resolution(BaseModel):
    verdict: Literal["pass", "fail"]
    rules: dict[str, Literal["pass", "fail"]] = Field(default_factory=dict)
    note: str = ""
    reviewer: str
    resolved_at: datetime


class ReviewItem(BaseModel):
    id: int
    run_id: str
    trace_id: str
    reasons: list[str]
    status: Literal["open", "resolved"]
    created_at: datetime
    verdict: str  # the trace's reconciled verdict
    score: float
    resolution: Resolution | None = None
    inclusion_probability: float | None = None  # an `audit` item: the chance its trace had to be drawn


class ReviewDetail(ReviewItem):
    """A review item with everything a reviewer needs: the trace, both reports (``result.engine``,
    ``result.judge``), the rule decisions and the raw judge replies."""

    trace: Trace
    result: TraceResult
    attempts: list[AttemptRecord] = Field(default_factory=list)

    @property
    def disagreements(self) -> list[RuleDecision]:
        return self.result.disagreements


class BatchTrace(BaseModel):
    """A trace of a batch run as kept until its result is stored (see ``Store.put_batch_traces``)."""

    trace_id: str
    custom_id: str
    trace: Trace
    engine: dict[str, Any]
    prompt: dict[str, Any]
    request: dict[str, Any]


class BatchInfo(BaseModel):
    id: str
    run_id: str
    provider: str
    model: str
    round: int
    purpose: str
    input_file_id: str | None = None
    wire: dict[str, Any] = Field(default_factory=dict)
    request_count: int
    status: str  # the provider's own word, as last seen
    counts: dict[str, int] = Field(default_factory=dict)
    state: Literal["submitted", "collected"]
    submitted_at: datetime
    checked_at: datetime | None = None
    collected_at: datetime | None = None


class BatchRequest(BaseModel):
    batch_id: str
    custom_id: str
    trace_id: str
    purpose: Literal["first", "retry", "reask"]
    attempt: int  # the judge attempt this request is (1 = the first)
    prompt_hash: str
    request_hash: str
    session: dict[str, Any]
    outcome: Literal["succeeded", "errored", "expired", "canceled"] | None = None
    result: dict[str, Any] | None = None
    error: str | None = None
    handled: bool = False


class DuplicateTraceError(InputError):
    """A trace id already stored in the run: trace ids must be unique within a run."""


class GuardDecisionRecord(BaseModel):
    """One stored decision of the runtime guard (``seqjudge.guard``): what it said before a tool call of a
    session, per rule, and whether it was only recorded (``shadow``) or enforced."""

    session_id: str
    seq: int  # 1, 2, ... in the order the session's decisions were recorded
    decided_at: datetime
    tool: str
    call_id: str | None = None
    action: Literal["allow", "deny", "ask"]
    rules: list[dict[str, Any]] = Field(default_factory=list)  # rule_id, outcome, message, suggestion
    degraded: str | None = None  # the fail-mode note when the guard could not decide
    shadow: bool

    @property
    def denied_rules(self) -> list[str]:
        return [str(r.get("rule_id")) for r in self.rules if r.get("outcome") == "deny"]
