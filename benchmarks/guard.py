"""The guard's figures: a decision in process, and the Claude Code hook as a process (docs/guard.md).

    python benchmarks/guard.py [--decisions 5000] [--runs 15] [--top 12]

1. In process: 20 rules (every look-back type, `same:` rules, end-of-session rules) and a session of 200
   recorded calls, once with only the calls the guard allowed (no rule broken: the common path) and once
   with every random call (six rules broken, each decided without the calls that broke it); each decision
   is `Session.decide` on a random proposed call (the state does not advance), timed one by one, wall
   clock and the thread's CPU time (which the machine's other work does not move): p50 and p99 (target
   p99 <= 1 ms). For contrast, the same decisions by the engine on the
   prefix re-indexed per call (what the guard would cost without its growing index), and `record`.
2. The hook as a process, start-up included: `seqjudge guard RULES --hook claude-code` (as the console script
   runs it) on a 200-call Claude Code transcript, the hook's JSON on stdin: the median wall time of --runs
   fresh processes, bytecode cached as an installed seqjudge has it (`--as-is`: the environment's setting),
   (target <= 0.3 s) and their CPU time (user + system, which the machine's other work moves
   less), beside `python -c pass` and `seqjudge --help`; then one run under
   `python -X importtime`: the modules with the largest cumulative import time (what dominates start-up).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parents[1] / "src"
sys.path.insert(0, str(SRC))

from seqjudge.guard import Guard  # noqa: E402
from seqjudge.rules.engine import Engine  # noqa: E402
from seqjudge.rules.load import parse_rules  # noqa: E402
from seqjudge.trace import Call, Trace  # noqa: E402

TOOLS = ["Read", "Edit", "Write", "Bash", "Grep", "Glob", "WebFetch", "Task", "TodoWrite", "NotebookEdit"]
FILES = [f"/repo/src/m{k}.py" for k in range(12)]
RULES: list[dict[str, Any]] = [
    {"type": "before", "first": "Read", "then": "Edit", "same": ["file_path"]},
    {"type": "before", "first": "Read", "then": "Write", "same": ["file_path"]},
    {"type": "before", "first": "Grep", "then": "NotebookEdit"},
    {"type": "before", "first": "Glob", "then": "Task"},
    {"type": "blocklist", "pattern": "Delete"},
    {"type": "blocklist", "pattern": "mcp__prod"},
    {"type": "max_calls", "tool": "WebFetch", "max": 150},
    {"type": "max_calls", "tool": "Edit", "max": 40, "same": ["file_path"]},
    {"type": "max_calls", "tool": {"tool": "Bash", "args_match": {"command": "git push"}}, "max": 1},
    {
        "type": "never_after",
        "trigger": {"tool": "Bash", "args_match": {"command": "git push"}},
        "forbidden": "Edit",
    },
    {"type": "never_after", "trigger": "TodoWrite", "forbidden": "NotebookEdit", "same": ["file_path"]},
    {"type": "sequence", "tools": ["Glob", "Grep", "Read"]},
    {"type": "sequence", "tools": ["Read", "Edit", "Bash"], "same": ["file_path"]},
    {"type": "require", "tool": "Bash"},
    {"type": "require", "tool": "Read"},
    {"type": "eventually", "tool": "Read", "within": 5},
    {"type": "after", "trigger": "Edit", "then": "Bash", "within": 20},
    {"type": "after", "trigger": "Write", "then": "Read", "within": 10},
    {"type": "trajectory", "expected": ["Glob", "Read", "Edit"], "mode": "precedence"},
    {"type": "judge", "description": "Shell commands must not touch production", "applies_to": "Bash"},
]


def random_call(rng: random.Random) -> tuple[str, dict[str, Any]]:
    tool = rng.choice(TOOLS)
    args: dict[str, Any] = {"file_path": rng.choice(FILES)}
    if tool == "Bash":
        args = {"command": rng.choice(["pytest -q", "ls", "git status", "git diff"])}
    return tool, args


def in_process(n_decisions: int, history: int = 200, enforced: bool = False) -> dict[str, float]:
    """``enforced``: the history holds only calls the guard allowed (a denied call did not run), so that no
    look-back rule is broken (the common path); else every random call ran, breaking several rules, each
    then decided without the calls that broke it (docs/guard.md)."""
    assert len(RULES) == 20
    ruleset = parse_rules({"rules": [{"id": f"r{k}", **r} for k, r in enumerate(RULES)]})
    guard = Guard(ruleset)
    rng = random.Random(34)
    session = guard.session("bench")
    calls = []
    recording = 0.0
    while len(calls) < history:
        tool, args = random_call(rng)
        if enforced and session.decide(tool, args).action == "deny":
            continue
        t0 = time.perf_counter()
        session.record(tool, args, output="ok", status="ok" if rng.random() > 0.05 else "error")
        recording += time.perf_counter() - t0
        calls.append({"tool_name": tool, "arguments": args})
    per_record = recording / history
    proposed = [random_call(rng) for _ in range(n_decisions)]
    for tool, args in proposed[:200]:  # warm-up
        session.decide(tool, args)
    times = []
    cpu = []  # the thread's CPU time: what the decision costs, without the machine's other work
    denied = 0
    for tool, args in proposed:
        c = time.thread_time_ns()
        t = time.perf_counter()
        d = session.decide(tool, args)
        times.append(time.perf_counter() - t)
        cpu.append(time.thread_time_ns() - c)
        denied += d.action == "deny"
    times.sort()
    cpu.sort()
    # The same decisions by the engine on the prefix (plus the call) re-indexed per decision.
    engine = Engine(ruleset)
    prefix = Trace.model_validate({"calls": calls})
    re_times = []
    for tool, args in proposed[: max(200, n_decisions // 10)]:
        t = time.perf_counter()
        trace = Trace(calls=[*prefix.calls, Call(tool_name=tool, arguments=args)])
        engine.check_data(trace, explain="not-passed")
        re_times.append(time.perf_counter() - t)
    re_times.sort()
    return {
        "cpu_p50_ms": cpu[len(cpu) // 2] / 1e6,
        "cpu_p99_ms": cpu[int(len(cpu) * 0.99)] / 1e6,
        "p50_ms": 1000 * times[len(times) // 2],
        "p99_ms": 1000 * times[int(len(times) * 0.99)],
        "max_ms": 1000 * times[-1],
        "denied": denied / len(times),
        "record_ms": 1000 * per_record,
        "broken": len(session.asides),  # the rules the history broke, decided without what broke them
        "reindex_p50_ms": 1000 * re_times[len(re_times) // 2],
        "reindex_p99_ms": 1000 * re_times[int(len(re_times) * 0.99)],
    }


def transcript(folder: Path, n_calls: int = 200) -> tuple[Path, str]:
    """A Claude Code session log of ``n_calls`` completed calls and the proposed call's unanswered tool_use,
    and the hook's input for it."""
    rng = random.Random(7)
    session = "5b7c2d1e-0000-4000-8000-00000000beef"
    lines: list[dict[str, Any]] = []

    def line(kind: str, message: dict[str, Any]) -> None:
        n = len(lines)
        lines.append(
            {
                "parentUuid": f"u{n - 1}" if n else None,
                "isSidechain": False,
                "sessionId": session,
                "type": kind,
                "uuid": f"u{n}",
                "timestamp": "2025-08-01T10:00:00.000Z",
                "cwd": "/repo",
                "message": message,
            }
        )

    line("user", {"role": "user", "content": "Refactor the module."})
    for k in range(n_calls):
        tool, args = random_call(rng)
        use = {"type": "tool_use", "id": f"toolu_{k:04d}", "name": tool, "input": args}
        line("assistant", {"id": f"msg_{k:04d}", "role": "assistant", "content": [use]})
        result = {
            "type": "tool_result",
            "tool_use_id": f"toolu_{k:04d}",
            "content": "x" * 400,
            "is_error": False,
        }
        line("user", {"role": "user", "content": [result]})
    # An Edit of a file the session never read: denied, so the figure includes the reason's words.
    proposed = {"file_path": "/repo/src/never_read.py", "old_string": "a", "new_string": "b"}
    use = {"type": "tool_use", "id": "toolu_next", "name": "Edit", "input": proposed}
    line("assistant", {"id": "msg_next", "role": "assistant", "content": [use]})
    path = folder / f"{session}.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    event = {
        "session_id": session,
        "transcript_path": str(path),
        "cwd": "/repo",
        "hook_event_name": "PreToolUse",
        "tool_name": "Edit",
        "tool_input": proposed,
        "tool_use_id": "toolu_next",
    }
    return path, json.dumps(event)


ENTRY = "import sys; from seqjudge.cli import main; sys.argv[0] = 'seqjudge'; main()"


def as_process(runs: int, top: int, as_is: bool) -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if not as_is:
            # Bytecode cached, as an installed seqjudge has it (this machine sets PYTHONDONTWRITEBYTECODE,
            # so a checkout's modules would be compiled at every start); filled by the first round.
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = str(folder / "bytecode")
        rules = folder / "rules.yaml"
        rules.write_text(json.dumps({"rules": RULES}), encoding="utf-8")
        _, event = transcript(folder)
        commands = {
            "python -c pass": ([sys.executable, "-c", "pass"], ""),
            "seqjudge --help": ([sys.executable, "-c", ENTRY, "--help"], ""),
            "seqjudge guard --hook claude-code": (
                [sys.executable, "-c", ENTRY, "guard", str(rules), "--hook", "claude-code"],
                event,
            ),
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        cpu: dict[str, list[float]] = {name: [] for name in commands}
        out = ""
        for n in range(runs + 1):  # alternately, so that a noisy machine hits every command alike
            for name, (argv, stdin) in commands.items():
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                t = time.perf_counter()
                done = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env, check=False)
                wall = time.perf_counter() - t
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                if n:  # (the first round fills the bytecode cache)
                    times[name].append(wall)
                    cpu[name].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
                if name.startswith("seqjudge guard"):
                    out = done.stdout
                    assert done.returncode == 0, done.stderr
        for name, ts in times.items():
            print(
                f"{name:36s} median {statistics.median(ts):.3f} s (min {min(ts):.3f}, max {max(ts):.3f}); "
                f"CPU median {statistics.median(cpu[name]):.3f} s"
            )
        print(f"the hook answered: {out.strip()[:160]}")
        argv, stdin = commands["seqjudge guard --hook claude-code"]
        done = subprocess.run(
            [argv[0], "-X", "importtime", *argv[1:]], input=stdin, capture_output=True, text=True, env=env
        )
        rows = []
        for row in done.stderr.splitlines():
            m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)", row)
            if m:
                rows.append((int(m.group(2)), len(m.group(3)), m.group(4)))
        total = sum(c for c, depth, _ in rows if depth == 1)
        print(f"imports: {total / 1e6:.3f} s in all (top-level modules' cumulative time); the largest:")
        for cumulative, depth, name in sorted(rows, reverse=True)[:top]:
            print(f"  {cumulative / 1e3:7.1f} ms  {'  ' * (depth - 1)}{name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--skip-process", action="store_true")
    parser.add_argument("--as-is", action="store_true", help="no bytecode cache: the environment as is")
    args = parser.parse_args()
    for enforced in (True, False):
        figures = in_process(args.decisions, enforced=enforced)
        which = "only allowed calls ran" if enforced else "every call ran"
        print(
            f"in process, 20 rules, 200-call history ({which}; {figures['broken']:.0f} rules broken by it): "
            f"decide p50 {figures['p50_ms']:.3f} ms, p99 {figures['p99_ms']:.3f} ms (max "
            f"{figures['max_ms']:.2f} ms; {figures['denied']:.0%} denied); "
            f"record {figures['record_ms']:.3f} ms a call"
        )
        cpu = f"p50 {figures['cpu_p50_ms']:.3f} ms, p99 {figures['cpu_p99_ms']:.3f} ms"
        print(f"  CPU time of a decision: {cpu}")
    print(
        f"the engine re-indexing the prefix per decision instead: p50 {figures['reindex_p50_ms']:.3f} ms, "
        f"p99 {figures['reindex_p99_ms']:.3f} ms"
    )
    if not args.skip_process:
        as_process(args.runs, args.top, args.as_is)


if __name__ == "__main__":
    main()
