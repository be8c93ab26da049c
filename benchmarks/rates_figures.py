"""The violation rate of `confirm-before-write` on the tau suites from 10, 20 and 40 human labels (issue 36).

    python benchmarks/rates_figures.py [--answers benchmarks/replays/2026-12-01/after] [--draws 1000]

The judge: the recorded stand-in judge replies of `--answers`, replayed through the real pipeline exactly as
`benchmarks/judge_replay.py score` does it (the loopback fake provider, `seqjudge run` in a child process,
mode contextual, risk level high); its call and confidence on `confirm-before-write` for every replayed
trace. The "people": the suites' labels.jsonl. The population is the replayed traces (the judge answered
only those); the truth is the labels' violation rate over all of them.

For n = 10, 20 and 40 labels drawn uniformly without replacement (seeded), it prints the rate with its 95%
interval by PPI++ (`seqjudge.rates.ppi_interval`, the estimator `runs show --rates` uses) beside the
humans-only interval (`seqjudge.rates.human_interval`, exact Clopper–Pearson) and the judge-only rate, for
one draw (seed 0); then over ``--draws`` seeded draws: how often each interval missed the truth and its mean
width, and the same for the interval `runs show --rates` reports (``rep``: `seqjudge.rates.stratum_interval`,
PPI++ with a t quantile from MIN_EACH labelled violations and passes, else humans-only). With n equal to
the population every trace is labelled and the figures show the estimators' own width, not sampling.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from judge_replay import ROOT, read_index, resolve_suite, run_suite  # noqa: E402

from seqjudge.rates import MIN_EACH, human_interval, ppi_interval, stratum_interval  # noqa: E402

RULE = "confirm-before-write"
ALPHA = 0.05


def replayed(answers_dir: Path) -> list[tuple[str, float, bool, bool]]:
    """(trace id, the judge's chance of a violation, the judge's call, the label) per replayed trace."""
    import json
    from collections import defaultdict

    by_suite: dict[str, list[Any]] = defaultdict(list)
    for e in read_index(answers_dir):
        by_suite[e.suite].append(e)
    rows = []
    with tempfile.TemporaryDirectory(prefix="rates-figures-") as tmp_name:
        tmp = Path(tmp_name)
        for written, entries in by_suite.items():
            suite = resolve_suite(written, answers_dir)
            labels = {}
            for line in (suite / "labels.jsonl").read_text(encoding="utf-8").splitlines():
                if line.strip():
                    record = json.loads(line)
                    labels[record["trace_id"]] = (record.get("rules") or {}).get(RULE)
            answers = {
                e.trace_id: (answers_dir / "answers" / f"{e.key}.json").read_text(encoding="utf-8")
                for e in entries
                if (answers_dir / "answers" / f"{e.key}.json").is_file()
            }
            results, _ = run_suite(suite, entries, answers, "contextual", "high", tmp, ROOT / "src")
            for trace_id, result in results.items():
                (d,) = [d for d in result.rules if d.rule_id == RULE]
                label = labels.get(trace_id)
                if d.judge is None or label is None:
                    print(f"left out: {trace_id} (judge {d.judge}, label {label})", file=sys.stderr)
                    continue
                failed = d.judge == "failed"
                chance = float(failed)
                if d.confidence is not None:
                    chance = d.confidence if failed else 1 - d.confidence
                rows.append((trace_id, chance, failed, label == "fail"))
    return sorted(rows)  # the store keeps the order traces finished in; the seeded draws need a fixed one


def figures(rows: list[tuple[str, float, bool, bool]], n: int, seed: int) -> dict[str, Any]:
    picked = random.Random(seed).sample(range(len(rows)), n)
    chances = [r[1] for r in rows]
    y = [rows[i][3] for i in picked]
    ppi = ppi_interval([float(v) for v in y], [chances[i] for i in picked], chances, alpha=ALPHA)
    human = human_interval(y, [1.0] * n, alpha=ALPHA)
    reported, _, _ = stratum_interval(
        [float(v) for v in y], [chances[i] for i in picked], chances, [1.0] * n, alpha=ALPHA
    )
    return {"ppi": ppi, "human": human, "reported": reported}


def _iv(interval: Any) -> str:
    if interval is None:
        return "none"
    return f"{interval.estimate:.1%} [{interval.lower:.1%}, {interval.upper:.1%}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=Path, default=ROOT / "benchmarks/replays/2026-12-01/after")
    parser.add_argument("--draws", type=int, default=1000)
    args = parser.parse_args()
    rows = replayed(args.answers)
    size = len(rows)
    truth = sum(r[3] for r in rows) / size
    judge = sum(r[2] for r in rows) / size
    print(
        f"{RULE}: {size} replayed traces; rate over all labels {truth:.1%} "
        f"({sum(r[3] for r in rows)} of {size}); judge alone {judge:.1%} ({sum(r[2] for r in rows)} fails)"
    )
    print(
        f"{'labels':>6}  {'PPI++ (seed 0)':<24} {'humans only (seed 0)':<24} "
        f"{'PPI miss':>8} {'PPI width':>9} {'hum miss':>8} {'hum width':>9} {'rep miss':>8} {'rep width':>9}"
    )
    for n in (10, 20, 40):
        if n > size:
            continue
        one = figures(rows, n, 0)
        miss = {"ppi": 0, "human": 0, "reported": 0}
        width = {"ppi": 0.0, "human": 0.0, "reported": 0.0}
        counted = {"ppi": 0, "human": 0, "reported": 0}
        usable = 0
        for seed in range(args.draws):
            got = figures(rows, n, seed)
            labelled = sum(rows[i][3] for i in random.Random(seed).sample(range(len(rows)), n))
            usable += min(labelled, n - labelled) >= MIN_EACH
            for key, interval in got.items():
                if interval is None:
                    continue
                counted[key] += 1
                miss[key] += not (interval.lower <= truth <= interval.upper)
                width[key] += interval.upper - interval.lower
        share = {k: "n/a" if not counted[k] else f"{miss[k] / counted[k]:.1%}" for k in counted}
        mean = {k: "n/a" if not counted[k] else f"{width[k] / counted[k]:.1%}" for k in counted}
        print(
            f"{n:>6}  {_iv(one['ppi']):<24} {_iv(one['human']):<24} {share['ppi']:>8} {mean['ppi']:>9} "
            f"{share['human']:>8} {mean['human']:>9} {share['reported']:>8} {mean['reported']:>9}"
        )
        if counted["ppi"] < args.draws:
            print(f"        ({args.draws - counted['ppi']} draw(s) gave PPI no interval: no spread)")
        print(
            f"        `runs show --rates` would show PPI++ in {usable / args.draws:.0%} of the draws (at "
            f"least {MIN_EACH} labelled violations and passes), else the humans-only interval"
        )


if __name__ == "__main__":
    main()
