"""The store: runs, results per trace and per rule, judge attempts, review items, baselines, batches; in a
SQLite file (the default) or a PostgreSQL database (docs/store.md).

This package is the only place that writes SQL. ``Store`` is one class composed of one mixin per concern, each
in its own module:

- ``target``: what ``--store`` names (a path, a PostgreSQL URL) and how it is shown without its password;
- ``connection``: opening, pragmas (WAL, ``synchronous=NORMAL``), the lock, transactions, migrating on open;
  ``postgres``: the same calling convention on a PostgreSQL server; ``copy``: a store copied to another;
- ``schema``: the tables, as the ordered ``MIGRATIONS``;
- ``runs``, ``results``, ``review``, ``baselines``, ``batches``, ``export``, ``guard``: the tables of each
  concern (``guard``: the runtime guard's decisions per session, shadow mode);
- ``reviewers``: the workbench's reviewers and browser sessions; ``team``: the append-only record of
  decisions, blind double review, adjudication and claims; ``queue``: the queue's pages and the agreement;
- ``models``: what the store returns; ``codec``: timestamps, JSON columns, results rebuilt.

Design decisions:

- One transaction per trace (``save_result``): the result row, its rule decisions, its judge attempts and
  its review item are committed together or not at all, so a run killed at any moment (SIGKILL included)
  leaves every completed trace whole and nothing half-written. ``(run_id, trace_id)`` is unique: resume
  never stores (or judges) a trace twice.
- WAL journal, ``synchronous=NORMAL``: a commit survives the process being killed; only a power loss may
  drop the last commits (never corrupt the file), which ``--resume`` then redoes.
- The schema is versioned: ``schema_version`` holds one row per applied migration and ``MIGRATIONS`` is
  applied in order on open, each in its own transaction. A file written by a newer seqjudge is refused.
  ``Store.migrations`` (default ``MIGRATIONS``) and ``Store.new_run_id`` are class attributes: a test
  replaces them on ``Store`` to play another schema or draw its own run ids.
- Secrets: traces are redacted with the run's configured names (``config["redact"]``, default
  ``DEFAULT_REDACT``; a configured list replaces the default, an empty list turns key redaction off),
  strings in results and judge replies have ``key=value`` secrets redacted, run configs lose secret-named
  keys, and the values of secret-looking environment variables (API keys) are removed from every value
  written, whatever key they hide under.
- The full ``TraceResult.model_dump(mode="json")`` is stored beside the queryable columns, so that a
  result is rebuilt exactly (the judge as a ``JudgeResult``).
"""

from __future__ import annotations

from seqjudge.store.baselines import BaselinesMixin
from seqjudge.store.batches import BatchesMixin
from seqjudge.store.codec import judge_data, rebuild_result
from seqjudge.store.connection import DEFAULT_STORE_PATH, Connection
from seqjudge.store.export import ExportMixin, read_export
from seqjudge.store.guard import GuardMixin
from seqjudge.store.models import (
    AttemptRecord,
    BatchInfo,
    BatchRequest,
    BatchTrace,
    DuplicateTraceError,
    GuardDecisionRecord,
    Resolution,
    ReviewDetail,
    ReviewItem,
    RunInfo,
    StoredResult,
)
from seqjudge.store.queue import AgreementReport, PairAgreement, QueueEntry, QueueMixin, QueuePage
from seqjudge.store.results import ResultsMixin
from seqjudge.store.review import ReviewMixin
from seqjudge.store.reviewers import Reviewer
from seqjudge.store.runs import FINAL_STATUSES, LIST_RUNS_HINT, RUN_STATUSES, RunsMixin, new_run_id
from seqjudge.store.schema import MIGRATIONS, Migration
from seqjudge.store.team import Claim, Decision, ItemResolvedError, ItemState

__all__ = [
    "DEFAULT_STORE_PATH",
    "FINAL_STATUSES",
    "LIST_RUNS_HINT",
    "MIGRATIONS",
    "RUN_STATUSES",
    "AgreementReport",
    "AttemptRecord",
    "BatchInfo",
    "BatchRequest",
    "BatchTrace",
    "Claim",
    "Decision",
    "DuplicateTraceError",
    "GuardDecisionRecord",
    "ItemResolvedError",
    "ItemState",
    "Migration",
    "PairAgreement",
    "QueueEntry",
    "QueuePage",
    "Resolution",
    "ReviewDetail",
    "ReviewItem",
    "Reviewer",
    "RunInfo",
    "Store",
    "StoredResult",
    "judge_data",
    "new_run_id",
    "read_export",
    "rebuild_result",
]


class Store(
    GuardMixin,
    QueueMixin,
    ExportMixin,
    ReviewMixin,
    ResultsMixin,
    BatchesMixin,
    BaselinesMixin,
    RunsMixin,
    Connection,
):
    """``Store(path)``: open (creating it and its folders unless ``create=False``) and migrate."""
