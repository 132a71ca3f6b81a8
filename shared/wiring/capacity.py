"""The capacity module's objects, built once per process from settings and storage."""

from __future__ import annotations

import functools

from shared.capacity.edition_authority import EditionsAuthority
from shared.capacity.editions import seed_editions
from shared.capacity.gauges import PoolHoldings
from shared.capacity.leases import LeaseService
from shared.capacity.pools import seed_pools
from shared.capacity.problems import CAPACITY_PROBLEMS
from shared.capacity.store import CapacityStore
from shared.platform.manifest import FeatureManifest
from shared.platform.storage.clients import shared_host_storage
from shared.platform.telemetry.names import ACTIVE_LEASES, UTILIZATION
from shared.wiring.neighbours import control_plane, control_plane_is_authority
from shared.wiring.settings import get_settings


@functools.lru_cache(maxsize=1)
def store() -> CapacityStore:
    """The process's store. Its first use on an instance seeds the settings' pools and editions, so
    no timer has to run at start (on a scale-to-zero plan that would run on every instance start);
    seeding that fails (the store is down) is not cached, and the next use tries again."""
    settings = get_settings()
    built = CapacityStore.from_clients(
        shared_host_storage(),
        settings.runtime_cloud.capacity,
        f"/{settings.messaging.service_name}",
        editions_authority(),
    )
    seed_editions(built)
    seed_pools(built)
    return built


def editions_authority() -> EditionsAuthority | None:
    """ControlPlaneApi when it is the environments' source (it then owns editions' quotas too), else None."""
    client = control_plane()
    return EditionsAuthority(client) if client is not None and control_plane_is_authority(get_settings()) else None


def leases() -> LeaseService:
    return LeaseService(store())


_holdings = PoolHoldings(store)  # both pool gauges read the slot rows once per export

MANIFEST = FeatureManifest(
    name="capacity",
    module="capacity",
    triggers=("functions.capacity", "orchestrations.capacity"),
    gauges={ACTIVE_LEASES: _holdings.active_leases, UTILIZATION: _holdings.utilization},
    problems=CAPACITY_PROBLEMS,  # quotas, pools and leases refused: 429, 503, 403, 409, 404
)
