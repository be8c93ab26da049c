"""`seqjudge demo`: what a newcomer wants to see first — `run` over the bundled golden suites."""

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NamedTuple

import typer

from seqjudge.cli.app import app
from seqjudge.cli.options import StoreOpt
from seqjudge.defaults import DEFAULT_STORE
from seqjudge.errors import InputError

if TYPE_CHECKING:
    from seqjudge.crosscheck import TraceResult
    from seqjudge.report import Violation
    from seqjudge.trace import Trace


def _suites(root: Path) -> list[Path]:
    if (root / "rules.yaml").is_file():
        return [root]
    suites = sorted(p for p in root.iterdir() if (p / "rules.yaml").is_file()) if root.is_dir() else []
    if not suites:
        raise InputError(
            "no golden suite found (a suite is a folder with rules.yaml and traces.jsonl)",
            source=str(root),
            hint="pass golden_traces/ or one suite folder",
        )
    return suites


class _Label(NamedTuple):
    verdict: str | None  # the human verdict of the trace (pass|fail)
    rules: dict[str, str]  # per rule: pass|fail


def _labels(suite: Path) -> dict[str, _Label]:
    """Per trace, the human verdict and per-rule labels of the suite's labels.jsonl, if any."""
    path = suite / "labels.jsonl"
    if not path.is_file():
        return {}
    out: dict[str, _Label] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            out[record["trace_id"]] = _Label(record.get("verdict"), dict(record.get("rules") or {}))
        except (ValueError, KeyError, TypeError) as exc:
            raise InputError(
                f"not a label record ({exc})",
                source=str(path),
                where=f"line {n}",
                hint='each line is {"trace_id", "verdict", "rules"?: {rule_id: pass|fail}}',
            ) from None
    return out


class _Watcher:
    """Collects, while a suite runs, one failing trace to show and the engine-versus-label agreement.

    With labels, the trace shown is one a person labelled fail, at a violation of a rule not labelled pass:
    a newcomer's first failure must not be one of the engine's known false positives."""

    def __init__(self, labels: dict[str, _Label]) -> None:
        self.labels = labels
        self.shown: str | None = None
        self.shown_critical = False
        self.agree = self.differ = 0

    def _showable(self, trace_id: str, violations: "list[Violation]") -> "list[Violation]":
        if not self.labels:
            return violations
        label = self.labels.get(trace_id)
        if label is None or label.verdict != "fail":
            return []
        return [v for v in violations if label.rules.get(v.rule_id, "fail") == "fail"]

    def __call__(self, trace: "Trace", result: "TraceResult") -> None:
        from seqjudge.outputs.textview import violation_block

        report = result.engine
        showable = self._showable(report.trace_id, list(report.violations))
        critical = [v for v in showable if v.severity == "critical"]
        if showable and (self.shown is None or (critical and not self.shown_critical)):
            self.shown = violation_block(trace, report, (critical or showable)[0])
            self.shown_critical = bool(critical)
        human = self.labels[report.trace_id].rules if report.trace_id in self.labels else {}
        for r in report.rules:
            label = human.get(r.rule_id)
            if label is not None and r.outcome in ("passed", "failed"):
                if (label == "fail") == (r.outcome == "failed"):
                    self.agree += 1
                else:
                    self.differ += 1


@app.command()
def demo(
    root: Annotated[Path, typer.Argument(help="golden_traces/ or one suite folder.")] = Path("golden_traces"),
    store: StoreOpt = DEFAULT_STORE,
    model: Annotated[
        str | None, typer.Option("--model", help="provider:model (else SEQJUDGE_MODEL).")
    ] = None,
) -> int:
    """Run `seqjudge run` over each bundled golden suite and show what it finds.

    Exits 0 whenever the demo ran, whatever the traces' verdicts (a CI gate uses `check` or `run`).
    """
    import asyncio

    from seqjudge.config import RunConfig
    from seqjudge.ingest import load_traces
    from seqjudge.inputs import load_suite, model_or_env
    from seqjudge.judge.providers.registry import skipped_judge
    from seqjudge.outputs.summary import run_text
    from seqjudge.runner import run_traces
    from seqjudge.store import Store

    model = model_or_env(model)
    why = skipped_judge(model)  # a model asked for (--model, SEQJUDGE_MODEL) that cannot run: exit 2
    print(f"seqjudge demo: `seqjudge run` over {root}/")
    print(f"LLM judge: {'skipped — ' + why if why else 'on — ' + str(model)}.")
    if why:
        print("           The engine decides every exact rule; `judge` rules stay deferred (no model)")
        print("           and count in no verdict: each suite says which.")
    with Store(store) as db:
        for suite in _suites(root):
            cfg = RunConfig(
                rules=str(suite / "rules.yaml"),
                traces=str(suite / "traces.jsonl"),
                model=model,
                store=str(store),
                label=f"demo:{suite.name}",
            )
            # A bundled suite's catalog.json is used whether or not its rule file names it.
            shipped = suite / "catalog.json"
            inputs = load_suite(cfg.rules, shipped if shipped.is_file() else None, known_tools=False)
            ruleset, catalog = inputs.ruleset, inputs.catalog
            watcher = _Watcher(_labels(suite))
            summary = asyncio.run(
                run_traces(cfg, ruleset, load_traces(cfg.traces), db, catalog=catalog, on_result=watcher)
            )
            print()
            print(
                f"== {suite.name}: {len(ruleset.rules)} rules, {summary.traces} traces: "
                f"{summary.verdicts['pass']} pass, {summary.verdicts['fail']} fail, "
                f"{summary.verdicts['review']} review"
            )
            if watcher.agree or watcher.differ:
                print(f"   engine vs human per-rule labels: {watcher.agree} agree, {watcher.differ} differ")
            print("   " + "\n   ".join(_summary_lines(summary, run_text)))
            if watcher.shown:
                which = "trace a person labelled fail" if watcher.labels else "failing trace"
                print(f"\n   One {which}, in full:\n")
                print("\n".join("   " + line if line else "" for line in watcher.shown.splitlines()))
    print()
    print(where_installed())
    return 0


def where_installed() -> str:
    """Where the `seqjudge` command is and how to type it: `make demo` installs into .venv/, which is not on
    the PATH of the shell that ran make."""
    import shutil
    import sys

    bin_dir = Path(sys.executable).parent
    script = bin_dir / "seqjudge"
    found = shutil.which("seqjudge")
    if found and Path(found).resolve() == script.resolve():
        return (
            f"seqjudge is on your PATH ({found}).\n"
            "Next: `seqjudge init my-suite` writes a starter suite, then `seqjudge run my-suite` checks it."
        )
    try:
        shown = script.relative_to(Path.cwd())
    except ValueError:
        shown = script
    activate = shown.parent / "activate"
    how = f"run `source {activate}` (or type {shown} instead of seqjudge)"
    if not (bin_dir / "activate").is_file():
        how = f"add {shown.parent} to your PATH (or type {shown} instead of seqjudge)"
    return (
        f"seqjudge is installed at {shown}; it is not on this shell's PATH: to type `seqjudge`, {how}.\n"
        f"Next: `{shown} init my-suite` writes a starter suite, then `{shown} run my-suite` checks it."
    )


def _summary_lines(summary: object, printer: object) -> list[str]:
    import io

    buf = io.StringIO()
    printer(summary, buf)  # type: ignore[operator]
    return [line for line in buf.getvalue().splitlines() if not line.startswith(("run ", "judge skipped"))]
