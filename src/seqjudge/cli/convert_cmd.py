"""``seqjudge convert INPUT -o OUT.jsonl``: any supported trace format -> native JSONL, one trace a line.

Output keeps exactly the keys the input gave (plus those an importer derived, and defaulted trace ids):
``model_dump_json(exclude_unset=True)``. So a native file round-trips without growing ``"status": "ok"``,
``"messages": []`` and nulls on every call, and nothing the input said is lost; reading the output back gives
the same traces. Traces are written as they are read, so memory stays flat; a regular output file is written
beside its final name and renamed into place only when the whole input converted, so a bad input never leaves
a half-written file (with ``-o -``, a pipe or a device the traces before a bad record have already been
written); ``open_output`` says which outputs are written how.
"""

from collections.abc import Iterable
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
from seqjudge.outputs.streams import open_output
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
    # A regular output file is renamed into place only once the whole input converted (open_output).
    with open_output(output, inputs=input) as out:
        count, calls = _write(traces, out, named)
        out.flush()
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
