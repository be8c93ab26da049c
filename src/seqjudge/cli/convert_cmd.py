"""``seqjudge convert INPUT -o OUT.jsonl``: any supported trace format -> native JSONL, one trace a line.

Output keeps exactly the keys the input gave (plus those an importer derived, and defaulted trace ids):
``model_dump_json(exclude_unset=True)``. So a native file round-trips without growing ``"status": "ok"``,
``"messages": []`` and nulls on every call, and nothing the input said is lost; reading the output back gives
the same traces. Traces are written as they are read, so memory stays flat; the output file is written
beside its final name and renamed into place only when the whole input converted, so a bad input never leaves
a half-written file (with ``-o -`` the traces before a bad record have already been printed).
"""

import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated

import typer

from seqjudge.cli.app import app
from seqjudge.cli.trace_options import (
    AllowEmpty,
    ErrorPattern,
    MessagesKey,
    TraceFormat,
    Verbose,
    load_options,
)
from seqjudge.errors import InputError
from seqjudge.safetext import say

if TYPE_CHECKING:
    from seqjudge.trace import Trace


@app.command()
def convert(
    input: Annotated[
        list[str],
        typer.Argument(
            metavar="INPUT...", help="Trace files or directories (several may be given), or - for stdin."
        ),
    ],
    output: Annotated[
        str,
        typer.Option(
            "--output", "-o", metavar="OUT.jsonl", help="Where to write native JSONL (- for stdout)."
        ),
    ],
    trace_format: TraceFormat = None,
    messages_key: MessagesKey = None,
    error_pattern: ErrorPattern = None,
    verbose: Verbose = False,
    allow_empty: AllowEmpty = False,
) -> int:
    """Convert traces (any format `--trace-format` names) to native JSONL; print what was read and skipped."""
    from seqjudge.ingest import IngestStats, load_traces
    from seqjudge.ingest.stats import report

    stats = IngestStats()
    options = load_options(trace_format, messages_key, error_pattern, verbose, allow_empty)
    traces = load_traces(input, stats=stats, **options)
    named = ", ".join(input)
    if output == "-":
        count, calls = _write(traces, sys.stdout, named)
        sys.stdout.flush()
    else:
        count, calls = _write_file(traces, Path(output), named)
    say(f"converted {count} trace(s), {calls} call(s): {named} -> {output}", err=True)
    report(stats)
    return 0


def _write(traces: "Iterable[Trace]", stream: IO[str], source: str) -> tuple[int, int]:
    from seqjudge.trace import check_trace_data

    count = calls = 0
    for trace in traces:
        check_trace_data(trace, source)  # a value JSON cannot write must end in a message, not a traceback
        stream.write(trace.model_dump_json(exclude_unset=True))
        stream.write("\n")
        count += 1
        calls += len(trace.calls)
    return count, calls


def _write_file(traces: "Iterable[Trace]", target: Path, source: str) -> tuple[int, int]:
    folder = target.parent
    if not folder.is_dir():
        raise InputError(
            "the output folder does not exist",
            source=str(target),
            where="--output",
            hint="Create the folder first, or write elsewhere",
        )
    # A sibling name, created like any file (so the umask applies), renamed over the target at the end.
    temp = folder / f".{target.name}.{os.getpid()}.part"
    try:
        stream = temp.open("w", encoding="utf-8")
    except OSError as exc:
        raise InputError(
            f"cannot write the output ({exc.strerror or exc})", source=str(target), where="--output"
        ) from None
    try:
        with stream:
            result = _write(traces, stream, source)
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return result
