"""`seqjudge serve` through Starlette's TestClient: every route needs a session, every state change its
CSRF token and this site's origin, trace content is text, blind review, adjudication, and the command's
refusals (no reviewer, a non-loopback address)."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.routing import Route
from starlette.testclient import TestClient

from seqjudge.cli import run
from seqjudge.cli.serve_cmd import check_host, loopback
from seqjudge.errors import InputError
from seqjudge.serve.app import create_app
from seqjudge.serve.guard import is_public, same_origin
from seqjudge.serve.routes.item import decided_rules
from seqjudge.store import Store
from serve_support import HOSTILE_TEXT, build_team, hidden_value

HTML = {"accept": "text/html"}


@pytest.fixture
def env(store_target: str) -> Iterator[dict[str, Any]]:
    """The workbench over a team store, on each backend (a team's PostgreSQL store is the one reviewers
    share)."""
    data = build_team(store_target)
    with Store(data["path"], create=False) as db:
        data["db"] = db
        data["app"] = create_app(db)
        yield data


def client(env: dict[str, Any]) -> TestClient:
    return TestClient(env["app"], base_url="http://testserver")


def sign_in(env: dict[str, Any], name: str) -> tuple[TestClient, str]:
    """A client signed in as ``name``, and its CSRF token."""
    c = client(env)
    login = c.get("/login")
    r = c.post(
        "/login",
        data={"login_token": hidden_value(login.text, "login_token"), "token": env["tokens"][name]},
        follow_redirects=False,
    )
    assert r.status_code == 303
    return c, hidden_value(c.get("/queue").text, "csrf_token")


def decision_rows(db: Store) -> int:
    return len([d for item in db.review_items(status="all") for d in db.decision_history(item.id)])


def form(db: Store, item_id: int, csrf: str, verdicts: dict[str, str] | None = None, **extra: str) -> dict:
    rules = {d.rule_id: "pass" for d in decided_rules(db.review_item(item_id))}
    rules.update(verdicts or {})
    return {
        "csrf_token": csrf,
        "kind": "review",
        "note": "",
        **{f"rule:{k}": v for k, v in rules.items()},
        **extra,
    }


# -- authentication on every route ---------------------------------------------------------------------------
def _paths(env: dict[str, Any]) -> list[tuple[str, str]]:
    """Every (method, path) of the app, its parameters filled with things that exist."""
    values = {"item": str(env["double_items"][0]), "run": env["candidate"], "name": "workbench.js"}
    out = []
    for route in env["app"].routes:
        assert isinstance(route, Route), f"{route!r}: only plain routes, so that this test sees them all"
        path = re.sub(r"\{(\w+)(:\w+)?\}", lambda m: values[m.group(1)], route.path)
        out += [(method, path) for method in sorted(route.methods or ()) if method != "HEAD"]
    return out


def test_every_route_but_sign_in_and_static_files_needs_a_session(env: dict[str, Any]) -> None:
    c = client(env)
    checked = 0
    for method, path in _paths(env):
        if is_public(path):
            assert path == "/login" or path.startswith("/static/")
            continue
        page = c.request(method, path, headers=HTML, follow_redirects=False)
        other = c.request(method, path, headers={"accept": "application/json"}, follow_redirects=False)
        if method == "GET":
            assert page.status_code == 303 and page.headers["location"].startswith("/login?next="), path
        else:
            assert page.status_code == 401, (method, path)
        assert other.status_code == 401, (method, path)
        checked += 1
    assert checked >= 8  # /, runs, a run, queue, an item, deciding, adjudication, sign-out
    assert decision_rows(env["db"]) == 0


def test_a_bad_session_cookie_is_no_session(env: dict[str, Any]) -> None:
    c = client(env)
    c.cookies.set("seqjudge_session", "made-up")
    assert c.get("/queue", headers=HTML, follow_redirects=False).status_code == 303


def test_sign_in_sets_a_strict_http_only_session_cookie_and_sign_out_ends_it(env: dict[str, Any]) -> None:
    c = client(env)
    login = c.get("/login")
    r = c.post(
        "/login",
        data={"login_token": hidden_value(login.text, "login_token"), "token": env["tokens"]["ana"]},
        follow_redirects=False,
    )
    cookie = r.headers["set-cookie"].lower()
    assert "seqjudge_session=" in cookie and "httponly" in cookie and "samesite=strict" in cookie
    assert "path=/" in cookie and "secure" not in cookie
    assert env["tokens"]["ana"] not in r.headers["set-cookie"]
    page = c.get("/queue")
    assert page.status_code == 200 and 'id="viewer">ana<' in page.text
    csrf = hidden_value(page.text, "csrf_token")
    assert c.post("/logout", data={"csrf_token": csrf}, follow_redirects=False).status_code == 303
    assert c.get("/queue", headers=HTML, follow_redirects=False).status_code == 303


def test_behind_https_the_cookies_are_secure(env: dict[str, Any]) -> None:
    c = TestClient(create_app(env["db"], https=True), base_url="https://testserver")
    login = c.get("/login")
    assert "secure" in login.headers["set-cookie"].lower()
    r = c.post(
        "/login",
        data={"login_token": hidden_value(login.text, "login_token"), "token": env["tokens"]["bo"]},
        follow_redirects=False,
    )
    assert "secure" in r.headers["set-cookie"].lower()
    csrf = hidden_value(c.get("/queue").text, "csrf_token")
    item = env["double_items"][0]
    data = form(env["db"], item, csrf)
    here = c.post(
        f"/items/{item}/decide", data=data, headers={"origin": "https://testserver"}, follow_redirects=False
    )
    assert here.status_code == 303  # the browser's origin is the proxy's https one
    # This hop is plain HTTP behind the proxy: the https origin is this site only when told so.
    behind = {"type": "http", "scheme": "http", "headers": [(b"host", b"wb"), (b"origin", b"https://wb")]}
    assert same_origin(behind, https=True) and not same_origin(behind)


def test_a_wrong_token_or_a_forged_sign_in_form_signs_nobody_in(env: dict[str, Any]) -> None:
    c = client(env)
    login = c.get("/login")
    token = hidden_value(login.text, "login_token")
    wrong = c.post("/login", data={"login_token": token, "token": "nope"}, follow_redirects=False)
    assert wrong.status_code == 401 and "seqjudge_session" not in wrong.headers.get("set-cookie", "")
    fresh = client(env)  # no sign-in cookie: a form posted from elsewhere
    forged = fresh.post(
        "/login", data={"login_token": token, "token": env["tokens"]["ana"]}, follow_redirects=False
    )
    assert forged.status_code == 403 and "seqjudge_session" not in forged.headers.get("set-cookie", "")


def test_after_sign_in_only_a_path_on_this_server_is_followed(env: dict[str, Any]) -> None:
    c = client(env)
    login = c.get("/login?next=//evil.example/x")
    assert hidden_value(login.text, "next") == "/"
    r = c.post(
        "/login",
        data={
            "login_token": hidden_value(login.text, "login_token"),
            "token": env["tokens"]["ana"],
            "next": "https://evil.example/",
        },
        follow_redirects=False,
    )
    assert r.headers["location"] == "/"


# -- CSRF and origin -----------------------------------------------------------------------------------------
def test_a_state_change_without_the_csrf_token_or_from_another_site_is_refused(env: dict[str, Any]) -> None:
    c, csrf = sign_in(env, "ana")
    db, item = env["db"], env["double_items"][0]
    good = form(db, item, csrf)
    attempts = [
        ({k: v for k, v in good.items() if k != "csrf_token"}, {}),
        ({**good, "csrf_token": csrf[:-1] + ("A" if csrf[-1] != "A" else "B")}, {}),
        (good, {"origin": "http://evil.example"}),
        (good, {"sec-fetch-site": "cross-site"}),
        (good, {"sec-fetch-site": "same-site"}),
        (
            good,
            {"origin": "null"},
        ),  # an opaque origin (a sandboxed frame, a data: page) without fetch metadata
    ]
    for data, headers in attempts:
        r = c.post(f"/items/{item}/decide", data=data, headers=headers, follow_redirects=False)
        assert r.status_code == 403, headers
    assert decision_rows(db) == 0
    ok = c.post(
        f"/items/{item}/decide",
        data=good,
        headers={"origin": "null", "sec-fetch-site": "same-origin"},  # Chromium's form post here
        follow_redirects=False,
    )
    assert ok.status_code == 303 and decision_rows(db) == 1


def test_another_reviewers_csrf_token_is_wrong(env: dict[str, Any]) -> None:
    a, _ = sign_in(env, "ana")
    _, bo_csrf = sign_in(env, "bo")
    item = env["double_items"][0]
    r = a.post(f"/items/{item}/decide", data=form(env["db"], item, bo_csrf), follow_redirects=False)
    assert r.status_code == 403 and decision_rows(env["db"]) == 0


def test_every_page_has_the_security_headers(env: dict[str, Any]) -> None:
    c, _ = sign_in(env, "ana")
    for path in ("/login", "/queue", f"/items/{env['hostile_item']}", "/static/workbench.js"):
        h = c.get(path).headers
        csp = h["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
        assert h["x-content-type-options"] == "nosniff" and h["referrer-policy"] == "no-referrer"
    assert c.get("/queue").headers["cache-control"] == "no-store"
    assert c.get("/static/../../etc/passwd").status_code == 404


# -- trace content is text -----------------------------------------------------------------------------------
def test_hostile_trace_content_is_escaped_text(env: dict[str, Any]) -> None:
    c, _ = sign_in(env, "chief")
    from report_data import EVIL_ID

    evil = next(i.id for i in env["db"].review_items(status="all") if i.trace_id == EVIL_ID)
    for item in (evil, env["hostile_item"]):
        html = c.get(f"/items/{item}").text
        assert html.count("<script") == 1 and '<script src="/static/workbench.js" defer></script>' in html
        for raw in ("<img src=x", "<script>alert", "<svg onload", "\x1b", "\u202e", 'href="javascript:'):
            assert raw not in html, (item, raw)
        assert "onerror" not in re.sub(r"&lt;[^<]*?&gt;", "", html.replace("onerror=&#34;", ""))
    html = c.get(f"/items/{env['hostile_item']}").text
    assert "\\x1b[32mPASS" in html and "\\u202eevil" in html  # shown, as its escape
    assert "javascript:alert(5)" in html and "&#34;onmouseover=&#34;alert(6)&#34;" in html
    assert "&lt;svg onload=alert(7)&gt;" in html
    assert HOSTILE_TEXT not in html


def test_the_item_page_shows_the_timeline_findings_and_judge(env: dict[str, Any]) -> None:
    c, _ = sign_in(env, "ana")
    item = env["double_items"][0]
    html = c.get(f"/items/{item}").text
    assert html.count('class="call') == len(env["db"].review_item(item).trace.calls)
    assert 'class="call offending" id="call-3"' in html  # the judge's finding at call index 2
    assert 'data-rule="confirm-delete"' in html and "the judge failed confirm-delete" in html
    assert "<details" in html and "<details open" not in html  # folded
    assert 'id="claimed-by">ana<' in html  # opening it claimed it


# -- blind review, adjudication ------------------------------------------------------------------------------
def test_blind_review_dispute_and_adjudication_pick_the_exported_label(env: dict[str, Any]) -> None:
    db, item = env["db"], env["double_items"][0]
    a, a_csrf = sign_in(env, "ana")
    r = a.post(
        f"/items/{item}/decide",
        data=form(db, item, a_csrf, {"confirm-delete": "fail"}, note="ana-private-note"),
        follow_redirects=False,
    )
    assert r.status_code == 303 and r.headers["location"].startswith(f"/items/{env['double_items'][1]}")
    b, b_csrf = sign_in(env, "bo")
    before = b.get(f"/items/{item}").text
    assert "ana-private-note" not in before and "1 hidden until yours is in" in before
    assert "hidden until your decision is in" in before
    b.post(f"/items/{item}/decide", data=form(db, item, b_csrf, note="bo-note"), follow_redirects=False)
    after = b.get(f"/items/{item}").text
    assert 'id="item-state">disputed<' in after and "ana-private-note" in after  # theirs is in: all shown
    assert b.get("/adjudicate").status_code == 403
    refused = b.post(
        f"/items/{item}/decide", data=form(db, item, b_csrf, kind="adjudication"), follow_redirects=False
    )
    assert refused.status_code == 400 and len(db.decision_history(item)) == 2
    chief, chief_csrf = sign_in(env, "chief")
    listing = chief.get("/adjudicate").text
    assert f'href="/items/{item}?' in listing
    page = chief.get(f"/items/{item}").text
    assert 'id="side-by-side"' in page and "ana-private-note" in page and "bo-note" in page
    assert hidden_value(page, "kind") == "adjudication"
    chief.post(
        f"/items/{item}/decide",
        data=form(db, item, chief_csrf, {"confirm-delete": "fail"}, kind="adjudication"),
        follow_redirects=False,
    )
    assert db.item_state(item, "ana").state == "resolved"
    out = io.StringIO()
    db.export_labels(out)
    label = next(json.loads(x) for x in out.getvalue().splitlines() if json.loads(x)["trace_id"] == "d-0")
    assert label["verdict"] == "fail" and label["rules"]["confirm-delete"] == "fail"


def test_two_reviewers_deciding_at_once_are_both_kept(env: dict[str, Any]) -> None:
    db, item = env["db"], env["double_items"][1]
    a, a_csrf = sign_in(env, "ana")
    b, b_csrf = sign_in(env, "bo")
    a.get(f"/items/{item}")
    b.get(f"/items/{item}")  # both have the form open
    a.post(f"/items/{item}/decide", data=form(db, item, a_csrf), follow_redirects=False)
    b.post(f"/items/{item}/decide", data=form(db, item, b_csrf), follow_redirects=False)
    assert {d.reviewer for d in db.decision_history(item)} == {"ana", "bo"}
    assert db.item_state(item, "ana").state == "resolved"


def test_a_decision_on_an_item_resolved_meanwhile_is_refused_and_kept_on_the_page(
    env: dict[str, Any],
) -> None:
    db, item = env["db"], env["double_items"][2]
    a, a_csrf = sign_in(env, "ana")
    db.decide(item, "bo", "pass", {d.rule_id: "pass" for d in db.review_item(item).result.rules})
    db.decide(item, "chief", "pass", {d.rule_id: "pass" for d in db.review_item(item).result.rules})
    r = a.post(f"/items/{item}/decide", data=form(db, item, a_csrf, note="my careful note"))
    assert r.status_code == 409 and "my careful note" in r.text and "resolved" in r.text
    assert "ana" not in {d.reviewer for d in db.decision_history(item)}


def test_a_rule_without_a_verdict_is_refused(env: dict[str, Any]) -> None:
    db, item = env["db"], env["double_items"][0]
    a, csrf = sign_in(env, "ana")
    data = form(db, item, csrf)
    data.pop("rule:confirm-delete")
    r = a.post(f"/items/{item}/decide", data=data)
    assert r.status_code == 400 and "confirm-delete has no verdict" in r.text
    assert decision_rows(db) == 0


# -- queue and runs ------------------------------------------------------------------------------------------
def test_the_queue_filters_and_refuses_an_unknown_filter(env: dict[str, Any]) -> None:
    c, _ = sign_in(env, "ana")
    html = c.get(f"/queue?run={env['double']}").text
    assert all(f'data-item="{i}"' in html for i in env["double_items"])
    assert 'id="queue-count">3 item(s)' in html
    none = c.get("/queue?status=disputed").text
    assert 'id="queue-empty"' in none
    bad = c.get("/queue?colour=red")
    assert bad.status_code == 400 and "unknown queue filter" in bad.text
    assert c.get("/queue?status=nope").status_code == 400


def test_the_run_page_shows_failures_certificate_audit_and_rates(env: dict[str, Any]) -> None:
    c, _ = sign_in(env, "ana")
    html = c.get(f"/runs/{env['candidate']}").text
    assert 'id="rule-failures"' in html and "read-before-update" in html
    assert "No certificate" in html and 'id="audit-overall"' in html
    assert 'id="rates"' in html or 'id="rates-note"' in html
    assert c.get("/runs/nope").status_code == 404
    listing = c.get("/runs?q=double").text
    assert env["double"] in listing and env["candidate"] not in listing


# -- the command ---------------------------------------------------------------------------------------------
def test_loopback_addresses() -> None:
    assert loopback("127.0.0.1") and loopback("127.1.2.3") and loopback("::1") and loopback("localhost")
    assert not loopback("0.0.0.0") and not loopback("192.168.1.4") and not loopback("example.org")
    check_host("0.0.0.0", reviewers=True)
    with pytest.raises(InputError, match="refusing to listen on 0.0.0.0"):
        check_host("0.0.0.0", reviewers=False)


def test_serve_without_a_reviewer_says_how_to_add_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "seqjudge.db"
    Store(path).close()
    assert run(["serve", "--store", str(path)]) == 2
    assert "seqjudge reviewers add NAME --admin" in capsys.readouterr().err
    assert run(["serve", "--store", str(path), "--host", "0.0.0.0"]) == 2
    err = capsys.readouterr().err
    assert "refusing to listen on 0.0.0.0" in err and "Traceback" not in err
    assert run(["serve", "--store", str(tmp_path / "missing.db")]) == 2
    assert "no seqjudge store here" in capsys.readouterr().err


def test_the_queue_shows_the_label_status_of_a_dataset(tmp_path: Path, store_target: str) -> None:
    from calibrate_helpers import ByTraceProvider
    from seqjudge.calibrate_guarantee import GuaranteeSettings
    from seqjudge.calibrate_runs import calibrate_golden
    from seqjudge.golden import load_dataset
    from test_calibrate_guarantee import make_dataset, replies

    suite = make_dataset(tmp_path / "suite")
    path = store_target
    dataset = load_dataset(suite)
    calibrate_golden(
        suite,
        provider=ByTraceProvider(dataset.traces, replies(dataset), model="conf"),
        store=path,
        risk_level="high",
        guarantee=GuaranteeSettings(alpha=0.05, delta=0.05),
    )
    with Store(path, create=False) as db:
        app = create_app(db, datasets=[suite, tmp_path / "nothing"], model="scripted:conf", risk_level="high")
        env = {"app": app, "tokens": {"ana": db.add_reviewer("ana")}}
        c, _ = sign_in(env, "ana")
        html = c.get("/queue").text
    assert "confirm-before-delete</code>: 76 of 59 labelled passes for α = δ = 0.05" in html
    assert f"seqjudge calibrate {suite} --alpha 0.05 --delta 0.05" in html
    assert 'id="stale"' not in html
    assert f'data-dataset="{tmp_path / "nothing"}"' in html and 'class="problem"' in html


def test_serve_refuses_a_store_of_a_newer_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import sqlite3

    path = tmp_path / "seqjudge.db"
    with Store(path) as db:
        db.add_reviewer("ana", admin=True)
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO schema_version VALUES (99, 'from the future', '2030-01-01T00:00:00+00:00')")
    assert run(["serve", "--store", str(path)]) == 2
    err = capsys.readouterr().err
    assert "newer than this seqjudge knows" in err and "Traceback" not in err


def test_the_command_serves_the_workbench_on_loopback(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys
    import urllib.request

    path = tmp_path / "seqjudge.db"
    with Store(path) as db:
        db.add_reviewer("ana", admin=True)
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": src}
    proc = subprocess.Popen(
        [sys.executable, "-c", "from seqjudge.cli import main; main()"]
        + ["serve", "--store", str(path), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert found, line + (proc.stderr.read() if proc.poll() is not None and proc.stderr else "")
        with urllib.request.urlopen(f"http://127.0.0.1:{found.group(1)}/login", timeout=10) as page:
            assert page.status == 200 and b'name="token"' in page.read()
            assert "script-src 'self'" in page.headers["content-security-policy"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_huge_value_is_cut_on_the_page_saying_how_much_and_where_it_is_whole(env: dict[str, Any]) -> None:
    from seqjudge.serve.timeline import FIELD_CHARS
    from test_store import make_result, make_trace

    db = env["db"]
    trace = make_trace("huge", good=False)
    data = trace.model_dump(mode="json")
    data["calls"][1]["output"] = "z" * (FIELD_CHARS + 12_345)
    trace = type(trace).model_validate(data)
    run_id = db.create_run(config={"review": {"fails": True}}, fingerprint={})
    db.save_result(run_id, trace, make_result(trace, queue_fails=True))
    db.finish_run(run_id, totals={})
    [item] = db.review_items(run=run_id)
    c, _ = sign_in(env, "ana")
    html = c.get(f"/items/{item.id}").text
    assert "z" * FIELD_CHARS in html and "z" * (FIELD_CHARS + 1) not in html
    assert f"12345 more characters not shown: <code>seqjudge review show {item.id} --full</code>" in html


def test_a_changed_mind_starts_from_ones_own_decision_and_is_appended(env: dict[str, Any]) -> None:
    db, item = env["db"], env["double_items"][0]
    a, csrf = sign_in(env, "ana")
    a.post(
        f"/items/{item}/decide", data=form(db, item, csrf, {"confirm-delete": "fail"}), follow_redirects=False
    )
    html = a.get(f"/items/{item}").text
    assert 'id="mine">You decided fail' in html
    assert re.search(r'name="rule:confirm-delete" value="fail"[^>]*checked', html)
    a.post(f"/items/{item}/decide", data=form(db, item, csrf), follow_redirects=False)
    assert [d.verdict for d in db.decision_history(item)] == ["fail", "pass"]


def test_the_item_page_shows_the_rules_words_as_the_judge_reads_them(
    env: dict[str, Any], tmp_path: Path
) -> None:
    import yaml
    from markupsafe import escape

    from seqjudge.inputs import read_rules
    from seqjudge.judge.prompt import guideline
    from seqjudge.provenance import rules_hash
    from test_store import RULES

    data = RULES.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"source", "catalog"})
    judge = next(r for r in data["rules"] if r["id"] == "confirm-delete")
    judge["criteria"] = {"pass": ["The user said yes <b>before</b> the delete."], "fail": ["No yes first."]}
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(data))
    ruleset = read_rules(str(path), warn=None)
    db = env["db"]
    run_id = db.create_run(config={"rules": str(path)}, fingerprint={"rules_hash": rules_hash(ruleset)})
    from test_store import pair

    db.save_result(run_id, *pair("words", "split"))
    db.finish_run(run_id, totals={})
    [item] = db.review_items(run=run_id)
    c, _ = sign_in(env, "ana")
    html = c.get(f"/items/{item.id}").text
    words = guideline(next(r for r in ruleset.rules if r.rule_id == "confirm-delete"), ruleset.aliases)
    assert "The user said yes &lt;b&gt;before&lt;/b&gt; the delete." in html
    assert str(escape(words)) in html  # the prompt's words, whole, as text
    assert "changed since this run" not in html
    path.write_text(path.read_text().replace("No yes first.", "No yes at all."))
    assert "changed since this run" in c.get(f"/items/{item.id}").text


def test_serve_on_a_store_another_process_holds_locked_is_a_clear_refusal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A store held locked is exit 2 with what to do, never a crash or an empty queue."""
    import sqlite3

    path = tmp_path / "seqjudge.db"
    with Store(path) as db:
        db.add_reviewer("ana", admin=True)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("UPDATE reviewers SET admin = 1")  # takes the write lock; exclusive mode keeps readers out
    try:
        code = run(["serve", "--store", str(path)])
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    err = capsys.readouterr().err
    assert code == 2
    assert "another process holds it locked" in err and "end the process holding the store" in err
    # The advice for a file that is no store would lose the holder's work.
    assert "remove this file" not in err
    assert "Traceback" not in err
