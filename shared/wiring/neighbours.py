"""The neighbours' clients, one per process each, or None when the neighbour is not configured.

Each client's bearer token comes from the host's one credential
(:mod:`shared.platform.credentials`) for the section's ``Scope``; without a scope no
header is sent (a local stand-in). One client per process, so ControlPlaneApi's
cache and each client's connections serve every run of the instance.
"""

from __future__ import annotations

import functools

from shared.platform.credentials import azure_credential
from shared.platform.events.artifact_dispatch import ArtifactPublisher, PublishPolicy
from shared.platform.events.artifact_outbox import ArtifactOutbox
from shared.platform.neighbours.control_plane import ControlPlaneApi
from shared.platform.neighbours.delivery_host import DeliveryHost
from shared.platform.neighbours.http_client import NeighbourHttp, Token
from shared.platform.neighbours.knowledge_host import KnowledgeHost
from shared.platform.neighbours.probe import NeighbourProbe
from shared.platform.neighbours.settings import NeighbourSettings
from shared.platform.storage.clients import shared_host_storage
from shared.provisioning.settings import EnvironmentSource
from shared.wiring.settings import Settings, get_settings


def scoped_token(scope: str) -> Token:
    """A bearer token for ``scope`` from the host's one credential (it caches tokens until they near expiry)."""

    def token() -> str:
        return azure_credential().get_token(scope).token

    return token


@functools.lru_cache(maxsize=1)
def control_plane() -> ControlPlaneApi | None:
    section = get_settings().runtime_cloud.control_plane
    return ControlPlaneApi(section, scoped_token(section.scope)) if section.configured else None


@functools.lru_cache(maxsize=1)
def knowledge_host() -> KnowledgeHost | None:
    section = get_settings().runtime_cloud.knowledge_host
    return KnowledgeHost(section, scoped_token(section.scope)) if section.configured else None


@functools.lru_cache(maxsize=1)
def artifact_outbox() -> ArtifactOutbox | None:
    """Where receipts, run outputs and drift reports wait to be mirrored; None without KnowledgeHost."""
    return ArtifactOutbox(shared_host_storage()) if get_settings().runtime_cloud.knowledge_host.configured else None


@functools.lru_cache(maxsize=1)
def artifact_publisher() -> ArtifactPublisher | None:
    """The artifacts' dispatcher (the ``artifact_publisher`` timer); None without KnowledgeHost."""
    outbox, client = artifact_outbox(), knowledge_host()
    if outbox is None or client is None:
        return None
    section = get_settings().runtime_cloud.knowledge_host
    policy = PublishPolicy(attempts=section.publish_attempts, backoff_seconds=section.publish_backoff_seconds)
    return ArtifactPublisher(outbox, shared_host_storage(), client, policy)


@functools.lru_cache(maxsize=1)
def delivery_host() -> DeliveryHost | None:
    section = get_settings().runtime_cloud.delivery_host
    return DeliveryHost(section, scoped_token(section.scope)) if section.configured else None


def control_plane_is_authority(settings: Settings) -> bool:
    """Whether runs wait on ControlPlaneApi (fail-fast): it is the environments' registry
    (``RuntimeCloud:Environments:Source=control-plane``), not just configured."""
    return settings.runtime_cloud.environments.source is EnvironmentSource.CONTROL_PLANE


def _http(service: str, section: NeighbourSettings) -> NeighbourHttp | None:
    return NeighbourHttp(service, section, scoped_token(section.scope)) if section.configured else None


def probes(settings: Settings) -> tuple[NeighbourProbe, ...]:
    """What health shows of each neighbour, from ``settings`` (health's sections are made once per process)."""
    section = settings.runtime_cloud
    return (
        NeighbourProbe(
            check="control-plane",
            service="ControlPlaneApi",
            setting="RuntimeCloud:ControlPlane:BaseUrl",
            http=_http("ControlPlaneApi", section.control_plane),
            fail_fast=control_plane_is_authority(settings),
            when_down="runs whose environment cannot be resolved fail environment-unresolved",
            when_unconfigured="environments and editions come from the host's own tables",
        ),
        NeighbourProbe(
            check="knowledge-host",
            service="KnowledgeHost",
            setting="RuntimeCloud:KnowledgeHost:BaseUrl",
            http=_http("KnowledgeHost", section.knowledge_host),
            fail_fast=False,
            when_down="artifacts wait in the outbox and are published when it answers; runs go on",
            when_unconfigured="receipts, outputs and drift reports are not mirrored",
        ),
        NeighbourProbe(
            check="delivery-host",
            service="DeliveryHost",
            setting="RuntimeCloud:DeliveryHost:BaseUrl",
            http=_http("DeliveryHost", section.delivery_host),
            fail_fast=True,
            when_down="promotions naming a release fail release-unresolved",
            when_unconfigured="promotions naming a release fail release-unresolved; desired state is promoted inline",
        ),
    )
