"""Health's settings sections, taken from the settings root once per process (see :mod:`shared.health.sections`)."""

from __future__ import annotations

import functools

from shared.health.sections import HealthSections
from shared.wiring import neighbours, policy
from shared.wiring.features import inbound_queues
from shared.wiring.settings import Settings, get_settings


def health_sections(settings: Settings) -> HealthSections:
    section = settings.runtime_cloud
    return HealthSections(
        health=section.health,
        runner=section.iac.runner,
        targets=tuple(section.targets),
        config_platform=section.config_platform,
        enabled_modules=tuple(section.host.enabled_modules),
        inbound_queues=inbound_queues(section.host.enabled_modules),
        backup=section.backup,
        service_name=settings.messaging.service_name,
        policy=policy.status,
        iac=section.iac,
        gitops_webhook_secret=section.gitops.webhook_secret,
        neighbours=neighbours.probes(settings),
    )


@functools.lru_cache(maxsize=1)
def sections() -> HealthSections:
    """The process's one object: concurrent health calls share a round only when they pass the same one."""
    return health_sections(get_settings())
