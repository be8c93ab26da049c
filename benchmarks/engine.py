"""Engine speed: end-to-end `check` against merely parsing the same file with json.loads.

    python benchmarks/engine.py [--repeats 3] [--calls 1000000] [--traces 100000] [--workers N] [--only-b]
    python benchmarks/engine.py --in-process [--repeats 3] [--calls 1000000] [--traces 100000]

(a) one trace of N calls (one JSON document) against 50 rules of every type, through `seqjudge check
    --format jsonl` (in-process CLI);
(b) many traces of 20 calls against 20 rules, as JSONL through `seqjudge check` (in-process CLI), writing
    the lean report (its default), and the full one (`--explain all`) beside it;
(c) linearity: the same as (a) at N/10 calls, and the time ratio.
Every call but the first carries an argument `key` with 1,000 values, and every fifth `before`, `max_calls`
or `never_after` rule holds per value (`same: [key]`). (a) and (b) time each rule set with its `same:` rules
and without them (the set minus every rule that has `same:`), side by side with the parse-only baseline;
(a) also without its `same: [key]` rules only (what those 4 rules add). Targets are printed beside the
ratios: (a) <= 3x, (b) <= 4.5x parse-only, the `same: [key]` rules of (a) add <= 1 s.
Medians of --repeats runs; the variants alternate within each run.

--in-process times the engine alone, in CPU seconds (no loading, no worker processes): `Engine.check_data` on
(a)'s trace, and `check_data` plus `report_line` a trace on (b)'s traces, each set also with its `same:`
rules stripped of `same:` (what `same:` itself costs). Only public names are used, so the same command run
against an older checkout (PYTHONPATH=old/src) measures the code before a change.

    python benchmarks/engine.py --same-reports-as OLD/src [--traces 20000]

checks that a change to the engine left every report byte for byte as it was: the lean and the full report
of (b)'s traces (20 and 50 rules), of longer traces against the 50 rules, and of the tau traces
(../shared/data/tau) and each golden suite's traces against every golden suite's rule set, as models and as
plain records, written by this checkout and by OLD/src (in a child process); the first difference of each
corpus is printed, and the exit code is 1 if there is any.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import yaml

TOOLS = [f"tool_{i:02d}" for i in range(16)] + ["auth", "get_order", "cancel_order", "admin_reset"]


SAME_KEY = "key"
KEY_VALUES = 1000
# The rule types whose every fifth rule (that has no `same:` yet) holds per value of `key`.
_PER_KEY_TYPES = ("before", "max_calls", "never_after")


def _per_key(rules: list[dict]) -> list[dict]:
    k = 0
    for rule in rules:
        if rule["type"] in _PER_KEY_TYPES and "same" not in rule:
            k += 1
            if k % 5 == 0:
                rule["same"] = [SAME_KEY]
    return rules


def without_same(ruleset: dict) -> dict:
    """The rule set minus every rule that holds per value: what its `same:` rules are measured against."""
    return {"rules": [r for r in ruleset["rules"] if "same" not in r]}


def rules_50() -> dict:
    rules: list[dict] = []
    t = TOOLS
    for i in range(6):
        rules.append({"type": "require", "tool": t[i]})
        rules.append({"type": "before", "first": t[i], "then": t[i + 6]})
        rules.append({"type": "max_calls", "tool": t[i], "max": 10_000_000})
        rules.append({"type": "eventually", "tool": t[i], "within": 50})
        rules.append({"type": "never_after", "trigger": "cancel_order", "forbidden": t[i + 8]})
        rules.append(
            {"type": "after", "trigger": t[i + 2], "then": [t[i + 3], t[i + 4], "auth"], "within": 40}
        )
    rules += [
        {"type": "blocklist", "pattern": "admin_"},
        {"type": "blocklist", "pattern": "drop_"},
        {"type": "sequence", "tools": ["auth", "get_order", "cancel_order"]},
        {"type": "sequence", "tools": ["auth", "tool_00"], "strict": True},
        {"type": "before", "first": "get_order", "then": "cancel_order", "same": ["order_id"]},
        {"type": "max_calls", "tool": "cancel_order", "max": 1, "same": ["order_id"]},
        {
            "type": "before",
            "first": {"tool": "get_order", "args_match": {"order_id": "^#1"}},
            "then": "cancel_order",
        },
        {"type": "trajectory", "expected": ["auth", "get_order", "cancel_order"]},
        {"type": "trajectory", "expected": ["auth", "tool_01", "tool_02"], "mode": "in_order"},
        {"type": "trajectory", "expected": ["auth", "tool_03"], "mode": "any_order"},
        {"type": "judge", "description": "confirm with the user before cancelling"},
        {"type": "require", "tool": "auth", "when": {"env": "prod"}},
        {"type": "before", "first": "auth", "then": "tool_15", "severity": "warning"},
        {"type": "max_calls", "tool": "admin_reset", "max": 0},
    ]
    assert len(rules) == 50, len(rules)
    return {"rules": _per_key(rules)}


def rules_20() -> dict:
    return {"rules": rules_50()["rules"][:12] + rules_50()["rules"][36:44]}


def make_calls(n: int, rng: random.Random) -> list[dict]:
    calls = [{"tool_name": "auth", "arguments": {"email": "a@example.com"}, "status": "ok"}]
    common = TOOLS[:16]
    for i in range(1, n):
        r = rng.random()
        args: dict
        if r < 0.04:
            name, args = "get_order", {"order_id": f"#{rng.randrange(1000)}"}
        elif r < 0.05:
            name, args = "cancel_order", {"order_id": f"#{rng.randrange(1000)}"}
        else:
            name, args = common[rng.randrange(16)], {"q": i % 97}
        args[SAME_KEY] = f"k{rng.randrange(KEY_VALUES)}"
        calls.append(
            {"tool_name": name, "arguments": args, "status": "ok" if rng.random() > 0.02 else "error"}
        )
    return calls


def _cpu() -> float:
    t = os.times()  # children: worker processes, counted once they have been waited for
    return t.user + t.system + t.children_user + t.children_system


def timed(fn) -> float:
    return timed_both(fn)[0]


def timed_both(fn) -> tuple[float, float]:
    """Wall-clock and CPU seconds (this process and its finished children): on a shared machine the CPU
    time moves far less with the neighbours' load than the wall clock does."""
    gc.collect()
    cpu, start = _cpu(), time.perf_counter()
    fn()
    return time.perf_counter() - start, _cpu() - cpu


def _side_by_side(
    parse_only: Callable[[], None], variants: dict[str, Callable[[], None]], repeats: int
) -> dict[str, float]:
    """Medians of parse-only and of every variant, all timed in every run."""
    runs: dict[str, list[tuple[float, float]]] = {"parse": [], **{name: [] for name in variants}}
    names = list(variants)
    for r in range(repeats):
        runs["parse"].append(timed_both(parse_only))
        # Rotate which variant goes first: a neighbour's load then lands on all alike.
        for name in names[r % len(names) :] + names[: r % len(names)]:
            runs[name].append(timed_both(variants[name]))
    medians: dict[str, float] = {}
    for name, times in runs.items():
        medians[name] = statistics.median(wall for wall, _ in times)
        medians[f"{name} cpu"] = statistics.median(cpu for _, cpu in times)
    return medians


def without_key(ruleset: dict) -> dict:
    """The rule set minus its `same: [key]` rules: what issue 20's "4 `same:` rules add" is measured by."""
    return {"rules": [r for r in ruleset["rules"] if r.get("same") != [SAME_KEY]]}


def _rule_files(tmp: Path, name: str, ruleset: dict) -> dict[str, Path]:
    """The rule set with its `same:` rules, without them, and without its `same: [key]` ones, as files."""
    paths = {}
    for variant, rules in (
        ("with", ruleset),
        ("without", without_same(ruleset)),
        ("without key", without_key(ruleset)),
    ):
        paths[variant] = tmp / f"{name}_{variant.replace(' ', '_')}.yaml"
        paths[variant].write_text(yaml.safe_dump(rules))
    return paths


def bench_one_trace(tmp: Path, n: int, repeats: int) -> dict[str, float]:
    """Medians of parse-only, and of `check --format jsonl` on the trace with the whole set, without its
    `same:` rules and without its `same: [key]` rules."""
    from seqjudge.cli import run

    rng = random.Random(7)
    path = tmp / f"one_{n}.json"
    path.write_text(json.dumps({"trace_id": "big", "calls": make_calls(n, rng), "context": {"env": "prod"}}))
    rule_paths = _rule_files(tmp, "rules50", rules_50())

    def parse_only() -> None:
        json.loads(path.read_bytes())

    def end_to_end(rules_path: Path) -> None:
        out = str(tmp / "a.jsonl")
        code = run(["check", str(rules_path), str(path), "--format", "jsonl", "--output", out])
        assert code in (0, 1), code

    variants = {name: partial(end_to_end, p) for name, p in rule_paths.items()}
    return _side_by_side(parse_only, variants, repeats)


def bench_many(tmp: Path, n_traces: int, repeats: int, workers: int | None = None) -> dict[str, float]:
    """Medians of parse-only, and of `check --format jsonl` (the lean report) with and without the `same:`
    rules, and with them and `--explain all` (the full report)."""
    from seqjudge.cli import run

    rng = random.Random(11)
    path = tmp / f"many_{n_traces}.jsonl"
    with path.open("w") as out:
        for k in range(n_traces):
            out.write(json.dumps({"trace_id": f"t{k}", "calls": make_calls(20, rng)}) + "\n")
    rule_paths = _rule_files(tmp, "rules20", rules_20())

    def parse_only() -> None:
        with path.open("rb") as f:
            for line in f:
                json.loads(line)

    def through_cli(rules_path: Path, *options: str) -> None:
        extra = [] if workers is None else ["--workers", str(workers)]
        code = run(
            ["check", str(rules_path), str(path), "--format", "jsonl", "--output", str(tmp / "out.jsonl")]
            + extra
            + list(options)
        )
        assert code in (0, 1), code

    variants = {
        "with": partial(through_cli, rule_paths["with"]),
        "without": partial(through_cli, rule_paths["without"]),
        "with, --explain all": partial(through_cli, rule_paths["with"], "--explain", "all"),
    }
    return _side_by_side(parse_only, variants, repeats)


def bench_floor(tmp: Path, n_traces: int, repeats: int, workers: int) -> tuple[float, float, int]:
    """What (b) costs without the rules: the same processes parse every line of the same file and write,
    for each, a report of the size `check` writes (the first trace's real one); no rule is evaluated.

    The lower bound of (b) on this machine: reading the input and writing the output the report format
    asks for. Returns the parse-only and floor medians and the report's size in bytes.
    """
    from pydantic_core import to_json

    from seqjudge import load_rules
    from seqjudge.ingest.plain import plain_trace
    from seqjudge.rules.engine import Engine

    path = tmp / f"many_{n_traces}.jsonl"
    engine = Engine(load_rules(tmp / "rules20_with.yaml"))
    with path.open("rb") as f:
        first = plain_trace(json.loads(f.readline()), None)
    assert first is not None
    report = engine.check_data(first, explain="not-passed")  # the lean report, as `check` writes it
    size = len(to_json(report))

    def part(lo: int, hi: int, out: Path) -> None:
        with path.open("rb") as f, out.open("wb", buffering=1 << 20) as o:
            f.seek(lo)
            if lo:
                f.readline()  # the line that straddles lo belongs to the part before
            while f.tell() <= hi:
                line = f.readline()
                if not line:
                    break
                assert plain_trace(json.loads(line), None) is not None
                o.write(to_json(report) + b"\n")

    def floor() -> None:
        size_in = path.stat().st_size
        if workers < 1:
            part(0, size_in, tmp / "floor0.jsonl")
            return
        bounds = [size_in * k // workers for k in range(workers + 1)]
        pids = []
        for k in range(workers):
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child
                code = 0
                try:
                    part(bounds[k], bounds[k + 1] - 1, tmp / f"floor{k}.jsonl")
                except BaseException:
                    code = 1
                os._exit(code)
            pids.append(pid)
        for pid in pids:
            _, status = os.waitpid(pid, 0)
            assert status == 0, status

    def parse_only() -> None:
        with path.open("rb") as f:
            for line in f:
                json.loads(line)

    parse, full = [], []
    for _ in range(repeats):
        parse.append(timed(parse_only))
        full.append(timed(floor))
    return statistics.median(parse), statistics.median(full), size


def _mark(ok: bool) -> str:
    return "✔" if ok else "✘"


def _print_set(title: str, m: dict[str, float], rate, target: float, rows: list[str]) -> None:
    """Each variant's wall and CPU seconds and its ratio to parse-only, beside the target."""
    p, pc = m["parse"], m["parse cpu"]
    print(f"{title}: json.loads {p:.2f} s (CPU {pc:.2f} s)")
    for name in rows:
        wall, cpu = m[name], m[f"{name} cpu"]
        goal = f"  target <= {target}x {_mark(wall / p <= target)}" if name == "with" else ""
        print(
            f"    {name:24s}{wall:6.2f} s ({rate(wall)}); ratio {wall / p:.2f}x; "
            f"CPU {cpu:.2f} s, ratio {cpu / pc:.2f}x{goal}"
        )
    w, wo, wc, woc = m["with"], m["without"], m["with cpu"], m["without cpu"]
    added = f"{w - wo:+.2f} s ({w / wo:.2f}x the set without them); CPU {wc - woc:+.2f} s"
    print(f"    the `same:` rules add {added}")


def bench_in_process(n_calls: int, n_traces: int, repeats: int) -> None:
    from seqjudge.ingest.plain import plain_trace
    from seqjudge.report import report_line
    from seqjudge.rules.engine import Engine
    from seqjudge.rules.model import RuleSet
    from seqjudge.trace import Trace

    def variants(ruleset: dict) -> dict[str, Engine]:
        stripped = [{k: v for k, v in r.items() if k != "same"} for r in ruleset["rules"]]
        sets = {"with": ruleset, "same: stripped": {"rules": stripped}, "without": without_same(ruleset)}
        return {name: Engine(RuleSet.model_validate(rules)) for name, rules in sets.items()}

    def cpu_medians(work: dict[str, Callable[[], None]]) -> dict[str, float]:
        runs: dict[str, list[float]] = {name: [] for name in work}
        for _ in range(repeats):
            for name, fn in work.items():
                gc.collect()
                start = time.process_time()
                fn()
                runs[name].append(time.process_time() - start)
        return {name: statistics.median(times) for name, times in runs.items()}

    big = Trace.model_validate({"calls": make_calls(n_calls, random.Random(7)), "context": {"env": "prod"}})
    engines = variants(rules_50())
    a = cpu_medians({name: partial(e.check_data, big) for name, e in engines.items()})
    print(f"(a) engine alone, 1 trace x {n_calls:,} calls, 50 rules, CPU seconds:")
    for name, t in a.items():
        print(f"    {name:16s} {t:6.2f} s ({t - a['without']:+.2f} s against without)")
    rng = random.Random(11)
    records = [
        json.loads(json.dumps({"trace_id": f"t{k}", "calls": make_calls(20, rng)})) for k in range(n_traces)
    ]
    traces = [plain_trace(r, None) for r in records]

    def many(engine: Engine) -> None:
        for trace in traces:
            report_line(engine.check_data(trace, explain="not-passed"))  # the lean report `check` writes

    b = cpu_medians({name: partial(many, e) for name, e in variants(rules_20()).items()})
    print(f"(b) engine and lean report alone, {n_traces:,} traces x 20 calls, 20 rules, CPU a trace:")
    for name, t in b.items():
        us, base = t / n_traces * 1e6, b["without"] / n_traces * 1e6
        print(f"    {name:16s} {us:6.1f} us ({us - base:+.1f} us against without)")
    print(f"medians of {repeats} runs; the variants alternate within each run")


ROOT = Path(__file__).resolve().parents[1]
TAU = ROOT.parent / "shared" / "data" / "tau" / "traces.jsonl"


def _as_plain(trace):
    """The trace's calls as a plain JSONL record reads (``PlainTrace``): the engine's other input path."""
    from seqjudge.ingest.plain import plain_trace

    record = {
        "trace_id": trace.trace_id or "<unnamed>",
        "calls": [
            {"tool_name": c.tool_name, "arguments": c.arguments, "status": c.status} for c in trace.calls
        ],
        "context": trace.context,
        "metadata": trace.metadata,
    }
    plain = plain_trace(json.loads(json.dumps(record)), None)
    assert plain is not None, trace.trace_id
    return plain


def _same_rules() -> dict:
    t, key, order, both = TOOLS, [SAME_KEY], ["order_id"], [SAME_KEY, "order_id"]
    return {
        "rules": [
            {"type": "before", "first": t[0], "then": t[1], "same": key},
            {"type": "before", "first": "get_order", "then": "cancel_order", "same": order},
            {"type": "max_calls", "tool": t[2], "max": 0, "same": key},
            {"type": "max_calls", "tool": [t[2], t[3]], "max": 1, "same": key},
            {"type": "max_calls", "tool": "cancel_order", "max": 1, "same": both},
            {"type": "never_after", "trigger": t[3], "forbidden": t[4], "same": key},
            {"type": "after", "trigger": t[5], "then": t[6], "within": 3, "same": key},
            {"type": "after", "trigger": "get_order", "then": "cancel_order", "within": 5, "same": order},
            {"type": "sequence", "tools": ["get_order", "cancel_order"], "same": order},
            {"type": "sequence", "tools": [t[7], t[8]], "strict": True, "same": key},
            {"type": "sequence", "tools": [t[0], t[1], t[2]], "same": key},
            {
                "type": "before",
                "first": {"tool": t[9], "args_match": {"q": "^[0-4]"}},
                "then": {"tool": t[10], "status": "ok"},
                "same": key,
            },
        ]
    }


def report_corpora(n_traces: int):
    """(name, rule set, traces): every pair `--same-reports-as` compares the reports of."""
    from seqjudge import load_rules, load_traces
    from seqjudge.ingest.plain import plain_trace
    from seqjudge.rules.model import RuleSet
    from seqjudge.trace import Trace

    rng = random.Random(11)
    many = [{"trace_id": f"t{k}", "calls": make_calls(20, rng)} for k in range(n_traces)]
    plain = [plain_trace(json.loads(json.dumps(r)), None) for r in many]
    r20, r50 = RuleSet.model_validate(rules_20()), RuleSet.model_validate(rules_50())
    yield "(b) traces, 20 rules", r20, plain
    yield "(b) traces, 50 rules", r50, plain
    rng = random.Random(7)
    prod = {"env": "prod"}
    long = [
        Trace.model_validate({"trace_id": f"l{k}", "calls": make_calls(2000, rng), "context": prod})
        for k in range(10)
    ]
    yield "10 traces x 2,000 calls, 50 rules", r50, long
    # Per-value rules of every type on traces whose groups hold several calls (3 values of `key`, and calls
    # that lack it): (b)'s 1,000 values make groups of one call.
    for record in many:
        for n, call in enumerate(record["calls"]):
            value = call["arguments"].pop(SAME_KEY, None)
            if value is not None and n % 7:
                call["arguments"][SAME_KEY] = int(value[1:]) % 3
    few = [plain_trace(json.loads(json.dumps(r)), None) for r in many]
    yield "(b) traces, 3 values of key, same: rules", RuleSet.model_validate(_same_rules()), few
    suites = sorted(p.parent for p in (ROOT / "golden_traces").glob("*/rules.yaml"))
    sources = [(s.name, list(load_traces(s / "traces.jsonl"))) for s in suites]
    if TAU.is_file():
        sources.append(("tau", list(load_traces(TAU))))
    for suite in suites:
        rules = load_rules(suite / "rules.yaml")
        for name, traces in sources:
            yield f"{name} traces, {suite.name} rules", rules, traces
            yield f"{name} traces as plain records, {suite.name} rules", rules, [_as_plain(t) for t in traces]


def write_reports(n_traces: int, out: Path) -> None:
    """Every corpus's lean and full reports, one JSON line each, under a header line per corpus."""
    from seqjudge.report import report_line
    from seqjudge.rules.engine import Engine

    with out.open("wb") as f:
        for name, rules, traces in report_corpora(n_traces):
            engine = Engine(rules)
            for explain in ("not-passed", "all"):
                f.write(json.dumps({"corpus": name, "explain": explain}).encode() + b"\n")
                for trace in traces:
                    f.write(report_line(engine.check_data(trace, explain=explain)))


def same_reports_as(old_src: str, n_traces: int) -> int:
    """Write the reports with this checkout and with ``old_src``; print each corpus's first difference."""
    import subprocess
    import sys

    with tempfile.TemporaryDirectory() as d:
        new, old = Path(d) / "new.jsonl", Path(d) / "old.jsonl"
        env = {**os.environ, "PYTHONPATH": old_src}
        command = [sys.executable, __file__, "--write-reports", str(old), "--traces", str(n_traces)]
        child = subprocess.Popen(command, env=env)
        write_reports(n_traces, new)
        assert child.wait() == 0, "the old checkout failed to write its reports"
        corpus, seen, differing = "", 0, 0
        counts: dict[str, int] = {}
        with new.open("rb") as a, old.open("rb") as b:
            for line_new, line_old in zip(a, b, strict=True):
                if line_new.startswith(b'{"corpus"'):
                    assert line_new == line_old, (line_new, line_old)
                    head = json.loads(line_new)
                    corpus, seen = f"{head['corpus']} ({head['explain']})", 0
                    counts[corpus] = 0
                    continue
                seen += 1
                counts[corpus] += 1
                if line_new != line_old:
                    differing += 1
                    if differing == 1 or seen == 1:
                        print(f"DIFFERENT: {corpus}, report {seen}:")
                        print(f"  new {line_new[:600]!r}\n  old {line_old[:600]!r}")
    for name, count in counts.items():
        print(f"  {count:7,} reports  {name}")
    total = sum(counts.values())
    print(f"{total:,} reports in {len(counts)} corpora; {differing:,} differ from {old_src}'s")
    return 1 if differing else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--calls", type=int, default=1_000_000)
    ap.add_argument("--traces", type=int, default=100_000)
    ap.add_argument("--workers", type=int, default=None, help="(b): check --workers N (default: its own)")
    ap.add_argument("--only-b", action="store_true", help="skip (a) and (c)")
    ap.add_argument("--in-process", action="store_true", help="the engine alone, in CPU seconds")
    ap.add_argument("--same-reports-as", metavar="OLD_SRC", help="compare every report with OLD_SRC's")
    ap.add_argument("--write-reports", metavar="FILE", help=argparse.SUPPRESS)  # --same-reports-as's child
    args = ap.parse_args()
    if args.write_reports:
        write_reports(args.traces, Path(args.write_reports))
        return
    if args.same_reports_as:
        raise SystemExit(same_reports_as(args.same_reports_as, args.traces))
    if args.in_process:
        bench_in_process(args.calls, args.traces, args.repeats)
        return
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        n_same_50 = len(rules_50()["rules"]) - len(without_same(rules_50())["rules"])
        n_same_20 = len(rules_20()["rules"]) - len(without_same(rules_20())["rules"])
        if not args.only_b:
            small = bench_one_trace(tmp, args.calls // 10, args.repeats)
            big = bench_one_trace(tmp, args.calls, args.repeats)
            _print_set(
                f"(a) 1 trace x {args.calls:,} calls, 50 rules ({n_same_50} with `same:`)",
                big,
                lambda f: f"{args.calls / f:,.0f} calls/s",
                3.0,
                ["with", "without", "without key"],
            )
            n_key = len(rules_50()["rules"]) - len(without_key(rules_50())["rules"])
            added, added_cpu = big["with"] - big["without key"], big["with cpu"] - big["without key cpu"]
            print(
                f"    the {n_key} `same: [key]` rules add {added:+.2f} s (CPU {added_cpu:+.2f} s)  "
                f"target <= 1 s {_mark(added <= 1.0)}"
            )
            f_small, f = small["with"], big["with"]
            print(
                f"(c) linearity, 50 rules: {args.calls // 10:,} calls {f_small:.2f} s -> "
                f"{args.calls:,} calls "
                f"{f:.2f} s: {f / f_small:.1f}x time for 10x calls"
            )
        many = bench_many(tmp, args.traces, args.repeats, args.workers)
        _print_set(
            f"(b) {args.traces:,} traces x 20 calls, 20 rules ({n_same_20} with `same:`), "
            "`seqjudge check` JSONL (lean report unless --explain all)",
            many,
            lambda f: f"{args.traces / f:,.0f} traces/s",
            4.5,
            ["with", "without", "with, --explain all"],
        )
        from seqjudge.checkpool import worker_count

        workers = worker_count() if args.workers is None else args.workers
        print(
            f"(b) used {workers} worker process(es) after the first lines"
            if workers
            else "(b) ran in one process (--workers 0, one core, or no fork)"
        )
        if hasattr(os, "fork"):
            p, f, size = bench_floor(tmp, args.traces, args.repeats, workers)
            print(
                f"(b) floor, no rules: the same {max(workers, 1)} process(es) parse each line and write a "
                f"{size:,}-byte report for it: {f:.2f} s; json.loads {p:.2f} s; ratio {f / p:.2f}x"
            )
        print(
            f"medians of {args.repeats} runs; in each run the variants and their parse-only baseline "
            "ran side by side"
        )


if __name__ == "__main__":
    main()
