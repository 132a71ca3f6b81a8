"""GitOps triggers: binding environments to Git (Operators), push webhooks, the poll, and the sync queue.

Thin: parse, authorise, call ``shared.gitops``, shape the answer. Reads need
``factory.runtime.read``; binding, unbinding, suspending, resuming and
syncing need ``factory.runtime.write`` and the role ``Operator``. The tenant
comes from the token: another tenant's binding answers 404.

The webhook is the one route without a bearer token: the Git host proves it
knows the binding's secret by signing the body (``X-Hub-Signature-256``) or by
Basic authentication (Azure DevOps). An unknown binding, an unresolvable
secret and a bad signature get the same 404, so nothing about a tenant's
bindings leaks. A webhook only queues a sync (``gitops-sync``); the sync reads
the branch itself, whatever the payload says.

The poll (``RuntimeCloud:GitOps:PollSchedule``) queues one sync per binding
that is not suspended; the queue trigger runs each sync and starts the run it
declared. A sync is idempotent per commit, so duplicate messages, a poll racing
a webhook and a retried message after a crash all end in one run.
"""

from __future__ import annotations

import hmac
import random
import re
import uuid
from asyncio import to_thread
from collections.abc import Callable
from typing import Any, TypeVar

import azure.durable_functions as df
import azure.functions as func
from azure.core.exceptions import ServiceRequestError, ServiceResponseError
from pydantic import ValidationError

from functions.blueprint import trigger_blueprint
from orchestrations.provisioning_client import start_and_wake
from shared.desired_state.api import NAME_PATTERN
from shared.gitops.api import (
    BUSY_RETRIES,
    BindingRequest,
    GitOpsBindingView,
    GitOpsStatusView,
    GitOpsSyncView,
    GitOpsWebhookAnswer,
    SuspendRequest,
    SyncBusy,
    SyncMessage,
    SyncOutcome,
    Trigger,
    UnreadablePayload,
    read_push,
    secrets,
    signatures,
)
from shared.platform import safe_json
from shared.platform.auth import Caller, Role, Scope
from shared.platform.errors import NotFound, StoreUnavailable
from shared.platform.field_errors import field_errors
from shared.platform.http import problems
from shared.platform.http.contract import CONTRACT_ATTRIBUTE, Contract
from shared.platform.http.endpoint import endpoint
from shared.platform.http.responses import JsonResult, json_response
from shared.platform.identifiers import TENANT_PATTERN, is_tenant
from shared.platform.logs import app_logger, ids
from shared.platform.rejections import record_rejection
from shared.platform.storage.clients import shared_host_storage
from shared.platform.telemetry import message_span
from shared.wiring import gitops as wiring
from shared.wiring.settings import get_settings, setting_binding

bp = trigger_blueprint(http_auth_level=func.AuthLevel.ANONYMOUS)
log = app_logger("gitops")

SYNC_QUEUE = "gitops-sync"
BINDING = "runtime-cloud/environments/{environment}/gitops"
ENVIRONMENT = {"environment": NAME_PATTERN}
POLL_SCHEDULE = setting_binding("RuntimeCloud:GitOps:PollSchedule")


# -- bindings (Operators) -----------------------------------------------------------------------------


@bp.route(route=BINDING, methods=["PUT"])
@endpoint(
    scopes=[Scope.RUNTIME_WRITE],
    roles=[Role.OPERATOR],
    body=BindingRequest,
    path=ENVIRONMENT,
    responses={200: GitOpsBindingView, 201: GitOpsBindingView},
    response_headers={201: ("Location",)},
)
def gitops_bind(req: func.HttpRequest, caller: Caller, body: BindingRequest) -> JsonResult:
    """Bind the environment to a file on a branch of an allowed repository (or re-point its binding)."""
    environment = req.route_params["environment"]
    binding, created = wiring.bindings().bind(caller.tenant, environment, body, caller.principal)
    location = f"/runtime-cloud/environments/{environment}/gitops"
    return JsonResult(binding.public_view(), status=201 if created else 200, headers={"Location": location})


@bp.route(route=BINDING, methods=["GET"])
@endpoint(scopes=[Scope.RUNTIME_READ], path=ENVIRONMENT, responses={200: GitOpsBindingView})
def gitops_get_binding(req: func.HttpRequest, caller: Caller) -> dict[str, Any]:
    return wiring.bindings().get(caller.tenant, req.route_params["environment"]).public_view()


@bp.route(route=BINDING, methods=["DELETE"])
@endpoint(scopes=[Scope.RUNTIME_WRITE], roles=[Role.OPERATOR], path=ENVIRONMENT, responses={204: None})
def gitops_unbind(req: func.HttpRequest, caller: Caller) -> func.HttpResponse:
    """Stop following Git. The environment keeps its runs, applied state and resources."""
    wiring.bindings().unbind(caller.tenant, req.route_params["environment"])
    return func.HttpResponse(status_code=204)


@bp.route(route=BINDING + "/suspend", methods=["POST"])
@endpoint(
    scopes=[Scope.RUNTIME_WRITE],
    roles=[Role.OPERATOR],
    body=SuspendRequest,
    body_required=False,
    path=ENVIRONMENT,
    responses={200: GitOpsBindingView},
)
def gitops_suspend(req: func.HttpRequest, caller: Caller, body: SuspendRequest) -> dict[str, Any]:
    """Suspend: no poll, webhook or queued sync reads or declares until resumed (repeating it is harmless)."""
    environment = req.route_params["environment"]
    return wiring.bindings().suspend(caller.tenant, environment, caller.principal, body.reason).public_view()


@bp.route(route=BINDING + "/resume", methods=["POST"])
@endpoint(scopes=[Scope.RUNTIME_WRITE], roles=[Role.OPERATOR], path=ENVIRONMENT, responses={200: GitOpsBindingView})
def gitops_resume(req: func.HttpRequest, caller: Caller) -> dict[str, Any]:
    """Resume, and queue a sync at once (it declares the head if it is new and the sync windows are open)."""
    binding = wiring.bindings().resume(caller.tenant, req.route_params["environment"], caller.principal)
    enqueue_sync(binding.tenant, binding.environment, Trigger.RESUME)
    return binding.public_view()


@bp.route(route=BINDING + "/status", methods=["GET"])
@endpoint(scopes=[Scope.RUNTIME_READ], path=ENVIRONMENT, responses={200: GitOpsStatusView})
def gitops_status(req: func.HttpRequest, caller: Caller) -> dict[str, Any]:
    """Last seen, declared and applied commits, how far the environment is behind the branch, the last error."""
    return wiring.bindings().status(caller.tenant, req.route_params["environment"])


@bp.route(route=BINDING + "/sync", methods=["POST"])
@bp.durable_client_input(client_name="client")
@endpoint(
    scopes=[Scope.RUNTIME_WRITE],
    roles=[Role.OPERATOR],
    path=ENVIRONMENT,
    responses={200: GitOpsSyncView},
    problems=(409,),
)
async def gitops_sync_now(
    req: func.HttpRequest, client: df.DurableOrchestrationClient, caller: Caller
) -> dict[str, Any]:
    """Read the branch now and declare its head if it is new (not gated by sync windows). 200 with the
    outcome, also when the read failed (``fetch-failed``, nothing declared); 409 when suspended."""
    environment = req.route_params["environment"]
    if not re.fullmatch(NAME_PATTERN, environment):
        raise NotFound("binding")
    outcome = await to_thread(wiring.reconciler().sync, caller.tenant, environment, Trigger.MANUAL)
    await _start(client, outcome)
    return outcome.public_view()


# -- webhooks (signed by the Git host) -------------------------------------------------------------------

_NOT_FOUND = problems.not_found
_UNKNOWN_KEY = b"no binding: compare against something all the same"


Webhook = TypeVar("Webhook", bound=Callable[..., object])

WEBHOOK_SECURITY: dict[str, dict[str, str]] = {
    "gitopsSignature": {
        "type": "apiKey",
        "in": "header",
        "name": signatures.SIGNATURE_HEADER,
        "description": "GitHub (or a relay): `sha256=` and the hex HMAC-SHA256 of the raw body, keyed with the "
        "binding's webhook secret (its `webhook_secret` reference, else RuntimeCloud:GitOps:WebhookSecret)",
    },
    "gitopsBasic": {
        "type": "http",
        "scheme": "basic",
        "description": "Azure DevOps service hooks: any user name, the binding's webhook secret as the password",
    },
}


def _webhook_contract(function: Webhook) -> Webhook:
    """Document the webhook in the API: it has no bearer token; the signature (or Basic) authenticates it,
    and a bad one answers the 404 of an unknown binding (so 401 is not among its answers)."""
    contract = Contract(
        description=inspect_doc(function),
        path={"tenant": TENANT_PATTERN, "environment": NAME_PATTERN},
        responses={200: GitOpsWebhookAnswer, 202: GitOpsWebhookAnswer},
        problems=(400, 404, 413),
        security=WEBHOOK_SECURITY,
    )
    setattr(function, CONTRACT_ATTRIBUTE, contract)
    return function


def inspect_doc(function: Callable[..., object]) -> str:
    return (function.__doc__ or "").strip()


@bp.route(route="runtime-cloud/gitops/webhooks/{tenant}/{environment}", methods=["POST"])
@_webhook_contract
def gitops_webhook(req: func.HttpRequest) -> func.HttpResponse:
    """A push webhook (GitHub ``push``, Azure DevOps ``git.push``), authenticated by the binding's secret:
    ``X-Hub-Signature-256: sha256=<HMAC-SHA256 of the body>`` or Basic authentication with the secret as
    password; no bearer token. 202 ``queued`` when it moved the bound branch (a sync reads the branch);
    200 ``ignored``, ``suspended`` or ``pong``. An unknown binding and a bad signature are the same 404."""
    try:
        answer, status = _webhook(req)
        return json_response(answer, status)
    except problems.Problem as problem:
        return problem.to_response(instance=_path(req))
    except (StoreUnavailable, ServiceRequestError, ServiceResponseError):
        unavailable = problems.service_unavailable("store-unavailable", "the runtime-cloud store did not answer", 5)
        return unavailable.to_response(instance=_path(req))
    except Exception as error:  # every failure is a problem document; no stack trace leaves the process
        reference = uuid.uuid4().hex
        log.error("unhandled error in gitops_webhook (reference %s)", reference, exc_info=error)
        return problems.internal_error(reference).to_response(instance=_path(req))


def _webhook(req: func.HttpRequest) -> tuple[dict[str, Any], int]:
    tenant, environment = req.route_params.get("tenant", ""), req.route_params.get("environment", "")
    if not is_tenant(tenant) or not re.fullmatch(NAME_PATTERN, environment):
        raise _NOT_FOUND()
    body = req.get_body()
    limit = get_settings().runtime_cloud.gitops.max_webhook_bytes
    if len(body) > limit:
        raise problems.payload_too_large(limit)
    current = wiring.store().get(tenant, environment)
    secret = _secret_of(current.binding.webhook_secret if current else None, known=current is not None)
    signed = signatures.is_signed(req.headers, body, secret)  # computed even for no binding: the same work
    if current is None or not signed or hmac.compare_digest(secret, _UNKNOWN_KEY):
        raise _NOT_FOUND()
    binding = current.binding
    try:
        push = read_push(req.headers, body)
    except UnreadablePayload as error:
        raise problems.bad_request(str(error)) from None
    if push.kind == "ping":
        return {"outcome": "pong"}, 200
    if push.kind != "push" or not push.moves(binding.branch):
        return {"outcome": "ignored", "detail": f"not a push to {binding.branch}"}, 200
    if binding.suspended:
        return {"outcome": "suspended", "detail": "the binding is suspended: nothing is read"}, 200
    enqueue_sync(tenant, environment, Trigger.WEBHOOK)
    log.info("gitops: %s push for %s/%s queued", push.provider, tenant, environment, extra=ids(tenant=tenant))
    return {"outcome": "queued"}, 202


def _secret_of(reference: str | None, *, known: bool) -> bytes:
    """The binding's secret (or the installation's), or a key nobody knows when there is none."""
    if not known:
        return _UNKNOWN_KEY
    try:
        return secrets.resolve(reference or get_settings().runtime_cloud.gitops.webhook_secret)
    except secrets.SecretUnavailable as error:
        log.warning("gitops webhook refused: %s", error)  # names the reference, never a value
        return _UNKNOWN_KEY


def _path(req: func.HttpRequest) -> str:
    from urllib.parse import urlsplit

    return urlsplit(str(req.url)).path


# -- the poll and the sync queue ----------------------------------------------------------------------


def enqueue_sync(tenant: str, environment: str, trigger: Trigger, attempt: int = 0, delay: int = 0) -> None:
    # Validated from its wire form: the trigger's value is one of the message's literals (poll, webhook, resume).
    message = SyncMessage.model_validate(
        {"tenant": tenant, "environment": environment, "trigger": trigger.value, "attempt": attempt}
    )
    queue = shared_host_storage().queue(SYNC_QUEUE)
    queue.send_message(message.model_dump_json(), visibility_timeout=delay or None)


@bp.timer_trigger(arg_name="timer", schedule=POLL_SCHEDULE)
def gitops_poll(timer: func.TimerRequest) -> None:
    """Queue one sync per binding that is not suspended; each is read and declared on its own."""
    active = wiring.store().active()
    for tenant, environment in active:
        enqueue_sync(tenant, environment, Trigger.POLL)
    log.info("gitops poll: %d binding(s) queued", len(active))


@bp.queue_trigger(arg_name="message", queue_name=SYNC_QUEUE, connection="AzureWebJobsStorage")
@bp.durable_client_input(client_name="client")
async def gitops_sync(message: func.QueueMessage, client: df.DurableOrchestrationClient) -> None:
    """One sync of one binding. A message that is not one is kept as a rejection, never retried in vain."""
    body = message.get_body().decode("utf-8", errors="replace")
    with message_span("gitops sync", body):
        try:
            request = SyncMessage.model_validate(safe_json.loads(body))
        except (safe_json.MalformedJson, ValidationError) as error:
            errors = (
                field_errors(error) if isinstance(error, ValidationError) else [{"path": "", "message": str(error)}]
            )
            await to_thread(record_rejection, shared_host_storage(), SYNC_QUEUE, message.id, body, "not a sync", errors)
            return
        trigger = Trigger(request.trigger)
        try:
            outcome = await to_thread(wiring.reconciler().sync, request.tenant, request.environment, trigger)
        except NotFound:
            log.info("gitops sync: %s/%s is no longer bound", request.tenant, request.environment)
            return
        except SyncBusy:
            await to_thread(_again, request, trigger)
            return
        await _start(client, outcome)


def _again(request: SyncMessage, trigger: Trigger) -> None:
    """Another commit is being declared: this sync comes back in a few seconds (jittered), a bounded number of times."""
    if request.attempt >= BUSY_RETRIES:
        log.warning("gitops sync of %s/%s given up: busy %d times", request.tenant, request.environment, BUSY_RETRIES)
        return
    enqueue_sync(request.tenant, request.environment, trigger, request.attempt + 1, random.randint(2, 8))


async def _start(client: df.DurableOrchestrationClient, outcome: SyncOutcome) -> None:
    """Start (idempotently) the run a sync declared; the provisioning reconciler covers a crash before this."""
    if outcome.run is not None and not outcome.run.state.is_final:
        await start_and_wake(client, outcome.run, created=outcome.run_created)
