"""The policy gate's HTTP API: the effective policy of an environment, dry runs, and exceptions.

A dry run resolves the specification as a declaration would, plans it with its
runner against its target (a read), and checks the plan: no run is created and
nothing is written (no snapshot, no receipt). Exceptions are made and revoked
by an Operator; the tenant is the token's, and an environment the tenant has
never declared answers 404, as does another tenant's exception.

The ``policy_purge`` timer (``RuntimeCloud:Policy:PurgeSchedule``, daily) deletes
exception rows that ended (expired or were revoked) more than
``ExceptionRetentionDays`` ago. Bundle snapshots (``policy-bundles/``) are never
purged: they are what a receipt's digest leads back to.
"""

from __future__ import annotations

from typing import Any

import azure.functions as func

from functions.blueprint import trigger_blueprint
from shared.iac.api import RunnerError, TargetUnreachable, runner_for
from shared.platform import clock
from shared.platform.auth import Caller, Requester, Role, Scope
from shared.platform.errors import InvalidInput, NotFound
from shared.platform.http import problems
from shared.platform.http.endpoint import endpoint
from shared.platform.http.responses import JsonResult
from shared.platform.identifiers import IDEMPOTENCY_KEY_PATTERN, is_idempotency_key
from shared.platform.logs import app_logger
from shared.platform.targets import target_for
from shared.policy.api import (
    DryRunVerdict,
    EffectiveBundle,
    EffectivePolicy,
    NewPolicyException,
    PlanFacts,
    PolicyException,
    PolicyExceptionList,
    PolicyExceptionsQuery,
    PolicyExceptionView,
    PolicyUnavailable,
    check_expiry,
)
from shared.provisioning.api import Declaration, ReleaseUnresolved
from shared.wiring import policy as wiring
from shared.wiring import provisioning
from shared.wiring.settings import get_settings, setting_binding

bp = trigger_blueprint(http_auth_level=func.AuthLevel.ANONYMOUS)

EXCEPTION_ID = r"^exc-[0-9a-f]{20}$"
PURGE_SCHEDULE = setting_binding("RuntimeCloud:Policy:PurgeSchedule")
log = app_logger("policy")


# -- the effective policy ---------------------------------------------------------------------------


@bp.route(route="runtime-cloud/environments/{environment}/policy", methods=["GET"])
@endpoint(scopes=[Scope.RUNTIME_READ], responses={200: EffectivePolicy}, problems=(503,))
def policy_effective(req: func.HttpRequest, caller: Caller) -> dict[str, Any]:
    """The bundle that checks this environment's plans (its layers and digest) and the exceptions in force."""
    environment = req.route_params["environment"]
    environment_class = _environment_class(caller.tenant, environment)
    bundle = _load(caller.tenant, environment_class)
    moment = clock.utcnow()
    document = bundle.document() if bundle else {"digest": None, "layers": []}
    return {
        "environment": environment,
        "environment_class": environment_class,
        "source": wiring.gate().source,
        "bundle_digest": document["digest"],
        "layers": document["layers"],
        "exceptions": [e.public_view(moment) for e in wiring.exceptions().active(caller.tenant, environment, moment)],
    }


# -- dry run ------------------------------------------------------------------------------------------


@bp.route(route="runtime-cloud/policy/dry-run", methods=["POST"])
@endpoint(scopes=[Scope.RUNTIME_WRITE], body=Declaration, responses={200: DryRunVerdict}, problems=(503,))
def policy_dry_run(req: func.HttpRequest, caller: Caller, body: Declaration) -> dict[str, Any]:
    """Check a specification against the effective policy without declaring it: no run, nothing written."""
    try:
        specification, _ = provisioning.service().specification_from(caller.tenant, body)
    except ReleaseUnresolved as error:  # a release is checked as what DeliveryHost says it holds
        if error.unknown:
            raise InvalidInput([{"path": "/release", "message": str(error)}]) from None
        raise problems.service_unavailable("release-unresolved", str(error), 30) from None
    settings = get_settings().runtime_cloud
    target = target_for(settings.targets, specification.target, caller.tenant)
    if target is None:  # specification_from refuses unknown targets; a target removed since is the same answer
        raise InvalidInput([{"path": "/specification/target", "message": "not a configured target"}])
    environment_class = specification.environment_class.value
    bundle = _load(caller.tenant, environment_class)  # before the plan, as a run does: fail fast
    try:
        plan = runner_for(specification.runner, settings.iac).plan(specification, target)
    except TargetUnreachable:
        raise problems.service_unavailable("target-unreachable", "the target did not answer", 30) from None
    except RunnerError as error:
        raise InvalidInput([{"path": "/specification", "message": f"cannot be planned: {error}"}]) from None
    facts = PlanFacts.of(
        tenant=caller.tenant,
        environment=specification.environment,
        environment_class=environment_class,
        target=target,
        requester=Requester.of_caller(caller),
        specification=specification.model_dump(mode="json", exclude_none=True),
        changes=plan.changes,
    )
    verdict = wiring.gate().check(bundle, facts, record=False)
    return {
        "environment": specification.environment,
        "environment_class": environment_class,
        "plan_counts": plan.counts,
        "requires_approval": settings.provisioning.requires_approval(environment_class),
        "summary": verdict.summary().model_dump(mode="json"),
        "verdict": verdict.model_dump(mode="json"),
    }


# -- exceptions ------------------------------------------------------------------------------------------


@bp.route(route="runtime-cloud/environments/{environment}/policy/exceptions", methods=["POST"])
@endpoint(
    scopes=[Scope.RUNTIME_WRITE],
    roles=[Role.OPERATOR],
    body=NewPolicyException,
    headers={"Idempotency-Key": IDEMPOTENCY_KEY_PATTERN},
    responses={201: PolicyExceptionView, 200: PolicyExceptionView},
    response_headers={201: ("Location",)},
    problems=(409,),
)
def policy_create_exception(req: func.HttpRequest, caller: Caller, body: NewPolicyException) -> JsonResult:
    """Let one rule's violations through for one resource (or ``*``) of this environment, until it expires."""
    environment = req.route_params["environment"]
    _environment_class(caller.tenant, environment)
    now = clock.utcnow()
    try:
        check_expiry(body.expires_at, now, get_settings().runtime_cloud.policy.max_exception_days)
    except ValueError as error:
        raise InvalidInput([{"path": "/expires_at", "message": str(error)}]) from None
    key = req.headers.get("Idempotency-Key")
    if key is not None and not is_idempotency_key(key):
        raise problems.bad_request("the Idempotency-Key header is 1-200 characters: letters, digits and '._:@+=~-'")
    exception, created = wiring.exceptions().create(
        caller.tenant, environment, body, caller.principal, caller.client_id, now, key
    )
    location = f"/runtime-cloud/environments/{environment}/policy/exceptions/{exception.id}"
    return JsonResult(exception.public_view(now), status=201 if created else 200, headers={"Location": location})


@bp.route(route="runtime-cloud/environments/{environment}/policy/exceptions", methods=["GET"])
@endpoint(scopes=[Scope.RUNTIME_READ], query=PolicyExceptionsQuery, responses={200: PolicyExceptionList})
def policy_list_exceptions(req: func.HttpRequest, caller: Caller, query: PolicyExceptionsQuery) -> dict[str, Any]:
    """The environment's exceptions (active, expired and revoked), a page at a time in exception id order."""
    environment = req.route_params["environment"]
    _environment_class(caller.tenant, environment)
    moment = clock.utcnow()
    found, following = wiring.exceptions().page(
        caller.tenant, environment, limit=query.limit, continuation=query.continuation
    )
    return {"exceptions": [e.public_view(moment) for e in found], "continuation": following}


@bp.route(route="runtime-cloud/environments/{environment}/policy/exceptions/{exception_id}", methods=["GET"])
@endpoint(scopes=[Scope.RUNTIME_READ], path={"exception_id": EXCEPTION_ID}, responses={200: PolicyExceptionView})
def policy_get_exception(req: func.HttpRequest, caller: Caller) -> dict[str, Any]:
    exception = _exception(caller, req)
    return exception.public_view(clock.utcnow())


@bp.route(route="runtime-cloud/environments/{environment}/policy/exceptions/{exception_id}", methods=["DELETE"])
@endpoint(
    scopes=[Scope.RUNTIME_WRITE],
    roles=[Role.OPERATOR],
    path={"exception_id": EXCEPTION_ID},
    responses={200: PolicyExceptionView},
)
def policy_revoke_exception(req: func.HttpRequest, caller: Caller) -> dict[str, Any]:
    """Revoke an exception (idempotent); the record stays, since plan receipts name it."""
    exception = _exception(caller, req)
    now = clock.utcnow()
    return wiring.exceptions().revoke(caller.tenant, exception.id, caller.principal, now).public_view(now)


@bp.timer_trigger(arg_name="timer", schedule=PURGE_SCHEDULE)
def policy_purge(timer: func.TimerRequest) -> None:
    """Exceptions that ended more than ``ExceptionRetentionDays`` ago lose their rows (receipts keep copies)."""
    days = get_settings().runtime_cloud.policy.exception_retention_days
    purged = wiring.exceptions().purge(days, clock.utcnow())
    log.info("policy purge: %d exception row(s) ended more than %d days ago", purged, days)


# -- helpers ------------------------------------------------------------------------------------------------


def _environment_class(tenant: str, environment: str) -> str:
    """The environment's class; 404 (as for one that never existed) when this tenant never declared it."""
    summary = provisioning.api().summary(tenant, environment)
    if summary.environment_class is None:
        raise NotFound(f"environment {environment}")
    return summary.environment_class


def _exception(caller: Caller, req: func.HttpRequest) -> PolicyException:
    environment, exception_id = req.route_params["environment"], req.route_params["exception_id"]
    _environment_class(caller.tenant, environment)
    exception = wiring.exceptions().get(caller.tenant, exception_id)
    if exception.environment != environment:
        raise NotFound(f"exception {exception_id}")
    return exception


def _load(tenant: str, environment_class: str) -> EffectiveBundle | None:
    try:
        return wiring.gate().load(tenant, environment_class)
    except PolicyUnavailable as error:
        raise problems.service_unavailable("policy-unavailable", str(error), 30) from None
