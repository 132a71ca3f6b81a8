"""Slot rows: one table row per capacity slot, and the row *is* the lease.

Design, and why:

- **The row is the lease.** A slot row names its current holder (lease id,
  tenant, quota token) and when the lease ends (``ExpiresAt``). There is no
  separate "held" counter to keep in step with the leases: a pool's usage is
  read off its slot rows, so it cannot drift when a decrement is lost
  (Kubernetes #63981 is the cautionary tale of counters under ETag).
- **Fencing token = generation.** Every grant bumps the row's
  ``Generation``; it is the fencing token handed to the worker. Two grants of
  one slot never carry the same token, and a later grant always carries a
  larger one, so a resource guarded by the slot can refuse a stale holder.
- **Expiry is on the row.** A slot whose lease passed ``ExpiresAt`` (plus
  a small takeover grace against clock skew) is free to the next acquirer,
  who ends the old lease (``expired`` in the history, ``LeaseExpired``) in
  the same atomic batch that grants the new one. Nothing waits for the
  expiry sweeper: it only tidies slots nobody asked for (Durable extension
  #1325 is what happens when expiry depends on a sweeper).
- **ETag-conditional writes.** Every change replaces the row only if it is
  the version read; a lost race is a 412 and the loser tries another slot.
  Two grants of one slot can therefore never both succeed (Kubernetes #67651).
- **Random choice.** Acquirers visit shards and free slots in random order,
  so concurrent acquirers rarely pick the same row.
- **Shards.** Slots are grouped ``SlotsPerShard`` to a partition
  (``{pool}|{shard}``). A shard's partition also holds the grant history of its
  slots (``grant|{slot}|{generation}``) and its outbox stream, so a grant, its
  history row and its ``LeaseGranted`` event commit in one batch. Reading a
  shard is a single-partition RowKey range query, cheap however long the
  history grows. Each partition sees only its few slots' traffic, orders of
  magnitude below Azure Table Storage's 2,000 entities/s per partition; the
  price of the shard's outbox sequence row is that grants and releases in
  one shard commit one at a time, which is why shards are small.
- **Closing, not deleting.** Drain and shrink set ``Open = false`` under the
  row's ETag: a held lease on a closed slot is kept (and renewable) until it
  is released or expires, and then the slot is simply never granted again.
  Rows are never deleted, so a slot that re-opens after a grow continues its
  generation and fencing tokens stay monotonic.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, TypeVar

from azure.core import MatchConditions
from azure.data.tables import UpdateMode

from shared.capacity.epoch import generation_floor
from shared.capacity.keys import (
    GRANT_PREFIX,
    SLOT_PREFIX,
    after,
    grant_row,
    parse_stamp,
    shard_partition,
    slot_row,
    stamp,
)
from shared.capacity.models import Pool
from shared.capacity.store import (
    CapacityStore,
    LruCache,
    commit_dispatch_etags,
    query,
    submit_batch,
)
from shared.platform.errors import AlreadyExists, ConcurrencyConflict
from shared.platform.events.cloudevents import CloudEvent, NewEvent
from shared.platform.storage.conditional import insert_if_absent, read_row, replace_if_unchanged
from shared.platform.storage.optimistic import on_conflict

T = TypeVar("T")

Operation = tuple[Any, ...]


@dataclass(frozen=True)
class Claim:
    """Who a grant is for: the lease's identity and the quota token that admits it."""

    lease_id: str
    tenant: str
    kind: str
    requested_region: str
    holder: str
    purpose: str
    token_index: int
    ttl_seconds: int


@dataclass(frozen=True)
class SlotRow:
    pool: str
    index: int
    shard: int
    open: bool
    generation: int
    lease_id: str
    tenant: str
    token_index: int
    granted_at: str
    expires_at: str
    etag: str
    # Chosen by a scale-down (shared.autoscaling): no new grants; a held lease lives on until it ends.
    draining: bool = False

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> SlotRow:
        return cls(
            pool=row["Pool"],
            index=int(row["Slot"]),
            shard=int(row["Shard"]),
            open=bool(row["Open"]),
            generation=int(row["Generation"]),
            lease_id=row.get("LeaseId", ""),
            tenant=row.get("Tenant", ""),
            token_index=int(row.get("TokenIndex", -1)),
            granted_at=row.get("GrantedAt", ""),
            expires_at=row.get("ExpiresAt", ""),
            etag=row["etag"],
            draining=bool(row.get("Draining", False)),
        )

    @property
    def partition(self) -> str:
        return shard_partition(self.pool, self.shard)

    def holds(self, lease_id: str, tenant: str) -> bool:
        return self.lease_id == lease_id and self.tenant == tenant

    def valid_at(self, now: datetime) -> bool:
        """Is a lease held here and not yet expired?"""
        return bool(self.lease_id) and parse_stamp(self.expires_at) > now

    def takeable_at(self, now: datetime, grace: timedelta) -> bool:
        """May a new grant take this slot: open, not draining, and free or expired for longer than ``grace``?"""
        return self.open and not self.draining and (not self.lease_id or parse_stamp(self.expires_at) + grace < now)

    def entity(self, **changes: Any) -> dict[str, Any]:
        row = replace(self, **changes) if changes else self
        return {
            "PartitionKey": row.partition,
            "RowKey": slot_row(row.index),
            "Pool": row.pool,
            "Slot": row.index,
            "Shard": row.shard,
            "Open": row.open,
            "Generation": row.generation,
            "LeaseId": row.lease_id,
            "Tenant": row.tenant,
            "TokenIndex": row.token_index,
            "GrantedAt": row.granted_at,
            "ExpiresAt": row.expires_at,
            "Draining": row.draining,
        }

    def free_entity(self) -> dict[str, Any]:
        return self.entity(lease_id="", tenant="", token_index=-1, granted_at="", expires_at="")


def _conditional(etag: str) -> dict[str, Any]:
    return {"mode": UpdateMode.REPLACE, "etag": etag, "match_condition": MatchConditions.IfNotModified}


def _merge(partition: str, row_key: str, **fields: Any) -> Operation:
    return ("upsert", {"PartitionKey": partition, "RowKey": row_key, **fields}, {"mode": UpdateMode.MERGE})


def read_shard(store: CapacityStore, pool_id: str, shard: int) -> list[SlotRow]:
    rows = query(
        store.slots,
        "PartitionKey eq @pk and RowKey ge @low and RowKey lt @high",
        pk=shard_partition(pool_id, shard),
        low=SLOT_PREFIX,
        high=after(SLOT_PREFIX),
    )
    read = [SlotRow.from_row(row) for row in rows]
    for slot in read:
        _known.put((slot.pool, slot.shard, slot.index), slot)
    return read


def read_pool_slots(store: CapacityStore, pool: Pool) -> list[SlotRow]:
    return [row for shard in pool.shards() for row in read_shard(store, pool.id, shard)]


# Slot rows as this process last read, granted or renewed them, with their ETags, so that renew and
# release can write without reading first. Decisions against a lease (lost, expired) are
# never taken on a remembered row, only on a fresh read; writes stay ETag-conditional.
_known: LruCache[tuple[str, int, int], SlotRow] = LruCache(50_000)


def read_slot(store: CapacityStore, pool_id: str, shard: int, index: int) -> SlotRow | None:
    row = read_row(store.slots, shard_partition(pool_id, shard), slot_row(index))
    slot = SlotRow.from_row(row) if row else None
    if slot is not None:
        _known.put((pool_id, shard, index), slot)
    return slot


def known_slot(pool_id: str, shard: int, index: int) -> SlotRow | None:
    return _known.get((pool_id, shard, index))


def remembered_shard(pool_id: str, shard: int, indices: Iterable[int]) -> list[SlotRow] | None:
    """The shard's slot rows ``indices`` as this process last read or wrote them; None if any is unknown.

    Only for choosing which row to try: a grant on a remembered row is still conditional on its
    ETag, and a refusal ("the pool is full") is decided on a fresh read.
    """
    rows = [_known.get((pool_id, shard, index)) for index in indices]
    return [row for row in rows if row is not None] if all(rows) else None


@on_conflict(attempts=50)
def ensure_slot(store: CapacityStore, pool: Pool, index: int, should_be_open: bool) -> None:
    """Create the slot row, or set its ``Open`` flag; held leases are left alone."""
    current = read_slot(store, pool.id, pool.shard_of(index), index)
    if current is None:
        fresh = SlotRow(
            pool=pool.id,
            index=index,
            shard=pool.shard_of(index),
            open=should_be_open,
            generation=generation_floor(store.pools),  # 0, or past every token of before a restore
            lease_id="",
            tenant="",
            token_index=-1,
            granted_at="",
            expires_at="",
            etag="",
        )
        try:
            insert_if_absent(store.slots, fresh.entity())
        except AlreadyExists:
            raise ConcurrencyConflict(f"slot {pool.id}/{index} created concurrently") from None
        return
    if current.open != should_be_open:  # a grant or renew that moved the row on is a conflict: read again
        replace_if_unchanged(store.slots, current.entity(open=should_be_open), current.etag)


def grant(
    store: CapacityStore, pool: Pool, row: SlotRow, claim: Claim, now: datetime, expires_at: datetime
) -> tuple[SlotRow, list[CloudEvent]]:
    """Give ``row`` to ``claim``; a lost race raises ConcurrencyConflict (or AlreadyExists)."""
    generation = row.generation + 1
    granted = replace(
        row,
        generation=generation,
        lease_id=claim.lease_id,
        tenant=claim.tenant,
        token_index=claim.token_index,
        granted_at=stamp(now),
        expires_at=stamp(expires_at),
    )
    history = {
        "PartitionKey": row.partition,
        "RowKey": grant_row(row.index, generation),
        "Pool": pool.id,
        "Slot": row.index,
        "FencingToken": generation,
        "LeaseId": claim.lease_id,
        "Tenant": claim.tenant,
        "Kind": pool.kind.value,
        "Region": pool.region,
        "Holder": claim.holder,
        "Purpose": claim.purpose,
        "TokenIndex": claim.token_index,
        "GrantedAt": granted.granted_at,
        "ExpiresAt": granted.expires_at,
        "EndedAt": "",
        "Outcome": "held",
    }
    operations: list[Operation] = [("update", granted.entity(), _conditional(row.etag)), ("create", history)]
    events: list[NewEvent] = []
    if row.lease_id:  # taking over an expired lease: end it in the same batch
        operations.append(
            _merge(row.partition, grant_row(row.index, row.generation), Outcome="expired", EndedAt=row.expires_at)
        )
        events.append(_event("LeaseExpired", row, row.lease_id, row.tenant, expired_at=row.expires_at))
    events.append(
        _event(
            "LeaseGranted",
            granted,
            claim.lease_id,
            claim.tenant,
            holder=claim.holder,
            purpose=claim.purpose,
            kind=pool.kind.value,
            region=pool.region,
            granted_at=granted.granted_at,
            expires_at=granted.expires_at,
        )
    )
    key = (row.pool, row.shard, row.index)
    _known.forget(key)
    sent, results = commit_dispatch_etags(store.slots_outbox, row.partition, operations, events)
    # The row as this grant left it, with the ETag the batch answered: release and renew write
    # it without reading it first (still conditional on that ETag).
    granted = replace(granted, etag=str(results[0]["etag"]))
    _known.put(key, granted)
    return granted, sent


def renew(store: CapacityStore, row: SlotRow, expires_at: datetime) -> SlotRow:
    """Move the held lease's expiry; the history row follows in the same batch. No event."""
    until = stamp(expires_at)
    key = (row.pool, row.shard, row.index)
    try:
        results = submit_batch(
            store.slots,
            [
                ("update", row.entity(expires_at=until), _conditional(row.etag)),
                _merge(row.partition, grant_row(row.index, row.generation), ExpiresAt=until),
            ],
        )
    except Exception:
        _known.forget(key)
        raise
    renewed = replace(row, expires_at=until, etag=results[0]["etag"])
    _known.put(key, renewed)
    return renewed


def end(store: CapacityStore, row: SlotRow, now: datetime, reason: str = "") -> list[CloudEvent]:
    """Free the slot. A lease already past its expiry ends as expired (at its expiry), else released."""
    expired = parse_stamp(row.expires_at) <= now
    outcome = "expired" if expired else "released"
    ended_at = row.expires_at if expired else stamp(now)
    operations: list[Operation] = [
        ("update", row.free_entity(), _conditional(row.etag)),
        _merge(row.partition, grant_row(row.index, row.generation), Outcome=outcome, EndedAt=ended_at, Reason=reason),
    ]
    extra = {"expired_at": ended_at} if expired else {"released_at": ended_at}
    if reason:
        extra["reason"] = reason
    event = _event("LeaseExpired" if expired else "LeaseReleased", row, row.lease_id, row.tenant, **extra)
    key = (row.pool, row.shard, row.index)
    _known.forget(key)
    sent, results = commit_dispatch_etags(store.slots_outbox, row.partition, operations, [event])
    # The freed row with the ETag the batch answered: the next grant of it need not read it first.
    freed = replace(row, lease_id="", tenant="", token_index=-1, granted_at="", expires_at="")
    _known.put(key, replace(freed, etag=str(results[0]["etag"])))
    return sent


def shuffled(items: Iterable[T]) -> list[T]:
    chosen = list(items)
    random.shuffle(chosen)
    return chosen


def _event(event_type: str, row: SlotRow, lease_id: str, tenant: str, **data: Any) -> NewEvent:
    return NewEvent(
        event_type,
        f"leases/{lease_id}",
        tenant,
        {"lease_id": lease_id, "pool": row.pool, "slot": row.index, "fencing_token": row.generation, **data},
    )


def grant_history(store: CapacityStore, pool: Pool) -> list[dict[str, Any]]:
    """Every grant record of the pool's slots (for audits and the storm test's checks)."""
    rows: list[dict[str, Any]] = []
    for shard in pool.shards():
        rows.extend(
            query(
                store.slots,
                "PartitionKey eq @pk and RowKey ge @low and RowKey lt @high",
                pk=shard_partition(pool.id, shard),
                low=GRANT_PREFIX,
                high=after(GRANT_PREFIX),
            )
        )
    return rows
