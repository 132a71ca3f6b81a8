"""Inventory triggers: environments and their observed state, drift scans, ignore rules, proposals.

Thin: parse, authorise, call ``shared.inventory``, shape the answer. Reads need
``factory.runtime.read``; scans ``factory.runtime.write``; ignore rules and
accepting or rejecting a proposal ``factory.runtime.write`` and the role
``Operator`` (an ignore rule hides drift exactly as accepting a proposal's
``accept`` option does, so it needs the same role). The tenant comes from the token: another tenant's environment,
finding or proposal answers 404.

Timers: ``inventory_scan`` scans every environment on
``RuntimeCloud:Inventory:ScanSchedule`` (default every 15 minutes; a change
takes effect at the next start), ``inventory_purge`` purges what is older than
``FindingRetentionDays`` (13 months by default) on ``PurgeSchedule`` (daily by
default); see :mod:`shared.inventory.settings`. ``inventory_inbox`` consumes
provisioning's events.
"""

from __future__ import annotations

from asyncio import to_thread
from typing import Any

import azure.durable_functions as df
import azure.functions as func

from functions.blueprint import trigger_blueprint
from orchestrations.inventory import STORE_UNAVAILABLE, ScanState, read_scan, start_scan, status_url, wait_for_scan
from orchestrations.provisioning_client import start_and_wake, status_path
from shared.gitops.api import FollowsGit
from shared.inventory.api import (
    AcceptBody,
    AcceptedProposal,
    EnvironmentList,
    EnvironmentsQuery,
    FindingList,
    FindingsQuery,
    FindingView,
    IgnoreRuleList,
    IgnoreRulesQuery,
    IgnoreRuleView,
    InventoryView,
    NewIgnoreRule,
    NotAnEvent,
    ProposalList,
    ProposalsQuery,
    ProposalView,
    RejectBody,
    ScanInProgress,
    ScanOutcome,
    ScanView,
    handle_event,
    purge,
)
from shared.platform import clock, safe_json
from shared.platform.auth import Caller, Role, Scope
from shared.platform.errors import Conflict, NotFound, StoreUnavailable
from shared.platform.http import problems
from shared.platform.http.endpoint import endpoint
from shared.platform.http.responses import JsonResult
from shared.platform.logs import app_logger, ids
from shared.platform.rejections import record_rejection
from shared.platform.storage.clients import shared_host_storage
from shared.platform.telemetry import message_span
from shared.wiring import gitops as gitops_wiring
from shared.wiring import inventory as wiring
from shared.wiring.settings import get_settings, setting_binding

bp = trigger_blueprint(http_auth_level=func.AuthLevel.ANONYMOUS)
log = app_logger("inventory")

SCAN_SCHEDULE = setting_binding("RuntimeCloud:Inventory:ScanSchedule")
PURGE_SCHEDULE = setting_binding("RuntimeCloud:Inventory:PurgeSchedule")


# -- environments and their inventory ------------------------------------------------------------


@bp.route(route="runtime-cloud/environments", methods=["GET"])
@endpoint(scopes=[Scope.RUNTIME_READ], query=EnvironmentsQuery, responses={200: EnvironmentList})
def inventory_list_environments(req: func.HttpRequest, caller: Caller, query: EnvironmentsQuery) -> dict[str, Any]:
    return wiring.views().environments(caller.tenant, limit=query.limit, continuation=query.continuation)


@bp.route(route="runtime-cloud/environments/{environment}/inventory", methods=["GET"])
@endpoint(scopes=[Scope.RUNTIME_READ], responses={200: InventoryView})
def inventory_get(req: func.HttpRequest, caller: Caller) -> dict[str, Any]:
    return wiring.views().inventory(caller.tenant, req.route_params["environment"])


@bp.route(route="runtime-cloud/environments/{environment}/scan", methods=["POST"])
@bp.durable_client_input(client_name="client")
@endpoint(
    scopes=[Scope.RUNTIME_WRITE],
    responses={200: ScanOutcome, 202: ScanView},
    response_headers={202: ("Location", "Retry-After")},
    problems=(409,),
)
async def inventory_scan_now(
    req: func.HttpRequest, client: df.DurableOrchestrationClient, caller: Caller
) -> JsonResult:
    """Scan one environment now. The scan is an orchestration (it may outlast Azure's 230 s for an HTTP
    answer): ended within ``ScanWaitSeconds``, 200 with its outcome (409 ``scan-in-progress`` while
    another scan of it runs); still running, 202 with its status URL."""
    environment = req.route_params["environment"]
    scan_id = await start_scan(client, caller.tenant, environment)
    wait = get_settings().runtime_cloud.inventory.scan_wait_seconds
    scan = await wait_for_scan(client, caller.tenant, environment, scan_id=scan_id, wait_seconds=wait)
    if scan is None:
        running = ScanState(scan_id, environment, "running")
        return JsonResult(
            running.public_view(),
            status=202,
            headers={"Location": status_url(environment, scan_id), "Retry-After": "5"},
        )
    if scan.refusal == "not-found":
        raise NotFound(scan.detail)
    if scan.refusal == STORE_UNAVAILABLE:
        raise StoreUnavailable(scan.detail)
    if scan.refusal is not None:
        raise Conflict(scan.refusal, scan.detail)
    if scan.outcome is None:
        raise RuntimeError(f"scan {scan_id} of {environment} failed")  # logged; the caller gets a 500
    return JsonResult({**scan.outcome, "scan_id": scan_id})


@bp.route(route="runtime-cloud/environments/{environment}/scans/{scan_id}", methods=["GET"])
@bp.durable_client_input(client_name="client")
@endpoint(scopes=[Scope.RUNTIME_READ], responses={200: ScanView})
async def inventory_get_scan(
    req: func.HttpRequest, client: df.DurableOrchestrationClient, caller: Caller
) -> JsonResult:
    """A scan started by ``POST .../scan``: ``running`` (with ``Retry-After``), ``completed`` with its
    ``outcome``, ``refused`` or ``failed``. Another tenant's scan is not found."""
    scan = await read_scan(client, caller.tenant, req.route_params["environment"], scan_id=req.route_params["scan_id"])
    if scan is None:
        raise NotFound("scan")
    return JsonResult(scan.public_view(), headers={"Retry-After": "5"} if scan.state == "running" else {})


@bp.route(route="runtime-cloud/environments/{environment}/findings", methods=["GET"])
@endpoint(scopes=[Scope.RUNTIME_READ], query=FindingsQuery, responses={200: FindingList})
def inventory_list_findings(req: func.HttpRequest, caller: Caller, query: FindingsQuery) -> dict[str, Any]:
    return wiring.views().findings(
        caller.tenant,
        req.route_params["environment"],
        state=query.state,
        limit=query.limit,
        continuation=query.continuation,
    )


@bp.route(route="runtime-cloud/environments/{environment}/findings/{finding_id}", methods=["GET"])
@endpoint(scopes=[Scope.RUNTIME_READ], responses={200: FindingView})
def inventory_get_finding(req: func.HttpRequest, caller: Caller) -> dict[str, Any]:
    return wiring.views().finding(caller.tenant, req.route_params["environment"], req.route_params["finding_id"])


# -- ignore rules ------------------------------------------------------------------------------------


@bp.route(route="runtime-cloud/environments/{environment}/ignore-rules", methods=["GET"])
@endpoint(scopes=[Scope.RUNTIME_READ], query=IgnoreRulesQuery, responses={200: IgnoreRuleList})
def inventory_list_ignore_rules(req: func.HttpRequest, caller: Caller, query: IgnoreRulesQuery) -> dict[str, Any]:
    return wiring.views().rules(
        caller.tenant, req.route_params["environment"], limit=query.limit, continuation=query.continuation
    )


@bp.route(route="runtime-cloud/environments/{environment}/ignore-rules", methods=["POST"])
@endpoint(
    scopes=[Scope.RUNTIME_WRITE],
    roles=[Role.OPERATOR],
    body=NewIgnoreRule,
    responses={201: IgnoreRuleView},
    response_headers={201: ("Location",)},
)
def inventory_create_ignore_rule(req: func.HttpRequest, caller: Caller, body: NewIgnoreRule) -> JsonResult:
    environment = req.route_params["environment"]
    rule = wiring.rule_book().create(caller.tenant, environment, body, author=caller.principal)
    location = f"/runtime-cloud/environments/{environment}/ignore-rules/{rule.id}"
    return JsonResult(rule.public_view(clock.utcnow()), status=201, headers={"Location": location})


@bp.route(route="runtime-cloud/environments/{environment}/ignore-rules/{rule_id}", methods=["DELETE"])
@endpoint(scopes=[Scope.RUNTIME_WRITE], roles=[Role.OPERATOR], responses={204: None})
def inventory_delete_ignore_rule(req: func.HttpRequest, caller: Caller) -> func.HttpResponse:
    wiring.rule_book().delete(caller.tenant, req.route_params["environment"], req.route_params["rule_id"])
    return func.HttpResponse(status_code=204)


# -- proposals ---------------------------------------------------------------------------------------


@bp.route(route="runtime-cloud/proposals", methods=["GET"])
@endpoint(scopes=[Scope.RUNTIME_READ], query=ProposalsQuery, responses={200: ProposalList}, problems=(404,))
def inventory_list_proposals(req: func.HttpRequest, caller: Caller, query: ProposalsQuery) -> dict[str, Any]:
    return wiring.views().proposals(
        caller.tenant,
        environment=query.environment,
        state=query.state.value if query.state else None,
        limit=query.limit,
        continuation=query.continuation,
    )


@bp.route(route="runtime-cloud/proposals/{id}", methods=["GET"])
@endpoint(scopes=[Scope.RUNTIME_READ], responses={200: ProposalView})
def inventory_get_proposal(req: func.HttpRequest, caller: Caller) -> dict[str, Any]:
    return wiring.views().proposal(caller.tenant, req.route_params["id"])


@bp.route(route="runtime-cloud/proposals/{id}/accept", methods=["POST"])
@bp.durable_client_input(client_name="client")
@endpoint(
    scopes=[Scope.RUNTIME_WRITE],
    roles=[Role.OPERATOR],
    body=AcceptBody,
    responses={200: AcceptedProposal},
    problems=(409,),
)
async def inventory_accept_proposal(
    req: func.HttpRequest, client: df.DurableOrchestrationClient, caller: Caller, body: AcceptBody
) -> dict[str, Any]:
    """Accept with ``{"option": "revert" | "adopt" | "accept"}`` (the whole proposal) or
    ``{"decisions": [{"finding": id, "option": ...}]}`` (each finding); revert and adopt start a provisioning run.
    Adopting drift of an environment that follows a Git branch is 409 ``environment-follows-git`` with the
    specification to commit (``specification_yaml``): Git is its source of truth."""
    try:  # Storage calls are blocking: they run in a worker thread, keeping the event loop free.
        await to_thread(gitops_wiring.check_proposal_adoption, caller.tenant, req.route_params["id"], body)
    except FollowsGit as refusal:
        raise problems.Problem(409, refusal.kind, "Conflict", str(refusal), extensions=refusal.extensions) from None
    accepted = await to_thread(
        wiring.decisions().accept,
        caller.tenant,
        req.route_params["id"],
        body,
        operator=caller.principal,
        client=caller.client_id,
    )
    view = accepted.proposal.public_view()
    if accepted.run is not None:
        run = accepted.run
        await start_and_wake(client, run, created=accepted.run_created)
        view["run"] = {"run_id": run.id, "state": run.state.value, "status_url": status_path(run.id)}
    return view


@bp.route(route="runtime-cloud/proposals/{id}/reject", methods=["POST"])
@endpoint(
    scopes=[Scope.RUNTIME_WRITE], roles=[Role.OPERATOR], body=RejectBody, responses={200: ProposalView}, problems=(409,)
)
def inventory_reject_proposal(req: func.HttpRequest, caller: Caller, body: RejectBody) -> dict[str, Any]:
    return (
        wiring.decisions()
        .reject(caller.tenant, req.route_params["id"], body, operator=caller.principal, client=caller.client_id)
        .public_view()
    )


# -- timers and the inbox ----------------------------------------------------------------------------


@bp.timer_trigger(arg_name="timer", schedule=SCAN_SCHEDULE)
def inventory_scan(timer: func.TimerRequest) -> None:
    """Scan every environment with applied state; one environment's failure never stops the others."""
    scanner = wiring.scanner()
    counts = {"fresh": 0, "stale": 0, "skipped": 0}
    environments = wiring.scan_targets()
    shared = scanner.tick_reads(environments)  # one listing per target account for the whole tick
    for tenant, environment in environments:
        try:
            outcome = scanner.scan(tenant, environment, shared)
            counts["stale" if outcome.error else "fresh"] += 1
        except (ScanInProgress, NotFound):  # another scan has it; or known only from events, not (yet) declared
            counts["skipped"] += 1
        except Exception:  # logged with its stack; the next environment goes on
            counts["skipped"] += 1
            log.exception(
                "scan of %s/%s failed", tenant, environment, extra=ids(tenant=tenant, environment=environment)
            )
    log.info("inventory scan: %s (%d account listing(s))", counts, shared.listed)


@bp.timer_trigger(arg_name="timer", schedule=PURGE_SCHEDULE)
def inventory_purge(timer: func.TimerRequest) -> None:
    result = purge(wiring.store(), get_settings().runtime_cloud.inventory.finding_retention_days)
    log.info("inventory purge: %s", result)


@bp.queue_trigger(arg_name="message", queue_name="inventory-inbox", connection="AzureWebJobsStorage")
def inventory_inbox(message: func.QueueMessage) -> None:
    """Provisioning's events; one that cannot be read is kept with the reason, never retried in vain."""
    body = message.get_body().decode("utf-8", errors="replace")
    with message_span("inventory event received", body):  # the event's traceparent: the run that emitted it
        try:
            event = safe_json.loads(body)
            if not isinstance(event, dict):
                raise NotAnEvent("not a JSON object")
            outcome = handle_event(wiring.store(), event)
        except (safe_json.MalformedJson, NotAnEvent) as error:
            record_rejection(shared_host_storage(), "inventory-inbox", message.id, body, f"not an event: {error}")
            return
        log.info("inventory inbox: event %s %s", event.get("id"), outcome)
