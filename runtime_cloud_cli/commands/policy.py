"""``runtime-cloud policy``: a dry run of the policy gate, and exceptions to its rules."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from runtime_cloud_cli.commands.runs import declaration_body
from runtime_cloud_cli.context import state
from runtime_cloud_cli.exit_codes import Exit
from runtime_cloud_cli.output import Column

app = typer.Typer(help="The policy gate: dry-run a specification, manage exceptions.", no_args_is_help=True)
exceptions = typer.Typer(help="Policy exceptions of an environment: list, add, show, revoke.", no_args_is_help=True)
app.add_typer(exceptions, name="exceptions")

Environment = Annotated[str, typer.Argument(help="the environment's name")]
VERDICT_FIELDS = (
    "environment",
    "environment_class",
    "plan_counts",
    "requires_approval",
    "summary.outcome",
    "summary.denied_rules",
    "summary.warnings",
    "summary.exceptions_used",
)


@app.command("dry-run")
def dry_run(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="a specification (.json, .yaml, .yml)")],
) -> None:
    """Check a specification against the effective policy without declaring it (exit 1 when denied)."""
    s = state(ctx)
    verdict = s.api.call("POST", "policy/dry-run", body=declaration_body(file))
    s.out.document(verdict, VERDICT_FIELDS)
    if (verdict.get("summary") or {}).get("outcome") == "deny":
        raise typer.Exit(Exit.NO)


@app.command()
def show(ctx: typer.Context, environment: Environment) -> None:
    """The policy in effect for the environment (its layers and rules)."""
    s = state(ctx)
    s.out.document(s.api.call("GET", f"environments/{environment}/policy"))


@exceptions.command("list")
def list_exceptions(
    ctx: typer.Context,
    environment: Environment,
    limit: Annotated[int | None, typer.Option(help="page size the host is asked for (every page is read)")] = None,
) -> None:
    """The environment's exceptions: active, expired and revoked."""
    s = state(ctx)
    columns: list[Column] = [
        ("exception", "id"),
        ("rule", "rule"),
        ("resource", "resource"),
        ("active", "active"),
        ("expires", "expires_at"),
    ]
    path = f"environments/{environment}/policy/exceptions"
    s.out.items(list(s.api.pages(path, "exceptions", {"limit": limit})), columns)


@exceptions.command()
def add(
    ctx: typer.Context,
    environment: Environment,
    rule: Annotated[str, typer.Option(help="the rule id it excepts")],
    resource: Annotated[str, typer.Option(help="a resource address (queue/orders), or * for every resource")],
    reason: Annotated[str, typer.Option(help="why")],
    expires_at: Annotated[str, typer.Option(help="when it ends: ISO 8601 with a zone, within MaxExceptionDays")],
    idempotency_key: Annotated[str | None, typer.Option(help="the same key creates it once")] = None,
) -> None:
    """Let one rule's violations through for one resource of the environment until it expires (Operator)."""
    s = state(ctx)
    body = {"rule": rule, "resource": resource, "reason": reason, "expires_at": expires_at}
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
    s.out.document(s.api.call("POST", f"environments/{environment}/policy/exceptions", body=body, headers=headers))


@exceptions.command("show")
def show_exception(
    ctx: typer.Context, environment: Environment, exception_id: Annotated[str, typer.Argument()]
) -> None:
    """One exception."""
    s = state(ctx)
    s.out.document(s.api.call("GET", f"environments/{environment}/policy/exceptions/{exception_id}"))


@exceptions.command()
def revoke(ctx: typer.Context, environment: Environment, exception_id: Annotated[str, typer.Argument()]) -> None:
    """Revoke an exception before it expires (Operator)."""
    s = state(ctx)
    answer = s.api.call("DELETE", f"environments/{environment}/policy/exceptions/{exception_id}")
    s.out.document(answer or {"exception": exception_id, "revoked": True})
