"""Pool autoscaling's objects, built once per process: capacity's store and provisioning's API, composed."""

from __future__ import annotations

import functools

from shared.autoscaling.scaler import PoolScaler
from shared.platform.manifest import FeatureManifest
from shared.wiring import capacity, provisioning
from shared.wiring.settings import get_settings


@functools.lru_cache(maxsize=1)
def scaler() -> PoolScaler:
    section = get_settings().runtime_cloud
    return PoolScaler(
        capacity.store(),
        provisioning.api(),
        provisioning.service().run,
        settings=section.autoscaling,
        targets=section.targets,
    )


# Pool autoscaling resizes capacity's pools through provisioning runs: it runs when both are enabled.
MANIFEST = FeatureManifest(
    name="autoscaling", module="capacity", also_needs=frozenset({"provisioning"}), triggers=("functions.autoscaling",)
)
