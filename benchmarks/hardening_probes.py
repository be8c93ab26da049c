"""Issue 38's hostile-input and fault probes, run against whichever seqjudge is importable: one row a probe.

    python benchmarks/hardening_probes.py                                       # this checkout
    PYTHONPATH=/path/to/other/checkout/src python benchmarks/hardening_probes.py   # another, for "before"

Each probe works in a fresh temporary folder (the judge probes against the tests' loopback fake server) and
says what it expects, what it saw, and whether that held. Nothing here touches a file outside its folder:
the device probe writes to a null device node it makes itself (as root; elsewhere it is left out with why),
never to the machine's /dev/null. Exit 0 when every probe held, 1 otherwise.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sqlite3
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from cli_suite import RULES, passing_reply
from fakes.server import FakeLLMServer, FakeReply, openai_chat
from markdown_support import outside_fences  # the lines CommonMark reads outside fenced blocks

os.environ["OPENAI_API_KEY"] = "sk-test-probe-0000"
os.environ.pop("SEQJUDGE_MODEL", None)
SJ = [sys.executable, "-c", "import sys; from seqjudge.cli import main; sys.argv[0]='seqjudge'; main()"]
ESC = "\x1b"
Result = tuple[bool, str]


class Done:
    def __init__(self, code: int | str, out: str, err: str, seconds: float) -> None:
        self.code, self.out, self.err, self.seconds = code, out, err, seconds

    @property
    def clean(self) -> bool:
        """No traceback, and an exit code that is not "a trace failed" or "pass" when it should be neither."""
        return "Traceback" not in self.err and "Traceback" not in self.out

    def tail(self) -> str:
        lines = (self.err.strip() or self.out.strip()).splitlines()
        return (lines[-1] if lines else "")[:110]


def sh(args: list[str], cwd: Path, timeout: float = 60, **kw: object) -> Done:
    started = time.perf_counter()
    try:
        p = subprocess.run(SJ + args, cwd=cwd, capture_output=True, text=True, timeout=timeout, **kw)  # type: ignore[call-overload]
        return Done(p.returncode, p.stdout, p.stderr, time.perf_counter() - started)
    except subprocess.TimeoutExpired:
        return Done("timeout", "", "", time.perf_counter() - started)


def fresh(rules: str = RULES) -> Path:
    d = Path(tempfile.mkdtemp(prefix="probe-"))
    (d / "rules.yaml").write_text(rules)
    return d


def lines(*traces: dict) -> str:
    return "".join(json.dumps(t) + "\n" for t in traces)


def ab(tid: str = "t", args: dict | None = None, **b: object) -> dict:
    return {"trace_id": tid, "calls": [{"tool_name": "A", "arguments": args or {}}, {"tool_name": "B", **b}]}


def run_status(d: Path, store: str = "s.db") -> str:
    try:
        with sqlite3.connect(d / store) as c:
            return c.execute("SELECT status FROM runs ORDER BY rowid DESC LIMIT 1").fetchone()[0]
    except Exception as exc:  # noqa: BLE001 - a probe reports what it sees
        return f"n/a ({type(exc).__name__})"


def not_a_verdict(done: Done) -> bool:
    """An error that is not a pass and not "a trace failed": exit 2 (bad input) or 3 and above."""
    return isinstance(done.code, int) and done.code >= 2 and done.clean


# -- 1. a crash never reads as a verdict ------------------------------------------------------------------
def nested(levels: int) -> str:
    """JSON text of an object nested ``levels`` deep (written out: json.dumps itself stops near 1,000)."""
    return '{"k":' * levels + "1" + "}" * levels


def deep_line(tid: str, levels: int) -> str:
    call = f'{{"tool_name": "A", "arguments": {{"q": {nested(levels)}}}}}'
    return f'{{"trace_id": "{tid}", "calls": [{call}, {{"tool_name": "B"}}]}}' + "\n"


def deep_arguments() -> Result:
    d = fresh()
    (d / "t.jsonl").write_text(deep_line("deep", 1200))
    r = sh(["run", "rules.yaml", "t.jsonl", "--store", "s.db"], d)
    c = sh(["check", "rules.yaml", "t.jsonl"], d)
    ok = r.code == 2 and c.code == 2 and r.clean and c.clean
    return ok, f"run exit {r.code}, check exit {c.code}: {c.tail()}"


def deep_langsmith() -> Result:
    d = fresh()
    leaf = '{"id": "leaf", "trace_id": "T", "run_type": "tool", "name": "A", "inputs": {}, "outputs": {}}'
    head = '{"id": "r", "trace_id": "T", "run_type": "chain", "name": "c", "child_runs": ['
    (d / "t.json").write_text("[" + head * 10_000 + leaf + "]}" * 10_000 + "]")
    c = sh(["check", "rules.yaml", "t.json", "--trace-format", "langsmith"], d)
    return c.code == 2 and c.clean, f"exit {c.code}: {c.tail()}"


def codex_rollout(path: Path, *items: dict) -> None:
    """A Codex rollout file: its session line, then one response item a payload."""
    recs = [{"type": "session_meta", "payload": {"id": "s1"}}]
    recs += [{"type": "response_item", "payload": item} for item in items]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))


def deep_codex_arguments() -> Result:
    d = fresh()
    text = "[" * 5000 + "]" * 5000
    codex_rollout(
        d / "t.jsonl",
        {"type": "function_call", "name": "A", "arguments": text, "call_id": "c1"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
    )
    c = sh(["check", "rules.yaml", "t.jsonl", "--trace-format", "codex"], d)
    return c.code == 2 and c.clean, f"exit {c.code}: {c.tail()}"


def deep_in_workers() -> Result:
    d = fresh()
    (d / "t.jsonl").write_text(lines(*[ab(f"t{i}") for i in range(1500)]) + deep_line("deep", 1200))
    c = sh(["check", "rules.yaml", "t.jsonl", "--format", "jsonl", "--workers", "2", "-o", "out.jsonl"], d)
    return c.code == 2 and c.clean, f"exit {c.code}: {c.tail()}"


def judge_run(srv: FakeLLMServer, d: Path, *extra: str) -> Done:
    return sh(
        [
            "run",
            "rules.yaml",
            "t.jsonl",
            "--store",
            "s.db",
            "--model",
            "openai:gpt-4o",
            "--base-url",
            srv.openai_base_url,
            "--no-cache",
            "--max-attempts",
            "2",
            *extra,
        ],
        d,
    )


def huge_integer_reply() -> Result:
    d = fresh()
    (d / "t.jsonl").write_text(lines(ab("t")))
    reply = json.dumps(passing_reply()).replace(
        '"total_rules_checked": 1', '"total_rules_checked": ' + "9" * 5000
    )
    with FakeLLMServer() as srv:
        srv.enqueue(openai_chat(reply), openai_chat(reply))
        r = judge_run(srv, d)
    st = run_status(d)
    return r.code in (0, 1) and r.clean and st == "completed", f"exit {r.code}, run {st}: {r.tail()}"


def undecodable_reply() -> Result:
    d = fresh()
    (d / "t.jsonl").write_text(lines(ab("t")))
    body = json.dumps(openai_chat(json.dumps(passing_reply())).body).encode().replace(b"fine", b"fi\xff\xfe")
    bad = FakeReply(200, body, headers={"content-type": "application/json"})
    with FakeLLMServer() as srv:
        srv.enqueue(bad, FakeReply(200, body, headers={"content-type": "application/json"}))
        r = judge_run(srv, d)
    st = run_status(d)
    return r.code in (0, 1) and r.clean and st == "completed", f"exit {r.code}, run {st}: {r.tail()}"


def surrogate_html() -> Result:
    d = fresh()
    # in an argument and in the trace id of a trace that fails (so the page lists it in full)
    (d / "t.jsonl").write_text(
        '{"trace_id": "s\\udcff", "calls": [{"tool_name": "B", "arguments": {"q": "x\\udcffy"}}]}\n'
    )
    c = sh(["check", "rules.yaml", "t.jsonl", "--format", "html", "-o", "r.html"], d)
    page = (d / "r.html").exists()
    return c.clean and c.code in (0, 1) and page, f"exit {c.code}, page written {page}: {c.tail()}"


def disk_full() -> Result:
    d = fresh()
    (d / "t.jsonl").write_text(lines(*[ab(f"t{i}", {"pad": "x" * 2000}) for i in range(400)]))

    def small_files() -> None:  # a file may not grow past 256 KiB: as a full disk, for this process only
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, 256 * 1024))

    r = sh(["run", "rules.yaml", "t.jsonl", "--store", "s.db"], d, preexec_fn=small_files)
    return not_a_verdict(r), f"exit {r.code}: {r.tail()}"


def credentials_in_base_url() -> Result:
    d = fresh()
    (d / "t.jsonl").write_text(lines(ab("t")))
    r = sh(
        [
            "run",
            "rules.yaml",
            "t.jsonl",
            "--store",
            "s.db",
            "--model",
            "openai:gpt-4o",
            "--base-url",
            "http://u:hunter2@127.0.0.1:9/v1",
        ],
        d,
    )
    leaked = "hunter2" in r.out + r.err
    return (
        r.clean and r.code != 1 and r.code != 0 and not leaked,
        f"exit {r.code}, password shown {leaked}: {r.tail()}",
    )


def compare_incomplete() -> Result:
    d = fresh()
    (d / "t.jsonl").write_text(lines(*[ab(f"t{i}") for i in range(5)]))
    sh(["run", "rules.yaml", "t.jsonl", "--store", "s.db", "--label", "main"], d)
    sh(["baseline", "save", "latest", "--name", "main", "--store", "s.db"], d)
    (d / "t2.jsonl").write_text(lines(*[ab(f"t{i}") for i in range(2)]))
    sh(["run", "rules.yaml", "t2.jsonl", "--store", "s.db"], d)
    c = sh(["compare", "main", "latest", "--store", "s.db"], d)
    return c.code not in (0,) and c.clean, f"exit {c.code}: {c.tail()}"


# -- 2. outputs never replace what they point at ----------------------------------------------------------
def output_device() -> Result:
    if os.geteuid() != 0:
        return True, "left out: making a device node needs root"
    d = fresh()
    (d / "t.jsonl").write_text(lines(ab("t")))
    null = d / "null"
    os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    c = sh(["convert", "t.jsonl", "-o", str(null)], d)
    still = stat.S_ISCHR(null.stat().st_mode)
    return still and c.code == 0 and c.clean, f"exit {c.code}, still a device: {still}"


def output_symlink() -> Result:
    d = fresh()
    (d / "t.jsonl").write_text(lines(ab("t")))
    (d / "real.jsonl").write_text("")
    (d / "link.jsonl").symlink_to(d / "real.jsonl")
    c = sh(["convert", "t.jsonl", "-o", "link.jsonl"], d)
    kept = (d / "link.jsonl").is_symlink() and (d / "real.jsonl").stat().st_size > 0
    return kept and c.code == 0, f"exit {c.code}, link kept and target written: {kept}"


def output_is_input() -> Result:
    d = fresh()
    body = lines(ab("t"))
    (d / "t.jsonl").write_text(body)
    c = sh(["check", "rules.yaml", "t.jsonl", "-o", "t.jsonl"], d)
    intact = (d / "t.jsonl").read_text() == body
    return intact and c.code == 2 and c.clean, f"exit {c.code}, input intact: {intact}"


# -- 3. secrets after another label -----------------------------------------------------------------------
SECRETS = {
    "hunter2": "database:\n  password: hunter2",
    "KEYVALUE1": "Error: api_key: KEYVALUE1",
    "TOKVALUE1": "auth failed: token: TOKVALUE1",
}


def nested_labels() -> Result:
    d = fresh()
    calls = [{"tool_name": "A", "output": text} for text in SECRETS.values()] + [{"tool_name": "B"}]
    (d / "t.jsonl").write_text(lines({"trace_id": "t", "calls": calls}))
    c = sh(["check", "rules.yaml", "t.jsonl", "--format", "html", "-o", "r.html"], d)
    p = sh(["prompt", "rules.yaml", "t.jsonl"], d)
    sh(["run", "rules.yaml", "t.jsonl", "--store", "s.db"], d)
    stored = b"".join(f.read_bytes() for f in d.glob("s.db*"))
    seen = (d / "r.html").read_text() if (d / "r.html").exists() else ""
    leaks = [s for s in SECRETS if s in seen or s in p.out or s.encode() in stored]
    return not leaks and c.clean and p.clean, f"in clear: {leaks or 'none'}"


def key_in_base_url() -> Result:
    d = fresh()
    (d / "t.jsonl").write_text(lines(ab("t")))
    with FakeLLMServer() as srv:
        srv.enqueue(openai_chat(json.dumps(passing_reply())))
        url = srv.openai_base_url + "?key=SECRETKEY123"
        sh(
            [
                "run",
                "rules.yaml",
                "t.jsonl",
                "--store",
                "s.db",
                "--model",
                "openai:gpt-4o",
                "--base-url",
                url,
                "--no-cache",
            ],
            d,
        )
    stored = b"".join(f.read_bytes() for f in d.glob("s.db*"))
    leaked = b"SECRETKEY123" in stored
    return not leaked, f"?key= value stored: {leaked}"


# -- 4. calls that never completed ------------------------------------------------------------------------
DEPLOY = "rules:\n  - {id: tests-first, type: before, first: run_tests, then: deploy}\n"


def unanswered_claude_code() -> Result:
    d = fresh(DEPLOY)
    recs = [
        {"type": "user", "sessionId": "s", "uuid": "u1", "message": {"role": "user", "content": "ship it"}},
        {
            "type": "assistant",
            "sessionId": "s",
            "uuid": "u2",
            "message": {
                "id": "m1",
                "role": "assistant",
                "content": [{"type": "tool_use", "name": "run_tests", "input": {}}],
            },
        },
        {
            "type": "assistant",
            "sessionId": "s",
            "uuid": "u3",
            "message": {
                "id": "m2",
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "tu2", "name": "deploy", "input": {}}],
            },
        },
        {
            "type": "user",
            "sessionId": "s",
            "uuid": "u4",
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "tu2", "content": "deployed"}],
            },
        },
    ]
    (d / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    c = sh(["check", "rules.yaml", "t.jsonl", "--trace-format", "claude-code"], d)
    return c.code == 1 and c.clean, f"exit {c.code} (1: the rule failed)"


def unanswered_codex() -> Result:
    d = fresh(DEPLOY)
    codex_rollout(
        d / "t.jsonl",
        {"type": "function_call", "name": "run_tests", "arguments": "{}"},  # no call_id: never answered
        {"type": "function_call", "name": "deploy", "arguments": "{}", "call_id": "c2"},
        {"type": "function_call_output", "call_id": "c2", "output": "done"},
    )
    c = sh(["check", "rules.yaml", "t.jsonl", "--trace-format", "codex"], d)
    return c.code == 1 and c.clean, f"exit {c.code} (1: the rule failed)"


def error_without_status() -> Result:
    d = fresh("rules:\n  - {id: verify, type: require, tool: verify_identity}\n")
    (d / "t.jsonl").write_text(
        lines(
            {"trace_id": "t", "calls": [{"tool_name": "verify_identity", "error": "identity check FAILED"}]}
        )
    )
    c = sh(["check", "rules.yaml", "t.jsonl"], d)
    return c.code == 1 and c.clean, f"exit {c.code} (1: the rule failed)"


def ok_with_error() -> Result:
    d = fresh("rules:\n  - {id: verify, type: require, tool: verify_identity}\n")
    (d / "t.jsonl").write_text(
        lines(
            {
                "trace_id": "t",
                "calls": [{"tool_name": "verify_identity", "status": "ok", "error": "identity check FAILED"}],
            }
        )
    )
    c = sh(["check", "rules.yaml", "t.jsonl"], d)
    said = "error" in c.err.lower() or "warning" in c.err.lower() or "warning" in c.out.lower()
    return c.code != 0 and c.clean and said, f"exit {c.code}: {c.tail()}"


# -- 5. escapes in every sink -----------------------------------------------------------------------------
OSC = "\x1b]52;c;cHduZWQ=\x07evil\x1b]0;title\x07"


def terminal_escapes() -> Result:
    d = fresh(f"rules:\n  - {{id: a, type: before, first: A, then: {json.dumps('B' + OSC)}}}\n")
    (d / "t.jsonl").write_text(lines({"trace_id": "t" + OSC, "calls": [{"tool_name": "B" + OSC}]}))
    c = sh(["check", "rules.yaml", "t.jsonl"], d)
    sh(["run", "rules.yaml", "t.jsonl", "--store", "s.db"], d)
    rl = sh(["review", "list", "--store", "s.db"], d)
    rs = sh(["runs", "show", "latest", "--store", "s.db"], d)
    raw = [name for name, x in (("check", c), ("review list", rl), ("runs show", rs)) if ESC in x.out + x.err]
    return not raw, f"raw ESC in: {raw or 'none'}"


def markdown_fence() -> Result:
    name = "B\n``````\n# injected\n<img src=x>"  # a rule's tool: it reaches the violation's words
    d = fresh(f"rules:\n  - {{id: a, type: before, first: A, then: {json.dumps(name)}}}\n")
    (d / "t.jsonl").write_text(lines({"trace_id": "t", "calls": [{"tool_name": name}, {"tool_name": "A"}]}))
    c = sh(["check", "rules.yaml", "t.jsonl", "--format", "markdown", "-o", "c.md"], d)
    text = (d / "c.md").read_text() if (d / "c.md").exists() else ""
    outside = outside_fences(text)
    broke = any(line.startswith("# injected") for line in outside) or any("<img" in line for line in outside)
    return (
        not broke and c.clean and "injected" in text,
        f"exit {c.code}, heading or <img> outside a fence: {broke}",
    )


def csv_formula() -> Result:
    d = fresh()
    (d / "t.jsonl").write_text(lines(ab('=HYPERLINK("http://x","y")'), ab("+1"), ab("@x"), ab("-2")))
    sh(["run", "rules.yaml", "t.jsonl", "--store", "s.db"], d)
    e = sh(["runs", "export", "latest", "--format", "csv", "-o", "r.csv", "--store", "s.db"], d)
    text = (d / "r.csv").read_text() if (d / "r.csv").exists() else ""
    cells = [cell for row in text.splitlines() for cell in row.split(",")]
    bad = [x for x in cells if x[:1] in ("=", "+", "@", "-", "\t")]
    return e.code == 0 and not bad and bool(
        text
    ), f"exit {e.code}, formula-leading cells: {bad[:3] or 'none'}"


# -- 6. unbounded work ------------------------------------------------------------------------------------
def error_pattern_backtracking() -> Result:
    d = fresh()
    (d / "t.jsonl").write_text(lines(ab("t", output="a" * 40 + "!")))
    c = sh(["check", "rules.yaml", "t.jsonl", "--error-pattern", r"^(\w+\s?)*$"], d, timeout=30)
    return c.code != "timeout" and c.clean, f"exit {c.code} in {c.seconds:.1f} s: {c.tail()}"


def redact_backtracking() -> Result:
    d = fresh()
    (d / "t.jsonl").write_text(lines(ab("t", output="value:" + "a" * 40 + "!")))
    (d / "seqjudge.yaml").write_text(
        'rules: rules.yaml\ntraces: t.jsonl\nstore: s.db\nredact: ["value:(a|aa)+$"]\n'
    )
    r = sh(["run", "seqjudge.yaml"], d, timeout=30)
    return r.code != "timeout" and r.clean, f"exit {r.code} in {r.seconds:.1f} s: {r.tail()}"


def alias_text_bomb() -> Result:
    d = fresh()
    desc = "x" * 100_000
    refs = ", ".join(["*d"] * 20_000)  # 20,000 values (under the value bound), 2 GB of text once expanded
    text = (
        f"aliases:\n  T: [&d '{desc}', {refs}]\nrules:\n  - {{id: j, type: judge, description: judge it}}\n"
    )
    (d / "rules.yaml").write_text(text)
    (d / "t.jsonl").write_text(lines(ab("t")))
    lint = sh(["lint", "rules.yaml"], d, timeout=120)
    p = sh(["prompt", "rules.yaml", "t.jsonl"], d, timeout=120)
    ok = p.code == 2 and p.clean and lint.code == 2 and lint.clean
    return ok, f"lint exit {lint.code}, prompt exit {p.code} in {p.seconds:.1f} s: {p.tail()}"


def one_huge_line() -> Result:
    """256 MB of NUL bytes and no newline: refused at the record bound without holding the line."""
    d = fresh()
    size = 256 * 1024 * 1024
    with (d / "t.jsonl").open("wb") as f:
        block = b"\0" * 2**20  # a MiB at a time: this process stays small, and so does the child it forks
        for _ in range(size >> 20):
            f.write(block)
    started = time.perf_counter()
    with (d / "out").open("wb") as out, (d / "err").open("wb") as err:
        # A 16 MiB record bound (SEQJUDGE_MAX_RECORD_BYTES; default 256 MiB): the line is read in bounded
        # pieces up to the bound, never whole.
        env = {**os.environ, "SEQJUDGE_MAX_RECORD_BYTES": str(16 * 1024 * 1024)}
        child = subprocess.Popen(
            [*SJ, "check", "rules.yaml", "t.jsonl"], cwd=d, stdout=out, stderr=err, env=env
        )
        _, status, usage = os.wait4(child.pid, 0)  # (not communicate: wait4 also gives the child's peak RSS)
    code = os.waitstatus_to_exitcode(status)
    (d / "t.jsonl").unlink()
    done = Done(code, (d / "out").read_text(errors="replace"), (d / "err").read_text(errors="replace"), 0.0)
    done.seconds = time.perf_counter() - started
    peak = usage.ru_maxrss / 1024  # KiB -> MiB
    ok = code == 2 and done.clean and peak < 128
    return ok, f"exit {code}, peak {peak:.0f} MiB for a {size >> 20} MiB line: {done.tail()}"


# -- 7. smaller --------------------------------------------------------------------------------------------
def read_only_store() -> Result:
    d = fresh()
    (d / "t.jsonl").write_text(lines(ab("t")))
    sh(["run", "rules.yaml", "t.jsonl", "--store", "s.db"], d)
    for f in d.glob("s.db*"):
        f.chmod(0o444)
    d.chmod(0o555)
    try:
        ls = sh(["runs", "list", "--store", "s.db"], d)
    finally:
        d.chmod(0o755)
    note = " (as root, file modes do not stop writes)" if os.geteuid() == 0 else ""
    return ls.code == 0 and ls.clean, f"exit {ls.code}{note}: {ls.tail()}"


def no_cache_help() -> Result:
    d = fresh()
    h = sh(["run", "--help"], d)
    text = " ".join(h.out.split())
    wrong = "not fill" in text
    return not wrong and h.code == 0, f"says 'not fill': {wrong}"


PROBES: list[tuple[str, str, Callable[[], Result]]] = [
    ("1", "argument nested 1,200 deep: run and check exit 2", deep_arguments),
    ("1", "LangSmith tree 10,000 deep: exit 2", deep_langsmith),
    ("1", "Codex argument text 5,000 deep: exit 2", deep_codex_arguments),
    ("1", "deep record in the worker path: exit 2", deep_in_workers),
    ("1", "judge reply with a 5,000-digit integer: invalid reply, run completes", huge_integer_reply),
    ("1", "judge reply of invalid UTF-8: invalid reply, run completes", undecodable_reply),
    ("1", "lone surrogate under check --format html: no traceback", surrogate_html),
    ("1", "disk full while storing: not a verdict (exit >= 2), no traceback", disk_full),
    ("1", "--base-url with user:password: refused, password not shown", credentials_in_base_url),
    ("1", "compare against a candidate lacking baseline traces: not green", compare_incomplete),
    ("2", "convert -o a device: still a device", output_device),
    ("2", "convert -o a symlink: the link kept, its target written", output_symlink),
    ("2", "check -o its own input: refused, input intact", output_is_input),
    ("3", "nested 'label: value' secrets: redacted in prompt, store, HTML", nested_labels),
    ("3", "?key= in the base URL: not stored", key_in_base_url),
    ("4", "Claude Code tool_use without id, unanswered: not a success", unanswered_claude_code),
    ("4", "Codex function_call without call_id, unanswered: not a success", unanswered_codex),
    ("4", "native call with error and no status: failed", error_without_status),
    ("4", "native status ok with an error: said, not silent", ok_with_error),
    ("5", "OSC escapes in names: none raw in check, review list, runs show", terminal_escapes),
    ("5", "six-backtick fence in a tool name: stays inside markdown", markdown_fence),
    ("5", "formula-leading trace ids in CSV export: neutralised", csv_formula),
    ("6", "--error-pattern that backtracks: bounded", error_pattern_backtracking),
    ("6", "redact value pattern that backtracks: bounded", redact_backtracking),
    ("6", "2 GB of text through 20,000 aliases: lint and prompt exit 2", alias_text_bomb),
    ("6", "256 MB line of NUL bytes, 16 MiB record bound: exit 2, peak under 128 MiB", one_huge_line),
    ("7", "read-only store: runs list works", read_only_store),
    ("7", "--no-cache help says what it does", no_cache_help),
]


def main() -> int:
    held = 0
    print("| part | probe | held | seen |")
    print("|---|---|---|---|")
    for part, what, probe in PROBES:
        try:
            ok, seen = probe()
        except Exception as exc:  # noqa: BLE001 - a probe that breaks is a failed probe, not a stop
            ok, seen = False, f"probe broke: {type(exc).__name__}: {exc}"[:140]
        held += ok
        print(f"| {part} | {what} | {'✔' if ok else '✘'} | {seen.replace('|', '/')} |", flush=True)
    print(f"\n{held} of {len(PROBES)} held")
    return 0 if held == len(PROBES) else 1


if __name__ == "__main__":
    sys.exit(main())
