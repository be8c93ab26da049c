"""Issue 15's probes, run against whichever seqjudge is importable; prints one line per probe.

    python benchmarks/issue15_probes.py                                   # this checkout
    PYTHONPATH=/path/to/other/checkout/src python benchmarks/issue15_probes.py   # e.g. main, for "before"

Each probe works in a fresh temporary folder; the fault probes use the tests' loopback fake server.
"""

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from cli_suite import RULES as CLI_RULES
from cli_suite import passing_reply
from fakes.server import FakeLLMServer, FakeReply, openai_chat
from test_connection_cause import REQUEST as PROBE_REQUEST

os.environ["OPENAI_API_KEY"] = "sk-test-probe-0000"
os.environ.pop("SEQJUDGE_MODEL", None)
PY = sys.executable
SJ = [PY, "-c", "import sys; from seqjudge.cli import main; sys.argv[0]='seqjudge'; main()"]
RULES = CLI_RULES
VALID = passing_reply()


def sh(args, cwd, timeout=120):
    t = time.perf_counter()
    try:
        p = subprocess.run(SJ + args, cwd=cwd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr, time.perf_counter() - t
    except subprocess.TimeoutExpired:
        return "timeout", "", "", time.perf_counter() - t


def fresh():
    d = Path(tempfile.mkdtemp(prefix="probe-"))
    (d / "rules.yaml").write_text(RULES)
    return d


def tr(tid, args):
    return json.dumps({"trace_id": tid, "calls": [{"tool_name": "A", "arguments": args}, {"tool_name": "B"}]})


def status(d, store="s.db"):
    try:
        with sqlite3.connect(d / store) as c:
            return c.execute("SELECT status FROM runs ORDER BY rowid DESC LIMIT 1").fetchone()[0]
    except Exception:
        return "n/a"


out = {}


def say(k, v):
    print(f"{k}: {v}", flush=True)


# 1
d = fresh()
(d / "t.jsonl").write_text(
    '{"trace_id": "sur", "calls": [{"tool_name": "A", "arguments": {"q": "x\\udcffy"}}, '
    '{"tool_name": "B"}]}\n'
)
rc, o, e, _ = sh(["run", "rules.yaml", "t.jsonl", "--store", "s.db"], d)
say("1 run lone surrogate", f"exit {rc}, traceback={'Traceback' in e}, run status {status(d)}")
rc2, o, e, _ = sh(["run", "--resume", "latest", "--store", "s.db"], d)
say("1 resume same input", f"exit {rc2}, traceback={'Traceback' in e}")
deep = {"x": 1}
for _ in range(300):
    deep = {"k": deep}
d = fresh()
(d / "t.jsonl").write_text(tr("deep", deep) + "\n")
rc, o, e, _ = sh(["run", "rules.yaml", "t.jsonl", "--store", "s.db"], d)
say("1 run 300-deep args", f"exit {rc}, traceback={'Traceback' in e}, run status {status(d)}")
for cmd in (["prompt", "rules.yaml", "t.jsonl"], ["convert", "t.jsonl", "-o", "o.jsonl"]):
    rc, o, e, _ = sh(cmd, d)
    say(f"1 {cmd[0]} 300-deep", f"exit {rc}, traceback={'Traceback' in e}")
# 2
secrets = ["sk-proj-Zq8vN2rT5yW1xK4mP7sL0aB3", "hunter2pass", "AKIAIOSFODNN7EXAMPLE", "plain-but-named-pw"]
d = fresh()
(d / "t.jsonl").write_text(
    json.dumps(
        {
            "trace_id": "s",
            "calls": [
                {
                    "tool_name": "B",
                    "arguments": {
                        "note": f"key {secrets[0]}",
                        "url": f"https://bob:{secrets[1]}@h.example/x",
                        "cfg": secrets[2],
                        "password": secrets[3],
                    },
                },
                {"tool_name": "A"},
            ],
        }
    )
    + "\n"
)
rc, o, e, _ = sh(["check", "rules.yaml", "t.jsonl"], d)
say("2 check text: secrets shown", sum(s in o for s in secrets))
rc, o, e, _ = sh(["prompt", "rules.yaml", "t.jsonl"], d)
say("2 prompt: secrets in prompt", sum(s in o for s in secrets))
rc, o, e, _ = sh(["run", "rules.yaml", "t.jsonl", "--store", "s.db"], d)
blob = b"".join(p.read_bytes() for p in d.rglob("s.db*") if p.is_file())
say("2 run store: secrets in db files", sum(s.encode() in blob for s in secrets))
sh(["report", "latest", "--store", "s.db", "-o", "r.html"], d)
sh(["runs", "export", "latest", "--store", "s.db", "-o", "x.jsonl"], d)
say(
    "2 html+export: secrets",
    sum(s in (d / "r.html").read_text() + (d / "x.jsonl").read_text() for s in secrets),
)
# 4
d = fresh()
(d / "rules.yaml").write_text(
    "rules:\n  - {id: slow, type: require, tool: {tool: s, args_match: {q: '(a+)+$'}}}\n"
)
for n in (28, 5000):
    (d / "t.jsonl").write_text(
        json.dumps({"trace_id": "r", "calls": [{"tool_name": "s", "arguments": {"q": "a" * n + "!"}}]}) + "\n"
    )
    rc, o, e, t = sh(["check", "rules.yaml", "t.jsonl"], d, timeout=90)
    say(f"4 check (a+)+$ on {n} a's + '!'", f"exit {rc}, {t:.1f} s wall (process start included)")
rc, o, e, _ = sh(["lint", "rules.yaml"], d)
say("4 lint nested quantifier warns", "nested quantifier" in o + e)
# 5
lines = ['    a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'] + [
    f"    a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 7)
]
d = fresh()
(d / "rules.yaml").write_text(
    "rules:\n  - id: j\n    type: judge\n    description: be kind\n    when:\n      ctx:\n"
    + "\n".join("  " + line for line in lines)
    + "\n"
)
(d / "t.jsonl").write_text(tr("t", {}) + "\n")
say("5 rule file bytes", (d / "rules.yaml").stat().st_size)
rc, o, e, _ = sh(["lint", "rules.yaml"], d)
say("5 lint", f"exit {rc}")
rc, o, e, t = sh(["prompt", "rules.yaml", "t.jsonl"], d, timeout=120)
say("5 prompt", f"exit {rc}, {len(o.encode()) / 1e6:.1f} MB of prompt, {t:.1f} s")
# 8
d = fresh()
(d / "t.jsonl").write_text(
    json.dumps({"trace_id": "x\x1b[2J\x1b[31mPASS", "calls": [{"tool_name": "B"}]}) + "\n"
)
rc, o, e, _ = sh(["check", "rules.yaml", "t.jsonl"], d)
say("8 check: ESC bytes printed", o.count("\x1b"))
# 10
d = fresh()
(d / "rules.yaml").write_text("rules:\n  - {id: j, type: judge, description: confirm}\n")
rc, o, e, _ = sh(["lint", "rules.yaml"], d)
say("10 lint judge-only warns", "judge" in (o + e) and "cross-check" in (o + e))
(d / "t.jsonl").write_text(tr("t", {}) + "\n")
rc, o, e, _ = sh(["run", "rules.yaml", "t.jsonl", "--store", "s.db"], d)
say("10 run summary notes it", "cross-check" in o)


# fake-server probes
def judge(srv, d, *extra):
    return sh(
        [
            "judge",
            "rules.yaml",
            "t.jsonl",
            "--model",
            "openai:gpt-4o",
            "--base-url",
            srv.openai_base_url,
            "--format",
            "json",
            *extra,
        ],
        d,
    )


with FakeLLMServer() as srv:
    d = fresh()
    (d / "t.jsonl").write_text(tr("t", {}) + "\n")
    srv.enqueue(*(openai_chat("not json") for _ in range(3)))
    judge(srv, d, "--max-attempts", "3")
    n1 = len(srv.requests)
    srv.enqueue(openai_chat(VALID))
    rc, o, e, _ = judge(srv, d)
    st = json.loads(o)["results"][0]["judge"]["status"] if o.strip() else rc
    say("3 bad replies, --max-attempts 3: real calls", n1)
    say("3 rerun after recovery", f"{len(srv.requests) - n1} call(s), judge {st}")
with FakeLLMServer() as srv:
    d = fresh()
    (d / "t.jsonl").write_text(tr("t", {}) + "\n")
    srv.enqueue(openai_chat("x" * 5_000_000), openai_chat(VALID))
    rc, o, e, t = sh(
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
        ],
        d,
    )
    reask = len(srv.requests[1].raw) if len(srv.requests) > 1 else 0
    db = sum(p.stat().st_size for p in d.glob("s.db*"))
    say(
        "6 5 MB reply then valid",
        f"exit {rc}, re-ask request {reask / 1e6:.2f} MB, store {db / 1e6:.1f} MB, {t:.1f} s",
    )
with FakeLLMServer() as srv:
    d = fresh()
    (d / "t.jsonl").write_text("".join(tr(f"t{i}", {}) + "\n" for i in range(3)))
    cfg = {
        "rules": "rules.yaml",
        "traces": "t.jsonl",
        "store": "s.db",
        "model": "openai:gpt-4o",
        "model_options": {"base_url": srv.openai_base_url},
        "concurrency": 1,
        "cache": False,
    }
    import yaml

    (d / "seqjudge.yaml").write_text(yaml.safe_dump(cfg))
    srv.enqueue(FakeReply(401, {"error": {"message": "no", "type": "auth", "param": None, "code": None}}))
    sh(["run", "seqjudge.yaml"], d)
    srv.enqueue(*(openai_chat(VALID, delay=1.0) for _ in range(6)))
    before = len(srv.requests)
    res = {}

    def first():
        res["a"] = sh(["run", "--resume", "latest", "--store", "s.db"], d)

    th = threading.Thread(target=first)
    th.start()
    while len(srv.requests) == before:
        time.sleep(0.01)
    rc, o, e, _ = sh(["run", "--resume", "latest", "--store", "s.db"], d)
    th.join()
    say(
        "7 second concurrent resume",
        f"exit {rc}: {(e.strip().splitlines() or [''])[-1][:160]!r}; "
        f"calls {len(srv.requests) - before} for 3 traces",
    )


async def reset_probe():
    from seqjudge.judge.providers.base import get_provider

    with FakeLLMServer() as srv:
        srv.enqueue(FakeReply(reset=True))
        p = get_provider("openai:m", base_url=srv.openai_base_url, max_retries=0)
        req = PROBE_REQUEST
        try:
            await p.complete(req)
        except Exception as exc:
            say("9 connection reset", f"{getattr(exc, 'kind', '?')}: {str(exc)[:150]}")
        await p.aclose()


asyncio.run(reset_probe())
