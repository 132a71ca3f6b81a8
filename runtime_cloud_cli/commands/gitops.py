"""``runtime-cloud gitops``: environments that follow a branch of a Git repository."""

from __future__ import annotations

from typing import Annotated

import typer

from runtime_cloud_cli.context import state

app = typer.Typer(help="GitOps: bind an environment to a branch, sync, status, suspend, resume.", no_args_is_help=True)

Environment = Annotated[str, typer.Argument(help="the environment's name")]


def _path(environment: str, action: str = "") -> str:
    return f"environments/{environment}/gitops" + (f"/{action}" if action else "")


@app.command()
def bind(
    ctx: typer.Context,
    environment: Environment,
    repository: Annotated[str, typer.Option(help="an allowed repository: an absolute path or https:// URL")],
    path: Annotated[str, typer.Option(help="the specification file inside the repository")],
    branch: Annotated[str, typer.Option(help="the branch the environment follows")] = "main",
    webhook_secret: Annotated[
        str | None, typer.Option(help="where its webhook secret is: RuntimeCloudGitOps__... or a Key Vault URI")
    ] = None,
    self_heal: Annotated[bool, typer.Option(help="declare the head again over a hand-made declaration")] = False,
) -> None:
    """Bind (or re-point) the environment to a file on a branch (role Operator)."""
    s = state(ctx)
    body: dict[str, object] = {"repository": repository, "path": path, "branch": branch, "self_heal": self_heal}
    if webhook_secret is not None:
        body["webhook_secret"] = webhook_secret
    s.out.document(s.api.call("PUT", _path(environment), body=body))


@app.command()
def show(ctx: typer.Context, environment: Environment) -> None:
    """The environment's binding."""
    s = state(ctx)
    s.out.document(s.api.call("GET", _path(environment)))


@app.command()
def unbind(ctx: typer.Context, environment: Environment) -> None:
    """Stop following the branch (the environment keeps what it has)."""
    s = state(ctx)
    s.api.call("DELETE", _path(environment))
    s.out.document({"environment": environment, "unbound": True})


@app.command()
def status(ctx: typer.Context, environment: Environment) -> None:
    """Head, last seen / declared / applied commit, how far behind, the last error."""
    s = state(ctx)
    s.out.document(s.api.call("GET", _path(environment, "status")))


@app.command()
def sync(ctx: typer.Context, environment: Environment) -> None:
    """Read the branch now and declare its head if it is new (not gated by sync windows)."""
    s = state(ctx)
    s.out.document(s.api.call("POST", _path(environment, "sync")))


@app.command()
def suspend(
    ctx: typer.Context,
    environment: Environment,
    reason: Annotated[str, typer.Option(help="why, shown in the status")] = "",
) -> None:
    """Suspend: no poll, webhook or sync declares until resumed."""
    s = state(ctx)
    s.out.document(s.api.call("POST", _path(environment, "suspend"), body={"reason": reason}))


@app.command()
def resume(ctx: typer.Context, environment: Environment) -> None:
    """Resume following the branch."""
    s = state(ctx)
    s.out.document(s.api.call("POST", _path(environment, "resume")))
