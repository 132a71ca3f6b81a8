"""Every feature's manifest (:class:`shared.platform.manifest.FeatureManifest`), in registration order.

The one list of what the host can run: ``functions.blueprints_for`` registers
the enabled manifests' triggers, health reads their inbound queues, telemetry
observes their gauges. A feature declares its manifest in its own composition
module (``shared/wiring/<feature>.py``).
"""

from __future__ import annotations

from collections.abc import Collection

from shared.platform.manifest import FeatureManifest
from shared.wiring import autoscaling, backup, capacity, gitops, host, inventory, policy, provisioning

FEATURES: tuple[FeatureManifest, ...] = (
    host.MANIFEST,
    backup.MANIFEST,
    provisioning.MANIFEST,
    gitops.MANIFEST,
    policy.MANIFEST,
    inventory.MANIFEST,
    capacity.MANIFEST,
    autoscaling.MANIFEST,
)


def enabled_manifests(modules: Collection[str]) -> list[FeatureManifest]:
    """The manifests that run with these modules enabled (``Host:EnabledModules``)."""
    return [manifest for manifest in FEATURES if manifest.enabled(modules)]


def inbound_queues(modules: Collection[str]) -> tuple[tuple[str, str], ...]:
    """(module, queue) for every inbound queue of the enabled features: health reports each one's lag."""
    return tuple(
        (manifest.module or "host", queue)
        for manifest in enabled_manifests(modules)
        for queue in manifest.inbound_queues
    )
