"""`seqjudge report RUN [--compare BASELINE] -o report.html`: one self-contained HTML page of a run."""

from __future__ import annotations

import json
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from seqjudge.cli.app import app
from seqjudge.cli.options import StoreOpt
from seqjudge.defaults import DEFAULT_STORE_PATH
from seqjudge.errors import InputError
from seqjudge.outputs.streams import open_output

if TYPE_CHECKING:
    from seqjudge.outputs.html.render import Calibration
    from seqjudge.store import RunInfo, Store, StoredResult

    Run = tuple[RunInfo, list[StoredResult]]

EXPORT_SUFFIXES = (".jsonl", ".ndjson")
CALIBRATION_NAMES = ("calibration-{run}.png", "calibration.png", "calibration-{run}.json", "calibration.json")


def is_export(ref: str) -> bool:
    """A run given as a JSONL export file (``seqjudge runs export``), not a reference into the store."""
    path = Path(ref)
    return path.suffix.lower() in EXPORT_SUFFIXES or path.is_file()


def load_export(path: Path) -> Run:
    from seqjudge.store import read_export

    try:
        stream = path.open(encoding="utf-8")
    except OSError as exc:
        raise InputError(
            f"cannot read the export ({exc.strerror})",
            source=str(path),
            hint="give a run id, a baseline name, or a file written by `seqjudge runs export RUN`",
        ) from None
    with stream:
        lines = list(read_export(stream))
    if not lines:
        raise InputError(
            "the export holds no result", source=str(path), hint="export a run with results in it"
        )
    runs = {run.id for run, _ in lines}
    if len(runs) > 1:
        raise InputError(
            f"the export mixes {len(runs)} runs ({', '.join(sorted(runs))})",
            source=str(path),
            hint="export one run per file",
        )
    return lines[0][0], [stored for _, stored in lines]


def _from_store(db: Store, run_id: str) -> Run:
    return db.run_info(run_id), list(db.results(run_id))


def _calibration(explicit: Path | None, folders: list[Path], run_id: str) -> Calibration | None:
    """The calibration to embed: the file given, else one beside the store (or export), else none."""
    if explicit is not None:
        return _read_calibration(explicit, strict=True)
    for folder in folders:
        for name in CALIBRATION_NAMES:
            path = folder / name.format(run=run_id)
            if path.is_file():
                found = _read_calibration(path, strict=False)
                if found is not None:
                    return found
    return None


def _read_calibration(path: Path, *, strict: bool) -> Calibration | None:
    """A PNG plot or a JSON object of figures; a bad file found by looking is skipped with a warning, a bad
    file given with --calibration is an error."""
    from seqjudge.outputs.html.render import PNG_MAGIC, Calibration

    problem = None
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raw, problem = b"", f"cannot read it ({exc.strerror})"
    if problem is None and raw.startswith(PNG_MAGIC):
        return Calibration(source=path.name, png=raw)
    if problem is None:
        try:
            figures = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            figures = None
        if isinstance(figures, dict):
            return Calibration(source=path.name, figures=figures)
        problem = "neither a PNG image nor a JSON object"
    if strict:
        raise InputError(
            f"the calibration file is {problem}",
            source=str(path),
            where="--calibration",
            hint="give the PNG plot or the JSON figures written by the calibration step",
        )
    print(f"warning: skipped {path}: {problem}", file=sys.stderr)
    return None


@app.command("report")
def report(
    run: Annotated[
        str, typer.Argument(help="A run id, a unique prefix of one, `latest`, or a JSONL export of a run.")
    ],
    compare: Annotated[
        str | None,
        typer.Option(
            "--compare",
            help="Show the changes since a baseline: a baseline name, a run id or prefix, or a JSONL export.",
        ),
    ] = None,
    output: Annotated[
        Path, typer.Option("--output", "-o", help="The HTML file to write; - for stdout.")
    ] = Path("report.html"),
    calibration: Annotated[
        Path | None,
        typer.Option(
            "--calibration",
            help="A calibration plot (PNG) or figures (JSON) to embed. By default calibration.png or "
            "calibration.json beside the store is embedded when it is there.",
        ),
    ] = None,
    store: StoreOpt = DEFAULT_STORE_PATH,
) -> int:
    """Write one self-contained HTML page of a run: its health, a sortable table of traces, each trace's
    calls with the violations marked, and, with --compare, what changed since a baseline."""
    from seqjudge.outputs.html.render import render_report
    from seqjudge.store import Store

    with ExitStack() as stack:
        db: Store | None = None

        def opened() -> Store:
            nonlocal db
            if db is None:
                # Reading never creates a database: a wrong --store should say so.
                db = stack.enter_context(Store(store, create=False))
            return db

        folders: list[Path] = []
        if is_export(run):
            candidate = load_export(Path(run))
            folders.append(Path(run).parent)
        else:
            s = opened()
            candidate = _from_store(s, s.resolve_run(run))
            folders.append(store.parent)
        baseline: Run | None = None
        if compare is not None:
            if is_export(compare):
                baseline = load_export(Path(compare))
            else:
                s = opened()
                names = s.baselines()
                baseline = _from_store(s, names[compare] if compare in names else s.resolve_run(compare))
    info, stored = candidate
    page = render_report(
        info, stored, baseline=baseline, calibration=_calibration(calibration, folders, info.id)
    )
    with open_output(output) as out:
        out.write(page)
    if str(output) != "-":
        against = f" against {baseline[0].id}" if baseline else ""
        done = f"wrote the report of run {info.id} ({len(stored)} trace(s)){against} to {output}"
        print(done, file=sys.stderr)
    return 0
