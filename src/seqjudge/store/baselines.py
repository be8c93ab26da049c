"""Baselines: runs saved under a name (used by ``seqjudge baseline`` and ``compare``)."""

from __future__ import annotations

from seqjudge.errors import InputError
from seqjudge.store.codec import _iso, _now
from seqjudge.store.runs import RunsMixin


class BaselinesMixin(RunsMixin):
    """The ``baselines`` table."""

    def save_baseline(self, run_id: str, name: str) -> None:
        """Name a run as a baseline; saving an existing name moves it to this run."""
        run_id = self.resolve_run(run_id)
        if not name.strip():
            raise InputError("a baseline needs a name", where="--name")
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO baselines (name, run_id, created_at) VALUES (?, ?, ?) "
                "ON CONFLICT (name) DO UPDATE SET run_id = excluded.run_id, "
                "created_at = excluded.created_at",
                (name, run_id, _iso(_now())),
            )

    def baseline(self, name: str) -> str:
        rows = self._read("SELECT run_id FROM baselines WHERE name = ?", (name,))
        if not rows:
            names = [r["name"] for r in self._read("SELECT name FROM baselines ORDER BY name")]
            raise InputError(
                f"no baseline named {name!r}",
                source=self.location,
                hint=("the baselines are: " + ", ".join(names))
                if names
                else "`seqjudge baseline save RUN --name NAME` makes one",
            )
        return str(rows[0]["run_id"])

    def baselines(self) -> dict[str, str]:
        return {
            r["name"]: r["run_id"] for r in self._read("SELECT name, run_id FROM baselines ORDER BY name")
        }
