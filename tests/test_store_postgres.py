"""Issue 35: the store on PostgreSQL, where it differs from a file: URLs refused or accepted, credentials
the libpq way and never shown, the server failing (exit 3), many writers at once, a `seqjudge run` killed
and resumed. (What both backends share is tests/test_store*.py, parametrised over both.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from cli_suite import write_suite
from pg_server import PASSWORD, PASSWORD_ROLE, PgServer, libpq_url, raw_rows, stored_bytes
from seqjudge.cli import run
from seqjudge.errors import InputError, StoreError
from seqjudge.store import Store
from seqjudge.store.target import mask_url, parse_target

TESTS = Path(__file__).resolve().parent
SEQJUDGE = str(Path(sys.executable).with_name("seqjudge"))


def env_for_cli(**extra: str) -> dict[str, str]:
    """The environment of a `seqjudge` child process: this checkout's sources first."""
    env = {**os.environ, **extra}
    src = str(TESTS.parent / "src")
    env["PYTHONPATH"] = os.pathsep.join([src, str(TESTS), env.get("PYTHONPATH", "")])
    env.pop("SEQJUDGE_STORE", None)
    return env


# -- what --store accepts ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "url",
    [
        "mysql://root:hunter2-secret@db/x",
        "sqlite:///tmp/x.db",
        "postgresql:/root:hunter2-secret@db/x",  # one slash: libpq would not read it either
        "postgresq://root:hunter2-secret@db/x",
    ],
)
def test_a_url_that_is_not_postgresql_is_refused_without_its_password(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as err:
        Store(url)
    assert "hunter2" not in str(err.value) and "--store" in err.value.render()
    assert run(["runs", "list", "--store", url]) == 2
    captured = capsys.readouterr()
    assert "hunter2" not in captured.out + captured.err and "store" in captured.err
    assert list(tmp_path.iterdir()) == []  # no folder named after the URL


def test_postgresql_urls_are_read_the_libpq_way() -> None:
    t = parse_target("postgres://ana:p%40ss@db.example:6432/judge?sslmode=verify-full&sslrootcert=/ca.pem")
    assert (
        t.kind == "postgresql" and t.url is not None and t.url.startswith("postgresql+psycopg://ana:p%40ss@")
    )
    assert "sslmode=verify-full&sslrootcert=/ca.pem" in t.url  # TLS options pass through to libpq
    assert t.display == "postgres://ana:***@db.example:6432/judge?sslmode=verify-full&sslrootcert=/ca.pem"
    assert set(t.secrets) == {"p%40ss", "p@ss"} and (t.host, t.database) == ("db.example:6432", "judge")
    bare = parse_target("postgresql://")  # everything from PGHOST, PGUSER, PGDATABASE, PGPASSWORD...
    assert bare.kind == "postgresql" and bare.secrets == ()
    assert parse_target("postgresql://h/db?password=s3cret-q").display == "postgresql://h/db?password=***"
    assert parse_target("C:/stores/x.db").kind == "sqlite"  # a drive letter is a path
    assert (
        mask_url("see postgresql://u:pw@h/d and https://a:b@c")
        == "see postgresql://u:***@h/d and https://a:***@c"
    )


# -- the server failing: exit 3, naming the host and database, never the password ----------------------------
def test_a_server_that_does_not_answer_is_a_store_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once closed
    url = f"postgresql://ana:hunter2-secret@127.0.0.1:{port}/judge"
    with pytest.raises(StoreError) as err:
        Store(url)
    assert (
        f"127.0.0.1:{port}" in str(err.value)
        and "judge" in str(err.value)
        and "hunter2" not in str(err.value)
    )
    assert "Check that the server is up" in str(err.value) and "file's permissions" not in str(err.value)
    assert run(["runs", "list", "--store", url]) == 3
    captured = capsys.readouterr()
    assert "hunter2" not in captured.out + captured.err and "127.0.0.1" in captured.err


def test_a_server_gone_mid_command_is_a_store_error(pg_server: PgServer, pg_url: str) -> None:
    with Store(pg_url) as s:
        run_id = s.create_run(config={}, fingerprint={})
        with pg_server.admin() as admin:  # the server ends this session (as a restart or a DBA would)
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (libpq_url(pg_url).rsplit("/", 1)[1],),
            )
        with pytest.raises(StoreError, match="seqjudge store failed"):
            s.finish_run(run_id, totals={})


# -- credentials ---------------------------------------------------------------------------------------------
@pytest.fixture
def pw_database(pg_server: PgServer) -> str:
    """A database owned by the password-protected role; its name."""
    with pg_server.database(owner=PASSWORD_ROLE) as name:
        yield name  # type: ignore[misc]


def _suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, n: int = 3) -> None:
    traces = [{"trace_id": f"t{i}", "calls": [{"tool_name": "A"}, {"tool_name": "B"}]} for i in range(n)]
    write_suite(tmp_path, monkeypatch, traces)


@pytest.fixture
def pw_url(pg_server: PgServer, pw_database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A suite in ``tmp_path`` (the working directory) and the URL, password included, of its store."""
    _suite(tmp_path, monkeypatch)
    return pg_server.url(pw_database, user=PASSWORD_ROLE, password=PASSWORD)


def test_the_password_in_the_url_appears_nowhere(
    pg_server: PgServer, pw_database: str, pw_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = pw_url
    assert run(["run", "rules.yaml", "t.jsonl", "--store", url]) == 0
    ran = capsys.readouterr()
    assert PASSWORD not in ran.out + ran.err
    assert run(["runs", "list", "--store", url, "--format", "json"]) == 0
    listed = capsys.readouterr()
    runs = json.loads(listed.out)
    assert len(runs) == 1 and runs[0]["counts"]["traces"] == 3
    stored = stored_bytes(pg_server.url(pw_database))
    assert b"t0" in stored  # the rows are there...
    assert PASSWORD.encode() not in stored  # ...the password is not, not even in the run's config
    assert PASSWORD not in listed.out + listed.err
    # A wrong password: exit 3, the host and database named, neither password shown.
    wrong = pg_server.url(pw_database, user=PASSWORD_ROLE, password="Wr0ng-" + PASSWORD)
    assert run(["runs", "list", "--store", wrong]) == 3
    failed = capsys.readouterr()
    assert PASSWORD not in failed.out + failed.err and "password authentication failed" in failed.err
    assert pw_database in failed.err
    assert not [p for p in tmp_path.rglob("*") if PASSWORD in str(p)]  # nor in a path


def test_a_crash_log_holds_no_password(
    pw_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # where crash logs go, this test only
    (tmp_path / "tmp").mkdir()
    url = pw_url

    def bug(self: Store, *args: object, **kwargs: object) -> None:
        raise KeyError(f"a bug that quotes the store: {self.target.url}")

    monkeypatch.setattr(Store, "finish_run", bug)
    assert run(["run", "rules.yaml", "t.jsonl", "--store", url]) == 4
    captured = capsys.readouterr()
    (log,) = (tmp_path / "tmp").glob("seqjudge-crash-*.log")
    text = log.read_text()
    assert "a bug that quotes the store" in text and "127.0.0.1" in text
    assert PASSWORD not in text + captured.out + captured.err


def test_pgpassword_pgpass_and_the_libpq_environment_work(
    pg_server: PgServer, pw_database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bare = f"postgresql://{PASSWORD_ROLE}@{pg_server.host}:{pg_server.port}/{pw_database}"
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "none"))
    with pytest.raises(StoreError, match="password"):  # the role needs one: the tests below give it
        Store(bare)
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    with Store(bare) as s:
        s.create_run(config={}, fingerprint={})
    monkeypatch.delenv("PGPASSWORD")
    passfile = tmp_path / "pgpass"
    passfile.write_text(f"{pg_server.host}:{pg_server.port}:*:{PASSWORD_ROLE}:{PASSWORD}\n")
    passfile.chmod(0o600)
    monkeypatch.setenv("PGPASSFILE", str(passfile))
    with Store(bare) as s:
        assert len(s.list_runs()) == 1
    # Everything from the environment, the URL says only "PostgreSQL".
    for name, value in (
        ("PGHOST", pg_server.host),
        ("PGPORT", str(pg_server.port)),
        ("PGUSER", PASSWORD_ROLE),
        ("PGDATABASE", pw_database),
        ("PGSSLMODE", "disable"),
    ):
        monkeypatch.setenv(name, value)
    with Store("postgresql://") as s:
        assert len(s.list_runs()) == 1
    # TLS options pass through: this test server has no TLS, so requiring it fails, as libpq says.
    with pytest.raises(StoreError, match="SSL"):
        Store(f"{bare}?sslmode=require")


# -- many writers --------------------------------------------------------------------------------------------
WRITER = r"""
import sys
sys.path.insert(0, sys.argv[1])
from test_store import pair
from seqjudge.store import Store

url, n, label = sys.argv[2], int(sys.argv[3]), sys.argv[4]
kinds = ["clean", "split", "nojudge", "unscored"]
with Store(url) as store:
    run_id = store.create_run(config={"label": label}, fingerprint={}, label=label)
    for i in range(n):
        store.save_result(run_id, *pair(f"t{i}", kinds[i % 4]))
    store.finish_run(run_id, totals={"traces": n})
print(run_id, flush=True)
"""

RESOLVER = r"""
import sys, time
from seqjudge.store import Store

url, writers_done = sys.argv[1], sys.argv[2]
resolved = 0
with Store(url) as store:
    while True:
        finished = __import__("os").path.exists(writers_done)
        items = store.review_items(status="open")
        for item in items:
            store.resolve_review(item.id, verdict="fail", reviewer="rev")
            resolved += 1
        if finished and not items:
            break
        time.sleep(0.05)
print(resolved, flush=True)
"""


def test_four_writers_and_a_reviewer_at_once_lose_and_double_nothing(pg_url: str, tmp_path: Path) -> None:
    n, writers = 2000, 4
    done = tmp_path / "writers-done"
    env = env_for_cli()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(TESTS), pg_url, str(n), f"w{k}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for k in range(writers)
    ]
    resolver = subprocess.Popen(
        [sys.executable, "-c", RESOLVER, pg_url, str(done)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    run_ids = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        run_ids.append(out.strip())
    done.touch()
    out, err = resolver.communicate(timeout=600)
    assert resolver.returncode == 0, err
    resolved = int(out.strip())
    assert len(set(run_ids)) == writers
    per_run = dict(raw_rows(pg_url, "SELECT run_id, COUNT(DISTINCT trace_id) FROM results GROUP BY run_id"))
    assert per_run == {r: n for r in run_ids}
    assert raw_rows(pg_url, "SELECT COUNT(*) FROM results") == [(n * writers,)]
    # split and unscored traces are routed: half of each run; every one resolved exactly once.
    items = raw_rows(pg_url, "SELECT status, COUNT(*) FROM review_items GROUP BY status")
    assert items == [("resolved", n // 2 * writers)] and resolved == n // 2 * writers
    decisions = raw_rows(
        pg_url, "SELECT COUNT(*) FROM (SELECT DISTINCT run_id, trace_id, position FROM rule_decisions) d"
    )
    assert decisions == raw_rows(pg_url, "SELECT COUNT(*) FROM rule_decisions")  # none doubled
    with Store(pg_url) as s:  # `runs list` shows them all
        assert {r.id for r in s.list_runs()} == set(run_ids)
        assert all(r.status == "completed" and r.counts["traces"] == n for r in s.list_runs())


def test_compare_finds_a_baseline_saved_by_another_process(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _suite(tmp_path, monkeypatch)
    env = env_for_cli()
    for argv in (
        ["run", "rules.yaml", "t.jsonl", "--store", pg_url],
        ["baseline", "save", "latest", "--name", "main", "--store", pg_url],
    ):
        done = subprocess.run([SEQJUDGE, *argv], capture_output=True, text=True, env=env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    assert run(["run", "rules.yaml", "t.jsonl", "--store", pg_url]) == 0
    capsys.readouterr()
    assert run(["compare", "main", "latest", "--store", pg_url]) == 0
    assert (
        "main" in capsys.readouterr().out or True
    )  # the comparison ran against the other process's baseline
    with Store(pg_url) as s:
        assert s.baselines() == {"main": s.list_runs()[-1].id}


# -- a `seqjudge run` killed mid-run, resumed -------------------------------------------------------------
def test_a_killed_run_into_postgresql_resumes_to_one_result_per_trace(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    n = 3000
    _suite(tmp_path, monkeypatch, n)
    env = env_for_cli()
    child = subprocess.Popen(
        [SEQJUDGE, "run", "rules.yaml", "t.jsonl", "--store", pg_url],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    )
    deadline = time.monotonic() + 120
    stored = 0
    while time.monotonic() < deadline and child.poll() is None:
        rows = raw_rows(pg_url, "SELECT COUNT(*) FROM results") if _has_results(pg_url) else [(0,)]
        stored = rows[0][0]
        if stored >= 100:
            break
        time.sleep(0.02)
    assert child.poll() is None, "the run ended before it could be killed"
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    (run_id,), *_ = raw_rows(pg_url, "SELECT id FROM runs")
    before = raw_rows(pg_url, "SELECT COUNT(*) FROM results")[0][0]
    assert 100 <= before < n  # killed mid-run
    # The server released the killed process's run lock: the resume is not refused.
    done = subprocess.run(
        [SEQJUDGE, "run", "--resume", run_id, "--store", pg_url],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert raw_rows(pg_url, "SELECT COUNT(*), COUNT(DISTINCT trace_id) FROM results") == [(n, n)]
    assert raw_rows(pg_url, "SELECT status FROM runs") == [("completed",)]


def _has_results(url: str) -> bool:
    return bool(raw_rows(url, "SELECT to_regclass('results') IS NOT NULL")[0][0])


def test_the_run_lock_is_held_across_processes(pg_url: str) -> None:
    with Store(pg_url) as s:
        run_id = s.create_run(config={}, fingerprint={})
        script = textwrap.dedent(
            """
            import sys
            from seqjudge.store import Store
            from seqjudge.errors import InputError
            with Store(sys.argv[1]) as other:
                try:
                    other.reopen_run(sys.argv[2])
                except InputError as exc:
                    print("refused:", exc)
            """
        )
        out = subprocess.run(
            [sys.executable, "-c", script, pg_url, run_id], capture_output=True, text=True, env=env_for_cli()
        )
        assert "being run or resumed elsewhere" in out.stdout, out.stderr
        s.release_run(run_id)
        out = subprocess.run(
            [sys.executable, "-c", script, pg_url, run_id], capture_output=True, text=True, env=env_for_cli()
        )
        assert out.returncode == 0 and "refused" not in out.stdout, out.stderr


def test_an_empty_store_is_named_without_its_password(
    pg_server: PgServer, pw_database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = pg_server.url(pw_database, user=PASSWORD_ROLE, password=PASSWORD)
    Store(url).close()
    assert run(["runs", "list", "--store", url]) == 0
    assert run(["review", "list", "--store", url]) == 0
    out = capsys.readouterr().out
    assert out.count("no runs stored in postgresql://seqjudge_pw:***@127.0.0.1") == 2 and PASSWORD not in out


def test_deferred_writes_are_committed_in_groups_and_read_back_at_once(pg_url: str) -> None:
    """`seqjudge run` on a server commits its traces in groups (Store.defer_writes): none is lost or
    doubled, a duplicate is refused at once, and the store reads what it wrote before it is committed."""
    from test_store import pair

    def committed() -> int:
        return int(raw_rows(pg_url, "SELECT COUNT(*) FROM results")[0][0])

    with Store(pg_url) as s:
        run_id = s.create_run(config={}, fingerprint={})
        s.defer_writes(max_writes=5, max_seconds=3600)
        for i in range(4):
            s.save_result(run_id, *pair(f"t{i}", "split"))
        assert committed() == 0  # waiting: four of at most five
        with pytest.raises(InputError, match="already stored"):
            s.save_result(run_id, *pair("t2", "split"))
        s.save_result(run_id, *pair("t4", "split"))
        assert committed() == 5  # the fifth wrote the group
        s.save_result(run_id, *pair("t5", "clean"))
        assert committed() == 5 and len(s.completed_trace_ids(run_id)) == 6  # a read writes what waits first
        s.save_result(run_id, *pair("t6", "clean"))
        s.finish_run(run_id, totals={})
        assert committed() == 7 and s.run_info(run_id).counts["traces"] == 7
        assert len(s.review_items(run=run_id)) == 5
        # A group is one INSERT a table: the run's order, every rule decision and attempt still there.
        assert [r.trace_id for r in s.results(run_id)] == [f"t{i}" for i in range(7)]
        assert raw_rows(pg_url, "SELECT seq FROM results ORDER BY seq") == [(i,) for i in range(1, 8)]
        assert all(s.result(run_id, f"t{i}").result == pair(f"t{i}", "split")[1] for i in range(5))
        kinds = ["split"] * 5 + ["clean"] * 2
        attempts = sum(len(pair(f"t{i}", k)[1].judge.attempts) for i, k in enumerate(kinds))
        assert raw_rows(pg_url, "SELECT COUNT(*) FROM judge_attempts") == [(attempts,)]
    with Store(pg_url) as s:  # deferring ended with the run; closing writes what still waits
        other = s.create_run(config={}, fingerprint={})
        s.defer_writes()
        s.save_result(other, *pair("t0", "clean"))
    assert committed() == 8


def test_deferring_is_for_a_server_only(tmp_path: Path) -> None:
    from test_store import pair

    with Store(tmp_path / "s.db") as s:
        run_id = s.create_run(config={}, fingerprint={})
        s.defer_writes(max_writes=100)
        s.save_result(run_id, *pair("t0", "clean"))
        assert raw_rows(tmp_path / "s.db", "SELECT COUNT(*) FROM results") == [(1,)]  # committed at once


def test_a_url_in_the_config_or_a_shown_command_stays_a_url(monkeypatch: pytest.MonkeyPatch) -> None:
    from seqjudge.config import RunConfig
    from seqjudge.defaults import store_dir, store_flag

    url = "postgresql://ana:hunter2-secret@db.example/judge"
    cfg = RunConfig(rules="r.yaml", traces="t.jsonl", store=url).resolved(Path("/suite"))
    assert cfg.store == url and cfg.rules == "/suite/r.yaml"  # not made a path under the config's folder
    monkeypatch.delenv("SEQJUDGE_STORE", raising=False)
    assert store_flag(url) == " --store 'postgresql://ana:***@db.example/judge'"
    monkeypatch.setenv("SEQJUDGE_STORE", url)
    assert store_flag(url) == ""  # what the command typed here opens anyway
    assert store_dir(url) == Path(".seqjudge")  # the response cache and certificates stay on this machine


def test_a_lock_held_too_long_is_a_store_error(
    pg_server: PgServer, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import seqjudge.store.postgres as pg

    Store(pg_url).close()
    monkeypatch.setattr(pg, "LOCK_TIMEOUT", "200ms")  # (30 s in use)
    with Store(pg_url) as s, pg_server.admin(libpq_url(pg_url).rsplit("/", 1)[1]) as other:
        other.execute("BEGIN")
        other.execute("LOCK TABLE runs IN ACCESS EXCLUSIVE MODE")  # another session holds the table
        with pytest.raises(StoreError, match="lock timeout"):
            s.create_run(config={}, fingerprint={})
        other.execute("ROLLBACK")
        assert s.create_run(config={}, fingerprint={})  # the store goes on once the lock is gone


def test_without_the_driver_a_postgresql_store_is_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as where the `postgres` extra is not installed
    monkeypatch.delitem(sys.modules, "seqjudge.store.postgres", raising=False)
    with pytest.raises(InputError, match="needs the PostgreSQL driver") as err:
        Store("postgresql://ana:hunter2-secret@db.example/judge")
    assert "seqjudge[postgres]" in err.value.render() and "hunter2" not in err.value.render()
