"""Lease records: the tenant's index of its leases and the idempotency record of acquire.

One row per lease id in ``CapacityLeases`` (partition ``{tenant}|{n}``, ``n``
a hash shard of the id so one busy tenant spreads over several partitions).
The record is written after the slot grant and answers "which slot is lease
X, and what did its acquire ask for": a retried acquire with the same id
finds it and gets the same lease; renew and release find the slot through it;
another tenant's lookup misses it (its partition starts with the caller's
tenant), hence 404.

The record is an index, not the truth: whether a lease is valid is decided
on its slot row. ``State`` follows the lease (``active`` until released or
expired) and a record still ``active`` after its ``ExpiresAt`` reads as
expired even before the sweeper has marked it. Records are purged
``LeaseRetentionDays`` after the lease ended.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from azure.core.exceptions import (
    ResourceNotFoundError,
    ServiceRequestError,
    ServiceResponseError,
)

from shared.capacity.keys import lease_partition, parse_stamp, stamp, tenant_lease_partitions
from shared.capacity.models import LeaseState, LeaseView
from shared.capacity.store import CapacityStore, LruCache, query
from shared.platform import clock
from shared.platform.errors import StoreUnavailable
from shared.platform.storage.conditional import insert_if_absent, read_row
from shared.platform.storage.paging import read_page, scope_of
from shared.platform.storage.rows import merge_row

# Recently seen records, so renew and release find a lease's slot without a read. Only what
# never changes after the grant is trusted from here (tenant, pool, slot, fencing token, holder...);
# whether the lease is still held is always decided on its slot row.
_cache: LruCache[tuple[str, str], dict[str, Any]] = LruCache(50_000)


def _remember(record: dict[str, Any]) -> None:
    _cache.put((record["Tenant"], record["LeaseId"]), {k: v for k, v in record.items() if k != "etag"})


def read_record(store: CapacityStore, tenant: str, lease_id: str) -> dict[str, Any] | None:
    record = read_row(store.leases, lease_partition(tenant, lease_id), lease_id)
    if record is not None:
        _remember(record)
    return record


def cached_record(tenant: str, lease_id: str) -> dict[str, Any] | None:
    """The record if this process has seen it (no read): a lease id it knows is taken."""
    return _cache.get((tenant, lease_id))


def known_record(store: CapacityStore, tenant: str, lease_id: str) -> dict[str, Any] | None:
    """The record's immutable facts, from the cache if this process has seen it (``State`` may be stale)."""
    return _cache.get((tenant, lease_id)) or read_record(store, tenant, lease_id)


def insert_record(store: CapacityStore, record: dict[str, Any]) -> None:
    """AlreadyExists if a concurrent acquire with the same id recorded its lease first."""
    insert_if_absent(store.leases, record)
    _remember(record)


def new_record(
    *,
    tenant: str,
    lease_id: str,
    pool: str,
    kind: str,
    region: str,
    requested_region: str,
    slot: int,
    shard: int,
    token_index: int,
    fencing_token: int,
    holder: str,
    purpose: str,
    ttl_seconds: int,
    granted_at: str,
    expires_at: str,
) -> dict[str, Any]:
    return {
        "PartitionKey": lease_partition(tenant, lease_id),
        "RowKey": lease_id,
        "LeaseId": lease_id,
        "Tenant": tenant,
        "Pool": pool,
        "Kind": kind,
        "Region": region,
        "RequestedRegion": requested_region,
        "Slot": slot,
        "Shard": shard,
        "TokenIndex": token_index,
        "FencingToken": fencing_token,
        "Holder": holder,
        "Purpose": purpose,
        "TtlSeconds": ttl_seconds,
        "GrantedAt": granted_at,
        "ExpiresAt": expires_at,
        "State": LeaseState.ACTIVE.value,
        "EndedAt": "",
    }


def update_record(store: CapacityStore, tenant: str, lease_id: str, **changes: Any) -> None:
    """Merge ``changes`` into the record (a missing record is left missing).

    Unconditional on purpose: only the party that ended the lease on its slot
    row (release, sweep or takeover; each conditional on the slot's ETag, so
    exactly one of them) writes the final state, and renew only moves
    ``ExpiresAt``, which a finished record ignores.
    """
    entity = {"PartitionKey": lease_partition(tenant, lease_id), "RowKey": lease_id, **changes}
    try:
        merge_row(store.leases, entity)  # update_entity(entity, mode=MERGE)'s request, without its generated layer
    except ResourceNotFoundError:
        return
    except (ServiceRequestError, ServiceResponseError) as error:
        raise StoreUnavailable(str(error)) from error


def state_of(record: dict[str, Any], now: datetime) -> LeaseState:
    state = LeaseState(record["State"])
    if state is LeaseState.ACTIVE and parse_stamp(record["ExpiresAt"]) <= now:
        return LeaseState.EXPIRED
    return state


def view(record: dict[str, Any], now: datetime) -> LeaseView:
    state = state_of(record, now)
    ended_at = record.get("EndedAt") or (record["ExpiresAt"] if state is LeaseState.EXPIRED else None)
    return LeaseView(
        lease_id=record["LeaseId"],
        tenant=record["Tenant"],
        pool=record["Pool"],
        kind=record["Kind"],
        region=record["Region"],
        slot=int(record["Slot"]),
        fencing_token=int(record["FencingToken"]),
        holder=record["Holder"],
        purpose=record["Purpose"],
        state=state,
        ttl_seconds=int(record["TtlSeconds"]),
        granted_at=record["GrantedAt"],
        expires_at=record["ExpiresAt"],
        ended_at=ended_at or None,
    )


@dataclass(frozen=True)
class LeasePage:
    leases: list[LeaseView]
    continuation: str | None


def list_records(
    store: CapacityStore,
    tenant: str,
    now: datetime,
    *,
    pool: str | None = None,
    holder: str | None = None,
    state: LeaseState | None = None,
    limit: int = 100,
    continuation: str | None = None,
    settle: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> LeasePage:
    """The tenant's leases, filtered; ``continuation`` pages through more than ``limit``.

    ``settle`` brings a record in line with its slot before it is shown and filtered by state.
    """
    settle = settle or (lambda record: record)
    low, high = tenant_lease_partitions(tenant)
    clauses = ["PartitionKey ge @low", "PartitionKey lt @high"]
    parameters: dict[str, Any] = {"low": low, "high": high}
    if pool:
        clauses.append("Pool eq @pool")
        parameters["pool"] = pool
    if holder:
        clauses.append("Holder eq @holder")
        parameters["holder"] = holder
    if state is LeaseState.RELEASED:  # a record a crashed release left "active" may be released too
        clauses.append("State ne 'expired'")
    elif state is not None:  # active and expired records may both still say "active"
        clauses.append("State ne 'released'")
    page = read_page(
        store.leases,
        " and ".join(clauses),
        parameters,
        scope=scope_of("leases", tenant, pool, holder, state.value if state else None),
        seal=store.seal,
        limit=limit,
        continuation=continuation,
    )
    shown = (view(settle(dict(row)), now) for row in page.rows)
    return LeasePage([v for v in shown if state is None or v.state is state], page.continuation)


def purge_records(store: CapacityStore, older_than: timedelta) -> int:
    """Delete records of leases that ended (or expired) before the retention cutoff."""
    cutoff = stamp(clock.utcnow() - older_than)
    purged = 0
    for row in query(store.leases, "ExpiresAt lt @cutoff", cutoff=cutoff):
        ended = row.get("EndedAt") or row["ExpiresAt"]
        if ended < cutoff:
            store.leases.delete_entity(row["PartitionKey"], row["RowKey"])
            purged += 1
    return purged
