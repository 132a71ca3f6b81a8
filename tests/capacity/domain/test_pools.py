"""Pools under their leases, in memory: draining stops grants and keeps what is held; shrinking never revokes.

``tests/capacity/test_pools.py`` drives the same through a host on Azurite; here the pool functions
and the lease service are called in process on the in-memory store (see the package's conftest).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.capacity import pools
from shared.capacity.errors import CapacityUnavailable
from shared.capacity.keys import POOLS_TABLE
from shared.capacity.models import PoolKind, PoolSpec
from shared.platform.events.outbox import OUTBOX_PREFIX
from tests.capacity.domain.conftest import Capacity


def resize(capacity: Capacity, pool_id: str, region: str, size: int, **spec: Any) -> None:
    pools.put_pool(
        capacity.store, pool_id, PoolSpec(kind=PoolKind.SANDBOX, region=region, size=size, min=0, max=64, **spec)
    )


def view(capacity: Capacity, pool_id: str) -> Any:
    stored = pools.read_pool(capacity.store, pool_id)
    assert stored is not None
    return pools.pool_view(capacity.store, stored.pool, capacity.clock.now())


def test_draining_stops_new_grants_and_keeps_held_leases(capacity: Capacity) -> None:
    pool = capacity.pool(size=3)
    [tenant] = capacity.tenants(limit=3)
    held, _ = capacity.service.acquire(tenant, capacity.request(pool))

    drained = pools.drain_pool(capacity.store, pool.id)

    assert drained.draining and view(capacity, pool.id).held == 1
    with pytest.raises(CapacityUnavailable) as refused:
        capacity.service.acquire(tenant, capacity.request(pool))
    assert refused.value.draining and refused.value.retry_after_seconds >= 1
    assert capacity.service.renew(tenant, held.lease_id, None).fencing_token == held.fencing_token
    capacity.service.release(tenant, held.lease_id)
    assert view(capacity, pool.id).held == 0

    resize(capacity, pool.id, pool.region, 3, draining=False)
    reopened, _ = capacity.service.acquire(tenant, capacity.request(pool))
    assert reopened.pool == pool.id


def test_shrinking_never_revokes_a_held_lease_and_every_resize_is_an_event(capacity: Capacity) -> None:
    pool = capacity.pool(size=3)
    [tenant] = capacity.tenants(limit=3)
    leases = [capacity.service.acquire(tenant, capacity.request(pool))[0] for _ in range(3)]

    resize(capacity, pool.id, pool.region, 1)

    shrunk = view(capacity, pool.id)
    assert (shrunk.size, shrunk.held, shrunk.held_on_closed_slots) == (1, 3, 2)
    for lease in leases:
        assert capacity.service.renew(tenant, lease.lease_id, None).lease_id == lease.lease_id
    for lease in leases:
        capacity.service.release(tenant, lease.lease_id)
    granted = set()
    for _ in range(3):  # the surplus slots are closed: only slot 0 is granted again
        lease, _ = capacity.service.acquire(tenant, capacity.request(pool))
        granted.add(lease.slot)
        capacity.service.release(tenant, lease.lease_id)
    assert granted == {0}

    resize(capacity, pool.id, pool.region, 3)
    grown = view(capacity, pool.id)
    assert (grown.size, grown.free) == (3, 3)
    # Committed with each change (capacity sends them from a background sender: the outbox rows are the record).
    events = [
        json.loads(row["Event"])
        for row in capacity.storage.rows(POOLS_TABLE)
        if row["PartitionKey"] == f"pool|{pool.id}" and row["RowKey"].startswith(OUTBOX_PREFIX)
    ]
    resized = [e["data"] for e in sorted(events, key=lambda e: e["sequence"]) if e["type"].endswith("PoolResized")]
    assert [(e["old_size"], e["new_size"]) for e in resized] == [(0, 3), (3, 1), (1, 3)]
