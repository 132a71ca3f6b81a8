"""Capacity API: pools, edition quotas and fenced leases (ExecutionCapacityService).

Thin triggers: parse, authorise, call ``shared.capacity``, shape the answer.
Workers use ``factory.capacity.lease``; reads need ``factory.runtime.read``
(lease reads accept either); pool and quota changes need
``factory.runtime.write`` and the ``PlatformAdmin`` role. The tenant always
comes from the token: another tenant's lease or dedicated pool answers 404.
"""

from __future__ import annotations

import re
from typing import Any

import azure.functions as func

from functions.blueprint import trigger_blueprint
from shared.autoscaling.api import refuse_resize_by_hand
from shared.capacity.api import (
    EDITION_NAME,
    LEASE_ID,
    POOL_ID,
    AcquireRequest,
    EditionSaved,
    EditionSpec,
    LeaseList,
    LeasesQuery,
    LeaseView,
    Pool,
    PoolList,
    PoolSpec,
    PoolsQuery,
    PoolView,
    QuotasView,
    RenewRequest,
    TenantUsage,
    editions,
    measured_acquire,
    pools,
    purge_expired_history,
    tenant_usage,
    with_ttl_bound,
)
from shared.platform import clock
from shared.platform.auth import Caller, Role, Scope
from shared.platform.errors import InvalidInput
from shared.platform.http import problems
from shared.platform.http.endpoint import endpoint
from shared.platform.http.responses import JsonResult
from shared.platform.logs import app_logger
from shared.wiring import capacity as wiring
from shared.wiring.settings import get_settings, setting_binding

bp = trigger_blueprint(http_auth_level=func.AuthLevel.ANONYMOUS)
log = app_logger("capacity")

LEASE_OR_READ = (Scope.CAPACITY_LEASE, Scope.RUNTIME_READ)


def _valid_name(value: str, pattern: re.Pattern[str], path: str) -> str:
    if not pattern.fullmatch(value):
        raise InvalidInput([{"path": path, "message": "lower-case letters, digits and '-' (at most 63)"}])
    return value


def _route_id(req: func.HttpRequest, name: str, pattern: re.Pattern[str]) -> str:
    """An id from the route; one that cannot exist (say, with characters keys refuse) is simply not found."""
    value: str = req.route_params[name]  # azure-functions leaves route_params unannotated
    if not pattern.fullmatch(value):
        raise problems.not_found()
    return value


def _viewer(caller: Caller) -> str | None:
    """Whose denials a pool view may name: all for a platform administrator, else the caller's tenant's."""
    return None if caller.has_role(Role.PLATFORM_ADMIN) else caller.tenant


def _visible_pool(caller: Caller, pool_id: str) -> Pool:
    stored = pools.read_pool(wiring.store(), pool_id)
    if stored is None or not (stored.pool.serves(caller.tenant) or caller.has_role(Role.PLATFORM_ADMIN)):
        raise problems.not_found()
    return stored.pool


# -- pools ---------------------------------------------------------------------


@bp.route(route="runtime-cloud/pools", methods=["GET"])
@endpoint(scopes=[Scope.RUNTIME_READ], query=PoolsQuery, responses={200: PoolList})
def capacity_list_pools(req: func.HttpRequest, caller: Caller, query: PoolsQuery) -> PoolList:
    """The pools the caller may use (every pool for a platform administrator), a page at a time in id order."""
    store, now = wiring.store(), clock.utcnow()
    tenant = None if caller.has_role(Role.PLATFORM_ADMIN) else caller.tenant
    visible, following = pools.pools_page(store, tenant, limit=query.limit, continuation=query.continuation)
    views = [pools.pool_view(store, pool, now, _viewer(caller)) for pool in visible]
    return PoolList(pools=views, continuation=following)


@bp.route(route="runtime-cloud/pools/{id}", methods=["GET"])
@endpoint(scopes=[Scope.RUNTIME_READ], path={"id": POOL_ID}, responses={200: PoolView})
def capacity_get_pool(req: func.HttpRequest, caller: Caller) -> PoolView:
    pool = _visible_pool(caller, _route_id(req, "id", POOL_ID))
    return pools.pool_view(wiring.store(), pool, clock.utcnow(), _viewer(caller))


@bp.route(route="runtime-cloud/pools/{id}", methods=["PUT"])
@endpoint(
    scopes=[Scope.RUNTIME_WRITE],
    roles=[Role.PLATFORM_ADMIN],
    path={"id": POOL_ID},
    body=PoolSpec,
    responses={200: PoolView, 201: PoolView},
    response_headers={201: ("Location",)},
    problems=(409,),
)
def capacity_put_pool(req: func.HttpRequest, caller: Caller, body: PoolSpec) -> JsonResult:
    pool_id = _valid_name(req.route_params["id"], POOL_ID, "/id")
    if "provisioning" in get_settings().runtime_cloud.host.enabled_modules:  # autoscaling is deployed
        refuse_resize_by_hand(wiring.store(), pool_id, body.size)  # 409 while a policy owns the size
    pool, created = pools.put_pool(wiring.store(), pool_id, body)
    view = pools.pool_view(wiring.store(), pool, clock.utcnow())
    headers = {"Location": f"/runtime-cloud/pools/{pool_id}"} if created else {}
    return JsonResult(view, status=201 if created else 200, headers=headers)


@bp.route(route="runtime-cloud/pools/{id}/drain", methods=["POST"])
@endpoint(
    scopes=[Scope.RUNTIME_WRITE],
    roles=[Role.PLATFORM_ADMIN],
    path={"id": POOL_ID},
    responses={200: PoolView},
    problems=(409,),
)
def capacity_drain_pool(req: func.HttpRequest, caller: Caller) -> PoolView:
    pool = pools.drain_pool(wiring.store(), _route_id(req, "id", POOL_ID))
    return pools.pool_view(wiring.store(), pool, clock.utcnow())


# -- quotas and usage ------------------------------------------------------------


@bp.route(route="runtime-cloud/quotas", methods=["GET"])
@endpoint(scopes=[Scope.RUNTIME_READ], responses={200: QuotasView}, problems=(503,))
def capacity_list_quotas(req: func.HttpRequest, caller: Caller) -> dict[str, Any]:
    """The editions and their limits: ControlPlaneApi's when it is their authority (503 when it cannot say)."""
    store = wiring.store()
    known = editions.visible_editions(store)
    yours = editions.edition_of(store, caller.tenant).name
    admin = caller.has_role(Role.PLATFORM_ADMIN)
    members = editions.tenants_by_edition(store) if admin else {}
    return {
        "default_edition": store.settings.default_edition,
        "your_edition": yours,
        "editions": [
            {
                "edition": e.name,
                "limits": {k.value: v for k, v in e.limits.items()},
                **({"tenants": members.get(e.name, [])} if admin else {}),
            }
            for e in known
        ],
    }


@bp.route(route="runtime-cloud/quotas/{edition}", methods=["PUT"])
@endpoint(
    scopes=[Scope.RUNTIME_WRITE],
    roles=[Role.PLATFORM_ADMIN],
    path={"edition": EDITION_NAME},
    body=EditionSpec,
    responses={200: EditionSaved, 201: EditionSaved},
    problems=(409,),
)
def capacity_put_quota(req: func.HttpRequest, caller: Caller, body: EditionSpec) -> JsonResult:
    """Create or replace an edition; 409 naming the authority while ControlPlaneApi owns editions."""
    name = _valid_name(req.route_params["edition"], EDITION_NAME, "/edition")
    edition, created = editions.put_edition(wiring.store(), name, body)
    saved = EditionSaved(
        edition=edition.name, limits={k.value: v for k, v in edition.limits.items()}, tenants_assigned=body.tenants
    )
    return JsonResult(saved, status=201 if created else 200)


@bp.route(route="runtime-cloud/quotas/{edition}", methods=["DELETE"])
@endpoint(
    scopes=[Scope.RUNTIME_WRITE],
    roles=[Role.PLATFORM_ADMIN],
    path={"edition": EDITION_NAME},
    responses={204: None},
    problems=(409,),
)
def capacity_delete_quota(req: func.HttpRequest, caller: Caller) -> func.HttpResponse:
    """Delete an edition no tenant is assigned to (409 ``edition-in-use`` otherwise, or for one the settings
    define); 404 for an edition the API never created."""
    name = _route_id(req, "edition", EDITION_NAME)
    if not editions.delete_edition(wiring.store(), name):
        raise problems.not_found()
    return func.HttpResponse(status_code=204)


@bp.route(route="runtime-cloud/tenants/{tenant}/usage", methods=["GET"])
@endpoint(scopes=[Scope.RUNTIME_READ], responses={200: TenantUsage}, problems=(503,))
def capacity_tenant_usage(req: func.HttpRequest, caller: Caller) -> dict[str, Any]:
    tenant = req.route_params["tenant"]
    if tenant != caller.tenant and not caller.has_role(Role.PLATFORM_ADMIN):
        raise problems.not_found()
    return tenant_usage(wiring.store(), tenant)


# -- leases ------------------------------------------------------------------------


def _max_ttl_seconds() -> int:
    return get_settings().runtime_cloud.capacity.max_ttl_seconds


# The lease bodies as the host takes them: ttl_seconds at most its MaxTtlSeconds, in the document too
# (the setting is read when a body is validated or the document made, not at import).
AcquireBody = with_ttl_bound(AcquireRequest, _max_ttl_seconds)
RenewBody = with_ttl_bound(RenewRequest, _max_ttl_seconds)


@bp.route(route="runtime-cloud/leases", methods=["POST"])
@endpoint(
    scopes=[Scope.CAPACITY_LEASE],
    body=AcquireBody,
    responses={201: LeaseView},
    response_headers={201: ("Location", "Idempotent-Replayed")},
    problems=(404, 409, 429, 503),
)
def capacity_acquire_lease(req: func.HttpRequest, caller: Caller, body: AcquireRequest) -> JsonResult:
    with measured_acquire(caller.tenant, body.kind.value) as granted:
        lease, replayed = wiring.leases().acquire(caller.tenant, body)
        granted(lease.pool, lease.lease_id)
    headers = {"Location": f"/runtime-cloud/leases/{lease.lease_id}"}
    if replayed:
        headers["Idempotent-Replayed"] = "true"
    return JsonResult(lease, status=201, headers=headers)


@bp.route(route="runtime-cloud/leases", methods=["GET"])
@endpoint(any_scopes=LEASE_OR_READ, query=LeasesQuery, responses={200: LeaseList})
def capacity_list_leases(req: func.HttpRequest, caller: Caller, query: LeasesQuery) -> LeaseList:
    page = wiring.leases().list_leases(
        caller.tenant,
        pool=query.pool,
        holder=query.holder,
        state=query.state,
        limit=query.limit,
        continuation=query.continuation,
    )
    return LeaseList(leases=page.leases, continuation=page.continuation)


@bp.route(route="runtime-cloud/leases/{id}", methods=["GET"])
@endpoint(any_scopes=LEASE_OR_READ, path={"id": LEASE_ID}, responses={200: LeaseView})
def capacity_get_lease(req: func.HttpRequest, caller: Caller) -> LeaseView:
    return wiring.leases().get(caller.tenant, _route_id(req, "id", LEASE_ID))


@bp.route(route="runtime-cloud/leases/{id}/renew", methods=["POST"])
@endpoint(
    scopes=[Scope.CAPACITY_LEASE],
    path={"id": LEASE_ID},
    body=RenewBody,
    body_required=False,
    responses={200: LeaseView},
    problems=(409, 503),
)
def capacity_renew_lease(req: func.HttpRequest, caller: Caller, body: RenewRequest) -> LeaseView:
    return wiring.leases().renew(caller.tenant, _route_id(req, "id", LEASE_ID), body.ttl_seconds)


@bp.route(route="runtime-cloud/leases/{id}", methods=["DELETE"])
@endpoint(scopes=[Scope.CAPACITY_LEASE], path={"id": LEASE_ID}, responses={204: None}, problems=(409, 503))
def capacity_release_lease(req: func.HttpRequest, caller: Caller) -> func.HttpResponse:
    wiring.leases().release(caller.tenant, _route_id(req, "id", LEASE_ID))
    return func.HttpResponse(status_code=204)


# -- timers ----------------------------------------------------------------------------


# No run_on_startup: on a scale-to-zero plan every instance start would run it. The first capacity
# call of an instance seeds instead (shared.wiring.capacity.store).
@bp.timer_trigger(
    arg_name="timer",
    schedule=setting_binding("RuntimeCloud:Capacity:MaintenanceSchedule"),
)
def capacity_maintenance(timer: func.TimerRequest) -> None:
    """Seed the settings' pools and editions, and repair slot rows a crashed resize left behind."""
    store = wiring.store()
    editions.seed_editions(store)
    pools.seed_pools(store)
    repaired = sum(pools.reconcile_slots(store, pool) for pool in pools.list_pools(store))
    if repaired:
        log.info("capacity maintenance repaired %d slot row(s)", repaired)


@bp.timer_trigger(
    arg_name="timer",
    schedule=setting_binding("RuntimeCloud:Capacity:PurgeSchedule"),
)
def capacity_purge(timer: func.TimerRequest) -> None:
    """Purge lease history and records older than LeaseRetentionDays, denials older than a day."""
    result = purge_expired_history(wiring.store())
    log.info(
        "capacity purge removed %d grant row(s), %d record(s), %d denial(s)",
        result.grants,
        result.records,
        result.denials,
    )
