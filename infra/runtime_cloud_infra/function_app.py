"""The Flex Consumption plan (FC1) and the function app.

Flex Consumption takes its runtime (Python 3.11), its package location and its
scale (instance memory, maximum instances) from ``functionAppConfig``, not from
app settings. The package is read from the deployment container with the host
identity (``UserAssignedIdentity``), so no storage key or SAS exists for it.
HTTPS only, TLS 1.2, FTP off, and basic (publishing-profile) authentication off
for both FTP and the SCM site: deployments authenticate with Entra ID.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
from pulumi_azure_native import web

from runtime_cloud_infra.settings import StackSettings

PYTHON_VERSION = "3.11"  # pyproject.toml: the version Azure runs and the tests check


@dataclass(frozen=True)
class HostApp:
    plan: web.AppServicePlan
    app: web.WebApp


@dataclass(frozen=True)
class AppWiring:
    host_identity_id: pulumi.Input[str]
    observer_identity_id: pulumi.Input[str]
    deployment_container_url: pulumi.Input[str]
    app_settings: Mapping[str, pulumi.Input[str]]


def host_app(
    settings: StackSettings, resource_group: pulumi.Input[str], wiring: AppWiring, depends_on: list[pulumi.Resource]
) -> HostApp:
    plan = web.AppServicePlan(
        "plan",
        name=settings.name("plan"),
        resource_group_name=resource_group,
        location=settings.location,
        kind="functionapp",
        sku={"name": "FC1", "tier": "FlexConsumption"},
        reserved=True,  # Linux
        tags=settings.tags,
    )
    app = web.WebApp(
        "host-app",
        name=settings.function_app_name,
        resource_group_name=resource_group,
        location=settings.location,
        kind="functionapp,linux",
        server_farm_id=plan.id,
        https_only=True,
        client_cert_enabled=False,
        # The host identity reads its store and resolves Key Vault references; the observer identity reads
        # targets for inventory. Never the runner's: only the runner job may change targets.
        identity={
            "type": "UserAssigned",
            "user_assigned_identities": [wiring.host_identity_id, wiring.observer_identity_id],
        },
        key_vault_reference_identity=wiring.host_identity_id,
        function_app_config=_function_app_config(settings, wiring),
        site_config={
            "app_settings": [{"name": name, "value": value} for name, value in sorted(wiring.app_settings.items())],
            "min_tls_version": "1.2",
            "scm_min_tls_version": "1.2",
            "ftps_state": "Disabled",
            "http20_enabled": True,
        },
        tags=settings.tags,
        # Role assignments first: the app reads its package and its store with them from its first start.
        opts=pulumi.ResourceOptions(depends_on=depends_on),
    )
    _no_basic_auth(settings, resource_group, app)
    return HostApp(plan=plan, app=app)


def _function_app_config(settings: StackSettings, wiring: AppWiring) -> dict[str, object]:
    return {
        "deployment": {
            "storage": {
                "type": "blobContainer",
                "value": wiring.deployment_container_url,
                "authentication": {
                    "type": "UserAssignedIdentity",
                    "user_assigned_identity_resource_id": wiring.host_identity_id,
                },
            }
        },
        "runtime": {"name": "python", "version": PYTHON_VERSION},
        "scale_and_concurrency": {
            "instance_memory_mb": settings.instance_memory_mb,
            "maximum_instance_count": settings.maximum_instance_count,
        },
    }


def _no_basic_auth(settings: StackSettings, resource_group: pulumi.Input[str], app: web.WebApp) -> None:
    for kind, resource in (("ftp", web.WebAppFtpAllowed), ("scm", web.WebAppScmAllowed)):
        resource(f"host-app-{kind}-basic-auth", name=app.name, resource_group_name=resource_group, allow=False)
