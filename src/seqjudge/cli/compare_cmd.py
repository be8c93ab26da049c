"""`seqjudge baseline save|list`, `seqjudge compare` (the CI gate) and `seqjudge report-ci` (one run's CI
outputs).

A run reference (BASELINE, CANDIDATE, RUN) is, in this order: an exported JSONL file (`seqjudge runs
export RUN --format jsonl`), a baseline name, a run id or a unique prefix of one, or `latest`.

Exit codes of `compare`: 0 no regression, 1 regression, 2 bad input, 3 infrastructure (an alert that could
not be posted, only with --alert-fail-hard and only when there is no regression to report: the gate's own
verdict wins). `report-ci` exits like `seqjudge run`: 0 when every trace passed, 1 otherwise.
"""

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from seqjudge.cli.app import app
from seqjudge.cli.options import StoreOpt, format_option
from seqjudge.defaults import DEFAULT_STORE
from seqjudge.errors import InputError
from seqjudge.outputs.registry import writer
from seqjudge.safetext import say

if TYPE_CHECKING:
    from seqjudge.outputs.ci_outputs import Pair
    from seqjudge.rates import RateComparison
    from seqjudge.store import RunInfo, Store, StoredResult

baseline_app = typer.Typer(
    help="Named baselines: the runs `seqjudge compare` measures candidates against.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(baseline_app, name="baseline")

RefHelp = "An exported JSONL file, a baseline name, a run id (or unique prefix), or `latest`."
JunitOpt = Annotated[Path | None, typer.Option("--junit", help="Write a JUnit XML report here.")]
GithubOpt = Annotated[
    bool,
    typer.Option(
        "--github", help="Print GitHub workflow annotations and append a job summary to $GITHUB_STEP_SUMMARY."
    ),
]
MarkdownOpt = Annotated[
    Path | None,
    typer.Option("--markdown", help="Write a pull-request comment (markdown) here; - for stdout."),
]
FormatOpt = Annotated[str, format_option("compare")]
AlertBelowOpt = Annotated[
    float | None,
    typer.Option(
        "--alert-below", help="Alert when the pass rate or the judge-engine agreement falls below this (0-1)."
    ),
]
AlertWebhookOpt = Annotated[
    str | None,
    typer.Option(
        "--alert-webhook",
        envvar="SEQJUDGE_ALERT_WEBHOOK",
        help="POST a Slack-compatible JSON alert here (keep the URL in a secret).",
    ),
]
AlertFailHardOpt = Annotated[
    bool, typer.Option("--alert-fail-hard", help="Exit 3 when the alert cannot be posted (default: warn).")
]


# -- reading runs --------------------------------------------------------------------------------------------
@dataclass
class Side:
    name: str  # what the user wrote
    run: "RunInfo | None"
    stored: "list[StoredResult]"

    @property
    def pairs(self) -> "list[Pair]":
        return [(s.trace, s.result) for s in self.stored]


class _Stores:
    """Opens the store only when a reference needs it: two exported files need no database."""

    def __init__(self, path: str | Path) -> None:
        self.path = path
        self.db: Store | None = None

    def get(self) -> "Store":
        if self.db is None:
            from seqjudge.store import Store

            self.db = Store(self.path, create=False)
        return self.db

    def close(self) -> None:
        if self.db is not None:
            self.db.close()


def _looks_like_file(ref: str) -> bool:
    return ref.endswith((".jsonl", ".json")) or "/" in ref or "\\" in ref


def load_side(ref: str, stores: _Stores, role: str) -> Side:
    from seqjudge.store import read_export

    path = Path(ref)
    if path.is_file():
        try:
            with path.open(encoding="utf-8") as handle:
                rows = list(read_export(handle))
        except OSError as exc:
            raise InputError(f"cannot read the export ({exc.strerror})", source=ref) from None
        if not rows:
            raise InputError(
                "the export holds no trace",
                source=ref,
                hint="export a run with `seqjudge runs export RUN --format jsonl -o FILE`",
            )
        return Side(name=ref, run=rows[0][0], stored=[stored for _, stored in rows])
    if _looks_like_file(ref):
        raise InputError(
            f"no such file (the {role})",
            source=ref,
            hint="give an exported JSONL file, a baseline name, a run id or `latest`",
        )
    db = stores.get()
    run_id = db.resolve_run(ref)
    return Side(name=ref, run=db.run_info(run_id), stored=list(db.results(run_id)))


def _describe(side: Side) -> str:
    if side.run is None:
        return side.name
    label = f", label '{side.run.label}'" if side.run.label else ""
    which = "" if side.run.id == side.name else f"run {side.run.id}"
    inside = ", ".join(x for x in (which, label.removeprefix(", ")) if x)
    return f"{side.name} [{inside}]" if inside else side.name


# -- baseline ------------------------------------------------------------------------------------------------
@baseline_app.command("save")
def baseline_save(
    run: Annotated[str, typer.Argument(help="A run id, a unique prefix of one, or `latest`.")],
    name: Annotated[str, typer.Option("--name", help="The baseline's name (saving it again moves it).")],
    store: StoreOpt = DEFAULT_STORE,
) -> int:
    """Mark a stored run as the baseline NAME."""
    from seqjudge.store import Store

    with Store(store, create=False) as db:
        run_id = db.resolve_run(run)
        before = db.baselines().get(name)
        db.save_baseline(run_id, name)
        info = db.run_info(run_id)
    moved = f" (it was {before})" if before and before != run_id else ""
    say(f"baseline {name!r} is run {run_id}{moved}: {info.counts['traces']} trace(s)")
    return 0


@baseline_app.command("list")
def baseline_list(
    store: StoreOpt = DEFAULT_STORE, fmt: Annotated[str, format_option("baselines")] = "text"
) -> int:
    """List the baselines with their runs."""
    from seqjudge.store import Store

    with Store(store, create=False) as db:
        rows = [(name, db.run_info(run_id)) for name, run_id in db.baselines().items()]
    writer("baselines", fmt)(rows, sys.stdout)
    return 0


# -- compare -------------------------------------------------------------------------------------------------
def _alert(
    results: list[Any],
    level: float | None,
    webhook: str | None,
    fail_hard: bool,
    subject: str,
    details: list[str],
) -> bool:
    from seqjudge.outputs import alerts

    if level is None:
        return True
    alert = alerts.evaluate(results, level, subject=subject, details=details)
    return alerts.send(alert, webhook, fail_hard=fail_hard)


@app.command("compare")
def compare_cmd(
    baseline: Annotated[str, typer.Argument(help="The baseline. " + RefHelp)],
    candidate: Annotated[str, typer.Argument(help="The candidate. " + RefHelp)],
    store: StoreOpt = DEFAULT_STORE,
    max_drop: Annotated[
        float | None,
        typer.Option(
            "--max-drop", help="Also a regression: the pass rate fell by more than this (0.05 = 5 pts)."
        ),
    ] = None,
    alpha: Annotated[
        float, typer.Option("--alpha", help="Significance level of the paired judge test.")
    ] = 0.05,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the bootstrap resampling.")] = 0,
    repeat: Annotated[
        str | None,
        typer.Option(
            "--repeat",
            help="A second run of the baseline's traces with the same judge: its disagreement with the "
            "baseline is the noise floor judge changes must exceed. " + RefHelp,
        ),
    ] = None,
    allow_missing: Annotated[
        bool,
        typer.Option(
            "--allow-missing",
            help="Only report baseline traces missing from the candidate, and a candidate run that did not "
            "complete (by default either is a regression).",
        ),
    ] = False,
    fail_on_missing: Annotated[
        bool,
        typer.Option(
            "--fail-on-missing",
            help="Deprecated, and the default now: missing traces are a regression unless --allow-missing.",
        ),
    ] = False,
    junit: JunitOpt = None,
    github: GithubOpt = False,
    markdown: MarkdownOpt = None,
    fmt: FormatOpt = "text",
    alert_below: AlertBelowOpt = None,
    alert_webhook: AlertWebhookOpt = None,
    alert_fail_hard: AlertFailHardOpt = False,
    rates: Annotated[
        bool,
        typer.Option(
            "--rates",
            help="Also each judge rule's change in violation rate with its interval (PPI++ from each run's "
            "judge calls and human labels, as `runs show --rates`; both sides stored runs; needs "
            "seqjudge[rates]).",
        ),
    ] = False,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict/--no-strict",
            help="Exit 2 when a run's judge rules were advisory (no calibration certificate matched it). "
            "(compare reads no seqjudge.yaml: off unless given.)",
        ),
    ] = False,
) -> int:
    """Compare a candidate run with a baseline, trace by trace: exit 1 on a regression.

    A rule the engine decides that newly fails on any trace is a regression. Rules only the judge decides
    are compared with a paired test (McNemar's exact test and a bootstrap interval) so that judge noise is
    not taken for a regression. --max-drop adds a plain pass-rate gate. Baseline traces missing from the
    candidate, or a candidate run that did not complete, are a regression unless --allow-missing. Judge
    rules a run took as advice (no calibration certificate matched it) are left out and said so; --strict
    makes them an error.

    Exit 0 no regression, 1 regression, 2 bad input, 3 an alert that could not be posted (only with
    --alert-fail-hard, and only when there is no regression to report).
    """
    from seqjudge.compare import compare, noise_floor
    from seqjudge.outputs import alerts
    from seqjudge.outputs.ci_outputs import github_compare, junit_compare, markdown_compare
    from seqjudge.outputs.comparison import ComparisonView, write_ci

    if fail_on_missing and allow_missing:
        raise InputError(
            "--fail-on-missing and --allow-missing contradict each other",
            where="--allow-missing",
            hint="Drop --fail-on-missing (failing on missing traces is the default now)",
        )
    alert_webhook = alert_webhook or None  # an unset CI secret arrives as an empty string
    alerts.check_level(alert_below)
    alerts.check_webhook(alert_webhook, alert_below)
    stores = _Stores(store)
    try:
        base = load_side(baseline, stores, "baseline")
        cand = load_side(candidate, stores, "candidate")
        noise = None
        if repeat is not None:
            again = load_side(repeat, stores, "repeat run")
            noise = noise_floor(repeat, base.stored, again.stored)
        rate_changes = _rate_changes(stores, (baseline, base), (candidate, cand), alpha) if rates else None
    finally:
        stores.close()
    _warn_if_same_run(base, cand)
    if strict:
        _require_certified((baseline, base.stored), (candidate, cand.stored))
    result = compare(
        base.stored,
        cand.stored,
        max_drop=max_drop,
        alpha=alpha,
        seed=seed,
        noise=noise,
        allow_missing=allow_missing,
        candidate_status=cand.run.status if cand.run is not None else None,
        names=(baseline, candidate),
    )
    for side, summary in ((base, result.baseline), (cand, result.candidate)):
        if side.run is not None:
            summary.run_id, summary.label, summary.status = side.run.id, side.run.label, side.run.status
    write_ci(
        junit=junit,
        markdown=markdown,
        github=github,
        junit_tree=lambda: junit_compare(result, cand.pairs),
        markdown_text=lambda: markdown_compare(result, cand.pairs),
        annotations=lambda: github_compare(result, cand.pairs),
        inputs=[store, baseline, candidate, repeat],
    )
    view = ComparisonView(result, _describe(base), _describe(cand), cand.pairs, rates=rate_changes)
    writer("compare", fmt)(view, sys.stdout)
    code = 1 if result.regression else 0
    decision = [f"{'FIRED' if d.fired else 'ok'} {d.rule}: {d.reason}" for d in result.decisions if d.applies]
    try:
        _alert(
            [s.result for s in cand.stored],
            alert_below,
            alert_webhook,
            alert_fail_hard,
            f"compare {baseline} -> {candidate}",
            decision,
        )
    except alerts.AlertDeliveryError as exc:
        if code == 0:
            raise
        say(f"error: {exc} (exiting 1 for the regression)", err=True)
    return code


def _rate_changes(
    stores: _Stores, base: tuple[str, Side], cand: tuple[str, Side], alpha: float
) -> "RateComparison":
    """`--rates`: the labels live in the store, so both sides must be stored runs, not exports."""
    from seqjudge.rates import compare_rates

    for ref, side in (base, cand):
        if Path(ref).is_file() or side.run is None:
            raise InputError(
                "--rates reads the human labels of stored runs; an exported file holds none",
                source=ref,
                hint="give a run id, a baseline name or `latest` of the --store for both sides",
            )
    assert base[1].run is not None and cand[1].run is not None
    return compare_rates(stores.get(), base[1].run.id, cand[1].run.id, delta=alpha)


def _warn_if_same_run(base: Side, cand: Side) -> None:
    """A run compared with itself (`compare main main`, or a baseline name and the run it names) can show no
    change at all: its "no regression" says nothing, so say so."""
    if base.run is not None and cand.run is not None and base.run.id == cand.run.id:
        print(
            f"warning: the baseline {base.name!r} and the candidate {cand.name!r} are the same run "
            f"({base.run.id}): it is compared with itself, so nothing can have changed; compare the run "
            "of your change with the baseline's",
            file=sys.stderr,
        )


def _require_certified(*sides: "tuple[str, list[StoredResult]]") -> None:
    """``compare --strict``: a side whose judge rules were advisory (``seqjudge.judge_gate``) is an error."""
    for ref, stored in sides:
        advisory = sorted({d.rule_id for s in stored for d in s.result.rules if d.route == "advisory"})
        if advisory:
            raise InputError(
                f"{ref}: judge rule(s) {', '.join(advisory)} were advisory (no calibration certificate "
                "matched the run's model, prompt and rules), so they cannot gate",
                where="--strict",
                hint="calibrate with `seqjudge calibrate DATASET --model MODEL`, run again, and compare "
                "those runs; or drop --strict",
            )


# -- report-ci -----------------------------------------------------------------------------------------------
@app.command("report-ci")
def report_ci(
    run: Annotated[str, typer.Argument(help="The run. " + RefHelp)],
    store: StoreOpt = DEFAULT_STORE,
    junit: JunitOpt = None,
    github: GithubOpt = False,
    markdown: MarkdownOpt = None,
    fmt: Annotated[str, format_option("report-ci")] = "text",
    alert_below: AlertBelowOpt = None,
    alert_webhook: AlertWebhookOpt = None,
    alert_fail_hard: AlertFailHardOpt = False,
) -> int:
    """One stored run's CI outputs (JUnit, GitHub annotations and summary, a PR comment) and alerts.

    Exit 0 when every trace passed, 1 when some failed or need review (as `seqjudge run`), 2 bad input,
    3 an alert that could not be posted (with --alert-fail-hard).
    """
    from seqjudge.outputs import alerts
    from seqjudge.outputs.ci_outputs import github_run, junit_run, markdown_run
    from seqjudge.outputs.comparison import RunCounts, write_ci

    alert_webhook = alert_webhook or None  # an unset CI secret arrives as an empty string
    alerts.check_level(alert_below)
    alerts.check_webhook(alert_webhook, alert_below)
    stores = _Stores(store)
    try:
        side = load_side(run, stores, "run")
    finally:
        stores.close()
    name = f"seqjudge run {side.run.id if side.run else side.name}"
    pairs = side.pairs
    write_ci(
        junit=junit,
        markdown=markdown,
        github=github,
        junit_tree=lambda: junit_run(pairs, name=name),
        markdown_text=lambda: markdown_run(pairs, name=name),
        annotations=lambda: github_run(pairs, name=name),
        inputs=[store, run],
    )
    results = [r for _, r in pairs]
    counts = {"pass": 0, "fail": 0, "review": 0}
    for r in results:
        counts[r.verdict] += 1
    written = [f"{what} {path}" for what, path in (("JUnit", junit), ("markdown", markdown)) if path]
    ref = side.run.id if side.run else side.name
    writer("report-ci", fmt)(RunCounts(name, ref, counts, written), sys.stdout)
    _alert(results, alert_below, alert_webhook, alert_fail_hard, name.removeprefix("seqjudge "), [])
    return 0 if counts["pass"] == len(results) else 1
