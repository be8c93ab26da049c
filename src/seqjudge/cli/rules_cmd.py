"""``seqjudge lint`` (every rule-file problem at once) and ``seqjudge migrate`` (v0 -> ``rules:``)."""

import shutil
import sys
import warnings
from pathlib import Path
from typing import Annotated

import typer

from seqjudge.cli.app import app
from seqjudge.cli.options import StoreOpt
from seqjudge.defaults import DEFAULT_STORE
from seqjudge.errors import InputError
from seqjudge.safetext import say


@app.command("lint")
def lint_command(
    rules: Annotated[Path, typer.Argument(help="Rule file (YAML or JSON).", show_default=False)],
    catalog: Annotated[
        Path | None,
        typer.Option(
            "--catalog",
            help="Tool catalog to check tool names against (default: the rule file's `catalog:`).",
        ),
    ] = None,
    store: StoreOpt = DEFAULT_STORE,
    guard: Annotated[
        bool,
        typer.Option(
            "--guard",
            help="Also name the rules a guard before each call (`seqjudge guard`) cannot enforce, and why.",
        ),
    ] = False,
) -> int:
    """Check a rule file: syntax, every rule, precedence cycles and, with a catalog, tool names; and whether
    a calibration certificate beside the store covers its `judge` rules. With --guard, also the rules that
    only make sense offline (docs/guard.md).

    Exits 2 if there is any error (including a file that does not load), else 0.
    """
    from seqjudge import inputs
    from seqjudge.certificate import certificates_dir
    from seqjudge.rules.lint import LintProblem, certificate_problems, guard_problems, lint
    from seqjudge.rules.load import SeqjudgeDeprecationWarning, load_rules_located

    source = str(rules)
    with warnings.catch_warnings(record=True) as caught:
        # Shown as lint warnings below rather than through Python's warning machinery.
        warnings.simplefilter("always", SeqjudgeDeprecationWarning)
        try:
            ruleset, locations = load_rules_located(rules)
        except InputError:
            for w in caught:
                say(f"warning: {w.message}", err=True)
            raise
    deprecated = [w for w in caught if issubclass(w.category, SeqjudgeDeprecationWarning)]
    for w in caught:
        if w not in deprecated:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    catalog_path = inputs.catalog_path(ruleset, catalog)
    cat = inputs.read_catalog(catalog_path) if catalog_path is not None else None
    problems = lint(ruleset, cat, locations=locations)
    problems += certificate_problems(ruleset, certificates_dir(store))
    if guard:
        problems += guard_problems(ruleset, locations)
    if deprecated:
        problems.append(
            LintProblem(
                "warning",
                None,
                None,
                "the v0 `sequences:` form is deprecated",
                f"run `seqjudge migrate {source}` (add --write to rewrite the file)",
            )
        )
    for p in problems:
        say(p.render(source))
    errors = sum(p.level == "error" for p in problems)
    warns = len(problems) - errors
    n = len(ruleset.rules)
    checked = f" against {catalog_path}" if cat is not None else ""
    say(
        f"{source}: {n} rule{'s' if n != 1 else ''}{checked}, {_count(errors, 'error')}, "
        f"{_count(warns, 'warning')}"
    )
    return 2 if errors else 0


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


@app.command("migrate")
def migrate_command(
    file: Annotated[
        Path, typer.Argument(help="A v0 rule file (`sequences: [[A, B], ...]`).", show_default=False)
    ],
    write: Annotated[
        bool, typer.Option("--write", help="Rewrite the file in place, keeping FILE.bak.")
    ] = False,
) -> int:
    """Rewrite a v0 `sequences:` rule file as `rules:` (printed, or written in place with --write)."""
    from seqjudge.rules.migrate import NothingToMigrate, migrate_text

    try:
        text = migrate_text(file, fmt="json" if write and file.suffix.lower() == ".json" else "yaml")
    except NothingToMigrate as exc:
        # Running migrate twice is harmless: say so, change nothing, succeed.
        say(f"{exc}", err=True)
        return 0
    if not write:
        sys.stdout.write(text)
        return 0
    backup = file.with_name(file.name + ".bak")
    try:
        shutil.copy2(file, backup)
        file.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(
            f"cannot write the migrated file: {exc.strerror or exc}",
            source=str(file),
            hint="Check the file's and its folder's permissions",
        ) from None
    say(f"migrated {file} (the original is kept as {backup})", err=True)
    return 0
