"""Another git revision's code, template and suites, exported to a folder, for before/after measurements.

    from revision import export_revision
    tree = export_revision("main", Path(tmp))      # tree/src, tree/prompts, tree/golden_traces

A child process with ``PYTHONPATH=tree/src`` then imports that revision's seqjudge (PYTHONPATH comes before
the installed checkout), and finds its template in ``tree/prompts`` as a checkout would.
"""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXPORTED = ("src", "prompts", "golden_traces")


def export_revision(rev: str, dest: Path) -> Path:
    """``git archive`` of ``rev``'s src/, prompts/ and golden_traces/ into ``dest``; returns ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, *EXPORTED], check=True, capture_output=True
    ).stdout
    tar_path = dest / "rev.tar"
    tar_path.write_bytes(archive)
    with tarfile.open(tar_path) as tar:
        tar.extractall(dest, filter="data")
    tar_path.unlink()
    return dest
