"""A lease record brought in line with its slot row: what GET and the list both answer.

The record is an index; the slot row (and its grant history row, written in
the same batch) is the truth. Normally whoever ends a lease on its slot
updates the record right after, but a host that dies in between leaves a
record saying ``active`` (with an expiry still ahead) for a lease its slot no
longer holds. Reading such a record answers what the grant history says
(``released`` at ..., ``expired`` at ...) and writes that back, best effort,
so the next read need not look again. Only records that still claim to be
active and unexpired are checked: at most the leases a tenant's quota allows,
plus what crashes left behind.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from shared.capacity import records, slots
from shared.capacity.keys import grant_row, shard_partition
from shared.capacity.models import LeaseState
from shared.capacity.store import CapacityStore
from shared.platform.errors import StoreError
from shared.platform.logs import app_logger, ids
from shared.platform.storage.conditional import read_row

log = app_logger("capacity")


def settled(store: CapacityStore, record: dict[str, Any], now: datetime) -> dict[str, Any]:
    """The record as the slot says; an ended lease's record is repaired (best effort)."""
    if records.state_of(record, now) is not LeaseState.ACTIVE:
        return record
    row = slots.read_slot(store, record["Pool"], int(record["Shard"]), int(record["Slot"]))
    if (
        row is not None
        and row.holds(record["LeaseId"], record["Tenant"])
        and row.generation == int(record["FencingToken"])
    ):
        return {**record, "ExpiresAt": row.expires_at}  # a renew may not have reached the record yet
    state, ended_at = _outcome(store, record)
    try:
        records.update_record(store, record["Tenant"], record["LeaseId"], State=state.value, EndedAt=ended_at)
    except StoreError as error:
        log.warning(
            "lease %s: record not repaired: %s",
            record["LeaseId"],
            error,
            extra=ids(tenant=record["Tenant"], lease=record["LeaseId"]),
        )
    return {**record, "State": state.value, "EndedAt": ended_at}


def _outcome(store: CapacityStore, record: dict[str, Any]) -> tuple[LeaseState, str]:
    """How the lease ended, from its grant history row (ended in the same batch as its slot)."""
    history = read_row(
        store.slots,
        shard_partition(record["Pool"], int(record["Shard"])),
        grant_row(int(record["Slot"]), int(record["FencingToken"])),
    )
    if history is not None and history.get("Outcome") == LeaseState.RELEASED.value and history.get("EndedAt"):
        return LeaseState.RELEASED, history["EndedAt"]
    # A slot is taken over only after its lease expired: not held any more, and not released, is expired
    # (at the expiry the history holds, which a renew may have moved past the record's).
    history = history or {}
    return LeaseState.EXPIRED, history.get("EndedAt") or history.get("ExpiresAt") or record["ExpiresAt"]
