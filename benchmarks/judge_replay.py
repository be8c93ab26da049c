"""Measure the judge's quality on labelled traces by replaying recorded answers through the real pipeline.

Two steps, with a person or a stand-in model in between:

    python benchmarks/judge_replay.py render --suite golden_traces/tau-retail --trace-ids IDS --out DIR \
        [--judge-mode full|contextual] [--risk-level high]
    # ... someone answers each DIR/prompts/<key>.txt as the judge would, into DIR/answers/<key>.json ...
    python benchmarks/judge_replay.py score --answers DIR [--judge-mode ...] [--risk-level high] \
        [--rev REV] [--json]

`render` writes DIR/prompts/<key>.txt (exactly what `seqjudge prompt` prints for the trace) and appends
`key<TAB>suite_dir<TAB>trace_id` to DIR/index.tsv; several suites can be rendered into one DIR. IDS holds one
trace id a line (blank lines and `#` comments skipped).

`score` starts the loopback fake OpenAI-compatible server of the tests (tests/fakes/server.py, the one fake
server of the project, as benchmarks/judge_throughput.py uses it), which answers each
request with the recorded answer of the trace the request is about, runs `seqjudge run` per suite in a child
process (the OpenAI adapter with `--base-url`, a dummy key in the child's environment only, a temporary
store, no response cache, one attempt: a recorded answer cannot improve on a re-ask), then reads the stored
results and compares the judge's outcome of each `judge` rule with the suite's labels.jsonl: n, agreement,
Cohen's kappa (crosscheck.cohen_kappa), misses (label fail, judge pass), false flags (label pass, judge fail),
unscored, and the disagreeing trace ids, overall and per suite. A trace without an answer file is
unscored and named.

How a request is matched to its trace: the prompt does not carry the trace id, so the script renders each
trace's prompt the way the run will (same rules, catalog, examples, mode, risk level, redaction) and matches
the delimiter token derived from the trace's content; a request that holds a trace id verbatim matches too.
The answers may come from prompts of another revision (the "before" prompts of main): `score --rev main`
replays them through that revision's own pipeline, validator, rules and template (exported with `git
archive`, run in the child processes), so a before/after comparison changes the prompt and nothing else;
without `--rev` they go through this checkout's. The rules, catalog and traces come from the code being
replayed (its `golden_traces/...` when index.tsv names a suite by a relative path); the labels come from the
suite folder index.tsv names, looked up from the working folder first (then DIR, then this checkout), so
labels written in another checkout are used by running the script from there. The report names the labels
file of each suite.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from revision import ROOT, export_revision  # noqa: E402

# A child started for another revision (`score --rev`) imports that revision's seqjudge from PYTHONPATH;
# anything else runs on this checkout's, installed or not.
CHILD = "SEQJUDGE_REPLAY_CHILD"
if not os.environ.get(CHILD) and str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

# The loopback fake server the contract tests use (standard library only).
sys.path.insert(0, str(ROOT / "tests"))
if TYPE_CHECKING:
    from fakes.server import FakeReply, RecordedRequest

INDEX = "index.tsv"
MODEL = "openai:replay"
DUMMY_KEY = "sk-replay-not-a-key"
_KEY_RX = re.compile(r"^([a-z]+)(\d+)$")


# ------------------------------------------------------------------------------------------------ render


def read_ids(path: Path) -> list[str]:
    ids = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            ids.append(line)
    return ids


@dataclass(frozen=True)
class Entry:
    key: str
    suite: str  # as written in the index (a path, usually relative to the working folder)
    trace_id: str


def read_index(out: Path) -> list[Entry]:
    path = out / INDEX
    if not path.is_file():
        return []
    entries = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 3:
            sys.exit(f"error: {path}, line {n}: expected key<TAB>suite_dir<TAB>trace_id, got {line!r}")
        entries.append(Entry(*parts))
    return entries


def suite_prefix(suite: Path) -> str:
    """A key prefix: the first letter of the suite folder's last word (tau-retail: r, tau-airline: a)."""
    words = re.findall(r"[a-z]+", suite.name.lower())
    return words[-1][0] if words else "t"


def prompt_text(suite: Path, trace_id: str, judge_mode: str, risk_level: str) -> str:
    """What `seqjudge prompt` prints for the trace (run in-process, stdout captured)."""
    from seqjudge.cli import run as cli_run

    argv = ["prompt", str(suite / "rules.yaml"), str(suite / "traces.jsonl"), "--trace-id", trace_id]
    if (suite / "catalog.json").is_file():
        argv += ["--catalog", str(suite / "catalog.json")]
    argv += ["--risk-level", risk_level]
    if judge_mode != "full":  # older revisions' `seqjudge prompt` had no --judge-mode (full only)
        argv += ["--judge-mode", judge_mode]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli_run(argv)
    if code != 0:
        sys.exit(f"error: `seqjudge {' '.join(argv)}` exited {code}")
    return out.getvalue()


def render(args: argparse.Namespace) -> None:
    suite: Path = args.suite
    out: Path = args.out
    (out / "prompts").mkdir(parents=True, exist_ok=True)
    entries = read_index(out)
    known = {(e.suite, e.trace_id): e.key for e in entries}
    prefix = suite_prefix(suite)
    used = [int(m.group(2)) for e in entries if (m := _KEY_RX.match(e.key)) and m.group(1) == prefix]
    n = max(used, default=0)
    added = []
    for trace_id in read_ids(args.trace_ids):
        key = known.get((str(suite), trace_id))
        if key is None:
            n += 1
            key = f"{prefix}{n:02d}"
            known[(str(suite), trace_id)] = key
            added.append(Entry(key, str(suite), trace_id))
        text = prompt_text(suite, trace_id, args.judge_mode, args.risk_level)
        (out / "prompts" / f"{key}.txt").write_text(text, encoding="utf-8")
    with (out / INDEX).open("a", encoding="utf-8") as f:
        for e in added:
            f.write(f"{e.key}\t{e.suite}\t{e.trace_id}\n")
    print(
        f"{suite}: {len(read_ids(args.trace_ids))} prompt(s) in {out / 'prompts'} ({len(added)} new key(s))"
    )


# ------------------------------------------------------------------------------------------------- score


@dataclass
class Tally:
    """Judge against labels for one rule (or all rules) of one suite (or all suites)."""

    pairs: list[tuple[bool, bool]] = field(default_factory=list)  # (label fail, judge fail)
    misses: list[str] = field(default_factory=list)
    false_flags: list[str] = field(default_factory=list)
    unscored: list[str] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.pairs) + len(self.unscored)

    def add(self, trace_id: str, label_fail: bool, judge_fail: bool | None) -> None:
        if judge_fail is None:
            self.unscored.append(trace_id)
            return
        self.pairs.append((label_fail, judge_fail))
        if label_fail and not judge_fail:
            self.misses.append(trace_id)
        elif judge_fail and not label_fail:
            self.false_flags.append(trace_id)

    def merge(self, other: Tally) -> None:
        self.pairs += other.pairs
        self.misses += other.misses
        self.false_flags += other.false_flags
        self.unscored += other.unscored

    def figures(self) -> dict[str, Any]:
        from seqjudge.crosscheck import cohen_kappa

        agreement = cohen_kappa(self.pairs)
        return {
            "n": self.n,
            "scored": agreement.decisions,
            "agreement": agreement.rate,
            "kappa": agreement.kappa,
            "label_fail": sum(1 for a, _ in self.pairs if a),
            "judge_fail": sum(1 for _, b in self.pairs if b),
            "misses": len(self.misses),
            "false_flags": len(self.false_flags),
            "unscored": len(self.unscored),
            "disagreeing": sorted(self.misses + self.false_flags),
            "unscored_ids": sorted(self.unscored),
        }


def resolve_suite(written: str, answers: Path) -> Path:
    for base in (Path.cwd(), answers, ROOT):
        candidate = (base / written).resolve()
        if (candidate / "rules.yaml").is_file():
            return candidate
    sys.exit(f"error: {answers / INDEX}: suite folder {written!r} not found (no rules.yaml there)")


def trace_lines(suite: Path, wanted: set[str]) -> dict[str, str]:
    """trace id -> its line in the suite's traces.jsonl, byte for byte."""
    out = {}
    with (suite / "traces.jsonl").open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                tid = json.loads(line).get("trace_id")
                if tid in wanted:
                    out[tid] = line if line.endswith("\n") else line + "\n"
    return out


def request_tokens(suite: Path, trace_ids: list[str], judge_mode: str, risk_level: str) -> dict[str, str]:
    """trace id -> the delimiter token of the prompt `seqjudge run` will send for it (see the module doc).
    Runs in the child of the revision being replayed, so only APIs every revision has are used."""
    from seqjudge import load_rules, load_traces
    from seqjudge.judge.prompt import load_examples, render
    from seqjudge.redact import DEFAULT_REDACT, redact_trace

    try:
        from seqjudge.rules.catalog import load_catalog  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        from seqjudge.catalog import load_catalog  # type: ignore[no-redef,unused-ignore]

    ruleset = load_rules(suite / "rules.yaml")
    catalog = load_catalog(suite / "catalog.json") if (suite / "catalog.json").is_file() else None
    rule_ids = [r.rule_id for r in ruleset.rules if judge_mode == "full" or r.type == "judge"]
    wanted = set(trace_ids)
    out = {}
    for trace in load_traces(suite / "traces.jsonl"):
        if trace.trace_id in wanted:
            p = render(
                redact_trace(trace, DEFAULT_REDACT),
                ruleset,
                catalog=catalog,
                examples=load_examples(),
                risk_level=risk_level,  # type: ignore[arg-type]
                rule_ids=rule_ids,
            )
            out[trace.trace_id] = p.nonce
    return out


class Replayer:
    """The fake server's responder: the recorded answer of the trace a request is about."""

    def __init__(self, answers: dict[str, str], tokens: dict[str, str]) -> None:
        self.answers = answers  # trace id -> raw answer text
        self.tokens = tokens  # trace id -> delimiter token
        self.served: dict[str, int] = defaultdict(int)
        self.unmatched = 0

    def __call__(self, request: RecordedRequest) -> FakeReply | None:
        from fakes.server import openai_chat

        if request.method != "POST" or not request.path.endswith("/chat/completions"):
            return None
        text = "\n".join(
            str(m.get("content", "")) for m in (request.body or {}).get("messages", []) if isinstance(m, dict)
        )
        # The delimiter token first (exact); a trace id written in the request only when no token matches,
        # since an id such as "task1" may occur inside another trace's text.
        matches = [
            t for t in self.answers if self.tokens.get(t) and f"TRACE-DATA {self.tokens[t]}>>>" in text
        ]
        matches = matches or [t for t in self.answers if t in text]
        if len(matches) == 1:
            self.served[matches[0]] += 1
            return openai_chat(self.answers[matches[0]])
        self.unmatched += 1
        # An empty reply: the run records the trace unscored ("the reply was empty"), it does not stop.
        return openai_chat("")


def child_env(src: Path) -> dict[str, str]:
    """The environment of a child on the code in ``src``, with the dummy key (only the child has it)."""
    return {**os.environ, "OPENAI_API_KEY": DUMMY_KEY, "PYTHONPATH": str(src), CHILD: "1"}


def child_tokens(suite: Path, ids: list[str], judge_mode: str, risk_level: str, src: Path) -> dict[str, str]:
    """``request_tokens`` run on the code in ``src`` (the code that will send the requests)."""
    argv = [sys.executable, __file__, "tokens", "--suite", str(suite), "--judge-mode", judge_mode]
    argv += ["--risk-level", risk_level, "--ids", json.dumps(ids)]
    done = subprocess.run(argv, env=child_env(src), capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"error: rendering the prompts of {suite} failed:\n{done.stderr.strip()}")
    tokens: dict[str, str] = json.loads(done.stdout)
    return tokens


def run_suite(
    suite: Path,
    entries: list[Entry],
    answers: dict[str, str],
    judge_mode: str,
    risk_level: str,
    tmp: Path,
    src: Path,
) -> tuple[dict[str, Any], Replayer]:
    """Run `seqjudge run` (the code in ``src``) over the suite's answered traces; trace id -> its stored
    TraceResult."""
    from fakes.server import FakeLLMServer
    from seqjudge.store import Store

    ids = [e.trace_id for e in entries if e.trace_id in answers]
    lines = trace_lines(suite, set(ids))
    missing = sorted(set(ids) - set(lines))
    if missing:
        sys.exit(f"error: {suite / 'traces.jsonl'} has no trace {missing[0]!r} (named in {INDEX})")
    traces = tmp / f"{suite.name}.jsonl"
    traces.write_text("".join(lines[t] for t in ids), encoding="utf-8")
    store = tmp / f"{suite.name}.db"
    replayer = Replayer({t: answers[t] for t in ids}, child_tokens(suite, ids, judge_mode, risk_level, src))
    with FakeLLMServer(responder=replayer) as server:
        argv = [
            "run",
            str(suite / "rules.yaml"),
            str(traces),
            "--model",
            MODEL,
            "--base-url",
            server.openai_base_url,
            "--store",
            str(store),
            "--judge-mode",
            judge_mode,
            "--risk-level",
            risk_level,
            "--max-attempts",
            "1",
            "--no-cache",
            "--rpm",
            "0",
            "--tpm",
            "0",
        ]
        if (suite / "catalog.json").is_file():
            argv += ["--catalog", str(suite / "catalog.json")]
        done = subprocess.run(
            [sys.executable, "-c", "from seqjudge.cli import main; main()", *argv],
            env=child_env(src),
            cwd=tmp,  # nothing of the run (a cache, a store) lands in the caller's folder
            capture_output=True,
            text=True,
        )
    if done.returncode not in (0, 1):
        sys.exit(f"error: `seqjudge run` on {suite} exited {done.returncode}:\n{done.stderr.strip()}")
    with Store(store, create=False) as db:
        run_id = db.resolve_run("latest")
        results = {r.trace_id: r.result for r in db.results(run_id)}
    return results, replayer


def judge_outcomes(result: Any) -> dict[str, bool | None]:
    """judge rule id -> failed? (None: not decided, e.g. the judge did not score).

    The judge's own decision is what is measured: a run without a matching calibration certificate keeps
    it as advice (``route`` advisory, final ``deferred``) and one with a certificate may route it to review;
    either way ``judge`` holds what the judge said (revisions before issue 18 have no ``route``)."""
    out: dict[str, bool | None] = {}
    for d in result.rules:
        if d.type == "judge":
            outcome = d.judge if getattr(d, "route", None) is not None else d.final
            out[d.rule_id] = {"failed": True, "passed": False, "not_exercised": False}.get(outcome)
    return out


def score(args: argparse.Namespace) -> dict[str, Any]:
    answers_dir: Path = args.answers
    entries = read_index(answers_dir)
    if not entries:
        sys.exit(f"error: {answers_dir / INDEX} is missing or empty; run `render` first")
    by_suite: dict[str, list[Entry]] = defaultdict(list)
    for e in entries:
        by_suite[e.suite].append(e)
    overall: dict[str, Tally] = defaultdict(Tally)
    per_suite: dict[str, dict[str, Tally]] = {}
    no_answer: list[str] = []
    labels_used: dict[str, str] = {}
    unmatched = 0
    with tempfile.TemporaryDirectory(prefix="judge-replay-") as tmp_name:
        tmp = Path(tmp_name)
        tree = ROOT if args.rev is None else export_revision(args.rev, tmp / "rev")
        for written, suite_entries in by_suite.items():
            suite = resolve_suite(written, answers_dir)  # its labels.jsonl is the reference
            code_suite = code_suite_of(written, suite, tree, args.rev)  # its rules, catalog and traces
            labels_used[suite.name] = str(suite / "labels.jsonl")
            labels = {}
            for line in (suite / "labels.jsonl").read_text(encoding="utf-8").splitlines():
                if line.strip():
                    lb = json.loads(line)
                    labels[lb["trace_id"]] = lb.get("rules") or {}
            answers = {}
            for e in suite_entries:
                path = answers_dir / "answers" / f"{e.key}.json"
                if path.is_file():
                    answers[e.trace_id] = path.read_text(encoding="utf-8")
                else:
                    no_answer.append(f"{e.key} ({e.trace_id})")
            results, replayer = run_suite(
                code_suite, suite_entries, answers, args.judge_mode, args.risk_level, tmp, tree / "src"
            )
            unmatched += replayer.unmatched
            judge_ids = judge_rule_ids_of(code_suite)
            tallies: dict[str, Tally] = defaultdict(Tally)
            for e in suite_entries:
                result = results.get(e.trace_id)
                outcomes = judge_outcomes(result) if result is not None else {}
                for rule_id, label in sorted(labels.get(e.trace_id, {}).items()):
                    if rule_id in judge_ids:  # exact rules are the engine's, not the judge's
                        tallies[rule_id].add(e.trace_id, label == "fail", outcomes.get(rule_id))
            per_suite[suite.name] = tallies
            for rule_id, t in tallies.items():
                overall[rule_id].merge(t)
    return {
        "revision": args.rev or "this checkout",
        "judge_mode": args.judge_mode,
        "risk_level": args.risk_level,
        "overall": {r: t.figures() for r, t in sorted(overall.items())},
        "suites": {s: {r: t.figures() for r, t in sorted(ts.items())} for s, ts in per_suite.items()},
        "labels": labels_used,
        "no_answer": no_answer,
        "unmatched_requests": unmatched,
    }


def code_suite_of(written: str, suite: Path, tree: Path, rev: str | None) -> Path:
    """Where the rules, catalog and traces the pipeline runs on come from: the suite folder of the code
    being replayed (this checkout, or the revision's tree) when the index names one of the repository's
    suites by a relative path, else the suite folder itself. The labels always come from ``suite``."""
    rel = Path(written)
    if not rel.is_absolute() and (tree / rel / "rules.yaml").is_file():
        return tree / rel
    if rev is not None:
        sys.exit(f"error: --rev {rev} has no suite {written!r}: it replays the repository's own suites")
    return suite


def judge_rule_ids_of(suite: Path) -> set[str]:
    from seqjudge import load_rules

    return {r.rule_id for r in load_rules(suite / "rules.yaml").rules if r.type == "judge"}


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def print_report(report: dict[str, Any]) -> None:
    print(
        f"judge replay ({report['revision']}): mode {report['judge_mode']}, risk level {report['risk_level']}"
    )
    header = f"{'scope':<28} {'rule':<24} {'n':>4} {'scored':>6} {'agree':>6} {'kappa':>6} "
    header += f"{'lbl fail':>8} {'miss':>4} {'false':>5} {'unsc':>4}"
    print(header)
    rows = [("all suites", report["overall"])] + [(s, f) for s, f in report["suites"].items()]
    for scope, figures in rows:
        for rule_id, f in figures.items():
            print(
                f"{scope:<28} {rule_id:<24} {f['n']:>4} {f['scored']:>6} {_fmt(f['agreement']):>6} "
                f"{_fmt(f['kappa']):>6} {f['label_fail']:>8} {f['misses']:>4} {f['false_flags']:>5} "
                f"{f['unscored']:>4}"
            )
    for name, path in report["labels"].items():
        print(f"labels of {name}: {path}")
    for rule_id, f in report["overall"].items():
        if f["disagreeing"]:
            print(f"disagreeing on {rule_id}: {', '.join(f['disagreeing'])}")
        if f["unscored_ids"]:
            print(f"unscored on {rule_id}: {', '.join(f['unscored_ids'])}")
    if report["no_answer"]:
        print(f"no answer file (unscored): {', '.join(report['no_answer'])}")
    if report["unmatched_requests"]:
        print(f"warning: {report['unmatched_requests']} request(s) matched no recorded answer")


# ------------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("render", "score", "tokens"):
        p = sub.add_parser(name) if name != "tokens" else sub.add_parser(name, help=argparse.SUPPRESS)
        p.add_argument("--judge-mode", default="full", choices=("full", "contextual"))
        p.add_argument("--risk-level", default="high", choices=("low", "medium", "high"))
        if name == "render":
            p.add_argument("--suite", type=Path, required=True)
            p.add_argument("--trace-ids", type=Path, required=True)
            p.add_argument("--out", type=Path, required=True)
        elif name == "score":
            p.add_argument("--answers", type=Path, required=True)
            p.add_argument("--json", action="store_true", help="print the figures as JSON")
            p.add_argument(
                "--rev", help="replay through this git revision's pipeline, rules and template (e.g. main)"
            )
        else:  # the child that computes delimiter tokens on the code being replayed
            p.add_argument("--suite", type=Path, required=True)
            p.add_argument("--ids", required=True)
    args = parser.parse_args(argv)
    if args.command == "render":
        render(args)
        return 0
    if args.command == "tokens":
        ids = json.loads(args.ids)
        print(json.dumps(request_tokens(args.suite, ids, args.judge_mode, args.risk_level)))
        return 0
    report = score(args)
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print_report(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
