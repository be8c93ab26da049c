"""Every `seqjudge check` output format side by side: wall time and peak memory, at two trace counts.

    python benchmarks/outputs.py [--traces 20000,100000] [--repeats 3] [--formats jsonl,json,text,...]
                                 [--workers N] [--as-is]
    python benchmarks/outputs.py --render [--traces 300] [--repeats 30] [--formats jsonl,text,junit]
    python benchmarks/outputs.py --same-output-as OLD/src [--traces 500]

The workload is benchmarks/engine.py's (b): N traces of 20 calls against its 20 rules, as JSONL. Each format
runs as its own `seqjudge check RULES TRACES --format F -o FILE` process, so that its peak
resident memory (the largest process of the run: the command or one of its workers, from wait4) is its own.
Each `check` runs with its bytecode cached, as an installed seqjudge has it (--as-is: the environment's
setting; with PYTHONDONTWRITEBYTECODE every run compiles the modules it imports again). Printed per trace
count: the median wall time of --repeats runs, the ratio to `jsonl` measured in the same
rounds (formats alternate within a round), the median CPU time (the command and its workers: user and system)
and its ratio to `jsonl`'s, the median peak RSS and the output size. Memory that does not grow from the small
count to the large one is what "streams" means here. On a machine shared with other work the CPU ratio is
the steadier figure: wall time also counts the time the processes waited for a core.

--render times, in this process, what each format adds to checking a trace: the CPU time of its writer's
``render`` (a trace's part of the output, what the workers run) over the traces' report data, and of
checking them (``Checker.data``), each the least of --repeats rounds that alternate the formats, so that
a busy machine's slow rounds drop out. Every render is over traces read and checked afresh, as a worker's
are (a text rendered before has its hash kept, which a writer that looks texts up would get for free), with
what is kept meanwhile frozen from the collector (a worker keeps no report). Printed: microseconds a trace
and (check + render) over (check + jsonl's render), the share of the check a format adds. Only public names
are used, so the same command run with PYTHONPATH at an older checkout's src measures the renderers before a
change, side by side.
Its default formats are those whose part grows with every trace (markdown and html show the first failing
traces in full, up to a bound, so a figure over a few hundred traces says little about them).

--same-output-as checks that a change to the renderers left the output byte for byte as it was: the whole
text, junit and markdown output (head, every trace's part, closing lines) of every corpus of
``engine.py --same-reports-as`` and of traces whose arguments hold secrets, escapes, control characters and
values of every JSON type, each under three (threshold, risk level) settings, written by this checkout and
by OLD/src (in a child process); the first difference of each is printed, and the exit code is 1 if any.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import engine as workload  # noqa: E402  (benchmarks/engine.py: the same traces and rules)

FORMATS = ["jsonl", "json", "text", "sarif", "junit", "markdown", "html"]
RENDERED = "jsonl,json,text,sarif,junit"  # --render's default: the formats whose part grows with each trace


def write_traces(path: Path, n: int) -> None:
    rng = random.Random(11)
    with path.open("w") as out:
        for k in range(n):
            out.write(json.dumps({"trace_id": f"t{k}", "calls": workload.make_calls(20, rng)}) + "\n")


def run_once(
    rules: Path, traces: Path, fmt: str, out: Path, workers: int | None, env: dict[str, str] | None = None
) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (user and system, of the command and the workers it waited for) and peak
    RSS in bytes (its largest process, workers included) of one `check` process; ``env``: its environment
    (None: this one's)."""
    argv = [sys.executable, "-c", "from seqjudge.cli import main; main()"]
    argv += ["check", str(rules), str(traces), "--format", fmt]
    argv += ["-o", str(out)] + ([] if workers is None else ["--workers", str(workers)])
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode not in (0, 1):
        raise SystemExit(f"check --format {fmt} exited {proc.returncode}: {err}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024  # Linux reports kilobytes


def render_costs(formats: list[str], n: int, rounds: int) -> None:
    """``--render``: CPU microseconds a trace of checking and of each format's ``render``."""
    import gc
    import io

    from seqjudge.checkpool import Checker
    from seqjudge.ingest.plain import plain_trace
    from seqjudge.outputs.registry import writer
    from seqjudge.rules.engine import Engine
    from seqjudge.rules.load import load_rules
    from seqjudge.trace import Trace

    rng = random.Random(11)
    lines = [json.dumps({"trace_id": f"t{k}", "calls": workload.make_calls(20, rng)}) for k in range(n)]
    with tempfile.TemporaryDirectory() as d:
        rules = Path(d) / "rules20.yaml"
        rules.write_text(yaml.safe_dump(workload.rules_20()))
        ruleset = load_rules(rules)
    checker = Checker(Engine(ruleset), 0.85, "medium")
    shown = {f: writer("check", f)(io.StringIO(), source="traces.jsonl", ruleset=ruleset) for f in formats}
    best = dict.fromkeys(["check", *formats], float("inf"))
    for r in range(rounds):
        for fmt in formats if r % 2 == 0 else list(reversed(formats)):
            # Each render gets traces read and reports made afresh, as a worker's are: texts rendered before
            # keep their hashes, and a writer that looks texts up would find them free the second time.
            records = [json.loads(line) for line in lines]
            traces: list[Any] = [plain_trace(record, None) for record in records]  # as `check` reads them
            start = time.process_time()
            reports = [checker.data(trace) for trace in traces]
            best["check"] = min(best["check"], time.process_time() - start)
            # A format that shows what only the models hold (html) is handed the models, as `check` does.
            if shown[fmt].models:
                traces = [Trace.model_validate(record) for record in records]
            # What is kept here a worker drops once rendered: frozen, so that no collection walks it and
            # counts as the render's time.
            gc.freeze()
            start = time.process_time()
            for trace, data in zip(traces, reports, strict=True):
                shown[fmt].render(trace, data, None)
            best[fmt] = min(best[fmt], time.process_time() - start)
            gc.unfreeze()
            del records, traces, reports
    us = {k: v / n * 1e6 for k, v in best.items()}
    print(f"CPU a trace, least of {rounds} rounds over {n:,} traces x 20 calls, 20 rules:")
    print(f"  check (engine and redaction) {us['check']:.1f} us")
    for fmt in formats:
        share = (us["check"] + us[fmt]) / (us["check"] + us["jsonl"])
        print(f"  {fmt:10s} render {us[fmt]:7.1f} us   (check + render) / (check + jsonl's) {share:.2f}")


# Arguments that take every path of the call list: secrets by key (split, camelCase), by value and in pairs,
# words the screen stops at that are no secret, what JSON escapes, what a terminal must not get, values of
# every JSON type, long and non-ASCII text. Some repeat across traces, some are new in each.
ODD_ARGUMENTS: list[dict] = [
    {"api_key": "abc123"},
    {"pass_word": "hunter2"},
    {"passWord": "x", "q": 1},
    {"x_api_key": "y"},
    {"q": "Bearer abcdef12345"},
    {"url": "https://user:pw@example.com/x"},
    {"note": "token=abc"},
    {"q": "sk-" + "a" * 24},
    {"password": "q"},
    {"q": "password"},
    {"tokenizer": "bpe", "max_tokens": 5},
    {"q": "line\nbreak"},
    {"q": 'quo"te'},
    {"q": "back\\slash"},
    {"q": "\x1b[31mred"},
    {"q": "\u202eRTL"},
    {"q": "tab\there"},
    {"n": 1.5, "b": True, "z": None},
    {"nested": {"a": 1, "token": "t"}},
    {"list": [1, "x", {"secret": "s"}]},
    {"long": "x" * 100},
    {"k": "ünïcödé ✓", "q": -3},
    {"Key": 1, "key": 2, "a": 3},
    {"pass": "word"},
    {},
    {1: "int key"},
    {"q": "a\u0085b"},
]


def odd_records(n: int) -> list[dict]:
    """``n`` traces of (b)'s calls, a third of whose calls take ``ODD_ARGUMENTS`` (or a fresh value of one),
    and every tenth trace 250 calls long (past the whole-trace screen)."""
    rng = random.Random(5)
    records = []
    for k in range(n):
        calls = workload.make_calls(250 if k % 10 == 9 else 20, rng)
        for c in calls:
            r = rng.random()
            if r < 0.3:
                c["arguments"] = dict(rng.choice(ODD_ARGUMENTS))
            elif r < 0.4:
                c["arguments"] = {rng.choice(["q", "token", "id"]): f"v{k}-{rng.randrange(10**6)}"}
        if k % 7 == 3:
            calls[rng.randrange(len(calls))]["tool_name"] = rng.choice(["tool_\x1bx", "tö", "a<b>&c"])
        records.append({"trace_id": f"odd\x07{k}" if k % 11 == 5 else f"odd{k}", "calls": calls})
    return records


def output_corpora(n: int):
    """(name, rule set, traces): engine.py's corpora, then ``odd_records`` as models and as plain records."""
    from seqjudge.ingest.plain import plain_trace
    from seqjudge.rules.model import RuleSet
    from seqjudge.trace import Trace

    yield from workload.report_corpora(n)
    records = odd_records(n)
    plain = [plain_trace(json.loads(json.dumps(r, default=str)), None) for r in records]
    models = [Trace.model_validate(json.loads(json.dumps(r, default=str))) for r in records]
    for rules in (workload.rules_20(), workload.rules_50()):
        ruleset = RuleSet.model_validate(rules)
        yield f"odd arguments, {len(rules['rules'])} rules, plain", ruleset, plain
        yield f"odd arguments, {len(rules['rules'])} rules, models", ruleset, models


SETTINGS = [(0.85, "medium"), (0.5, "high"), (0.97, "low")]  # (threshold, risk level)
COMPARED = ["text", "junit", "markdown"]
HEAD = b"\x00\x01"  # starts a header line; no output line does (NUL is escaped or replaced in every format)


def write_outputs(n: int, out: Path) -> None:
    """Every corpus's whole output in each of ``COMPARED`` under each of ``SETTINGS``, after a header line."""
    import io

    from seqjudge.checkpool import Checker
    from seqjudge.outputs.registry import writer
    from seqjudge.outputs.textview import Totals
    from seqjudge.rules.engine import Engine

    with out.open("wb") as f:
        for name, rules, traces in output_corpora(n):
            for threshold, risk in SETTINGS:
                for fmt in COMPARED:
                    head = {"corpus": name, "threshold": threshold, "risk": risk, "format": fmt}
                    f.write(HEAD + json.dumps(head).encode() + b"\n")
                    text = io.StringIO()
                    shown = writer("check", fmt)(
                        text, source="traces.jsonl", ruleset=rules, threshold=threshold, risk_level=risk
                    )
                    totals = Totals()
                    checker = Checker(Engine(rules), threshold, risk, render=shown.render, totals=totals)  # type: ignore[arg-type]
                    shown.start()
                    for trace in traces:
                        checked = checker.checked(trace)
                        shown.count(checked)
                        shown.line(checked)
                    shown.finish(totals)
                    f.write(text.getvalue().encode("utf-8", "surrogateescape"))
                    f.write(b"\n")


def same_output_as(old_src: str, n: int) -> int:
    """Write the outputs with this checkout and with ``old_src``; print each one's first difference."""
    with tempfile.TemporaryDirectory() as d:
        new, old = Path(d) / "new.out", Path(d) / "old.out"
        env = {**os.environ, "PYTHONPATH": old_src}
        command = [sys.executable, __file__, "--write-outputs", str(old), "--traces", str(n)]
        child = subprocess.Popen(command, env=env)
        write_outputs(n, new)
        assert child.wait() == 0, "the old checkout failed to write its outputs"
        blocks = differing = lines = 0
        head, shown = b"", False
        with new.open("rb") as a, old.open("rb") as b:
            for line_new, line_old in zip(a, b, strict=True):
                if line_new.startswith(HEAD):
                    assert line_new == line_old, (line_new, line_old)
                    head, shown, blocks = line_new[len(HEAD) :].strip(), False, blocks + 1
                    continue
                lines += 1
                if line_new != line_old:
                    differing += 1
                    if not shown:
                        shown = True
                        print(
                            f"DIFFERENT: {head.decode()}:\n  new {line_new[:400]!r}\n  old {line_old[:400]!r}"
                        )
    print(
        f"{lines:,} lines of output in {blocks} (corpus, settings, format); "
        f"{differing:,} differ from {old_src}'s"
    )
    return 1 if differing else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", default=None, help="comma-separated trace counts (default 20000,100000)")
    ap.add_argument("--repeats", type=int, default=None, help="rounds (default 3; --render: 30)")
    ap.add_argument("--formats", default=None, help=f"default {','.join(FORMATS)} (--render: {RENDERED})")
    ap.add_argument("--workers", type=int, default=None, help="check --workers N (default: its own)")
    ap.add_argument("--render", action="store_true", help="time each format's render in this process")
    ap.add_argument(
        "--same-output-as", metavar="OLD_SRC", help="compare the text/junit/markdown output with OLD_SRC's"
    )
    ap.add_argument(
        "--as-is", action="store_true", help="no bytecode cache of its own: the environment's setting"
    )
    ap.add_argument("--write-outputs", metavar="FILE", help=argparse.SUPPRESS)  # --same-output-as's child
    args = ap.parse_args()
    if args.write_outputs or args.same_output_as:
        n = int(args.traces or 500)
        if args.write_outputs:
            write_outputs(n, Path(args.write_outputs))
            return
        raise SystemExit(same_output_as(args.same_output_as, n))
    formats = (args.formats or (RENDERED if args.render else ",".join(FORMATS))).split(",")
    if "jsonl" not in formats:
        formats.insert(0, "jsonl")  # the reference every ratio is taken against
    if args.render:
        n, rounds = int(args.traces or 300), 30 if args.repeats is None else args.repeats
        if n < 1 or rounds < 1:  # a time a trace over no trace, or the least of no round, is no figure
            raise SystemExit(f"--render needs at least 1 trace and 1 round (got {n} and {rounds})")
        render_costs(formats, n, rounds)
        return
    args.traces = args.traces or "20000,100000"
    args.repeats = args.repeats or 3
    counts = [int(n) for n in args.traces.split(",")]
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        rules = tmp / "rules20.yaml"
        rules.write_text(yaml.safe_dump(workload.rules_20()))
        # Bytecode cached, as an installed seqjudge has it (benchmarks/startup.py does the same): with
        # PYTHONDONTWRITEBYTECODE set, every run would compile each module it imports again, a cost no user
        # pays twice and that grows with the modules a format imports. --as-is keeps the environment's way.
        env = None
        if not args.as_is:
            env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
            env["PYTHONPYCACHEPREFIX"] = str(tmp / "bytecode")
            warm = tmp / "warm.jsonl"
            write_traces(warm, 1100)  # past check's INLINE: the workers' path is imported too
            for fmt in formats:  # (fills the cache; untimed)
                run_once(rules, warm, fmt, tmp / "warm.out", args.workers, env)
        table: dict[int, dict[str, tuple[float, float, float, float, int, int]]] = {}
        for n in counts:
            traces = tmp / f"traces_{n}.jsonl"
            write_traces(traces, n)
            walls: dict[str, list[float]] = {f: [] for f in formats}
            cpus: dict[str, list[float]] = {f: [] for f in formats}
            rss: dict[str, list[int]] = {f: [] for f in formats}
            sizes: dict[str, int] = {}
            for r in range(args.repeats):
                # Alternate the order: a neighbour's load then lands on every format alike.
                for fmt in formats if r % 2 == 0 else list(reversed(formats)):
                    out = tmp / f"out.{fmt}"
                    wall, cpu, peak = run_once(rules, traces, fmt, out, args.workers, env)
                    walls[fmt].append(wall)
                    cpus[fmt].append(cpu)
                    rss[fmt].append(peak)
                    sizes[fmt] = out.stat().st_size
                    out.unlink()
            base = statistics.median(walls["jsonl"])
            cpu_base = statistics.median(cpus["jsonl"])
            table[n] = {
                f: (
                    statistics.median(walls[f]),
                    statistics.median(walls[f]) / base,
                    statistics.median(cpus[f]),
                    statistics.median(cpus[f]) / cpu_base,
                    int(statistics.median(rss[f])),
                    sizes[f],
                )
                for f in formats
            }
            traces.unlink()
            # Each count's figures as soon as they are measured (a long run on a busy machine).
            print(
                f"{n:,} traces: "
                + ", ".join(
                    f"{f} {table[n][f][0]:.2f} s ({table[n][f][1]:.2f}x; CPU {table[n][f][2]:.2f} s, "
                    f"{table[n][f][3]:.2f}x) {table[n][f][4] / 2**20:.0f} MB"
                    for f in formats
                ),
                flush=True,
            )
        print(
            f"`seqjudge check` over N traces x 20 calls, 20 rules; medians of {args.repeats} runs "
            f"(workers: {'its own' if args.workers is None else args.workers})"
        )
        head = f"{'format':10s}" + "".join(
            f" | {f'{n:,} traces: time, x jsonl, CPU, x jsonl, peak RSS, output':>66s}" for n in counts
        )
        print(head)
        for f in formats:
            cells = []
            for n in counts:
                wall, ratio, cpu, cpu_ratio, peak, size = table[n][f]
                cells.append(
                    f"{wall:7.2f} s {ratio:5.2f}x {cpu:7.2f} s {cpu_ratio:5.2f}x "
                    f"{peak / 2**20:7.0f} MB {size / 2**20:8.1f} MB out"
                )
            print(f"{f:10s}" + "".join(f" | {c:>66s}" for c in cells))
        if len(counts) > 1:
            lo, hi = counts[0], counts[-1]
            print(f"peak RSS at {hi:,} traces over peak RSS at {lo:,} (1.00 = independent of the count):")
            print("    " + ", ".join(f"{f} {table[hi][f][4] / table[lo][f][4]:.2f}" for f in formats))


if __name__ == "__main__":
    main()
