"""``runtime-cloud proposals``: what the inventory proposes about drift, and deciding it."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from runtime_cloud_cli.client import ApiError
from runtime_cloud_cli.context import state
from runtime_cloud_cli.exit_codes import Exit
from runtime_cloud_cli.output import Column

app = typer.Typer(help="Drift proposals: list them and decide (revert, adopt, accept or reject).", no_args_is_help=True)

OPTIONS = ("revert", "adopt", "accept")
COLUMNS: list[Column] = [
    ("proposal", "id"),
    ("environment", "environment"),
    ("state", "state"),
    ("findings", lambda p: len(p.get("finding_ids") or [])),
    ("updated", "updated_at"),
]


@app.command("list")
def list_proposals(
    ctx: typer.Context,
    environment: Annotated[str | None, typer.Option(help="only this environment's proposals")] = None,
    proposal_state: Annotated[str | None, typer.Option("--state", help="open, decided, superseded, ...")] = None,
    limit: Annotated[int | None, typer.Option(help="page size the host is asked for (every page is read)")] = None,
) -> None:
    """The tenant's proposals."""
    s = state(ctx)
    params = {"environment": environment, "state": proposal_state, "limit": limit}
    s.out.items(list(s.api.pages("proposals", "proposals", params)), COLUMNS)


@app.command()
def show(ctx: typer.Context, proposal_id: Annotated[str, typer.Argument(help="the proposal id")]) -> None:
    """One proposal: its findings and the options (with the adopt diff)."""
    s = state(ctx)
    s.out.document(s.api.call("GET", f"proposals/{proposal_id}"))


@app.command()
def decide(
    ctx: typer.Context,
    proposal_id: Annotated[str, typer.Argument(help="the proposal id")],
    option: Annotated[str | None, typer.Option(help="revert, adopt or accept: for the whole proposal")] = None,
    finding: Annotated[
        list[str] | None, typer.Option(help="FINDING=OPTION, each finding its own option (repeat it)")
    ] = None,
    reject: Annotated[bool, typer.Option("--reject", help="reject the proposal (needs --reason)")] = False,
    reason: Annotated[str, typer.Option(help="why, recorded with the decision")] = "",
    expires_at: Annotated[
        str | None, typer.Option(help="with accept: when the ignore rules end (ISO 8601 with a zone)")
    ] = None,
) -> None:
    """Decide a proposal (role Operator): one --option, a --finding per finding, or --reject.

    Revert and adopt answer with the provisioning run they started (follow it with `runs watch`)."""
    s = state(ctx)
    if reject:
        if option or finding:
            raise typer.BadParameter("--reject takes no --option or --finding")
        s.out.document(s.api.call("POST", f"proposals/{proposal_id}/reject", body={"reason": reason}))
        return
    body = accept_body(option, finding or [], reason, expires_at)
    s.out.document(s.api.call("POST", f"proposals/{proposal_id}/accept", body=body))


def accept_body(option: str | None, findings: list[str], reason: str, expires_at: str | None) -> dict[str, Any]:
    if (option is None) == (not findings):
        raise ApiError("give --option (the whole proposal) or --finding FINDING=OPTION (each finding)", Exit.USAGE)
    body: dict[str, Any] = {"reason": reason}
    if option is not None:
        body["option"] = option
    else:
        body["decisions"] = [_decision(text) for text in findings]
    if expires_at is not None:
        body["expires_at"] = expires_at
    return body


def _decision(text: str) -> dict[str, str]:
    found, _, chosen = text.partition("=")
    if not found or chosen not in OPTIONS:
        raise ApiError(f"--finding {text!r}: write FINDING=OPTION, OPTION one of {', '.join(OPTIONS)}", Exit.USAGE)
    return {"finding": found, "option": chosen}
