"""`seqjudge report RUN [--compare BASELINE] -o report.html`: one self-contained HTML page of a run."""

import json
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from seqjudge.cli.app import app
from seqjudge.cli.options import StoreOpt
from seqjudge.defaults import DEFAULT_STORE, store_dir
from seqjudge.errors import InputError
from seqjudge.outputs.streams import open_output
from seqjudge.safetext import say

if TYPE_CHECKING:
    from seqjudge.outputs.html.render import Calibration
    from seqjudge.provenance import Suite
    from seqjudge.store import RunInfo, Store, StoredResult

    Run = tuple[RunInfo, list[StoredResult]]

EXPORT_SUFFIXES = (".jsonl", ".ndjson")
CALIBRATION_NAMES = ("calibration-{run}.png", "calibration.png", "calibration-{run}.json", "calibration.json")


def is_export(ref: str) -> bool:
    """A run given as a JSONL export file (``seqjudge runs export``), not a reference into the store."""
    path = Path(ref)
    return path.suffix.lower() in EXPORT_SUFFIXES or path.is_file()


def load_export(path: Path) -> "Run":
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


def _from_store(db: "Store", run_id: str) -> "Run":
    return db.run_info(run_id), list(db.results(run_id))


def _run_suite(info: "RunInfo", stored: "list[StoredResult]") -> "Suite | None":
    """The run's rules (hashed when it ran) and traces; None for a run stored before runs recorded it."""
    from seqjudge.provenance import Suite, traces_hash

    rules = (info.fingerprint or {}).get("rules_hash")
    if not isinstance(rules, str):
        return None
    ids = [s.trace_id for s in stored]
    return Suite(f"run {info.id}", rules, traces_hash(ids), len(set(ids)))


def _calibration(
    explicit: Path | None, folders: list[Path], run_id: str, suite: "Suite | None"
) -> "Calibration | None":
    """The calibration to embed: the file given, else one beside the store (or export) made from this
    run's rules and traces, else none."""
    if explicit is not None:
        given = _read_calibration(explicit, strict=True)
        return None if given is None else _tied(given, explicit, suite, strict=True)
    for folder in folders:
        for name in CALIBRATION_NAMES:
            path = folder / name.format(run=run_id)
            if path.is_file():
                found = _read_calibration(path, strict=False)
                tied = None if found is None else _tied(found, path, suite, strict=False)
                if tied is not None:
                    return tied
    return None


def _tied(cal: "Calibration", path: Path, run: "Suite | None", *, strict: bool) -> "Calibration | None":
    """``cal`` with a note of what it was made from when that is this run's suite. A file found by looking
    is skipped (with a warning) otherwise; a file given with --calibration is shown with what is known, and
    refused when it names another suite."""
    from dataclasses import replace

    from seqjudge.provenance import Suite, png_suite

    made = png_suite(cal.png) if cal.png else Suite.from_dict((cal.figures or {}).get("suite"))
    if made is not None and run is not None and made.same(run):
        return replace(cal, note=f"made from the dataset {made.name}: the same rules and traces as this run")
    if made is not None and run is not None:
        problem = f"it was made from the dataset {made.describe()}, not from this run's rules and traces"
        if strict:
            raise InputError(
                f"the calibration does not belong to this run: {problem}",
                source=str(path),
                where="--calibration",
                hint="calibrate the dataset this run checked (`seqjudge calibrate DATASET --plot FILE`), or "
                "leave --calibration out",
            )
        say(f"warning: skipped {path}: {problem}", err=True)
        return None
    unknown = (
        "it records no dataset (made by an older seqjudge or another tool)"
        if made is None
        else "this run records no rules hash to compare it with (stored by an older seqjudge)"
    )
    if strict:
        return replace(cal, note=f"given with --calibration; {unknown}, so it is not checked against the run")
    say(f"warning: skipped {path}: {unknown}; --calibration {path} shows it anyway", err=True)
    return None


def _read_calibration(path: Path, *, strict: bool) -> "Calibration | None":
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
    say(f"warning: skipped {path}: {problem}", err=True)
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
    store: StoreOpt = DEFAULT_STORE,
) -> int:
    """Write one self-contained HTML page of a run: its health, a sortable table of traces, each trace's
    calls with the violations marked, and, with --compare, what changed since a baseline."""
    from seqjudge.outputs.html.render import render_report
    from seqjudge.rates import rates_or_note
    from seqjudge.store import Store

    with ExitStack() as stack:
        db: Store | None = None

        def opened() -> "Store":
            nonlocal db
            if db is None:
                # Reading never creates a database: a wrong --store should say so.
                db = stack.enter_context(Store(store, create=False))
            return db

        folders: list[Path] = []
        rates: tuple[Any, str | None] = (None, None)
        if is_export(run):
            candidate = load_export(Path(run))
            folders.append(Path(run).parent)
        else:
            s = opened()
            candidate = _from_store(s, s.resolve_run(run))
            folders.append(store_dir(store))
            rates = rates_or_note(s, candidate[0].id)
        baseline: Run | None = None
        if compare is not None:
            if is_export(compare):
                baseline = load_export(Path(compare))
            else:
                s = opened()
                names = s.baselines()
                baseline = _from_store(s, names[compare] if compare in names else s.resolve_run(compare))
    info, stored = candidate
    shown = _calibration(calibration, folders, info.id, _run_suite(info, stored))
    page = render_report(
        info, stored, baseline=baseline, calibration=shown, rates=rates[0], rates_note=rates[1]
    )
    # The store, an export or a calibration read: never the file the page replaces.
    with open_output(output, inputs=[store, run, compare, calibration]) as out:
        out.write(page)
    if str(output) != "-":
        against = f" against {baseline[0].id}" if baseline else ""
        done = f"wrote the report of run {info.id} ({len(stored)} trace(s)){against} to {output}"
        say(done, err=True)
    return 0
