"""``runtime-cloud envs`` (environments, scans, findings) and ``runtime-cloud receipts``."""

from __future__ import annotations

from typing import Annotated

import typer

from runtime_cloud_cli.context import state
from runtime_cloud_cli.exit_codes import Exit
from runtime_cloud_cli.output import Column

envs = typer.Typer(help="Environments: their specification, inventory, scans and drift findings.", no_args_is_help=True)
receipts = typer.Typer(help="Plan and apply receipts: read and verify them.", no_args_is_help=True)

Environment = Annotated[str, typer.Argument(help="the environment's name")]


@envs.command("list")
def list_environments(ctx: typer.Context) -> None:
    """The tenant's environments with their last scan and open findings."""
    s = state(ctx)
    columns: list[Column] = [
        ("environment", "environment"),
        ("class", "environment_class"),
        ("applied run", "applied.run_id"),
        ("open findings", "open_findings"),
        ("last scan", "observation.observed_at"),
    ]
    s.out.items(list(s.api.pages("environments", "environments")), columns)


@envs.command()
def show(ctx: typer.Context, environment: Environment) -> None:
    """The environment's registration, last declared and last applied specification."""
    s = state(ctx)
    s.out.document(s.api.call("GET", f"environments/{environment}/specification"))


@envs.command()
def inventory(ctx: typer.Context, environment: Environment) -> None:
    """What the last scan saw in the target, and the open findings."""
    s = state(ctx)
    s.out.document(s.api.call("GET", f"environments/{environment}/inventory"))


@envs.command()
def scan(ctx: typer.Context, environment: Environment) -> None:
    """Scan the environment now (drift against its last applied specification)."""
    s = state(ctx)
    s.out.document(s.api.call("POST", f"environments/{environment}/scan"))


@envs.command()
def findings(
    ctx: typer.Context,
    environment: Environment,
    finding_state: Annotated[str | None, typer.Option("--state", help="open (default), suppressed, resolved")] = None,
    limit: Annotated[int | None, typer.Option(help="page size the host is asked for (every page is read)")] = None,
) -> None:
    """The environment's drift findings."""
    s = state(ctx)
    params = {"state": finding_state, "limit": limit}
    columns: list[Column] = [
        ("finding", "id"),
        ("resource", "address"),
        ("kind", "kind"),
        ("state", "state"),
        ("since", "first_seen"),
    ]
    s.out.items(list(s.api.pages(f"environments/{environment}/findings", "findings", params)), columns)


@receipts.command()
def verify(ctx: typer.Context, environment: Environment) -> None:
    """Verify the environment's receipt chain (exit 1 when it does not verify)."""
    s = state(ctx)
    answer = s.api.call("GET", f"environments/{environment}/receipts/verify")
    s.out.document(answer, ("environment", "verified", "receipts_checked", "chain_length", "head", "first_broken"))
    if answer.get("verified") is not True:
        raise typer.Exit(Exit.NO)


@receipts.command("show")
def show_receipt(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(help="the run id")],
    kind: Annotated[str, typer.Argument(help="plan or apply")] = "apply",
) -> None:
    """One run's plan or apply receipt, with whether its digest matches the run's."""
    s = state(ctx)
    s.out.document(s.api.call("GET", f"runs/{run_id}/receipts/{kind}"))
