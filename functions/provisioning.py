"""Provisioning triggers: declarations (HTTP and the promotions queue), approvals, reads."""

from __future__ import annotations

import json
import uuid
from asyncio import to_thread
from typing import Any, Literal

import azure.durable_functions as df
import azure.functions as func
from pydantic import ValidationError

from functions.blueprint import trigger_blueprint
from orchestrations.provisioning_client import ensure_started, notify_decision, start_and_wake, status_path, wake
from shared.iac.api import JobStore
from shared.platform import safe_json
from shared.platform.auth import Caller, Requester, Role, Scope
from shared.platform.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from shared.platform.field_errors import field_errors
from shared.platform.http import problems
from shared.platform.http.endpoint import endpoint
from shared.platform.http.responses import JsonResult
from shared.platform.identifiers import IDEMPOTENCY_KEY_PATTERN, is_idempotency_key
from shared.platform.logs import app_logger, ids
from shared.platform.rejections import record_rejection
from shared.platform.storage.clients import shared_host_storage
from shared.platform.telemetry import annotate, message_span
from shared.provisioning.api import (
    ApprovalMessage,
    CancelBody,
    DecisionBody,
    Declaration,
    EnvironmentSpecificationView,
    FailureReason,
    Outcome,
    Promotion,
    ReceiptView,
    ReleaseReference,
    Run,
    RunAccepted,
    RunList,
    RunRef,
    RunsQuery,
    RunView,
    SecretInSpecification,
    cancel,
    decide,
    decide_as_control_plane,
)
from shared.wiring import provisioning as wiring
from shared.wiring.neighbours import control_plane_is_authority
from shared.wiring.settings import get_settings, setting_binding

bp = trigger_blueprint(http_auth_level=func.AuthLevel.ANONYMOUS)
log = app_logger("provisioning")


# -- declaring desired state ------------------------------------------------------------------


@bp.route(route="runtime-cloud/specifications", methods=["POST"])
@bp.durable_client_input(client_name="client")
@endpoint(
    scopes=[Scope.RUNTIME_WRITE],
    body=Declaration,
    headers={"Idempotency-Key": IDEMPOTENCY_KEY_PATTERN},
    responses={202: RunAccepted},
    response_headers={202: ("Location",)},
    problems=(409,),
)
async def declare_specification(
    req: func.HttpRequest, client: df.DurableOrchestrationClient, caller: Caller, body: Declaration
) -> JsonResult:
    """Declare desired state; 202 with the run. ``Idempotency-Key`` makes retries name the same run."""
    key = _idempotency_key(req)
    service = wiring.service()
    # Storage calls are blocking: they run in a worker thread, keeping the event loop free.
    # A PlatformAdmin may loosen an environment's registered class or move its target (through a run that needs
    # what the registered class needs); anyone else is refused 422 (shared/provisioning/environment_rules.py).
    admin = caller.has_role(Role.PLATFORM_ADMIN)
    requester = Requester.of_caller(caller)
    if body.release is not None:  # resolved through DeliveryHost; a release it cannot resolve fails its run
        run, created = await to_thread(
            service.declare_release, caller.tenant, body.release, key, requester, platform_admin=admin
        )
    else:
        specification, source = await to_thread(service.specification_from, caller.tenant, body, platform_admin=admin)
        run, created = await to_thread(service.declare, specification, source, key, requester, platform_admin=admin)
    annotate(tenant=run.tenant, environment=run.environment, run=run.id)
    await start_and_wake(client, run, created=created)
    status_url = status_path(run.id)
    return JsonResult(
        RunAccepted(
            run_id=run.id, state=run.state, status_url=status_url, specification_digest=run.specification_digest
        ),
        status=202,
        headers={"Location": status_url},
    )


def _idempotency_key(req: func.HttpRequest) -> str:
    """The caller's ``Idempotency-Key`` (it becomes part of a table key), or a fresh one."""
    key: str | None = req.headers.get("Idempotency-Key")  # azure-functions leaves headers unannotated
    if key is None:
        return f"request-{uuid.uuid4()}"
    if not is_idempotency_key(key):
        raise problems.bad_request(
            "the Idempotency-Key header is 1-200 characters: letters, digits and "
            "'._:@+=~-', starting with a letter or digit"
        )
    return key


@bp.queue_trigger(arg_name="message", queue_name="promotions", connection="AzureWebJobsStorage")
@bp.durable_client_input(client_name="client")
async def promotion_received(message: func.QueueMessage, client: df.DurableOrchestrationClient) -> None:
    """A promotion from delivery. Bad messages are kept with the reason, never retried in vain."""
    body = message.get_body().decode("utf-8", errors="replace")
    with message_span("promotion received", body):
        run = await to_thread(_declare_promotion, message.id, body)
        if run is not None:
            annotate(tenant=run[0].tenant, environment=run[0].environment, run=run[0].id)
            await start_and_wake(client, run[0], created=run[1])


def _declare_promotion(message_id: str | None, body: str) -> tuple[Run, bool] | None:
    """The run a promotion names, or None when the message was kept as a rejection."""
    try:
        document = safe_json.loads(body)
        promotion = Promotion.model_validate(document)
        declaration = Declaration.model_validate(
            {k: v for k, v in document.items() if k in Declaration.model_fields and v is not None}
        )
    except (safe_json.MalformedJson, ValidationError, AttributeError) as error:
        errors = field_errors(error) if isinstance(error, ValidationError) else [{"path": "/", "message": str(error)}]
        kept = record_rejection(shared_host_storage(), "promotions", message_id, body, "not a promotion", errors)
        if isinstance(document := _safe_json(body), dict) and _has_identity(document):
            wiring.service().record_invalid_promotion(
                document["tenant"],
                document["environment"],
                document["promotion_id"],
                str(document.get("requested_by", "unknown")),
                body,
                "the promotion is malformed",
                kept,
            )
        log.warning("promotion message %s rejected: %s", message_id, errors)
        return None
    if declaration.release is not None:
        return _declare_release(promotion, declaration.release, message_id, body)
    service = wiring.service()
    try:
        specification, source = service.specification_from(promotion.tenant, declaration)
        if specification.environment != promotion.environment:
            raise InvalidInput(
                [{"path": "/specification/environment", "message": f"the promotion is for {promotion.environment}"}]
            )
    except InvalidInput as error:
        kept_body = _withheld(body) if isinstance(error, SecretInSpecification) else body
        _invalid_promotion(promotion, message_id, body, kept_body, error)
        return None
    try:
        requester = Requester.promoted_by(promotion.requested_by)  # delivery's word: never a system actor
        return service.declare(specification, source, promotion.promotion_id, requester)
    except InvalidInput as error:  # the environment's registration refused it (another declaration came first)
        _invalid_promotion(promotion, message_id, body, body, error)
        return None
    except Conflict as error:
        record_rejection(shared_host_storage(), "promotions", message_id, body, str(error))
        return None


def _declare_release(
    promotion: Promotion, release: ReleaseReference, message_id: str | None, body: str
) -> tuple[Run, bool] | None:
    """A promotion naming a release: its run (one that fails ``release-unresolved`` when DeliveryHost cannot
    resolve it), or None when it was kept as a rejection (and, when invalid, recorded as a failed run)."""
    try:
        if release.environment != promotion.environment:
            raise InvalidInput(
                [{"path": "/release/environment", "message": f"the promotion is for {promotion.environment}"}]
            )
        requester = Requester.promoted_by(promotion.requested_by)  # delivery's word: never a system actor
        return wiring.service().declare_release(promotion.tenant, release, promotion.promotion_id, requester)
    except InvalidInput as error:  # what the release holds is invalid, or its environment's registration refused it
        _invalid_promotion(promotion, message_id, body, body, error)  # the message holds no desired state
        return None
    except Conflict as error:
        record_rejection(shared_host_storage(), "promotions", message_id, body, str(error))
        return None


def _invalid_promotion(
    promotion: Promotion, message_id: str | None, body: str, kept_body: str, error: InvalidInput
) -> None:
    """Keep the message (``kept_body``) with the reason, and record the promotion's run as failed."""
    kept = record_rejection(
        shared_host_storage(), "promotions", message_id, kept_body, "invalid specification", error.errors
    )
    wiring.service().record_invalid_promotion(
        promotion.tenant,
        promotion.environment,
        promotion.promotion_id,
        promotion.requested_by,
        body,
        str(error),
        kept,
    )


# -- approvals ------------------------------------------------------------------------------------


@bp.route(route="runtime-cloud/runs/{id}/approve", methods=["POST"])
@bp.durable_client_input(client_name="client")
@endpoint(
    scopes=[Scope.RUNTIME_WRITE], roles=[Role.OPERATOR], body=DecisionBody, responses={200: RunView}, problems=(409,)
)
async def approve_run(
    req: func.HttpRequest, client: df.DurableOrchestrationClient, caller: Caller, body: DecisionBody
) -> dict[str, Any]:
    return await _decide(req, client, caller, body, "approved")


@bp.route(route="runtime-cloud/runs/{id}/reject", methods=["POST"])
@bp.durable_client_input(client_name="client")
@endpoint(
    scopes=[Scope.RUNTIME_WRITE], roles=[Role.OPERATOR], body=DecisionBody, responses={200: RunView}, problems=(409,)
)
async def reject_run(
    req: func.HttpRequest, client: df.DurableOrchestrationClient, caller: Caller, body: DecisionBody
) -> dict[str, Any]:
    return await _decide(req, client, caller, body, "rejected")


async def _decide(
    req: func.HttpRequest,
    client: df.DurableOrchestrationClient,
    caller: Caller,
    body: DecisionBody,
    decision: Literal["approved", "rejected"],
) -> dict[str, Any]:
    run = await to_thread(
        decide,
        wiring.store(),
        tenant=caller.tenant,
        run_id=req.route_params["id"],
        decided_by=caller.principal,
        decision=decision,
        plan_digest=body.plan_digest,
        reason=body.reason,
        channel="http",
        client=caller.client_id,
    )
    await notify_decision(client, run.id)
    return run.public_view()


@bp.route(route="runtime-cloud/runs/{id}/cancel", methods=["POST"])
@bp.durable_client_input(client_name="client")
@endpoint(
    scopes=[Scope.RUNTIME_WRITE],
    roles=[Role.OPERATOR],
    body=CancelBody,
    body_required=False,
    responses={200: RunView},
    problems=(409,),
)
async def cancel_run(
    req: func.HttpRequest, client: df.DurableOrchestrationClient, caller: Caller, body: CancelBody
) -> dict[str, Any]:
    """Cancel a run that has not started applying (queued, planning or awaiting approval)."""
    run = await to_thread(
        cancel,
        wiring.store(),
        jobs=JobStore(shared_host_storage()),
        tenant=caller.tenant,
        run_id=req.route_params["id"],
        cancelled_by=caller.principal,
        reason=body.reason,
        client=caller.client_id,
    )
    await notify_decision(client, run.id)
    await wake(client, [run.id])
    return run.public_view()


@bp.queue_trigger(arg_name="message", queue_name="approvals", connection="AzureWebJobsStorage")
@bp.durable_client_input(client_name="client")
async def approval_received(message: func.QueueMessage, client: df.DurableOrchestrationClient) -> None:
    """Approvals from ControlPlaneApi (only while it is the environments' authority): the same rules as
    over HTTP, recorded with the approver it names and ``via: control-plane``; refusals are kept."""
    body = message.get_body().decode("utf-8", errors="replace")
    with message_span("approval received", body):
        await _approval(body, message.id, client)


async def _approval(body: str, message_id: str | None, client: df.DurableOrchestrationClient) -> None:
    try:
        approval = ApprovalMessage.model_validate_json(body)
        annotate(tenant=approval.tenant, run=approval.run_id)
        run = await to_thread(
            decide_as_control_plane,
            wiring.store(),
            control_plane_is_authority=control_plane_is_authority(get_settings()),
            tenant=approval.tenant,
            environment=approval.environment,
            run_id=approval.run_id,
            approver=approval.approver,
            approver_client=approval.approver_client,
            decision="approved" if approval.decision == "approve" else "rejected",
            plan_digest=approval.plan_digest,
            reason=approval.reason,
        )
    except ValidationError as error:
        await to_thread(
            record_rejection,
            shared_host_storage(),
            "approvals",
            message_id,
            body,
            "not an approval",
            field_errors(error),
        )
        return
    except (Conflict, PermissionDenied, NotFound) as error:
        await to_thread(record_rejection, shared_host_storage(), "approvals", message_id, body, str(error))
        return
    await notify_decision(client, run.id)


# -- recovery ---------------------------------------------------------------------------------------

ENDED = {
    df.OrchestrationRuntimeStatus.Completed,
    df.OrchestrationRuntimeStatus.Failed,
    df.OrchestrationRuntimeStatus.Terminated,
}


@bp.timer_trigger(
    arg_name="timer",
    schedule=setting_binding("RuntimeCloud:Provisioning:ReconcileSchedule"),
)
@bp.durable_client_input(client_name="client")
async def provisioning_reconciler(timer: func.TimerRequest, client: df.DurableOrchestrationClient) -> None:
    """The explicit recovery path for stuck runs: a run whose orchestration never started is
    started; a run whose orchestration ended without finishing it is failed and its
    environment freed, so a crash can never hold an environment forever."""
    runs = await to_thread(wiring.store().unfinished_runs)
    log.info("reconciler: %d unfinished run(s)", len(runs))
    for run in runs:
        status = await client.get_status(run.id)
        if status is None or status.runtime_status is None:
            log.warning(
                "reconciler: starting the orchestration of run %s",
                run.id,
                extra=ids(tenant=run.tenant, environment=run.environment, run=run.id),
            )
            await ensure_started(client, run)
        elif status.runtime_status in ENDED:
            detail = f"its orchestration ended {status.runtime_status.value}: {status.output or ''}".strip()
            log.warning(
                "reconciler: run %s %s",
                run.id,
                detail,
                extra=ids(tenant=run.tenant, environment=run.environment, run=run.id),
            )
            ref = RunRef(run.tenant, run.environment, run.id)
            waiting = await to_thread(
                wiring.steps().finish, ref, Outcome.FAILED, FailureReason.APPLY_FAILED.value, detail
            )
            await wake(client, waiting)


# -- reads ------------------------------------------------------------------------------------------


@bp.route(route="runtime-cloud/runs", methods=["GET"])
@endpoint(scopes=[Scope.RUNTIME_READ], query=RunsQuery, responses={200: RunList})
def list_runs(req: func.HttpRequest, caller: Caller, query: RunsQuery) -> dict[str, Any]:
    """The tenant's runs, a page at a time, by environment then run id (filter by environment and state)."""
    runs, continuation = wiring.store().runs_page(
        caller.tenant, query.environment, query.state, limit=query.limit, continuation=query.continuation
    )
    return {"runs": [run.public_view() for run in runs], "continuation": continuation}


@bp.route(route="runtime-cloud/runs/{id}", methods=["GET"])
@endpoint(scopes=[Scope.RUNTIME_READ], responses={200: RunView})
def get_run(req: func.HttpRequest, caller: Caller) -> dict[str, Any]:
    return wiring.service().run(caller.tenant, req.route_params["id"]).public_view()


@bp.route(route="runtime-cloud/runs/{id}/receipts/{kind}", methods=["GET"])
@endpoint(scopes=[Scope.RUNTIME_READ], path={"kind": "plan|apply"}, responses={200: ReceiptView})
def get_receipt(req: func.HttpRequest, caller: Caller) -> ReceiptView:
    kind = req.route_params["kind"]
    if kind not in ("plan", "apply"):
        raise NotFound(f"no {kind} receipt")
    run = wiring.service().run(caller.tenant, req.route_params["id"])
    expected = run.plan_digest if kind == "plan" else run.apply_receipt_digest
    if not expected:
        raise NotFound(f"run {run.id} has no {kind} receipt yet")
    document, digest = wiring.receipts().read(run.tenant, run.environment, run.id, kind)
    return ReceiptView(
        run_id=run.id, kind=kind, digest=digest, expected_digest=expected, verified=digest == expected, receipt=document
    )


@bp.route(route="runtime-cloud/environments/{environment}/specification", methods=["GET"])
@endpoint(scopes=[Scope.RUNTIME_READ], responses={200: EnvironmentSpecificationView})
def get_environment_specification(req: func.HttpRequest, caller: Caller) -> dict[str, Any]:
    return wiring.service().environment_specification(caller.tenant, req.route_params["environment"])


# -- helpers ------------------------------------------------------------------------------------------


def _safe_json(body: str) -> Any:
    try:
        return safe_json.loads(body)
    except safe_json.MalformedJson:
        return None


def _withheld(body: str) -> str:
    """The promotion as kept in its rejection record when it carries a secret: without its desired state."""
    document = _safe_json(body)
    if not isinstance(document, dict):
        return "(withheld: the message holds a secret value)"
    for name in ("specification", "specification_text"):
        if name in document:
            document[name] = "(withheld: it holds a secret value; see errors)"
    return json.dumps(document)


def _has_identity(document: dict[str, Any]) -> bool:
    """Enough to name a run: a well-formed tenant, environment and promotion id."""
    try:
        Promotion.model_validate({"requested_by": "unknown", **document})
    except ValidationError:
        return False
    return True
