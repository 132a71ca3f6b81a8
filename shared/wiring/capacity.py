"""The capacity module's objects, built once per process from settings and storage."""

from __future__ import annotations

import functools

from shared.capacity.editions import seed_editions
from shared.capacity.leases import LeaseService
from shared.capacity.pools import seed_pools
from shared.capacity.store import CapacityStore
from shared.settings import get_settings
from shared.storage.clients import shared_host_storage


@functools.lru_cache(maxsize=1)
def store() -> CapacityStore:
    """The process's store. Its first use on an instance seeds the settings' pools and editions, so
    no timer has to run at start (on a scale-to-zero plan that would run on every instance start);
    seeding that fails (the store is down) is not cached, and the next use tries again."""
    settings = get_settings()
    built = CapacityStore.from_clients(
        shared_host_storage(), settings.runtime_cloud.capacity, f"/{settings.messaging.service_name}"
    )
    seed_editions(built)
    seed_pools(built)
    return built


def leases() -> LeaseService:
    return LeaseService(store())
