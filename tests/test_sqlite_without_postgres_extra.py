"""A SQLite store needs nothing of the `postgres` extra: `seqjudge run`, `runs list` and `review list` work
in a process where psycopg cannot be imported, as after `pip install seqjudge` (the README's first command).

(A fresh clone's `make demo` once stopped with exit 4 here: finishing a run imported the PostgreSQL module for
a flush of deferred writes that only a PostgreSQL store makes.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# psycopg is installed in the test environment: None in sys.modules makes every `import psycopg` fail, as
# it does where the extra is not installed.
_WITHOUT_PSYCOPG = """
import sys
sys.modules["psycopg"] = None
from seqjudge.cli import run
code = run(sys.argv[1:])
import seqjudge.store.connection  # the store ran: it must not have needed the PostgreSQL module
assert "seqjudge.store.postgres" not in sys.modules, "a SQLite store imported store.postgres"
sys.exit(code)
"""


def _seqjudge(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _WITHOUT_PSYCOPG, *args], capture_output=True, text=True, cwd=ROOT, timeout=300
    )


def test_run_and_the_queue_on_sqlite_need_no_psycopg(tmp_path: Path) -> None:
    store = str(tmp_path / "seqjudge.db")
    ran = _seqjudge("run", "golden_traces/customer-support", "--store", store)
    assert ran.returncode in (0, 1), ran.stderr  # a verdict, not a crash (4)
    assert "internal error" not in ran.stderr and "Traceback" not in ran.stderr
    listed = _seqjudge("runs", "list", "--store", store)
    assert listed.returncode == 0, listed.stderr
    assert "completed" in listed.stdout
    queue = _seqjudge("review", "list", "--store", store)
    assert queue.returncode in (0, 1), queue.stderr
    assert "Traceback" not in queue.stderr
