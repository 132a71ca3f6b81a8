"""The provisioning module's objects, built once per process from settings and storage."""

from __future__ import annotations

import functools

from shared.platform.errors import InvalidSettings
from shared.platform.manifest import FeatureManifest
from shared.platform.storage.clients import shared_host_storage
from shared.platform.telemetry.names import AWAITING_APPROVAL
from shared.provisioning.api import ProvisioningApi
from shared.provisioning.configuration import ConfigPlatformClient
from shared.provisioning.control_plane_environments import ControlPlaneEnvironments
from shared.provisioning.environment_registry import EnvironmentAuthority, LocalEnvironmentRegistry
from shared.provisioning.environment_rules import EnvironmentRegistration
from shared.provisioning.gauges import awaiting_approval
from shared.provisioning.lifecycle import RunSteps
from shared.provisioning.outputs import OutputsStore
from shared.provisioning.receipts import ReceiptStore
from shared.provisioning.service import ProvisioningService
from shared.provisioning.settings import EnvironmentSource
from shared.provisioning.store import ProvisioningStore
from shared.wiring import neighbours, policy
from shared.wiring.settings import get_settings


def event_source() -> str:
    return f"/{get_settings().messaging.service_name}/provisioning"


@functools.lru_cache(maxsize=1)
def store() -> ProvisioningStore:
    return ProvisioningStore(shared_host_storage(), event_source())


@functools.lru_cache(maxsize=1)
def environments() -> EnvironmentRegistration:
    """The environment registry's rule over its authority (``RuntimeCloud:Environments:Source``)."""
    authority: EnvironmentAuthority = LocalEnvironmentRegistry(shared_host_storage())
    if get_settings().runtime_cloud.environments.source is EnvironmentSource.CONTROL_PLANE:
        api = neighbours.control_plane()
        if api is None:  # refused when the settings are read; here so that no path can use another authority
            raise InvalidSettings("Environments:Source is control-plane: set RuntimeCloud:ControlPlane:BaseUrl")
        authority = ControlPlaneEnvironments(api)
    return EnvironmentRegistration(authority)


@functools.lru_cache(maxsize=1)
def service() -> ProvisioningService:
    section = get_settings().runtime_cloud
    return ProvisioningService(
        store(),
        policy=section.provisioning,
        targets=section.targets,
        adopted_stacks=section.iac.pulumi_adopted_stacks,
        environments=environments(),
        releases=neighbours.delivery_host(),  # None: not configured, so a promotion naming a release fails
    )


@functools.lru_cache(maxsize=1)
def steps() -> RunSteps:
    section = get_settings().runtime_cloud
    config_platform = ConfigPlatformClient(section.config_platform.url, section.health.probe_timeout_seconds)
    return RunSteps(
        shared_host_storage(),
        source=event_source(),
        policy=section.provisioning,
        iac=section.iac,
        targets=section.targets,
        config_platform=config_platform,
        policy_gate=policy.gate(),
        receipts=section.receipts,
        environments=environments(),
        mirror=neighbours.artifact_outbox(),
    )


@functools.lru_cache(maxsize=1)
def receipts() -> ReceiptStore:
    return ReceiptStore(shared_host_storage(), get_settings().runtime_cloud.receipts, neighbours.artifact_outbox())


@functools.lru_cache(maxsize=1)
def outputs() -> OutputsStore:
    return OutputsStore(shared_host_storage(), neighbours.artifact_outbox())


@functools.lru_cache(maxsize=1)
def api() -> ProvisioningApi:
    """What the other modules may ask provisioning (see :mod:`shared.provisioning.api`)."""
    return ProvisioningApi(store(), receipts(), service(), policy=get_settings().runtime_cloud.provisioning)


MANIFEST = FeatureManifest(
    name="provisioning",
    module="provisioning",
    triggers=(
        "functions.provisioning",
        "functions.receipts",
        "functions.receipt_retention",
        "functions.runner_jobs",
        "orchestrations.provisioning",
    ),
    inbound_queues=("promotions", "approvals"),
    gauges={AWAITING_APPROVAL: lambda: awaiting_approval(shared_host_storage().tables)},
)
