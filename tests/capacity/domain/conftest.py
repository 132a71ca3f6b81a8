"""The capacity domain on an in-memory store: the lease protocol and the quota census, no Azurite, no host.

Each test gets a store of its own (:class:`tests.support.memory_storage.MemoryStorage`), the
product's :class:`CapacityStore` and :class:`LeaseService` on it, and a clock it moves
(:class:`tests.support.domain.ManualClock`). The capacity modules keep process-wide caches (the
pool list, editions, remembered tokens, slots and records) as the app does with its one store;
the pool list and editions are forgotten at every test's start, and everything else is keyed by
pool and tenant, which every test makes unique.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from shared.capacity import editions, pools
from shared.capacity.leases import LeaseService
from shared.capacity.models import AcquireRequest, EditionSpec, Pool, PoolKind, PoolSpec, Purpose
from shared.capacity.settings import CapacitySettings
from shared.capacity.store import CapacityStore
from shared.platform.storage.clients import StorageClients
from tests.support.domain import ManualClock, install_clock, memory_store, unique
from tests.support.memory_storage import MemoryStorage

SOURCE = "/tests/capacity/domain"


@dataclass
class Capacity:
    """The capacity service on one in-memory store, and helpers to set a test's pool and tenants up."""

    storage: MemoryStorage
    clients: StorageClients
    store: CapacityStore
    service: LeaseService
    clock: ManualClock

    def with_grace(self, seconds: float) -> Capacity:
        """The same store and clock, with another takeover grace (as another host's settings would have it)."""
        settings = CapacitySettings.model_validate({"TakeoverGraceSeconds": seconds})
        store = CapacityStore.from_clients(self.clients, settings, SOURCE)
        return Capacity(self.storage, self.clients, store, LeaseService(store), self.clock)

    def pool(self, size: int = 2, kind: PoolKind = PoolKind.SANDBOX) -> Pool:
        spec = PoolSpec(kind=kind, region=unique("region"), size=size, min=0, max=max(size, 64))
        pool, created = pools.put_pool(self.store, unique("pool"), spec)
        assert created
        return pool

    def tenants(self, limit: int, count: int = 1, kind: PoolKind = PoolKind.SANDBOX) -> list[str]:
        tenants = [unique("tenant") for _ in range(count)]
        editions.put_edition(self.store, unique("edition"), EditionSpec(limits={kind: limit}, tenants=tenants))
        return tenants

    def request(self, pool: Pool, holder: str = "worker-1", ttl_seconds: int = 30, **fields: object) -> AcquireRequest:
        return AcquireRequest.model_validate(
            {
                "kind": pool.kind.value,
                "region": pool.region,
                "purpose": Purpose.SANDBOX.value,
                "holder": holder,
                "ttl_seconds": ttl_seconds,
                **fields,
            }
        )

    def held(self, pool: Pool) -> int:
        stored = pools.read_pool(self.store, pool.id)
        assert stored is not None
        return pools.pool_view(self.store, stored.pool, self.clock.now()).held


@pytest.fixture
def capacity(monkeypatch: pytest.MonkeyPatch) -> Iterator[Capacity]:
    manual = install_clock(monkeypatch)
    storage, clients = memory_store()
    settings = CapacitySettings.model_validate({"TakeoverGraceSeconds": 1})
    store = CapacityStore.from_clients(clients, settings, SOURCE)
    pools.pool_cache.forget()
    editions.forget_cached()
    yield Capacity(storage, clients, store, LeaseService(store), manual)
    pools.pool_cache.forget()
    editions.forget_cached()
    clients.close()
