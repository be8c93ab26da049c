"""`seqjudge reviewers ...`: the people who review in the workbench, their tokens and roles (store.team)."""

import json
import sys
from enum import StrEnum
from typing import Annotated

import typer

from seqjudge.cli.app import app
from seqjudge.cli.options import StoreOpt
from seqjudge.defaults import DEFAULT_STORE
from seqjudge.safetext import say

reviewers_app = typer.Typer(
    help="Reviewers of the workbench: add one (prints a token once), list them, disable one.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(reviewers_app, name="reviewers")

NameArg = Annotated[str, typer.Argument(help="The reviewer's name, as decisions and labels will show it.")]


class ListFormat(StrEnum):
    text = "text"
    json = "json"


@reviewers_app.command("add")
def reviewers_add(
    name: NameArg,
    admin: Annotated[
        bool, typer.Option("--admin", help="May adjudicate disputed items and sees every review of one.")
    ] = False,
    store: StoreOpt = DEFAULT_STORE,
) -> int:
    """Register a reviewer and print their sign-in token: it is shown this once and stored only as a hash."""
    from seqjudge.store import Store

    with Store(store) as db:
        token = db.add_reviewer(name, admin=admin)
    role = "an admin" if admin else "a reviewer"
    say(f"added {name} as {role} to {store}", err=True)
    say(token)
    say(
        "This token is shown once and is not stored (only its hash): give it to them now, over a private "
        f"channel. Lost, it cannot be shown again: `seqjudge reviewers disable {name}` and add them under "
        "another name.",
        err=True,
    )
    return 0


@reviewers_app.command("list")
def reviewers_list(
    store: StoreOpt = DEFAULT_STORE,
    fmt: Annotated[ListFormat, typer.Option("--format", help="text or json.")] = ListFormat.text,
) -> int:
    """List the reviewers: name, role, when added, whether disabled (never a token: none is stored)."""
    from seqjudge.store import Store

    with Store(store, create=False) as db:
        found = db.reviewers()
    if fmt is ListFormat.json:
        json.dump([r.model_dump(mode="json") for r in found], sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    if not found:
        say(f"no reviewers in {store} yet: `seqjudge reviewers add NAME [--admin]` adds one")
        return 0
    width = max(len(r.name) for r in found)
    for r in found:
        role = "admin" if r.admin else "reviewer"
        status = "active" if r.disabled_at is None else f"disabled {r.disabled_at:%Y-%m-%d %H:%M}"
        say(f"{r.name:<{width}}  {role:<8}  added {r.created_at:%Y-%m-%d %H:%M}  {status}")
    return 0


@reviewers_app.command("disable")
def reviewers_disable(name: NameArg, store: StoreOpt = DEFAULT_STORE) -> int:
    """Refuse the reviewer's token and end their browser sessions; their decisions stay in the record."""
    from seqjudge.store import Store

    with Store(store, create=False) as db:
        db.disable_reviewer(name)
    say(f"disabled {name}: their token no longer signs in; their decisions are kept")
    return 0
