"""Start-up time: `seqjudge --help` and `seqjudge check` of one small trace, wall clock, in fresh processes.

    python benchmarks/startup.py [--runs 15]
    python benchmarks/startup.py --src /work/main/src --src src     # two checkouts side by side
    python benchmarks/startup.py --importtime [--top 15]            # the slowest imports of each command
    python benchmarks/startup.py --as-is                            # the environment's bytecode setting
    python benchmarks/startup.py --instructions --src A --src B     # valgrind's instruction counts
    python benchmarks/startup.py --formats jsonl,junit               # also `check` in those formats

Each run is a new interpreter (`python -c "from seqjudge.cli import main; main()" ...`), so it pays what a
user pays: the interpreter, the imports, the command. With --src the checkouts are put first on PYTHONPATH
and run alternately, so that a noisy machine hits them alike; the ratio is of their medians. Wall time is
what a user waits; CPU time (user + system of the process) moves less when the machine is shared.
--importtime runs each command once under `python -X importtime` and prints the modules with the largest
cumulative import time (a package's figure includes what it imports). --instructions runs each command once
under valgrind (cachegrind, no cache simulation) and prints the instructions it executed: a count that does
not move with the machine's load, for comparing two checkouts when timings are too noisy to.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENTRY = "import sys; from seqjudge.cli import main; sys.argv[0] = 'seqjudge'; main()"
RULES = """\
rules:
  - id: auth-first
    type: before
    first: authenticate
    then: refund
  - id: one-refund
    type: max_calls
    tool: refund
    max: 1
"""
TRACE = {
    "trace_id": "small",
    "calls": [
        {"tool_name": "authenticate", "arguments": {"user": "u1"}},
        {"tool_name": "get_order", "arguments": {"order": "o1"}},
        {"tool_name": "refund", "arguments": {"order": "o1"}},
    ],
}


def commands(folder: Path, formats: list[str]) -> dict[str, list[str]]:
    """The commands timed: help, `check` of one trace, and the same `check` in each of ``formats`` (written to
    a file, as CI writes them: a format's start-up is the imports of its writer)."""
    rules = folder / "rules.yaml"
    trace = folder / "trace.json"
    rules.write_text(RULES, encoding="utf-8")
    trace.write_text(json.dumps(TRACE), encoding="utf-8")
    found = {"--help": ["--help"], "check (1 trace)": ["check", str(rules), str(trace)]}
    for fmt in formats:
        out = str(folder / f"out.{fmt}")
        found[f"check --format {fmt}"] = ["check", str(rules), str(trace), "--format", fmt, "-o", out]
    return found


def environment(src: str | None, bytecode: str | None) -> dict[str, str]:
    """The environment of a run: ``src`` first on the path; ``bytecode``, a folder to cache bytecode in."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join(x for x in (src, env.get("PYTHONPATH")) if x)
    if bytecode is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = bytecode  # it mirrors each source path, so variants never collide
    return env


def once(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", ENTRY, *args], env=env, capture_output=True, text=True)
    took = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):  # check exits 1 when a trace fails; anything else is a broken command
        raise SystemExit(f"`seqjudge {' '.join(args)}` exited {done.returncode}:\n{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return took, cpu


def timings(cmds: dict[str, list[str]], sources: list[str | None], runs: int, bytecode: str | None) -> None:
    Key = tuple[str, str | None]
    times: dict[Key, list[tuple[float, float]]] = {(c, s): [] for c in cmds for s in sources}
    if bytecode is not None:  # fill each variant's bytecode cache
        for args in cmds.values():
            for src in sources:
                once(args, environment(src, bytecode))
    for _ in range(runs):
        for name, args in cmds.items():
            for src in sources:  # alternate, so that load spikes hit every variant alike
                times[(name, src)].append(once(args, environment(src, bytecode)))
    load = os.getloadavg()[0]
    cache = "bytecode cached" if bytecode is not None else "the environment as is (--as-is)"
    print(
        f"medians of {runs} fresh processes ({sys.executable}; {cache}; load average {load:.1f} at the end)"
    )
    print(f"  {'command':<25} {'wall':>8} {'cpu':>8}")
    for name in cmds:
        medians = {
            src: tuple(statistics.median(t[k] for t in times[(name, src)]) for k in (0, 1)) for src in sources
        }
        for src, (wall, cpu) in medians.items():
            label = "installed" if src is None else src
            print(f"  seqjudge {name:<16} {wall:6.3f} s {cpu:6.3f} s   [{label}]")
        if len(sources) == 2:
            (w1, c1), (w2, c2) = (medians[s] for s in sources)
            print(f"  seqjudge {name:<16} {w1 / w2:6.2f} x {c1 / c2:6.2f} x   first/second")


def importtime(cmds: dict[str, list[str]], top: int, src: str | None, bytecode: str | None) -> None:
    env = environment(src, bytecode)
    for name, args in cmds.items():
        if bytecode is not None:
            once(args, env)
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", ENTRY, *args], env=env, capture_output=True, text=True
        )
        rows = []
        for line in done.stderr.splitlines():
            if not line.startswith("import time:") or "cumulative" in line:
                continue
            _, cumulative, module = line.split("|")
            rows.append((int(cumulative), module.removeprefix(" ")))
        total = sum(c for c, m in rows if not m.startswith(" "))  # nested imports are indented
        print(f"seqjudge {name}: {total / 1e6:.3f} s of imports; largest cumulative:")
        for cumulative, module in sorted(rows, reverse=True)[:top]:
            print(f"  {cumulative / 1e6:6.3f} s  {module.strip()}")


def instructions(cmds: dict[str, list[str]], sources: list[str | None], bytecode: str | None) -> None:
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise SystemExit("--instructions needs valgrind on the PATH (apt-get install valgrind)")
    tool = [valgrind, "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
    print(f"instructions executed, millions (valgrind cachegrind; {sys.executable})")
    for name, args in cmds.items():
        counts = []
        for src in sources:
            env = environment(src, bytecode)
            if bytecode is not None:
                once(args, env)
            done = subprocess.run(
                [*tool, sys.executable, "-c", ENTRY, *args], env=env, capture_output=True, text=True
            )
            found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
            if found is None:
                raise SystemExit(f"valgrind gave no count for `seqjudge {' '.join(args)}`:\n{done.stderr}")
            counts.append(int(found.group(1).replace(",", "")) / 1e6)
            label = "installed" if src is None else src
            print(f"  seqjudge {name:<16} {counts[-1]:8.1f} M   [{label}]")
        if len(counts) == 2:
            print(f"  seqjudge {name:<16} {counts[0] / counts[1]:8.2f} x   first/second")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="fresh processes per command (default 15)")
    parser.add_argument(
        "--src", action="append", help="a checkout's src/ to put first on PYTHONPATH (repeat to compare)"
    )
    parser.add_argument("--importtime", action="store_true", help="print the slowest imports instead")
    parser.add_argument(
        "--as-is", action="store_true", help="no bytecode cache of its own: the environment's setting"
    )
    parser.add_argument("--top", type=int, default=15, help="how many imports --importtime prints")
    parser.add_argument(
        "--instructions", action="store_true", help="count instructions under valgrind instead of timing"
    )
    parser.add_argument(
        "--formats",
        default="",
        help="also `check` of the trace in these formats (comma-separated, e.g. jsonl,junit)",
    )
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cmds = commands(Path(tmp), [f for f in options.formats.split(",") if f])
        bytecode = None if options.as_is else os.path.join(tmp, "bytecode")
        sources: list[str | None] = list(options.src) if options.src else [None]
        if options.importtime:
            importtime(cmds, options.top, sources[0], bytecode)
        elif options.instructions:
            instructions(cmds, sources, bytecode)
        else:
            timings(cmds, sources, options.runs, bytecode)


if __name__ == "__main__":
    main()
