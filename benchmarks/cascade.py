"""What an escalation cascade costs against one strong judge, on the three golden suites (no network).

    python benchmarks/cascade.py [--confident 0.8] [--repeats 3] [--cheap openai:gpt-4o-mini]
        [--strong openai:gpt-4o]

Both runs go through `run_traces` with the real prompts of the suites (full mode: the first judge is asked
about every rule, a later judge only about the `judge` rules left unsettled), in-process judges that answer
each `judge` rule as its label says, and token counts of the scripted provider (prompt and reply characters
/ 4), priced at the shipped prices of the two models. Each judge has a certificate (auto-pass from 0.9,
written here as a calibration would): the strong judge is confident (0.95) on every decision; the cheap one
on a seeded share ``--confident`` of them (0.95) and unsure (0.6) on the rest, which go to the strong one.
What the printout shows is the cost and the calls of each setting, and the runs' median wall time side by
side (the cascade's extra bookkeeping, with no network in either). What share a real cheap judge is
confident on is a property of that judge: give it with ``--confident``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from calibrate_helpers import judge_output  # noqa: E402
from seqjudge.certificate import (  # noqa: E402
    CertifiedRule,
    certificates_dir,
    new_certificate,
    rules_hash,
    save_certificate,
    template_hash,
)
from seqjudge.config import RunConfig  # noqa: E402
from seqjudge.golden import load_dataset  # noqa: E402
from seqjudge.judge.judge import prepare_request  # noqa: E402
from seqjudge.judge.providers.base import JudgeRequest, ProviderReply  # noqa: E402
from seqjudge.judge.providers.scripted import ScriptedProvider  # noqa: E402
from seqjudge.rules.engine import Engine  # noqa: E402
from seqjudge.runner import run_traces  # noqa: E402
from seqjudge.store import Store  # noqa: E402

SUITES = ("customer-support", "tau-airline", "tau-retail")
ASKED = re.compile(r"^## Rule `([^`]+)`", re.M)


class LabelJudge(ScriptedProvider):
    """Answers every rule it is asked about as the labels (judge rules) and the engine (the others) say,
    with confidence 0.95, or 0.6 for the traces ``unsure`` names."""

    def __init__(self, dataset: Any, unsure: set[str], model: str) -> None:
        super().__init__([], model=model)
        self.dataset = dataset
        self.unsure = unsure
        self.engine = Engine(dataset.ruleset)
        # The trace part of the prompt does not depend on the rules asked: it tells the traces apart.
        self.traces: dict[str, Any] = {}
        self.calls: dict[str, dict[str, tuple[int, ...]]] = {}  # the calls each rule is decided on
        for t in dataset.traces:
            _, prompt, request = prepare_request(
                t, dataset.ruleset, catalog=dataset.catalog, examples=dataset.examples
            )
            self.traces[request.dynamic_prompt] = t
            self.calls[t.trace_id] = dict(prompt.rule_calls)

    async def complete(self, request: JudgeRequest) -> ProviderReply:
        trace = self.traces[request.dynamic_prompt]
        asked = ASKED.findall(request.static_prompt)
        report = self.engine.check(trace)
        engine = {r.rule_id: r.outcome for r in report.rules}
        label = self.dataset.labels[trace.trace_id].rules
        failed = [r for r in asked if label.get(r, "fail" if engine.get(r) == "failed" else "pass") == "fail"]
        reply = judge_output(trace, self.dataset.ruleset, failed, asked, report)
        for v in reply["violations"]:  # a judge rule about certain tools names the call it fails at
            at = self.calls[trace.trace_id].get(v["rule_id"])
            if v["offending_call_index"] is None and at:
                v["offending_call_index"] = at[0]
        sure = 0.6 if trace.trace_id in self.unsure else 0.95
        reply["rule_decisions"] = [
            {"rule_id": r, "decision": "failed" if r in failed else "passed", "confidence": sure}
            for r in asked
        ]
        self.add(reply)
        return await super().complete(request)


def certify(store: Path, model: str, dataset: Any) -> None:
    judge_rules = [r.rule_id for r in dataset.ruleset.rules if r.type == "judge"]
    entries = [
        CertifiedRule(rule_id=r, risk_level="medium", auto_pass=0.9, auto_fail=0.9, alpha=0.05, delta=0.05)
        for r in judge_rules
    ]
    cert = new_certificate(
        model=model,
        template_hash=template_hash(),
        rules_hash=rules_hash(dataset.ruleset),
        dataset_hash="benchmark",
        dataset=dataset.root.name,
        alpha=0.05,
        delta=0.05,
        rules=entries,
    )
    save_certificate(cert, certificates_dir(store))


def unsure_share(trace_id: str, confident: float) -> bool:
    digest = hashlib.sha256(f"cascade-benchmark:{trace_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 >= confident


def one_run(dataset: Any, folder: Path, models: list[str], confident: float) -> tuple[dict[str, Any], float]:
    store = folder / "s.db"
    for model in models:
        certify(store, model, dataset)
    unsure = {t.trace_id for t in dataset.traces if unsure_share(t.trace_id, confident)}
    judges = [
        LabelJudge(dataset, unsure if n == 0 and len(models) > 1 else set(), m) for n, m in enumerate(models)
    ]
    cfg = RunConfig(
        rules="-",
        traces="-",
        store=str(store),
        model=models[0],
        escalate=models[1:],
        cache=False,
        concurrency=8,
    )
    with Store(store) as db:
        start = time.perf_counter()
        summary = asyncio.run(
            run_traces(
                cfg,
                dataset.ruleset,
                dataset.traces,
                db,
                provider=judges[0],
                escalation=judges[1:],
                catalog=dataset.catalog,
                examples=dataset.examples,
            )
        )
        elapsed = time.perf_counter() - start
    return summary.totals(), elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--confident", type=float, default=0.8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cheap", default="openai:gpt-4o-mini")
    parser.add_argument("--strong", default="openai:gpt-4o")
    args = parser.parse_args()
    settings = {"strong only": [args.strong], "cascade": [args.cheap, args.strong]}
    rows: dict[str, dict[str, Any]] = {}
    times: dict[str, list[float]] = {name: [] for name in settings}
    for _ in range(args.repeats):
        for name, models in settings.items():  # side by side in each repeat
            totals: dict[str, Any] = {"cost": 0.0, "calls": 0, "traces": 0, "review": 0, "stages": {}}
            spent = 0.0
            for suite in SUITES:
                dataset = load_dataset(ROOT / "golden_traces" / suite)
                with tempfile.TemporaryDirectory() as tmp:
                    figures, elapsed = one_run(dataset, Path(tmp), models, args.confident)
                spent += elapsed
                totals["cost"] += figures["cost"]["usd"]
                totals["calls"] += figures["calls"]["calls"]
                totals["traces"] += figures["traces"]
                totals["review"] += figures["review"]
                for stage in figures.get("stages", []):
                    row = totals["stages"].setdefault(
                        stage["model"], {"calls": 0, "settled": 0, "in": 0, "usd": 0.0}
                    )
                    row["calls"] += stage["traces"]
                    row["settled"] += stage["settled"]
                    row["in"] += stage["input_tokens"]
                    row["usd"] += stage["cost_usd"] or 0.0
            rows[name] = totals
            times[name].append(spent)
    traces = rows["cascade"]["traces"]
    print(f"{traces} traces of {', '.join(SUITES)}; cheap judge confident on {args.confident:.0%}")
    for name, totals in rows.items():
        print(
            f"{name:<12} calls {totals['calls']:>4}  cost ${totals['cost']:.4f}  "
            f"review {totals['review']:>3}  "
            f"median wall {statistics.median(times[name]):.2f} s over {args.repeats}"
        )
        for model, row in totals["stages"].items():
            per_call = row["in"] // max(row["calls"], 1)
            print(
                f"    {model:<22} calls {row['calls']:>4}  settled {row['settled']:>4}  "
                f"input tokens/call {per_call:>6}  ${row['usd']:.4f}"
            )
    ratio = (
        rows["cascade"]["cost"] / rows["strong only"]["cost"] if rows["strong only"]["cost"] else float("nan")
    )
    slow = statistics.median(times["cascade"]) / statistics.median(times["strong only"])
    print(f"cascade / strong only: cost {ratio:.2f}x, wall time {slow:.2f}x")


if __name__ == "__main__":
    main()
