"""The host's own endpoints from the source page: health and target metadata."""

from __future__ import annotations

import azure.durable_functions as df
import azure.functions as func

from shared.auth import Caller, Scope
from shared.health import check_health
from shared.http.endpoint import endpoint
from shared.http.responses import json_response
from shared.iac.runner_info import describe_runner
from shared.settings import get_settings

bp = df.Blueprint(http_auth_level=func.AuthLevel.ANONYMOUS)


@bp.route(route="runtime-cloud/health", methods=["GET"])
@endpoint(scopes=[Scope.HEALTH_READ])
def runtime_cloud_health(req: func.HttpRequest, caller: Caller) -> func.HttpResponse:
    """RuntimeCloudHealth: liveness, readiness and each dependency's status."""
    report = check_health(get_settings())
    headers = {} if report.ready else {"Retry-After": "10"}
    return json_response(report.as_dict(), status=200 if report.ready else 503, headers=headers)


@bp.route(route="runtime-cloud/meta/targets", methods=["GET"])
@endpoint(scopes=[Scope.META_READ])
def runtime_cloud_targets(req: func.HttpRequest, caller: Caller) -> dict:
    """RuntimeCloudTargets: the installation's targets and the IaC runner's version."""
    settings = get_settings()
    runner = describe_runner(settings.runtime_cloud.iac.runner)
    return {
        "topology": settings.runtime_cloud.topology.value,
        "iac_runner": {"name": runner.name, "version": runner.version, "available": runner.available},
        "targets": [target.public_view() for target in settings.runtime_cloud.targets],
    }
