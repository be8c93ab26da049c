"""`seqjudge serve`: the review workbench in the browser (seqjudge.serve)."""

import ipaddress
import socket
from pathlib import Path
from typing import Annotated

import typer

from seqjudge.cli.app import app
from seqjudge.cli.options import Risk, StoreOpt
from seqjudge.defaults import DEFAULT_STORE
from seqjudge.errors import InputError, StoreError
from seqjudge.safetext import say

ADD_REVIEWER = "seqjudge reviewers add NAME --admin"


def loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_host(host: str, *, reviewers: bool) -> None:
    """A non-loopback address only with reviewers to sign in (authentication is always on: the check says
    what exposing the store needs before anything listens)."""
    if loopback(host) or reviewers:
        return
    raise InputError(
        f"refusing to listen on {host}, an address other machines can reach, with no reviewer to sign in",
        where="--host",
        hint=f"add one first (`{ADD_REVIEWER}`), or keep the default 127.0.0.1",
    )


@app.command("serve")
def serve(
    store: StoreOpt = DEFAULT_STORE,
    host: Annotated[
        str, typer.Option("--host", help="The address to listen on (default: this machine only).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="The port to listen on.")] = 8765,
    datasets: Annotated[
        list[Path] | None,
        typer.Option(
            "--dataset",
            help="A golden dataset folder: the queue page shows, per judge rule, its labels against what the "
            "guarantee needs and whether its certificate is stale (repeat for more).",
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", help="With --dataset: the judge model (provider:model) whose labels count."),
    ] = None,
    risk: Annotated[
        Risk | None, typer.Option("--risk-level", help="With --dataset: the risk level certified.")
    ] = None,
    https: Annotated[
        bool,
        typer.Option(
            "--behind-https",
            help="The workbench is reached through a proxy that terminates TLS: mark its cookies Secure.",
        ),
    ] = False,
) -> int:
    """The review workbench in the browser: runs, the review queue, items decided from the keyboard, team
    review and adjudication. Reviewers sign in with the token `seqjudge reviewers add` printed. Plain HTTP:
    to reach it from other machines, put it behind a proxy that terminates TLS (and pass --behind-https)."""
    import uvicorn

    from seqjudge.serve.app import create_app
    from seqjudge.serve.auth import reviewers_exist
    from seqjudge.store import Store

    try:
        db = Store(store, create=False)
        has_reviewers = reviewers_exist(db)
    except StoreError as exc:
        # A store another process holds locked (or a server that fails) is bad input to `serve`, not an
        # empty queue: a page of "nothing to review" would be a pass that lies.
        raise InputError(
            f"the workbench cannot read the store: {exc}",
            hint="end the process holding the store (a `seqjudge run` migrating or writing it), or check the "
            "database server, then start `seqjudge serve` again",
        ) from None
    with db:
        check_host(host, reviewers=has_reviewers)
        for folder in datasets or []:
            if not Path(folder).is_dir():
                raise InputError(
                    "no golden dataset folder here",
                    source=str(folder),
                    where="--dataset",
                    hint="give the folder `seqjudge golden` made (its dataset.yaml inside)",
                )
        if not has_reviewers:
            raise InputError(
                "no reviewer can sign in to the workbench: the store has none",
                source=db.location,
                hint=f"add one (`{ADD_REVIEWER}` prints their token once), then start `seqjudge serve` again",
            )
        config = uvicorn.Config(
            create_app(
                db,
                https=https,
                datasets=list(datasets or []),
                model=model,
                risk_level=None if risk is None else risk.value,
            ),
            host=host,
            port=port,
            log_level="warning",
            access_log=False,
        )
        server = uvicorn.Server(config)
        try:
            sock = _bind(host, port)
        except OSError as exc:
            raise InputError(
                f"cannot listen on {host}:{port} ({exc.strerror or exc})",
                where="--port",
                hint="choose another --port, or stop what is using it",
            ) from None
        say(
            f"seqjudge workbench on http://{_shown_host(host)}:{sock.getsockname()[1]}/ (store {store}); "
            "ctrl-C stops it"
        )
        server.run(sockets=[sock])
    return 0


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host.strip("[]"), port))
    sock.listen(128)
    return sock


def _shown_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
