"""``runtime-cloud health`` and ``runtime-cloud backup status``: the host's own state."""

from __future__ import annotations

from typing import Any

import typer

from runtime_cloud_cli.context import state
from runtime_cloud_cli.exit_codes import Exit
from runtime_cloud_cli.output import Column

backup = typer.Typer(help="Backups of the host's store.", no_args_is_help=True)


def health(ctx: typer.Context) -> None:
    """The host's liveness and readiness, each dependency's check (scope factory.health.read)."""
    s = state(ctx)
    report = s.api.call("GET", "health")
    if s.out.as_json:
        s.out.json(report)
        return
    s.out.say(f"{report.get('service', 'host')} {report.get('version', '')}: {report.get('status')}")
    columns: list[Column] = [("check", "name"), ("status", "status"), ("ms", "latency_ms"), ("detail", "detail")]
    s.out.items(report.get("checks") or [], columns)


@backup.command()
def status(ctx: typer.Context) -> None:
    """The backup settings and the latest export's age, as the health report has them (exit 1 unless healthy)."""
    s = state(ctx)
    report = s.api.call("GET", "health")
    check: dict[str, Any] = next((c for c in report.get("checks") or [] if c.get("name") == "backup"), {})
    document = {"status": check.get("status"), "detail": check.get("detail"), **(report.get("backup") or {})}
    s.out.document(document)
    if check.get("status") not in (None, "healthy"):
        raise typer.Exit(Exit.NO)
