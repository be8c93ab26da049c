"""Values in and out of the store's columns: timestamps, compact JSON, and results rebuilt from their JSON."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ValidationError

from seqjudge.crosscheck import TraceResult


def _now() -> datetime:
    return datetime.now(UTC)


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="microseconds")


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)  # built once


def _dumps(value: Any) -> str:
    return _ENCODER.encode(value)


def _jsonable(value: Any) -> Any:
    """Plain JSON values (a config may hold paths or enums): what will be stored, before it is redacted."""
    return json.loads(_dumps(value))


def judge_data(judge: Any) -> dict[str, Any] | None:
    """``TraceResult.judge`` (a JudgeResult, its JSON dict, or None) as a JSON dict."""
    if judge is None:
        return None
    if isinstance(judge, BaseModel):
        return judge.model_dump(mode="json")
    if isinstance(judge, dict):
        return judge
    raise TypeError(f"TraceResult.judge must be a JudgeResult, a dict or None, not {type(judge).__name__}")


def _rebuild_judge(data: Any) -> Any:
    """A stored judge back as a ``JudgeResult`` (what ``reconcile`` was given); anything else as stored."""
    if not isinstance(data, dict):
        return data
    from seqjudge.judge.judge import JudgeResult

    try:
        return JudgeResult.model_validate(data)
    except ValidationError:
        return data


def rebuild_result(data: dict[str, Any]) -> TraceResult:
    """A ``TraceResult`` from its ``model_dump(mode="json")`` (the store's column, or an export line)."""
    judge = data.get("judge")
    result = TraceResult.model_validate({**data, "judge": None})
    result.judge = _rebuild_judge(judge)
    return result
