"""``runtime-cloud runs``: list, show, watch, log, approve, reject, cancel; and ``declare``."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from runtime_cloud_cli.client import Api, ApiError
from runtime_cloud_cli.context import state
from runtime_cloud_cli.exit_codes import Exit
from runtime_cloud_cli.output import Column

app = typer.Typer(help="Provisioning runs: follow, approve or cancel them, read their log.", no_args_is_help=True)

FINAL_STATES = {"applied", "failed", "rejected", "expired", "superseded", "cancelled"}
RUN_COLUMNS: list[Column] = [
    ("run", "id"),
    ("environment", "environment"),
    ("class", "environment_class"),
    ("state", "state"),
    ("requested by", "requested_by"),
    ("created", "created_at"),
]
RUN_FIELDS = (
    "id",
    "environment",
    "environment_class",
    "target",
    "state",
    "requested_by",
    "requested_by_client",
    "created_at",
    "plan_digest",
    "plan_counts",
    "requires_approval",
    "approval_deadline",
    "decision",
    "cancellation",
    "apply_receipt_digest",
    "failure_reason",
    "failure_detail",
)

RunId = Annotated[str, typer.Argument(help="the run id (run-...)")]
Reason = Annotated[str, typer.Option(help="why, recorded with the decision")]


@app.command("list")
def list_runs(
    ctx: typer.Context,
    environment: Annotated[str | None, typer.Option(help="only this environment's runs")] = None,
    run_state: Annotated[str | None, typer.Option("--state", help="only runs in this state")] = None,
    limit: Annotated[int | None, typer.Option(help="page size the host is asked for (every page is read)")] = None,
) -> None:
    """The tenant's runs, newest first as the host orders them."""
    s = state(ctx)
    params = {"environment": environment, "state": run_state, "limit": limit}
    s.out.items(list(s.api.pages("runs", "runs", params)), RUN_COLUMNS)


@app.command()
def show(ctx: typer.Context, run_id: RunId) -> None:
    """One run: its state, plan, decision and ending."""
    s = state(ctx)
    s.out.document(s.api.call("GET", f"runs/{run_id}"), RUN_FIELDS)


@app.command()
def watch(
    ctx: typer.Context,
    run_id: RunId,
    until: Annotated[
        list[str] | None,
        typer.Option(help="also stop (exit 0) at this state, e.g. awaiting-approval"),
    ] = None,
    interval: Annotated[float, typer.Option(min=0.2, help="seconds between reads")] = 2.0,
    timeout: Annotated[float | None, typer.Option(help="give up after this many seconds (exit 6)")] = None,
) -> None:
    """Follow a run until it ends: exit 0 when applied (or reaching an --until state), 1 when it ended otherwise."""
    s = state(ctx)
    run = follow(s.api, run_id, set(until or ()), interval, timeout, quiet=s.out.as_json)
    s.out.document(run, RUN_FIELDS)
    if run["state"] != "applied" and run["state"] not in set(until or ()):
        raise typer.Exit(Exit.NO)


def follow(
    api: Api, run_id: str, stop_at: set[str], interval: float, timeout: float | None, *, quiet: bool
) -> dict[str, Any]:
    """Read the run until it is final or in ``stop_at``, showing its state as it changes."""
    deadline = None if timeout is None else time.monotonic() + timeout
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    # On stderr: stdout stays the run's document alone, for a pipe.
    console = Console(stderr=True)
    seen: str | None = None
    with Progress(*columns, console=console, transient=True, disable=quiet) as progress:
        task = progress.add_task(f"{run_id}: ...", total=None)
        while True:
            run: dict[str, Any] = api.call("GET", f"runs/{run_id}")
            note = f"{run_id} ({run['environment']}): {_progress_note(run)}"
            progress.update(task, description=note)
            if run["state"] != seen and not quiet and not console.is_terminal:  # a CI log: one line a state
                console.print(note, highlight=False, markup=False)
            seen = run["state"]
            if run["state"] in FINAL_STATES or run["state"] in stop_at:
                return run
            if deadline is not None and time.monotonic() > deadline:
                raise ApiError(f"run {run_id} is still {run['state']} after {timeout} s", Exit.UNAVAILABLE)
            time.sleep(interval)


def _progress_note(run: dict[str, Any]) -> str:
    if run["state"] == "awaiting-approval":
        return f"awaiting approval by another person (until {run.get('approval_deadline') or '?'})"
    return str(run["state"])


@app.command()
def log(
    ctx: typer.Context,
    run_id: RunId,
    follow_log: Annotated[bool, typer.Option("--follow", "-f", help="keep reading until the run ends")] = False,
    cursor: Annotated[str | None, typer.Option(help="start at this cursor (a previous page's next)")] = None,
    interval: Annotated[float, typer.Option(min=0.2, help="seconds between reads with --follow")] = 2.0,
) -> None:
    """The run's log: its runner jobs' engine events and log lines (with --json: one JSON entry a line)."""
    s = state(ctx)
    while True:
        page = s.api.call("GET", f"runs/{run_id}/log", params={"cursor": cursor})
        for entry in page.get("entries") or []:
            print(json.dumps(entry, sort_keys=True) if s.out.as_json else _log_line(entry), flush=True)
        if page.get("complete") or not follow_log:
            return
        if page.get("next") == cursor:  # at the end while the run goes on: wait for more
            time.sleep(interval)
        cursor = page.get("next")


def _log_line(entry: dict[str, Any]) -> str:
    text = entry.get("log")
    if text is None:
        event = entry.get("engine_event") or {}
        text = json.dumps(event, sort_keys=True)
    return f"[{entry.get('job_id', '')}] {text}"


@app.command()
def approve(
    ctx: typer.Context,
    run_id: RunId,
    plan_digest: Annotated[
        str | None, typer.Option(help="the plan you reviewed (default: the run's current plan_digest)")
    ] = None,
    reason: Reason = "",
) -> None:
    """Approve a run awaiting approval (another person than the requester; role Operator)."""
    _decide(ctx, run_id, "approve", plan_digest, reason)


@app.command()
def reject(
    ctx: typer.Context,
    run_id: RunId,
    plan_digest: Annotated[str | None, typer.Option(help="the plan you reviewed (default: the run's)")] = None,
    reason: Reason = "",
) -> None:
    """Reject a run awaiting approval (role Operator)."""
    _decide(ctx, run_id, "reject", plan_digest, reason)


def _decide(ctx: typer.Context, run_id: str, verb: str, plan_digest: str | None, reason: str) -> None:
    s = state(ctx)
    if plan_digest is None:
        plan_digest = s.api.call("GET", f"runs/{run_id}").get("plan_digest")
        if not plan_digest:
            raise ApiError(f"run {run_id} has no plan to {verb} yet", Exit.REFUSED)
    run = s.api.call("POST", f"runs/{run_id}/{verb}", body={"plan_digest": plan_digest, "reason": reason})
    s.out.document(run, RUN_FIELDS)


@app.command()
def cancel(ctx: typer.Context, run_id: RunId, reason: Reason = "") -> None:
    """Cancel a run that has not finished (role Operator)."""
    s = state(ctx)
    s.out.document(s.api.call("POST", f"runs/{run_id}/cancel", body={"reason": reason}), RUN_FIELDS)


def declare(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="a specification (.json, .yaml, .yml)")],
    idempotency_key: Annotated[
        str | None, typer.Option(help="the same key declares once, however often it is sent")
    ] = None,
    watch_run: Annotated[bool, typer.Option("--watch", help="then follow the run as `runs watch` does")] = False,
) -> None:
    """Declare desired state: post a specification file (POST /specifications); prints the run."""
    s = state(ctx)
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
    answer = s.api.call("POST", "specifications", body=declaration_body(file), headers=headers)
    if not watch_run:
        s.out.document(answer)
        return
    s.out.say(f"declared: run {answer['run_id']}")
    watch(ctx, answer["run_id"])


def declaration_body(file: Path) -> dict[str, Any]:
    """YAML text is sent as ``specification_text`` (the host parses it); JSON as ``specification``, or as
    the whole body when it already is one (``specification``, ``specification_text`` or ``git``)."""
    text = file.read_text(encoding="utf-8")
    if file.suffix.lower() in (".yaml", ".yml"):
        return {"specification_text": text, "format": "yaml"}
    try:
        document = json.loads(text)
    except ValueError as error:
        raise ApiError(f"{file} is not JSON (or name it .yaml): {error}", Exit.USAGE) from None
    if isinstance(document, dict) and {"specification", "specification_text", "git"} & document.keys():
        return document
    return {"specification": document}
