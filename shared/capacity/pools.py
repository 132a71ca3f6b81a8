"""The pool catalogue: create, resize, drain, and keep slot rows in step with it.

A pool row (``CapacityPools``, partition ``pool|{id}``) says what the pool
should be; the slot rows say what is held. Resizing writes the pool row and
its ``PoolResized`` event atomically, then *reconciles* the slot rows: slots
below the size are created or opened, slots above it (and every slot of a
draining pool) are closed. Closing never touches a held lease, so a shrink
or a drain revokes nothing: surplus slots drain and vanish as their leases
end. Reconciling is idempotent; the maintenance timer runs it for every pool,
which repairs a resize that crashed between the two steps.

Acquirers read the pool list through a short per-process cache. That is
safe because admission is decided on the slot rows (an ``Open`` flag under
ETag), never on the cached pool row: a stale cache can only miss a brand-new
pool for a few seconds, and a miss reloads at once.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from azure.core import MatchConditions
from azure.data.tables import UpdateMode

from shared.capacity.denials import recent_denials
from shared.capacity.errors import PoolChangeRefused, PoolNotFound
from shared.capacity.keys import POOL_ROW, after, pool_partition, stamp
from shared.capacity.models import Pool, PoolKind, PoolScope, PoolSpec, PoolView
from shared.capacity.slots import ensure_slot, read_pool_slots, read_shard
from shared.capacity.store import CapacityStore, commit_and_dispatch, query
from shared.platform import clock
from shared.platform.errors import AlreadyExists, ConcurrencyConflict
from shared.platform.events.cloudevents import NewEvent
from shared.platform.storage.conditional import read_row
from shared.platform.storage.optimistic import on_conflict
from shared.platform.storage.paging import read_page, scope_of

PLATFORM_TENANT = "platform"  # the events' tenant for shared pools
CACHE_SECONDS = 5.0


@dataclass(frozen=True)
class StoredPool:
    pool: Pool
    etag: str


def _entity(pool: Pool) -> dict[str, Any]:
    return {
        "PartitionKey": pool_partition(pool.id),
        "RowKey": POOL_ROW,
        "Id": pool.id,
        "Kind": pool.kind.value,
        "Region": pool.region,
        "Scope": pool.scope.value,
        "Tenant": pool.tenant or "",
        "Size": pool.size,
        "Min": pool.min,
        "Max": pool.max,
        "Draining": pool.draining,
        "SlotsPerShard": pool.slots_per_shard,
        "SlotsCreated": pool.slots_created,
        "CreatedAt": pool.created_at,
        "UpdatedAt": pool.updated_at,
    }


def _pool(row: dict[str, Any]) -> Pool:
    return Pool(
        id=row["Id"],
        kind=PoolKind(row["Kind"]),
        region=row["Region"],
        scope=PoolScope(row["Scope"]),
        tenant=row.get("Tenant") or None,
        size=int(row["Size"]),
        min=int(row["Min"]),
        max=int(row["Max"]),
        draining=bool(row["Draining"]),
        slots_per_shard=int(row["SlotsPerShard"]),
        slots_created=int(row["SlotsCreated"]),
        created_at=row["CreatedAt"],
        updated_at=row["UpdatedAt"],
    )


def read_pool(store: CapacityStore, pool_id: str) -> StoredPool | None:
    row = read_row(store.pools, pool_partition(pool_id), POOL_ROW)
    return StoredPool(_pool(row), row["etag"]) if row else None


def list_pools(store: CapacityStore) -> list[Pool]:
    low = pool_partition("")
    rows = query(
        store.pools,
        "PartitionKey ge @low and PartitionKey lt @high and RowKey eq @row",
        low=low,
        high=after(low),
        row=POOL_ROW,
    )
    return sorted((_pool(row) for row in rows), key=lambda p: p.id)


def pools_page(
    store: CapacityStore, tenant: str | None, *, limit: int, continuation: str | None
) -> tuple[list[Pool], str | None]:
    """A page of the pools ``tenant`` may use (None: every pool), in id order (the pool partitions' order).
    A pool that serves other tenants is read and left out, so a page may hold fewer than ``limit``."""
    low = pool_partition("")
    page = read_page(
        store.pools,
        "PartitionKey ge @low and PartitionKey lt @high and RowKey eq @row",
        {"low": low, "high": after(low), "row": POOL_ROW},
        scope=scope_of("pools", tenant),
        seal=store.seal,
        limit=limit,
        continuation=continuation,
        keep=None if tenant is None else (lambda row: _pool(row).serves(tenant)),
    )
    return [_pool(row) for row in page.rows], page.continuation


class _PoolCache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loaded_at = float("-inf")
        self._pools: list[Pool] = []

    def get(self, store: CapacityStore, fresh: bool = False) -> list[Pool]:
        with self._lock:
            if not fresh and time.monotonic() - self._loaded_at < CACHE_SECONDS:
                return self._pools
        pools = list_pools(store)
        with self._lock:
            self._pools, self._loaded_at = pools, time.monotonic()
        return pools

    def forget(self) -> None:
        with self._lock:
            self._loaded_at = float("-inf")


pool_cache = _PoolCache()


def candidate_pools(store: CapacityStore, tenant: str, kind: PoolKind, region: str | None) -> list[Pool]:
    """Pools that could serve this acquire: dedicated ones first (they exist for this tenant)."""

    def matching(pools: list[Pool]) -> list[Pool]:
        found = [p for p in pools if p.kind is kind and p.serves(tenant) and (region is None or p.region == region)]
        return sorted(found, key=lambda p: p.scope is not PoolScope.DEDICATED)

    found = matching(pool_cache.get(store))
    return found or matching(pool_cache.get(store, fresh=True))


def put_pool(store: CapacityStore, pool_id: str, spec: PoolSpec) -> tuple[Pool, bool]:
    """Create the pool or resize it. Returns (pool, created)."""
    pool, created = _write_pool(store, pool_id, spec)
    pool_cache.forget()
    _reconcile_latest(store, pool)
    return pool, created


@on_conflict(attempts=20)
def _write_pool(store: CapacityStore, pool_id: str, spec: PoolSpec) -> tuple[Pool, bool]:
    now = stamp(clock.utcnow())
    current = read_pool(store, pool_id)
    if current is None:
        pool = Pool(
            id=pool_id,
            kind=spec.kind,
            region=spec.region,
            scope=spec.scope,
            tenant=spec.tenant,
            size=spec.size,
            min=spec.min,
            max=spec.max,
            draining=bool(spec.draining),
            slots_per_shard=spec.slots_per_shard or store.settings.slots_per_shard,
            slots_created=spec.size,
            created_at=now,
            updated_at=now,
        )
        _commit(store, pool, None, old_size=0)
        return pool, True
    pool = _resized(current.pool, spec, now)
    _commit(store, pool, current, old_size=current.pool.size)
    return pool, False


def _reconcile_latest(store: CapacityStore, written: Pool) -> None:
    """Reconcile against the pool as stored now: of two racing resizes, the later reconcile wins."""
    current = read_pool(store, written.id)
    reconcile_slots(store, current.pool if current else written)


def _resized(pool: Pool, spec: PoolSpec, now: str) -> Pool:
    changed = [
        name
        for name, old, new in (
            ("kind", pool.kind, spec.kind),
            ("region", pool.region, spec.region),
            ("scope", pool.scope, spec.scope),
            ("tenant", pool.tenant, spec.tenant),
        )
        if old != new
    ]
    if spec.slots_per_shard not in (None, pool.slots_per_shard):
        changed.append("slots_per_shard")
    if changed:
        raise PoolChangeRefused(f"a pool's {', '.join(changed)} cannot change; create another pool")
    draining = pool.draining if spec.draining is None else spec.draining
    return pool.model_copy(
        update={
            "size": spec.size,
            "min": spec.min,
            "max": spec.max,
            "draining": draining,
            "slots_created": max(pool.slots_created, spec.size),
            "updated_at": now,
        }
    )


def drain_pool(store: CapacityStore, pool_id: str) -> Pool:
    """Stop new grants on the pool; held leases stay valid until released or expired."""
    pool = _mark_draining(store, pool_id)
    pool_cache.forget()
    _reconcile_latest(store, pool)
    return pool


@on_conflict(attempts=20)
def _mark_draining(store: CapacityStore, pool_id: str) -> Pool:
    current = read_pool(store, pool_id)
    if current is None:
        raise PoolNotFound(pool_id)
    pool = current.pool.model_copy(update={"draining": True, "updated_at": stamp(clock.utcnow())})
    if not current.pool.draining:
        _commit(store, pool, current, old_size=current.pool.size)
    return pool


def _commit(store: CapacityStore, pool: Pool, current: StoredPool | None, old_size: int) -> None:
    if current is None:
        operation: tuple[Any, ...] = ("create", _entity(pool))
    else:
        operation = (
            "update",
            _entity(pool),
            {"mode": UpdateMode.REPLACE, "etag": current.etag, "match_condition": MatchConditions.IfNotModified},
        )
    events = []
    if current is None or current.pool.size != pool.size or current.pool.draining != pool.draining:
        events.append(
            NewEvent(
                "PoolResized",
                f"pools/{pool.id}",
                pool.tenant or PLATFORM_TENANT,
                {
                    "pool": pool.id,
                    "kind": pool.kind.value,
                    "region": pool.region,
                    "old_size": old_size,
                    "new_size": pool.size,
                    "draining": pool.draining,
                },
            )
        )
    try:
        commit_and_dispatch(store.pools_outbox, pool_partition(pool.id), [operation], events)
    except AlreadyExists:  # created concurrently: read it again
        raise ConcurrencyConflict(f"pool {pool.id} created concurrently") from None


def reconcile_slots(store: CapacityStore, pool: Pool) -> int:
    """Make slot rows match the pool: open below ``size`` (unless draining), closed above. Returns changes."""
    changes = 0
    for shard in pool.shards():
        rows = {row.index: row for row in read_shard(store, pool.id, shard)}
        first = shard * pool.slots_per_shard
        for index in range(first, min(first + pool.slots_per_shard, pool.slots_created)):
            should_be_open = index < pool.size and not pool.draining
            row = rows.get(index)
            if row is None or row.open != should_be_open:
                ensure_slot(store, pool, index, should_be_open)
                changes += 1
    return changes


def seed_pools(store: CapacityStore) -> None:
    """Create the settings' pools that do not exist; never change one that does."""
    for seed in store.settings.pools:
        if read_pool(store, seed.id) is None:
            spec = PoolSpec(
                kind=seed.kind,
                region=seed.region,
                scope=seed.scope,
                tenant=seed.tenant,
                size=seed.size,
                min=seed.min,
                max=seed.max,
            )
            put_pool(store, seed.id, spec)


def pool_view(store: CapacityStore, pool: Pool, now: datetime, viewer_tenant: str | None = None) -> PoolView:
    """The pool as ``viewer_tenant`` may see it (None: a platform administrator, who sees every tenant)."""
    grace = timedelta(seconds=store.settings.takeover_grace_seconds)
    slots = read_pool_slots(store, pool)
    held = [s for s in slots if s.valid_at(now)]
    window = timedelta(minutes=store.settings.recent_denials_minutes)
    return PoolView(
        id=pool.id,
        kind=pool.kind,
        region=pool.region,
        scope=pool.scope,
        tenant=pool.tenant,
        size=pool.size,
        min=pool.min,
        max=pool.max,
        draining=pool.draining,
        held=len(held),
        free=sum(1 for s in slots if s.takeable_at(now, grace)),
        held_on_closed_slots=sum(1 for s in held if not s.open),
        draining_slots=sum(1 for s in slots if s.draining),
        recent_denials=recent_denials(store, pool.id, now - window, window, viewer_tenant),
        created_at=pool.created_at,
        updated_at=pool.updated_at,
    )
