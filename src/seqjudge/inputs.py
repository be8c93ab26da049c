"""A suite's inputs, loaded one way for every command: the rule set, its tool catalog, the judge's worked
examples and the run config.

The catalog is the one given on the command line (or in the config), else the rule file's ``catalog:``,
else the ``catalog.json`` beside the rule file. The config is found one way for `run` and `check`
(``config_of``): the one named, or the seqjudge.yaml beside a named rule file.
The rule loader has already resolved that name against the rule file's folder, so nothing here joins it to
the folder a second time (doing so made ``seqjudge prompt suite/rules.yaml`` look for
``suite/suite/catalog.json``).

Every problem is an ``InputError`` (exit 2). ``seqjudge golden validate`` wants the problems collected
rather than raised; it calls the pieces (``read_rules``, ``catalog_path``, ``read_catalog``,
``unknown_tools``) and collects what they raise.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seqjudge.defaults import CONFIG_FILE
from seqjudge.errors import InputError
from seqjudge.rules.model import RuleSet
from seqjudge.safetext import say

if TYPE_CHECKING:
    from seqjudge.config import RunConfig
    from seqjudge.rules.catalog import Catalog
    from seqjudge.rules.lint import LintProblem

__all__ = [
    "Suite",
    "build_config",
    "catalog_path",
    "config_beside",
    "config_of",
    "find_config",
    "load_suite",
    "model_or_env",
    "read_catalog",
    "read_examples",
    "read_rules",
    "suite_of",
    "unknown_tools",
]


MODEL_ENV = "SEQJUDGE_MODEL"


def model_or_env(model: str | None) -> str | None:
    """The model given (flag or config), else ``SEQJUDGE_MODEL`` (an empty variable counts as unset)."""
    return model or os.environ.get(MODEL_ENV) or None


def _to_stderr(text: str) -> None:
    say(f"warning: {text}", err=True)


@dataclass
class Suite:
    """What a command needs besides the traces. ``examples`` is None when the command did not ask for them
    (the judge then uses the shipped ones)."""

    ruleset: RuleSet
    catalog: Catalog | None = None
    catalog_path: Path | None = None
    examples: Any = None  # tuple[judge.prompt.Example, ...]; loose so this module needs no prompt code


def read_rules(path: str | Path, *, warn: Callable[[str], None] | None = _to_stderr) -> RuleSet:
    """The rule set of a rule file. Loader warnings (a deprecated shape) go to ``warn`` (None: dropped)."""
    return _read_rules_located(path, warn)[0]


def _read_rules_located(
    path: str | Path, warn: Callable[[str], None] | None
) -> tuple[RuleSet, dict[str, str]]:
    """``read_rules`` plus where each rule is written (``load_rules_located``), for messages."""
    from seqjudge.rules.load import load_rules_located

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        located = load_rules_located(path)
    if warn is not None:
        for w in caught:
            warn(str(w.message))
    return located


# A catalog file beside the rule file is the suite's (what `seqjudge init` writes, what the bundled suites
# hold): used when neither a flag, the config nor the rule file names one, by every command alike.
CATALOG_FILES = ("catalog.json", "catalog.yaml", "catalog.yml")


def catalog_path(ruleset: RuleSet, given: str | Path | None = None) -> Path | None:
    """The catalog to use: ``given`` (a flag or the config's, already relative to where it was given), else
    the rule file's ``catalog:`` (already resolved against the rule file's folder by the loader), else a
    ``catalog.json`` (or ``.yaml``, ``.yml``) in the rule file's folder."""
    if given is not None and str(given) != "":
        return Path(given)
    if ruleset.catalog:
        return Path(ruleset.catalog)
    if ruleset.source is None:  # rules built in memory have no folder
        return None
    folder = Path(ruleset.source).parent
    return next((folder / name for name in CATALOG_FILES if (folder / name).is_file()), None)


def read_catalog(path: str | Path) -> Catalog:
    from seqjudge.rules.catalog import load_catalog

    return load_catalog(path)


def unknown_tools(
    ruleset: RuleSet, catalog: Catalog, locations: dict[str, str] | None = None
) -> list[LintProblem]:
    """The catalog errors of a rule set: tool names the catalog lacks, arguments its schemas lack. Cycles are
    not among them: commands that evaluate report a cycle as a violation on the traces, and `lint` lists it.
    ``locations`` (rule id -> line and path) places each problem in the rule file."""
    from seqjudge.rules.lint import lint

    return [
        p for p in lint(ruleset, catalog, locations=locations) if p.level == "error" and p.code != "cycle"
    ]


def read_examples(path: str | Path | None = None) -> Any:
    """The judge's worked examples (default: the shipped ``prompts/examples/default.yaml``)."""
    from seqjudge.judge.prompt import load_examples

    return load_examples(path)


def load_suite(
    rules: str | Path,
    catalog: str | Path | None = None,
    examples: str | Path | None = None,
    *,
    with_examples: bool = False,
    known_tools: bool = True,
    warn: Callable[[str], None] | None = _to_stderr,
) -> Suite:
    """Rules, catalog and (with ``with_examples``, or when ``examples`` is given) the worked examples.

    ``known_tools``: a rule naming a tool the catalog lacks is an ``InputError`` here. The judge commands
    pass False because the judge checks the rules and each trace against the catalog itself, in one message.
    """
    ruleset, locations = _read_rules_located(rules, warn)
    path = catalog_path(ruleset, catalog)
    cat = read_catalog(path) if path is not None else None
    if cat is not None and known_tools:
        problems = unknown_tools(ruleset, cat, locations)
        if problems:
            listing = "; ".join(
                f"{p.where or p.rule_id}: {p.message}" + (f" ({p.hint})" if p.hint else "") for p in problems
            )
            raise InputError(
                f"the rules name tools or arguments the catalog does not have: {listing}",
                source=str(rules),
                hint=f"fix the names or the catalog {path} (`seqjudge lint` lists every problem)",
            )
    worked = read_examples(examples) if (with_examples or examples is not None) else None
    return Suite(ruleset=ruleset, catalog=cat, catalog_path=path, examples=worked)


def suite_of(cfg: RunConfig, *, known_tools: bool = True) -> Suite:
    """The suite a run config names (its paths are already resolved against the config file's folder)."""
    return load_suite(cfg.rules, cfg.catalog, cfg.examples, known_tools=known_tools)


def project_config(arg: str | None) -> Path:
    """The config file `run` reads: ARG, ARG/seqjudge.yaml when ARG is a folder, ./seqjudge.yaml without one
    (what `seqjudge init` writes, so that a bare `seqjudge run` works in its folder)."""
    path = Path(arg) if arg else Path(CONFIG_FILE)
    if path.is_dir():
        if not (path / CONFIG_FILE).is_file():
            raise InputError(
                f"no {CONFIG_FILE} in this folder",
                source=str(path),
                where="arguments",
                hint=f"name the files: RULES TRACES, or write a {CONFIG_FILE} (rules:, traces:) or a "
                "rules.yaml there (`seqjudge init DIR` writes a starter suite)",
            )
        path = path / CONFIG_FILE
    if not path.is_file() and not arg:
        raise InputError(
            f"no {CONFIG_FILE} in this folder",
            source=str(Path.cwd()),
            where="arguments",
            hint="write a starter suite here with `seqjudge init`, or name the files: RULES TRACES",
        )
    return path


RULE_FILES = ("rules.yaml", "rules.yml", "rules.json")  # a suite folder's rule file, without a config


def config_beside(rules: str | Path) -> Path | None:
    """The suite config of a rule file named on the command line: the seqjudge.yaml in its folder, if any."""
    if str(rules) == "-":
        return None
    path = Path(rules).parent / CONFIG_FILE
    return path if path.is_file() else None


def config_of(args: list[str]) -> RunConfig | None:
    """The config of a command's arguments, found the same way by `run` and `check`: none or one argument is
    a config file or a folder holding one (``project_config``), else a folder holding a rules.yaml (that
    file over the folder's traces); RULES TRACES... are those files, with the settings of the seqjudge.yaml
    beside RULES (its own rules and traces replaced), or None when there is none: `check` of named files then
    needs no config module at all. Command-line flags are applied over this by the caller."""
    if len(args) >= 2 and config_beside(args[0]) is None:
        return None  # before importing the config module: `check` of named files starts without it
    from seqjudge.config import RunConfig, load_config

    if len(args) == 1 and Path(args[0]).is_dir() and not (Path(args[0]) / CONFIG_FILE).is_file():
        # A folder without a config but with a rule file is a suite by its file names (as for `calibrate`
        # and `golden validate`): the same as naming RULES and the folder, which reads the traces alone.
        folder = Path(args[0])
        rules = next((folder / name for name in RULE_FILES if (folder / name).is_file()), None)
        if rules is not None:
            return RunConfig(rules=str(rules), traces=args[0])
    if len(args) <= 1:
        return load_config(project_config(args[0] if args else None))
    beside = config_beside(args[0])
    assert beside is not None  # said above
    return load_config(beside).model_copy(update={"rules": args[0], "traces": _traces(args)})


def _traces(args: list[str]) -> str | list[str]:
    """The TRACES of RULES TRACES...: one path, or several read in order."""
    return args[1] if len(args) == 2 else args[1:]


def find_config(args: list[str]) -> RunConfig:
    """``config_of``, or the bare config of RULES TRACES... when no seqjudge.yaml is beside RULES."""
    from seqjudge.config import RunConfig

    cfg = config_of(args)
    if cfg is not None:
        return cfg
    return RunConfig(rules=args[0], traces=_traces(args))


def build_config(args: list[str], overrides: dict[str, Any], base: RunConfig | None = None) -> RunConfig:
    """`run CONFIG` or `run RULES TRACES`; flags (non-None) override the file. ``base``: the stored config
    of the run being resumed, used when no argument is given (`seqjudge run --resume RUN`)."""
    cfg = base if not args and base is not None else find_config(args)
    if overrides.get("model") is None and cfg.model is None:
        overrides["model"] = model_or_env(None)
    options = {k: overrides.pop(k) for k in ("base_url",) if overrides.get(k) is not None}
    update = {k: v for k, v in overrides.items() if v is not None}
    if options:
        update["model_options"] = cfg.model_options.model_copy(update=options)
    cfg = cfg.model_copy(update=update)
    if "threshold" not in update and cfg.thresholds is not None:
        # Calibrated thresholds per risk level (`seqjudge calibrate --write`); a --threshold flag wins.
        cfg = cfg.model_copy(update={"threshold": cfg.threshold_for()})
    return cfg
