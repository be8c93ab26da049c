"""The review workbench's team layer (store.team): reviewers and tokens, sessions, blind double review,
adjudication, the append-only record, claims, agreement and the queue."""

from __future__ import annotations

import io
import json
import sqlite3
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from seqjudge.errors import InputError
from seqjudge.store import MIGRATIONS, ItemResolvedError, Store
from seqjudge.store.codec import _now
from test_store import pair, raw_rows, where_of

RULE = "confirm-delete"  # the judge rule of test_store's RULES


def queued(s: Store, count: int, *, config: dict[str, Any] | None = None, name: str = "t") -> list[int]:
    """A run of ``count`` traces routed to review (the judge and the engine disagree); their item ids."""
    run_id = s.create_run(
        config=config if config is not None else {"review": {"reviews_per_item": 2}}, fingerprint={}
    )
    for i in range(count):
        s.save_result(run_id, *pair(f"{name}-{i}", "split"))
    ids = [item.id for item in s.review_items(run=run_id)]
    assert len(ids) == count
    return ids


@pytest.fixture
def db(store_target: str) -> Any:
    """A store with three reviewers, on each backend (store_target, tests/conftest.py)."""
    with Store(store_target) as s:
        s.add_reviewer("ana")
        s.add_reviewer("bo")
        s.add_reviewer("chief", admin=True)
        yield s


def decision_rows(s: Store, item_id: int) -> int:
    return int(raw_rows(s, "SELECT COUNT(*) FROM review_decisions WHERE item_id = ?", (item_id,))[0][0])


def labels(s: Store) -> dict[str, dict[str, Any]]:
    out = io.StringIO()
    s.export_labels(out)
    return {line["trace_id"]: line for line in map(json.loads, out.getvalue().splitlines())}


# -- reviewers and tokens ------------------------------------------------------------------------------------
def test_only_a_hash_of_the_token_is_stored(tmp_path: Path) -> None:
    path = tmp_path / "seqjudge.db"
    with Store(path) as s:
        token = s.add_reviewer("ana", admin=True)
        session_id, csrf = s.open_session("ana")
        assert s.reviewer_for_token(token) is not None
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir())  # the WAL and shm files too
    assert token.encode() not in stored
    assert session_id.encode() not in stored
    assert b"ana" in stored  # the search does find what is there


def test_a_token_signs_in_its_reviewer_until_disabled(db: Store) -> None:
    token = db.add_reviewer("dee", admin=True)
    found = db.reviewer_for_token(token)
    assert found is not None and found.name == "dee" and found.admin
    assert db.reviewer_for_token(token + "x") is None
    session_id, _ = db.open_session("dee")
    db.disable_reviewer("dee")
    assert db.reviewer_for_token(token) is None
    assert db.session(session_id) is None
    with pytest.raises(InputError, match="disabled"):
        db.open_session("dee")
    [item] = queued(db, 1)
    with pytest.raises(InputError, match="disabled"):
        db.decide(item, "dee", "pass")
    with pytest.raises(InputError, match="disabled"):
        db.resolve_reviews([item], verdict="pass", reviewer="dee")
    assert decision_rows(db, item) == 0
    assert [r.name for r in db.reviewers() if not r.active] == ["dee"]


def test_a_duplicate_or_unfit_name_is_refused(db: Store) -> None:
    with pytest.raises(InputError, match="already a reviewer named 'ana'"):
        db.add_reviewer("ana")
    for bad in ("", "a,b", "x\u202e", " lead", "a" * 65):
        with pytest.raises(InputError, match="cannot be a reviewer's name"):
            db.add_reviewer(bad)


def test_a_session_expires_and_closes(db: Store) -> None:
    session_id, csrf = db.open_session("ana", ttl=timedelta(minutes=10))
    got = db.session(session_id)
    assert got is not None and got[0].name == "ana" and got[1] == csrf
    assert db.session(session_id, now=_now() + timedelta(minutes=11)) is None
    assert db.session("not-a-session") is None
    other, other_csrf = db.open_session("ana")
    assert other_csrf != csrf  # the CSRF token is per session
    db.close_session(session_id)
    assert db.session(session_id) is None
    assert db.session(other) is not None
    db.open_session("bo", ttl=timedelta(0))  # expired at once: dropped when the next session opens
    db.open_session("bo")
    assert [r[0] for r in raw_rows(db, "SELECT reviewer FROM web_sessions ORDER BY reviewer")] == [
        "ana",
        "bo",
    ]


# -- required reviews ----------------------------------------------------------------------------------------
def test_the_run_config_sets_the_reviews_an_item_needs(db: Store) -> None:
    per_level = {"review": {"reviews_per_item": {"high": 3}}}
    high = queued(db, 1, config={**per_level, "risk_level": "high"}, name="h")
    low = queued(db, 1, config={**per_level, "risk_level": "low"}, name="l")
    plain = queued(db, 1, config={}, name="p")
    two = queued(db, 1, name="two")
    assert [db.item_state(i[0], "ana").required_reviews for i in (high, low, plain, two)] == [3, 1, 1, 2]


# -- blind double review, agreement, dispute, adjudication ---------------------------------------------------
def test_reviews_are_blind_until_ones_own_is_in(db: Store) -> None:
    [item] = queued(db, 1)
    after_ana = db.decide(item, "ana", "fail", {RULE: "fail"}, "asked nothing")
    assert after_ana.state == "in_review" and after_ana.reviews_in == 1
    assert [d.reviewer for d in after_ana.decisions] == ["ana"]
    bo_view = db.item_state(item, "bo")
    assert bo_view.decisions == [] and bo_view.hidden == 1 and bo_view.mine is None
    chief_view = db.item_state(item, "chief")  # an admin is blind too while the item is only in review
    assert chief_view.decisions == [] and chief_view.hidden == 1
    after_bo = db.decide(item, "bo", "pass", {RULE: "pass"})
    assert after_bo.state == "disputed"
    assert {d.reviewer for d in after_bo.decisions} == {"ana", "bo"} and after_bo.hidden == 0
    assert {d.reviewer for d in db.item_state(item, "chief").decisions} == {"ana", "bo"}
    assert db.item_state(item, "dee-not-registered").hidden == 2


def test_two_agreeing_reviews_resolve_and_export_the_label(db: Store) -> None:
    [item] = queued(db, 1)
    assert db.decide(item, "ana", "fail", {RULE: "fail"}, "no confirmation").state == "in_review"
    assert db.review_item(item).status == "open"
    state = db.decide(item, "bo", "fail", {RULE: "fail"}, "none asked")
    assert state.state == "resolved" and len(state.decisions) == 2
    detail = db.review_item(item)
    assert detail.resolution is not None
    assert (detail.resolution.verdict, detail.resolution.reviewer) == ("fail", "ana, bo")
    assert detail.resolution.note == "no confirmation | none asked"
    label = labels(db)[detail.trace_id]
    assert (label["verdict"], label["rules"], label["labeler"]) == ("fail", {RULE: "fail"}, "ana, bo")


def test_a_dispute_is_adjudicated_by_an_admin_only(db: Store) -> None:
    [item] = queued(db, 1)
    db.decide(item, "ana", "fail", {RULE: "fail"})
    assert db.decide(item, "bo", "pass", {RULE: "pass"}).state == "disputed"
    assert db.queue(state="disputed").total == 1
    with pytest.raises(InputError, match="not an admin"):
        db.decide(item, "ana", "fail", {RULE: "fail"}, kind="adjudication")
    assert decision_rows(db, item) == 2
    state = db.decide(item, "chief", "pass", {RULE: "pass"}, "the user said yes earlier", kind="adjudication")
    assert state.state == "resolved"
    resolution = db.review_item(item).resolution
    assert resolution is not None and (resolution.verdict, resolution.reviewer) == ("pass", "chief")
    label = labels(db)[db.review_item(item).trace_id]
    assert (label["verdict"], label["rules"], label["labeler"]) == ("pass", {RULE: "pass"}, "chief")
    assert db.queue(state="disputed").total == 0 and db.queue(state="resolved").total == 1


def test_a_rule_labelled_by_one_reviewer_only_is_a_dispute(db: Store) -> None:
    [item] = queued(db, 1)
    db.decide(item, "ana", "fail", {RULE: "fail"})
    assert db.decide(item, "bo", "fail").state == "disputed"


def test_adjudication_needs_a_dispute(db: Store) -> None:
    [item] = queued(db, 1)
    with pytest.raises(InputError, match="not disputed"):
        db.decide(item, "chief", "pass", kind="adjudication")
    assert decision_rows(db, item) == 0


def test_a_changed_vote_is_appended_and_the_latest_counts(db: Store) -> None:
    [item] = queued(db, 1)
    db.decide(item, "ana", "pass", {RULE: "pass"})
    db.decide(item, "bo", "fail", {RULE: "fail"})
    assert db.item_state(item, "ana").state == "disputed"
    db.decide(item, "bo", "pass", {RULE: "pass"}, "read it again")  # bo changes their mind: now they agree
    assert decision_rows(db, item) == 3
    history = db.decision_history(item)
    assert [(d.seq, d.reviewer, d.verdict) for d in history] == [
        (1, "ana", "pass"),
        (2, "bo", "fail"),
        (3, "bo", "pass"),
    ]
    assert db.item_state(item, "ana").state == "resolved"
    assert db.review_item(item).resolution.verdict == "pass"  # type: ignore[union-attr]


def test_two_reviewers_deciding_at_once_are_both_kept(db: Store) -> None:
    items = queued(db, 20)
    gate = threading.Barrier(2)

    def decide(name: str, verdict: str) -> None:
        with Store(where_of(db)) as mine:  # each its own connection, as two web requests
            gate.wait()
            for item in items:
                mine.decide(item, name, verdict)

    workers = [threading.Thread(target=decide, args=args) for args in (("ana", "pass"), ("bo", "fail"))]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    for item in items:
        assert sorted(d.reviewer for d in db.decision_history(item)) == ["ana", "bo"]
        assert db.item_state(item, "ana").state == "disputed"
    assert db.queue(state="disputed").total == 20


def test_a_decision_on_a_resolved_item_is_refused_and_nothing_is_lost(db: Store) -> None:
    [item] = queued(db, 1)
    db.decide(item, "ana", "pass", {RULE: "pass"})
    db.decide(item, "bo", "pass", {RULE: "pass"})
    with pytest.raises(ItemResolvedError, match=r"resolved meanwhile: pass by ana, bo at "):
        db.decide(item, "chief", "fail", {RULE: "fail"})
    assert decision_rows(db, item) == 2
    assert db.review_item(item).resolution.verdict == "pass"  # type: ignore[union-attr]


def test_a_one_review_item_resolves_at_once_and_the_cli_path_records_it(db: Store) -> None:
    [web, cli] = queued(db, 2, config={})
    assert db.decide(web, "ana", "fail", {RULE: "fail"}).state == "resolved"
    db.resolve_reviews([cli], verdict="pass", reviewer="someone-at-the-terminal")
    db.resolve_reviews([cli], verdict="fail", reviewer="someone-at-the-terminal", note="on reflection")
    history = db.decision_history(cli)
    assert [(d.reviewer, d.kind, d.verdict) for d in history] == [
        ("someone-at-the-terminal", "review", "pass"),
        ("someone-at-the-terminal", "review", "fail"),
    ]
    assert db.review_item(cli).resolution.verdict == "fail"  # type: ignore[union-attr]


def test_the_cli_counts_as_one_review_of_an_item_that_needs_two(db: Store) -> None:
    [item] = queued(db, 1)
    db.resolve_reviews([item], verdict="fail", reviewer="ana")
    assert db.item_state(item, "ana").state == "in_review"
    db.resolve_reviews([item], verdict="pass", reviewer="bo")
    assert db.item_state(item, "ana").state == "disputed"
    with pytest.raises(InputError, match="not an admin"):
        db.resolve_reviews([item], verdict="pass", reviewer="bo", adjudicate=True)
    with pytest.raises(InputError, match="not a registered reviewer"):
        db.resolve_reviews([item], verdict="pass", reviewer="stranger", adjudicate=True)
    db.resolve_reviews([item], verdict="pass", reviewer="chief", adjudicate=True)
    assert db.review_item(item).resolution.reviewer == "chief"  # type: ignore[union-attr]
    with pytest.raises(ItemResolvedError):
        db.resolve_reviews([item], verdict="fail", reviewer="ana")  # two reviews' outcome is not overwritten


# -- claims --------------------------------------------------------------------------------------------------
def test_a_claim_shows_never_blocks_and_expires(db: Store) -> None:
    [item, other] = queued(db, 2)
    db.claim(item, "ana")
    assert db.item_state(item, "bo").claimed_by == "ana"
    assert [c.item_id for c in db.claims()] == [item]
    assert [e.item.id for e in db.queue(claimed_by="ana").entries] == [item]
    assert db.decide(item, "bo", "pass").state == "in_review"  # bo may decide an item ana claimed
    later = _now() + timedelta(minutes=31)
    assert db.claims(now=later) == [] and db.item_state(item, "bo", now=later).claimed_by is None
    db.claim(item, "bo")
    assert db.item_state(item, "ana").claimed_by == "bo"
    db.release(item, "ana")  # not ana's claim: it stays
    assert db.item_state(item, "ana").claimed_by == "bo"
    db.release(item, "bo")
    assert db.item_state(item, "ana").claimed_by is None
    assert db.item_state(other, "ana").claimed_by is None


# -- agreement -----------------------------------------------------------------------------------------------
def test_kappa_per_reviewer_pair_and_rule(db: Store) -> None:
    items = queued(db, 5)
    # ana and bo on four items: verdicts (fail, fail), (pass, pass), (fail, pass), (pass, pass).
    # p_o = 3/4; ana fails 2/4, bo 1/4; p_e = 1/2 * 1/4 + 1/2 * 3/4 = 1/2; kappa = (3/4 - 1/2) / (1/2) = 1/2.
    # The rule: (fail, fail) three times, (pass, pass) once: p_o = 1, p_e = 3/4 * 3/4 + 1/4 * 1/4 = 5/8,
    # kappa = 1. ana and chief on the fifth item only.
    votes = [
        ("fail", "fail", "fail", "fail"),
        ("pass", "pass", "pass", "pass"),
        ("fail", "pass", "fail", "fail"),
    ]
    votes.append(("pass", "pass", "fail", "fail"))
    for item, (va, vb, ra, rb) in zip(items, votes, strict=False):
        db.decide(item, "ana", va, {RULE: ra})
        db.decide(item, "bo", vb, {RULE: rb})
    db.decide(items[4], "ana", "pass")
    db.decide(items[4], "chief", "fail")
    report = db.agreement()
    assert report.items == 5
    by_pair = {p.reviewers: p for p in report.pairs}
    assert set(by_pair) == {("ana", "bo"), ("ana", "chief")}
    ab = by_pair["ana", "bo"]
    assert (ab.verdict.decisions, ab.verdict.agreed, ab.verdict.kappa) == (4, 3, pytest.approx(0.5))
    assert (ab.rules[RULE].decisions, ab.rules[RULE].agreed, ab.rules[RULE].kappa) == (
        4,
        4,
        pytest.approx(1.0),
    )
    ac = by_pair["ana", "chief"]
    assert (ac.verdict.decisions, ac.verdict.agreed, ac.rules) == (1, 0, {})
    assert db.agreement(run="latest").items == 5


def test_items_with_one_review_are_not_in_the_agreement(db: Store) -> None:
    [item] = queued(db, 1)
    db.decide(item, "ana", "pass")
    assert db.agreement().pairs == [] and db.agreement().items == 0


# -- the queue -----------------------------------------------------------------------------------------------
def test_the_queue_pages_by_keyset_and_filters(db: Store) -> None:
    first = queued(db, 5, name="a")
    second = queued(db, 3, config={"risk_level": "high"}, name="b")
    page = db.queue(limit=3)
    assert page.total == 8 and [e.item.id for e in page.entries] == first[:3] and page.next_after == first[2]
    page2 = db.queue(limit=3, after=page.next_after)
    assert [e.item.id for e in page2.entries] == first[3:] + second[:1]
    last = db.queue(limit=3, after=page2.next_after)
    assert [e.item.id for e in last.entries] == second[1:] and last.next_after is None
    assert [e.item.id for e in db.queue(risk_level="high").entries] == second
    assert db.queue(risk_level="low").total == 0
    assert db.queue(reason="judge_engine_disagreement").total == 8
    assert db.queue(reason="audit").total == 0
    with pytest.raises(InputError, match="unknown review reason"):
        db.queue(reason="disagreement")
    assert db.queue(rule=RULE).total == 8 and db.queue(rule="email-limit").total == 0
    db.decide(first[0], "ana", "pass")
    entry = db.queue(state="in_review").entries[0]
    assert (entry.item.id, entry.reviews_in, entry.required_reviews) == (first[0], 1, 2)
    assert db.queue(state="open").total == 7
    with pytest.raises(InputError, match="unknown queue state"):
        db.queue(state="closed")


def test_the_queue_of_ten_thousand_items_uses_its_indexes(tmp_path: Path) -> None:
    """SQLite's query plans (PostgreSQL's are read by benchmarks/store_backends.py's queue figures)."""
    with Store(tmp_path / "seqjudge.db") as db, sqlite3.connect(db.path) as conn:
        plan = " ".join(
            str(row[-1])
            for row in conn.execute(
                "EXPLAIN QUERY PLAN SELECT id FROM review_items i WHERE i.status = 'open' "
                "AND i.team_state = ? AND i.id > ? ORDER BY i.id LIMIT 50",
                ("disputed", 0),
            )
        )
    assert "review_items_queue" in plan and "TEMP B-TREE" not in plan
    with sqlite3.connect(db.path) as conn:
        plan = " ".join(
            str(row[-1])
            for row in conn.execute(
                "EXPLAIN QUERY PLAN SELECT COUNT(*) FROM review_items i WHERE EXISTS (SELECT 1 FROM "
                "rule_decisions d WHERE d.run_id = i.run_id AND d.trace_id = i.trace_id AND d.rule_id = ?)",
                (RULE,),
            )
        )
    assert "rule_decisions_trace_rule" in plan  # one lookup per item, not a scan of the run's decisions


def test_a_store_of_schema_2_keeps_its_items_needing_one_review(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "seqjudge.db"
    monkeypatch.setattr(Store, "migrations", MIGRATIONS[:2])
    with Store(path) as s:
        run = s.create_run(config={}, fingerprint={})
        s.save_result(run, *pair("old", "clean"))  # not routed: its item is written as schema 2 wrote one
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO review_items (run_id, trace_id, reasons, status, created_at) "
            "VALUES (?, 'old', '[\"audit\"]', 'open', '2026-01-01T00:00:00.000000+00:00')",
            (run,),
        )
    monkeypatch.setattr(Store, "migrations", MIGRATIONS)
    with Store(path) as s:
        [entry] = s.queue().entries
        assert (entry.state, entry.required_reviews, entry.reviews_in) == ("open", 1, 0)
        s.add_reviewer("ana")
        assert s.decide(entry.item.id, "ana", "pass").state == "resolved"


# -- labels against the guarantee (workbench.labels) ---------------------------------------------------------
def test_label_status_counts_as_the_calibration_does(tmp_path: Path) -> None:
    from calibrate_helpers import ByTraceProvider
    from seqjudge.calibrate_guarantee import GuaranteeSettings
    from seqjudge.calibrate_runs import calibrate_golden
    from seqjudge.golden import load_dataset
    from seqjudge.workbench.labels import label_status
    from test_calibrate_guarantee import make_dataset, replies

    suite = make_dataset(tmp_path / "suite")
    store = tmp_path / "db" / "seqjudge.db"
    dataset = load_dataset(suite)
    common = {"model": "scripted:conf", "risk_level": "high"}
    figures = {}
    for alpha in (0.01, 0.05):
        report = calibrate_golden(
            suite,
            provider=ByTraceProvider(dataset.traces, replies(dataset), model="conf"),
            store=store,
            risk_level="high",
            guarantee=GuaranteeSettings(alpha=alpha, delta=0.05),
        )
        assert report.guarantee is not None
        figures[alpha] = report.guarantee.rules[0].guarantee
        if alpha == 0.01:  # alpha and delta not given: the certificate's
            status = label_status(suite, store, **common)
    assert (status.alpha, status.delta, status.stale, status.changes) == (0.01, 0.05, False, [])
    [rule] = status.rules
    at_01 = figures[0.01]
    assert rule.rule_id == "confirm-before-delete" and not rule.certified
    assert (rule.passes, rule.needed) == (at_01["candidates"] - at_01["no_confidence"], at_01["needed"])
    assert (rule.passes, rule.fails) == (76, 4)
    assert (
        rule.summary(status.alpha, status.delta)
        == "76 labelled passes; no number of labels certifies α = 0.01, δ = 0.05 at the judge's error rate"
    )
    [rule] = label_status(suite, store, alpha=0.05, delta=0.05, **common).rules
    assert rule.certified and figures[0.05]["threshold"] == 0.95
    assert rule.summary(0.05, 0.05) == "76 of 59 labelled passes for α = δ = 0.05"
    assert (
        f"seqjudge calibrate {suite} --alpha 0.05 --delta 0.05"
        in label_status(suite, store, alpha=0.05, delta=0.05, **common).recalibrate
    )
    labels = suite / "labels.jsonl"
    labels.write_text(labels.read_text().replace('"labeler": "test"', '"labeler": "someone"', 1))
    changed = label_status(suite, store, **common)
    assert changed.stale and any("labelled dataset changed" in c for c in changed.changes)
    assert at_01["needed"] is None  # 6 of 76 judge passes wrong: more labels cannot reach α = 0.01

    # A resolved review item of a run of the same rules and model, on a trace the dataset lacks: pending.
    from seqjudge.certificate import rules_hash

    with Store(store) as s:
        calibration_run = label_status(suite, store, **common).run_id
        assert calibration_run is not None
        stored = s.result(calibration_run, "t00")
        extra = stored.result.model_copy(update={"trace_id": "extra", "review_reasons": ["audit"]})
        run_id = s.create_run(
            config={"model": "scripted:conf"}, fingerprint={"rules_hash": rules_hash(dataset.ruleset)}
        )
        s.save_result(run_id, stored.trace.model_copy(update={"trace_id": "extra"}), extra)
        [item] = s.review_items(run=run_id)
        s.resolve_reviews([item.id], verdict="pass", rules={"confirm-before-delete": "pass"}, reviewer="ana")
    after = label_status(suite, store, **common)
    assert after.pending_items == 1
    assert (after.rules[0].pending_passes, after.rules[0].pending_fails, after.rules[0].passes) == (1, 0, 76)


# -- config: review.reviews_per_item ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0", "review.reviews_per_item: input should be greater than or equal to 1. the keys of review are"),
        ("two", "review.reviews_per_item: input should be a valid integer"),
        ("true", "review.reviews_per_item: input should be a valid integer"),
        (
            "{hihg: 2}",
            "review.reviews_per_item.hihg: unknown key. the keys of review.reviews_per_item are: low, "
            "medium, high, default",
        ),
        ("{high: 0}", "review.reviews_per_item.high: input should be greater than or equal to 1"),
    ],
)
def test_a_bad_reviews_per_item_is_named(tmp_path: Path, value: str, message: str) -> None:
    from seqjudge.config import load_config

    path = tmp_path / "seqjudge.yaml"
    path.write_text(f"rules: r.yaml\ntraces: t.jsonl\nreview:\n  reviews_per_item: {value}\n")
    with pytest.raises(InputError) as caught:
        load_config(path)
    assert message in str(caught.value)


def test_reviews_per_item_by_risk_level(tmp_path: Path) -> None:
    from seqjudge.config import load_config

    path = tmp_path / "seqjudge.yaml"
    path.write_text("rules: r.yaml\ntraces: t.jsonl\nreview:\n  reviews_per_item: {high: 2, default: 1}\n")
    review = load_config(path).review
    assert [review.required_reviews(level) for level in ("low", "medium", "high")] == [1, 1, 2]
    path.write_text("rules: r.yaml\ntraces: t.jsonl\nreview:\n  reviews_per_item: 3\n")
    assert load_config(path).review.required_reviews("low") == 3


def test_a_run_at_high_risk_queues_items_needing_the_configured_reviews(tmp_path: Path) -> None:
    import asyncio

    from seqjudge import load_rules
    from seqjudge.config import RunConfig
    from seqjudge.ingest import load_traces
    from seqjudge.runner import run_traces

    suite = Path(__file__).parent.parent / "golden_traces" / "customer-support"
    cfg = RunConfig(
        rules=str(suite / "rules.yaml"),
        traces=str(suite / "traces.jsonl"),
        store=str(tmp_path / "s.db"),
        risk_level="high",
        review={"reviews_per_item": {"high": 2}},
    )
    with Store(cfg.store) as s:
        summary = asyncio.run(
            run_traces(cfg, load_rules(cfg.rules), load_traces(cfg.traces), s, provider=None)
        )
        page = s.queue(run=summary.run_id, limit=500)
        assert page.total == summary.queued > 0
        assert {e.required_reviews for e in page.entries} == {2}
