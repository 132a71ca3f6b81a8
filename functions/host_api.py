"""The host's own endpoints: health, target metadata and the API document (docs/api.md)."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import azure.functions as func

import shared
from functions import blueprints_for
from functions.blueprint import trigger_blueprint
from shared.health import finished_answer, health_answer
from shared.health.responses import OPENAPI_DOCUMENT, HealthView, TargetsView
from shared.iac.api import describe_runner
from shared.platform.auth import Caller, Scope
from shared.platform.http.endpoint import endpoint
from shared.platform.http.openapi import build_document
from shared.platform.targets import targets_for
from shared.wiring import health
from shared.wiring.settings import get_settings

bp = trigger_blueprint(http_auth_level=func.AuthLevel.ANONYMOUS)

API_DESCRIPTION = (
    "Provisioning runs (plan, approve, apply, receipts), observed state and drift, and capacity "
    "leases of the Runtime Cloud host. Every error is an application/problem+json document."
)


@bp.route(route="runtime-cloud/health", methods=["GET"])
@endpoint(
    scopes=[Scope.HEALTH_READ], responses={200: HealthView, 503: HealthView}, response_headers={503: ("Retry-After",)}
)
async def runtime_cloud_health(req: func.HttpRequest, caller: Caller) -> func.HttpResponse:
    """RuntimeCloudHealth: liveness, readiness and each dependency's status."""
    sections = health.sections()
    # The round's JSON, encoded once for every caller it answers. A finished round answers at once, here;
    # only a call that probes, or waits for a running round, takes a worker thread (probes block).
    answer = finished_answer(sections)
    if answer is None:
        answer = await asyncio.to_thread(health_answer, sections)
    return func.HttpResponse(
        body=answer.body,
        status_code=200 if answer.ready else 503,
        headers={} if answer.ready else {"Retry-After": "10"},
        mimetype="application/json",
        charset="utf-8",
    )


@bp.route(route="runtime-cloud/meta/targets", methods=["GET"])
@endpoint(scopes=[Scope.META_READ], responses={200: TargetsView})
def runtime_cloud_targets(req: func.HttpRequest, caller: Caller) -> dict[str, Any]:
    """RuntimeCloudTargets: the targets the caller's tenant may use and the IaC runner's version."""
    settings = get_settings()
    runner = describe_runner(settings.runtime_cloud.iac.runner)
    # A target reserved for other tenants is not listed: to this tenant it does not exist.
    usable = targets_for(settings.runtime_cloud.targets, caller.tenant)
    return {
        "topology": settings.runtime_cloud.topology.value,
        "iac_runner": {"name": runner.name, "version": runner.version, "available": runner.available},
        "targets": [target.public_view() for target in usable],
    }


@bp.route(route="runtime-cloud/openapi.json", methods=["GET"])
@endpoint(any_scopes=[Scope.META_READ, Scope.RUNTIME_READ], responses={200: OPENAPI_DOCUMENT})
def runtime_cloud_openapi(req: func.HttpRequest, caller: Caller) -> dict[str, Any]:
    """The API's OpenAPI 3.1 document, generated from the endpoints this host serves."""
    return api_document()


@functools.lru_cache(maxsize=1)
def api_document() -> dict[str, Any]:
    """Built once per process: the enabled modules (and so the routes) are fixed when the app starts."""
    app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)  # a local app: the worker never sees it
    for blueprint in blueprints_for(get_settings().runtime_cloud.host.enabled_modules):
        app.register_functions(blueprint)
    return build_document(app.get_functions(), "Runtime Cloud host", shared.__version__, API_DESCRIPTION)
